//! One joint-training run recorded at every iteration (spec 003 §4.3): the quantities that
//! Lemma 10, Lemma 11, Lemma 12, Lemma 13, Theorem 2 and Theorem 4 are checked on, and those
//! Fig. 3 plots.

use crate::analysis::svm::one_minus_cos;
use crate::attention::logdomain::log_sum_exp;
use crate::attention::TokenData;
use crate::flow::norm;
use crate::models::token_select::{JointModel, JointRule, JointStepper};
use crate::scenario::RunError;
use crate::stats;

/// One optimizer run's per-iteration record (k = 0..=K).
pub struct JointRun {
    pub label: String,
    /// α of an Eq. (10) run (None for GD and PS).
    pub alpha: Option<f64>,
    pub log_loss: Vec<f64>,
    pub norm_u: Vec<f64>,
    pub norm_w: Vec<f64>,
    pub mean_phi: Vec<f64>,
    pub min_phi: Vec<f64>,
    /// min_i (γ_{i,opt} − max_{τ≠opt} γ_{i,τ})(u_k), opt from the DM construction.
    pub min_gap: Vec<f64>,
    /// ln C_k = max_i m_i − min_j m_j (exponential loss: ℓ_i/ℓ_j = e^{m_j − m_i}).
    pub log_loss_ratio: Vec<f64>,
    pub mis_w: Vec<f64>,
    pub mis_u: Vec<f64>,
    /// ‖u_mm‖·min_i γ_{i,opt}(u_k)/‖u_k‖ (NaN at u = 0).
    pub margin_ratio: Vec<f64>,
    /// Steps k → k+1 at which some φ_{i,opt} fell, or some score gap shrank (k ≥ 1).
    pub phi_decreases: usize,
    pub gap_decreases: usize,
    /// Largest ‖u_k‖/(‖u₀‖ + ηk) and ‖W_k‖/(‖W₀‖ + ηΣ_{s<k}(s+1)^{−α}) over k ≥ 1 (Eq. (10)
    /// runs).
    pub u_bound_ratio: f64,
    pub w_bound_ratio: f64,
    /// Per W-step s = 0..K−1: its length ‖W_{s+1} − W_s‖ and ε_s := max(0, ⟨ΔŴ_s, Ŵ_s − W̄_mm⟩)
    /// (unit step direction; 0 for a skipped step or at W_s = 0), the Lemma 7 slack of the
    /// certified skeleton (spec §4.2).
    pub w_step_len: Vec<f64>,
    pub w_step_eps: Vec<f64>,
    /// Polyak runs: ln(L/‖∇L‖²), the uncapped step, at every k (empty for other rules).
    pub ln_free_polyak: Vec<f64>,
    /// Lemma 12: iterates with min_i φ_{i,opt} ≥ ½, and the smallest u_mm-margin
    /// min_i y_i u_mmᵀX_iᵀφ_i over them (+∞ when there are none).
    pub lemma12_iterates: usize,
    pub lemma12_min_margin: f64,
    /// Lemma 13(1) at every iterate with a positive u_mm-margin µ_k: the smallest
    /// (‖∇_uL‖/L)/(µ_k/‖u_mm‖) (≥ 1, the dual-norm argument with direction ū_mm; +∞ if none).
    pub lemma13_pl_ratio: f64,
    /// Lemma 13(2): the largest ln(L(θ′)/L(θ_k)) over θ′ on the segment [θ_k, θ_{k+1}]
    /// (`SEGMENT_POINTS` points per step).
    pub lemma13_segment_ln_ratio: f64,
}

/// Points θ_k + (j/SEGMENT_POINTS)(θ_{k+1} − θ_k), j = 1..=SEGMENT_POINTS, at which Lemma 13(2)'s
/// loss ratio is evaluated (spec 003 §4.3 recipe: 16).
const SEGMENT_POINTS: usize = 16;

/// What every run is measured against.
pub struct Reference<'a> {
    pub model: &'a JointModel,
    pub opt: &'a [usize],
    pub w_mm: &'a [f64],
    pub u_mm: &'a [f64],
}

/// Runs `rule` for `iterations` steps from `z0` = (u₀, vec W₀), recording every iterate.
pub fn run_one(
    rf: &Reference,
    rule: JointRule,
    label: String,
    iterations: usize,
    z0: &[f64],
) -> Result<JointRun, RunError> {
    let model = rf.model;
    let data = model.data();
    let (n, t, d) = (data.n, data.t, data.d);
    let mut stepper =
        JointStepper::new(model, rule).map_err(|e| RunError::Other(format!("{label}: {e}")))?;
    // (η, α) of an Eq. (10) run, for Lemma 10's bounds
    let eq10 = match rule {
        JointRule::Ngd { eta, alpha, .. } => Some((eta, alpha)),
        _ => None,
    };
    let cap = iterations + 1;
    let mut r = JointRun {
        label,
        alpha: eq10.map(|(_, a)| a),
        log_loss: Vec::with_capacity(cap),
        norm_u: Vec::with_capacity(cap),
        norm_w: Vec::with_capacity(cap),
        mean_phi: Vec::with_capacity(cap),
        min_phi: Vec::with_capacity(cap),
        min_gap: Vec::with_capacity(cap),
        log_loss_ratio: Vec::with_capacity(cap),
        mis_w: Vec::with_capacity(cap),
        mis_u: Vec::with_capacity(cap),
        margin_ratio: Vec::with_capacity(cap),
        phi_decreases: 0,
        gap_decreases: 0,
        u_bound_ratio: 0.0,
        w_bound_ratio: 0.0,
        w_step_len: Vec::with_capacity(iterations),
        w_step_eps: Vec::with_capacity(iterations),
        ln_free_polyak: Vec::new(),
        lemma12_iterates: 0,
        lemma12_min_margin: f64::INFINITY,
        lemma13_pl_ratio: f64::INFINITY,
        lemma13_segment_ln_ratio: f64::NEG_INFINITY,
    };
    let polyak = matches!(rule, JointRule::Polyak { .. });
    let (mut dir_u, mut dir_w) = (vec![0.0; d], vec![0.0; d * d]);
    let w_mm_unit: Vec<f64> = {
        let nm = norm(rf.w_mm);
        rf.w_mm.iter().map(|x| x / nm).collect()
    };
    let u_mm_norm = norm(rf.u_mm);
    let mut z = z0.to_vec();
    // Lemma 10's bounds from a start: ‖u_k‖ ≤ ‖u₀‖ + ηk, ‖W_k‖ ≤ ‖W₀‖ + ηΣ_{s<k}(s+1)^{−α}
    let (u0_norm, w0_norm) = {
        let (u0, w0) = z0.split_at(d);
        (norm(u0), norm(w0))
    };
    let mut prev_l1m: Option<Vec<f64>> = None;
    let mut prev_gaps: Option<Vec<f64>> = None;
    let mut w_bound = 0.0;
    let mut logits = vec![0.0; t];
    for k in 0..=iterations {
        let (u, w) = z.split_at(d);
        let att = model.attention(&z);
        let gamma = data.scores(u);
        let gaps: Vec<f64> = (0..n)
            .map(|i| {
                let row = &gamma[i * t..(i + 1) * t];
                let o = rf.opt[i];
                let best_other = stats::max((0..t).filter(|&tau| tau != o).map(|tau| row[tau]));
                row[o] - best_other
            })
            .collect();
        // attention on the constructed optimal token, whatever u_k prefers
        let l1m: Vec<f64> = (0..n)
            .map(|i| log_one_minus_phi(data, w, i, rf.opt[i], &mut logits))
            .collect();
        let phi: Vec<f64> = l1m.iter().map(|&x| -x.exp_m1()).collect();
        if let Some(prev) = &prev_l1m {
            if l1m
                .iter()
                .zip(prev)
                .any(|(&a, &b)| a > b + 1e-12 * b.abs().max(1.0))
            {
                r.phi_decreases += 1;
            }
        }
        if let Some(prev) = &prev_gaps {
            if gaps.iter().zip(prev).any(|(&a, &b)| a < b) {
                r.gap_decreases += 1;
            }
        }
        let (nu, nw) = (norm(u), norm(w));
        if let Some((eta, alpha)) = eq10 {
            if k >= 1 {
                r.u_bound_ratio = stats::larger(r.u_bound_ratio, nu / (u0_norm + eta * k as f64));
                r.w_bound_ratio = stats::larger(r.w_bound_ratio, nw / (w0_norm + w_bound));
            }
            // w_bound = ηΣ_{s<k+1}(s+1)^{−α} from here on
            w_bound += eta * ((k + 1) as f64).powf(-alpha);
        }
        let (m_min, m_max) = stats::range(&att.margins);
        let min_opt_score = stats::min((0..n).map(|i| gamma[i * t + rf.opt[i]]));
        r.norm_u.push(nu);
        r.norm_w.push(nw);
        r.mean_phi.push(phi.iter().sum::<f64>() / n as f64);
        r.min_phi.push(stats::min(phi.iter()));
        r.min_gap.push(stats::min(gaps.iter()));
        r.log_loss_ratio.push(m_max - m_min);
        r.mis_w.push(one_minus_cos(w, rf.w_mm));
        r.mis_u.push(one_minus_cos(u, rf.u_mm));
        r.margin_ratio.push(u_mm_norm * min_opt_score / nu);
        r.log_loss
            .push(log_sum_exp(att.margins.iter().map(|m| -m)) - (n as f64).ln());
        if k >= 1 {
            prev_gaps = Some(gaps);
        }
        prev_l1m = Some(l1m);
        // Lemma 12: the u_mm-margin of the attended features X_iᵀφ_i (φ from W_k); Lemmas
        // 12–13 are checked on the Eq. (10) runs only
        let lemmas = eq10.is_some();
        let mu_mm = match lemmas {
            false => f64::NAN,
            true => stats::min((0..n).map(|i| {
                let phi = softmax(data, w, i, &mut logits);
                let feature: f64 = (0..t)
                    .map(|tau| {
                        let x = data.token(i, tau);
                        phi[tau] * x.iter().zip(rf.u_mm).map(|(a, b)| a * b).sum::<f64>()
                    })
                    .sum();
                data.y[i] * feature
            })),
        };
        if lemmas && stats::min(phi.iter()) >= 0.5 {
            r.lemma12_iterates += 1;
            r.lemma12_min_margin = stats::smaller(r.lemma12_min_margin, mu_mm);
        }
        let lg = (lemmas || polyak).then(|| model.block_gradients(&z, &mut dir_u, &mut dir_w));
        // Lemma 13(1), exponential loss (−ℓ′ = ℓ): ‖∇_uL‖ ≥ ⟨−∇_uL, ū_mm⟩
        // = (1/n)Σ_i ℓ_i y_i ū_mmᵀX_iᵀφ_i ≥ L·µ_k/‖u_mm‖
        if let (true, Some(lg)) = (mu_mm > 0.0, lg) {
            let ratio = (lg.log_norm_u - lg.log_loss).exp() * u_mm_norm / mu_mm;
            r.lemma13_pl_ratio = stats::smaller(r.lemma13_pl_ratio, ratio);
        }
        if let (true, Some(lg)) = (polyak, lg) {
            let ln_grad = 0.5 * log_sum_exp([2.0 * lg.log_norm_u, 2.0 * lg.log_norm_w].into_iter());
            r.ln_free_polyak.push(lg.log_loss - 2.0 * ln_grad);
        }
        if k < iterations {
            let w_prev = z[d..].to_vec();
            let z_prev = z.clone();
            stepper.step(&mut z);
            // Lemma 13(2): the loss along the segment [θ_k, θ_{k+1}] relative to L(θ_k)
            let mut between = z_prev.clone();
            for j in (1..=SEGMENT_POINTS).filter(|_| lemmas) {
                let s = j as f64 / SEGMENT_POINTS as f64;
                for (b, (a, c)) in between.iter_mut().zip(z_prev.iter().zip(&z)) {
                    *b = a + s * (c - a);
                }
                r.lemma13_segment_ln_ratio = stats::larger(
                    r.lemma13_segment_ln_ratio,
                    model.log_loss(&between) - r.log_loss[k],
                );
            }
            let step: Vec<f64> = z[d..].iter().zip(&w_prev).map(|(a, b)| a - b).collect();
            let (len, wn) = (norm(&step), norm(&w_prev));
            let eps = match len > 0.0 && wn > 0.0 {
                true => stats::larger(
                    0.0,
                    (0..step.len())
                        .map(|j| step[j] / len * (w_prev[j] / wn - w_mm_unit[j]))
                        .sum(),
                ),
                false => 0.0,
            };
            r.w_step_len.push(len);
            r.w_step_eps.push(eps);
        }
    }
    Ok(r)
}

/// The attention φ_i = softmax(X_i W q_i) of sequence i (`logits` is scratch of length T).
fn softmax(data: &TokenData, w: &[f64], i: usize, logits: &mut [f64]) -> Vec<f64> {
    fill_logits(data, w, i, logits);
    let all = log_sum_exp(logits.iter().copied());
    logits.iter().map(|l| (l - all).exp()).collect()
}

/// s_i = X_i W q_i with W column-major.
fn fill_logits(data: &TokenData, w: &[f64], i: usize, logits: &mut [f64]) {
    let d = data.d;
    let q = data.query(i);
    for (t, l) in logits.iter_mut().enumerate() {
        let x = data.token(i, t);
        *l = (0..d)
            .map(|c| {
                q[c] * w[c * d..(c + 1) * d]
                    .iter()
                    .zip(x)
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            })
            .sum();
    }
}

/// ln(1 − φ_{i,o}(W)) = LSE_{t≠o} s_{i,t} − LSE_t s_{i,t} with s_i = X_i W q_i: exact however
/// saturated the attention is (`logits` is scratch of length T).
fn log_one_minus_phi(data: &TokenData, w: &[f64], i: usize, o: usize, logits: &mut [f64]) -> f64 {
    fill_logits(data, w, i, logits);
    let all = log_sum_exp(logits.iter().copied());
    let others = log_sum_exp(
        logits
            .iter()
            .enumerate()
            .filter(|&(t, _)| t != o)
            .map(|(_, &l)| l),
    );
    others - all
}

//! `full-nuclear-vs-frobenius` (Theorem 1.1 beyond its proven cases, Sec. 4.2, experiment E2;
//! spec 001 §5.1 toy-3, §7): from the same data and the same initial W(0) = K(0)Q(0)ᵀ, gradient
//! flow on the separately trained factors (K, Q) converges in direction to the nuclear-norm
//! SVM solution W_* (rank one on toy-3), while gradient flow on the combined W converges to the
//! Frobenius SVM solution W_F (rank two). Both flows run in τ = ln(1 + t) with BDF and the
//! exact Hessian-vector product as Jacobian action.

use serde::{Deserialize, Serialize};

use crate::analysis::svm::NuclearSettings;
use crate::flow::{integrate, Events, Method, OdeConfig, Trajectory};
use crate::models::kq::full::min_margin;
use crate::models::kq::full::FullKq;
use crate::models::kq::log_time::{LogTimeDescent, ScaledGradient};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::Positive;
use crate::scenario::registry::Kind;
use crate::scenario::{Report, RunContext, RunError, Table};
use crate::stats;

use super::common::instance_svms;
use super::full_common::{
    balance_drift, frobenius_distance, full_flow_cost, run_log_time, tau_grid, tau_grid_len,
    DirectionSample, FlowRunParams,
};

/// The seeded flow parameters shared with the other full-model scenario.
pub type Params = FlowRunParams;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// KQ: max over seeds of ‖Ŵ − W_*‖_F at τ_max (spec §7: 1e-4 at τ = 1e6).
    pub kq_direction_tol: Positive,
    /// KQ: σ₂(Ŵ)/σ₁(Ŵ) at τ_max (spec §7: 1e-4).
    pub kq_rank_ratio_tol: Positive,
    /// KQ: ‖Ŵ‖_*/OPT_* − 1 at τ_max (objective gap, spec §4 Thm 1.1 recipe).
    pub kq_nuclear_gap_tol: Positive,
    /// W: max over seeds of ‖Ŵ − W_F‖_F at τ_max (spec §7: 1e-5 at τ = 1e6).
    pub w_direction_tol: Positive,
    /// Each limit stays away from the other SVM: min(‖Ŵ_KQ − W_F‖, ‖Ŵ_W − W_*‖) ≥ this
    /// (toy-3: ‖W_F − W_*‖_F = 0.4216).
    pub separation_min: Positive,
    /// ‖C(τ) − C(0)‖_F / max(1, ‖K‖_F² + ‖Q‖_F²) over the run (spec §2.5: 1e-8).
    pub balance_drift_tol: Positive,
    /// Relative deviation of the normalized excess loss from its limit at τ_max, max over seeds:
    /// KQ t ln t·(L − L*) → OPT_*/2, W t·(L − L*) → ‖W_F‖_F² (spec §2.7). Under A2,
    /// L − L* = (1/n) Σ_i e^{−γ_i,opt}(e^{Δ_i(1 − σ_i,opt)} − 1), so this is the rate at which
    /// every σ_i,opt → 1 (Theorem 1.1).
    pub loss_rate_tol: Positive,
    /// Decay exponents of the direction errors over the last two decades of τ: W against −1
    /// (O(1/µ), spec §2.7) and KQ against −κ, κ the nuclear certificate's complementarity margin
    /// (spec §2.8: the margin predicts the KQ exponent) — max deviation over seeds.
    pub exponent_tol: Positive,
}

/// One model's samples along one run.
struct Run {
    samples: Vec<DirectionSample>,
    /// First τ after which µ > 0 for good (see [`separation_time`]).
    separation: f64,
}

impl Run {
    fn last(&self) -> &DirectionSample {
        self.samples.last().expect("a run has samples")
    }

    /// Whether µ falls back to ≤ 0 at a sample after first turning positive.
    fn lost_separation(&self) -> bool {
        let first = self.samples.iter().position(|s| s.mu > 0.0);
        first.is_some_and(|k| self.samples[k..].iter().any(|s| s.mu <= 0.0))
    }

    /// Least-squares slope of ln‖Ŵ − target‖ against ln τ over τ ∈ [τ_max/100, τ_max].
    fn exponent(&self, target: &[f64]) -> f64 {
        let tau_max = self.last().tau;
        let (x, y): (Vec<f64>, Vec<f64>) = self
            .samples
            .iter()
            .filter(|s| s.separated() && s.tau >= tau_max / 100.0 * (1.0 - 1e-12))
            .map(|s| (s.tau.ln(), s.distance(target).ln()))
            .unzip();
        if x.len() < 2 {
            return f64::NAN;
        }
        crate::analysis::fit::line_fit(&x, &y).slope
    }
}

/// ln of t·(L − L*) at a sample, with ln ln t added for the KQ flow (`log_log`).
fn log_scaled_excess(s: &DirectionSample, log_log: bool) -> f64 {
    // t = e^τ − 1 exactly: ln t = τ + ln(1 − e^{−τ})
    let ln_t = s.tau + (-(-s.tau).exp()).ln_1p();
    ln_t + if log_log { ln_t.ln() } else { 0.0 } + s.log_excess
}

/// The separation time: the root of µ(W(τ)) after the last sample with µ ≤ 0, located by a
/// terminal event on a re-integration from that sample to the next (the run itself is not
/// touched, so its samples stay those of an event-free solve). τ₀ when µ > 0 throughout; NaN
/// when µ ≤ 0 at τ_max or the re-integration fails.
fn separation_time<M: ScaledGradient + ?Sized>(
    model: &M,
    tr: &Trajectory,
    mu: &dyn Fn(&[f64]) -> f64,
    cfg: &OdeConfig,
) -> f64 {
    let Some(k) = (0..tr.len()).rposition(|k| mu(tr.state(k)) <= 0.0) else {
        return tr.t[0];
    };
    if k + 1 == tr.len() {
        return f64::NAN;
    }
    let g = |_: f64, z: &[f64], out: &mut [f64]| out[0] = mu(z);
    let events = Events {
        count: 1,
        func: &g,
        terminal: true,
    };
    let span = [tr.t[k], tr.t[k + 1]];
    integrate(
        &LogTimeDescent(model),
        tr.state(k),
        &span,
        cfg,
        Some(&events),
    )
    .ok()
    .and_then(|r| r.events.first().map(|e| e.t))
    .unwrap_or(f64::NAN)
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let inputs = p
        .inputs(ctx.scenario)
        .map_err(|e| RunError::Other(e.to_string()))?;
    let (label, inst) = (inputs.label.clone(), &inputs.inst);
    let svms = instance_svms(inst, &label, &NuclearSettings::default())?;
    let (w_star, w_f) = (svms.nuclear.w.clone(), svms.frobenius.w.clone());
    let opt_star = svms.nuclear.nuclear_norm;
    let kq = FullKq::new(inst, inputs.de()).map_err(|e| RunError::Other(e.to_string()))?;
    let w_model = kq.model();
    let taus = tau_grid(*p.tau_max, *p.per_decade);
    let mut kq_runs = Vec::new();
    let mut w_runs = Vec::new();
    let mut drift = 0.0f64;
    let mut rep = Report {
        instance: Some(inputs.arrays()),
        ..Report::default()
    };
    for (seed, name) in inputs.names.iter().enumerate() {
        let z0 = kq.pack(&inputs.inits.k[seed], &inputs.inits.q[seed]);
        let w0 = kq.combined(&z0);
        let c0 = kq.balance(&z0);
        if let Some(tr) = run_log_time(&kq, &z0, &taus, &ctx.ode, &format!("KQ {name}"), &mut rep) {
            let mut samples = Vec::new();
            for k in 0..tr.len() {
                let z = tr.state(k);
                drift = stats::larger(drift, balance_drift(&kq, z, &c0));
                samples.push(DirectionSample::new(w_model, tr.t[k], &kq.combined(z)));
            }
            let mu = |z: &[f64]| min_margin(w_model, &kq.combined(z));
            let separation = separation_time(&kq, &tr, &mu, &ctx.ode);
            kq_runs.push((
                seed,
                Run {
                    samples,
                    separation,
                },
            ));
        }
        if let Some(tr) = run_log_time(
            w_model,
            &w0,
            &taus,
            &ctx.ode,
            &format!("W {name}"),
            &mut rep,
        ) {
            let samples = (0..tr.len())
                .map(|k| DirectionSample::new(w_model, tr.t[k], tr.state(k)))
                .collect();
            let mu = |w: &[f64]| min_margin(w_model, w);
            let separation = separation_time(w_model, &tr, &mu, &ctx.ode);
            w_runs.push((
                seed,
                Run {
                    samples,
                    separation,
                },
            ));
        }
    }

    // a failed run leaves its model's checks at NaN (failed), never vacuously passed
    let complete = |runs: &Vec<(usize, Run)>| runs.len() == inputs.names.len();
    let nan_unless = |ok: bool, x: f64| if ok { x } else { f64::NAN };
    let (kq_ok, w_ok) = (complete(&kq_runs), complete(&w_runs));
    let kq_last = || kq_runs.iter().map(|(_, r)| r.last());
    let w_last = || w_runs.iter().map(|(_, r)| r.last());
    let setting = inputs.setting(p);
    let kq_dist = nan_unless(kq_ok, stats::max(kq_last().map(|s| s.distance(&w_star))));
    let kq_ratio = nan_unless(kq_ok, stats::max(kq_last().map(|s| s.rank_ratio())));
    let kq_gap = nan_unless(
        kq_ok,
        stats::max(kq_last().map(|s| s.nuclear_norm() / opt_star - 1.0)),
    );
    let w_dist = nan_unless(w_ok, stats::max(w_last().map(|s| s.distance(&w_f))));
    let kq_to_f = nan_unless(kq_ok, 0.0) + stats::min(kq_last().map(|s| s.distance(&w_f)));
    let w_to_star = nan_unless(w_ok, 0.0) + stats::min(w_last().map(|s| s.distance(&w_star)));
    let ref_gap = frobenius_distance(&svms.frobenius.w, &w_star);
    rep.derive("kq_dist_nuclear", kq_dist);
    rep.derive("kq_rank_ratio", kq_ratio);
    rep.derive("kq_nuclear_gap", kq_gap);
    rep.derive("w_dist_frobenius", w_dist);
    rep.derive("svm_distance", ref_gap);
    rep.at_most(
        "kq-tau",
        "KQ: max ‖Ŵ − W_*‖_F at τ_max",
        kq_dist,
        *c.kq_direction_tol,
    )
    .note(format!(
        "{setting}; W_* from the certified nuclear program (complementarity margin {:.3})",
        svms.nuclear.complementarity_margin
    ));
    rep.at_most(
        "kq-sigma2-sigma1-tau-low-rank",
        "KQ: σ₂(Ŵ)/σ₁(Ŵ) at τ_max (low rank)",
        kq_ratio,
        *c.kq_rank_ratio_tol,
    )
    .note(format!("W_* has rank {}", svms.nuclear.rank));
    rep.at_most(
        "kq-opt-tau",
        "KQ: ‖Ŵ‖_*/OPT_* − 1 at τ_max",
        kq_gap,
        *c.kq_nuclear_gap_tol,
    )
    .note(format!(
        "OPT_* = {opt_star:.9}; Ŵ is feasible by construction, so the gap is ≥ 0 up to rounding"
    ));
    rep.at_most(
        "tau",
        "W: max ‖Ŵ − W_F‖_F at τ_max",
        w_dist,
        *c.w_direction_tol,
    )
    .note("Sec. 4.2 (Tarzanagh et al. 2023a): GF on the combined W → W_F-SVM, error O(1/µ)");
    rep.at_least(
        "two-limits-differ-kq",
        "the two limits differ: min(‖Ŵ_KQ − W_F‖, ‖Ŵ_W − W_*‖)",
        stats::smaller(kq_to_f, w_to_star),
        *c.separation_min,
    )
    .note(format!("‖W_F − W_*‖_F = {ref_gap:.4}"));
    let kappa = svms.nuclear.complementarity_margin;
    let kq_exp: Vec<f64> = kq_runs.iter().map(|(_, r)| r.exponent(&w_star)).collect();
    let w_exp: Vec<f64> = w_runs.iter().map(|(_, r)| r.exponent(&w_f)).collect();
    let dev = |v: &[f64], target: f64, ok: bool| {
        nan_unless(ok, stats::max(v.iter().map(|e| (e - target).abs())))
    };
    rep.derive("kq_exponents", &kq_exp);
    rep.derive("w_exponents", &w_exp);
    rep.at_most(
        "decay-exponent-tau-last-two-decades",
        "W: |decay exponent of ‖Ŵ − W_F‖ in τ + 1| (last two decades)",
        dev(&w_exp, -1.0, w_ok),
        *c.exponent_tol,
    )
    .note(format!(
        "exponents {w_exp:.4?}; derived (spec §2.7: error O(1/µ), µ ≈ τ)"
    ));
    rep.at_most(
        "kq-decay-exponent-tau-kappa-kappa",
        "KQ: |decay exponent of ‖Ŵ − W_*‖ in τ + κ|, κ = complementarity margin",
        dev(&kq_exp, -kappa, kq_ok),
        *c.exponent_tol,
    )
    .note(format!(
        "exponents {kq_exp:.4?}, κ = 1 − ‖P_U⊥MP_V⊥‖_op = {kappa:.4}; derived, not in the paper \
         (spec §2.8: the margin predicts the KQ convergence exponent)"
    ));
    // Theorem 1.1's σ_opt → 1 and its separation time (spec §4 recipe)
    let kq_rate: Vec<f64> = kq_runs
        .iter()
        .map(|(_, r)| (log_scaled_excess(r.last(), true) - (opt_star / 2.0).ln()).exp())
        .collect();
    let w_norm2 = w_f.iter().map(|x| x * x).sum::<f64>();
    let w_rate: Vec<f64> = w_runs
        .iter()
        .map(|(_, r)| (log_scaled_excess(r.last(), false) - w_norm2.ln()).exp())
        .collect();
    let log10_gap = |runs: &[(usize, Run)]| -> Vec<f64> {
        runs.iter()
            .map(|(_, r)| r.last().log_one_minus_sigma_opt / std::f64::consts::LN_10)
            .collect()
    };
    rep.derive("kq_loss_rate", &kq_rate);
    rep.derive("w_loss_rate", &w_rate);
    rep.derive("kq_log10_one_minus_sigma_opt", log10_gap(&kq_runs));
    rep.derive("w_log10_one_minus_sigma_opt", log10_gap(&w_runs));
    let rel = |v: &[f64], ok: bool| nan_unless(ok, stats::max(v.iter().map(|x| (x - 1.0).abs())));
    rep.at_most(
            "kq-sigma-opt-rate",
            "KQ: σ_opt → 1 at rate 1/(t ln t): |t ln t·(L − L*)/(OPT_*/2) − 1| at τ_max",
            rel(&kq_rate, kq_ok),
            *c.loss_rate_tol,
        )
        .note(format!(
            "t ln t·(L − L*) / (OPT_*/2) = {kq_rate:.6?}; L − L* = (1/n) Σ_i e^{{−γ_i,opt}}(e^{{Δ_i(1 − σ_i,opt)}} − 1) \
             under A2, so every 1 − σ_i,opt ≤ n e^{{γ_i,opt}}(L − L*)/Δ_i; \
             max_i log₁₀(1 − σ_i,opt) at τ_max: {:.4?}; derived rate (spec §2.7)",
            log10_gap(&kq_runs)
        ));
    rep.at_most(
        "w-sigma-opt-rate",
        "W: σ_opt → 1 at rate 1/t: |t·(L − L*)/‖W_F‖_F² − 1| at τ_max",
        rel(&w_rate, w_ok),
        *c.loss_rate_tol,
    )
    .note(format!(
        "t·(L − L*) / ‖W_F‖_F² = {w_rate:.6?} (‖W_F‖_F² = {w_norm2:.6}); max_i log₁₀(1 − σ_i,opt) \
         at τ_max: {:.4?}; derived rate (spec §2.7)",
        log10_gap(&w_runs)
    ));
    let mut not_for_good = 0usize;
    let mut separated_at = [Vec::new(), Vec::new()];
    for (m, runs) in [&kq_runs, &w_runs].into_iter().enumerate() {
        for (_, r) in runs.iter() {
            not_for_good += usize::from(r.separation.is_nan() || r.lost_separation());
            separated_at[m].push(r.separation);
        }
    }
    rep.derive("kq_separation_tau", &separated_at[0]);
    rep.derive("w_separation_tau", &separated_at[1]);
    rep.at_most(
        "separated-for-good",
        "runs whose optimal tokens are not separated for good (µ ≤ 0 at τ_max or after it was > 0)",
        nan_unless(kq_ok && w_ok, not_for_good as f64),
        0.0,
    )
    .note(format!(
        "Theorem 1.1: µ → ∞; separation times τ_sep (the root of µ; 0: separated from the \
         start) KQ {:.4?}, W {:.4?}",
        separated_at[0], separated_at[1]
    ));
    rep.at_most(
        "kq-balance-drift-tau",
        "KQ: balance drift ‖C(τ) − C(0)‖_F / max(1, ‖K‖² + ‖Q‖²)",
        drift,
        *c.balance_drift_tol,
    )
    .note("C = KᵀK − QᵀQ is conserved by the flow (spec §2.5)");

    rep.series = Table::new(&[
        "model",
        "seed",
        "tau",
        "mu",
        "log_excess_loss",
        "log_one_minus_sigma_opt",
        "dist_nuclear",
        "dist_frobenius",
        "sigma1",
        "sigma2",
        "nuclear_norm",
        "frobenius_norm",
    ]);
    for (name, runs) in [("KQ", &kq_runs), ("W", &w_runs)] {
        for (seed, r) in runs.iter() {
            for s in &r.samples {
                rep.series.push(vec![
                    name.into(),
                    (*seed).into(),
                    s.tau.into(),
                    s.mu.into(),
                    s.log_excess.into(),
                    s.log_one_minus_sigma_opt.into(),
                    s.distance(&w_star).into(),
                    s.distance(&w_f).into(),
                    s.sigma[0].into(),
                    s.sigma.get(1).copied().unwrap_or(0.0).into(),
                    s.nuclear_norm().into(),
                    s.frobenius_norm().into(),
                ]);
            }
        }
    }
    let sv = |s: &[f64]| s.to_vec();
    rep.json.push((
        "limits".into(),
        serde_json::json!({
            "w_nuclear": w_star, "w_frobenius": w_f,
            "sigma_nuclear": svms.nuclear.singular_values, "sigma_frobenius": sv(&super::common::singular_values(&svms.constraints, &w_f)),
            "kq": kq_runs.iter().map(|(s, r)| serde_json::json!({"seed": s, "w_hat": r.last().w_hat, "sigma": r.last().sigma})).collect::<Vec<_>>(),
            "w": w_runs.iter().map(|(s, r)| serde_json::json!({"seed": s, "w_hat": r.last().w_hat, "sigma": r.last().sigma})).collect::<Vec<_>>(),
        }),
    ));
    let sigma_f = super::common::singular_values(&svms.constraints, &w_f);
    let limits = Limits {
        w_star: &w_star,
        w_f: &w_f,
        sigma_star: &svms.nuclear.singular_values,
        sigma_f: &sigma_f,
        half_opt_star: opt_star / 2.0,
        w_f_norm2: w_norm2,
        rate_tol: *c.loss_rate_tol,
    };
    rep.figure = Some(figure(&kq_runs, &w_runs, &limits, &label));
    Ok(rep)
}

/// The time span of the figure (an axis range, not a measurement: plain folds).
fn taus_min(a: &[(usize, Run)], b: &[(usize, Run)]) -> f64 {
    let separated = a
        .iter()
        .chain(b)
        .flat_map(|(_, r)| r.samples.iter().filter(|s| s.separated() && s.tau > 0.0));
    stats::axis_min(f64::INFINITY, separated.map(|s| s.tau))
}

fn taus_max(a: &[(usize, Run)], b: &[(usize, Run)]) -> f64 {
    let samples = a.iter().chain(b).flat_map(|(_, r)| r.samples.iter());
    stats::axis_max(0.0, samples.map(|s| s.tau))
}

/// The two SVM solutions and the limits of the normalized excess loss, as the figure draws them.
struct Limits<'a> {
    w_star: &'a [f64],
    w_f: &'a [f64],
    sigma_star: &'a [f64],
    sigma_f: &'a [f64],
    /// OPT_*/2: the limit of t ln t·(L − L*) on the KQ flow.
    half_opt_star: f64,
    /// ‖W_F‖_F²: the limit of t·(L − L*) on the W flow.
    w_f_norm2: f64,
    /// The check's bound on the relative deviation at τ_max.
    rate_tol: f64,
}

fn figure(kq_runs: &[(usize, Run)], w_runs: &[(usize, Run)], lim: &Limits, label: &str) -> Figure {
    let (w_star, w_f) = (lim.w_star, lim.w_f);
    let sep = |r: &Run| {
        r.samples
            .iter()
            .filter(|s| s.separated() && s.tau > 0.0)
            .cloned()
            .collect::<Vec<_>>()
    };
    let mut dist = LinePanel::new(
        format!("{label}: distance of Ŵ = W/µ(W) to each SVM"),
        "τ = ln(1 + t)",
        "‖Ŵ − W_ref‖_F",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerLeft);
    let mut sing = LinePanel::new(
        "singular values of Ŵ (dashed: those of W_* and W_F)",
        "τ = ln(1 + t)",
        "σ_k(Ŵ)",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerLeft);
    let mut rate = LinePanel::new(
        "σ_{opt} → 1: excess loss against its limit law",
        "τ = ln(1 + t)",
        "|(L − L*) / law − 1|",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerLeft)
    .hline(RefLine::new(lim.rate_tol, "bound at τ_{max}").style(LineStyle::Dotted));
    for (runs, name, color) in [(kq_runs, "KQ", 0usize), (w_runs, "W", 2)] {
        for (i, (_, r)) in runs.iter().enumerate() {
            let s = sep(r);
            let tau: Vec<f64> = s.iter().map(|x| x.tau).collect();
            let first = i == 0;
            let lab = |t: &str| {
                if first {
                    format!("{name} → {t}")
                } else {
                    String::new()
                }
            };
            // KQ: t ln t·(L − L*)/(OPT_*/2); W: t·(L − L*)/‖W_F‖² (both → 1, spec §2.7)
            let (log_log, limit) = if name == "KQ" {
                (true, lim.half_opt_star)
            } else {
                (false, lim.w_f_norm2)
            };
            // t ln t > 0 only from t > 1
            let (rate_tau, ratio): (Vec<f64>, Vec<f64>) = r
                .samples
                .iter()
                .map(|x| {
                    (
                        x.tau,
                        ((log_scaled_excess(x, log_log) - limit.ln()).exp() - 1.0).abs(),
                    )
                })
                .filter(|(_, y)| y.is_finite() && *y > 0.0)
                .unzip();
            let lab_rate = if first {
                if log_log {
                    "KQ: law t ln t·(L − L*) = OPT_*/2".to_string()
                } else {
                    "W: law t·(L − L*) = ‖W_F‖_F²".to_string()
                }
            } else {
                String::new()
            };
            rate = rate.series(Series::numerics(lab_rate, rate_tau, ratio).color(color));
            dist = dist
                .series(
                    Series::numerics(
                        lab("W_*"),
                        tau.clone(),
                        s.iter().map(|x| x.distance(w_star)).collect(),
                    )
                    .color(color),
                )
                .series(
                    Series::numerics(
                        lab("W_F"),
                        tau.clone(),
                        s.iter().map(|x| x.distance(w_f)).collect(),
                    )
                    .color(color + 1),
                );
            for k in 0..s.first().map_or(0, |x| x.sigma.len()) {
                let l = if first {
                    format!("{name}: σ_{}", k + 1)
                } else {
                    String::new()
                };
                sing = sing.series(
                    Series::numerics(
                        l,
                        tau.clone(),
                        s.iter().map(|x| x.sigma[k].max(1e-16)).collect(),
                    )
                    .color(color + k.min(1)),
                );
            }
        }
    }
    // the singular values of the two SVM solutions as dashed levels (σ = 0 cannot show on a log axis)
    let span = vec![taus_min(kq_runs, w_runs), taus_max(kq_runs, w_runs)];
    for (sig, name, color) in [(lim.sigma_star, "W_*", 0usize), (lim.sigma_f, "W_F", 2)] {
        for (k, &v) in sig.iter().enumerate().filter(|(_, v)| **v > 1e-9) {
            sing = sing.series(
                Series::theory(
                    format!("σ_{}({name}) = {v:.4}", k + 1),
                    span.clone(),
                    vec![v; 2],
                )
                .color(color + k.min(1)),
            );
        }
    }
    Figure::new(3)
        .title(format!(
            "Theorem 1.1 / E2: separate K, Q → nuclear-norm SVM; combined W → Frobenius SVM \
             ({} seeds each)",
            kq_runs.len()
        ))
        .panel(dist)
        .panel(sing)
        .panel(rate)
}

/// Per seed a KQ and a W flow on the log-time grid, every sample kept.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let samples = tau_grid_len(*p.tau_max, *p.per_decade);
    full_flow_cost(
        "seeds, de, tau_max, per_decade",
        2.0 * n(*p.seeds),
        *p.de,
        samples,
        ctx.ode.method,
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "kq.full-nuclear-vs-frobenius",
    paper: "001",
    summary: "Full K, Q (W = KQᵀ) vs combined W from the same data and W(0): KQ → nuclear-norm \
              SVM W_* (low rank), W → Frobenius SVM W_F; distances of Ŵ to both over log time \
              and the singular values of the limits (Theorem 1.1, E2).",
    solver: OdeConfig::new(Method::Bdf, 1e-10, 1e-13),
    validate: |p, _, sc| p.validate(sc),
    cost,
    quantities: &[
        "kq_dist_nuclear",
        "kq_log10_one_minus_sigma_opt",
        "kq_loss_rate",
        "kq_nuclear_gap",
        "kq_rank_ratio",
        "kq_separation_tau",
        "svm_distance",
        "w_dist_frobenius",
        "w_log10_one_minus_sigma_opt",
        "w_loss_rate",
        "w_separation_tau",
    ],
    run,
};

//! Lemma 10's lower bounds (seed 003 App. B.2, spec 003 §4.3: "lower bounds of the same order
//! (via ⟨·, ū_mm⟩ and ⟨·, W̄_mm⟩)", [R?]: the printed bounds were lost). Reconstructed per step
//! of Eq. (10) ([D], exponential loss), and telescoped:
//! - u: ‖∇_uL‖ ≤ B·L (‖X_iᵀφ_i‖ ≤ B, |ℓ′| = ℓ) and ⟨−∇_uL, ū_mm⟩ ≥ L·µ_k/‖u_mm‖ with
//!   µ_k = min_i y_iu_mmᵀX_iᵀφ_i(W_k) (Lemma 13(1)'s dual-norm step), so a u-step of length η
//!   gains ⟨Δu, ū_mm⟩ ≥ ηµ_k/(B‖u_mm‖) when µ_k ≥ 0 (−η otherwise);
//! - W: with the decoder's optimal tokens equal to W_mm's (Lemma 11(ii)) and Ass. 2 (T = 2),
//!   Lemma 4 gives ⟨−∇_WL, W̄_mm⟩ ≥ (Γ/(2B²))‖∇_WL‖, so a W-step of length η(s+1)^{−α} gains
//!   ⟨ΔW, W̄_mm⟩ ≥ η(s+1)^{−α}Γ/(2B²) (−η(s+1)^{−α} if the optimal tokens differ, 0 for a
//!   skipped step).
//!
//! Hence ‖u_k‖ ≥ ⟨u_k, ū_mm⟩ ≥ ⟨u₀, ū_mm⟩ + Σ_s(gain) = Ω(ηk) and ‖W_k‖ = Ω(ηk^{1−α}), the
//! same orders as the upper bounds.
//!
//! From Cond. 1(i) (u₀ = 0) the first step cannot move W (∇_WL = 0 at u = 0), and W's bound
//! and ⟨W_k, W̄_mm⟩ are both ⟨W₀, W̄_mm⟩ until W's first step: a margin taken over those
//! iterates is 0 whatever the optimizer does. W's margin is therefore taken from its first
//! step on, and is NaN (the check fails) if W never moves, as Lemma 10's Ω(ηk^{1−α}) then fails.
//!
//! The replay is handed the optimizer's step, so that the bounds judge the update rule itself
//! (the tests in `joint_tests` hand it plausible bugs).

use super::fixed_common::dot;
use crate::flow::norm;
use crate::models::token_select::JointModel;
use crate::stats;

/// What the replay measured.
pub struct NormLower {
    /// min over k ≥ 1 of ⟨u_k, ū_mm⟩ − (bound_k), and over k after W's first step of
    /// ⟨W_k, W̄_mm⟩ − (bound_k) (NaN if W never moves); ≥ 0 holds.
    pub u_margin: f64,
    pub w_margin: f64,
    /// The iteration k at which W first moved (None: never).
    pub w_first_step: Option<usize>,
    /// The bounds at K divided by ηK and ηΣ_{s<K}(s+1)^{−α} (the orders of the upper bounds).
    pub u_rate: f64,
    pub w_rate: f64,
    /// W-steps at which the decoder's optimal tokens differed from W_mm's.
    pub opt_mismatches: usize,
}

/// The references of the bounds.
pub struct Mm<'a> {
    pub u_mm: &'a [f64],
    pub w_mm: &'a [f64],
    pub opt: &'a [usize],
    /// B = max_{i,t}‖x_{i,t}‖ and Γ = 1/‖W_mm‖.
    pub token_bound: f64,
    pub gamma: f64,
}

/// Replays `iterations` steps of `step`, an Eq. (10) update with (η, α), from `z0` and
/// measures the telescoped bounds at every iterate.
pub fn replay(
    model: &JointModel,
    (eta, alpha): (f64, f64),
    z0: &[f64],
    iterations: usize,
    mm: &Mm,
    step: &mut dyn FnMut(&mut [f64]),
) -> NormLower {
    let d = model.data().d;
    let unit = |v: &[f64]| {
        let nv = norm(v);
        v.iter().map(|x| x / nv).collect::<Vec<f64>>()
    };
    let (u_hat, w_hat) = (unit(mm.u_mm), unit(mm.w_mm));
    let b = mm.token_bound;
    let mut z = z0.to_vec();
    let (mut u_bound, mut w_bound) = (dot(&z[..d], &u_hat), dot(&z[d..], &w_hat));
    let (mut u_margin, mut w_margin) = (f64::INFINITY, f64::INFINITY);
    let mut w_first_step = None;
    let mut opt_mismatches = 0;
    let mut probe = vec![0.0; z.len()];
    probe[..d].copy_from_slice(mm.u_mm);
    let mut w_steps = 0.0;
    for k in 0..iterations {
        // µ_k: the margins of the decoder u_mm on the attention of W_k
        probe[d..].copy_from_slice(&z[d..]);
        let mu = stats::min(model.attention(&probe).margins.iter());
        let w_before = z[d..].to_vec();
        let same_opt = model.optimal_tokens(&z) == mm.opt;
        step(&mut z);
        u_bound += match mu >= 0.0 {
            true => eta * mu / (b * norm(mm.u_mm)),
            false => -eta,
        };
        let len = eta * ((k + 1) as f64).powf(-alpha);
        if z[d..] != w_before[..] {
            w_first_step.get_or_insert(k);
            w_steps += len;
            if same_opt {
                w_bound += len * mm.gamma / (2.0 * b * b);
            } else {
                opt_mismatches += 1;
                w_bound -= len;
            }
        }
        u_margin = stats::smaller(u_margin, dot(&z[..d], &u_hat) - u_bound);
        if w_first_step.is_some() {
            w_margin = stats::smaller(w_margin, dot(&z[d..], &w_hat) - w_bound);
        }
    }
    NormLower {
        u_margin,
        w_margin: w_first_step.map_or(f64::NAN, |_| w_margin),
        w_first_step,
        u_rate: u_bound / (eta * iterations as f64),
        w_rate: w_bound / w_steps,
        opt_mismatches,
    }
}

//! Small pieces shared by the seed-004 "basics" scenarios (conservation-law,
//! reconstruction-lemmas, gradient-check, diag-linear-riccati, diag-linear-greedy,
//! stage1-linear-regime): vector distances, α labels, and the validation of α lists.

use crate::models::diagonal::{algorithm1, Algorithm1Options, BetaLoss, Schedule};
use crate::scenario::{InputError, RunError, Scenario};

/// The values with exact zeros replaced by NaN, which the plots leave out (log axes).
pub fn positive_or_nan(values: &[f64]) -> Vec<f64> {
    values
        .iter()
        .map(|&x| if x > 0.0 { x } else { f64::NAN })
        .collect()
}

/// Legend text for an initialization scale, e.g. "α = 1e-32".
pub fn alpha_label(alpha: f64) -> String {
    format!("α = {alpha:e}")
}

/// Refuses an empty list of α or any α outside (0, 1) (Λ = ln 1/α must be positive).
pub fn validate_alphas(sc: &Scenario, key: &str, alphas: &[f64]) -> Result<(), InputError> {
    if alphas.is_empty() {
        return Err(sc.invalid(key, "need at least one α"));
    }
    match alphas
        .iter()
        .find(|a| !(a.is_finite() && **a > 0.0 && **a < 1.0))
    {
        Some(a) => Err(sc.invalid(key, format!("every α must lie in (0, 1), got {a}"))),
        None => Ok(()),
    }
}

/// Algorithm 1 with a single ε in STAGE_B, for scenarios that only need the stage times and
/// plateau points (horizons, markers): the ε → 0 limit is checked by the scenarios about
/// Algorithm 1 itself, and one ε halves the cost (mini: ≈ 0.6 s instead of 1.3 s).
pub fn stage_times_schedule(loss: &dyn BetaLoss) -> Result<Schedule, RunError> {
    let mut opts = Algorithm1Options::default();
    opts.stage_b.eps_list = vec![1e-4];
    algorithm1(&loss, &opts).map_err(|e| RunError::Other(format!("Algorithm 1: {e}")))
}

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

/// The normalized offset |g|·t_h − Λ of a coordinate that leaves 0 alone and balanced-logistic
/// (CF2; exact for R1, and for the first activation while the others are ≤ α^m): β = uv rises
/// from α²u0v0 towards β¹ at rate |g| = h|β¹| (G = h(β¹ − β)), w = |u + sgn(β¹)v| grows and
/// w̃ = |u − sgn(β¹)v| decays (ww̃ = |c| conserved), and β reaches ½β¹ at t_h. Expanding the
/// Riccati solution for z = w² in α²:
/// |g|t_h − Λ = ln(2√|β¹|/w0) − α²(w0² + w̃0²)/(8|β¹|)
///   + α⁴[18w0²w̃0² − w0⁴ + w̃0⁴ + 4w0²w̃0² ln(α²w0²/(4|β¹|))]/(64β¹²) + O(α⁶).
/// Returns (the α → 0 limit, the α² term, the α⁴ term).
pub fn logistic_half_offset(beta1: f64, u0: f64, v0: f64, alpha: f64) -> (f64, f64, f64) {
    let b = beta1.abs();
    let w = (u0 + beta1.signum() * v0).abs();
    let wt = (u0 - beta1.signum() * v0).abs();
    let a2 = alpha * alpha;
    let (w2, wt2) = (w * w, wt * wt);
    let limit = (2.0 * b.sqrt()).ln() - w.ln();
    let second = -a2 * (w2 + wt2) / (8.0 * b);
    let fourth = a2 * a2 / (64.0 * b * b)
        * (18.0 * w2 * wt2 - w2 * w2 + wt2 * wt2 + 4.0 * w2 * wt2 * (a2 * w2 / (4.0 * b)).ln());
    (limit, second, fourth)
}

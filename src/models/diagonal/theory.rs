//! The theory curves that Algorithm 1 defines (spec 004 §3.4): step functions β_th(τ),
//! loss_th(τ), the continuous piecewise-linear log scale b_th(τ), the predicted log-magnitudes,
//! the neglect exponent m_k(τ) and the best-separated times τ*_k.

use super::algorithm1::{Schedule, Stage};
use crate::stats;

impl Schedule {
    /// T_0 = 0 < T_1 < … of the stages found (the last stage lasts forever if the schedule
    /// converged).
    pub fn stage_times(&self) -> Vec<f64> {
        self.stages.iter().map(|s| s.t_start).collect()
    }

    /// T_{k+1}: the end of stage k (∞ for the last stage).
    pub fn stage_end(&self, k: usize) -> f64 {
        self.stages.get(k + 1).map_or(f64::INFINITY, |s| s.t_start)
    }

    /// The stage k with T_k ≤ τ < T_{k+1} (stage 0 for τ < 0).
    pub fn stage_index(&self, tau: f64) -> usize {
        self.stages
            .iter()
            .rposition(|s| s.t_start <= tau)
            .unwrap_or(0)
    }

    /// The stage in force at τ.
    pub fn stage_at(&self, tau: f64) -> &Stage {
        &self.stages[self.stage_index(tau)]
    }

    /// β_th(τ) = β^k (Theorem 4.1: the limit of β_α(τ) on the plateau).
    pub fn beta_at(&self, tau: f64) -> &[f64] {
        &self.stage_at(tau).beta
    }

    /// loss_th(τ) = L̃(β^k).
    pub fn loss_at(&self, tau: f64) -> f64 {
        self.stage_at(tau).loss
    }

    /// b_th(τ) = b^k − g(θ^k)(τ − T_k) (eqs. 9, 12): the limit of log_α w_α(τ).
    pub fn log_scale_at(&self, tau: f64) -> Vec<f64> {
        self.stage_at(tau).log_scale(tau)
    }

    /// Predicted (log_α|β_i|, sgn β_i) at τ: exponent 2 min(b_i, 2 − b_i), sign + for b_i < 1 and
    /// − for b_i > 1 (0 exactly at b_i = 1). Active coordinates (b ∈ {0, 2}) have exponent 0.
    pub fn predicted_log_magnitudes(&self, tau: f64) -> Vec<(f64, f64)> {
        self.log_scale_at(tau)
            .into_iter()
            .map(|b| {
                (
                    2.0 * b.min(2.0 - b),
                    (1.0 - b).signum() * f64::from(b != 1.0),
                )
            })
            .collect()
    }

    /// m_k(τ) = 2 min_{i∉S_k} min(b_i(τ), 2 − b_i(τ)): everything the theory neglects is
    /// ≈ α^{m_k(τ)} (∞ when every coordinate is in the support).
    pub fn neglect_exponent(&self, tau: f64) -> f64 {
        self.stage_at(tau).neglect_exponent(tau)
    }

    /// τ*_k = argmax of m_k over [T_k, T_{k+1}] (the last stage: over [T_K, T_K + `horizon`]),
    /// and m*_k. m_k is a minimum of linear functions of τ, hence concave: ternary search.
    pub fn best_separated_time(&self, k: usize, horizon: f64) -> (f64, f64) {
        let stage = &self.stages[k];
        let (mut lo, mut hi) = (
            stage.t_start,
            self.stage_end(k).min(stage.t_start + horizon),
        );
        for _ in 0..200 {
            let (x1, x2) = (lo + (hi - lo) / 3.0, hi - (hi - lo) / 3.0);
            if stage.neglect_exponent(x1) < stage.neglect_exponent(x2) {
                lo = x1;
            } else {
                hi = x2;
            }
        }
        let tau = 0.5 * (lo + hi);
        (tau, stage.neglect_exponent(tau))
    }
}

impl Stage {
    /// θ^k in the raw layout [u; v]: u = √|β^k|, v = sgn(β^k) ⊙ √|β^k| (spec §3.1).
    pub fn plateau_state(&self) -> Vec<f64> {
        let root = self.beta.iter().map(|b| b.abs().sqrt());
        let signed = self.beta.iter().map(|b| b.signum() * b.abs().sqrt());
        root.chain(signed).collect()
    }

    /// b(τ) = b^k − drift·(τ − T_k), this stage's linear log-scale law (valid on its plateau).
    pub fn log_scale(&self, tau: f64) -> Vec<f64> {
        let dt = tau - self.t_start;
        self.b
            .iter()
            .zip(&self.drift)
            .map(|(b, g)| b - g * dt)
            .collect()
    }

    /// 2 min_{i∉S} min(b_i(τ), 2 − b_i(τ)) with this stage's log-scale law (+∞ when every
    /// coordinate is active: nothing is neglected).
    pub fn neglect_exponent(&self, tau: f64) -> f64 {
        stats::min_with(
            f64::INFINITY,
            self.log_scale(tau)
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !self.support.contains(i))
                .map(|(_, b)| 2.0 * b.min(2.0 - b)),
        )
    }
}

/// b⁰_i(α) = 1 − ln(w0_i)/Λ for the optional finite-α overlay of spec §3.4 (w0 = ũ0 + ṽ0 of the
/// normalized unscaled initialization, Λ = ln 1/α).
pub fn finite_alpha_initial_b(w0: &[f64], lambda: f64) -> Vec<f64> {
    w0.iter().map(|w| 1.0 - w.ln() / lambda).collect()
}

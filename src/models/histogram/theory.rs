//! Per-column df theory (spec 000 §2.5–2.6, R9, R11, D2–D4): every column of the df flow is an
//! instance of Theorem 2's system plus a shrinking orthogonal part, so the whole df trajectory,
//! its loss, limit, rates and constants are known in closed form.
//!
//! Column i ↦ x_0 = v_i/√μ_i, y_0 = p_i/μ_i^{3/2} (p_i = q_iᵀm_i), c = δ_i = β_i/μ_i, c_1 = μ_i,
//! g_0 = ‖q⊥,i‖²/μ_i; back: v_i = √μ_i x, q_i = √μ_i y m̂_i + q⊥,i.

use nalgebra::{DMatrix, DVector};

use crate::stats;

use super::layout;
use super::theorem2::{Imbalance, Thm2ClosedForm, Thm2System};
use super::HistogramError;

/// A leading term K e^{−rate·t} of a column loss (spec 000 R9).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Asymptote {
    pub constant: f64,
    pub rate: f64,
}

/// One column (q_i, v_i, m_i) of the df flow in Theorem 2's variables (spec 000 §2.5d, R9).
#[derive(Debug, Clone)]
pub struct DfColumn {
    mu: f64,
    m_hat: DVector<f64>,
    q_perp0: DVector<f64>,
    v0: f64,
    p0: f64,
    beta: f64,
    closed: Thm2ClosedForm,
}

impl DfColumn {
    /// The column's closed-form description from its initial (q_i, v_i) and m_i. Panics if
    /// m_i = 0 (μ_i must be > 0, spec 000 §0) or the lengths differ.
    pub fn new(q: &[f64], v: f64, m: &[f64]) -> Self {
        assert_eq!(q.len(), m.len(), "q_i and m_i must have the same length");
        let m = DVector::from_column_slice(m);
        let mu = m.norm();
        assert!(mu > 0.0, "column norm μ_i must be > 0");
        let m_hat = &m / mu;
        let q = DVector::from_column_slice(q);
        let along = q.dot(&m_hat);
        let q_perp0 = &q - along * &m_hat;
        let beta = q.norm_squared() - v * v;
        let sys = Thm2System {
            c: beta / mu,
            c1: mu,
        };
        let sqrt_mu = mu.sqrt();
        let closed = Thm2ClosedForm::with_g0(
            sys,
            v / sqrt_mu,
            along / sqrt_mu,
            q_perp0.norm_squared() / mu,
        );
        Self {
            mu,
            m_hat,
            q_perp0,
            v0: v,
            p0: along * mu,
            beta,
            closed,
        }
    }

    /// μ_i = ‖m_i‖.
    pub fn mu(&self) -> f64 {
        self.mu
    }

    /// β_i = ‖q_i‖² − v_i² (conserved).
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// ρ_i, ρ̄_i, A_i of δ_i = β_i/μ_i.
    pub fn imbalance(&self) -> Imbalance {
        self.closed.imbalance()
    }

    /// p_i(0) = q_i(0)ᵀm_i.
    pub fn p0(&self) -> f64 {
        self.p0
    }

    /// v_i(0).
    pub fn v0(&self) -> f64 {
        self.v0
    }

    /// The orthogonal part q⊥,i(0) = q_i − (q_i·m̂_i)m̂_i.
    pub fn q_perp0(&self) -> &DVector<f64> {
        &self.q_perp0
    }

    /// Theorem 2's closed form for (x, y) with c = δ_i, c_1 = μ_i.
    pub fn closed_form(&self) -> &Thm2ClosedForm {
        &self.closed
    }

    /// Writes q_i(t) = √μ y m̂ + (‖q⊥(t)‖/‖q⊥(0)‖) q⊥(0) into `q_out` and returns v_i(t) = √μ x
    /// (spec 000 §2.6, "Full df solution").
    pub fn state_at(&self, t: f64, q_out: &mut [f64]) -> f64 {
        let s = self.closed.at(t);
        let sqrt_mu = self.mu.sqrt();
        for ((o, m_hat_a), perp_a) in q_out.iter_mut().zip(&self.m_hat).zip(&self.q_perp0) {
            *o = sqrt_mu * s.y * m_hat_a + s.q_perp_ratio * perp_a;
        }
        sqrt_mu * s.x
    }

    /// ℓ_i(t) = ½μ_i²\[(1 − xy)² + x²g\] (spec 000 §2.6, exact and cancellation-free).
    pub fn loss_at(&self, t: f64) -> f64 {
        self.closed.at(t).loss
    }

    /// The bad-set function q_iᵀm_i + ρ̄_iμ_iv_i at t = 0 (spec 000 R10; the paper omits μ_i, E5):
    /// the column converges to a minimizer iff it is ≠ 0, with sign σ_i of the limit (D2).
    pub fn bad_set_value(&self) -> f64 {
        self.p0 + self.imbalance().rhob * self.mu * self.v0
    }

    /// The limit (q_i(∞), v_i(∞)) (spec 000 D2): σ(m_i/√(μρ̄), √(μρ̄)) with σ = sign of
    /// [`Self::bad_set_value`]; on the bad set the saddle point (q⊥(0)/‖q⊥(0)‖·√β, 0).
    pub fn limit(&self) -> (DVector<f64>, f64) {
        let (x_inf, y_inf) = self.closed.limit();
        if x_inf == 0.0 {
            let perp_norm = self.q_perp0.norm();
            let q = if perp_norm > 0.0 {
                &self.q_perp0 * (self.beta.max(0.0).sqrt() / perp_norm)
            } else {
                DVector::zeros(self.q_perp0.len())
            };
            return (q, 0.0);
        }
        let sqrt_mu = self.mu.sqrt();
        (&self.m_hat * (sqrt_mu * y_inf), sqrt_mu * x_inf)
    }

    /// Leading term of ℓ_i(t) (spec 000 R9): K = 2μ⁴A²ρ̄²‖q⊥(0)‖²/(p + ρ̄μv)² at rate 2ρ̄μ; if
    /// q⊥(0) = 0, K = 8μ²A⁴(1 − x_0y_0)²/(ρ²L⁴) at rate 4Aμ (scaled x_0, y_0, L); on the bad set
    /// the saddle loss ½μ² at rate 0.
    pub fn asymptote(&self) -> Asymptote {
        let Imbalance { rho, rhob, a, .. } = self.imbalance();
        let mu = self.mu;
        let l = self.closed.l();
        if l == 0.0 {
            return Asymptote {
                constant: 0.5 * mu * mu,
                rate: 0.0,
            };
        }
        let perp_sq = self.q_perp0.norm_squared();
        if perp_sq > 0.0 {
            let ratio = a * rhob * mu * mu / self.bad_set_value();
            Asymptote {
                constant: 2.0 * ratio * ratio * perp_sq,
                rate: 2.0 * rhob * mu,
            }
        } else {
            let (x0, y0) = self.closed.initial();
            let ratio = 2.0 * a * a * x0.mul_add(-y0, 1.0) / (rho * l * l);
            Asymptote {
                constant: 2.0 * mu * mu * ratio * ratio,
                rate: 4.0 * a * mu,
            }
        }
    }

    /// T_i of Theorem 1, corrected (spec 000 R9): R8's T for (x_0, y_0, δ_i, μ_i).
    pub fn onset_time(&self) -> f64 {
        self.closed.onset_time()
    }

    /// T_i as printed in Theorem 1, ln(ρ̄²/(ρv_0) · |(ρv_0μ − p)/(ρ̄v_0μ + p)|), for reporting only
    /// (spec 000 E6: no 1/(2A_iμ_i), a stray 1/(ρ_iv_0) that can make the argument negative;
    /// NaN then).
    pub fn paper_onset_time(&self) -> f64 {
        let Imbalance { rho, rhob, .. } = self.imbalance();
        let (v0, mu, p) = (self.v0, self.mu, self.p0);
        let ratio = ((rho * v0 * mu - p) / (rhob * v0 * mu + p)).abs();
        (rhob * rhob / (rho * v0) * ratio).ln()
    }

    /// Small-init escape time t_{1/2} = ln(4A²/(ρL²))/(2Aμ) at which x_iy_i = ½ (spec 000 D3).
    pub fn escape_time_estimate(&self) -> f64 {
        self.closed.half_time_estimate()
    }

    /// The exact time at which x_iy_i = ½ (spec 000 D3), by Brent on the closed form.
    pub fn escape_time(&self) -> Result<f64, HistogramError> {
        self.closed.half_time()
    }
}

/// The closed-form df trajectory from z_0 and the constants of Theorem 1 (spec 000 §2.6, R9).
#[derive(Debug, Clone)]
pub struct DfClosedForm {
    d: usize,
    columns: Vec<DfColumn>,
}

impl DfClosedForm {
    /// The df solution for task matrix M (d × d, all μ_i > 0) from the canonical state z_0.
    pub fn new(m: &DMatrix<f64>, z0: &[f64]) -> Self {
        let d = layout::alphabet_size(z0.len());
        assert_eq!(m.shape(), (d, d), "M must be d×d");
        let columns = (0..d)
            .map(|i| {
                let (q, v) = layout::column(z0, d, i);
                DfColumn::new(q, v, m.column(i).as_slice())
            })
            .collect();
        Self { d, columns }
    }

    /// The per-column descriptions.
    pub fn columns(&self) -> &[DfColumn] {
        &self.columns
    }

    /// Writes z(t) in the canonical layout into `out` (spec 000 §2.1, §2.6).
    pub fn state(&self, t: f64, out: &mut [f64]) {
        let d = self.d;
        for (i, col) in self.columns.iter().enumerate() {
            let block = &mut out[i * (d + 1)..(i + 1) * (d + 1)];
            block[d] = col.state_at(t, &mut block[..d]);
        }
    }

    /// ℓ_df(t) = Σ_i ½μ_i²\[(1 − x_iy_i)² + x_i²g_i\] (spec 000 R9, exact decomposition).
    pub fn loss(&self, t: f64) -> f64 {
        self.columns.iter().map(|c| c.loss_at(t)).sum()
    }

    /// α = min_i μ_iρ̄_i: ℓ = O(e^{−2αt}) for every sign of δ_i (spec 000 R9).
    pub fn alpha(&self) -> f64 {
        stats::min(self.columns.iter().map(|c| c.mu * c.imbalance().rhob))
    }

    /// γ = 1 if some δ_i = 0 exactly, else 0 (Theorem 1). Conservative: the loss itself has no
    /// t factor even at δ = 0 (spec 000 E9).
    pub fn gamma(&self) -> f64 {
        f64::from(u8::from(self.columns.iter().any(|c| c.beta == 0.0)))
    }

    /// T = max_i T_i with R8's corrected T_i (spec 000 R9, E6); ∞ if a column is on the bad set.
    pub fn onset_time(&self) -> f64 {
        stats::max(self.columns.iter().map(DfColumn::onset_time))
    }

    /// Theorem 1's printed T = max_i (printed T_i), for reporting only (spec 000 E6); NaN if any
    /// printed log argument is negative.
    pub fn paper_onset_time(&self) -> f64 {
        stats::max(self.columns.iter().map(DfColumn::paper_onset_time))
    }

    /// Theorem 1's good-initialization condition, corrected: q_iᵀm_i + ρ̄_iμ_iv_i ≠ 0 for all i
    /// (the paper omits μ_i, spec 000 E5).
    pub fn is_good_init(&self) -> bool {
        self.columns.iter().all(|c| c.bad_set_value() != 0.0)
    }

    /// Σ_i K_i e^{−rate_i t}, the asymptote of ℓ(t) (spec 000 R9).
    pub fn asymptotic_loss(&self, t: f64) -> f64 {
        self.columns
            .iter()
            .map(|c| {
                let a = c.asymptote();
                a.constant * (-a.rate * t).exp()
            })
            .sum()
    }

    /// The Theorem 1 bound B(t) = K_sup·d·max_i μ_i²·t^γ e^{−2αt} for a given constant K_sup
    /// (the paper gives none; spec 000 Fig. 3).
    pub fn theorem1_bound(&self, t: f64, k_sup: f64) -> f64 {
        let max_mu_sq = stats::max(self.columns.iter().map(|c| c.mu * c.mu));
        k_sup * self.d as f64 * max_mu_sq * t.powf(self.gamma()) * (-2.0 * self.alpha() * t).exp()
    }

    /// The limit state z(∞) (spec 000 D2; saddle columns on the bad set).
    pub fn limit_state(&self) -> Vec<f64> {
        let d = self.d;
        let mut z = vec![0.0; d * (d + 1)];
        for (i, col) in self.columns.iter().enumerate() {
            let (q, v) = col.limit();
            let block = &mut z[i * (d + 1)..(i + 1) * (d + 1)];
            block[..d].copy_from_slice(q.as_slice());
            block[d] = v;
        }
        z
    }

    /// κ_df = max_i 2A_iμ_i / min_i μ_iρ̄_i, the condition number of the nonzero Hessian spectrum
    /// at the limit (spec 000 D4, §7).
    pub fn kappa(&self) -> f64 {
        let fastest = stats::max(self.columns.iter().map(|c| 2.0 * c.imbalance().a * c.mu));
        fastest / self.alpha()
    }
}

#[cfg(test)]
#[path = "theory_tests.rs"]
mod tests;

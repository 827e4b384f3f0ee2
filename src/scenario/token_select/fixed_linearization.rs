//! The asymptotic linearization of the fixed-decoder loss (spec 003 §4.4) and the predicted
//! offset w̃ of the common GF/NGF path W = ρ W̄_mm + w, w → w̃.
//!
//! As every margin grows, L − L* ≈ Σ_k c_k e^{−⟨W, D_k⟩} with c_k = ℓ*_i Δ_{i,t}/n: an
//! exponential-loss linear classifier on the features D_k. Its gradient direction equals W̄_mm
//! only if c_k e^{−⟨w̃, D_k⟩} ∝ α_k on the support S, i.e. ⟨w̃, D_k⟩ = ln(c_k/α_k) + const
//! (k ∈ S). That fixes w̃ inside span{D_k : k ∈ S} up to the W̄_mm direction. Outside it:
//! - the part orthogonal to span{D_k : all k} never moves (every gradient lies in that span),
//!   so it is the initialization's;
//! - the part in span{D_k} ⊖ span{D_S} is moved only by the non-support constraints, whose
//!   weights decay like e^{−ρΓ(⟨W_mm, D_j⟩ − 1)}; it converges to a history-dependent limit
//!   that this module measures instead of predicting (it is zero when every constraint is
//!   on the support, as in ex1-orth).

use nalgebra::{DMatrix, DVector};

use crate::analysis::svm::MarginConstraints;
use crate::attention::logdomain::log_sum_exp;
use crate::scenario::RunError;

use super::fixed_common::{dot, ngd, trace, Probing, Setup};
use crate::stats;

/// Projections and the predicted offset of one fixed-decoder problem.
pub struct Linearization {
    /// ln c_k for every constraint k.
    pub log_c: Vec<f64>,
    /// ln(c_k/α_k) for the support constraints, in support order.
    pub log_c_over_alpha: Vec<f64>,
    /// Orthonormal bases (columns) of span{D_S} and of span{D_k : all k}.
    support_basis: DMatrix<f64>,
    full_basis: DMatrix<f64>,
    /// The particular offset in span{D_S}, with its W̄_mm component removed.
    pub offset_in_support: Vec<f64>,
}

/// The pieces of ‖W_⊥‖² (W_⊥ = W − ⟨W, W̄_mm⟩W̄_mm) that the theory separates.
#[derive(Debug, Clone, Copy)]
pub struct PerpSplit {
    /// ‖W_⊥‖², measured.
    pub total: f64,
    /// ‖component in span{D_S}, minus W̄_mm‖².
    pub support: f64,
    /// ‖component in span{D_k} ⊖ span{D_S}‖² (moved by non-support constraints only).
    pub non_support: f64,
    /// ‖component orthogonal to span{D_k}‖² (conserved: the initialization's).
    pub outside: f64,
    /// ‖(component in span{D_S}) − w̃_S⊥‖: how far the support part is from its prediction.
    pub offset_error: f64,
}

impl Linearization {
    pub fn new(setup: &Setup) -> Result<Self, RunError> {
        let cons = &setup.constraints;
        let dense = cons.dense(); // m × d²
        let (gamma, opt) = (setup.model.scores(), setup.model.optimal_tokens());
        let (n, t) = (setup.n(), setup.t());
        let log_c: Vec<f64> = cons
            .labels
            .iter()
            .map(|l| {
                let (i, tok) = (l.sequence, l.token);
                let g_opt = gamma[i * t + opt[i]];
                let gap = g_opt - gamma[i * t + tok];
                setup.model.loss_kind().log_value(g_opt) + gap.ln() - (n as f64).ln()
            })
            .collect();
        let support = &setup.svm.support;
        let log_c_over_alpha: Vec<f64> = support
            .iter()
            .map(|&k| log_c[k] - setup.svm.alpha[k].ln())
            .collect();
        let rows_s = DMatrix::from_fn(support.len(), dense.ncols(), |r, j| dense[(support[r], j)]);
        let support_basis = orthonormal_columns(&rows_s, "support constraints")?;
        let full_basis = orthonormal_columns(&dense, "constraints")?;
        // min-norm w in span{D_S} with ⟨w, D_k⟩ = ln(c_k/α_k): w = D_Sᵀ G_SS⁻¹ b
        let gram = &rows_s * rows_s.transpose();
        let b = DVector::from_column_slice(&log_c_over_alpha);
        let coef = gram
            .clone()
            .cholesky()
            .ok_or_else(|| RunError::Other("support Gram matrix is not positive definite".into()))?
            .solve(&b);
        let particular = rows_s.transpose() * coef;
        let along = dot(particular.as_slice(), &setup.wmm_unit);
        let offset_in_support = particular
            .iter()
            .zip(&setup.wmm_unit)
            .map(|(p, u)| p - along * u)
            .collect();
        Ok(Linearization {
            log_c,
            log_c_over_alpha,
            support_basis,
            full_basis,
            offset_in_support,
        })
    }

    /// ln Σ_k c_k e^{−⟨W, D_k⟩}.
    pub fn log_surrogate(&self, margins: &[f64]) -> f64 {
        log_sum_exp(self.log_c.iter().zip(margins).map(|(c, m)| c - m))
    }

    /// Splits ‖W_⊥‖² into its support, non-support and conserved parts.
    pub fn split(&self, w: &[f64], wmm_unit: &[f64]) -> PerpSplit {
        let proj = dot(w, wmm_unit);
        let perp: Vec<f64> = w.iter().zip(wmm_unit).map(|(x, u)| x - proj * u).collect();
        let total = dot(&perp, &perp);
        let v = DVector::from_column_slice(&perp);
        let in_support = self.support_basis.transpose() * &v;
        let in_span = self.full_basis.transpose() * &v;
        let outside = &v - &self.full_basis * &in_span;
        let offset_error = (&self.support_basis * &in_support
            - DVector::from_column_slice(&self.offset_in_support))
        .norm();
        PerpSplit {
            total,
            support: in_support.norm_squared(),
            non_support: (in_span.norm_squared() - in_support.norm_squared()).max(0.0),
            outside: outside.norm_squared(),
            offset_error,
        }
    }

    /// ‖w̃_⊥‖² predicted in span{D_S}.
    pub fn predicted_support(&self) -> f64 {
        dot(&self.offset_in_support, &self.offset_in_support)
    }

    /// ‖w̃_⊥‖² of the path from `w0`: the closed-form support part, W₀'s conserved part outside
    /// span{D_k}, and the non-support part measured at the end of `steps` NGD steps of `eta`
    /// (NGD follows the common GF/NGF path up to O(η)). Returns the total and that NGD end
    /// point's split.
    pub fn path_offset(
        &self,
        setup: &Setup,
        w0: &[f64],
        eta: f64,
        steps: usize,
    ) -> Result<(f64, PerpSplit), RunError> {
        let rule = ngd(eta);
        let end = trace(setup, rule, w0, steps, Probing::Checkpoints, |_| {})?;
        let split = self.split(&end, &setup.wmm_unit);
        let outside0 = self.split(w0, &setup.wmm_unit).outside;
        Ok((
            self.predicted_support() + split.non_support + outside0,
            split,
        ))
    }
}

/// An orthonormal basis (columns) of the row space of `rows`, by a thin QR of its transpose.
fn orthonormal_columns(rows: &DMatrix<f64>, what: &str) -> Result<DMatrix<f64>, RunError> {
    let qr = rows.transpose().qr();
    let r = qr.r();
    let top = stats::max((0..r.nrows()).map(|j| r[(j, j)].abs()));
    if (0..r.nrows()).any(|j| r[(j, j)].abs() <= 1e-10 * top) {
        return Err(RunError::Other(format!(
            "the {what} are linearly dependent; the offset w̃ is not unique"
        )));
    }
    Ok(qr.q())
}

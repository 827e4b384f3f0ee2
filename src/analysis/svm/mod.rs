//! Max-margin (SVM) programs over token data, model-agnostic (spec 003 §3, spec 001 §3).
//!
//! Every program has the margin constraints ⟨W, D_k⟩ ≥ 1 of "optimal token beats token t":
//! D_{i,t} = (x_{i,opt} − x_{i,t}) q_iᵀ for the attention matrix (W-SVM), y_i x_{i,opt} for
//! the decoder (u-SVM), and the diagonals q_i ⊙ (x_{i,opt} − x_{i,t}) for diagonal W.
//!
//! - [`constraints`]: the constraint families and their builders from token data;
//! - [`qp`]: min ½‖w‖² (Frobenius / Euclidean) by its dual or its primal QP (clarabel), with
//!   an active-set polish and a KKT certificate on every solution;
//! - [`lp`]: min ‖β‖₁ (ℓ1 / diagonal-nuclear SVM) as an LP with its KKT certificate and a
//!   uniqueness check;
//! - [`nuclear`]: min ‖W‖_* (spec 001 §3.2) by a primal–dual iteration with a certified
//!   primal/dual bracket and subgradient (dual-certificate) residuals, and its diagonal
//!   restriction (the ℓ1-SVM by soft thresholding, a pure-Rust cross-check of the LP);
//! - [`nuclear_cuts`]: the same program by column generation over rank-one atoms (clarabel
//!   LPs), an independent cross-check of [`nuclear`];
//! - [`io`]: the JSON loader for user data and the `svm.json` writers (Frobenius W-SVM; nuclear
//!   and Frobenius W-SVMs side by side).
//!
//! Infeasible or malformed inputs are errors ([`SvmError`]), never a wrong W.

pub mod constraints;
pub mod io;
pub mod lp;
pub mod nuclear;
pub mod nuclear_cuts;
pub mod qp;

use crate::stats;
use serde::Serialize;

pub use constraints::{ConstraintLabel, MarginConstraints, RankOneConstraints, VectorConstraints};
pub use io::{
    nuclear_svm_report, read_token_problem, svm_report, write_json, write_svm_json, TokenProblem,
};
pub use lp::{l1_complementarity_margin, l1_solution_ranges, solve_l1, L1Kkt, L1Solution};
pub use nuclear::{
    solve_nuclear, solve_nuclear_diagonal, NuclearKkt, NuclearSettings, NuclearSolution,
};
pub use nuclear_cuts::solve_nuclear_cuts;
pub use qp::{solve_l2, L2Kkt, L2Solution, SvmMethod};

/// Tokens and queries of n sequences, as the max-margin programs take them.
#[derive(Debug, Clone, Copy)]
pub struct TokenView<'a> {
    pub n: usize,
    pub t: usize,
    pub d: usize,
    /// x_{i,t} = `x[(i*t + t)*d ..][..d]`.
    pub x: &'a [f64],
    /// q_i = `queries[i*d ..][..d]`.
    pub queries: &'a [f64],
}

impl TokenView<'_> {
    pub fn token(&self, i: usize, t: usize) -> &[f64] {
        let start = (i * self.t + t) * self.d;
        &self.x[start..start + self.d]
    }

    pub fn query(&self, i: usize) -> &[f64] {
        &self.queries[i * self.d..(i + 1) * self.d]
    }

    /// opt_i = argmax_t y_i uᵀx_{i,t}; a tie within 1e−12 of the row's score scale is an
    /// error naming the sequence.
    pub fn optimal_tokens(&self, y: &[f64], u: &[f64]) -> Result<Vec<usize>, SvmError> {
        (0..self.n)
            .map(|i| {
                let scores: Vec<f64> = (0..self.t)
                    .map(|t| y[i] * dot(u, self.token(i, t)))
                    .collect();
                let best = (0..self.t).fold(0, |b, t| if scores[t] > scores[b] { t } else { b });
                let scale = stats::max_abs(scores.iter());
                let tie =
                    (0..self.t).any(|t| t != best && scores[best] - scores[t] <= 1e-12 * scale);
                if tie || scale == 0.0 {
                    Err(SvmError::Invalid {
                        field: format!("opt[{i}]"),
                        reason: format!(
                            "sequence {i} has no unique optimal token under u (scores {scores:?}); \
                             give opt explicitly"
                        ),
                    })
                } else {
                    Ok(best)
                }
            })
            .collect()
    }
}

/// Why a max-margin program has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SvmError {
    /// Malformed input; `field` names the offending field (e.g. `X[2][1]`).
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// No w satisfies every margin constraint; `detail` says why (a certificate or the
    /// offending constraint).
    #[error("{program} infeasible: {detail}")]
    Infeasible { program: String, detail: String },
    /// A file could not be read or written.
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    /// The solver stopped without a certified answer.
    #[error("{program}: solver stopped with status {status}")]
    Solver { program: String, status: String },
}

pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// 1 − cos∠(a, b), computed as ‖a/‖a‖ − b/‖b‖‖²/2 (no cancellation below 1e−8).
pub fn one_minus_cos(a: &[f64], b: &[f64]) -> f64 {
    0.5 * direction_distance(a, b).powi(2)
}

/// ‖a/‖a‖ − b/‖b‖‖ (NaN if either vector is zero).
pub fn direction_distance(a: &[f64], b: &[f64]) -> f64 {
    let (na, nb) = (crate::flow::norm(a), crate::flow::norm(b));
    let sq: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x / na - y / nb).powi(2))
        .sum();
    sq.sqrt()
}

/// Margin summary of a w against constraints: min_k ⟨w, f_k⟩ and the normalized margin
/// min_k ⟨w, f_k⟩/‖w‖ (which max-margin solutions maximize, at 1/‖w_mm‖).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Margins {
    pub min: f64,
    pub normalized: f64,
}

pub fn margins<C: MarginConstraints + ?Sized>(c: &C, w: &[f64]) -> Margins {
    let min = stats::min(c.margins(w));
    Margins {
        min,
        normalized: min / crate::flow::norm(w),
    }
}

#[cfg(test)]
mod tests;

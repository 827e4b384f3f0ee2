//! Seed 000 (spec `000_histogram.md`): linear self-attention on histogram tasks and its reduction
//! to df-linear networks ("Towards analyzing self-attention via linear neural networks").
//!
//! - [`data`]: the tasks (matrix M), string sampling, counts, targets, the model output and the
//!   transformer loss in its raw and Lemma 3.1 forms (spec §1).
//! - [`moments`]: the third-moment tensor T3 as per-row moment matrices H_a, the row-quadratic
//!   loss form ℓ = ½ Σ_a Δ_aᵀ H_a Δ_a and the conditioning of the H_a (spec §1.4, R3, E16).
//! - [`layout`]: the canonical interleaved state z = \[q_1; v_1; …; q_d; v_d\], converters to and
//!   from (Q, v), the conserved β_i and the exact gradient-descent drift of β (spec §2.1, §2.4).
//! - [`df`], [`tf`]: the df-linear and transformer gradient flows (spec §2.2, §2.3).
//! - [`theorem2`]: the scaled 2-D system of Theorem 2 and its complete closed form (spec §2.5–2.6,
//!   R8, R12).
//! - [`theory`]: per-column df theory: the full closed-form df solution, Theorem 1's α, γ, T,
//!   asymptotic constants, escape times and condition numbers (spec R9, R11, D2–D4).
//! - [`landscape`]: stationary points of the df flow and their spectra, the bad set and
//!   (near-)bad initializations, the variational (KKT) characterization of the limit and the
//!   imbalanced initializations (spec R10, R11, D1, D5).

pub mod data;
pub mod df;
pub mod landscape;
pub mod layout;
pub mod moments;
pub mod tf;
pub mod theorem2;
pub mod theory;

pub use data::{task_matrix, HistogramData, Task};
pub use df::DfFlow;
pub use layout::{gd_beta_drift, state_from_qv, state_to_qv};
pub use moments::RowMoments;
pub use tf::TfFlow;
pub use theorem2::{Imbalance, Thm2ClosedForm, Thm2System};
pub use theory::{DfClosedForm, DfColumn};

/// Why a construction of the histogram module has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HistogramError {
    /// The requested point does not exist (e.g. a bad initialization with δ_i < 0, spec E17).
    #[error("no solution: {0}")]
    NoSolution(String),
    /// The arguments are inconsistent (dimensions, non-finite values, …).
    #[error("invalid input: {0}")]
    Invalid(String),
}

impl From<crate::analysis::AnalysisError> for HistogramError {
    fn from(e: crate::analysis::AnalysisError) -> Self {
        HistogramError::NoSolution(e.to_string())
    }
}

/// Brent's method from the shared analysis code, with errors in this module's terms.
fn brent_root(f: impl Fn(f64) -> f64, lo: f64, hi: f64, tol: f64) -> Result<f64, HistogramError> {
    Ok(crate::analysis::stationary::brent_root(f, lo, hi, tol)?)
}

#[cfg(test)]
mod testing;

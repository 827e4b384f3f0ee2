//! Seed 004 (spec `004_diagonal_incremental.md`): networks with diagonal weights and their
//! incremental (stagewise) learning from small initialization ("Transformers learn through
//! gradual rank increase", Boix-Adserà et al. 2023).
//!
//! - [`network`]: the β-loss trait (Definition 3.1, β = u ⊙ v) and the raw (u, v) gradient flow
//!   built from it by the chain rule, with the conserved c_i = u_i² − v_i² (spec §1.1, §2.1).
//! - [`linear`]: the diagonal linear network with square loss and the reference instances R1,
//!   R2, R2-degenerate (spec §1.2, §3.6).
//! - [`attention`]: the attention head with diagonal weights in its student–teacher task, and
//!   the full-matrix head of spec §5.4 (spec §1.2, §1.5, §2.2).
//! - [`transformer`]: the diagonal transformer of Example 3.2 (diagonal attention layers,
//!   frozen feed-forward layers; spec §1.2, §5.4).
//! - [`coords`], [`log_flow`]: the log layout ζ = ln w with conserved ln c (the primary
//!   formulation, any α), the rescaled clock, the reduced balanced flow (spec §2.3–2.5, §8.2).
//! - [`closed_form`]: the Riccati (CF1) and logistic (CF2) solutions in the log domain (§2.7).
//! - [`algorithm1`](mod@algorithm1), [`stage_b`](mod@stage_b), [`theory`]: Algorithm 1 with
//!   the paper's errata fixed, its stage solver (reduced flow, Newton polish, sign-constrained
//!   KKT check), per-stage diagnostics and the theory curves it defines (spec §3).
//! - [`events`]: root functions for stage transitions on either layout (spec §4, §8.4).
//!
//! Layouts: raw y = \[u; v\] ([`DiagonalNet`] with [`crate::flow::Descent`]; α ≳ 1e−6 only),
//! log ζ = ln w ([`LogFlow`], any α; convert with [`LogCoordinates`]), rescaled time
//! ([`RescaledTime`]), reduced balanced η = ln|β| ([`BalancedFlow`]).

pub mod algorithm1;
pub mod attention;
pub mod closed_form;
pub mod coords;
pub mod events;
pub mod linear;
pub mod log_flow;
pub mod network;
pub mod stage_b;
pub mod theory;
pub mod transformer;

pub use algorithm1::{
    algorithm1, time_until_active, Activation, Algorithm1Options, Flag, Schedule, Stage,
    StageDiagnostics, Termination,
};
pub use attention::{
    AttentionHead, AttentionSamples, DiagonalAttention, DiagonalScores, FactorizedAttention,
    LossScale, MatrixAttention, MatrixScores, ScoreValueMap,
};
pub use closed_form::{logistic_beta, RiccatiCoordinate};
pub use coords::{LogCoordinates, Orientation};
pub use events::{transition_times, Layout, TransitionEvent, TransitionEvents};
pub use linear::DiagLinear;
pub use log_flow::{BalancedFlow, LogFlow, RescaledTime};
pub use network::{g_vec, grad_beta_vec, hessian_block, BetaLoss, DiagonalNet};
pub use stage_b::{stage_b, DroppedCoordinate, StageBOptions, StageLimit};
pub use theory::finite_alpha_initial_b;
pub use transformer::{DiagTransformer, TransformerShape};

/// Why a construction or computation of the diagonal module has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DiagonalError {
    /// The arguments are inconsistent (dimensions, non-finite values, c = 0, …).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// An iterative computation stopped before meeting its tolerance.
    #[error("not converged: {0}")]
    NotConverged(String),
}

#[cfg(test)]
mod algorithm1_tests;
#[cfg(test)]
mod stage_times_tests;
#[cfg(test)]
mod testing;

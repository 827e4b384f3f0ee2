//! Seed 003 (spec `003_token_selection.md`): implicit bias and convergence rates of
//! self-attention, Φ(X) = uᵀXᵀsoftmax(X W q) with q the first token.
//!
//! - [`data`]: token data, scores γ, optimal tokens, Ass. 1–2 diagnostics and constants (§1.1).
//! - [`generators`]: ex1, ex1-orth, two-token, bad-init and the joint Gaussian model DM (§1.3).
//! - [`loss`]: exponential and logistic losses in the log domain.
//! - [`logdomain`]: signed-log arithmetic and the saturating-softmax identities (§8.2).
//! - [`fixed`]: W-only training as a gradient flow whose loss is L − L* (§1.4a).
//! - [`joint`]: joint (u, W) training (§1.4b).
//! - [`optim`]: GD, NGD (capped), Polyak, NGD-momentum and the joint Eq. (10) updates in the
//!   log domain (§2.1, §2.2).
//! - [`flows`]: normalized, log-time gradient and Polyak flows with GF/PF clocks and arc
//!   length, and the per-block normalized joint flow (§2.3, §8.3).
//!
//! The max-margin programs (W-SVM, u-SVM) are model-agnostic and live in
//! [`crate::analysis::svm`]; [`data::TokenData::view`] feeds them.

pub mod data;
mod eval;
pub mod fixed;
pub mod flows;
pub mod generators;
pub mod joint;
pub mod logdomain;
pub mod loss;
pub mod optim;

pub use data::{Assumptions, TokenData};
pub use fixed::{Attention, FixedDecoder, LogGradient};
pub use flows::{
    JointNormalization, JointNormalizedFlow, LogTimeGradientFlow, NormalizedFlow, PolyakFlow,
};
pub use generators::{Example1, GaussianJoint, Instance, OptPosition};
pub use joint::{JointLogGradient, JointModel};
pub use loss::Loss;
pub use optim::{FixedRule, FixedStepper, JointRule, JointStepper, Momentum, StepReport};

/// Why a token-selection construction has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenError {
    /// Inconsistent arguments (shapes, labels, non-finite values).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The data violate a structural requirement (e.g. a tie for the optimal token).
    #[error("degenerate data: {0}")]
    Degenerate(String),
}

#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod optim_tests;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

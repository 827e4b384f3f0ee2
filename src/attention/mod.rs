//! Softmax attention over token sequences, shared by the models that train it (below the
//! models: [`crate::models::token_select`] and [`crate::models::kq`] both build on it, neither
//! on the other). Φ(X) = uᵀXᵀsoftmax(X W q) with q a query token, as in spec 003 §1.1–§1.4a.
//!
//! - [`data`]: token data, scores γ, optimal tokens, Ass. 1–2 diagnostics and constants, and
//!   the [`Instance`] (data, decoder, optimal tokens) a generator returns.
//! - [`loss`]: exponential and logistic losses in the log domain.
//! - [`logdomain`]: signed-log arithmetic and the saturating-softmax identities (§8.2).
//! - [`fixed`]: W-only training with the decoder fixed, as a gradient flow whose loss is
//!   L − L* (§1.4a).
//!
//! The log-domain evaluation of the loss, its gradients and Hessian-vector product (`eval`)
//! serves both the fixed-decoder model here and the joint (u, W) model of
//! [`crate::models::token_select::joint`].

pub mod data;
pub(crate) mod eval;
pub mod fixed;
pub mod logdomain;
pub mod loss;

pub use data::{Assumptions, Instance, TokenData};
pub use fixed::{Attention, FixedDecoder, LogGradient};
pub use loss::Loss;

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
pub(crate) mod testing;
#[cfg(test)]
mod tests;

//! Seed 003 (spec `003_token_selection.md`): implicit bias and convergence rates of
//! self-attention, Φ(X) = uᵀXᵀsoftmax(X W q) with q the first token.
//!
//! The data, the losses, the log-domain arithmetic and the fixed-decoder model (§1.1–§1.4a)
//! are shared with the key–query model of seed 001 and live below the models, in
//! [`crate::attention`]; this module holds what is this paper's own:
//!
//! - [`generators`]: ex1, ex1-orth, two-token, bad-init and the joint Gaussian model DM (§1.3).
//! - [`joint`]: joint (u, W) training (§1.4b).
//! - [`optim`]: GD, NGD (capped), Polyak, NGD-momentum and the joint Eq. (10) updates in the
//!   log domain (§2.1, §2.2).
//! - [`flows`]: normalized, log-time gradient and Polyak flows with GF/PF clocks and arc
//!   length, and the per-block normalized joint flow (§2.3, §8.3).
//!
//! The max-margin programs (W-SVM, u-SVM) are model-agnostic and live in
//! [`crate::analysis::svm`]; [`crate::attention::TokenData::view`] feeds them.

pub mod flows;
pub mod generators;
pub mod joint;
pub mod optim;

pub use flows::{
    JointNormalization, JointNormalizedFlow, LogTimeGradientFlow, NormalizedFlow, PolyakFlow,
};
pub use generators::{Example1, GaussianJoint, OptPosition, PatchSignals};
pub use joint::{JointLogGradient, JointModel};
pub use optim::{FixedRule, FixedStepper, JointRule, JointStepper, Momentum, StepReport};

#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod optim_tests;
#[cfg(test)]
mod tests;

//! Seed 001 (spec `001_kq_nuclear_norm.md`): one-layer softmax attention Φ = vᵀXᵀσ(XKQᵀz) with
//! the key and query matrices trained separately, and gradient flow's implicit bias toward the
//! nuclear-norm max-margin solution (the combined W = KQᵀ goes to the Frobenius one instead).
//!
//! The combined-W model with exponential loss is seed 003's fixed-decoder model
//! ([`crate::models::token_select::FixedDecoder`] with [`crate::models::token_select::Loss`]
//! `Exponential`), so this module adds only what separate training brings:
//! - [`toys`]: the canonical datasets toy-1 … toy-4 of spec §5.1 (exact SVM values known).

pub mod toys;

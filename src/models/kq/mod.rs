//! Seed 001 (spec `001_kq_nuclear_norm.md`): one-layer softmax attention Φ = vᵀXᵀσ(XKQᵀz) with
//! the key and query matrices trained separately, and gradient flow's implicit bias toward the
//! nuclear-norm max-margin solution (the combined W = KQᵀ goes to the Frobenius one instead).
//!
//! The combined-W model with exponential loss is seed 003's fixed-decoder model
//! ([`crate::attention::FixedDecoder`] with [`crate::attention::Loss`]
//! `Exponential`), so this module adds only what separate training brings:
//! - [`toys`]: the canonical datasets toy-1 … toy-4 of spec §5.1 (exact SVM values known).
//! - [`generators`]: the random-A2 and random-A4 datasets of spec §5.1 and the resampling
//!   rule (draw until A1, A1-diag and A3 hold).
//! - [`assumptions`]: validators of Def. 3.1, A1, A1-diag, A2, A3 (with the threshold gap
//!   Δ*(n, L)), A4 (i)–(iii) with the aligned closed form, Def. 5.1, and the
//!   strict-complementarity margins of the SVM solutions (spec §1.4, §2.8, §4).
//! - [`full`]: the full parameterization K, Q ∈ ℝ^{d×d_e}, W = KQᵀ (loss, gradient and exact
//!   HVP by the chain rule through the combined-W model, balance KᵀK − QᵀQ, margin-normalized
//!   direction, origin linearization; spec §2.2–§2.6).
//! - [`log_time`]: the τ = ln(1 + t) gradient flow of any log-domain parameterization (§2.4).

pub mod assumptions;
// seed-001 diagonal models (wt-ka)
pub mod diagonal;
pub mod full;
pub mod generators;
pub mod log_time;
pub mod sinh;
pub mod toys;

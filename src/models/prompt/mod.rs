//! Seed 002 (spec `002_prompt_softmax.md`): prompt attention f(X) = φ(XWp)ᵀXv trained by
//! gradient descent, and how the softmax Jacobian J(z) = diag(z) − zzᵀ makes the problem
//! ill-conditioned when attention is sparse (large attention ratio R = max z / min z).
//!
//! - [`softmax`]: φ, log φ, ln R from logits, and J(z)u without forming J.
//! - [`data`]: samples, the synthetic teacher data (§1.2, common random numbers across σ_p) and
//!   the orthogonal-block data on which A2 holds (§1.5).
//! - [`model`]: f = φ(XWp)ᵀXv and its linear comparison, p-only or (p, v) training, squared
//!   loss, analytic gradient and Hessian-vector product, F(p) of eq. 12, R statistics.
//! - [`linear`]: the closed-form flow of the linear model with v frozen (§2.3).
//! - [`jacobian_spectrum`]: eigenvalues of J(z) (dense, and to full relative accuracy from the
//!   secular equation) and the facts of Lemma 1 with the interlacing extensions (§2.8, §3.1).
//! - [`simplex`]: losses ℓ̃(z) on the simplex (scalar model, C-quad), the simplex flow
//!   V(z) = −(1/N)J²∇ℓ̃ and the logit flow with exact Jacobians, the GD map of eq. (16) (§2.4–2.6).
//! - [`simplex_linearization`]: Theorem 2 on T = 𝟙^⊥: κ of J²H, the paper's bound (18) and the
//!   corrected two-sided bound (§3.6).
//! - [`attention_families`]: Gaussian-logit, dominant-token and Dirichlet attention vectors.
//! - [`pl_theory`]: Lemma 2 (PL constant, σ_min(F) under A2) and Theorem 1's constants in both
//!   readings (§3.2–3.4).
//! - [`two_token`]: the reduced two-token model (C-2tok, §2.7): per-sample logit-difference flow
//!   with exact Jacobian, its implicit closed form t(s), and the tail rate c(s*(1 − s*))².

pub mod attention_families;
pub mod data;
pub mod jacobian_spectrum;
pub mod linear;
pub mod model;
pub mod pl_theory;
pub mod rippled;
pub mod simplex;
pub mod simplex_linearization;
pub mod softmax;
pub mod two_token;

pub use data::{labelled, orthogonal_blocks, student_start, PromptData, Synthetic, SyntheticDraw};
pub use linear::LinearFlow;
pub use model::{Attention, AttentionStats, PromptModel, Trained};

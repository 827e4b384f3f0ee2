//! Seed 002 (spec `002_prompt_softmax.md`): prompt attention f(X) = φ(XWp)ᵀXv trained by
//! gradient descent, and how the softmax Jacobian J(z) = diag(z) − zzᵀ makes the problem
//! ill-conditioned when attention is sparse (large attention ratio R = max z / min z).
//!
//! - [`softmax`]: φ, log φ, ln R from logits, and J(z)u without forming J.

pub mod softmax;

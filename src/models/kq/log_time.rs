//! Gradient flow in the log clock τ = ln(1 + t) for losses whose gradient is known only at a
//! scale (spec 001 §2.4, §8): along the separable long-time flows L − L* ~ 1/t and ‖∇L‖ ~ 1/t,
//! so ∇L underflows f64 near t ≈ 1e308 (τ ≈ 709) while dθ/dτ = −e^τ ∇L stays O(1). A model
//! that returns its gradient as e^{−s}∇L with the log-scale s (and its Hessian-vector product at
//! a requested scale) is integrated to τ = 1e8 and beyond by [`LogTimeDescent`], whose
//! Jacobian action is the exact −e^τ ∇²L·u.
//!
//! Generic on purpose: the diagonal models ([`super::diagonal`]) use it, and so can the full
//! K, Q factorization (any parameterization θ ↦ W(θ) composed with the W-model's log-domain
//! gradient).

use crate::attention::FixedDecoder;
use crate::flow::VectorField;

/// A loss with its gradient and Hessian-vector product at a chosen scale (log domain).
pub trait ScaledGradient {
    /// Number of parameters.
    fn dim(&self) -> usize;
    /// Writes e^{−s}∇L(z) into `g` (an O(1) vector) and returns s; at an exact stationary
    /// point `g` is zero and s = −∞.
    fn grad_scaled(&self, z: &[f64], g: &mut [f64]) -> f64;
    /// Writes e^{−shift}∇²L(z)·u into `out` (exact, no finite differences).
    fn hvp_scaled(&self, z: &[f64], u: &[f64], shift: f64, out: &mut [f64]);
}

/// τ = ln(1 + t).
pub fn tau_of(t: f64) -> f64 {
    t.ln_1p()
}

/// t = e^τ − 1 (∞ past τ ≈ 709: report τ/ln 10 = log₁₀ t instead).
pub fn t_of(tau: f64) -> f64 {
    tau.exp_m1()
}

/// Gradient flow θ̇ = −∇L(θ) in the clock τ = ln(1 + t): dθ/dτ = −e^τ ∇L, formed as
/// −exp(τ + s)·(e^{−s}∇L) so that neither factor under- or overflows. Jacobian −e^τ ∇²L,
/// evaluated as the Hessian-vector product at scale e^{−τ}.
pub struct LogTimeDescent<'a, F: ?Sized>(pub &'a F);

impl<F: ScaledGradient + ?Sized> VectorField for LogTimeDescent<'_, F> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn rhs(&self, tau: f64, z: &[f64], dz: &mut [f64]) {
        let s = self.0.grad_scaled(z, dz);
        if s == f64::NEG_INFINITY {
            dz.iter_mut().for_each(|x| *x = 0.0);
            return;
        }
        let speed = (tau + s).exp();
        dz.iter_mut().for_each(|x| *x *= -speed);
    }
    fn jvp(&self, tau: f64, z: &[f64], u: &[f64], out: &mut [f64]) {
        self.0.hvp_scaled(z, u, -tau, out);
        out.iter_mut().for_each(|x| *x = -*x);
    }
}

/// The combined-W model: its log-domain gradient direction (unit vector) and ln‖∇L‖.
impl ScaledGradient for FixedDecoder {
    fn dim(&self) -> usize {
        crate::flow::GradientFlow::dim(self)
    }
    fn grad_scaled(&self, w: &[f64], g: &mut [f64]) -> f64 {
        self.unit_gradient(w, g)
    }
    fn hvp_scaled(&self, w: &[f64], v: &[f64], shift: f64, out: &mut [f64]) {
        FixedDecoder::hvp_scaled(self, w, v, shift, out)
    }
}

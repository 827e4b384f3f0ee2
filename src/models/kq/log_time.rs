//! Gradient flows in the log clock τ = ln(1 + t) for any parameterization whose gradient is
//! available in the log domain (spec 001 §2.4, §8): dz/dτ = −e^τ ∇L(z), formed as
//! −exp(τ + ln‖∇L‖)·∇L/‖∇L‖ so that neither factor under- or overflows when attention
//! saturates, with the exact Jacobian action −e^τ ∇²L·u (a scaled Hessian-vector product).
//!
//! Shared by the seed-001 parameterizations (combined W, full K/Q, diagonal): a model only
//! implements [`LogScaledGradient`]; [`LogTimeFlow`] is the [`VectorField`] the BDF integrator
//! takes. Unlike [`crate::models::token_select::LogTimeGradientFlow`] it carries no extra state.

use crate::flow::VectorField;
use crate::models::token_select::FixedDecoder;

/// A loss whose gradient and Hessian-vector product are available at a chosen scale.
pub trait LogScaledGradient {
    /// Number of parameters.
    fn dim(&self) -> usize;
    /// Writes ∇L/‖∇L‖ into `direction` and returns ln‖∇L‖ (−∞ with a zero direction at an
    /// exact stationary point).
    fn log_gradient(&self, z: &[f64], direction: &mut [f64]) -> f64;
    /// Writes e^{−shift} ∇²L(z)·v into `out`.
    fn hvp_scaled(&self, z: &[f64], v: &[f64], shift: f64, out: &mut [f64]);
}

impl LogScaledGradient for FixedDecoder {
    fn dim(&self) -> usize {
        crate::flow::GradientFlow::dim(self)
    }
    fn log_gradient(&self, z: &[f64], direction: &mut [f64]) -> f64 {
        self.gradient_direction(z, direction).log_norm
    }
    fn hvp_scaled(&self, z: &[f64], v: &[f64], shift: f64, out: &mut [f64]) {
        FixedDecoder::hvp_scaled(self, z, v, shift, out)
    }
}

/// The gradient flow of `model` in τ = ln(1 + t): dz/dτ = −e^τ ∇L(z), Jacobian −e^τ ∇²L.
pub struct LogTimeFlow<'a, M: ?Sized> {
    pub model: &'a M,
}

impl<'a, M: LogScaledGradient + ?Sized> LogTimeFlow<'a, M> {
    pub fn new(model: &'a M) -> Self {
        LogTimeFlow { model }
    }
}

/// τ = ln(1 + t).
pub fn tau_of(t: f64) -> f64 {
    t.ln_1p()
}

/// t = e^τ − 1 (∞ beyond τ ≈ 709: report log10 t = τ/ln 10 there).
pub fn t_of(tau: f64) -> f64 {
    tau.exp_m1()
}

impl<M: LogScaledGradient + ?Sized> VectorField for LogTimeFlow<'_, M> {
    fn dim(&self) -> usize {
        self.model.dim()
    }
    fn rhs(&self, tau: f64, z: &[f64], dz: &mut [f64]) {
        let log_norm = self.model.log_gradient(z, dz);
        let speed = if log_norm == f64::NEG_INFINITY {
            0.0
        } else {
            (tau + log_norm).exp()
        };
        dz.iter_mut().for_each(|x| *x *= -speed);
    }
    fn jvp(&self, tau: f64, z: &[f64], u: &[f64], out: &mut [f64]) {
        self.model.hvp_scaled(z, u, -tau, out);
        out.iter_mut().for_each(|x| *x = -*x);
    }
}

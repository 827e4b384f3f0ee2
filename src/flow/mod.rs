//! The engine: vector fields and gradient flows, their integration with diffsol, the papers'
//! discrete optimizers, and the trajectory type both produce.
//!
//! Two traits describe what can be integrated:
//! - [`VectorField`]: any autonomous or time-dependent ODE ż = f(t, z) with an exact
//!   Jacobian-vector product (the reduced systems of the papers are not gradient flows);
//! - [`GradientFlow`]: a loss ℓ with its gradient and exact Hessian-vector product. Its flow
//!   ż = −∇ℓ(z) is the vector field [`Descent`], whose Jacobian is −∇²ℓ.
//!
//! Implementations must not allocate in `rhs`, `grad`, `jvp` or `hvp`: they are called in the
//! integrators' inner loops.
//!
//! The gradient flow of ℓ(z) = ½ Σᵢ λᵢ zᵢ², whose solution is zᵢ(t) = e^{−λᵢt} zᵢ(0), with the
//! implicit Bdf method (it solves its Newton systems with the exact Hessian-vector product):
//!
//! ```
//! use attnflow::flow::{integrate_flow, linspace, GradientFlow, Method, OdeConfig, StopReason};
//!
//! struct Quadratic { lambda: Vec<f64> }
//! impl GradientFlow for Quadratic {
//!     fn dim(&self) -> usize { self.lambda.len() }
//!     fn loss(&self, z: &[f64]) -> f64 {
//!         0.5 * z.iter().zip(&self.lambda).map(|(z, l)| l * z * z).sum::<f64>()
//!     }
//!     fn grad(&self, z: &[f64], g: &mut [f64]) {
//!         for i in 0..z.len() { g[i] = self.lambda[i] * z[i]; }
//!     }
//!     fn hvp(&self, _z: &[f64], u: &[f64], out: &mut [f64]) {
//!         for i in 0..u.len() { out[i] = self.lambda[i] * u[i]; }
//!     }
//! }
//!
//! let q = Quadratic { lambda: vec![1.0, 1000.0] }; // stiff: rates 1 and 1000
//! let times = linspace(0.0, 2.0, 11);
//! let traj = integrate_flow(&q, &[1.0, 1.0], &times, &OdeConfig::new(Method::Bdf, 1e-10, 1e-12))
//!     .unwrap();
//! assert_eq!(traj.stop, StopReason::Success);
//! assert!((traj.last_state()[0] - (-2.0f64).exp()).abs() < 1e-8);
//! assert!(traj.loss.windows(2).all(|w| w[1] <= w[0])); // the loss never rises along the flow
//! ```

pub mod clock;
pub mod discrete;
mod krylov;
pub mod low_rank;
pub mod lu;
pub mod ode;
pub mod trajectory;

pub use clock::{integrate_log_time, LogClock};
pub use discrete::{gradient_descent, recorded_iterations, DiscreteConfig, Recording, StepRule};
pub use ode::{
    integrate, integrate_flow, linspace, logspace, Events, LinearSolver, Method, OdeConfig,
    TimeGrid,
};
pub use trajectory::{norm, Event, SolverStats, StopReason, Trajectory};

/// An ODE ż = f(t, z) with an exact Jacobian-vector product, as the implicit integrators need.
pub trait VectorField {
    /// Dimension of the state.
    fn dim(&self) -> usize;
    /// Writes f(t, z) into `dz`.
    fn rhs(&self, t: f64, z: &[f64], dz: &mut [f64]);
    /// Writes (∂f/∂z)(t, z) · u into `out`.
    fn jvp(&self, t: f64, z: &[f64], u: &[f64], out: &mut [f64]);
    /// Whether ∂f/∂z is symmetric everywhere (a gradient flow's −∇²ℓ): the implicit methods may
    /// then factorize their Newton matrices by Cholesky.
    fn jacobian_is_symmetric(&self) -> bool {
        false
    }
}

/// A training loss whose gradient flow ż = −∇ℓ(z) attnflow integrates.
pub trait GradientFlow {
    /// Number of parameters.
    fn dim(&self) -> usize;
    /// ℓ(z).
    fn loss(&self, z: &[f64]) -> f64;
    /// Writes ∇ℓ(z) into `g`.
    fn grad(&self, z: &[f64], g: &mut [f64]);
    /// Writes ∇²ℓ(z) · u into `out` (exact: analytic or forward-mode AD, never finite differences).
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]);
    /// Names of the conserved quantities the flow has (empty if none).
    fn invariant_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// Writes the conserved quantities at z into `out` (length `invariant_names().len()`).
    fn invariants(&self, _z: &[f64], _out: &mut [f64]) {}
}

/// The gradient flow ż = −∇ℓ(z) of a loss, as a vector field (Jacobian −∇²ℓ).
pub struct Descent<'a, F: ?Sized>(pub &'a F);

impl<F: GradientFlow + ?Sized> VectorField for Descent<'_, F> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
        self.0.grad(z, dz);
        dz.iter_mut().for_each(|x| *x = -*x);
    }
    fn jvp(&self, _t: f64, z: &[f64], u: &[f64], out: &mut [f64]) {
        self.0.hvp(z, u, out);
        out.iter_mut().for_each(|x| *x = -*x);
    }
    fn jacobian_is_symmetric(&self) -> bool {
        true
    }
}

/// Why an integration or an optimizer run did not reach its end.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("{method} failed at t = {t_reached:.6e} (asked for t = {t_end:.6e}): {reason}")]
    SolverFailed {
        method: String,
        t_reached: f64,
        t_end: f64,
        reason: String,
    },
    #[error("non-finite {quantity} at t = {t:.6e}: the run stopped there")]
    NonFinite { quantity: String, t: f64 },
    #[error(
        "gradient descent diverged at step {step} (t = {t:.6e}): loss {loss:.3e} grew past \
         {factor:.0e} × its initial value {loss0:.3e}; the step size η = {eta:.3e} is too large"
    )]
    Diverged {
        step: usize,
        t: f64,
        loss: f64,
        loss0: f64,
        factor: f64,
        eta: f64,
    },
    #[error("{0}")]
    Invalid(String),
}

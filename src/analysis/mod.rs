//! Model-agnostic mathematics applied to flows and trajectories.
//!
//! - [`linearize`]: dense Hessians and Jacobians from exact Hessian-/Jacobian-vector products,
//!   symmetric and general eigenvalues, inertia and condition numbers with zero modes excluded;
//! - [`stationary`]: stationary points (minima and saddles) by damped Newton with the exact
//!   Hessian, their Morse index, and a bracketed scalar root finder;
//! - [`fit`]: log-slope fits on windows, local slopes and level crossings of sampled curves;
//! - [`stages`]: plateaus and the drops of staircase losses;
//! - [`spectra`]: singular values, stable, effective and numerical rank, nuclear norm;
//! - [`svm`]: max-margin programs over token data (Frobenius W-SVM and u-SVM as QPs, ℓ1 /
//!   diagonal SVM as an LP, nuclear-norm SVM) with KKT certificates, and their JSON I/O.
//!
//! Everything here works on plain slices and `nalgebra` matrices, so every model shares it.
//!
//! The Hessian of a loss from its exact Hessian-vector products, its spectrum and condition
//! number — here ℓ(z) = ½(z₀² + 100 z₁²), whose Hessian is diag(1, 100):
//!
//! ```
//! use attnflow::analysis::linearize::{conditioning, hessian, inertia, symmetric_eigenvalues};
//! use attnflow::flow::GradientFlow;
//!
//! struct Valley;
//! impl GradientFlow for Valley {
//!     fn dim(&self) -> usize { 2 }
//!     fn loss(&self, z: &[f64]) -> f64 { 0.5 * (z[0] * z[0] + 100.0 * z[1] * z[1]) }
//!     fn grad(&self, z: &[f64], g: &mut [f64]) { g[0] = z[0]; g[1] = 100.0 * z[1]; }
//!     fn hvp(&self, _z: &[f64], u: &[f64], out: &mut [f64]) { out[0] = u[0]; out[1] = 100.0 * u[1]; }
//! }
//!
//! let h = hessian(&Valley, &[0.3, -0.2]).unwrap();
//! assert_eq!(h.asymmetry, 0.0);
//! let spectrum = symmetric_eigenvalues(&h.matrix).unwrap();
//! assert_eq!(spectrum, vec![1.0, 100.0]);
//! let c = conditioning(&spectrum, 1e-10).unwrap();
//! assert_eq!(c.kappa, 100.0);
//! assert_eq!(inertia(&spectrum, 1e-10).positive, 2);
//! ```

pub mod fit;
pub mod linearize;
pub mod spectra;
pub mod stages;
pub mod stationary;
pub mod svm;

/// Why an analysis routine could not produce its result.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// The inputs are inconsistent (lengths, ordering, empty or non-positive data).
    #[error("{0}")]
    Invalid(String),
    /// A value the routine depends on is NaN or infinite.
    #[error("non-finite {what}")]
    NonFinite { what: String },
    /// A scalar root was asked for on a bracket without a sign change.
    #[error(
        "no sign change on [{a:.6e}, {b:.6e}]: f(a) = {fa:.6e}, f(b) = {fb:.6e}; the bracket \
         holds no root (or an even number of them)"
    )]
    NoSignChange { a: f64, b: f64, fa: f64, fb: f64 },
    /// An iterative method stopped before meeting its tolerance.
    #[error("{method} did not converge after {iterations} iterations: {detail}")]
    NotConverged {
        method: String,
        iterations: usize,
        detail: String,
    },
    /// The Newton search for a stationary point stopped before ‖∇ℓ‖ ≤ tol; `last` is the
    /// final iterate with its Hessian spectrum, for diagnostics.
    #[error(
        "stationary-point search ({mode:?}) stopped after {iterations} iterations with \
         ‖∇ℓ‖ = {grad_norm:.3e} > {grad_tol:.1e}: {reason}"
    )]
    StationaryNotFound {
        mode: stationary::Target,
        iterations: usize,
        grad_norm: f64,
        grad_tol: f64,
        reason: String,
        last: Box<stationary::StationaryPoint>,
    },
}

/// Test fixtures shared by the analysis tests: losses written once, generically over num-dual
/// numbers, so that their gradients and Hessians are exact forward-mode derivatives.
#[cfg(test)]
pub(crate) mod testing {
    use crate::flow::GradientFlow;
    use nalgebra::DVector;
    use num_dual::{Dual2DVec64, DualDVec64, DualNum};

    /// n equally spaced points from `from` to `to`.
    pub(crate) fn grid(from: f64, to: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| from + (to - from) * i as f64 / (n - 1) as f64)
            .collect()
    }

    /// A scalar function of a vector, generic over the number type.
    pub(crate) trait Objective {
        fn dim(&self) -> usize;
        fn eval<T: DualNum<f64>>(&self, z: &[T]) -> T;
    }

    /// The gradient flow of an [`Objective`], differentiated by num-dual.
    pub(crate) struct AutoDiff<O>(pub O);

    impl<O: Objective> GradientFlow for AutoDiff<O> {
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn loss(&self, z: &[f64]) -> f64 {
            self.0.eval(z)
        }
        fn grad(&self, z: &[f64], g: &mut [f64]) {
            let (_, grad) = num_dual::gradient(
                |x: DVector<DualDVec64>| self.0.eval(x.as_slice()),
                &DVector::from_column_slice(z),
            );
            g.copy_from_slice(grad.as_slice());
        }
        fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
            let (_, _, hess) = num_dual::hessian(
                |x: DVector<Dual2DVec64>| self.0.eval(x.as_slice()),
                &DVector::from_column_slice(z),
            );
            let hu = hess * DVector::from_column_slice(u);
            out.copy_from_slice(hu.as_slice());
        }
    }

    /// Rosenbrock's function (1 − x)² + b (y − x²)²: one minimum at (1, 1), Hessian there
    /// [[2 + 8b, −4b], [−4b, 2b]].
    pub(crate) struct Rosenbrock {
        pub b: f64,
    }

    impl Objective for Rosenbrock {
        fn dim(&self) -> usize {
            2
        }
        fn eval<T: DualNum<f64>>(&self, z: &[T]) -> T {
            let (x, y) = (z[0].clone(), z[1].clone());
            (-x.clone() + 1.0).powi(2) + (y - x.powi(2)).powi(2) * self.b
        }
    }

    /// The double well (x² − 1)² + y²: minima (±1, 0) with Hessian diag(8, 2), and a saddle at
    /// the origin with Hessian diag(−4, 2) (Morse index 1).
    pub(crate) struct DoubleWell;

    impl Objective for DoubleWell {
        fn dim(&self) -> usize {
            2
        }
        fn eval<T: DualNum<f64>>(&self, z: &[T]) -> T {
            (z[0].powi(2) - 1.0).powi(2) + z[1].powi(2)
        }
    }

    /// The one-column df-linear loss ½(v q − m)² (spec 000 with d = 1): minima on the hyperbola
    /// v q = m, each with Hessian eigenvalues {0, q² + v²} (the zero mode is the rescaling
    /// symmetry), and a saddle at the origin with eigenvalues ±m.
    pub(crate) struct Hyperbola {
        pub m: f64,
    }

    impl Objective for Hyperbola {
        fn dim(&self) -> usize {
            2
        }
        fn eval<T: DualNum<f64>>(&self, z: &[T]) -> T {
            (z[0].clone() * z[1].clone() - self.m).powi(2) * 0.5
        }
    }
}

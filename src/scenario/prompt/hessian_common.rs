//! What the Hessian scenarios of seed 002 share (spec 002 §6 items 9, 10, 14, 16): the dense
//! Hessian of the prompt model assembled from its exact Hessian-vector products, its spectrum
//! and condition number, and a plain GD loop that stops at a loss floor.

use nalgebra::DMatrix;

use crate::analysis::linearize::{conditioning, hessian, symmetric_eigenvalues};
use crate::flow::GradientFlow;
use crate::scenario::RunError;

/// Eigenvalues (ascending) of ∇²L at θ, assembled column by column from `hvp` (no finite
/// differences) and symmetrized.
pub fn hessian_eigenvalues<F: GradientFlow + ?Sized>(
    flow: &F,
    theta: &[f64],
) -> Result<Vec<f64>, RunError> {
    hessian_spectrum(flow, theta).map(|(_, eig)| eig)
}

/// The dense (symmetrized) ∇²L at θ from `hvp`, and its eigenvalues (ascending).
pub fn hessian_spectrum<F: GradientFlow + ?Sized>(
    flow: &F,
    theta: &[f64],
) -> Result<(DMatrix<f64>, Vec<f64>), RunError> {
    let h = hessian(flow, theta).map_err(|e| RunError::Other(format!("Hessian: {e}")))?;
    let eig = symmetric_eigenvalues(&h.matrix)
        .map_err(|e| RunError::Other(format!("Hessian spectrum: {e}")))?;
    Ok((h.matrix, eig))
}

/// κ = max|λ| / min|λ| of a spectrum (all modes; the prompt model has no symmetry zero modes).
pub fn kappa(eigenvalues: &[f64]) -> Result<f64, RunError> {
    conditioning(eigenvalues, 0.0)
        .map(|c| c.kappa)
        .map_err(|e| RunError::Other(format!("condition number: {e}")))
}

/// A GD run θ_{k+1} = θ_k − η∇L(θ_k) with the loss of every iterate.
pub struct GdRun {
    /// L(θ_k), k = 0, 1, …, iterations.
    pub loss: Vec<f64>,
    pub theta: Vec<f64>,
    /// Iterations done (stops early once L < `loss_floor`).
    pub iterations: usize,
}

/// GD at constant η from θ₀ until L < `loss_floor` or `max_iterations` steps. A non-finite loss
/// is an error naming the iteration.
pub fn gd_until<F: GradientFlow + ?Sized>(
    flow: &F,
    theta0: &[f64],
    eta: f64,
    loss_floor: f64,
    max_iterations: usize,
) -> Result<GdRun, RunError> {
    let mut theta = theta0.to_vec();
    let mut g = vec![0.0; theta.len()];
    let mut loss = vec![flow.loss(&theta)];
    let mut k = 0;
    while k < max_iterations && *loss.last().unwrap() >= loss_floor {
        flow.grad(&theta, &mut g);
        theta.iter_mut().zip(&g).for_each(|(t, gi)| *t -= eta * gi);
        k += 1;
        let l = flow.loss(&theta);
        if !l.is_finite() {
            return Err(RunError::Other(format!(
                "GD at η = {eta}: non-finite loss at iteration {k}"
            )));
        }
        loss.push(l);
    }
    Ok(GdRun {
        loss,
        theta,
        iterations: k,
    })
}

//! Shared by the simplex scenarios of seed 002 (lemma1-softmax-jacobian, eq16-simplex-map,
//! thm2-linearization, thm2-condition-bound): the (C-quad) instances and the relative matrix error.

use nalgebra::DMatrix;
use rand::Rng;

use crate::models::prompt::attention_families::Attention;
use crate::models::prompt::simplex::QuadLoss;
use crate::stats;

/// max|a − b| / max|b|.
pub fn rel_matrix_error(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    stats::max_abs((a - b).iter()) / stats::max_abs(b.iter())
}

/// A (C-quad) instance (spec §1.5): z* = φ(s·g) with Gaussian g, A random SPD with condition
/// number `condition`, linear term c𝟙ᵀz.
pub fn quad_instance<R: Rng + ?Sized>(
    n: usize,
    c: f64,
    condition: f64,
    zstar_scale: f64,
    rng: &mut R,
) -> QuadLoss {
    let z_star = Attention::gaussian_logits(n, zstar_scale, rng).z;
    QuadLoss::random(z_star, c, condition, rng)
}

//! Shared by the simplex scenarios of seed 002 (lemma1-softmax-jacobian, eq16-simplex-map,
//! thm2-linearization, thm2-condition-bound): the (C-quad) instances and NaN-aware maxima.

use nalgebra::DMatrix;
use rand::Rng;

use crate::models::prompt::attention_families::Attention;
use crate::models::prompt::simplex::QuadLoss;

/// max(a, b) that propagates NaN (a NaN measurement must fail its check, and f64::max drops it).
pub fn worst(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// The NaN-propagating maximum of `values` (0 for none).
pub fn worst_of(values: impl IntoIterator<Item = f64>) -> f64 {
    values.into_iter().fold(0.0, worst)
}

/// max|a − b| / max|b|.
pub fn rel_matrix_error(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    (a - b).amax() / b.amax()
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

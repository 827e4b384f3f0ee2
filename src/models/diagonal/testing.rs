//! Test support: forward-mode-AD references (num-dual) for the analytic gradients and
//! Hessian-vector products of this module.

use num_dual::DualNum;

use crate::autodiff::ad_grad_hvp;
pub(crate) use crate::autodiff::rel_err;
use crate::stats;

/// A scalar function written once, generically over dual numbers, independently of the code
/// under test.
pub(crate) trait Reference {
    fn dim(&self) -> usize;
    fn eval<T: DualNum<f64> + Copy>(&self, z: &[T]) -> T;
}

/// (∇f(z), ∇²f(z)·dir) by forward-mode AD of the reference.
pub(crate) fn autodiff_grad_hvp(
    f: &impl Reference,
    z: &[f64],
    dir: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(z.len(), f.dim());
    ad_grad_hvp(|w| f.eval(w), |w| f.eval(w), z, dir)
}

/// max_j |a_j − b_j|.
pub(crate) fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    stats::max_abs(a.iter().zip(b).map(|(x, y)| x - y))
}

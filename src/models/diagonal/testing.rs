//! Test support: forward-mode-AD references (num-dual) for the analytic gradients and
//! Hessian-vector products of this module.

use num_dual::{Dual64, DualNum, HyperDual64};

/// A scalar function written once, generically over dual numbers, independently of the code
/// under test.
pub(crate) trait Reference {
    fn dim(&self) -> usize;
    fn eval<T: DualNum<f64> + Copy>(&self, z: &[T]) -> T;
}

/// (∇f(z), ∇²f(z)·dir) by forward-mode AD: one dual and one hyper-dual pass per coordinate.
pub(crate) fn autodiff_grad_hvp(
    f: &impl Reference,
    z: &[f64],
    dir: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let n = f.dim();
    assert_eq!(z.len(), n);
    let mut grad = vec![0.0; n];
    let mut hvp = vec![0.0; n];
    for j in 0..n {
        let dual: Vec<Dual64> = (0..n)
            .map(|k| Dual64::new(z[k], if k == j { 1.0 } else { 0.0 }))
            .collect();
        grad[j] = f.eval(&dual).eps;
        let hyper: Vec<HyperDual64> = (0..n)
            .map(|k| HyperDual64::new(z[k], if k == j { 1.0 } else { 0.0 }, dir[k], 0.0))
            .collect();
        hvp[j] = f.eval(&hyper).eps1eps2;
    }
    (grad, hvp)
}

/// max_j |a_j − b_j| / max_j |b_j|.
pub(crate) fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
    let diff = a
        .iter()
        .zip(b)
        .fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()));
    diff / scale
}

/// max_j |a_j − b_j|.
pub(crate) fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()))
}

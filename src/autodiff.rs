//! Test support shared by every model: forward-mode AD (num-dual) references for analytic
//! gradients and Hessian-vector products.

use crate::stats;
use num_dual::{Dual64, HyperDual64};

/// (∇f(z), ∇²f(z)·v) by forward-mode AD: one dual pass (`f`) and one hyper-dual pass (`fh`) per
/// coordinate. `f` and `fh` are the same function, written once generically over `DualNum`.
pub(crate) fn ad_grad_hvp(
    f: impl Fn(&[Dual64]) -> Dual64,
    fh: impl Fn(&[HyperDual64]) -> HyperDual64,
    z: &[f64],
    v: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let n = z.len();
    assert_eq!(v.len(), n);
    let mut grad = vec![0.0; n];
    let mut hvp = vec![0.0; n];
    for j in 0..n {
        let unit = |k: usize| if k == j { 1.0 } else { 0.0 };
        let dual: Vec<Dual64> = (0..n).map(|k| Dual64::new(z[k], unit(k))).collect();
        grad[j] = f(&dual).eps;
        let hyper: Vec<HyperDual64> = (0..n)
            .map(|k| HyperDual64::new(z[k], unit(k), v[k], 0.0))
            .collect();
        hvp[j] = fh(&hyper).eps1eps2;
    }
    (grad, hvp)
}

/// max_j |a_j − b_j| / max_j |b_j|.
pub(crate) fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let max_abs = |x: &mut dyn Iterator<Item = f64>| stats::max_abs(x);
    max_abs(&mut a.iter().zip(b).map(|(x, y)| x - y)) / max_abs(&mut b.iter().copied())
}

//! Test support: an independent forward-mode-AD reference for row-quadratic losses of
//! W = Q Diag(v) (ℓ_df, ℓ_tf and Lemma A.1's generalization) and random states.

use nalgebra::DMatrix;
use num_dual::DualNum;
use rand::Rng;
use rand_distr::StandardNormal;

use super::layout::{q_index, v_index};
use super::moments::RowMoments;
use crate::flow::GradientFlow;

/// Entries i.i.d. N(0, scale²).
pub(crate) fn gaussian_vec(rng: &mut impl Rng, len: usize, scale: f64) -> Vec<f64> {
    (0..len)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

/// ℓ = ½ Σ_a Σ_{b,b'} H_a\[b,b'\] Δ\[a,b\] Δ\[a,b'\], Δ = Q Diag(v) − M, written directly from the
/// definition (no shared code with the flows) for any dual-number type.
pub(crate) fn reference_loss<T: DualNum<f64> + Copy>(
    z: &[T],
    m: &DMatrix<f64>,
    h: &RowMoments,
) -> T {
    let d = m.nrows();
    let delta = |a: usize, b: usize| z[q_index(d, a, b)] * z[v_index(d, b)] - m[(a, b)];
    let mut total = T::from(0.0);
    for a in 0..d {
        for b in 0..d {
            for bp in 0..d {
                total += delta(a, b) * delta(a, bp) * h.get(a, b, bp);
            }
        }
    }
    total * 0.5
}

use crate::autodiff::ad_grad_hvp;
pub(crate) use crate::autodiff::rel_err;

/// Relative errors (loss, gradient, hvp) of `flow` against forward-mode AD of
/// [`reference_loss`] at z in direction u.
pub(crate) fn autodiff_errors(
    flow: &impl GradientFlow,
    m: &DMatrix<f64>,
    h: &RowMoments,
    z: &[f64],
    u: &[f64],
) -> (f64, f64, f64) {
    let n = z.len();
    let (grad_ad, hvp_ad) = ad_grad_hvp(
        |w| reference_loss(w, m, h),
        |w| reference_loss(w, m, h),
        z,
        u,
    );
    let loss_ad = reference_loss(z, m, h);
    let mut grad = vec![0.0; n];
    let mut hvp = vec![0.0; n];
    flow.grad(z, &mut grad);
    flow.hvp(z, u, &mut hvp);
    (
        (flow.loss(z) - loss_ad).abs() / loss_ad,
        rel_err(&grad, &grad_ad),
        rel_err(&hvp, &hvp_ad),
    )
}

/// Classical fixed-step RK4 for `field` from z0 over \[0, t_end\] in `steps` steps; returns the
/// state after every `record_every` steps (and the initial state), with its time.
pub(crate) fn rk4(
    field: &impl crate::flow::VectorField,
    z0: &[f64],
    t_end: f64,
    steps: usize,
    record_every: usize,
) -> Vec<(f64, Vec<f64>)> {
    let n = z0.len();
    let h = t_end / steps as f64;
    let mut z = z0.to_vec();
    let (mut k1, mut k2, mut k3, mut k4, mut tmp) = (
        vec![0.0; n],
        vec![0.0; n],
        vec![0.0; n],
        vec![0.0; n],
        vec![0.0; n],
    );
    let mut out = vec![(0.0, z.clone())];
    for step in 0..steps {
        let t = step as f64 * h;
        field.rhs(t, &z, &mut k1);
        tmp.iter_mut()
            .zip(&z)
            .zip(&k1)
            .for_each(|((o, x), k)| *o = x + 0.5 * h * k);
        field.rhs(t + 0.5 * h, &tmp, &mut k2);
        tmp.iter_mut()
            .zip(&z)
            .zip(&k2)
            .for_each(|((o, x), k)| *o = x + 0.5 * h * k);
        field.rhs(t + 0.5 * h, &tmp, &mut k3);
        tmp.iter_mut()
            .zip(&z)
            .zip(&k3)
            .for_each(|((o, x), k)| *o = x + h * k);
        field.rhs(t + h, &tmp, &mut k4);
        for i in 0..n {
            z[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
        }
        if (step + 1) % record_every == 0 {
            out.push(((step + 1) as f64 * h, z.clone()));
        }
    }
    out
}

//! Dynamics on the simplex under A2 (spec 002 §2.4–2.6): a loss ℓ̃(z) of the attention vector,
//! its simplex flow ż = V(z) = −(1/N)J(z)²∇ℓ̃(z), the logit-space flow
//! ẇ = −(1/N)J(φ(w))∇ℓ̃(φ(w)) it comes from, both as [`VectorField`]s with exact Jacobians, and
//! the exact discrete GD map z ↦ φ(log z − (η/N)J∇ℓ̃) of eq. (16).
//!
//! Derivatives used throughout (DJ\[h\] = d/dε J(z + εh)):
//! - DJ\[h\]x = h⊙x − h(zᵀx) − z(hᵀx);
//! - DV(z)h = −(1/N)(J²Hh + DJ\[h\]Jg + J·DJ\[h\]g), g = ∇ℓ̃, H = ∇²ℓ̃ (§2.6);
//! - for the logit flow, with h = Ju (so that dz = h): −(1/N)(DJ\[h\]g + JHh);
//! - D²φ(w)\[h,h\] = z⊙((h − zᵀh𝟙)² − hᵀJh) (the second-order term of eq. 16, from (41)).

use std::cell::RefCell;

use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::StandardNormal;

use super::softmax::{jacobian_apply, softmax_into};
use crate::analysis::AnalysisError;
use crate::flow::VectorField;

/// A loss ℓ̃ on the simplex (defined on a neighbourhood in ℝⁿ) with exact derivatives.
pub trait SimplexLoss {
    /// n, the number of tokens.
    fn dim(&self) -> usize;
    /// ℓ̃(z).
    fn value(&self, z: &[f64]) -> f64;
    /// Writes ∇ℓ̃(z) into `g`.
    fn grad(&self, z: &[f64], g: &mut [f64]);
    /// Writes ∇²ℓ̃(z)·h into `out`.
    fn hvp(&self, z: &[f64], h: &[f64], out: &mut [f64]);
    /// The dense Hessian ∇²ℓ̃(z), column by column from `hvp`.
    fn hessian(&self, z: &[f64]) -> DMatrix<f64> {
        let n = self.dim();
        let mut m = DMatrix::zeros(n, n);
        let (mut unit, mut col) = (vec![0.0; n], vec![0.0; n]);
        for j in 0..n {
            unit[j] = 1.0;
            self.hvp(z, &unit, &mut col);
            m.column_mut(j).copy_from_slice(&col);
            unit[j] = 0.0;
        }
        m
    }
}

/// The paper's per-sample loss ℓ̃(z) = ½(zᵀa − y)² (§1.1, squared loss): ∇ℓ̃ = (zᵀa − y)a,
/// ∇²ℓ̃ = aaᵀ (rank one, so μ = 0 for n ≥ 2 and Theorem 2 never applies, E11).
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarLoss {
    /// The values a = Xv.
    pub a: Vec<f64>,
    /// The label y.
    pub y: f64,
}

impl ScalarLoss {
    /// zᵀa − y.
    pub fn residual(&self, z: &[f64]) -> f64 {
        dot(z, &self.a) - self.y
    }
}

impl SimplexLoss for ScalarLoss {
    fn dim(&self) -> usize {
        self.a.len()
    }
    fn value(&self, z: &[f64]) -> f64 {
        0.5 * self.residual(z).powi(2)
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let r = self.residual(z);
        g.iter_mut().zip(&self.a).for_each(|(gj, aj)| *gj = r * aj);
    }
    fn hvp(&self, _z: &[f64], h: &[f64], out: &mut [f64]) {
        let ah = dot(&self.a, h);
        out.iter_mut().zip(&self.a).for_each(|(o, aj)| *o = ah * aj);
    }
}

/// (C-quad) ℓ̃(z) = ½(z − z*)ᵀA(z − z*) + c𝟙ᵀz with A ≻ 0 and z* interior (§1.5): ∇ℓ̃(z*) = c𝟙,
/// so z* is the isolated interior equilibrium of the simplex flow, with μ = λ_min(A) > 0.
#[derive(Debug, Clone, PartialEq)]
pub struct QuadLoss {
    matrix: DMatrix<f64>,
    z_star: Vec<f64>,
    c: f64,
}

impl QuadLoss {
    /// Checks that A is square, symmetric (to 1e-12 relative), of z*'s size, and z* > 0.
    pub fn new(matrix: DMatrix<f64>, z_star: Vec<f64>, c: f64) -> Result<Self, AnalysisError> {
        let n = z_star.len();
        if matrix.nrows() != n || matrix.ncols() != n || n == 0 {
            return Err(AnalysisError::Invalid(format!(
                "A is {}×{} but z* has length {n}",
                matrix.nrows(),
                matrix.ncols()
            )));
        }
        if (&matrix - matrix.transpose()).amax() > 1e-12 * matrix.amax() {
            return Err(AnalysisError::Invalid("A must be symmetric".into()));
        }
        if z_star.iter().any(|&x| !(x.is_finite() && x > 0.0)) || !c.is_finite() {
            return Err(AnalysisError::Invalid(
                "z* must lie in the open simplex and c be finite".into(),
            ));
        }
        Ok(QuadLoss { matrix, z_star, c })
    }

    /// A = [`random_spd`] with condition number `condition`.
    pub fn random<R: Rng + ?Sized>(z_star: Vec<f64>, c: f64, condition: f64, rng: &mut R) -> Self {
        let a = random_spd(z_star.len(), condition, rng);
        QuadLoss::new(a, z_star, c).expect("a random SPD matrix of z*'s size")
    }

    pub fn matrix(&self) -> &DMatrix<f64> {
        &self.matrix
    }
    pub fn z_star(&self) -> &[f64] {
        &self.z_star
    }
    pub fn c(&self) -> f64 {
        self.c
    }
}

impl SimplexLoss for QuadLoss {
    fn dim(&self) -> usize {
        self.z_star.len()
    }
    fn value(&self, z: &[f64]) -> f64 {
        let n = self.dim();
        let d = |j: usize| z[j] - self.z_star[j];
        let quad: f64 = (0..n)
            .map(|i| d(i) * (0..n).map(|j| self.matrix[(i, j)] * d(j)).sum::<f64>())
            .sum();
        0.5 * quad + self.c * z.iter().sum::<f64>()
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        for (i, gi) in g.iter_mut().enumerate() {
            *gi = self.c
                + (0..z.len())
                    .map(|j| self.matrix[(i, j)] * (z[j] - self.z_star[j]))
                    .sum::<f64>();
        }
    }
    fn hvp(&self, _z: &[f64], h: &[f64], out: &mut [f64]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = (0..h.len()).map(|j| self.matrix[(i, j)] * h[j]).sum();
        }
    }
}

/// A random symmetric positive definite n×n matrix QΛQᵀ with condition number `condition`: Q
/// Haar-orthogonal (QR of a Gaussian matrix, signs fixed), λ₁ = 1, λ_n = `condition` and the
/// others log-uniform in between.
pub fn random_spd<R: Rng + ?Sized>(n: usize, condition: f64, rng: &mut R) -> DMatrix<f64> {
    let gauss = DMatrix::from_fn(n, n, |_, _| rng.sample::<f64, _>(StandardNormal));
    let qr = gauss.qr();
    let signs = qr.r().diagonal().map(|r| if r < 0.0 { -1.0 } else { 1.0 });
    let q = qr.q() * DMatrix::from_diagonal(&signs);
    let eig = DVector::from_fn(n, |i, _| match i {
        0 => 1.0,
        _ if i == n - 1 => condition,
        _ => condition.powf(rng.random::<f64>()),
    });
    let a = &q * DMatrix::from_diagonal(&eig) * q.transpose();
    (&a + a.transpose()) * 0.5
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// out = DJ(z)\[h\]·x = h⊙x − h(zᵀx) − z(hᵀx), the derivative of J(z)x along h.
pub fn jacobian_derivative_apply(z: &[f64], h: &[f64], x: &[f64], out: &mut [f64]) {
    let (zx, hx) = (dot(z, x), dot(h, x));
    for j in 0..out.len() {
        out[j] = h[j] * (x[j] - zx) - z[j] * hx;
    }
}

/// out = D²φ(w)[h, h] at z = φ(w): z⊙((h − zᵀh𝟙)² − hᵀJh), the second-order term of eq. (16)
/// written without the entrywise second derivatives (41).
pub fn softmax_second_derivative(z: &[f64], h: &[f64], out: &mut [f64]) {
    let zh = dot(z, h);
    let h_jh: f64 = z.iter().zip(h).map(|(zj, hj)| zj * (hj - zh).powi(2)).sum();
    for j in 0..out.len() {
        out[j] = z[j] * ((h[j] - zh).powi(2) - h_jh);
    }
}

/// Work space of the flows (the integrators call them in their inner loops).
#[derive(Debug, Clone)]
struct Scratch {
    z: Vec<f64>,
    g: Vec<f64>,
    a: Vec<f64>,
    b: Vec<f64>,
}

/// The simplex flow ż = V(z) = −(1/N)J(z)²∇ℓ̃(z) of N decoupled samples (A2), with Jacobian
/// DV(z) (§2.6). The simplex is invariant (𝟙ᵀV = 0) and so are its faces.
#[derive(Debug)]
pub struct SimplexFlow<'a, L: SimplexLoss + ?Sized> {
    loss: &'a L,
    inv_samples: f64,
    scratch: RefCell<Scratch>,
}

impl<'a, L: SimplexLoss + ?Sized> SimplexFlow<'a, L> {
    /// The flow of `loss` with the 1/N of N samples.
    pub fn new(loss: &'a L, samples: usize) -> Self {
        let n = loss.dim();
        SimplexFlow {
            loss,
            inv_samples: 1.0 / samples as f64,
            scratch: RefCell::new(Scratch {
                z: vec![0.0; n],
                g: vec![0.0; n],
                a: vec![0.0; n],
                b: vec![0.0; n],
            }),
        }
    }

    pub fn loss(&self) -> &L {
        self.loss
    }

    /// 1/N.
    pub fn inv_samples(&self) -> f64 {
        self.inv_samples
    }

    /// The exact GD map on the simplex, out = φ(log z − (η/N)J(z)∇ℓ̃(z)) (§2.4): GD on the
    /// logits, read on z.
    pub fn gd_map(&self, z: &[f64], eta: f64, out: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.loss.grad(z, &mut s.g);
        jacobian_apply(z, &s.g, &mut s.a);
        for (w, (&zj, &step)) in s.b.iter_mut().zip(z.iter().zip(&s.a)) {
            *w = zj.ln() - eta * self.inv_samples * step;
        }
        softmax_into(&s.b, out);
    }
}

impl<L: SimplexLoss + ?Sized> VectorField for SimplexFlow<'_, L> {
    fn dim(&self) -> usize {
        self.loss.dim()
    }
    fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.loss.grad(z, &mut s.g);
        jacobian_apply(z, &s.g, &mut s.a);
        jacobian_apply(z, &s.a, dz);
        dz.iter_mut().for_each(|x| *x *= -self.inv_samples);
    }
    /// DV(z)h = −(1/N)(J²Hh + DJ\[h\]Jg + J·DJ\[h\]g).
    fn jvp(&self, _t: f64, z: &[f64], h: &[f64], out: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.loss.grad(z, &mut s.g);
        self.loss.hvp(z, h, &mut s.a);
        jacobian_apply(z, &s.a, &mut s.b);
        jacobian_apply(z, &s.b, out);
        jacobian_apply(z, &s.g, &mut s.a);
        jacobian_derivative_apply(z, h, &s.a, &mut s.b);
        out.iter_mut().zip(&s.b).for_each(|(o, x)| *o += x);
        jacobian_derivative_apply(z, h, &s.g, &mut s.a);
        jacobian_apply(z, &s.a, &mut s.b);
        out.iter_mut()
            .zip(&s.b)
            .for_each(|(o, x)| *o = -(*o + x) * self.inv_samples);
    }
}

/// The logit-space flow ẇ = −(1/N)J(φ(w))∇ℓ̃(φ(w)) (§2.4), whose image under φ is the simplex
/// flow; GD on the logits is its explicit Euler scheme. Unconstrained, so the faces of the
/// simplex sit at infinity.
#[derive(Debug)]
pub struct LogitFlow<'a, L: SimplexLoss + ?Sized>(SimplexFlow<'a, L>);

impl<'a, L: SimplexLoss + ?Sized> LogitFlow<'a, L> {
    pub fn new(loss: &'a L, samples: usize) -> Self {
        LogitFlow(SimplexFlow::new(loss, samples))
    }
}

impl<L: SimplexLoss + ?Sized> VectorField for LogitFlow<'_, L> {
    fn dim(&self) -> usize {
        self.0.loss.dim()
    }
    fn rhs(&self, _t: f64, w: &[f64], dw: &mut [f64]) {
        let s = &mut *self.0.scratch.borrow_mut();
        softmax_into(w, &mut s.z);
        self.0.loss.grad(&s.z, &mut s.g);
        jacobian_apply(&s.z, &s.g, dw);
        dw.iter_mut().for_each(|x| *x *= -self.0.inv_samples);
    }
    /// −(1/N)(DJ\[h\]g + JHh) with h = J(z)u, the velocity of z = φ(w) along u.
    fn jvp(&self, _t: f64, w: &[f64], u: &[f64], out: &mut [f64]) {
        let s = &mut *self.0.scratch.borrow_mut();
        softmax_into(w, &mut s.z);
        jacobian_apply(&s.z, u, &mut s.a);
        self.0.loss.grad(&s.z, &mut s.g);
        self.0.loss.hvp(&s.z, &s.a, &mut s.b);
        jacobian_apply(&s.z, &s.b, out);
        jacobian_derivative_apply(&s.z, &s.a, &s.g, &mut s.b);
        out.iter_mut()
            .zip(&s.b)
            .for_each(|(o, x)| *o = -(*o + x) * self.0.inv_samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodiff::{ad_grad_hvp, rel_err};
    use num_dual::{Dual64, DualNum};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// ½(z − z*)ᵀA(z − z*) + c𝟙ᵀz, written directly for dual numbers.
    fn quad_reference<T: DualNum<f64> + Copy>(loss: &QuadLoss, z: &[T]) -> T {
        let n = z.len();
        let mut total = T::from(0.0);
        for i in 0..n {
            for j in 0..n {
                total +=
                    (z[i] - loss.z_star()[i]) * (z[j] - loss.z_star()[j]) * loss.matrix()[(i, j)];
            }
        }
        total * 0.5 + z.iter().fold(T::from(0.0), |s, &x| s + x) * loss.c()
    }

    /// −(1/N)J(z)²∇ℓ̃(z) with J and ∇ℓ̃ formed from their definitions, for dual numbers.
    fn velocity_reference(loss: &QuadLoss, inv_n: f64, z: &[Dual64]) -> Vec<Dual64> {
        let n = z.len();
        let a = loss.matrix();
        let g: Vec<Dual64> = (0..n)
            .map(|i| {
                (0..n).fold(Dual64::from(loss.c()), |s, j| {
                    s + (z[j] - loss.z_star()[j]) * a[(i, j)]
                })
            })
            .collect();
        let j_apply = |x: &[Dual64]| -> Vec<Dual64> {
            (0..n)
                .map(|i| {
                    (0..n).fold(Dual64::from(0.0), |s, k| {
                        let jik = if i == k {
                            z[i] - z[i] * z[i]
                        } else {
                            -z[i] * z[k]
                        };
                        s + jik * x[k]
                    })
                })
                .collect()
        };
        j_apply(&j_apply(&g))
            .into_iter()
            .map(|v| -v * inv_n)
            .collect()
    }

    fn softmax_dual(w: &[Dual64]) -> Vec<Dual64> {
        let e: Vec<Dual64> = w.iter().map(|x| x.exp()).collect();
        let sum = e.iter().fold(Dual64::from(0.0), |s, &x| s + x);
        e.into_iter().map(|x| x / sum).collect()
    }

    fn instance(n: usize, c: f64) -> (QuadLoss, Vec<f64>, Vec<f64>) {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let w: Vec<f64> = (0..n)
            .map(|_| rng.sample::<f64, _>(StandardNormal))
            .collect();
        let mut z_star = vec![0.0; n];
        softmax_into(&w, &mut z_star);
        let loss = QuadLoss::random(z_star, c, 20.0, &mut rng);
        let w: Vec<f64> = (0..n)
            .map(|_| rng.sample::<f64, _>(StandardNormal))
            .collect();
        let mut z = vec![0.0; n];
        softmax_into(&w, &mut z);
        let u: Vec<f64> = (0..n)
            .map(|_| rng.sample::<f64, _>(StandardNormal))
            .collect();
        (loss, z, u)
    }

    #[test]
    fn losses_match_forward_mode_ad() {
        let (loss, z, u) = instance(6, 2.5);
        let (g_ad, h_ad) = ad_grad_hvp(
            |x| quad_reference(&loss, x),
            |x| quad_reference(&loss, x),
            &z,
            &u,
        );
        let (mut g, mut h) = (vec![0.0; 6], vec![0.0; 6]);
        loss.grad(&z, &mut g);
        loss.hvp(&z, &u, &mut h);
        assert!(rel_err(&g, &g_ad) < 1e-14 && rel_err(&h, &h_ad) < 1e-14);
        assert!((loss.value(&z) - quad_reference(&loss, &z)).abs() < 1e-14);
        let scalar = ScalarLoss {
            a: u.clone(),
            y: 0.3,
        };
        let (g_ad, h_ad) = ad_grad_hvp(
            |x| {
                (x.iter()
                    .zip(&u)
                    .fold(Dual64::from(0.0), |s, (&xj, &aj)| s + xj * aj)
                    - 0.3)
                    .powi(2)
                    * 0.5
            },
            |x| {
                let f = x
                    .iter()
                    .zip(&u)
                    .fold(num_dual::HyperDual64::from(0.0), |s, (&xj, &aj)| {
                        s + xj * aj
                    });
                (f - 0.3).powi(2) * 0.5
            },
            &z,
            &z,
        );
        scalar.grad(&z, &mut g);
        scalar.hvp(&z, &z, &mut h);
        assert!(rel_err(&g, &g_ad) < 1e-14 && rel_err(&h, &h_ad) < 1e-14);
    }

    #[test]
    fn flow_jacobians_match_forward_mode_ad() {
        for c in [0.0, 2.5] {
            let (loss, z, u) = instance(7, c);
            let flow = SimplexFlow::new(&loss, 3);
            let dual: Vec<Dual64> = z.iter().zip(&u).map(|(&x, &e)| Dual64::new(x, e)).collect();
            let reference = velocity_reference(&loss, 1.0 / 3.0, &dual);
            let (mut v, mut jv) = (vec![0.0; 7], vec![0.0; 7]);
            flow.rhs(0.0, &z, &mut v);
            flow.jvp(0.0, &z, &u, &mut jv);
            let v_ad: Vec<f64> = reference.iter().map(|x| x.re).collect();
            let jv_ad: Vec<f64> = reference.iter().map(|x| x.eps).collect();
            assert!(rel_err(&v, &v_ad) < 1e-13, "{v:?} vs {v_ad:?}");
            assert!(rel_err(&jv, &jv_ad) < 1e-13, "{jv:?} vs {jv_ad:?}");
            assert!(v.iter().sum::<f64>().abs() < 1e-16, "𝟙ᵀV = 0");

            // logit flow: ẇ = −(1/N)J∇ℓ̃(φ(w)), differentiated through φ
            let logits: Vec<f64> = z.iter().map(|x| x.ln()).collect();
            let wd: Vec<Dual64> = logits
                .iter()
                .zip(&u)
                .map(|(&x, &e)| Dual64::new(x, e))
                .collect();
            let zd = softmax_dual(&wd);
            // J∇ℓ̃ = −N·V/J… form it directly: J g with g = A(z − z*) + c𝟙
            let n = 7;
            let g: Vec<Dual64> = (0..n)
                .map(|i| {
                    (0..n).fold(Dual64::from(c), |s, j| {
                        s + (zd[j] - loss.z_star()[j]) * loss.matrix()[(i, j)]
                    })
                })
                .collect();
            let zg = zd
                .iter()
                .zip(&g)
                .fold(Dual64::from(0.0), |s, (&a, &b)| s + a * b);
            let wdot: Vec<Dual64> = (0..n).map(|i| -(zd[i] * (g[i] - zg)) / 3.0).collect();
            let logit_flow = LogitFlow::new(&loss, 3);
            logit_flow.rhs(0.0, &logits, &mut v);
            logit_flow.jvp(0.0, &logits, &u, &mut jv);
            let v_ad: Vec<f64> = wdot.iter().map(|x| x.re).collect();
            let jv_ad: Vec<f64> = wdot.iter().map(|x| x.eps).collect();
            assert!(
                rel_err(&v, &v_ad) < 1e-13 && rel_err(&jv, &jv_ad) < 1e-13,
                "{jv:?} vs {jv_ad:?}"
            );
        }
    }

    #[test]
    fn second_derivative_of_softmax_matches_eq_41_and_ad() {
        let (_, z, h) = instance(5, 0.0);
        let mut closed = vec![0.0; 5];
        softmax_second_derivative(&z, &h, &mut closed);
        // (41): ∂²φ_i/∂x_j∂x_k = φ_i(δ_ij − φ_j)(δ_ik − φ_k) − φ_iφ_k(δ_kj − φ_j)
        let delta = |a: usize, b: usize| if a == b { 1.0 } else { 0.0 };
        for i in 0..5 {
            let mut entry = 0.0;
            for j in 0..5 {
                for k in 0..5 {
                    let d2 = z[i] * (delta(i, j) - z[j]) * (delta(i, k) - z[k])
                        - z[i] * z[k] * (delta(k, j) - z[j]);
                    assert!(d2.abs() <= 2.0);
                    entry += d2 * h[j] * h[k];
                }
            }
            assert!(
                (entry - closed[i]).abs() < 1e-15,
                "{i}: {entry} vs {}",
                closed[i]
            );
        }
        // and against AD: second derivative of φ(w + th) in t
        let w: Vec<f64> = z.iter().map(|x| x.ln()).collect();
        let hd: Vec<num_dual::HyperDual64> = w
            .iter()
            .zip(&h)
            .map(|(&x, &e)| num_dual::HyperDual64::new(x, e, e, 0.0))
            .collect();
        let e: Vec<_> = hd.iter().map(|x| x.exp()).collect();
        let sum = e
            .iter()
            .fold(num_dual::HyperDual64::from(0.0), |s, &x| s + x);
        for (i, ei) in e.iter().enumerate() {
            assert!(((*ei / sum).eps1eps2 - closed[i]).abs() < 1e-14);
        }
        let mut dj = vec![0.0; 5];
        jacobian_derivative_apply(&z, &h, &[1.0; 5], &mut dj);
        // DJ[h]𝟙 = −z(𝟙ᵀh)
        let sum_h: f64 = h.iter().sum();
        assert!(dj
            .iter()
            .zip(&z)
            .all(|(d, zj)| (d + zj * sum_h).abs() < 1e-15));
    }

    #[test]
    fn gd_map_stays_on_the_simplex_and_agrees_with_the_flow_to_first_order() {
        let (loss, z, _) = instance(6, 2.5);
        let flow = SimplexFlow::new(&loss, 3);
        let (mut next, mut v) = (vec![0.0; 6], vec![0.0; 6]);
        flow.rhs(0.0, &z, &mut v);
        let remainder = |eta: f64, next: &mut Vec<f64>| {
            flow.gd_map(&z, eta, next);
            next.iter()
                .zip(&z)
                .zip(&v)
                .map(|((a, b), c)| (a - b - eta * c).powi(2))
                .sum::<f64>()
                .sqrt()
        };
        let r1 = remainder(1e-3, &mut next);
        assert!((next.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        let r2 = remainder(5e-4, &mut next);
        assert!((r1 / r2 - 4.0).abs() < 0.01, "ratio {}", r1 / r2);
        // at the equilibrium z* the map is the identity (J∇ℓ̃ = cJ𝟙 = 0)
        flow.gd_map(loss.z_star(), 0.7, &mut next);
        assert!(rel_err(&next, loss.z_star()) < 1e-15);
    }
}

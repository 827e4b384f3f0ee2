//! A one-layer, single-head softmax attention regressor: the small synthetic stand-in for the
//! tiny ViT of seed 002's Fig. 3 (spec 002 §4 "Fig. 3", out of scope there as a ViT on MNIST).
//!
//! On a sequence X ∈ ℝ^{T×d} (rows x_0 … x_{T−1}, the query is the first token q = x_0)
//!
//! f(X) = vᵀ Xᵀ softmax(X W q),  W ∈ ℝ^{d×d}, v ∈ ℝ^d,
//!
//! with the squared loss L(θ) = (1/2n) Σ_i (f(X_i) − y_i)² over n samples and parameters
//! θ = (vec W row-major, v) of dimension p = d² + d.
//!
//! The gradient is hand-written backpropagation, generic over the [`Scalar`] so that the same
//! code gives (a) the f64 gradient for gradient descent, allocation-free with a [`Scratch`], and
//! (b) the exact Hessian, one forward-mode dual pass ([`Dual`]) of the backpropagation per
//! column. The unit tests hold both to num-dual derivatives of the plain forward loss.

use nalgebra::DMatrix;

use crate::dual::{Dual, Scalar};

/// The data of one regression: n sequences of T tokens in ℝ^d and their labels.
#[derive(Debug, Clone)]
pub struct AttentionRegression {
    d: usize,
    t: usize,
    /// Tokens, sample-major then token-major: X_i[t][a] = x[(i·T + t)·d + a].
    x: Vec<f64>,
    y: Vec<f64>,
}

/// Work buffers of one loss/gradient evaluation, reused across calls.
#[derive(Debug, Clone)]
pub struct Scratch<S> {
    /// W q
    wq: Vec<S>,
    /// attention weights softmax(X W q)
    a: Vec<S>,
    /// Xᵀ a (the attended token)
    pooled: Vec<S>,
    /// Xᵀ g with g_t = a_t (v·x_t − f): the backpropagated score gradient
    back: Vec<S>,
}

impl<S: Scalar> Scratch<S> {
    pub fn new(model: &AttentionRegression) -> Self {
        let zero = S::cst(0.0);
        Scratch {
            wq: vec![zero; model.d],
            a: vec![zero; model.t],
            pooled: vec![zero; model.d],
            back: vec![zero; model.d],
        }
    }
}

impl AttentionRegression {
    /// `x` holds n·T·d entries (sample, token, coordinate), `y` the n labels.
    pub fn new(d: usize, t: usize, x: Vec<f64>, y: Vec<f64>) -> Self {
        assert!(d > 0 && t > 0, "empty tokens");
        assert_eq!(x.len(), y.len() * t * d, "x needs n·T·d entries");
        AttentionRegression { d, t, x, y }
    }

    pub fn d(&self) -> usize {
        self.d
    }
    pub fn tokens(&self) -> usize {
        self.t
    }
    pub fn n(&self) -> usize {
        self.y.len()
    }
    /// Number of parameters p = d² + d.
    pub fn dim(&self) -> usize {
        self.d * self.d + self.d
    }
    pub fn x(&self) -> &[f64] {
        &self.x
    }
    pub fn labels(&self) -> &[f64] {
        &self.y
    }
    /// The same tokens with other labels.
    pub fn with_labels(&self, y: Vec<f64>) -> Self {
        AttentionRegression::new(self.d, self.t, self.x.clone(), y)
    }

    fn token(&self, i: usize, t: usize) -> &[f64] {
        let start = (i * self.t + t) * self.d;
        &self.x[start..start + self.d]
    }

    /// Attention scores s_t = x_tᵀ W q of sample i into `out` (length T).
    pub fn scores(&self, w: &[f64], i: usize, out: &mut [f64]) {
        let q = self.token(i, 0);
        let wq: Vec<f64> = (0..self.d)
            .map(|a| dot(&w[a * self.d..][..self.d], q))
            .collect();
        for (t, s) in out.iter_mut().enumerate() {
            *s = dot(self.token(i, t), &wq);
        }
    }

    /// The forward pass of sample i: fills `s.wq`, `s.a`, `s.pooled` and returns f(X_i).
    fn forward<S: Scalar>(&self, theta: &[S], i: usize, s: &mut Scratch<S>) -> S {
        let d = self.d;
        let (w, v) = theta.split_at(d * d);
        let q = self.token(i, 0);
        for a in 0..d {
            s.wq[a] = mixed_dot(&w[a * d..(a + 1) * d], q);
        }
        // softmax with the largest score's value subtracted (a constant: derivatives unchanged)
        let mut top = f64::NEG_INFINITY;
        for t in 0..self.t {
            s.a[t] = mixed_dot(&s.wq, self.token(i, t));
            top = top.max(s.a[t].re());
        }
        let mut total = S::cst(0.0);
        for at in s.a.iter_mut() {
            *at = (*at - top).exp();
            total += *at;
        }
        for at in s.a.iter_mut() {
            *at /= total;
        }
        for p in s.pooled.iter_mut() {
            *p = S::cst(0.0);
        }
        for t in 0..self.t {
            let at = s.a[t];
            for (p, &xa) in s.pooled.iter_mut().zip(self.token(i, t)) {
                *p += at * xa;
            }
        }
        let mut f = S::cst(0.0);
        for (&va, &pa) in v.iter().zip(&s.pooled) {
            f += va * pa;
        }
        f
    }

    /// The outputs f(X_i; θ) of every sample.
    pub fn predict(&self, theta: &[f64]) -> Vec<f64> {
        let mut s = Scratch::<f64>::new(self);
        (0..self.n())
            .map(|i| self.forward(theta, i, &mut s))
            .collect()
    }

    /// L(θ) by the forward pass only (the reference the tests differentiate with num-dual).
    pub fn loss<S: Scalar>(&self, theta: &[S], s: &mut Scratch<S>) -> S {
        let mut sum = S::cst(0.0);
        for i in 0..self.n() {
            let r = self.forward(theta, i, s) - self.y[i];
            sum += r * r;
        }
        sum / (2.0 * self.n() as f64)
    }

    /// L(θ) and ∇L(θ) into `grad` by backpropagation; no allocation.
    ///
    /// With r_i = f_i − y_i, u_t = v·x_t and g_t = ∂f/∂s_t = a_t (u_t − f):
    /// ∂L/∂v = (1/n) Σ_i r_i Xᵀa, ∂L/∂W = (1/n) Σ_i r_i (Xᵀg) qᵀ.
    pub fn loss_grad<S: Scalar>(&self, theta: &[S], grad: &mut [S], s: &mut Scratch<S>) -> S {
        let d = self.d;
        let n = self.n() as f64;
        assert_eq!(theta.len(), self.dim());
        assert_eq!(grad.len(), self.dim());
        for g in grad.iter_mut() {
            *g = S::cst(0.0);
        }
        let v = &theta[d * d..];
        let mut sum = S::cst(0.0);
        for i in 0..self.n() {
            let f = self.forward(theta, i, s);
            let r = f - self.y[i];
            sum += r * r;
            let rn = r / n;
            for b in s.back.iter_mut() {
                *b = S::cst(0.0);
            }
            for t in 0..self.t {
                let xt = self.token(i, t);
                let g = s.a[t] * (mixed_dot(v, xt) - f);
                for (b, &xa) in s.back.iter_mut().zip(xt) {
                    *b += g * xa;
                }
            }
            let q = self.token(i, 0);
            let (gw, gv) = grad.split_at_mut(d * d);
            for a in 0..d {
                let ra = rn * s.back[a];
                for (gab, &qb) in gw[a * d..(a + 1) * d].iter_mut().zip(q) {
                    *gab += ra * qb;
                }
            }
            for (gva, &pa) in gv.iter_mut().zip(&s.pooled) {
                *gva += rn * pa;
            }
        }
        sum / (2.0 * n)
    }

    /// The exact Hessian ∇²L(θ): column j is the directional derivative of the backpropagated
    /// gradient along e_j, one [`Dual`] pass each (forward over reverse; symmetric up to
    /// rounding, symmetrized here).
    pub fn hessian(&self, theta: &[f64]) -> DMatrix<f64> {
        let p = self.dim();
        let mut s = Scratch::<Dual>::new(self);
        let mut dual: Vec<Dual> = theta.iter().map(|&x| Dual::cst(x)).collect();
        let mut grad = vec![Dual::cst(0.0); p];
        let mut h = DMatrix::zeros(p, p);
        for j in 0..p {
            dual[j].dx = 1.0;
            self.loss_grad(&dual, &mut grad, &mut s);
            dual[j].dx = 0.0;
            for (k, g) in grad.iter().enumerate() {
                h[(k, j)] = g.dx;
            }
        }
        (&h + h.transpose()) * 0.5
    }

    /// Plain gradient descent θ ← θ − η∇L(θ) for `steps` steps; returns L after each step
    /// (entry 0 is L(θ_0)). θ is updated in place.
    pub fn gradient_descent(&self, theta: &mut [f64], eta: f64, steps: usize) -> Vec<f64> {
        let mut s = Scratch::<f64>::new(self);
        let mut grad = vec![0.0; self.dim()];
        let mut losses = Vec::with_capacity(steps + 1);
        for _ in 0..steps {
            losses.push(self.loss_grad(theta, &mut grad, &mut s));
            for (th, g) in theta.iter_mut().zip(&grad) {
                *th -= eta * g;
            }
        }
        losses.push(self.loss(theta, &mut s));
        losses
    }
}

/// Adam (Kingma & Ba) with the default moments β₁ = 0.9, β₂ = 0.999, ε = 1e−8: the optimizer of
/// seed 004's ViT experiments, here for the full-batch training of the ΔW-rank stand-in.
#[derive(Debug, Clone)]
pub struct Adam {
    lr: f64,
    m: Vec<f64>,
    v: Vec<f64>,
    /// steps taken (for the bias corrections 1 − βᵏ)
    k: i32,
}

impl Adam {
    const BETA1: f64 = 0.9;
    const BETA2: f64 = 0.999;
    const EPS: f64 = 1e-8;

    pub fn new(lr: f64, dim: usize) -> Self {
        Adam {
            lr,
            m: vec![0.0; dim],
            v: vec![0.0; dim],
            k: 0,
        }
    }

    /// One step θ ← θ − lr·m̂/(√v̂ + ε) with the gradient `grad` at θ.
    pub fn step(&mut self, theta: &mut [f64], grad: &[f64]) {
        assert_eq!(theta.len(), self.m.len());
        assert_eq!(grad.len(), self.m.len());
        self.k += 1;
        let c1 = 1.0 - Self::BETA1.powi(self.k);
        let c2 = 1.0 - Self::BETA2.powi(self.k);
        for (((th, g), m), v) in theta.iter_mut().zip(grad).zip(&mut self.m).zip(&mut self.v) {
            *m = Self::BETA1 * *m + (1.0 - Self::BETA1) * g;
            *v = Self::BETA2 * *v + (1.0 - Self::BETA2) * g * g;
            *th -= self.lr * (*m / c1) / ((*v / c2).sqrt() + Self::EPS);
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Σ a_k b_k with generic a and f64 data b.
fn mixed_dot<S: Scalar>(a: &[S], b: &[f64]) -> S {
    let mut acc = S::cst(0.0);
    for (&x, &y) in a.iter().zip(b) {
        acc += x * y;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodiff::{ad_grad_hvp, rel_err};
    use num_dual::{Dual64, DualNum, HyperDual64};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;
    use rand_distr::StandardNormal;

    /// num-dual's numbers as the model's scalar: the reference derivatives of [`AttentionRegression::loss`].
    macro_rules! num_dual_scalar {
        ($t:ty) => {
            impl Scalar for $t {
                fn cst(x: f64) -> Self {
                    <$t>::from(x)
                }
                fn re(&self) -> f64 {
                    self.re
                }
                fn exp(self) -> Self {
                    <$t as DualNum<f64>>::exp(&self)
                }
            }
        };
    }
    num_dual_scalar!(Dual64);
    num_dual_scalar!(HyperDual64);

    fn normal(rng: &mut ChaCha20Rng, k: usize, scale: f64) -> Vec<f64> {
        (0..k)
            .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
            .collect()
    }

    fn instance() -> (AttentionRegression, Vec<f64>) {
        let (d, t, n) = (4, 5, 7);
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let x = normal(&mut rng, n * t * d, 1.0);
        let y = normal(&mut rng, n, 1.0);
        let model = AttentionRegression::new(d, t, x, y);
        // large enough W that the attention is far from uniform
        let theta = normal(&mut rng, model.dim(), 0.8);
        (model, theta)
    }

    #[test]
    fn gradient_and_hessian_match_num_dual() {
        let (model, theta) = instance();
        let p = model.dim();
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let dir = normal(&mut rng, p, 1.0);
        let (ad_grad, ad_hvp) = ad_grad_hvp(
            |z: &[Dual64]| model.loss(z, &mut Scratch::new(&model)),
            |z: &[HyperDual64]| model.loss(z, &mut Scratch::new(&model)),
            &theta,
            &dir,
        );
        let mut grad = vec![0.0; p];
        let l = model.loss_grad(&theta, &mut grad, &mut Scratch::new(&model));
        assert!((l - model.loss(&theta, &mut Scratch::new(&model))).abs() < 1e-14);
        assert!(rel_err(&grad, &ad_grad) < 1e-12, "{grad:?} vs {ad_grad:?}");
        let h = model.hessian(&theta);
        let hv: Vec<f64> = (h * nalgebra::DVector::from_vec(dir))
            .iter()
            .copied()
            .collect();
        assert!(rel_err(&hv, &ad_hvp) < 1e-11, "{hv:?} vs {ad_hvp:?}");
    }

    /// Adam's first step is lr·g/(|g| + ε) per coordinate (both moments bias-corrected to g, g²).
    #[test]
    fn adam_first_step_is_a_signed_lr_step() {
        let mut adam = Adam::new(0.01, 3);
        let mut theta = vec![1.0, -2.0, 0.5];
        adam.step(&mut theta, &[3.0, -1e-3, 0.0]);
        assert!((theta[0] - (1.0 - 0.01 * 3.0 / (3.0 + 1e-8))).abs() < 1e-15);
        assert!((theta[1] - (-2.0 + 0.01 * 1e-3 / (1e-3 + 1e-8))).abs() < 1e-15);
        assert_eq!(theta[2], 0.5);
    }

    #[test]
    fn scores_match_the_forward_pass() {
        let (model, theta) = instance();
        let mut s = Scratch::<f64>::new(&model);
        let mut sc = vec![0.0; model.tokens()];
        model.scores(&theta[..model.d() * model.d()], 2, &mut sc);
        model.forward(&theta, 2, &mut s);
        let z: f64 = sc.iter().map(|x| x.exp()).sum();
        for (a, x) in s.a.iter().zip(&sc) {
            assert!((a - x.exp() / z).abs() < 1e-14);
        }
    }
}

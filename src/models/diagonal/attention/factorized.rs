//! The full-matrix attention head of spec 004 §5.4 (beyond the theory): weights
//! W_K, W_Q, W_V, W_O ∈ ℝ^{d×d_h} trained from small initialization, f(X) =
//! smax(X W_K W_Qᵀ Xᵀ) X W_V W_Oᵀ. The loss depends on the products A = W_K W_Qᵀ and
//! M = W_V W_Oᵀ only, so it is the [`MatrixAttention`] β-loss on β = [vec A; vec M] composed with
//! the factorization, the matrix analogue of β = u ⊙ v: spec §2.2 "full-matrix" gradients
//! dW_K = dA W_Q, dW_Q = dAᵀ W_K, dW_V = dM W_O, dW_O = dMᵀ W_V, and the exact Hessian-vector
//! product by the chain rule. Scenarios read Δ(W_K W_Qᵀ), Δ(W_V W_Oᵀ) with
//! [`FactorizedAttention::kq_product`] and the spectra of `crate::analysis::spectra`.

use std::cell::RefCell;

use nalgebra::DMatrix;
use rand_distr::StandardNormal;

use super::kernel::{mat_mul, mat_mul_nt, mat_mul_tn};
use super::{AttentionHead, AttentionSamples, LossScale, ScoreValueMap};
use crate::flow::GradientFlow;
use crate::models::diagonal::network::BetaLoss;
use crate::models::diagonal::DiagonalError;

/// β = [vec A; vec M] (row-major d×d each) ↦ (S = X A Xᵀ, V = X M).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixScores {
    pub d: usize,
}

impl ScoreValueMap for MatrixScores {
    fn d(&self) -> usize {
        self.d
    }

    fn p(&self) -> usize {
        2 * self.d * self.d
    }

    fn forward(
        &self,
        beta: &[f64],
        x: &[f64],
        n: usize,
        s: &mut [f64],
        v: &mut [f64],
        work: &mut [f64],
    ) {
        let d = self.d;
        let (a, m) = beta.split_at(d * d);
        mat_mul(x, a, work, (n, d, d), false);
        mat_mul_nt(work, x, s, (n, d, n), false);
        mat_mul(x, m, v, (n, d, d), false);
    }

    /// dA += Xᵀ dS X, dM += Xᵀ dV.
    fn adjoint(
        &self,
        x: &[f64],
        n: usize,
        ds: &[f64],
        dv: &[f64],
        grad: &mut [f64],
        work: &mut [f64],
    ) {
        let d = self.d;
        let (ga, gm) = grad.split_at_mut(d * d);
        mat_mul(ds, x, work, (n, n, d), false);
        mat_mul_tn(x, work, ga, (d, n, d), true);
        mat_mul_tn(x, dv, gm, (d, n, d), true);
    }

    fn coordinate_name(&self, i: usize) -> String {
        let d = self.d;
        let (block, k) = if i < d * d {
            ("A", i)
        } else {
            ("M", i - d * d)
        };
        format!("{block}[{},{}]", k / d, k % d)
    }
}

/// The attention head as a loss of the full products (A, M).
pub type MatrixAttention = AttentionHead<MatrixScores>;

impl AttentionHead<MatrixScores> {
    /// N samples of n Gaussian tokens labelled by the teacher products (A*, M*) (d×d).
    pub fn student_teacher(
        n: usize,
        count: usize,
        a_star: &DMatrix<f64>,
        m_star: &DMatrix<f64>,
        scale: LossScale,
        rng: &mut impl rand::Rng,
    ) -> Result<Self, DiagonalError> {
        let d = a_star.nrows();
        if a_star.shape() != (d, d) || m_star.shape() != (d, d) {
            return Err(DiagonalError::Invalid("A* and M* must be d×d".into()));
        }
        let map = MatrixScores { d };
        let teacher: Vec<f64> = row_major(a_star).chain(row_major(m_star)).collect();
        let x = AttentionSamples::gaussian_inputs(count, n, d, rng);
        let samples = AttentionSamples::from_teacher(&map, &teacher, n, x)?;
        AttentionHead::new(map, samples, scale.kappa(n, d))
    }
}

fn row_major(m: &DMatrix<f64>) -> impl Iterator<Item = f64> + '_ {
    (0..m.nrows()).flat_map(move |r| (0..m.ncols()).map(move |c| m[(r, c)]))
}

/// out (+)= L Rᵀ for L, R ∈ ℝ^{d×h}.
fn outer(l: &[f64], r: &[f64], out: &mut [f64], (d, h): (usize, usize), acc: bool) {
    mat_mul_nt(l, r, out, (d, h, d), acc);
}

/// The pull-back of dP through P = L Rᵀ: ∂/∂L = dP R, ∂/∂R = dPᵀ L (added when `acc`).
fn factor_pullback(
    dp: &[f64],
    l: &[f64],
    r: &[f64],
    gl: &mut [f64],
    gr: &mut [f64],
    (d, h): (usize, usize),
    acc: bool,
) {
    mat_mul(dp, r, gl, (d, d, h), acc);
    mat_mul_tn(dp, l, gr, (d, d, h), acc);
}

#[derive(Debug, Clone)]
struct Scratch {
    beta: Vec<f64>,
    grad: Vec<f64>,
    dir_beta: Vec<f64>,
    h_dir: Vec<f64>,
}

/// Gradient flow on θ = [W_K; W_Q; W_V; W_O] (each d×d_h, row-major) of the head's loss
/// L(θ) = L̃(W_K W_Qᵀ, W_V W_Oᵀ). Its invariants are the balancedness matrices
/// W_KᵀW_K − W_QᵀW_Q and W_VᵀW_V − W_OᵀW_O (upper triangles), the matrix analogue of c_i.
#[derive(Debug)]
pub struct FactorizedAttention {
    head: MatrixAttention,
    d_h: usize,
    scratch: RefCell<Scratch>,
}

impl FactorizedAttention {
    /// The factorized flow of `head` with inner dimension d_h.
    pub fn new(head: MatrixAttention, d_h: usize) -> Self {
        let p = head.p();
        let zeros = vec![0.0; p];
        FactorizedAttention {
            head,
            d_h,
            scratch: RefCell::new(Scratch {
                beta: zeros.clone(),
                grad: zeros.clone(),
                dir_beta: zeros.clone(),
                h_dir: zeros,
            }),
        }
    }

    pub fn head(&self) -> &MatrixAttention {
        &self.head
    }

    fn d(&self) -> usize {
        self.head.map().d
    }

    /// Inner (head) dimension d_h.
    pub fn d_h(&self) -> usize {
        self.d_h
    }

    /// The default initialization: every entry of W_K, W_Q, W_V, W_O i.i.d. N(0, 1/d) (fan-in
    /// scaling, spec §5.4). Multiply by a scale s for an init-scale sweep with common random
    /// numbers.
    pub fn default_init(&self, rng: &mut impl rand::Rng) -> Vec<f64> {
        let sd = 1.0 / (self.d() as f64).sqrt();
        (0..self.dim())
            .map(|_| sd * rng.sample::<f64, _>(StandardNormal))
            .collect()
    }

    /// The four factors of θ: (W_K, W_Q, W_V, W_O).
    fn factors<'a>(&self, theta: &'a [f64]) -> [&'a [f64]; 4] {
        let size = self.d() * self.d_h;
        [0, 1, 2, 3].map(|k| &theta[k * size..(k + 1) * size])
    }

    /// β = [vec W_K W_Qᵀ; vec W_V W_Oᵀ].
    fn fill_products(&self, theta: &[f64], beta: &mut [f64]) {
        let (d, dh) = (self.d(), self.d_h);
        let [k, q, v, o] = self.factors(theta);
        let (a, m) = beta.split_at_mut(d * d);
        outer(k, q, a, (d, dh), false);
        outer(v, o, m, (d, dh), false);
    }

    /// The products (A, M) of θ as β = [vec A; vec M].
    pub fn products(&self, theta: &[f64]) -> Vec<f64> {
        let mut beta = vec![0.0; self.head.p()];
        self.fill_products(theta, &mut beta);
        beta
    }

    /// W_K W_Qᵀ (d×d).
    pub fn kq_product(&self, theta: &[f64]) -> DMatrix<f64> {
        let d = self.d();
        DMatrix::from_row_slice(d, d, &self.products(theta)[..d * d])
    }

    /// W_V W_Oᵀ (d×d).
    pub fn vo_product(&self, theta: &[f64]) -> DMatrix<f64> {
        let d = self.d();
        DMatrix::from_row_slice(d, d, &self.products(theta)[d * d..])
    }

    /// Writes ∂L/∂θ for ∂L̃/∂β = `grad_beta` (or the second-order pull-back, see `hvp`).
    fn pull_back(&self, g_beta: &[f64], theta: &[f64], out: &mut [f64], acc: bool) {
        let (d, dh) = (self.d(), self.d_h);
        let size = d * dh;
        let [k, q, v, o] = self.factors(theta);
        let (ga, gm) = g_beta.split_at(d * d);
        let (gk, rest) = out.split_at_mut(size);
        let (gq, rest) = rest.split_at_mut(size);
        let (gv, go) = rest.split_at_mut(size);
        factor_pullback(ga, k, q, gk, gq, (d, dh), acc);
        factor_pullback(gm, v, o, gv, go, (d, dh), acc);
    }
}

impl GradientFlow for FactorizedAttention {
    fn dim(&self) -> usize {
        4 * self.d() * self.d_h
    }

    fn loss(&self, theta: &[f64]) -> f64 {
        let s = &mut *self.scratch.borrow_mut();
        self.fill_products(theta, &mut s.beta);
        self.head.loss(&s.beta)
    }

    fn grad(&self, theta: &[f64], out: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.fill_products(theta, &mut s.beta);
        self.head.grad_beta(&s.beta, &mut s.grad);
        self.pull_back(&s.grad, theta, out, false);
    }

    /// δA = δW_K W_Qᵀ + W_K δW_Qᵀ (δM likewise), h = ∇²L̃ (δA, δM); then
    /// ∇²L·δθ = pull-back of h at θ + pull-back of ∇L̃ at δθ (the bilinear term).
    fn hvp(&self, theta: &[f64], dir: &[f64], out: &mut [f64]) {
        let (d, dh) = (self.d(), self.d_h);
        let s = &mut *self.scratch.borrow_mut();
        self.fill_products(theta, &mut s.beta);
        self.head.grad_beta(&s.beta, &mut s.grad);
        let [k, q, v, o] = self.factors(theta);
        let [dk, dq, dv, d_o] = self.factors(dir);
        {
            let (da, dm) = s.dir_beta.split_at_mut(d * d);
            outer(dk, q, da, (d, dh), false);
            outer(k, dq, da, (d, dh), true);
            outer(dv, o, dm, (d, dh), false);
            outer(v, d_o, dm, (d, dh), true);
        }
        self.head.hvp_beta(&s.beta, &s.dir_beta, &mut s.h_dir);
        self.pull_back(&s.h_dir, theta, out, false);
        self.pull_back(&s.grad, dir, out, true);
    }

    fn invariant_names(&self) -> Vec<String> {
        let dh = self.d_h;
        let mut names = Vec::new();
        for pair in ["KQ", "VO"] {
            for a in 0..dh {
                for b in a..dh {
                    names.push(format!("balance_{pair}[{a},{b}]"));
                }
            }
        }
        names
    }

    /// (W_KᵀW_K − W_QᵀW_Q)_{ab} and (W_VᵀW_V − W_OᵀW_O)_{ab}, a ≤ b.
    fn invariants(&self, theta: &[f64], out: &mut [f64]) {
        let (d, dh) = (self.d(), self.d_h);
        let [k, q, v, o] = self.factors(theta);
        let mut idx = 0;
        for (l, r) in [(k, q), (v, o)] {
            for a in 0..dh {
                for b in a..dh {
                    out[idx] = (0..d)
                        .map(|i| l[i * dh + a] * l[i * dh + b] - r[i * dh + a] * r[i * dh + b])
                        .sum();
                    idx += 1;
                }
            }
        }
    }
}

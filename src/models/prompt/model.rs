//! The prompt-attention model f(X) = φ(XWp)ᵀXv of spec 002 §1.1 and its linear-attention
//! comparison f_lin(X) = (XWp)ᵀXv (§1.3), with the squared loss ℓ = ½(f − y)² averaged over
//! the N samples, as one [`GradientFlow`] on p (v frozen, A1) or on (p, v).
//!
//! Per sample, with K_i = X_iW (precomputed), logits w = K_ip, values a = X_iv and z = φ(w):
//! f = zᵀa, ∂f/∂w = b = z ⊙ (a − f) = J(z)a, ∂f/∂a = z. The Hessian-vector product is the
//! directional derivative of the gradient: δz = J δw, δf = bᵀδw + zᵀδa,
//! δb = δz ⊙ (a − f) + z ⊙ (δa − δf); this is spec §2.2's block Hessian applied to (δp, δv)
//! without forming it.

use std::cell::RefCell;

use nalgebra::DMatrix;
use serde::Serialize;

use super::data::PromptData;
use super::softmax::{log_attention_ratio, softmax_into};
use crate::flow::GradientFlow;
use crate::stats;

/// Which attention the model uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Attention {
    /// f = φ(XWp)ᵀXv (eq. 3).
    Softmax,
    /// f = (XWp)ᵀXv, the comparison model of Section 5.2.
    Linear,
}

/// Which parameters are trained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Trained {
    /// p only, with v frozen at the given value (Assumption A1; the theorems' setting).
    P { v: Vec<f64> },
    /// p and v; the state is [p; v] (the experiments of Section 5).
    PV,
}

/// Per-sample scratch of length n (tokens).
#[derive(Debug)]
struct Scratch {
    w: Vec<f64>,
    z: Vec<f64>,
    a: Vec<f64>,
    b: Vec<f64>,
    dw: Vec<f64>,
    dz: Vec<f64>,
    da: Vec<f64>,
    db: Vec<f64>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        let v = || vec![0.0; n];
        Scratch {
            w: v(),
            z: v(),
            a: v(),
            b: v(),
            dw: v(),
            dz: v(),
            da: v(),
            db: v(),
        }
    }
}

/// The prompt-attention (or linear-attention) model on fixed data.
#[derive(Debug)]
pub struct PromptModel {
    data: PromptData,
    attention: Attention,
    trained: Trained,
    scratch: RefCell<Scratch>,
}

/// Attention statistics over the samples at one parameter (spec §1.2, "how R is measured").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttentionStats {
    /// log10 R_i = (max_j w_ij − min_j w_ij)/ln 10 per sample.
    pub log10_ratio: Vec<f64>,
    /// mean_i log10 R_i (the log of the geometric-mean R; robust).
    pub log10_geometric_mean: f64,
    /// log10((1/N) Σ R_i) by log-sum-exp (the paper's arithmetic mean R̄).
    pub log10_arithmetic_mean: f64,
    /// Fraction of samples whose top attention probability exceeds 0.99.
    pub saturated_fraction: f64,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// (w, a) = (X p, X v) for a row-major n × d block X, in one pass over X.
fn mat_vec_pair(m: &[f64], d: usize, p: &[f64], v: &[f64], w: &mut [f64], a: &mut [f64]) {
    for ((row, wj), aj) in m.chunks_exact(d).zip(w.iter_mut()).zip(a.iter_mut()) {
        let (mut sp, mut sv) = (0.0, 0.0);
        for ((&x, &pk), &vk) in row.iter().zip(p).zip(v) {
            sp += x * pk;
            sv += x * vk;
        }
        *wj = sp;
        *aj = sv;
    }
}

/// (gp, gv) += (Xᵀ cp, Xᵀ cv) for a row-major n × d block X, in one pass over X.
fn add_mat_t_vec_pair(m: &[f64], d: usize, cp: &[f64], cv: &[f64], gp: &mut [f64], gv: &mut [f64]) {
    for ((row, &fp), &fv) in m.chunks_exact(d).zip(cp).zip(cv) {
        for ((x, p), v) in row.iter().zip(gp.iter_mut()).zip(gv.iter_mut()) {
            *p += fp * x;
            *v += fv * x;
        }
    }
}

/// out = M u for a row-major n × d block M.
fn mat_vec(m: &[f64], d: usize, u: &[f64], out: &mut [f64]) {
    for (o, row) in out.iter_mut().zip(m.chunks_exact(d)) {
        *o = dot(row, u);
    }
}

/// acc += s · Mᵀ c for a row-major n × d block M.
fn add_mat_t_vec(m: &[f64], d: usize, c: &[f64], s: f64, acc: &mut [f64]) {
    for (row, &cj) in m.chunks_exact(d).zip(c) {
        let f = s * cj;
        if f != 0.0 {
            acc.iter_mut().zip(row).for_each(|(a, r)| *a += f * r);
        }
    }
}

impl PromptModel {
    pub fn new(data: PromptData, attention: Attention, trained: Trained) -> Self {
        if let Trained::P { v } = &trained {
            assert_eq!(v.len(), data.d, "the frozen v must have d entries");
        }
        let scratch = RefCell::new(Scratch::new(data.n_tokens));
        PromptModel {
            data,
            attention,
            trained,
            scratch,
        }
    }

    pub fn data(&self) -> &PromptData {
        &self.data
    }

    pub fn attention(&self) -> Attention {
        self.attention
    }

    pub fn trained(&self) -> &Trained {
        &self.trained
    }

    /// The same model on other labels (e.g. a teacher's).
    pub fn with_labels(&self, y: Vec<f64>) -> Self {
        let mut data = self.data.clone();
        data.set_labels(y);
        PromptModel::new(data, self.attention, self.trained.clone())
    }

    /// (p, v) of a state.
    pub fn split<'a>(&'a self, theta: &'a [f64]) -> (&'a [f64], &'a [f64]) {
        let d = self.data.d;
        match &self.trained {
            Trained::P { v } => (&theta[..d], v.as_slice()),
            Trained::PV => (&theta[..d], &theta[d..2 * d]),
        }
    }

    /// The state of (p, v) (v is ignored when frozen).
    pub fn state(&self, p: &[f64], v: &[f64]) -> Vec<f64> {
        match self.trained {
            Trained::P { .. } => p.to_vec(),
            Trained::PV => p.iter().chain(v).copied().collect(),
        }
    }

    /// (w, a) = (K_i p, X_i v), reading X_i once when W = I.
    fn project(&self, i: usize, p: &[f64], v: &[f64], w: &mut [f64], a: &mut [f64]) {
        let d = self.data.d;
        if self.data.identity_w() {
            mat_vec_pair(self.data.tokens(i), d, p, v, w, a);
        } else {
            mat_vec(self.data.keys(i), d, p, w);
            mat_vec(self.data.tokens(i), d, v, a);
        }
    }

    /// g[..d] += K_iᵀ cp and, when v is trained, g[d..] += X_iᵀ cv.
    fn accumulate(&self, i: usize, cp: &[f64], cv: &[f64], g: &mut [f64]) {
        let d = self.data.d;
        match self.trained {
            Trained::P { .. } => add_mat_t_vec(self.data.keys(i), d, cp, 1.0, g),
            Trained::PV => {
                let (gp, gv) = g.split_at_mut(d);
                if self.data.identity_w() {
                    add_mat_t_vec_pair(self.data.tokens(i), d, cp, cv, gp, gv);
                } else {
                    add_mat_t_vec(self.data.keys(i), d, cp, 1.0, gp);
                    add_mat_t_vec(self.data.tokens(i), d, cv, 1.0, gv);
                }
            }
        }
    }

    /// Evaluates sample i at (p, v): fills w, z (softmax only), a, b (= ∂f/∂w) and returns f.
    fn forward(&self, i: usize, p: &[f64], v: &[f64], s: &mut Scratch) -> f64 {
        self.project(i, p, v, &mut s.w, &mut s.a);
        match self.attention {
            Attention::Softmax => {
                softmax_into(&s.w, &mut s.z);
                let f = dot(&s.z, &s.a);
                for ((b, &z), &a) in s.b.iter_mut().zip(&s.z).zip(&s.a) {
                    *b = z * (a - f);
                }
                f
            }
            Attention::Linear => {
                s.b.copy_from_slice(&s.a);
                s.z.copy_from_slice(&s.w);
                dot(&s.w, &s.a)
            }
        }
    }

    /// Model outputs f_i at (p, v).
    pub fn outputs(&self, p: &[f64], v: &[f64]) -> Vec<f64> {
        let mut s = self.scratch.borrow_mut();
        (0..self.data.samples)
            .map(|i| self.forward(i, p, v, &mut s))
            .collect()
    }

    /// Per-sample logits w_i = K_i p (row i of the result, n entries each).
    pub fn logits(&self, p: &[f64]) -> Vec<Vec<f64>> {
        (0..self.data.samples)
            .map(|i| {
                let mut w = vec![0.0; self.data.n_tokens];
                mat_vec(self.data.keys(i), self.data.d, p, &mut w);
                w
            })
            .collect()
    }

    /// R statistics of the attention at p.
    pub fn attention_stats(&self, p: &[f64]) -> AttentionStats {
        let logits = self.logits(p);
        let ln10 = std::f64::consts::LN_10;
        let log_r: Vec<f64> = logits.iter().map(|w| log_attention_ratio(w)).collect();
        let n = log_r.len() as f64;
        let max = stats::max(log_r.iter());
        let lse = max + log_r.iter().map(|&x| (x - max).exp()).sum::<f64>().ln();
        let saturated = logits
            .iter()
            .filter(|w| {
                let mut z = vec![0.0; w.len()];
                softmax_into(w, &mut z);
                z.iter().any(|&zj| zj > 0.99)
            })
            .count();
        AttentionStats {
            log10_ratio: log_r.iter().map(|x| x / ln10).collect(),
            log10_geometric_mean: log_r.iter().sum::<f64>() / n / ln10,
            log10_arithmetic_mean: (lse - n.ln()) / ln10,
            saturated_fraction: saturated as f64 / n,
        }
    }

    /// F(p) of eq. 12 (N × d): row i is (1/N)(K_iᵀ J(z_i) X_i v)ᵀ = (1/N)(K_iᵀ b_i)ᵀ, so that
    /// ∇_p L = Fᵀ g with g_i = ℓ'_i.
    pub fn f_matrix(&self, theta: &[f64]) -> DMatrix<f64> {
        let (p, v) = self.split(theta);
        let (n_s, d) = (self.data.samples, self.data.d);
        let mut f = DMatrix::zeros(n_s, d);
        let mut s = self.scratch.borrow_mut();
        let mut row = vec![0.0; d];
        for i in 0..n_s {
            self.forward(i, p, v, &mut s);
            row.iter_mut().for_each(|r| *r = 0.0);
            add_mat_t_vec(self.data.keys(i), d, &s.b, 1.0 / n_s as f64, &mut row);
            for (c, &r) in row.iter().enumerate() {
                f[(i, c)] = r;
            }
        }
        f
    }
}

impl PromptModel {
    /// L(θ) and ∇L(θ) (into `g`) in one pass over the samples: what a GD step needs, at the
    /// cost of the gradient alone.
    pub fn loss_and_grad(&self, theta: &[f64], g: &mut [f64]) -> f64 {
        let (p, v) = self.split(theta);
        let scale = 1.0 / self.data.samples as f64;
        g.iter_mut().for_each(|x| *x = 0.0);
        let mut guard = self.scratch.borrow_mut();
        let s = &mut *guard;
        let mut total = 0.0;
        for i in 0..self.data.samples {
            let r = self.forward(i, p, v, s) - self.data.y[i];
            total += 0.5 * r * r;
            let residual = scale * r;
            // ℓ'_i (K_iᵀ b_i, X_iᵀ z_i); the scaled copies go in the δ scratch.
            for j in 0..s.b.len() {
                s.db[j] = residual * s.b[j];
                s.dz[j] = residual * s.z[j];
            }
            self.accumulate(i, &s.db, &s.dz, g);
        }
        total * scale
    }
}

impl GradientFlow for PromptModel {
    fn dim(&self) -> usize {
        match self.trained {
            Trained::P { .. } => self.data.d,
            Trained::PV => 2 * self.data.d,
        }
    }

    /// L = (1/N) Σ ½(f_i − y_i)².
    fn loss(&self, theta: &[f64]) -> f64 {
        let (p, v) = self.split(theta);
        let mut s = self.scratch.borrow_mut();
        let total: f64 = (0..self.data.samples)
            .map(|i| 0.5 * (self.forward(i, p, v, &mut s) - self.data.y[i]).powi(2))
            .sum();
        total / self.data.samples as f64
    }

    fn grad(&self, theta: &[f64], g: &mut [f64]) {
        self.loss_and_grad(theta, g);
    }

    fn hvp(&self, theta: &[f64], u: &[f64], out: &mut [f64]) {
        let (p, v) = self.split(theta);
        let d = self.data.d;
        let scale = 1.0 / self.data.samples as f64;
        let (dp, dv) = (&u[..d], u.get(d..2 * d));
        out.iter_mut().for_each(|x| *x = 0.0);
        let mut guard = self.scratch.borrow_mut();
        let s = &mut *guard;
        for i in 0..self.data.samples {
            let f = self.forward(i, p, v, s);
            let residual = scale * (f - self.data.y[i]);
            match dv {
                Some(dv) => self.project(i, dp, dv, &mut s.dw, &mut s.da),
                None => {
                    mat_vec(self.data.keys(i), d, dp, &mut s.dw);
                    s.da.iter_mut().for_each(|x| *x = 0.0);
                }
            }
            // δf = bᵀδw + zᵀδa (softmax: ∂f/∂a = z; linear: ∂f/∂a = w, stored in z).
            let df = scale * (dot(&s.b, &s.dw) + dot(&s.z, &s.da));
            match self.attention {
                Attention::Softmax => {
                    let zdw = dot(&s.z, &s.dw);
                    for j in 0..s.z.len() {
                        s.dz[j] = s.z[j] * (s.dw[j] - zdw);
                    }
                    let dfu = dot(&s.b, &s.dw) + dot(&s.z, &s.da);
                    for j in 0..s.z.len() {
                        s.db[j] = s.dz[j] * (s.a[j] - f) + s.z[j] * (s.da[j] - dfu);
                    }
                }
                Attention::Linear => {
                    // b = a and "z" = w, so δb = δa and δz = δw.
                    s.db.copy_from_slice(&s.da);
                    s.dz.copy_from_slice(&s.dw);
                }
            }
            // δ(ℓ' K_iᵀ b) = δf K_iᵀ b + ℓ' K_iᵀ δb, and likewise for X_iᵀ z.
            for j in 0..s.b.len() {
                s.db[j] = df * s.b[j] + residual * s.db[j];
                s.dz[j] = df * s.z[j] + residual * s.dz[j];
            }
            self.accumulate(i, &s.db, &s.dz, out);
        }
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

//! The diagonal transformer of Example 3.2 (spec 004 §1.2, §5.4): L layers of H attention heads
//! with diagonal weights and a frozen feed-forward block,
//!
//! ```text
//! Z_0 = X,   Z̃_ℓ = Z_{ℓ−1} + Σ_{i=1}^{H} smax(Z_{ℓ−1} diag(a_{ℓ,i}) Z_{ℓ−1}ᵀ) Z_{ℓ−1} diag(c_{ℓ,i}),
//! Z_ℓ = Z̃_ℓ + σ(Z̃_ℓ W_A^ℓ)(W_B^ℓ)ᵀ,   h(X; β) = Z_L,   σ = tanh (C²),
//! ```
//!
//! trained on β = [a_{ℓ,i}; c_{ℓ,i}]_{(ℓ,i)} ∈ ℝ^{2dHL} only (a = w_K ⊙ w_Q, c = w_V ⊙ w_O), with the
//! square loss L̃ = (1/N) Σ_s κ‖Z_L(X_s) − Y_s‖_F², κ = 1/(n d), against a teacher of the same
//! architecture (labels Y_s = h(X_s; β*)), so the minimum 0 is attained.
//!
//! Layout: block b = ℓ·H + i holds a_{ℓ,i} at 2d·b + r (KQ\[r\]) and c_{ℓ,i} at 2d·b + d + r
//! (VO\[r\]); rank(W_K W_Qᵀ) of a head is nnz(a_{ℓ,i}), rank(W_V W_Oᵀ) is nnz(c_{ℓ,i}).
//!
//! Derivatives: the gradient is hand-written backpropagation, generic over the [`Scalar`] of
//! [`crate::models::network`]; the Hessian-vector product is the same backpropagation run once on
//! dual numbers β + ε·dir (forward over reverse), so it is exact. Both use preallocated scratch.

use std::cell::RefCell;

use rand::Rng;
use rand_distr::StandardNormal;

use super::network::BetaLoss;
use super::DiagonalError;
use crate::dual::{Dual, Scalar};

/// Sizes of the architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformerShape {
    /// L.
    pub layers: usize,
    /// H (heads per layer).
    pub heads: usize,
    /// Token dimension d.
    pub d: usize,
    /// Tokens n per sample.
    pub tokens: usize,
    /// Hidden width d' of the feed-forward block.
    pub d_ff: usize,
}

impl TransformerShape {
    /// p = 2 d H L.
    pub fn p(&self) -> usize {
        2 * self.d * self.heads * self.layers
    }

    /// Multiply-adds of one sample's forward pass (the gradient costs about three, the
    /// Hessian-vector product about nine of them).
    pub fn forward_work(&self) -> f64 {
        let (n, d, f) = (self.tokens as f64, self.d as f64, self.d_ff as f64);
        self.layers as f64 * (self.heads as f64 * 2.0 * n * n * d + 2.0 * n * d * f)
    }

    fn validate(&self) -> Result<(), DiagonalError> {
        if self.layers == 0 || self.heads == 0 || self.d == 0 || self.tokens == 0 || self.d_ff == 0
        {
            return Err(DiagonalError::Invalid(format!(
                "every size of the transformer must be positive, got {self:?}"
            )));
        }
        Ok(())
    }
}

/// Where coordinate i sits: layer ℓ, head i (both from 0), KQ or VO, entry r.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub layer: usize,
    pub head: usize,
    pub kq: bool,
    pub r: usize,
}

/// Activations of one sample's forward pass and the buffers of its backward pass.
#[derive(Debug, Clone)]
struct Work<S> {
    /// Z_0 … Z_L, each n×d.
    z: Vec<S>,
    /// Z̃_1 … Z̃_L.
    zt: Vec<S>,
    /// softmax matrices P_{ℓ,i}, n×n each.
    p: Vec<S>,
    /// σ(U_ℓ) and σ'(U_ℓ), U_ℓ = Z̃_ℓ W_A^ℓ (n×d').
    act: Vec<S>,
    dact: Vec<S>,
    /// Backward: dL/dZ_ℓ, dL/dZ̃_ℓ, the next dL/dZ_{ℓ−1}, and n×d, n×d', n×n temporaries.
    g: Vec<S>,
    q: Vec<S>,
    next: Vec<S>,
    w1: Vec<S>,
    w2: Vec<S>,
    hidden: Vec<S>,
    dp: Vec<S>,
    ds: Vec<S>,
}

impl<S: Scalar> Work<S> {
    fn new(sh: &TransformerShape) -> Self {
        let (n, d, f, l) = (sh.tokens, sh.d, sh.d_ff, sh.layers);
        let zero = |len: usize| vec![S::cst(0.0); len];
        Work {
            z: zero((l + 1) * n * d),
            zt: zero(l * n * d),
            p: zero(l * sh.heads * n * n),
            act: zero(l * n * f),
            dact: zero(l * n * f),
            g: zero(n * d),
            q: zero(n * d),
            next: zero(n * d),
            w1: zero(n * d),
            w2: zero(n * d),
            hidden: zero(n * f),
            dp: zero(n * n),
            ds: zero(n * n),
        }
    }
}

#[derive(Debug, Clone)]
struct Scratch {
    real: Work<f64>,
    dual: Work<Dual>,
    beta: Vec<Dual>,
    grad: Vec<Dual>,
}

/// tanh written with `exp` only (so that it works on every [`Scalar`]), from the side where
/// e^{−2|u|} ≤ 1 cannot overflow.
fn tanh<S: Scalar>(u: S) -> S {
    let sign = if u.re() >= 0.0 { 1.0 } else { -1.0 };
    let e = (u * (-2.0 * sign)).exp();
    (S::cst(1.0) - e) / (S::cst(1.0) + e) * sign
}

/// The diagonal transformer with square loss on a fixed training set, as a β-loss.
#[derive(Debug, Clone)]
pub struct DiagTransformer {
    shape: TransformerShape,
    /// Inputs X_s and labels Y_s (N blocks of n×d, row-major).
    x: Vec<f64>,
    y: Vec<f64>,
    /// W_A^ℓ and W_B^ℓ, d×d' row-major, layer after layer.
    w_a: Vec<f64>,
    w_b: Vec<f64>,
    kappa: f64,
    scratch: RefCell<Scratch>,
}

impl DiagTransformer {
    /// The model on inputs `x` (N·n·d values) with frozen `w_a`, `w_b` (L·d·d' each), labelled
    /// by the teacher β* (`teacher`, p values); κ = 1/(n d) (spec §5.1 mean reduction).
    pub fn new(
        shape: TransformerShape,
        x: Vec<f64>,
        w_a: Vec<f64>,
        w_b: Vec<f64>,
        teacher: &[f64],
    ) -> Result<Self, DiagonalError> {
        shape.validate()?;
        let (n, d, f, l) = (shape.tokens, shape.d, shape.d_ff, shape.layers);
        if x.is_empty() || !x.len().is_multiple_of(n * d) {
            return Err(DiagonalError::Invalid(format!(
                "X needs N·n·d values with n·d = {}, got {}",
                n * d,
                x.len()
            )));
        }
        if w_a.len() != l * d * f || w_b.len() != l * d * f || teacher.len() != shape.p() {
            return Err(DiagonalError::Invalid(format!(
                "W_A, W_B need L·d·d' = {} values and β* needs p = {}",
                l * d * f,
                shape.p()
            )));
        }
        if x.iter()
            .chain(&w_a)
            .chain(&w_b)
            .chain(teacher)
            .any(|v| !v.is_finite())
        {
            return Err(DiagonalError::Invalid("non-finite input value".into()));
        }
        let p = shape.p();
        let mut model = DiagTransformer {
            shape,
            y: vec![0.0; x.len()],
            x,
            w_a,
            w_b,
            kappa: 1.0 / (n * d) as f64,
            scratch: RefCell::new(Scratch {
                real: Work::new(&shape),
                dual: Work::new(&shape),
                beta: vec![Dual::cst(0.0); p],
                grad: vec![Dual::cst(0.0); p],
            }),
        };
        let mut y = vec![0.0; model.x.len()];
        let mut work = Work::new(&shape);
        for (s, ys) in y.chunks_mut(n * d).enumerate() {
            model.forward(teacher, s, &mut work);
            ys.copy_from_slice(&work.z[l * n * d..]);
        }
        model.y = y;
        Ok(model)
    }

    /// N samples of n i.i.d. N(0, 1) tokens from `data_rng`; W_A, W_B with i.i.d. N(0, 1/d) and
    /// N(0, 1/d') entries from `ffn_rng`, so that σ(Z̃ W_A) W_Bᵀ is O(1) for O(1) tokens.
    pub fn random(
        shape: TransformerShape,
        count: usize,
        teacher: &[f64],
        data_rng: &mut impl Rng,
        ffn_rng: &mut impl Rng,
    ) -> Result<Self, DiagonalError> {
        let (n, d, f, l) = (shape.tokens, shape.d, shape.d_ff, shape.layers);
        let gaussian = |rng: &mut dyn rand::RngCore, len: usize, scale: f64| -> Vec<f64> {
            (0..len)
                .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
                .collect()
        };
        let x = gaussian(data_rng, count * n * d, 1.0);
        let w_a = gaussian(ffn_rng, l * d * f, (d as f64).recip().sqrt());
        let w_b = gaussian(ffn_rng, l * d * f, (f as f64).recip().sqrt());
        Self::new(shape, x, w_a, w_b, teacher)
    }

    pub fn shape(&self) -> &TransformerShape {
        &self.shape
    }

    /// Number of samples N.
    pub fn count(&self) -> usize {
        self.x.len() / (self.shape.tokens * self.shape.d)
    }

    /// κ of the per-sample squared error.
    pub fn kappa(&self) -> f64 {
        self.kappa
    }

    /// Where coordinate i sits.
    pub fn slot(&self, i: usize) -> Slot {
        let (d, heads) = (self.shape.d, self.shape.heads);
        let block = i / (2 * d);
        let within = i % (2 * d);
        Slot {
            layer: block / heads,
            head: block % heads,
            kq: within < d,
            r: within % d,
        }
    }

    /// Index of a_{ℓ,i}\[r\] (kq) or c_{ℓ,i}\[r\].
    pub fn index(&self, layer: usize, head: usize, kq: bool, r: usize) -> usize {
        let d = self.shape.d;
        2 * d * (layer * self.shape.heads + head) + if kq { r } else { d + r }
    }

    /// The model output Z_L(X_s; β) of sample s (n×d).
    pub fn output(&self, beta: &[f64], s: usize) -> Vec<f64> {
        let mut work = Work::new(&self.shape);
        self.forward(beta, s, &mut work);
        let nd = self.shape.tokens * self.shape.d;
        work.z[self.shape.layers * nd..].to_vec()
    }

    /// Forward pass of sample s: fills the activations of `w` (Z_L is the last block of w.z).
    fn forward<S: Scalar>(&self, beta: &[S], s: usize, w: &mut Work<S>) {
        let TransformerShape {
            layers,
            heads,
            d,
            tokens: n,
            d_ff: f,
        } = self.shape;
        let nd = n * d;
        let x = &self.x[s * nd..(s + 1) * nd];
        for (z, &xv) in w.z[..nd].iter_mut().zip(x) {
            *z = S::cst(xv);
        }
        for l in 0..layers {
            let (before, after) = w.z.split_at_mut((l + 1) * nd);
            let zin = &before[l * nd..];
            let zt = &mut w.zt[l * nd..(l + 1) * nd];
            zt.copy_from_slice(zin);
            for h in 0..heads {
                let blk = 2 * d * (l * heads + h);
                let (a, c) = (&beta[blk..blk + d], &beta[blk + d..blk + 2 * d]);
                let p = &mut w.p[(l * heads + h) * n * n..(l * heads + h + 1) * n * n];
                for m in 0..n {
                    let row = &mut p[m * n..(m + 1) * n];
                    let mut top = f64::NEG_INFINITY;
                    for (j, sc) in row.iter_mut().enumerate() {
                        let mut acc = S::cst(0.0);
                        for r in 0..d {
                            acc += zin[m * d + r] * a[r] * zin[j * d + r];
                        }
                        *sc = acc;
                        top = top.max(acc.re());
                    }
                    // the row max is a constant shift: derivatives are unchanged
                    let mut total = S::cst(0.0);
                    for sc in row.iter_mut() {
                        *sc = (*sc - top).exp();
                        total += *sc;
                    }
                    for sc in row.iter_mut() {
                        *sc /= total;
                    }
                    for r in 0..d {
                        let mut acc = S::cst(0.0);
                        for j in 0..n {
                            acc += row[j] * zin[j * d + r];
                        }
                        zt[m * d + r] += acc * c[r];
                    }
                }
            }
            let (wa, wb) = (&self.w_a[l * d * f..], &self.w_b[l * d * f..]);
            let act = &mut w.act[l * n * f..(l + 1) * n * f];
            let dact = &mut w.dact[l * n * f..(l + 1) * n * f];
            let zout = &mut after[..nd];
            zout.copy_from_slice(zt);
            for m in 0..n {
                for k in 0..f {
                    let mut u = S::cst(0.0);
                    for r in 0..d {
                        u += zt[m * d + r] * wa[r * f + k];
                    }
                    let t = tanh(u);
                    act[m * f + k] = t;
                    dact[m * f + k] = S::cst(1.0) - t * t;
                }
                for r in 0..d {
                    let mut acc = S::cst(0.0);
                    for k in 0..f {
                        acc += act[m * f + k] * wb[r * f + k];
                    }
                    zout[m * d + r] += acc;
                }
            }
        }
    }

    /// L̃(β) and, if `grad` is given, ∇L̃(β) added to it (backpropagation through the layers).
    fn loss_grad<S: Scalar>(&self, beta: &[S], mut grad: Option<&mut [S]>, w: &mut Work<S>) -> S {
        let TransformerShape {
            layers,
            heads,
            d,
            tokens: n,
            d_ff: f,
        } = self.shape;
        let nd = n * d;
        let coef = 2.0 * self.kappa / self.count() as f64;
        if let Some(g) = grad.as_deref_mut() {
            g.iter_mut().for_each(|x| *x = S::cst(0.0));
        }
        let mut total = S::cst(0.0);
        for s in 0..self.count() {
            self.forward(beta, s, w);
            let y = &self.y[s * nd..(s + 1) * nd];
            for ((g, &z), &t) in w.g.iter_mut().zip(&w.z[layers * nd..]).zip(y) {
                let r = z - t;
                total += r * r;
                *g = r * coef;
            }
            let Some(grad) = grad.as_deref_mut() else {
                continue;
            };
            for l in (0..layers).rev() {
                // feed-forward: dZ̃ = G + ((G W_B) ⊙ σ'(U)) W_Aᵀ
                let (wa, wb) = (&self.w_a[l * d * f..], &self.w_b[l * d * f..]);
                let dact = &w.dact[l * n * f..(l + 1) * n * f];
                for m in 0..n {
                    for k in 0..f {
                        let mut acc = S::cst(0.0);
                        for r in 0..d {
                            acc += w.g[m * d + r] * wb[r * f + k];
                        }
                        w.hidden[m * f + k] = acc * dact[m * f + k];
                    }
                    for r in 0..d {
                        let mut acc = w.g[m * d + r];
                        for k in 0..f {
                            acc += w.hidden[m * f + k] * wa[r * f + k];
                        }
                        w.q[m * d + r] = acc;
                    }
                }
                // attention: Z̃ = Z + Σ_i P_i Z C_i, P_i = smax(Z A_i Zᵀ); Q = dZ̃
                let zin = &w.z[l * nd..(l + 1) * nd];
                w.next.copy_from_slice(&w.q);
                for h in 0..heads {
                    let blk = 2 * d * (l * heads + h);
                    let (a, c) = (&beta[blk..blk + d], &beta[blk + d..blk + 2 * d]);
                    let p = &w.p[(l * heads + h) * n * n..(l * heads + h + 1) * n * n];
                    // values V = Z C: dV = Pᵀ Q, ∂/∂c_r = Σ_j dV_jr Z_jr, dZ += dV C
                    for j in 0..n {
                        for r in 0..d {
                            let mut dv = S::cst(0.0);
                            for m in 0..n {
                                dv += p[m * n + j] * w.q[m * d + r];
                            }
                            grad[blk + d + r] += dv * zin[j * d + r];
                            w.next[j * d + r] += dv * c[r];
                        }
                    }
                    // dP = Q Vᵀ, dS = P ⊙ (dP − rowdot(P, dP))
                    for m in 0..n {
                        let mut rho = S::cst(0.0);
                        for j in 0..n {
                            let mut acc = S::cst(0.0);
                            for r in 0..d {
                                acc += w.q[m * d + r] * zin[j * d + r] * c[r];
                            }
                            w.dp[m * n + j] = acc;
                            rho += p[m * n + j] * acc;
                        }
                        for j in 0..n {
                            w.ds[m * n + j] = p[m * n + j] * (w.dp[m * n + j] - rho);
                        }
                    }
                    // scores S = Z A Zᵀ: W1 = dS Z, W2 = dSᵀ Z; ∂/∂a_r = Σ_m Z_mr W1_mr,
                    // dZ += (W1 + W2) A
                    for m in 0..n {
                        for r in 0..d {
                            let (mut w1, mut w2) = (S::cst(0.0), S::cst(0.0));
                            for j in 0..n {
                                w1 += w.ds[m * n + j] * zin[j * d + r];
                                w2 += w.ds[j * n + m] * zin[j * d + r];
                            }
                            w.w1[m * d + r] = w1;
                            w.w2[m * d + r] = w2;
                        }
                    }
                    for (k, &zk) in zin.iter().enumerate() {
                        let r = k % d;
                        grad[blk + r] += zk * w.w1[k];
                        w.next[k] += (w.w1[k] + w.w2[k]) * a[r];
                    }
                }
                std::mem::swap(&mut w.g, &mut w.next);
            }
        }
        total * (self.kappa / self.count() as f64)
    }

    /// (rank W_K W_Qᵀ, rank W_V W_Oᵀ) of every (layer, head), block order, counting entries with
    /// |β_i| > threshold.
    pub fn ranks(&self, beta: &[f64], threshold: f64) -> Vec<(usize, usize)> {
        let d = self.shape.d;
        let count = |xs: &[f64]| xs.iter().filter(|x| x.abs() > threshold).count();
        beta.chunks(2 * d)
            .map(|b| (count(&b[..d]), count(&b[d..])))
            .collect()
    }

    /// "L1H2" for block (layer 0, head 1).
    pub fn head_name(&self, layer: usize, head: usize) -> String {
        format!("L{}H{}", layer + 1, head + 1)
    }
}

impl BetaLoss for DiagTransformer {
    fn p(&self) -> usize {
        self.shape.p()
    }

    fn loss(&self, beta: &[f64]) -> f64 {
        let mut s = self.scratch.borrow_mut();
        self.loss_grad(beta, None, &mut s.real)
    }

    fn grad_beta(&self, beta: &[f64], out: &mut [f64]) {
        let mut s = self.scratch.borrow_mut();
        self.loss_grad(beta, Some(out), &mut s.real);
    }

    /// The directional derivative of the backpropagated gradient along `dir`: one pass on dual
    /// numbers β + ε·dir.
    fn hvp_beta(&self, beta: &[f64], dir: &[f64], out: &mut [f64]) {
        let mut guard = self.scratch.borrow_mut();
        let Scratch {
            dual,
            beta: b,
            grad,
            ..
        } = &mut *guard;
        for ((bd, &x), &dx) in b.iter_mut().zip(beta).zip(dir) {
            *bd = Dual { x, dx };
        }
        self.loss_grad(b, Some(grad), dual);
        for (o, g) in out.iter_mut().zip(grad.iter()) {
            *o = g.dx;
        }
    }

    fn coordinate_name(&self, i: usize) -> String {
        let s = self.slot(i);
        format!(
            "{} {}[{}]",
            self.head_name(s.layer, s.head),
            if s.kq { "KQ" } else { "VO" },
            s.r
        )
    }
}

#[cfg(test)]
mod tests {
    use num_dual::DualNum;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::models::diagonal::testing::{autodiff_grad_hvp, rel_err, Reference};

    /// L̃ written straight from the definition of Example 3.2, generic over num-dual numbers.
    struct Direct<'a>(&'a DiagTransformer);

    impl Reference for Direct<'_> {
        fn dim(&self) -> usize {
            self.0.p()
        }
        fn eval<T: DualNum<f64> + Copy>(&self, beta: &[T]) -> T {
            let m = self.0;
            let TransformerShape {
                layers,
                heads,
                d,
                tokens: n,
                d_ff: f,
            } = m.shape;
            let mut total = T::from(0.0);
            for s in 0..m.count() {
                let mut z: Vec<T> = m.x[s * n * d..(s + 1) * n * d]
                    .iter()
                    .map(|&v| T::from(v))
                    .collect();
                for l in 0..layers {
                    let mut zt = z.clone();
                    for h in 0..heads {
                        let a = |r: usize| beta[m.index(l, h, true, r)];
                        let c = |r: usize| beta[m.index(l, h, false, r)];
                        for i in 0..n {
                            let scores: Vec<T> = (0..n)
                                .map(|j| {
                                    (0..d).fold(T::from(0.0), |acc, r| {
                                        acc + z[i * d + r] * a(r) * z[j * d + r]
                                    })
                                })
                                .collect();
                            let e: Vec<T> = scores.iter().map(|x| x.exp()).collect();
                            let norm = e.iter().fold(T::from(0.0), |acc, x| acc + *x);
                            for r in 0..d {
                                let mixed = (0..n)
                                    .fold(T::from(0.0), |acc, j| acc + e[j] / norm * z[j * d + r]);
                                zt[i * d + r] += mixed * c(r);
                            }
                        }
                    }
                    z = zt.clone();
                    for i in 0..n {
                        for k in 0..f {
                            let u = (0..d).fold(T::from(0.0), |acc, r| {
                                acc + zt[i * d + r] * m.w_a[l * d * f + r * f + k]
                            });
                            for r in 0..d {
                                z[i * d + r] += u.tanh() * m.w_b[l * d * f + r * f + k];
                            }
                        }
                    }
                }
                for (zi, &yi) in z.iter().zip(&m.y[s * n * d..(s + 1) * n * d]) {
                    total += (*zi - yi).powi(2);
                }
            }
            total * (m.kappa / m.count() as f64)
        }
    }

    fn small_model(heads: usize) -> (DiagTransformer, Vec<f64>) {
        let shape = TransformerShape {
            layers: 2,
            heads,
            d: 3,
            tokens: 3,
            d_ff: 4,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let teacher: Vec<f64> = (0..shape.p())
            .map(|i| if i % 4 == 1 { 0.8 } else { 0.0 })
            .collect();
        let mut ffn = ChaCha8Rng::seed_from_u64(8);
        let model = DiagTransformer::random(shape, 5, &teacher, &mut rng, &mut ffn).unwrap();
        (model, teacher)
    }

    #[test]
    fn gradient_and_hvp_match_forward_mode_ad() {
        for heads in [1, 2] {
            let (model, _) = small_model(heads);
            let mut rng = ChaCha8Rng::seed_from_u64(heads as u64);
            let p = model.p();
            for _ in 0..3 {
                let beta: Vec<f64> = (0..p)
                    .map(|_| rng.sample::<f64, _>(StandardNormal))
                    .collect();
                let dir: Vec<f64> = (0..p)
                    .map(|_| rng.sample::<f64, _>(StandardNormal))
                    .collect();
                let (grad_ad, hvp_ad) = autodiff_grad_hvp(&Direct(&model), &beta, &dir);
                let (mut grad, mut hvp) = (vec![0.0; p], vec![0.0; p]);
                model.grad_beta(&beta, &mut grad);
                model.hvp_beta(&beta, &dir, &mut hvp);
                assert!(
                    rel_err(&grad, &grad_ad) < 1e-12,
                    "{}",
                    rel_err(&grad, &grad_ad)
                );
                assert!(rel_err(&hvp, &hvp_ad) < 1e-12, "{}", rel_err(&hvp, &hvp_ad));
                let direct = Direct(&model).eval(&beta);
                assert!((model.loss(&beta) / direct - 1.0).abs() < 1e-13);
            }
        }
    }

    #[test]
    fn the_teacher_has_zero_loss_and_names_locate_coordinates() {
        let (model, teacher) = small_model(2);
        assert_eq!(model.loss(&teacher), 0.0);
        assert!(model.loss(&vec![0.0; model.p()]) > 0.0);
        let i = model.index(1, 0, false, 2);
        assert_eq!(model.coordinate_name(i), "L2H1 VO[2]");
        assert_eq!(
            model.slot(i),
            Slot {
                layer: 1,
                head: 0,
                kq: false,
                r: 2
            }
        );
    }

    /// Example 3.2's structural fact: with c_{ℓ,i} = 0 a head contributes nothing, whatever
    /// a_{ℓ,i}, so G vanishes on its KQ entries.
    #[test]
    fn kq_gradient_vanishes_on_heads_without_values() {
        let (model, _) = small_model(1);
        let mut beta = vec![0.3; model.p()];
        for r in 0..3 {
            beta[model.index(0, 0, false, r)] = 0.0;
        }
        let mut grad = vec![0.0; model.p()];
        model.grad_beta(&beta, &mut grad);
        for r in 0..3 {
            assert_eq!(grad[model.index(0, 0, true, r)], 0.0);
        }
        assert!(grad[model.index(1, 0, true, 0)] != 0.0);
    }
}

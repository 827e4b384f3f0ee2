//! The full key–query parameterization of seed 001 (spec §1.2, §2.2–§2.5): K, Q ∈ ℝ^{d×d_e}
//! trained separately, W = KQᵀ, exponential loss L(K, Q) = L_W(KQᵀ) where L_W is seed 003's
//! fixed-decoder model ([`FixedDecoder`] with [`Loss::Exponential`] and the queries z_i). Nothing
//! of the loss is recomputed here: with G = ∇_W L (log domain, from [`FixedDecoder`]),
//! - ∇_K L = G Q, ∇_Q L = Gᵀ K;
//! - ∇²L·(dK, dQ) = (H\[dW\] Q + G dQ, H\[dW\]ᵀ K + Gᵀ dK), dW = dK Qᵀ + K dQᵀ, H = ∇²L_W
//!   (the chain rule: second-order term plus the two cross terms).
//!
//! State layout: z = [vec_row(K); vec_row(Q)] (row-major K then Q, spec §8), dimension 2·d·d_e;
//! W is column-major d × d as [`FixedDecoder`] takes it. The flow conserves C = KᵀK − QᵀQ
//! (d_e × d_e, spec §2.5). Long runs use [`super::log_time::LogTimeDescent`] (τ = ln(1 + t)).
//!
//! Also here: the margin µ(W) = min ⟨A_il, W⟩ and the direction W/µ(W) (Def. 4.1), the origin
//! gradient G_0 = −∇_W L(0) and the cosh/sinh solution of the flow linearized at K = Q = 0
//! (spec §2.6(d)).

use std::cell::RefCell;

use nalgebra::DMatrix;

use super::log_time::ScaledGradient;
use crate::attention::{FixedDecoder, Instance, Loss, TokenError};
use crate::flow::GradientFlow;
use crate::stats;

#[derive(Debug)]
struct Scratch {
    /// W, the unit W-gradient, dW and H[dW] (column-major d × d each).
    w: Vec<f64>,
    g: Vec<f64>,
    dw: Vec<f64>,
    hw: Vec<f64>,
}

/// L(K, Q) = L_W(KQᵀ) on z = [vec_row K; vec_row Q].
#[derive(Debug)]
pub struct FullKq {
    model: FixedDecoder,
    d: usize,
    de: usize,
    scratch: RefCell<Scratch>,
}

impl FullKq {
    /// The KQ model over an instance's tokens, queries and decoder with embedding width d_e.
    pub fn new(inst: &Instance, de: usize) -> Result<Self, TokenError> {
        let model = FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential)?;
        Self::from_model(model, de)
    }

    /// The KQ parameterization of a combined-W model.
    pub fn from_model(model: FixedDecoder, de: usize) -> Result<Self, TokenError> {
        if de == 0 {
            return Err(TokenError::Invalid("d_e must be at least 1".into()));
        }
        let d = model.data().d;
        let z = || vec![0.0; d * d];
        Ok(FullKq {
            model,
            d,
            de,
            scratch: RefCell::new(Scratch {
                w: z(),
                g: z(),
                dw: z(),
                hw: z(),
            }),
        })
    }

    /// The combined-W model L_W.
    pub fn model(&self) -> &FixedDecoder {
        &self.model
    }

    pub fn d(&self) -> usize {
        self.d
    }

    pub fn de(&self) -> usize {
        self.de
    }

    /// (K, Q) blocks of a state.
    pub fn split<'z>(&self, z: &'z [f64]) -> (&'z [f64], &'z [f64]) {
        z.split_at(self.d * self.de)
    }

    /// The state of the factor matrices (d × d_e each).
    pub fn pack(&self, k: &DMatrix<f64>, q: &DMatrix<f64>) -> Vec<f64> {
        assert_eq!(k.shape(), (self.d, self.de), "K must be d × d_e");
        assert_eq!(q.shape(), (self.d, self.de), "Q must be d × d_e");
        let row = |m: &DMatrix<f64>| {
            (0..self.d)
                .flat_map(|r| (0..self.de).map(move |a| m[(r, a)]))
                .collect::<Vec<_>>()
        };
        let mut z = row(k);
        z.extend(row(q));
        z
    }

    /// K and Q of a state.
    pub fn factors(&self, z: &[f64]) -> (DMatrix<f64>, DMatrix<f64>) {
        let (k, q) = self.split(z);
        (
            DMatrix::from_row_slice(self.d, self.de, k),
            DMatrix::from_row_slice(self.d, self.de, q),
        )
    }

    /// W = KQᵀ (column-major) into `w`.
    pub fn combined_into(&self, z: &[f64], w: &mut [f64]) {
        let (d, de) = (self.d, self.de);
        let (k, q) = self.split(z);
        for c in 0..d {
            for r in 0..d {
                w[c * d + r] = (0..de).map(|a| k[r * de + a] * q[c * de + a]).sum();
            }
        }
    }

    /// W = KQᵀ (column-major).
    pub fn combined(&self, z: &[f64]) -> Vec<f64> {
        let mut w = vec![0.0; self.d * self.d];
        self.combined_into(z, &mut w);
        w
    }

    /// dW = dK Qᵀ + K dQᵀ (column-major) into `out`.
    fn combined_tangent(&self, z: &[f64], v: &[f64], out: &mut [f64]) {
        let (d, de) = (self.d, self.de);
        let (k, q) = self.split(z);
        let (dk, dq) = self.split(v);
        for c in 0..d {
            for r in 0..d {
                out[c * d + r] = (0..de)
                    .map(|a| dk[r * de + a] * q[c * de + a] + k[r * de + a] * dq[c * de + a])
                    .sum();
            }
        }
    }

    /// out = α (M Q, Mᵀ K) + β out for M column-major d × d: the KQ image of a W-gradient.
    fn pull_back(&self, m: &[f64], k: &[f64], q: &[f64], alpha: f64, out: &mut [f64]) {
        let (d, de) = (self.d, self.de);
        let (ok, oq) = out.split_at_mut(d * de);
        for r in 0..d {
            for a in 0..de {
                ok[r * de + a] += alpha * (0..d).map(|c| m[c * d + r] * q[c * de + a]).sum::<f64>();
            }
        }
        for c in 0..d {
            for a in 0..de {
                oq[c * de + a] += alpha * (0..d).map(|r| m[c * d + r] * k[r * de + a]).sum::<f64>();
            }
        }
    }

    /// ln(L − L*) at a state.
    pub fn log_excess_loss(&self, z: &[f64]) -> f64 {
        let mut sc = self.scratch.borrow_mut();
        self.combined_into(z, &mut sc.w);
        self.model.log_excess_loss(&sc.w)
    }

    /// The conserved balance C = KᵀK − QᵀQ (d_e × d_e).
    pub fn balance(&self, z: &[f64]) -> DMatrix<f64> {
        let (k, q) = self.factors(z);
        k.transpose() * &k - q.transpose() * &q
    }
}

impl ScaledGradient for FullKq {
    fn dim(&self) -> usize {
        2 * self.d * self.de
    }

    fn grad_scaled(&self, z: &[f64], direction: &mut [f64]) -> f64 {
        let mut sc = self.scratch.borrow_mut();
        let Scratch { w, g, .. } = &mut *sc;
        self.combined_into(z, w);
        let log_norm_w = self.model.unit_gradient(w, g);
        direction.iter_mut().for_each(|x| *x = 0.0);
        if log_norm_w == f64::NEG_INFINITY {
            return log_norm_w;
        }
        let (k, q) = self.split(z);
        self.pull_back(g, k, q, 1.0, direction);
        let norm = crate::flow::norm(direction);
        if norm == 0.0 {
            return f64::NEG_INFINITY;
        }
        direction.iter_mut().for_each(|x| *x /= norm);
        log_norm_w + norm.ln()
    }

    fn hvp_scaled(&self, z: &[f64], v: &[f64], shift: f64, out: &mut [f64]) {
        let mut sc = self.scratch.borrow_mut();
        let Scratch { w, g, dw, hw } = &mut *sc;
        self.combined_into(z, w);
        self.combined_tangent(z, v, dw);
        // second-order term: e^{−shift} H[dW] pulled back through Q and K
        self.model.hvp_scaled(w, dw, shift, hw);
        out.iter_mut().for_each(|x| *x = 0.0);
        let (k, q) = self.split(z);
        self.pull_back(hw, k, q, 1.0, out);
        // cross terms e^{−shift} (G dQ, Gᵀ dK)
        let log_norm_w = self.model.unit_gradient(w, g);
        if log_norm_w == f64::NEG_INFINITY {
            return;
        }
        let scale = (log_norm_w - shift).exp();
        let (dk, dq) = self.split(v);
        self.pull_back(g, dk, dq, scale, out);
    }
}

impl GradientFlow for FullKq {
    fn dim(&self) -> usize {
        2 * self.d * self.de
    }
    /// The excess loss L − L* (as for [`FixedDecoder`]).
    fn loss(&self, z: &[f64]) -> f64 {
        self.log_excess_loss(z).exp()
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let log_norm = self.grad_scaled(z, g);
        let norm = log_norm.exp();
        g.iter_mut().for_each(|x| *x *= norm);
    }
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
        ScaledGradient::hvp_scaled(self, z, u, 0.0, out);
    }
    fn invariant_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        for a in 0..self.de {
            for b in a..self.de {
                names.push(format!("C[{a},{b}]"));
            }
        }
        names
    }
    /// The upper triangle of C = KᵀK − QᵀQ.
    fn invariants(&self, z: &[f64], out: &mut [f64]) {
        let (d, de) = (self.d, self.de);
        let (k, q) = self.split(z);
        let mut idx = 0;
        for a in 0..de {
            for b in a..de {
                out[idx] = (0..d)
                    .map(|r| k[r * de + a] * k[r * de + b] - q[r * de + a] * q[r * de + b])
                    .sum();
                idx += 1;
            }
        }
    }
}

/// ⟨A_il, W⟩ = (x_i,opt − x_il)ᵀ W z_i for every i and l ≠ opt(i), in the order of
/// [`crate::analysis::svm::RankOneConstraints::w_svm`] (W column-major).
pub fn margins(model: &FixedDecoder, w: &[f64]) -> Vec<f64> {
    let data = model.data();
    let d = data.d;
    let mut out = Vec::with_capacity(data.n * (data.t - 1));
    for (i, &o) in model.optimal_tokens().iter().enumerate() {
        let z = data.query(i);
        let wz: Vec<f64> = (0..d)
            .map(|r| (0..d).map(|c| w[c * d + r] * z[c]).sum())
            .collect();
        let xo = data.token(i, o);
        for l in (0..data.t).filter(|&l| l != o) {
            let xl = data.token(i, l);
            out.push((0..d).map(|r| (xo[r] - xl[r]) * wz[r]).sum());
        }
    }
    out
}

/// µ(W) = min_{i, l≠opt} ⟨A_il, W⟩ (Def. 4.1).
pub fn min_margin(model: &FixedDecoder, w: &[f64]) -> f64 {
    stats::min(margins(model, w))
}

/// Ŵ = W/µ(W), defined once the optimal tokens are separated (µ > 0; `None` before).
pub fn normalized_direction(model: &FixedDecoder, w: &[f64]) -> Option<Vec<f64>> {
    let mu = min_margin(model, w);
    (mu > 0.0).then(|| w.iter().map(|x| x / mu).collect())
}

/// G_0 = −∇_W L(0) (d × d): the linear part of the flow at the origin saddle (spec §2.6(d)).
pub fn origin_gradient(model: &FixedDecoder) -> DMatrix<f64> {
    let d = model.data().d;
    let mut g = vec![0.0; d * d];
    model.grad(&vec![0.0; d * d], &mut g);
    -DMatrix::from_column_slice(d, d, &g)
}

/// The flow linearized at K = Q = 0, K̇ = G_0 Q, Q̇ = G_0ᵀK, solved in closed form with
/// G_0 = U S Vᵀ: K(t) = U[cosh(St)UᵀK_0 + sinh(St)VᵀQ_0], Q(t) = V[sinh(St)UᵀK_0 + cosh(St)VᵀQ_0].
pub struct OriginLinearization {
    u: DMatrix<f64>,
    v: DMatrix<f64>,
    /// Singular values s_k(G_0).
    pub s: Vec<f64>,
}

impl OriginLinearization {
    pub fn new(g0: &DMatrix<f64>) -> Self {
        let svd = g0.clone().svd(true, true);
        OriginLinearization {
            u: svd.u.expect("U requested"),
            v: svd.v_t.expect("Vᵀ requested").transpose(),
            s: svd.singular_values.iter().copied().collect(),
        }
    }

    /// (K(t), Q(t)) from (K_0, Q_0).
    pub fn factors(
        &self,
        k0: &DMatrix<f64>,
        q0: &DMatrix<f64>,
        t: f64,
    ) -> (DMatrix<f64>, DMatrix<f64>) {
        let a = self.u.transpose() * k0;
        let b = self.v.transpose() * q0;
        let mut ka = a.clone();
        let mut qb = b.clone();
        for (r, &s) in self.s.iter().enumerate() {
            let (ch, sh) = ((s * t).cosh(), (s * t).sinh());
            for c in 0..a.ncols() {
                ka[(r, c)] = ch * a[(r, c)] + sh * b[(r, c)];
                qb[(r, c)] = sh * a[(r, c)] + ch * b[(r, c)];
            }
        }
        (&self.u * ka, &self.v * qb)
    }
}

#[cfg(test)]
#[path = "full_tests.rs"]
mod tests;

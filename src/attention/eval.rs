//! Log-domain evaluation of L(u, W) = (1/n) Σ_i ℓ(γ_iᵀ φ(X_i W q_i)) with γ_i = y_i X_i u, its
//! gradients and its Hessian-vector product (spec 003 §1.2, §8.2), shared by the fixed-decoder
//! and the joint models.
//!
//! Every quantity that vanishes as attention saturates (1 − φ_opt, the deficit δ_i, the
//! excess loss, the gradient, the HVP) is formed as a [`SignedLog`] and converted to f64 only
//! after a caller-chosen scale e^shift is divided out, so the models stay exact at logit gaps
//! of thousands.

use super::data::TokenData;
use super::logdomain::{centered, log_sum_exp, SignedLog};
use super::loss::Loss;
use crate::stats;

/// Per-sequence results of [`evaluate`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SampleState {
    /// Token with the largest logit (the pivot of the centred values).
    pub pivot: usize,
    /// Optimal token argmax_t γ_{i,t}.
    pub opt: usize,
    pub gamma_opt: f64,
    /// Deficit δ_i = γ_{i,opt} − m_i = Σ_{t≠opt} φ_t(γ_opt − γ_t) ≥ 0 and its logarithm.
    pub delta: f64,
    pub log_delta: f64,
    /// Margin m_i = γ_iᵀφ_i.
    pub margin: f64,
    /// ln |ℓ'(m_i)| and ln(ℓ''/|ℓ'|)(m_i).
    pub log_slope: f64,
    pub log_curvature: f64,
    /// ln(1 − φ_{i,opt}).
    pub log_one_minus_phi_opt: f64,
}

/// Work arrays sized once per model, so that evaluations do not allocate.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    /// W q_i, V q_i, and two token combinations (d each).
    p: Vec<f64>,
    dp: Vec<f64>,
    v: Vec<f64>,
    vu: Vec<f64>,
    /// Log-softmax ln φ_{i,t} and the centred scores γ_{i,t} − m_i (n × T).
    pub ls: Vec<f64>,
    pub gm: Vec<SignedLog>,
    /// δs_t, δγ_t and their centred forms (T each).
    ds_raw: Vec<f64>,
    ds: Vec<SignedLog>,
    dg_raw: Vec<f64>,
    dg: Vec<SignedLog>,
    pub samples: Vec<SampleState>,
}

impl Workspace {
    pub fn new(n: usize, t: usize, d: usize) -> Self {
        Workspace {
            p: vec![0.0; d],
            dp: vec![0.0; d],
            v: vec![0.0; d],
            vu: vec![0.0; d],
            ls: vec![0.0; n * t],
            gm: vec![SignedLog::ZERO; n * t],
            ds_raw: vec![0.0; t],
            ds: vec![SignedLog::ZERO; t],
            dg_raw: vec![0.0; t],
            dg: vec![SignedLog::ZERO; t],
            samples: vec![SampleState::default(); n],
        }
    }
}

/// out = W q for W stored column-major (d × d).
fn mat_vec(w: &[f64], q: &[f64], out: &mut [f64]) {
    let d = q.len();
    out.iter_mut().for_each(|o| *o = 0.0);
    for (c, &qc) in q.iter().enumerate() {
        if qc != 0.0 {
            for (o, &wrc) in out.iter_mut().zip(&w[c * d..(c + 1) * d]) {
                *o += wrc * qc;
            }
        }
    }
}

/// out += a qᵀ (column-major d × d).
fn add_outer(a: &[f64], q: &[f64], out: &mut [f64]) {
    let d = q.len();
    for (c, &qc) in q.iter().enumerate() {
        if qc != 0.0 {
            for (o, &ar) in out[c * d..(c + 1) * d].iter_mut().zip(a) {
                *o += ar * qc;
            }
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Fills the workspace at W (column-major) for scores γ (n × T) and optimal tokens `opt`.
pub(crate) fn evaluate(
    data: &TokenData,
    w: &[f64],
    gamma: &[f64],
    opt: &[usize],
    loss: Loss,
    ws: &mut Workspace,
) {
    let tt = data.t;
    for i in 0..data.n {
        mat_vec(w, data.query(i), &mut ws.p);
        let ls = &mut ws.ls[i * tt..(i + 1) * tt];
        for (t, l) in ls.iter_mut().enumerate() {
            *l = dot(data.token(i, t), &ws.p);
        }
        let pivot = super::data::argmax(ls);
        let lse = log_sum_exp(ls.iter().copied());
        ls.iter_mut().for_each(|l| *l -= lse);
        let g = &gamma[i * tt..(i + 1) * tt];
        centered(g, ls, pivot, &mut ws.gm[i * tt..(i + 1) * tt]);
        let o = opt[i];
        let others = (0..tt).filter(|&t| t != o);
        let log_delta = log_sum_exp(others.clone().map(|t| {
            let gap = g[o] - g[t];
            if gap > 0.0 {
                ls[t] + gap.ln()
            } else {
                f64::NEG_INFINITY
            }
        }));
        let delta = log_delta.exp();
        let margin = g[o] - delta;
        ws.samples[i] = SampleState {
            pivot,
            opt: o,
            gamma_opt: g[o],
            delta,
            log_delta,
            margin,
            log_slope: loss.log_neg_derivative(margin),
            log_curvature: loss.log_curvature_ratio(margin),
            log_one_minus_phi_opt: log_sum_exp(others.map(|t| ls[t])),
        };
    }
}

/// ln L = ln((1/n) Σ ℓ(m_i)).
pub(crate) fn log_loss(ws: &Workspace, loss: Loss) -> f64 {
    let n = ws.samples.len() as f64;
    log_sum_exp(ws.samples.iter().map(|s| loss.log_value(s.margin))) - n.ln()
}

/// ln(L − L*) with L* = (1/n) Σ ℓ(γ_{i,opt}).
pub(crate) fn log_excess(ws: &Workspace, loss: Loss) -> f64 {
    let n = ws.samples.len() as f64;
    log_sum_exp(
        ws.samples
            .iter()
            .map(|s| loss.log_excess(s.gamma_opt, s.delta, s.log_delta)),
    ) - n.ln()
}

/// Log-magnitude of the W-gradient coefficient of token t of sample i (before the 1/n).
fn w_coefficient(ws: &Workspace, i: usize, k: usize) -> SignedLog {
    // ℓ'_i φ_t (γ_t − m_i), with ℓ' < 0
    -(SignedLog::exp(ws.samples[i].log_slope + ws.ls[k]) * ws.gm[k])
}

/// ln max_{i,t} |∂L/∂(x_{i,t}ᵀ W q_i)|: the scale the W-gradient is formed at.
pub(crate) fn w_gradient_scale(ws: &Workspace, t: usize) -> f64 {
    let n = ws.samples.len();
    stats::max((0..n * t).map(|k| w_coefficient(ws, k / t, k).log)) - (n as f64).ln()
}

/// ln of the largest u-gradient coefficient |ℓ'_i| φ_{i,t}/n.
pub(crate) fn u_gradient_scale(ws: &Workspace, t: usize) -> f64 {
    let n = ws.samples.len();
    stats::max((0..n * t).map(|k| ws.samples[k / t].log_slope + ws.ls[k])) - (n as f64).ln()
}

/// out = e^{−shift} ∇_W L (column-major d × d).
pub(crate) fn w_gradient(data: &TokenData, ws: &mut Workspace, shift: f64, out: &mut [f64]) {
    out.iter_mut().for_each(|o| *o = 0.0);
    let shift = shift + (data.n as f64).ln();
    for i in 0..data.n {
        ws.v.iter_mut().for_each(|v| *v = 0.0);
        for t in 0..data.t {
            let c = w_coefficient(ws, i, i * data.t + t).scaled(shift);
            if c != 0.0 {
                for (v, &x) in ws.v.iter_mut().zip(data.token(i, t)) {
                    *v += c * x;
                }
            }
        }
        add_outer(&ws.v, data.query(i), out);
    }
}

/// out = e^{−shift} ∇_u L = e^{−shift} (1/n) Σ_i ℓ'_i y_i X_iᵀ φ_i.
pub(crate) fn u_gradient(data: &TokenData, ws: &Workspace, shift: f64, out: &mut [f64]) {
    out.iter_mut().for_each(|o| *o = 0.0);
    let shift = shift + (data.n as f64).ln();
    for i in 0..data.n {
        for t in 0..data.t {
            let k = i * data.t + t;
            let c = -data.y[i] * (ws.samples[i].log_slope + ws.ls[k] - shift).exp();
            for (o, &x) in out.iter_mut().zip(data.token(i, t)) {
                *o += c * x;
            }
        }
    }
}

/// A direction of the Hessian-vector product: V for W (column-major) and, for the joint
/// model, δu.
pub(crate) struct Direction<'a> {
    pub w: &'a [f64],
    pub u: Option<&'a [f64]>,
}

/// e^{−shift} ∇²L · (δu, V): the W block into `out_w` and, when `out_u` is given, the u block.
///
/// With δs = X V q, δφ = φ ⊙ (δs − φᵀδs), δγ = y X δu and δm = γᵀδφ + φᵀδγ (spec 003 §1.2):
/// H_W = (1/n) Σ [ℓ'' δm v + ℓ' Xᵀ(δφ ⊙ (γ − m) − φ γᵀδφ + φ ⊙ (δγ − φᵀδγ))] qᵀ,
/// H_u = (1/n) Σ y [ℓ'' δm Xᵀφ + ℓ' Xᵀδφ].
pub(crate) fn hessian_vector(
    data: &TokenData,
    ws: &mut Workspace,
    dir: Direction,
    shift: f64,
    out_w: &mut [f64],
    mut out_u: Option<&mut [f64]>,
) {
    out_w.iter_mut().for_each(|o| *o = 0.0);
    if let Some(o) = out_u.as_deref_mut() {
        o.iter_mut().for_each(|o| *o = 0.0);
    }
    let tt = data.t;
    let shift = shift + (data.n as f64).ln();
    for i in 0..data.n {
        let s = ws.samples[i];
        let ls = &ws.ls[i * tt..(i + 1) * tt];
        let gm = &ws.gm[i * tt..(i + 1) * tt];
        mat_vec(dir.w, data.query(i), &mut ws.dp);
        for t in 0..tt {
            ws.ds_raw[t] = dot(data.token(i, t), &ws.dp);
            ws.dg_raw[t] = dir
                .u
                .map_or(0.0, |du| data.y[i] * dot(data.token(i, t), du));
        }
        centered(&ws.ds_raw, ls, s.pivot, &mut ws.ds);
        centered(&ws.dg_raw, ls, s.pivot, &mut ws.dg);
        let phi = |t: usize| SignedLog::exp(ls[t]);
        let (ds, dg, dg_raw) = (&ws.ds, &ws.dg, &ws.dg_raw);
        let dm_w = SignedLog::sum((0..tt).map(|t| phi(t) * ds[t] * gm[t]));
        let dm = SignedLog::sum(
            (0..tt)
                .map(|t| phi(t) * SignedLog::from_f64(dg_raw[t]))
                .chain([dm_w]),
        );
        let slope = SignedLog::exp(s.log_slope);
        let curve = SignedLog::exp(s.log_slope + s.log_curvature);
        ws.v.iter_mut().for_each(|v| *v = 0.0);
        ws.vu.iter_mut().for_each(|v| *v = 0.0);
        for t in 0..tt {
            let terms = [
                curve * dm * gm[t],
                -(slope * ds[t] * gm[t]),
                slope * dm_w,
                -(slope * dg[t]),
            ];
            let cw = (phi(t) * SignedLog::sum(terms.iter().copied())).scaled(shift);
            let u_terms = [curve * dm, -(slope * ds[t])];
            let cu = (phi(t) * SignedLog::sum(u_terms.iter().copied())).scaled(shift) * data.y[i];
            for ((v, vu), &x) in ws.v.iter_mut().zip(ws.vu.iter_mut()).zip(data.token(i, t)) {
                *v += cw * x;
                *vu += cu * x;
            }
        }
        add_outer(&ws.v, data.query(i), out_w);
        if let Some(o) = out_u.as_deref_mut() {
            o.iter_mut().zip(&ws.vu).for_each(|(o, v)| *o += v);
        }
    }
}

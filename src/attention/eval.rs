//! Log-domain evaluation of L(u, W) = (1/n) Σ_i ℓ(γ_iᵀ φ(X_i W q_i)) with γ_i = y_i X_i u, its
//! gradients and its Hessian-vector product (spec 003 §1.2, §8.2), shared by the fixed-decoder
//! and the joint models.
//!
//! Every quantity that vanishes as attention saturates (1 − φ_opt, the deficit δ_i, the
//! excess loss, the gradient, the HVP) is formed as a [`SignedLog`] and converted to f64 only
//! after a caller-chosen scale e^shift is divided out, so the models stay exact at logit gaps
//! of thousands.

use super::data::TokenData;
use super::logdomain::{centered, centered_with_gaps, log_sum_exp, SignedLog};
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
}

/// Work arrays sized once per model, so that evaluations do not allocate.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    /// W Q and V Q (column i is W q_i, d × n), the per-sample token combinations whose
    /// products with the queries form the W block (d × n), and the u block's combination (d).
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
    /// The W the per-sample state was last evaluated at (empty: none). A model whose scores do
    /// not change between calls skips [`evaluate`] at the same W: an implicit solver's
    /// Jacobian is n products at one point.
    pub at: Vec<f64>,
}

impl Workspace {
    pub fn new(n: usize, t: usize, d: usize) -> Self {
        Workspace {
            p: vec![0.0; d * n],
            dp: vec![0.0; d * n],
            v: vec![0.0; d * n],
            vu: vec![0.0; d],
            ls: vec![0.0; n * t],
            gm: vec![SignedLog::ZERO; n * t],
            ds_raw: vec![0.0; t],
            ds: vec![SignedLog::ZERO; t],
            dg_raw: vec![0.0; t],
            dg: vec![SignedLog::ZERO; t],
            samples: vec![SampleState::default(); n],
            at: Vec::new(),
        }
    }
}

/// C = A·B for an m × k matrix A and a k × n matrix B given by their (row, column) strides, into
/// C column-major (m × n), through matrixmultiply's blocked kernel (vectorized, several
/// accumulators; its summation order is fixed, so results do not depend on the thread count).
fn gemm(
    (m, k, n): (usize, usize, usize),
    a: (&[f64], usize, usize),
    b: (&[f64], usize, usize),
    c: &mut [f64],
) {
    let last =
        |rows: usize, cols: usize, (rs, cs): (usize, usize)| (rows - 1) * rs + (cols - 1) * cs;
    assert!(a.0.len() > last(m, k, (a.1, a.2)) && b.0.len() > last(k, n, (b.1, b.2)));
    assert_eq!(c.len(), m * n);
    // SAFETY: the asserts keep every index of A, B and C inside its slice.
    unsafe {
        matrixmultiply::dgemm(
            m,
            k,
            n,
            1.0,
            a.0.as_ptr(),
            a.1 as isize,
            a.2 as isize,
            b.0.as_ptr(),
            b.1 as isize,
            b.2 as isize,
            0.0,
            c.as_mut_ptr(),
            1,
            m as isize,
        );
    }
}

/// out = A Q (d × n, column i is A q_i) for A column-major d × d.
fn times_queries(data: &TokenData, a: &[f64], out: &mut [f64]) {
    let d = data.d;
    gemm((d, d, data.n), (a, 1, d), (&data.queries, 1, d), out);
}

/// out = V Qᵀ = Σ_i v_i q_iᵀ (column-major d × d) for V = (v_1 … v_n), d × n.
fn times_queries_transposed(data: &TokenData, v: &[f64], out: &mut [f64]) {
    let d = data.d;
    gemm((d, data.n, d), (v, 1, d), (&data.queries, d, 1), out);
}

/// aᵀb with four accumulators (a dependent chain of additions would wait on each one).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut acc = [0.0; 4];
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// Writes ln|γ_{i,a} − γ_{i,b}| for every sample i and token pair (a, b) (n × T × T, −∞ where
/// the scores are equal): the logarithms [`evaluate`]'s centred scores and deficits need, taken
/// once per set of scores (for the fixed decoder, once per model) instead of per evaluation.
pub(crate) fn score_log_gaps(gamma: &[f64], t: usize, out: &mut [f64]) {
    for (g, out) in gamma.chunks_exact(t).zip(out.chunks_exact_mut(t * t)) {
        for a in 0..t {
            out[a * t + a] = f64::NEG_INFINITY;
            for b in a + 1..t {
                let log_gap = (g[a] - g[b]).abs().ln();
                out[a * t + b] = log_gap;
                out[b * t + a] = log_gap;
            }
        }
    }
}

/// Fills the workspace at W (column-major) for scores γ (n × T), their [`score_log_gaps`] and
/// optimal tokens `opt`.
pub(crate) fn evaluate(
    data: &TokenData,
    w: &[f64],
    (gamma, log_gaps): (&[f64], &[f64]),
    opt: &[usize],
    loss: Loss,
    ws: &mut Workspace,
) {
    let (tt, d) = (data.t, data.d);
    times_queries(data, w, &mut ws.p);
    for i in 0..data.n {
        let p = &ws.p[i * d..(i + 1) * d];
        let ls = &mut ws.ls[i * tt..(i + 1) * tt];
        for (t, l) in ls.iter_mut().enumerate() {
            *l = dot(data.token(i, t), p);
        }
        let pivot = super::data::argmax(ls);
        let lse = log_sum_exp(ls.iter().copied());
        ls.iter_mut().for_each(|l| *l -= lse);
        let g = &gamma[i * tt..(i + 1) * tt];
        let log_gap = &log_gaps[i * tt * tt..(i + 1) * tt * tt];
        let gm = &mut ws.gm[i * tt..(i + 1) * tt];
        centered_with_gaps(g, ls, pivot, |t| log_gap[pivot * tt + t], gm);
        let o = opt[i];
        let others = (0..tt).filter(|&t| t != o);
        let log_delta = log_sum_exp(others.map(|t| {
            if g[o] > g[t] {
                ls[t] + log_gap[o * tt + t]
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
        };
    }
}

/// ln(1 − φ_{i,opt}) = ln Σ_{t≠opt} φ_{i,t}, exact when φ_{i,opt} rounds to 1 (asked for by
/// reports, not by gradients, so [`evaluate`] does not form it).
pub(crate) fn log_one_minus_phi_opt(ws: &Workspace, i: usize) -> f64 {
    let t = ws.ls.len() / ws.samples.len();
    let ls = &ws.ls[i * t..(i + 1) * t];
    let opt = ws.samples[i].opt;
    log_sum_exp((0..t).filter(|&k| k != opt).map(|k| ls[k]))
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
    let shift = shift + (data.n as f64).ln();
    let d = data.d;
    ws.v.iter_mut().for_each(|v| *v = 0.0);
    for i in 0..data.n {
        for t in 0..data.t {
            let c = w_coefficient(ws, i, i * data.t + t).scaled(shift);
            if c != 0.0 {
                for (v, &x) in ws.v[i * d..(i + 1) * d].iter_mut().zip(data.token(i, t)) {
                    *v += c * x;
                }
            }
        }
    }
    times_queries_transposed(data, &ws.v, out);
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
    if let Some(o) = out_u.as_deref_mut() {
        o.iter_mut().for_each(|o| *o = 0.0);
    }
    let (tt, d) = (data.t, data.d);
    let shift = shift + (data.n as f64).ln();
    times_queries(data, dir.w, &mut ws.dp);
    ws.v.iter_mut().for_each(|v| *v = 0.0);
    for i in 0..data.n {
        let s = ws.samples[i];
        let ls = &ws.ls[i * tt..(i + 1) * tt];
        let gm = &ws.gm[i * tt..(i + 1) * tt];
        let dp = &ws.dp[i * d..(i + 1) * d];
        for t in 0..tt {
            ws.ds_raw[t] = dot(data.token(i, t), dp);
        }
        centered(&ws.ds_raw, ls, s.pivot, &mut ws.ds);
        let phi = |t: usize| SignedLog::exp(ls[t]);
        let ds = &ws.ds;
        let dm_w = SignedLog::sum((0..tt).map(|t| phi(t) * ds[t] * gm[t]));
        // Without δu, δγ = 0: its terms are exact zeros, which leave every signed-log sum
        // unchanged, so they are skipped (the fixed-decoder HVP's cost is halved).
        let dm = match dir.u {
            Some(du) => {
                for t in 0..tt {
                    ws.dg_raw[t] = data.y[i] * dot(data.token(i, t), du);
                }
                centered(&ws.dg_raw, ls, s.pivot, &mut ws.dg);
                let dg_raw = &ws.dg_raw;
                SignedLog::sum(
                    (0..tt)
                        .map(|t| phi(t) * SignedLog::from_f64(dg_raw[t]))
                        .chain([dm_w]),
                )
            }
            None => dm_w,
        };
        let slope = SignedLog::exp(s.log_slope);
        let curve = SignedLog::exp(s.log_slope + s.log_curvature);
        ws.vu.iter_mut().for_each(|v| *v = 0.0);
        let v = &mut ws.v[i * d..(i + 1) * d];
        for t in 0..tt {
            let dg = if dir.u.is_some() {
                ws.dg[t]
            } else {
                SignedLog::ZERO
            };
            let terms = [
                curve * dm * gm[t],
                -(slope * ds[t] * gm[t]),
                slope * dm_w,
                -(slope * dg),
            ];
            let cw = (phi(t) * SignedLog::sum(terms.iter().copied())).scaled(shift);
            let x = data.token(i, t);
            v.iter_mut().zip(x).for_each(|(v, &x)| *v += cw * x);
            if out_u.is_some() {
                let u_terms = [curve * dm, -(slope * ds[t])];
                let cu =
                    (phi(t) * SignedLog::sum(u_terms.iter().copied())).scaled(shift) * data.y[i];
                ws.vu.iter_mut().zip(x).for_each(|(vu, &x)| *vu += cu * x);
            }
        }
        if let Some(o) = out_u.as_deref_mut() {
            o.iter_mut().zip(&ws.vu).for_each(|(o, v)| *o += v);
        }
    }
    times_queries_transposed(data, &ws.v, out_w);
}

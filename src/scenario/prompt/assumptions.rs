//! `assumptions` (Assumptions 2–4 and Remarks 1, 2, 4 of paper 002; spec §1.1, §3.3, E1): the
//! measured validators of the overparameterized theory's hypotheses on the instance that
//! `thm1-linear-rate` draws at the same seed (C-orth, d = nN, W = I), and on instances built to
//! violate them:
//! - A3 (every X_i surjective) as min_i σ_n(X_i)/σ_1(X_i) and A4 (W full rank) as
//!   σ_d(W)/σ_1(W), each ≥ a bound far above rounding; `head_dim` replaces W = I by a
//!   multi-head W = W_QW_Kᵀ (d × h factors) — Remark 4: rank ≤ h, so A4 fails for h < d, which
//!   the reported Remark-4 instance shows;
//! - A2 (K_iK_jᵀ = δ_ij I, i.e. KKᵀ = I_{nN} for the stacked keys K ∈ ℝ^{nN×d}): ‖KKᵀ − I‖₂ ≈ 0
//!   at d = nN; at n ≤ d < nN (Remark 1 says d ≥ n suffices) rank K ≤ d < nN, so KKᵀ has an
//!   eigenvalue 0 and ‖KKᵀ − I‖₂ ≥ 1 for EVERY K: measured on the best candidate (orthonormal
//!   columns, whose KKᵀ is a projection) and on Gaussian keys;
//! - Remark 2: F(p₀) ∈ ℝ^{N×d} has rank ≤ d, so σ_N(F) = 0 when d < N (Theorem 1's hypothesis
//!   σ_min(F(p₀)) > γ + √(μ/2m) cannot hold); at d = N it is positive for generic data, so the
//!   paper's "d ≤ N" is corrected to d < N.
//!
//! σ_N(F) is measured as ‖Fᵀg‖ with g the unit eigenvector of FFᵀ (N × N) for its smallest
//! eigenvalue, the same formula whether d < N or not.

use nalgebra::{DMatrix, SymmetricEigen};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::flow::{Method, OdeConfig};
use crate::instance::prompt::PromptSamples;
use crate::instance::Array;
use crate::models::prompt::data::{orthogonal_blocks, PromptData};
use crate::models::prompt::{Attention, PromptModel, Trained};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::orth_common::{blocks, gaussian_vec, unit_vec};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// n, N of the Theorem-1 / Lemma-2 instance (d = nN), drawn as thm1-linear-rate draws it.
    pub tokens: AtLeast<2>,
    pub samples: AtLeast<2>,
    /// ‖v‖ = α (v = αu; thm1-linear-rate: 10).
    pub alpha: Positive,
    /// W of that instance: absent → I (the paper's experiments); h → W = W_QW_Kᵀ with Gaussian
    /// d × h factors (a multi-head key–query product; h < d violates A4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<AtLeast<1>>,
    /// Head dimension h < d of the reported Remark-4 instance (A4 violated by construction).
    pub remark4_head_dim: AtLeast<1>,
    /// d of the Remark-1 instance: n ≤ d < nN (A2 impossible although d ≥ n).
    pub remark1_d: usize,
    /// d of the Remark-2 instance (Gaussian tokens): d < N, so σ_N(F(p₀)) = 0.
    pub remark2_d: AtLeast<1>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// A3/A4: the singular-value ratios must be ≥ this (far above rounding, 1e−16).
    pub rank_ratio_min: Positive,
    /// A2 at d = nN: ‖KKᵀ − I‖₂ ≤ this (rounding of an orthogonal matrix).
    pub a2_residual_max: Positive,
    /// Remark 1: ‖KKᵀ − I‖₂ ≥ 1 − this at d < nN (the bound 1 is exact).
    pub a2_gap_rel_tol: Positive,
    /// Remark 2: σ_N(F(p₀))/σ_1(F(p₀)) ≤ this at d < N (rounding of the eigen-solve).
    pub vacuous_ratio_max: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let d = *p.tokens * *p.samples;
    if p.head_dim.is_some_and(|h| *h > d) {
        return Err(sc.invalid("params.head_dim", format!("need 1 ≤ h ≤ d = nN = {d}")));
    }
    if *p.remark4_head_dim >= d {
        return Err(sc.invalid(
            "params.remark4_head_dim",
            format!("Remark 4's multi-head W needs 1 ≤ h < d = nN = {d}"),
        ));
    }
    if p.remark1_d < *p.tokens || p.remark1_d > d {
        return Err(sc.invalid(
            "params.remark1_d",
            format!(
                "need n ≤ d ≤ nN = {d} (Remark 1's condition d ≥ n; A2 is impossible below nN)"
            ),
        ));
    }
    if *p.remark2_d > 4 * d {
        return Err(sc.invalid("params.remark2_d", format!("need 1 ≤ d ≤ {}", 4 * d)));
    }
    Ok(())
}

/// A singular value counts toward a rank when ≥ this × the largest (as the checks' bound).
const RANK_REL_TOL: f64 = 1e-12;

/// What the validators measure on one instance.
struct Measured {
    label: &'static str,
    n: usize,
    d: usize,
    samples: usize,
    /// min_i σ_n(X_i)/σ_1(X_i) (0 when d < n: X_i cannot be surjective).
    x_ratio: f64,
    /// σ_d(W)/σ_1(W) and the numerical rank of W.
    w_ratio: f64,
    w_rank: usize,
    /// Numerical rank of the stacked keys K ∈ ℝ^{nN×d} and ‖KKᵀ − I_{nN}‖₂.
    key_rank: usize,
    a2_residual: f64,
    /// σ_N(F(p₀)) and σ_1(F(p₀)).
    f_min: f64,
    f_max: f64,
}

fn rank(s: &[f64]) -> usize {
    let top = stats::max_with(0.0, s.iter());
    s.iter().filter(|&&x| x >= RANK_REL_TOL * top).count()
}

/// Measures A2–A4 and σ_N, σ_1 of F(p₀) on tokens `x` (N × n × d) with key matrix `w`, v = αu.
fn measure(
    label: &'static str,
    tokens: PromptData,
    w: &DMatrix<f64>,
    v: &[f64],
    p0: &[f64],
) -> Measured {
    let (n, d, samples) = (tokens.n_tokens, tokens.d, tokens.samples);
    let x_ratio = stats::min((0..samples).map(|i| {
        let s = DMatrix::from_row_slice(n, d, tokens.tokens(i)).singular_values();
        if d < n {
            0.0
        } else {
            s.min() / s.max()
        }
    }));
    let ws = w.singular_values();
    let data = PromptData::with_w(
        n,
        d,
        samples,
        tokens.x,
        w.transpose().as_slice(),
        vec![0.0; samples],
    );
    let keys = DMatrix::from_fn(n * samples, d, |r, c| data.keys(r / n)[(r % n) * d + c]);
    let gram = &keys * keys.transpose() - DMatrix::identity(n * samples, n * samples);
    let key_s: Vec<f64> = keys.singular_values().iter().copied().collect();
    let model = PromptModel::new(data, Attention::Softmax, Trained::P { v: v.to_vec() });
    let f = model.f_matrix(p0);
    let eig = SymmetricEigen::new(&f * f.transpose());
    let (k_min, _) = eig
        .eigenvalues
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .expect("N ≥ 1");
    let g = eig.eigenvectors.column(k_min);
    Measured {
        label,
        n,
        d,
        samples,
        x_ratio,
        w_ratio: ws.min() / ws.max(),
        w_rank: rank(ws.as_slice()),
        key_rank: rank(&key_s),
        a2_residual: SymmetricEigen::new(gram).eigenvalues.amax(),
        f_min: (f.transpose() * g).norm(),
        f_max: f.singular_values().max(),
    }
}

/// W = W_QW_Kᵀ with W_Q, W_K ∈ ℝ^{d×h} of i.i.d. N(0, 1/h) entries (one head of dimension h).
fn multi_head_w(d: usize, h: usize, rng: &mut impl Rng) -> DMatrix<f64> {
    let scale = 1.0 / (h as f64).sqrt();
    let wq = DMatrix::from_row_slice(d, h, &gaussian_vec(rng, d * h, scale));
    let wk = DMatrix::from_row_slice(d, h, &gaussian_vec(rng, d * h, scale));
    wq * wk.transpose()
}

/// Gaussian tokens N(0, 1/d) (no structure), with v = αu and p₀ ~ N(0, I/d).
fn gaussian_instance(label: &'static str, p: &Params, d: usize, rng: &mut impl Rng) -> Measured {
    let x = gaussian_vec(rng, *p.samples * *p.tokens * d, 1.0 / (d as f64).sqrt());
    let tokens = PromptData::new(*p.tokens, d, *p.samples, x, vec![0.0; *p.samples]);
    let v: Vec<f64> = unit_vec(rng, d).iter().map(|x| *p.alpha * x).collect();
    let p0 = gaussian_vec(rng, d, 1.0 / (d as f64).sqrt());
    measure(label, tokens, &DMatrix::identity(d, d), &v, &p0)
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let (n, nn) = (*p.tokens, *p.tokens * *p.samples);
    // the Theorem-1 instance: thm1-linear-rate's draw order on stream 1 (data, u, p₀)
    let mut rng = ctx.rng(1);
    let tokens = blocks(n, *p.samples, false, &mut rng);
    let v: Vec<f64> = unit_vec(&mut rng, nn)
        .iter()
        .map(|x| *p.alpha * x)
        .collect();
    let p0 = gaussian_vec(&mut rng, nn, 1.0 / (nn as f64).sqrt());
    let w = match p.head_dim {
        Some(h) => multi_head_w(nn, *h, &mut ctx.rng(2)),
        None => DMatrix::identity(nn, nn),
    };
    let main = measure("thm1", tokens.clone(), &w, &v, &p0);
    let w4 = multi_head_w(nn, *p.remark4_head_dim, &mut ctx.rng(3));
    let remark4 = measure("remark4-multi-head", tokens.clone(), &w4, &v, &p0);
    // Remark 1: the best keys in d < nN dimensions — the first d columns of a random nN × nN
    // orthogonal matrix (orthonormal columns: KKᵀ is a rank-d projection) — and Gaussian keys
    let mut rng = ctx.rng(4);
    let d1 = p.remark1_d;
    let square = orthogonal_blocks(1, nn, &mut rng);
    let x1: Vec<f64> = square
        .x
        .chunks_exact(nn)
        .flat_map(|row| row[..d1].iter().copied())
        .collect();
    let remark1_tokens = PromptData::new(n, d1, *p.samples, x1, vec![0.0; *p.samples]);
    let v1: Vec<f64> = unit_vec(&mut rng, d1)
        .iter()
        .map(|x| *p.alpha * x)
        .collect();
    let p1 = gaussian_vec(&mut rng, d1, 1.0 / (d1 as f64).sqrt());
    let remark1 = measure(
        "remark1-orthonormal-columns",
        remark1_tokens,
        &DMatrix::identity(d1, d1),
        &v1,
        &p1,
    );
    let remark1_gauss = gaussian_instance("remark1-gaussian", p, d1, &mut ctx.rng(5));
    let remark2 = gaussian_instance("remark2-d-below-n", p, *p.remark2_d, &mut ctx.rng(6));
    let remark2_eq = gaussian_instance("remark2-d-equals-n", p, *p.samples, &mut ctx.rng(7));

    let mut rep = Report::default();
    rep.at_least(
        "a3-x-i-surjective",
        "A3 (X_i surjective): min_i σ_n(X_i)/σ_1(X_i)",
        main.x_ratio,
        *c.rank_ratio_min,
    )
    .note(format!(
        "Theorem-1/Lemma-2 instance (C-orth, n = {n}, N = {}, d = {nn}): rows of an \
         orthogonal matrix, ratio 1 up to rounding",
        *p.samples
    ));
    let w_text = match p.head_dim {
        Some(h) => format!("W = W_QW_Kᵀ with d × {h} Gaussian factors"),
        None => "W = I".into(),
    };
    rep.at_least(
        "a4-w-full-rank",
        "A4 (W full rank): σ_d(W)/σ_1(W)",
        main.w_ratio,
        *c.rank_ratio_min,
    )
    .note(format!(
        "{w_text} (numerical rank {} of d = {nn}); the Remark-4 multi-head W (h = {}) \
         violates it: ratio {:.3e}, rank {}",
        main.w_rank, *p.remark4_head_dim, remark4.w_ratio, remark4.w_rank
    ));
    rep.at_most(
        "remark4-multi-head-w-rank",
        "Remark 4: rank(W_QW_Kᵀ) ≤ h for one head of dimension h < d",
        remark4.w_rank as f64,
        *p.remark4_head_dim as f64,
    )
    .note(format!(
        "d = {nn}, h = {}: σ_d(W)/σ_1(W) = {:.3e}, so A4 fails for multi-head W",
        *p.remark4_head_dim, remark4.w_ratio
    ));
    rep.at_most(
        "a2-at-d-nn",
        "A2 at d = nN: ‖KKᵀ − I_{nN}‖₂ over the stacked keys K = [K_1; …; K_N]",
        main.a2_residual,
        *c.a2_residual_max,
    )
    .note(format!("C-orth keys, {w_text}"));
    let remark1_worst = stats::min([remark1.a2_residual, remark1_gauss.a2_residual]);
    rep.at_least(
        "remark1-a2-impossible-below-nn",
        "Remark 1 at n ≤ d < nN: min over candidate keys of ‖KKᵀ − I_{nN}‖₂ (≥ 1 for every K)",
        remark1_worst,
        1.0 - *c.a2_gap_rel_tol,
    )
    .note(format!(
        "n = {n}, N = {}, d = {d1}, nN = {nn}: rank K = {} (orthonormal columns, the best K: \
         ‖KKᵀ − I‖₂ = {:.15}), Gaussian keys: rank {}, ‖KKᵀ − I‖₂ = {:.3}; rank K ≤ d < nN \
         leaves KKᵀ an eigenvalue 0, so A2 needs d ≥ nN (spec E1)",
        *p.samples,
        remark1.key_rank,
        remark1.a2_residual,
        remark1_gauss.key_rank,
        remark1_gauss.a2_residual
    ))
    .paper_claim("Remark 1: \"Assumption 2 requires d ≥ n\"");
    let ratio = |m: &Measured| m.f_min / m.f_max;
    rep.at_most(
        "remark2-sigma-min-f-zero-below-n",
        "Remark 2 at d < N: σ_N(F(p₀))/σ_1(F(p₀)) (F ∈ ℝ^{N×d} has rank ≤ d)",
        ratio(&remark2),
        *c.vacuous_ratio_max,
    )
    .note(format!(
        "Gaussian tokens, n = {n}, N = {}, d = {}: σ_N(F) = {:.3e}, σ_1(F) = {:.3e}; \
         Theorem 1's hypothesis σ_min(F(p₀)) > γ + √(μ/2m) cannot hold",
        *p.samples, *p.remark2_d, remark2.f_min, remark2.f_max
    ));
    rep.at_least(
        "remark2-sigma-min-f-positive-at-d-n",
        "Remark 2 at d = N: σ_N(F(p₀))/σ_1(F(p₀)) > 0 (generic data)",
        ratio(&remark2_eq),
        *c.rank_ratio_min,
    )
    .note(format!(
        "Gaussian tokens, d = N = {}: σ_N(F) = {:.3e}; the bound is vacuous only for d < N",
        *p.samples, remark2_eq.f_min
    ))
    .paper_claim("Remark 2: \"the case d ≤ N would guarantee σ_min(F(p₀)) = 0\"");

    let all = [
        &main,
        &remark4,
        &remark1,
        &remark1_gauss,
        &remark2,
        &remark2_eq,
    ];
    rep.derive("sigma_min_f0", main.f_min);
    rep.derive("remark4_w_sigma_ratio", remark4.w_ratio);
    rep.derive("remark4_w_rank", remark4.w_rank);
    rep.derive("remark1_key_rank", remark1.key_rank);
    rep.derive("remark1_a2_residual", remark1.a2_residual);
    rep.derive("remark2_sigma_ratio_below_n", ratio(&remark2));
    rep.derive("remark2_sigma_ratio_at_n", ratio(&remark2_eq));
    rep.series = Table::new(&[
        "instance",
        "n",
        "d",
        "samples",
        "min_sigma_ratio_x",
        "sigma_ratio_w",
        "rank_w",
        "rank_keys",
        "a2_residual",
        "sigma_min_f",
        "sigma_max_f",
    ]);
    for m in all {
        rep.series.push(vec![
            m.label.to_string().into(),
            (m.n as f64).into(),
            (m.d as f64).into(),
            (m.samples as f64).into(),
            m.x_ratio.into(),
            m.w_ratio.into(),
            (m.w_rank as f64).into(),
            (m.key_rank as f64).into(),
            m.a2_residual.into(),
            m.f_min.into(),
            m.f_max.into(),
        ]);
    }
    let samples = PromptSamples {
        x: Array::new(&[*p.samples, n, nn], tokens.x),
        y: vec![0.0; *p.samples],
        w: p.head_dim.map(|_| w.transpose().as_slice().to_vec()),
    };
    rep.instance = Some(crate::instance::InstanceFile::to_arrays(&samples));
    Ok(rep)
}

/// Six instances of at most N·n × max(nN, d) entries, a few SVDs and eigen-solves each.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let d = n(*p.tokens * *p.samples)
        .max(n(*p.remark2_d))
        .max(n(p.remark1_d));
    let rows = n(*p.tokens * *p.samples);
    Cost::new()
        .doubles(
            "tokens, samples",
            "tokens and stacked keys",
            12.0 * rows * d,
        )
        .work(
            "tokens, samples",
            "SVDs and eigen-solves",
            6.0,
            30.0 * rows * rows * d,
        )
        .table("tokens, samples", 6.0, 11.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "prompt.assumptions",
    paper: "002",
    summary: "Assumptions 2–4 measured: X_i surjective and W full rank on the Theorem-1 instance \
              (multi-head W of Remark 4 violates A4), A2 impossible for n ≤ d < nN (Remark 1's \
              d ≥ n is not enough), σ_min(F(p₀)) = 0 for d < N but not d = N (Remark 2).",
    solver: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "remark1_a2_residual",
        "remark1_key_rank",
        "remark2_sigma_ratio_at_n",
        "remark2_sigma_ratio_below_n",
        "remark4_w_rank",
        "remark4_w_sigma_ratio",
        "sigma_min_f0",
    ],
    run,
};

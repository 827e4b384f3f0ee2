//! `gradient-check` (spec 004 §7; Definition 3.1, §2.2, CF3/CF4, Example 3.2): the attention
//! head's analytic β-gradient against central finite differences at random β, its structural
//! zeros (G_KQ(0) = 0, G_VO[r] = 0 off the teacher's VO support when c_r = 0), the closed form
//! of G_VO(0), and the invariance of the head's output under the rescalings
//! (w_K, w_Q) → (λ w_K, w_Q/λ), (w_V, w_O) → (μ w_V, w_O/μ), computed by an independent forward
//! pass from the four weight vectors.

use crate::scenario::param::NonNegative;
use crate::scenario::param::{AtLeast, Positive};
use std::path::PathBuf;

use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::flow::{Method, OdeConfig};
use crate::models::diagonal::{g_vec, BetaLoss, DiagonalAttention};
use crate::plot::{BarPanel, Figure, LineStyle};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{InstanceName, UserFiles, FIRST_FREE_STREAM};
use crate::instance::InstanceFile;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// An attention instance (spec §7: mini).
    pub instance: InstanceName,
    /// Number of random β (spec §7: 5); entries i.i.d. N(0, beta_scale²).
    pub betas: AtLeast<1>,
    pub beta_scale: Positive,
    /// Central-difference step h (spec §4 row D3.1: 1e−6).
    pub fd_step: Positive,
    /// Input samples X on which the rescaling invariance is tested.
    pub rescaling_samples: AtLeast<1>,
    /// The user's attention head (X with a_star, c_star or Y; README "Your own data") instead
    /// of `instance`. Every check applies to it (the random β are drawn from the seed).
    #[serde(default)]
    pub data_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Spec §4 row D3.1: max |G − G_FD| ≤ this · max|G| (1e−8).
    pub fd_tol: Positive,
    /// Spec §7: G_VO(0) equals the CF4 closed form 2κ n mean_s(x̄ ȳ) to this, relative to
    /// max|G(0)| (1e−12).
    pub closed_form_tol: Positive,
    /// Spec §2.2: max |G_KQ(0)|; the structure makes it exactly 0.
    pub kq_at_zero_tol: NonNegative,
    /// Spec §2.2: max |G_VO[r](β)| / max|G(β)| over r off the teacher's VO support with c_r = 0;
    /// exactly 0 (the residual of column r is −Y_r = 0).
    pub off_support_tol: NonNegative,
    /// Spec §4 row Ex3.2: rescaled weights leave the output unchanged to 1e−12 relative; the
    /// factor-level forward pass equals the β-level one to the same tolerance.
    pub rescaling_tol: Positive,
}

/// The user's data file of this run (none: the built-in instance).
fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &None)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    files(p).validate_attention(p.instance, "gradient-check", sc)?;
    if p.data_file.is_none() && !matches!(p.instance, InstanceName::Mini | InstanceName::Small) {
        return Err(sc.invalid(
            "params.instance",
            "need an attention instance: mini or small (paper is too heavy for FD)",
        ));
    }
    Ok(())
}

/// Central differences of L̃ at β, step h.
fn fd_gradient(loss: &dyn BetaLoss, beta: &[f64], h: f64) -> Vec<f64> {
    let mut probe = beta.to_vec();
    (0..beta.len())
        .map(|i| {
            probe[i] = beta[i] + h;
            let up = loss.loss(&probe);
            probe[i] = beta[i] - h;
            let down = loss.loss(&probe);
            probe[i] = beta[i];
            (up - down) / (2.0 * h)
        })
        .collect()
}

/// The diagonal head's output smax(X W_K W_Qᵀ Xᵀ) X W_V W_Oᵀ from the four weight vectors, with
/// the factors kept apart: S = (X diag w_K)(X diag w_Q)ᵀ, F = P (X diag w_V) diag w_O.
fn factor_output(x: &[f64], n: usize, weights: [&[f64]; 4]) -> Vec<f64> {
    let [wk, wq, wv, wo] = weights;
    let d = wk.len();
    let keys: Vec<f64> = (0..n * d).map(|j| x[j] * wk[j % d]).collect();
    let queries: Vec<f64> = (0..n * d).map(|j| x[j] * wq[j % d]).collect();
    let values: Vec<f64> = (0..n * d).map(|j| x[j] * wv[j % d]).collect();
    let mut out = vec![0.0; n * d];
    for m in 0..n {
        let scores: Vec<f64> = (0..n)
            .map(|j| (0..d).map(|r| keys[m * d + r] * queries[j * d + r]).sum())
            .collect();
        let top = stats::max(scores.iter());
        let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
        let total: f64 = weights.iter().sum();
        for r in 0..d {
            let mixed: f64 = (0..n).map(|j| weights[j] * values[j * d + r]).sum();
            out[m * d + r] = mixed / total * wo[r];
        }
    }
    out
}

/// Ex. 3.2 / Def. 3.1 on the head: (factor pass vs β pass, rescaled vs original), both as
/// max |ΔF| / max|F| over the samples.
fn rescaling_invariance(head: &DiagonalAttention, p: &Params, rng: &mut impl Rng) -> (f64, f64) {
    let (d, n) = (head.d(), head.samples().n);
    let mut normal = |scale: f64| -> Vec<f64> {
        (0..d)
            .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
            .collect()
    };
    let (wk, wq, wv, wo) = (normal(1.0), normal(1.0), normal(1.0), normal(1.0));
    // rescaling factors e^{N(0,1)} per entry
    let (lam, mu): (Vec<f64>, Vec<f64>) = {
        let (a, b) = (normal(1.0), normal(1.0));
        (
            a.iter().map(|x| x.exp()).collect(),
            b.iter().map(|x| x.exp()).collect(),
        )
    };
    let scaled = |w: &[f64], f: &[f64], up: bool| -> Vec<f64> {
        w.iter()
            .zip(f)
            .map(|(x, s)| if up { x * s } else { x / s })
            .collect()
    };
    let (wk2, wq2) = (scaled(&wk, &lam, true), scaled(&wq, &lam, false));
    let (wv2, wo2) = (scaled(&wv, &mu, true), scaled(&wo, &mu, false));
    let beta: Vec<f64> = (0..d)
        .map(|r| wk[r] * wq[r])
        .chain((0..d).map(|r| wv[r] * wo[r]))
        .collect();
    let (mut vs_beta, mut vs_rescaled) = (0.0_f64, 0.0_f64);
    let count = p.rescaling_samples.min(head.samples().count());
    for s in 0..count {
        let x = head.samples().x_of(s);
        let original = factor_output(x, n, [&wk, &wq, &wv, &wo]);
        let rescaled = factor_output(x, n, [&wk2, &wq2, &wv2, &wo2]);
        let through_beta = head.output(&beta, x);
        let size = stats::max_abs(&original);
        vs_beta = stats::larger(
            vs_beta,
            stats::max_abs_diff(&original, &through_beta) / size,
        );
        vs_rescaled = stats::larger(
            vs_rescaled,
            stats::max_abs_diff(&original, &rescaled) / size,
        );
    }
    (vs_beta, vs_rescaled)
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let (_, data, instance) = files(p).instance(p.instance, ctx)?;
    let head = instance
        .attention()
        .ok_or_else(|| RunError::Other("gradient-check needs an attention instance".into()))?;
    let loss: &dyn BetaLoss = head;
    let (pdim, d) = (loss.p(), head.d());
    let names: Vec<String> = (0..pdim).map(|i| loss.coordinate_name(i)).collect();
    let mut rng = ctx.rng(FIRST_FREE_STREAM);
    let mut rep = Report {
        series: Table::new(&["beta_index", "coordinate", "analytic", "fd", "abs_error"]),
        ..Default::default()
    };
    let (mut fd_worst, mut off_support_worst) = (0.0_f64, 0.0_f64);
    let (mut g_max, mut err_max) = (vec![0.0_f64; pdim], vec![0.0_f64; pdim]);
    // c*_r = 0 exactly when the label column Y_{·r} = Z*_{·r} c*_r vanishes in every sample
    let samples = head.samples();
    let off_support: Vec<usize> = (0..d)
        .filter(|&r| {
            (0..samples.count()).all(|s| (0..samples.n).all(|m| samples.y_of(s)[m * d + r] == 0.0))
        })
        .collect();
    for j in 0..*p.betas {
        let beta: Vec<f64> = (0..pdim)
            .map(|_| *p.beta_scale * rng.sample::<f64, _>(StandardNormal))
            .collect();
        let g = g_vec(loss, &beta);
        // G = −∇L̃: the FD of L̃ is −G
        let fd: Vec<f64> = fd_gradient(loss, &beta, *p.fd_step)
            .iter()
            .map(|x| -x)
            .collect();
        let scale = stats::max_abs(&g);
        fd_worst = stats::larger(fd_worst, stats::max_abs_diff(&g, &fd) / scale);
        for i in 0..pdim {
            let err = (g[i] - fd[i]).abs();
            g_max[i] = stats::larger(g_max[i], g[i].abs());
            err_max[i] = stats::larger(err_max[i], err);
            rep.series.push(vec![
                j.into(),
                names[i].as_str().into(),
                g[i].into(),
                fd[i].into(),
                err.into(),
            ]);
        }
        // the same β with the VO entries off the teacher's support set to 0
        let mut masked = beta.clone();
        off_support.iter().for_each(|&r| masked[d + r] = 0.0);
        let gm = g_vec(loss, &masked);
        let worst = stats::max_abs(off_support.iter().map(|&r| gm[d + r]));
        off_support_worst = stats::larger(off_support_worst, worst / stats::max_abs(&gm));
    }
    let zero = vec![0.0; pdim];
    let g0 = g_vec(loss, &zero);
    let closed = head.g_at_zero();
    let g0_scale = stats::max_abs(&g0);
    let kq_at_zero = stats::max_abs(&g0[..d]);
    let cf_error = stats::max_abs_diff(&g0[d..], &closed[d..]) / g0_scale;
    let (vs_beta, vs_rescaled) = rescaling_invariance(head, p, &mut rng);

    rep.at_most(
        "d3-fd-over-random-beta",
        "D3.1: max |G − G_FD| / max|G| over the random β",
        fd_worst,
        *c.fd_tol,
    )
    .note(format!(
        "{} random β ~ N(0, {}²), central differences h = {:e}",
        p.betas, p.beta_scale, p.fd_step
    ));
    rep.at_most(
        "kq",
        "§2.2: max |G_KQ(0)| (c = 0 ⇒ F ≡ 0)",
        kq_at_zero,
        *c.kq_at_zero_tol,
    )
    .note("stage 1 always activates a VO coordinate");
    rep.at_most(
        "cf4-vo-2kappan-mean",
        "CF4: max |G_VO(0) − 2κn mean_s(x̄ ȳ)| / max|G(0)|",
        cf_error,
        *c.closed_form_tol,
    )
    .note(format!(
        "max|G(0)| = {g0_scale:.6e}, T_1 = 1/max|G(0)| = {:.6}",
        1.0 / g0_scale
    ));
    rep.at_most(
        "vo-off-teacher-vo-support",
        "§2.2: max |G_VO[r]| / max|G| off the teacher's VO support, c_r = 0",
        off_support_worst,
        *c.off_support_tol,
    )
    .note(format!(
        "VO coordinates {off_support:?}; they never activate (Δ = ∞ at every stage)"
    ));
    rep.at_most(
        "def-factor-level-output-relative",
        "Def. 3.1: factor-level output = h(X; u ⊙ v), relative",
        vs_beta,
        *c.rescaling_tol,
    )
    .note("smax((X diag w_K)(X diag w_Q)ᵀ) X diag(w_V) diag(w_O) vs the β-level head");
    rep.at_most(
        "ex-output-under-lambdaw-lambda-muw",
        "Ex. 3.2: output under (λw_K, w_Q/λ), (μw_V, w_O/μ), relative change",
        vs_rescaled,
        *c.rescaling_tol,
    )
    .note("λ_r, μ_r = e^{N(0,1)} per entry")
    .paper_claim(
        "Example 3.2 writes the KQ product as w_K ⊙ w_O and the VO matrix as W_V W_Qᵀ \
         (typos for w_K ⊙ w_Q and W_V W_Oᵀ, spec §6 item 3)",
    );
    rep.derive("max_abs_g0", g0_scale);
    rep.derive("t1_closed_form", 1.0 / g0_scale);
    rep.derive("g0_vo", &g0[d..]);
    rep.derive("g0_vo_closed_form", &closed[d..]);

    let floor = |v: &[f64]| -> Vec<f64> { v.iter().map(|x| x.max(1e-18)).collect() };
    let errors = BarPanel::new(
        format!(
            "analytic vs finite-difference gradient (max over {} random β)",
            p.betas
        ),
        "coordinate i",
        "magnitude",
        names.clone(),
    )
    .group("max |G_i|", floor(&g_max), LineStyle::Solid)
    .group("max |G_i − G_{FD,i}|", floor(&err_max), LineStyle::Solid)
    .log_y();
    let vo_names: Vec<String> = names[d..].to_vec();
    let at_zero = BarPanel::new(
        "G_{VO}(0): analytic vs closed form (G_{KQ}(0) = 0)",
        "coordinate",
        "G_i(0)",
        vo_names,
    )
    .group("analytic G(0)", g0[d..].to_vec(), LineStyle::Solid)
    .group(
        "closed form 2κn mean(x̄ ȳ)",
        closed[d..].to_vec(),
        LineStyle::Dashed,
    );
    rep.figure = Some(
        Figure::new(2)
            .title(format!(
                "Gradient of the diagonal attention head ({} instance)",
                files(p).label_or(format!("{:?}", p.instance).to_lowercase())
            ))
            .panel(errors)
            .panel(at_zero),
    );
    rep.instance = Some(data.to_arrays());
    Ok(rep)
}

/// Central differences of the loss in every coordinate at each random β, and the rescaling
/// test on at most all of the instance's samples: constants per instance apart from `betas`.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let size = p.instance.size();
    Cost::new()
        .work(
            "betas",
            "central differences",
            n(*p.betas) * 4.0 * size.p,
            size.grad,
        )
        .work(
            "rescaling_samples",
            "rescaling tests",
            n(*p.rescaling_samples),
            size.grad,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.gradient-check",
    paper: "004",
    summary: "Definition 3.1 / §2.2 / CF4 / Example 3.2 on the mini attention head: analytic G vs \
              central FD at 5 random β, G_KQ(0) = 0 exactly, G_VO(0) in closed form, zeros off \
              the teacher's VO support, output invariant under (λw_K, w_Q/λ) rescalings.",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
    validate,
    cost,
    quantities: &["max_abs_g0", "t1_closed_form"],
    run,
};

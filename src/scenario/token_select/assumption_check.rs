//! `assumption-check` (Ass. 1/2, Lemma 6, Lemma 9, Cond. 1; spec 003 §4.1): over `seeds` draws
//! at each d of a sweep, Ass. 2 holds exactly for ex1, ex1-orth and DM; the near-orthogonality
//! ρ_orth of ex1 (Lemma 6) and of DM (Lemma 9) decreases like d^{−1/2}; ex1-orth is exactly
//! orthogonal; every W-SVM is feasible; and DM's optimal tokens have the larger norm
//! (Cond. 1(ii)).

use nalgebra::DVector;
use serde::{Deserialize, Serialize};

use crate::analysis::svm::{solve_l2, MarginConstraints, RankOneConstraints, SvmError, SvmMethod};
use crate::attention::{Instance, TokenError};
use crate::flow::{Method, OdeConfig};
use crate::models::token_select::{Example1, GaussianJoint};
use crate::plot::{Band, Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{instance_arrays, DataName, UserFiles, FIRST_FREE_STREAM};
use super::params::Sizes;
use crate::scenario::param::Open01;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Independent draws per d.
    pub seeds: AtLeast<1>,
    /// Token dimensions d (at least two, increasing: a trend in d is checked). ex1 and DM keep their default n, T and scales ∝ 1/√d;
    /// ex1-orth is drawn where d ≥ nT + 1.
    pub dims: Sizes<2, 2>,
    /// Your tokens X, y, u (, z) (layout `instance::token_select`) instead of the sweep: their
    /// assumptions are measured and reported; the sweep's checks, which are laws of the random
    /// data models across d, are skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<std::path::PathBuf>,
    /// Cond. 2(iv): the step η of joint-training's Eq. (10) runs, held against the smoothness
    /// at the zero start.
    pub joint_eta: Positive,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Ass. 2: max_i (spread of non-optimal scores) ≤ this · max|γ| (spec 003 §4.1: 1e−12).
    pub ass2_rel_tol: Positive,
    /// Lemma 6: the median ρ_orth·√d of ex1 at every d lies in this range (§4.1: [1.5, 6]).
    pub rho_sqrt_d_range: super::params::Band,
    /// ex1-orth: ρ_orth ≤ this (§4.1: 1e−12).
    pub orth_max_rho: Positive,
    /// Cond. 1(ii) with constant C: ‖x_{i,opt}‖² ≥ C·max_{t≠opt}‖x_{i,t}‖² for every DM sample
    /// at the largest d (§4.1 default C = 2; σ_o²/σ² = 4 in DM).
    pub cond1_c: Positive,
    /// Cond. 2(iii) [R?] d ≥ C·(nT)²·ln(nT/δ) (Lemma 9's Bernstein bounds make |cos| ≲
    /// √(ln(nT/δ)/d), below Ass. 1's 1/(nT) there): C and δ (the absolute constant was lost).
    pub cond2_d_factor: Positive,
    pub cond2_delta: Open01,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.data_file.is_some() {
        let none = None;
        UserFiles::new(&p.data_file, &none).validate(DataName::Ex1, 0, sc)?;
    }
    Ok(())
}

/// The three data models at dimension d with the toolkit's scales ∝ 1/√d.
fn models(d: usize) -> (Example1, Example1, GaussianJoint) {
    let s = 1.0 / (d as f64).sqrt();
    let ex1 = Example1 {
        d,
        noise: s,
        ..Example1::ex1()
    };
    let orth = Example1 {
        orthogonal: true,
        ..ex1
    };
    let dm = GaussianJoint {
        d,
        sigma_opt: s,
        sigma: 0.5 * s,
        ..GaussianJoint::dm()
    };
    (ex1, orth, dm)
}

/// Whether the W-SVM is feasible. A positive-definite Gram matrix certifies it without any
/// d² object: W = Σ β_k D_k with Gβ = 1 meets every constraint with equality. Otherwise the QP
/// decides (a Farkas certificate or a solution).
fn w_svm_feasible(inst: &Instance) -> Result<bool, RunError> {
    let cons = RankOneConstraints::w_svm(&inst.data.view(), &inst.opt)
        .map_err(|e| RunError::Other(format!("W-SVM constraints: {e}")))?;
    let gram = cons.gram();
    let ones = DVector::from_element(cons.count(), 1.0);
    if let Some(chol) = gram.clone().cholesky() {
        let beta = chol.solve(&ones);
        let residual = stats::max_abs((&gram * &beta - &ones).iter());
        if residual <= 1e-9 {
            return Ok(true);
        }
    }
    match solve_l2(&cons, SvmMethod::Dual) {
        Ok(_) => Ok(true),
        Err(SvmError::Infeasible { .. }) => Ok(false),
        Err(e) => Err(RunError::Other(format!("W-SVM: {e}"))),
    }
}

/// Condition 2 (App. B.1, "complete version of Condition 1"; its formulas were lost, spec 003
/// §4.1). (i) zero initialization is joint-training's construction (u₀ = 0, W₀ = 0): reported,
/// not checked. (iii) is read as d ≥ d* := C·2(nT)²ln((nT)²/δ) [R?]: a Gaussian cosine exceeds ε
/// with probability ≈ 2e^{−dε²/2}, so a union bound over the (nT)²/2 token pairs keeps every
/// |cos| ≤ ε = 1/(nT) (Ass. 1a, Lemma 9's conclusion) with probability ≥ 1 − δ at C = 1.
/// `seeds` DM draws at d = ⌈d*⌉ must meet it, and (ii) (‖x_opt‖² ≥ C_ii·‖x_t‖², the Cond. 1(ii)
/// bound), in a fraction ≥ 1 − δ. (iv) small step: η·C₃(0) ≤ 1 with C₃(0) = B² + B³ the
/// smoothness bound ‖∇²L(θ₀)‖ ≤ C₃(0)·L(θ₀) of Lemma 13(3) at the zero start (L(θ₀) = 1; see
/// `joint_self_bound`), over the sweep's DM draws `b_draws` (their B).
fn condition2_checks(
    rep: &mut Report,
    b_draws: &[f64],
    p: &Params,
    c: &Checks,
    ctx: &RunContext,
) -> Result<(), RunError> {
    let nt = (GaussianJoint::dm().n * GaussianJoint::dm().t) as f64;
    let threshold = *c.cond2_d_factor * 2.0 * nt * nt * (nt * nt / *c.cond2_delta).ln();
    let d_star = threshold.ceil() as usize;
    rep.derive(
        "cond2_i_zero_init",
        "by construction: joint-training starts at u₀ = 0, W₀ = 0 (init_file aside)",
    );
    rep.derive("cond2_iii_threshold_d", d_star);
    let (_, _, dm) = models(d_star);
    let rho_max = 1.0 / nt;
    let mut draws = Vec::with_capacity(*p.seeds);
    for s in 0..*p.seeds {
        // streams after the sweep's 3 per draw
        let mut rng = ctx.rng(FIRST_FREE_STREAM + 3 * *p.seeds as u64 + s as u64);
        let inst = dm
            .generate(&mut rng)
            .map_err(|e| RunError::Other(format!("Cond. 2 draw {s} at d = {d_star}: {e}")))?;
        draws.push((
            inst.data.max_nonopt_cosine(&inst.opt),
            opt_norm_ratio(&inst),
        ));
    }
    let fraction = |ok: &dyn Fn(&(f64, f64)) -> bool| {
        draws.iter().filter(|x| ok(x)).count() as f64 / draws.len() as f64
    };
    let rho_ok = fraction(&|x| x.0 <= rho_max);
    let ratio_ok = fraction(&|x| x.1 >= *c.cond1_c);
    rep.derive("cond2_iii_near_orthogonal_fraction", rho_ok);
    rep.derive("cond2_ii_opt_norm_fraction", ratio_ok);
    rep.at_least(
        "cond-2-iii-near-orthogonal",
        &format!(
            "Cond. 2(iii) ⇒ Lemma 9: fraction of DM draws at d = {d_star} with ρ_orth ≤ 1/(nT)"
        ),
        rho_ok,
        1.0 - *c.cond2_delta,
    )
    .note(format!(
        "{} draws at d* = C·2(nT)²ln((nT)²/δ) (C = {}, δ = {}; [R?] reading, the absolute \
         constant was lost), at least 1 − δ; bound 1/(nT) = {rho_max:.4}; worst ρ_orth {:.4}",
        *p.seeds,
        *c.cond2_d_factor,
        *c.cond2_delta,
        stats::max(draws.iter().map(|x| x.0)),
    ));
    rep.at_least(
        "cond-2-ii-opt-norm",
        &format!("Cond. 2(ii): fraction of DM draws at d = {d_star} with ‖x_opt‖² ≥ C·max‖x_t‖²"),
        ratio_ok,
        1.0 - *c.cond2_delta,
    )
    .note(format!(
        "C = {} (the Cond. 1(ii) bound; σ_o²/σ² = 4 in DM), at least 1 − δ; worst ratio {:.4}",
        *c.cond1_c,
        stats::min(draws.iter().map(|x| x.1)),
    ));
    let worst_b = stats::max(b_draws.iter());
    let smooth = super::joint_self_bound::c3(0.0, worst_b);
    rep.derive("cond2_iv_eta_times_c3_at_zero", *p.joint_eta * smooth);
    rep.at_most(
            "cond-2-iv-small-step",
            "Cond. 2(iv): η·C₃(0), C₃(0) = B² + B³ (‖∇²L(θ₀)‖ ≤ C₃(0)·L(θ₀), Lemma 13(3)), worst DM draw",
            *p.joint_eta * smooth,
            1.0,
        )
        .note(format!(
            "[R?] reading η ≤ 1/β₀ with β₀ = C₃(0)·L(θ₀) the smoothness at the zero start \
             (L(θ₀) = 1): η = {} (joint-training's), max B = {worst_b:.4}, C₃(0) = {smooth:.4}",
            *p.joint_eta
        ));
    Ok(())
}

/// min_i ‖x_{i,opt}‖²/max_{t≠opt}‖x_{i,t}‖².
fn opt_norm_ratio(inst: &Instance) -> f64 {
    let sq = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>();
    let data = &inst.data;
    stats::min((0..data.n).map(|i| {
        let o = inst.opt[i];
        let other = stats::max(
            (0..data.t)
                .filter(|&t| t != o)
                .map(|t| sq(data.token(i, t))),
        );
        sq(data.token(i, o)) / other
    }))
}

/// What one draw gives.
struct Draw {
    rho: f64,
    /// Ass. 2 spread relative to max|γ|.
    spread: f64,
    feasible: bool,
}

fn measure(inst: &Instance) -> Result<Draw, RunError> {
    let a = inst.data.assumptions(&inst.decoder, &inst.opt);
    Ok(Draw {
        rho: a.rho_orth,
        spread: a.nonopt_score_spread / a.score_scale,
        feasible: w_svm_feasible(inst)?,
    })
}

/// Per-d statistics of ρ_orth over the draws: (median, min, max).
#[derive(Default)]
struct RhoStats {
    median: Vec<f64>,
    min: Vec<f64>,
    max: Vec<f64>,
}

impl RhoStats {
    fn push(&mut self, rhos: Vec<f64>) {
        self.min.push(stats::min(rhos.iter()));
        self.max.push(stats::max(rhos.iter()));
        self.median.push(stats::median(&rhos));
    }

    /// max over consecutive d of median(d_{j+1})/median(d_j): < 1 means strictly decreasing.
    fn worst_ratio(&self) -> f64 {
        stats::max(self.median.windows(2).map(|w| w[1] / w[0]))
    }
}

/// series.csv: one row per measured instance ([`row`]).
const COLUMNS: [&str; 7] = [
    "data",
    "d",
    "draw",
    "rho_orth",
    "ass2_relative_spread",
    "w_svm_feasible",
    "opt_norm_ratio",
];

/// One instance's row of [`COLUMNS`].
fn row(name: &str, d: usize, draw: usize, m: &Draw, ratio: f64) -> Vec<crate::scenario::Cell> {
    vec![
        name.into(),
        d.into(),
        draw.into(),
        m.rho.into(),
        m.spread.into(),
        usize::from(m.feasible).into(),
        ratio.into(),
    ]
}

/// The sweep's checks by title, each a law of the random data models across d.
/// (id, title) of the checks of the d sweep (the last one's id carries the largest d).
const SWEEP_CHECKS: [(&str, &str); 8] = [
    (
        "ass-non-optimal-score-spread-gamma",
        "Ass. 2: max non-optimal score spread / max|γ|",
    ),
    (
        "lemma-median-rho-orth-ex1-ratio",
        "Lemma 6: max_d median ρ_orth(ex1) ratio between consecutive d",
    ),
    (
        "lemma-median-rho-orth-ex1-sqrtd",
        "Lemma 6: min_d median ρ_orth(ex1)·√d",
    ),
    (
        "lemma-6-d-median-rho-orth-ex1-sqrtd",
        "Lemma 6: max_d median ρ_orth(ex1)·√d",
    ),
    ("ex1-orth-rho-orth", "ex1-orth: max ρ_orth"),
    (
        "lemma-median-rho-orth-dm-ratio",
        "Lemma 9: max_d median ρ_orth(DM) ratio between consecutive d",
    ),
    ("svm-infeasible-draws", "W-SVM infeasible draws"),
    (
        "cond-ii-opt-dm",
        "Cond. 1(ii): min_i ‖x_opt‖²/max‖x_t‖², DM",
    ),
];

/// On a data file: the file's assumptions measured and reported (`data_file.*` in params.json
/// and one row of series.csv), the sweep's checks skipped. Ass. 1 (a unique optimal token) and
/// the W-SVM's feasibility are the reader's conditions: a file violating them is refused.
fn run_on_file(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let none = None;
    let (_, inst) = UserFiles::new(&p.data_file, &none).instance(DataName::Ex1, ctx.scenario)?;
    let m = measure(&inst)?;
    let ratio = opt_norm_ratio(&inst);
    let data = &inst.data;
    let mut rep = Report {
        series: Table::new(&COLUMNS),
        instance: Some(instance_arrays(&inst, &[])),
        ..Report::default()
    };
    rep.series.push(row("data_file", data.d, 0, &m, ratio));
    rep.derive("data_file.rho_orth", m.rho);
    rep.derive("data_file.rho_orth_sqrt_d", m.rho * (data.d as f64).sqrt());
    rep.derive(
        "data_file.ass1a_strict_rho_max",
        1.0 / (data.n * data.t) as f64,
    );
    rep.derive("data_file.ass2_relative_spread", m.spread);
    rep.derive("data_file.ass2_holds", m.spread <= *c.ass2_rel_tol);
    rep.derive("data_file.cond1_opt_norm_ratio", ratio);
    rep.derive("data_file.cond1_ii_holds", ratio >= *c.cond1_c);
    let cond2 = [
        ("cond-2-iii-near-orthogonal", "Cond. 2(iii) ⇒ Lemma 9"),
        ("cond-2-ii-opt-norm", "Cond. 2(ii)"),
        ("cond-2-iv-small-step", "Cond. 2(iv)"),
    ];
    for (id, name) in SWEEP_CHECKS.into_iter().chain(cond2) {
        rep.skip(
            id,
            name,
            "a law of the random data models across the d sweep; on your data the assumptions \
             are measured and reported under derived.data_file.*",
        );
    }
    Ok(rep)
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    if p.data_file.is_some() {
        return run_on_file(p, c, ctx);
    }
    let mut rep = Report {
        series: Table::new(&COLUMNS),
        ..Report::default()
    };
    let (mut ex1_stats, mut dm_stats) = (RhoStats::default(), RhoStats::default());
    let (mut orth_d, mut orth_max) = (Vec::new(), Vec::new());
    let (mut worst_spread, mut infeasible, mut instances) = (0.0f64, 0usize, 0usize);
    let mut cond1_at_max_d = f64::INFINITY;
    let mut cond1_fraction = Vec::new();
    // Condition 2(iv) on the DM draws: their B
    let mut dm_bounds: Vec<f64> = Vec::new();
    for &d in p.dims.iter() {
        let (ex1, orth, dm) = models(d);
        let (mut ex1_rho, mut dm_rho, mut orth_rho) = (vec![], vec![], vec![]);
        let mut cond1_ok = 0usize;
        for s in 0..*p.seeds {
            // one stream per (draw, model): common random numbers across d
            let stream = |m: u64| FIRST_FREE_STREAM + 3 * s as u64 + m;
            let err = |e: TokenError| RunError::Other(format!("d = {d}, draw {s}: {e}"));
            let mut cases = vec![("ex1", ex1.generate(&mut ctx.rng(stream(0))).map_err(err)?)];
            if d > ex1.n * ex1.t {
                cases.push((
                    "ex1-orth",
                    orth.generate(&mut ctx.rng(stream(1))).map_err(err)?,
                ));
            }
            cases.push(("dm", dm.generate(&mut ctx.rng(stream(2))).map_err(err)?));
            for (name, inst) in &cases {
                let m = measure(inst)?;
                let ratio = if *name == "dm" {
                    opt_norm_ratio(inst)
                } else {
                    f64::NAN
                };
                worst_spread = stats::larger(worst_spread, m.spread);
                instances += 1;
                infeasible += usize::from(!m.feasible);
                match *name {
                    "ex1" => ex1_rho.push(m.rho),
                    "ex1-orth" => orth_rho.push(m.rho),
                    _ => {
                        dm_rho.push(m.rho);
                        dm_bounds.push(inst.data.assumptions(&inst.decoder, &inst.opt).token_bound);
                        cond1_ok += usize::from(ratio >= *c.cond1_c);
                        if d == *p.dims.last().unwrap() {
                            cond1_at_max_d = stats::smaller(cond1_at_max_d, ratio);
                        }
                    }
                }
                rep.series.push(row(name, d, s, &m, ratio));
            }
        }
        ex1_stats.push(ex1_rho);
        dm_stats.push(dm_rho);
        if !orth_rho.is_empty() {
            orth_d.push(d as f64);
            orth_max.push(stats::max(orth_rho.iter()));
        }
        cond1_fraction.push(cond1_ok as f64 / *p.seeds as f64);
    }
    let dims: Vec<f64> = p.dims.iter().map(|&d| d as f64).collect();
    let scaled: Vec<f64> = ex1_stats
        .median
        .iter()
        .zip(&dims)
        .map(|(r, d)| r * d.sqrt())
        .collect();
    let dm_scaled: Vec<f64> = dm_stats
        .median
        .iter()
        .zip(&dims)
        .map(|(r, d)| r * d.sqrt())
        .collect();
    let (ex1_n, ex1_t) = (Example1::ex1().n, Example1::ex1().t);

    rep.at_most(
        "ass-non-optimal-score-spread-gamma",
        "Ass. 2: max non-optimal score spread / max|γ|",
        worst_spread,
        *c.ass2_rel_tol,
    )
    .note(format!("{instances} draws of ex1, ex1-orth and DM"));
    rep.at_most(
        "lemma-median-rho-orth-ex1-ratio",
        "Lemma 6: max_d median ρ_orth(ex1) ratio between consecutive d",
        ex1_stats.worst_ratio(),
        1.0,
    )
    .note("< 1: the median decreases with d");
    let (lo, hi) = stats::range(&scaled);
    rep.at_least(
        "lemma-median-rho-orth-ex1-sqrtd",
        "Lemma 6: min_d median ρ_orth(ex1)·√d",
        lo,
        c.rho_sqrt_d_range[0],
    )
    .note(format!("per d: {scaled:.3?}"));
    rep.at_most(
        "lemma-6-d-median-rho-orth-ex1-sqrtd",
        "Lemma 6: max_d median ρ_orth(ex1)·√d",
        hi,
        c.rho_sqrt_d_range[1],
    );
    let orth_worst = stats::max(orth_max.iter());
    rep.at_most(
        "ex1-orth-rho-orth",
        "ex1-orth: max ρ_orth",
        orth_worst,
        *c.orth_max_rho,
    )
    .note(format!(
        "d ∈ {orth_d:?} (ex1-orth needs d ≥ nT + 1 = {})",
        ex1_n * ex1_t + 1
    ));
    rep.at_most(
        "lemma-median-rho-orth-dm-ratio",
        "Lemma 9: max_d median ρ_orth(DM) ratio between consecutive d",
        dm_stats.worst_ratio(),
        1.0,
    )
    .note(format!("median ρ_orth(DM)·√d per d: {dm_scaled:.3?}"));
    rep.at_most(
        "svm-infeasible-draws",
        "W-SVM infeasible draws",
        infeasible as f64,
        0.0,
    )
    .note(format!(
        "{instances} draws (Gram certificate or the dual QP)"
    ));
    rep.at_least(
        &format!("cond-ii-opt-dm.{}", p.dims.last().unwrap()),
        &format!(
            "Cond. 1(ii): min_i ‖x_opt‖²/max‖x_t‖², DM at d = {}",
            p.dims.last().unwrap()
        ),
        cond1_at_max_d,
        *c.cond1_c,
    )
    .note(format!(
        "fraction of DM draws meeting it per d: {cond1_fraction:.2?}"
    ));
    condition2_checks(&mut rep, &dm_bounds, p, c, ctx)?;
    let strict = 1.0 / (ex1_n * ex1_t) as f64;
    rep.derive("ex1_median_rho", &ex1_stats.median);
    rep.derive("ex1_median_rho_sqrt_d", &scaled);
    rep.derive("dm_median_rho", &dm_stats.median);
    rep.derive("dm_median_rho_sqrt_d", &dm_scaled);
    rep.derive("ex1_orth_max_rho", &orth_max);
    rep.derive("ass1a_strict_rho_max", strict);
    rep.derive(
        "dm_d_over_n",
        dims.iter()
            .map(|d| d / GaussianJoint::dm().n as f64)
            .collect::<Vec<_>>(),
    );
    rep.derive("cond1_fraction_per_d", &cond1_fraction);

    // reference C·d^{−1/2} with C the geometric mean of the ex1 medians·√d
    let fitted = (scaled.iter().map(|v| v.ln()).sum::<f64>() / scaled.len() as f64).exp();
    let reference = |k: f64| dims.iter().map(|d| k / d.sqrt()).collect::<Vec<f64>>();
    let rho_panel = LinePanel::new(
        format!(
            "near-orthogonality ρ_orth, median and range of {} draws",
            *p.seeds
        ),
        "token dimension d",
        "ρ_orth",
    )
    .log_x()
    .log_y()
    .band(
        Band::new(
            "",
            dims.clone(),
            ex1_stats.min.clone(),
            ex1_stats.max.clone(),
        )
        .color(0),
    )
    .band(Band::new("", dims.clone(), dm_stats.min.clone(), dm_stats.max.clone()).color(1))
    .series(
        Series::new(
            "ex1 (Lemma 6)",
            dims.clone(),
            ex1_stats.median.clone(),
            LineStyle::SolidMarkers,
        )
        .color(0),
    )
    .series(
        Series::new(
            "DM (Lemma 9)",
            dims.clone(),
            dm_stats.median.clone(),
            LineStyle::SolidMarkers,
        )
        .color(1),
    )
    .series(
        Series::theory(
            format!("{fitted:.2}·d^(−1/2)"),
            dims.clone(),
            reference(fitted),
        )
        .color(2),
    )
    .series(
        Series::new(
            format!(
                "check range [{}, {}]·d^(−1/2)",
                c.rho_sqrt_d_range[0], c.rho_sqrt_d_range[1]
            ),
            dims.clone(),
            reference(c.rho_sqrt_d_range[0]),
            LineStyle::Dotted,
        )
        .color(3),
    )
    .series(
        Series::new(
            "",
            dims.clone(),
            reference(c.rho_sqrt_d_range[1]),
            LineStyle::Dotted,
        )
        .color(3),
    )
    .hline(RefLine::new(strict, "strict Ass. 1a: ρ ≤ 1/(nT)").style(LineStyle::Dotted))
    .y_range(0.01, 4.0)
    .legend(LegendPosition::UpperRight);
    let orth_panel = LinePanel::new(
        "ex1-orth: exact orthogonality",
        "token dimension d",
        "max ρ_orth over draws",
    )
    .log_x()
    .log_y()
    .series(Series::new("ex1-orth", orth_d, orth_max, LineStyle::SolidMarkers).color(0))
    .hline(RefLine::new(*c.orth_max_rho, "check bound"))
    .legend(LegendPosition::LowerRight);
    rep.figure = Some(
        Figure::new(2)
            .title("Assumptions 1–2 on the data models (Lemma 6, Lemma 9)")
            .panel(rho_panel)
            .panel(orth_panel),
    );
    Ok(rep)
}

/// Per d and draw, three data models of ≤ 32 tokens in ℝ^d with their W-SVM Gram matrices
/// (O((nT)²·d)); the dual's solution W is a d × d matrix.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let tokens = 32.0;
    let d_max = n(p.dims.iter().copied().max().unwrap_or(0));
    let d_sum: f64 = p.dims.iter().map(|&d| n(d)).sum();
    Cost::new()
        .work(
            "dims, seeds",
            "draws and W-SVM Gram matrices",
            3.0 * n(*p.seeds),
            10.0 * tokens * tokens * d_sum,
        )
        .doubles(
            "dims",
            "three draws' tokens and constraints",
            3.0 * 3.0 * tokens * d_max,
        )
        .doubles("dims", "the W-SVM solution W (d × d)", d_max * d_max)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.assumption-check",
    paper: "003",
    summary: "Ass. 1/2, Lemma 6, Lemma 9, Cond. 1 over seeds and a d sweep: Ass. 2 exact, \
              ρ_orth ∝ d^(−1/2) for ex1 and DM, ex1-orth exactly orthogonal, every W-SVM \
              feasible, DM's optimal tokens the larger ones.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "ass1a_strict_rho_max",
        "cond2_i_zero_init",
        "cond2_ii_opt_norm_fraction",
        "cond2_iii_near_orthogonal_fraction",
        "cond2_iii_threshold_d",
        "cond2_iv_eta_times_c3_at_zero",
        "data_file.*",
    ],
    run,
};

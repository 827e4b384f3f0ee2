//! `tokens-bad-init` (Fig. 8, App. C.1; spec 003 §1.3 bad-init instance, §4.2 "global" claim,
//! §7): GD and NGD started on the bad stationary direction W₀ = r·W_bad. Small r converges
//! to W_mm for both; at large r GD sits on the bad direction (its gradient is exponentially
//! small there) while NGD's fixed step length escapes.
//!
//! On this instance every step moves W only in span{D₁, D₂} with ⟨D₁, D₂⟩ = 1 > 0, so each
//! gradient step raises both logit gaps: φ_{i,opt} is non-decreasing at every step of every
//! run [D], and W_k = w_k e₁ᵀ with w_k in the plane of W_mm e₁ and W_bad e₁, where the figure
//! draws the tokens.
//!
//! `data_file` (X, y, u, optional z) replaces the bad-init instance and `init_file` (array
//! `W0`, d × d, unit Frobenius norm) the direction W_bad. Every check is a property of the
//! bad-init instance or of W_bad on it, so on a data file all are skipped (the curves and the
//! figure remain); with only an init file the W-SVM closed form, the small-r convergence and
//! the monotone φ_opt (⟨D₁, D₂⟩ > 0 holds for every W) still run, and the W_bad-specific
//! ones (sample 1 recovers by k, GD stuck, NGD escapes) are skipped.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::analysis::svm::one_minus_cos;
use crate::attention::{FixedDecoder, Instance, Loss};
use crate::flow::{Method, OdeConfig};
use crate::models::token_select::generators::bad_direction;
use crate::models::token_select::{FixedRule, FixedStepper};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, Check, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{instance_arrays, w_svm, DataName, UserFiles};
use super::fixed_common::ngd;
use super::joint_common::{checkpoints, log10_from_ln, require_iterations, subscript, thin_log};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Radii r of the initializations W₀ = r·W_bad (‖W_bad‖ = 1). The small-init checks use
    /// the smallest, the stuck-GD / escaping-NGD checks the largest.
    pub radii: NonEmpty<Positive>,
    /// GD step size η.
    pub gd_eta: Positive,
    /// NGD step length η (uncapped: the analysed algorithm).
    pub ngd_eta: Positive,
    /// Iterations K of every run.
    pub iterations: AtLeast<1>,
    /// Record every iteration up to this k, then `per_decade` log-spaced ones.
    pub dense_until: usize,
    pub per_decade: AtLeast<1>,
    /// The user's tokens (X, y, u, optional z), replacing the bad-init instance.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's direction (array `W0`, d × d, unit Frobenius norm), replacing W_bad.
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Iteration at which the smallest-radius runs are judged (spec 003 §7 bad-init: 1000).
    pub small_k: usize,
    /// Bound on GD's 1 − corr there (§7: 1e−3; prototype 5.2e−6).
    pub gd_small_misalignment: Positive,
    /// Bound on NGD's 1 − corr there (§7: 1e−6; prototype ≈ 0).
    pub ngd_small_misalignment: Positive,
    /// Sample 1 (whose constraint W₀ violates) must reach φ_{1,opt} > ½ by this k (§7: 10).
    pub phi_half_by: usize,
    /// Iteration at which the largest-radius GD run is judged stuck (§7: 1000).
    pub gd_stuck_k: usize,
    /// Lower bound on that run's 1 − corr (§7: 0.5; prototype 0.84).
    pub gd_stuck_misalignment: Positive,
    /// Iteration by which the largest-radius NGD run must have escaped (§7: 500).
    pub ngd_escape_k: usize,
    /// Bound on its 1 − corr there (§7: 1e−2).
    pub ngd_escape_misalignment: Positive,
    /// max |W_mm − (2/3, −1/3, 1/3)e₁ᵀ| of the W-SVM solution (§3.4 closed form).
    pub w_mm_tol: Positive,
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    require_iterations(
        sc,
        *p.iterations,
        &[
            ("checks.small_k", c.small_k),
            ("checks.phi_half_by", c.phi_half_by),
            ("checks.gd_stuck_k", c.gd_stuck_k),
            ("checks.ngd_escape_k", c.ngd_escape_k),
        ],
    )?;
    UserFiles::new(&p.data_file, &p.init_file).validate_directions(DataName::BadInit, 1, sc)
}

/// The two optimizers of Fig. 8.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Optimizer {
    Gd,
    Ngd,
}

impl Optimizer {
    fn rule(self, p: &Params) -> FixedRule {
        match self {
            Optimizer::Gd => FixedRule::Gd { eta: *p.gd_eta },
            Optimizer::Ngd => ngd(*p.ngd_eta),
        }
    }
    fn label(self, p: &Params) -> String {
        match self {
            Optimizer::Gd => format!("GD η={}", *p.gd_eta),
            Optimizer::Ngd => format!("NGD η={}", *p.ngd_eta),
        }
    }
}

/// Orthonormal coordinates (along W_mm q₁, along the part of W_bad q₁ orthogonal to it) of
/// the plane that holds every W_k q₁ on this instance.
struct Plane {
    p1: Vec<f64>,
    p2: Vec<f64>,
}

impl Plane {
    fn new(inst: &Instance, w_mm: &[f64], w_bad: &[f64]) -> Self {
        let q = inst.data.query(0);
        let unit = |v: Vec<f64>| {
            let n = crate::flow::norm(&v);
            v.into_iter().map(|x| x / n).collect::<Vec<f64>>()
        };
        let p1 = unit(mat_vec(w_mm, q));
        let b = mat_vec(w_bad, q);
        let along = dot(&b, &p1);
        let p2 = unit(b.iter().zip(&p1).map(|(x, y)| x - along * y).collect());
        Plane { p1, p2 }
    }
    fn coords(&self, v: &[f64]) -> (f64, f64) {
        (dot(v, &self.p1), dot(v, &self.p2))
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// W q for W column-major (d × d).
fn mat_vec(w: &[f64], q: &[f64]) -> Vec<f64> {
    let d = q.len();
    (0..d)
        .map(|r| (0..d).map(|c| w[c * d + r] * q[c]).sum())
        .collect()
}

/// One run's per-iteration record.
struct Run {
    opt: Optimizer,
    radius: f64,
    /// 1 − corr(W_k, W_mm), k = 0..=K.
    misalignment: Vec<f64>,
    /// φ_{i,opt}(W_k) and ln(1 − φ_{i,opt}(W_k)) per sample.
    phi: Vec<Vec<f64>>,
    log_one_minus_phi: Vec<Vec<f64>>,
    /// ln(L − L*).
    log_excess: Vec<f64>,
    norm: Vec<f64>,
    /// Angle of W_k q₁ from W_mm q₁ in the plane (degrees; W_bad q₁ is at 90°).
    angle: Vec<f64>,
    /// Steps at which some ln(1 − φ_{i,opt}) rose (φ_{i,opt} fell) beyond rounding.
    phi_decreases: usize,
}

fn run_one(
    model: &FixedDecoder,
    plane: &Plane,
    w_mm: &[f64],
    w0: Vec<f64>,
    opt: Optimizer,
    radius: f64,
    p: &Params,
) -> Result<Run, RunError> {
    let n = model.data().n;
    let q = model.data().query(0).to_vec();
    let mut stepper = FixedStepper::new(model, opt.rule(p))
        .map_err(|e| RunError::Other(format!("{}: {e}", opt.label(p))))?;
    let mut run = Run {
        opt,
        radius,
        misalignment: Vec::with_capacity(*p.iterations + 1),
        phi: vec![Vec::with_capacity(*p.iterations + 1); n],
        log_one_minus_phi: vec![Vec::with_capacity(*p.iterations + 1); n],
        log_excess: Vec::with_capacity(*p.iterations + 1),
        norm: Vec::with_capacity(*p.iterations + 1),
        angle: Vec::with_capacity(*p.iterations + 1),
        phi_decreases: 0,
    };
    let mut w = w0;
    for k in 0..=*p.iterations {
        let att = model.attention(&w);
        for i in 0..n {
            let l1m = att.log_one_minus_phi_opt[i];
            if let Some(&prev) = run.log_one_minus_phi[i].last() {
                if l1m > prev + 1e-12 * prev.abs().max(1.0) {
                    run.phi_decreases += 1;
                }
            }
            run.phi[i].push(att.phi_opt[i]);
            run.log_one_minus_phi[i].push(l1m);
        }
        run.misalignment.push(one_minus_cos(&w, w_mm));
        run.log_excess.push(model.log_excess_loss(&w));
        run.norm.push(crate::flow::norm(&w));
        let (a, b) = plane.coords(&mat_vec(&w, &q));
        run.angle.push(b.atan2(a).to_degrees());
        if k < *p.iterations {
            stepper.step(&mut w);
        }
    }
    Ok(run)
}

/// Why a check of the built-in instance does not apply to the user's files: `None` when it
/// applies (built-in tokens, and W_bad unless only `data_too` is set).
fn not_applicable(
    user_data: bool,
    user_direction: bool,
    needs_w_bad: bool,
) -> Option<&'static str> {
    match (user_data, user_direction && needs_w_bad) {
        (true, _) => Some("a property of the bad-init instance (data_file gives other tokens)"),
        (false, true) => Some(
            "a property of the bad stationary direction W_bad (init_file gives the \
             direction)",
        ),
        (false, false) => None,
    }
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = UserFiles::new(&p.data_file, &p.init_file);
    let (source, inst) = files.instance(DataName::BadInit, ctx.scenario)?;
    let model = FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential)
        .map_err(|e| RunError::Other(format!("{source} model: {e}")))?;
    let (_, svm) = w_svm(&inst)?;
    let w_mm = svm.w.clone();
    let user_direction = files.directions(inst.data.d, 1, ctx.scenario)?;
    let (user_data, user_w_bad) = (source.is_file(), user_direction.is_some());
    let w_bad = match user_direction {
        Some(mut dirs) => dirs.swap_remove(0),
        None => bad_direction(),
    };
    let plane = Plane::new(&inst, &w_mm, &w_bad);
    let mut rep = Report {
        instance: Some(instance_arrays(&inst, std::slice::from_ref(&w_bad))),
        ..Report::default()
    };
    // why a check does not apply to the user's files (None: it runs)
    let skip = |needs_w_bad: bool| not_applicable(user_data, user_w_bad, needs_w_bad);

    // §3.4: W_mm = (2/3, −1/3, 1/3)e₁ᵀ (column 0 of the column-major vec)
    let closed_title = "W-SVM = (2/3, −1/3, 1/3)e₁ᵀ (max entry error)";
    match skip(false) {
        Some(reason) => rep.skip("w-svm-closed-form", closed_title, reason),
        None => {
            let mut closed = vec![0.0; w_mm.len()];
            closed[..3].copy_from_slice(&[2.0 / 3.0, -1.0 / 3.0, 1.0 / 3.0]);
            let w_mm_err = stats::max(w_mm.iter().zip(&closed).map(|(a, b)| (a - b).abs()));
            rep.at_most("w-svm-closed-form", closed_title, w_mm_err, *c.w_mm_tol)
                .note("spec 003 §3.4 closed form; both constraints active");
        }
    }
    rep.derive("w_mm_norm", svm.norm);
    rep.derive("gamma_margin", 1.0 / svm.norm);
    rep.derive("corr_w_bad_w_mm", 1.0 - one_minus_cos(&w_bad, &w_mm));
    let ln_l_star = model.log_loss_star();
    rep.derive("loss_star", ln_l_star.exp());

    let mut runs = Vec::new();
    for opt in [Optimizer::Gd, Optimizer::Ngd] {
        for r in p.radii.iter().map(|r| **r) {
            let w0: Vec<f64> = w_bad.iter().map(|x| r * x).collect();
            runs.push(run_one(&model, &plane, &w_mm, w0, opt, r, p)?);
        }
    }
    let r_small = stats::min(p.radii.iter().map(|r| **r));
    let r_large = stats::max(p.radii.iter().map(|r| **r));
    let find = |opt: Optimizer, r: f64| {
        runs.iter()
            .find(|x| x.opt == opt && x.radius == r)
            .expect("every (optimizer, radius) ran")
    };

    let mut check_or_skip = |check: Check, needs_w_bad: bool| match skip(needs_w_bad) {
        Some(reason) => rep.skip(&check.id, check.name.clone(), reason),
        None => rep.check(check),
    };
    for (opt, bound) in [
        (Optimizer::Gd, *c.gd_small_misalignment),
        (Optimizer::Ngd, *c.ngd_small_misalignment),
    ] {
        let run = find(opt, r_small);
        check_or_skip(
            Check::at_most(
                &format!("corr-mm.{}-{r_small}-{}", opt.label(p), c.small_k),
                &format!(
                    "{}, r = {r_small}: 1 − corr(W_k, W_mm) at k = {}",
                    opt.label(p),
                    c.small_k
                ),
                run.misalignment[c.small_k],
                bound,
            )
            .note("global convergence from the bad direction with a small norm (Thm 1/6, Fig. 8)"),
            false,
        );
        let k_half = run.phi[0].iter().position(|&f| f > 0.5);
        check_or_skip(
            Check::at_most(
                &format!("first-phi-opt.{}-{r_small}", opt.label(p)),
                &format!(
                    "{}, r = {r_small}: first k with φ_{{1,opt}} > ½",
                    opt.label(p)
                ),
                k_half.map_or(f64::INFINITY, |k| k as f64),
                c.phi_half_by as f64,
            )
            .note(format!(
                "sample 1's constraint is violated at W₀ (φ_{{1,opt}}(W₀) = {:.4})",
                run.phi[0][0]
            )),
            true,
        );
    }
    let gd_large = find(Optimizer::Gd, r_large);
    check_or_skip(
        Check::at_least(
            &format!("gd-corr-mm-stuck-near-bad.{r_large}-{}", c.gd_stuck_k),
            &format!(
                "GD, r = {r_large}: 1 − corr(W_k, W_mm) at k = {} (stuck near W_bad)",
                c.gd_stuck_k
            ),
            gd_large.misalignment[c.gd_stuck_k],
            *c.gd_stuck_misalignment,
        )
        .note("along R·W_bad, ∇L = O(e^{−R/√2}): GD needs a small-norm init (Lem. 2)"),
        true,
    );
    let ngd_large = find(Optimizer::Ngd, r_large);
    check_or_skip(
        Check::at_most(
            &format!("ngd-corr-mm-escapes.{r_large}-{}", c.ngd_escape_k),
            &format!(
                "NGD, r = {r_large}: 1 − corr(W_k, W_mm) at k = {} (escapes)",
                c.ngd_escape_k
            ),
            ngd_large.misalignment[c.ngd_escape_k],
            *c.ngd_escape_misalignment,
        )
        .note("NGD's step length η does not shrink with ‖∇L‖"),
        true,
    );
    let decreases: usize = runs.iter().map(|r| r.phi_decreases).sum();
    check_or_skip(
        Check::at_most(
            "steps-which-some-phi-opt-decreased",
            "steps at which some φ_{i,opt} decreased (all runs)",
            decreases as f64,
            0.0,
        )
        .note(
            "[D] ⟨D₁, D₂⟩ = 1 ≥ 0, so every gradient step raises both logit gaps (Lem. 3's \
             monotonicity holds here for any r, not only below ½)",
        ),
        false,
    );

    heads_to_zero_check(&mut rep, &runs, &inst);

    for run in &runs {
        let key = format!(
            "{}_r{}",
            match run.opt {
                Optimizer::Gd => "gd",
                Optimizer::Ngd => "ngd",
            },
            run.radius
        );
        let k_half = run.phi[0].iter().position(|&f| f > 0.5);
        let k_escape = run.misalignment.iter().position(|&m| m < 0.5);
        rep.derive(&format!("{key}_first_k_phi1_above_half"), k_half);
        rep.derive(&format!("{key}_first_k_misalignment_below_half"), k_escape);
        rep.derive(
            &format!("{key}_misalignment_at_K"),
            *run.misalignment.last().unwrap(),
        );
        rep.derive(&format!("{key}_norm_at_K"), *run.norm.last().unwrap());
    }

    let ks = checkpoints(*p.iterations, p.dense_until, *p.per_decade);
    rep.series = series_table(&runs, &ks, p);
    rep.figure = Some(figure(
        &runs, &ks, &inst, &plane, &w_mm, &w_bad, user_data, p,
    ));
    Ok(rep)
}

/// min over distinct constraint pairs of ⟨D_a, D_b⟩ = (a_a·a_b)(q_a·q_b), with
/// D = (x_{i,opt} − x_{i,t}) q_iᵀ (t ≠ opt_i): the Gram entries the φ-monotonicity rests on.
fn min_constraint_inner_product(inst: &Instance) -> f64 {
    let data = &inst.data;
    let cons: Vec<(Vec<f64>, &[f64])> = (0..data.n)
        .flat_map(|i| {
            let o = inst.opt[i];
            (0..data.t).filter(move |&t| t != o).map(move |t| {
                let a: Vec<f64> = data
                    .token(i, o)
                    .iter()
                    .zip(data.token(i, t))
                    .map(|(x, y)| x - y)
                    .collect();
                (a, data.query(i))
            })
        })
        .collect();
    stats::min(cons.iter().enumerate().flat_map(|(k, (a, q))| {
        cons[k + 1..]
            .iter()
            .map(move |(b, r)| dot(a, b) * dot(q, r))
    }))
}

/// Fig. 8's "sample 1's φ_opt first heads to 0": the largest rise of ln(1 − φ_{i,opt}(W_k))
/// above its value at W₀, over every run, sample and k. [D] With Ass. 2 the negative gradient is
/// a non-negative combination of the D's, so a step moves logit gap i by
/// Σ_j c_j⟨D_j, D_i⟩ ≥ 0 when every ⟨D_j, D_i⟩ ≥ 0 (bad-init: ⟨D₁, D₂⟩ = 1): no φ_{i,opt} ever
/// falls, whatever r, η or optimizer. Runs on a data_file too, where a negative ⟨D_j, D_i⟩ lets a
/// satisfied sample's φ_opt fall while a violated one recovers.
fn heads_to_zero_check(rep: &mut Report, runs: &[Run], inst: &Instance) {
    let min_gram = min_constraint_inner_product(inst);
    rep.derive("min_constraint_inner_product", min_gram);
    let (worst, (run, i)) = stats::worst(runs.iter().flat_map(|run| {
        run.log_one_minus_phi
            .iter()
            .enumerate()
            .map(move |(i, l)| (stats::max(l.iter()) - l[0], (run, i)))
    }))
    .expect("at least one run");
    let phi_min = stats::min(run.phi[i].iter());
    let k_min = run.phi[i].iter().position(|&f| f == phi_min).unwrap_or(0);
    rep.at_most(
        "phi-opt-never-heads-to-zero",
        "max_{runs,i,k} [ln(1 − φ_{i,opt}(W_k)) − ln(1 − φ_{i,opt}(W₀))] (> 0: φ_opt fell)",
        worst,
        0.0,
    )
    .note(format!(
        "[D] −∇L = Σ_j c_j D_j with c_j ≥ 0, so each step raises every logit gap when \
         min ⟨D_a, D_b⟩ ≥ 0 (here {min_gram:.4}); worst: {}, r = {}, sample {}: φ_opt(W₀) = \
         {:.4}, min_k φ_opt = {phi_min:.4} at k = {k_min}",
        match run.opt {
            Optimizer::Gd => "GD",
            Optimizer::Ngd => "NGD",
        },
        run.radius,
        i + 1,
        run.phi[i][0],
    ))
    .paper_claim("Fig. 8: sample 1's φ_opt first heads to 0 (sample 2's to 1) before recovering");
}

fn series_table(runs: &[Run], ks: &[usize], p: &Params) -> Table {
    let mut t = Table::new(&[
        "optimizer",
        "r",
        "k",
        "one_minus_corr",
        "norm_w",
        "phi_opt_1",
        "phi_opt_2",
        "ln_one_minus_phi_opt_1",
        "ln_one_minus_phi_opt_2",
        "log10_excess_loss",
        "angle_deg",
    ]);
    for run in runs {
        for &k in ks {
            t.push(vec![
                Cell::Text(run.opt.label(p)),
                run.radius.into(),
                k.into(),
                run.misalignment[k].into(),
                run.norm[k].into(),
                run.phi[0][k].into(),
                run.phi.get(1).map_or(f64::NAN, |phi| phi[k]).into(),
                run.log_one_minus_phi[0][k].into(),
                run.log_one_minus_phi
                    .get(1)
                    .map_or(f64::NAN, |l| l[k])
                    .into(),
                log10_from_ln(run.log_excess[k]).into(),
                run.angle[k].into(),
            ]);
        }
    }
    t
}

/// Fig. 8: (a) the tokens and the W₀x_{i,1}, W_mm x_{i,1} rays in the plane of W x₁;
/// (b, c) φ_{i,opt} for GD and NGD; (d) the direction of W_k x₁; (e) 1 − corr; (f) L − L*.
#[allow(clippy::too_many_arguments)]
fn figure(
    runs: &[Run],
    ks: &[usize],
    inst: &Instance,
    plane: &Plane,
    w_mm: &[f64],
    w_bad: &[f64],
    user_files: bool,
    p: &Params,
) -> Figure {
    let data = &inst.data;
    let mut tokens = LinePanel::new(
        "(a) tokens and the rays W₀qᵢ, W_mm qᵢ (qᵢ = first token)",
        "along W_mm q₁",
        "along W_bad q₁",
    )
    .legend(LegendPosition::LowerRight)
    .x_range(-1.25, 1.25)
    .y_range(-1.25, 1.25);
    for i in 0..data.n {
        for t in 0..data.t {
            let (a, b) = plane.coords(data.token(i, t));
            let which = if t == inst.opt[i] {
                "opt token".to_string()
            } else {
                format!("token {}", t + 1)
            };
            tokens = tokens.series(
                Series::new(
                    format!("seq. {}: {which}", i + 1),
                    vec![a],
                    vec![b],
                    LineStyle::Markers,
                )
                .color(2 * i + usize::from(t != inst.opt[i])),
            );
        }
    }
    let ray = |w: &[f64], i: usize| {
        let v = mat_vec(w, data.query(i));
        let (a, b) = plane.coords(&v);
        let len = a.hypot(b);
        (vec![0.0, 1.2 * a / len], vec![0.0, 1.2 * b / len])
    };
    for i in 0..data.n {
        let (x, y) = ray(w_bad, i);
        tokens =
            tokens.series(Series::numerics(format!("W₀q{}", subscript(i + 1)), x, y).color(2 * i));
        let (x, y) = ray(w_mm, i);
        tokens = tokens
            .series(Series::theory(format!("W_{{mm}} q{}", subscript(i + 1)), x, y).color(2 * i));
    }

    let x_of = || -> Vec<f64> { ks.iter().skip(1).map(|&k| k as f64).collect() };
    let col = |v: &dyn Fn(usize) -> f64| -> Vec<f64> { ks.iter().skip(1).map(|&k| v(k)).collect() };
    let color_of = |run: &Run| {
        p.radii
            .iter()
            .position(|&r| *r == run.radius)
            .expect("radius of a run")
    };
    let phi_panel = |opt: Optimizer, tag: &str| {
        let mut panel = LinePanel::new(
            format!("({tag}) optimal-token attention, {}", opt.label(p)),
            "iteration k",
            "φ_opt of sequence i",
        )
        .log_x()
        .y_range(0.0, 1.02)
        .legend(LegendPosition::LowerRight)
        .hline(RefLine::new(0.5, "½").style(LineStyle::Dotted));
        for run in runs.iter().filter(|r| r.opt == opt) {
            for i in 0..run.phi.len() {
                let style = if i == 0 {
                    LineStyle::Solid
                } else {
                    LineStyle::SolidMarkers
                };
                let x: Vec<f64> = x_of();
                let y = col(&|k| run.phi[i][k]);
                let (x, y) = if i == 0 { (x, y) } else { thin_log(&x, &y, 25) };
                panel = panel.series(
                    Series::new(format!("seq. {}, r = {}", i + 1, run.radius), x, y, style)
                        .color(color_of(run)),
                );
            }
        }
        panel
    };
    let per_run = |title: &str, y_label: &str, v: &dyn Fn(&Run, usize) -> f64| {
        let mut panel = LinePanel::new(title, "iteration k", y_label).log_x();
        for run in runs {
            let style = match run.opt {
                Optimizer::Gd => LineStyle::Solid,
                Optimizer::Ngd => LineStyle::SolidMarkers,
            };
            let (x, y) = (x_of(), col(&|k| v(run, k)));
            let (x, y) = match run.opt {
                Optimizer::Gd => (x, y),
                Optimizer::Ngd => thin_log(&x, &y, 40),
            };
            panel = panel.series(
                Series::new(
                    format!("{}, r = {}", run.opt.label(p), run.radius),
                    x,
                    y,
                    style,
                )
                .color(color_of(run)),
            );
        }
        panel
    };
    let angle = per_run(
        "(d) direction of W_k q₁ (0° = W_mm q₁, 90° = W_bad q₁)",
        "angle (degrees)",
        &|r, k| r.angle[k],
    )
    .legend(LegendPosition::UpperRight);
    let align = per_run(
        "(e) alignment with W_mm",
        "1 − corr(W_k, W_mm)",
        &|r, k| r.misalignment[k],
    )
    .log_y()
    .y_range(1e-16, 2.0)
    .legend(LegendPosition::LowerLeft);
    let loss = per_run("(f) training loss", "log₁₀(L − L*)", &|r, k| {
        log10_from_ln(r.log_excess[k])
    })
    .legend(LegendPosition::LowerLeft)
    // room above the R → ∞ level for its label (below it, the label crossed the curves)
    .y_range(-16.0, 2.0);
    // bad-init from W_bad (not user files): along R·W_bad the loss tends to (1 + e^{−1})/2, i.e. L − L* → (1 − e^{−1})/2
    let bad_level = (1.0 - (-1.0f64).exp()) / 2.0;
    let loss = match user_files {
        true => loss,
        false => loss.hline(RefLine::new(
            bad_level.log10(),
            "L − L* along R·W_bad, R → ∞",
        )),
    };
    Figure::new(3)
        .title(format!(
            "Bad stationary initialization W₀ = r·W_bad (Fig. 8): GD η = {}, NGD η = {}",
            *p.gd_eta, *p.ngd_eta
        ))
        .panel(tokens)
        .panel(phi_panel(Optimizer::Gd, "b"))
        .panel(phi_panel(Optimizer::Ngd, "c"))
        .panel(angle)
        .panel(align)
        .panel(loss)
}

/// A GD and an NGD run of `iterations` per radius on the bad-initialization instance (2 × 2).
fn cost(p: &Params, _: &RunContext) -> Cost {
    let runs = 2.0 * n(p.radii.len());
    let records = n(p.dense_until) + n(*p.per_decade) * n(*p.iterations).max(1.0).log10();
    Cost::new()
        .work(
            "iterations, radii",
            "iterations",
            runs * n(*p.iterations),
            100.0,
        )
        .table("dense_until, per_decade", runs * records, 10.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.tokens-bad-init",
    paper: "003",
    summary: "Fig. 8 / App. C.1: GD and NGD from the bad stationary direction W₀ = r·W_bad on \
              the bad-init instance; small r converges globally to W_mm, large r traps GD but \
              not NGD; φ_{i,opt} never decreases (⟨D₁, D₂⟩ > 0).",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "*_first_k_misalignment_below_half",
        "*_first_k_phi1_above_half",
        "*_misalignment_at_K",
        "*_norm_at_K",
        "corr_w_bad_w_mm",
        "min_constraint_inner_product",
        "gamma_margin",
        "loss_star",
        "w_mm_norm",
    ],
    run,
};

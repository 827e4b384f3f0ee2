//! `fig2-fixed-decoder` (the paper's Fig. 2; spec 003 §5): GD, NGD, NGD with momentum and the
//! Polyak step (with the caps of App. C) on Example 1 with the decoder fixed. Four panels:
//! excess loss, ‖W_k‖, mean φ_opt and the alignment 1 − corr(W_k, W_mm); the checks are the
//! paper's qualitative orderings at k = K. The same deterministic comparison stands in for the
//! Fig. 1 claim (SNGD and SPS train faster than SGD; the BERT/MultiNLI run is out of scope).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::flow::{Method, OdeConfig, SolverStats};
use crate::models::token_select::FixedRule;
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario};
use crate::stats;

use super::common::{optimizer_runs, DataName, Source, UserFiles};
use super::fixed_common::{
    checkpoint_row, checkpoint_table, fixed_quantities, trace, Init, Probing, Setup,
};
use crate::scenario::param::Negative;

/// One curve of the figure: a label and its update rule.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Optimizer {
    pub label: String,
    pub rule: FixedRule,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub data: DataName,
    /// Iterations K.
    pub steps: AtLeast<1>,
    /// One W₀ shared by every optimizer.
    pub init: Init,
    /// Figure only: lower end of the log₁₀(L − L*) axis (curves below it leave the panel).
    pub loss_axis_floor: Negative,
    pub optimizers: NonEmpty<Optimizer>,
    /// The user's tokens (X, y, u, optional z), replacing `data`; the Fig. 1/2 orderings are
    /// the paper's observations on Example 1 and are skipped on them.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's W₀ (array `W0`, d × d), replacing `init`.
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Pairs [A, B]: 1 − corr of A is below that of B at k = K (Fig. 2's orderings).
    pub alignment_faster: Vec<[String; 2]>,
    /// Pairs [A, B]: L − L* of A is below that of B at k = K (Fig. 1/2: "trains faster").
    pub loss_faster: Vec<[String; 2]>,
    /// L(W_K)/L* − 1 allowed for every optimizer (loss → L* > 0, not 0).
    pub loss_star_rel_tol: Positive,
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    for (i, o) in p.optimizers.iter().enumerate() {
        if p.optimizers[..i].iter().any(|q| q.label == o.label) {
            return Err(sc.invalid(
                &format!("params.optimizers[{i}].label"),
                format!("duplicate label `{}`", o.label),
            ));
        }
    }
    for (key, pairs) in [
        ("checks.alignment_faster", &c.alignment_faster),
        ("checks.loss_faster", &c.loss_faster),
    ] {
        for (j, pair) in pairs.iter().enumerate() {
            if let Some(name) = pair
                .iter()
                .find(|n| !p.optimizers.iter().any(|o| &o.label == *n))
            {
                return Err(sc.invalid(
                    &format!("{key}[{j}]"),
                    format!("no optimizer labelled `{name}`"),
                ));
            }
        }
    }
    UserFiles::new(&p.data_file, &p.init_file).validate(p.data, 1, sc)
}

/// The recorded curves of one optimizer.
#[derive(Default)]
struct Curves {
    k: Vec<f64>,
    log10_excess: Vec<f64>,
    norm: Vec<f64>,
    phi_mean: Vec<f64>,
    misalignment: Vec<f64>,
    /// ln L at k = K, ln(L − L*) at 0 and K, 1 − corr at K.
    log_loss_end: f64,
    log_excess: (f64, f64),
    misalignment_end: f64,
    non_finite: usize,
    k_switch: Option<usize>,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = UserFiles::new(&p.data_file, &p.init_file);
    let (setup, initial, mut rep) = Setup::single(p.data, files, &p.init, ctx)?;
    let w0 = &initial.w0;
    let log_star = setup.model.log_loss_star();
    let mut table = checkpoint_table();
    let mut all = Vec::new();
    for opt in p.optimizers.iter() {
        let mut cv = Curves::default();
        let start = std::time::Instant::now();
        let end = trace(&setup, opt.rule, w0, *p.steps, Probing::Checkpoints, |v| {
            let pr = v.probe;
            table.push(checkpoint_row(&opt.label, &v));
            if !pr.is_finite() {
                cv.non_finite += 1;
            }
            if cv.k_switch.is_none() && v.step.is_some_and(|s| s.capped) {
                cv.k_switch = Some(v.k);
            }
            if v.k == 0 {
                cv.log_excess.0 = pr.log_excess;
            }
            cv.log_excess.1 = pr.log_excess;
            cv.misalignment_end = pr.one_minus_corr;
            cv.k.push(v.k as f64);
            cv.log10_excess
                .push(pr.log_excess / std::f64::consts::LN_10);
            cv.norm.push(pr.norm);
            cv.phi_mean.push(pr.phi_mean());
            cv.misalignment.push(pr.one_minus_corr);
        })?;
        cv.log_loss_end = setup.model.log_loss(&end);
        rep.stats(
            opt.label.clone(),
            &SolverStats {
                method: "fixed-decoder optimizer".into(),
                steps: *p.steps,
                rhs_evals: *p.steps,
                wall_seconds: start.elapsed().as_secs_f64(),
                ..Default::default()
            },
        );
        all.push((opt.label.clone(), cv));
    }
    rep.series = table;
    let find = |name: &str| &all.iter().find(|(l, _)| l == name).expect("validated").1;
    let on_example = !setup.data.is_file();
    let paper = paper_figure(setup.data);
    let loss_figure = if paper == "Fig. 2" { "Fig. 1/2" } else { paper };
    for [a, b] in c.alignment_faster.iter().filter(|_| on_example) {
        let ratio = find(a).misalignment_end / find(b).misalignment_end;
        rep.at_most(
            &format!("fig-corr-corr.{a}-{b}"),
            &format!("{paper}: (1 − corr)[{a}] / (1 − corr)[{b}] at k = K"),
            ratio,
            1.0,
        )
        .note(format!(
            "{:.3e} vs {:.3e}",
            find(a).misalignment_end,
            find(b).misalignment_end
        ));
    }
    for [a, b] in c.loss_faster.iter().filter(|_| on_example) {
        let gap = (find(a).log_excess.1 - find(b).log_excess.1) / std::f64::consts::LN_10;
        rep.at_most(
            &format!("fig-log10-log10.{a}-{b}"),
            &format!("{loss_figure}: log₁₀ (L − L*)[{a}] − log₁₀ (L − L*)[{b}] at k = K"),
            gap,
            0.0,
        )
        .note("stands in for Fig. 1 (SNGD and SPS train faster than SGD on BERT/MultiNLI)");
    }
    if !on_example {
        rep.skip(
            "fig-log10-log10",
            "Fig. 1/2 orderings",
            "the paper observes them on Example 1, not on every instance (data_file)",
        );
    }
    for (label, cv) in &all {
        rep.at_most(
            &format!("ln-excess-loss-decreases.{label}"),
            &format!("[{label}] ln(L − L*) at K − at 0 (excess loss decreases)"),
            cv.log_excess.1 - cv.log_excess.0,
            0.0,
        )
        .note(format!(
            "log₁₀(L − L*)(K) = {:.2}",
            cv.log_excess.1 / std::f64::consts::LN_10
        ));
        rep.at_most(
            &format!("loss.{label}"),
            &format!("[{label}] L(W_K)/L* − 1 (loss → L* > 0)"),
            (cv.log_loss_end - log_star).exp_m1(),
            *c.loss_star_rel_tol,
        )
        .note(format!("L* = {:.6}", log_star.exp()));
        rep.at_most(
            &format!("iterates-nan-or-infinite-quantity.{label}"),
            &format!("[{label}] iterates with a NaN or infinite quantity"),
            cv.non_finite as f64,
            0.0,
        );
        rep.derive(&format!("[{label}] one_minus_corr_K"), cv.misalignment_end);
        rep.derive(
            &format!("[{label}] log10_excess_K"),
            cv.log_excess.1 / std::f64::consts::LN_10,
        );
        rep.derive(&format!("[{label}] k_switch"), cv.k_switch);
    }
    rep.derive("L_star", log_star.exp());
    rep.figure = Some(figure(p, &setup, &initial.label, &all));
    Ok(rep)
}

fn figure(p: &Params, setup: &Setup, init_label: &str, all: &[(String, Curves)]) -> Figure {
    let top = stats::axis_max(
        f64::NEG_INFINITY,
        all.iter().flat_map(|(_, cv)| cv.log10_excess.iter()),
    );
    let mut loss = LinePanel::new("Train loss", "iteration k", "log₁₀(L − L*)")
        .legend(LegendPosition::LowerLeft)
        .y_range(*p.loss_axis_floor, top + 0.05 * (top - *p.loss_axis_floor));
    let mut norm = LinePanel::new("Iterate norm", "iteration k", "‖W_k‖")
        .log_y()
        .legend(LegendPosition::LowerRight);
    let mut attn = LinePanel::new(
        "Softmax score of the optimal token",
        "iteration k",
        "mean_i φ_{i,opt}",
    )
    .log_x()
    .legend(LegendPosition::LowerRight)
    .y_range(0.0, 1.02)
    .hline(RefLine::new(1.0 / setup.t() as f64, "1/T").style(LineStyle::Dotted));
    let mut align = LinePanel::new(
        "Alignment with W_{mm}",
        "iteration k",
        "1 − corr(W_k, W_{mm})",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerLeft);
    for (color, (label, cv)) in all.iter().enumerate() {
        let positive: Vec<usize> = (0..cv.k.len()).filter(|&j| cv.k[j] > 0.0).collect();
        let pick = |v: &[f64]| positive.iter().map(|&j| v[j]).collect::<Vec<f64>>();
        let kp = pick(&cv.k);
        loss = loss.series(
            Series::numerics(label.clone(), cv.k.clone(), cv.log10_excess.clone()).color(color),
        );
        norm = norm
            .series(Series::numerics(label.clone(), cv.k.clone(), cv.norm.clone()).color(color));
        attn = attn
            .series(Series::numerics(label.clone(), kp.clone(), pick(&cv.phi_mean)).color(color));
        align =
            align.series(Series::numerics(label.clone(), kp, pick(&cv.misalignment)).color(color));
    }
    Figure::new(2)
        .title(format!(
            "{}: fixed decoder on {} (n = {}, T = {}, d = {}), W₀: {}",
            paper_figure(setup.data),
            setup.data,
            setup.n(),
            setup.t(),
            setup.model.data().d,
            init_label
        ))
        .panel(loss)
        .panel(norm)
        .panel(attn)
        .panel(align)
}

/// One run of `steps` iterations per optimizer on a built-in data model.
fn cost(p: &Params, _: &RunContext) -> Cost {
    optimizer_runs("steps, optimizers", n(p.optimizers.len()), *p.steps)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.fig2-fixed-decoder",
    paper: "003",
    summary: "The paper's Fig. 2: GD, NGD, NGD-momentum and Polyak steps (with caps) on Example 1 \
              with a fixed decoder — excess loss, ‖W‖, mean φ_opt and 1 − corr(W, W_mm); \
              checks the qualitative orderings at k = K (also the Fig. 1 claim, synthetically).",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: fixed_quantities![
        "L_star",
        "[*] k_switch",
        "[*] log10_excess_K",
        "[*] one_minus_corr_K",
    ],
    run,
};

/// The paper figure a run reproduces: Fig. 2 (Example 1 and the other models), or on the
/// class-signal patches the Fig. 9 analogue.
fn paper_figure(data: Source) -> &'static str {
    if data == Source::Named(DataName::Patches) {
        "Fig. 9 analogue"
    } else {
        "Fig. 2"
    }
}

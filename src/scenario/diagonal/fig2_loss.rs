//! `fig2-loss`: the paper's Fig. 2(a) — training loss against rescaled time τ = t/ln(1/α) for
//! each initialization scale α, converging to the Algorithm-1 step curve loss_th(τ) = L̃(β^k)
//! (spec 004 §3.4, §5.2, §7). The checks: the sup over the plateau interiors of
//! |L_α − L̃(β^k)| decreases as α → 0 and is tiny at the smallest α.
//!
//! A sweep over α: each run integrates one α and writes its loss beside loss_th(τ) and its
//! plateau errors; the reduction checks the decrease and the smallest α and draws Fig. 2(a).

use crate::scenario::param::{AboveOne, Open01, OpenHalf};
use crate::scenario::param::{AtLeast, Positive};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::common::{flow_cost, schedule_cost, InstanceName, UserFiles};
use crate::flow::{Method, OdeConfig};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::reduce::{numeric_grid, SweepRun, SweepRuns, SweptKind};
use crate::scenario::registry::Kind;
use crate::scenario::sweep::SweepSpec;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::figures_common::{
    alpha_color, alpha_label, check_alphas, instance_label, step_curve, sup_per_plateau,
    transitions_outside_interiors, Toy,
};

/// The most α curves panel (a) can tell apart (the palette without black).
const MAX_DRAWN: usize = 7;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The toy task (spec §5.1): mini, small (default) or paper (heavy).
    pub instance: InstanceName,
    /// The initialization scale of this run (the sweep's grid `alpha`).
    pub alpha: Open01,
    /// The α drawn in panel (a) of the sweep's figure (a subset of the grid, at most 7);
    /// empty = all.
    #[serde(default)]
    pub drawn_alphas: Vec<f64>,
    /// Output samples on τ ∈ [0, horizon·T_last].
    pub samples: AtLeast<10>,
    /// Horizon as a multiple of the last finite stage time T_last (spec §5.1: 1.2).
    pub horizon: AboveOne,
    /// Plateau interiors: [T_k + δ_k, T_{k+1} − δ_k], δ_k = margin·(T_{k+1} − T_k).
    pub plateau_margin: OpenHalf,
    /// The sup error must decrease over the α ≤ this value whose transitions lie outside the
    /// interiors (spec §7: 1e−4).
    pub decrease_below: Positive,
    /// The user's data (Σ, β* or the attention arrays, README "Your own data") instead of
    /// `instance`; every run of the sweep uses it.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's initial direction θ_0 = (u0, v0) instead of the seed's (the same for every α).
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// At the smallest α of the sweep, sup over plateau interiors of |L_α − L̃(β^k)| ≤ this ×
    /// L̃(0) (spec §7 `fig2-loss`: 1e−3).
    pub final_error_rel: Positive,
}

/// The user's files of this run (none: the built-in instance and the seed's θ_0).
fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &p.init_file)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    files(p).validate(p.instance, sc)?;
    if p.drawn_alphas.len() > MAX_DRAWN {
        return Err(sc.invalid("params.drawn_alphas", format!("at most {MAX_DRAWN} values")));
    }
    Ok(())
}

/// The grid of α: strictly decreasing in (0, 1); panel (a) draws at most 7 of them.
fn validate_sweep(
    p: &Params,
    _c: &Checks,
    spec: &SweepSpec,
    sc: &Scenario,
) -> Result<(), InputError> {
    let alphas = numeric_grid(sc, spec, "alpha", 1)?;
    check_alphas(&alphas).map_err(|r| sc.invalid("sweep.grid.alpha", r))?;
    if p.drawn_alphas.iter().any(|a| !alphas.contains(a)) {
        return Err(sc.invalid("params.drawn_alphas", "each one of sweep.grid.alpha"));
    }
    if p.drawn_alphas.is_empty() && alphas.len() > MAX_DRAWN {
        return Err(sc.invalid(
            "params.drawn_alphas",
            format!("more than {MAX_DRAWN} α in sweep.grid.alpha: choose the ones panel (a) draws"),
        ));
    }
    Ok(())
}

/// One α: the flow's loss on the τ grid beside loss_th(τ) (series.csv), the sup error on each
/// plateau interior and whether every transition lies outside the interiors.
fn run(p: &Params, _c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let toy = Toy::build(p.instance, &files(p), ctx)?;
    let schedule = &toy.schedule;
    let taus = toy.taus(*p.horizon, *p.samples);
    let tau_end = *taus.last().unwrap();
    let interiors = toy.interiors(tau_end, *p.plateau_margin);
    let mut rep = Report::default();
    let run = toy.run(*p.alpha, &taus, &ctx.ode)?;
    rep.stats(format!("flow α = {:e}", p.alpha), &run.traj.stats);
    let losses: Vec<f64> = (0..run.traj.len())
        .map(|j| toy.loss().loss(&run.beta(j)))
        .collect();
    let plateau_sups = sup_per_plateau(&interiors, &taus, |j, k| {
        (losses[j] - schedule.stages[k].loss).abs()
    });
    let tau_hats: Vec<Option<f64>> = run
        .transitions
        .iter()
        .map(|t| t.map(|t| t / run.lambda))
        .collect();
    let separated = transitions_outside_interiors(&interiors, &tau_hats, tau_end);
    let sup = stats::max(plateau_sups.iter());
    let loss0 = schedule.stages[0].loss;

    let theory: Vec<f64> = taus.iter().map(|&t| schedule.loss_at(t)).collect();
    rep.series = Table::new(&["tau", "loss_theory", "loss"]);
    rep.series.push_columns(
        &[],
        &[&taus[..losses.len()], &theory[..losses.len()], &losses],
    );
    let mut transitions = Table::new(&["k", "T_k", "tau_hat_k"]);
    for (k, t_hat) in tau_hats.iter().enumerate() {
        transitions.push(vec![
            (k + 1).into(),
            schedule.stages[k + 1].t_start.into(),
            t_hat.unwrap_or(f64::NAN).into(),
        ]);
    }
    let mut plateaus = Table::new(&["k", "tau_lo", "tau_hi", "sup_abs_loss_error"]);
    for (pl, sup) in interiors.iter().zip(&plateau_sups) {
        plateaus.push(vec![pl.k.into(), pl.lo.into(), pl.hi.into(), (*sup).into()]);
    }
    rep.tables.push(("transitions".into(), transitions));
    rep.tables.push(("plateau_errors".into(), plateaus));
    rep.derive("lambda", run.lambda);
    rep.derive("loss0", loss0);
    rep.derive("sup_plateau_error", sup);
    rep.derive("sup_plateau_error_rel", sup / loss0);
    // 1 = every measured transition lies between the interiors it separates
    rep.derive(
        "transitions_outside_interiors",
        if separated { 1.0 } else { 0.0 },
    );
    rep.derive("stage_times", schedule.stage_times());
    rep.derive(
        "plateau_losses",
        schedule.stages.iter().map(|s| s.loss).collect::<Vec<_>>(),
    );
    rep.derive(
        "activated",
        schedule
            .stages
            .iter()
            .filter_map(|s| s.entered_by.as_ref().map(|a| a.name.clone()))
            .collect::<Vec<_>>(),
    );
    let step = step_curve(schedule, tau_end, |k| schedule.stages[k].loss);
    rep.figure = Some(
        Figure::new(1)
            .title(format!(
                "{}: loss vs τ, Algorithm 1 dashed",
                instance_label(p.instance, &files(p))
            ))
            .panel(
                LinePanel::new(
                    format!("{}: sup interior error {sup:.3e}", alpha_label(*p.alpha)),
                    "τ = t / ln(1/α)",
                    "L(θ_α(τ))",
                )
                .legend(LegendPosition::LowerLeft)
                .series(
                    Series::numerics(alpha_label(*p.alpha), taus[..losses.len()].to_vec(), losses)
                        .color(alpha_color(0, 1)),
                )
                .series(Series::theory("Algorithm 1: L̃(β^k)", step.x, step.y)),
            ),
    );
    rep.instance = Some(toy.arrays.clone());
    Ok(rep)
}

fn other(e: String) -> RunError {
    RunError::Other(e)
}

/// What one α run contributed, as read back by the reduction.
struct AlphaResult<'a> {
    run: &'a SweepRun,
    alpha: f64,
    lambda: f64,
    sup: f64,
    separated: bool,
}

/// Across α: the decrease of the plateau error over the small α, its size at the smallest α,
/// the combined tables and Fig. 2(a) with the convergence panel.
fn reduce(p: &Params, c: &Checks, runs: &SweepRuns) -> Result<Report, RunError> {
    let mut results: Vec<AlphaResult> = runs
        .runs
        .iter()
        .map(|run| AlphaResult {
            run,
            alpha: run.grid_value("alpha"),
            lambda: run.quantity("lambda"),
            sup: run.quantity("sup_plateau_error"),
            separated: run.quantity("transitions_outside_interiors") == 1.0,
        })
        .collect();
    results.sort_by(|a, b| b.alpha.total_cmp(&a.alpha));
    let Some(last) = results.last() else {
        return Err(other("the sweep has no runs".into()));
    };
    let loss0 = last.run.quantity("loss0");
    let mut rep = Report {
        series: runs.stacked("series").map_err(other)?,
        ..Default::default()
    };
    for stem in ["transitions", "plateau_errors"] {
        rep.tables
            .push((stem.into(), runs.stacked(stem).map_err(other)?));
    }

    // the decrease over the α ≤ decrease_below whose transitions lie outside the interiors
    let eligible: Vec<&AlphaResult> = results
        .iter()
        .filter(|r| r.alpha <= *p.decrease_below && r.separated)
        .collect();
    let lagging: Vec<String> = results
        .iter()
        .filter(|r| r.alpha <= *p.decrease_below && !r.separated)
        .map(|r| format!("{:e}", r.alpha))
        .collect();
    let worst_ratio = if eligible.len() < 2 {
        f64::INFINITY
    } else {
        stats::max(eligible.windows(2).map(|w| w[1].sup / w[0].sup))
    };
    rep.at_most(
        "sup-plateau-interior-alpha-beta-largest",
        "sup plateau-interior |L_α − L̃(β^k)|: largest ratio between consecutive α \
         (α ≤ decrease_below, transitions outside the interiors)",
        worst_ratio,
        1.0,
    )
    .note(format!(
        "Theorem 4.1: θ_α(τ) → θ^k uniformly on each interior, so the error shrinks \
         strictly with α once every transition lag a_k/Λ is below the margin (needs two \
         such α); sup errors {}; lag-dominated, not compared: [{}]",
        eligible
            .iter()
            .map(|r| format!("{:e}: {:.3e}", r.alpha, r.sup))
            .collect::<Vec<_>>()
            .join(", "),
        lagging.join(", ")
    ))
    .paper_claim(
        "spec §7: decreasing over every α ≤ 1e−4; fails while an interior still holds a \
         lagging transition (τ̂_k − T_k = a_k/Λ, spec §6 #12)",
    );
    rep.at_most(
        &format!("sup-plateau-interior-alpha-beta-alpha.{:e}", last.alpha),
        &format!(
            "sup plateau-interior |L_α − L̃(β^k)| / L̃(0) at α = {:e}",
            last.alpha
        ),
        last.sup / loss0,
        *c.final_error_rel,
    )
    .note(format!(
        "L̃(0) = {loss0:.4e}; interiors [T_k + δ_k, T_{{k+1}} − δ_k], \
         δ_k = {}·(T_{{k+1}} − T_k)",
        p.plateau_margin
    ))
    .paper_claim("spec §7: at α = 1e−32 (mini: 1e−64)");
    rep.derive(
        "alphas",
        results.iter().map(|r| r.alpha).collect::<Vec<_>>(),
    );
    rep.derive(
        "sup_plateau_errors",
        results.iter().map(|r| r.sup).collect::<Vec<_>>(),
    );
    rep.derive(
        "transitions_outside_interiors",
        results.iter().map(|r| r.separated).collect::<Vec<_>>(),
    );
    rep.figure = Some(figure(p, c, &results, loss0)?);
    Ok(rep)
}

fn figure(p: &Params, c: &Checks, results: &[AlphaResult], loss0: f64) -> Result<Figure, RunError> {
    let drawn = |a: f64| p.drawn_alphas.is_empty() || p.drawn_alphas.contains(&a);
    let mut curves = LinePanel::new("(a) loss vs rescaled time", "τ = t / ln(1/α)", "L(θ_α(τ))")
        .legend(LegendPosition::LowerLeft);
    let shown: Vec<&AlphaResult> = results.iter().filter(|r| drawn(r.alpha)).collect();
    for (j, r) in shown.iter().enumerate() {
        let series = r.run.table("series").map_err(other)?;
        curves = curves.series(
            Series::numerics(
                alpha_label(r.alpha),
                series.column("tau").map_err(other)?,
                series.column("loss").map_err(other)?,
            )
            .color(alpha_color(j, shown.len())),
        );
    }
    // loss_th(τ) is the same step curve in every run (the α-independent limit)
    let series = results[0].run.table("series").map_err(other)?;
    curves = curves.series(Series::theory(
        "Algorithm 1: L̃(β^k)",
        series.column("tau").map_err(other)?,
        series.column("loss_theory").map_err(other)?,
    ));

    let lambdas: Vec<f64> = results.iter().map(|r| r.lambda).collect();
    let sups: Vec<f64> = results.iter().map(|r| r.sup).collect();
    let (sep_l, sep_s): (Vec<f64>, Vec<f64>) = results
        .iter()
        .filter(|r| r.separated)
        .map(|r| (r.lambda, r.sup))
        .unzip();
    let convergence = LinePanel::new(
        format!(
            "(b) sup over plateau interiors (margin {})",
            p.plateau_margin
        ),
        "Λ = ln(1/α)",
        "sup_τ |L_α(τ) − L̃(β^k)|",
    )
    .log_y()
    .legend(LegendPosition::LowerLeft)
    .series(Series::new("every α", lambdas, sups, LineStyle::SolidMarkers).color(0))
    .series(
        Series::new(
            "transitions outside the interiors",
            sep_l,
            sep_s,
            LineStyle::Markers,
        )
        .color(1),
    )
    .hline(RefLine::new(
        *c.final_error_rel * loss0,
        format!("{:e}·L̃(0)", c.final_error_rel),
    ));
    Ok(Figure::new(2)
        .title(format!(
            "Fig. 2(a): loss of the diagonal attention head ({} instance) vs τ = t/ln(1/α); \
             Algorithm 1 dashed",
            instance_label(p.instance, &files(p))
        ))
        .panel(curves)
        .panel(convergence))
}

/// Algorithm 1 and one log-layout run, every sample kept.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    schedule_cost("instance", p.instance).and(flow_cost(
        "samples",
        p.instance,
        1.0,
        n(*p.samples),
        ctx.ode.method,
    ))
}

pub static KIND: SweptKind<Params, Checks> = SweptKind {
    kind: Kind {
        name: "diagonal.fig2-loss",
        paper: "004",
        summary: "Fig. 2(a): loss vs rescaled time per initialization scale α on the toy \
                  attention task, converging to Algorithm 1's step curve as α → 0 (log layout, \
                  any α); a sweep over α, one α per run.",
        solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
        validate,
        cost,
        quantities: &[
            "lambda",
            "loss0",
            "sup_plateau_error",
            "sup_plateau_error_rel",
            "transitions_outside_interiors",
        ],
        run,
    },
    validate_sweep,
    reduce,
};

//! `nondegeneracy`: Assumption 4.3 (paper App. C.1; spec 004 §4 row A4.3) on the instances of
//! Algorithm 1 — (i) |u0_i| ≠ |v0_i| with a margin, (ii) a unique winner of eq. (11) at every
//! stage (finite gaps above the tie tolerance), (iii) every coordinate that leaves the support
//! does so with g_j ≠ 0 — with the separation α of each stage (spec §3.5) and a log-layout run
//! at that α whose transitions must come in the predicted order. R2-degenerate is the control
//! that violates (iii) and must be flagged (spec §3.3, §6 #21).

use crate::scenario::param::{AboveOne, Open01};
use crate::scenario::param::{AtLeast, Positive};
use serde::{Deserialize, Serialize};

use super::algorithm1_common::{
    label, termination_text, validate_instances, Algorithm1Params, Scheduled, STAGE_B_SOLVER,
};
use std::path::PathBuf;

use super::common::{alpha_run, flow_cost, schedule_cost, InstanceName, UserFiles};
use crate::flow::{linspace, Method, OdeConfig};
use crate::instance::diagonal::{instance_arrays, DiagonalInit};
use crate::instance::run_instance;
use crate::models::diagonal::{Activation, Flag, Termination};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Instances on which A4.3 must hold (spec §7: mini and R2).
    pub instances: Vec<InstanceName>,
    /// An instance that violates A4.3(iii) and must be flagged (spec: r2-degenerate); none if
    /// absent.
    #[serde(default)]
    pub degenerate_control: Option<InstanceName>,
    /// θ_0 is redrawn coordinate-wise until ||u0_i| − |v0_i|| ≥ this (spec §4 A4.3(i)).
    pub init_redraw_margin: Positive,
    /// The order check runs at α = min(α_sep, this), α_sep = the smallest separation α of the
    /// instance's stages.
    pub max_order_alpha: Open01,
    /// If set, the order check runs at this α instead (e.g. 1e−2, far above α_sep).
    #[serde(default)]
    pub order_alpha: Option<Open01>,
    /// The log-layout run covers τ ∈ [0, horizon_factor·T_last] (spec §5.1: 1.2).
    pub horizon_factor: AboveOne,
    /// Output samples of that run.
    pub samples: AtLeast<2>,
    #[serde(default)]
    pub algorithm1: Algorithm1Params,
    /// The user's data (Σ, β* or the attention arrays, README "Your own data") instead of the
    /// built-in instance; `instances` must then list one (the file replaces it). The control
    /// stays the built-in `degenerate_control` (fixed, not written to `instance.npz`).
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's initial direction θ_0 = (u0, v0) instead of the seed's (A4.3(i) is then
    /// checked on it; one instance).
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// A4.3(i): min_i ||u0_i| − |v0_i|| (spec §4: ≥ 1e−3).
    pub min_init_margin: Positive,
    /// A4.3(ii): every finite gap_k / max(1, Δ*_k) must exceed this (spec §3.2 tol_tie = 1e−6).
    pub tol_tie: Positive,
    /// A4.3(iii): every dropped j has |G_j(θ^{k+1})| > this × max|G(0)| (spec §3.2
    /// tol_g = 1e−9·max|G(0)|).
    pub dropped_g_rel: Positive,
}

/// The user's files of this run (none: the built-in instances and the seed's θ_0).
fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &p.init_file)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    validate_instances(&p.instances, "params.instances", sc)?;
    files(p).refuse_instance_list("instances", &p.instances, sc)?;
    files(p).validate(p.instances[0], sc)?;
    Ok(())
}

/// Per-activation measurements of one instance.
struct Gaps {
    label: String,
    /// gap_k (∞ if no other Δ is finite) and the tie tolerance tol_tie·max(1, Δ*).
    gaps: Vec<f64>,
    tie_tol: Vec<f64>,
    log10_alpha_sep: Vec<f64>,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut opts = p.algorithm1.options(&STAGE_B_SOLVER);
    // a tie is measured and flagged, not a reason to stop
    opts.allow_ties = true;
    let mut rep = Report {
        series: Table::new(&[
            "instance",
            "k",
            "T_k",
            "i_k",
            "delta_star",
            "gap_k",
            "relative_gap",
            "escape_rate",
            "ln_alpha_sep",
            "log10_alpha_sep",
            "dropped",
            "dropped_abs_g",
            "tau_hat_first",
        ]),
        ..Default::default()
    };
    let mut all_gaps = Vec::new();
    let mut datasets = Vec::new();
    for &name in &p.instances {
        let sched = Scheduled::with_files(name, &files(p), &opts, ctx)?;
        let init = files(p).init(sched.instance.loss().p(), *p.init_redraw_margin, ctx)?;
        datasets.push((sched.label(), instance_arrays(&sched.data, Some(&init))));
        all_gaps.push(instance_checks(&mut rep, &sched, &init, p, c, ctx)?);
    }
    if let Some(name) = p.degenerate_control {
        let sched = Scheduled::with_options(name, &opts, ctx)?;
        let flagged: Vec<(usize, f64)> = sched
            .schedule
            .stages
            .iter()
            .flat_map(|st| &st.flags)
            .filter_map(|f| match f {
                Flag::DegenerateDrop { index, signed_g } => Some((*index, *signed_g)),
                _ => None,
            })
            .collect();
        rep.holds(
            &format!("a4-iii-violation-flagged.{}", label(name)),
            &format!("{}: A4.3(iii) violation is flagged", label(name)),
            !flagged.is_empty(),
        )
        .note(format!(
            "control: drops with G_j = 0: {} (spec §3.3 degenerate drops)",
            flagged
                .iter()
                .map(|(i, g)| format!("{} (s·G = {g:e})", sched.coordinate(*i)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    rep.figure = Some(figure(&all_gaps));
    rep.instance = Some(run_instance(datasets));
    Ok(rep)
}

/// A4.3 (i)–(iii), the separation α and the order check for one instance; rows of the table.
fn instance_checks(
    rep: &mut Report,
    sched: &Scheduled,
    init: &DiagonalInit,
    p: &Params,
    c: &Checks,
    ctx: &RunContext,
) -> Result<Gaps, RunError> {
    let (s, name) = (&sched.schedule, sched.label());
    let loss = sched.instance.loss();
    rep.holds(
        &format!("algorithm-converges.{name}"),
        &format!("{name}: Algorithm 1 converges"),
        s.termination == Termination::Converged,
    )
    .note(termination_text(&s.termination));

    let margin = stats::min(
        init.u0
            .iter()
            .zip(&init.v0)
            .map(|(u, v)| (u.abs() - v.abs()).abs()),
    );
    rep.at_least(
        &format!("a4-u0-v0.{name}"),
        &format!("{name}: A4.3(i) min_i ||u0_i| − |v0_i||"),
        margin,
        *c.min_init_margin,
    )
    .note("θ_0 shared by every α (common::initial_direction)");

    let activations: Vec<_> = s
        .stages
        .iter()
        .filter_map(|st| st.entered_by.as_ref())
        .collect();
    let relative = |a: &&Activation| a.gap / a.delta.max(1.0);
    let min_rel_gap = stats::min(activations.iter().map(relative));
    rep.at_least(
        &format!("a4-ii-gap-delta.{name}"),
        &format!("{name}: A4.3(ii) min_k gap_k / max(1, Δ*_k)"),
        min_rel_gap,
        *c.tol_tie,
    )
    .note("the argmin of eq. (11) is unique at every stage (∞: never two finite Δ)");

    let drops: Vec<(usize, usize, f64)> = s
        .stages
        .iter()
        .flat_map(|st| st.dropped.iter().map(move |d| (st.k, d.index, d.signed_g)))
        .collect();
    let iii_name = format!("{name}: A4.3(iii) min over drops of |G_j(θ^k)|");
    if drops.is_empty() {
        // nothing to measure: a vacuous clause is reported as skipped, never as a pass
        rep.skip(
            &format!("a4-iii-over-drops-theta.{name}"),
            iii_name,
            "no coordinate leaves the support on this schedule: A4.3(iii) has nothing to test",
        );
    } else {
        // NaN-propagating: a NaN G_j fails the check
        let min_drop_g = stats::min(drops.iter().map(|d| d.2.abs()));
        let drop_names: Vec<String> = drops
            .iter()
            .map(|(k, i, g)| format!("{} at stage {k} (s·G = {g:.6})", sched.coordinate(*i)))
            .collect();
        rep.at_least(
            &format!("a4-iii-over-drops-theta.{name}"),
            &iii_name,
            min_drop_g,
            *c.dropped_g_rel * s.scale,
        )
        .note(drop_names.join(", "));
    }

    // the order check at (or below) the separation α of the least separated stage
    let ln_alpha_sep = stats::min(activations.iter().map(|a| a.separation_ln_alpha));
    let ln_alpha = p
        .order_alpha
        .map_or(ln_alpha_sep.min(p.max_order_alpha.ln()), |a| a.ln());
    let t_last = s.stages.last().map_or(1.0, |st| st.t_start.max(1.0));
    let taus = linspace(0.0, *p.horizon_factor * t_last, *p.samples);
    let run = alpha_run(
        &loss,
        &(init.u0.clone(), init.v0.clone()),
        ln_alpha,
        s,
        &taus,
        &ctx.ode,
    )?;
    rep.stats(
        format!("{name}: log layout at ln α = {ln_alpha:.2}"),
        &run.traj.stats,
    );
    // first crossing of each transition event, in any order
    let first: Vec<f64> = (0..activations.len())
        .map(|k| {
            stats::min(
                run.traj
                    .events
                    .iter()
                    .filter(|e| e.index == k)
                    .map(|e| e.t / run.lambda),
            )
        })
        .collect();
    let ordered = first.iter().all(|t| t.is_finite()) && first.windows(2).all(|w| w[0] < w[1]);
    rep.holds(
        &format!("measured-transitions-come-predicted-order.{name}"),
        &format!("{name}: measured transitions come in the predicted order"),
        ordered,
    )
    .note(format!(
        "log layout at α = 10^{:.2} ({}); first τ̂ of each transition event: {}",
        ln_alpha / std::f64::consts::LN_10,
        if p.order_alpha.is_some() {
            "params.order_alpha"
        } else {
            "min(α_sep, max_order_alpha)"
        },
        first
            .iter()
            .map(|t| format!("{t:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    rep.derive(&format!("{name}.ln_alpha_order_check"), ln_alpha);
    rep.derive(&format!("{name}.min_relative_gap"), min_rel_gap);

    let mut out = Gaps {
        label: name.clone(),
        gaps: Vec::new(),
        tie_tol: Vec::new(),
        log10_alpha_sep: Vec::new(),
    };
    for (k, a) in activations.iter().enumerate() {
        let result = &s.stages[k + 1];
        let dropped: Vec<String> = result
            .dropped
            .iter()
            .map(|d| sched.coordinate(d.index))
            .collect();
        let dropped_g = stats::min(result.dropped.iter().map(|d| d.signed_g.abs()));
        let log10_sep = a.separation_ln_alpha / std::f64::consts::LN_10;
        rep.series.push(vec![
            Cell::Text(name.clone()),
            k.into(),
            s.stages[k].t_start.into(),
            Cell::Text(a.name.clone()),
            a.delta.into(),
            a.gap.into(),
            relative(a).into(),
            a.escape_rate.into(),
            a.separation_ln_alpha.into(),
            log10_sep.into(),
            Cell::Text(dropped.join(" ")),
            dropped_g.into(),
            first[k].into(),
        ]);
        out.gaps.push(a.gap);
        out.tie_tol.push(*c.tol_tie * a.delta.max(1.0));
        out.log10_alpha_sep.push(log10_sep);
    }
    Ok(out)
}

fn figure(all: &[Gaps]) -> Figure {
    let mut gaps = LinePanel::new(
        "gap_k = Δ₂ − Δ* against the tie tolerance (∞ gaps not drawn)",
        "stage k (activation i_k ends it)",
        "Δ-gap (rescaled time)",
    )
    .log_y();
    let mut sep = LinePanel::new(
        "separation α_{sep} = exp(−5/(gap_k |g_{i_k}|))",
        "stage k (activation i_k ends it)",
        "log₁₀ α_{sep}",
    )
    .legend(LegendPosition::LowerRight);
    for (n, g) in all.iter().enumerate() {
        let x: Vec<f64> = (0..g.gaps.len()).map(|k| k as f64).collect();
        // an infinite gap (a single finite Δ: no competitor) has no point on a log axis
        let finite = g
            .gaps
            .iter()
            .map(|x| if x.is_finite() { *x } else { f64::NAN })
            .collect();
        gaps = gaps
            .series(
                Series::new(
                    format!("{}: gap_k", g.label),
                    x.clone(),
                    finite,
                    LineStyle::SolidMarkers,
                )
                .color(n),
            )
            .series(
                Series::theory(
                    format!("{}: tol_tie·max(1, Δ*)", g.label),
                    x.clone(),
                    g.tie_tol.clone(),
                )
                .color(n),
            );
        sep = sep.series(
            Series::new(
                g.label.clone(),
                x,
                g.log10_alpha_sep.clone(),
                LineStyle::SolidMarkers,
            )
            .color(n),
        );
    }
    Figure::new(2)
        .title("Assumption 4.3: unique winners of eq. (11) and the α that separates the stages")
        .panel(gaps)
        .panel(sep.hline(RefLine::new(-32.0, "α = 1e−32 (paper's smallest)")))
}

/// Algorithm 1 on every instance (and the control) and one log-layout run per instance.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let names = p.instances.iter().chain(p.degenerate_control.iter());
    names.fold(Cost::new(), |cost, &name| {
        cost.and(schedule_cost("instances", name)).and(flow_cost(
            "samples",
            name,
            1.0,
            n(*p.samples),
            ctx.ode.method,
        ))
    })
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.nondegeneracy",
    paper: "004",
    summary: "Assumption 4.3 on mini and R2 (spec 004 §4): init margin, unique argmin of \
              eq. (11) (gaps), drops with g ≠ 0, separation α per stage and the transition \
              order at that α; R2-degenerate is flagged.",
    // the log-layout run of the order check (spec §8.3, §8.5)
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
    validate,
    cost,
    quantities: &["*.ln_alpha_order_check", "*.min_relative_gap"],
    run,
};

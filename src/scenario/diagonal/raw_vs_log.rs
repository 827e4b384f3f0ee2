//! `raw-vs-log`: the numerics warning of spec 004 §8.2. The raw layout y = [u; v] and the log
//! layout ζ = ln w integrate the same flow; they agree at α = 1e−4, but in f64 the raw layout
//! cannot resolve w = u + v once it falls below eps·|u|: rounding changes the conserved
//! c = u² − v² by δc/c ≈ 1e−16·max u²/(α² c̄), and a coordinate that drops and re-enters with the
//! opposite sign (R2's coordinate 2) re-enters far too early. The log layout keeps the
//! Algorithm-1 re-entry time: t̂_k = T_kΛ + a_k with an α-independent offset a_k (T4.1(ii)); the
//! raw discrepancy is reported as a demonstration, not checked.
//!
//! A sweep over log10 α: each run integrates both layouts at one α (the agreement check at the
//! reference α; its log-layout offsets reported); the reduction checks that the normalized
//! offsets |g|·(t̂_k − T_kΛ) of the small α agree (their spread), collects the raw discrepancy per
//! α and draws one panel per α.

use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::param::{Negative, NonNegative};
use serde::{Deserialize, Serialize};

use std::path::PathBuf;

use super::common::{alpha_run, flow_cost, schedule_cost, InstanceName, UserFiles};
use crate::flow::{integrate, linspace, Descent, Method, OdeConfig};
use crate::models::diagonal::network::conserved;
use crate::models::diagonal::{transition_times, DiagonalNet, Layout, TransitionEvents};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::reduce::{SweepRun, SweepRuns, SweptKind};
use crate::scenario::registry::Kind;
use crate::scenario::sweep::SweepSpec;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::sweeps_common::{
    alpha_label, ln_alphas, log10_alpha_sweep, require_two_small_alphas, spread, Setup,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// R2 by default: its coordinate 2 drops at T_3 and re-enters with the opposite sign.
    pub instance: InstanceName,
    /// log10 α of this run (the sweep's grid: spec §7: 1e−4, 1e−8, 1e−16, 1e−32).
    pub log10_alpha: Negative,
    /// Horizon t_end = horizon_factor · T_K Λ + horizon_extra (spec §7: 1.2, 200).
    pub horizon_factor: Positive,
    pub horizon_extra: NonNegative,
    /// Raw layout: rtol as the log layout's, atol = raw_atol_factor · α · min_i √c̄_i
    /// (spec §8.3: 1e−6; |u_i| ≥ α√c̄_i always).
    pub raw_atol_factor: Positive,
    /// Output samples per run.
    pub samples: AtLeast<2>,
    /// The coordinate shown in the figure (R2: 2, the one that re-enters).
    pub shown_coordinate: usize,
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
    /// At this α (log10) raw and log trajectories agree: max |β_raw − β_log| ≤ `agreement`
    /// (spec §7: 1e−4, 1e−6). A sweep's grid must contain it.
    pub agreement_log10_alpha: f64,
    pub agreement: Positive,
    /// Over the α ≤ 10^this (spec §7: 1e−8), the signed normalized offsets
    /// |g_(i_(k−1))|·(t̂_k − T_kΛ) of the log layout's transitions (R2: with the re-entry τ̂_4)
    /// are α-independent: their spread (max − min) is ≤ `offset_spread_max` for every k
    /// (spec §4 T4.1(ii): 0.05). Replaces the spec's single-α "≤ 10".
    pub offset_log10_alpha_max: f64,
    pub offset_spread_max: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let data = files(p).validate(p.instance, sc)?;
    let dim = data.as_ref().map_or(p.instance.p(), |d| d.p());
    if p.shown_coordinate >= dim {
        return Err(sc.invalid(
            "params.shown_coordinate",
            format!("the instance has p = {dim} coordinates β_0 … β_{}", dim - 1),
        ));
    }
    Ok(())
}

fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &p.init_file)
}

/// The grid must contain the reference α of the agreement check and at least two α whose offsets
/// are compared.
fn validate_sweep(
    _p: &Params,
    c: &Checks,
    spec: &SweepSpec,
    sc: &Scenario,
) -> Result<(), InputError> {
    let grid = log10_alpha_sweep(sc, spec, 1, &[])?;
    if !grid.contains(&c.agreement_log10_alpha) {
        return Err(sc.invalid(
            "sweep.grid.log10_alpha",
            format!(
                "must contain checks.agreement_log10_alpha = {}",
                c.agreement_log10_alpha
            ),
        ));
    }
    require_two_small_alphas(sc, &grid, c.offset_log10_alpha_max)?;
    Ok(())
}

/// The panel of one α: β_i(τ) in both layouts and Algorithm 1's β_th,i(τ) (dashed).
fn alpha_panel(
    la: f64,
    coordinate: usize,
    kk: usize,
    t_last: f64,
    tau: Vec<f64>,
    curves: [Vec<f64>; 3],
    legend: bool,
) -> LinePanel {
    let [theory, log, raw] = curves;
    LinePanel::new(
        format!("α = {}", alpha_label(la)),
        "τ = t/Λ",
        format!("β_{coordinate}(τ)"),
    )
    .legend(if legend {
        LegendPosition::UpperRight
    } else {
        LegendPosition::None
    })
    .vline(RefLine::new(t_last, format!("T_{kk}")))
    .series(Series::theory("Algorithm 1", tau.clone(), theory).color(6))
    .series(Series::numerics("log layout", tau.clone(), log).color(0))
    .series(Series::new("raw (u, v) layout", tau, raw, LineStyle::Solid).color(1))
}

fn figure_title(p: &Params) -> String {
    format!(
        "{}: β_{} in the raw (u, v) vs the log layout in double precision: for α ≲ 1e−8 the raw layout \
         re-enters early or not at all",
        files(p).label(p.instance),
        p.shown_coordinate
    )
}

/// "τ̂_K raw/log − 1 = …, max |β_raw − β_log| = …, c-drift …" of one α.
fn discrepancy_text(la: f64, kk: usize, last_gap: f64, diff: f64, drift: f64) -> String {
    format!(
        "α = {}: τ̂_{kk} raw/log − 1 = {}, max |β_raw − β_log| = {diff:.2e}, c-drift {drift:.1e}",
        alpha_label(la),
        if last_gap.is_nan() {
            "no raw transition".to_string()
        } else {
            format!("{:+.1}%", 100.0 * last_gap)
        }
    )
}

/// One α: both layouts over the horizon, the agreement check at the reference α, the offsets
/// of the log layout at small α, and the raw layout's discrepancy (reported).
fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let setup = Setup::with_files(p.instance, &files(p), ctx)?;
    let (schedule, loss) = (&setup.schedule, setup.instance.loss());
    let dim = loss.p();
    if p.shown_coordinate >= dim {
        return Err(RunError::Other(format!(
            "shown_coordinate {} but the instance has p = {dim}",
            p.shown_coordinate
        )));
    }
    let kk = setup.transitions();
    let t_th = schedule.stage_times();
    let net = DiagonalNet::new(loss);
    let mut headers = vec!["tau".to_string()];
    for layout in ["log", "raw", "alg1"] {
        headers.extend((0..dim).map(|i| format!("beta_{layout}_{i}")));
    }
    let mut rep = Report {
        series: Table {
            headers,
            rows: Vec::new(),
        },
        ..Default::default()
    };
    let mut timing = Table::new(&["k", "T_k", "tau_hat_log", "tau_hat_raw", "escape_rate"]);
    let mut offsets = Vec::new();
    let la = ln_alphas(&[*p.log10_alpha])[0];
    let lambda = -la;
    let alpha = la.exp();
    let tau_end = *p.horizon_factor * setup.last_time() + *p.horizon_extra / lambda;
    let taus = linspace(0.0, tau_end, *p.samples);
    let log = alpha_run(loss, &setup.init, la, schedule, &taus, &ctx.ode)?;
    // raw layout from α θ_0 with the spec's per-scale absolute tolerance
    let raw0: Vec<f64> = setup
        .init
        .0
        .iter()
        .chain(&setup.init.1)
        .map(|x| alpha * x)
        .collect();
    let c_bar_min = stats::min(
        setup
            .init
            .0
            .iter()
            .zip(&setup.init.1)
            .map(|(u, v)| (u - v).abs() * (u + v).abs()),
    );
    let raw_cfg = OdeConfig {
        atol: *p.raw_atol_factor * alpha * c_bar_min.sqrt(),
        ..ctx.ode
    };
    let times: Vec<f64> = taus.iter().map(|t| t * lambda).collect();
    let events = TransitionEvents::for_schedule(&loss, Layout::Raw, schedule, 0.5);
    let raw = events.with_events(false, |e| {
        integrate(&Descent(&net), &raw0, &times, &raw_cfg, Some(e))
    })?;
    rep.stats(format!("α={} log", alpha_label(la)), &log.traj.stats);
    rep.stats(format!("α={} raw", alpha_label(la)), &raw.stats);
    let raw_t = transition_times(&raw.events, kk);
    // conservation drift of the raw run, relative: max_t |c_i(t) − c_i(0)|/|c_i(0)|
    let mut c0 = vec![0.0; dim];
    conserved(raw.state(0), &mut c0);
    let mut ct = vec![0.0; dim];
    let mut drift = 0.0_f64;
    let (mut beta_log_i, mut beta_raw_i, mut theory) = (Vec::new(), Vec::new(), Vec::new());
    let mut diff = 0.0_f64;
    for (s, &tau) in taus.iter().enumerate().take(raw.len().min(log.traj.len())) {
        conserved(raw.state(s), &mut ct);
        drift = stats::larger(
            drift,
            stats::max(ct.iter().zip(&c0).map(|(a, b)| ((a - b) / b).abs())),
        );
        let bl = log.beta(s);
        let z = raw.state(s);
        let br: Vec<f64> = (0..dim).map(|i| z[i] * z[dim + i]).collect();
        let bt = schedule.beta_at(tau);
        diff = stats::max([
            diff,
            stats::max(bl.iter().zip(&br).map(|(a, b)| (a - b).abs())),
        ]);
        beta_log_i.push(bl[p.shown_coordinate]);
        beta_raw_i.push(br[p.shown_coordinate]);
        theory.push(bt[p.shown_coordinate]);
        let mut row = vec![tau.into()];
        row.extend(bl.iter().chain(&br).chain(bt.iter()).map(|&x| x.into()));
        rep.series.push(row);
    }
    if *p.log10_alpha == c.agreement_log10_alpha {
        rep.at_most(
            &format!("beta-raw-beta-log-alpha-1e.{}", c.agreement_log10_alpha),
            &format!("max |β_raw − β_log| at α = 1e{}", c.agreement_log10_alpha),
            diff,
            *c.agreement,
        )
        .note("over all samples and coordinates of the horizon 1.2·T_KΛ + 200");
    }
    let mut last_gap = f64::NAN;
    for k in 1..=kk {
        let (tl, tr) = (
            log.transitions[k - 1].unwrap_or(f64::NAN),
            raw_t[k - 1].unwrap_or(f64::NAN),
        );
        timing.push(vec![
            k.into(),
            t_th[k].into(),
            (tl / lambda).into(),
            (tr / lambda).into(),
            setup.escape_rate(k).into(),
        ]);
        offsets.push(setup.escape_rate(k) * (tl - t_th[k] * lambda).abs());
        last_gap = tr / tl - 1.0;
    }
    // reported: one α cannot test an O(1) law; the reduction compares the α
    rep.derive("lambda", lambda);
    rep.derive("log_offset_max", stats::max(offsets.iter()));
    rep.derive("raw_c_drift", drift);
    rep.derive("raw_reentry_rel_error", last_gap);
    rep.derive("max_beta_difference", diff);
    rep.derive(
        "raw_discrepancy",
        discrepancy_text(la, kk, last_gap, diff, drift),
    );
    rep.tables.push(("transition_times".into(), timing));
    let tau_shown: Vec<f64> = taus[..beta_log_i.len()].to_vec();
    let title = format!(
        "{}: β_{}, raw (u, v) vs log layout",
        files(p).label(p.instance),
        p.shown_coordinate
    );
    rep.figure = Some(Figure::new(1).title(title).panel(alpha_panel(
        la,
        p.shown_coordinate,
        kk,
        t_th[kk],
        tau_shown,
        [theory, beta_log_i, beta_raw_i],
        true,
    )));
    rep.instance = Some(setup.instance_arrays());
    Ok(rep)
}

fn other(e: String) -> RunError {
    RunError::Other(e)
}

/// Across α: the spread of the log-layout offsets over the small α, the raw discrepancy per α,
/// the combined tables and the figure (one panel per α, large α first).
fn reduce(p: &Params, c: &Checks, runs: &SweepRuns) -> Result<Report, RunError> {
    let mut sorted: Vec<&SweepRun> = runs.runs.iter().collect();
    sorted.sort_by(|a, b| {
        b.grid_value("log10_alpha")
            .total_cmp(&a.grid_value("log10_alpha"))
    });
    let mut rep = Report {
        series: runs.stacked("series").map_err(other)?,
        ..Default::default()
    };
    rep.tables.push((
        "transition_times".into(),
        runs.stacked("transition_times").map_err(other)?,
    ));
    let s = p.shown_coordinate;
    let mut panels = Vec::new();
    let mut discrepancy = Vec::new();
    // signed normalized offsets |g|·Λ(τ̂_k − T_k) of the small α, per transition k
    let mut offsets: Vec<Vec<f64>> = Vec::new();
    for (j, run) in sorted.iter().enumerate() {
        let log10_alpha = run.grid_value("log10_alpha");
        let la = ln_alphas(&[log10_alpha])[0];
        let series = run.table("series").map_err(other)?;
        let timing = run.table("transition_times").map_err(other)?;
        let t_k = timing.column("T_k").map_err(other)?;
        let kk = t_k.len();
        let col = |name: String| series.column(&name).map_err(other);
        panels.push(alpha_panel(
            la,
            s,
            kk,
            t_k.last().copied().unwrap_or(f64::NAN),
            col("tau".into())?,
            [
                col(format!("beta_alg1_{s}"))?,
                col(format!("beta_log_{s}"))?,
                col(format!("beta_raw_{s}"))?,
            ],
            j == 0,
        ));
        let (drift, gap, diff) = (
            run.quantity("raw_c_drift"),
            run.quantity("raw_reentry_rel_error"),
            run.quantity("max_beta_difference"),
        );
        discrepancy.push(discrepancy_text(la, kk, gap, diff, drift));
        let label = alpha_label(la);
        rep.derive(&format!("alpha_{label}.raw_c_drift"), drift);
        rep.derive(&format!("alpha_{label}.raw_reentry_rel_error"), gap);
        rep.derive(&format!("alpha_{label}.max_beta_difference"), diff);
        if log10_alpha <= c.offset_log10_alpha_max {
            let lambda = run.quantity("lambda");
            let (tau_hat, rate) = (
                timing.column("tau_hat_log").map_err(other)?,
                timing.column("escape_rate").map_err(other)?,
            );
            offsets.resize(kk.max(offsets.len()), Vec::new());
            for k in 0..kk {
                offsets[k].push(rate[k] * lambda * (tau_hat[k] - t_k[k]));
            }
        }
    }
    // NaN (a transition not found) propagates and fails
    let spreads: Vec<f64> = offsets.iter().map(|o| spread(o)).collect();
    rep.at_most(
        "log-layout-offset-spread",
        &format!(
            "log layout: max_k spread over α ≤ 1e{} of |g_(i_(k−1))|·(t̂_k − T_kΛ)",
            c.offset_log10_alpha_max
        ),
        stats::max(spreads.iter()),
        *c.offset_spread_max,
    )
    .note(format!(
        "T4.1(ii): t̂_k = T_kΛ + a_k with a_k independent of α, including the opposite-sign \
         re-entry of the dropped coordinate; per k: {}",
        offsets
            .iter()
            .zip(&spreads)
            .map(|(o, s)| format!(
                "[{}] (spread {s:.2e})",
                o.iter()
                    .map(|x| format!("{x:.4}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ))
    .paper_claim("spec §7: normalized offset ≤ 10 for α ≤ 1e−8 (one α at a time)");
    rep.derive("raw_discrepancy", discrepancy.join("; "));
    let mut figure = Figure::new(panels.len().min(4)).title(figure_title(p));
    for panel in panels {
        figure = figure.panel(panel);
    }
    rep.figure = Some(figure);
    Ok(rep)
}

/// Algorithm 1 and a raw and a log-layout run, every sample kept.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    schedule_cost("instance", p.instance).and(flow_cost(
        "samples",
        p.instance,
        2.0,
        n(*p.samples),
        ctx.ode.method,
    ))
}

pub static KIND: SweptKind<Params, Checks> = SweptKind {
    kind: Kind {
        name: "diagonal.raw-vs-log",
        paper: "004",
        summary: "Spec §8.2: raw (u, v) and log layouts agree at α = 1e−4; in f64 the raw layout \
                  re-enters R2's dropped coordinate far too early at small α (reported), while \
                  the log layout keeps the Algorithm-1 re-entry time for α ≤ 1e−8 (its offset \
                  |g|·(t̂_k − T_kΛ) is α-independent, checked); a sweep over log10 α, one α per \
                  run.",
        solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
        validate,
        cost,
        quantities: &[
            "lambda",
            "log_offset_max",
            "max_beta_difference",
            "raw_c_drift",
            "raw_reentry_rel_error",
        ],
        run,
    },
    validate_sweep,
    reduce,
};

//! `transition-width`: Lemma C.10 (the nonlinear phase of a transition lasts O(1) unrescaled
//! time) and the race of Lemmas C.7–C.9 (spec 004 §4 rows L.C.7–C.9 and L.C.10, §7). For each
//! transition k → k + 1 of the log-layout flow:
//! - t̲_{k+1}: the first upward crossing of ũ_{i_k} = max(|u_{i_k}|, |v_{i_k}|) = ρ;
//! - W_k(α): from t̲_{k+1} until ‖β − β^{k+1}‖_∞ ≤ r. W_k is the same for every α (unrescaled
//!   time) and equals the time STAGE_B's reduced balanced flow needs from β^k with
//!   |β_{i_k}| = ρ² to the same radius;
//! - at t̲_{k+1}: t̲/Λ → T_{k+1} (O(1/Λ)), the other inactive weights are ≤ 10·α^c with
//!   c = min_{i ∉ S_k ∪ {i_k}} min(b_i, 2 − b_i)(T_{k+1}), and sgn β_{i_k} = σ_k.
//!
//! A sweep over `log10_alpha`: each run is one α (its races, widths and transition curves, with
//! the race checks at that α); the reduction states the laws across α (W_k the same for every α
//! and equal to STAGE_B's, t̲/Λ → T_(k+1), every transition measured at ≥ min_widths α) and
//! draws the figure of all α.

use crate::scenario::param::{AboveOne, Negative, Open01};
use crate::scenario::param::{AtLeast, Positive};
use serde::{Deserialize, Serialize};

use std::path::PathBuf;

use super::common::{flow_cost, schedule_cost, InstanceName, UserFiles};
use crate::flow::{integrate, linspace, Event, Events, Method, OdeConfig};
use crate::models::diagonal::{
    g_vec, BalancedFlow, BetaLoss, Layout, LogCoordinates, LogFlow, Schedule, TransitionEvent,
    TransitionEvents,
};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::reduce::{SweepRun, SweepRuns, SweptKind};
use crate::scenario::registry::Kind;
use crate::scenario::sweep::SweepSpec;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::sweeps_common::{
    alpha_label, decreases, ln_alphas, log10_alpha_sweep, require_two_small_alphas, spread, Setup,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub instance: InstanceName,
    /// α of this run as log10 α (a sweep gives `sweep.grid.log10_alpha`, strictly decreasing).
    pub log10_alpha: Negative,
    /// ρ of the race event ũ_{i_k} = ρ (Lemma C.9; spec §4: 1e−2).
    pub rho: Open01,
    /// Convergence radius: ‖β − β^{k+1}‖_∞ ≤ radius ends the transition (L.C.10; spec: 1e−4).
    pub radius: Open01,
    /// Integration horizon τ_end = horizon_factor · T_K.
    pub horizon_factor: AboveOne,
    /// Samples of each transition curve in the figure.
    pub window_samples: AtLeast<2>,
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
    /// Relative spread (max − min)/min of W_k over the α where it is measured (spec §4: 5%).
    pub width_spread_max: Positive,
    /// |W_k(α)/W_k^{STAGE_B} − 1| (spec §4: 5%).
    pub stage_b_rel_tol: Positive,
    /// Each transition needs W_k at this many α (the convergence event can only fire where the
    /// plateau error α^{e_k} is below the radius).
    pub min_widths: AtLeast<1>,
    /// Over the α ≤ 10^`offset_log10_alpha_max`, the signed normalized race offsets
    /// |g_{i_k}(θ^k)|·(t̲_{k+1} − T_{k+1}Λ) are α-independent (t̲ = T_{k+1}Λ + a with a = O(1)
    /// independent of α): their spread (max − min) per transition is ≤ `offset_spread_max`
    /// (spec §4 T4.1(ii): 0.05, as in stage-times). Replaces the single-α "≤ 10".
    pub offset_log10_alpha_max: f64,
    pub offset_spread_max: Positive,
    /// Other inactive weights at t̲_{k+1}: max(|u_i|, |v_i|) ≤ this · α^c (spec §4: 10).
    pub inactive_factor: Positive,
}

fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &p.init_file)
}

/// The reduction needs ≥ 2 values of α, strictly decreasing, of one instance at one θ_0, two of
/// them at most 10^`offset_log10_alpha_max` (the race offsets' spread).
fn validate_sweep(
    _: &Params,
    c: &Checks,
    spec: &SweepSpec,
    sc: &Scenario,
) -> Result<(), InputError> {
    let grid = log10_alpha_sweep(sc, spec, 2, &[])?;
    require_two_small_alphas(sc, &grid, c.offset_log10_alpha_max)?;
    Ok(())
}

/// ‖β − target‖_∞ with β = s ⊙ e^η on the active set of a reduced balanced flow (0 elsewhere).
fn reduced_distance(active: &[usize], signs: &[f64], eta: &[f64], target: &[f64]) -> f64 {
    let off = stats::max_abs(
        (0..target.len())
            .filter(|i| !active.contains(i))
            .map(|i| target[i]),
    );
    let on = active
        .iter()
        .zip(signs.iter().zip(eta))
        .map(|(&i, (s, e))| (s * e.exp() - target[i]).abs());
    stats::max_with(off, on)
}

/// STAGE_B from the race point (spec §4 L.C.10): the reduced balanced flow on S_k ∪ {i_k} from
/// β^k with |β_{i_k}| = ρ², its time to ‖β − β^{k+1}‖_∞ ≤ radius, and ‖β − β^{k+1}‖_∞ on
/// `[0, span_factor · that time]`.
fn stage_b_width(
    loss: &dyn BetaLoss,
    schedule: &Schedule,
    k: usize,
    p: &Params,
    cfg: &OdeConfig,
) -> Result<(f64, Vec<f64>, Vec<f64>), RunError> {
    let (stage, next) = (&schedule.stages[k], &schedule.stages[k + 1]);
    let act = next
        .entered_by
        .as_ref()
        .expect("stage k+1 has an activation");
    let mut active = stage.support.clone();
    let mut signs: Vec<f64> = active.iter().map(|&i| stage.beta[i].signum()).collect();
    let mut eta: Vec<f64> = active.iter().map(|&i| stage.beta[i].abs().ln()).collect();
    active.push(act.index);
    signs.push(act.sign);
    eta.push(2.0 * p.rho.ln());
    let flow = BalancedFlow::new(loss, active.clone(), signs.clone());
    let target = &next.beta;
    let func = |_t: f64, z: &[f64], out: &mut [f64]| {
        out[0] = reduced_distance(&active, &signs, z, target) - *p.radius;
    };
    let events = Events {
        count: 1,
        func: &func,
        terminal: true,
    };
    // escape from ρ plus relaxation to the radius, both with a wide margin
    let relax = next
        .diagnostics
        .active_rates
        .first()
        .copied()
        .unwrap_or(1.0);
    let t_max =
        10.0 * (1.0 / *p.rho).ln() / act.escape_rate + 50.0 * (1.0 / *p.radius).ln() / relax;
    let stop = integrate(&flow, &eta, &[0.0, t_max], cfg, Some(&events))?;
    let width = stop.events.first().map_or(f64::NAN, |e| e.t);
    if width.is_nan() {
        return Ok((width, Vec::new(), Vec::new()));
    }
    let times = linspace(0.0, SPAN_FACTOR * width, *p.window_samples);
    let curve = integrate(&flow, &eta, &times, cfg, None)?;
    let dist = (0..curve.len())
        .map(|s| reduced_distance(&active, &signs, curve.state(s), target))
        .collect();
    Ok((width, times, dist))
}

/// The figure's transition windows extend to this multiple of the STAGE_B width.
const SPAN_FACTOR: f64 = 1.5;

/// What one α run shows about transition k → k + 1 (NaN where not measured).
#[derive(Clone)]
struct Race {
    /// t̲_{k+1} and the state there.
    t_low: f64,
    state: Vec<f64>,
    /// W_k.
    width: f64,
    /// sgn β_{i_k}(t̲) = σ_k.
    sign_ok: bool,
    /// max over the other inactive i of max(|u_i|, |v_i|)/α^c.
    inactive_ratio: f64,
}

/// The races and widths of one α from the events of the race run (component k: ũ_(i_k) = ρ)
/// and of the distance run (component k: ‖β − β^(k+1)‖_∞ = radius).
fn races(
    setup: &Setup,
    coords: &LogCoordinates,
    race_events: &[Event],
    distance_events: &[Event],
    ln_alpha: f64,
) -> Vec<Option<Race>> {
    let (schedule, loss) = (&setup.schedule, setup.instance.loss());
    let kk = setup.transitions();
    // upward crossings of ũ_{i_k} = ρ: dũ/dt = ṽ·G_i > 0
    let upward = |k: usize, z: &[f64]| {
        let i = schedule.stages[k + 1].entered_by.as_ref().unwrap().index;
        let mut beta = vec![0.0; coords.p()];
        coords.beta(z, &mut beta);
        coords.normalized_pair(i, z[i]).1 * g_vec(&loss, &beta)[i] > 0.0
    };
    let race_event = |k: usize, after: f64| {
        race_events
            .iter()
            .find(|e| e.index == k && e.t > after && upward(k, &e.state))
    };
    let mut out = Vec::with_capacity(kk);
    let mut after = 0.0;
    for k in 0..kk {
        let Some(ev) = race_event(k, after) else {
            out.resize(kk, None);
            break;
        };
        let (stage, next) = (&schedule.stages[k], &schedule.stages[k + 1]);
        let act = next.entered_by.as_ref().unwrap();
        let next_race = if k + 1 < kk {
            race_event(k + 1, ev.t).map_or(f64::INFINITY, |e| e.t)
        } else {
            f64::INFINITY
        };
        let width = distance_events
            .iter()
            .find(|e| e.index == k && e.t > ev.t)
            .filter(|e| e.t < next_race)
            .map_or(f64::NAN, |e| e.t - ev.t);
        let beta_i = coords.beta_i(act.index, ev.state[act.index]);
        // c = min over the other inactive coordinates of min(b_i, 2 − b_i) at T_{k+1}
        let b_end = stage.log_scale(next.t_start);
        let others: Vec<usize> = (0..coords.p())
            .filter(|i| *i != act.index && !stage.support.contains(i))
            .collect();
        let c = stats::min(others.iter().map(|&i| b_end[i].min(2.0 - b_end[i])));
        let inactive_ratio = stats::max(
            others
                .iter()
                .map(|&i| (coords.ln_weight(i, ev.state[i]) - c * ln_alpha).exp()),
        );
        out.push(Some(Race {
            t_low: ev.t,
            state: ev.state.clone(),
            width,
            sign_ok: beta_i.signum() == act.sign,
            inactive_ratio: if others.is_empty() {
                0.0
            } else {
                inactive_ratio
            },
        }));
        after = ev.t;
    }
    out
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let setup = Setup::with_files(p.instance, &files(p), ctx)?;
    let (schedule, loss) = (&setup.schedule, setup.instance.loss());
    let kk = setup.transitions();
    let la = ln_alphas(&[*p.log10_alpha])[0];
    let tau_end = *p.horizon_factor * setup.last_time();
    let mut predicted = Vec::with_capacity(kk);
    for k in 0..kk {
        predicted.push(stage_b_width(loss, schedule, k, p, &ctx.ode)?);
    }
    // race and convergence events go into separate runs: the engine reports one root per
    // step, and the flow leaves β^k (event of transition k − 1) in the step where ũ_(i_k)
    // reaches ρ (event of transition k)
    let race_events: Vec<TransitionEvent> = schedule.stages[1..]
        .iter()
        .map(|next| TransitionEvent::WeightReaches {
            index: next.entered_by.as_ref().unwrap().index,
            ln_level: p.rho.ln(),
        })
        .collect();
    let distance_events: Vec<TransitionEvent> = schedule.stages[1..]
        .iter()
        .map(|next| TransitionEvent::DistanceTo {
            target: next.beta.clone(),
            radius: *p.radius,
        })
        .collect();
    let mut rep = Report {
        series: Table::new(&[
            "Lambda",
            "k",
            "T_next",
            "tau_low",
            "race_offset",
            "width",
            "width_stage_b",
            "inactive_ratio",
            "sign_ok",
        ]),
        ..Default::default()
    };
    let mut curves_table = Table::new(&["t_since_race", "k", "distance"]);
    let lambda = -la;
    let (coords, zeta0) = LogCoordinates::from_init(&setup.init.0, &setup.init.1, la)
        .map_err(|e| RunError::Other(e.to_string()))?;
    let flow = LogFlow::new(loss, coords.clone());
    let times = linspace(0.0, tau_end * lambda, 32);
    let run_with = |events: &[TransitionEvent]| {
        let ev = TransitionEvents::new(&loss, Layout::Log(&coords), events.to_vec());
        ev.with_events(false, |e| {
            integrate(&flow, &zeta0, &times, &ctx.ode, Some(e))
        })
    };
    let (race_run, distance_run) = (run_with(&race_events)?, run_with(&distance_events)?);
    rep.stats(
        format!("α={} race events", alpha_label(la)),
        &race_run.stats,
    );
    rep.stats(
        format!("α={} distance events", alpha_label(la)),
        &distance_run.stats,
    );
    let race = races(&setup, &coords, &race_run.events, &distance_run.events, la);
    let mut curves: Vec<Vec<(usize, Vec<f64>)>> = vec![Vec::new(); kk];
    for (k, r) in race.iter().enumerate() {
        let Some(r) = r else { continue };
        let span = SPAN_FACTOR * predicted[k].0;
        if !span.is_finite() {
            continue;
        }
        let local = linspace(r.t_low, r.t_low + span, *p.window_samples);
        let window = integrate(&flow, &r.state, &local, &ctx.ode, None)?;
        let target = &schedule.stages[k + 1].beta;
        let dist: Vec<f64> = (0..window.len())
            .map(|s| {
                let mut beta = vec![0.0; coords.p()];
                coords.beta(window.state(s), &mut beta);
                stats::max(beta.iter().zip(target).map(|(a, b)| (a - b).abs()))
            })
            .collect();
        for (t, d) in window.t.iter().zip(&dist) {
            curves_table.push(vec![(t - r.t_low).into(), k.into(), (*d).into()]);
        }
        curves[k].push((0, dist));
    }
    // the transitions and STAGE_B (the same in every run of a sweep; the reduction takes them
    // from its first run)
    let mut transitions =
        Table::new(&["k", "T_next", "escape_rate", "activation", "width_stage_b"]);
    let mut stage_b = Table::new(&["t", "k", "distance"]);
    for (k, (width, times, dist)) in predicted.iter().enumerate() {
        transitions.push(vec![
            (k + 1).into(),
            schedule.stages[k + 1].t_start.into(),
            setup.escape_rate(k + 1).into(),
            setup.activation_label(k + 1).into(),
            (*width).into(),
        ]);
        for (t, d) in times.iter().zip(dist) {
            stage_b.push(vec![(*t).into(), k.into(), (*d).into()]);
        }
    }

    // the race at this α (L.C.7–C.9); the laws across α are in the reduction
    let (mut missing_races, mut sign_bad) = (0, 0);
    let (mut offsets, mut inactive) = (Vec::new(), Vec::new());
    for (k, prediction) in predicted.iter().enumerate() {
        let Some(r) = race[k].as_ref() else {
            missing_races += 1;
            continue;
        };
        let t_next = schedule.stages[k + 1].t_start;
        let rate = setup.escape_rate(k + 1);
        offsets.push(rate * (r.t_low - t_next * lambda).abs());
        sign_bad += usize::from(!r.sign_ok);
        inactive.push(r.inactive_ratio);
        rep.series.push(vec![
            lambda.into(),
            (k + 1).into(),
            t_next.into(),
            (r.t_low / lambda).into(),
            (rate * (r.t_low - t_next * lambda)).into(),
            r.width.into(),
            prediction.0.into(),
            r.inactive_ratio.into(),
            Cell::from(if r.sign_ok { "yes" } else { "no" }),
        ]);
    }
    // with no race at all the maxima below are empty: 0, and the first check fails
    let max_or_zero = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            stats::max(v.iter())
        }
    };
    rep.at_most(
        "races-not-found-this-alpha-never",
        "races not found at this α (ũ_(i_k) never reached ρ)",
        missing_races as f64,
        0.0,
    )
    .note(format!(
        "{} at α = {}: {kk} transitions, ρ = {:e}",
        setup.label(),
        alpha_label(la),
        p.rho
    ));
    rep.at_most(
        "alpha-this-alpha",
        "max_k max_(i ∉ S_k ∪ {i_k}) max(|u_i|,|v_i|)/α^c at this α",
        max_or_zero(&inactive),
        *c.inactive_factor,
    )
    .note("L.C.8: the other inactive coordinates stay ≤ 10·α^c, c = min(b_i, 2 − b_i) at T_(k+1)");
    rep.at_most(
        "races-sgn-beta-sigma-this-alpha",
        "races with sgn β_(i_k) ≠ σ_k at t̲ at this α",
        sign_bad as f64,
        0.0,
    )
    .note("L.C.9: sgn v_(i_k) = s^(k+1)_(i_k) in the normalized layout");
    // reported: one α cannot test an O(1) law; the reduction compares the α
    rep.derive("race_offset_max", max_or_zero(&offsets));
    rep.derive("Lambda", lambda);
    rep.derive("transitions", kk);
    rep.derive("missing_races", missing_races);
    rep.derive(
        "widths_measured",
        race.iter()
            .flatten()
            .filter(|r| r.width.is_finite())
            .count(),
    );
    rep.figure = Some(figure(&FigureData {
        label: setup.label(),
        activations: (1..=kk).map(|k| setup.activation_label(k)).collect(),
        rho: *p.rho,
        radius: *p.radius,
        lambdas: vec![lambda],
        widths: vec![race
            .iter()
            .map(|r| r.as_ref().map_or(f64::NAN, |r| r.width))
            .collect()],
        stage_b: predicted,
        curves,
    }));
    rep.tables.push(("curves".into(), curves_table));
    rep.tables.push(("transitions".into(), transitions));
    rep.tables.push(("stage_b".into(), stage_b));
    rep.instance = Some(setup.instance_arrays());
    Ok(rep)
}

/// The laws across α (spec §4 L.C.7–C.10) from the runs' `series`, `transitions`, `stage_b`
/// and `curves` tables; the sweep's tables and figure.
fn reduce(p: &Params, c: &Checks, runs: &SweepRuns) -> Result<Report, RunError> {
    reduce_runs(p, c, runs).map_err(RunError::Other)
}

fn reduce_runs(p: &Params, c: &Checks, all_runs: &SweepRuns) -> Result<Report, String> {
    // Λ increasing, so that "decreasing in Λ" is along the list
    let mut runs: Vec<&SweepRun> = all_runs.runs.iter().collect();
    runs.sort_by(|a, b| {
        b.grid_value("log10_alpha")
            .total_cmp(&a.grid_value("log10_alpha"))
    });
    let first = runs.first().ok_or("the sweep has no runs")?;
    let transitions = first.table("transitions")?;
    let t_next = transitions.column("T_next")?;
    let w_b = transitions.column("width_stage_b")?;
    let kk = t_next.len();
    let stage_b_table = first.table("stage_b")?;
    let (sb_t, sb_k, sb_d) = (
        stage_b_table.column("t")?,
        stage_b_table.column("k")?,
        stage_b_table.column("distance")?,
    );
    let per_k = |ks: &[f64], values: &[f64], k: usize| -> Vec<f64> {
        ks.iter()
            .zip(values)
            .filter(|(kv, _)| **kv == k as f64)
            .map(|(_, v)| *v)
            .collect()
    };
    let predicted: Vec<Prediction> = (0..kk)
        .map(|k| (w_b[k], per_k(&sb_k, &sb_t, k), per_k(&sb_k, &sb_d, k)))
        .collect();
    // per run (Λ order): the race rows by transition (1-based k in series.csv)
    struct Row {
        tau_low: f64,
        offset: f64,
        width: f64,
        inactive: f64,
        sign_ok: bool,
    }
    let mut lambdas = Vec::with_capacity(runs.len());
    // whether a run's α enters the race offsets' spread
    let mut in_spread = Vec::with_capacity(runs.len());
    let mut rows: Vec<Vec<Option<Row>>> = Vec::with_capacity(runs.len());
    let mut curves: Vec<Vec<(usize, Vec<f64>)>> = vec![Vec::new(); kk];
    let mut missing_races = 0.0;
    for (j, run) in runs.iter().enumerate() {
        lambdas.push(run.quantity("Lambda"));
        in_spread.push(run.grid_value("log10_alpha") <= c.offset_log10_alpha_max);
        missing_races += run.quantity("missing_races");
        let s = run.table("series")?;
        let (ks, tau_low, offset, width, inactive, sign) = (
            s.column("k")?,
            s.column("tau_low")?,
            s.column("race_offset")?,
            s.column("width")?,
            s.column("inactive_ratio")?,
            s.text_column("sign_ok")?,
        );
        let mut by_k: Vec<Option<Row>> = (0..kk).map(|_| None).collect();
        for (i, &k) in ks.iter().enumerate() {
            let slot = by_k
                .get_mut((k as usize).wrapping_sub(1))
                .ok_or_else(|| format!("{}: transition k = {k} out of range", s.path.display()))?;
            *slot = Some(Row {
                tau_low: tau_low[i],
                offset: offset[i],
                width: width[i],
                inactive: inactive[i],
                sign_ok: sign[i] == "yes",
            });
        }
        rows.push(by_k);
        let ct = run.table("curves")?;
        let (ck, cd) = (ct.column("k")?, ct.column("distance")?);
        for (k, list) in curves.iter_mut().enumerate() {
            let d = per_k(&ck, &cd, k);
            if !d.is_empty() {
                list.push((j, d));
            }
        }
    }

    let mut rep = Report::default();
    let mut uncovered = Vec::new();
    let (mut spreads, mut vs_stage_b) = (Vec::new(), Vec::new());
    let (mut offset_spreads, mut not_decreasing, mut sign_bad) = (Vec::new(), 0, 0);
    let mut inactive = Vec::new();
    for k in 0..kk {
        let widths: Vec<f64> = rows
            .iter()
            .filter_map(|r| r[k].as_ref().map(|r| r.width))
            .filter(|w| w.is_finite())
            .collect();
        if widths.len() < *c.min_widths {
            uncovered.push(format!("{}", k + 1));
        }
        if !widths.is_empty() {
            let (min, max) = stats::range(&widths);
            spreads.push((max - min) / min);
            vs_stage_b.push(stats::max(widths.iter().map(|w| (w / w_b[k] - 1.0).abs())));
        }
        let offsets: Vec<f64> = rows
            .iter()
            .zip(&in_spread)
            .filter_map(|(r, &used)| r[k].as_ref().filter(|_| used).map(|r| r.offset))
            .collect();
        // one α or none (a race missing: its own check fails) leaves nothing to compare
        if offsets.len() >= 2 {
            offset_spreads.push(spread(&offsets));
        }
        let mut dev = Vec::new();
        for r in rows.iter().filter_map(|r| r[k].as_ref()) {
            dev.push((r.tau_low - t_next[k]).abs());
            sign_bad += usize::from(!r.sign_ok);
            inactive.push(r.inactive);
        }
        not_decreasing += dev.windows(2).filter(|w| !decreases(w[0], w[1])).count();
    }
    rep.at_most(
        "races-not-found-never-reached-rho",
        "races not found (ũ_(i_k) never reached ρ)",
        missing_races,
        0.0,
    )
    .note(format!(
        "{kk} transitions × {} α, ρ = {:e}",
        runs.len(),
        p.rho
    ));
    rep.at_most(
        "transitions-fewer-than-widths-measured",
        "transitions with fewer than min_widths measured W_k",
        uncovered.len() as f64,
        0.0,
    )
    .note(if uncovered.is_empty() {
        "W_k is measured where the plateau error drops below the radius before the next race"
            .to_string()
    } else {
        format!("uncovered: k → k+1 for k+1 = {}", uncovered.join(", "))
    });
    rep.at_most(
        "relative-spread-over-alpha",
        "max_k relative spread (max − min)/min of W_k over α",
        stats::max(spreads.iter()),
        *c.width_spread_max,
    )
    .note(format!(
        "L.C.10: W_k = O(1) unrescaled time, the same for every α; per transition: {}",
        fmt_percent(&spreads)
    ));
    rep.at_most(
        "alpha-stage-rho",
        "max |W_k(α)/W_k(STAGE_B from ρ) − 1|",
        stats::max(vs_stage_b.iter()),
        *c.stage_b_rel_tol,
    )
    .note(format!(
        "reduced balanced flow from β^k with |β_(i_k)| = ρ²; W_B = {}",
        w_b.iter()
            .map(|w| format!("{w:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    rep.at_most(
        "offset-spread",
        &format!(
            "max_k spread over α ≤ 1e{} of |g_(i_k)|·(t̲_(k+1) − T_(k+1)Λ)",
            c.offset_log10_alpha_max
        ),
        stats::max_with(0.0, offset_spreads.iter()),
        *c.offset_spread_max,
    )
    .note(format!(
        "L.C.7/C.9, T4.1(ii): t̲_(k+1) = T_(k+1)Λ + a with a independent of α; per \
         transition: {}",
        offset_spreads
            .iter()
            .map(|x| format!("{x:.2e}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .paper_claim("spec §4 L.C.7–C.9: t̲/Λ − T_(k+1) = O(1/Λ) (normalized offset ≤ 10)");
    rep.at_most(
        "steps-where-lambda-does-not-decrease",
        "steps where |t̲_(k+1)/Λ − T_(k+1)| does not decrease as Λ grows",
        not_decreasing as f64,
        0.0,
    )
    .note("L.C.9: t̲_(k+1)/Λ → T_(k+1)");
    rep.at_most(
        "over-races-alpha",
        "max over races of max_(i ∉ S_k ∪ {i_k}) max(|u_i|,|v_i|)/α^c",
        stats::max(inactive.iter()),
        *c.inactive_factor,
    )
    .note("L.C.8: the other inactive coordinates stay ≤ 10·α^c, c = min(b_i, 2 − b_i) at T_(k+1)");
    rep.at_most(
        "races-sgn-beta-sigma",
        "races with sgn β_(i_k) ≠ σ_k at t̲",
        sign_bad as f64,
        0.0,
    )
    .note("L.C.9: sgn v_(i_k) = s^(k+1)_(i_k) in the normalized layout");
    rep.series = all_runs.stacked("series")?;
    rep.tables
        .push(("curves".into(), all_runs.stacked("curves")?));
    rep.tables
        .push(("stage_b".into(), table_of(&stage_b_table)));
    rep.tables
        .push(("transitions".into(), table_of(&transitions)));
    rep.figure = Some(figure(&FigureData {
        label: files(p).label(p.instance),
        activations: transitions.text_column("activation")?,
        rho: *p.rho,
        radius: *p.radius,
        lambdas,
        widths: rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|r| r.as_ref().map_or(f64::NAN, |r| r.width))
                    .collect()
            })
            .collect(),
        stage_b: predicted,
        curves,
    }));
    Ok(rep)
}

/// A table read back from a run, as written (numbers where they parse).
fn table_of(t: &crate::scenario::reduce::CsvTable) -> Table {
    Table {
        headers: t.headers.clone(),
        rows: t
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| match c.parse::<f64>() {
                        Ok(x) => Cell::Num(x),
                        Err(_) => Cell::Text(c.clone()),
                    })
                    .collect()
            })
            .collect(),
    }
}

fn fmt_percent(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{:.2}%", 100.0 * v))
        .collect::<Vec<_>>()
        .join(", ")
}

/// STAGE_B's width W_B of a transition, and its curve (times, ‖β − β^(k+1)‖_∞).
type Prediction = (f64, Vec<f64>, Vec<f64>);

/// What the figure shows: per α (Λ increasing) and transition.
struct FigureData<'a> {
    label: &'a str,
    /// "VO[2]+" per transition k → k + 1.
    activations: Vec<String>,
    rho: f64,
    radius: f64,
    lambdas: Vec<f64>,
    /// widths[j][k]: W_k at α_j (NaN where not measured).
    widths: Vec<Vec<f64>>,
    stage_b: Vec<Prediction>,
    /// Per transition: (α index, ‖β − β^(k+1)‖_∞ at STAGE_B's times after t̲).
    curves: Vec<Vec<(usize, Vec<f64>)>>,
}

fn figure(d: &FigureData<'_>) -> Figure {
    let kk = d.stage_b.len();
    let lambdas = &d.lambdas;
    let mut widths = LinePanel::new(
        format!("{}: transition width W_k vs Λ", d.label),
        "Λ = ln(1/α)",
        "W_k (unrescaled time)",
    )
    .log_x()
    .legend(LegendPosition::UpperRight);
    let (mut lo, mut hi) = (lambdas[0], lambdas[lambdas.len() - 1]);
    if lo == hi {
        // one α (a single run): STAGE_B's level still spans the panel
        (lo, hi) = (lo / 1.5, hi * 1.5);
    }
    for k in 0..kk {
        let (x, y): (Vec<f64>, Vec<f64>) = (0..lambdas.len())
            .map(|j| (lambdas[j], d.widths[j][k]))
            .filter(|(_, w)| w.is_finite())
            .unzip();
        widths = widths
            .series(
                Series::new(
                    format!("k={} {}", k + 1, d.activations[k]),
                    x,
                    y,
                    LineStyle::SolidMarkers,
                )
                .color(k),
            )
            .series(Series::theory("", vec![lo, hi], vec![d.stage_b[k].0; 2]).color(k));
    }
    let mut figure = Figure::new(3)
        .title(format!(
            "Transition widths (Lemma C.10): ‖β − β^(k+1)‖_∞ from ũ_(i_k) = {} on, per α \
             (solid) and STAGE_B (dashed)",
            d.rho
        ))
        .panel(widths);
    for k in 0..kk {
        let mut panel = LinePanel::new(
            format!("transition {} → {}: {}", k, k + 1, d.activations[k]),
            "t − t̲_(k+1)",
            "‖β − β^(k+1)‖_∞",
        )
        .log_y()
        .hline(RefLine::new(d.radius, "radius").style(LineStyle::Dotted))
        .legend(if k == 0 {
            LegendPosition::UpperRight
        } else {
            LegendPosition::None
        });
        let (_, times, dist) = &d.stage_b[k];
        for (j, dk) in &d.curves[k] {
            panel = panel.series(
                Series::numerics(
                    format!("α = {}", alpha_label(-lambdas[*j])),
                    times.clone(),
                    dk.clone(),
                )
                .color(*j),
            );
        }
        panel = panel.series(Series::theory("STAGE_B", times.clone(), dist.clone()).color(6));
        figure = figure.panel(panel);
    }
    figure
}

/// Algorithm 1, the run with race events and per stage (at most p) a stopped run and a window
/// of `window_samples`.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let windows = 2.0 * p.instance.size().p;
    schedule_cost("instance", p.instance)
        .and(flow_cost("instance", p.instance, 1.0, 32.0, ctx.ode.method))
        .and(flow_cost(
            "window_samples",
            p.instance,
            windows,
            n(*p.window_samples),
            ctx.ode.method,
        ))
}

pub static KIND: SweptKind<Params, Checks> = SweptKind {
    kind: Kind {
        name: "diagonal.transition-width",
        paper: "004",
        summary: "Lemmas C.7–C.10: each transition, from ũ_(i_k) = 1e−2 to ‖β − β^(k+1)‖ ≤ \
                  1e−4, lasts the same O(1) unrescaled time for every α (one α per run) and \
                  matches STAGE_B's reduced flow from ρ; at the race time t̲/Λ → T_(k+1), the \
                  other inactive weights are ≤ 10·α^c and sgn β_(i_k) = σ_k.",
        solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
        validate: |p, _, sc| files(p).validate(p.instance, sc).map(drop),
        cost,
        quantities: &[
            "Lambda",
            "missing_races",
            "race_offset_max",
            "transitions",
            "widths_measured",
        ],
        run,
    },
    validate_sweep,
    reduce,
};

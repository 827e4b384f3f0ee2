//! `conservation-law` (spec 004 §7; Lemma 4.2, eqs. 6–7, invariant I4): along the raw (u, v)
//! gradient flow the products' imbalances c_i = u_i² − v_i² stay constant, the loss does not
//! increase, and the log layout ζ = ln w with the conserved ln c reconstructs the same (u, v)
//! through eq. (7). Raw layout only at α ∈ {1e−1, 1e−2}, where f64 resolves c = α² c̄ (§8.2).

use crate::scenario::param::Open01;
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use serde::{Deserialize, Serialize};

use std::path::PathBuf;

use super::common::{flow_cost, schedule_cost, InstanceName, UserFiles};
use crate::flow::{integrate, integrate_flow, linspace, Method, OdeConfig, Trajectory};
use crate::instance::diagonal::instance_arrays;
use crate::instance::run_instance;
use crate::models::diagonal::{DiagonalNet, LogCoordinates, LogFlow, Schedule};
use crate::plot::{Figure, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::basics_common::{alpha_label, positive_or_nan, stage_times_schedule};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Instances to run (spec §7: mini and R2).
    pub instances: NonEmpty<InstanceName>,
    /// Initialization scales α (θ(0) = α θ_0); raw f64 is trustworthy for α ≳ 1e−6 only.
    pub alphas: NonEmpty<Open01>,
    /// Horizon t_end = horizon · T_K Λ with T_K the last finite Algorithm-1 stage time (§4 eq. 6/7
    /// row: 1.2).
    pub horizon: Positive,
    /// Output samples per run.
    pub samples: AtLeast<10>,
    /// A4.3(i): ||u0_i| − |v0_i|| ≥ this for the shared direction θ_0 (spec §4).
    pub min_margin: Positive,
    /// The user's data (Σ, β* or the attention arrays, README "Your own data") instead of the
    /// built-in instance; `instances` must then list one (the file replaces it).
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's initial direction θ_0 = (u0, v0) instead of the seed's (one instance).
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Lemma 4.2 (spec §4 row L4.2, §7): max_{i,t} |c_i(t) − c_i(0)| / max_t (u_i² + v_i²).
    pub drift_tol: Positive,
    /// Invariant I4, dL/dt = −Σ(u² + v²)g² ≤ 0 (spec §2.3, §7): the largest increase of L
    /// between consecutive samples, relative to L(0).
    pub loss_slack: Positive,
    /// Eqs. (6)–(7) (spec §4 row eq. 6/7): max_{i,t} of the raw-vs-log difference of (u_i, v_i)
    /// relative to max(|u_i|, |v_i|) at that time.
    pub reconstruction_tol: Positive,
}

/// The user's files of this run (none: the built-in instances and the seed's θ_0).
fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &p.init_file)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.instances.contains(&InstanceName::Paper) && p.data_file.is_none() {
        return Err(sc.invalid(
            "params.instances",
            "the paper configuration is too heavy for a raw-layout audit; use mini, small, r1, r2",
        ));
    }
    files(p).refuse_instance_list("instances", &p.instances, sc)?;
    files(p).validate(p.instances[0], sc)?;
    if let Some(a) = p.alphas.iter().find(|a| ***a < 1e-6) {
        return Err(sc.invalid(
            "params.alphas",
            format!("α = {a:e} < 1e-6: raw f64 cannot resolve c = α²c̄ (spec §8.2)"),
        ));
    }
    Ok(())
}

/// What one (instance, α) run measured.
struct RunAudit {
    lambda: f64,
    raw: Trajectory,
    /// max_i |c_i(t_k) − c_i(0)| / max_t(u_i² + v_i²) per sample.
    drift: Vec<f64>,
    /// Largest (L_{k+1} − L_k)/L_0.
    loss_increase: f64,
    /// Largest raw-vs-log (u, v) difference relative to max(|u_i|, |v_i|).
    reconstruction: f64,
}

fn audit(
    net: &DiagonalNet<&dyn crate::models::diagonal::BetaLoss>,
    init: &(Vec<f64>, Vec<f64>),
    alpha: f64,
    t_end: f64,
    p: &Params,
    cfg: &OdeConfig,
) -> Result<RunAudit, RunError> {
    let dim = init.0.len();
    let z0: Vec<f64> = init.0.iter().chain(&init.1).map(|x| alpha * x).collect();
    let times = linspace(0.0, t_end, *p.samples);
    let raw = integrate_flow(net, &z0, &times, cfg)?;
    // per-coordinate scale max_t (u_i² + v_i²)
    let scale: Vec<f64> = (0..dim)
        .map(|i| {
            stats::max(
                (0..raw.len()).map(|k| raw.state(k)[i].powi(2) + raw.state(k)[dim + i].powi(2)),
            )
        })
        .collect();
    let drift = (0..raw.len())
        .map(|k| {
            stats::max(
                raw.invariants
                    .iter()
                    .zip(&scale)
                    .map(|((_, c), s)| (c[k] - c[0]).abs() / s),
            )
        })
        .collect();
    let loss0 = raw.loss[0];
    let loss_increase = stats::max(raw.loss.windows(2).map(|w| (w[1] - w[0]) / loss0));
    // the same flow in the log layout, mapped back through eq. (7)
    let ln_alpha = alpha.ln();
    let (coords, zeta0) = LogCoordinates::from_init(&init.0, &init.1, ln_alpha)
        .map_err(|e| RunError::Other(format!("log layout of θ(0): {e}")))?;
    let log_flow = LogFlow::new(*net.beta_loss(), coords.clone());
    let log = integrate(&log_flow, &zeta0, &times, cfg, None)?;
    let mut reconstruction = 0.0_f64;
    for k in 0..raw.len() {
        let rebuilt = coords.raw_state(log.state(k));
        let z = raw.state(k);
        for i in 0..dim {
            let size = z[i].abs().max(z[dim + i].abs());
            let diff = stats::larger(
                (rebuilt[i] - z[i]).abs(),
                (rebuilt[dim + i] - z[dim + i]).abs(),
            );
            reconstruction = stats::larger(reconstruction, diff / size);
        }
    }
    Ok(RunAudit {
        lambda: -ln_alpha,
        raw,
        drift,
        loss_increase,
        reconstruction,
    })
}

/// The last finite Algorithm-1 stage time T_K (at least 1, so a schedule with no stage still
/// gives a horizon).
fn last_stage_time(schedule: &Schedule) -> f64 {
    schedule
        .stage_times()
        .last()
        .copied()
        .unwrap_or(1.0)
        .max(1.0)
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rep = Report {
        series: Table::new(&["instance", "alpha", "tau", "t", "loss", "max_rel_c_drift"]),
        ..Default::default()
    };
    let mut figure = Figure::new(p.instances.len().min(3));
    let mut loss_panels = Vec::new();
    let (mut worst_drift, mut worst_increase, mut worst_rebuild) = (0.0_f64, f64::MIN, 0.0_f64);
    let files = files(p);
    let mut datasets = Vec::new();
    for name in p.instances.iter() {
        let (_, data, instance) = files.instance(*name, ctx)?;
        let loss = instance.loss();
        let schedule = stage_times_schedule(loss)?;
        let t_last = last_stage_time(&schedule);
        let init = files.init(loss.p(), *p.min_margin, ctx)?;
        let label = files.label_or(format!("{name:?}").to_lowercase());
        datasets.push((label.clone(), instance_arrays(&data, Some(&init))));
        let init = (init.u0, init.v0);
        let net = DiagonalNet::new(loss);
        let mut drift_panel = LinePanel::new(
            format!("{label}: relative drift of c = u² − v²"),
            "τ = t / ln(1/α)",
            "max_i |c_i(t) − c_i(0)| / max_t(u_i² + v_i²)",
        )
        .log_y()
        .hline(RefLine::new(*c.drift_tol, "check bound"));
        let mut loss_panel = LinePanel::new(
            format!("{label}: loss along the raw flow"),
            "τ = t / ln(1/α)",
            "L(θ(t))",
        )
        .log_y();
        for tk in schedule.stage_times().iter().skip(1) {
            drift_panel = drift_panel.vline(RefLine::new(*tk, "").style(LineStyle::Dotted));
            loss_panel = loss_panel.vline(RefLine::new(*tk, "").style(LineStyle::Dotted));
        }
        let mut headers = vec!["alpha".to_string(), "t".to_string(), "loss".to_string()];
        headers.extend((0..loss.p()).map(|i| format!("c_minus_c0[{}]", loss.coordinate_name(i))));
        let mut drift_table = Table {
            headers,
            rows: Vec::new(),
        };
        for (a, alpha) in p.alphas.iter().map(|a| **a).enumerate() {
            let t_end = *p.horizon * t_last * (1.0 / alpha).ln();
            let run = audit(&net, &init, alpha, t_end, p, &ctx.ode)?;
            rep.stats(format!("{label} raw α={alpha:e}"), &run.raw.stats);
            worst_drift = stats::larger(worst_drift, stats::max(run.drift.iter()));
            worst_increase = stats::larger(worst_increase, run.loss_increase);
            worst_rebuild = stats::larger(worst_rebuild, run.reconstruction);
            let taus: Vec<f64> = run.raw.t.iter().map(|t| t / run.lambda).collect();
            for k in 0..run.raw.len() {
                rep.series.push(vec![
                    label.as_str().into(),
                    alpha.into(),
                    taus[k].into(),
                    run.raw.t[k].into(),
                    run.raw.loss[k].into(),
                    run.drift[k].into(),
                ]);
                let mut row: Vec<Cell> =
                    vec![alpha.into(), run.raw.t[k].into(), run.raw.loss[k].into()];
                row.extend(
                    run.raw
                        .invariants
                        .iter()
                        .map(|(_, values)| Cell::Num(values[k] - values[0])),
                );
                drift_table.push(row);
            }
            // exact zeros (t = 0) have no logarithm: leave them out of the log plot
            let shown = positive_or_nan(&run.drift);
            drift_panel = drift_panel
                .series(Series::numerics(alpha_label(alpha), taus.clone(), shown).color(a));
            loss_panel = loss_panel
                .series(Series::numerics(alpha_label(alpha), taus, run.raw.loss.clone()).color(a));
        }
        figure = figure.panel(drift_panel);
        loss_panels.push(loss_panel);
        rep.tables.push((format!("c_drift_{label}"), drift_table));
    }
    for panel in loss_panels {
        figure = figure.panel(panel);
    }
    rep.at_most(
        "lemma-relative-drift-i2-i2",
        "Lemma 4.2: max relative drift of u_i² − v_i²",
        worst_drift,
        *c.drift_tol,
    )
    .note("max over instances, α, i, t of |c_i(t) − c_i(0)| / max_t(u_i² + v_i²), raw layout");
    rep.at_most(
        "i4-largest-loss-increase-between-samples",
        "I4: largest loss increase between samples / L(0)",
        worst_increase,
        *c.loss_slack,
    )
    .note("dL/dt = −Σ(u_i² + v_i²) g_i² ≤ 0 (spec §2.3 I4)");
    rep.at_most(
        "eq-raw-vs-log-layout-relative",
        "eq. (6)–(7): raw vs log-layout (u, v), relative",
        worst_rebuild,
        *c.reconstruction_tol,
    )
    .note("max over i, t of |Δu|, |Δv| / max(|u_i|, |v_i|); log layout ζ = ln w, eq. (7)");
    rep.derive("max_rel_c_drift", worst_drift);
    rep.derive("max_rel_loss_increase", worst_increase);
    rep.derive("max_rel_reconstruction_error", worst_rebuild);
    rep.figure = Some(figure.title(
        "Conservation law (Lemma 4.2) along the raw gradient flow (dotted: Algorithm-1 times T_k)",
    ));
    rep.instance = Some(run_instance(datasets));
    Ok(rep)
}

/// Per instance, Algorithm 1 and per α a raw and a log-layout run, every sample kept.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let runs = 2.0 * n(p.alphas.len());
    p.instances.iter().fold(Cost::new(), |cost, &name| {
        cost.and(schedule_cost("instances", name)).and(flow_cost(
            "alphas, samples",
            name,
            runs,
            n(*p.samples),
            ctx.ode.method,
        ))
    })
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.conservation-law",
    paper: "004",
    summary: "Lemma 4.2: c_i = u_i² − v_i² is conserved along the raw (u, v) flow (relative drift \
              ≤ 1e-9 at rtol 1e-12), the loss does not increase, and the log layout rebuilds \
              (u, v) by eq. (7); mini and R2 at α ∈ {0.1, 0.01}.",
    solver: OdeConfig::new(Method::Tsit45, 1e-12, 1e-15),
    validate,
    cost,
    quantities: &[
        "max_rel_c_drift",
        "max_rel_loss_increase",
        "max_rel_reconstruction_error",
    ],
    run,
};

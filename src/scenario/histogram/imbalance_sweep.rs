//! `imbalance-sweep` (Remark 1.2; spec 000 R11, E8): with column 1 imbalanced by δ_1 and the
//! other columns balanced, the late loss rate is 2α with α = min(μ_1ρ̄(δ_1), min_{i≥2} μ_i) —
//! for the eq task α = min(1/ρ(δ_1), 1), not the paper's "α = ρ_1".

use std::path::PathBuf;

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::instance_files::{df_instance, InstanceFiles};
use super::sizes;
use crate::analysis::fit::{log_slope_fit, Window};
use crate::flow::{integrate_flow, linspace, Method, OdeConfig};
use crate::instance::histogram::task_name;
use crate::instance::InstanceError;
use crate::models::histogram::landscape::imbalanced_init;
use crate::models::histogram::theorem2::Imbalance;
use crate::models::histogram::{layout, DfClosedForm, DfFlow};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::PositiveRange;
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::df_common::{analysis_failed, closed_form_error, time_at_loss, TaskName};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub task: TaskName,
    #[serde(default)]
    pub d_thr: usize,
    pub d: usize,
    /// The sweep δ_1 ∈ [delta_min, delta_max], `points` equally spaced values.
    pub delta_min: f64,
    pub delta_max: f64,
    pub points: AtLeast<2>,
    /// ODE output samples per point; the ODE runs until the closed-form loss is 1e-2 × the
    /// bottom of `ode_window`.
    pub samples: AtLeast<50>,
    /// ODE slope fit window on ℓ (spec §7.5).
    pub ode_window: PositiveRange,
    /// Closed-form fit window on ℓ for the late slope (spec §7.5: the closed form below 1e-14).
    pub tail_window: PositiveRange,
    /// The task matrix (`M`); replaces task, d_thr and d. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial states (`Q0`, `v0`), one per point of the sweep, with β_1/μ_1 = that point's
    /// δ_1 and β_i = 0 for i ≥ 2 (refused otherwise); replaces the construction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

/// The order of the runs, for messages about the init file.
const RUN_ORDER: &str = "one per δ_1 of the sweep";

/// A given init has the sweep's imbalances when |β_1/μ_1 − δ_1| and |β_i| (i ≥ 2) are at most
/// this times (‖q_i‖² + v_i²)/μ_i and ‖q_i‖² + v_i² (rounding of the construction: ~1e-16).
const IMBALANCE_REL: f64 = 1e-10;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max_δ |late slope / (−2α(δ_1)) − 1| (R11: 1%).
    pub slope_tol: Positive,
    /// The ODE slope on the ODE window must be ≤ −2α(1 − margin) (R9(b): 1e-2).
    pub ode_slope_margin: Positive,
    /// max |z_ODE − z_closed| (R9(a): 1e-7).
    pub closed_form_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), p.d)
}

/// Refuses given inits whose imbalances are not those of the sweep (R11's α(δ_1) assumes them).
fn require_sweep_imbalances(
    files: &InstanceFiles,
    m: &DMatrix<f64>,
    inits: &[Vec<f64>],
    deltas: &[f64],
) -> Result<(), InputError> {
    let d = m.nrows();
    for (j, (z, &delta)) in inits.iter().zip(deltas).enumerate() {
        for i in 0..d {
            let (q, v) = layout::column(z, d, i);
            let q_sq: f64 = q.iter().map(|x| x * x).sum();
            let (beta, size) = (q_sq - v * v, q_sq + v * v);
            let mu = m.column(i).norm();
            let (wanted, error) = if i == 0 {
                (format!("δ_1 = {delta}"), (beta / mu - delta).abs() * mu)
            } else {
                ("β_i = 0 (balanced)".to_string(), beta.abs())
            };
            if error <= IMBALANCE_REL * size {
                continue;
            }
            return Err(files.init_error(InstanceError::new(
                format!("Q0[{j}, :, {i}]"),
                format!(
                    "column {} has β = ‖q‖² − v² = {beta:.6e}, but the sweep's point {j} needs \
                     {wanted} (relative tolerance {IMBALANCE_REL:e}; spec R11)",
                    i + 1
                ),
            )));
        }
    }
    Ok(())
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let files = read_files(p, sc)?;
    files.require_df_data()?;
    if files.data().is_none() && p.d < 2 {
        return Err(sc.invalid(
            "params.d",
            "need d ≥ 2 (columns 2..d are the balanced ones)",
        ));
    }
    if p.delta_min >= p.delta_max {
        return Err(sc.invalid("params.delta_max", "need delta_min < delta_max"));
    }
    if let Some(inits) = files.run_inits(*p.points, RUN_ORDER)? {
        let m = files.task_matrix(|| p.task.matrix(p.d, p.d_thr));
        let deltas = linspace(p.delta_min, p.delta_max, *p.points);
        require_sweep_imbalances(&files, &m, &inits, &deltas)?;
    }
    Ok(())
}

/// α(δ_1) = min(μ_1ρ̄(δ_1), min_{i≥2} μ_i) for the imbalanced init (spec 000 R11).
fn alpha_theory(m: &DMatrix<f64>, delta: f64) -> f64 {
    let others = stats::min((1..m.ncols()).map(|i| m.column(i).norm()));
    (m.column(0).norm() * Imbalance::new(delta).rhob).min(others)
}

/// One point of the sweep.
struct Point {
    delta: f64,
    /// α(δ_1) = min(μ_1ρ̄(δ_1), min_{i≥2} μ_i).
    alpha_theory: f64,
    /// −½ × the closed-form slope on the tail window.
    alpha_tail: f64,
    ode_slope: f64,
    closed_error: f64,
}

fn sweep_point(
    p: &Params,
    ctx: &RunContext,
    flow: &DfFlow,
    delta: f64,
    z0: &[f64],
) -> Result<(Point, crate::flow::SolverStats), RunError> {
    let m = flow.m();
    let closed = DfClosedForm::new(m, z0);
    let alpha_theory = alpha_theory(m, delta);

    let [tail_low, tail_high] = *p.tail_window;
    let reach = |level: f64| {
        time_at_loss(&closed, level)
            .ok_or_else(|| RunError::Other(format!("δ_1 = {delta}: ℓ never reaches {level:e}")))
    };
    let (t_a, t_b) = (reach(tail_high)?, reach(tail_low)?);
    let tail_t = linspace(t_a, t_b, 200);
    let tail_loss: Vec<f64> = tail_t.iter().map(|&t| closed.loss(t)).collect();
    let tail_slope = log_slope_fit(&tail_t, &tail_loss, Window::Time { from: t_a, to: t_b })
        .map_err(analysis_failed("closed-form tail slope"))?
        .slope;

    let [ode_low, ode_high] = *p.ode_window;
    let t_end = reach(1e-2 * ode_low)?;
    let times = linspace(0.0, t_end, *p.samples);
    let traj = integrate_flow(flow, z0, &times, &ctx.ode)?;
    let ode_slope = log_slope_fit(
        &traj.t,
        &traj.loss,
        Window::Value {
            low: ode_low,
            high: ode_high,
        },
    )
    .map_err(analysis_failed("ODE slope on the ODE window"))?
    .slope;
    Ok((
        Point {
            delta,
            alpha_theory,
            alpha_tail: -0.5 * tail_slope,
            ode_slope,
            closed_error: closed_form_error(&traj, &closed, t_end),
        },
        traj.stats,
    ))
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let m = files.task_matrix(|| p.task.matrix(p.d, p.d_thr));
    let deltas = linspace(p.delta_min, p.delta_max, *p.points);
    // the init file's states (checked by validate), else the same random directions at every
    // δ_1 (common random numbers)
    let inits = match files.run_inits(*p.points, RUN_ORDER)? {
        Some(inits) => inits,
        None => deltas
            .iter()
            .map(|&delta| {
                imbalanced_init(&m, delta, &mut ctx.rng(3))
                    .map_err(|e| RunError::Other(format!("imbalanced init at δ_1 = {delta}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let flow = DfFlow::new(m);
    let mut rep = Report {
        instance: Some(df_instance(flow.m(), inits.clone())),
        ..Default::default()
    };
    let mut points = Vec::with_capacity(*p.points);
    for (delta, z0) in deltas.into_iter().zip(&inits) {
        let (point, stats) = sweep_point(p, ctx, &flow, delta, z0)?;
        rep.stats(format!("δ_1 = {delta}"), &stats);
        points.push(point);
    }
    let rel_err = |pt: &Point| (pt.alpha_tail / pt.alpha_theory - 1.0).abs();
    rep.at_most(
        "delta-late-slope-2alpha-delta",
        "max_δ |late slope / (−2α(δ_1)) − 1|",
        stats::max(points.iter().map(rel_err)),
        *c.slope_tol,
    )
    .note(format!(
        "α(δ_1) = min(μ_1ρ̄(δ_1), min_(i≥2) μ_i); least-squares slope of the closed-form \
         ln ℓ on ℓ ∈ [{:e}, {:e}], {} points δ_1 ∈ [{}, {}]",
        p.tail_window[0], p.tail_window[1], *p.points, p.delta_min, p.delta_max
    ))
    .paper_claim("Remark 1.2: α = ρ_1 (E8: it is 1/ρ_1 = ρ̄_1, capped by the balanced columns)");
    rep.at_least(
        "delta-ode-slope-2alpha-delta",
        "min_δ ODE slope / (−2α(δ_1))",
        -stats::max(
            points
                .iter()
                .map(|pt| pt.ode_slope / (2.0 * pt.alpha_theory)),
        ),
        1.0 - *c.ode_slope_margin,
    )
    .note(format!(
        "ODE fit on ℓ ∈ [{:e}, {:e}] (R9(b), one-sided: faster columns still contribute)",
        p.ode_window[0], p.ode_window[1]
    ));
    rep.at_most(
        "ode-closed-form",
        "max |z_ODE − z_closed form|",
        stats::max(points.iter().map(|pt| pt.closed_error)),
        *c.closed_form_tol,
    )
    .note("over all sweep points (R9(a))");
    let paper_dev = stats::max(
        points
            .iter()
            .map(|pt| (pt.alpha_tail / Imbalance::new(pt.delta).rho - 1.0).abs()),
    );
    rep.derive("paper_claim_max_rel_deviation", paper_dev);

    rep.series = Table::new(&[
        "delta_1",
        "alpha_measured",
        "alpha_theory",
        "rhob",
        "rho_paper",
        "ode_slope",
        "closed_form_error",
    ]);
    for pt in &points {
        let imb = Imbalance::new(pt.delta);
        rep.series.push(vec![
            pt.delta.into(),
            pt.alpha_tail.into(),
            pt.alpha_theory.into(),
            imb.rhob.into(),
            imb.rho.into(),
            pt.ode_slope.into(),
            pt.closed_error.into(),
        ]);
    }
    rep.figure = Some(figure(p, c, flow.m(), &points));
    Ok(rep)
}

fn figure(p: &Params, c: &Checks, m: &DMatrix<f64>, points: &[Point]) -> Figure {
    let deltas: Vec<f64> = points.iter().map(|pt| pt.delta).collect();
    let fine = linspace(p.delta_min, p.delta_max, 400);
    let ode_alpha: Vec<f64> = points.iter().map(|pt| -0.5 * pt.ode_slope).collect();
    let ode_label = format!(
        "ODE fit on ℓ ∈ [{:e}, {:e}]",
        p.ode_window[0], p.ode_window[1]
    );
    let rates = LinePanel::new("late decay rate α vs imbalance δ₁", "δ₁", "α")
        .log_y()
        .legend(LegendPosition::UpperLeft)
        .series(
            Series::new(
                "closed-form tail fit (−½ slope of ln ℓ)",
                deltas.clone(),
                points.iter().map(|pt| pt.alpha_tail).collect(),
                LineStyle::Markers,
            )
            .color(0),
        )
        .series(
            Series::new(
                ode_label.clone(),
                deltas.clone(),
                ode_alpha.clone(),
                LineStyle::Markers,
            )
            .color(4),
        )
        .series(
            Series::theory(
                "theory: min(μ₁/ρ(δ₁), min_(i≥2) μ_i)",
                fine.clone(),
                fine.iter().map(|&d| alpha_theory(m, d)).collect(),
            )
            .color(1),
        )
        .series(
            Series::new(
                "paper (Remark 1.2): ρ(δ₁)",
                fine.clone(),
                fine.iter().map(|&d| Imbalance::new(d).rho).collect(),
                LineStyle::Dotted,
            )
            .color(2),
        );
    let errors = LinePanel::new(
        "relative error of the measured α",
        "δ₁",
        "|α/α_{theory} − 1|",
    )
    .log_y()
    .y_range(1e-17, 1e4)
    .legend(LegendPosition::UpperRight)
    .hline(RefLine::new(*c.slope_tol, "tolerance"))
    .series(
        Series::new(
            "closed-form tail fit",
            deltas.clone(),
            points
                .iter()
                .map(|pt| (pt.alpha_tail / pt.alpha_theory - 1.0).abs())
                .collect(),
            LineStyle::SolidMarkers,
        )
        .color(0),
    )
    .series(
        Series::new(
            format!("{ode_label} (checked one-sided)"),
            deltas,
            points
                .iter()
                .zip(&ode_alpha)
                .map(|(pt, a)| (a / pt.alpha_theory - 1.0).abs())
                .collect(),
            LineStyle::Markers,
        )
        .color(4),
    );
    Figure::new(2)
        .title(format!(
            "Remark 1.2: the rate is set by the largest imbalance, α = 1/ρ(δ₁) ({} task, d = {})",
            task_name(m),
            m.nrows()
        ))
        .panel(rates)
        .panel(errors)
}

/// One df solve per sweep point, one trajectory held at a time.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    Cost::new()
        .ode(
            "points, d",
            n(*p.points),
            sizes::dim(p.d),
            sizes::df_grad(p.d),
            ctx.ode.method,
        )
        .records("samples, d", 1.0, n(*p.samples), sizes::dim(p.d))
        .table("points", n(*p.points), 8.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.imbalance-sweep",
    paper: "000",
    summary: "Remark 1.2 (spec 000 R11, E8): the late loss rate 2α with one imbalanced column; \
              α = min(1/ρ(δ_1), 1) on eq, not the paper's ρ(δ_1).",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &["paper_claim_max_rel_deviation"],
    run,
};

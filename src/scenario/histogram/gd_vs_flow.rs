//! `gd-vs-flow` (spec 000 §1.5, §2.4): the paper's experiments run gradient descent, the theory
//! is about gradient flow. On ℓ_df, GD's log-loss stays within O(η) of the flow's at t = kη,
//! and GD changes the "conserved" β_i by exactly η²(‖∇_{q_i}ℓ‖² − (∂ℓ/∂v_i)²) per step.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::instance_files::{df_instance, InstanceFiles};
use super::sizes;
use crate::flow::{integrate_flow, Method, OdeConfig};
use crate::instance::histogram::task_name;
use crate::models::histogram::{DfClosedForm, DfFlow};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::Positive;
use crate::scenario::param::PositiveRange;
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::df_common::{audit_gd, gaussian_state, GdAudit, TaskName};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub task: TaskName,
    #[serde(default)]
    pub d_thr: usize,
    pub d: usize,
    pub sigma: Positive,
    /// Step sizes, each half the previous one.
    pub etas: Vec<f64>,
    /// Horizon t = kη ≤ t_end.
    pub t_end: Positive,
    /// The task matrix (`M`); replaces task, d_thr and d. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial state (`Q0`, `v0`); replaces sigma and the draw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// err(η/2)/err(η) ∈ [low, high] for err = max_{kη ≤ t_end} |ln ℓ_GD(k) − ln ℓ_GF(kη)|:
    /// first order in η gives ½ (spec: [0.35, 0.65]).
    pub halving_ratio: PositiveRange,
    /// max_{k,i} |β_i(k) − β_i(0) − Σ_{j<k} η²(‖∇_{q_i}ℓ‖² − (∂ℓ/∂v_i)²)|/max(1, |β_i(0)|)
    /// (spec §2.4: 1e-12).
    pub drift_formula_tol: Positive,
    /// max |ln ℓ_ODE − ln ℓ_closed| at the GD times of the smallest η: the reference is right.
    pub reference_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), p.d)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc)?.require_df_single()?;
    if p.d < 2 && p.data_file.is_none() {
        return Err(sc.invalid("params.d", "need d ≥ 2"));
    }
    if p.etas.len() < 2 || p.etas.iter().any(|&e| e <= 0.0) {
        return Err(sc.invalid("params.etas", "need ≥ 2 positive step sizes"));
    }
    if p.etas.windows(2).any(|w| (w[0] / w[1] - 2.0).abs() > 1e-12) {
        return Err(sc.invalid(
            "params.etas",
            "each step size must be half the previous one",
        ));
    }
    if p.etas.iter().any(|&e| (*p.t_end / e).round() < 1.0) {
        return Err(sc.invalid("params.t_end", "need t_end ≥ η for every η"));
    }
    Ok(())
}

/// max_k |ln ℓ_GD(k) − ln ℓ_GF(t_k)| along a GD run.
fn log_loss_gap(gd: &GdAudit, closed: &DfClosedForm) -> f64 {
    stats::max(
        gd.traj
            .t
            .iter()
            .zip(&gd.traj.loss)
            .map(|(&t, &l)| (l.ln() - closed.loss(t).ln()).abs()),
    )
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let m = files.task_matrix(|| p.task.matrix(p.d, p.d_thr));
    let flow = DfFlow::new(m.clone());
    let z0 = files.single_init(|| gaussian_state(&mut ctx.rng(8), m.nrows(), *p.sigma))?;
    let closed = DfClosedForm::new(&m, &z0);
    let mut rep = Report {
        instance: Some(df_instance(&m, vec![z0.clone()])),
        ..Default::default()
    };
    let runs = p
        .etas
        .iter()
        .map(|&eta| {
            let steps = (*p.t_end / eta).round() as usize;
            audit_gd(&flow, &z0, eta, steps)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let gaps: Vec<f64> = runs.iter().map(|g| log_loss_gap(g, &closed)).collect();
    for (eta, gd) in p.etas.iter().zip(&runs) {
        rep.stats(format!("GD η = {eta}"), &gd.traj.stats);
    }

    // the closed form as reference, confirmed by a tight integration at the finest GD times
    let finest = runs.last().expect("≥ 2 step sizes");
    let ode = integrate_flow(&flow, &z0, &finest.traj.t, &ctx.ode)?;
    rep.stats("flow (ODE)", &ode.stats);
    let reference_error = stats::max(
        ode.t
            .iter()
            .zip(&ode.loss)
            .map(|(&t, &l)| (l.ln() - closed.loss(t).ln()).abs()),
    );

    let [low, high] = *c.halving_ratio;
    let ratios: Vec<f64> = gaps.windows(2).map(|w| w[1] / w[0]).collect();
    for (j, r) in ratios.iter().enumerate() {
        rep.within(
            &format!("gap-eta-gap-eta.{}-{}", p.etas[j + 1], p.etas[j]),
            &format!("gap(η = {}) / gap(η = {})", p.etas[j + 1], p.etas[j]),
            *r,
            low,
            high,
        )
        .note(format!(
            "gap = max_(kη ≤ {}) |ln ℓ_GD(k) − ln ℓ_GF(kη)| = {:.4e} → {:.4e}; O(η) gives ½",
            *p.t_end,
            gaps[j],
            gaps[j + 1]
        ));
    }
    rep.at_most(
        "gd-beta-drift-vs-exact-formula",
        "GD β drift vs exact formula (all η)",
        stats::max(runs.iter().flat_map(|g| g.error.iter().copied())),
        *c.drift_formula_tol,
    )
    .note(format!(
        "accumulated per-step η²(‖∇_qℓ‖² − (∂_vℓ)²); the drifts themselves are {:.3e} \
         (relative), i.e. GD does not conserve β",
        stats::max(runs.iter().map(|g| g.total_drift))
    ));
    rep.at_most(
        "reference-ln-ode-ln-closed-form",
        "reference: max |ln ℓ_ODE − ln ℓ_closed form|",
        reference_error,
        *c.reference_tol,
    )
    .note(format!(
        "{} solver, rtol {:e}, at the GD times of η = {}",
        ctx.ode.method.name(),
        ctx.ode.rtol,
        p.etas.last().copied().unwrap_or(f64::NAN)
    ));
    rep.derive("gaps", &gaps);
    rep.derive("alpha", closed.alpha());

    rep.series = Table::new(&[
        "eta",
        "k",
        "t",
        "loss_gd",
        "loss_flow",
        "beta_drift",
        "formula",
    ]);
    for (&eta, gd) in p.etas.iter().zip(&runs) {
        for k in 0..gd.traj.len() {
            let t = gd.traj.t[k];
            rep.series.push(vec![
                eta.into(),
                k.into(),
                t.into(),
                gd.traj.loss[k].into(),
                closed.loss(t).into(),
                gd.measured[k].into(),
                gd.predicted[k].into(),
            ]);
        }
    }
    rep.figure = Some(figure(p, &m, &runs, &closed, &gaps));
    Ok(rep)
}

fn figure(
    p: &Params,
    m: &nalgebra::DMatrix<f64>,
    runs: &[GdAudit],
    closed: &DfClosedForm,
    gaps: &[f64],
) -> Figure {
    let mut losses = LinePanel::new("GD vs gradient flow", "t = kη", "ℓ")
        .log_y()
        .legend(LegendPosition::UpperRight);
    let mut differences = LinePanel::new("ln ℓ_{GD}(k) − ln ℓ_{GF}(kη)", "t = kη", "difference")
        .legend(LegendPosition::LowerLeft);
    for (j, (eta, gd)) in p.etas.iter().zip(runs).enumerate() {
        losses = losses.series(
            Series::numerics(
                format!("GD, η = {eta}"),
                gd.traj.t.clone(),
                gd.traj.loss.clone(),
            )
            .color(j),
        );
        let diff = gd
            .traj
            .t
            .iter()
            .zip(&gd.traj.loss)
            .map(|(&t, &l)| l.ln() - closed.loss(t).ln())
            .collect();
        differences = differences
            .series(Series::numerics(format!("η = {eta}"), gd.traj.t.clone(), diff).color(j));
    }
    let finest = &runs[runs.len() - 1].traj.t;
    losses = losses.series(
        Series::theory(
            "gradient flow (closed form)",
            finest.clone(),
            finest.iter().map(|&t| closed.loss(t)).collect(),
        )
        .color(6),
    );
    let (eta_last, gap_last) = (p.etas[p.etas.len() - 1], gaps[gaps.len() - 1]);
    let errors = LinePanel::new("max |ln ℓ_{GD} − ln ℓ_{GF}| vs η", "η", "gap")
        .log_x()
        .log_y()
        .legend(LegendPosition::UpperLeft)
        .series(Series::new("GD", p.etas.clone(), gaps.to_vec(), LineStyle::SolidMarkers).color(0))
        .series(
            Series::theory(
                "slope 1 (first order)",
                p.etas.clone(),
                p.etas.iter().map(|e| gap_last * e / eta_last).collect(),
            )
            .color(1),
        );
    Figure::new(3)
        .title(format!(
            "Gradient descent approximates the df flow to O(η) ({} task, d = {}, σ = {:.3})",
            task_name(m),
            m.nrows(),
            *p.sigma
        ))
        .panel(losses)
        .panel(differences)
        .panel(errors)
}

/// GD for t_end/η steps per step size, every iterate recorded and tabled, and the flow sampled
/// at the finest run's iterates.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let steps: f64 = p.etas.iter().map(|eta| *p.t_end / eta).sum();
    let finest = stats::max_with(0.0, p.etas.iter().map(|eta| *p.t_end / eta));
    let dim = sizes::dim(p.d);
    Cost::new()
        .work(
            "t_end, etas",
            "GD steps (t_end/η per η)",
            steps,
            3.0 * sizes::df_grad(p.d),
        )
        .records("t_end, etas", 1.0, steps, dim + n(p.d))
        .table("t_end, etas", steps, 8.0)
        .and(sizes::df_solves(
            sizes::Keys {
                solves: "d",
                samples: "t_end, etas, d",
            },
            1.0,
            p.d,
            finest,
            ctx.ode.method,
        ))
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.gd-vs-flow",
    paper: "000",
    summary: "GD vs gradient flow on ℓ_df (spec 000 §1.5, §2.4): the log-loss gap is O(η), and \
              GD drifts β by the exact per-step formula.",
    solver: OdeConfig::new(Method::Tsit45, 1e-12, 1e-14),
    validate,
    cost,
    quantities: &["alpha"],
    run,
};

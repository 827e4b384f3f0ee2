//! `conservation` (spec 000 R6, §2.7, §2.4): along the df flow, the transformer flow and the
//! flow of Lemma A.1's generic loss f = ½‖(Q Diag(v) − M)B‖², β_i = ‖q_i‖² − v_i² is conserved,
//! the loss does not increase, and dℓ/dt = −‖∇ℓ‖²; gradient descent changes β_i by exactly
//! η²(‖∇_{q_i}ℓ‖² − (∂ℓ/∂v_i)²) per step.

use std::path::PathBuf;

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::instance_files::{tf_instance, InstanceFiles};
use super::sizes;
use crate::flow::{
    integrate_flow, linspace, logspace, GradientFlow, Method, OdeConfig, Trajectory,
};
use crate::instance::histogram::task_name;
use crate::models::histogram::{DfFlow, HistogramData, RowMoments, TfFlow};
use crate::plot::{Figure, LegendPosition, LinePanel, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::df_common::{audit_gd, gaussian_state, gaussian_vector, TaskName};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub task: TaskName,
    /// Threshold D of the `thr` task.
    #[serde(default)]
    pub d_thr: usize,
    /// Alphabet size d.
    pub d: usize,
    /// Sequence length N and number of strings n of the transformer's dataset.
    pub seq_len: usize,
    pub n_strings: usize,
    /// Init scale: Q_0, v_0 entries i.i.d. N(0, σ²), the same init for both flows.
    pub sigma: Positive,
    /// Horizon of both flows.
    pub t_end: Positive,
    /// Output samples: half log-spaced from `t_first` (the transformer's transient is ~1e-4
    /// long), half equally spaced.
    pub samples: AtLeast<10>,
    pub t_first: Positive,
    /// Gradient-descent steps of each loss and their step sizes (η ≪ 2/λ_max(∇²ℓ)).
    pub gd_steps: AtLeast<1>,
    pub eta_df: Positive,
    pub eta_tf: Positive,
    pub eta_generic: Positive,
    /// The dataset (`M` and one set of `strings`, H_a definite); replaces task, d_thr, d,
    /// seq_len and n_strings. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial state (`Q0`, `v0`) of the three flows; replaces sigma and the draw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max_{i,t} |β_i(t) − β_i(0)|/max(1, |β_i(0)|) (spec 000 §2.7.1: 1e-7 at rtol 1e-10).
    pub beta_drift_tol: Positive,
    /// Largest loss increase between samples in units of the change a state error of one
    /// solver tolerance can cause, rtol·ℓ + ‖∇ℓ‖(rtol‖z‖ + atol√dim) (spec 000 §2.7.2): ≤ 1.
    pub monotone_tol: Positive,
    /// Σ_k |ℓ(t_{k+1}) − ℓ(t_k) + ∫‖∇ℓ‖²| / (ℓ(0) − ℓ(t_end)), the integral by the
    /// Hermite-corrected trapezoid rule (error O(h⁵)) with d‖∇ℓ‖²/dt = −2∇ℓᵀ∇²ℓ∇ℓ from the
    /// exact Hessian-vector product (spec 000 §2.7.2).
    pub energy_tol: Positive,
    /// max_{k,i} |β_i(k) − β_i(0) − Σ_{j<k} η²(‖∇_{q_i}ℓ‖² − (∂ℓ/∂v_i)²)| / max(1, |β_i(0)|)
    /// (spec 000 §2.4, R6: 1e-12).
    pub gd_formula_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), p.d)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let files = read_files(p, sc)?;
    files.require_tf_single()?;
    if files.data().is_none() {
        if p.d < 2 {
            return Err(sc.invalid("params.d", "need d ≥ 2"));
        }
        if p.seq_len == 0 || p.n_strings < p.d {
            return Err(sc.invalid(
                "params.n_strings",
                "need seq_len ≥ 1 and n_strings ≥ d (else ℓ_tf has extra zero directions, spec \
                 E16)",
            ));
        }
    }
    if *p.t_first >= *p.t_end {
        return Err(sc.invalid("params.t_first", "must be below t_end"));
    }
    Ok(())
}

/// The sample times: the union of a log grid from `t_first` and a linear grid, with t = 0.
fn sample_times(p: &Params) -> Vec<f64> {
    let half = *p.samples / 2;
    let mut t = linspace(0.0, *p.t_end, half);
    t.extend(logspace(*p.t_first, *p.t_end, *p.samples - half));
    t.sort_by(f64::total_cmp);
    t.dedup_by(|a, b| (*a - *b).abs() <= 1e-12 * b.abs().max(1e-300));
    t
}

/// What the checks of one flow measure.
struct FlowAudit {
    traj: Trajectory,
    /// max_i |β_i(t_k) − β_i(0)|/max(1, |β_i(0)|) per sample.
    beta_drift: Vec<f64>,
    /// max over samples of the loss increase in tolerance units (see `Checks::monotone_tol`).
    monotone_ratio: f64,
    /// ℓ(0) − ∫_0^{t_k}‖∇ℓ‖² per sample.
    energy_prediction: Vec<f64>,
    /// Σ|mismatch| / (ℓ(0) − ℓ(t_end)).
    energy_mismatch: f64,
}

fn audit_flow(
    flow: &dyn GradientFlow,
    z0: &[f64],
    times: &[f64],
    cfg: &OdeConfig,
) -> Result<FlowAudit, RunError> {
    let traj = integrate_flow(flow, z0, times, cfg)?;
    let n = traj.len();
    let beta_drift = (0..n)
        .map(|k| {
            stats::max(
                traj.invariants
                    .iter()
                    .map(|(_, b)| (b[k] - b[0]).abs() / b[0].abs().max(1.0)),
            )
        })
        .collect();
    let dim = flow.dim();
    let (mut g, mut hg) = (vec![0.0; dim], vec![0.0; dim]);
    // f = ‖∇ℓ‖² and f' = −2∇ℓᵀ∇²ℓ∇ℓ at every sample
    let (f, f_dot): (Vec<f64>, Vec<f64>) = (0..n)
        .map(|k| {
            flow.grad(traj.state(k), &mut g);
            flow.hvp(traj.state(k), &g, &mut hg);
            let gg: f64 = g.iter().map(|x| x * x).sum();
            let ghg: f64 = g.iter().zip(&hg).map(|(a, b)| a * b).sum();
            (gg, -2.0 * ghg)
        })
        .unzip();
    let mut monotone_ratio: f64 = 0.0;
    let mut mismatch = 0.0;
    let mut integral = 0.0;
    let mut energy_prediction = vec![traj.loss[0]];
    let sqrt_dim = (dim as f64).sqrt();
    for k in 0..n - 1 {
        let h = traj.t[k + 1] - traj.t[k];
        let piece = 0.5 * h * (f[k] + f[k + 1]) + h * h / 12.0 * (f_dot[k] - f_dot[k + 1]);
        integral += piece;
        energy_prediction.push(traj.loss[0] - integral);
        let change = traj.loss[k + 1] - traj.loss[k];
        mismatch += (change + piece).abs();
        let z_norm = crate::flow::norm(traj.state(k));
        let unit =
            cfg.rtol * traj.loss[k] + traj.grad_norm[k] * (cfg.rtol * z_norm + cfg.atol * sqrt_dim);
        monotone_ratio = stats::larger(monotone_ratio, change / unit);
    }
    let energy_mismatch = mismatch / (traj.loss[0] - traj.loss[n - 1]);
    Ok(FlowAudit {
        traj,
        beta_drift,
        monotone_ratio,
        energy_prediction,
        energy_mismatch,
    })
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let data = files.single_dataset(|| {
        let m = p.task.matrix(p.d, p.d_thr);
        HistogramData::sample(m, p.seq_len, p.n_strings, &mut ctx.rng(1))
    })?;
    let (m, d) = (data.m.clone(), data.d);
    let z0 = files.single_init(|| gaussian_state(&mut ctx.rng(2), d, *p.sigma))?;
    // Lemma A.1 holds for any f(Q Diag(v)): f = ½‖(Q Diag(v) − M)B‖², B with N(0, 1/d) entries
    // (drawn from the seed also on user data: B is part of the test, not of the instance)
    let b_entries = gaussian_vector(&mut ctx.rng(3), d * d, 1.0 / (d as f64).sqrt());
    let b = DMatrix::from_vec(d, d, b_entries);
    let generic = TfFlow::new(RowMoments::uniform(&(&b * b.transpose())), m.clone());
    let df = DfFlow::new(m.clone());
    let tf = TfFlow::from_data(&data);
    let times = sample_times(p);
    let flows: [(&str, &dyn GradientFlow, f64); 3] = [
        ("df", &df, *p.eta_df),
        ("tf", &tf, *p.eta_tf),
        ("generic", &generic, *p.eta_generic),
    ];

    let mut rep = Report {
        series: Table::new(&[
            "flow",
            "t",
            "loss",
            "grad_norm",
            "beta_drift_rel",
            "loss0_minus_energy",
        ]),
        instance: Some(tf_instance(&data, vec![z0.clone()])),
        ..Default::default()
    };
    let mut gd_table = Table::new(&["flow", "k", "t", "beta_drift", "formula", "formula_error"]);
    let mut drift_panel = LinePanel::new(
        "β conservation along the flows",
        "t",
        "max_i |Δβ_i|/max(1,|β_i|)",
    )
    .log_y()
    .hline(RefLine::new(*c.beta_drift_tol, "bound"));
    let mut energy_panel = LinePanel::new("energy identity dℓ/dt = −‖∇ℓ‖²", "t", "ℓ(t)/ℓ(0)")
        .log_x()
        .log_y()
        .legend(LegendPosition::LowerLeft);
    let mut gd_panel = LinePanel::new(
        "GD: β_i(k) − β_i(0), measured vs formula",
        "iteration k",
        "|Δβ_i|",
    )
    .log_y()
    .legend(LegendPosition::LowerRight);
    let mut gd_err_panel = LinePanel::new(
        "GD: error of the drift formula",
        "iteration k",
        "rel. error",
    )
    .log_y()
    .hline(RefLine::new(*c.gd_formula_tol, "bound"));
    for (color, (label, flow, eta)) in flows.into_iter().enumerate() {
        let audit = audit_flow(flow, &z0, &times, &ctx.ode)?;
        let tr = &audit.traj;
        rep.stats(format!("{label} flow"), &tr.stats);
        rep.at_most(
            &format!("beta-drift-beta.{label}"),
            &format!("{label}: max β drift / max(1, |β|)"),
            stats::max(audit.beta_drift.iter()),
            *c.beta_drift_tol,
        )
        .note(format!(
            "Lemma A.1, {} solver at rtol {:e}, t ≤ {}",
            ctx.ode.method.name(),
            ctx.ode.rtol,
            *p.t_end
        ));
        rep.at_most(
                &format!("loss-increase-solver-tolerance-effect.{label}"), &format!("{label}: loss increase / solver-tolerance effect"),
                audit.monotone_ratio,
                *c.monotone_tol,
            )
            .note("max_k (ℓ_{k+1} − ℓ_k)/(rtol·ℓ_k + ‖∇ℓ_k‖(rtol‖z_k‖ + atol√dim)); ≤ 0 is strictly decreasing");
        rep.at_most(
            &format!("energy-identity-mismatch.{label}"),
            &format!("{label}: energy identity mismatch"),
            audit.energy_mismatch,
            *c.energy_tol,
        )
        .note("Σ_k |Δℓ_k + ∫‖∇ℓ‖²| / (ℓ(0) − ℓ(t_end)), Hermite-corrected trapezoid");
        rep.derive(&format!("{label}_loss0"), tr.loss[0]);
        rep.derive(&format!("{label}_loss_end"), tr.loss[tr.len() - 1]);
        for k in 0..tr.len() {
            rep.series.push(vec![
                label.into(),
                tr.t[k].into(),
                tr.loss[k].into(),
                tr.grad_norm[k].into(),
                audit.beta_drift[k].into(),
                audit.energy_prediction[k].into(),
            ]);
        }
        drift_panel = drift_panel.series(
            Series::numerics(
                format!("{label} flow"),
                tr.t.clone(),
                audit.beta_drift.clone(),
            )
            .color(color),
        );
        // the identity's prediction is meaningful until it reaches the cancellation floor
        let loss0 = tr.loss[0];
        let prediction: Vec<f64> = audit
            .energy_prediction
            .iter()
            .map(|&e| {
                if e > 1e-10 * loss0 {
                    e / loss0
                } else {
                    f64::NAN
                }
            })
            .collect();
        let normalized: Vec<f64> = tr.loss.iter().map(|l| l / loss0).collect();
        energy_panel = energy_panel
            .series(Series::numerics(format!("ℓ_{label}"), tr.t.clone(), normalized).color(color))
            .series(
                Series::theory(format!("ℓ_{label}(0) − ∫‖∇ℓ‖²"), tr.t.clone(), prediction)
                    .color(color),
            );

        let gd = audit_gd(flow, &z0, eta, *p.gd_steps)?;
        rep.at_most(
            &format!("gd-eta-beta-drift-formula-error.{label}-{eta}"),
            &format!("{label} GD (η = {eta}): β drift formula error"),
            stats::max(gd.error.iter()),
            *c.gd_formula_tol,
        )
        .note(format!(
            "accumulated over {} steps; the drift itself is {:.3e} (relative)",
            *p.gd_steps, gd.total_drift
        ));
        rep.derive(&format!("{label}_gd_total_beta_drift"), gd.total_drift);
        for k in 0..gd.k.len() {
            gd_table.push(vec![
                Cell::from(label),
                k.into(),
                (gd.k[k] * eta).into(),
                gd.measured[k].into(),
                gd.predicted[k].into(),
                gd.error[k].into(),
            ]);
        }
        let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<f64>>();
        gd_panel = gd_panel
            .series(
                Series::numerics(
                    format!("{label}, η = {eta}"),
                    gd.k.clone(),
                    abs(&gd.measured),
                )
                .color(color),
            )
            .series(
                Series::theory(
                    format!("{label}, Σ η²(‖∇_qℓ‖² − (∂_vℓ)²)"),
                    gd.k.clone(),
                    abs(&gd.predicted),
                )
                .color(color),
            );
        gd_err_panel = gd_err_panel.series(
            Series::numerics(
                format!("{label}, η = {eta}"),
                gd.k.clone(),
                gd.error.clone(),
            )
            .color(color),
        );
    }
    rep.tables.push(("gd".into(), gd_table));
    rep.figure = Some(
        Figure::new(2)
            .title(format!(
                "Lemma A.1: conservation of β_i = ‖q_i‖² − v_i² ({} task, d = {}, σ = {}; generic: \
                 ½‖(Q Diag(v) − M)B‖²)",
                task_name(&m),
                d,
                *p.sigma
            ))
            .panel(drift_panel)
            .panel(energy_panel)
            .panel(gd_panel)
            .panel(gd_err_panel),
    );
    Ok(rep)
}

/// The transformer data and T3, the generic loss's moment tensor, three flows (the costliest,
/// ℓ_tf, for all) with every sample kept, and three GD audits recording every iterate.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let steps = n(*p.gd_steps);
    sizes::tf_data("n_strings, seq_len", 1.0, p.d, p.seq_len, p.n_strings)
        .doubles(
            "d",
            "the generic loss's moment tensor (d³ doubles)",
            n(p.d).powi(3),
        )
        .and(sizes::tf_solves(
            sizes::Keys {
                solves: "d",
                samples: "samples, d",
            },
            3.0,
            p.d,
            n(*p.samples),
            ctx.ode.method,
        ))
        .table("samples", 3.0 * n(*p.samples), 6.0)
        .work(
            "gd_steps, d",
            "GD steps on three losses",
            3.0 * steps,
            3.0 * sizes::tf_grad(p.d),
        )
        .records("gd_steps, d", 1.0, steps, sizes::dim(p.d) + n(p.d))
        .table("gd_steps", 3.0 * steps, 6.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.conservation",
    paper: "000",
    summary: "Lemma A.1 (spec 000 R6, §2.7): β_i is conserved by the df, transformer and generic \
              f(Q Diag(v)) flows, the loss decreases with dℓ/dt = −‖∇ℓ‖², and GD drifts β by \
              the exact formula of §2.4.",
    solver: OdeConfig::new(Method::Bdf, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &["*_gd_total_beta_drift", "*_loss0", "*_loss_end"],
    run,
};

//! `spurious-sparse-minimum` (spec 002 §6 item 14, §2.5): the stalled (p, v) runs of Fig. 1 at
//! σ_p = 1 do not creep toward the teacher: the gradient flow, integrated to t = 10⁶ with implicit
//! BDF and the exact HVP as its Jacobian, ends at a strict local minimum with loss > 0.1 while the
//! teacher has loss 0, and with sparse attention (geometric-mean R far above the teacher's).
//! The end point is polished by damped Newton on the exact Hessian (analysis::stationary) until
//! ‖∇L‖ < 1e−12 and classified by the Hessian spectrum. That the flow stalls there is checked
//! against a minimum located independently of its end: a second Newton solve from the flow's
//! state at `newton_from_t` (at most t_end/10, before it has converged), after which the flow must end at that
//! minimum and approach it no slower than the linearization's slowest rate e^{−λ_min t}.
//!
//! `data_file` (`X`, `xi_p`, `xi_v` of one trial) replaces trial `trial`'s draw (d, n, N are the
//! file's), `init_file` (`p0`, `v0`) its start. Every check runs on a user's instance: together
//! they ask whether the flow ends at a spurious sparse strict local minimum there (a FAIL says
//! which part does not hold).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::common::{
    prompt_grad, student, synthetic_data, teacher_instance, teacher_state, TeacherFiles, TrainName,
};
use crate::analysis::stationary::{find_stationary, NewtonOptions, StationaryPoint, Target};
use crate::flow::{integrate_flow, norm, Method, OdeConfig, TimeGrid, Trajectory};
use crate::models::prompt::Attention;
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::AboveOne;
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::hessian_common::{hessian_eigenvalues, kappa};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// d = n (spec: 20), N (spec: 100), teacher scale σ_p (spec: 1).
    pub d: AtLeast<2>,
    pub samples: AtLeast<1>,
    pub sigma_p: Positive,
    /// Which trial of the synthetic data (a run that stalls; see the TOML).
    pub trial: usize,
    /// Horizon of the (p, v) gradient flow (spec: 10⁶) and number of log-spaced samples.
    pub t_end: AboveOne,
    pub samples_t: AtLeast<2>,
    /// Newton polish: stop at ‖∇L‖ ≤ grad_tol (spec: 1e−12) or after max_newton steps.
    pub grad_tol: Positive,
    pub max_newton: AtLeast<1>,
    /// The independent minimum θ*_s: Newton from the last sampled flow state at
    /// t ≤ min(newton_from_t, t_end/10) (a time before the flow has converged, never its end).
    pub newton_from_t: Positive,
    /// One trial's tokens and teacher directions (layout `instance::prompt::TeacherData`),
    /// replacing the draw of `trial`; d, n, N are the file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The start (`p0`, `v0`; layout `instance::prompt::StudentInit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// ‖∇L‖ at the polished point (spec: < 1e−10).
    pub grad_max: Positive,
    /// λ_min/λ_max of the Hessian there: > 0 beyond rounding (strict local minimum).
    pub min_eig_rel: Positive,
    /// Loss at the spurious minimum (spec: > 0.1) and the teacher's (0 up to rounding).
    pub loss_min: Positive,
    pub teacher_loss_max: Positive,
    /// Geometric-mean log10 R at the minimum (spec: > 10).
    pub log10_r_min: f64,
    /// The flow's end point is the independently located minimum: ‖θ(t_end) − θ*_s‖ / ‖θ*_s‖
    /// (the solver's accuracy, rtol 1e−8, times a margin).
    pub flow_end_rel_max: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<TeacherFiles, InputError> {
    let (data, init) = (p.data_file.as_deref(), p.init_file.as_deref());
    TeacherFiles::read(sc, data, init, *p.d, true, true)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc).map(|_| ())
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let draw = files.draw(ctx, *p.d, *p.samples, *p.sigma_p, p.trial);
    let (d, samples) = (draw.data.d, draw.data.samples);
    let (model, theta0) = student(&draw, Attention::Softmax, TrainName::Pv);
    let teacher = teacher_state(&model, &draw);
    let cfg = ctx.ode;
    let times = TimeGrid::Log {
        t_first: 1e-2,
        t1: *p.t_end,
        n: *p.samples_t,
    }
    .times();
    let traj = integrate_flow(&model, &theta0, &times, &cfg)?;
    let end = traj.last_state().to_vec();
    let options = NewtonOptions {
        target: Target::Minimum,
        grad_tol: *p.grad_tol,
        max_iterations: *p.max_newton,
        zero_rel_tol: 1e-14,
    };
    let polish = |from: &[f64]| match find_stationary(&model, from, &options) {
        Ok(pt) => Ok(pt),
        Err(crate::analysis::AnalysisError::StationaryNotFound { last, .. }) => Ok(*last),
        Err(e) => Err(RunError::Other(format!("Newton polish: {e}"))),
    };
    let point = polish(&end)?;
    // the independent minimum: Newton from the last sample at t ≤ min(newton_from_t, t_end/10)
    let t_s = p.newton_from_t.min(0.1 * *p.t_end);
    let k_s = traj.t.iter().rposition(|&t| t <= t_s).unwrap_or(0);
    let indep = polish(traj.state(k_s))?;
    let stall = Stall::measure(&traj, k_s, &indep, *c.flow_end_rel_max);
    let eig = point.hessian_eigenvalues.clone();
    let eig_teacher = hessian_eigenvalues(&model, &teacher)?;
    let (lmin, lmax) = (eig[0], *eig.last().unwrap());
    let (ps, _) = model.split(&point.z);
    let stats = model.attention_stats(ps);
    let teacher_stats = model.attention_stats(&draw.p_teacher);
    let teacher_loss = crate::flow::GradientFlow::loss(&model, &teacher);
    let dist_teacher: Vec<f64> = point.z.iter().zip(&teacher).map(|(a, b)| a - b).collect();

    let mut rep = Report::default();
    let setting = format!(
        "d = {}, N = {}, σ_p = {}, trial {}, (p, v) flow by {} (rtol {:e}) to t = {:e}",
        d,
        samples,
        *p.sigma_p,
        p.trial,
        cfg.method.name(),
        cfg.rtol,
        *p.t_end
    );
    rep.at_most(
        "stationary-after-newton-polish",
        "stationary: ‖∇L‖ after the Newton polish",
        point.grad_norm,
        *c.grad_max,
    )
    .note(format!(
        "{} Newton steps on the exact Hessian from the flow's end point (‖∇L‖ = {:.2e} \
         there); {setting}",
        point.iterations,
        traj.grad_norm.last().copied().unwrap_or(f64::NAN)
    ));
    rep.at_least(
            "strict-local-minimum-lambda-lambda-2l", "strict local minimum: λ_min/λ_max of ∇²L",
            lmin / lmax,
            *c.min_eig_rel,
        )
        .note(format!(
            "{} eigenvalues of the (p, v) Hessian: λ_min = {:.3e}, λ₂ = {:.3e}, λ_max = {:.3}, κ = \
             {:.3e} ([proto] 7.66e−4, 2.97e−2, 7.33, 9.6e3); Hessian asymmetry {:.1e}; ‖θ*‖/‖θ(t_end)‖ \
             = {:.2} (≫ 1 with λ_min at rounding level: the run escapes toward the boundary, no \
             interior minimum)",
            eig.len(),
            lmin,
            eig[1],
            lmax,
            lmax / lmin,
            point.hessian_asymmetry,
            norm(&point.z) / norm(&end)
        ))
        .paper_claim("spec §2.5/item 14: stalled runs are spurious strict local minima — true for \
                      some draws only; others escape toward the boundary (see the scenario header)");
    rep.at_least(
        "spurious-loss-minimum",
        "spurious: loss at the minimum",
        point.loss,
        *c.loss_min,
    )
    .note(format!(
        "global minimum 0 (realizable teacher); ‖θ* − θ_T‖ = {:.3}; [proto] 1.360409",
        norm(&dist_teacher)
    ));
    rep.at_most(
        "teacher-loss",
        "teacher loss",
        teacher_loss,
        *c.teacher_loss_max,
    )
    .note("the labels are the teacher's outputs: L(p_T, v_T) = 0 up to rounding");
    rep.at_least(
        "sparse-geometric-mean-log10-minimum",
        "sparse: geometric-mean log10 R at the minimum",
        stats.log10_geometric_mean,
        c.log10_r_min,
    )
    .note(format!(
        "‖p*‖ = {:.2}, {:.0}% of samples with top attention > 0.99, arithmetic-mean log10 R̄ \
         = {:.1}; teacher: geometric {:.2}, arithmetic {:.2}; [proto] ‖p‖ = 14.44, 22.9, 45%",
        norm(ps),
        100.0 * stats.saturated_fraction,
        stats.log10_arithmetic_mean,
        teacher_stats.log10_geometric_mean,
        teacher_stats.log10_arithmetic_mean
    ));
    rep.at_most(
        "stalled-at-independent-minimum",
        "the flow stalled at an independently located minimum: ‖θ(t_end) − θ*_s‖/‖θ*_s‖",
        stall.end_rel,
        *c.flow_end_rel_max,
    )
    .note(format!(
        "θ*_s: {} Newton steps from θ(t = {:.4e}) (‖θ(t) − θ*_s‖/‖θ*_s‖ = {:.3e} there, \
         ‖∇L‖ = {:.2e}), reaching ‖∇L‖ = {:.2e}, L = {:.10}; L(θ(t_end)) = {:.10}; {} steps, \
         {} RHS, {} Jacobian-vector products",
        indep.iterations,
        traj.t[k_s],
        stall.start_rel,
        traj.grad_norm[k_s],
        indep.grad_norm,
        indep.loss,
        traj.loss.last().copied().unwrap_or(f64::NAN),
        traj.stats.steps,
        traj.stats.rhs_evals,
        traj.stats.jvp_evals
    ));
    rep.at_most(
        "approach-rate",
        "it approaches θ*_s at least at the linearized rate: max_t ‖θ(t) − θ*_s‖ / \
         (‖θ(t_s) − θ*_s‖e^{−λ_min(t − t_s)} + tol·‖θ*_s‖)",
        stall.rate_ratio,
        1.0,
    )
    .note(format!(
        "λ_min = {:.4e} of ∇²L(θ*_s): near a strict minimum the flow contracts every \
         component at least as fast as e^{{−λ_min t}}; tol = flow_end_rel_max (the solver's \
         floor); {} samples after t_s; worst at t = {:.4e}",
        stall.lambda_min, stall.samples, stall.worst_t
    ));
    rep.derive("loss", point.loss);
    rep.derive("lambda_min", lmin);
    rep.derive("lambda_max", lmax);
    rep.derive("kappa", kappa(&eig)?);
    rep.derive("kappa_teacher", kappa(&eig_teacher)?);
    rep.derive("log10_r_geometric", stats.log10_geometric_mean);
    rep.derive("p_norm", norm(ps));
    rep.derive("saturated_fraction", stats.saturated_fraction);
    rep.stats("flow", &traj.stats);

    rep.series = Table::new(&["t", "loss", "grad_norm"]);
    for k in 0..traj.len() {
        rep.series.push(vec![
            traj.t[k].into(),
            traj.loss[k].into(),
            traj.grad_norm[k].into(),
        ]);
    }
    let mut spec = Table::new(&["index", "eigenvalue_spurious", "eigenvalue_teacher"]);
    for (k, (a, b)) in eig.iter().zip(&eig_teacher).enumerate() {
        spec.push(vec![(k + 1).into(), (*a).into(), (*b).into()]);
    }
    rep.tables.push(("hessian_spectrum".into(), spec));
    rep.json.push((
        "minimum".into(),
        serde_json::json!({
            "theta": point.z,
            "loss": point.loss,
            "grad_norm": point.grad_norm,
            "hessian_eigenvalues": eig,
            "teacher_hessian_eigenvalues": eig_teacher,
            "log10_ratio": stats.log10_ratio,
        }),
    ));

    let idx: Vec<f64> = (1..=eig.len()).map(|k| k as f64).collect();
    let spectrum = LinePanel::new(
        format!("Hessian spectrum, (p, v), d = {d}, σ_p = {}", *p.sigma_p),
        "eigenvalue index k",
        "λ_k(∇²L)",
    )
    .log_y()
    .legend(LegendPosition::UpperLeft)
    .series(Series::new(
        format!(
            "spurious minimum: L = {:.3}, log₁₀R = {:.1}",
            point.loss, stats.log10_geometric_mean
        ),
        idx.clone(),
        eig.clone(),
        LineStyle::SolidMarkers,
    ))
    .series(Series::new(
        format!(
            "teacher: L = 0, log₁₀R = {:.1}",
            teacher_stats.log10_geometric_mean
        ),
        idx,
        eig_teacher.clone(),
        LineStyle::SolidMarkers,
    ));
    let flow = LinePanel::new("the (p, v) gradient flow stalls", "flow time t", "L(θ(t))")
        .log_x()
        .log_y()
        .series(Series::numerics(
            format!("gradient flow ({})", cfg.method.label()),
            traj.t[1..].to_vec(),
            traj.loss[1..].to_vec(),
        ))
        .series(Series::theory(
            "polished minimum",
            vec![traj.t[1], *p.t_end],
            vec![point.loss; 2],
        ));
    rep.figure = Some(
        Figure::new(2)
            .title("Stalled runs end at a spurious sparse strict local minimum")
            .panel(spectrum)
            .panel(flow),
    );
    rep.instance = Some(teacher_instance(
        std::slice::from_ref(&draw),
        Some(TrainName::Pv),
    ));
    Ok(rep)
}

/// How the flow's tail meets the minimum θ*_s located by Newton from its state at t_s.
struct Stall {
    /// ‖θ(t_end) − θ*_s‖/‖θ*_s‖ and ‖θ(t_s) − θ*_s‖/‖θ*_s‖.
    end_rel: f64,
    start_rel: f64,
    /// λ_min of ∇²L(θ*_s).
    lambda_min: f64,
    /// max over samples t > t_s of ‖θ(t) − θ*_s‖ / (‖θ(t_s) − θ*_s‖e^{−λ_min(t − t_s)} +
    /// tol·‖θ*_s‖), and where it is largest.
    rate_ratio: f64,
    worst_t: f64,
    samples: usize,
}

impl Stall {
    fn measure(traj: &Trajectory, k_s: usize, star: &StationaryPoint, tol: f64) -> Self {
        let scale = norm(&star.z);
        let dist = |k: usize| {
            let d: Vec<f64> = traj
                .state(k)
                .iter()
                .zip(&star.z)
                .map(|(a, b)| a - b)
                .collect();
            norm(&d)
        };
        let d_s = dist(k_s);
        let lambda_min = star
            .hessian_eigenvalues
            .first()
            .copied()
            .unwrap_or(f64::NAN);
        let ratios: Vec<(f64, f64)> = (k_s + 1..traj.len())
            .map(|k| {
                let dt = traj.t[k] - traj.t[k_s];
                let envelope = d_s * (-lambda_min * dt).exp() + tol * scale;
                (traj.t[k], dist(k) / envelope)
            })
            .collect();
        // NaN (a NaN distance or λ_min) propagates and fails the check
        let rate_ratio = stats::max(ratios.iter().map(|r| r.1));
        let worst_t = ratios
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(f64::NAN, |r| r.0);
        Stall {
            end_rel: dist(traj.len() - 1) / scale,
            start_rel: d_s / scale,
            lambda_min,
            rate_ratio,
            worst_t,
            samples: ratios.len(),
        }
    }
}

/// A synthetic draw, one (p, v) flow (dimension 2d) keeping `samples_t` states, two Newton
/// solves on the exact Hessian and two dense spectra.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let dim = 2.0 * n(*p.d);
    let grad = prompt_grad(*p.d, *p.d, *p.samples);
    synthetic_data("samples, d", 1.0, *p.d, *p.samples)
        .ode("d, samples", 1.0, dim, grad, ctx.ode.method)
        .records("samples_t, d", 1.0, n(*p.samples_t), dim)
        .dense_hessians(
            "max_newton, d",
            2.0 * n(*p.max_newton) + 2.0,
            dim,
            2.0 * grad,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "prompt.spurious-sparse-minimum",
    paper: "002",
    summary: "The stalled (p, v) run at σ_p = 1 ends at a spurious strict local minimum: BDF to \
              t = 10⁶ with the exact HVP, Newton polish to ‖∇L‖ < 1e−12, all Hessian eigenvalues \
              > 0, loss > 0.1 (teacher 0), geometric-mean log10 R > 10; the flow ends at, and \
              approaches at ≥ the linearized rate, a minimum located by Newton from its state \
              at an earlier time.",
    solver: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "kappa",
        "kappa_teacher",
        "lambda_max",
        "lambda_min",
        "log10_r_geometric",
        "loss",
        "p_norm",
        "saturated_fraction",
    ],
    run,
};

//! `training-run` (spec 002 §1.2–1.3, §4, §6 items 11–13): ONE trial of full-batch gradient
//! descent on the synthetic teacher data, softmax or linear attention, p or (p, v) trained. The
//! scenario seed selects the trial's draw (X, ξ_p, ξ_v, p₀, v₀), so one seed at two σ_p values
//! differs only in the teacher's scale p_T = σ_p ξ_p (common random numbers). The paper's
//! figures are sweeps of this kind over σ_p (or d) and seeds (`scenarios/prompt/fig*.toml`):
//! the sweep draws the mean with the min–max band and checks statistics across the trials.
//!
//! Per run: the loss at every iteration (recorded every `record_every`), and derived quantities
//! for the sweep — the final loss, the loss at given iterations, the geometric- and arithmetic-
//! mean log10 R of the student (final iterate) and of the teacher, optionally the fitted linear
//! rate (slope of ln L over an iteration window, with r²) and the misspecification floor of the
//! loss, found by damped Newton with the exact Hessian from GD's end point (the bilinear linear
//! model has no closed-form floor when v is trained), with the iterations until the loss is
//! within a factor (1 + `floor_within`) of it. Divergence of GD is an error naming the step.
//!
//! `data_file` (`X`, `xi_p`, `xi_v` of one trial; d, n, N are the file's) replaces the draw and
//! `init_file` (`p0`, and `v0` when v is trained) the start; in a sweep every run uses them (the
//! seed then only draws the start when no `init_file` is given).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::common::{
    prompt_grad, student, synthetic_data, teacher_instance, TeacherFiles, TrainName,
};
use crate::analysis::fit::{log_slope_fit, Window};
use crate::analysis::stationary::{find_stationary, NewtonOptions, Target};
use crate::flow::{FlowError, Method, OdeConfig};
use crate::models::prompt::{Attention, PromptModel};
use crate::plot::{Figure, LinePanel, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

/// Which attention the student uses (the labels always come from a softmax teacher).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionName {
    /// f = φ(Xp)ᵀXv (eq. 3).
    Softmax,
    /// f = (Xp)ᵀXv (Section 5.2).
    Linear,
}

impl AttentionName {
    fn model(self) -> Attention {
        match self {
            AttentionName::Softmax => Attention::Softmax,
            AttentionName::Linear => Attention::Linear,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Student attention: softmax | linear.
    pub attention: AttentionName,
    /// Trained parameters: p (v = v_T frozen, A1) | pv (the paper's experiments).
    pub train: TrainName,
    /// Token dimension d (= number of tokens n).
    pub d: AtLeast<2>,
    /// Samples N.
    pub samples: AtLeast<1>,
    /// Teacher σ_p (standard deviation of p_T).
    pub sigma_p: Positive,
    /// GD step size η (loss ½-squared, averaged over N).
    pub eta: Positive,
    /// GD iterations.
    pub iterations: AtLeast<1>,
    /// The loss is written to series.csv every this many iterations (and at the last).
    pub record_every: AtLeast<1>,
    /// Iterations k whose loss is derived as `loss_at_<k>`.
    #[serde(default)]
    pub loss_at: Vec<usize>,
    /// Fit ln L_k = a + slope·k over these iterations (inclusive), using only losses ≥
    /// `rate_min_loss` (below it rounding sets the loss); derives `rate_slope`, `rate_r2`.
    #[serde(default)]
    pub rate_window: Option<[usize; 2]>,
    #[serde(default = "default_rate_min_loss")]
    pub rate_min_loss: Positive,
    /// Estimate the sharpness λ_max(∇²L) at GD's end point by this many power iterations on
    /// the exact Hessian-vector product (0: skip). The Rayleigh quotient is a lower bound of
    /// λ_max, so η·(it) > 2 proves GD unstable there. Derives `sharpness`, `eta_sharpness`.
    #[serde(default)]
    pub sharpness_iterations: usize,
    /// Find the loss floor (a local minimum) by damped Newton from GD's end point.
    #[serde(default)]
    pub floor: bool,
    /// `iterations_to_floor`: the first k with L_k ≤ (1 + floor_within)·L_floor.
    #[serde(default = "default_floor_within")]
    pub floor_within: Positive,
    /// One trial's tokens and teacher directions (layout `instance::prompt::TeacherData`),
    /// replacing the draw; d, n, N are the file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The start (`p0`, and `v0` for train = "pv"; layout `instance::prompt::StudentInit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

fn default_rate_min_loss() -> Positive {
    Positive::try_from(1e-25).expect("positive")
}

fn default_floor_within() -> Positive {
    Positive::try_from(0.02).expect("positive")
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// GD counts as diverged (an error) once L_k > divergence_factor·L_0 or is not finite.
    pub divergence_factor: Positive,
    /// The Newton floor point: ‖∇L‖ ≤ this.
    #[serde(default = "default_floor_grad_tol")]
    pub floor_grad_tol: Positive,
    /// The floor point is a local minimum: λ_min(∇²L)/λ_max(∇²L) ≥ −this (zero modes from the
    /// scaling symmetry (p, v) → (cp, v/c) of the bilinear model are exact zeros).
    #[serde(default = "default_floor_eig_tol")]
    pub floor_eig_tol: Positive,
    /// GD never goes below the floor: min_k L_k ≥ (1 − this)·L_floor.
    #[serde(default = "default_floor_eig_tol")]
    pub floor_below_tol: Positive,
}

fn default_floor_grad_tol() -> Positive {
    Positive::try_from(1e-10).expect("positive")
}

fn default_floor_eig_tol() -> Positive {
    Positive::try_from(1e-8).expect("positive")
}

fn read_files(p: &Params, sc: &Scenario) -> Result<TeacherFiles, InputError> {
    let (data, init) = (p.data_file.as_deref(), p.init_file.as_deref());
    TeacherFiles::read(sc, data, init, *p.d, p.train == TrainName::Pv, true)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc)?;
    if let Some(&k) = p.loss_at.iter().find(|&&k| k > *p.iterations) {
        return Err(sc.invalid(
            "params.loss_at",
            format!("iteration {k} is past the last ({})", *p.iterations),
        ));
    }
    if let Some([a, b]) = p.rate_window {
        if a >= b || b > *p.iterations {
            return Err(sc.invalid(
                "params.rate_window",
                format!(
                    "need a < b ≤ iterations = {}, got [{a}, {b}]",
                    *p.iterations
                ),
            ));
        }
    }
    Ok(())
}

/// GD from θ₀: the loss L_k at k = 0..=iterations and the final iterate. Divergence (a
/// non-finite loss or L_k > factor·L_0) is an error naming the step.
fn descend(
    model: &PromptModel,
    theta0: &[f64],
    eta: f64,
    iterations: usize,
    factor: f64,
) -> Result<(Vec<f64>, Vec<f64>), FlowError> {
    let mut theta = theta0.to_vec();
    let mut g = vec![0.0; theta.len()];
    let mut losses = Vec::with_capacity(iterations + 1);
    for k in 0..=iterations {
        let loss = if k < iterations {
            model.loss_and_grad(&theta, &mut g)
        } else {
            crate::flow::GradientFlow::loss(model, &theta)
        };
        let loss0 = losses.first().copied().unwrap_or(loss);
        if !loss.is_finite() || loss > factor * loss0 {
            return Err(FlowError::Diverged {
                step: k,
                t: k as f64 * eta,
                loss,
                loss0,
                factor,
                eta,
            });
        }
        losses.push(loss);
        if k < iterations {
            theta.iter_mut().zip(&g).for_each(|(t, gi)| *t -= eta * gi);
        }
    }
    Ok((losses, theta))
}

/// The Rayleigh quotient uᵀHu after `steps` power iterations u ← Hu/‖Hu‖ from a fixed
/// start: a lower bound of the largest |eigenvalue| of H = ∇²L(θ), converging to it.
fn rayleigh_power(model: &PromptModel, theta: &[f64], steps: usize) -> f64 {
    use crate::flow::GradientFlow;
    let n = theta.len();
    // a fixed start with every component nonzero (deterministic across runs)
    let mut u: Vec<f64> = (0..n)
        .map(|i| 1.0 + 0.5 * ((i as f64) * 0.7).sin())
        .collect();
    let norm = |x: &[f64]| x.iter().map(|a| a * a).sum::<f64>().sqrt();
    let nu = norm(&u);
    u.iter_mut().for_each(|a| *a /= nu);
    let mut hu = vec![0.0; n];
    let mut quotient = f64::NAN;
    for _ in 0..steps {
        model.hvp(theta, &u, &mut hu);
        quotient = u.iter().zip(&hu).map(|(a, b)| a * b).sum::<f64>();
        let nh = norm(&hu);
        if nh == 0.0 || !nh.is_finite() {
            break;
        }
        u.iter_mut().zip(&hu).for_each(|(a, b)| *a = b / nh);
    }
    quotient
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let draw = files.draw(ctx, *p.d, *p.samples, *p.sigma_p, 0);
    let (model, theta0) = student(&draw, p.attention.model(), p.train);
    let (losses, theta) = descend(&model, &theta0, *p.eta, *p.iterations, *c.divergence_factor)?;
    let mut rep = Report::default();
    let last = *losses.last().expect("at least one loss");
    rep.derive("initial_loss", losses[0]);
    // largest relative loss increase of one step (0 for monotone GD; > 0 at the edge of stability)
    let max_rise = stats::max_with(0.0, losses.windows(2).map(|w| w[1] / w[0] - 1.0));
    rep.derive("max_step_increase", max_rise);
    rep.derive("final_loss", last);
    for &k in &p.loss_at {
        rep.derive(&format!("loss_at_{k}"), losses[k]);
    }

    // R statistics: the teacher's always (its attention is softmax), the student's for softmax
    let teacher = model.attention_stats(&draw.p_teacher);
    rep.derive("log10_R_teacher", teacher.log10_geometric_mean);
    rep.derive("log10_Rbar_teacher", teacher.log10_arithmetic_mean);
    let mut student_r = None;
    if p.attention == AttentionName::Softmax {
        let (p_end, _) = model.split(&theta);
        let s = model.attention_stats(p_end);
        rep.derive("log10_R_student", s.log10_geometric_mean);
        rep.derive("log10_Rbar_student", s.log10_arithmetic_mean);
        rep.derive("saturated_fraction_student", s.saturated_fraction);
        rep.derive(
            "log10_R_student_over_teacher",
            s.log10_geometric_mean - teacher.log10_geometric_mean,
        );
        student_r = Some(s.log10_geometric_mean);
    }

    if p.sharpness_iterations > 0 {
        let lambda = rayleigh_power(&model, &theta, p.sharpness_iterations);
        rep.derive("sharpness", lambda);
        rep.derive("eta_sharpness", *p.eta * lambda);
    }

    let iters: Vec<f64> = (0..losses.len()).map(|k| k as f64).collect();
    if let Some([a, b]) = p.rate_window {
        let fit = log_slope_fit(
            &iters[a..=b],
            &losses[a..=b],
            Window::Value {
                low: *p.rate_min_loss,
                high: f64::INFINITY,
            },
        );
        let (slope, r2, points) = match fit {
            Ok(f) => (f.slope, f.r_squared, f.points as f64),
            Err(_) => (f64::NAN, f64::NAN, 0.0),
        };
        rep.derive("rate_slope", slope);
        rep.derive("rate_r2", r2);
        rep.derive("rate_points", points);
    }

    let mut floor = None;
    if p.floor {
        let opts = NewtonOptions {
            grad_tol: *c.floor_grad_tol,
            max_iterations: 200,
            ..NewtonOptions::new(Target::Minimum)
        };
        let found = find_stationary(&model, &theta, &opts)
            .map_err(|e| RunError::Other(format!("Newton polish of the loss floor: {e}")))?;
        let h = &found.hessian_eigenvalues;
        let top = stats::max_abs(h.iter());
        let eig_rel = h.first().copied().unwrap_or(f64::NAN) / top;
        let l_floor = found.loss;
        let min_gd = stats::min(losses.iter());
        let level = (1.0 + *p.floor_within) * l_floor;
        let reached = losses.iter().position(|&l| l <= level);
        rep.derive("floor_loss", l_floor);
        rep.derive("floor_grad_norm", found.grad_norm);
        rep.derive("floor_newton_steps", found.iterations);
        rep.derive("floor_min_eig_rel", eig_rel);
        rep.derive("final_excess_over_floor", last / l_floor - 1.0);
        for &k in &p.loss_at {
            rep.derive(&format!("excess_at_{k}"), losses[k] / l_floor - 1.0);
        }
        rep.derive("reached_floor", if reached.is_some() { 1.0 } else { 0.0 });
        if let Some(k) = reached {
            rep.derive("iterations_to_floor", k);
        }
        rep.at_most(
            "floor-newton-point",
            "floor: ‖∇L‖ at the Newton point",
            found.grad_norm,
            *c.floor_grad_tol,
        )
        .note(format!(
            "damped Newton with the exact Hessian from GD's end point, {} steps",
            found.iterations
        ));
        rep.at_least(
            "floor-lambda-lambda-2l-there-local",
            "floor: λ_min/λ_max of ∇²L there (a local minimum)",
            eig_rel,
            -*c.floor_eig_tol,
        )
        .note(format!(
            "{} zero, {} negative of {} eigenvalues",
            found.inertia.zero,
            found.inertia.negative,
            h.len()
        ));
        rep.at_least(
            "floor-floor-gd-stays-above",
            "floor: min_k L_k / L_floor (GD stays above it)",
            min_gd / l_floor,
            1.0 - *c.floor_below_tol,
        )
        .note(format!("L_floor = {l_floor:.10e}"));
        floor = Some(l_floor);
    }

    // series.csv and the run's own figure
    let mut kept: Vec<usize> = (0..=*p.iterations).step_by(*p.record_every).collect();
    if *kept.last().unwrap() != *p.iterations {
        kept.push(*p.iterations);
    }
    let mut headers = vec!["iteration", "loss"];
    if floor.is_some() {
        headers.push("loss_minus_floor");
    }
    rep.series = Table::new(&headers);
    for &k in &kept {
        let mut row = vec![(k as f64).into(), losses[k].into()];
        if let Some(f) = floor {
            row.push((losses[k] - f).into());
        }
        rep.series.push(row);
    }
    let x: Vec<f64> = kept.iter().map(|&k| k as f64).collect();
    let y: Vec<f64> = kept.iter().map(|&k| losses[k]).collect();
    let label = match student_r {
        Some(r) => format!(
            "σ_p = {}: log₁₀R̄ = {r:.2}, teacher {:.2}",
            *p.sigma_p, teacher.log10_geometric_mean
        ),
        None => format!("σ_p = {}", *p.sigma_p),
    };
    let mut panel = LinePanel::new(
        format!(
            "{} attention, d = {}, N = {}, GD on {}, η = {}",
            match p.attention {
                AttentionName::Softmax => "softmax",
                AttentionName::Linear => "linear",
            },
            draw.data.d,
            draw.data.samples,
            match p.train {
                TrainName::P => "p (v = v_T)",
                TrainName::Pv => "(p, v)",
            },
            *p.eta
        ),
        "GD iteration k",
        "training loss L_k",
    )
    .log_y()
    .series(Series::numerics(label, x, y));
    if let Some(f) = floor {
        panel = panel.hline(RefLine::new(f, "Newton floor"));
    }
    rep.figure =
        Some(Figure::single(panel).title("Gradient descent on the synthetic teacher data"));
    rep.instance = Some(teacher_instance(std::slice::from_ref(&draw), Some(p.train)));
    Ok(rep)
}

/// The synthetic draw (X alone is N·d² doubles), `iterations` GD steps keeping every loss, the
/// power iterations and the Newton polish to the floor (dimension ≤ 2d).
fn cost(p: &Params, _: &RunContext) -> Cost {
    let grad = prompt_grad(*p.d, *p.d, *p.samples);
    let iterations = n(*p.iterations);
    let dim = 2.0 * n(*p.d);
    let floor = if p.floor { 50.0 } else { 0.0 };
    synthetic_data("d, samples", 1.0, *p.d, *p.samples)
        .work("iterations", "GD steps", iterations, grad)
        .doubles("iterations", "the loss of every iteration", iterations)
        .table(
            "iterations, record_every",
            iterations / n(*p.record_every),
            2.0,
        )
        .work(
            "sharpness_iterations",
            "power iterations",
            n(p.sharpness_iterations),
            2.0 * grad,
        )
        .dense_hessians("d", floor, dim, 2.0 * grad)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "prompt.training-run",
    paper: "002",
    summary:
        "One GD trial on the synthetic teacher data (softmax or linear attention, p or (p, v)): \
         loss curve, final loss, student/teacher R, linear rate, Newton loss floor — the \
         unit the Fig. 1/Fig. 2 sweeps repeat over σ_p, d and seeds.",
    solver: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "eta_sharpness",
        "excess_at_*",
        "final_excess_over_floor",
        "final_loss",
        "floor_grad_norm",
        "floor_loss",
        "floor_min_eig_rel",
        "floor_newton_steps",
        "initial_loss",
        "iterations_to_floor",
        "log10_R_student",
        "log10_R_student_over_teacher",
        "log10_R_teacher",
        "log10_Rbar_student",
        "log10_Rbar_teacher",
        "loss_at_*",
        "max_step_increase",
        "rate_points",
        "rate_r2",
        "rate_slope",
        "reached_floor",
        "saturated_fraction_student",
        "sharpness",
    ],
    run,
};

//! The generic flow of a model family on any instance: `attnflow flow <family> --data FILE`.
//!
//! One runner serves every family. A family ([`Family`]) turns the scenario's instance files (or,
//! without files, its default instance drawn from the seed) into a [`FlowModel`]: a
//! [`GradientFlow`] that also knows its initial state, its instance (written as `instance.npz`),
//! the weight matrices whose change is analysed, and the max-margin solutions its direction is
//! expected to approach. The runner then:
//!
//! - follows the gradient flow (any integrator, linear or log clock) or runs GD, normalized GD or
//!   Polyak steps, recording loss, gradient norm and invariants;
//! - compares the direction of each weight matrix with every max-margin solution that applies
//!   (1 − cos), and checks each solution's optimality certificate;
//! - records the singular values, stable rank and effective rank of W(t) − W(0);
//! - detects plateaus and sharp drops of the loss (stagewise learning);
//! - linearizes at the end point (the Hessian's spectrum, its inertia and condition number);
//! - checks what holds for every instance: the loss never increases along the flow
//!   (dℓ/dt = −‖∇ℓ‖²), the model's invariants stay constant, the certificates hold — plus any
//!   check the family adds for its own theorems;
//! - draws a standard three-panel figure.
//!
//! Each family registers one kind, `flow.<family>` (a `static KIND: FlowKind<Its>` listed in
//! [`kinds`]), and ships one scenario file, `scenarios/<paper>/flow-<family>.toml`, which
//! `attnflow flow <family>` runs with its options as overrides:
//!
//! ```toml
//! kind = "flow.token-select"
//! title = "Token selection: the gradient flow on an instance, with its analyses"
//! seed = 0                      # draws the default instance when no file is given
//! [solver]
//! method = "bdf"
//! [params]
//! # data_file = "mine.npz"      # the family's arrays (README, "Your own data")
//! # init_file = "w0.npz"        # the initial state (may be the same file)
//! t_end = 1e4
//! clock = "log"                 # linear | log (default: the model's)
//! samples = 200
//! [params.model]                # the family's own options (sizes of the default instance, …)
//! [checks]
//! loss_rise = 1e-8              # relative rise of the loss tolerated (integration error)
//! invariant_drift = 1e-8
//! [quick]
//! t_end = 1e2
//! ```

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::cost::{n, Cost, ODE_STEPS};
use super::registry::{Prepared, ScenarioKind};
use super::{Cell, Check, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::analysis::fit::TimeAxis;
use crate::analysis::linearize::{conditioning, hessian, inertia, symmetric_eigenvalues};
use crate::analysis::spectra::SingularSpectrum;
use crate::analysis::stages::{detect_stages, StageOptions};
use crate::flow::{
    gradient_descent, integrate, integrate_log_time, linspace, logspace, Descent, DiscreteConfig,
    GradientFlow, Method, OdeConfig, Recording, StepRule, Trajectory,
};
use crate::instance::{Arrays, InstanceError};
use crate::plot::{Figure, FigureWidth, LinePanel, Series};
use crate::stats;

/// `impl GradientFlow for $ty` forwarding every method to the model `$model` (an expression in
/// `$s`, the receiver): each family's adapter is its paper's model plus the instance it was built
/// on, and adds nothing to the flow itself.
macro_rules! forward_gradient_flow {
    ($ty:ty, $s:ident => $model:expr) => {
        impl crate::flow::GradientFlow for $ty {
            fn dim(&$s) -> usize {
                crate::flow::GradientFlow::dim($model)
            }
            fn loss(&$s, z: &[f64]) -> f64 {
                crate::flow::GradientFlow::loss($model, z)
            }
            fn grad(&$s, z: &[f64], g: &mut [f64]) {
                crate::flow::GradientFlow::grad($model, z, g)
            }
            fn hvp(&$s, z: &[f64], u: &[f64], out: &mut [f64]) {
                crate::flow::GradientFlow::hvp($model, z, u, out)
            }
            fn invariant_names(&$s) -> Vec<String> {
                crate::flow::GradientFlow::invariant_names($model)
            }
            fn invariants(&$s, z: &[f64], out: &mut [f64]) {
                crate::flow::GradientFlow::invariants($model, z, out)
            }
        }
    };
}

mod diagonal;
mod kq;
mod prompt;
#[cfg(test)]
mod tests;
mod token_select;

mod histogram;

/// A model family's side of the generic flow.
///
/// A family knows its instance layout (the arrays of its data and initial state, see
/// [`crate::instance`]) and builds its model from arrays in memory — which the scenario layer
/// reads from `data_file`/`init_file`, the Python package passes from numpy, and a Rust user
/// builds by hand — or draws its default instance from the scenario's seed.
pub trait Family: Sync {
    /// The family's name on the command line, e.g. `token-select`; the kind is `flow.<name>`
    /// and the scenario file `flow-<name>.toml`.
    fn name(&self) -> &'static str;
    /// The registered kind, `flow.<name>` (a literal, since kind names are `'static`).
    fn kind(&self) -> &'static str;
    /// The paper (seed) whose model this is, e.g. `003`.
    fn paper(&self) -> &'static str;
    /// One line: the model and the instance it reads.
    fn summary(&self) -> &'static str;
    /// The default instance (data and initial state in one set of arrays), drawn from the
    /// scenario's seed ([`Scenario::rng`]) with the family's options `[params.model]`
    /// (parse them with `sc.typed_subtable("params.model", options.clone())`, so errors carry
    /// the key path). Errors are bad input (exit 2, nothing written).
    fn default_instance(&self, sc: &Scenario, options: &toml::Table) -> Result<Arrays, InputError>;
    /// The model on an instance: `data` holds the data arrays, `init` the initial state (the
    /// two may be the same set, e.g. a run's `instance.npz`). Reads and validates through the
    /// family's [`crate::instance::InstanceFile`] layouts: shapes, finiteness, the family's
    /// assumptions, each error naming the array (or entry) and the reason. `options` are the
    /// family's `[params.model]` entries that change the model (not the instance), e.g. the loss.
    fn model(
        &self,
        data: &Arrays,
        init: &Arrays,
        options: &toml::Table,
    ) -> Result<Box<dyn FlowModel>, InstanceError>;
}

/// The model a flow scenario runs: the family's model on the instance files `params.data_file`
/// and `params.init_file` (each defaulting to the other, then to the family's default instance
/// drawn from the seed). An error names the file that holds the offending array, the array and
/// the reason.
pub fn build_model(
    family: &dyn Family,
    sc: &Scenario,
    p: &Params,
) -> Result<Box<dyn FlowModel>, InputError> {
    let read = |key: &str, path: &PathBuf| -> Result<(PathBuf, Arrays), InputError> {
        let path = sc.input_path(key, path);
        Arrays::read(&path).map(|a| (path.clone(), a)).map_err(|e| {
            InputError::new(
                &path,
                e.key,
                format!("{} (file given by params.{key})", e.reason),
            )
        })
    };
    let data = p
        .data_file
        .as_ref()
        .map(|f| read("data_file", f))
        .transpose()?;
    let init = p
        .init_file
        .as_ref()
        .map(|f| read("init_file", f))
        .transpose()?;
    let default = match (&data, &init) {
        (None, None) => Some(family.default_instance(sc, &p.model)?),
        _ => None,
    };
    let (data_arrays, init_arrays) = match (&data, &init, &default) {
        (Some((_, d)), Some((_, i)), _) => (d, i),
        (Some((_, d)), None, _) => (d, d),
        (None, Some((_, i)), _) => (i, i),
        (None, None, Some(a)) => (a, a),
        (None, None, None) => unreachable!("a default instance is drawn when no file is given"),
    };
    family
        .model(data_arrays, init_arrays, &p.model)
        .map_err(|e| {
            // The file holding the offending array: the init file for an array only it has.
            let array = e.key.split('[').next().unwrap_or("").trim();
            let (path, key) = match (&data, &init) {
                (Some((_, d)), Some((ip, _))) if d.get(array).is_none() => (ip, "init_file"),
                (Some((dp, _)), _) => (dp, "data_file"),
                (None, Some((ip, _))) => (ip, "init_file"),
                (None, None) => (&sc.path, "model"),
            };
            let from = if data.is_none() && init.is_none() {
                "the default instance of [params.model]".to_string()
            } else {
                format!("file given by params.{key}")
            };
            InputError::new(path, e.key, format!("{} ({from})", e.reason))
        })
}

/// A model ready to run: the loss with its exact derivatives, and what the analyses need.
/// `Send` only: a run owns its model on one thread, so models may keep `RefCell` workspaces
/// (no allocation in the right-hand side) without a lock.
pub trait FlowModel: GradientFlow + Send {
    fn initial_state(&self) -> Vec<f64>;
    /// The data and initial state, as written to `instance.npz` (and read back by
    /// [`build_model`] to the same model).
    fn instance(&self) -> Arrays;
    /// The weight matrices of state `z` whose change W(t) − W(0) is analysed, by name
    /// (e.g. `("W", K Qᵀ)`; a diagonal model gives a 1 × d or d × d matrix).
    fn matrices(&self, z: &[f64]) -> Vec<(String, DMatrix<f64>)>;
    /// The max-margin solutions the theory says a matrix's direction approaches, each with its
    /// certificate. Empty where none applies (e.g. regression losses).
    fn max_margin(&self) -> Result<Vec<MaxMargin>, String> {
        Ok(Vec::new())
    }
    /// The clock when the scenario does not choose: `Log` for losses that decay like 1/t.
    fn default_clock(&self) -> Clock {
        Clock::Linear
    }
    /// The family's own theorem checks on the finished trajectory (none by default).
    fn check(&self, _traj: &Trajectory, _rep: &mut Report) {}
}

/// A max-margin solution and its optimality certificate.
pub struct MaxMargin {
    /// As shown in tables and legends, e.g. "W-SVM" or "nuclear-norm SVM".
    pub name: String,
    /// The matrix of [`FlowModel::matrices`] whose direction is compared with it.
    pub matrix: String,
    pub solution: DMatrix<f64>,
    /// The certificate's residuals (KKT stationarity, feasibility, complementarity, gap), each
    /// held to `tolerance`.
    pub certificate: Vec<(String, f64)>,
    pub tolerance: f64,
}

/// Linear time, or the log clock s = ln(1 + t/τ) for flows followed over many decades.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    Linear,
    Log,
}

/// The gradient flow, or one of the papers' discrete optimizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    #[default]
    Flow,
    Gd,
    Ngd,
    Polyak,
}

/// `[params]` of every `flow.<family>` scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The data (an instance file, `.npz` or `.json`); without it, the family's default instance.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The initial state (may be the same file as the data); without it, the family's default.
    #[serde(default)]
    pub init_file: Option<PathBuf>,
    #[serde(default)]
    pub optimizer: Optimizer,
    /// Horizon of the flow (required for `optimizer = "flow"`).
    #[serde(default)]
    pub t_end: Option<f64>,
    /// Clock of the flow; the model's default when absent.
    #[serde(default)]
    pub clock: Option<Clock>,
    /// Time scale τ of the log clock (t ≪ τ runs linearly).
    #[serde(default = "default_tau")]
    pub tau: f64,
    /// Step size of GD / normalized GD, cap of the Polyak step.
    #[serde(default)]
    pub eta: Option<f64>,
    /// Iterations of a discrete optimizer.
    #[serde(default)]
    pub steps: Option<usize>,
    /// The Polyak step's target loss ℓ* (0 for separable data under exponential-type losses).
    #[serde(default)]
    pub loss_star: f64,
    /// Recorded samples (linear or log-spaced in time or iterations).
    #[serde(default = "default_samples")]
    pub samples: usize,
    /// Largest state dimension whose end-point Hessian is assembled and diagonalized.
    #[serde(default = "default_hessian_max_dim")]
    pub hessian_max_dim: usize,
    /// Stage detection on ln ℓ against ln t: a drop is where −d ln ℓ / d ln t exceeds this…
    #[serde(default = "default_stage_rate")]
    pub stage_rate: f64,
    /// …and ln ℓ falls by at least this much.
    #[serde(default = "default_stage_log_drop")]
    pub stage_log_drop: f64,
    /// Family options (sizes of the default instance, loss, …), read by the family.
    #[serde(default)]
    pub model: toml::Table,
}

fn default_tau() -> f64 {
    1.0
}
fn default_samples() -> usize {
    200
}
fn default_hessian_max_dim() -> usize {
    400
}
fn default_stage_rate() -> f64 {
    1.0
}
fn default_stage_log_drop() -> f64 {
    0.5
}

/// `[checks]` of every `flow.<family>` scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Largest rise of the loss between consecutive samples, relative to ℓ(0), allowed along the
    /// flow. Gradient flow never increases the loss, so any rise is integration error: the bound
    /// is the tolerance of the integration, not of the theory.
    pub loss_rise: f64,
    /// Largest drift of an invariant, relative to max(1, |I(0)|).
    pub invariant_drift: f64,
}

/// The kind `flow.<family>` of family `F` (each family declares
/// `pub static KIND: FlowKind<Its> = FlowKind(Its);` and [`kinds`] lists it).
pub struct FlowKind<F>(pub F);

/// Every family's generic flow.
/// A family's `[params.model]` table read into its options type; a bad table (a Rust caller's:
/// a scenario file's was refused while it was parsed) is an error naming `params.model`.
pub fn model_options<T: serde::de::DeserializeOwned>(
    table: &toml::Table,
) -> Result<T, InstanceError> {
    table
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| InstanceError::new("params.model", e.to_string()))
}

pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &histogram::KIND,
        &kq::KIND,
        &prompt::KIND,
        &token_select::KIND,
        &diagonal::KIND,
    ]
}

/// Every model family, by itself (for building a family's model from arrays in memory: the
/// Python package, a Rust user), in the order of [`kinds`].
pub fn families() -> Vec<&'static dyn Family> {
    vec![
        &histogram::KIND.0,
        &kq::KIND.0,
        &prompt::KIND.0,
        &token_select::KIND.0,
        &diagonal::KIND.0,
    ]
}

/// The integrator when the scenario has no `[solver]`: Bdf with the exact Hessian-vector
/// product (gradient flows of attention models are often stiff), at tight tolerances.
const DEFAULT_SOLVER: OdeConfig = OdeConfig::new(Method::Bdf, 1e-8, 1e-10);

const QUANTITIES: &[&str] = &[
    "dim",
    "final_loss",
    "final_grad_norm",
    "loss_rise",
    "invariant_drift",
    "drops",
    "one_minus_cos.*",
    "stable_rank.*",
    "effective_rank.*",
    "hessian.*",
    // the families' own measurements (FlowModel::check)
    "columns_flipped",
    "min_phi_opt",
    "log10_r_start",
    "log10_r_end",
    "pl_ratio_paper_min",
];

impl<F: Family> ScenarioKind for FlowKind<F> {
    fn name(&self) -> &'static str {
        self.0.kind()
    }
    fn paper(&self) -> &'static str {
        self.0.paper()
    }
    fn summary(&self) -> &'static str {
        self.0.summary()
    }
    fn quantities(&self) -> &'static [&'static str] {
        QUANTITIES
    }
    fn prepare(&self, sc: &Scenario) -> Result<Prepared, InputError> {
        let p: Params = sc.typed_params()?;
        let c: Checks = sc.typed_checks()?;
        let ode = sc.ode_config(DEFAULT_SOLVER)?;
        validate(&p, &c, sc)?;
        // files are sized from their headers before they are read
        let files = crate::scenario::cost::instance_files(sc);
        files.check(sc)?;
        let model = build_model(&self.0, sc, &p)?;
        let cost = cost(&p, model.dim(), &ode).and(files);
        cost.check(sc)?;
        Ok(Prepared::new(
            serde_json::to_value(&p).unwrap_or_default(),
            serde_json::to_value(&c).unwrap_or_default(),
            ode,
            cost,
            Box::new(move |ctx| run(model.as_ref(), &p, &c, ctx)),
        ))
    }
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let positive = |key: &str, x: Option<f64>, what: &str| match x {
        Some(v) if v.is_finite() && v > 0.0 => Ok(()),
        Some(v) => Err(sc.invalid(key, format!("must be positive, got {v}"))),
        None => Err(sc.invalid(key, format!("required {what}"))),
    };
    match p.optimizer {
        Optimizer::Flow => positive("params.t_end", p.t_end, "for the flow")?,
        Optimizer::Gd | Optimizer::Ngd | Optimizer::Polyak => {
            positive("params.eta", p.eta, "for a discrete optimizer")?;
            match p.steps {
                Some(s) if s >= 1 => {}
                _ => {
                    return Err(
                        sc.invalid("params.steps", "required (≥ 1) for a discrete optimizer")
                    )
                }
            }
        }
    }
    sc.require_positive(&[("params.tau", p.tau), ("params.stage_rate", p.stage_rate)])?;
    if !(p.stage_log_drop.is_finite() && p.stage_log_drop >= 0.0) {
        return Err(sc.invalid("params.stage_log_drop", "must be ≥ 0"));
    }
    if p.samples < 3 {
        return Err(sc.invalid("params.samples", "need at least 3 samples"));
    }
    if !p.loss_star.is_finite() {
        return Err(sc.invalid("params.loss_star", "must be finite"));
    }
    for (key, v) in [
        ("checks.loss_rise", c.loss_rise),
        ("checks.invariant_drift", c.invariant_drift),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(sc.invalid(key, format!("must be a finite number ≥ 0, got {v}")));
        }
    }
    Ok(())
}

/// One integration (or optimizer run) of a `dim`-dimensional model whose gradient costs about
/// `10·dim` operations per sample size, the recorded states and matrices, and the end-point
/// Hessian when `dim` is small enough.
fn cost(p: &Params, dim: usize, ode: &OdeConfig) -> Cost {
    let d = n(dim);
    let grad_flops = 20.0 * d;
    let run = match p.optimizer {
        Optimizer::Flow => {
            Cost::new().ode_steps("t_end", 1.0, ODE_STEPS, d, grad_flops, ode.method)
        }
        _ => Cost::new().work(
            "steps",
            format!("{} optimizer steps", p.steps.unwrap_or(0)),
            n(p.steps.unwrap_or(0)),
            2.0 * grad_flops,
        ),
    };
    let hess = if dim <= p.hessian_max_dim {
        Cost::new().dense_hessians("hessian_max_dim", 1.0, d, 2.0 * grad_flops)
    } else {
        Cost::new()
    };
    run.and(hess)
        .records("samples", 1.0, n(p.samples), d)
        .table("samples", n(p.samples), 8.0)
}

/// The recorded times of the flow: linear, or log-spaced from τ·1e-3 when the clock is log (t = 0
/// first, so W(0) is a sample).
fn sample_times(t_end: f64, samples: usize, clock: Clock, tau: f64) -> Vec<f64> {
    match clock {
        Clock::Linear => linspace(0.0, t_end, samples),
        Clock::Log => {
            let start = (tau * 1e-3).min(t_end * 1e-3);
            let mut t = vec![0.0];
            t.extend(logspace(start, t_end, samples - 1));
            t
        }
    }
}

/// Runs the flow or optimizer and every analysis on `model`.
pub fn run(
    model: &dyn FlowModel,
    p: &Params,
    c: &Checks,
    ctx: &RunContext,
) -> Result<Report, RunError> {
    let z0 = model.initial_state();
    let clock = p.clock.unwrap_or_else(|| model.default_clock());
    let traj = match p.optimizer {
        Optimizer::Flow => {
            let t_end = p.t_end.expect("validated");
            let times = sample_times(t_end, p.samples, clock, p.tau);
            follow_flow(model, &z0, &times, clock, p.tau, ctx)?
        }
        discrete => {
            let eta = p.eta.expect("validated");
            let rule = match discrete {
                Optimizer::Gd => StepRule::Constant { eta },
                Optimizer::Ngd => StepRule::Normalized { eta },
                _ => StepRule::Polyak {
                    loss_star: p.loss_star,
                    cap: eta,
                },
            };
            let steps = p.steps.expect("validated");
            let recording = match clock {
                Clock::Linear => Recording::Every((steps / (p.samples - 1)).max(1)),
                Clock::Log => Recording::LogSpaced(p.samples),
            };
            gradient_descent(model, &z0, &DiscreteConfig::new(rule, steps, recording))?
        }
    };
    let mut rep = Report::default();
    rep.stats(p_label(p), &traj.stats);
    rep.instance = Some(model.instance());
    rep.derive("dim", model.dim());
    rep.derive("final_loss", *traj.loss.last().unwrap_or(&f64::NAN));
    rep.derive(
        "final_grad_norm",
        *traj.grad_norm.last().unwrap_or(&f64::NAN),
    );

    descent_and_invariants(&traj, p, c, &mut rep);
    let margins = model.max_margin().map_err(RunError::Other)?;
    for m in &margins {
        let worst = stats::max(m.certificate.iter().map(|(_, r)| *r));
        rep.at_most(
            &format!("certificate-largest-residual.{}", m.name),
            &format!("certificate of the {}: largest residual", m.name),
            worst,
            m.tolerance,
        )
        .note(
            m.certificate
                .iter()
                .map(|(k, r)| format!("{k} = {r:.3e}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    let analysis = analyse(model, &traj, &margins);
    for (m, cosines) in margins.iter().zip(&analysis.one_minus_cos) {
        rep.derive(
            &format!("one_minus_cos.{}", m.name),
            *cosines.last().unwrap_or(&f64::NAN),
        );
    }
    for (name, ranks) in &analysis.ranks {
        let last = ranks.last().copied().unwrap_or((f64::NAN, f64::NAN));
        rep.derive(&format!("stable_rank.{name}"), last.0);
        rep.derive(&format!("effective_rank.{name}"), last.1);
    }
    stages(&traj, p, &mut rep);
    if model.dim() <= p.hessian_max_dim {
        end_point_spectrum(model, traj.last_state(), &mut rep)?;
    } else {
        rep.derive(
            "hessian.skipped",
            format!("dimension {} > hessian_max_dim", model.dim()),
        );
    }
    model.check(&traj, &mut rep);
    rep.series = series_table(&traj, &margins, &analysis);
    rep.tables
        .push(("spectra".into(), spectra_table(&traj, &analysis)));
    rep.figure = Some(figure(&traj, &margins, &analysis, clock));
    Ok(rep)
}

/// How many pieces a flow is integrated in: the progress bar moves between them. Each piece
/// restarts the integrator from the state reached (always the same pieces, so outputs do not
/// depend on whether a terminal is watching).
const PIECES: usize = 20;

/// Integrates the flow over `times` in [`PIECES`] consecutive pieces with a progress bar on a
/// terminal's stderr (hidden otherwise), recording loss, gradient norm and invariants.
fn follow_flow(
    model: &dyn FlowModel,
    z0: &[f64],
    times: &[f64],
    clock: Clock,
    tau: f64,
    ctx: &RunContext,
) -> Result<Trajectory, RunError> {
    let bar = ProgressBar::with_draw_target(Some(PIECES as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] t = {msg}, {elapsed} (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(ctx.scenario.name.clone());
    let per_piece = (times.len() - 1).div_ceil(PIECES).max(1);
    let mut traj = Trajectory::new(model.dim());
    let mut start = 0;
    let mut z = z0.to_vec();
    while start + 1 < times.len() {
        let end = (start + per_piece).min(times.len() - 1);
        let piece = &times[start..=end];
        let mut tr = match clock {
            Clock::Linear => integrate(&Descent(model), &z, piece, &ctx.ode, None)?,
            Clock::Log => integrate_log_time(&Descent(model), &z, piece, tau, &ctx.ode)?,
        };
        tr.record_diagnostics(model);
        if let Some((k, quantity)) = tr.first_non_finite() {
            return Err(crate::flow::FlowError::NonFinite {
                quantity,
                t: tr.t[k],
            }
            .into());
        }
        z = tr.last_state().to_vec();
        traj.append(tr);
        bar.set_message(format!("{:.3e}", times[end]));
        bar.inc(1);
        start = end;
    }
    bar.finish_and_clear();
    Ok(traj)
}

fn p_label(p: &Params) -> &'static str {
    match p.optimizer {
        Optimizer::Flow => "flow",
        Optimizer::Gd => "gd",
        Optimizer::Ngd => "normalized_gd",
        Optimizer::Polyak => "polyak",
    }
}

/// The loss never rises along the flow; invariants stay constant.
fn descent_and_invariants(traj: &Trajectory, p: &Params, c: &Checks, rep: &mut Report) {
    let l0 = traj.loss[0].abs().max(f64::MIN_POSITIVE);
    let rise = stats::max(traj.loss.windows(2).map(|w| (w[1] - w[0]) / l0));
    rep.derive("loss_rise", rise);
    match p.optimizer {
        Optimizer::Flow => {
            rep.at_most(
                "largest-rise-loss-along-flow-relative",
                "largest rise of the loss along the flow (relative to ℓ(0))",
                rise,
                c.loss_rise,
            )
            .note("dℓ/dt = −‖∇ℓ‖² ≤ 0: any rise is integration error");
        }
        _ => rep.skip(
            "largest-rise-loss-along-flow-relative",
            "largest rise of the loss along the flow (relative to ℓ(0))",
            "a discrete step may raise the loss (descent holds only below a step size set by the \
             smoothness constant)",
        ),
    }
    if !traj.invariants.is_empty() {
        let drift = traj.max_invariant_drift();
        rep.derive("invariant_drift", drift);
        let names: Vec<&str> = traj.invariants.iter().map(|(n, _)| n.as_str()).collect();
        let check = Check::at_most(
            "largest-drift-invariants",
            "largest drift of the invariants",
            drift,
            c.invariant_drift,
        )
        .note(format!("{} (relative to max(1, |I(0)|))", names.join(", ")));
        match p.optimizer {
            Optimizer::Flow => rep.check(check),
            _ => rep.skip(
                "largest-drift-invariants",
                "largest drift of the invariants",
                "the invariants are conserved by the flow, not by discrete steps",
            ),
        }
    }
}

/// What is computed per sample from the model's matrices.
struct Analysis {
    /// Per max-margin solution: 1 − cos(W(t), W_mm) at each sample.
    one_minus_cos: Vec<Vec<f64>>,
    /// Per matrix: name and (stable rank, effective rank) of W(t) − W(0) at each sample.
    ranks: Vec<(String, Vec<(f64, f64)>)>,
    /// Per matrix: the singular values of W(t) − W(0) at each sample (descending).
    singular: Vec<(String, Vec<Vec<f64>>)>,
}

fn analyse(model: &dyn FlowModel, traj: &Trajectory, margins: &[MaxMargin]) -> Analysis {
    let start = model.matrices(traj.state(0));
    let mut out = Analysis {
        one_minus_cos: vec![Vec::with_capacity(traj.len()); margins.len()],
        ranks: start.iter().map(|(n, _)| (n.clone(), Vec::new())).collect(),
        singular: start.iter().map(|(n, _)| (n.clone(), Vec::new())).collect(),
    };
    for k in 0..traj.len() {
        let now = model.matrices(traj.state(k));
        for (i, ((_, w), (_, w0))) in now.iter().zip(&start).enumerate() {
            let delta = w - w0;
            let (sv, ranks) = match SingularSpectrum::of(&delta) {
                Ok(s) if delta.norm() > 0.0 => {
                    (s.values().to_vec(), (s.stable_rank(), s.effective_rank()))
                }
                _ => (
                    vec![0.0; delta.nrows().min(delta.ncols())],
                    (f64::NAN, f64::NAN),
                ),
            };
            out.ranks[i].1.push(ranks);
            out.singular[i].1.push(sv);
        }
        for (j, m) in margins.iter().enumerate() {
            let w = now.iter().find(|(n, _)| *n == m.matrix).map(|(_, w)| w);
            let value = w.map_or(f64::NAN, |w| {
                crate::analysis::svm::one_minus_cos(w.as_slice(), m.solution.as_slice())
            });
            out.one_minus_cos[j].push(value);
        }
    }
    out
}

/// Plateaus and sharp drops of ℓ against ln t (samples at t > 0 with ℓ > 0).
fn stages(traj: &Trajectory, p: &Params, rep: &mut Report) {
    let keep: Vec<usize> = (0..traj.len())
        .filter(|&k| traj.t[k] > 0.0 && traj.loss[k] > 0.0)
        .collect();
    let t: Vec<f64> = keep.iter().map(|&k| traj.t[k]).collect();
    let y: Vec<f64> = keep.iter().map(|&k| traj.loss[k]).collect();
    let options = StageOptions {
        axis: TimeAxis::Log,
        rate_threshold: p.stage_rate,
        min_log_drop: p.stage_log_drop,
        half_window: 1,
    };
    match detect_stages(&t, &y, &options) {
        Ok(s) => {
            rep.derive("drops", s.drops.len());
            rep.derive(
                "drop_times",
                s.drops.iter().map(|d| d.steepest).collect::<Vec<_>>(),
            );
            rep.derive(
                "plateau_levels",
                s.plateaus.iter().map(|p| p.level).collect::<Vec<_>>(),
            );
        }
        Err(e) => rep.derive("drops", format!("not detected: {e}")),
    }
}

/// The Hessian at the end point: its extreme eigenvalues, inertia and condition number.
fn end_point_spectrum(model: &dyn FlowModel, z: &[f64], rep: &mut Report) -> Result<(), RunError> {
    let h = hessian(model, z).map_err(|e| RunError::Other(format!("end-point Hessian: {e}")))?;
    let eig = symmetric_eigenvalues(&h.matrix)
        .map_err(|e| RunError::Other(format!("end-point Hessian spectrum: {e}")))?;
    const ZERO: f64 = 1e-10;
    let inert = inertia(&eig, ZERO);
    rep.derive("hessian.lambda_min", stats::min(&eig));
    rep.derive("hessian.lambda_max", stats::max(&eig));
    rep.derive("hessian.negative", inert.negative);
    rep.derive("hessian.zero", inert.zero);
    rep.derive("hessian.positive", inert.positive);
    if let Ok(cond) = conditioning(&eig, ZERO) {
        rep.derive("hessian.kappa_nonzero", cond.kappa_nonzero);
    }
    let mut table = Table::new(&["index", "eigenvalue"]);
    for (i, l) in eig.iter().enumerate() {
        table.push(vec![Cell::Num(i as f64), (*l).into()]);
    }
    rep.tables.push(("hessian_spectrum".into(), table));
    Ok(())
}

fn series_table(traj: &Trajectory, margins: &[MaxMargin], a: &Analysis) -> Table {
    let mut headers: Vec<String> = vec!["t".into(), "loss".into(), "grad_norm".into()];
    headers.extend(traj.invariants.iter().map(|(n, _)| n.clone()));
    headers.extend(margins.iter().map(|m| format!("one_minus_cos {}", m.name)));
    for (name, _) in &a.ranks {
        headers.push(format!("stable_rank d{name}"));
        headers.push(format!("effective_rank d{name}"));
    }
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut table = Table::new(&refs);
    for k in 0..traj.len() {
        let mut row = vec![
            Cell::Num(traj.t[k]),
            traj.loss[k].into(),
            traj.grad_norm[k].into(),
        ];
        row.extend(traj.invariants.iter().map(|(_, v)| Cell::from(v[k])));
        row.extend(a.one_minus_cos.iter().map(|v| Cell::from(v[k])));
        for (_, r) in &a.ranks {
            row.push(r[k].0.into());
            row.push(r[k].1.into());
        }
        table.push(row);
    }
    table
}

/// t, matrix, σ₁ ≥ σ₂ ≥ … of W(t) − W(0).
fn spectra_table(traj: &Trajectory, a: &Analysis) -> Table {
    let width = a
        .singular
        .iter()
        .flat_map(|(_, s)| s.first().map(Vec::len))
        .max()
        .unwrap_or(0);
    let mut headers = vec!["t".to_string(), "matrix".to_string()];
    headers.extend((1..=width).map(|i| format!("sigma_{i}")));
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut table = Table::new(&refs);
    for (name, per_sample) in &a.singular {
        for (k, sv) in per_sample.iter().enumerate() {
            let mut row = vec![Cell::Num(traj.t[k]), Cell::Text(name.clone())];
            row.extend(
                (0..width).map(|i| sv.get(i).map_or(Cell::Text(String::new()), |&s| s.into())),
            );
            table.push(row);
        }
    }
    table
}

/// Loss and gradient norm; 1 − cos to each max-margin solution; singular values of ΔW.
fn figure(traj: &Trajectory, margins: &[MaxMargin], a: &Analysis, clock: Clock) -> Figure {
    let positive = |k: usize| traj.t[k] > 0.0 || clock == Clock::Linear;
    let keep: Vec<usize> = (0..traj.len()).filter(|&k| positive(k)).collect();
    let t: Vec<f64> = keep.iter().map(|&k| traj.t[k]).collect();
    let pick = |v: &[f64]| keep.iter().map(|&k| v[k]).collect::<Vec<f64>>();
    let axis = |panel: LinePanel| match clock {
        Clock::Log => panel.log_x(),
        Clock::Linear => panel,
    };
    let mut loss = axis(LinePanel::new("Loss and gradient norm", "t", "value").log_y())
        .series(Series::numerics("ℓ(t)", t.clone(), pick(&traj.loss)).color(0))
        .series(Series::numerics("‖∇ℓ(t)‖", t.clone(), pick(&traj.grad_norm)).color(1));
    if traj.loss.iter().any(|&l| l <= 0.0) {
        loss = axis(LinePanel::new("Loss and gradient norm", "t", "value"))
            .series(Series::numerics("ℓ(t)", t.clone(), pick(&traj.loss)).color(0))
            .series(Series::numerics("‖∇ℓ(t)‖", t.clone(), pick(&traj.grad_norm)).color(1));
    }
    let mut fig = Figure::new(3).width(FigureWidth::Full).panel(loss);
    if !margins.is_empty() {
        let mut panel = axis(LinePanel::new("Direction vs max-margin", "t", "1 − cos").log_y());
        for (j, m) in margins.iter().enumerate() {
            panel = panel.series(
                Series::numerics(
                    format!("{} vs {}", m.matrix, m.name),
                    t.clone(),
                    pick(&a.one_minus_cos[j]),
                )
                .color(j),
            );
        }
        fig = fig.panel(panel);
    }
    if let Some((name, per_sample)) = a.singular.first() {
        let count = per_sample.first().map_or(0, Vec::len).min(6);
        // the matrix's name as figure text: "beta" (a column name of series.csv) is β
        let shown = if name == "beta" { "β" } else { name.as_str() };
        let mut panel = axis(LinePanel::new(
            format!("Singular values of {shown}(t) − {shown}(0)"),
            "t",
            "σ_{i}",
        ));
        let all_positive = keep
            .iter()
            .skip(1)
            .all(|&k| per_sample[k].iter().take(count).all(|&s| s > 0.0));
        if all_positive {
            panel = panel.log_y();
        }
        for i in 0..count {
            let y: Vec<f64> = keep.iter().map(|&k| per_sample[k][i]).collect();
            let (x, y): (Vec<f64>, Vec<f64>) = t
                .iter()
                .zip(y)
                .filter(|(_, s)| !all_positive || *s > 0.0)
                .map(|(&t, s)| (t, s))
                .unzip();
            panel = panel.series(Series::numerics(format!("σ_{{{}}}", i + 1), x, y).color(i));
        }
        fig = fig.panel(panel);
    }
    fig
}

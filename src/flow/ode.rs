//! The bridge to diffsol: integrates any [`VectorField`] with an adaptive method, samples the
//! solution on a requested time grid from the integrator's dense output (not at every internal
//! step), finds events (roots of user functions), and records the solver's work.
//!
//! The implicit methods (Bdf, Esdirk34, TrBdf2) assemble their Newton matrix from the field's
//! exact Jacobian-vector product: for a gradient flow that is −∇²ℓ·u, the analytic Hessian-vector
//! product. No finite differences reach the solver.
//!
//! Their linear solver is a dense factorization of that Newton matrix ([`LinearSolver`]): faer's
//! Cholesky where the field declares a symmetric Jacobian (gradient flows), faer's blocked LU with
//! partial pivoting on large non-symmetric systems, nalgebra's LU on small ones (least
//! overhead). All run on one thread, so results do not depend on the thread count.

use std::cell::Cell;
use std::time::Instant;

use diffsol::{
    FaerMat, FaerVec, NalgebraLU, NalgebraMat, NalgebraVec, OdeBuilder, OdeEquations,
    OdeSolverMethod, OdeSolverStopReason, Vector, VectorCommon,
};
use serde::{Deserialize, Serialize};

use super::low_rank::{GeneralLowRank, SymmetricLowRank};
use super::lu::{PartialPivLu, SymmetricCholesky};
use super::trajectory::{Event, SolverStats, StopReason, Trajectory};
use super::{Descent, FlowError, GradientFlow, VectorField};

/// Integration method. Tsit45 for non-stiff flows; Bdf (variable order) for stiff ones;
/// the SDIRK tableaus in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Variable-order BDF/NDF (stiff, many states).
    Bdf,
    /// ESDIRK 3(4) (L-stable, moderately stiff).
    Esdirk34,
    /// TR-BDF2 (L-stable, low order).
    TrBdf2,
    /// Tsitouras 5(4) explicit Runge–Kutta (non-stiff).
    Tsit45,
    /// TR-BDF2 with matrix-free Newton–Krylov (GMRES on the exact Jacobian-vector product):
    /// stiff flows too large for a dense Newton matrix (src/flow/krylov.rs; no events).
    TrBdf2Krylov,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::Bdf,
        Method::Esdirk34,
        Method::TrBdf2,
        Method::Tsit45,
        Method::TrBdf2Krylov,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::Bdf => "bdf",
            Method::Esdirk34 => "esdirk34",
            Method::TrBdf2 => "tr_bdf2",
            Method::Tsit45 => "tsit45",
            Method::TrBdf2Krylov => "tr_bdf2_krylov",
        }
    }

    /// The method's name as the literature prints it (figure legends).
    pub fn label(self) -> &'static str {
        match self {
            Method::Bdf => "BDF",
            Method::Esdirk34 => "ESDIRK3(4)",
            Method::TrBdf2 => "TR-BDF2",
            Method::Tsit45 => "Tsit5(4)",
            Method::TrBdf2Krylov => "TR-BDF2, Newton–Krylov",
        }
    }

    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == s)
    }

    /// Whether the method solves linear systems with the exact Jacobian.
    pub fn is_implicit(self) -> bool {
        !matches!(self, Method::Tsit45)
    }
}

/// The dense factorization behind the implicit methods' Newton systems (`[solver] linear_solver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinearSolver {
    /// From [`LOW_RANK_MIN_DIM`] states the low-rank solver (which factorizes densely where the
    /// Newton matrix is not identity plus low rank); below, Cholesky from [`CHOLESKY_MIN_DIM`]
    /// states where the Jacobian is symmetric, otherwise nalgebra below [`FAER_MIN_DIM`] states
    /// and faer's LU from there up.
    #[default]
    Auto,
    /// nalgebra's LU (unblocked: O(n³) at a low rate, least overhead on tiny systems).
    Nalgebra,
    /// faer's blocked LU with partial pivoting (one thread).
    Faer,
    /// faer's Cholesky LLᵀ of the Newton matrix's lower triangle, falling back to faer's LU
    /// where a pivot is not positive: only for fields with a symmetric Jacobian (gradient flows).
    Cholesky,
    /// The Newton matrix as identity plus a low-rank matrix, found by cross approximation and
    /// solved by the Woodbury identity ([`super::low_rank`]); factorized densely (Cholesky where
    /// the Jacobian is symmetric, else LU) where it is not of low rank.
    LowRank,
}

impl LinearSolver {
    fn is_auto(&self) -> bool {
        *self == LinearSolver::Auto
    }

    /// The backend used for a system of `dim` states whose Jacobian is `symmetric` or not.
    pub fn resolve(self, dim: usize, symmetric: bool) -> LinearSolver {
        match self {
            LinearSolver::Auto if dim >= LOW_RANK_MIN_DIM => LinearSolver::LowRank,
            LinearSolver::Auto if symmetric && dim >= CHOLESKY_MIN_DIM => LinearSolver::Cholesky,
            LinearSolver::Auto if dim >= FAER_MIN_DIM => LinearSolver::Faer,
            LinearSolver::Auto => LinearSolver::Nalgebra,
            other => other,
        }
    }
}

/// From this many states up `auto` factorizes with faer. Measured inside Bdf on the tf flow
/// (t = 1, rtol 1e-8) with faer's partial-pivoting LU against nalgebra's: faer is 1.7× slower at
/// 6 states, 1.14× slower at 72 and 1.05× faster at 110; on the token-selection flow (1,025 states)
/// it is 3.6× faster. The crossover lies near 100; from 128 up faer is the safe choice.
pub const FAER_MIN_DIM: usize = 128;

/// From this many states up `auto` factorizes a symmetric Newton matrix by Cholesky. Measured
/// inside Bdf on the tf flow against nalgebra's LU: equal within noise at 30 and 42 states,
/// 1.4–1.7× faster at 56 and ~1.5× at 110 (1.85× fewer instructions).
pub const CHOLESKY_MIN_DIM: usize = 64;

/// From this many states up `auto` first looks for identity-plus-low-rank structure in the
/// Newton matrix ([`super::low_rank`]), at the cost of one pass over the matrix and at most n/16
/// cross-approximation steps before it falls back to the dense factorization for the rest of the
/// solve. Measured inside Bdf on the token-selection flow (1,025 states, Hessian rank ≤ 32): the
/// Newton matrices have rank 24 and the solve is ~5× faster than with faer's LU.
pub const LOW_RANK_MIN_DIM: usize = 256;

/// Method and tolerances of one integration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OdeConfig {
    pub method: Method,
    pub rtol: f64,
    pub atol: f64,
    /// Maximum number of accepted steps before the solve is reported as failed.
    #[serde(default = "default_max_steps")]
    pub max_steps: usize,
    /// Dense LU of the implicit methods (ignored by Tsit45). Left out of the written
    /// configuration when `auto`, so outputs of runs that do not set it keep their bytes.
    #[serde(default, skip_serializing_if = "LinearSolver::is_auto")]
    pub linear_solver: LinearSolver,
}

const DEFAULT_MAX_STEPS: usize = 2_000_000;

fn default_max_steps() -> usize {
    DEFAULT_MAX_STEPS
}

impl OdeConfig {
    pub const fn new(method: Method, rtol: f64, atol: f64) -> Self {
        OdeConfig {
            method,
            rtol,
            atol,
            max_steps: DEFAULT_MAX_STEPS,
            linear_solver: LinearSolver::Auto,
        }
    }

    /// Checks that tolerances are usable; the message names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        self.invalid_field()
            .map_or(Ok(()), |(_, reason)| Err(reason))
    }

    /// The first unusable field and why. A relative tolerance below [`MIN_RTOL`] cannot be met
    /// in f64 arithmetic (the local error estimate is itself rounded at that level), so the
    /// solver would fail at its first step.
    pub fn invalid_field(&self) -> Option<(&'static str, String)> {
        if !(self.rtol.is_finite() && self.rtol >= MIN_RTOL && self.rtol < 1.0) {
            return Some((
                "rtol",
                format!(
                    "rtol must be in [{MIN_RTOL:e}, 1) (f64 cannot meet a smaller relative \
                     tolerance), got {:e}",
                    self.rtol
                ),
            ));
        }
        if !(self.atol.is_finite() && self.atol > 0.0) {
            return Some((
                "atol",
                format!("atol must be positive and finite, got {}", self.atol),
            ));
        }
        if self.max_steps == 0 {
            return Some(("max_steps", "max_steps must be at least 1".into()));
        }
        None
    }
}

/// The smallest relative tolerance accepted: about 45 units of f64 rounding.
pub const MIN_RTOL: f64 = 1e-14;

/// Output times of an integration.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeGrid {
    /// `n` equally spaced times from `t0` to `t1` (both included).
    Linear { t0: f64, t1: f64, n: usize },
    /// t = 0 followed by `n` log-spaced times from `t_first` to `t1`: for rates and long tails.
    Log { t_first: f64, t1: f64, n: usize },
    /// Explicit increasing times; the first is the initial time.
    Points(Vec<f64>),
}

impl TimeGrid {
    pub fn times(&self) -> Vec<f64> {
        match *self {
            TimeGrid::Linear { t0, t1, n } => linspace(t0, t1, n),
            TimeGrid::Log { t_first, t1, n } => {
                let mut v = vec![0.0];
                v.extend(logspace(t_first, t1, n));
                v
            }
            TimeGrid::Points(ref p) => p.clone(),
        }
    }
}

/// `n` equally spaced values from `a` to `b` inclusive.
pub fn linspace(a: f64, b: f64, n: usize) -> Vec<f64> {
    match n {
        0 => vec![],
        1 => vec![a],
        _ => (0..n)
            .map(|k| {
                let scaled = (b - a) * k as f64;
                if k == n - 1 {
                    b
                } else if scaled.is_finite() {
                    a + scaled / (n - 1) as f64
                } else {
                    // near f64's range (b − a ≈ 1e308) scale first, so no sample overflows
                    a + (b - a) * (k as f64 / (n - 1) as f64)
                }
            })
            .collect(),
    }
}

/// `n` log-spaced values from `a` to `b` inclusive (a, b > 0).
pub fn logspace(a: f64, b: f64, n: usize) -> Vec<f64> {
    let (la, lb) = (a.ln(), b.ln());
    linspace(la, lb, n)
        .into_iter()
        .enumerate()
        .map(|(k, l)| if k == n - 1 { b } else { l.exp() })
        .collect()
}

/// An event function: writes g(t, z) ∈ ℝ^count into its last argument.
pub type EventFn<'a> = &'a dyn Fn(f64, &[f64], &mut [f64]);

/// Event functions g(t, z) ∈ ℝ^count; an event fires where a component changes sign.
pub struct Events<'a> {
    pub count: usize,
    pub func: EventFn<'a>,
    /// Stop the integration at the first event (otherwise record it and go on).
    pub terminal: bool,
}

/// Integrates ż = f(t, z) from `z0` at `times[0]`, sampling at every entry of `times`
/// (increasing). Returns the samples, the events, and the solver statistics; a solver failure
/// returns [`FlowError::SolverFailed`] with the time reached.
pub fn integrate<V: VectorField + ?Sized>(
    field: &V,
    z0: &[f64],
    times: &[f64],
    cfg: &OdeConfig,
    events: Option<&Events>,
) -> Result<Trajectory, FlowError> {
    let n = field.dim();
    check_inputs(n, z0, times, cfg)?;
    if cfg.method == Method::TrBdf2Krylov {
        if events.is_some() {
            return Err(FlowError::Invalid(
                "tr_bdf2_krylov does not locate events: use bdf, esdirk34, tr_bdf2 or tsit45"
                    .into(),
            ));
        }
        return super::krylov::integrate(field, z0, times, cfg);
    }
    let rhs_count = Cell::new(0usize);
    let jvp_count = Cell::new(0usize);
    // Trait objects, so that the solver code below is compiled once per backend rather than
    // once per field type and backend.
    let rhs: Rhs = &|z, _p, t, dz| {
        rhs_count.set(rhs_count.get() + 1);
        field.rhs(t, z, dz);
    };
    let jac: Jvp = &|z, _p, t, u, out| {
        jvp_count.set(jvp_count.get() + 1);
        field.jvp(t, z, u, out);
    };
    let init: Init = &|_p, _t, y| y.copy_from_slice(z0);
    let start = Instant::now();
    let symmetric = field.jacobian_is_symmetric();
    if cfg.linear_solver == LinearSolver::Cholesky && !symmetric {
        return Err(FlowError::Invalid(
            "linear_solver = \"cholesky\" needs a symmetric Jacobian (a gradient flow); \
             use auto, nalgebra or faer"
                .into(),
        ));
    }
    let problem: Closures = (rhs, jac, init, n);
    let mut traj = match cfg.linear_solver.resolve(n, symmetric) {
        LinearSolver::Cholesky => {
            solve_with::<FaerMat<f64>, SymmetricCholesky>(problem, times, cfg, events)?
        }
        LinearSolver::Faer => {
            solve_with::<FaerMat<f64>, PartialPivLu>(problem, times, cfg, events)?
        }
        LinearSolver::LowRank if symmetric => {
            solve_with::<FaerMat<f64>, SymmetricLowRank>(problem, times, cfg, events)?
        }
        LinearSolver::LowRank => {
            solve_with::<FaerMat<f64>, GeneralLowRank>(problem, times, cfg, events)?
        }
        _ => solve_with::<NalgebraMat<f64>, NalgebraLU<f64>>(problem, times, cfg, events)?,
    };
    traj.stats.rhs_evals = rhs_count.get();
    traj.stats.jvp_evals = jvp_count.get();
    traj.stats.wall_seconds = start.elapsed().as_secs_f64();
    Ok(traj)
}

/// diffsol's closures: f(z, p, t, dz), (∂f/∂z)(z, p, t)·u, and z0(p, t).
type Rhs<'a> = &'a dyn Fn(&[f64], &[f64], f64, &mut [f64]);
type Jvp<'a> = &'a dyn Fn(&[f64], &[f64], f64, &[f64], &mut [f64]);
type Init<'a> = &'a dyn Fn(&[f64], f64, &mut [f64]);

/// The right-hand side, its Jacobian-vector product, the initial state and the dimension.
type Closures<'a> = (Rhs<'a>, Jvp<'a>, Init<'a>, usize);

/// Builds the diffsol problem on matrix type `M` and integrates it with linear solver `Lu`.
fn solve_with<M, Lu>(
    (rhs, jac, init, n): Closures,
    times: &[f64],
    cfg: &OdeConfig,
    events: Option<&Events>,
) -> Result<Trajectory, FlowError>
where
    M: diffsol::Matrix<T = f64>,
    M::V: AsSlice + diffsol::DefaultDenseMatrix<T = f64, C = M::C>,
    for<'b> &'b M::V: diffsol::VectorRef<M::V>,
    for<'b> &'b M: diffsol::matrix::MatrixRef<M>,
    Lu: diffsol::LinearSolver<M>,
{
    let builder = OdeBuilder::<M>::new()
        .t0(times[0])
        .rtol(cfg.rtol)
        .atol([cfg.atol])
        .rhs_implicit(rhs, jac)
        .init(init, n);
    let build_err = |e: diffsol::DiffsolError| FlowError::SolverFailed {
        method: cfg.method.name().into(),
        t_reached: times[0],
        t_end: *times.last().unwrap(),
        reason: format!("could not set up the problem: {e}"),
    };
    match events {
        None => {
            let problem = builder.build().map_err(build_err)?;
            drive_method::<_, Lu>(&problem, times, cfg, None)
        }
        Some(ev) => {
            let root = |z: &[f64], _p: &[f64], t: f64, g: &mut [f64]| (ev.func)(t, z, g);
            let problem = builder.root(root, ev.count).build().map_err(build_err)?;
            drive_method::<_, Lu>(&problem, times, cfg, Some(ev.terminal))
        }
    }
}

/// Integrates the gradient flow ż = −∇ℓ(z) and records loss, ‖∇ℓ‖ and invariants at every
/// sample. A non-finite loss or state is an error naming the time.
pub fn integrate_flow<F: GradientFlow + ?Sized>(
    flow: &F,
    z0: &[f64],
    times: &[f64],
    cfg: &OdeConfig,
) -> Result<Trajectory, FlowError> {
    let mut traj = integrate(&Descent(flow), z0, times, cfg, None)?;
    traj.record_diagnostics(flow);
    if let Some((k, quantity)) = traj.first_non_finite() {
        return Err(FlowError::NonFinite {
            quantity,
            t: traj.t[k],
        });
    }
    Ok(traj)
}

fn check_inputs(n: usize, z0: &[f64], times: &[f64], cfg: &OdeConfig) -> Result<(), FlowError> {
    cfg.validate().map_err(FlowError::Invalid)?;
    if z0.len() != n {
        return Err(FlowError::Invalid(format!(
            "initial state has length {} but the field has dimension {n}",
            z0.len()
        )));
    }
    if let Some(i) = z0.iter().position(|x| !x.is_finite()) {
        return Err(FlowError::NonFinite {
            quantity: format!("initial state component {i}"),
            t: times.first().copied().unwrap_or(0.0),
        });
    }
    if times.len() < 2 {
        return Err(FlowError::Invalid("need at least two output times".into()));
    }
    if times.iter().any(|t| !t.is_finite()) || times.windows(2).any(|w| w[1] <= w[0]) {
        return Err(FlowError::Invalid(
            "output times must be finite and strictly increasing".into(),
        ));
    }
    Ok(())
}

fn drive_method<Eqn, Lu>(
    problem: &diffsol::OdeSolverProblem<Eqn>,
    times: &[f64],
    cfg: &OdeConfig,
    terminal: Option<bool>,
) -> Result<Trajectory, FlowError>
where
    Eqn: diffsol::OdeEquationsImplicit<T = f64>,
    Eqn::V: AsSlice + diffsol::DefaultDenseMatrix<T = f64, C = Eqn::C>,
    for<'b> &'b Eqn::V: diffsol::VectorRef<Eqn::V>,
    for<'b> &'b Eqn::M: diffsol::matrix::MatrixRef<Eqn::M>,
    Lu: diffsol::LinearSolver<Eqn::M>,
{
    let fail = |t_reached: f64, reason: String| FlowError::SolverFailed {
        method: cfg.method.name().into(),
        t_reached,
        t_end: *times.last().unwrap(),
        reason,
    };
    match cfg.method {
        Method::Bdf => {
            let s = problem
                .bdf::<Lu>()
                .map_err(|e| fail(times[0], e.to_string()))?;
            drive(s, times, cfg, terminal)
        }
        Method::Esdirk34 => {
            let s = problem
                .esdirk34::<Lu>()
                .map_err(|e| fail(times[0], e.to_string()))?;
            drive(s, times, cfg, terminal)
        }
        Method::TrBdf2 => {
            let s = problem
                .tr_bdf2::<Lu>()
                .map_err(|e| fail(times[0], e.to_string()))?;
            drive(s, times, cfg, terminal)
        }
        Method::Tsit45 => {
            let s = problem
                .tsit45()
                .map_err(|e| fail(times[0], e.to_string()))?;
            drive(s, times, cfg, terminal)
        }
        Method::TrBdf2Krylov => unreachable!("integrate() hands tr_bdf2_krylov to flow::krylov"),
    }
}

/// Steps the solver to the last output time, sampling the dense output on the way.
fn drive<'a, Eqn, S>(
    mut solver: S,
    times: &[f64],
    cfg: &OdeConfig,
    terminal: Option<bool>,
) -> Result<Trajectory, FlowError>
where
    Eqn: OdeEquations<T = f64> + 'a,
    Eqn::V: AsSlice,
    S: OdeSolverMethod<'a, Eqn>,
{
    let t_end = *times.last().unwrap();
    let dim = solver.state().y.len();
    let mut traj = Trajectory::new(dim);
    let fail = |t_reached: f64, reason: String| FlowError::SolverFailed {
        method: cfg.method.name().into(),
        t_reached,
        t_end,
        reason,
    };
    traj.push(times[0], solver.state().y.as_slice());
    let mut next = 1;
    solver
        .set_stop_time(t_end)
        .map_err(|e| fail(times[0], e.to_string()))?;
    let mut steps = 0usize;
    loop {
        let reason = solver
            .step()
            .map_err(|e| fail(solver.state().t, e.to_string()))?;
        steps += 1;
        let t_now = solver.state().t;
        if solver.state().y.as_slice().iter().any(|x| !x.is_finite()) {
            return Err(FlowError::NonFinite {
                quantity: "state".into(),
                t: t_now,
            });
        }
        // samples strictly before a root (or up to the current time) come from the dense output
        let (sample_until, stop) = match reason {
            OdeSolverStopReason::RootFound(t_root, index) => {
                let state = interpolate(&solver, t_root, &fail)?;
                traj.events.push(Event {
                    index,
                    t: t_root,
                    state,
                });
                // a continuing run restarts from the root (see below), so samples stop there too
                (t_root, terminal == Some(true))
            }
            OdeSolverStopReason::TstopReached => (t_end, true),
            OdeSolverStopReason::InternalTimestep => (t_now, false),
        };
        while next < times.len() && times[next] <= sample_until {
            // diffsol reports the stop time reached when the state is within round-off of it
            // (100 ε (|t| + |h|)), possibly an ulp short: samples from there on are the state
            let z = if times[next] >= t_now {
                solver.state().y.as_slice().to_vec()
            } else {
                interpolate(&solver, times[next], &fail)?
            };
            traj.push(times[next], &z);
            next += 1;
        }
        if let (OdeSolverStopReason::RootFound(t_root, _), false) = (&reason, stop) {
            // Continuing past a root, diffsol 0.18 keeps a stale bracket in its root finder (a
            // sign change in the next step then panics), can miss a second root inside the same
            // step, and does not clamp the next step to the stop time. Rewinding the state to
            // the root re-initializes all three, so every later root is found.
            solver
                .state_mut_back(*t_root)
                .map_err(|e| fail(*t_root, e.to_string()))?;
            solver
                .set_stop_time(t_end)
                .map_err(|e| fail(*t_root, e.to_string()))?;
        }
        if stop {
            if let (OdeSolverStopReason::RootFound(t_root, index), Some(true)) = (&reason, terminal)
            {
                if traj.last_t() < *t_root {
                    let z = traj
                        .events
                        .last()
                        .expect("the root was recorded")
                        .state
                        .clone();
                    traj.push(*t_root, &z);
                }
                traj.stop = StopReason::Event {
                    index: *index,
                    t: *t_root,
                };
            }
            break;
        }
        if steps >= cfg.max_steps {
            return Err(fail(
                t_now,
                format!("reached the maximum of {} steps", cfg.max_steps),
            ));
        }
    }
    let st = solver.get_statistics();
    traj.stats = SolverStats {
        method: cfg.method.name().into(),
        steps: st.number_of_steps,
        linear_solver_setups: st.number_of_linear_solver_setups,
        error_test_failures: st.number_of_error_test_failures,
        nonlinear_iterations: st.number_of_nonlinear_solver_iterations,
        nonlinear_failures: st.number_of_nonlinear_solver_fails,
        ..Default::default()
    };
    Ok(traj)
}

fn interpolate<'a, Eqn, S>(
    solver: &S,
    t: f64,
    fail: &dyn Fn(f64, String) -> FlowError,
) -> Result<Vec<f64>, FlowError>
where
    Eqn: OdeEquations<T = f64> + 'a,
    Eqn::V: AsSlice,
    S: OdeSolverMethod<'a, Eqn>,
{
    solver
        .interpolate(t)
        .map(|v| v.as_slice().to_vec())
        .map_err(|e| fail(solver.state().t, format!("dense output at t = {t}: {e}")))
}

/// The state of a one-batch diffsol vector as a slice.
trait AsSlice {
    fn as_slice(&self) -> &[f64];
}

impl AsSlice for NalgebraVec<f64> {
    fn as_slice(&self) -> &[f64] {
        self.inner().as_slice()
    }
}

impl AsSlice for FaerVec<f64> {
    fn as_slice(&self) -> &[f64] {
        self.inner()
            .col(0)
            .try_as_col_major()
            .expect("a one-batch faer vector is one contiguous column")
            .as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_is_finite_and_increasing_up_to_the_end_of_f64() {
        for b in [1.0, 1e300, 1e308, f64::MAX] {
            let v = linspace(0.0, b, 50);
            assert!(v.iter().all(|x| x.is_finite()), "{b}");
            assert!(v.windows(2).all(|w| w[0] < w[1]), "{b}");
            assert_eq!((v[0], v[49]), (0.0, b));
        }
        // the usual range keeps its rounding (outputs stay byte-identical)
        assert_eq!(linspace(0.0, 10.0, 4)[1], 10.0 * 1.0 / 3.0);
    }

    /// ż = A z with A = [[-1, 2], [-2, -1]]: z(t) = e^{-t} R(-2t) z0.
    struct Spiral;
    impl VectorField for Spiral {
        fn dim(&self) -> usize {
            2
        }
        fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
            dz[0] = -z[0] + 2.0 * z[1];
            dz[1] = -2.0 * z[0] - z[1];
        }
        fn jvp(&self, t: f64, _z: &[f64], u: &[f64], out: &mut [f64]) {
            self.rhs(t, u, out);
        }
    }

    fn exact(t: f64) -> [f64; 2] {
        let (s, c) = (2.0 * t).sin_cos();
        [(-t).exp() * c, -(-t).exp() * s]
    }

    #[test]
    fn every_method_matches_the_exact_solution_on_the_grid() {
        let times = linspace(0.0, 5.0, 11);
        for m in Method::ALL {
            let cfg = OdeConfig::new(m, 1e-10, 1e-12);
            let tr = integrate(&Spiral, &[1.0, 0.0], &times, &cfg, None).unwrap();
            assert_eq!(tr.t, times);
            let err = crate::stats::max(
                (0..tr.len()).map(|k| crate::stats::max_abs_diff(tr.state(k), &exact(tr.t[k]))),
            );
            // local error control: the global error over five time constants stays within
            // 10³ × rtol for every method (TR-BDF2, second order, is the loosest at ~3e-8)
            assert!(err < 1e3 * cfg.rtol, "{}: max error {err}", m.name());
            assert!(tr.stats.steps > 0 && tr.stats.rhs_evals >= tr.stats.steps);
            if m.is_implicit() {
                assert!(tr.stats.jvp_evals > 0, "{} used no Jacobian", m.name());
            }
        }
    }

    /// diffsol reports the stop time reached when the state lies within round-off of it, which
    /// can be an ulp short of the last sample (seen on the two-token flow under the log clock):
    /// that sample is the state, not a dense-output query past the step. Over many horizons,
    /// every method samples every requested time.
    #[test]
    fn the_last_sample_is_taken_when_the_stop_is_reached_within_round_off() {
        for m in Method::ALL {
            let cfg = OdeConfig::new(m, 1e-8, 1e-10);
            for k in 0..200 {
                let t_end = 1e-3 * 1.0713_f64.powi(k);
                let times = linspace(0.0, t_end, 7);
                let tr = integrate(&Spiral, &[1.0, 0.0], &times, &cfg, None)
                    .unwrap_or_else(|e| panic!("{} to t = {t_end:e}: {e}", m.name()));
                assert_eq!(tr.t, times, "{} to t = {t_end:e}", m.name());
            }
        }
    }

    /// Both dense LUs solve the same Newton systems: the samples agree to rounding, the step
    /// sequence is the same, and `auto` picks by dimension and symmetry.
    #[test]
    fn the_linear_solvers_agree() {
        let times = linspace(0.0, 5.0, 11);
        let run = |lu| {
            let cfg = OdeConfig {
                linear_solver: lu,
                ..OdeConfig::new(Method::Bdf, 1e-10, 1e-12)
            };
            integrate(&Spiral, &[1.0, 0.0], &times, &cfg, None).unwrap()
        };
        let (na, fa) = (run(LinearSolver::Nalgebra), run(LinearSolver::Faer));
        assert_eq!(na.stats.steps, fa.stats.steps);
        for k in 0..na.len() {
            assert!(crate::stats::max_abs_diff(na.state(k), fa.state(k)) < 1e-13);
        }
        use LinearSolver::{Auto, Cholesky, Faer, LowRank, Nalgebra};
        for (asked, dim, symmetric, used) in [
            (Auto, FAER_MIN_DIM - 1, false, Nalgebra),
            (Auto, FAER_MIN_DIM, false, Faer),
            (Auto, CHOLESKY_MIN_DIM - 1, true, Nalgebra),
            (Auto, CHOLESKY_MIN_DIM, true, Cholesky),
            (Auto, LOW_RANK_MIN_DIM - 1, false, Faer),
            (Auto, LOW_RANK_MIN_DIM, false, LowRank),
            (Auto, LOW_RANK_MIN_DIM, true, LowRank),
            (Nalgebra, 10_000, true, Nalgebra),
        ] {
            assert_eq!(asked.resolve(dim, symmetric), used, "{dim} states");
        }
    }

    /// ℓ(z) = ½ Σ_i a_i (z_i − 1)² + ¼ Σ_i z_i⁴ with some a_i < 0: a gradient flow whose Hessian
    /// is indefinite at the start (z = 0) and positive definite near its minima, so Cholesky
    /// factorizes some Newton matrices and falls back to the LU on others.
    struct DoubleWells(Vec<f64>);

    impl GradientFlow for DoubleWells {
        fn dim(&self) -> usize {
            self.0.len()
        }
        fn loss(&self, z: &[f64]) -> f64 {
            let terms = self.0.iter().zip(z);
            terms
                .map(|(a, x)| 0.5 * a * (x - 1.0).powi(2) + 0.25 * x.powi(4))
                .sum()
        }
        fn grad(&self, z: &[f64], g: &mut [f64]) {
            for ((gi, a), x) in g.iter_mut().zip(&self.0).zip(z) {
                *gi = a * (x - 1.0) + x.powi(3);
            }
        }
        fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
            for (((o, a), x), ui) in out.iter_mut().zip(&self.0).zip(z).zip(u) {
                *o = (a + 3.0 * x * x) * ui;
            }
        }
    }

    /// Cholesky (with its LU fallback) and both LUs solve the same gradient flow to the
    /// tolerance; a field without a symmetric Jacobian is refused by name.
    #[test]
    fn cholesky_solves_gradient_flows_and_refuses_other_fields() {
        let flow = DoubleWells((0..80).map(|i| 40.0 * (i as f64 / 79.0) - 8.0).collect());
        let times = linspace(0.0, 3.0, 7);
        let run = |lu| {
            let cfg = OdeConfig {
                linear_solver: lu,
                ..OdeConfig::new(Method::Bdf, 1e-10, 1e-12)
            };
            integrate_flow(&flow, &vec![0.0; 80], &times, &cfg).unwrap()
        };
        let reference = run(LinearSolver::Nalgebra);
        for lu in [
            LinearSolver::Cholesky,
            LinearSolver::Faer,
            LinearSolver::Auto,
        ] {
            let tr = run(lu);
            for k in 0..tr.len() {
                let err = crate::stats::max_abs_diff(tr.state(k), reference.state(k));
                assert!(err < 1e-8, "{lu:?} at t = {}: {err:e}", tr.t[k]);
            }
        }
        let cfg = OdeConfig {
            linear_solver: LinearSolver::Cholesky,
            ..OdeConfig::new(Method::Bdf, 1e-8, 1e-10)
        };
        let err = integrate(&Spiral, &[1.0, 0.0], &times, &cfg, None).unwrap_err();
        assert!(err.to_string().contains("symmetric"), "{err}");
    }

    /// `linear_solver` is optional, left out of the written configuration when `auto`, and an
    /// unknown value is refused naming the accepted ones.
    #[test]
    fn the_linear_solver_key_parses_and_round_trips() {
        let base = "method = \"bdf\"\nrtol = 1e-8\natol = 1e-10\n";
        let cfg: OdeConfig = toml::from_str(base).unwrap();
        assert_eq!(cfg.linear_solver, LinearSolver::Auto);
        assert!(!toml::to_string(&cfg).unwrap().contains("linear_solver"));
        let faer: OdeConfig = toml::from_str(&format!("{base}linear_solver = \"faer\"")).unwrap();
        assert_eq!(faer.linear_solver, LinearSolver::Faer);
        let err = toml::from_str::<OdeConfig>(&format!("{base}linear_solver = \"lu\""))
            .unwrap_err()
            .to_string();
        assert!(err.contains("lu") && err.contains("nalgebra"), "{err}");
    }

    #[test]
    fn events_are_located_and_can_stop_the_run() {
        // first zero of z_0 = e^{-t} cos 2t at t = π/4
        let g = |_t: f64, z: &[f64], out: &mut [f64]| out[0] = z[0];
        let times = linspace(0.0, 5.0, 6);
        for terminal in [true, false] {
            let ev = Events {
                count: 1,
                func: &g,
                terminal,
            };
            let cfg = OdeConfig::new(Method::Tsit45, 1e-10, 1e-12);
            let tr = integrate(&Spiral, &[1.0, 0.0], &times, &cfg, Some(&ev)).unwrap();
            let first = &tr.events[0];
            assert!(
                (first.t - std::f64::consts::FRAC_PI_4).abs() < 1e-7,
                "{}",
                first.t
            );
            if terminal {
                assert_eq!(tr.events.len(), 1);
                assert!((tr.last_t() - first.t).abs() < 1e-14);
                assert_eq!(
                    tr.stop,
                    StopReason::Event {
                        index: 0,
                        t: first.t
                    }
                );
            } else {
                // zeros at π/4 + kπ/2 below 5: k = 0..=2
                assert_eq!(tr.events.len(), 3, "{:?}", tr.events);
                assert_eq!(tr.last_t(), 5.0);
                assert_eq!(tr.stop, StopReason::Success);
            }
        }
    }

    /// Roots in consecutive steps and two roots inside one step (diffsol 0.18 panicked or
    /// dropped roots here before the run was rewound to each root): z_0 = e^{-t} cos 2t has
    /// zeros at π/4 + kπ/2, and a second function with zeros 1e-6 later must give its own.
    #[test]
    fn every_root_of_a_continuing_run_is_found_once() {
        let g = |_t: f64, z: &[f64], out: &mut [f64]| {
            out[0] = z[0];
            // z_0(t − 1e-6) to first order: z_0 − 1e-6·ż_0
            out[1] = z[0] - 1e-6 * (-z[0] + 2.0 * z[1]);
        };
        let ev = Events {
            count: 2,
            func: &g,
            terminal: false,
        };
        for method in [Method::Tsit45, Method::Bdf, Method::Esdirk34] {
            let cfg = OdeConfig::new(method, 1e-10, 1e-14);
            let times = linspace(0.0, 12.0, 4);
            let tr = integrate(&Spiral, &[1.0, 0.0], &times, &cfg, Some(&ev)).unwrap();
            // k = 0..=7 zeros below 12 for each function
            for index in 0..2 {
                let roots: Vec<f64> = tr
                    .events
                    .iter()
                    .filter(|e| e.index == index)
                    .map(|e| e.t)
                    .collect();
                assert_eq!(roots.len(), 8, "{method:?} index {index}: {roots:?}");
                for (k, t) in roots.iter().enumerate() {
                    let want = std::f64::consts::FRAC_PI_4
                        + k as f64 * std::f64::consts::FRAC_PI_2
                        + 1e-6 * index as f64;
                    assert!(
                        (t - want).abs() < 1e-7,
                        "{method:?} root {k}: {t} vs {want}"
                    );
                }
            }
            assert_eq!(tr.last_t(), 12.0);
        }
    }

    #[test]
    fn bad_input_is_refused() {
        let cfg = OdeConfig::new(Method::Bdf, 1e-8, 1e-10);
        assert!(integrate(&Spiral, &[1.0], &[0.0, 1.0], &cfg, None).is_err());
        assert!(integrate(&Spiral, &[f64::NAN, 0.0], &[0.0, 1.0], &cfg, None).is_err());
        assert!(integrate(&Spiral, &[1.0, 0.0], &[1.0, 0.5], &cfg, None).is_err());
        let bad = OdeConfig::new(Method::Bdf, -1.0, 1e-10);
        assert!(integrate(&Spiral, &[1.0, 0.0], &[0.0, 1.0], &bad, None).is_err());
    }

    /// ż = z²: blows up at t = 1/z0; the failure must say how far it got.
    struct Blowup;
    impl VectorField for Blowup {
        fn dim(&self) -> usize {
            1
        }
        fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
            dz[0] = z[0] * z[0];
        }
        fn jvp(&self, _t: f64, z: &[f64], u: &[f64], out: &mut [f64]) {
            out[0] = 2.0 * z[0] * u[0];
        }
    }

    /// ℓ(z) = ½(z − 3)² for z < 2 and NaN beyond (a model evaluated outside its domain), with a
    /// finite gradient everywhere: ż = 3 − z, so only the recorded loss turns NaN, at the first
    /// sample with z ≥ 2 (z(t) = 3 − 3e^{−t} crosses 2 at t = ln 3 ≈ 1.0986).
    struct NanLoss;
    impl GradientFlow for NanLoss {
        fn dim(&self) -> usize {
            1
        }
        fn loss(&self, z: &[f64]) -> f64 {
            if z[0] < 2.0 {
                0.5 * (z[0] - 3.0).powi(2)
            } else {
                f64::NAN
            }
        }
        fn grad(&self, z: &[f64], g: &mut [f64]) {
            g[0] = z[0] - 3.0;
        }
        fn hvp(&self, _z: &[f64], v: &[f64], out: &mut [f64]) {
            out[0] = v[0];
        }
    }

    #[test]
    fn a_non_finite_loss_stops_the_run_naming_the_quantity_and_time() {
        let times: Vec<f64> = (0..=20).map(|k| 0.1 * k as f64).collect();
        let cfg = OdeConfig::new(Method::Bdf, 1e-8, 1e-10);
        match integrate_flow(&NanLoss, &[0.0], &times, &cfg).unwrap_err() {
            FlowError::NonFinite { quantity, t } => {
                assert_eq!(quantity, "loss");
                // first sample past ln 3 ≈ 1.0986
                assert!((t - 1.1).abs() < 1e-12, "{t}");
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn a_blow_up_is_reported_with_the_time_reached() {
        for m in [Method::Bdf, Method::Tsit45] {
            let cfg = OdeConfig::new(m, 1e-8, 1e-10);
            let err = integrate(&Blowup, &[1.0], &[0.0, 2.0], &cfg, None).unwrap_err();
            match err {
                FlowError::SolverFailed { t_reached, .. }
                | FlowError::NonFinite { t: t_reached, .. } => {
                    assert!(t_reached > 0.9 && t_reached <= 1.0 + 1e-6, "{t_reached}")
                }
                other => panic!("unexpected {other}"),
            }
        }
    }
}

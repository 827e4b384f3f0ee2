//! `limit-kkt` (spec 000 D2, D5): the df flow's limit is v_i(∞) = σ_i√(μ_iρ̄_i), q_i(∞) = m_i/v_i(∞)
//! with the sign rule σ_i = sign(q_iᵀm_i + ρ̄_iμ_iv_i)(0), and it minimizes
//! Φ = Σ_i ½(‖q_i‖² + v_i²) + (β_i/2) ln v_i² subject to Q Diag(v) = M (KKT certificate); for a
//! balanced init this is the minimum-Frobenius-norm factorization of M.

use std::path::PathBuf;

use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use super::instance_files::{stacked_df_instance, InstanceFiles};
use super::sizes;
use crate::analysis::stationary::brent_root;
use crate::flow::{integrate_flow, linspace, GradientFlow, Method, OdeConfig, Trajectory};
use crate::instance::histogram::{task_name, TaskMatrices};
use crate::models::histogram::landscape::{kkt_residuals, phi, phi_minimizer};
use crate::models::histogram::{layout, DfClosedForm, DfFlow};
use crate::plot::{BarPanel, Figure, LineStyle};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::df_common::{analysis_failed, gaussian_state, TaskName};

/// How the init is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Balance {
    /// q_i ~ N(0, σ²I), v_i = ±‖q_i‖ (β = 0): the limit is the minimum-norm factorization.
    Balanced,
    /// Q_0, v_0 entries i.i.d. N(0, σ²) (β_i of either sign).
    Unbalanced,
}

impl Balance {
    fn label(self) -> &'static str {
        match self {
            Balance::Balanced => "balanced (β = 0)",
            Balance::Unbalanced => "unbalanced",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub tasks: Vec<TaskName>,
    /// Threshold D of the `thr` task.
    #[serde(default)]
    pub d_thr: usize,
    pub d: usize,
    pub inits: NonEmpty<Balance>,
    pub sigma: Positive,
    /// The flow runs to T + horizon/α, where the state is within ~e^{−horizon} of its limit.
    pub horizon: Positive,
    pub samples: AtLeast<10>,
    /// Random diagonal rescalings (Q C⁻¹, C v), ln C_ii ~ N(0, rescale²), of the limit: all are
    /// feasible and must have larger Φ (D5).
    pub rescalings: AtLeast<1>,
    pub rescale: Positive,
    /// Task matrices `M`, (d, d) or k stacked (k, d, d), replacing tasks, d_thr and d.
    /// README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial states (`Q0`, `v0`), one per run in the order inits × task matrices (the
    /// inits labels still name them); replaces sigma and the draws.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

/// The order of the runs, for messages about the init file.
const RUN_ORDER: &str = "params.inits × task matrices";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max |z(t_end) − z(∞)| against the sign rule's limit (D2: 1e-8).
    pub limit_tol: Positive,
    /// max_i |v_i(t_end)²/argmin Φ_i − 1|, the argmin by Brent on Φ_i' (D5: 1e-8).
    pub argmin_tol: Positive,
    /// |argmin Φ_i (Brent) / μ_iρ̄_i − 1| (D5: the closed form of the minimizer).
    pub formula_tol: Positive,
    /// KKT residuals at the flow's end: max |Q Diag(v) − M| and max_i |v_i + β_i/v_i − λ_iᵀq_i|
    /// (D5: 1e-8).
    pub kkt_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles<TaskMatrices>, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), p.d)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let files = read_files(p, sc)?;
    let ms = files.task_matrices(&p.tasks, p.d, p.d_thr);
    if files.d(p.d) < 2 || ms.is_empty() {
        return Err(sc.invalid("params.tasks", "need d ≥ 2 and at least one task"));
    }
    files.run_inits(p.inits.len() * ms.len(), RUN_ORDER)?;
    Ok(())
}

fn initial_state(p: &Params, d: usize, balance: Balance, rng: &mut impl Rng) -> Vec<f64> {
    let mut z = gaussian_state(rng, d, *p.sigma);
    if balance == Balance::Balanced {
        for i in 0..d {
            let block = &mut z[i * (d + 1)..(i + 1) * (d + 1)];
            let norm = block[..d].iter().map(|x| x * x).sum::<f64>().sqrt();
            block[d] = block[d].signum() * norm;
        }
    }
    z
}

/// One (task, init) run and its measurements.
struct LimitRun {
    /// [`task_name`] of the run's matrix.
    task: &'static str,
    balance: Balance,
    z0: Vec<f64>,
    traj: Trajectory,
    closed: DfClosedForm,
    betas: Vec<f64>,
    /// argmin Φ_i by Brent on Φ_i'.
    u_star: Vec<f64>,
    limit_error: f64,
    argmin_error: f64,
    formula_error: f64,
    feasibility: f64,
    stationarity: f64,
    sign_mismatches: usize,
    /// min over rescalings of Φ(rescaled limit) − Φ(limit).
    phi_gap: f64,
}

/// argmin_u Φ_i(u) = ½(u + μ²/u) + (β/2) ln u by Brent on Φ_i'(u) = ½(1 − μ²/u²) + β/(2u),
/// independently of the closed form μρ̄: Φ_i' < 0 below and > 0 above the root.
fn argmin_phi(mu: f64, beta: f64) -> Result<f64, RunError> {
    let d_phi = |u: f64| 0.5 * (1.0 - mu * mu / (u * u)) + 0.5 * beta / u;
    let (mut lo, mut hi) = (mu, mu);
    while d_phi(lo) > 0.0 {
        lo *= 0.5;
    }
    while d_phi(hi) < 0.0 {
        hi *= 2.0;
    }
    brent_root(d_phi, lo, hi, 1e-15 * hi).map_err(analysis_failed("argmin Φ_i"))
}

/// The run of `balance` on `m`, from `given` or else the init drawn from `stream`.
fn run_one(
    p: &Params,
    ctx: &RunContext,
    m: &DMatrix<f64>,
    balance: Balance,
    stream: u64,
    given: Option<&Vec<f64>>,
) -> Result<LimitRun, RunError> {
    let d = m.nrows();
    let mut rng = ctx.rng(stream);
    // drawn also when an init is given: the rescalings continue the stream after it, so they
    // are the same with and without the file (a run's instance.npz reproduces it)
    let drawn = initial_state(p, d, balance, &mut rng);
    let z0 = given.cloned().unwrap_or(drawn);
    let flow = DfFlow::new(m.clone());
    let closed = DfClosedForm::new(m, &z0);
    let t_end = closed.onset_time() + *p.horizon / closed.alpha();
    let times = linspace(0.0, t_end, *p.samples);
    let traj = integrate_flow(&flow, &z0, &times, &ctx.ode)?;
    let z = traj.last_state().to_vec();
    let mut betas = vec![0.0; d];
    flow.invariants(&z0, &mut betas);

    let limit = closed.limit_state();
    let limit_error = stats::max(z.iter().zip(&limit).map(|(a, b)| (a - b).abs()));
    let mut u_star = Vec::with_capacity(d);
    let (mut argmin_error, mut formula_error): (f64, f64) = (0.0, 0.0);
    let mut sign_mismatches = 0;
    for (i, col) in closed.columns().iter().enumerate() {
        let mu = col.mu();
        let u = argmin_phi(mu, betas[i])?;
        let v = z[layout::v_index(d, i)];
        argmin_error = stats::larger(argmin_error, (v * v / u - 1.0).abs());
        formula_error = stats::larger(formula_error, (u / phi_minimizer(mu, betas[i]) - 1.0).abs());
        sign_mismatches += usize::from(v.signum() != col.bad_set_value().signum());
        u_star.push(u);
    }
    let kkt = kkt_residuals(m, &z, &betas);
    let phi_limit = phi(&z, &betas);
    let phi_gap = stats::min((0..*p.rescalings).map(|_| {
        let mut rescaled = z.clone();
        for i in 0..d {
            let c = (*p.rescale * rng.sample::<f64, _>(StandardNormal)).exp();
            let block = &mut rescaled[i * (d + 1)..(i + 1) * (d + 1)];
            block[..d].iter_mut().for_each(|q| *q /= c);
            block[d] *= c;
        }
        phi(&rescaled, &betas) - phi_limit
    }));
    Ok(LimitRun {
        task: task_name(m),
        z0,
        balance,
        traj,
        closed,
        u_star,
        limit_error,
        argmin_error,
        formula_error,
        feasibility: kkt.feasibility,
        stationarity: stats::max(kkt.stationarity.iter()),
        sign_mismatches,
        phi_gap,
        betas,
    })
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let ms = files.task_matrices(&p.tasks, p.d, p.d_thr);
    let d = ms[0].nrows();
    let given = files.run_inits(p.inits.len() * ms.len(), RUN_ORDER)?;
    let mut runs = Vec::new();
    // run k (in the order inits × tasks) draws from stream 60 + k
    for (b, &balance) in p.inits.iter().enumerate() {
        for (j, m) in ms.iter().enumerate() {
            let k = b * ms.len() + j;
            let z0 = given.as_ref().map(|z| &z[k]);
            runs.push(run_one(p, ctx, m, balance, 60 + k as u64, z0)?);
        }
    }
    let mut rep = Report::default();
    rep.instance = Some(stacked_df_instance(
        ms.clone(),
        runs.iter().map(|r| r.z0.clone()).collect(),
    ));
    for r in &runs {
        rep.stats(format!("{}, {}", r.task, r.balance.label()), &r.traj.stats);
    }
    let worst = |f: &dyn Fn(&LimitRun) -> f64| stats::max(runs.iter().map(f));
    let cases = format!(
        "{} runs: tasks {:?} × inits {:?}, d = {}",
        runs.len(),
        ms.iter().map(task_name).collect::<Vec<_>>(),
        p.inits.iter().map(|b| b.label()).collect::<Vec<_>>(),
        d
    );
    rep.at_most(
        "end-inf-sign-rule",
        "max |z(t_end) − z(∞)| (sign rule)",
        worst(&|r| r.limit_error),
        *c.limit_tol,
    )
    .note(format!(
        "z(∞): v_i = σ_i√(μ_iρ̄_i), q_i = m_i/v_i, σ_i = sign(q_iᵀm_i + ρ̄_iμ_iv_i)(0) (D2); {cases}"
    ))
    .paper_claim("Theorem 2: (x∞², y∞²) = (√ρ̄, √ρ), no sign given (E4, E13)");
    rep.at_most(
        "columns-sign-inf-sign-rule",
        "columns with sign v_i(∞) ≠ sign rule",
        runs.iter().map(|r| r.sign_mismatches).sum::<usize>() as f64,
        0.0,
    )
    .note("D2 sign rule");
    rep.at_most(
        "end-argmin-phi",
        "max_i |v_i(t_end)² / argmin Φ_i − 1|",
        worst(&|r| r.argmin_error),
        *c.argmin_tol,
    )
    .note("argmin of Φ_i(u) = ½(u + μ²/u) + (β/2) ln u by Brent on Φ_i' (D5)");
    rep.at_most(
        "argmin-phi-mu-irho",
        "max_i |argmin Φ_i / (μ_iρ̄_i) − 1|",
        worst(&|r| r.formula_error),
        *c.formula_tol,
    )
    .note("u² + βu − μ² = 0 ⇔ u = μρ̄(β/μ) (D5)");
    rep.at_most(
        "kkt-feasibility-diag",
        "KKT feasibility max |Q Diag(v) − M|",
        worst(&|r| r.feasibility),
        *c.kkt_tol,
    );
    rep.at_most(
        "kkt-stationarity-beta-lambda-itq",
        "KKT stationarity max_i |v_i + β_i/v_i − λ_iᵀq_i|",
        worst(&|r| r.stationarity),
        *c.kkt_tol,
    )
    .note("Λ = Q Diag(v)⁻¹, β of the initialization (D5)");
    rep.at_least(
        "over-rescalings-phi-phi-limit",
        "min over rescalings of Φ(Q C⁻¹, C v) − Φ(limit)",
        stats::min(runs.iter().map(|r| r.phi_gap)),
        0.0,
    )
    .note(format!(
        "{} random diagonal C per run, ln C_ii ~ N(0, {}²): the limit minimizes Φ on the \
         feasible set (D5)",
        *p.rescalings, *p.rescale
    ));

    rep.series = Table::new(&[
        "task",
        "init",
        "column",
        "mu",
        "beta",
        "v_end",
        "sqrt_mu_rhob",
        "argmin_phi",
        "sign_rule",
    ]);
    for r in &runs {
        for (i, col) in r.closed.columns().iter().enumerate() {
            rep.series.push(vec![
                Cell::from(r.task),
                r.balance.label().into(),
                (i + 1).into(),
                col.mu().into(),
                r.betas[i].into(),
                r.traj.last_state()[layout::v_index(d, i)].into(),
                phi_minimizer(col.mu(), r.betas[i]).sqrt().into(),
                r.u_star[i].into(),
                col.bad_set_value().signum().into(),
            ]);
        }
    }
    let mut fig = Figure::new(ms.len()).title(format!(
        "Limits of the df flow: |v_i(∞)| = √(μ_iρ̄_i), the minimizer of Φ s.t. Q Diag(v) = M (d = {d})"
    ));
    for r in &runs {
        let columns: Vec<String> = (1..=d).map(|i| i.to_string()).collect();
        let measured: Vec<f64> = (0..d)
            .map(|i| r.traj.last_state()[layout::v_index(d, i)].abs())
            .collect();
        let theory: Vec<f64> = r
            .closed
            .columns()
            .iter()
            .zip(&r.betas)
            .map(|(col, &beta)| phi_minimizer(col.mu(), beta).sqrt())
            .collect();
        fig = fig.panel(
            BarPanel::new(
                format!("{}, {}", r.task, r.balance.label()),
                "column i",
                "|v_i(∞)|",
                columns,
            )
            .group("flow limit", measured, LineStyle::Solid)
            .group("√(μ_iρ̄_i)", theory, LineStyle::Dashed),
        );
    }
    rep.figure = Some(fig);
    Ok(rep)
}

/// One df solve per (init, task), every sample kept, and the rescaled limits (O(d²) each).
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let runs = n(p.inits.len()) * n(p.tasks.len());
    sizes::df_solves(
        sizes::Keys {
            solves: "inits, tasks, d",
            samples: "inits, tasks, samples, d",
        },
        runs,
        p.d,
        n(*p.samples),
        ctx.ode.method,
    )
    .work(
        "rescalings",
        "rescaled limits",
        runs * n(*p.rescalings),
        sizes::df_grad(p.d),
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.limit-kkt",
    paper: "000",
    summary: "The df flow's limit (spec 000 D2, D5): sign rule, |v_i| = √(μ_iρ̄_i), and the KKT \
              certificate that it minimizes Φ subject to Q Diag(v) = M.",
    solver: OdeConfig::new(Method::Tsit45, 1e-12, 1e-14),
    validate,
    cost,
    quantities: &[],
    run,
};

//! `bad-init` (Remark 1.1; spec 000 R10, E5, E17): columns started on the corrected bad set
//! q_iᵀm_i + ρ̄_iμ_iv_i = 0 go to the saddle {v_i = 0, q_i ⊥ m_i} and leave ½μ_i² of loss behind;
//! the set is empty for δ_i < 0; and the paper's condition without μ_i (E5) is not bad on lt.

use std::path::PathBuf;

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::instance_files::{stacked_df_instance, InstanceFiles};
use super::sizes;
use crate::flow::{integrate_flow, linspace, GradientFlow, Method, OdeConfig, Trajectory};
use crate::instance::histogram::{task_name, TaskMatrices};
use crate::models::histogram::landscape::{bad_init_along_m, bad_init_with_imbalance};
use crate::models::histogram::theorem2::Imbalance;
use crate::models::histogram::{layout, DfClosedForm, DfFlow, HistogramError};
use crate::plot::{Figure, LegendPosition, LinePanel, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::Nonzero;
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::df_common::{closed_form_error, gaussian_state, gaussian_vector, TaskName};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Tasks to run (each with its own draw of the good columns).
    pub tasks: Vec<TaskName>,
    #[serde(default)]
    pub d_thr: usize,
    pub d: usize,
    /// The columns (1-based) started on the bad set, and the imbalance δ_i ≥ 0 of each.
    pub bad_columns: Vec<usize>,
    pub bad_deltas: Vec<f64>,
    /// v_i(0) of the bad columns.
    pub v_bad: Nonzero,
    /// The good columns: Q_0, v_0 entries i.i.d. N(0, σ²).
    pub sigma: Positive,
    /// ODE output samples.
    pub samples: AtLeast<10>,
    /// Imbalances probed for the existence of a bad column with prescribed δ (E17).
    pub delta_probe: Vec<f64>,
    /// Random (q⊥, v) draws for R10's p-solve, which must land on δ ≥ 0 (E17).
    pub root_draws: usize,
    /// Horizon of the run from the paper's condition q_iᵀm_i + ρ̄_iv_i = 0, in units of 1/α.
    pub paper_horizon: Positive,
    /// Task matrices `M`, (d, d) or k stacked (k, d, d): one run per matrix, replacing tasks,
    /// d_thr and d. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial states (`Q0`, `v0`), one per run, whose bad_columns lie on the corrected bad
    /// set (refused otherwise); replaces sigma, v_bad, bad_deltas and the construction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// |v_i(t_s)|/|v_i(0)| and |p_i(t_s)|/|p_i(0)| for the bad columns at t_s =
    /// 5/min_bad(μ_iρ_i): the decay is ≥ e^{−μρt} = e^{−5} (R10: 1e-2).
    pub saddle_tol: Positive,
    /// |Σ_bad ℓ_i(t_p)/(½Σ_bad μ_i²) − 1| at t_p = ½ln(1/rtol)/max_bad(μ_iρ̄_i), half the time
    /// after which solver noise escapes the saddle (spec §7.4) (R10: 5%). The good columns'
    /// share of ℓ(t_p) is reported beside it: they converge at their own rate 2μ_iρ̄_i.
    pub plateau_tol: Positive,
    /// max |z_ODE − z_closed form| on [0, t_s] (later the saddle amplifies solver error as
    /// e^{μρ̄t}, spec R8(a)) (R9(a): 1e-7).
    pub closed_form_tol: Positive,
    /// On lt, the loss from the paper's set at T + paper_horizon/α, relative to the saddle level
    /// ½Σ_bad μ_i² it would keep if that set were bad (E5).
    pub paper_set_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles<TaskMatrices>, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), p.d)
}

/// The order of the runs, for messages about the init file.
const RUN_ORDER: &str = "one per task matrix";

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let files = read_files(p, sc)?;
    let d = files.d(p.d);
    if d < 2 || (files.data().is_none() && p.tasks.is_empty()) {
        return Err(sc.invalid("params.tasks", "need d ≥ 2 and at least one task"));
    }
    if p.bad_columns.is_empty() || p.bad_columns.len() != p.bad_deltas.len() {
        return Err(sc.invalid(
            "params.bad_deltas",
            "need one δ per bad column, and at least one bad column",
        ));
    }
    let mut sorted = p.bad_columns.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != p.bad_columns.len() || sorted.iter().any(|&i| i == 0 || i > d) {
        return Err(sc.invalid(
            "params.bad_columns",
            format!("need distinct 1-based columns in 1..={d}"),
        ));
    }
    if let Some(delta) = p.bad_deltas.iter().find(|&&x| x < 0.0) {
        return Err(sc.invalid(
            "params.bad_deltas",
            format!("δ = {delta} < 0: the bad set is empty for δ < 0 (spec E17)"),
        ));
    }
    let ms = files.task_matrices(&p.tasks, p.d, p.d_thr);
    if ms.iter().any(|m| task_name(m) == "lt") && p.bad_columns.iter().all(|&i| i == d) {
        return Err(sc.invalid(
            "params.bad_columns",
            "on lt only column d has μ = 1, where the paper's and the corrected bad sets \
             coincide: choose another column to test E5",
        ));
    }
    if let Some(inits) = files.run_inits(ms.len(), RUN_ORDER)? {
        let columns: Vec<usize> = p.bad_columns.iter().map(|c| c - 1).collect();
        files.require_bad_set_value(
            &ms,
            &inits,
            &columns,
            &vec![0.0; ms.len()],
            "params.bad_columns names the columns started on the corrected bad set (spec R10)",
        )?;
    }
    Ok(())
}

/// Which bad set a constructed init lies on.
#[derive(Clone, Copy)]
enum BadSet {
    /// q_iᵀm_i + ρ̄_iμ_iv_i = 0 (R10, corrected).
    Corrected,
    /// q_iᵀm_i + ρ̄_iv_i = 0 (Theorem 1 / Remark 1.1 as printed, E5).
    Paper,
}

/// Gaussian good columns with the bad columns replaced by points of `set` with imbalance δ_i
/// and v_i = v_bad. Same random numbers for both sets.
fn bad_state(
    p: &Params,
    m: &DMatrix<f64>,
    set: BadSet,
    ctx: &RunContext,
    stream: u64,
) -> Result<Vec<f64>, RunError> {
    let d = m.nrows();
    let mut rng = ctx.rng(stream);
    let mut z = gaussian_state(&mut rng, d, *p.sigma);
    for (&col, &delta) in p.bad_columns.iter().zip(&p.bad_deltas) {
        let i = col - 1;
        let m_i = m.column(i);
        let mu = m_i.norm();
        let direction = gaussian_vector(&mut rng, d, 1.0);
        // bad_init_with_imbalance solves q·m + ρ̄μv = ε; the paper's q·m + ρ̄v = 0 is ε = ρ̄v(μ − 1)
        let eps = match set {
            BadSet::Corrected => 0.0,
            BadSet::Paper => Imbalance::new(delta).rhob * *p.v_bad * (mu - 1.0),
        };
        let q = bad_init_with_imbalance(m_i.as_slice(), &direction, *p.v_bad, delta, eps)
            .map_err(|e| RunError::Other(format!("bad column {col}: {e}")))?;
        let block = &mut z[i * (d + 1)..(i + 1) * (d + 1)];
        block[..d].copy_from_slice(q.as_slice());
        block[d] = *p.v_bad;
    }
    Ok(z)
}

/// p_i = q_iᵀm_i of column i.
fn p_of(z: &[f64], m: &DMatrix<f64>, i: usize) -> f64 {
    let (q, _) = layout::column(z, m.nrows(), i);
    q.iter().zip(m.column(i).iter()).map(|(a, b)| a * b).sum()
}

/// One task's run from the corrected bad set, with what R10 measures.
struct BadRun {
    /// The task's name ([`task_name`] of its matrix).
    task: &'static str,
    traj: Trajectory,
    saddle_loss: f64,
    /// 5/min_bad(μ_iρ_i).
    t_saddle: f64,
    /// Σ_bad ℓ_i and Σ_good ℓ_i at the last sample t_p.
    bad_loss: f64,
    good_loss: f64,
    /// max over bad columns of |v_i(t_s)|/|v_i(0)| and of |p_i(t_s)|/|p_i(0)|.
    v_ratio: f64,
    p_ratio: f64,
    closed_error: f64,
    /// (column, μ_iρ_i, |v_i(t)|/|v_i(0)| per sample) of each bad column.
    decay: Vec<(usize, f64, Vec<f64>)>,
}

fn run_bad(
    p: &Params,
    ctx: &RunContext,
    m: &DMatrix<f64>,
    z0: Vec<f64>,
) -> Result<BadRun, RunError> {
    let closed = DfClosedForm::new(m, &z0);
    let bad: Vec<usize> = p.bad_columns.iter().map(|c| c - 1).collect();
    let slowest_stable = stats::min(bad.iter().map(|&i| {
        let col = &closed.columns()[i];
        col.mu() * col.imbalance().rho
    }));
    let t_saddle = 5.0 / slowest_stable;
    // spec §7.4: solver noise escapes the saddle after ≈ ln(1/tol)/(μρ̄): stop at half of that
    let fastest_unstable = stats::max(bad.iter().map(|&i| {
        let col = &closed.columns()[i];
        col.mu() * col.imbalance().rhob
    }));
    let t_plateau = (0.5 * (1.0 / ctx.ode.rtol).ln() / fastest_unstable).max(t_saddle);
    let mut times = linspace(0.0, t_plateau, *p.samples);
    times.push(t_saddle);
    times.sort_by(f64::total_cmp);
    times.dedup();
    let flow = DfFlow::new(m.clone());
    let traj = integrate_flow(&flow, &z0, &times, &ctx.ode)?;
    let k_saddle = times.iter().position(|&t| t == t_saddle).unwrap_or(0);
    let z_end = traj.state(k_saddle);
    let d = m.nrows();
    let ratio = |f: &dyn Fn(&[f64], usize) -> f64| {
        stats::max(bad.iter().map(|&i| (f(z_end, i) / f(&z0, i)).abs()))
    };
    let v_of = |z: &[f64], i: usize| z[layout::v_index(d, i)];
    let decay = bad
        .iter()
        .map(|&i| {
            let col = &closed.columns()[i];
            let v0 = v_of(&z0, i);
            let ratios = (0..traj.len())
                .map(|k| (v_of(traj.state(k), i) / v0).abs())
                .collect();
            (i + 1, col.mu() * col.imbalance().rho, ratios)
        })
        .collect();
    let z_last = traj.last_state();
    let bad_loss: f64 = bad.iter().map(|&i| flow.column_loss(z_last, i)).sum();
    Ok(BadRun {
        task: task_name(m),
        bad_loss,
        good_loss: flow.loss(z_last) - bad_loss,
        saddle_loss: bad.iter().map(|&i| 0.5 * m.column(i).norm_squared()).sum(),
        v_ratio: ratio(&v_of),
        p_ratio: ratio(&|z: &[f64], i: usize| p_of(z, m, i)),
        closed_error: closed_form_error(&traj, &closed, t_saddle),
        t_saddle,
        decay,
        traj,
    })
}

/// E17: a bad column with prescribed δ exists iff δ ≥ 0; returns the number of (task, column,
/// δ) cases where the constructor's answer disagrees, and the number of cases tried.
fn existence_mismatches(p: &Params, ms: &[DMatrix<f64>], ctx: &RunContext) -> (usize, usize) {
    let mut rng = ctx.rng(20);
    let (mut wrong, mut tried) = (0, 0);
    for m in ms {
        let d = m.nrows();
        for i in 0..d {
            let direction = gaussian_vector(&mut rng, d, 1.0);
            for &delta in &p.delta_probe {
                let r = bad_init_with_imbalance(
                    m.column(i).as_slice(),
                    &direction,
                    *p.v_bad,
                    delta,
                    0.0,
                );
                // any other error (invalid input) counts as a mismatch
                let exists = match r {
                    Ok(_) => Some(true),
                    Err(HistogramError::NoSolution(_)) => Some(false),
                    Err(HistogramError::Invalid(_)) => None,
                };
                tried += 1;
                wrong += usize::from(exists != Some(delta >= 0.0));
            }
        }
    }
    (wrong, tried)
}

/// E17 for R10's p-solve: with q⊥ and v fixed a root always exists and lies at δ ≥ 0. Returns
/// the most negative δ at a root (or an error message if a solve failed).
fn root_min_delta(p: &Params, ms: &[DMatrix<f64>], ctx: &RunContext) -> Result<f64, RunError> {
    let mut rng = ctx.rng(21);
    let mut min_delta = f64::INFINITY;
    for m in ms {
        let d = m.nrows();
        for draw in 0..p.root_draws {
            let i = draw % d;
            let m_i = m.column(i);
            let mu = m_i.norm();
            // small q⊥ and large |v| make δ(p = 0) < 0: the cases E17 is about
            let q_perp = gaussian_vector(&mut rng, d, 0.1);
            let v = gaussian_vector(&mut rng, 1, 3.0)[0];
            let q = bad_init_along_m(m_i.as_slice(), &q_perp, v, 0.0)
                .map_err(|e| RunError::Other(format!("R10 p-solve failed: {e}")))?;
            let delta = (q.norm_squared() - v * v) / mu;
            min_delta = stats::smaller(min_delta, delta);
        }
    }
    Ok(min_delta)
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let ms = files.task_matrices(&p.tasks, p.d, p.d_thr);
    // the init file's states (checked by validate), else run j's constructed from stream 40 + j
    let inits = match files.run_inits(ms.len(), RUN_ORDER)? {
        Some(inits) => inits,
        None => (0..ms.len())
            .map(|j| bad_state(p, &ms[j], BadSet::Corrected, ctx, 40 + j as u64))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let mut rep = Report::default();
    let runs = ms
        .iter()
        .zip(&inits)
        .map(|(m, z0)| run_bad(p, ctx, m, z0.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    rep.instance = Some(stacked_df_instance(ms.clone(), inits));
    for r in &runs {
        let name = r.task;
        rep.stats(format!("{name}, corrected bad set"), &r.traj.stats);
        rep.at_most(
            &format!("bad-v-ratio.{name}"),
            &format!("{name}: max_bad |v_i(t_s)/v_i(0)|"),
            r.v_ratio,
            *c.saddle_tol,
        )
        .note(format!(
            "t_s = 5/min_bad(μ_iρ_i) = {:.4}, bad columns {:?} (R10)",
            r.t_saddle, p.bad_columns
        ));
        rep.at_most(
            &format!("bad-p-ratio.{name}"),
            &format!("{name}: max_bad |p_i(t_s)/p_i(0)|"),
            r.p_ratio,
            *c.saddle_tol,
        );
        rep.close(
            &format!("sigma-bad-sigma-bad-mu-i2.{name}"),
            &format!("{name}: Σ_bad ℓ_i(t_p) / ½Σ_bad μ_i²"),
            r.bad_loss / r.saddle_loss,
            1.0,
            *c.plateau_tol,
        )
        .note(format!(
            "t_p = ½ln(1/rtol)/max_bad(μ_iρ̄_i) = {:.4}: the bad columns sit at the saddle; \
             the good columns still hold {:.3e} of the loss (R10)",
            r.traj.last_t(),
            r.good_loss
        ))
        .paper_claim("Remark 1.1: bad set ∪_i {q_iᵀm_i + ρ̄_iv_i = 0} (μ_i missing, E5)");
        rep.at_most(
            &format!("ode-closed-form.{name}"),
            &format!("{name}: max |z_ODE − z_closed form| on [0, t_s]"),
            r.closed_error,
            *c.closed_form_tol,
        );
    }
    let (wrong, tried) = existence_mismatches(p, &ms, ctx);
    rep.at_most(
        "bad-column-prescribed-delta-exists-delta",
        "bad column with prescribed δ exists ⇔ δ ≥ 0: mismatches",
        wrong as f64,
        0.0,
    )
    .note(format!(
        "{tried} cases (tasks × columns × δ ∈ {:?}); E17",
        p.delta_probe
    ))
    .paper_claim("Remark 1.1: the bad set is a union of hypersurfaces (empty for δ_i < 0, E17)");
    let min_delta = root_min_delta(p, &ms, ctx)?;
    rep.at_least(
        "r10-solve-fixed-delta-root",
        "R10 p-solve (q⊥, v fixed): min δ at the root",
        min_delta,
        -1e-12,
    )
    .note(format!(
        "{} draws per task: the root exists and moves δ to ≥ 0 (E17)",
        p.root_draws
    ));

    // E5 on lt: the paper's condition without μ_i gives a normally converging init. A property
    // of the lt task: it runs when a run's matrix is lt, from the paper's set drawn from the
    // seed like that run's default init (stream 40 + j), whether or not the files gave one
    let mut paper_panel = None;
    if let Some(j) = runs.iter().position(|r| r.task == "lt") {
        let m = &ms[j];
        let z0 = bad_state(p, m, BadSet::Paper, ctx, 40 + j as u64)?;
        let closed = DfClosedForm::new(m, &z0);
        let t_end = closed.onset_time() + *p.paper_horizon / closed.alpha();
        let times = linspace(0.0, t_end, *p.samples);
        let traj = integrate_flow(&DfFlow::new(m.clone()), &z0, &times, &ctx.ode)?;
        rep.stats("lt, paper's bad set", &traj.stats);
        let saddle_loss: f64 = p
            .bad_columns
            .iter()
            .map(|&col| 0.5 * m.column(col - 1).norm_squared())
            .sum();
        rep.at_most(
            "lt-paper-set-itm-rho-alpha",
            "lt, paper's set q_iᵀm_i + ρ̄_i v_i = 0: ℓ(T + h/α) / ½Σ_{bad} μ_i²",
            traj.loss[traj.len() - 1] / saddle_loss,
            *c.paper_set_tol,
        )
        .note(format!(
            "converges normally (h = {}); corrected bad-set values q_iᵀm_i + ρ̄_iμ_iv_i of the \
             columns: {:?}",
            *p.paper_horizon,
            p.bad_columns
                .iter()
                .map(|&col| closed.columns()[col - 1].bad_set_value())
                .collect::<Vec<_>>()
        ))
        .paper_claim("Theorem 1 / Remark 1.1: q_iᵀm_i = −ρ̄_i v_i is a bad initialization (E5)");
        paper_panel = Some(paper_figure_panel(&traj, Some(&runs[j]), saddle_loss));
    }

    rep.series = Table::new(&["task", "t", "loss"]);
    for r in &runs {
        rep.series
            .push_columns(&[r.task.into()], &[&r.traj.t, &r.traj.loss]);
    }
    rep.figure = Some(figure(p, ms[0].nrows(), &runs, paper_panel));
    Ok(rep)
}

fn paper_figure_panel(traj: &Trajectory, lt_run: Option<&BadRun>, saddle_loss: f64) -> LinePanel {
    let mut panel = LinePanel::new("lt: the paper's bad set is not bad (E5)", "t", "ℓ(t)")
        .log_y()
        .legend(LegendPosition::LowerLeft)
        .series(
            Series::numerics(
                "from q_iᵀm_i + ρ̄_i v_i = 0 (paper)",
                traj.t.clone(),
                traj.loss.clone(),
            )
            .color(2),
        )
        .hline(RefLine::new(saddle_loss, "½Σ_{bad} μ_i²"));
    if let Some(r) = lt_run {
        panel = panel.series(
            Series::numerics(
                "from q_iᵀm_i + ρ̄_iμ_i v_i = 0 (corrected)",
                r.traj.t.clone(),
                r.traj.loss.clone(),
            )
            .color(1),
        );
    }
    panel
}

fn figure(p: &Params, d: usize, runs: &[BadRun], paper_panel: Option<LinePanel>) -> Figure {
    let mut loss = LinePanel::new("loss from the corrected bad set", "t", "ℓ(t)")
        .log_y()
        .legend(LegendPosition::UpperRight);
    let mut decay = LinePanel::new("bad columns approach the saddle", "t", "|v_i(t)/v_i(0)|")
        .log_y()
        .legend(LegendPosition::LowerLeft);
    let mut color = 0;
    for r in runs {
        let name = r.task;
        loss = loss
            .series(Series::numerics(name, r.traj.t.clone(), r.traj.loss.clone()).color(color))
            .series(
                Series::theory(
                    format!("½Σ_{{bad}} μ_i² ({name})"),
                    vec![0.0, r.traj.last_t()],
                    vec![r.saddle_loss; 2],
                )
                .color(color),
            );
        for (col, rate, ratios) in &r.decay {
            decay = decay
                .series(
                    Series::numerics(
                        format!("{name}, column {col}"),
                        r.traj.t.clone(),
                        ratios.clone(),
                    )
                    .color(color),
                )
                .series(
                    Series::theory(
                        format!("e^(−μρt), μρ = {rate:.3}"),
                        r.traj.t.clone(),
                        r.traj.t.iter().map(|t| (-rate * t).exp()).collect(),
                    )
                    .color(color),
                );
            color += 1;
        }
    }
    let mut fig = Figure::new(3)
        .title(format!(
            "Remark 1.1: initializations on the bad set q_iᵀm_i + ρ̄_iμ_iv_i = 0 (d = {d}, bad \
             columns {:?}, δ = {:?})",
            p.bad_columns, p.bad_deltas
        ))
        .panel(loss)
        .panel(decay);
    if let Some(panel) = paper_panel {
        fig = fig.panel(panel);
    }
    fig
}

/// One df solve per task (and one from the paper's bad set), every sample kept; the existence
/// probes and root solves are O(d) each.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let tasks = n(p.tasks.len());
    let probes = tasks * n(p.d) * n(p.delta_probe.len());
    sizes::df_solves(
        sizes::Keys {
            solves: "tasks, d",
            samples: "tasks, samples, d",
        },
        tasks + 1.0,
        p.d,
        n(*p.samples),
        ctx.ode.method,
    )
    .table("samples", tasks * n(*p.samples), 3.0)
    .work("delta_probe", "existence probes", probes, 10.0 * n(p.d))
    .work(
        "root_draws",
        "root solves",
        tasks * n(p.root_draws),
        100.0 * n(p.d),
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.bad-init",
    paper: "000",
    summary: "Remark 1.1 (spec 000 R10, E5, E17): bad-set inits go to the saddle with loss \
              ½Σ_bad μ_i²; the set is empty for δ < 0; the paper's condition (no ‖m_i‖) is not \
              bad on lt.",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &[],
    run,
};

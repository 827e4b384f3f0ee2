//! `stiffness-report` (spec 000 §7, D4): how stiff the df and tf flows are, and what that costs
//! each integrator.
//!
//! For every problem the dense Hessian (from exact hvps; the flow's Jacobian is its negative)
//! is diagonalized at the initialization and at the limit. At the df limit the nonzero spectrum
//! is known (D4): {μ_iρ̄_i (×(d−1)), 2A_iμ_i}_i, so κ_df = max 2A_iμ_i / min μ_iρ̄_i; the check
//! holds the dense spectrum against it. Then every method integrates the problem to the same
//! horizon at the same tolerance and its work is recorded (steps, gradient and Hessian-vector
//! evaluations, factorizations).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::instance_files::InstanceFiles;
use super::sizes;
use crate::flow::{integrate_flow, linspace, Method, OdeConfig, Trajectory};
use crate::instance::histogram::task_label;
use crate::models::histogram::DfClosedForm;
use crate::plot::{BarPanel, Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::Cost;
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Check, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::tf_common::{
    default_d_thr, hessian_spectrum, limit_with_signs, read_study_files, study_instance, FlowKind,
    HessianSpectrum, StudyDraw, StudyProblem, TaskName,
};

/// One problem of the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    pub flow: FlowKind,
    pub task: TaskName,
    #[serde(default = "default_d_thr")]
    pub d_thr: usize,
    pub d: AtLeast<2>,
    /// Standard deviation of the Gaussian initialization.
    pub sigma: Positive,
    /// Horizon; df problems default to `horizon_alpha`/α (α from the closed form).
    #[serde(default)]
    pub t_end: Option<Positive>,
    /// The methods run on this problem (a subset of `Params::methods`; default all): the
    /// low-order implicit methods with dense LU are slow on the 702-dim problems.
    #[serde(default)]
    pub methods: Option<Vec<Method>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub problems: NonEmpty<Problem>,
    /// The methods compared, all at the same tolerance.
    pub methods: NonEmpty<Method>,
    pub rtol: f64,
    pub atol: f64,
    /// df horizon = horizon_alpha / α: ℓ ≈ 1e-12 after ≈ 14/α (spec §7.1).
    pub horizon_alpha: Positive,
    /// String length N and number of strings n of the tf problems.
    pub seq_len: AtLeast<1>,
    pub n: usize,
    /// |λ| ≤ zero_mode_tol·max|λ| counts as a zero mode.
    pub zero_mode_tol: Positive,
    /// The task matrix `M` and, for tf problems, one set of `strings`: replaces every problem's
    /// task, d_thr, d, seq_len and n. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// One initial state (`Q0`, `v0`): replaces every problem's σ and draw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// |κ_dense − κ_D4| / κ_D4 at the df limit (spec §6 row 18: 1e-8).
    pub kappa_rel_tol: Positive,
    /// max relative error of the sorted nonzero dense spectrum vs D4's multiset at the df limit.
    pub spectrum_rel_tol: Positive,
    /// max|H − Hᵀ|/max|H| of the assembled Hessians (an exact hvp gives rounding only).
    pub asymmetry_tol: Positive,
    /// Final-state error of every method on the df problems vs the closed form (max abs);
    /// global error ≲ 10³·rtol per unit of decay, plus β drift along the zero modes.
    pub solve_error_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    let problems: Vec<(FlowKind, usize)> = p.problems.iter().map(|pr| (pr.flow, *pr.d)).collect();
    read_study_files(
        sc,
        p.data_file.as_deref(),
        p.init_file.as_deref(),
        &problems,
    )
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc)?;
    for (k, pr) in p.problems.iter().enumerate() {
        if pr.flow == FlowKind::Tf && pr.t_end.is_none() {
            return Err(sc.invalid(
                &format!("params.problems[{k}].t_end"),
                "tf problems need a horizon (no closed-form α)",
            ));
        }
        if let Some(ms) = &pr.methods {
            if let Some(m) = ms.iter().find(|m| !p.methods.contains(m)) {
                return Err(sc.invalid(
                    &format!("params.problems[{k}].methods"),
                    format!("{} is not in params.methods", m.name()),
                ));
            }
        }
        if pr.flow == FlowKind::Tf && p.n < *pr.d && p.data_file.is_none() {
            return Err(sc.invalid(
                "params.n",
                format!("n = {} < d = {}: H_a singular (spec R3)", p.n, *pr.d),
            ));
        }
    }
    OdeConfig::new(Method::Bdf, p.rtol, p.atol)
        .validate()
        .map_err(|r| sc.invalid("params.rtol", r))
}

/// Results of one problem.
struct Outcome {
    label: String,
    instance: StudyProblem,
    d: usize,
    t_end: f64,
    at_init: HessianSpectrum,
    at_limit: HessianSpectrum,
    /// D4's nonzero spectrum and κ (df only).
    formula: Option<(Vec<f64>, f64)>,
    /// One run per method of `Params::methods` (None where the problem skips the method).
    runs: Vec<Option<Trajectory>>,
    /// max |z(t_end) − z_closed(t_end)| per run (df only).
    final_errors: Option<Vec<f64>>,
}

/// A short label: "df d10 σ0.1" (eq task) or "tf lt d10 σ0.5".
fn problem_label(pr: &Problem) -> String {
    let flow = pr.flow.label();
    let task = match pr.task {
        TaskName::Eq => String::new(),
        other => format!(" {}", other.task(pr.d_thr).name()),
    };
    format!("{flow}{task} d{} σ{}", *pr.d, *pr.sigma)
}

/// D4: the nonzero Hessian spectrum at the df limit, ascending.
fn d4_spectrum(closed: &DfClosedForm, d: usize) -> Vec<f64> {
    let mut values: Vec<f64> = closed
        .columns()
        .iter()
        .flat_map(|c| {
            let imb = c.imbalance();
            std::iter::repeat_n(c.mu() * imb.rhob, d - 1).chain([2.0 * imb.a * c.mu()])
        })
        .collect();
    values.sort_by(f64::total_cmp);
    values
}

/// A label of problem k on the user's files ("df lt d3 #1"): σ, d and the task come from them.
fn file_label(pr: &Problem, k: usize, instance: &StudyProblem) -> String {
    let task = task_label(&instance.m);
    format!("{} {task} d{} #{k}", pr.flow.label(), instance.d())
}

fn run_problem(
    p: &Params,
    files: &InstanceFiles,
    ctx: &RunContext,
    (k, pr): (usize, &Problem),
) -> Result<Outcome, RunError> {
    // trial 0 for every problem: problems of equal d share the init direction (only σ differs)
    let draw = StudyDraw {
        task: &pr.task.task(pr.d_thr),
        d: *pr.d,
        sigma: *pr.sigma,
        seq_len: *p.seq_len,
        n: p.n,
    };
    let instance = StudyProblem::new(pr.flow, files, &draw, ctx)?;
    let z0 = &instance.z0;
    let d = instance.d();
    let closed = DfClosedForm::new(&instance.m, z0);
    let flow = instance.flow()?;
    let t_end = pr.t_end.map_or(*p.horizon_alpha / closed.alpha(), |t| *t);
    let times = linspace(0.0, t_end, 2);
    let selected = pr.methods.as_ref().unwrap_or(&*p.methods);
    let runs = p
        .methods
        .iter()
        .map(|m| {
            selected
                .contains(m)
                .then(|| {
                    let cfg = OdeConfig::new(*m, p.rtol, p.atol);
                    integrate_flow(flow.as_ref(), z0, &times, &cfg)
                })
                .transpose()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let first_run = runs.iter().flatten().next().expect("validated: ≥ 1 method");
    let z_star = match pr.flow {
        FlowKind::Df => closed.limit_state(),
        FlowKind::Tf => limit_with_signs(&closed, first_run.last_state(), d),
    };
    let (formula, final_errors) = match pr.flow {
        FlowKind::Df => {
            let mut exact = vec![0.0; z0.len()];
            closed.state(t_end, &mut exact);
            let errors = runs
                .iter()
                .flatten()
                .map(|r| {
                    stats::max(
                        r.last_state()
                            .iter()
                            .zip(&exact)
                            .map(|(a, b)| (a - b).abs()),
                    )
                })
                .collect();
            (
                Some((d4_spectrum(&closed, d), closed.kappa())),
                Some(errors),
            )
        }
        FlowKind::Tf => (None, None),
    };
    let on_files = p.data_file.is_some() || p.init_file.is_some();
    Ok(Outcome {
        label: match on_files {
            true => file_label(pr, k, &instance),
            false => problem_label(pr),
        },
        d,
        t_end,
        at_init: hessian_spectrum(flow.as_ref(), z0, *p.zero_mode_tol)?,
        at_limit: hessian_spectrum(flow.as_ref(), &z_star, *p.zero_mode_tol)?,
        formula,
        runs,
        final_errors,
        instance,
    })
}

/// The nonzero eigenvalues of a spectrum (|λ| above the zero-mode threshold).
fn nonzero(s: &HessianSpectrum, tol: f64) -> Vec<f64> {
    let threshold = tol * s.conditioning.largest.abs();
    s.values
        .iter()
        .copied()
        .filter(|x| x.abs() > threshold)
        .collect()
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let outcomes = p
        .problems
        .iter()
        .enumerate()
        .map(|problem| run_problem(p, &files, ctx, problem))
        .collect::<Result<Vec<_>, _>>()?;
    let instances: Vec<&StudyProblem> = outcomes.iter().map(|o| &o.instance).collect();
    let mut rep = Report {
        instance: Some(study_instance(&instances)),
        ..Default::default()
    };

    let (mut kappa_err, mut spectrum_err, mut asym) = (0.0f64, 0.0f64, 0.0f64);
    let mut wrong_zero_modes = Vec::new();
    for o in &outcomes {
        asym = stats::max([
            asym,
            o.at_init.relative_asymmetry,
            o.at_limit.relative_asymmetry,
        ]);
        if o.at_limit.conditioning.zero_modes != o.d {
            wrong_zero_modes.push(o.label.clone());
        }
        if let Some((formula, kappa)) = &o.formula {
            kappa_err = stats::larger(
                kappa_err,
                (o.at_limit.conditioning.kappa_nonzero - kappa).abs() / kappa,
            );
            let dense = nonzero(&o.at_limit, *p.zero_mode_tol);
            spectrum_err = if dense.len() == formula.len() {
                stats::max_with(
                    spectrum_err,
                    dense.iter().zip(formula).map(|(a, b)| (a - b).abs() / b),
                )
            } else {
                f64::INFINITY
            };
        }
    }
    let df_count = outcomes.iter().filter(|o| o.formula.is_some()).count();
    rep.check(
        Check::at_most(
            "kappa-dense-kappa-d4-kappa-d4",
            "|κ_dense − κ_D4| / κ_D4 at the df limit (worst problem)",
            kappa_err,
            *c.kappa_rel_tol,
        )
        .note(format!(
            "{df_count} df problems; κ_D4 = max 2A_iμ_i / min μ_iρ̄_i, κ_dense from the dense \
             Hessian with the zero modes excluded"
        )),
    );
    rep.check(
        Check::at_most(
            "rel-error-nonzero-df-limit-spectrum",
            "max rel. error of the nonzero df limit spectrum vs {μ_iρ̄_i (×(d−1)), 2A_iμ_i}",
            spectrum_err,
            *c.spectrum_rel_tol,
        )
        .note("sorted eigenvalues against the D4 multiset; ∞ if the counts differ"),
    );
    rep.check(
        Check::at_most(
            "problems-whose-limit-hessian-has-zero",
            "problems whose limit Hessian has ≠ d zero modes",
            wrong_zero_modes.len() as f64,
            0.0,
        )
        .note(if wrong_zero_modes.is_empty() {
            "the d rescaling directions (normals of the β level set, spec §7.3)".to_string()
        } else {
            format!("failing: {}", wrong_zero_modes.join(", "))
        }),
    );
    rep.check(
        Check::at_most(
            "ht-assembled-hessians",
            "max|H − Hᵀ|/max|H| of the assembled Hessians",
            asym,
            *c.asymmetry_tol,
        )
        .note("an exact hvp gives a symmetric matrix up to rounding"),
    );
    let worst_solve = stats::max(
        outcomes
            .iter()
            .filter_map(|o| o.final_errors.as_ref())
            .flatten()
            .copied(),
    );
    rep.check(
        Check::at_most(
            "end-closed-form-over-df-problems",
            "max |z(t_end) − closed form| over df problems and methods",
            worst_solve,
            *c.solve_error_tol,
        )
        .note(format!(
            "rtol {:e}, atol {:e}: the work below buys the same accuracy",
            p.rtol, p.atol
        )),
    );

    add_tables(&mut rep, p, &outcomes);
    rep.figure = Some(figure(p, &outcomes));
    Ok(rep)
}

fn add_tables(rep: &mut Report, p: &Params, outcomes: &[Outcome]) {
    rep.series = Table::new(&["problem", "point", "index", "eigenvalue"]);
    let mut work = Table::new(&[
        "problem",
        "method",
        "t_end",
        "steps",
        "rhs_evals",
        "jvp_evals",
        "linear_solver_setups",
        "error_test_failures",
        "nonlinear_failures",
        "final_error_vs_closed_form",
        "wall_seconds",
    ]);
    let mut summary = serde_json::Map::new();
    for o in outcomes {
        for (point, s) in [("init", &o.at_init), ("limit", &o.at_limit)] {
            for (k, &lambda) in s.values.iter().enumerate() {
                rep.series.push(vec![
                    o.label.as_str().into(),
                    point.into(),
                    k.into(),
                    lambda.into(),
                ]);
            }
        }
        let ran = o
            .runs
            .iter()
            .zip(&*p.methods)
            .filter_map(|(r, m)| Some((r.as_ref()?, m)));
        for (k, (run, method)) in ran.enumerate() {
            let s = &run.stats;
            let err = o.final_errors.as_ref().map_or(f64::NAN, |e| e[k]);
            work.push(vec![
                o.label.as_str().into(),
                method.name().into(),
                o.t_end.into(),
                s.steps.into(),
                s.rhs_evals.into(),
                s.jvp_evals.into(),
                s.linear_solver_setups.into(),
                s.error_test_failures.into(),
                s.nonlinear_failures.into(),
                err.into(),
                s.wall_seconds.into(),
            ]);
            rep.stats(format!("{} {}", o.label, method.name()), s);
        }
        let (ci, cl) = (&o.at_init.conditioning, &o.at_limit.conditioning);
        let negative = o.at_init.values.iter().filter(|&&x| x < 0.0).count();
        summary.insert(
            o.label.clone(),
            serde_json::json!({
                "t_end": o.t_end,
                "init": {
                    "lambda_max": ci.largest,
                    "lambda_min_nonzero_modulus": ci.smallest_nonzero,
                    "kappa_nonzero": ci.kappa_nonzero,
                    "negative_eigenvalues": negative,
                },
                "limit": {
                    "lambda_max": cl.largest,
                    "lambda_min_nonzero": cl.smallest_nonzero,
                    "kappa_nonzero": cl.kappa_nonzero,
                    "zero_modes": cl.zero_modes,
                    "kappa_formula_D4": o.formula.as_ref().map(|f| f.1),
                },
                // explicit methods need ≳ λ_max·t_end steps once stability-limited
                "stiffness_index_lambda_max_times_t_end": cl.largest.abs() * o.t_end,
            }),
        );
    }
    rep.tables.push(("work".into(), work));
    rep.derive("problems", summary);
}

fn figure(p: &Params, outcomes: &[Outcome]) -> Figure {
    let spectrum_panel = |title: &str, pick: fn(&Outcome) -> &HessianSpectrum| {
        let mut panel = LinePanel::new(title, "eigenvalue index k / n", "|λ_k| of ∇²ℓ").log_y();
        for (i, o) in outcomes.iter().enumerate() {
            let s = pick(o);
            let moduli = nonzero(s, *p.zero_mode_tol);
            let negative = moduli.iter().filter(|&&x| x < 0.0).count();
            let mut moduli: Vec<f64> = moduli.iter().map(|x| x.abs()).collect();
            moduli.sort_by(f64::total_cmp);
            let n = moduli.len().max(2) as f64;
            let x = (0..moduli.len()).map(|k| k as f64 / (n - 1.0)).collect();
            let label = if negative > 0 {
                format!("{} ({negative} λ < 0)", o.label)
            } else {
                o.label.clone()
            };
            panel = panel.series(Series::numerics(label, x, moduli).color(i));
        }
        panel
    };
    let categories: Vec<String> = outcomes.iter().map(|o| o.label.clone()).collect();
    let bars = |title: &str, y_label: &str, value: fn(&Trajectory) -> usize| {
        let mut panel = BarPanel::new(title, "problem", y_label, categories.clone()).log_y();
        for (k, m) in p.methods.iter().enumerate() {
            // a skipped method leaves a gap (NaN is not drawn)
            let values = outcomes
                .iter()
                .map(|o| o.runs[k].as_ref().map_or(f64::NAN, |r| value(r) as f64))
                .collect();
            panel = panel.group(m.label(), values, LineStyle::Solid);
        }
        panel
    };
    Figure::new(2)
        .aspect(0.66)
        .title(format!(
            "Stiffness of the df and tf flows: Hessian spectra and solver work at \
             rtol {:e}, atol {:e}",
            p.rtol, p.atol
        ))
        .panel(
            spectrum_panel("(a) spectrum at the initialization", |o| &o.at_init)
                .legend(LegendPosition::LowerRight),
        )
        .panel(
            spectrum_panel("(b) spectrum at the limit (zero modes omitted)", |o| {
                &o.at_limit
            })
            .legend(LegendPosition::UpperLeft),
        )
        .panel(bars(
            "(c) gradient (rhs) evaluations to t_end",
            "rhs evaluations",
            |r| r.stats.rhs_evals,
        ))
        .panel(bars("(d) accepted steps to t_end", "steps", |r| {
            r.stats.steps
        }))
}

/// Per problem: its dataset (T3 for ℓ_tf), one solve per method (dense Newton matrices for the
/// implicit ones) and two dense Hessian spectra.
fn cost(p: &Params, _: &RunContext) -> Cost {
    p.problems.iter().fold(Cost::new(), |cost, pr| {
        let grad = sizes::grad(pr.flow, *pr.d);
        let methods = pr.methods.as_ref().unwrap_or(&*p.methods);
        let solves = methods.iter().fold(Cost::new(), |c, &m| {
            c.ode("problems.d", 1.0, sizes::dim(*pr.d), grad, m)
        });
        cost.and(sizes::tf_data("problems.d, n", 1.0, *pr.d, *p.seq_len, p.n))
            .and(solves)
            .dense_hessians("problems.d", 2.0, sizes::dim(*pr.d), grad)
    })
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.stiffness-report",
    paper: "000",
    summary: "Spec §7: Hessian spectra of the df and tf flows at init and at the limit (κ vs the \
              D4 formula), and the work of Tsit45, Bdf, Esdirk34 and TrBdf2 on each problem at \
              one tolerance.",
    solver: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[],
    run,
};

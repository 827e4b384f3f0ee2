//! `work-precision`: work-precision diagrams (in the manner of DifferentialEquations.jl) for the
//! df and tf flows of seed 000: the error of each integrator against an exact or tight
//! reference, versus its work (gradient evaluations, Hessian-vector products, wall time), over a
//! range of tolerances; and gradient descent over a range of step sizes, whose error is its
//! distance from the flow at t = kη.
//!
//! Cost model: one gradient-equivalent = one rhs (gradient) evaluation; one Jacobian-vector
//! product (an exact hvp) counts `hvp_cost` gradient-equivalents, the measured time ratio of the
//! two kernels (benches/solvers.rs: about 2 for ℓ_tf, two T3 contractions against one; about 1.5
//! for ℓ_df). Dense LU factorizations are not in this count: the wall-time panels show them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::sizes;
use crate::analysis::fit::{log_log_slope_fit, Window};
use crate::flow::{
    gradient_descent, integrate_flow, linspace, DiscreteConfig, Method, OdeConfig, Recording,
    SolverStats, StepRule, Trajectory,
};
use crate::models::histogram::DfClosedForm;
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::histogram::instance_files::InstanceFiles;
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::tf_common::{
    default_d_thr, read_study_files, study_instance, FlowKind, StudyDraw, StudyProblem, TaskName,
};

/// One problem of the study.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    /// Short name for legends and tables.
    pub name: String,
    pub flow: FlowKind,
    pub task: TaskName,
    /// Threshold D of the thr task.
    #[serde(default = "default_d_thr")]
    pub d_thr: usize,
    pub d: AtLeast<2>,
    /// Standard deviation of the Gaussian initialization.
    pub sigma: Positive,
    pub t_end: Positive,
    /// GD step sizes; t_end/(η·(grid_points − 1)) must be an integer (GD lands on the grid).
    pub etas: Vec<f64>,
    /// Gradient-equivalents of one hvp (cost model, see the module docs).
    pub hvp_cost: Positive,
    /// Whether the implicit methods are expected to win (checked: Bdf needs fewer rhs
    /// evaluations than Tsit45 at every tolerance).
    #[serde(default)]
    pub stiff: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub problems: NonEmpty<Problem>,
    pub methods: NonEmpty<Method>,
    /// Relative tolerances, loosest first; atol = rtol·atol_ratio.
    pub rtols: Vec<f64>,
    pub atol_ratio: Positive,
    /// Errors are measured on this many equally spaced times in [0, t_end].
    pub grid_points: AtLeast<2>,
    /// Reference solve of the tf problems, and a second solve that estimates its error.
    pub reference: OdeConfig,
    pub reference_check: OdeConfig,
    /// String length N and number of strings n of the tf problems.
    pub seq_len: AtLeast<1>,
    pub n: usize,
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
    /// Error at the tightest rtol ≤ this × error at the loosest, for every adaptive method
    /// (error ∝ tolerance: 6 decades of rtol must buy at least 3 of error).
    pub error_reduction_max: Positive,
    /// Spearman rank correlation of (rtol, error) ≥ this for every adaptive method
    /// (monotone up to a swap of neighbours).
    pub spearman_min: f64,
    /// Slope of log error vs log η for GD (first-order method: 1) must lie in [lo, hi].
    pub gd_slope_lo: f64,
    pub gd_slope_hi: f64,
    /// The tf reference's estimated error ≤ this × the smallest error measured against it.
    pub reference_error_ratio_max: Positive,
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

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc)?;
    if p.rtols.len() < 3 {
        return Err(sc.invalid("params.rtols", "need at least 3 tolerances"));
    }
    if p.rtols.windows(2).any(|w| w[1] >= w[0]) {
        return Err(sc.invalid("params.rtols", "must decrease strictly (loosest first)"));
    }
    for &rtol in &p.rtols {
        OdeConfig::new(Method::Bdf, rtol, rtol * *p.atol_ratio)
            .validate()
            .map_err(|r| sc.invalid("params.rtols", r))?;
    }
    for (key, cfg) in [
        ("params.reference", &p.reference),
        ("params.reference_check", &p.reference_check),
    ] {
        cfg.validate().map_err(|r| sc.invalid(key, r))?;
    }
    for (k, pr) in p.problems.iter().enumerate() {
        let key = |f: &str| format!("params.problems[{k}].{f}");
        if pr.etas.len() < 2 {
            return Err(sc.invalid(&key("etas"), "need at least 2 step sizes for a slope"));
        }
        for &eta in &pr.etas {
            sc.require_positive(&[(&key("etas"), eta)])?;
            gd_steps_per_interval(pr, eta, *p.grid_points)
                .map_err(|r| sc.invalid(&key("etas"), r))?;
        }
        if pr.flow == FlowKind::Tf && p.n < *pr.d && p.data_file.is_none() {
            return Err(sc.invalid("params.n", "n < d: H_a singular (spec R3)"));
        }
        if pr.stiff && !(p.methods.contains(&Method::Bdf) && p.methods.contains(&Method::Tsit45)) {
            return Err(sc.invalid(&key("stiff"), "the stiffness check needs bdf and tsit45"));
        }
    }
    if c.gd_slope_lo >= c.gd_slope_hi {
        return Err(sc.invalid("checks.gd_slope_lo", "must be below gd_slope_hi"));
    }
    Ok(())
}

/// GD steps between two grid times, if η divides the grid spacing.
fn gd_steps_per_interval(pr: &Problem, eta: f64, grid_points: usize) -> Result<usize, String> {
    let per = *pr.t_end / (grid_points - 1) as f64 / eta;
    let rounded = per.round();
    if rounded >= 1.0 && (per - rounded).abs() <= 1e-9 * per {
        Ok(rounded as usize)
    } else {
        Err(format!(
            "η = {eta} does not divide the grid spacing t_end/(grid_points − 1) = {}",
            *pr.t_end / (grid_points - 1) as f64
        ))
    }
}

/// One point of a work-precision curve.
struct Point {
    /// "tsit45", …, or "gd".
    method: String,
    /// rtol for the integrators, η for GD.
    setting: f64,
    stats: SolverStats,
    /// max over the grid (t > 0) and at t_end of max_j |z_j − z_ref,j|.
    error_grid: f64,
    error_final: f64,
}

impl Point {
    fn gradient_equivalents(&self, hvp_cost: f64) -> f64 {
        self.stats.rhs_evals as f64 + hvp_cost * self.stats.jvp_evals as f64
    }
}

struct Study {
    problem: Problem,
    instance: StudyProblem,
    points: Vec<Point>,
    /// Estimated error of the reference (0 for the closed form).
    reference_error: f64,
    reference_stats: Option<SolverStats>,
}

/// (max over the grid, final) ∞-norm distance of a trajectory from the reference states.
fn errors(tr: &Trajectory, reference: &[Vec<f64>]) -> Result<(f64, f64), RunError> {
    if tr.len() != reference.len() {
        return Err(RunError::Other(format!(
            "{} produced {} samples, expected {}",
            tr.stats.method,
            tr.len(),
            reference.len()
        )));
    }
    let dist = |k: usize| {
        stats::max(
            tr.state(k)
                .iter()
                .zip(&reference[k])
                .map(|(a, b)| (a - b).abs()),
        )
    };
    let grid = stats::max((1..tr.len()).map(dist));
    Ok((grid, dist(tr.len() - 1)))
}

fn run_problem(
    p: &Params,
    files: &InstanceFiles,
    ctx: &RunContext,
    pr: &Problem,
) -> Result<Study, RunError> {
    let draw = StudyDraw {
        task: &pr.task.task(pr.d_thr),
        d: *pr.d,
        sigma: *pr.sigma,
        seq_len: *p.seq_len,
        n: p.n,
    };
    let instance = StudyProblem::new(pr.flow, files, &draw, ctx)?;
    let z0 = &instance.z0;
    let times = linspace(0.0, *pr.t_end, *p.grid_points);
    let flow = instance.flow()?;
    let (reference, reference_error, reference_stats) = match pr.flow {
        FlowKind::Df => {
            let closed = DfClosedForm::new(&instance.m, z0);
            let states = times
                .iter()
                .map(|&t| {
                    let mut z = vec![0.0; z0.len()];
                    closed.state(t, &mut z);
                    z
                })
                .collect::<Vec<_>>();
            (states, 0.0, None)
        }
        FlowKind::Tf => {
            let tr = integrate_flow(flow.as_ref(), z0, &times, &p.reference)?;
            let states: Vec<Vec<f64>> = (0..tr.len()).map(|k| tr.state(k).to_vec()).collect();
            let check = integrate_flow(flow.as_ref(), z0, &times, &p.reference_check)?;
            (states.clone(), errors(&check, &states)?.0, Some(tr.stats))
        }
    };
    let mut points = Vec::new();
    for &method in &*p.methods {
        for &rtol in &p.rtols {
            let cfg = OdeConfig::new(method, rtol, rtol * *p.atol_ratio);
            let tr = integrate_flow(flow.as_ref(), z0, &times, &cfg)?;
            let (error_grid, error_final) = errors(&tr, &reference)?;
            points.push(Point {
                method: method.name().into(),
                setting: rtol,
                stats: tr.stats,
                error_grid,
                error_final,
            });
        }
    }
    for &eta in &pr.etas {
        let every = gd_steps_per_interval(pr, eta, *p.grid_points).map_err(RunError::Other)?;
        let steps = every * (*p.grid_points - 1);
        let cfg = DiscreteConfig::new(StepRule::Constant { eta }, steps, Recording::Every(every));
        let tr = gradient_descent(flow.as_ref(), z0, &cfg)?;
        let (error_grid, error_final) = errors(&tr, &reference)?;
        points.push(Point {
            method: "gd".into(),
            setting: eta,
            stats: tr.stats,
            error_grid,
            error_final,
        });
    }
    Ok(Study {
        problem: pr.clone(),
        instance,
        points,
        reference_error,
        reference_stats,
    })
}

/// Spearman rank correlation of two equally long samples without ties.
fn spearman(x: &[f64], y: &[f64]) -> f64 {
    let ranks = |v: &[f64]| {
        let mut order: Vec<usize> = (0..v.len()).collect();
        order.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
        let mut r = vec![0.0; v.len()];
        for (rank, &i) in order.iter().enumerate() {
            r[i] = rank as f64;
        }
        r
    };
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let d2: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - b).powi(2)).sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

impl Study {
    fn curve(&self, method: &str) -> Vec<&Point> {
        self.points.iter().filter(|q| q.method == method).collect()
    }
}

fn add_checks(rep: &mut Report, p: &Params, c: &Checks, studies: &[Study]) {
    let on_files = p.data_file.is_some() || p.init_file.is_some();
    for s in studies {
        let name = &s.problem.name;
        // error ∝ tolerance: tightest vs loosest, and monotone ranks, per method
        let per_method: Vec<(f64, f64, &str)> = p
            .methods
            .iter()
            .map(|m| {
                let curve = s.curve(m.name());
                let reduction = curve.last().expect("≥ 3 rtols").error_grid / curve[0].error_grid;
                let tols: Vec<f64> = curve.iter().map(|q| q.setting).collect();
                let errs: Vec<f64> = curve.iter().map(|q| q.error_grid).collect();
                (reduction, spearman(&tols, &errs), m.name())
            })
            .collect();
        // a NaN reduction or rank is the worst and fails (the last of equal maxima, the first
        // of equal minima)
        let (worst_reduction, worst_method) =
            stats::worst(per_method.iter().rev().map(|m| (m.0, m.2))).expect("≥ 1 method");
        let (worst_rank, worst_rank_method) =
            stats::best(per_method.iter().map(|m| (m.1, m.2))).expect("≥ 1 method");
        let (loosest, tightest) = (p.rtols[0], p.rtols[p.rtols.len() - 1]);
        rep.at_most(
            &format!("error-rtol-error-rtol-worst-method.{name}-{tightest:e}-{loosest:e}"),
            &format!("{name}: error(rtol {tightest:e}) / error(rtol {loosest:e}), worst method"),
            worst_reduction,
            *c.error_reduction_max,
        )
        .note(format!("worst: {worst_method}; max error over the grid"));
        rep.at_least(
            &format!("spearman-rho-rtol-error-worst-method.{name}"),
            &format!("{name}: Spearman ρ(rtol, error), worst method"),
            worst_rank,
            c.spearman_min,
        )
        .note(format!("worst: {worst_rank_method}"));
        // GD is first order: error ∝ η
        let mut gd: Vec<(f64, f64)> = s
            .curve("gd")
            .iter()
            .map(|q| (q.setting, q.error_grid))
            .collect();
        gd.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (etas, errs): (Vec<f64>, Vec<f64>) = gd.into_iter().unzip();
        let window = Window::Time {
            from: 0.0,
            to: f64::INFINITY,
        };
        let slope = log_log_slope_fit(&etas, &errs, window).map_or(f64::NAN, |f| f.slope);
        rep.within(
            &format!("gd-slope-log-error-log-eta.{name}"),
            &format!("{name}: GD slope d log error / d log η"),
            slope,
            c.gd_slope_lo,
            c.gd_slope_hi,
        )
        .note("GD is a first-order method for the flow at t = kη");
        if s.problem.stiff {
            stiffness_checks(rep, s, on_files);
        }
        if s.reference_stats.is_some() {
            let smallest = stats::min(s.points.iter().map(|q| q.error_grid));
            rep.at_most(
                &format!("reference-error-estimate-smallest-measured-error.{name}"),
                &format!("{name}: reference error estimate / smallest measured error"),
                s.reference_error / smallest,
                *c.reference_error_ratio_max,
            )
            .note(format!(
                "reference {} rtol {:e} vs {} rtol {:e}: max difference {:.3e} on the grid",
                p.reference.method.name(),
                p.reference.rtol,
                p.reference_check.method.name(),
                p.reference_check.rtol,
                s.reference_error
            ));
        }
    }
}

/// On a stiff problem Bdf must need less work than Tsit45 at every tolerance: fewer rhs
/// evaluations (BDF spends about one per step, Tsit45 six, so this alone also holds on mildly
/// stiff problems) and fewer gradient-equivalents, which charge Bdf for its Jacobians (the
/// stiffness effect proper: it fails on non-stiff problems, where Tsit45 takes few steps).
/// Skipped on a user's files: `stiff` describes the built-in σ = 2 draw, not the file's instance.
fn stiffness_checks(rep: &mut Report, s: &Study, on_files: bool) {
    let bdf = s.curve(Method::Bdf.name());
    let tsit = s.curve(Method::Tsit45.name());
    type Work = fn(&Point, f64) -> f64;
    let measures: [(&str, Work); 2] = [
        ("rhs evals", |q, _| q.stats.rhs_evals as f64),
        ("gradient-equivalents", |q, c| q.gradient_equivalents(c)),
    ];
    for (what, work) in measures {
        let name = format!(
            "{}: tolerances at which Bdf needs ≥ the {what} of Tsit45",
            s.problem.name
        );
        if on_files {
            rep.skip(
                &format!("bdf-loses.{}-{what}", s.problem.name),
                name,
                "stiff = true marks the built-in σ = 2 draw (imbalance δ_i ≈ (d − 1)σ², κ ~ 10³); \
                 the instance from params.data_file/init_file is not known to be stiff (its work \
                 per method is in series.csv)",
            );
            continue;
        }
        let ratios: Vec<f64> = bdf
            .iter()
            .zip(&tsit)
            .map(|(b, t)| work(b, *s.problem.hvp_cost) / work(t, *s.problem.hvp_cost))
            .collect();
        let losses = ratios.iter().filter(|&&r| r >= 1.0).count();
        let worst = stats::max(ratios.iter());
        rep.at_most(
            &format!("bdf-loses.{}-{what}", s.problem.name),
            &name,
            losses as f64,
            0.0,
        )
        .note(format!(
            "stiff problem; max {what}(Bdf)/{what}(Tsit45) over the tolerances = {worst:.3}"
        ));
    }
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let studies = p
        .problems
        .iter()
        .map(|pr| run_problem(p, &files, ctx, pr))
        .collect::<Result<Vec<Study>, _>>()?;
    let instances: Vec<&StudyProblem> = studies.iter().map(|s| &s.instance).collect();
    let mut rep = Report {
        instance: Some(study_instance(&instances)),
        ..Default::default()
    };
    add_checks(&mut rep, p, c, &studies);
    rep.series = Table::new(&[
        "problem",
        "method",
        "rtol_or_eta",
        "steps",
        "rhs_evals",
        "jvp_evals",
        "gradient_equivalents",
        "linear_solver_setups",
        "error_grid_max",
        "error_final",
        "wall_seconds",
    ]);
    for s in &studies {
        for q in &s.points {
            rep.series.push(vec![
                s.problem.name.as_str().into(),
                q.method.as_str().into(),
                q.setting.into(),
                q.stats.steps.into(),
                q.stats.rhs_evals.into(),
                q.stats.jvp_evals.into(),
                q.gradient_equivalents(*s.problem.hvp_cost).into(),
                q.stats.linear_solver_setups.into(),
                q.error_grid.into(),
                q.error_final.into(),
                q.stats.wall_seconds.into(),
            ]);
        }
        if let Some(st) = &s.reference_stats {
            rep.stats(format!("{} reference", s.problem.name), st);
        }
        rep.derive(
            &format!("{} reference_error_estimate", s.problem.name),
            s.reference_error,
        );
    }
    rep.figure = Some(figure(p, &studies));
    Ok(rep)
}

fn figure(p: &Params, studies: &[Study]) -> Figure {
    let mut fig = Figure::new(3).aspect(0.96).title(format!(
        "Work-precision (max error on a {}-point grid vs work): integrators over rtol ∈ [{:e}, \
         {:e}], GD over η",
        *p.grid_points,
        p.rtols.last().copied().unwrap_or(f64::NAN),
        p.rtols[0]
    ));
    type Work = fn(&Point, f64) -> f64;
    let axes: [(&str, Work); 3] = [
        ("rhs (gradient) evaluations", |q, _| {
            q.stats.rhs_evals as f64
        }),
        ("gradient-equivalents (rhs + c·hvp)", |q, c| {
            q.gradient_equivalents(c)
        }),
        ("wall time [s]", |q, _| q.stats.wall_seconds),
    ];
    let mut names: Vec<String> = p.methods.iter().map(|m| m.name().to_string()).collect();
    names.push("gd".into());
    for s in studies {
        for (column, (x_label, work)) in axes.into_iter().enumerate() {
            let legend = if column == 0 {
                LegendPosition::LowerLeft
            } else {
                LegendPosition::None
            };
            let mut panel = LinePanel::new(
                format!("{} (c = {})", s.problem.name, *s.problem.hvp_cost),
                x_label,
                "max error",
            )
            .log_x()
            .log_y()
            .legend(legend);
            for (i, name) in names.iter().enumerate() {
                let curve = s.curve(name);
                let x = curve.iter().map(|q| work(q, *s.problem.hvp_cost)).collect();
                let y = curve.iter().map(|q| q.error_grid).collect();
                // the methods as the literature prints them (Tsit5(4), TR-BDF2)
                let label = match Method::parse(name) {
                    Some(m) => m.label().to_string(),
                    None => "GD (η)".to_string(),
                };
                panel = panel.series(Series::new(label, x, y, LineStyle::SolidMarkers).color(i));
            }
            fig = fig.panel(panel);
        }
    }
    fig
}

/// Per problem: its dataset, the reference and check solves and one solve per (method, rtol),
/// each on `grid_points` samples (the reference's held twice), and GD for t_end/η steps per η.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let samples = n(*p.grid_points);
    p.problems.iter().fold(Cost::new(), |cost, pr| {
        let (dim, grad) = (sizes::dim(*pr.d), sizes::grad(pr.flow, *pr.d));
        let rtols = n(p.rtols.len());
        let solves = p.methods.iter().fold(Cost::new(), |c, &m| {
            c.ode("problems.d, rtols", rtols, dim, grad, m)
        });
        let gd_steps: f64 = pr.etas.iter().map(|eta| *pr.t_end / eta).sum();
        cost.and(sizes::tf_data("problems.d, n", 1.0, *pr.d, *p.seq_len, p.n))
            .ode("problems.d", 1.0, dim, grad, p.reference.method)
            .ode("problems.d", 1.0, dim, grad, p.reference_check.method)
            .and(solves)
            .records("grid_points, problems.d", 3.0, samples, dim)
            .work(
                "problems.t_end, problems.etas",
                "GD steps (t_end/η per η)",
                gd_steps,
                grad,
            )
    })
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.work-precision",
    paper: "000",
    summary: "Work-precision diagrams for the df flow (exact closed-form reference), the tf flow \
              and a stiff imbalanced df flow: Tsit45, Bdf, Esdirk34, TrBdf2 over rtol and GD \
              over η; error vs gradient evaluations, hvps and wall time.",
    solver: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &["* reference_error_estimate"],
    run,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_monotone_reversed_and_swapped_samples() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        let up = [0.1, 0.5, 0.7, 2.0, 3.0, 9.0, 10.0];
        let down: Vec<f64> = up.iter().map(|v| -v).collect();
        assert_eq!(spearman(&x, &up), 1.0);
        assert_eq!(spearman(&x, &down), -1.0);
        // one swap of neighbours: Σd² = 2, ρ = 1 − 12/(7·48)
        let swapped = [0.1, 0.7, 0.5, 2.0, 3.0, 9.0, 10.0];
        assert!((spearman(&x, &swapped) - (1.0 - 12.0 / 336.0)).abs() < 1e-15);
    }

    #[test]
    fn gd_must_land_on_the_error_grid() {
        let problem = Problem {
            name: "p".into(),
            flow: FlowKind::Df,
            task: TaskName::Eq,
            d_thr: 2,
            d: 3.try_into().unwrap(),
            sigma: 1.0.try_into().unwrap(),
            t_end: 20.0.try_into().unwrap(),
            etas: vec![],
            hvp_cost: 1.0.try_into().unwrap(),
            stiff: false,
        };
        // grid spacing 20/20 = 1
        assert_eq!(gd_steps_per_interval(&problem, 0.01, 21), Ok(100));
        assert_eq!(gd_steps_per_interval(&problem, 0.04, 21), Ok(25));
        assert!(gd_steps_per_interval(&problem, 0.03, 21).is_err());
        assert!(gd_steps_per_interval(&problem, 2.0, 21).is_err());
    }
}

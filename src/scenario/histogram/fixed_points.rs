//! `fixed-points` (spec 000 R8(e), D1, D4): the stationary points of one df column
//! ℓ_i = ½‖v_iq_i − m_i‖² on level sets β_i = ‖q_i‖² − v_i², their Hessian spectra and
//! condition numbers against the formulas, the same for the full df flow, and the Jacobians of
//! Theorem 2's system at its three fixed points.
//!
//! D1: minima v = ±√(μρ̄), q = m/v with Hessian spectrum {0, μρ̄ (×(d−1)), 2Aμ}; saddles
//! {v = 0, q ⊥ m, ‖q‖² = β}, only for β ≥ 0, with {−μρ̄, 0 (×(d−1)), μρ}. D4: the nonzero
//! spectrum at the limit has κ = max 2A_iμ_i / min μ_iρ̄_i (= 1 + ρ² for one column).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::analysis::linearize::{eigenvalues, jacobian};
use crate::flow::{Method, OdeConfig, VectorField};
use crate::instance::histogram::{task_name, TaskStrings};
use crate::instance::InstanceFile;
use crate::models::histogram::theorem2::FixedPointKind;
use crate::models::histogram::{task_matrix, Thm2System};
use crate::plot::{BarPanel, Figure, LineStyle};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::fixed_points_column::{
    analysis_err, full_flow, level_set, saddle_hunt, subscript, ColumnFlow, ColumnTally,
};
use super::instance_files::InstanceFiles;
use super::task_param::TaskName;
use super::worst_case::WorstCase;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The task whose matrix M supplies the column m_i.
    pub task: TaskName,
    /// Threshold D (task "thr" only).
    #[serde(default)]
    pub d_thr: usize,
    /// Alphabet size d: q_i ∈ ℝ^d.
    pub d: usize,
    /// Which column i of M (0-based).
    pub column: usize,
    /// Level sets β_i = ‖q_i‖² − v_i² (spec 000 §6 row 8: {−1, 0, 0.7}).
    pub betas: NonEmpty<f64>,
    /// Newton searches per constructed point, from perturbed starts.
    pub starts: usize,
    /// Size of the Gaussian perturbation of those starts.
    pub perturbation: Positive,
    /// Newton searches from random starts N(0, random_scale²) anywhere (saddle hunt).
    pub random_starts: usize,
    pub random_scale: Positive,
    /// The task matrix (`M`) whose column supplies m_i; replaces task, d_thr and d. README
    /// "Your own data". No init_file: the points are built from β and m_i, and the seeded
    /// random numbers are only search starts and saddle directions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max |λ_numerical − λ_formula| / max|λ| of the Hessian spectra (spec 000 D1 asks 1e-6
    /// of finite-difference Hessians; the exact hvp leaves rounding at the constructed points
    /// and O(‖∇ℓ‖/λ) ≈ 1e-10 at Newton-found ones).
    pub hessian_eig_tol: Positive,
    /// ‖∇ℓ‖ at the constructed points and |f| at the Theorem 2 fixed points (rounding only).
    pub stationarity_tol: Positive,
    /// max |λ_numerical − λ_formula| / c_1 of the Theorem 2 Jacobians (spec 000 R8(e): 1e-10).
    pub jacobian_eig_tol: Positive,
    /// The same at c = 0, where the node's Jacobian is a Jordan block: a rounding perturbation
    /// ε moves a double eigenvalue by ~√ε ≈ 1e-8.
    pub jordan_eig_tol: Positive,
    /// Relative error of trace and determinant of the Jacobians (well conditioned even for
    /// the Jordan block).
    pub trace_det_tol: Positive,
    /// Relative error of κ from the dense Hessian against the D4 formula (spec 000 §6: 1e-8).
    pub kappa_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), None, p.d)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let d = read_files(p, sc)?.d(p.d);
    if d < 2 {
        return Err(sc.invalid("params.d", "need d ≥ 2 (saddles with β > 0 need q ⊥ m)"));
    }
    if p.column >= d {
        return Err(sc.invalid("params.column", format!("must be < d = {d}")));
    }
    Ok(())
}

/// What the Theorem 2 Jacobians measured, for the checks.
#[derive(Default)]
struct JacobianTally {
    /// |f| at the fixed points.
    stationarity: WorstCase,
    /// Simple eigenvalues vs R8, relative to c_1.
    simple: WorstCase,
    /// The c = 0 node (Jordan block) vs R8.
    jordan: WorstCase,
    /// Trace and determinant vs R8.
    trace_det: WorstCase,
}

fn run(p: &Params, chk: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let m = files.task_matrix(|| task_matrix(&p.task.task(p.d_thr), p.d));
    let mu = m.column(p.column).norm();
    let flow = ColumnFlow::new(m.clone(), p.column);
    let mut rep = Report {
        series: Table::new(&["beta", "point", "k", "lambda_numerical", "lambda_formula"]),
        instance: Some(
            TaskStrings {
                m: m.clone(),
                datasets: Vec::new(),
            }
            .to_arrays(),
        ),
        ..Default::default()
    };
    let mut jac_table = Table::new(&[
        "beta",
        "c",
        "fixed_point",
        "k",
        "re_numerical",
        "im_numerical",
        "formula",
    ]);
    let (mut rng, mut newton_rng) = (ctx.rng(1), ctx.rng(2));
    let (mut column, mut jac) = (ColumnTally::new(), JacobianTally::default());
    let (mut hessian_panels, mut jacobian_panels) = (Vec::new(), Vec::new());
    for &beta in &*p.betas {
        hessian_panels.push(level_set(
            p,
            &flow,
            beta,
            &mut rng,
            &mut newton_rng,
            &mut column,
            &mut rep.series,
        )?);
        jacobian_panels.push(thm2_jacobians(beta, mu, &mut jac, &mut jac_table)?);
    }
    saddle_hunt(p, &flow, &mut newton_rng, &mut column);
    full_flow(&m, p, &mut rng, &mut column)?;
    rep.tables.push(("jacobian".into(), jac_table));
    report_checks(&mut rep, p, chk, &column, &jac);
    rep.derive("mu", mu);
    rep.derive("saddles_found_from_random_starts", column.saddles_found);
    let mut fig = Figure::new(hessian_panels.len().max(1)).title(format!(
        "Stationary points of one df column ({} task, d = {}, column {}, μ = {:.4}) and of \
         Theorem 2's system",
        task_name(&m),
        m.nrows(),
        p.column,
        mu
    ));
    for panel in hessian_panels.into_iter().chain(jacobian_panels) {
        fig = fig.panel(panel);
    }
    rep.figure = Some(fig);
    Ok(rep)
}

/// Jacobians of Theorem 2's system (c = β/μ, c_1 = μ) at its fixed points against R8's
/// eigenvalues; the bar panel of that β.
fn thm2_jacobians(
    beta: f64,
    mu: f64,
    t: &mut JacobianTally,
    table: &mut Table,
) -> Result<BarPanel, RunError> {
    let sys = Thm2System {
        c: beta / mu,
        c1: mu,
    };
    let (mut categories, mut numerical, mut formula) = (vec![], vec![], vec![]);
    for (n, fp) in sys.fixed_points().iter().enumerate() {
        let name = match (fp.kind, n) {
            (FixedPointKind::Saddle, _) => "O",
            (_, 1) => "N+",
            _ => "N−",
        };
        let mut f = [0.0; 2];
        sys.rhs(0.0, &[fp.x, fp.y], &mut f);
        t.stationarity.add(stats::max_abs(f), || {
            format!("Theorem 2 fixed point {name}, c = {}", sys.c)
        });
        let j = jacobian(&sys, 0.0, &[fp.x, fp.y]).map_err(analysis_err)?;
        let eig = eigenvalues(&j).map_err(analysis_err)?;
        let mut expected = fp.eigenvalues;
        expected.sort_by(f64::total_cmp);
        let err = stats::max(eig.iter().zip(&expected).map(|(a, &b)| (a - b).norm())) / sys.c1;
        let where_ = || {
            let shown: Vec<String> = eig.iter().map(|z| format!("{z:.12}")).collect();
            format!(
                "{name} at c = {}: [{}] vs {expected:?}",
                sys.c,
                shown.join(", ")
            )
        };
        let jordan = fp.kind == FixedPointKind::StableNode && sys.c == 0.0;
        if jordan {
            t.jordan.add(err, where_);
        } else {
            t.simple.add(err, where_);
        }
        let trace_err = (j.trace() - (expected[0] + expected[1])).abs() / sys.c1;
        let det_err = (j.determinant() - expected[0] * expected[1]).abs() / (sys.c1 * sys.c1);
        t.trace_det.add(stats::larger(trace_err, det_err), || {
            format!("{name} at c = {}", sys.c)
        });
        for (k, (a, b)) in eig.iter().zip(&expected).enumerate() {
            table.push(vec![
                beta.into(),
                sys.c.into(),
                name.into(),
                k.into(),
                a.re.into(),
                a.im.into(),
                (*b).into(),
            ]);
            if name != "N−" {
                categories.push(format!("{name} λ{}", subscript(k + 1)));
                numerical.push(a.re);
                formula.push(*b);
            }
        }
    }
    Ok(BarPanel::new(
        format!("Theorem 2 Jacobian, c = β/μ = {:.4}", sys.c),
        "fixed point (O saddle, N+ node)",
        "eigenvalue",
        categories,
    )
    .group("numerical Jacobian", numerical, LineStyle::Solid)
    .group("formula (R8)", formula, LineStyle::Dashed))
}

fn report_checks(rep: &mut Report, p: &Params, chk: &Checks, t: &ColumnTally, jac: &JacobianTally) {
    let stationarity = if jac.stationarity.value > t.grad.value {
        &jac.stationarity
    } else {
        &t.grad
    };
    rep.at_most(
        "constructed-points",
        "max ‖∇ℓ‖ / |f| at the constructed points",
        stats::larger(t.grad.value, jac.stationarity.value),
        *chk.stationarity_tol,
    )
    .note(format!("worst at {}", stationarity.at));
    rep.at_most(
        "hessian-spectra-vs-d1-deltalambda-lambda",
        "Hessian spectra vs D1: max |Δλ| / max|λ|",
        t.hessian.value,
        *chk.hessian_eig_tol,
    )
    .note(format!(
        "dense Hessians from the exact hvp at the constructed points (one column and the \
         full df flow); worst at {}",
        t.hessian.at
    ));
    rep.at_most(
        "newton-found-points-spectra-vs-d1",
        "Newton-found points: spectra vs D1 on their own level set",
        t.newton.value,
        *chk.hessian_eig_tol,
    )
    .note(format!(
        "{} starts per point, perturbation {:e}; worst at {}",
        p.starts, *p.perturbation, t.newton.at
    ));
    rep.at_most(
        "newton-searches-that-failed-or-changed",
        "Newton searches that failed or changed kind",
        t.newton_failures.len() as f64,
        0.0,
    )
    .note(if t.newton_failures.is_empty() {
        "each returned to a stationary point of the same index and loss".to_string()
    } else {
        t.newton_failures.join("; ")
    });
    rep.holds(
        "saddle-exists-iff-beta-model-construction",
        "saddle exists iff β ≥ 0 (model construction)",
        t.saddles_missing.is_empty() && t.saddles_for_negative_beta == 0,
    )
    .note("column_critical_point builds the saddle for β ≥ 0 and reports none for β < 0");
    rep.at_least(
        "beta-saddles-newton-finds-random-starts",
        "min β of the saddles Newton finds from random starts",
        t.saddle_min_beta,
        0.0,
    )
    .note(format!(
        "{} saddles found from {} random starts: the saddle set {{v = 0, q ⊥ m}} has \
         β = ‖q‖² ≥ 0, so no level set β < 0 holds one",
        t.saddles_found, p.random_starts
    ));
    rep.at_most(
        "theorem-jacobians-deltalambda-c1-simple-eigenvalues",
        "Theorem 2 Jacobians: max |Δλ| / c1 (simple eigenvalues)",
        jac.simple.value,
        *chk.jacobian_eig_tol,
    )
    .note(format!("worst at {}", jac.simple.at));
    if jac.jordan.count > 0 {
        rep.at_most(
            "theorem-jacobian-node-jordan-block-deltalambda",
            "Theorem 2 Jacobian at the c = 0 node (Jordan block): max |Δλ| / c1",
            jac.jordan.value,
            *chk.jordan_eig_tol,
        )
        .note(format!("double eigenvalue −2c1; {}", jac.jordan.at));
    }
    rep.at_most(
        "theorem-jacobians-trace-determinant-vs-formula",
        "Theorem 2 Jacobians: trace and determinant vs formula (relative to c1, c1²)",
        jac.trace_det.value,
        *chk.trace_det_tol,
    )
    .note(format!("worst at {}", jac.trace_det.at));
    rep.at_most(
        "kappa-vs-d4-relative-error",
        "κ vs D4: relative error",
        t.kappa.value,
        *chk.kappa_tol,
    )
    .note(format!(
        "nonzero spectrum of dense Hessians at minima; worst {}",
        t.kappa.at
    ));
    rep.at_most(
        "full-df-flow-critical-points-index",
        "full df flow: critical points with index ≠ |S| or loss ≠ ½Σ_S μ²",
        t.full_flow_failures.len() as f64,
        0.0,
    )
    .note(if t.full_flow_failures.is_empty() {
        format!("{} critical points of the full flow", t.full_flow_points)
    } else {
        t.full_flow_failures.join("; ")
    });
}

/// Newton searches on one column (dimension d + 1), ~50 iterations with a dense solve each.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let searches = n(p.betas.len()) * n(p.starts) + n(p.random_starts);
    let dim = n(p.d) + 1.0;
    Cost::new()
        .work(
            "starts, random_starts",
            "Newton searches",
            50.0 * searches,
            dim.powi(3),
        )
        .table("starts", searches, 5.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.fixed-points",
    paper: "000",
    summary: "Stationary points of a df column on level sets β (minima ±, saddles only for \
              β ≥ 0), Hessian spectra and κ against D1/D4, Newton from perturbed and random \
              starts, the full df flow's index |S|, and Theorem 2's Jacobians (spec 000 D1, D4, \
              R8e).",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &["mu", "saddles_found_from_random_starts"],
    run,
};

//! `nuclear-svm`: the three max-margin programs of spec 001 §3 with certificates, on the shipped
//! datasets or on the user's own tokens (`data_file`): the ℓ1 / diagonal SVM (clarabel LP, and
//! the nuclear-norm SVM restricted to diagonal W by the pure-Rust primal–dual iteration), the
//! Frobenius W-SVM (QP) and the nuclear-norm W-SVM (primal–dual iteration whose multipliers
//! λ ≥ 0 with ‖Σ λ_il A_il‖_op ≤ 1 certify the duality gap ‖W_*‖_* − 1ᵀλ). Writes `svm.json`
//! (or `svm-<dataset>.json`) with W_nuclear and W_frobenius, their norms, ranks and certificates.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::full_common::BUILT_IN_D;
use crate::analysis::svm::{
    l1_solution_ranges, nuclear_svm_report, read_token_problem, solve_l2, solve_nuclear_diagonal,
    L1Solution, NuclearSettings, SvmError, SvmMethod,
};
use crate::attention::{Instance, TokenData};
use crate::flow::{Method, OdeConfig};
use crate::models::kq::assumptions::{a4_report, a4_solution};
use crate::plot::{BarPanel, Figure, LineStyle};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{
    build_instance, data_label, instance_svms, numerical_rank, singular_values, user_data,
    DataName, SvmSuite, USER_LABEL,
};
use crate::instance::kq::KqData;
use crate::instance::run_instance;
use crate::instance::InstanceFile;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Datasets of spec §5.1 (random ones drawn from the seed); ignored when `data_file` is set.
    pub data: Vec<DataName>,
    /// The user's tokens: a seed-001 instance `.npz` (X, y, u, optional z; README "Your own
    /// data"), or JSON in the seed-003 `wsvm-kkt` format (X, y, u, optional "opt" and "z"; "z"
    /// defaults to the first tokens). When set, only this problem is solved and written to
    /// `svm.json`.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// Stopping gap of the primal–dual iterations (full and diagonal).
    pub pdhg_tol: Positive,
    /// Iteration cap (≥ 25: the iteration certifies every 25 steps).
    pub pdhg_max_iterations: AtLeast<25>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Certified relative gap (‖W_*‖_* − 1ᵀλ)/‖W_*‖_* (issue acceptance: ≤ 1e−6).
    pub max_duality_gap: Positive,
    /// ‖Σ λ_il A_il‖_op − 1 and max(1 − margin) of the certified pair (rescaled: rounding).
    pub max_infeasibility: Positive,
    /// Subgradient residual max(‖M V_r − U_r‖_F, ‖Mᵀ U_r − V_r‖_F) (§3.2 KKT, checkable form).
    pub max_subgradient: Positive,
    /// "The diagonal case matches the LP": |‖β_PD‖₁ − OPT₁|/OPT₁ and, where the LP solution is
    /// unique, ‖β_PD − β_LP‖_∞; and on aligned (A4) data |OPT_* − OPT₁|/OPT₁ (§3.3).
    pub diagonal_tol: Positive,
    /// OPT_* ≤ min(OPT₁, ‖W_F‖_*) (W_* minimizes over a superset): allowed relative excess.
    pub ordering_tol: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let load_file = |path: &PathBuf| load_file(sc, path);
    match &p.data_file {
        // bad or infeasible user data is bad input: refuse it before anything is written
        Some(path) => load_file(path).map(|_| ()),
        None if p.data.is_empty() => Err(sc.invalid(
            "params.data",
            "name at least one dataset (toy1, toy2b, toy3, toy4, random-a2, …) or set data_file",
        )),
        None => Ok(()),
    }
}

/// One instance to solve.
struct Problem {
    label: String,
    json_stem: String,
    source: String,
    inst: Instance,
}

fn file_error(path: &Path, e: SvmError) -> InputError {
    let (key, reason) = match e {
        SvmError::Invalid { field, reason } => (field, reason),
        SvmError::Io { reason, .. } => ("(file)".into(), format!("cannot read: {reason}")),
        SvmError::Infeasible { detail, .. } => ("W-SVM".into(), format!("infeasible: {detail}")),
        other @ SvmError::Solver { .. } => {
            ("W-SVM".into(), format!("no certified solution: {other}"))
        }
    };
    InputError::new(
        path,
        key,
        format!("{reason} (data file given by params.data_file)"),
    )
}

/// Reads the user's tokens and certifies that their W-SVMs are feasible (A1); every failure
/// names the file and the offending key. A `.json` file is read as the seed-003 token JSON (a
/// superset of the seed-001 layout: "opt" may be given, "u" omitted), an `.npz` as the seed-001
/// instance layout.
fn load_file(sc: &Scenario, given: &Path) -> Result<Problem, InputError> {
    let path = &sc.input_path("data_file", given);
    if !path.extension().is_some_and(|e| e == "json") {
        return Ok(Problem {
            label: USER_LABEL.into(),
            json_stem: "svm".into(),
            source: path.display().to_string(),
            inst: user_data(sc, given, false)?,
        });
    }
    let problem = read_token_problem(path).map_err(|e| file_error(path, e))?;
    let cons = problem
        .w_svm_constraints()
        .map_err(|e| file_error(path, e))?;
    solve_l2(&cons, SvmMethod::Dual).map_err(|e| file_error(path, e))?;
    let data = TokenData::from_problem(&problem).map_err(|e| {
        file_error(
            path,
            SvmError::Invalid {
                field: "X".into(),
                reason: e.to_string(),
            },
        )
    })?;
    Ok(Problem {
        label: USER_LABEL.into(),
        json_stem: "svm".into(),
        source: path.display().to_string(),
        inst: Instance {
            decoder: problem.u.clone().unwrap_or_else(|| vec![0.0; problem.d]),
            opt: problem.opt.clone(),
            data,
        },
    })
}

/// Everything solved for one instance.
struct Solved {
    suite: SvmSuite,
    /// The nuclear SVM on diagonal W by the primal–dual iteration (when A1-diag holds).
    diagonal_pd: Option<L1Solution>,
    /// Whether the LP's solution is unique (every coordinate range < 1e−7).
    l1_unique: Option<bool>,
    /// OPT_* of the §3.3 closed form when A4 holds.
    aligned_opt: Option<f64>,
}

fn solve(pr: &Problem, settings: &NuclearSettings) -> Result<Solved, RunError> {
    let suite = instance_svms(&pr.inst, &pr.label, settings)?;
    let fail = |e: SvmError| RunError::Other(format!("{}: {e}", pr.label));
    let (diagonal_pd, l1_unique) = match &suite.l1 {
        Some(l1) => {
            let pd = solve_nuclear_diagonal(&suite.constraints, settings).map_err(fail)?;
            let ranges = l1_solution_ranges(&suite.diagonal, l1.norm_l1, 1e-9).map_err(fail)?;
            (Some(pd), Some(ranges.iter().all(|(lo, hi)| hi - lo < 1e-7)))
        }
        None => (None, None),
    };
    let a4 = a4_report(&pr.inst);
    let aligned_opt = a4.holds(1e-12).then(|| a4_solution(&pr.inst, &a4).1);
    Ok(Solved {
        suite,
        diagonal_pd,
        l1_unique,
        aligned_opt,
    })
}

/// svm.json: the nuclear/Frobenius document plus the diagonal programs and the source.
fn svm_document(pr: &Problem, s: &Solved) -> Value {
    let mut doc = nuclear_svm_report(&s.suite.constraints, &s.suite.nuclear, &s.suite.frobenius);
    let diagonal = match (&s.suite.l1, &s.diagonal_pd) {
        (Some(lp), Some(pd)) => json!({
            "feasible": true,
            "program": "min ||beta||_1 s.t. beta^T (z ⊙ (x_opt - x_l)) >= 1 (= nuclear SVM on diagonal W)",
            "beta_lp": lp.beta,
            "opt_l1": lp.norm_l1,
            "lambda": lp.lambda,
            "kkt": lp.kkt,
            "unique": s.l1_unique,
            "beta_primal_dual": pd.beta,
            "opt_primal_dual": pd.norm_l1,
            "kkt_primal_dual": pd.kkt,
        }),
        _ => json!({
            "feasible": false,
            "reason": "A1-diag fails: no diagonal W separates the optimal tokens",
        }),
    };
    if let Some(o) = doc.as_object_mut() {
        o.insert("source".into(), Value::String(pr.source.clone()));
        o.insert("diagonal".into(), diagonal);
        o.insert("aligned_closed_form_opt".into(), json!(s.aligned_opt));
    }
    doc
}

/// The worst (value, label) over instances (NaN and "-" if there are none).
fn worst<'a>(values: impl Iterator<Item = (f64, &'a str)>) -> (f64, &'a str) {
    stats::worst(values).unwrap_or((f64::NAN, "-"))
}

fn checks(rep: &mut Report, solved: &[(&Problem, Solved)], c: &Checks) {
    let all = || solved.iter().map(|(p, s)| (s, p.label.as_str()));
    let (gap, at) = worst(all().map(|(s, l)| (s.suite.nuclear.kkt.duality_gap, l)));
    rep.at_most(
        "certified-relative-duality-gap",
        "W_*: certified relative duality gap",
        gap,
        *c.max_duality_gap,
    )
    .note(format!(
        "(‖W_*‖_* − 1ᵀλ)/‖W_*‖_*, λ ≥ 0 with ‖Σλ A‖_op ≤ 1; worst: {at}"
    ));
    let (inf, at) = worst(all().map(|(s, l)| {
        let k = &s.suite.nuclear.kkt;
        (
            stats::larger(k.primal_infeasibility, k.dual_infeasibility),
            l,
        )
    }));
    rep.at_most(
        "primal-dual-infeasibility",
        "W_*: primal and dual infeasibility",
        inf,
        *c.max_infeasibility,
    )
    .note(format!("max(1 − min margin, ‖Σλ A‖_op − 1); worst: {at}"));
    let (sub, at) = worst(all().map(|(s, l)| (s.suite.nuclear.kkt.subgradient, l)));
    rep.at_most(
        "subgradient-residual",
        "W_*: subgradient residual",
        sub,
        *c.max_subgradient,
    )
    .note(format!(
        "M = Σλ A ∈ ∂‖W_*‖_*: max(‖MV_r − U_r‖, ‖MᵀU_r − V_r‖) (§3.2); worst: {at}"
    ));
    let diag: Vec<_> = solved
        .iter()
        .filter_map(|(p, s)| {
            Some((
                p.label.as_str(),
                s.suite.l1.as_ref()?,
                s.diagonal_pd.as_ref()?,
                s,
            ))
        })
        .collect();
    if !diag.is_empty() {
        let (v, at) = worst(
            diag.iter()
                .map(|(l, lp, pd, _)| ((pd.norm_l1 - lp.norm_l1).abs() / lp.norm_l1, *l)),
        );
        rep.at_most(
            "diagonal-opt1-primal-dual-opt1-lp",
            "diagonal: |OPT₁(primal–dual) − OPT₁(LP)|/OPT₁",
            v,
            *c.diagonal_tol,
        )
        .note(format!(
            "nuclear SVM on diagonal W (soft thresholding, pure Rust) vs the ℓ1 LP \
             (clarabel), §3.3; worst: {at}"
        ));
        let unique: Vec<_> = diag
            .iter()
            .filter(|d| d.3.l1_unique == Some(true))
            .collect();
        if !unique.is_empty() {
            let (v, at) = worst(
                unique
                    .iter()
                    .map(|(l, lp, pd, _)| (stats::max_abs_diff(&pd.beta, &lp.beta), *l)),
            );
            rep.at_most(
                "diagonal-beta-primal-dual-beta-lp",
                "diagonal: ‖β(primal–dual) − β(LP)‖_∞ (unique LP)",
                v,
                *c.diagonal_tol,
            )
            .note(format!(
                "{} instances with a certified unique LP solution; worst: {at}",
                unique.len()
            ));
        }
    }
    let aligned: Vec<_> = solved
        .iter()
        .filter_map(|(p, s)| Some((p.label.as_str(), s.aligned_opt?, s.suite.l1.as_ref()?, s)))
        .collect();
    if !aligned.is_empty() {
        let (v, at) = worst(aligned.iter().map(|(l, closed, lp, s)| {
            let opt = s.suite.nuclear.nuclear_norm;
            (
                stats::larger(
                    (opt - lp.norm_l1).abs() / lp.norm_l1,
                    (opt - closed).abs() / closed,
                ),
                *l,
            )
        }));
        rep.at_most(
            "aligned-a4-data-opt-opt1-opt1",
            "aligned (A4) data: |OPT_* − OPT₁|/OPT₁ and vs closed form",
            v,
            *c.diagonal_tol,
        )
        .note(format!(
            "under A4 the full nuclear SVM is solved by a diagonal W in the aligned \
             frames, OPT_* = OPT₁ = Σ 1/((1−c_i)‖x_opt‖‖z_i‖) (§3.3, Thm 5.1); worst: {at}"
        ));
    }
    let (v, at) = worst(all().map(|(s, l)| {
        let opt = s.suite.nuclear.nuclear_norm;
        let frob_nuclear: f64 = singular_values(&s.suite.constraints, &s.suite.frobenius.w)
            .iter()
            .sum();
        let cap = s
            .suite
            .l1
            .as_ref()
            .map_or(frob_nuclear, |lp| lp.norm_l1.min(frob_nuclear));
        ((opt - cap) / opt, l)
    }));
    rep.at_most(
        "opt-opt1-relative-excess",
        "OPT_* ≤ min(OPT₁, ‖W_F‖_*) (relative excess)",
        v,
        *c.ordering_tol,
    )
    .note(format!(
        "Diag(β_ℓ1) and W_F are feasible for the nuclear SVM; worst: {at}"
    ));
}

fn singular_value_panel(pr: &Problem, s: &Solved) -> BarPanel {
    let n = &s.suite.nuclear;
    let s_f = singular_values(&s.suite.constraints, &s.suite.frobenius.w);
    let categories = (1..=s_f.len()).map(|k| format!("σ_{{{k}}}")).collect();
    BarPanel::new(
        format!(
            "{}: rank W_* = {}, rank W_F = {}",
            pr.label,
            n.rank,
            numerical_rank(&s_f)
        ),
        "singular value index",
        "σ_k",
        categories,
    )
    .group(
        "W_* (nuclear SVM)",
        n.singular_values.clone(),
        LineStyle::Solid,
    )
    .group("W_F (Frobenius SVM)", s_f, LineStyle::Dashed)
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let problems = match &p.data_file {
        Some(path) => {
            vec![load_file(ctx.scenario, path).map_err(|e| RunError::Other(e.to_string()))?]
        }
        None => p
            .data
            .iter()
            .map(|&name| {
                let label = data_label(name);
                Ok(Problem {
                    json_stem: format!("svm-{label}"),
                    source: format!("dataset {label} (seed {})", ctx.scenario.seed),
                    inst: build_instance(name, ctx)?,
                    label,
                })
            })
            .collect::<Result<Vec<_>, RunError>>()?,
    };
    let settings = NuclearSettings {
        tol: *p.pdhg_tol,
        max_iterations: *p.pdhg_max_iterations,
    };
    let solved = problems
        .iter()
        .map(|pr| Ok((pr, solve(pr, &settings)?)))
        .collect::<Result<Vec<_>, RunError>>()?;
    let mut rep = Report {
        series: Table::new(&["instance", "program", "index", "singular_value"]),
        ..Report::default()
    };
    checks(&mut rep, &solved, c);
    rep.instance = Some(run_instance(
        problems
            .iter()
            .map(|pr| (pr.label.clone(), KqData::new(pr.inst.clone()).to_arrays()))
            .collect(),
    ));
    let mut summary = serde_json::Map::new();
    let mut norms = (vec![], vec![], vec![]);
    let mut fig = Figure::new((solved.len() + 1).min(3)).aspect(0.73).title(
        "Max-margin solutions: singular values of the nuclear-norm SVM W_* vs the \
         Frobenius SVM W_F",
    );
    for (pr, s) in &solved {
        let s_f = singular_values(&s.suite.constraints, &s.suite.frobenius.w);
        for (program, values) in [
            ("nuclear", &s.suite.nuclear.singular_values),
            ("frobenius", &s_f),
        ] {
            for (k, &v) in values.iter().enumerate() {
                rep.series.push(vec![
                    pr.label.as_str().into(),
                    program.into(),
                    (k + 1).into(),
                    v.into(),
                ]);
            }
        }
        norms.0.push(s.suite.nuclear.nuclear_norm);
        norms.1.push(s_f.iter().sum::<f64>());
        norms
            .2
            .push(s.suite.l1.as_ref().map_or(f64::NAN, |l| l.norm_l1));
        let doc = svm_document(pr, s);
        summary.insert(
            pr.label.clone(),
            json!({
                "opt_nuclear": s.suite.nuclear.nuclear_norm,
                "rank_nuclear": s.suite.nuclear.rank,
                "frobenius_norm": s.suite.frobenius.norm,
                "rank_frobenius": numerical_rank(&s_f),
                "opt_l1": s.suite.l1.as_ref().map(|l| l.norm_l1),
                "l1_unique": s.l1_unique,
                "aligned_closed_form_opt": s.aligned_opt,
                "duality_gap": s.suite.nuclear.kkt.duality_gap,
                "pdhg_iterations": s.suite.nuclear.iterations,
            }),
        );
        rep.json.push((pr.json_stem.clone(), doc));
        fig = fig.panel(singular_value_panel(pr, s));
    }
    rep.derive("instances", summary);
    let labels: Vec<String> = problems.iter().map(|p| p.label.clone()).collect();
    fig = fig.panel(
        BarPanel::new(
            "objective ‖·‖_* of the three solutions (Diag β for ℓ1)",
            "instance",
            "nuclear norm",
            labels,
        )
        .group("W_* (OPT_*)", norms.0, LineStyle::Solid)
        .group("W_F", norms.1, LineStyle::Solid)
        .group("Diag(β_ℓ1) (OPT₁)", norms.2, LineStyle::Solid),
    );
    rep.figure = Some(fig);
    Ok(rep)
}

/// Per dataset (built-in, or the user's file, whose size is bounded by the file) the SVMs and
/// up to `pdhg_max_iterations` primal–dual iterations with a d × d SVD each.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let problems = n(p.data.len()).max(1.0);
    Cost::new().work(
        "pdhg_max_iterations",
        "primal–dual iterations",
        problems * n(*p.pdhg_max_iterations),
        40.0 * BUILT_IN_D.powi(3),
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "kq.nuclear-svm",
    paper: "001",
    summary: "The ℓ1/diagonal (LP and primal–dual), Frobenius (QP) and nuclear-norm (primal–dual \
              with dual certificate) max-margin programs of spec 001 §3 on the shipped datasets \
              or user tokens (data_file), with svm.json holding W_nuclear, W_frobenius, norms, \
              ranks and certificates.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[],
    run,
};

//! `wsvm-kkt`: the W-SVM min ½‖W‖² s.t. (x_{i,opt} − x_{i,t})ᵀ W q_i ≥ 1 (spec 003 §3.1–3.4)
//! of the named data models or of the user's own tokens (`data_file`), solved by its dual and
//! its primal QP, with the KKT certificate of §3.3, primal–dual agreement, the closed forms of
//! §3.4, and `svm.json` (W, its norm, the active constraints, the KKT residuals).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analysis::svm::{
    read_token_problem, svm_report, MarginConstraints, RankOneConstraints, SvmError, TokenProblem,
    TokenView,
};
use crate::flow::{Method, OdeConfig};
use crate::instance::{Array, Arrays};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::AtLeast;
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{build_instance, DataName, BUILT_IN_W};
use super::svm_common::{
    certificate_checks, complementarity_panel, data_label, solution_summary, solve_both,
    BothSolutions, KktChecks,
};
use crate::scenario::param::NonNegative;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Named data models (spec 003 §1.3) drawn from the scenario seed; ignored when
    /// `data_file` is set.
    pub data: Vec<DataName>,
    /// The user's tokens, `.json` or `.npz` (arrays X, y, u, optional opt and z; a flow's
    /// `instance.npz` too, whose W0 is ignored); when set, only this problem is solved, its
    /// solution is written to `svm.json` and its arrays to `instance.npz`.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The primal QP has d² variables; it is solved as a cross-check up to this many.
    pub primal_max_dim: AtLeast<1>,
    /// Sweep budget of the independent solution (Hildreth's dual coordinate ascent).
    pub independent_sweeps: AtLeast<1>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max |W − W_closed-form| entrywise for the §3.4 instances (two-token D/2, bad-init
    /// (2/3, −1/3, 1/3)e₁ᵀ, mutually orthogonal D_k: Σ D_k/‖D_k‖²); spec asks 1e−10.
    pub closed_form_tol: NonNegative,
    /// The §3.3 certificate thresholds.
    pub kkt: KktChecks,
}

/// One W-SVM to solve.
struct Problem {
    label: String,
    /// Stem of its JSON output (`svm` for the user's file).
    json_stem: String,
    cons: RankOneConstraints,
    /// vec(W_mm) (column-major) where §3.4 gives it, with its formula.
    closed_form: Option<(Vec<f64>, &'static str)>,
    /// Where the data came from (file path or data-model name).
    source: String,
    /// The user's arrays, as `instance.npz` records them (none for the built-in instances).
    instance: Option<Arrays>,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    match &p.data_file {
        // bad or infeasible user data is bad input: refuse it before anything is written
        Some(path) => load_problem(&sc.input_path("data_file", path)).map(|_| ()),
        None if p.data.is_empty() => Err(sc.invalid(
            "params.data",
            "name at least one data model (ex1, ex1-orth, two-token, bad-init, dm) or set \
             data_file",
        )),
        None => Ok(()),
    }
}

/// Reads the user's tokens and certifies that their W-SVM is feasible; every failure names
/// the file and the offending JSON key.
fn load_problem(path: &Path) -> Result<Problem, InputError> {
    let problem = read_problem(path)?;
    let cons = problem
        .w_svm_constraints()
        .map_err(|e| file_error(path, e))?;
    // feasibility only: no primal, no independent solution
    solve_both(&cons, 0, 0).map_err(|e| file_error(path, e))?;
    let stem = path
        .file_stem()
        .map_or_else(|| "data".into(), |s| s.to_string_lossy().into_owned());
    Ok(Problem {
        label: stem,
        json_stem: "svm".into(),
        cons,
        closed_form: None,
        source: path.display().to_string(),
        instance: Some(problem_arrays(&problem)),
    })
}

/// The tokens of a `.json` file (nested lists, keys `X[2][1]` in errors) or of an `.npz`
/// archive, whose arrays go through the same validation.
fn read_problem(path: &Path) -> Result<TokenProblem, InputError> {
    let npz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npz"));
    if !npz {
        return read_token_problem(path).map_err(|e| file_error(path, e));
    }
    let arrays = Arrays::read(path).map_err(|e| {
        InputError::new(
            path,
            e.key,
            format!("{} (data file given by params.data_file)", e.reason),
        )
    })?;
    TokenProblem::from_json(&arrays_to_json(&arrays).to_string()).map_err(|e| file_error(path, e))
}

/// Arrays as the JSON document of [`TokenProblem::from_json`]: nested lists, integral entries
/// as integers (so `opt` reads as indices). A flow run's `instance.npz` carries its initial
/// state `W0`, which the W-SVM does not use: it is left out.
fn arrays_to_json(arrays: &Arrays) -> Value {
    fn nest(shape: &[usize], data: &[f64]) -> Value {
        match shape.split_first() {
            None => match data[0] {
                x if x.fract() == 0.0 && x.abs() < 9e15 => Value::from(x as i64),
                x => Value::from(x),
            },
            Some((&len, rest)) => {
                let step = rest.iter().product::<usize>();
                Value::Array((0..len).map(|k| nest(rest, &data[k * step..])).collect())
            }
        }
    }
    Value::Object(
        arrays
            .iter()
            .filter(|(name, _)| *name != "W0")
            .map(|(name, a)| (name.to_string(), nest(&a.shape, &a.data)))
            .collect(),
    )
}

/// The arrays of a user problem: X, y, opt, and u and z when given (z when the queries are
/// not the first tokens).
fn problem_arrays(p: &TokenProblem) -> Arrays {
    let (n, t, d) = (p.n, p.t, p.d);
    let mut a = Arrays::new();
    a.insert("X", Array::new(&[n, t, d], p.x.clone()))
        .insert("y", Array::vector(&p.y))
        .insert(
            "opt",
            Array::vector(&p.opt.iter().map(|&o| o as f64).collect::<Vec<_>>()),
        );
    if let Some(u) = &p.u {
        a.insert("u", Array::vector(u));
    }
    if (0..n).any(|i| p.queries[i * d..(i + 1) * d] != p.x[i * t * d..i * t * d + d]) {
        a.insert("z", Array::matrix(n, d, p.queries.clone()));
    }
    a
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

fn named_problem(name: DataName, ctx: &RunContext) -> Result<Problem, RunError> {
    let inst = build_instance(name, ctx)?;
    let cons = RankOneConstraints::w_svm(&inst.data.view(), &inst.opt)
        .map_err(|e| RunError::Other(format!("W-SVM constraints of {name:?}: {e}")))?;
    let third = 1.0 / 3.0;
    let closed_form = match name {
        // D = (e₁ − e₂)e₁ᵀ, W_mm = D/2; column-major (W₁₁, W₂₁, W₁₂, W₂₂)
        DataName::TwoToken => Some((vec![0.5, -0.5, 0.0, 0.0], "W_mm = D/2")),
        DataName::BadInit => {
            let mut w = vec![0.0; 9];
            w[..3].copy_from_slice(&[2.0 * third, -third, third]);
            Some((w, "W_mm = (2/3, −1/3, 1/3)e₁ᵀ"))
        }
        _ => None,
    };
    let label = data_label(name);
    Ok(Problem {
        json_stem: format!("svm-{label}"),
        label: label.clone(),
        cons,
        closed_form,
        source: format!("data model {label} (seed {})", ctx.scenario.seed),
        instance: None,
    })
}

/// Three sequences on disjoint coordinate pairs, x_{i,1} = s_i e_{2i} (optimal token and
/// query) and x_{i,2} = r_i e_{2i+1}: the D_i = (s_i e_{2i} − r_i e_{2i+1}) s_i e_{2i}ᵀ are
/// mutually orthogonal, so W_mm = Σ_i D_i/‖D_i‖² (§3.4), formed here entry by entry.
fn orthogonal_problem() -> Problem {
    const SCALES: [(f64, f64); 3] = [(1.0, 1.0), (2.0, 0.5), (0.5, 3.0)];
    let (n, d) = (SCALES.len(), 2 * SCALES.len());
    let mut x = vec![0.0; n * 2 * d];
    let mut closed = vec![0.0; d * d];
    for (i, &(s, r)) in SCALES.iter().enumerate() {
        x[(2 * i) * d + 2 * i] = s;
        x[(2 * i + 1) * d + 2 * i + 1] = r;
        let norm_sq = (s * s + r * r) * s * s;
        // column 2i of W holds D_i's only nonzero column a_i·s_i
        closed[2 * i * d + 2 * i] = s * s / norm_sq;
        closed[2 * i * d + 2 * i + 1] = -r * s / norm_sq;
    }
    let queries: Vec<f64> = (0..n)
        .flat_map(|i| x[2 * i * d..(2 * i + 1) * d].to_vec())
        .collect();
    let view = TokenView {
        n,
        t: 2,
        d,
        x: &x,
        queries: &queries,
    };
    let cons = RankOneConstraints::w_svm(&view, &vec![0; n])
        .expect("the orthogonal instance is well formed");
    Problem {
        label: "orthogonal-D".into(),
        json_stem: "svm-orthogonal-d".into(),
        cons,
        closed_form: Some((closed, "W_mm = Σ D_k/‖D_k‖² (orthogonal D_k)")),
        source: "built-in instance with mutually orthogonal constraints".into(),
        instance: None,
    }
}

/// svm.json: the W-SVM document of [`svm_report`] plus where the data came from and the
/// primal cross-check.
fn svm_document(pr: &Problem, sols: &BothSolutions) -> Value {
    let mut doc = svm_report(&pr.cons, &sols.dual);
    if let Some(o) = doc.as_object_mut() {
        o.insert("source".into(), Value::String(pr.source.clone()));
        o.insert(
            "primal_cross_check".into(),
            serde_json::json!({
                "solved": sols.primal.is_some(),
                "independent_difference": sols.independent_difference(),
                "kkt": sols.primal.as_ref().map(|s| s.kkt),
            }),
        );
    }
    doc
}

fn margin_panel(pr: &Problem, sols: &BothSolutions) -> LinePanel {
    let sol = &sols.dual;
    let (mut active, mut inactive) = ((vec![], vec![]), (vec![], vec![]));
    for (k, &m) in sol.margins.iter().enumerate() {
        let into = if sol.support.contains(&k) {
            &mut active
        } else {
            &mut inactive
        };
        into.0.push((k + 1) as f64);
        into.1.push(m);
    }
    let top = stats::max_with(1.0, sol.margins.iter().copied());
    let m = sol.margins.len() as f64;
    LinePanel::new(
        format!(
            "{}: ‖W_mm‖ = {:.4}, {} of {} active",
            pr.label,
            sol.norm,
            sol.support.len(),
            sol.margins.len()
        ),
        "constraint k = (i, t)",
        "margin ⟨W_mm, D_k⟩",
    )
    .x_range(0.5, m + 0.5)
    .y_range(0.9, 1.0 + 1.15 * (top - 1.0).max(0.25))
    .series(Series::new("active (α_k > 0)", active.0, active.1, LineStyle::Markers).color(1))
    .series(
        Series::new(
            "inactive (α_k = 0)",
            inactive.0,
            inactive.1,
            LineStyle::Markers,
        )
        .color(0),
    )
    .hline(RefLine::new(1.0, "margin 1").style(LineStyle::Dashed))
    .legend(LegendPosition::UpperRight)
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let problems = match &p.data_file {
        Some(path) => vec![load_problem(&ctx.scenario.input_path("data_file", path))?],
        None => {
            let mut v = p
                .data
                .iter()
                .map(|&name| named_problem(name, ctx))
                .collect::<Result<Vec<_>, _>>()?;
            v.push(orthogonal_problem());
            v
        }
    };
    let mut rep = Report {
        series: Table::new(&[
            "instance",
            "constraint",
            "sequence",
            "token",
            "margin",
            "alpha",
            "active",
        ]),
        ..Report::default()
    };
    let mut summary = serde_json::Map::new();
    let mut panels = Vec::new();
    let solved = problems
        .iter()
        .map(|pr| {
            solve_both(&pr.cons, *p.primal_max_dim, *p.independent_sweeps)
                .map_err(|e| RunError::Other(format!("{}: W-SVM: {e}", pr.label)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let labelled: Vec<(&str, &BothSolutions)> = problems
        .iter()
        .zip(&solved)
        .map(|(pr, s)| (pr.label.as_str(), s))
        .collect();
    certificate_checks(&mut rep, &labelled, &c.kkt);
    for (pr, sols) in problems.iter().zip(&solved) {
        if let Some((closed, formula)) = &pr.closed_form {
            let err = stats::max(sols.all().map(|s| stats::max_abs_diff(&s.w, closed)));
            rep.at_most(
                &format!("closed-form.{}", pr.label),
                &format!("{}: max |W − W_closed-form|", pr.label),
                err,
                *c.closed_form_tol,
            )
            .note(format!("{formula} (§3.4), worst of dual and primal"));
        }
        let sol = &sols.dual;
        for (k, l) in pr.cons.labels().iter().enumerate() {
            rep.series.push(vec![
                pr.label.as_str().into(),
                k.into(),
                l.sequence.into(),
                l.token.into(),
                sol.margins[k].into(),
                sol.alpha[k].into(),
                usize::from(sol.support.contains(&k)).into(),
            ]);
        }
        summary.insert(pr.label.clone(), solution_summary(&pr.cons, sols));
        rep.json
            .push((pr.json_stem.clone(), svm_document(pr, sols)));
        if pr.cons.count() >= 4 {
            panels.push(margin_panel(pr, sols));
        }
    }
    rep.derive("instances", summary);
    rep.instance = problems.iter().find_map(|pr| pr.instance.clone());
    // margins per constraint where there are enough to see, then complementary slackness of all
    let mut fig = Figure::new(panels.len() + 1)
        .title("W-SVM: margins ⟨W_mm, D_k⟩ (support highlighted) and complementary slackness");
    for panel in panels {
        fig = fig.panel(panel);
    }
    let groups = problems
        .iter()
        .zip(&solved)
        .map(|(pr, sols)| (pr.label.clone(), &sols.dual))
        .collect::<Vec<_>>();
    fig = fig.panel(complementarity_panel(&groups));
    rep.figure = Some(fig);
    Ok(rep)
}

/// Per data model (built-in, or the user's file, whose size is bounded by the file) the
/// W-SVM dual and, when d² ≤ primal_max_dim, the primal QP in m = d² variables with at most
/// n(T − 1) ≤ 32 constraints (sparse interior point: ~30 iterations of O(m·32²)).
fn cost(p: &Params, _: &RunContext) -> Cost {
    let problems = n(p.data.len()).max(1.0);
    let m = n(*p.primal_max_dim).min(BUILT_IN_W);
    Cost::new()
        .work("data", "W-SVM duals", problems, 10.0 * 32.0 * 32.0 * 64.0)
        .work(
            "primal_max_dim",
            "primal QPs",
            problems * 30.0,
            m * 32.0 * 32.0,
        )
        .doubles("primal_max_dim", "the primal QP", 64.0 * m)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.wsvm-kkt",
    paper: "003",
    summary: "The W-SVM (spec 003 §3) of the data models or of user tokens (data_file): dual \
              and primal QPs with KKT certificates, their agreement, the §3.4 closed forms, \
              and svm.json with W_mm, its norm, the active constraints and the residuals.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[],
    run,
};

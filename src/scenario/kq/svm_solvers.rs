//! `svm-solvers` (spec 001 §3, §7): every max-margin program on toy-1 … toy-4 and random data,
//! each solved twice by independent methods — ℓ1 by the clarabel LP and by the diagonal
//! primal–dual iteration, W_* by the primal–dual iteration and by column generation over
//! rank-one atoms (clarabel LPs) — against the exact toy values of §5.1, with duality gaps and
//! the LP uniqueness certificate (coordinate ranges over the optimal face).
//!
//! With `params.data_file` (the seed-001 layout of [`crate::instance::kq`], A1 required) the
//! file replaces the named datasets: the solvers' agreement, duality gaps and the diagonal
//! program's check run on it; the §5.1 exact values and uniqueness verdicts, which are the
//! toys', are skipped with that reason. Every run writes the datasets it solved as
//! `instance.npz`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::analysis::svm::{
    l1_solution_ranges, solve_nuclear_cuts, solve_nuclear_diagonal, L1Solution, NuclearSettings,
    NuclearSolution, SvmError,
};
use crate::attention::Instance;
use crate::flow::{Method, OdeConfig};
use crate::instance::kq::KqData;
use crate::instance::InstanceFile;
use crate::plot::{BarPanel, Figure, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Check, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{
    build_instance, data_label, instance_svms, singular_values, user_data, DataName, SvmSuite,
    USER_LABEL,
};
use crate::instance::run_instance;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Datasets of spec §5.1 (random ones drawn from the seed).
    pub data: NonEmpty<DataName>,
    /// Your data instead of the named datasets (seed-001 layout; A1 must hold).
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// Certified relative gap at which the primal–dual iterations stop.
    pub pdhg_tol: Positive,
    /// Certified relative gap at which column generation stops.
    pub cuts_tol: Positive,
    /// LP solves allowed to column generation.
    pub cuts_max_lps: AtLeast<1>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Exact toy values of §5.1 (OPT₁, β*, ℓ2, OPT_*, W_*, ‖W_F‖², W_F, toy-4 W*): spec 1e−7.
    pub exact_tol: Positive,
    /// Relative duality gaps of every program and solver: spec < 1e−8.
    pub max_duality_gap: Positive,
    /// |OPT_*(primal–dual) − OPT_*(column generation)|/OPT_*: spec "PDHG vs Clarabel < 1e−6".
    pub solver_agreement: Positive,
    /// ℓ1: primal–dual vs LP, value and (unique) β: "the diagonal case matches the LP to 1e−8".
    pub diagonal_tol: Positive,
    /// An LP solution is unique when every coordinate range over the optimal face is below
    /// this (spec §3.3: 1e−7).
    pub unique_range: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    // a bad file is refused here, before anything is written
    if let Some(path) = &p.data_file {
        user_data(sc, path, false)?;
    }
    Ok(())
}

/// One dataset with both solvers of each program.
struct Solved {
    /// `None` for the user's data.
    name: Option<DataName>,
    label: String,
    suite: SvmSuite,
    cuts: NuclearSolution,
    diagonal_pd: Option<L1Solution>,
    /// hi − lo of every coordinate over the LP's optimal face.
    ranges: Option<Vec<f64>>,
}

fn solve(
    name: Option<DataName>,
    label: String,
    inst: &Instance,
    p: &Params,
) -> Result<Solved, RunError> {
    let pd = NuclearSettings {
        tol: *p.pdhg_tol,
        ..NuclearSettings::default()
    };
    let suite = instance_svms(inst, &label, &pd)?;
    let fail = |e: SvmError| RunError::Other(format!("{label}: {e}"));
    let cuts_settings = NuclearSettings {
        tol: *p.cuts_tol,
        max_iterations: *p.cuts_max_lps,
    };
    let cuts = solve_nuclear_cuts(&suite.constraints, &cuts_settings).map_err(fail)?;
    let (diagonal_pd, ranges) = match &suite.l1 {
        Some(l1) => (
            Some(solve_nuclear_diagonal(&suite.constraints, &pd).map_err(fail)?),
            Some(
                l1_solution_ranges(&suite.diagonal, l1.norm_l1, 1e-9)
                    .map_err(fail)?
                    .into_iter()
                    .map(|(lo, hi)| hi - lo)
                    .collect(),
            ),
        ),
        None => (None, None),
    };
    Ok(Solved {
        name,
        label,
        suite,
        cuts,
        diagonal_pd,
        ranges,
    })
}

/// The §5.1 values a toy must reproduce: (quantity, measured error).
fn exact_errors(s: &Solved) -> Vec<(&'static str, f64)> {
    let l1 = s.suite.l1.as_ref();
    let l1_err = |want: &[f64]| l1.map_or(f64::NAN, |l| stats::max_abs_diff(&l.beta, want));
    let opt1_err = |want: f64| l1.map_or(f64::NAN, |l| (l.norm_l1 - want).abs());
    let l2_err = |want: &[f64]| {
        s.suite
            .l2_diag
            .as_ref()
            .map_or(f64::NAN, |l| stats::max_abs_diff(&l.w, want))
    };
    let n = &s.suite.nuclear;
    let (s3, third) = (3f64.sqrt(), 1.0 / 3.0);
    let Some(name) = s.name else {
        return vec![];
    };
    match name {
        DataName::Toy1 => vec![
            ("OPT₁ = 1", opt1_err(1.0)),
            ("β*₁ = (1, 0, 0)", l1_err(&[1.0, 0.0, 0.0])),
            ("β*₂ = (0.8, 0.4, 0)", l2_err(&[0.8, 0.4, 0.0])),
        ],
        DataName::Toy2b => {
            let l2: Vec<f64> = [2.0, 3.2, 2.0, 0.0].iter().map(|v| v / 9.12).collect();
            vec![
                ("OPT₁ = 0.625", opt1_err(0.625)),
                ("β*₁ = (0, 0.625, 0, 0)", l1_err(&[0.0, 0.625, 0.0, 0.0])),
                ("β*₂ = (2, 3.2, 2, 0)/9.12", l2_err(&l2)),
            ]
        }
        DataName::Toy2Slow => vec![("OPT₁ = 1/1.2", opt1_err(1.0 / 1.2))],
        DataName::Toy2Degenerate => vec![("OPT₁ = 1", opt1_err(1.0))],
        DataName::Toy3 => vec![
            ("OPT_* = 4/3", (n.nuclear_norm - 4.0 / 3.0).abs()),
            // column-major [[1, 1/√3], [1/√3, 1/3]]
            (
                "W_* = (4/3)wwᵀ",
                stats::max_abs_diff(&n.w, &[1.0, 1.0 / s3, 1.0 / s3, third]),
            ),
            ("‖W_F‖² = 1.6", (s.suite.frobenius.norm.powi(2) - 1.6).abs()),
            (
                "W_F = [[1, √3/5], [√3/5, 3/5]]",
                stats::max_abs_diff(&s.suite.frobenius.w, &[1.0, s3 / 5.0, s3 / 5.0, 0.6]),
            ),
        ],
        DataName::Toy4 => {
            let mut w_star = vec![0.0; 16];
            w_star[0] = 1.0 / 2.4;
            w_star[5] = -1.0 / 1.6;
            vec![
                (
                    "OPT_* = 1/2.4 + 1/1.6",
                    (n.nuclear_norm - (1.0 / 2.4 + 1.0 / 1.6)).abs(),
                ),
                (
                    "W_F = W* = Diag(1/2.4, −1/1.6, 0, 0)",
                    stats::max_abs_diff(&s.suite.frobenius.w, &w_star),
                ),
            ]
        }
        DataName::RandomA2 | DataName::RandomA4 => vec![],
    }
}

/// Whether §5.1 says the instance's ℓ1 LP has a unique solution (`None`: not stated).
fn expected_unique(name: Option<DataName>) -> Option<bool> {
    match name? {
        DataName::Toy2Degenerate => Some(false),
        DataName::Toy1 | DataName::Toy2b | DataName::Toy2Slow | DataName::Toy4 => Some(true),
        _ => None,
    }
}

fn checks(rep: &mut Report, solved: &[Solved], c: &Checks) {
    for s in solved.iter().filter(|s| s.name.is_none()) {
        let why = "your data: §5.1's exact values and uniqueness verdicts are the toys'";
        rep.skip(
            &format!("exact-values.{}", s.label),
            format!("{}: exact values of §5.1", s.label),
            why,
        );
        rep.skip(
            &format!("widest-l1-range.{}", s.label),
            format!("{}: widest ℓ1 solution range", s.label),
            why,
        );
    }
    for s in solved {
        let errors = exact_errors(s);
        if errors.is_empty() {
            continue;
        }
        let (worst, what) =
            errors.iter().fold(
                (0.0, ""),
                |b, &(w, e)| if e > b.0 || e.is_nan() { (e, w) } else { b },
            );
        let names: Vec<&str> = errors.iter().map(|e| e.0).collect();
        rep.at_most(
            &format!("exact-values.{}", s.label),
            &format!("{}: exact values of §5.1", s.label),
            worst,
            *c.exact_tol,
        )
        .note(format!(
            "max error over {}; worst: {what}",
            names.join(", ")
        ));
    }
    let mut gaps: Vec<(f64, String)> = Vec::new();
    for s in solved {
        let l = &s.label;
        gaps.push((s.suite.frobenius.kkt.duality_gap, format!("{l} W_F QP")));
        gaps.push((
            s.suite.nuclear.kkt.duality_gap,
            format!("{l} W_* primal–dual"),
        ));
        gaps.push((s.cuts.kkt.duality_gap, format!("{l} W_* column generation")));
        if let (Some(lp), Some(l2), Some(pd)) = (&s.suite.l1, &s.suite.l2_diag, &s.diagonal_pd) {
            gaps.push((lp.kkt.duality_gap, format!("{l} ℓ1 LP")));
            gaps.push((l2.kkt.duality_gap, format!("{l} ℓ2 QP")));
            gaps.push((pd.kkt.duality_gap, format!("{l} ℓ1 primal–dual")));
        }
    }
    let (gap, at) = gaps.iter().fold((0.0, "-"), |b, (g, l)| {
        if *g > b.0 || g.is_nan() {
            (*g, l.as_str())
        } else {
            b
        }
    });
    rep.at_most(
        "relative-duality-gap-program-solver",
        "relative duality gap, every program and solver",
        gap,
        *c.max_duality_gap,
    )
    .note(format!("{} solves; worst: {at}", gaps.len()));
    let (agree, at) = solved
        .iter()
        .map(|s| {
            let (a, b) = (s.suite.nuclear.nuclear_norm, s.cuts.nuclear_norm);
            ((a - b).abs() / a, s.label.as_str())
        })
        .fold(
            (0.0, "-"),
            |b, x| if x.0 > b.0 || x.0.is_nan() { x } else { b },
        );
    rep.at_most("opt-primal-dual-opt-column-generation", "W_*: |OPT(primal–dual) − OPT(column generation)|/OPT", agree, *c.solver_agreement)
            .note(format!("two independent nuclear-norm solvers (SVT iteration; clarabel LPs over rank-one atoms); worst: {at}"));
    let mut diag = (0.0f64, String::from("-"));
    for s in solved {
        if let (Some(lp), Some(pd), Some(r)) = (&s.suite.l1, &s.diagonal_pd, &s.ranges) {
            let mut e = (pd.norm_l1 - lp.norm_l1).abs() / lp.norm_l1;
            if r.iter().all(|&w| w < *c.unique_range) {
                e = stats::larger(e, stats::max_abs_diff(&pd.beta, &lp.beta));
            }
            if e > diag.0 || e.is_nan() {
                diag = (e, s.label.clone());
            }
        }
    }
    rep.at_most(
        "l1-primal-dual-vs-lp-opt1",
        "ℓ1: primal–dual vs LP (OPT₁ rel., β where unique)",
        diag.0,
        *c.diagonal_tol,
    )
    .note(format!(
        "diagonal nuclear SVM by soft thresholding vs clarabel's LP; worst: {}",
        diag.1
    ));
    for s in solved {
        let (Some(want), Some(r)) = (expected_unique(s.name), &s.ranges) else {
            continue;
        };
        let widest = stats::max(r.iter());
        let name = format!("{}: widest ℓ1 solution range", s.label);
        rep.check(if want {
            Check::at_most(
                &format!("widest-l1-range.{}", s.label),
                &name,
                widest,
                *c.unique_range,
            )
            .note("§5.1: unique LP solution")
        } else {
            // toy-2(1.0): the solution set is the segment [(0,1,0,0), (½,0,½,0)], β₂ ∈ [0, 1]
            Check::close(
                &format!("widest-l1-range.{}", s.label),
                &name,
                widest,
                1.0,
                1e-6,
            )
            .note("§5.1: degenerate LP, solution segment [(0,1,0,0), (½,0,½,0)] (β₂ spans [0, 1])")
        });
    }
}

fn gap_panel(
    title: &str,
    x_label: &str,
    solved: &[Solved],
    pick: fn(&Solved) -> &NuclearSolution,
) -> LinePanel {
    let mut panel = LinePanel::new(title, x_label, "relative gap (upper − lower)/upper").log_y();
    for (k, s) in solved.iter().enumerate() {
        let h = &pick(s).gap_history;
        let x = h.iter().map(|p| p.0 as f64).collect();
        let y = h.iter().map(|p| p.1.max(1e-16)).collect();
        panel = panel.series(Series::new(s.label.clone(), x, y, LineStyle::SolidMarkers).color(k));
    }
    panel
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let datasets: Vec<(Option<DataName>, String, Instance)> = match &p.data_file {
        Some(path) => vec![(
            None,
            USER_LABEL.to_string(),
            user_data(ctx.scenario, path, false).map_err(|e| RunError::Other(e.to_string()))?,
        )],
        None => p
            .data
            .iter()
            .map(|&name| Ok((Some(name), data_label(name), build_instance(name, ctx)?)))
            .collect::<Result<_, RunError>>()?,
    };
    let solved = datasets
        .iter()
        .map(|(name, label, inst)| solve(*name, label.clone(), inst, p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rep = Report {
        series: Table::new(&["instance", "solver", "step", "certified_gap"]),
        ..Report::default()
    };
    checks(&mut rep, &solved, c);
    let mut summary = serde_json::Map::new();
    let mut ranges = Table::new(&["instance", "coordinate", "range"]);
    for s in &solved {
        for (solver, sol) in [
            ("primal-dual", &s.suite.nuclear),
            ("column-generation", &s.cuts),
        ] {
            for &(it, g) in &sol.gap_history {
                rep.series.push(vec![
                    s.label.as_str().into(),
                    solver.into(),
                    it.into(),
                    g.into(),
                ]);
            }
        }
        for (j, &r) in s.ranges.iter().flatten().enumerate() {
            ranges.push(vec![s.label.as_str().into(), j.into(), r.into()]);
        }
        summary.insert(
            s.label.clone(),
            json!({
                "opt_l1": s.suite.l1.as_ref().map(|l| l.norm_l1),
                "beta_l1": s.suite.l1.as_ref().map(|l| &l.beta),
                "beta_l2": s.suite.l2_diag.as_ref().map(|l| &l.w),
                "opt_nuclear": s.suite.nuclear.nuclear_norm,
                "opt_nuclear_column_generation": s.cuts.nuclear_norm,
                "nuclear_singular_values": s.suite.nuclear.singular_values,
                "frobenius_norm_squared": s.suite.frobenius.norm.powi(2),
                "frobenius_singular_values": singular_values(&s.suite.constraints, &s.suite.frobenius.w),
                "l1_solution_ranges": s.ranges,
                "pdhg_iterations": s.suite.nuclear.iterations,
                "column_generation_lps": s.cuts.iterations,
            }),
        );
    }
    rep.tables.push(("l1-ranges".into(), ranges));
    rep.derive("instances", summary);
    let with_ranges: Vec<&Solved> = solved.iter().filter(|s| s.ranges.is_some()).collect();
    let width = with_ranges
        .iter()
        .map(|s| s.suite.diagonal.f.ncols())
        .max()
        .unwrap_or(0);
    let mut bars = BarPanel::new(
        "ℓ1 LP: range of β_j over the optimal face (unique if < 10^{−7})",
        "instance (a zero range is drawn at 10^{−16})",
        "max β_j − min β_j",
        with_ranges.iter().map(|s| s.label.clone()).collect(),
    )
    .log_y();
    for j in 0..width {
        let values = with_ranges
            .iter()
            .map(|s| {
                s.ranges
                    .as_ref()
                    .and_then(|r| r.get(j))
                    .map_or(f64::NAN, |&v| v.max(1e-16))
            })
            .collect();
        bars = bars.group(format!("β_{}", j + 1), values, LineStyle::Solid);
    }
    rep.figure = Some(
        Figure::new(3)
            .title("Max-margin solvers: certified brackets of two independent nuclear-norm solvers, and the ℓ1 uniqueness certificate")
            .panel(gap_panel("W_*: primal–dual (SVT) iteration", "iteration", &solved, |s| &s.suite.nuclear))
            .panel(gap_panel("W_*: column generation (LPs over rank-one atoms)", "LP solves", &solved, |s| &s.cuts))
            .panel(bars),
    );
    rep.instance = Some(run_instance(
        datasets
            .into_iter()
            .map(|(_, label, inst)| (label, KqData::new(inst).to_arrays()))
            .collect(),
    ));
    Ok(rep)
}

/// Per dataset the SVMs, the primal–dual iterations (bounded by their tolerance on the small
/// built-in data) and up to `cuts_max_lps` LP solves of column generation.
fn cost(p: &Params, _: &RunContext) -> Cost {
    Cost::new().work(
        "cuts_max_lps, data",
        "LP solves",
        n(p.data.len()) * n(*p.cuts_max_lps),
        1e6,
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "kq.svm-solvers",
    paper: "001",
    summary: "Every max-margin program of spec 001 §3 on toy-1…4 and random data by two \
              independent solvers each (ℓ1: LP and primal–dual; W_*: primal–dual and column \
              generation): exact toy values, duality gaps, solver agreement, LP uniqueness.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[],
    run,
};

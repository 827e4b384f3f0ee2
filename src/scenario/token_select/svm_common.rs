//! Shared by the max-margin scenarios `wsvm-kkt` and `usvm-kkt` (spec 003 §3): both
//! programs solved by their dual and primal QPs, the §3.3 certificate checks on the two
//! answers, their agreement with an independent solution (Hildreth's dual coordinate ascent:
//! no interior point, no active-set polish), and the conditioning of the support Gram matrix.
//!
//! Both QP answers are polished by the same exact solve on their support, so they agree
//! bitwise with each other and satisfy w = Σ_k α_k f_k by construction: stationarity is
//! checked only on an answer the polish did not replace, and the agreement is judged against
//! the independent solution.

use nalgebra::SymmetricEigen;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::analysis::svm::{solve_l2, L2Solution, MarginConstraints, SvmError, SvmMethod};
use crate::plot::{LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::Report;
use crate::stats;

use super::common::DataName;
use crate::scenario::param::NonNegative;

/// Acceptance thresholds of a max-margin certificate (spec 003 §3.3).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KktChecks {
    /// max_k (1 − ⟨w, f_k⟩)⁺: §3.3 asks min_k ⟨w, f_k⟩ ≥ 1 − 1e−8.
    pub max_primal_infeasibility: NonNegative,
    /// max_k (−α_k)⁺: §3.3 asks min α ≥ −1e−12.
    pub max_dual_infeasibility: NonNegative,
    /// max_k |α_k (⟨w, f_k⟩ − 1)|: §3.3 asks ≤ 1e−8.
    pub max_complementary_slackness: NonNegative,
    /// ‖w − Σ_k α_k f_k‖/‖w‖ (KKT stationarity, §3.2 W = Σ α_k D_k); same scale as the gap.
    /// Checked on unpolished interior-point answers only (a polished w is Σ α_k f_k).
    pub max_stationarity: NonNegative,
    /// |‖w‖² − 1ᵀα|/‖w‖² (strong duality, §3.2): §3.3 asks ≤ 1e−8.
    pub max_duality_gap: NonNegative,
    /// ‖w − w_indep‖/‖w_indep‖ for the dual and primal answers against Hildreth's solution:
    /// §3.3 asks agreement to 1e−6 relative.
    pub max_independent_difference: NonNegative,
}

/// One max-margin program solved both ways, and independently.
pub struct BothSolutions {
    pub dual: L2Solution,
    /// `None` when the primal has more than `primal_max_dim` variables.
    pub primal: Option<L2Solution>,
    pub independent: Independent,
}

/// The program's solution by Hildreth's dual coordinate ascent from α = 0: α_k ←
/// max(0, α_k + (1 − (Gα)_k)/G_kk) cyclically, w = Σ_k α_k f_k. It shares only the Gram
/// matrix and Σ α f with the QP route (no clarabel, no support guess, no Cholesky).
pub struct Independent {
    pub w: Vec<f64>,
    pub sweeps: usize,
    /// The largest KKT violation of α on stop (|1 − (Gα)_k| on the support, (1 − (Gα)_k)⁺ off it).
    pub violation: f64,
}

/// Stops at a KKT violation of 1e−13 or after `max_sweeps` sweeps (then `violation` says how
/// far it got).
pub fn hildreth<C: MarginConstraints + ?Sized>(c: &C, max_sweeps: usize) -> Independent {
    let g = c.gram();
    let m = c.count();
    let (mut alpha, mut ga) = (vec![0.0; m], vec![0.0; m]);
    let violation = |alpha: &[f64], ga: &[f64]| {
        stats::max_with(
            0.0,
            (0..m).map(|k| match alpha[k] > 0.0 {
                true => (1.0 - ga[k]).abs(),
                false => 1.0 - ga[k],
            }),
        )
    };
    let mut sweeps = 0;
    while sweeps < max_sweeps && violation(&alpha, &ga) > 1e-13 {
        for k in 0..m {
            let next = (alpha[k] + (1.0 - ga[k]) / g[(k, k)]).max(0.0);
            let step = next - alpha[k];
            if step != 0.0 {
                alpha[k] = next;
                for (j, x) in ga.iter_mut().enumerate() {
                    *x += step * g[(j, k)];
                }
            }
        }
        sweeps += 1;
    }
    Independent {
        violation: violation(&alpha, &ga),
        w: c.combine(&alpha),
        sweeps,
    }
}

impl BothSolutions {
    /// The solutions that were computed, dual first.
    pub fn all(&self) -> impl Iterator<Item = &L2Solution> {
        std::iter::once(&self.dual).chain(self.primal.as_ref())
    }

    /// max over the dual and primal answers of ‖w − w_indep‖/‖w_indep‖.
    pub fn independent_difference(&self) -> f64 {
        stats::max(
            self.all()
                .map(|s| relative_difference(&s.w, &self.independent.w)),
        )
    }
}

/// Solves min ½‖w‖² s.t. ⟨w, f_k⟩ ≥ 1 by the dual, by the primal if it has at most
/// `primal_max_dim` variables, and by at most `sweeps` sweeps of Hildreth's method.
pub fn solve_both<C: MarginConstraints + ?Sized>(
    c: &C,
    primal_max_dim: usize,
    sweeps: usize,
) -> Result<BothSolutions, SvmError> {
    let dual = solve_l2(c, SvmMethod::Dual)?;
    let primal = if c.dim() <= primal_max_dim {
        Some(solve_l2(c, SvmMethod::Primal)?)
    } else {
        None
    };
    Ok(BothSolutions {
        dual,
        primal,
        independent: hildreth(c, sweeps),
    })
}

/// ‖a − b‖/‖b‖.
pub fn relative_difference(a: &[f64], b: &[f64]) -> f64 {
    let diff: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    (diff / b.iter().map(|y| y * y).sum::<f64>()).sqrt()
}

/// A KKT residual: its id and title, how to read it off a solution, and its threshold.
type Residual = (&'static str, &'static str, fn(&L2Solution) -> f64, f64);

/// The worst value of `of` over the solutions of every program (and the one it came from).
fn worst_of(
    solved: &[(&str, &BothSolutions)],
    keep: impl Fn(&L2Solution) -> bool + Copy,
    of: fn(&L2Solution) -> f64,
) -> (f64, String) {
    solved
        .iter()
        .flat_map(|(label, sols)| {
            sols.all()
                .filter(move |s| keep(s))
                .map(move |s| (of(s), format!("{label} ({:?})", s.method)))
        })
        .fold((0.0, String::from("-")), |best, x| {
            if x.0 > best.0 || x.0.is_nan() {
                x
            } else {
                best
            }
        })
}

/// The §3.3 certificate of several solved programs: for each KKT residual and for the
/// agreement with the independent solution, one check on the worst program and method (named
/// in the note).
pub fn certificate_checks(rep: &mut Report, solved: &[(&str, &BothSolutions)], c: &KktChecks) {
    let residuals: [Residual; 4] = [
        (
            "primal-infeasibility",
            "primal infeasibility max(1 − margin)⁺",
            |s| s.kkt.primal_infeasibility,
            *c.max_primal_infeasibility,
        ),
        (
            "dual-infeasibility",
            "dual infeasibility max(−α)⁺",
            |s| s.kkt.dual_infeasibility,
            *c.max_dual_infeasibility,
        ),
        (
            "complementary-slackness",
            "complementary slackness max|α(margin − 1)|",
            |s| s.kkt.complementary_slackness,
            *c.max_complementary_slackness,
        ),
        (
            "duality-gap",
            "duality gap |‖w‖² − 1ᵀα|/‖w‖²",
            |s| s.kkt.duality_gap,
            *c.max_duality_gap,
        ),
    ];
    let answers = solved.iter().flat_map(|(_, sols)| sols.all()).count();
    for (id, name, of, bound) in residuals {
        let (worst, at) = worst_of(solved, |_| true, of);
        rep.at_most(id, name, worst, bound).note(format!(
            "worst over {} programs × (dual, primal): {at}",
            solved.len()
        ));
    }
    // a polished answer is w := Σ α_k f_k: its stationarity residual is 0 by construction
    let unpolished = |s: &L2Solution| !s.polished;
    let stationarity = "stationarity ‖w − Σαf‖/‖w‖ (unpolished answers)";
    let count = solved
        .iter()
        .flat_map(|(_, sols)| sols.all())
        .filter(|s| unpolished(s))
        .count();
    if count == 0 {
        rep.skip(
            "stationarity-unpolished",
            stationarity,
            format!(
                "all {answers} answers were polished: w = Σ_k α_k f_k by construction, so only \
                 the agreement with the independent solution tests them"
            ),
        );
    } else {
        let (worst, at) = worst_of(solved, unpolished, |s| s.kkt.stationarity);
        rep.at_most(
            "stationarity-unpolished",
            stationarity,
            worst,
            *c.max_stationarity,
        )
        .note(format!("worst over {count} interior-point answers: {at}"));
    }
    let diffs: Vec<(f64, &str)> = solved
        .iter()
        .map(|(label, sols)| (sols.independent_difference(), *label))
        .collect();
    // the last of equal maxima; a NaN difference is the worst
    if let Some((worst, at)) = stats::worst(diffs.iter().rev().copied()) {
        let (sweeps, violation) = solved.iter().fold((0, 0.0f64), |(n, v), (_, s)| {
            (
                n.max(s.independent.sweeps),
                stats::larger(v, s.independent.violation),
            )
        });
        rep.at_most(
            "qp-vs-independent",
            "‖w_QP − w_Hildreth‖/‖w_Hildreth‖",
            worst,
            *c.max_independent_difference,
        )
        .note(format!(
            "the dual and primal QP answers against Hildreth's dual coordinate ascent \
             (§3.3: one minimizer; up to {sweeps} sweeps, KKT violation ≤ {violation:.1e}); \
             worst of {} programs: {at}",
            diffs.len()
        ));
    }
}

/// cond(G_SS) of the support Gram matrix (spec 003 §4.4: the SVM's conditioning).
pub fn support_condition<C: MarginConstraints + ?Sized>(c: &C, sol: &L2Solution) -> f64 {
    if sol.support.is_empty() {
        return f64::NAN;
    }
    let g = c
        .gram()
        .select_rows(&sol.support)
        .select_columns(&sol.support);
    let eig = SymmetricEigen::new(g).eigenvalues;
    let (lo, hi) = stats::range(&eig);
    hi / lo
}

/// The derived quantities of one solved program for params.json.
pub fn solution_summary<C: MarginConstraints + ?Sized>(c: &C, sols: &BothSolutions) -> Value {
    let d = &sols.dual;
    json!({
        "constraints": c.count(),
        "dimension": c.dim(),
        "norm": d.norm,
        "max_margin": 1.0 / d.norm,
        "support_size": d.support.len(),
        "tight_constraints": d.tight.len(),
        "support_gram_condition": support_condition(c, d),
        "independent_difference": sols.independent_difference(),
        "independent_sweeps": sols.independent.sweeps,
        "primal_solved": sols.primal.is_some(),
        "kkt": sols.all().map(|s| json!({
            "method": s.method,
            "polished": s.polished,
            "iterations": s.iterations,
            "residuals": s.kkt,
        })).collect::<Vec<_>>(),
    })
}

/// The name a data model has in scenario files (`ex1`, `two-token`, …).
pub fn data_label(name: DataName) -> String {
    serde_json::to_value(name)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{name:?}"))
}

/// α_k against margin_k − 1 for every constraint of every (label, solution) group: KKT puts
/// each point on an axis (α_k > 0 only where the margin is exactly 1).
pub fn complementarity_panel(groups: &[(String, &L2Solution)]) -> LinePanel {
    let mut panel = LinePanel::new(
        // short enough for one line in a third of the page width
        "KKT: α_k (margin_k − 1) = 0",
        "margin_k − 1",
        "multiplier α_k",
    );
    // the axes start at 0 so that rounding-level slacks sit on the α axis, where KKT puts them
    let widest = stats::max_with(
        0.05,
        groups
            .iter()
            .flat_map(|(_, s)| s.margins.iter().map(|m| m - 1.0)),
    );
    let top = stats::max(groups.iter().flat_map(|(_, s)| s.alpha.iter().copied()));
    panel = panel
        .x_range(-0.05 * widest, 1.05 * widest)
        .y_range(-0.05 * top, 1.1 * top);
    for (j, (label, sol)) in groups.iter().enumerate() {
        let slack: Vec<f64> = sol.margins.iter().map(|m| m - 1.0).collect();
        panel = panel.series(
            Series::new(label.clone(), slack, sol.alpha.clone(), LineStyle::Markers).color(j),
        );
    }
    panel.legend(LegendPosition::UpperRight)
}

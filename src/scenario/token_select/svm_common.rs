//! Shared by the max-margin scenarios `wsvm-kkt` and `usvm-kkt` (spec 003 §3): both
//! programs solved by their dual and primal QPs, the §3.3 certificate checks on the two
//! answers, their agreement, and the conditioning of the support Gram matrix.

use nalgebra::SymmetricEigen;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::analysis::svm::{solve_l2, L2Solution, MarginConstraints, SvmError, SvmMethod};
use crate::plot::{LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::{Check, Report};
use crate::stats;

use super::common::DataName;

/// Acceptance thresholds of a max-margin certificate (spec 003 §3.3).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KktChecks {
    /// max_k (1 − ⟨w, f_k⟩)⁺: §3.3 asks min_k ⟨w, f_k⟩ ≥ 1 − 1e−8.
    pub max_primal_infeasibility: f64,
    /// max_k (−α_k)⁺: §3.3 asks min α ≥ −1e−12.
    pub max_dual_infeasibility: f64,
    /// max_k |α_k (⟨w, f_k⟩ − 1)|: §3.3 asks ≤ 1e−8.
    pub max_complementary_slackness: f64,
    /// ‖w − Σ_k α_k f_k‖/‖w‖ (KKT stationarity, §3.2 W = Σ α_k D_k); same scale as the gap.
    pub max_stationarity: f64,
    /// |‖w‖² − 1ᵀα|/‖w‖² (strong duality, §3.2): §3.3 asks ≤ 1e−8.
    pub max_duality_gap: f64,
    /// ‖w_primal − w_dual‖/‖w_dual‖: §3.3 asks agreement to 1e−6 relative.
    pub max_primal_dual_difference: f64,
}

impl KktChecks {
    /// Every threshold must be ≥ 0 and finite; returns the offending key (under `prefix`).
    pub fn invalid_key(&self, prefix: &str) -> Option<String> {
        [
            ("max_primal_infeasibility", self.max_primal_infeasibility),
            ("max_dual_infeasibility", self.max_dual_infeasibility),
            (
                "max_complementary_slackness",
                self.max_complementary_slackness,
            ),
            ("max_stationarity", self.max_stationarity),
            ("max_duality_gap", self.max_duality_gap),
            (
                "max_primal_dual_difference",
                self.max_primal_dual_difference,
            ),
        ]
        .into_iter()
        .find(|(_, v)| !(v.is_finite() && *v >= 0.0))
        .map(|(k, _)| format!("{prefix}.{k}"))
    }
}

/// One max-margin program solved both ways.
pub struct BothSolutions {
    pub dual: L2Solution,
    /// `None` when the primal has more than `primal_max_dim` variables.
    pub primal: Option<L2Solution>,
}

impl BothSolutions {
    /// The solutions that were computed, dual first.
    pub fn all(&self) -> impl Iterator<Item = &L2Solution> {
        std::iter::once(&self.dual).chain(self.primal.as_ref())
    }

    /// ‖w_primal − w_dual‖/‖w_dual‖.
    pub fn primal_dual_difference(&self) -> Option<f64> {
        self.primal
            .as_ref()
            .map(|p| relative_difference(&p.w, &self.dual.w))
    }
}

/// Solves min ½‖w‖² s.t. ⟨w, f_k⟩ ≥ 1 by the dual and, if it has at most `primal_max_dim`
/// variables, by the primal.
pub fn solve_both<C: MarginConstraints + ?Sized>(
    c: &C,
    primal_max_dim: usize,
) -> Result<BothSolutions, SvmError> {
    let dual = solve_l2(c, SvmMethod::Dual)?;
    let primal = if c.dim() <= primal_max_dim {
        Some(solve_l2(c, SvmMethod::Primal)?)
    } else {
        None
    };
    Ok(BothSolutions { dual, primal })
}

/// ‖a − b‖/‖b‖.
pub fn relative_difference(a: &[f64], b: &[f64]) -> f64 {
    let diff: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    (diff / b.iter().map(|y| y * y).sum::<f64>()).sqrt()
}

/// A KKT residual: its name, how to read it off a solution, and its threshold.
type Residual = (&'static str, fn(&L2Solution) -> f64, f64);

/// The §3.3 certificate of several solved programs: for each KKT residual and for the
/// primal–dual agreement, one check on the worst program and method (named in the note).
pub fn certificate_checks(rep: &mut Report, solved: &[(&str, &BothSolutions)], c: &KktChecks) {
    let residuals: [Residual; 5] = [
        (
            "primal infeasibility max(1 − margin)⁺",
            |s| s.kkt.primal_infeasibility,
            c.max_primal_infeasibility,
        ),
        (
            "dual infeasibility max(−α)⁺",
            |s| s.kkt.dual_infeasibility,
            c.max_dual_infeasibility,
        ),
        (
            "complementary slackness max|α(margin − 1)|",
            |s| s.kkt.complementary_slackness,
            c.max_complementary_slackness,
        ),
        (
            "stationarity ‖w − Σαf‖/‖w‖",
            |s| s.kkt.stationarity,
            c.max_stationarity,
        ),
        (
            "duality gap |‖w‖² − 1ᵀα|/‖w‖²",
            |s| s.kkt.duality_gap,
            c.max_duality_gap,
        ),
    ];
    for (name, of, bound) in residuals {
        let (worst, at) = solved
            .iter()
            .flat_map(|(label, sols)| {
                sols.all()
                    .map(move |s| (of(s), format!("{label} ({:?})", s.method)))
            })
            .fold((0.0, String::from("-")), |best, x| {
                if x.0 > best.0 {
                    x
                } else {
                    best
                }
            });
        rep.check(Check::at_most(name, name, worst, bound).note(format!(
            "worst over {} programs × (dual, primal): {at}",
            solved.len()
        )));
    }
    let diffs: Vec<(f64, &str)> = solved
        .iter()
        .filter_map(|(label, sols)| sols.primal_dual_difference().map(|d| (d, *label)))
        .collect();
    // the last of equal maxima; a NaN difference is the worst
    if let Some((worst, at)) = stats::worst(diffs.iter().rev().copied()) {
        rep.check(
            Check::at_most(
                "primal-dual-dual",
                "‖w_primal − w_dual‖/‖w_dual‖",
                worst,
                c.max_primal_dual_difference,
            )
            .note(format!(
                "two independent QPs (p and m variables) give one minimizer (§3.3); worst of {} \
                 programs: {at}",
                diffs.len()
            )),
        );
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
        "primal_dual_difference": sols.primal_dual_difference(),
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
        "complementary slackness: α_k (margin_k − 1) = 0",
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

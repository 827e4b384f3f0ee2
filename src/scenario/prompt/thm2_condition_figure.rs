//! The figure of `thm2-condition-bound`: κ against R for the two attention families with the
//! paper's bound (18) dotted and the corrected two-sided bound dashed, the random sweep's κ
//! against (18), and the H = I curves with the slope fit and the n² limit.

use crate::analysis::fit::LogSlopeFit;
use crate::models::prompt::simplex_linearization::ConditionReport;
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::stats;

use super::thm2_condition_bound::{CurvePoint, Params};

/// κ against R for one family (its H's κ_H printed as `kappa_h`), with (18) dotted, the corrected bounds dashed and κ = R².
fn family_panel(
    title: String,
    points: &[CurvePoint],
    p: &Params,
    kappa_h: &str,
    legend: LegendPosition,
) -> LinePanel {
    let col = |f: &dyn Fn(&CurvePoint) -> f64| {
        points
            .iter()
            .filter(|q| q.report.kappa <= *p.curve_kappa_max)
            .map(f)
            .collect::<Vec<f64>>()
    };
    let r = col(&|q| q.report.r);
    LinePanel::new(title, "R = max z*/min z*", "κ of J²H on T")
        .log_x()
        .log_y()
        .series(
            Series::theory(
                "κ = R² (reference)",
                r.clone(),
                col(&|q| q.report.r.powi(2)),
            )
            .color(6),
        )
        .series(
            Series::new(
                "(18) paper: κ ≥ (μ/L)R²",
                r.clone(),
                col(&|q| q.report.paper_bound()),
                LineStyle::Dotted,
            )
            .color(1),
        )
        .series(
            Series::theory(
                "corrected: (L_T/μ_T)^±1·(λ_n/λ₂)²",
                r.clone(),
                col(&|q| q.report.corrected_upper()),
            )
            .color(2),
        )
        .series(Series::theory("", r.clone(), col(&|q| q.report.corrected_lower())).color(2))
        .series(
            Series::numerics(
                format!("κ, κ_H = {kappa_h}"),
                r.clone(),
                col(&|q| q.report.kappa),
            )
            .color(0),
        )
        .series(Series::numerics("κ, H = I", r, col(&|q| q.kappa_identity)).color(5))
        .legend(legend)
}

/// The figure; `kappa_h` labels the κ_H of the two family panels' H (Gaussian, dominant token).
pub(super) fn figure(
    p: &Params,
    gaussian: &[Vec<CurvePoint>],
    tail: &[CurvePoint],
    valid: &[&ConditionReport],
    violations: usize,
    (fit, fit_r): (&LogSlopeFit, &[f64]),
    kappa_h: &[String; 2],
) -> Figure {
    let bound: Vec<f64> = valid.iter().map(|r| r.paper_bound()).collect();
    let kappa: Vec<f64> = valid.iter().map(|r| r.kappa).collect();
    let lo = stats::axis_min(f64::INFINITY, bound.iter().chain(&kappa));
    let hi = stats::axis_max(0.0, bound.iter().chain(&kappa));
    let scatter = LinePanel::new(
        format!(
            "random sweep: (18) fails in {violations} of {} instances",
            valid.len()
        ),
        "(μ/L)R²  (the bound (18))",
        "κ",
    )
    .log_x()
    .log_y()
    .series(Series::new("instances", bound, kappa, LineStyle::Markers).color(0))
    .series(
        Series::new(
            "κ = (μ/L)R²: below it (18) fails",
            vec![lo, hi],
            vec![lo, hi],
            LineStyle::Dotted,
        )
        .color(1),
    )
    .legend(LegendPosition::UpperLeft);
    let mut slope = LinePanel::new(
        format!(
            "H = I: κ = (λ_n/λ₂)², fitted slope {:.3} (Gaussian)",
            fit.slope
        ),
        "R = max z*/min z*",
        "κ of J² on T",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::UpperLeft);
    for (d, pts) in gaussian.iter().enumerate() {
        let label = if d == 0 {
            format!("Gaussian logits, n = {}", p.gaussian_n)
        } else {
            String::new()
        };
        slope = slope.series(
            Series::new(
                label,
                pts.iter().map(|q| q.report.r).collect(),
                pts.iter().map(|q| q.kappa_identity).collect(),
                LineStyle::Markers,
            )
            .color(0),
        );
    }
    let fit_line: Vec<f64> = fit_r
        .iter()
        .map(|r| (fit.intercept + fit.slope * r.ln()).exp())
        .collect();
    let n_sq = (*p.tail_n * *p.tail_n) as f64;
    slope = slope
        .series(
            Series::theory(
                format!("fit ∝ R^{:.3}", fit.slope),
                fit_r.to_vec(),
                fit_line,
            )
            .color(2),
        )
        .series(
            Series::numerics(
                format!("dominant token, n = {}", p.tail_n),
                tail.iter().map(|q| q.report.r).collect(),
                tail.iter().map(|q| q.kappa_identity).collect(),
            )
            .color(1),
        )
        .series(
            Series::theory(
                format!("n² = {n_sq}"),
                vec![1.0, *p.tail_r_max],
                vec![n_sq, n_sq],
            )
            .color(4),
        )
        .series(
            Series::theory(
                "κ = R²",
                vec![1.0, *p.tail_r_max],
                vec![1.0, p.tail_r_max.powi(2)],
            )
            .color(6),
        );
    Figure::new(2)
        .title("Theorem 2.2: κ of J²H on T vs R — (18) dotted, corrected two-sided bound dashed")
        .panel(family_panel(
            format!(
                "Gaussian logits z* = φ(s·g), n = {}, one draw",
                p.gaussian_n
            ),
            &gaussian[0],
            p,
            &kappa_h[0],
            LegendPosition::UpperLeft,
        ))
        .panel(family_panel(
            format!(
                "dominant token + uniform tail, n = {} (lines as left)",
                p.tail_n
            ),
            tail,
            p,
            &kappa_h[1],
            LegendPosition::None,
        ))
        .panel(scatter)
        .panel(slope)
}

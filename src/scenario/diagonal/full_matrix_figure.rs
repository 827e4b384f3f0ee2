//! The figure of `full-matrix-rank` (Figs. 4, 6, 7 analogue): singular values of Δ(W_K W_Qᵀ) and
//! Δ(W_V W_Oᵀ) over time per init scale, the loss, the stable rank over time, and the final
//! stable rank against s with its prediction sr(P* − P(0)).

use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};

use super::full_matrix_sweep::{Instance, Product, ScaleRun};

/// Singular values below this fraction of the largest teacher value are not drawn.
const SIGMA_FLOOR: f64 = 1e-4;
/// Singular values drawn beyond the teacher's rank (series.csv has all `top` of them): enough
/// to show the gap between the learned modes and the rest.
const EXTRA_DRAWN: usize = 2;

fn label(r: &ScaleRun) -> String {
    format!("s = {}", r.scale)
}

/// Samples with t > 0 (the time axes are logarithmic).
fn positive_times(r: &ScaleRun) -> std::ops::Range<usize> {
    1..r.t.len()
}

fn spectra_panel(
    inst: &Instance,
    runs: &[ScaleRun],
    fraction: f64,
    p: Product,
    tag: &str,
) -> LinePanel {
    let i = p as usize;
    let sigma_star = &inst.teacher_sigma[i];
    let drawn = (sigma_star.len() + EXTRA_DRAWN).min(runs[0].sigma[i][0].len());
    let floor = SIGMA_FLOOR * sigma_star[0];
    let mut panel = LinePanel::new(
        format!(
            "({tag}) singular values of Δ(W_{}W_{}ᵀ)",
            &p.name()[..1],
            &p.name()[1..]
        ),
        "t",
        "σ_j(Δ)",
    )
    .log_x()
    .log_y()
    .y_range(floor, 2.0 * sigma_star[0])
    .legend(LegendPosition::None);
    for (c, r) in runs.iter().enumerate() {
        let range = positive_times(r);
        let t = r.t[range.clone()].to_vec();
        for j in 0..drawn {
            let y: Vec<f64> = r.sigma[i][range.clone()].iter().map(|s| s[j]).collect();
            let name = if j == 0 { label(r) } else { String::new() };
            panel = panel.series(Series::numerics(name, t.clone(), y).color(c));
        }
        let level = inst.threshold(p, fraction);
        let (te, ye): (Vec<f64>, Vec<f64>) = r.emergence[i]
            .iter()
            .filter_map(|e| e.map(|e| (e.t, level)))
            .unzip();
        panel = panel.series(Series::new("", te, ye, LineStyle::Markers).color(c));
    }
    for (j, s) in sigma_star.iter().enumerate() {
        panel = panel.hline(RefLine::new(*s, if j == 0 { "teacher σ*" } else { "" }));
    }
    panel
}

fn loss_panel(runs: &[ScaleRun]) -> LinePanel {
    let mut panel = LinePanel::new("(c) loss", "t", "L(t)")
        .log_x()
        .log_y()
        .legend(LegendPosition::LowerLeft);
    for (c, r) in runs.iter().enumerate() {
        let range = positive_times(r);
        panel = panel.series(
            Series::numerics(
                label(r),
                r.t[range.clone()].to_vec(),
                r.loss[range].to_vec(),
            )
            .color(c),
        );
    }
    panel
}

fn rank_panel(inst: &Instance, runs: &[ScaleRun], p: Product, tag: &str) -> LinePanel {
    let i = p as usize;
    let sigma_star = &inst.teacher_sigma[i];
    let teacher_rank: f64 = sigma_star.iter().map(|s| (s / sigma_star[0]).powi(2)).sum();
    let mut panel = LinePanel::new(
        format!(
            "({tag}) stable rank of Δ(W_{}W_{}ᵀ)",
            &p.name()[..1],
            &p.name()[1..]
        ),
        "t",
        "‖Δ‖_F²/‖Δ‖_2²",
    )
    .log_x()
    .legend(LegendPosition::None);
    for (c, r) in runs.iter().enumerate() {
        let range = positive_times(r);
        panel = panel.series(
            Series::numerics(
                label(r),
                r.t[range.clone()].to_vec(),
                r.stable_rank[i][range].to_vec(),
            )
            .color(c),
        );
        // the emergence events are output samples too
        let (te, ye): (Vec<f64>, Vec<f64>) = r.emergence[i]
            .iter()
            .filter_map(|e| {
                let t_j = e.as_ref()?.t;
                let k = r.t.iter().position(|t| *t == t_j)?;
                Some((r.t[k], r.stable_rank[i][k]))
            })
            .unzip();
        panel = panel.series(Series::new("", te, ye, LineStyle::Markers).color(c));
    }
    panel
        .hline(RefLine::new(teacher_rank, "sr(teacher)"))
        .hline(RefLine::new(sigma_star.len() as f64 + 1.0, "rank + 1").style(LineStyle::Dotted))
}

fn final_rank_panel(inst: &Instance, runs: &[ScaleRun], small_scale: f64) -> LinePanel {
    let s: Vec<f64> = runs.iter().map(|r| r.scale).collect();
    let mut panel = LinePanel::new(
        "(f) stable rank of Δ(T) vs init scale",
        "init scale s",
        "sr(Δ(T))",
    )
    .log_x()
    .legend(LegendPosition::UpperLeft);
    for p in Product::BOTH {
        let i = p as usize;
        let measured: Vec<f64> = runs
            .iter()
            .map(|r| r.stable_rank[i][r.t.len() - 1])
            .collect();
        let predicted: Vec<f64> = runs.iter().map(|r| r.predicted_final_rank[i]).collect();
        panel = panel
            .series(Series::new(p.name(), s.clone(), measured, LineStyle::SolidMarkers).color(i))
            .series(
                Series::theory(format!("sr({0}* − {0}(0))", p.name()), s.clone(), predicted)
                    .color(i),
            );
    }
    let rank = inst.teacher_sigma[0].len().max(inst.teacher_sigma[1].len()) as f64;
    panel
        .hline(RefLine::new(rank + 1.0, "rank + 1").style(LineStyle::Dotted))
        .vline(RefLine::new(small_scale, "small s"))
}

/// The six-panel figure; emergence events are marked at their threshold τ.
pub fn figure(inst: &Instance, runs: &[ScaleRun], fraction: f64, small_scale: f64) -> Figure {
    Figure::new(3)
        .title(format!(
            "Full-matrix attention head, rank-2 teacher, θ(0) = s·θ₁ (d = {}, d_h = {}, n = {}, \
             N = {}): colour = s, dots = emergence times t_j",
            inst.d, inst.d_h, inst.tokens, inst.samples
        ))
        .panel(spectra_panel(inst, runs, fraction, Product::Kq, "a"))
        .panel(spectra_panel(inst, runs, fraction, Product::Vo, "b"))
        .panel(loss_panel(runs))
        .panel(rank_panel(inst, runs, Product::Kq, "d"))
        .panel(rank_panel(inst, runs, Product::Vo, "e"))
        .panel(final_rank_panel(inst, runs, small_scale))
}

//! Grouped bar panels.

use super::axes::{fit_range, to_axis, Axis};
use super::backend::{area_size, Area, Canvas, Dash, Px};
use super::frame::{draw_axes, AxesSpec, Grid, PixelBox};
use super::legend::{draw_legend, legend_box, Entry, Glyph};
use super::render::check_length;
use super::style::{palette, Ink, AXIS, CURVE_WIDTH, MARKER_RADIUS, THIN_WIDTH};
use super::{BarPanel, LegendPosition, LineStyle, PlotError};

/// Share of a category's width taken by its bars.
const GROUP_WIDTH: f64 = 0.8;
/// Distance between hatch lines along x, px.
const HATCH_SPACING: f64 = 5.0;
const HATCH_FILL_ALPHA: f64 = 0.12;
/// Minimum px per category label before labels are thinned.
const CATEGORY_LABEL_SPACING: f64 = 36.0;
const Y_TICK_SPACING: f64 = 50.0;

pub(super) fn draw_bar_panel(
    canvas: &Canvas,
    area: &Area,
    panel: &BarPanel,
) -> Result<(), PlotError> {
    for (label, values, _) in &panel.groups {
        let what = || format!("values of bar group \"{label}\"");
        check_length(what, panel.categories.len(), values.len())?;
    }
    let log = panel.y_log;
    let heights: Vec<f64> = panel
        .groups
        .iter()
        .flat_map(|(_, values, _)| values.iter().filter_map(|&v| to_axis(v, log)))
        .collect();
    // Linear bars grow from 0, which is then an end of the range when all bars point one way.
    let baseline = (!log).then_some(0.0);
    let (mut y0, mut y1) = fit_range(heights.iter().copied().chain(baseline), None, log, "y")?;
    if !log && !heights.is_empty() {
        if heights.iter().all(|&h| h >= 0.0) {
            y0 = 0.0;
        } else if heights.iter().all(|&h| h <= 0.0) {
            y1 = 0.0;
        }
    }

    let (width, height) = area_size(area);
    let max_labels = ((width - 100.0) / CATEGORY_LABEL_SPACING) as usize;
    let max_y_ticks = ((height - 100.0) / Y_TICK_SPACING) as usize;
    let frame = draw_axes(
        canvas,
        area,
        AxesSpec {
            title: &panel.title,
            x_label: &panel.x_label,
            y_label: &panel.y_label,
            x: Axis::categorical(&panel.categories, max_labels),
            y: Axis::new(y0, y1, log, max_y_ticks),
            grid: Grid::Horizontal,
            reserve_right: 0.0,
        },
    )?;

    let base = if log { y0 } else { 0.0f64.clamp(y0, y1) };
    let bar_width = GROUP_WIDTH / panel.groups.len().max(1) as f64;
    let mut bars: Vec<PixelBox> = Vec::new();
    for (g, (_, values, style)) in panel.groups.iter().enumerate() {
        let ink = palette(g);
        for (i, &value) in values.iter().enumerate() {
            let Some(top) = to_axis(value, log) else {
                continue;
            };
            let x0 = i as f64 + (1.0 - GROUP_WIDTH) / 2.0 + g as f64 * bar_width;
            let (left, base_px) = frame.px((x0, base));
            let (right, top_px) = frame.px((x0 + bar_width, top.clamp(y0, y1)));
            draw_bar(canvas, (left, base_px), (right, top_px), *style, ink)?;
            bars.push(PixelBox {
                left,
                right,
                top: base_px.min(top_px),
                bottom: base_px.max(top_px),
            });
        }
    }
    let plot = frame.pixels();
    if y0 < 0.0 && 0.0 < y1 && !log {
        let (_, zero) = frame.px((frame.x().lo, 0.0));
        canvas.path(
            &[(plot.left, zero), (plot.right, zero)],
            AXIS,
            THIN_WIDTH,
            Dash::Solid,
        )?;
    }

    let entries: Vec<Entry> = panel
        .groups
        .iter()
        .enumerate()
        .filter(|(_, (label, _, _))| !label.is_empty())
        .map(|(g, (label, _, style))| Entry::new(label, Glyph::Bar(*style, palette(g))))
        .collect();
    // The upper corner that hides less of the bars.
    let hidden = |position| {
        let legend = legend_box(plot, &entries, position);
        bars.iter().map(|bar| legend.overlap(bar)).sum::<f64>()
    };
    let position = if hidden(LegendPosition::UpperLeft) < hidden(LegendPosition::UpperRight) {
        LegendPosition::UpperLeft
    } else {
        LegendPosition::UpperRight
    };
    draw_legend(canvas, plot, &entries, position)
}

/// One bar from `base` (on the axis) to `tip` (the value), pixel corners. Solid bars are filled;
/// dashed ones (theory) hatched and outlined; dotted ones outlined with dots; markers-only ones
/// a stem with a dot at the value.
pub(super) fn draw_bar(
    canvas: &Canvas,
    base: Px,
    tip: Px,
    style: LineStyle,
    ink: Ink,
) -> Result<(), PlotError> {
    match style {
        LineStyle::Solid | LineStyle::SolidMarkers => canvas.fill_rect(base, tip, ink),
        LineStyle::Dashed => {
            canvas.fill_rect(base, tip, ink.alpha(HATCH_FILL_ALPHA))?;
            let (x0, x1) = (base.0.min(tip.0), base.0.max(tip.0));
            let (y0, y1) = (base.1.min(tip.1), base.1.max(tip.1));
            // Lines x + y = c rising to the right, cut to the bar.
            let mut c = x0 + y0 + HATCH_SPACING;
            while c < x1 + y1 {
                let (xa, xb) = ((c - y1).max(x0), (c - y0).min(x1));
                if xa < xb {
                    canvas.path(
                        &[(xa, c - xa), (xb, c - xb)],
                        ink,
                        THIN_WIDTH * 0.8,
                        Dash::Solid,
                    )?;
                }
                c += HATCH_SPACING;
            }
            canvas.outline_rect(base, tip, ink, THIN_WIDTH, Dash::Solid)
        }
        LineStyle::Dotted => canvas.outline_rect(base, tip, ink, CURVE_WIDTH, Dash::Dotted),
        LineStyle::Markers => {
            let x = (base.0 + tip.0) / 2.0;
            canvas.path(&[(x, base.1), (x, tip.1)], ink, THIN_WIDTH, Dash::Solid)?;
            canvas.disc((x, tip.1), MARKER_RADIUS + 1.0, ink)
        }
    }
}

//! Heatmap panels: a matrix as coloured cells (row 0 at the top) with a diverging colormap
//! centred at 0 and a colorbar on the right.

use plotters::style::text_anchor::{HPos, VPos};

use super::axes::Axis;
use super::backend::{area_size, units, Anchor, Area, Canvas, Dash};
use super::frame::{draw_axes, AxesSpec, Grid, Margins, PixelBox};
use super::render::check_length;
use super::style::{diverging, text_width, AXIS, TEXT, THIN_WIDTH, TICK_PX};
use super::{HeatmapPanel, PlotError};

/// Cells may be at most this much wider than tall (or taller than wide) to fill the panel.
const MAX_CELL_ASPECT: f64 = 1.5;
/// Colorbar geometry, px.
const COLORBAR_GAP: f64 = 12.0;
const COLORBAR_WIDTH: f64 = 14.0;
const COLORBAR_TICK: f64 = 4.0;
/// Colour steps of the colorbar.
const COLORBAR_STEPS: usize = 64;
/// Smallest side of the cell grid, px (when the panel has room for it).
const MIN_GRID_SIDE: f64 = 120.0;
/// How far a cell reaches under the next one, px.
const SEAM_OVERLAP: f64 = 0.3;
/// Minimum px per row / column label before labels are thinned.
const ROW_LABEL_SPACING: f64 = 16.0;

pub(super) fn draw_heatmap_panel(
    canvas: &Canvas,
    area: &Area,
    panel: &HeatmapPanel,
) -> Result<(), PlotError> {
    let (rows, cols) = (panel.rows, panel.cols);
    let what = || format!("values of heatmap \"{}\" (rows × cols)", panel.title);
    check_length(what, rows * cols, panel.values.len())?;
    let limit = color_limit(panel)?;
    let row_labels = tick_labels(&panel.row_labels, rows, "row labels", &panel.title)?;
    let col_labels = tick_labels(&panel.col_labels, cols, "column labels", &panel.title)?;
    // The y axis runs upwards, so row i sits at category rows - 1 - i.
    let bottom_up: Vec<String> = row_labels.into_iter().rev().collect();

    let (width, height) = area_size(area);
    let widest_col = col_labels
        .iter()
        .map(|l| text_width(l, TICK_PX))
        .fold(ROW_LABEL_SPACING, f64::max);
    let colorbar_axis = Axis::new(-limit, limit, false, 5);
    // Axes with labels thinned to fit a grid of that size, px.
    let spec_for = |grid_w: f64, grid_h: f64| AxesSpec {
        title: &panel.title,
        x_label: &panel.x_label,
        y_label: &panel.y_label,
        x: Axis::categorical(&col_labels, (grid_w / (widest_col + 8.0)) as usize),
        y: Axis::categorical(&bottom_up, (grid_h / ROW_LABEL_SPACING) as usize),
        grid: Grid::None,
        reserve_right: COLORBAR_GAP
            + COLORBAR_WIDTH
            + 2.0 * COLORBAR_TICK
            + colorbar_axis.widest_label(TICK_PX),
    };
    let free = |m: Margins| {
        let w = (width - m.left - m.right).max(1.0);
        let h = (height - m.top - m.bottom).max(1.0);
        (w, h)
    };
    // Square-ish cells in the room the axes leave, but a strip of a matrix (1 × 60) still gets
    // a readable height.
    let (free_w, free_h) = free(spec_for(width, height).margins());
    let (cell_w, cell_h) = (free_w / cols.max(1) as f64, free_h / rows.max(1) as f64);
    let grid_w =
        (cell_w.min(cell_h * MAX_CELL_ASPECT) * cols.max(1) as f64).max(free_w.min(MIN_GRID_SIDE));
    let grid_h =
        (cell_h.min(cell_w * MAX_CELL_ASPECT) * rows.max(1) as f64).max(free_h.min(MIN_GRID_SIDE));
    // Shrink the area around the final axes so that the plotting rectangle is that grid, centred.
    let spec = spec_for(grid_w, grid_h);
    let (free_w, free_h) = free(spec.margins());
    let spare_x = units(((free_w - grid_w) / 2.0).max(0.0));
    let spare_y = units(((free_h - grid_h) / 2.0).max(0.0));
    let cell_area = area.margin(spare_y, spare_y, spare_x, spare_x);
    let frame = draw_axes(canvas, &cell_area, spec)?;

    for (index, &value) in panel.values.iter().enumerate() {
        let (i, j) = (index / cols, index % cols);
        let y = (rows - 1 - i) as f64;
        let (left, bottom) = frame.px((j as f64, y));
        let (right, top) = frame.px((j as f64 + 1.0, y + 1.0));
        // Each cell reaches under its right and lower neighbours (drawn later), so that
        // anti-aliased edges don't leave light seams between cells.
        canvas.fill_rect(
            (left, top),
            (right + SEAM_OVERLAP, bottom + SEAM_OVERLAP),
            diverging(value / limit),
        )?;
    }
    // The cells cover the inner half of the frame line: draw it again.
    frame.draw_border(canvas)?;
    draw_colorbar(canvas, frame.border(), &colorbar_axis, limit)
}

/// The symmetric colour limit: the explicit one (finite, > 0), else max |value| (1 if all zero
/// or missing, so that the map stays defined).
fn color_limit(panel: &HeatmapPanel) -> Result<f64, PlotError> {
    match panel.limit {
        Some(limit) if limit.is_finite() && limit > 0.0 => Ok(limit),
        Some(limit) => Err(PlotError::InvalidLimit { limit }),
        None => {
            let max = panel
                .values
                .iter()
                .filter(|v| v.is_finite())
                .fold(0.0f64, |m, v| m.max(v.abs()));
            Ok(if max > 0.0 { max } else { 1.0 })
        }
    }
}

/// The given labels, or indices when none are given.
fn tick_labels(
    given: &[String],
    count: usize,
    what: &str,
    title: &str,
) -> Result<Vec<String>, PlotError> {
    if given.is_empty() {
        return Ok((0..count).map(|i| i.to_string()).collect());
    }
    check_length(
        || format!("{what} of heatmap \"{title}\""),
        count,
        given.len(),
    )?;
    Ok(given.to_vec())
}

/// A vertical colour strip right of the cells, ticked on its right side.
fn draw_colorbar(
    canvas: &Canvas,
    plot: PixelBox,
    axis: &Axis,
    limit: f64,
) -> Result<(), PlotError> {
    let left = plot.right + COLORBAR_GAP;
    let right = left + COLORBAR_WIDTH;
    let (top, bottom) = (plot.top, plot.bottom);
    // Pixel row of a value in [-limit, limit].
    let y_of = |v: f64| bottom - (v + limit) / (2.0 * limit) * (bottom - top);
    let step = 2.0 * limit / COLORBAR_STEPS as f64;
    for k in 0..COLORBAR_STEPS {
        let low = -limit + k as f64 * step;
        let colour = diverging((low + step / 2.0) / limit);
        canvas.fill_rect(
            (left, y_of(low + step) - SEAM_OVERLAP),
            (right, y_of(low)),
            colour,
        )?;
    }
    canvas.outline_rect((left, top), (right, bottom), AXIS, THIN_WIDTH, Dash::Solid)?;
    for tick in &axis.ticks {
        let y = y_of(tick.at);
        canvas.path(
            &[(right, y), (right + COLORBAR_TICK, y)],
            AXIS,
            THIN_WIDTH,
            Dash::Solid,
        )?;
        let anchor = Anchor(HPos::Left, VPos::Center);
        canvas.text(
            &tick.label,
            (right + 2.0 * COLORBAR_TICK, y),
            TICK_PX,
            anchor,
            TEXT,
            false,
        )?;
    }
    Ok(())
}

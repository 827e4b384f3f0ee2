//! Heatmap panels: a matrix as coloured cells (row 0 at the top) with a diverging colormap
//! centred at 0 and a colorbar on the right.

use super::axes::Axis;
use super::frame::{draw_axes, numeric_axis, AxesPlan, AxesRequest, Margins, Scale};
use super::geometry::Area;
use super::render::check_length;
use super::style::{diverging, Stroke, AXIS, FRAME_WIDTH, TICK_PT};
use super::svg::{Align, Svg, TextRole};
use super::text::Label;
use super::{HeatmapPanel, PlotError};

/// Cells may be at most this much wider than tall (or taller than wide) to fill the panel.
const MAX_CELL_ASPECT: f64 = 1.5;
/// Colorbar geometry, pt.
const COLORBAR_GAP: f64 = 5.0;
const COLORBAR_WIDTH: f64 = 6.0;
const COLORBAR_TICK: f64 = 2.0;
const COLORBAR_LABEL_GAP: f64 = 1.5;
/// Smallest side of the cell grid, pt (when the panel has room for it).
const MIN_GRID_SIDE: f64 = 40.0;
/// How far a cell reaches under the next one, pt (no light seams between anti-aliased cells).
const SEAM_OVERLAP: f64 = 0.15;

/// A heatmap laid out for a cell.
pub(super) struct HeatmapPlan<'a> {
    panel: &'a HeatmapPanel,
    limit: f64,
    axes: AxesPlan,
    colorbar: Axis,
    /// The cell grid's size and its offset right of the plot's left edge, pt.
    grid: (f64, f64),
    offset: f64,
    /// Plot height the row gives (the grid may be shorter).
    plot_height: f64,
}

impl<'a> HeatmapPlan<'a> {
    pub fn new(
        panel: &'a HeatmapPanel,
        cell_width: f64,
        plot_height: f64,
    ) -> Result<Self, PlotError> {
        let (rows, cols) = (panel.rows, panel.cols);
        let what = || format!("values of heatmap \"{}\" (rows × cols)", panel.title);
        check_length(what, rows * cols, panel.values.len())?;
        let limit = color_limit(panel)?;
        let row_labels = tick_labels(&panel.row_labels, rows, "row labels", &panel.title)?;
        let col_labels = tick_labels(&panel.col_labels, cols, "column labels", &panel.title)?;
        // The y axis runs upwards, so row i sits at category rows - 1 - i.
        let bottom_up: Vec<String> = row_labels.into_iter().rev().collect();

        let colorbar_room = |axis: &Axis| {
            COLORBAR_GAP
                + COLORBAR_WIDTH
                + COLORBAR_TICK
                + COLORBAR_LABEL_GAP
                + axis.widest_label(TICK_PT)
        };
        let request = |extra_right: f64| AxesRequest {
            title: &panel.title,
            x_label: &panel.x_label,
            y_label: &panel.y_label,
            x: Scale::Categories(&col_labels),
            y: Scale::Categories(&bottom_up),
            extra_right,
            extra_bottom: 0.0,
        };
        let colorbar = numeric_axis(-limit, limit, false, plot_height, false);
        let room = colorbar_room(&colorbar);
        let full = AxesPlan::new(&request(room), cell_width, plot_height);
        // Square-ish cells in the room the axes leave, but a strip of a matrix (1 × 60) still
        // gets a readable height.
        let (free_w, free_h) = (full.plot_width, plot_height);
        let (cell_w, cell_h) = (free_w / cols.max(1) as f64, free_h / rows.max(1) as f64);
        let grid_w = (cell_w.min(cell_h * MAX_CELL_ASPECT) * cols.max(1) as f64)
            .max(free_w.min(MIN_GRID_SIDE));
        let grid_h = (cell_h.min(cell_w * MAX_CELL_ASPECT) * rows.max(1) as f64)
            .max(free_h.min(MIN_GRID_SIDE));
        // Axes again for the grid itself, so that labels are thinned for its size; the spare
        // width is split left and right of it.
        let spare = free_w - grid_w;
        let colorbar = numeric_axis(-limit, limit, false, grid_h, false);
        let axes = AxesPlan::new(
            &request(colorbar_room(&colorbar) + spare),
            cell_width,
            grid_h,
        );
        Ok(HeatmapPlan {
            panel,
            limit,
            axes,
            colorbar,
            grid: (grid_w, grid_h),
            offset: spare / 2.0,
            plot_height,
        })
    }

    /// The grid is at the top of the plot: its labels may use the height it leaves free.
    pub fn margins(&self) -> Margins {
        let mut m = self.axes.margins;
        m.bottom = (m.bottom - (self.plot_height - self.grid.1)).max(0.0);
        m
    }

    pub fn draw(&self, svg: &mut Svg, cell: &Area, plot: Area) {
        let (rows, cols) = (self.panel.rows, self.panel.cols);
        let grid = Area::sized(plot.left + self.offset, plot.top, self.grid.0, self.grid.1);
        let frame = self.axes.frame(grid);
        svg.open_group("cells", None);
        for (index, &value) in self.panel.values.iter().enumerate() {
            let (i, j) = (index / cols, index % cols);
            let y = (rows - 1 - i) as f64;
            let (left, bottom) = frame.px((j as f64, y));
            let (right, top) = frame.px((j as f64 + 1.0, y + 1.0));
            // Each cell reaches under its right and lower neighbours (drawn later).
            let area = Area::new(left, top, right + SEAM_OVERLAP, bottom + SEAM_OVERLAP);
            svg.fill_rect(area, diverging(value / self.limit));
        }
        svg.close_group();
        draw_axes(svg, &frame, &self.axes, cell);
        self.draw_colorbar(svg, &grid);
    }

    /// A vertical colour strip right of the cells, ticked on its right side.
    fn draw_colorbar(&self, svg: &mut Svg, grid: &Area) {
        let left = grid.right + COLORBAR_GAP;
        let bar = Area::new(left, grid.top, left + COLORBAR_WIDTH, grid.bottom);
        svg.colormap_rect(bar);
        let stroke = Stroke::solid(AXIS, FRAME_WIDTH);
        svg.outline_rect(bar, &stroke);
        for tick in &self.colorbar.ticks {
            let y = bar.bottom - self.colorbar.fraction(tick.at) * bar.height();
            svg.polyline(&[(bar.right, y), (bar.right + COLORBAR_TICK, y)], &stroke);
            let label = Label::parse(&tick.label);
            let baseline = y + (label.ascent(TICK_PT) - label.descent(TICK_PT)) / 2.0;
            let x = bar.right + COLORBAR_TICK + COLORBAR_LABEL_GAP;
            svg.text(
                &label,
                (x, baseline),
                TICK_PT,
                Align::Start,
                TextRole::TickLabel,
                false,
            );
        }
    }
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

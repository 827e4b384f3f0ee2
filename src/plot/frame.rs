//! A panel's axes: plotters lays out the label areas and draws grid, ticks, tick labels
//! and axis labels from the ticks computed in [`super::axes`]; we add the title, the closed frame
//! and the minor ticks, and map axis-space points to pixels through the chart.

use std::ops::Range;

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axes::Axis;
use super::backend::{units, Anchor, Area, Canvas, Dash, DashingSvg, Px, UNITS_PER_PX};
use super::clip::{Point, Rect};
use super::style::{
    font, text_width, AXIS, AXIS_LABEL_PX, GRID, GRID_WIDTH, TEXT, THIN_WIDTH, TICK_PX, TITLE_PX,
};
use super::PlotError;

type Chart<'a> = ChartContext<'a, DashingSvg, Cartesian2d<Axis, Axis>>;

/// An [`Axis`] is a plotters coordinate whose key points are exactly its labelled ticks.
impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        RangedCoordf64::from(self.lo..self.hi).map(value, limit)
    }
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Grid lines only at the labelled ticks; minor ticks are drawn on the frame.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.iter().map(|t| t.at).collect()
        }
    }
    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for Axis {
    fn format_ext(&self, value: &f64) -> String {
        self.label_at(*value)
    }
}

/// Length of the major tick marks in px (plotters puts labels at twice this from the axis).
const TICK_LENGTH: f64 = 5.0;
const MINOR_TICK_LENGTH: f64 = 3.0;
/// Free space around a panel's content, px.
const PAD: f64 = 6.0;

/// What the axes of a panel show.
pub(super) struct AxesSpec<'s> {
    pub title: &'s str,
    pub x_label: &'s str,
    pub y_label: &'s str,
    pub x: Axis,
    pub y: Axis,
    pub grid: Grid,
    /// Extra space kept free right of the plot (e.g. for a colorbar), px.
    pub reserve_right: f64,
}

/// Which light grid lines are drawn at the major ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Grid {
    None,
    /// At the y ticks only (bar panels).
    Horizontal,
    Both,
}

/// Room around the plotting rectangle, px.
#[derive(Debug, Clone, Copy)]
pub(super) struct Margins {
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
    pub left: f64,
}

impl AxesSpec<'_> {
    /// The room the title, tick labels and axis labels take around the plotting rectangle.
    pub fn margins(&self) -> Margins {
        let title = if self.title.is_empty() {
            0.0
        } else {
            TITLE_PX + 10.0
        };
        let x_label = if self.x_label.is_empty() {
            0.0
        } else {
            AXIS_LABEL_PX * 1.5
        };
        let y_label = if self.y_label.is_empty() {
            0.0
        } else {
            AXIS_LABEL_PX * 1.6
        };
        // Half of the last x label sticks out right of the plot.
        let overhang = self
            .x
            .ticks
            .last()
            .map_or(0.0, |t| text_width(&t.label, TICK_PX) / 2.0);
        Margins {
            top: PAD + title + 4.0,
            right: PAD + overhang.max(8.0) + self.reserve_right,
            bottom: PAD + 2.0 * TICK_LENGTH + TICK_PX * 1.25 + x_label,
            left: PAD + 2.0 * TICK_LENGTH + self.y.widest_label(TICK_PX) + 4.0 + y_label,
        }
    }
}

/// Drawn axes: the chart maps axis-space points to pixels.
pub(super) struct Frame<'a> {
    chart: Chart<'a>,
}

/// Pixel bounds of a rectangle (y grows downwards).
#[derive(Debug, Clone, Copy)]
pub(super) struct PixelBox {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl PixelBox {
    /// Area (px²) shared with another box.
    pub fn overlap(&self, other: &PixelBox) -> f64 {
        let w = self.right.min(other.right) - self.left.max(other.left);
        let h = self.bottom.min(other.bottom) - self.top.max(other.top);
        w.max(0.0) * h.max(0.0)
    }
}

impl Frame<'_> {
    pub fn x(&self) -> &Axis {
        self.chart.as_coord_spec().x_spec()
    }
    pub fn y(&self) -> &Axis {
        self.chart.as_coord_spec().y_spec()
    }

    /// Pixel position of an axis-space point.
    pub fn px(&self, point: Point) -> Px {
        let (x, y) = self.chart.backend_coord(&point);
        (x as f64 / UNITS_PER_PX, y as f64 / UNITS_PER_PX)
    }

    /// The axis-space rectangle the panel shows.
    pub fn bounds(&self) -> Rect {
        Rect {
            x0: self.x().lo,
            x1: self.x().hi,
            y0: self.y().lo,
            y1: self.y().hi,
        }
    }

    /// Pixel bounds of the data.
    pub fn pixels(&self) -> PixelBox {
        let bounds = self.bounds();
        let (left, bottom) = self.px((bounds.x0, bounds.y0));
        let (right, top) = self.px((bounds.x1, bounds.y1));
        PixelBox {
            left,
            top,
            right,
            bottom,
        }
    }

    /// The frame line: plotters draws the left and bottom axes one backend unit outside the
    /// data, so the frame goes there too.
    pub fn border(&self) -> PixelBox {
        let b = self.pixels();
        PixelBox {
            left: b.left - 1.0 / UNITS_PER_PX,
            bottom: b.bottom + 1.0 / UNITS_PER_PX,
            ..b
        }
    }

    pub fn draw_border(&self, canvas: &Canvas) -> Result<(), PlotError> {
        let b = self.border();
        canvas.outline_rect(
            (b.left, b.top),
            (b.right, b.bottom),
            AXIS,
            THIN_WIDTH,
            Dash::Solid,
        )
    }

    /// Pixel polyline of axis-space points.
    pub fn pixel_path(&self, points: &[Point]) -> Vec<Px> {
        points.iter().map(|&p| self.px(p)).collect()
    }
}

/// Draws title, grid, ticks, labels and frame of a panel inside `area`.
pub(super) fn draw_axes<'a>(
    canvas: &Canvas,
    area: &'a Area,
    spec: AxesSpec<'_>,
) -> Result<Frame<'a>, PlotError> {
    let margins = spec.margins();
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_top(units(margins.top))
        .margin_right(units(margins.right))
        .margin_bottom(units(PAD))
        .margin_left(units(PAD))
        .x_label_area_size(units(margins.bottom - PAD))
        .y_label_area_size(units(margins.left - PAD));
    let grid = spec.grid;
    let (title, x_label, y_label) = (spec.title, spec.x_label, spec.y_label);
    let mut chart = builder.build_cartesian_2d(spec.x, spec.y)?;

    let mut mesh = chart.configure_mesh();
    mesh.axis_style(AXIS.style().stroke_width(units(THIN_WIDTH) as u32))
        .bold_line_style(GRID.style().stroke_width(units(GRID_WIDTH) as u32))
        .set_all_tick_mark_size(units(TICK_LENGTH))
        .label_style(font(TICK_PX, TEXT))
        .axis_desc_style(font(AXIS_LABEL_PX, TEXT));
    match grid {
        Grid::None => {
            mesh.disable_mesh();
        }
        Grid::Horizontal => {
            mesh.disable_x_mesh();
        }
        Grid::Both => {}
    }
    if !x_label.is_empty() {
        mesh.x_desc(x_label);
    }
    if !y_label.is_empty() {
        mesh.y_desc(y_label);
    }
    mesh.draw()?;

    let frame = Frame { chart };
    let b = frame.border();
    let anchor = Anchor(HPos::Center, VPos::Bottom);
    canvas.text(
        title,
        ((b.left + b.right) / 2.0, b.top - 8.0),
        TITLE_PX,
        anchor,
        TEXT,
        false,
    )?;
    frame.draw_border(canvas)?;
    for &x in &frame.x().minor {
        let (px, _) = frame.px((x, frame.y().lo));
        let ticks = [(px, b.bottom), (px, b.bottom + MINOR_TICK_LENGTH)];
        canvas.path(&ticks, AXIS, THIN_WIDTH, Dash::Solid)?;
    }
    for &y in &frame.y().minor {
        let (_, py) = frame.px((frame.x().lo, y));
        let ticks = [(b.left - MINOR_TICK_LENGTH, py), (b.left, py)];
        canvas.path(&ticks, AXIS, THIN_WIDTH, Dash::Solid)?;
    }
    Ok(frame)
}

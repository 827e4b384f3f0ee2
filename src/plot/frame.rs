//! A panel's axes: how many ticks fit, how much room title, tick labels and axis labels take
//! (all measured), and drawing them around the plot; [`Frame`] maps axis-space points to the
//! page.

use super::axes::Axis;
use super::geometry::{Area, Pt};
use super::style::{
    Stroke, AXIS, AXIS_LABEL_PT, FRAME_WIDTH, GRID, GRID_WIDTH, LINE_SPACING, TICK_PT, TITLE_PT,
};
use super::svg::{Align, Svg, TextRole};
use super::text::Fitted;

/// Free space at the edge of a panel, pt.
pub(super) const PAD: f64 = 4.0;
const TICK_LENGTH: f64 = 3.0;
const MINOR_TICK_LENGTH: f64 = 1.8;
/// Between a tick and its label, an axis's tick labels and its axis label, a title and the plot.
const TICK_GAP: f64 = 1.5;
const LABEL_GAP: f64 = 3.0;
const TITLE_GAP: f64 = 4.0;
/// Horizontal room between neighbouring x tick labels (numbers, categories), and vertical
/// between y tick labels.
const X_LABEL_SPACE: f64 = 5.0;
const CATEGORY_SPACE: f64 = 2.5;
const Y_LABEL_SPACE: f64 = 3.0;
/// Lines a title, an axis label may wrap into.
const TITLE_LINES: usize = 3;
const AXIS_LABEL_LINES: usize = 2;

/// Maps axis-space points to the page.
#[derive(Debug, Clone)]
pub(super) struct Frame {
    pub plot: Area,
    pub x: Axis,
    pub y: Axis,
}

impl Frame {
    pub fn px(&self, (x, y): (f64, f64)) -> Pt {
        (
            self.plot.left + self.x.fraction(x) * self.plot.width(),
            self.plot.bottom - self.y.fraction(y) * self.plot.height(),
        )
    }

    /// The axis-space rectangle shown.
    pub fn bounds(&self) -> super::clip::Rect {
        super::clip::Rect {
            x0: self.x.lo,
            x1: self.x.hi,
            y0: self.y.lo,
            y1: self.y.hi,
        }
    }

    pub fn pixel_path(&self, points: &[(f64, f64)]) -> Vec<Pt> {
        points.iter().map(|&p| self.px(p)).collect()
    }
}

/// How an axis is ticked: numbers on a linear or log scale, or named categories at `i + 0.5`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scale<'a> {
    Numeric { lo: f64, hi: f64, log: bool },
    Categories(&'a [String]),
}

/// Tick labels, fitted; x labels may be wrapped or turned to read upwards when they are long.
#[derive(Debug, Clone)]
pub(super) struct TickLabels {
    pub labels: Vec<(f64, Fitted)>,
    pub rotated: bool,
}

impl TickLabels {
    fn new(axis: &Axis) -> Self {
        TickLabels {
            labels: axis
                .ticks
                .iter()
                .map(|t| (t.at, Fitted::line(&t.label, TICK_PT)))
                .collect(),
            rotated: false,
        }
    }
    /// How far the labels reach away from an x axis.
    fn depth(&self) -> f64 {
        let measure = |f: &Fitted| if self.rotated { f.width() } else { f.height() };
        self.labels
            .iter()
            .map(|(_, f)| measure(f))
            .fold(0.0, f64::max)
    }
    fn widest(&self) -> f64 {
        self.labels
            .iter()
            .map(|(_, f)| f.width())
            .fold(0.0, f64::max)
    }
}

/// Room around the plot, pt.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Margins {
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
    pub left: f64,
}

/// What a panel asks of its axes.
pub(super) struct AxesRequest<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub x: Scale<'a>,
    pub y: Scale<'a>,
    /// Room kept right of the plot (a colorbar) and below the axis label (a legend), pt.
    pub extra_right: f64,
    pub extra_bottom: f64,
}

/// The axes of a panel laid out in a cell `width` wide with a plot `plot_height` tall.
#[derive(Debug, Clone)]
pub(super) struct AxesPlan {
    pub x: Axis,
    pub y: Axis,
    pub x_ticks: TickLabels,
    pub y_ticks: TickLabels,
    pub title: Fitted,
    pub x_label: Fitted,
    pub y_label: Fitted,
    pub margins: Margins,
    pub plot_width: f64,
    pub plot_height: f64,
}

/// Whether labels `a` and `b`, `gap` apart along the axis, leave `space` between them.
fn clear(a: f64, b: f64, gap: f64, space: f64) -> bool {
    gap >= (a + b) / 2.0 + space
}

/// The numeric axis with the most ticks whose labels don't crowd each other over `length` pt.
pub(super) fn numeric_axis(lo: f64, hi: f64, log: bool, length: f64, horizontal: bool) -> Axis {
    let most = ((length / 14.0) as usize).clamp(2, 12);
    let fits = |axis: &Axis| {
        let labels = TickLabels::new(axis);
        labels.labels.windows(2).all(|w| {
            let gap = (axis.fraction(w[1].0) - axis.fraction(w[0].0)).abs() * length;
            if horizontal {
                clear(w[0].1.width(), w[1].1.width(), gap, X_LABEL_SPACE)
            } else {
                clear(w[0].1.height(), w[1].1.height(), gap, Y_LABEL_SPACE)
            }
        })
    };
    (2..=most)
        .rev()
        .map(|m| Axis::new(lo, hi, log, m))
        .find(|a| fits(a))
        .unwrap_or_else(|| Axis::new(lo, hi, log, 2))
}

/// Every `stride`-th category, the stride the smallest that gives each label `room` pt.
fn thinned(labels: &[String], slot: f64, room: f64) -> Axis {
    let stride = (room / slot.max(1e-9)).ceil().max(1.0) as usize;
    Axis::categorical(labels, labels.len().div_ceil(stride))
}

/// Category labels under an x axis: on one line if they fit their slots; else wrapped in two;
/// else on one line for every k-th category if turning them upwards would thin them as much;
/// else turned to read upwards (thinned if even that is too tight).
fn category_x_labels(labels: &[String], length: f64) -> (Axis, TickLabels) {
    let slot = length / labels.len().max(1) as f64;
    let all = Axis::categorical(labels, labels.len().max(1));
    let one_line = TickLabels::new(&all);
    if one_line.widest() <= slot - CATEGORY_SPACE {
        return (all, one_line);
    }
    let wrapped: Vec<(f64, Fitted)> = all
        .ticks
        .iter()
        .map(|t| {
            (
                t.at,
                Fitted::new(&t.label, TICK_PT, slot - CATEGORY_SPACE, 2),
            )
        })
        .collect();
    if wrapped
        .iter()
        .all(|(_, f)| f.lines.len() <= 2 && f.width() <= slot - CATEGORY_SPACE)
    {
        let labels = TickLabels {
            labels: wrapped,
            rotated: false,
        };
        return (all, labels);
    }
    let upright_room = TICK_PT + Y_LABEL_SPACE;
    let flat_room = one_line.widest() + CATEGORY_SPACE;
    if (flat_room / slot).ceil() <= (upright_room / slot).ceil() {
        let axis = thinned(labels, slot, flat_room);
        let flat = TickLabels::new(&axis);
        return (axis, flat);
    }
    let axis = thinned(labels, slot, upright_room);
    let mut upright = TickLabels::new(&axis);
    upright.rotated = true;
    (axis, upright)
}

/// An axis of `scale` along `length` pt, with its tick labels.
fn ticked(scale: Scale, length: f64, horizontal: bool) -> (Axis, TickLabels) {
    match scale {
        Scale::Numeric { lo, hi, log } => {
            let axis = numeric_axis(lo, hi, log, length, horizontal);
            let labels = TickLabels::new(&axis);
            (axis, labels)
        }
        Scale::Categories(labels) if horizontal => category_x_labels(labels, length),
        Scale::Categories(labels) => {
            let slot = length / labels.len().max(1) as f64;
            let axis = thinned(labels, slot, TICK_PT + Y_LABEL_SPACE);
            let labels = TickLabels::new(&axis);
            (axis, labels)
        }
    }
}

impl AxesPlan {
    /// The map from axis space onto `plot` (a page rectangle).
    pub fn frame(&self, plot: Area) -> Frame {
        Frame {
            plot,
            x: self.x.clone(),
            y: self.y.clone(),
        }
    }
}

impl AxesPlan {
    pub fn new(request: &AxesRequest, cell_width: f64, plot_height: f64) -> AxesPlan {
        let text_width = cell_width - 2.0 * PAD;
        let title = Fitted::new(request.title, TITLE_PT, text_width, TITLE_LINES);
        let x_label = Fitted::new(request.x_label, AXIS_LABEL_PT, text_width, AXIS_LABEL_LINES);
        let y_label = Fitted::new(
            request.y_label,
            AXIS_LABEL_PT,
            plot_height,
            AXIS_LABEL_LINES,
        );
        let (y, y_ticks) = ticked(request.y, plot_height, false);
        let y_label_room = if y_label.is_empty() {
            0.0
        } else {
            y_label.height() + LABEL_GAP
        };
        let mut left = PAD + y_label_room + y_ticks.widest() + TICK_GAP + TICK_LENGTH;
        let mut right = PAD + request.extra_right;
        // The end labels of the x axis may stick out of the plot: widen the margins until they
        // fit (twice is enough: the ticks only get fewer).
        let mut x_axis = ticked(request.x, cell_width - left - right, true);
        for _ in 0..2 {
            let (axis, labels) = &x_axis;
            let plot_width = cell_width - left - right;
            let overhang = |(at, f): &(f64, Fitted), from_right: bool| {
                let reach = if labels.rotated {
                    f.height() / 2.0
                } else {
                    f.width() / 2.0
                };
                let position = axis.fraction(*at) * plot_width;
                let room = if from_right {
                    plot_width - position
                } else {
                    position
                };
                (reach - room).max(0.0)
            };
            let first = labels.labels.first().map_or(0.0, |l| overhang(l, false));
            let last = labels.labels.last().map_or(0.0, |l| overhang(l, true));
            let (new_left, new_right) = (
                left.max(PAD + first),
                right.max(PAD + request.extra_right + last),
            );
            if (new_left, new_right) == (left, right) {
                break;
            }
            (left, right) = (new_left, new_right);
            x_axis = ticked(request.x, cell_width - left - right, true);
        }
        let (x, x_ticks) = x_axis;
        let title_room = if title.is_empty() {
            // Room for half of the top y tick label.
            TICK_PT / 2.0
        } else {
            title.height() + TITLE_GAP
        };
        let x_label_room = if x_label.is_empty() {
            0.0
        } else {
            LABEL_GAP + x_label.height()
        };
        let bottom =
            TICK_LENGTH + TICK_GAP + x_ticks.depth() + x_label_room + request.extra_bottom + PAD;
        AxesPlan {
            x,
            y,
            x_ticks,
            y_ticks,
            title,
            x_label,
            y_label,
            margins: Margins {
                top: PAD + title_room,
                right,
                bottom,
                left,
            },
            plot_width: (cell_width - left - right).max(1.0),
            plot_height,
        }
    }

    /// Where the area below the x axis label starts (a legend placed outside goes there).
    pub fn below_labels(&self, plot: &Area) -> f64 {
        let x_label_room = if self.x_label.is_empty() {
            0.0
        } else {
            LABEL_GAP + self.x_label.height()
        };
        plot.bottom + TICK_LENGTH + TICK_GAP + self.x_ticks.depth() + x_label_room
    }
}

/// Which light grid lines are drawn at the major ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Grid {
    None,
    /// At the y ticks only (bar panels).
    Horizontal,
    Both,
}

/// Grid lines under the data.
pub(super) fn draw_grid(svg: &mut Svg, frame: &Frame, grid: Grid) {
    let stroke = Stroke::solid(GRID, GRID_WIDTH);
    let p = frame.plot;
    if grid == Grid::Both {
        for t in &frame.x.ticks {
            let (x, _) = frame.px((t.at, frame.y.lo));
            svg.polyline(&[(x, p.top), (x, p.bottom)], &stroke);
        }
    }
    if grid != Grid::None {
        for t in &frame.y.ticks {
            let (_, y) = frame.px((frame.x.lo, t.at));
            svg.polyline(&[(p.left, y), (p.right, y)], &stroke);
        }
    }
}

/// A block of lines centred at `x` (rotated: read upwards, centred at `y`), its first line's
/// top at `top` (rotated: its left edge at `top`).
fn draw_block(svg: &mut Svg, block: &Fitted, x: f64, top: f64, role: TextRole, rotated: bool) {
    for (line, baseline) in block.lines.iter().zip(block.baselines()) {
        if rotated {
            svg.text(
                line,
                (top + baseline, x),
                block.size,
                Align::Middle,
                role,
                true,
            );
        } else {
            svg.text(
                line,
                (x, top + baseline),
                block.size,
                Align::Middle,
                role,
                false,
            );
        }
    }
}

/// `centre` moved as little as needed for a text `width` wide to stay within `[lo, hi]`.
fn clamp_centre(centre: f64, width: f64, lo: f64, hi: f64) -> f64 {
    centre.min(hi - width / 2.0).max(lo + width / 2.0)
}

/// Frame, ticks, tick labels, axis labels and title of a panel whose cell is `cell`.
pub(super) fn draw_axes(svg: &mut Svg, frame: &Frame, plan: &AxesPlan, cell: &Area) {
    let p = frame.plot;
    let axis_stroke = Stroke::solid(AXIS, FRAME_WIDTH);
    svg.outline_rect(p, &axis_stroke);
    let tick_stroke = Stroke::solid(AXIS, FRAME_WIDTH);
    let x_at = |at: f64| p.left + frame.x.fraction(at) * p.width();
    let y_at = |at: f64| p.bottom - frame.y.fraction(at) * p.height();
    for t in &frame.x.ticks {
        svg.polyline(
            &[(x_at(t.at), p.bottom), (x_at(t.at), p.bottom + TICK_LENGTH)],
            &tick_stroke,
        );
    }
    for &m in &frame.x.minor {
        let x = x_at(m);
        svg.polyline(
            &[(x, p.bottom), (x, p.bottom + MINOR_TICK_LENGTH)],
            &tick_stroke,
        );
    }
    for t in &frame.y.ticks {
        svg.polyline(
            &[(p.left - TICK_LENGTH, y_at(t.at)), (p.left, y_at(t.at))],
            &tick_stroke,
        );
    }
    for &m in &frame.y.minor {
        let y = y_at(m);
        svg.polyline(
            &[(p.left - MINOR_TICK_LENGTH, y), (p.left, y)],
            &tick_stroke,
        );
    }

    let label_top = p.bottom + TICK_LENGTH + TICK_GAP;
    for (at, label) in &plan.x_ticks.labels {
        if plan.x_ticks.rotated {
            // Read upwards, right-aligned under the tick.
            let Some(line) = label.lines.first() else {
                continue;
            };
            let x = x_at(*at) + (line.ascent(label.size) - line.descent(label.size)) / 2.0;
            svg.text(
                line,
                (x, label_top),
                label.size,
                Align::End,
                TextRole::TickLabel,
                true,
            );
        } else {
            draw_block(svg, label, x_at(*at), label_top, TextRole::TickLabel, false);
        }
    }
    let right_edge = p.left - TICK_LENGTH - TICK_GAP;
    for (at, label) in &plan.y_ticks.labels {
        let Some(line) = label.lines.first() else {
            continue;
        };
        // Centred on the tick: the baseline sits half the box below the box's middle.
        let baseline = y_at(*at) + (line.ascent(label.size) - line.descent(label.size)) / 2.0;
        svg.text(
            line,
            (right_edge, baseline),
            label.size,
            Align::End,
            TextRole::TickLabel,
            false,
        );
    }

    if !plan.x_label.is_empty() {
        let top = label_top + plan.x_ticks.depth() + LABEL_GAP;
        let x = clamp_centre(
            p.center_x(),
            plan.x_label.width(),
            cell.left + PAD,
            cell.right - PAD,
        );
        draw_block(svg, &plan.x_label, x, top, TextRole::AxisLabel, false);
    }
    if !plan.y_label.is_empty() {
        let left = right_edge - plan.y_ticks.widest() - LABEL_GAP - plan.y_label.height();
        draw_block(
            svg,
            &plan.y_label,
            p.center_y(),
            left,
            TextRole::AxisLabel,
            true,
        );
    }
    if !plan.title.is_empty() {
        let top = p.top - TITLE_GAP - plan.title.height();
        let x = clamp_centre(
            p.center_x(),
            plan.title.width(),
            cell.left + PAD,
            cell.right - PAD,
        );
        draw_block(svg, &plan.title, x, top, TextRole::Title, false);
    }
}

/// Height of `lines` lines of `size` text (for room estimates before anything is fitted).
pub(super) fn lines_height(lines: usize, size: f64) -> f64 {
    if lines == 0 {
        0.0
    } else {
        size * (1.0 + LINE_SPACING * (lines - 1) as f64)
    }
}

/// Decoration every panel has besides its plot, for a one-line title and axis labels: what the
/// nominal panel height is spent on before the plot.
pub(super) fn nominal_decoration() -> f64 {
    2.0 * PAD
        + lines_height(1, TITLE_PT)
        + TITLE_GAP
        + TICK_LENGTH
        + TICK_GAP
        + lines_height(1, TICK_PT)
        + LABEL_GAP
        + lines_height(1, AXIS_LABEL_PT)
}

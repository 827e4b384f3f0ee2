//! Line panels: curves, bands, reference lines and arrows on linear or log axes.

use plotters::style::text_anchor::{HPos, VPos};

use super::axes::{fit_range, to_axis, Axis, Interval};
use super::backend::{area_size, Anchor, Area, Canvas, Dash};
use super::clip::Point;
use super::frame::{draw_axes, AxesSpec, Frame, Grid, PixelBox};
use super::legend::{draw_legend, legend_box, Entry, Glyph};
use super::render::check_length;
use super::style::{
    dash_of, palette, text_width, ColorCycle, Ink, ANNOTATION_PX, ARROW, CURVE_WIDTH,
    MARKER_RADIUS, REFERENCE, REFERENCE_WIDTH, THIN_WIDTH,
};
use super::{LegendPosition, LinePanel, LineStyle, PlotError};

/// Distance of reference-line labels from their line and the frame, px.
const LABEL_OFFSET: f64 = 4.0;
/// Opacity of min–max bands.
const BAND_ALPHA: f64 = 0.22;
/// Arrow head length and half-width in px.
const HEAD_LENGTH: f64 = 8.0;
const HEAD_HALF_WIDTH: f64 = 3.5;
/// Target spacing of labelled ticks in px.
const X_TICK_SPACING: f64 = 65.0;
const Y_TICK_SPACING: f64 = 50.0;

pub(super) fn draw_line_panel(
    canvas: &Canvas,
    area: &Area,
    panel: &LinePanel,
) -> Result<(), PlotError> {
    check_lengths(panel)?;
    let data = AxisData::new(panel);
    let ((x0, x1), (y0, y1)) = data.fit_ranges(panel)?;
    let (width, height) = area_size(area);
    let max_x_ticks = ((width - 100.0) / X_TICK_SPACING) as usize;
    let max_y_ticks = ((height - 100.0) / Y_TICK_SPACING) as usize;
    let frame = draw_axes(
        canvas,
        area,
        AxesSpec {
            title: &panel.title,
            x_label: &panel.x_label,
            y_label: &panel.y_label,
            x: Axis::new(x0, x1, panel.x_log, max_x_ticks),
            y: Axis::new(y0, y1, panel.y_log, max_y_ticks),
            grid: Grid::Both,
            reserve_right: 0.0,
        },
    )?;

    let inks = Inks::new(panel);
    let entries = inks.legend_entries(panel);
    let legend = (panel.legend != LegendPosition::None && !entries.is_empty())
        .then(|| legend_box(frame.pixels(), &entries, panel.legend));

    for (samples, &ink) in data.bands.iter().zip(&inks.bands) {
        draw_band(canvas, &frame, samples, ink)?;
    }
    draw_reference_lines(canvas, &frame, panel, legend)?;
    // A direction field goes under the trajectories drawn on it.
    for &(from, to) in &data.arrows {
        draw_arrow(canvas, &frame, from, to)?;
    }
    for ((series, samples), &ink) in panel.series.iter().zip(&data.curves).zip(&inks.series) {
        draw_curve(canvas, &frame, samples, series.style, ink)?;
    }
    draw_legend(canvas, frame.pixels(), &entries, panel.legend)
}

/// The colours of a panel's curves and bands.
struct Inks {
    series: Vec<Ink>,
    bands: Vec<Ink>,
}

impl Inks {
    /// Explicit colours, else the next free palette colour; bands take the colours their curves
    /// get when neither says otherwise (band i goes with curve i).
    fn new(panel: &LinePanel) -> Self {
        let explicit = || panel.series.iter().filter_map(|s| s.color);
        let mut series_colors = ColorCycle::new(explicit());
        let mut band_colors = ColorCycle::new(explicit());
        Inks {
            series: panel
                .series
                .iter()
                .map(|s| palette(series_colors.pick(s.color)))
                .collect(),
            bands: panel
                .bands
                .iter()
                .map(|b| palette(band_colors.pick(b.color)).alpha(BAND_ALPHA))
                .collect(),
        }
    }

    /// Curves first, then the bands that go with them; unlabelled items stay out.
    fn legend_entries(&self, panel: &LinePanel) -> Vec<Entry> {
        let curves = panel
            .series
            .iter()
            .zip(&self.series)
            .filter(|(s, _)| !s.label.is_empty());
        let bands = panel
            .bands
            .iter()
            .zip(&self.bands)
            .filter(|(b, _)| !b.label.is_empty());
        curves
            .map(|(s, &ink)| Entry::new(&s.label, Glyph::Line(s.style, ink)))
            .chain(bands.map(|(b, &ink)| Entry::new(&b.label, Glyph::Patch(ink))))
            .collect()
    }
}

/// A band sample: x, lower, upper (axis space).
type BandSample = (f64, f64, f64);

/// The panel's data in axis space; `None` marks points the axes cannot show (gaps).
struct AxisData {
    curves: Vec<Vec<Option<Point>>>,
    bands: Vec<Vec<Option<BandSample>>>,
    arrows: Vec<(Point, Point)>,
    vlines: Vec<f64>,
    hlines: Vec<f64>,
}

impl AxisData {
    fn new(panel: &LinePanel) -> Self {
        let x = |v: f64| to_axis(v, panel.x_log);
        let y = |v: f64| to_axis(v, panel.y_log);
        let point = |(a, b): (f64, f64)| Some((x(a)?, y(b)?));
        AxisData {
            curves: panel
                .series
                .iter()
                .map(|s| s.x.iter().zip(&s.y).map(|(&a, &b)| point((a, b))).collect())
                .collect(),
            bands: panel
                .bands
                .iter()
                .map(|b| {
                    (0..b.x.len())
                        .map(|i| Some((x(b.x[i])?, y(b.lower[i])?, y(b.upper[i])?)))
                        .collect()
                })
                .collect(),
            arrows: panel
                .arrows
                .iter()
                .filter_map(|a| Some((point(a.from)?, point(a.to)?)))
                .collect(),
            vlines: panel.vlines.iter().filter_map(|l| x(l.at)).collect(),
            hlines: panel.hlines.iter().filter_map(|l| y(l.at)).collect(),
        }
    }

    /// Axis-space ranges: explicit ones, else fitted to everything drawn; y is fitted to what
    /// lies inside the x range (and x to what lies inside an explicit y range).
    fn fit_ranges(&self, panel: &LinePanel) -> Result<(Interval, Interval), PlotError> {
        let mut points: Vec<Point> = self.curves.iter().flatten().flatten().copied().collect();
        for &(x, lo, hi) in self.bands.iter().flatten().flatten() {
            points.extend([(x, lo), (x, hi)]);
        }
        for &(from, to) in &self.arrows {
            points.extend([from, to]);
        }
        let y_explicit = panel
            .y_range
            .and_then(|(lo, hi)| Some((to_axis(lo, panel.y_log)?, to_axis(hi, panel.y_log)?)));
        let in_y = |y: f64| y_explicit.is_none_or(|(lo, hi)| lo <= y && y <= hi);
        let xs = points
            .iter()
            .filter(|p| in_y(p.1))
            .map(|p| p.0)
            .chain(self.vlines.iter().copied());
        let (x0, x1) = fit_range(xs, panel.x_range, panel.x_log, "x")?;
        let ys = points
            .iter()
            .filter(|p| x0 <= p.0 && p.0 <= x1)
            .map(|p| p.1)
            .chain(self.hlines.iter().copied());
        let y_range = fit_range(ys, panel.y_range, panel.y_log, "y")?;
        Ok(((x0, x1), y_range))
    }
}

/// A translucent fill between lower and upper, broken at gaps and cut to the plot.
fn draw_band(
    canvas: &Canvas,
    frame: &Frame,
    samples: &[Option<BandSample>],
    ink: Ink,
) -> Result<(), PlotError> {
    for run in samples.split(Option::is_none).filter(|r| r.len() >= 2) {
        let run: Vec<BandSample> = run.iter().flatten().copied().collect();
        let outline: Vec<Point> = run
            .iter()
            .map(|&(x, _, hi)| (x, hi))
            .chain(run.iter().rev().map(|&(x, lo, _)| (x, lo)))
            .collect();
        canvas.polygon(
            &frame.pixel_path(&frame.bounds().clip_polygon(&outline)),
            ink,
        )?;
    }
    Ok(())
}

fn check_lengths(panel: &LinePanel) -> Result<(), PlotError> {
    for s in &panel.series {
        check_length(
            || format!("y of series \"{}\"", s.label),
            s.x.len(),
            s.y.len(),
        )?;
    }
    for b in &panel.bands {
        check_length(
            || format!("lower of band \"{}\"", b.label),
            b.x.len(),
            b.lower.len(),
        )?;
        check_length(
            || format!("upper of band \"{}\"", b.label),
            b.x.len(),
            b.upper.len(),
        )?;
    }
    Ok(())
}

/// A curve broken at points the axes cannot show and cut to the plot; markers where asked, and
/// a dot for an isolated point of a line (it would otherwise be invisible).
fn draw_curve(
    canvas: &Canvas,
    frame: &Frame,
    samples: &[Option<Point>],
    style: LineStyle,
    ink: Ink,
) -> Result<(), PlotError> {
    let bounds = frame.bounds();
    if style != LineStyle::Markers {
        for run in samples.split(Option::is_none).filter(|r| !r.is_empty()) {
            let run: Vec<Point> = run.iter().flatten().copied().collect();
            for piece in bounds.clip_polyline(&run) {
                let path = frame.pixel_path(&piece);
                if path.len() == 1 {
                    canvas.disc(path[0], CURVE_WIDTH, ink)?;
                } else {
                    canvas.path(&path, ink, CURVE_WIDTH, dash_of(style))?;
                }
            }
        }
    }
    if matches!(style, LineStyle::Markers | LineStyle::SolidMarkers) {
        for &p in samples.iter().flatten().filter(|&&p| bounds.contains(p)) {
            canvas.disc(frame.px(p), MARKER_RADIUS, ink)?;
        }
    }
    Ok(())
}

/// Vertical and horizontal reference lines across the plot, labelled near the top / right end
/// (the bottom / left end when the legend sits there).
fn draw_reference_lines(
    canvas: &Canvas,
    frame: &Frame,
    panel: &LinePanel,
    legend: Option<PixelBox>,
) -> Result<(), PlotError> {
    let b = frame.pixels();
    let bounds = frame.bounds();
    let ink_of = |color: Option<usize>| color.map_or(REFERENCE, palette);
    let label_height = ANNOTATION_PX + 2.0;
    let hits_legend = |left: f64, top: f64, width: f64| {
        let label = PixelBox {
            left,
            top,
            right: left + width,
            bottom: top + label_height,
        };
        legend.is_some_and(|l| l.overlap(&label) > 0.0)
    };
    for line in &panel.vlines {
        let Some(x) = to_axis(line.at, panel.x_log).filter(|x| (bounds.x0..=bounds.x1).contains(x))
        else {
            continue;
        };
        let (px, _) = frame.px((x, bounds.y0));
        let ink = ink_of(line.color);
        canvas.path(
            &[(px, b.top), (px, b.bottom)],
            ink,
            REFERENCE_WIDTH,
            dash_of(line.style),
        )?;
        // Right of the line, unless that would run past the frame.
        let width = text_width(&line.label, ANNOTATION_PX);
        let (tx, h, left) = if px + LABEL_OFFSET + width < b.right {
            (px + LABEL_OFFSET, HPos::Left, px + LABEL_OFFSET)
        } else {
            (px - LABEL_OFFSET, HPos::Right, px - LABEL_OFFSET - width)
        };
        let (ty, v) = if hits_legend(left, b.top + LABEL_OFFSET, width) {
            (b.bottom - LABEL_OFFSET, VPos::Bottom)
        } else {
            (b.top + LABEL_OFFSET, VPos::Top)
        };
        canvas.text(
            &line.label,
            (tx, ty),
            ANNOTATION_PX,
            Anchor(h, v),
            ink,
            false,
        )?;
    }
    for line in &panel.hlines {
        let Some(y) = to_axis(line.at, panel.y_log).filter(|y| (bounds.y0..=bounds.y1).contains(y))
        else {
            continue;
        };
        let (_, py) = frame.px((bounds.x0, y));
        let ink = ink_of(line.color);
        canvas.path(
            &[(b.left, py), (b.right, py)],
            ink,
            REFERENCE_WIDTH,
            dash_of(line.style),
        )?;
        // Above the line, unless it hugs the top of the frame.
        let (ty, v, top) = if py - b.top > 2.0 * label_height {
            (py - 3.0, VPos::Bottom, py - 3.0 - label_height)
        } else {
            (py + LABEL_OFFSET, VPos::Top, py + LABEL_OFFSET)
        };
        let width = text_width(&line.label, ANNOTATION_PX);
        let (tx, h) = if hits_legend(b.right - LABEL_OFFSET - width, top, width) {
            (b.left + LABEL_OFFSET, HPos::Left)
        } else {
            (b.right - LABEL_OFFSET, HPos::Right)
        };
        canvas.text(
            &line.label,
            (tx, ty),
            ANNOTATION_PX,
            Anchor(h, v),
            ink,
            false,
        )?;
    }
    Ok(())
}

/// A shaft cut to the plot and a filled head at the tip (when the tip is inside).
fn draw_arrow(canvas: &Canvas, frame: &Frame, from: Point, to: Point) -> Result<(), PlotError> {
    let Some((a, b)) = frame.bounds().clip_segment(from, to) else {
        return Ok(());
    };
    let (p, q) = (frame.px(a), frame.px(b));
    let (dx, dy) = (q.0 - p.0, q.1 - p.1);
    let length = dx.hypot(dy);
    if length < 1.0 {
        return Ok(());
    }
    let (ux, uy) = (dx / length, dy / length);
    let tip_inside = b == to;
    let head = if tip_inside {
        HEAD_LENGTH.min(length)
    } else {
        0.0
    };
    let base = (q.0 - ux * head, q.1 - uy * head);
    canvas.path(&[p, base], ARROW, THIN_WIDTH, Dash::Solid)?;
    if tip_inside {
        let (nx, ny) = (-uy * HEAD_HALF_WIDTH, ux * HEAD_HALF_WIDTH);
        canvas.polygon(
            &[q, (base.0 + nx, base.1 + ny), (base.0 - nx, base.1 - ny)],
            ARROW,
        )?;
    }
    Ok(())
}

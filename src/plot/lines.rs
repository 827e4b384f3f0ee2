//! Line panels: curves, bands, reference lines and arrows on linear or log axes.
//!
//! A curve's look follows from its role ([`Role::of`] its line style): numerics coloured and
//! solid, drawn first; theory dark, thin and dashed, drawn on top, so that a closed form that
//! agrees with the numerics shows as dashes along the coloured curve; bounds and references grey
//! and dotted, beneath both.

use super::axes::{fit_range, to_axis, Interval};
use super::clip::Point;
use super::frame::{draw_axes, draw_grid, AxesPlan, AxesRequest, Frame, Grid, Margins, Scale};
use super::geometry::{sample_polyline, simplify, Area, Pt};
use super::legend::{Entry, Glyph, LegendPlan};
use super::render::check_length;
use super::style::{
    palette, ColorCycle, Ink, Role, Stroke, ANNOTATION_PT, ARROW, ARROW_WIDTH, MARKER_RADIUS,
    REFERENCE, REFERENCE_WIDTH, THEORY,
};
use super::svg::{Align, Svg, TextRole};
use super::text::Fitted;
use super::{LinePanel, LineStyle, PlotError, RefLine};

/// Opacity of min–max bands.
const BAND_ALPHA: f64 = 0.22;
/// Arrow head length and half-width, pt.
const HEAD_LENGTH: f64 = 4.0;
const HEAD_HALF_WIDTH: f64 = 1.6;
/// Curves are simplified to within this distance of the data, pt (a tenth of a line width).
const SIMPLIFY_TOLERANCE: f64 = 0.1;
/// Markers closer than this to one already drawn are not drawn again, pt.
const MARKER_SPACING: f64 = 0.4;
/// Data points are sampled this densely for legend and label placement, pt.
const SAMPLE_STEP: f64 = 1.0;
/// Distance of a reference line's label from the line and the frame, pt.
const LABEL_OFFSET: f64 = 2.5;

/// Drawing order: references, faint comparison curves, numerics, theory on top.
fn layer(style: LineStyle) -> u8 {
    match (style, Role::of(style)) {
        (_, Role::Reference) => 0,
        (LineStyle::Faint, _) => 1,
        (_, Role::Numerics) => 2,
        (_, Role::Theory) => 3,
    }
}

/// One curve as drawn, in page points relative to the plot's top-left corner.
struct DrawnCurve {
    layer: u8,
    stroke: Option<Stroke>,
    marker: Option<Ink>,
    pieces: Vec<Vec<Pt>>,
    markers: Vec<Pt>,
}

/// A reference line as drawn: a vertical one at x or a horizontal one at y (relative to the
/// plot), its label placed.
struct DrawnReference {
    vertical: bool,
    at: f64,
    stroke: Stroke,
    label: Option<PlacedLabel>,
}

struct PlacedLabel {
    text: Fitted,
    /// Top-left corner of the text block, relative to the plot.
    corner: Pt,
}

/// A line panel laid out for a cell.
pub(super) struct LinePlan {
    axes: AxesPlan,
    bands: Vec<(Vec<Pt>, Ink)>,
    curves: Vec<DrawnCurve>,
    arrows: Vec<(Pt, Pt, bool)>,
    references: Vec<DrawnReference>,
    legend: Option<LegendPlan>,
}

impl LinePlan {
    /// `explained`: legend entries earlier panels of the figure show.
    pub fn new(
        panel: &LinePanel,
        cell_width: f64,
        plot_height: f64,
        explained: &mut Vec<Entry>,
    ) -> Result<Self, PlotError> {
        check_lengths(panel)?;
        let data = AxisData::new(panel);
        let ((x0, x1), (y0, y1)) = data.fit_ranges(panel)?;
        let mut request = AxesRequest {
            title: &panel.title,
            x_label: &panel.x_label,
            y_label: &panel.y_label,
            x: Scale::Numeric {
                lo: x0,
                hi: x1,
                log: panel.x_log,
            },
            y: Scale::Numeric {
                lo: y0,
                hi: y1,
                log: panel.y_log,
            },
            extra_right: 0.0,
            extra_bottom: 0.0,
        };
        let mut axes = AxesPlan::new(&request, cell_width, plot_height);
        let frame = axes.frame(Area::sized(0.0, 0.0, axes.plot_width, axes.plot_height));
        let looks = Looks::new(panel);
        let curves = drawn_curves(panel, &data, &frame, &looks);
        let arrows = drawn_arrows(&data, &frame);
        let bands = data
            .bands
            .iter()
            .zip(&looks.bands)
            .flat_map(|(samples, &ink)| band_polygons(&frame, samples, ink))
            .collect();

        let mut samples: Vec<Pt> = Vec::new();
        for curve in &curves {
            for piece in &curve.pieces {
                sample_polyline(piece, SAMPLE_STEP, &mut samples);
            }
            samples.extend(&curve.markers);
        }
        for &(from, to, _) in &arrows {
            sample_polyline(&[from, to], SAMPLE_STEP, &mut samples);
        }
        let legend = LegendPlan::new(
            &looks.legend_entries(panel),
            explained,
            &frame.plot,
            &samples,
            panel.legend,
            cell_width,
        );
        if let Some(l) = &legend {
            if l.extra_bottom() > 0.0 {
                request.extra_bottom = l.extra_bottom();
                axes = AxesPlan::new(&request, cell_width, plot_height);
            }
        }
        let mut taken: Vec<Area> = legend
            .iter()
            .map(|l| l.area(&frame.plot, &frame.plot, frame.plot.bottom))
            .filter(|a| frame.plot.intersects(a))
            .collect();
        let references = drawn_references(panel, &frame, &samples, &mut taken);
        Ok(LinePlan {
            axes,
            bands,
            curves,
            arrows,
            references,
            legend,
        })
    }

    pub fn margins(&self) -> Margins {
        self.axes.margins
    }

    pub fn draw(&self, svg: &mut Svg, cell: &Area, plot: Area) {
        let frame = self.axes.frame(plot);
        let (dx, dy) = (plot.left, plot.top);
        let shift =
            |points: &[Pt]| -> Vec<Pt> { points.iter().map(|&(x, y)| (x + dx, y + dy)).collect() };
        draw_grid(svg, &frame, Grid::Both);
        if !self.bands.is_empty() {
            svg.open_group("band", None);
            for (polygon, ink) in &self.bands {
                svg.polygon(&shift(polygon), *ink);
            }
            svg.close_group();
        }
        for r in &self.references {
            let line = if r.vertical {
                [(dx + r.at, plot.top), (dx + r.at, plot.bottom)]
            } else {
                [(plot.left, dy + r.at), (plot.right, dy + r.at)]
            };
            svg.polyline(&line, &r.stroke);
        }
        svg.open_group("data", None);
        for &(from, to, head) in &self.arrows {
            draw_arrow(svg, shift(&[from])[0], shift(&[to])[0], head);
        }
        for layer in 0..=3 {
            for curve in self.curves.iter().filter(|c| c.layer == layer) {
                if let Some(stroke) = &curve.stroke {
                    for piece in &curve.pieces {
                        let piece = shift(piece);
                        if piece.len() == 1 {
                            svg.circle(piece[0], stroke.width, stroke.ink);
                        } else {
                            svg.polyline(&piece, stroke);
                        }
                    }
                }
                if let Some(ink) = curve.marker {
                    for p in shift(&curve.markers) {
                        svg.circle(p, MARKER_RADIUS, ink);
                    }
                }
            }
        }
        svg.close_group();
        draw_axes(svg, &frame, &self.axes, cell);
        for r in &self.references {
            if let Some(label) = &r.label {
                let (left, top) = label.corner;
                for (line, baseline) in label.text.lines.iter().zip(label.text.baselines()) {
                    svg.text(
                        line,
                        (dx + left, dy + top + baseline),
                        label.text.size,
                        Align::Start,
                        TextRole::Annotation,
                        false,
                    );
                }
            }
        }
        if let Some(legend) = &self.legend {
            let area = legend.area(&plot, cell, self.axes.below_labels(&plot));
            legend.draw(svg, area);
        }
    }
}

/// How each curve and band of a panel is drawn.
struct Looks {
    series: Vec<(Option<Stroke>, Option<Ink>)>,
    bands: Vec<Ink>,
}

impl Looks {
    /// Numerics take explicit colours, else the next free palette colour (band i takes the
    /// colour numerical curve i gets when neither says otherwise). Theory is dark; its curves
    /// with different labels get different dash patterns. References are grey unless a colour
    /// ties them to a curve.
    fn new(panel: &LinePanel) -> Self {
        let explicit = || {
            panel
                .series
                .iter()
                .filter(|s| Role::of(s.style) == Role::Numerics)
                .filter_map(|s| s.color)
        };
        let mut series_colors = ColorCycle::new(explicit());
        let mut band_colors = ColorCycle::new(explicit());
        let mut theory_labels: Vec<&str> = Vec::new();
        let series = panel
            .series
            .iter()
            .map(|s| match Role::of(s.style) {
                Role::Numerics => {
                    let ink = palette(series_colors.pick(s.color));
                    let stroke = match s.style {
                        LineStyle::Markers => None,
                        LineStyle::Faint => Some(Stroke::faint(ink)),
                        _ => Some(Stroke::numerics(ink)),
                    };
                    let marker = matches!(s.style, LineStyle::Markers | LineStyle::SolidMarkers)
                        .then_some(ink);
                    (stroke, marker)
                }
                Role::Theory => {
                    let variant = match theory_labels.iter().position(|&l| l == s.label) {
                        _ if s.label.is_empty() => 0,
                        Some(i) => i,
                        None => {
                            theory_labels.push(&s.label);
                            theory_labels.len() - 1
                        }
                    };
                    (Some(Stroke::theory(variant)), None)
                }
                Role::Reference => (
                    Some(Stroke::reference(s.color.map_or(REFERENCE, palette))),
                    None,
                ),
            })
            .collect();
        Looks {
            series,
            bands: panel
                .bands
                .iter()
                .map(|b| palette(band_colors.pick(b.color)).alpha(BAND_ALPHA))
                .collect(),
        }
    }

    /// Curves first, then bands; unlabelled items stay out.
    fn legend_entries(&self, panel: &LinePanel) -> Vec<Entry> {
        let curves = panel
            .series
            .iter()
            .zip(&self.series)
            .filter(|(s, _)| !s.label.is_empty())
            .map(|(s, &(stroke, marker))| Entry {
                label: s.label.clone(),
                glyph: Glyph::Line { stroke, marker },
            });
        let bands = panel
            .bands
            .iter()
            .zip(&self.bands)
            .filter(|(b, _)| !b.label.is_empty())
            .map(|(b, &ink)| Entry {
                label: b.label.clone(),
                glyph: Glyph::Patch(ink),
            });
        curves.chain(bands).collect()
    }
}

/// The stroke of a reference line: dotted grey by default, dark dashed for a theory value,
/// solid grey when asked; in the colour asked for, if any.
fn reference_stroke(line: &RefLine) -> Stroke {
    match Role::of(line.style) {
        Role::Reference => Stroke::reference(line.color.map_or(REFERENCE, palette)),
        Role::Theory => Stroke {
            ink: line.color.map_or(THEORY, palette),
            ..Stroke::theory(0)
        },
        Role::Numerics => Stroke::solid(line.color.map_or(REFERENCE, palette), REFERENCE_WIDTH),
    }
}

/// Curves broken at points the axes cannot show, cut to the plot and simplified; markers inside
/// the plot, thinned where they pile up.
fn drawn_curves(
    panel: &LinePanel,
    data: &AxisData,
    frame: &Frame,
    looks: &Looks,
) -> Vec<DrawnCurve> {
    let bounds = frame.bounds();
    panel
        .series
        .iter()
        .zip(&data.curves)
        .zip(&looks.series)
        .map(|((series, samples), &(stroke, marker))| {
            let mut pieces = Vec::new();
            if stroke.is_some() {
                for run in samples.split(Option::is_none).filter(|r| !r.is_empty()) {
                    let run: Vec<Point> = run.iter().flatten().copied().collect();
                    for piece in bounds.clip_polyline(&run) {
                        pieces.push(simplify(&frame.pixel_path(&piece), SIMPLIFY_TOLERANCE));
                    }
                }
            }
            let mut markers: Vec<Pt> = Vec::new();
            if marker.is_some() {
                let mut seen = std::collections::HashSet::new();
                for &p in samples.iter().flatten().filter(|&&p| bounds.contains(p)) {
                    let q = frame.px(p);
                    let cell = (
                        (q.0 / MARKER_SPACING).round() as i64,
                        (q.1 / MARKER_SPACING).round() as i64,
                    );
                    if seen.insert(cell) {
                        markers.push(q);
                    }
                }
            }
            DrawnCurve {
                layer: layer(series.style),
                stroke,
                marker,
                pieces,
                markers,
            }
        })
        .collect()
}

/// Arrow shafts cut to the plot; a head where the tip is inside.
fn drawn_arrows(data: &AxisData, frame: &Frame) -> Vec<(Pt, Pt, bool)> {
    data.arrows
        .iter()
        .filter_map(|&(from, to)| {
            let (a, b) = frame.bounds().clip_segment(from, to)?;
            let (p, q) = (frame.px(a), frame.px(b));
            ((q.0 - p.0).hypot(q.1 - p.1) >= 0.5).then_some((p, q, b == to))
        })
        .collect()
}

fn draw_arrow(svg: &mut Svg, p: Pt, q: Pt, head: bool) {
    let (dx, dy) = (q.0 - p.0, q.1 - p.1);
    let length = dx.hypot(dy);
    let (ux, uy) = (dx / length, dy / length);
    let head_length = if head { HEAD_LENGTH.min(length) } else { 0.0 };
    let base = (q.0 - ux * head_length, q.1 - uy * head_length);
    svg.polyline(&[p, base], &Stroke::solid(ARROW, ARROW_WIDTH));
    if head {
        let (nx, ny) = (-uy * HEAD_HALF_WIDTH, ux * HEAD_HALF_WIDTH);
        svg.polygon(
            &[q, (base.0 + nx, base.1 + ny), (base.0 - nx, base.1 - ny)],
            ARROW,
        );
    }
}

/// Reference lines inside the plot, each label where it overlaps nothing placed before it
/// (`taken`: the legend and earlier labels) and hides the fewest data `samples`.
fn drawn_references(
    panel: &LinePanel,
    frame: &Frame,
    samples: &[Pt],
    taken: &mut Vec<Area>,
) -> Vec<DrawnReference> {
    let plot = frame.plot;
    let mut out = Vec::new();
    let lines = panel
        .vlines
        .iter()
        .map(|l| (true, l))
        .chain(panel.hlines.iter().map(|l| (false, l)));
    for (vertical, line) in lines {
        let axis_value = if vertical {
            to_axis(line.at, panel.x_log).filter(|x| (frame.x.lo..=frame.x.hi).contains(x))
        } else {
            to_axis(line.at, panel.y_log).filter(|y| (frame.y.lo..=frame.y.hi).contains(y))
        };
        let Some(v) = axis_value else {
            continue;
        };
        let at = if vertical {
            frame.px((v, frame.y.lo)).0
        } else {
            frame.px((frame.x.lo, v)).1
        };
        let text = Fitted::new(
            &line.label,
            ANNOTATION_PT,
            plot.width() - 2.0 * LABEL_OFFSET,
            2,
        );
        let label = (!text.is_empty()).then(|| {
            let size = (text.width(), text.height());
            let corner = label_corner(vertical, at, size, &plot, taken, samples);
            taken.push(Area::sized(corner.0, corner.1, size.0, size.1));
            PlacedLabel { text, corner }
        });
        out.push(DrawnReference {
            vertical,
            at,
            stroke: reference_stroke(line),
            label,
        });
    }
    out
}

/// Top-left corner of a label of `(w, h)` for the line at `at`, beside a vertical line (from
/// the top down) or above or below a horizontal one (right end, left end, middle): of the places
/// inside the plot that overlap nothing `taken`, the one that hides the fewest `samples`, the
/// earliest on a tie; the first place inside if every one overlaps.
fn label_corner(
    vertical: bool,
    at: f64,
    (w, h): (f64, f64),
    plot: &Area,
    taken: &[Area],
    samples: &[Pt],
) -> Pt {
    let step = h + 1.0;
    let rows = ((plot.height() - 2.0 * LABEL_OFFSET) / step)
        .floor()
        .max(1.0) as usize;
    let candidates: Vec<Pt> = if vertical {
        let right = at + LABEL_OFFSET;
        let left = at - LABEL_OFFSET - w;
        (0..rows)
            .flat_map(|k| {
                let top = plot.top + LABEL_OFFSET + k as f64 * step;
                [(right, top), (left, top)]
            })
            .collect()
    } else {
        let above = at - LABEL_OFFSET - h;
        let below = at + LABEL_OFFSET;
        let right = plot.right - LABEL_OFFSET - w;
        let left = plot.left + LABEL_OFFSET;
        let middle = plot.center_x() - w / 2.0;
        [right, left, middle]
            .into_iter()
            .flat_map(|x| [(x, above), (x, below)])
            .collect()
    };
    let inside = |&(x, y): &Pt| {
        x >= plot.left && y >= plot.top && x + w <= plot.right && y + h <= plot.bottom
    };
    let free = |&(x, y): &Pt| {
        let b = Area::sized(x, y, w, h);
        !taken.iter().any(|t| t.intersects(&b))
    };
    let hidden = |&(x, y): &Pt| {
        let b = Area::sized(x, y, w, h);
        samples.iter().filter(|&&p| b.contains(p)).count()
    };
    candidates
        .iter()
        .copied()
        .filter(|c| inside(c) && free(c))
        .map(|c| (hidden(&c), c))
        .fold(None, |best: Option<(usize, Pt)>, c| match best {
            Some(b) if b.0 <= c.0 => Some(b),
            _ => Some(c),
        })
        .map(|(_, c)| c)
        .or_else(|| candidates.iter().copied().find(inside))
        // Wider or taller than the plot: keep it in the plot's top-left corner.
        .unwrap_or((plot.left + LABEL_OFFSET, plot.top + LABEL_OFFSET))
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
        // Coordinates beyond ±f64::MAX/8 are far off any axis; capped, their differences stay
        // finite for the clipping arithmetic.
        let cap = |v: f64| v.clamp(-f64::MAX / 8.0, f64::MAX / 8.0);
        let x = |v: f64| to_axis(v, panel.x_log).map(cap);
        let y = |v: f64| to_axis(v, panel.y_log).map(cap);
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

/// Fills between lower and upper, broken at gaps and cut to the plot.
fn band_polygons(frame: &Frame, samples: &[Option<BandSample>], ink: Ink) -> Vec<(Vec<Pt>, Ink)> {
    samples
        .split(Option::is_none)
        .filter(|r| r.len() >= 2)
        .map(|run| {
            let run: Vec<BandSample> = run.iter().flatten().copied().collect();
            let outline: Vec<Point> = run
                .iter()
                .map(|&(x, _, hi)| (x, hi))
                .chain(run.iter().rev().map(|&(x, lo, _)| (x, lo)))
                .collect();
            let clipped = frame.pixel_path(&frame.bounds().clip_polygon(&outline));
            (simplify(&clipped, SIMPLIFY_TOLERANCE), ink)
        })
        .collect()
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

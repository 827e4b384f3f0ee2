//! Grouped bar panels: numerics filled, theory hatched (an SVG `<pattern>`), references outlined
//! with dots, markers-only groups as lollipops.

use super::axes::{fit_range, to_axis};
use super::frame::{draw_axes, draw_grid, AxesPlan, AxesRequest, Grid, Margins, Scale};
use super::geometry::{sample_area, Area, Pt};
use super::legend::{Entry, Glyph, LegendPlan};
use super::render::check_length;
use super::style::{
    palette, Ink, Stroke, AXIS, FAINT_ALPHA, FRAME_WIDTH, MARKER_RADIUS, NUMERICS_WIDTH,
};
use super::svg::Svg;
use super::{BarPanel, LegendPosition, LineStyle, PlotError};

/// Share of a category's width taken by its bars.
const GROUP_WIDTH: f64 = 0.8;
const HATCH_TINT: f64 = 0.15;
/// Data points are sampled this densely for legend placement, pt.
const SAMPLE_STEP: f64 = 1.0;

/// How one group's bars look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct BarLook {
    pub style: LineStyle,
    pub ink: Ink,
    /// The value is below the axis (the bar hangs down from it).
    pub downwards: bool,
}

/// A bar panel laid out for a cell; bars in page points relative to the plot's top-left corner
/// (for a bar below its axis, the value is at the bottom: markers-only groups need to know).
pub(super) struct BarPlan {
    axes: AxesPlan,
    bars: Vec<(Area, BarLook)>,
    /// The zero line of a linear axis with negative bars, relative to the plot's top.
    zero: Option<f64>,
    legend: Option<LegendPlan>,
}

impl BarPlan {
    /// `explained`: legend entries earlier panels of the figure show.
    pub fn new(
        panel: &BarPanel,
        cell_width: f64,
        plot_height: f64,
        explained: &mut Vec<Entry>,
    ) -> Result<Self, PlotError> {
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
        let mut request = AxesRequest {
            title: &panel.title,
            x_label: &panel.x_label,
            y_label: &panel.y_label,
            x: Scale::Categories(&panel.categories),
            y: Scale::Numeric {
                lo: y0,
                hi: y1,
                log,
            },
            extra_right: 0.0,
            extra_bottom: 0.0,
        };
        let mut axes = AxesPlan::new(&request, cell_width, plot_height);
        let frame = axes.frame(Area::sized(0.0, 0.0, axes.plot_width, axes.plot_height));
        let base = if log { y0 } else { 0.0f64.clamp(y0, y1) };
        let bar_width = GROUP_WIDTH / panel.groups.len().max(1) as f64;
        let mut bars = Vec::new();
        for (g, (_, values, style)) in panel.groups.iter().enumerate() {
            let look = |downwards| BarLook {
                style: *style,
                ink: palette(g),
                downwards,
            };
            for (i, &value) in values.iter().enumerate() {
                let Some(top) = to_axis(value, log) else {
                    continue;
                };
                let x0 = i as f64 + (1.0 - GROUP_WIDTH) / 2.0 + g as f64 * bar_width;
                let (left, base_px) = frame.px((x0, base));
                let (right, top_px) = frame.px((x0 + bar_width, top.clamp(y0, y1)));
                let area = Area::new(left, base_px.min(top_px), right, base_px.max(top_px));
                bars.push((area, look(top_px > base_px)));
            }
        }
        let zero = (!log && y0 < 0.0 && 0.0 < y1).then(|| frame.px((0.0, 0.0)).1);

        let entries: Vec<Entry> = panel
            .groups
            .iter()
            .enumerate()
            .filter(|(_, (label, _, _))| !label.is_empty())
            .map(|(g, (label, _, style))| Entry {
                label: label.clone(),
                glyph: Glyph::Bar(BarLook {
                    style: *style,
                    ink: palette(g),
                    downwards: false,
                }),
            })
            .collect();
        let mut samples: Vec<Pt> = Vec::new();
        for (area, _) in &bars {
            sample_area(area, SAMPLE_STEP, &mut samples);
        }
        let legend = LegendPlan::new(
            &entries,
            explained,
            &frame.plot,
            &samples,
            LegendPosition::Best,
            cell_width,
        );
        if let Some(l) = &legend {
            if l.extra_bottom() > 0.0 {
                request.extra_bottom = l.extra_bottom();
                axes = AxesPlan::new(&request, cell_width, plot_height);
            }
        }
        Ok(BarPlan {
            axes,
            bars,
            zero,
            legend,
        })
    }

    pub fn margins(&self) -> Margins {
        self.axes.margins
    }

    pub fn draw(&self, svg: &mut Svg, cell: &Area, plot: Area) {
        let frame = self.axes.frame(plot);
        draw_grid(svg, &frame, Grid::Horizontal);
        svg.open_group("data", None);
        for (area, look) in &self.bars {
            draw_bar(svg, area.shifted(plot.left, plot.top), *look);
        }
        svg.close_group();
        if let Some(zero) = self.zero {
            let y = plot.top + zero;
            svg.polyline(
                &[(plot.left, y), (plot.right, y)],
                &Stroke::solid(AXIS, FRAME_WIDTH),
            );
        }
        draw_axes(svg, &frame, &self.axes, cell);
        if let Some(legend) = &self.legend {
            let area = legend.area(&plot, cell, self.axes.below_labels(&plot));
            legend.draw(svg, area);
        }
    }
}

/// One bar over `area`: numerics filled; theory hatched over a light tint and outlined;
/// references outlined with dots; markers-only a stem with a dot at the value.
pub(super) fn draw_bar(svg: &mut Svg, area: Area, look: BarLook) {
    let BarLook {
        style,
        ink,
        downwards,
    } = look;
    match style {
        LineStyle::Solid | LineStyle::SolidMarkers => svg.fill_rect(area, ink),
        LineStyle::Faint => svg.fill_rect(area, ink.alpha(FAINT_ALPHA)),
        LineStyle::Dashed => svg.hatched_rect(
            area,
            ink,
            ink.alpha(HATCH_TINT),
            &Stroke::solid(ink, FRAME_WIDTH),
        ),
        LineStyle::Dotted => {
            let mut stroke = Stroke::reference(ink);
            stroke.width = NUMERICS_WIDTH;
            svg.outline_rect(area, &stroke);
        }
        LineStyle::Markers => {
            let x = area.center_x();
            let (base, tip) = if downwards {
                (area.top, area.bottom)
            } else {
                (area.bottom, area.top)
            };
            svg.polyline(&[(x, base), (x, tip)], &Stroke::solid(ink, FRAME_WIDTH));
            svg.circle((x, tip), MARKER_RADIUS + 0.4, ink);
        }
    }
}

//! The figure: panels on a grid of at most three columns (two at column width) under an
//! optional super-title, laid out in printed points and written as one SVG document.
//!
//! Every panel in a row shares the plot height; the rows's panels are aligned on their plots'
//! top edges, and each row is as tall as its tallest title and deepest axis labels need.

use super::bars::BarPlan;
use super::font::FONT_FAMILY;
use super::frame::{nominal_decoration, Margins, PAD};
use super::geometry::Area;
use super::heatmap::HeatmapPlan;
use super::legend::Entry;
use super::lines::LinePlan;
use super::style::{COLUMN_WIDTH_PT, FULL_WIDTH_PT, SUPER_TITLE_PT};
use super::svg::{Align, Svg, TextRole};
use super::text::Fitted;
use super::{Figure, FigureWidth, Panel};

/// Why a figure could not be drawn: only input no figure can show.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{what}: expected {expected} values, found {found}")]
    LengthMismatch {
        what: String,
        expected: usize,
        found: usize,
    },
    #[error("{axis} range ({lo}, {hi}) is empty or not finite{}", if *log { " or not positive on a log axis" } else { "" })]
    InvalidRange {
        axis: String,
        lo: f64,
        hi: f64,
        log: bool,
    },
    #[error("heatmap colour limit {limit} must be finite and positive")]
    InvalidLimit { limit: f64 },
    #[error("panel aspect ratio {aspect} must lie in [{MIN_ASPECT}, {MAX_ASPECT}]")]
    InvalidAspect { aspect: f64 },
}

/// `Ok` when `found` values came where `expected` were due; `what` names them for the error.
pub(super) fn check_length(
    what: impl FnOnce() -> String,
    expected: usize,
    found: usize,
) -> Result<(), PlotError> {
    if expected == found {
        return Ok(());
    }
    Err(PlotError::LengthMismatch {
        what: what(),
        expected,
        found,
    })
}

/// Panel height over width: flatter or taller panels than this have no room for their plot.
const MIN_ASPECT: f64 = 0.35;
const MAX_ASPECT: f64 = 2.0;
/// The plot of any panel is at least this tall, pt.
const MIN_PLOT_HEIGHT: f64 = 40.0;
/// Between the super-title and the first row, pt.
const SUPER_TITLE_GAP: f64 = 3.0;
const SUPER_TITLE_LINES: usize = 3;

/// A panel laid out for its cell.
enum Plan<'a> {
    Lines(LinePlan),
    Heatmap(HeatmapPlan<'a>),
    Bars(BarPlan),
}

impl<'a> Plan<'a> {
    fn new(
        panel: &'a Panel,
        cell_width: f64,
        plot_height: f64,
        explained: &mut Vec<Entry>,
    ) -> Result<Self, PlotError> {
        Ok(match panel {
            Panel::Lines(p) => Plan::Lines(LinePlan::new(p, cell_width, plot_height, explained)?),
            Panel::Heatmap(p) => Plan::Heatmap(HeatmapPlan::new(p, cell_width, plot_height)?),
            Panel::Bars(p) => Plan::Bars(BarPlan::new(p, cell_width, plot_height, explained)?),
        })
    }
    fn margins(&self) -> Margins {
        match self {
            Plan::Lines(p) => p.margins(),
            Plan::Heatmap(p) => p.margins(),
            Plan::Bars(p) => p.margins(),
        }
    }
    fn draw(&self, svg: &mut Svg, cell: &Area, plot: Area) {
        match self {
            Plan::Lines(p) => p.draw(svg, cell, plot),
            Plan::Heatmap(p) => p.draw(svg, cell, plot),
            Plan::Bars(p) => p.draw(svg, cell, plot),
        }
    }
}

/// Draws `fig` as a standalone SVG document of its printed size.
pub fn render_svg(fig: &Figure) -> Result<String, PlotError> {
    if !(MIN_ASPECT..=MAX_ASPECT).contains(&fig.aspect) {
        return Err(PlotError::InvalidAspect { aspect: fig.aspect });
    }
    let class = fig.width.unwrap_or(if fig.panels.len() <= 1 {
        FigureWidth::Column
    } else {
        FigureWidth::Full
    });
    let (width, max_columns) = match class {
        FigureWidth::Column => (COLUMN_WIDTH_PT, 2),
        FigureWidth::Full => (FULL_WIDTH_PT, 3),
    };
    let columns = fig
        .columns
        .clamp(1, max_columns)
        .min(fig.panels.len().max(1));
    let cell_width = width / columns as f64;
    let plot_height = (cell_width * fig.aspect - nominal_decoration()).max(MIN_PLOT_HEIGHT);
    let mut explained = Vec::new();
    let plans = fig
        .panels
        .iter()
        .map(|p| Plan::new(p, cell_width, plot_height, &mut explained))
        .collect::<Result<Vec<_>, _>>()?;

    let mut svg = Svg::default();
    let title = Fitted::new(
        fig.title.as_deref().unwrap_or(""),
        SUPER_TITLE_PT,
        width - 2.0 * PAD,
        SUPER_TITLE_LINES,
    );
    let mut y = 0.0;
    if !title.is_empty() {
        y = PAD;
        for (line, baseline) in title.lines.iter().zip(title.baselines()) {
            let at = (width / 2.0, y + baseline);
            svg.text(
                line,
                at,
                title.size,
                Align::Middle,
                TextRole::SuperTitle,
                false,
            );
        }
        y += title.height() + SUPER_TITLE_GAP;
    }
    for row in plans.chunks(columns) {
        let margins: Vec<Margins> = row.iter().map(Plan::margins).collect();
        let top = margins.iter().map(|m| m.top).fold(0.0, f64::max);
        let bottom = margins.iter().map(|m| m.bottom).fold(0.0, f64::max);
        let row_height = top + plot_height + bottom;
        // A short last row is centred.
        let first = (width - row.len() as f64 * cell_width) / 2.0;
        for (c, (plan, m)) in row.iter().zip(&margins).enumerate() {
            let cell = Area::sized(first + c as f64 * cell_width, y, cell_width, row_height);
            let plot = Area::new(
                cell.left + m.left,
                y + top,
                cell.right - m.right,
                y + top + plot_height,
            );
            svg.open_group("panel", Some(cell));
            plan.draw(&mut svg, &cell, plot);
            svg.close_group();
        }
        y += row_height;
    }
    let plain_title = title
        .lines
        .iter()
        .map(|l| l.plain())
        .collect::<Vec<_>>()
        .join(" ");
    Ok(svg.document(width, y, &plain_title, FONT_FAMILY))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::{
        Arrow, Band, BarPanel, HeatmapPanel, LegendPosition, LinePanel, LineStyle, RefLine, Series,
    };

    /// Parses `svg` (it must be well-formed XML); returns its number of elements.
    fn check_well_formed(svg: &str) -> usize {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        doc.descendants().filter(|n| n.is_element()).count()
    }

    /// The visible text of every `<text>` element (scripts run together).
    fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| {
                n.descendants()
                    .filter(|t| t.is_text())
                    .filter_map(|t| t.text())
                    .collect()
            })
            .collect()
    }

    fn log_space(lo: f64, hi: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| lo * (hi / lo).powf(i as f64 / (n - 1) as f64))
            .collect()
    }

    /// A figure that uses every feature once.
    fn showcase() -> Figure {
        let t = log_space(1e-2, 1e6, 200);
        let mut loss: Vec<f64> = t.iter().map(|t| 1.0 / (1.0 + t) + 1e-9).collect();
        loss[60] = f64::NAN; // a gap
        loss[61] = 0.0; // not drawable on a log axis either
        let theory: Vec<f64> = t.iter().map(|t| 1.0 / t).collect();
        let claim: Vec<f64> = t.iter().map(|t| t.powf(-0.5)).collect();
        let gd_t = log_space(1e-1, 1e5, 13);
        let gd: Vec<f64> = gd_t.iter().map(|t| 1.3 / (1.0 + t)).collect();
        let lower: Vec<f64> = loss.iter().map(|l| 0.6 * l).collect();
        let upper: Vec<f64> = loss.iter().map(|l| 1.6 * l).collect();
        let rates = LinePanel::new("Loss decay", "time t", "loss L(t)")
            .log_x()
            .log_y()
            .band(Band::new("min–max over seeds", t.clone(), lower, upper).color(0))
            .series(Series::numerics("gradient flow", t.clone(), loss).color(0))
            .series(Series::theory("theory 1/t", t.clone(), theory).color(1))
            .series(Series::new("paper claim t^−1/2", t, claim, LineStyle::Dotted).color(3))
            .series(Series::new("GD, η = 0.1", gd_t, gd, LineStyle::Markers).color(2))
            .vline(RefLine::new(30.0, "onset T"))
            .hline(RefLine::new(1e-4, "tolerance").style(LineStyle::Dotted));

        let mut phase =
            LinePanel::new("Phase portrait", "a", "b").legend(LegendPosition::LowerLeft);
        for i in -3..=3 {
            for j in -3..=3 {
                let (a, b) = (i as f64 * 0.5, j as f64 * 0.5);
                phase = phase.arrow(Arrow::new((a, b), (a - 0.15 * b, b + 0.15 * a - 0.1 * b)));
            }
        }
        let s: Vec<f64> = (0..60).map(|k| k as f64 * 0.1).collect();
        let (xs, ys): (Vec<f64>, Vec<f64>) = s
            .iter()
            .map(|s| ((-0.3 * s).exp() * s.cos(), (-0.3 * s).exp() * s.sin()))
            .unzip();
        phase = phase
            .series(Series::new("trajectory", xs, ys, LineStyle::SolidMarkers).color(2))
            .arrow(Arrow::new((1.0, -1.0), (5.0, -1.0))) // leaves the plot: no head
            .x_range(-1.8, 1.8)
            .y_range(-1.8, 1.8);

        let (rows, cols) = (6, 8);
        let values: Vec<f64> = (0..rows * cols)
            .map(|k| ((k % cols) as f64 - (k / cols) as f64) / 7.0)
            .collect();
        let letters = |n: usize| {
            (0..n)
                .map(|i| ((b'a' + i as u8) as char).to_string())
                .collect()
        };
        let heat = HeatmapPanel::new("Attention W", values, rows, cols)
            .row_labels(letters(rows))
            .col_labels(letters(cols))
            .axis_labels("key", "query");

        let categories: Vec<String> = ["d=4", "d=8", "d=16", "d=32", "d=64"]
            .map(String::from)
            .to_vec();
        let bars = BarPanel::new("Condition number", "dimension", "κ", categories)
            .log_y()
            .group(
                "measured",
                vec![3.0, 12.0, 50.0, 210.0, 800.0],
                LineStyle::Solid,
            )
            .group(
                "bound",
                vec![4.0, 16.0, 64.0, 256.0, 1024.0],
                LineStyle::Dashed,
            )
            .group(
                "paper",
                vec![2.0, 4.0, 8.0, 16.0, f64::NAN],
                LineStyle::Dotted,
            );

        Figure::new(2)
            .title("attnflow showcase")
            .panel(rates)
            .panel(phase)
            .panel(heat)
            .panel(bars)
    }

    fn write_demo(name: &str, svg: &str) {
        // ATTNFLOW_PLOT_DEMO=/tmp writes the test figures there for a look.
        if let Ok(dir) = std::env::var("ATTNFLOW_PLOT_DEMO") {
            std::fs::write(std::path::Path::new(&dir).join(name), svg).unwrap();
        }
    }

    #[test]
    fn showcase_figure_is_a_well_formed_svg_with_every_feature() {
        let svg = render_svg(&showcase()).unwrap();
        write_demo("attnflow_showcase.svg", &svg);
        let elements = check_well_formed(&svg);
        assert!(elements > 200, "only {elements} elements");
        assert!(svg.contains(r#"width="6.9in""#), "{}", &svg[..200]);
        let shown = texts(&svg);
        for text in [
            "attnflow showcase",
            "time t",
            "loss L(t)",
            "gradient flow",
            "theory 1/t",
            "min–max over seeds",
            "onset T",
            "tolerance",
            "10−4",
            "106",
            "key",
            "query",
            "measured",
            "d=64",
            "κ",
        ] {
            assert!(shown.iter().any(|t| t == text), "missing text {text:?}");
        }
        // Theory is dark and dashed, the claim dotted; in the curves and their legend samples.
        let dashed = r##"stroke="#1A1A1A" stroke-width="0.8" stroke-dasharray="3.2 1.6""##;
        assert!(svg.matches(dashed).count() >= 2);
        assert!(svg.matches(r#"stroke-dasharray="0 1.7""#).count() >= 3);
        // The gap at the NaN / zero loss splits the numerical curve in two.
        let numerics = r##"<polyline fill="none" stroke="#0072B2" stroke-width="1.2""##;
        assert_eq!(
            svg.matches(numerics).count(),
            2 + 1,
            "two pieces of curve and one legend sample"
        );
        // Theory is drawn after (on top of) the numerics.
        assert!(svg.find(numerics) < svg.find(dashed));
        // 48 heatmap cells, a gradient colorbar, hatched theory bars, arrows with heads.
        assert!(svg.matches("<rect").count() >= 48);
        assert_eq!(svg.matches("<linearGradient").count(), 1);
        assert!(svg.contains("fill=\"url(#hatch-D55E00)\""));
        assert!(svg.matches("<polygon").count() >= 40);
    }

    /// Every degenerate input we could think of, in one figure: nothing may panic.
    fn degenerate() -> Figure {
        let nan = f64::NAN;
        let empty = LinePanel::new("", "", "").series(Series::numerics("", vec![], vec![]));
        let all_nan = LinePanel::new("all NaN", "x", "y")
            .log_y()
            .series(Series::numerics("NaN", vec![1.0, 2.0, 3.0], vec![nan; 3]))
            .band(Band::new(
                "NaN band",
                vec![1.0, 2.0],
                vec![nan, nan],
                vec![nan, nan],
            ));
        let single = LinePanel::new("single point", "x", "y")
            .log_x()
            .log_y()
            .series(Series::numerics("one", vec![5.0], vec![5.0]))
            .series(Series::new(
                "one marker",
                vec![5.0],
                vec![7.0],
                LineStyle::SolidMarkers,
            ))
            .arrow(Arrow::new((5.0, 5.0), (5.0, 5.0)));
        let flat = LinePanel::new("zero range", "x", "y")
            .series(Series::numerics(
                "flat",
                vec![1.0, 1.0, 1.0],
                vec![0.0, 0.0, 0.0],
            ))
            .vline(RefLine::new(1.0, "x = 1, a long label near the right edge"))
            .hline(RefLine::new(0.0, "y = 0"));
        let huge = LinePanel::new("1e-300..1 on log axes", "t", "loss")
            .log_x()
            .log_y()
            .series(Series::numerics(
                "tiny",
                log_space(1e-300, 1.0, 50),
                log_space(1.0, 1e-300, 50),
            ))
            .series(Series::theory(
                "with zeros and infinities",
                vec![0.0, 1e-100, f64::INFINITY, 1e-10],
                vec![1.0, -1.0, 1.0, 1e-200],
            ));
        let extreme = LinePanel::new("±f64::MAX", "x", "y")
            .series(Series::numerics(
                "max",
                vec![-f64::MAX, f64::MAX],
                vec![f64::MAX, -f64::MAX],
            ))
            .series(Series::numerics(
                "subnormal",
                vec![0.0, 5e-324],
                vec![0.0, 5e-324],
            ));
        let clipped = LinePanel::new("explicit ranges clip", "x", "y")
            .x_range(0.0, 1.0)
            .y_range(0.0, 1.0)
            .series(Series::numerics(
                "leaves and returns",
                vec![-1.0, 0.5, 2.0, 0.5, 0.7],
                vec![0.5, 3.0, 0.5, 0.2, -4.0],
            ))
            .band(Band::new(
                "",
                vec![-1.0, 2.0],
                vec![-5.0, -5.0],
                vec![0.5, 5.0],
            ))
            .vline(RefLine::new(7.0, "outside"));
        let empty_heat = HeatmapPanel::new("empty heatmap", vec![], 0, 0);
        let zero_heat = HeatmapPanel::new("zeros and NaN", vec![0.0, 0.0, nan, 0.0], 2, 2);
        let tall_heat =
            HeatmapPanel::new("1 × 60", (0..60).map(|i| (i as f64).sin()).collect(), 1, 60);
        let empty_bars =
            BarPanel::new("no bars", "", "", vec![]).group("none", vec![], LineStyle::Solid);
        let odd_bars = BarPanel::new(
            "NaN, negative, lollipop",
            "",
            "",
            vec!["a".into(), "b".into(), "c".into()],
        )
        .group("numerics", vec![1.0, -2.0, nan], LineStyle::Solid)
        .group("claim", vec![0.5, 0.0, 3.0], LineStyle::Markers);
        let log_bars = BarPanel::new(
            "log bars, non-positive",
            "",
            "",
            vec!["a".into(), "b".into()],
        )
        .log_y()
        .group("g", vec![0.0, -1.0], LineStyle::Dashed);
        Figure::new(4)
            .panel(empty)
            .panel(all_nan)
            .panel(single)
            .panel(flat)
            .panel(huge)
            .panel(extreme)
            .panel(clipped)
            .panel(empty_heat)
            .panel(zero_heat)
            .panel(tall_heat)
            .panel(empty_bars)
            .panel(odd_bars)
            .panel(log_bars)
    }

    #[test]
    fn degenerate_data_renders_without_panicking() {
        let svg = render_svg(&degenerate()).unwrap();
        write_demo("attnflow_degenerate.svg", &svg);
        check_well_formed(&svg);
        for value in svg
            .split("=\"")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap_or(""))
        {
            assert!(
                !value.contains("NaN") && !value.contains("inf"),
                "non-finite attribute {value:?}"
            );
        }
        // A lone visible point of a line is drawn as a dot, not dropped.
        assert!(svg.contains("<circle"));
        // The curve that leaves the explicit range is cut into pieces inside it.
        assert!(svg.contains("leaves and returns"));
        let empty = render_svg(&Figure::new(3)).unwrap();
        check_well_formed(&empty);
        assert!(empty.contains(r#"width="3.3in" height="0in""#), "{empty}");
    }

    #[test]
    fn impossible_input_is_an_error() {
        let mismatched =
            LinePanel::new("", "", "").series(Series::numerics("s", vec![1.0, 2.0], vec![1.0]));
        let error = render_svg(&Figure::single(mismatched)).unwrap_err();
        assert!(
            matches!(
                error,
                PlotError::LengthMismatch {
                    expected: 2,
                    found: 1,
                    ..
                }
            ),
            "{error}"
        );
        let bad_range = LinePanel::new("", "", "").log_y().y_range(0.0, 1.0);
        assert!(matches!(
            render_svg(&Figure::single(bad_range)),
            Err(PlotError::InvalidRange { .. })
        ));
        let bad_heat = HeatmapPanel::new("", vec![1.0; 5], 2, 3);
        assert!(matches!(
            render_svg(&Figure::single(bad_heat)),
            Err(PlotError::LengthMismatch { .. })
        ));
        let bad_limit = HeatmapPanel::new("", vec![1.0; 4], 2, 2).limit(0.0);
        assert!(matches!(
            render_svg(&Figure::single(bad_limit)),
            Err(PlotError::InvalidLimit { .. })
        ));
        let bad_bars = BarPanel::new("", "", "", vec!["a".into()]).group(
            "g",
            vec![1.0, 2.0],
            LineStyle::Solid,
        );
        assert!(matches!(
            render_svg(&Figure::single(bad_bars)),
            Err(PlotError::LengthMismatch { .. })
        ));
        let flat = Figure::single(LinePanel::new("", "", "")).aspect(0.1);
        assert!(matches!(
            render_svg(&flat),
            Err(PlotError::InvalidAspect { .. })
        ));
    }

    #[test]
    fn heatmap_row_zero_is_on_top_and_colours_are_centred_at_zero() {
        let heat = HeatmapPanel::new("", vec![2.0, -2.0], 2, 1)
            .row_labels(vec!["first".into(), "second".into()]);
        let svg = render_svg(&Figure::single(heat)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let y_of = |pick: &dyn Fn(roxmltree::Node) -> bool| -> f64 {
            let node = doc.descendants().find(|n| pick(*n)).unwrap();
            node.attribute("y").unwrap().parse().unwrap()
        };
        // ±max |value| map to the ends of the colormap: dark red on top, dark blue below.
        let red_y = y_of(&|n| n.attribute("fill") == Some("#67001F"));
        let blue_y = y_of(&|n| n.attribute("fill") == Some("#053061"));
        assert!(red_y < blue_y, "row 0 at y {red_y}, row 1 at y {blue_y}");
        let label_y = |label: &str| y_of(&|n| n.has_tag_name("text") && n.text() == Some(label));
        assert!(label_y("first") < label_y("second"));
    }

    #[test]
    fn legend_position_none_hides_the_legend() {
        let panel = |legend| {
            LinePanel::new("", "", "")
                .series(Series::numerics(
                    "in the legend",
                    vec![0.0, 1.0],
                    vec![0.0, 1.0],
                ))
                .legend(legend)
        };
        let shown = render_svg(&Figure::single(panel(LegendPosition::LowerRight))).unwrap();
        let hidden = render_svg(&Figure::single(panel(LegendPosition::None))).unwrap();
        assert!(shown.contains("in the legend"));
        assert!(!hidden.contains("in the legend"));
        // Its box and sample go too.
        assert_eq!(
            hidden.matches("<rect").count() + 1,
            shown.matches("<rect").count()
        );
        assert_eq!(
            hidden.matches("<polyline").count() + 1,
            shown.matches("<polyline").count()
        );
    }
}

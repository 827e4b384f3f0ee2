//! The figure: panels on a grid under an optional super-title, written as one SVG document.

use plotters::style::text_anchor::{HPos, VPos};

use super::backend::{units, Anchor, Canvas, UNITS_PER_PX};
use super::bars::draw_bar_panel;
use super::heatmap::draw_heatmap_panel;
use super::lines::draw_line_panel;
use super::style::{SUPER_TITLE_PX, TEXT, WHITE};
use super::{Figure, Panel};

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
    #[error("panel size {width}×{height} px is below the minimum {min_width}×{min_height}")]
    PanelTooSmall {
        width: u32,
        height: u32,
        min_width: u32,
        min_height: u32,
    },
    #[error("SVG drawing failed: {0}")]
    Drawing(String),
}

impl<E: std::error::Error + Send + Sync> From<plotters::drawing::DrawingAreaErrorKind<E>>
    for PlotError
{
    fn from(error: plotters::drawing::DrawingAreaErrorKind<E>) -> Self {
        PlotError::Drawing(error.to_string())
    }
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

/// Smallest panel that still holds axes, labels and some plot.
const MIN_PANEL: (u32, u32) = (160, 120);
const SUPER_TITLE_HEIGHT: u32 = 34;

/// Draws `fig` as a standalone SVG document.
pub fn render_svg(fig: &Figure) -> Result<String, PlotError> {
    let (panel_w, panel_h) = fig.panel_size;
    if panel_w < MIN_PANEL.0 || panel_h < MIN_PANEL.1 {
        return Err(PlotError::PanelTooSmall {
            width: panel_w,
            height: panel_h,
            min_width: MIN_PANEL.0,
            min_height: MIN_PANEL.1,
        });
    }
    let columns = fig.columns.clamp(1, fig.panels.len().max(1));
    let rows = fig.panels.len().div_ceil(columns).max(1);
    let title_h = if fig.title.is_some() {
        SUPER_TITLE_HEIGHT
    } else {
        0
    };
    let size = (panel_w * columns as u32, panel_h * rows as u32 + title_h);

    let canvas = Canvas::new(size);
    canvas.fill_rect((0.0, 0.0), (size.0 as f64, size.1 as f64), WHITE)?;
    let (title_area, panels_area) = canvas.root.split_vertically(units(title_h as f64));
    if let Some(title) = &fig.title {
        let anchor = Anchor(HPos::Center, VPos::Center);
        let at = (size.0 as f64 / 2.0, title_h as f64 / 2.0 + 2.0);
        canvas.text(title, at, SUPER_TITLE_PX, anchor, TEXT, false)?;
    }
    for (panel, area) in fig
        .panels
        .iter()
        .zip(panels_area.split_evenly((rows, columns)))
    {
        match panel {
            Panel::Lines(p) => draw_line_panel(&canvas, &area, p)?,
            Panel::Heatmap(p) => draw_heatmap_panel(&canvas, &area, p)?,
            Panel::Bars(p) => draw_bar_panel(&canvas, &area, p)?,
        }
    }
    drop((title_area, panels_area));
    Ok(document(size, fig.title.as_deref(), &canvas.into_body()))
}

/// The SVG document around the drawn elements: `width`×`height` px showing the backend units
/// through the viewBox, round joins so that steep, dense curves don't spike, and the
/// super-title as the document title.
fn document((width, height): (u32, u32), title: Option<&str>, body: &str) -> String {
    let title = title
        .map(|t| format!("<title>{}</title>\n", escape(t)))
        .unwrap_or_default();
    let (view_w, view_h) = (width as f64 * UNITS_PER_PX, height as f64 * UNITS_PER_PX);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {view_w} {view_h}\">\n{title}<g stroke-linejoin=\"round\">\n{body}</g>\n</svg>\n"
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::{
        Arrow, Band, BarPanel, HeatmapPanel, LegendPosition, LinePanel, LineStyle, RefLine, Series,
    };

    /// Checks that `svg` is one balanced `<svg>` element: every tag closed in order, every
    /// attribute value quoted, no stray `<` or `&` in text. Returns the number of elements.
    fn check_well_formed(svg: &str) -> usize {
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        let mut open: Vec<&str> = Vec::new();
        let mut elements = 0;
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            assert!(!text.contains('>'), "stray '>' in text {text:?}");
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..text.len().min(i + 6)];
                assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                        .iter()
                        .any(|e| entity.starts_with(e)),
                    "bare & in {text:?}"
                );
            }
            let end = start + rest[start..].find('>').expect("unterminated tag");
            let tag = &rest[start + 1..end];
            assert_eq!(
                tag.matches('"').count() % 2,
                0,
                "unbalanced quotes in <{tag}>"
            );
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop(), Some(name.trim()), "mismatched </{name}>");
            } else {
                elements += 1;
                let name = tag
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .trim_end_matches('/');
                assert!(
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
                    "bad tag <{tag}>"
                );
                if !tag.ends_with('/') {
                    assert!(
                        !open.is_empty() || elements == 1,
                        "second root element <{tag}>"
                    );
                    open.push(name);
                }
            }
            rest = &rest[end + 1..];
        }
        assert!(open.is_empty(), "unclosed {open:?}");
        assert!(rest.trim().is_empty());
        elements
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
        assert!(
            svg.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="960" height="754""#)
        );
        for text in [
            "attnflow showcase",
            "time t",
            "loss L(t)",
            "gradient flow",
            "theory 1/t",
            "min–max over seeds",
            "onset T",
            "tolerance",
            "10⁻⁴",
            "10⁶",
            "key",
            "query",
            "measured",
            "d=64",
            "κ",
        ] {
            assert!(
                svg.contains(&format!(">\n{text}\n</text>")),
                "missing text {text:?}"
            );
        }
        // Theory is dashed, the claim dotted; both in the curves and in their legend samples.
        assert!(
            svg.matches(r##"stroke-dasharray="70,40" fill="none" opacity="1" stroke="#D55E00""##)
                .count()
                >= 2
        );
        assert!(svg.matches(r#"stroke-dasharray="1,40""#).count() >= 3);
        // The gap at the NaN / zero loss splits the numerical curve in two.
        let numerics = svg.lines().filter(|l| {
            l.starts_with(
                r##"<polyline fill="none" opacity="1" stroke="#0072B2" stroke-width="18""##,
            )
        });
        assert_eq!(
            numerics.count(),
            2 + 1,
            "two pieces of curve and one legend sample"
        );
        // 48 heatmap cells + 64 colorbar steps, and arrows with heads.
        assert!(svg.matches("<rect").count() >= 48 + 64);
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
        assert!(empty.contains(r#"width="480" height="360""#));
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
        let tiny = Figure::single(LinePanel::new("", "", "")).panel_size(50, 50);
        assert!(matches!(
            render_svg(&tiny),
            Err(PlotError::PanelTooSmall { .. })
        ));
    }

    /// The value of attribute `name` on the first element of `svg` whose line contains `marker`.
    fn attribute(svg: &str, marker: &str, name: &str) -> f64 {
        let line = svg
            .lines()
            .find(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("no {marker}"));
        let value = line
            .split(&format!(" {name}=\""))
            .nth(1)
            .and_then(|v| v.split('"').next());
        value
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    }

    #[test]
    fn heatmap_row_zero_is_on_top_and_colours_are_centred_at_zero() {
        let heat = HeatmapPanel::new("", vec![2.0, -2.0], 2, 1)
            .row_labels(vec!["first".into(), "second".into()]);
        let svg = render_svg(&Figure::single(heat)).unwrap();
        // ±max |value| map to the ends of the colormap: dark red on top, dark blue below.
        let red_y = attribute(&svg, r##"fill="#67001F""##, "y");
        let blue_y = attribute(&svg, r##"fill="#053061""##, "y");
        assert!(red_y < blue_y, "row 0 at y {red_y}, row 1 at y {blue_y}");
        let label_y = |label: &str| {
            let line = svg.lines().position(|l| l == label).unwrap();
            attribute(svg.lines().nth(line - 1).unwrap(), "<text", "y")
        };
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
    }
}

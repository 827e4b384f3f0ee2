//! Paper-style SVG figures. The scenario runners describe a [`Figure`] as data (curves, heatmaps,
//! bars, markers); this module draws it in one consistent style and computes nothing about the
//! science.
//!
//! The conventions every figure follows:
//! - **Print size.** A figure is one column (3.3 in) or the full text width (6.9 in) wide; the
//!   SVG says so (`width="6.9in"`, viewBox in points) and all sizes are points at that size:
//!   tick labels and legends 7 pt, axis labels and panel titles 8 pt. Panels sit on a grid of at
//!   most three columns (two in one column).
//! - **Measured text.** Text is measured with the font's advance widths ([`font`]); titles and
//!   labels shrink a little, then wrap, to fit. Nothing is clipped.
//! - **Math text.** Labels may write `x_i`, `W_{mm}`, `e^{−2αt}`: real sub- and superscripts in
//!   the SVG (see `text.rs`); Greek, hats and primes are Unicode.
//! - **One overlay style, from the curve's role.** Numerics ([`Series::numerics`], solid and
//!   marker styles) are coloured, solid and drawn first; theory ([`Series::theory`], dashed) is
//!   dark, thin, dashed and drawn on top, so that agreement shows as dashes along the coloured
//!   curve; bounds, thresholds and claims (dotted, [`RefLine`]) are grey and dotted.
//! - **Legends** have an opaque box and go where they hide the fewest data points: inside the
//!   plot if some corner or edge is nearly free, else below the axes.
//! - Dense curves are simplified to within a tenth of a line width (extremes kept); theory bars
//!   are hatched with an SVG `<pattern>`.
//!
//! `tests/figure_lint.rs` holds every committed figure to these rules.
//!
//! A one-panel figure: a measured curve with the theory dashed over it.
//!
//! ```
//! use attnflow::plot::{render_svg, Figure, LinePanel, Series};
//!
//! let t: Vec<f64> = (0..50).map(|k| k as f64 / 10.0).collect();
//! let theory: Vec<f64> = t.iter().map(|t| (-t).exp()).collect();
//! let measured: Vec<f64> = theory.iter().map(|y| y * 1.001).collect();
//! let panel = LinePanel::new("Exponential decay", "t", "ℓ(t)")
//!     .log_y()
//!     .series(Series::numerics("flow", t.clone(), measured))
//!     .series(Series::theory("e^{−t}", t, theory));
//! let svg = render_svg(&Figure::single(panel)).unwrap();
//! assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
//! // std::fs::write(std::env::temp_dir().join("decay.svg"), svg).unwrap();
//! ```

mod axes;
mod bars;
mod clip;
pub mod font;
mod frame;
mod geometry;
mod heatmap;
mod legend;
mod lines;
mod render;
mod style;
mod svg;
mod text;

pub use axes::power_of_ten;
pub use render::{render_svg, PlotError};

/// How wide a figure prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigureWidth {
    /// One column of a two-column paper, 3.3 in (at most two panel columns).
    Column,
    /// The full text width, 6.9 in (at most three panel columns).
    Full,
}

/// A whole figure: panels laid out on a grid, row-major.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Optional super-title drawn above all panels.
    pub title: Option<String>,
    /// Number of panel columns (at most 3 at full width, 2 at column width); rows follow from
    /// `panels.len()`.
    pub columns: usize,
    pub panels: Vec<Panel>,
    /// `None`: one column for a single panel, the full width for more.
    pub width: Option<FigureWidth>,
    /// Height of a panel over its width (with a one-line title and axis labels; longer ones add
    /// height). Default 0.78.
    pub aspect: f64,
}

impl Figure {
    pub fn new(columns: usize) -> Self {
        Figure {
            title: None,
            columns: columns.max(1),
            panels: Vec::new(),
            width: None,
            aspect: 0.78,
        }
    }
    pub fn single(panel: impl Into<Panel>) -> Self {
        let mut f = Figure::new(1);
        f.panels.push(panel.into());
        f
    }
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
    pub fn panel(mut self, panel: impl Into<Panel>) -> Self {
        self.panels.push(panel.into());
        self
    }
    pub fn width(mut self, width: FigureWidth) -> Self {
        self.width = Some(width);
        self
    }
    /// Panel height over width.
    pub fn aspect(mut self, aspect: f64) -> Self {
        self.aspect = aspect;
        self
    }
}

#[derive(Debug, Clone)]
pub enum Panel {
    Lines(LinePanel),
    Heatmap(HeatmapPanel),
    Bars(BarPanel),
}

impl From<LinePanel> for Panel {
    fn from(p: LinePanel) -> Self {
        Panel::Lines(p)
    }
}
impl From<HeatmapPanel> for Panel {
    fn from(p: HeatmapPanel) -> Self {
        Panel::Heatmap(p)
    }
}
impl From<BarPanel> for Panel {
    fn from(p: BarPanel) -> Self {
        Panel::Bars(p)
    }
}

/// What a curve is, and so how it is drawn (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineStyle {
    /// Numerical result: coloured solid line.
    Solid,
    /// Theory / closed form: dark, thin, dashed, on top (bars: hatched).
    Dashed,
    /// Bound, threshold, reference or a paper's claim: grey (or the colour asked for), dotted.
    Dotted,
    /// Numerical result as filled circles only, no line.
    Markers,
    /// Numerical result: solid line with circle markers at the data points.
    SolidMarkers,
    /// A second numerical curve of the same quantity to compare with (an unperturbed run, the
    /// other model): its colour, light and wide, beneath the solid curves.
    Faint,
}

/// One curve of a line panel.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry; an empty label leaves the curve out of the legend.
    pub label: String,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub style: LineStyle,
    /// Index into the shared palette; `None` picks the next colour of the panel.
    pub color: Option<usize>,
}

impl Series {
    pub fn new(label: impl Into<String>, x: Vec<f64>, y: Vec<f64>, style: LineStyle) -> Self {
        Series {
            label: label.into(),
            x,
            y,
            style,
            color: None,
        }
    }
    /// A numerical curve (coloured, solid).
    pub fn numerics(label: impl Into<String>, x: Vec<f64>, y: Vec<f64>) -> Self {
        Self::new(label, x, y, LineStyle::Solid)
    }
    /// A theory curve (dark, thin, dashed, drawn on top; an explicit colour is ignored).
    pub fn theory(label: impl Into<String>, x: Vec<f64>, y: Vec<f64>) -> Self {
        Self::new(label, x, y, LineStyle::Dashed)
    }
    pub fn color(mut self, c: usize) -> Self {
        self.color = Some(c);
        self
    }
}

/// A shaded band between `lower` and `upper` (e.g. min–max over seeds), drawn under the curves.
#[derive(Debug, Clone)]
pub struct Band {
    pub label: String,
    pub x: Vec<f64>,
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub color: Option<usize>,
}

impl Band {
    pub fn new(label: impl Into<String>, x: Vec<f64>, lower: Vec<f64>, upper: Vec<f64>) -> Self {
        Band {
            label: label.into(),
            x,
            lower,
            upper,
            color: None,
        }
    }
    pub fn color(mut self, c: usize) -> Self {
        self.color = Some(c);
        self
    }
}

/// A vertical or horizontal reference line with a short label (e.g. the onset time T, a bound):
/// grey and dotted unless told otherwise (`Dashed`: a theory value, drawn dark).
#[derive(Debug, Clone)]
pub struct RefLine {
    pub at: f64,
    pub label: String,
    pub style: LineStyle,
    pub color: Option<usize>,
}

impl RefLine {
    pub fn new(at: f64, label: impl Into<String>) -> Self {
        RefLine {
            at,
            label: label.into(),
            style: LineStyle::Dotted,
            color: None,
        }
    }
    pub fn style(mut self, s: LineStyle) -> Self {
        self.style = s;
        self
    }
    pub fn color(mut self, c: usize) -> Self {
        self.color = Some(c);
        self
    }
}

/// An arrow from (x0, y0) to (x1, y1) (phase portraits: direction of the flow).
#[derive(Debug, Clone, Copy)]
pub struct Arrow {
    pub from: (f64, f64),
    pub to: (f64, f64),
}

impl Arrow {
    pub fn new(from: (f64, f64), to: (f64, f64)) -> Self {
        Arrow { from, to }
    }
}

/// Where a panel's legend goes. `Best` (the default) picks the inside corner or edge that hides
/// the fewest data points, or below the axes; a corner is a preference that wins ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegendPosition {
    Best,
    UpperRight,
    UpperLeft,
    LowerRight,
    LowerLeft,
    /// No legend.
    None,
}

/// Curves on shared axes, with optional log scales, bands, reference lines and arrows.
#[derive(Debug, Clone)]
pub struct LinePanel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_log: bool,
    pub y_log: bool,
    /// Axis ranges; `None` fits the data (on log axes only positive finite values count).
    pub x_range: Option<(f64, f64)>,
    pub y_range: Option<(f64, f64)>,
    pub series: Vec<Series>,
    pub bands: Vec<Band>,
    pub vlines: Vec<RefLine>,
    pub hlines: Vec<RefLine>,
    pub arrows: Vec<Arrow>,
    pub legend: LegendPosition,
}

impl LinePanel {
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        LinePanel {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log: false,
            y_log: false,
            x_range: None,
            y_range: None,
            series: Vec::new(),
            bands: Vec::new(),
            vlines: Vec::new(),
            hlines: Vec::new(),
            arrows: Vec::new(),
            legend: LegendPosition::Best,
        }
    }
    pub fn log_x(mut self) -> Self {
        self.x_log = true;
        self
    }
    pub fn log_y(mut self) -> Self {
        self.y_log = true;
        self
    }
    pub fn x_range(mut self, lo: f64, hi: f64) -> Self {
        self.x_range = Some((lo, hi));
        self
    }
    pub fn y_range(mut self, lo: f64, hi: f64) -> Self {
        self.y_range = Some((lo, hi));
        self
    }
    pub fn series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }
    pub fn band(mut self, b: Band) -> Self {
        self.bands.push(b);
        self
    }
    pub fn vline(mut self, l: RefLine) -> Self {
        self.vlines.push(l);
        self
    }
    pub fn hline(mut self, l: RefLine) -> Self {
        self.hlines.push(l);
        self
    }
    pub fn arrow(mut self, a: Arrow) -> Self {
        self.arrows.push(a);
        self
    }
    pub fn legend(mut self, p: LegendPosition) -> Self {
        self.legend = p;
        self
    }
}

/// A matrix drawn as coloured cells with a diverging colormap centred at 0 and a colorbar.
#[derive(Debug, Clone)]
pub struct HeatmapPanel {
    pub title: String,
    /// Row-major values, `rows × cols`; row 0 is drawn at the top.
    pub values: Vec<f64>,
    pub rows: usize,
    pub cols: usize,
    /// Tick labels (may be empty: then indices are shown).
    pub row_labels: Vec<String>,
    pub col_labels: Vec<String>,
    pub x_label: String,
    pub y_label: String,
    /// Symmetric colour limit; `None` uses max |value|.
    pub limit: Option<f64>,
}

impl HeatmapPanel {
    /// A `rows × cols` heatmap of row-major `values`, labelled by indices until told otherwise.
    pub fn new(title: impl Into<String>, values: Vec<f64>, rows: usize, cols: usize) -> Self {
        HeatmapPanel {
            title: title.into(),
            values,
            rows,
            cols,
            row_labels: Vec::new(),
            col_labels: Vec::new(),
            x_label: String::new(),
            y_label: String::new(),
            limit: None,
        }
    }
    pub fn row_labels(mut self, labels: Vec<String>) -> Self {
        self.row_labels = labels;
        self
    }
    pub fn col_labels(mut self, labels: Vec<String>) -> Self {
        self.col_labels = labels;
        self
    }
    pub fn axis_labels(mut self, x_label: impl Into<String>, y_label: impl Into<String>) -> Self {
        self.x_label = x_label.into();
        self.y_label = y_label.into();
        self
    }
    pub fn limit(mut self, limit: f64) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// Grouped bars: one group per category, one bar per named group member.
#[derive(Debug, Clone)]
pub struct BarPanel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// (legend label, one value per category, style: `Solid` = filled numerics,
    /// `Dashed` = outlined theory)
    pub groups: Vec<(String, Vec<f64>, LineStyle)>,
    pub y_log: bool,
}

impl BarPanel {
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        categories: Vec<String>,
    ) -> Self {
        BarPanel {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            categories,
            groups: Vec::new(),
            y_log: false,
        }
    }
    /// Adds a group: one value per category, `Solid` for numerics, `Dashed` for theory.
    pub fn group(mut self, label: impl Into<String>, values: Vec<f64>, style: LineStyle) -> Self {
        self.groups.push((label.into(), values, style));
        self
    }
    pub fn log_y(mut self) -> Self {
        self.y_log = true;
        self
    }
}

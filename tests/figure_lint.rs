//! Figure lint: what makes a figure fail on paper, checked on every committed SVG under
//! `figures/` (and on a figure drawn here, so that the layer itself is held to it).
//!
//! Rules (each violation names its file and the offending text or box):
//! - `physical-size`: the document has no physical width (`width="…in"`), so it has no print size.
//! - `font-size`: a text prints below 7 pt (the base size of a `<text>`; sub- and superscripts
//!   are a fixed fraction of it, as in typeset mathematics).
//! - `outside-canvas`: a text's box leaves the viewBox (it would be clipped).
//! - `outside-panel`: a text's box leaves the panel it belongs to.
//! - `overlap`: two text boxes overlap.
//! - `legend-over-data`: a legend box covers more than 3 % of its panel's data points (curves
//!   sampled along their length, markers, bars).
//! - `raw-markup`: text that shows markup (`_`, `^`, braces, backslashes) or project jargon
//!   (spec sections, file names) instead of mathematics.
//! - `file-size`: an SVG over 400 KB.
//!
//! Text is measured with the layer's own font metrics (DejaVu Sans advance widths); a text box
//! spans `ASCENT_EM` above the baseline to `DESCENT_EM` below it. Figures written before the
//! layer tagged its elements (`data-role`) are read with the structure plotters gave them, so
//! that the lint can say how they fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use attnflow::plot::font::{text_width, ASCENT_EM, DESCENT_EM};

const MIN_PRINT_PT: f64 = 7.0;
const MAX_LEGEND_COVER: f64 = 0.03;
const MAX_BYTES: u64 = 400 * 1024;
/// Boxes may touch (or overlap by rounding) this much, in printed points.
const TOLERANCE_PT: f64 = 0.3;
/// Printed widths assumed for figures without a physical size: one column (3.3 in) for a
/// single panel, the full text width (6.9 in) for anything wider than 600 px.
const COLUMN_IN: f64 = 3.3;
const FULL_IN: f64 = 6.9;
/// Data curves are sampled every this many points of print.
const SAMPLE_PT: f64 = 1.0;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Rect {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Rect {
    fn union(self, o: Rect) -> Rect {
        Rect {
            x0: self.x0.min(o.x0),
            y0: self.y0.min(o.y0),
            x1: self.x1.max(o.x1),
            y1: self.y1.max(o.y1),
        }
    }
    fn contains_rect(&self, o: &Rect, tol: f64) -> bool {
        o.x0 >= self.x0 - tol
            && o.y0 >= self.y0 - tol
            && o.x1 <= self.x1 + tol
            && o.y1 <= self.y1 + tol
    }
    fn contains(&self, (x, y): (f64, f64)) -> bool {
        self.x0 <= x && x <= self.x1 && self.y0 <= y && y <= self.y1
    }
    fn overlaps(&self, o: &Rect, tol: f64) -> bool {
        let w = self.x1.min(o.x1) - self.x0.max(o.x0);
        let h = self.y1.min(o.y1) - self.y0.max(o.y0);
        w > tol && h > tol
    }
}

#[derive(Debug, Clone)]
struct Violation {
    rule: &'static str,
    file: String,
    what: String,
}

/// One text element: its box in user units, base font size, visible content, text nodes (for the
/// markup rule) and the panel it sits in.
struct TextItem {
    rect: Rect,
    size: f64,
    content: String,
    nodes: Vec<String>,
    panel: Option<Rect>,
}

fn number(s: &str) -> Option<f64> {
    let s = s.trim().trim_end_matches("px").trim_end_matches("pt");
    s.parse().ok()
}

fn attr_number(node: roxmltree::Node, name: &str) -> Option<f64> {
    node.attribute(name).and_then(number)
}

/// A length relative to a font size: "3", "0.5em", "0.5ex" (ex taken as half an em).
fn relative_length(value: &str, size: f64) -> f64 {
    let v = value.trim();
    if let Some(em) = v.strip_suffix("em") {
        em.parse::<f64>().unwrap_or(0.0) * size
    } else if let Some(ex) = v.strip_suffix("ex") {
        ex.parse::<f64>().unwrap_or(0.0) * size * 0.5
    } else {
        number(v).unwrap_or(0.0)
    }
}

/// `rotate(a)`, `rotate(a, cx, cy)` or `rotate(a cx cy)`.
fn rotation(transform: &str) -> Option<(f64, f64, f64)> {
    let inner = transform
        .trim()
        .strip_prefix("rotate(")?
        .strip_suffix(')')?;
    let parts: Vec<f64> = inner
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.parse().ok())
        .collect();
    match parts[..] {
        [a] => Some((a, 0.0, 0.0)),
        [a, cx, cy] => Some((a, cx, cy)),
        _ => None,
    }
}

fn rotate_rect(r: Rect, (angle, cx, cy): (f64, f64, f64)) -> Rect {
    let (s, c) = angle.to_radians().sin_cos();
    let turn = |(x, y): (f64, f64)| {
        let (dx, dy) = (x - cx, y - cy);
        (cx + c * dx - s * dy, cy + s * dx + c * dy)
    };
    let corners = [(r.x0, r.y0), (r.x1, r.y0), (r.x0, r.y1), (r.x1, r.y1)].map(turn);
    corners.iter().fold(
        Rect {
            x0: f64::INFINITY,
            y0: f64::INFINITY,
            x1: f64::NEG_INFINITY,
            y1: f64::NEG_INFINITY,
        },
        |b, &(x, y)| Rect {
            x0: b.x0.min(x),
            y0: b.y0.min(y),
            x1: b.x1.max(x),
            y1: b.y1.max(y),
        },
    )
}

fn panel_of(node: roxmltree::Node) -> Option<Rect> {
    node.ancestors()
        .find(|a| a.attribute("data-role") == Some("panel"))
        .and_then(|g| box_attribute(g, "data-box"))
}

/// "x y w h" in an attribute.
fn box_attribute(node: roxmltree::Node, name: &str) -> Option<Rect> {
    let v: Vec<f64> = node
        .attribute(name)?
        .split_whitespace()
        .filter_map(number)
        .collect();
    match v[..] {
        [x, y, w, h] => Some(Rect {
            x0: x,
            y0: y,
            x1: x + w,
            y1: y + h,
        }),
        _ => None,
    }
}

/// The box of a `<text>` element: runs of text and `<tspan>`s laid out left to right, each at its
/// own size and baseline shift, then anchored and rotated.
fn text_item(node: roxmltree::Node) -> Option<TextItem> {
    let size = attr_number(node, "font-size")?;
    let x = attr_number(node, "x").unwrap_or(0.0);
    let y = attr_number(node, "y").unwrap_or(0.0);
    let mut baseline = y + node
        .attribute("dy")
        .map_or(0.0, |d| relative_length(d, size));
    let mut advance = 0.0;
    let mut bounds: Option<Rect> = None;
    let mut content = String::new();
    let mut nodes = Vec::new();
    let mut run = |text: &str, run_size: f64, baseline: f64, advance: &mut f64| {
        if text.is_empty() {
            return;
        }
        let w = text_width(text, run_size);
        let r = Rect {
            x0: *advance,
            x1: *advance + w,
            y0: baseline - ASCENT_EM * run_size,
            y1: baseline + DESCENT_EM * run_size,
        };
        bounds = Some(bounds.map_or(r, |b| b.union(r)));
        *advance += w;
        content.push_str(text);
        nodes.push(text.to_string());
    };
    for child in node.children() {
        if child.is_text() {
            run(
                child.text().unwrap_or("").trim_matches('\n'),
                size,
                baseline,
                &mut advance,
            );
        } else if child.has_tag_name("tspan") {
            let run_size = attr_number(child, "font-size").unwrap_or(size);
            baseline += child
                .attribute("dy")
                .map_or(0.0, |d| relative_length(d, size));
            let text: String = child.text().unwrap_or("").to_string();
            run(&text, run_size, baseline, &mut advance);
        }
    }
    let mut rect = bounds?;
    let shift = match node.attribute("text-anchor") {
        Some("middle") => x - advance / 2.0,
        Some("end") => x - advance,
        _ => x,
    };
    rect.x0 += shift;
    rect.x1 += shift;
    if let Some(r) = node.attribute("transform").and_then(rotation) {
        rect = rotate_rect(rect, r);
    }
    Some(TextItem {
        rect,
        size,
        content,
        nodes,
        panel: panel_of(node),
    })
}

fn points_attribute(node: roxmltree::Node) -> Vec<(f64, f64)> {
    let numbers: Vec<f64> = node
        .attribute("points")
        .unwrap_or("")
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.parse().ok())
        .collect();
    numbers.chunks_exact(2).map(|c| (c[0], c[1])).collect()
}

/// Points along a polyline, one every `step` user units (and every vertex).
fn sample_polyline(points: &[(f64, f64)], step: f64, out: &mut Vec<(f64, f64)>) {
    if let Some(&first) = points.first() {
        out.push(first);
    }
    for pair in points.windows(2) {
        let ((ax, ay), (bx, by)) = (pair[0], pair[1]);
        let n = ((bx - ax).hypot(by - ay) / step).ceil().max(1.0) as usize;
        out.extend((1..=n).map(|k| {
            let t = k as f64 / n as f64;
            (ax + t * (bx - ax), ay + t * (by - ay))
        }));
    }
}

fn sample_rect(r: Rect, step: f64, out: &mut Vec<(f64, f64)>) {
    let nx = ((r.x1 - r.x0) / step).ceil().max(1.0) as usize;
    let ny = ((r.y1 - r.y0) / step).ceil().max(1.0) as usize;
    for i in 0..=nx {
        for j in 0..=ny {
            out.push((
                r.x0 + (r.x1 - r.x0) * i as f64 / nx as f64,
                r.y0 + (r.y1 - r.y0) * j as f64 / ny as f64,
            ));
        }
    }
}

fn rect_attributes(node: roxmltree::Node) -> Option<Rect> {
    let (x, y) = (attr_number(node, "x")?, attr_number(node, "y")?);
    let (w, h) = (attr_number(node, "width")?, attr_number(node, "height")?);
    Some(Rect {
        x0: x,
        y0: y,
        x1: x + w,
        y1: y + h,
    })
}

/// The sampled data points of one drawn element.
fn data_samples(node: roxmltree::Node, step: f64, out: &mut Vec<(f64, f64)>) {
    match node.tag_name().name() {
        "polyline" => sample_polyline(&points_attribute(node), step, out),
        "circle" => {
            if let (Some(cx), Some(cy)) = (attr_number(node, "cx"), attr_number(node, "cy")) {
                out.push((cx, cy));
            }
        }
        "rect" => {
            if let Some(r) = rect_attributes(node) {
                sample_rect(r, step, out);
            }
        }
        _ => {}
    }
}

/// Legend boxes with their panel's data points (tagged figures).
fn tagged_legends(doc: &roxmltree::Document, step: f64) -> Vec<(Rect, Vec<(f64, f64)>)> {
    let mut legends = Vec::new();
    for legend in doc
        .descendants()
        .filter(|n| n.attribute("data-role") == Some("legend-box"))
    {
        let Some(rect) = rect_attributes(legend) else {
            continue;
        };
        let Some(panel) = legend
            .ancestors()
            .find(|a| a.attribute("data-role") == Some("panel"))
        else {
            continue;
        };
        let mut samples = Vec::new();
        for data in panel
            .descendants()
            .filter(|n| n.attribute("data-role") == Some("data"))
        {
            for element in data.descendants().filter(|n| n.is_element()) {
                data_samples(element, step, &mut samples);
            }
        }
        legends.push((rect, samples));
    }
    legends
}

fn is_grey_or_black(colour: &str) -> bool {
    let hex = colour.trim_start_matches('#');
    hex.len() == 6 && hex[0..2] == hex[2..4] && hex[2..4] == hex[4..6]
}

/// Legend boxes of figures from before the tagged layer: translucent white rectangles, in the
/// smallest black plot frame around them; data is every coloured curve and marker in that frame.
fn legacy_legends(doc: &roxmltree::Document, step: f64) -> Vec<(Rect, Vec<(f64, f64)>)> {
    let frames: Vec<Rect> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some("#000000"))
        .filter_map(|n| {
            let p = points_attribute(n);
            (p.len() == 5 && p[0] == p[4]).then(|| {
                p.iter().fold(
                    Rect {
                        x0: f64::INFINITY,
                        y0: f64::INFINITY,
                        x1: f64::NEG_INFINITY,
                        y1: f64::NEG_INFINITY,
                    },
                    |b, &(x, y)| Rect {
                        x0: b.x0.min(x),
                        y0: b.y0.min(y),
                        x1: b.x1.max(x),
                        y1: b.y1.max(y),
                    },
                )
            })
        })
        .collect();
    let mut data = Vec::new();
    for n in doc.descendants().filter(|n| n.is_element()) {
        let colour = match n.tag_name().name() {
            "polyline" => n.attribute("stroke"),
            "circle" => n.attribute("fill"),
            _ => None,
        };
        if colour.is_some_and(|c| !is_grey_or_black(c)) {
            data_samples(n, step, &mut data);
        }
    }
    doc.descendants()
        .filter(|n| {
            n.has_tag_name("rect")
                && n.attribute("fill") == Some("#FFFFFF")
                && attr_number(*n, "opacity").is_some_and(|o| o < 1.0)
        })
        .filter_map(rect_attributes)
        .filter_map(|legend| {
            let frame = frames
                .iter()
                .filter(|f| f.contains_rect(&legend, 1.0))
                .min_by(|a, b| {
                    let area = |r: &Rect| (r.x1 - r.x0) * (r.y1 - r.y0);
                    area(a).total_cmp(&area(b))
                })?;
            let inside = data
                .iter()
                .copied()
                .filter(|&p| frame.contains(p))
                .collect();
            Some((legend, inside))
        })
        .collect()
}

fn markup_problem(node_text: &str) -> Option<&'static str> {
    const MARKUP: [(&str, &str); 5] = [
        ("_", "an underscore"),
        ("^", "a caret"),
        ("{", "a brace"),
        ("}", "a brace"),
        ("\\", "a backslash"),
    ];
    const JARGON: [(&str, &str); 6] = [
        ("§", "a spec section"),
        ("spec ", "a spec reference"),
        ("(spec)", "a spec reference"),
        (".csv", "a file name"),
        (".json", "a file name"),
        (".toml", "a file name"),
    ];
    MARKUP
        .iter()
        .chain(JARGON.iter())
        .find(|(pattern, _)| node_text.contains(pattern))
        .map(|&(_, what)| what)
}

/// All violations of one SVG document (`bytes` long, named `file`).
fn lint_svg(file: &str, svg: &str, bytes: u64) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut report = |rule: &'static str, what: String| {
        out.push(Violation {
            rule,
            file: file.to_string(),
            what,
        })
    };
    if bytes > MAX_BYTES {
        report("file-size", format!("{} KB", bytes / 1024));
    }
    let doc = match roxmltree::Document::parse(svg) {
        Ok(doc) => doc,
        Err(e) => {
            report("parse", e.to_string());
            return out;
        }
    };
    let root = doc.root_element();
    let view: Vec<f64> = root
        .attribute("viewBox")
        .unwrap_or("")
        .split_whitespace()
        .filter_map(number)
        .collect();
    let [vx, vy, vw, vh] = view[..] else {
        report("physical-size", "no viewBox".into());
        return out;
    };
    let canvas = Rect {
        x0: vx,
        y0: vy,
        x1: vx + vw,
        y1: vy + vh,
    };
    let width = root.attribute("width").unwrap_or("");
    let printed_in = match width.strip_suffix("in").and_then(|w| w.parse::<f64>().ok()) {
        Some(inches) => inches,
        None => {
            report("physical-size", format!("width=\"{width}\""));
            let px = number(width).unwrap_or(vw);
            if px > 600.0 {
                FULL_IN
            } else {
                COLUMN_IN
            }
        }
    };
    // Printed points per user unit.
    let scale = printed_in * 72.0 / vw;
    let tol = TOLERANCE_PT / scale;

    let texts: Vec<TextItem> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(text_item)
        .collect();
    for t in &texts {
        let printed = t.size * scale;
        if printed < MIN_PRINT_PT - 1e-9 {
            report("font-size", format!("{printed:.1} pt: {:?}", t.content));
        }
        if !canvas.contains_rect(&t.rect, tol) {
            report("outside-canvas", format!("{:?}", t.content));
        }
        if let Some(panel) = t.panel {
            if !panel.contains_rect(&t.rect, tol) {
                report("outside-panel", format!("{:?}", t.content));
            }
        }
        if let Some(what) = t.nodes.iter().find_map(|n| markup_problem(n)) {
            report("raw-markup", format!("{what} in {:?}", t.content));
        }
    }
    for (i, a) in texts.iter().enumerate() {
        for b in &texts[i + 1..] {
            if a.rect.overlaps(&b.rect, tol) {
                report("overlap", format!("{:?} and {:?}", a.content, b.content));
            }
        }
    }
    let step = SAMPLE_PT / scale;
    let tagged = root.attribute("data-figure").is_some();
    let legends = if tagged {
        tagged_legends(&doc, step)
    } else {
        legacy_legends(&doc, step)
    };
    for (legend, samples) in legends {
        if samples.is_empty() {
            continue;
        }
        let covered = samples.iter().filter(|&&p| legend.contains(p)).count();
        let share = covered as f64 / samples.len() as f64;
        if share > MAX_LEGEND_COVER {
            report(
                "legend-over-data",
                format!("legend covers {:.1} % of the data", 100.0 * share),
            );
        }
    }
    out
}

fn svg_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            svg_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "svg") {
            out.push(path);
        }
    }
}

/// A table of violation counts per rule, then up to `shown` violations of each rule.
fn summary(violations: &[Violation], files: usize, shown: usize) -> String {
    let mut by_rule: BTreeMap<&str, Vec<&Violation>> = BTreeMap::new();
    for v in violations {
        by_rule.entry(v.rule).or_default().push(v);
    }
    let mut s = format!("{} violations in {files} SVG files\n", violations.len());
    for (rule, list) in &by_rule {
        let mut in_files: Vec<&str> = list.iter().map(|v| v.file.as_str()).collect();
        in_files.dedup();
        s.push_str(&format!(
            "  {rule:<17} {:>6} in {:>3} files\n",
            list.len(),
            in_files.len()
        ));
    }
    for (rule, list) in &by_rule {
        for v in list.iter().take(shown) {
            s.push_str(&format!("{rule}: {}: {}\n", v.file, v.what));
        }
    }
    s
}

#[test]
fn committed_figures_pass_the_lint() {
    // ATTNFLOW_FIGURES=<dir> lints another folder of figures (e.g. a fresh `run --all`).
    let root = std::env::var_os("ATTNFLOW_FIGURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("figures"));
    let mut files = Vec::new();
    svg_files(&root, &mut files);
    assert!(!files.is_empty(), "no SVG under {}", root.display());
    let mut violations = Vec::new();
    for path in &files {
        let svg = std::fs::read_to_string(path).unwrap();
        let name = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        violations.extend(lint_svg(&name, &svg, svg.len() as u64));
    }
    let shown = std::env::var("ATTNFLOW_LINT_SHOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let text = summary(&violations, files.len(), shown);
    println!("{text}");
    assert!(violations.is_empty(), "{text}");
}

/// The lint catches each of its rules on a small hand-written document.
#[test]
fn the_lint_catches_what_it_names() {
    let svg = r##"<svg xmlns="http://www.w3.org/2000/svg" data-figure="" width="2in" height="1in" viewBox="0 0 144 72">
<g data-role="panel" data-box="0 0 100 72">
<text x="10" y="20" font-size="8">W_mm</text>
<text x="12" y="22" font-size="8">overlapping</text>
<text x="95" y="60" font-size="8">sticks out of its panel</text>
<text x="10" y="40" font-size="5">tiny</text>
<text x="10" y="50" font-size="7">see spec §2.5</text>
<g data-role="data"><polyline points="0,70 100,70"/></g>
<rect data-role="legend-box" x="0" y="65" width="100" height="7"/>
</g>
<text x="140" y="10" font-size="8" text-anchor="start">off the canvas</text>
</svg>"##;
    let violations = lint_svg("synthetic.svg", svg, 500 * 1024);
    let rules: Vec<&str> = violations.iter().map(|v| v.rule).collect();
    for rule in [
        "raw-markup",
        "overlap",
        "outside-panel",
        "font-size",
        "outside-canvas",
        "legend-over-data",
        "file-size",
    ] {
        assert!(rules.contains(&rule), "{rule} not caught: {violations:?}");
    }
    assert_eq!(rules.iter().filter(|&&r| r == "raw-markup").count(), 2);
}

/// A figure the layer draws with every feature passes the lint.
#[test]
fn a_drawn_figure_passes_the_lint() {
    use attnflow::plot::{
        Band, BarPanel, Figure, HeatmapPanel, LinePanel, LineStyle, RefLine, Series,
    };
    let t: Vec<f64> = (0..400)
        .map(|i| 10f64.powf(-2.0 + i as f64 / 50.0))
        .collect();
    let loss: Vec<f64> = t.iter().map(|t| 1.0 / (1.0 + t)).collect();
    let theory: Vec<f64> = t.iter().map(|t| 1.0 / t).collect();
    let lower: Vec<f64> = loss.iter().map(|l| 0.7 * l).collect();
    let upper: Vec<f64> = loss.iter().map(|l| 1.4 * l).collect();
    let lines = LinePanel::new(
        "Loss of the gradient flow against its closed form, with a title long enough to wrap",
        "time t",
        "loss ℓ(W_{t})",
    )
    .log_x()
    .log_y()
    .band(Band::new("min–max over seeds", t.clone(), lower, upper))
    .series(Series::numerics("gradient flow", t.clone(), loss))
    .series(Series::theory("e^{−2αt} ∝ 1/t", t, theory))
    .vline(RefLine::new(30.0, "onset T_{1}"))
    .hline(RefLine::new(1e-4, "tolerance"));
    let heat = HeatmapPanel::new("W_{KQ}", (0..12).map(|k| k as f64 - 6.0).collect(), 3, 4);
    let bars = BarPanel::new(
        "Condition number",
        "solver",
        "κ",
        vec![
            "interior point".into(),
            "projected gradient".into(),
            "Frank–Wolfe".into(),
        ],
    )
    .log_y()
    .group("measured", vec![3.0, 40.0, 900.0], LineStyle::Solid)
    .group("bound", vec![4.0, 50.0, 1000.0], LineStyle::Dashed);
    let figure = Figure::new(3)
        .title("Every kind of panel")
        .panel(lines)
        .panel(heat)
        .panel(bars);
    let svg = attnflow::plot::render_svg(&figure).unwrap();
    let violations = lint_svg("drawn.svg", &svg, svg.len() as u64);
    assert!(violations.is_empty(), "{}", summary(&violations, 1, 50));
}

//! The SVG writer: a document in printed points (the viewBox is in pt and the root element
//! carries the physical width in inches), elements tagged with `data-role` so that the figure
//! lint can tell titles, tick labels, legends and data apart.
//!
//! Numbers are written with at most two decimals (1/100 pt), so that the same figure gives the
//! same bytes on every platform.

use std::fmt::Write;

use super::geometry::{Area, Pt};
use super::style::{Ink, Stroke, DIVERGING};
use super::text::Label;

/// `v` rounded to 1/100, without trailing zeros (and never "-0").
pub(super) fn num(v: f64) -> String {
    let rounded = (v * 100.0).round() / 100.0;
    let mut s = format!("{:.2}", if rounded == 0.0 { 0.0 } else { rounded });
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    s
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Horizontal alignment of a text at its anchor point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Align {
    Start,
    Middle,
    End,
}

impl Align {
    fn attribute(self) -> &'static str {
        match self {
            Align::Start => "",
            Align::Middle => " text-anchor=\"middle\"",
            Align::End => " text-anchor=\"end\"",
        }
    }
}

/// What a text is, for the lint (`data-role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TextRole {
    SuperTitle,
    Title,
    AxisLabel,
    TickLabel,
    Legend,
    Annotation,
}

impl TextRole {
    fn name(self) -> &'static str {
        match self {
            TextRole::SuperTitle => "super-title",
            TextRole::Title => "title",
            TextRole::AxisLabel => "axis-label",
            TextRole::TickLabel => "tick-label",
            TextRole::Legend => "legend",
            TextRole::Annotation => "annotation",
        }
    }
}

/// Where a hatch pattern's id comes from: one pattern per colour.
fn hatch_id(ink: Ink) -> String {
    format!("hatch-{}", ink.hex().trim_start_matches('#'))
}

pub(super) const COLORMAP_ID: &str = "diverging";

#[derive(Default)]
pub(super) struct Svg {
    body: String,
    defs: Vec<(String, String)>,
}

impl Svg {
    pub fn open_group(&mut self, role: &str, area: Option<Area>) {
        match area {
            Some(a) => {
                let _ = writeln!(
                    self.body,
                    "<g data-role=\"{role}\" data-box=\"{} {} {} {}\">",
                    num(a.left),
                    num(a.top),
                    num(a.width()),
                    num(a.height())
                );
            }
            None => {
                let _ = writeln!(self.body, "<g data-role=\"{role}\">");
            }
        }
    }

    pub fn close_group(&mut self) {
        self.body.push_str("</g>\n");
    }

    fn stroke_attributes(stroke: &Stroke) -> String {
        let mut s = format!(
            "fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"",
            stroke.ink.hex(),
            num(stroke.width)
        );
        if stroke.ink.alpha < 1.0 {
            let _ = write!(s, " stroke-opacity=\"{}\"", num(stroke.ink.alpha));
        }
        if let Some(dash) = stroke.dash {
            let _ = write!(s, " stroke-dasharray=\"{dash}\"");
        }
        if stroke.round_caps {
            s.push_str(" stroke-linecap=\"round\"");
        }
        s
    }

    fn fill_attributes(ink: Ink) -> String {
        let mut s = format!("fill=\"{}\"", ink.hex());
        if ink.alpha < 1.0 {
            let _ = write!(s, " fill-opacity=\"{}\"", num(ink.alpha));
        }
        s
    }

    fn points(points: &[Pt]) -> String {
        let mut s = String::with_capacity(points.len() * 12);
        for (i, &(x, y)) in points.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            let _ = write!(s, "{},{}", num(x), num(y));
        }
        s
    }

    pub fn polyline(&mut self, points: &[Pt], stroke: &Stroke) {
        if points.len() < 2 {
            return;
        }
        let _ = writeln!(
            self.body,
            "<polyline {} points=\"{}\"/>",
            Self::stroke_attributes(stroke),
            Self::points(points)
        );
    }

    pub fn polygon(&mut self, points: &[Pt], fill: Ink) {
        if points.len() < 3 {
            return;
        }
        let _ = writeln!(
            self.body,
            "<polygon {} points=\"{}\"/>",
            Self::fill_attributes(fill),
            Self::points(points)
        );
    }

    fn rect_element(&mut self, a: Area, paint: &str, role: Option<&str>) {
        let role = role.map_or(String::new(), |r| format!(" data-role=\"{r}\""));
        let _ = writeln!(
            self.body,
            "<rect{role} x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" {paint}/>",
            num(a.left),
            num(a.top),
            num(a.width()),
            num(a.height())
        );
    }

    pub fn fill_rect(&mut self, a: Area, fill: Ink) {
        self.rect_element(a, &Self::fill_attributes(fill), None);
    }

    /// A filled and outlined rectangle; `role` tags it for the lint.
    pub fn boxed_rect(&mut self, a: Area, fill: Ink, stroke: &Stroke, role: Option<&str>) {
        let stroke = Self::stroke_attributes(stroke).replacen("fill=\"none\" ", "", 1);
        let paint = format!("{} {stroke}", Self::fill_attributes(fill));
        self.rect_element(a, &paint, role);
    }

    pub fn outline_rect(&mut self, a: Area, stroke: &Stroke) {
        self.rect_element(a, &Self::stroke_attributes(stroke), None);
    }

    /// A rectangle hatched in `ink` over a light tint of it, outlined.
    pub fn hatched_rect(&mut self, a: Area, ink: Ink, tint: Ink, stroke: &Stroke) {
        let id = hatch_id(ink);
        if !self.defs.iter().any(|(existing, _)| *existing == id) {
            let pattern = format!(
                "<pattern id=\"{id}\" patternUnits=\"userSpaceOnUse\" width=\"3\" height=\"3\" \
                 patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"3\" {}/>\
                 <line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"3\" stroke=\"{}\" stroke-width=\"0.9\"/>\
                 </pattern>",
                Self::fill_attributes(tint),
                ink.hex()
            );
            self.defs.push((id.clone(), pattern));
        }
        let stroke = Self::stroke_attributes(stroke).replacen("fill=\"none\" ", "", 1);
        self.rect_element(a, &format!("fill=\"url(#{id})\" {stroke}"), None);
    }

    /// A rectangle filled with the diverging colormap, −limit at the bottom to +limit at the top.
    pub fn colormap_rect(&mut self, a: Area) {
        if !self.defs.iter().any(|(id, _)| id == COLORMAP_ID) {
            let last = (DIVERGING.len() - 1) as f64;
            let stops: String = DIVERGING
                .iter()
                .enumerate()
                .map(|(i, &(r, g, b))| {
                    format!(
                        "<stop offset=\"{}\" stop-color=\"{}\"/>",
                        num(i as f64 / last),
                        Ink::rgb(r, g, b).hex()
                    )
                })
                .collect();
            let gradient = format!(
                "<linearGradient id=\"{COLORMAP_ID}\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">{stops}</linearGradient>"
            );
            self.defs.push((COLORMAP_ID.to_string(), gradient));
        }
        self.rect_element(a, &format!("fill=\"url(#{COLORMAP_ID})\""), None);
    }

    pub fn circle(&mut self, (x, y): Pt, radius: f64, fill: Ink) {
        let _ = writeln!(
            self.body,
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" {}/>",
            num(x),
            num(y),
            num(radius),
            Self::fill_attributes(fill)
        );
    }

    /// One line of text with its baseline at `at`; scripts become `<tspan>`s shifted with `dy`
    /// (relative, so the shifts undo themselves). `rotated` turns it to read bottom to top.
    pub fn text(
        &mut self,
        label: &Label,
        (x, y): Pt,
        size: f64,
        align: Align,
        role: TextRole,
        rotated: bool,
    ) {
        if label.is_empty() {
            return;
        }
        let transform = if rotated {
            format!(" transform=\"rotate(-90 {} {})\"", num(x), num(y))
        } else {
            String::new()
        };
        let _ = write!(
            self.body,
            "<text data-role=\"{}\" x=\"{}\" y=\"{}\" font-size=\"{}\"{}{transform} \
             xml:space=\"preserve\">",
            role.name(),
            num(x),
            num(y),
            num(size),
            align.attribute()
        );
        // The baseline of the text so far, in pt below the label's baseline (rounded as written,
        // so that the shifts add up to exactly zero).
        let mut written_drop = 0.0;
        for (i, run) in label.runs.iter().enumerate() {
            let drop = (-run.rise * size * 100.0).round() / 100.0;
            let mut escaped = escape(&run.text);
            // Renderers drop a space at the edge of a <tspan>. Chromium keeps a no-break space;
            // librsvg (rsvg-convert, a common route to PDF) drops that too unless the text is
            // xml:space="preserve", which the <text> element says.
            if i > 0 && escaped.starts_with(' ') {
                escaped.replace_range(..1, "\u{A0}");
            }
            if i + 1 < label.runs.len() && escaped.ends_with(' ') {
                escaped.replace_range(escaped.len() - 1.., "\u{A0}");
            }
            if run.scale == 1.0 && drop == written_drop && written_drop == 0.0 {
                self.body.push_str(&escaped);
                continue;
            }
            let mut attributes = String::new();
            if drop != written_drop {
                let _ = write!(attributes, " dy=\"{}\"", num(drop - written_drop));
                written_drop = drop;
            }
            if run.scale != 1.0 {
                let _ = write!(attributes, " font-size=\"{}\"", num(size * run.scale));
            }
            let _ = write!(self.body, "<tspan{attributes}>{escaped}</tspan>");
        }
        self.body.push_str("</text>\n");
    }

    /// The whole document: `width_pt` × `height_pt` points, printed at that size.
    pub fn document(self, width_pt: f64, height_pt: f64, title: &str, font_family: &str) -> String {
        let inches = |pt: f64| num(pt / 72.0);
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" data-figure=\"attnflow\" width=\"{}in\" \
             height=\"{}in\" viewBox=\"0 0 {} {}\" font-family=\"{font_family}\" \
             stroke-linejoin=\"round\">\n",
            inches(width_pt),
            inches(height_pt),
            num(width_pt),
            num(height_pt)
        );
        if !title.is_empty() {
            let _ = writeln!(out, "<title>{}</title>", escape(title));
        }
        if !self.defs.is_empty() {
            out.push_str("<defs>\n");
            for (_, def) in &self.defs {
                out.push_str(def);
                out.push('\n');
            }
            out.push_str("</defs>\n");
        }
        let _ = writeln!(
            out,
            "<rect width=\"{}\" height=\"{}\" fill=\"#FFFFFF\"/>",
            num(width_pt),
            num(height_pt)
        );
        out.push_str(&self.body);
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::style::THEORY;

    #[test]
    fn numbers_are_short_and_stable() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.234567), "1.23");
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(2.5), "2.5");
        assert_eq!(num(-3.104), "-3.1");
    }

    #[test]
    fn scripts_become_tspans_whose_shifts_cancel() {
        let mut svg = Svg::default();
        let label = Label::parse("W_{mm} + e^{−t} & x");
        svg.text(
            &label,
            (10.0, 20.0),
            8.0,
            Align::Middle,
            TextRole::Title,
            false,
        );
        let text = svg.body;
        assert!(text.starts_with(
            "<text data-role=\"title\" x=\"10\" y=\"20\" font-size=\"8\" text-anchor=\"middle\" xml:space=\"preserve\">W<tspan dy=\"1.6\" font-size=\"5.6\">mm</tspan>"
        ), "{text}");
        assert!(text.contains("&amp; x</tspan></text>"), "{text}");
        let dys: f64 = text
            .split("dy=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap().parse::<f64>().unwrap())
            .sum();
        assert!(dys.abs() < 1e-9, "shifts add up to {dys}: {text}");
        assert!(!text.contains('_') && !text.contains('^') && !text.contains('{'));
    }

    #[test]
    fn document_has_a_physical_size_and_shared_definitions() {
        let mut svg = Svg::default();
        let a = Area::new(1.0, 1.0, 11.0, 21.0);
        let stroke = Stroke::theory(0);
        svg.hatched_rect(a, THEORY, THEORY.alpha(0.1), &stroke);
        svg.hatched_rect(a, THEORY, THEORY.alpha(0.1), &stroke);
        svg.colormap_rect(a);
        let doc = svg.document(237.6, 180.0, "t < 1", "DejaVu Sans");
        assert!(doc.contains("width=\"3.3in\" height=\"2.5in\" viewBox=\"0 0 237.6 180\""));
        assert_eq!(doc.matches("<pattern").count(), 1);
        assert_eq!(doc.matches("<linearGradient").count(), 1);
        assert!(doc.contains("<title>t &lt; 1</title>"));
    }
}

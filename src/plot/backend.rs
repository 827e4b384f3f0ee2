//! The drawing surface: plotters' SVG backend, plus what it cannot express, and the pixel-space
//! primitives the panels draw with.
//!
//! Two gaps in plotters-svg 0.3 are closed here. (1) Its coordinates are integers, which turns a
//! smooth curve on a 480 px panel into visible stair steps once the vector figure is printed or
//! zoomed; so the backend works in tenths of a pixel ([`UNITS_PER_PX`]) and the document's
//! `viewBox` scales them back. (2) It writes every path as a plain `<polyline>` (its
//! `DashedLineSeries` chops a curve into hundreds of tiny polylines); [`DashingSvg`] lets
//! `SVGBackend` format each primitive and, while a [`Dash`] is set on the [`Canvas`], adds a real
//! `stroke-dasharray` to the stroke.
//!
//! Everything outside this file works in f64 pixels of the final figure.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

use super::style::{font, Ink};
use super::PlotError;

/// Stroke pattern of the paths drawn while it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Dash {
    #[default]
    Solid,
    Dashed,
    Dotted,
}

impl Dash {
    /// Extra SVG attributes of the pattern (in backend units: 7 px dashes, 4 px gaps); round caps
    /// turn the near-zero dashes into dots.
    fn svg_attributes(self) -> Option<&'static str> {
        match self {
            Dash::Solid => None,
            Dash::Dashed => Some(r#"stroke-dasharray="70,40""#),
            Dash::Dotted => Some(r#"stroke-dasharray="1,40" stroke-linecap="round""#),
        }
    }
}

/// A plotters backend that lets `SVGBackend` write each primitive, then appends it to a shared
/// body (dashing the strokes while a [`Dash`] is set).
pub(super) struct DashingSvg {
    body: Rc<RefCell<String>>,
    dash: Rc<Cell<Dash>>,
    size: (u32, u32),
}

type BackendResult = Result<(), DrawingErrorKind<io::Error>>;

impl DashingSvg {
    /// Formats one primitive with a throw-away `SVGBackend` and appends its element to the body.
    fn emit(
        &mut self,
        dashable: bool,
        draw: impl FnOnce(&mut SVGBackend<'_>) -> BackendResult,
    ) -> BackendResult {
        let mut document = String::new();
        {
            let mut svg = SVGBackend::with_string(&mut document, self.size);
            draw(&mut svg)?;
            svg.present()?;
        }
        // `document` is "<svg …>\n" + element(s) + "</svg>\n".
        let start = document.find('\n').map_or(0, |i| i + 1);
        let end = document
            .rfind("</svg>")
            .unwrap_or(document.len())
            .max(start);
        let element = &document[start..end];
        let mut body = self.body.borrow_mut();
        match self.dash.get().svg_attributes() {
            Some(attributes) if dashable && element.starts_with('<') => {
                // Insert right after the tag name: "<polyline" + " stroke-dasharray=…" + rest.
                let name_end = element.find(' ').unwrap_or(element.len());
                body.push_str(&element[..name_end]);
                body.push(' ');
                body.push_str(attributes);
                body.push_str(&element[name_end..]);
            }
            _ => body.push_str(element),
        }
        Ok(())
    }
}

impl DrawingBackend for DashingSvg {
    type ErrorType = io::Error;

    fn get_size(&self) -> (u32, u32) {
        self.size
    }
    fn ensure_prepared(&mut self) -> BackendResult {
        Ok(())
    }
    fn present(&mut self) -> BackendResult {
        Ok(())
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> BackendResult {
        self.emit(false, |svg| svg.draw_pixel(point, color))
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> BackendResult {
        self.emit(true, |svg| svg.draw_line(from, to, style))
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> BackendResult {
        self.emit(false, |svg| {
            svg.draw_rect(upper_left, bottom_right, style, fill)
        })
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> BackendResult {
        self.emit(true, |svg| svg.draw_path(path, style))
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> BackendResult {
        self.emit(false, |svg| svg.draw_circle(center, radius, style, fill))
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> BackendResult {
        self.emit(false, |svg| svg.fill_polygon(vert, style))
    }
    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> BackendResult {
        self.emit(false, |svg| svg.draw_text(text, style, pos))
    }
}

/// Backend units per figure pixel: coordinates are written to a tenth of a pixel.
pub(super) const UNITS_PER_PX: f64 = 10.0;

/// A length in figure pixels as backend units.
pub(super) fn units(px: f64) -> i32 {
    (px * UNITS_PER_PX).round() as i32
}

fn unit_point((x, y): (f64, f64)) -> (i32, i32) {
    (units(x), units(y))
}

/// A region of the figure (a panel) that plotters lays out.
pub(super) type Area = DrawingArea<DashingSvg, Shift>;

/// Size of a drawing area in figure pixels.
pub(super) fn area_size(area: &Area) -> (f64, f64) {
    let (w, h) = area.dim_in_pixel();
    (w as f64 / UNITS_PER_PX, h as f64 / UNITS_PER_PX)
}

/// A point in figure pixels.
pub(super) type Px = (f64, f64);

/// The root drawing area plus pixel-space primitives (all coordinates are absolute figure pixels).
pub(super) struct Canvas {
    pub root: Area,
    body: Rc<RefCell<String>>,
    dash: Rc<Cell<Dash>>,
}

/// Where a text's anchor point sits on the text.
#[derive(Clone, Copy)]
pub(super) struct Anchor(pub HPos, pub VPos);

impl Canvas {
    /// A canvas of `size` figure pixels.
    pub fn new(size: (u32, u32)) -> Self {
        let body = Rc::new(RefCell::new(String::new()));
        let dash = Rc::new(Cell::new(Dash::Solid));
        let backend = DashingSvg {
            body: Rc::clone(&body),
            dash: Rc::clone(&dash),
            size: (units(size.0 as f64) as u32, units(size.1 as f64) as u32),
        };
        Canvas {
            root: backend.into_drawing_area(),
            body,
            dash,
        }
    }

    /// The SVG elements drawn so far (in backend units).
    pub fn into_body(self) -> String {
        drop(self.root);
        self.body.take()
    }

    /// A polyline of `width` px; consecutive points closer than a backend unit are merged.
    pub fn path(&self, points: &[Px], ink: Ink, width: f64, dash: Dash) -> Result<(), PlotError> {
        let mut path: Vec<(i32, i32)> = Vec::with_capacity(points.len());
        for &p in points {
            let q = unit_point(p);
            if path.last() != Some(&q) {
                path.push(q);
            }
        }
        if path.len() < 2 {
            return Ok(());
        }
        self.dash.set(dash);
        let style = ink.style().stroke_width(units(width).max(1) as u32);
        let drawn = self.root.draw(&PathElement::new(path, style));
        self.dash.set(Dash::Solid);
        Ok(drawn?)
    }

    pub fn polygon(&self, points: &[Px], ink: Ink) -> Result<(), PlotError> {
        if points.len() < 3 {
            return Ok(());
        }
        let points: Vec<(i32, i32)> = points.iter().map(|&p| unit_point(p)).collect();
        Ok(self
            .root
            .draw(&Polygon::new(points, ink.style().filled()))?)
    }

    pub fn fill_rect(&self, corner: Px, opposite: Px, ink: Ink) -> Result<(), PlotError> {
        let ((x0, y0), (x1, y1)) = (unit_point(corner), unit_point(opposite));
        let corners = [(x0.min(x1), y0.min(y1)), (x0.max(x1), y0.max(y1))];
        Ok(self
            .root
            .draw(&Rectangle::new(corners, ink.style().filled()))?)
    }

    /// A rectangle outline (a closed path, so that width and dash apply).
    pub fn outline_rect(
        &self,
        (x0, y0): Px,
        (x1, y1): Px,
        ink: Ink,
        width: f64,
        dash: Dash,
    ) -> Result<(), PlotError> {
        self.path(
            &[(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)],
            ink,
            width,
            dash,
        )
    }

    pub fn disc(&self, center: Px, radius: f64, ink: Ink) -> Result<(), PlotError> {
        Ok(self.root.draw(&Circle::new(
            unit_point(center),
            units(radius),
            ink.style().filled(),
        ))?)
    }

    /// Text of `px` pixels; `rotated` turns it to read bottom-to-top (y-axis labels).
    pub fn text(
        &self,
        text: &str,
        at: Px,
        px: f64,
        anchor: Anchor,
        ink: Ink,
        rotated: bool,
    ) -> Result<(), PlotError> {
        if text.is_empty() {
            return Ok(());
        }
        let mut style = font(px, ink).pos(Pos::new(anchor.0, anchor.1));
        if rotated {
            style = style.transform(FontTransform::Rotate270);
        }
        Ok(self.root.draw_text(text, &style, unit_point(at))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dash_is_written_into_the_stroke_and_reset_after() {
        let canvas = Canvas::new((100, 100));
        let black = Ink::rgb(0, 0, 0);
        canvas
            .path(&[(0.0, 0.0), (10.0, 10.0)], black, 2.0, Dash::Dashed)
            .unwrap();
        canvas
            .path(&[(0.0, 0.0), (10.0, 20.0)], black, 2.0, Dash::Solid)
            .unwrap();
        canvas.fill_rect((5.0, 5.0), (1.0, 1.0), black).unwrap();
        let body = canvas.into_body();
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 3, "{body}");
        assert!(
            lines[0].starts_with(r#"<polyline stroke-dasharray="70,40" fill="none""#),
            "{}",
            lines[0]
        );
        assert!(!lines[1].contains("dasharray"));
        assert!(
            lines[2].starts_with(r#"<rect x="10" y="10" width="40" height="40""#),
            "{}",
            lines[2]
        );
        assert!(!body.contains("<svg") && !body.contains("</svg>"));
    }

    #[test]
    fn coordinates_keep_a_tenth_of_a_pixel_and_dense_points_merge() {
        let canvas = Canvas::new((100, 100));
        let points: Vec<Px> = (0..1000).map(|i| (i as f64 * 0.001, 3.25)).collect();
        canvas
            .path(&points, Ink::rgb(0, 0, 0), 1.5, Dash::Solid)
            .unwrap();
        let body = canvas.into_body();
        // 0..1 px in steps of 0.001 px: eleven distinct tenths; y = 3.25 px is 33 (rounded) units.
        assert!(body.contains(r#"stroke-width="15" points="0,33 1,33 2,33 3,33 4,33 5,33 6,33 7,33 8,33 9,33 10,33 ""#), "{body}");
    }
}

//! The one look shared by every figure: palette, fonts, line widths, the diverging colormap.

use plotters::style::{FontDesc, RGBAColor, ShapeStyle, TextStyle};
use plotters_backend::BackendColor;

use super::backend::{Dash, UNITS_PER_PX};
use super::LineStyle;

/// Sans-serif stack: Helvetica/Arial where installed, DejaVu Sans on bare Linux.
const FONT_FAMILY: &str = "Helvetica, Arial, DejaVu Sans, Liberation Sans, sans-serif";
/// plotters-svg writes `font-size = size / 1.24`; sizes here are figure pixels.
const PLOTTERS_FONT_SCALE: f64 = 1.24;
/// Average advance of a character in em; generous for the widest of the fonts above (DejaVu Sans).
const CHAR_WIDTH_EM: f64 = 0.6;

/// Font sizes in px for a 480×360 panel (≈ 8 pt when the panel is printed at column width).
pub(super) const SUPER_TITLE_PX: f64 = 18.0;
pub(super) const TITLE_PX: f64 = 16.0;
pub(super) const AXIS_LABEL_PX: f64 = 15.0;
pub(super) const TICK_PX: f64 = 13.5;
pub(super) const LEGEND_PX: f64 = 13.0;
pub(super) const ANNOTATION_PX: f64 = 12.0;

/// Stroke widths and marker size in px.
pub(super) const CURVE_WIDTH: f64 = 1.8;
pub(super) const REFERENCE_WIDTH: f64 = 1.3;
pub(super) const THIN_WIDTH: f64 = 1.0;
pub(super) const GRID_WIDTH: f64 = 0.8;
pub(super) const MARKER_RADIUS: f64 = 3.0;

/// A colour with opacity; `Copy`, unlike plotters' borrowed text colours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ink {
    pub rgb: (u8, u8, u8),
    pub alpha: f64,
}

impl Ink {
    pub const fn rgb(r: u8, g: u8, b: u8) -> Self {
        Ink {
            rgb: (r, g, b),
            alpha: 1.0,
        }
    }
    pub fn alpha(self, alpha: f64) -> Self {
        Ink { alpha, ..self }
    }
    pub fn style(self) -> ShapeStyle {
        let (r, g, b) = self.rgb;
        ShapeStyle {
            color: RGBAColor(r, g, b, self.alpha),
            filled: false,
            stroke_width: 1,
        }
    }
    fn backend(self) -> BackendColor {
        BackendColor {
            rgb: self.rgb,
            alpha: self.alpha,
        }
    }
}

pub(super) const TEXT: Ink = Ink::rgb(0, 0, 0);
pub(super) const AXIS: Ink = Ink::rgb(0, 0, 0);
pub(super) const GRID: Ink = Ink::rgb(0xE3, 0xE3, 0xE3);
pub(super) const REFERENCE: Ink = Ink::rgb(0x55, 0x55, 0x55);
pub(super) const ARROW: Ink = Ink::rgb(0x33, 0x33, 0x33);
pub(super) const LEGEND_FRAME: Ink = Ink::rgb(0xBB, 0xBB, 0xBB);
pub(super) const WHITE: Ink = Ink::rgb(0xFF, 0xFF, 0xFF);
/// Heatmap cells without a finite value.
pub(super) const MISSING: Ink = Ink::rgb(0xC8, 0xC8, 0xC8);

/// Okabe–Ito, ordered so that the first colours are the most distinct on white (yellow last).
const PALETTE: [Ink; 8] = [
    Ink::rgb(0x00, 0x72, 0xB2), // blue
    Ink::rgb(0xD5, 0x5E, 0x00), // vermillion
    Ink::rgb(0x00, 0x9E, 0x73), // bluish green
    Ink::rgb(0xCC, 0x79, 0xA7), // reddish purple
    Ink::rgb(0xE6, 0x9F, 0x00), // orange
    Ink::rgb(0x56, 0xB4, 0xE9), // sky blue
    Ink::rgb(0x00, 0x00, 0x00), // black
    Ink::rgb(0xF0, 0xE4, 0x42), // yellow
];

/// The palette colour of a `color` index (cycling).
pub(super) fn palette(index: usize) -> Ink {
    PALETTE[index % PALETTE.len()]
}

/// Hands out palette indices for items without an explicit `color`, in order, skipping the
/// indices the panel uses explicitly (while any are left), so that colours stay distinct.
#[derive(Debug, Clone)]
pub(super) struct ColorCycle {
    taken: [bool; PALETTE.len()],
    next: usize,
}

impl ColorCycle {
    pub fn new(explicit: impl IntoIterator<Item = usize>) -> Self {
        let mut taken = [false; PALETTE.len()];
        for c in explicit {
            taken[c % PALETTE.len()] = true;
        }
        if taken.iter().all(|&t| t) {
            taken = [false; PALETTE.len()];
        }
        ColorCycle { taken, next: 0 }
    }

    /// The index to use for an item with colour `explicit`.
    pub fn pick(&mut self, explicit: Option<usize>) -> usize {
        if let Some(c) = explicit {
            return c;
        }
        while self.taken[self.next % PALETTE.len()] {
            self.next += 1;
        }
        let c = self.next;
        self.next += 1;
        c
    }
}

/// The dash pattern of a line style (markers-only styles draw no line at all).
pub(super) fn dash_of(style: LineStyle) -> Dash {
    match style {
        LineStyle::Solid | LineStyle::SolidMarkers | LineStyle::Markers => Dash::Solid,
        LineStyle::Dashed => Dash::Dashed,
        LineStyle::Dotted => Dash::Dotted,
    }
}

/// Text style of `px` CSS pixels in the figure font.
pub(super) fn font(px: f64, ink: Ink) -> TextStyle<'static> {
    let size = px * UNITS_PER_PX * PLOTTERS_FONT_SCALE;
    let mut style = TextStyle::from(FontDesc::from((FONT_FAMILY, size)));
    style.color = ink.backend();
    style
}

/// Estimated width in px of `text` at `px` (no font metrics exist at run time; errs wide).
pub(super) fn text_width(text: &str, px: f64) -> f64 {
    text.chars().count() as f64 * CHAR_WIDTH_EM * px
}

/// ColorBrewer RdBu (reversed): negative blue, zero near-white, positive red.
const DIVERGING: [(u8, u8, u8); 11] = [
    (0x05, 0x30, 0x61),
    (0x21, 0x66, 0xAC),
    (0x43, 0x93, 0xC3),
    (0x92, 0xC5, 0xDE),
    (0xD1, 0xE5, 0xF0),
    (0xF7, 0xF7, 0xF7),
    (0xFD, 0xDB, 0xC7),
    (0xF4, 0xA5, 0x82),
    (0xD6, 0x60, 0x4D),
    (0xB2, 0x18, 0x2B),
    (0x67, 0x00, 0x1F),
];

/// Colour of `t` in [-1, 1] (clamped; NaN gives the missing-value grey).
pub(super) fn diverging(t: f64) -> Ink {
    if t.is_nan() {
        return MISSING;
    }
    let position = (t.clamp(-1.0, 1.0) + 1.0) / 2.0 * (DIVERGING.len() - 1) as f64;
    let lower = (position.floor() as usize).min(DIVERGING.len() - 2);
    let fraction = position - lower as f64;
    let blend = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * fraction).round() as u8;
    let (a, b) = (DIVERGING[lower], DIVERGING[lower + 1]);
    Ink::rgb(blend(a.0, b.0), blend(a.1, b.1), blend(a.2, b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diverging_map_is_blue_white_red_and_clamps() {
        assert_eq!(diverging(-1.0), Ink::rgb(0x05, 0x30, 0x61));
        assert_eq!(diverging(0.0), Ink::rgb(0xF7, 0xF7, 0xF7));
        assert_eq!(diverging(1.0), Ink::rgb(0x67, 0x00, 0x1F));
        assert_eq!(diverging(7.0), diverging(1.0));
        assert_eq!(diverging(f64::NAN), MISSING);
        let mid = diverging(0.5);
        assert!(mid.rgb.0 > mid.rgb.2, "positive values are red: {mid:?}");
    }

    #[test]
    fn color_cycle_skips_explicit_colours() {
        let mut cycle = ColorCycle::new([0, 2]);
        assert_eq!(cycle.pick(None), 1);
        assert_eq!(cycle.pick(Some(0)), 0);
        assert_eq!(cycle.pick(None), 3);
        let mut all_taken = ColorCycle::new(0..8);
        assert_eq!(all_taken.pick(None), 0);
    }
}

//! The one look shared by every figure: print sizes in points, the palette, and the overlay
//! convention that follows from a curve's role — numerics coloured, solid and beneath; theory
//! dark, thin, dashed and on top; bounds and references grey and dotted.

use super::LineStyle;

/// Printed widths of a figure in points (1/72 in): one column of a two-column paper, or the full
/// text width.
pub(super) const COLUMN_WIDTH_PT: f64 = 3.3 * 72.0;
pub(super) const FULL_WIDTH_PT: f64 = 6.9 * 72.0;

/// Font sizes in printed points.
pub(super) const SUPER_TITLE_PT: f64 = 9.0;
pub(super) const TITLE_PT: f64 = 8.0;
pub(super) const AXIS_LABEL_PT: f64 = 8.0;
pub(super) const TICK_PT: f64 = 7.0;
pub(super) const LEGEND_PT: f64 = 7.0;
pub(super) const ANNOTATION_PT: f64 = 7.0;
/// No text is shrunk below this to make it fit (it wraps instead): 7 pt, the smallest size a
/// printed figure's text should have.
pub(super) const MIN_TEXT_PT: f64 = 7.0;
/// Baseline-to-baseline distance of wrapped lines, in em.
pub(super) const LINE_SPACING: f64 = 1.2;

/// Stroke widths and marker radius in points.
pub(super) const NUMERICS_WIDTH: f64 = 1.2;
pub(super) const FAINT_WIDTH: f64 = 2.6;
pub(super) const FAINT_ALPHA: f64 = 0.4;
pub(super) const THEORY_WIDTH: f64 = 0.8;
pub(super) const REFERENCE_WIDTH: f64 = 0.7;
pub(super) const FRAME_WIDTH: f64 = 0.5;
pub(super) const GRID_WIDTH: f64 = 0.35;
pub(super) const ARROW_WIDTH: f64 = 0.5;
pub(super) const MARKER_RADIUS: f64 = 1.6;

/// An opaque colour, or one with opacity.
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
    /// `#RRGGBB`.
    pub fn hex(self) -> String {
        let (r, g, b) = self.rgb;
        format!("#{r:02X}{g:02X}{b:02X}")
    }
}

pub(super) const AXIS: Ink = Ink::rgb(0, 0, 0);
pub(super) const GRID: Ink = Ink::rgb(0xE4, 0xE4, 0xE4);
/// Theory curves: near-black, so that they read on top of every palette colour.
pub(super) const THEORY: Ink = Ink::rgb(0x1A, 0x1A, 0x1A);
/// Bounds, thresholds and reference lines.
pub(super) const REFERENCE: Ink = Ink::rgb(0x70, 0x70, 0x70);
pub(super) const ARROW: Ink = Ink::rgb(0x40, 0x40, 0x40);
pub(super) const LEGEND_FRAME: Ink = Ink::rgb(0xA0, 0xA0, 0xA0);
pub(super) const WHITE: Ink = Ink::rgb(0xFF, 0xFF, 0xFF);
/// Heatmap cells without a finite value.
pub(super) const MISSING: Ink = Ink::rgb(0xC8, 0xC8, 0xC8);

/// Okabe–Ito without its black (black is theory's), a wine red in its place, yellow last.
const PALETTE: [Ink; 8] = [
    Ink::rgb(0x00, 0x72, 0xB2), // blue
    Ink::rgb(0xD5, 0x5E, 0x00), // vermillion
    Ink::rgb(0x00, 0x9E, 0x73), // bluish green
    Ink::rgb(0xCC, 0x79, 0xA7), // reddish purple
    Ink::rgb(0xE6, 0x9F, 0x00), // orange
    Ink::rgb(0x56, 0xB4, 0xE9), // sky blue
    Ink::rgb(0x88, 0x22, 0x55), // wine
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

/// What a curve is, which decides how it is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// A computed result: coloured, solid, beneath.
    Numerics,
    /// A closed form or prediction: dark, thin, dashed, on top.
    Theory,
    /// A bound, threshold or paper's claim: grey (or the colour asked for), thin, dotted.
    Reference,
}

impl Role {
    pub fn of(style: LineStyle) -> Role {
        match style {
            LineStyle::Solid | LineStyle::SolidMarkers | LineStyle::Markers | LineStyle::Faint => {
                Role::Numerics
            }
            LineStyle::Dashed => Role::Theory,
            LineStyle::Dotted => Role::Reference,
        }
    }
}

/// Dash patterns of theory curves in points; a panel's theory curves with different labels
/// take them in turn so that the legend tells them apart.
const THEORY_DASHES: [&str; 4] = ["3.2 1.6", "6.5 1.8", "3.6 1.4 0.9 1.4", "1.8 1.4"];
/// Dots: zero-length dashes with round caps.
const DOTS: &str = "0 1.7";

/// How a stroke is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Stroke {
    pub ink: Ink,
    pub width: f64,
    pub dash: Option<&'static str>,
    pub round_caps: bool,
}

impl Stroke {
    pub const fn solid(ink: Ink, width: f64) -> Self {
        Stroke {
            ink,
            width,
            dash: None,
            round_caps: false,
        }
    }
    pub fn numerics(ink: Ink) -> Self {
        Stroke::solid(ink, NUMERICS_WIDTH)
    }
    /// A comparison curve: light and wide, so that a solid curve on it stays visible.
    pub fn faint(ink: Ink) -> Self {
        Stroke::solid(ink.alpha(FAINT_ALPHA), FAINT_WIDTH)
    }
    /// The `variant`-th theory dash pattern.
    pub fn theory(variant: usize) -> Self {
        Stroke {
            dash: Some(THEORY_DASHES[variant % THEORY_DASHES.len()]),
            ..Stroke::solid(THEORY, THEORY_WIDTH)
        }
    }
    pub fn reference(ink: Ink) -> Self {
        Stroke {
            dash: Some(DOTS),
            round_caps: true,
            ..Stroke::solid(ink, REFERENCE_WIDTH)
        }
    }
}

/// ColorBrewer RdBu (reversed): negative blue, zero near-white, positive red.
pub(super) const DIVERGING: [(u8, u8, u8); 11] = [
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

    #[test]
    fn roles_follow_the_line_style() {
        assert_eq!(Role::of(LineStyle::SolidMarkers), Role::Numerics);
        assert_eq!(Role::of(LineStyle::Dashed), Role::Theory);
        assert_eq!(Role::of(LineStyle::Dotted), Role::Reference);
        assert_eq!(Ink::rgb(0, 0x72, 0xB2).hex(), "#0072B2");
        assert!(Stroke::theory(0).width < Stroke::numerics(palette(0)).width);
    }
}

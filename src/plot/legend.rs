//! Legends: inside a corner of the plot, on a translucent white box.

use plotters::style::text_anchor::{HPos, VPos};

use super::backend::{Anchor, Canvas, Dash};
use super::bars::draw_bar;
use super::frame::PixelBox;
use super::style::{
    dash_of, text_width, Ink, CURVE_WIDTH, LEGEND_FRAME, LEGEND_PX, MARKER_RADIUS, TEXT,
    THIN_WIDTH, WHITE,
};
use super::{LegendPosition, LineStyle, PlotError};

/// How an entry's sample is drawn.
#[derive(Debug, Clone, Copy)]
pub(super) enum Glyph {
    /// A short stretch of curve in that style.
    Line(LineStyle, Ink),
    /// A filled swatch (bands).
    Patch(Ink),
    /// A small bar in that style (bar panels).
    Bar(LineStyle, Ink),
}

#[derive(Debug, Clone)]
pub(super) struct Entry {
    label: String,
    glyph: Glyph,
}

impl Entry {
    pub fn new(label: &str, glyph: Glyph) -> Self {
        Entry {
            label: label.to_string(),
            glyph,
        }
    }
}

/// Geometry in px.
const GLYPH_WIDTH: f64 = 28.0;
const GAP: f64 = 6.0;
const PADDING: f64 = 7.0;
/// Distance of the box from the frame.
const INSET: f64 = 8.0;
const BOX_OPACITY: f64 = 0.85;

const ROW_HEIGHT: f64 = LEGEND_PX * 1.45;

/// Where the legend box of `entries` goes in the plot `plot`.
pub(super) fn legend_box(plot: PixelBox, entries: &[Entry], position: LegendPosition) -> PixelBox {
    let widest = entries
        .iter()
        .map(|e| text_width(&e.label, LEGEND_PX))
        .fold(0.0, f64::max);
    let width = 2.0 * PADDING + GLYPH_WIDTH + GAP + widest;
    let height = 2.0 * PADDING + ROW_HEIGHT * entries.len() as f64;
    let left = match position {
        LegendPosition::UpperLeft | LegendPosition::LowerLeft => plot.left + INSET,
        _ => plot.right - INSET - width,
    };
    let top = match position {
        LegendPosition::UpperLeft | LegendPosition::UpperRight => plot.top + INSET,
        _ => plot.bottom - INSET - height,
    };
    PixelBox {
        left,
        top,
        right: left + width,
        bottom: top + height,
    }
}

pub(super) fn draw_legend(
    canvas: &Canvas,
    plot: PixelBox,
    entries: &[Entry],
    position: LegendPosition,
) -> Result<(), PlotError> {
    if entries.is_empty() || position == LegendPosition::None {
        return Ok(());
    }
    let b = legend_box(plot, entries, position);
    canvas.fill_rect(
        (b.left, b.top),
        (b.right, b.bottom),
        WHITE.alpha(BOX_OPACITY),
    )?;
    canvas.outline_rect(
        (b.left, b.top),
        (b.right, b.bottom),
        LEGEND_FRAME,
        THIN_WIDTH,
        Dash::Solid,
    )?;

    let glyph_left = b.left + PADDING;
    for (i, entry) in entries.iter().enumerate() {
        let y = b.top + PADDING + ROW_HEIGHT * (i as f64 + 0.5);
        let (x0, x1) = (glyph_left, glyph_left + GLYPH_WIDTH);
        match entry.glyph {
            Glyph::Line(style, ink) => {
                if style != LineStyle::Markers {
                    canvas.path(&[(x0, y), (x1, y)], ink, CURVE_WIDTH, dash_of(style))?;
                }
                if matches!(style, LineStyle::Markers | LineStyle::SolidMarkers) {
                    canvas.disc(((x0 + x1) / 2.0, y), MARKER_RADIUS, ink)?;
                }
            }
            Glyph::Patch(ink) => canvas.fill_rect((x0, y - 6.0), (x1, y + 6.0), ink)?,
            Glyph::Bar(style, ink) => {
                draw_bar(canvas, (x0 + 6.0, y + 7.0), (x1 - 6.0, y - 7.0), style, ink)?
            }
        }
        let anchor = Anchor(HPos::Left, VPos::Center);
        canvas.text(&entry.label, (x1 + GAP, y), LEGEND_PX, anchor, TEXT, false)?;
    }
    Ok(())
}

//! Advance widths of the figure font, so that text is measured, not guessed: titles wrap or
//! shrink to their panel, legends and tick labels get exactly the room they need, and the figure
//! lint (`tests/figure_lint.rs`) can check that no two texts overlap.
//!
//! The SVG names DejaVu Sans first. The widths are DejaVu Sans's own (a table generated once from
//! the font file by `generate.py`); the fonts named after it in [`FONT_FAMILY`] are narrower, so a
//! renderer that substitutes one of them only gives the text more room. No font is read at run
//! time.

#[rustfmt::skip]
mod dejavu_sans;

use dejavu_sans::{ADVANCES, UNITS_PER_EM};

/// The `font-family` of every text in a figure.
pub const FONT_FAMILY: &str = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif";

/// Height of the tallest capitals and ascenders above the baseline, in em (DejaVu Sans: caps
/// 0.73, ascenders 0.76). A text's box for layout and lint runs from this above its baseline ...
pub const ASCENT_EM: f64 = 0.76;
/// ... to this below it (descenders of g, p, y).
pub const DESCENT_EM: f64 = 0.24;

/// Advance width of `c` in em; characters outside the table count one em (errs wide).
pub fn char_advance_em(c: char) -> f64 {
    match ADVANCES.binary_search_by_key(&(c as u32), |&(code, _)| code) {
        Ok(i) => ADVANCES[i].1 as f64 / UNITS_PER_EM,
        Err(_) => 1.0,
    }
}

/// Width of `text` set in `size` (any unit: the width comes out in the same unit). No kerning:
/// kerning only narrows a text.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().map(char_advance_em).sum::<f64>() * size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_dejavu_sans() {
        // DejaVu Sans: digits 1303/2048 em, 'W' 2025, space 651; unknown glyphs one em.
        assert!((text_width("0", 2048.0) - 1303.0).abs() < 1e-9);
        assert!((text_width("W W", 2048.0) - (2.0 * 2025.0 + 651.0)).abs() < 1e-9);
        assert!((char_advance_em('α') - 1350.0 / 2048.0).abs() < 1e-12);
        // Combining hats and tildes take no room.
        assert_eq!(char_advance_em('\u{0302}'), 0.0);
        assert_eq!(char_advance_em('\u{1F600}'), 1.0);
        assert!(ADVANCES.windows(2).all(|w| w[0].0 < w[1].0));
    }
}

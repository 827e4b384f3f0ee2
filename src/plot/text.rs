//! Figure text: a small mathematical markup, measured with the font's advance widths, and fitted
//! to the room it has by shrinking a little, then wrapping.
//!
//! Markup (what a runner writes → what the SVG shows):
//! - `x_i`, `x^2`: one character as a sub- or superscript; `x_{i,opt}`, `e^{−2αt}`: a group.
//!   Scripts nest (`e^{x_i}`). A script is set at [`SCRIPT_SCALE`] of its parent's size and
//!   shifted with `dy`, which every SVG renderer supports.
//! - `{…}` alone only groups; `\_`, `\^`, `\{`, `\}`, `\\` are the characters themselves.
//! - Everything else is plain Unicode: Greek, hats and tildes (combining or precomposed), primes,
//!   ‖·‖, minus signs.
//!
//! No underscore, caret or brace of the markup reaches the SVG.

use crate::plot::font::{text_width, ASCENT_EM, DESCENT_EM};

use super::style::{LINE_SPACING, MIN_TEXT_PT};

/// Size of a script relative to the text it is attached to.
const SCRIPT_SCALE: f64 = 0.7;
/// Baseline shift of a superscript (up) and a subscript (down), in em of the parent's size.
const SUPER_RISE: f64 = 0.36;
const SUB_DROP: f64 = 0.2;

/// A stretch of text at one size and baseline.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Run {
    pub text: String,
    /// Size relative to the label's size.
    pub scale: f64,
    /// Baseline shift upwards, in em of the label's size.
    pub rise: f64,
}

/// Parsed text: runs left to right.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Label {
    pub runs: Vec<Run>,
}

impl Label {
    pub fn parse(markup: &str) -> Label {
        let chars: Vec<char> = markup.chars().collect();
        let mut label = Label::default();
        let mut at = 0;
        label.parse_sequence(&chars, &mut at, 1.0, 0.0, false);
        label
    }

    /// Parses until the end (or the `}` closing a group when `in_group`).
    fn parse_sequence(
        &mut self,
        chars: &[char],
        at: &mut usize,
        scale: f64,
        rise: f64,
        in_group: bool,
    ) {
        while *at < chars.len() {
            let c = chars[*at];
            *at += 1;
            match c {
                '}' if in_group => return,
                '\\' if *at < chars.len() => {
                    self.push(chars[*at], scale, rise);
                    *at += 1;
                }
                '{' => self.parse_sequence(chars, at, scale, rise, true),
                '_' | '^' if *at < chars.len() && chars[*at] != ' ' => {
                    let shift = if c == '^' { SUPER_RISE } else { -SUB_DROP };
                    let (scale, rise) = (scale * SCRIPT_SCALE, rise + shift * scale);
                    let word = subscript_word(chars, *at);
                    if chars[*at] == '{' {
                        *at += 1;
                        self.parse_sequence(chars, at, scale, rise, true);
                    } else if let Some(close) = closing_parenthesis(chars, *at) {
                        // plain-text mathematics: e^(−2t), β^(k+1) — the parenthesised group
                        // is the script, parentheses kept
                        self.parse_sequence(&chars[..=close], at, scale, rise, false);
                    } else if c == '_' && word > 1 {
                        for &w in &chars[*at..*at + word] {
                            self.push(w, scale, rise);
                        }
                        *at += word;
                    } else {
                        self.push(chars[*at], scale, rise);
                        *at += 1;
                    }
                }
                c => self.push(c, scale, rise),
            }
        }
    }

    fn push(&mut self, c: char, scale: f64, rise: f64) {
        match self.runs.last_mut() {
            Some(run) if run.scale == scale && run.rise == rise => run.text.push(c),
            _ => self.runs.push(Run {
                text: c.to_string(),
                scale,
                rise,
            }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.runs.iter().all(|r| r.text.is_empty())
    }

    /// The text without its layout (for the SVG `<title>`).
    pub fn plain(&self) -> String {
        self.runs.iter().map(|r| r.text.as_str()).collect()
    }

    /// Advance width at `size`.
    pub fn width(&self, size: f64) -> f64 {
        self.runs
            .iter()
            .map(|r| text_width(&r.text, size * r.scale))
            .sum()
    }

    /// Height above the baseline at `size` (the tallest run, scripts included).
    pub fn ascent(&self, size: f64) -> f64 {
        self.runs
            .iter()
            .map(|r| (r.rise + ASCENT_EM * r.scale) * size)
            .fold(ASCENT_EM * size, f64::max)
    }

    /// Depth below the baseline at `size`.
    pub fn descent(&self, size: f64) -> f64 {
        self.runs
            .iter()
            .map(|r| (DESCENT_EM * r.scale - r.rise) * size)
            .fold(DESCENT_EM * size, f64::max)
    }
}

/// The index of the `)` matching a `(` at `chars[at]`, if any.
fn closing_parenthesis(chars: &[char], at: usize) -> Option<usize> {
    if chars.get(at) != Some(&'(') {
        return None;
    }
    let mut depth = 0usize;
    for (i, &c) in chars.iter().enumerate().skip(at) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Length of a subscript word at `chars[at..]`: a run of two or more ASCII letters not
/// followed by a digit (`λ_max`, `ℓ_tf`, `W_mm`, `H_SS` read as in plain-text mathematics, where
/// TeX would need braces); 0 otherwise, and the subscript is one character as in TeX (`x_iy`
/// needs `x_i y`).
fn subscript_word(chars: &[char], at: usize) -> usize {
    let run = chars[at..]
        .iter()
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    let digit_after = chars.get(at + run).is_some_and(|c| c.is_ascii_digit());
    if run >= 2 && !digit_after {
        run
    } else {
        0
    }
}

/// Splits markup at spaces outside groups (the places a line may break).
fn words(markup: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let (mut depth, mut start, mut escaped) = (0usize, 0, false);
    for (i, c) in markup.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ' ' if depth == 0 => {
                if i > start {
                    words.push(&markup[start..i]);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < markup.len() {
        words.push(&markup[start..]);
    }
    words
}

/// Greedy line breaking of `markup` at `size` into lines no wider than `width` (a word wider
/// than `width` gets a line of its own).
fn wrap(markup: &str, size: f64, width: f64) -> Vec<Label> {
    let mut lines: Vec<String> = Vec::new();
    for word in words(markup) {
        let fits = lines
            .last()
            .is_some_and(|line| Label::parse(&format!("{line} {word}")).width(size) <= width);
        match lines.last_mut() {
            Some(line) if fits => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines.iter().map(|l| Label::parse(l)).collect()
}

/// Text fitted to a width: its lines and the size they are set in.
#[derive(Debug, Clone)]
pub(super) struct Fitted {
    pub lines: Vec<Label>,
    pub size: f64,
}

/// Shrinking beyond this share of the preferred size happens only after wrapping was tried.
const GENTLE_SHRINK: f64 = 0.88;

impl Fitted {
    /// `markup` at `size` if it fits in `width`; else a little smaller on one line; else wrapped
    /// over up to `max_lines` lines, shrinking down to the minimum size; else on as many lines
    /// as it needs at the minimum size. An empty text has no lines.
    pub fn new(markup: &str, size: f64, width: f64, max_lines: usize) -> Fitted {
        if markup.trim().is_empty() {
            return Fitted {
                lines: Vec::new(),
                size,
            };
        }
        let min = MIN_TEXT_PT.min(size);
        let sizes = |lowest: f64| {
            let steps = ((size - lowest) / 0.25).floor() as usize;
            (0..=steps).map(move |k| size - 0.25 * k as f64)
        };
        let fits = |lines: &[Label], s: f64| lines.iter().all(|l| l.width(s) <= width + 1e-9);
        let attempts = sizes((size * GENTLE_SHRINK).max(min))
            .map(|s| (1, s))
            .chain((2..=max_lines.max(1)).flat_map(|n| sizes(min).map(move |s| (n, s))));
        for (max, s) in attempts {
            let lines = wrap(markup, s, width);
            if lines.len() <= max && fits(&lines, s) {
                return Fitted { lines, size: s };
            }
        }
        Fitted {
            lines: wrap(markup, min, width),
            size: min,
        }
    }

    /// One line at `size`, whatever its width (tick labels, which are laid out around it).
    pub fn line(markup: &str, size: f64) -> Fitted {
        let label = Label::parse(markup);
        Fitted {
            lines: if label.is_empty() {
                vec![]
            } else {
                vec![label]
            },
            size,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn width(&self) -> f64 {
        self.lines
            .iter()
            .map(|l| l.width(self.size))
            .fold(0.0, f64::max)
    }

    /// Height of the text block from the top of its first line to the bottom of its last.
    pub fn height(&self) -> f64 {
        match (self.baselines().last(), self.lines.last()) {
            (Some(baseline), Some(last)) => baseline + last.descent(self.size),
            _ => 0.0,
        }
    }

    /// Baseline offsets of the lines from the top of the block: `LINE_SPACING` apart, or further
    /// where a subscript above and a superscript below would otherwise touch.
    pub fn baselines(&self) -> Vec<f64> {
        let mut out: Vec<f64> = Vec::with_capacity(self.lines.len());
        for (i, line) in self.lines.iter().enumerate() {
            let baseline = match out.last() {
                None => line.ascent(self.size),
                Some(&above) => {
                    let clear = self.lines[i - 1].descent(self.size) + line.ascent(self.size);
                    above + (LINE_SPACING * self.size).max(clear)
                }
            };
            out.push(baseline);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(label: &Label) -> Vec<(&str, f64, f64)> {
        label
            .runs
            .iter()
            .map(|r| (r.text.as_str(), r.scale, r.rise))
            .collect()
    }

    #[test]
    fn scripts_groups_and_escapes() {
        assert_eq!(shape(&Label::parse("x")), [("x", 1.0, 0.0)]);
        assert_eq!(
            shape(&Label::parse("W_{mm} + x_i")),
            [
                ("W", 1.0, 0.0),
                ("mm", 0.7, -0.2),
                (" + x", 1.0, 0.0),
                ("i", 0.7, -0.2)
            ]
        );
        let nested = Label::parse("e^{x_i}");
        assert_eq!(nested.runs.len(), 3);
        assert!((nested.runs[2].scale - 0.49).abs() < 1e-12);
        assert!((nested.runs[2].rise - (0.36 - 0.14)).abs() < 1e-12);
        assert_eq!(Label::parse(r"a\_b \{c\}").plain(), "a_b {c}");
        assert_eq!(Label::parse("{grouped}").plain(), "grouped");
        // A lone or trailing marker is just a character.
        assert_eq!(Label::parse("a _ b_").plain(), "a _ b_");
        assert!(Label::parse("").is_empty());
    }

    #[test]
    fn a_subscript_word_is_one_subscript() {
        let sub = |runs: Vec<(&str, f64, f64)>| -> Vec<String> {
            runs.into_iter()
                .filter(|r| r.2 < 0.0)
                .map(|r| r.0.to_string())
                .collect()
        };
        assert_eq!(sub(shape(&Label::parse("λ_max/λ_min"))), ["max", "min"]);
        assert_eq!(sub(shape(&Label::parse("ℓ_tf(t)"))), ["tf"]);
        assert_eq!(sub(shape(&Label::parse("x_i y_i"))), ["i", "i"]);
        // a run followed by a digit stays TeX-like: one character
        assert_eq!(sub(shape(&Label::parse("x_ab2"))), ["a"]);
        assert_eq!(Label::parse(r"tr\_bdf2").plain(), "tr_bdf2");
        // a parenthesised script keeps its parentheses and its own scripts
        let shifted = |l: &str| -> Vec<String> {
            shape(&Label::parse(l))
                .into_iter()
                .filter(|r| r.2 != 0.0)
                .map(|r| r.0.to_string())
                .collect()
        };
        assert_eq!(shifted("e^(−2t) + 1"), ["(−2t)"]);
        assert_eq!(shifted("α^(m_k/2)"), ["(m", "k", "/2)"]);
        assert_eq!(Label::parse("f(x^(2)").plain(), "f(x(2)");
        assert_eq!(Label::parse("x^(open").plain(), "x(open");
    }

    #[test]
    fn scripts_are_measured_smaller_and_raise_the_box() {
        let plain = Label::parse("x2");
        let scripted = Label::parse("x^2");
        assert!(scripted.width(10.0) < plain.width(10.0));
        assert!(scripted.ascent(10.0) > plain.ascent(10.0));
        assert!(Label::parse("x_2").descent(10.0) > plain.descent(10.0));
    }

    #[test]
    fn text_fits_by_shrinking_a_little_then_wrapping() {
        let short = Fitted::new("loss", 8.0, 100.0, 2);
        assert_eq!((short.lines.len(), short.size), (1, 8.0));
        let long = "a title that is far too long for the panel it is written over";
        let width = Label::parse(long).width(8.0) * 0.6;
        let fitted = Fitted::new(long, 8.0, width, 3);
        assert_eq!(fitted.lines.len(), 2);
        assert!(fitted.width() <= width);
        assert!(fitted.size >= MIN_TEXT_PT);
        let slightly = Fitted::new(long, 8.0, Label::parse(long).width(8.0) * 0.95, 3);
        assert_eq!(slightly.lines.len(), 1);
        assert!(slightly.size < 8.0);
        // Groups never break.
        assert_eq!(words("a x_{i, j} b"), ["a", "x_{i, j}", "b"]);
        assert!(Fitted::new("  ", 8.0, 10.0, 2).is_empty());
        let block = Fitted::new("one two", 8.0, 1.0, 1);
        assert_eq!(block.lines.len(), 2, "overlong text still shows in full");
        assert!(block.height() > 8.0 * LINE_SPACING);
    }
}

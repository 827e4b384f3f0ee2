//! Legends: each entry shows its item's real style; the box is opaque and goes where it hides
//! the fewest data points — an inside corner or edge of the plot, else below the axes.

use super::bars::{draw_bar, BarLook};
use super::frame::PAD;
use super::geometry::{Area, Pt};
use super::style::{Ink, Stroke, LEGEND_FRAME, LEGEND_PT, MARKER_RADIUS, WHITE};
use super::svg::{Align, Svg, TextRole};
use super::text::Fitted;
use super::LegendPosition;

/// How an entry's sample is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Glyph {
    /// A short stretch of curve, with a marker in the middle when the curve has markers
    /// (`stroke: None`: markers only).
    Line {
        stroke: Option<Stroke>,
        marker: Option<Ink>,
    },
    /// A filled swatch (bands).
    Patch(Ink),
    /// A small bar (bar panels).
    Bar(BarLook),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub label: String,
    pub glyph: Glyph,
}

/// Geometry in pt.
const GLYPH_WIDTH: f64 = 14.0;
const GLYPH_GAP: f64 = 3.0;
const PADDING: f64 = 3.0;
const ROW_GAP: f64 = 1.5;
const COLUMN_GAP: f64 = 8.0;
/// Distance of an inside legend from the frame.
const INSET: f64 = 3.0;
/// Between the axis label and a legend below it.
const BELOW_GAP: f64 = 4.0;
/// An inside legend may hide at most this share of the data points ...
const INSIDE_MAX_HIDDEN: f64 = 0.01;
/// ... and take at most this share of the plot.
const INSIDE_MAX_AREA: f64 = 0.4;
const LABEL_LINES: usize = 3;

/// Entries fitted into columns (filled top to bottom, then left to right): the legend's content
/// and size.
#[derive(Debug, Clone)]
pub(super) struct LegendBlock {
    entries: Vec<(Fitted, Glyph)>,
    columns: usize,
    column_width: f64,
    row_heights: Vec<f64>,
}

impl LegendBlock {
    /// `entries` (duplicates dropped) in `columns` columns, labels wrapped to fit `width` pt.
    fn new(entries: &[Entry], width: f64, columns: usize) -> LegendBlock {
        let mut unique: Vec<&Entry> = Vec::new();
        for e in entries {
            if !unique.contains(&e) {
                unique.push(e);
            }
        }
        let columns = columns.clamp(1, unique.len().max(1));
        let inner = (width - 2.0 * PADDING - COLUMN_GAP * (columns - 1) as f64) / columns as f64;
        let label_width = inner - GLYPH_WIDTH - GLYPH_GAP;
        let fitted: Vec<(Fitted, Glyph)> = unique
            .iter()
            .map(|e| {
                (
                    Fitted::new(&e.label, LEGEND_PT, label_width, LABEL_LINES),
                    e.glyph,
                )
            })
            .collect();
        let column_width =
            GLYPH_WIDTH + GLYPH_GAP + fitted.iter().map(|(f, _)| f.width()).fold(0.0, f64::max);
        let rows = fitted.len().div_ceil(columns);
        let row_heights = (0..rows)
            .map(|r| {
                fitted
                    .iter()
                    .skip(r)
                    .step_by(rows.max(1))
                    .map(|(f, _)| f.height())
                    .fold(LEGEND_PT, f64::max)
            })
            .collect();
        LegendBlock {
            entries: fitted,
            columns,
            column_width,
            row_heights,
        }
    }

    /// The entry in `row` of `column`.
    fn entry(&self, row: usize, column: usize) -> Option<&(Fitted, Glyph)> {
        self.entries.get(column * self.row_heights.len() + row)
    }

    /// In one column, for inside a plot `width` wide.
    pub fn inside(entries: &[Entry], width: f64) -> LegendBlock {
        LegendBlock::new(entries, width - 2.0 * INSET, 1)
    }

    /// In as many columns as fit across `width` with every label on one line at full size
    /// (below the axes).
    pub fn across(entries: &[Entry], width: f64) -> LegendBlock {
        let mut block = LegendBlock::new(entries, width, 1);
        for columns in 2..=entries.len() {
            let wider = LegendBlock::new(entries, width, columns);
            let unshrunk = wider
                .entries
                .iter()
                .all(|(f, _)| f.lines.len() <= 1 && f.size == LEGEND_PT);
            if wider.columns < columns || wider.size().0 > width || !unshrunk {
                break;
            }
            block = wider;
        }
        block
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Width and height of the box.
    pub fn size(&self) -> (f64, f64) {
        let rows = self.row_heights.len();
        let w = 2.0 * PADDING
            + self.columns as f64 * self.column_width
            + COLUMN_GAP * (self.columns - 1) as f64;
        let h = 2.0 * PADDING
            + self.row_heights.iter().sum::<f64>()
            + ROW_GAP * rows.saturating_sub(1) as f64;
        (w, h)
    }

    /// Room a legend below the axes takes under the axis label.
    pub fn below_room(&self) -> f64 {
        BELOW_GAP + self.size().1
    }
}

/// Where a legend goes: at a fraction (0, ½ or 1 across, 0, ½ or 1 down) of the free room
/// inside the plot, or below the axes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Placement {
    Inside(f64, f64),
    Below,
}

/// Inside positions, in the order that breaks ties (after the runner's preferred corner).
const POSITIONS: [(f64, f64); 9] = [
    (1.0, 0.0),
    (0.0, 0.0),
    (1.0, 1.0),
    (0.0, 1.0),
    (0.5, 0.0),
    (0.5, 1.0),
    (1.0, 0.5),
    (0.0, 0.5),
    (0.5, 0.5),
];

fn preferred(hint: LegendPosition) -> Option<(f64, f64)> {
    match hint {
        LegendPosition::UpperRight => Some((1.0, 0.0)),
        LegendPosition::UpperLeft => Some((0.0, 0.0)),
        LegendPosition::LowerRight => Some((1.0, 1.0)),
        LegendPosition::LowerLeft => Some((0.0, 1.0)),
        LegendPosition::Best | LegendPosition::None => None,
    }
}

/// The box of a legend `size` placed inside `plot` at fractions `(fx, fy)`.
fn inside_box(plot: &Area, (w, h): (f64, f64), (fx, fy): (f64, f64)) -> Area {
    let left = plot.left + INSET + fx * (plot.width() - 2.0 * INSET - w);
    let top = plot.top + INSET + fy * (plot.height() - 2.0 * INSET - h);
    Area::sized(left, top, w, h)
}

/// The inside position that hides the fewest of `samples` (data points on the page), if it
/// hides few enough and the legend is small enough for the plot; else below the axes.
fn place(block: &LegendBlock, plot: &Area, samples: &[Pt], hint: LegendPosition) -> Placement {
    let size = block.size();
    let fits = size.0 <= plot.width() - 2.0 * INSET
        && size.1 <= plot.height() - 2.0 * INSET
        && size.0 * size.1 <= INSIDE_MAX_AREA * plot.width() * plot.height();
    if !fits {
        return Placement::Below;
    }
    let candidates = preferred(hint).into_iter().chain(POSITIONS);
    let hidden = |at: (f64, f64)| {
        // A point within a line width of the box counts as hidden too.
        let b = inside_box(plot, size, at).inset(-1.0);
        samples.iter().filter(|&&p| b.contains(p)).count()
    };
    let (best, count) = candidates
        .map(|at| (at, hidden(at)))
        .fold(None, |best: Option<((f64, f64), usize)>, c| match best {
            Some(b) if b.1 <= c.1 => Some(b),
            _ => Some(c),
        })
        .expect("nine candidates");
    if count as f64 <= INSIDE_MAX_HIDDEN * samples.len() as f64 {
        Placement::Inside(best.0, best.1)
    } else {
        Placement::Below
    }
}

/// The box of a legend below the axes: centred under the plot, within the cell.
fn below_box(block: &LegendBlock, plot: &Area, cell: &Area, top: f64) -> Area {
    let (w, h) = block.size();
    let left = (plot.center_x() - w / 2.0)
        .min(cell.right - PAD - w)
        .max(cell.left + PAD);
    Area::sized(left, top + BELOW_GAP, w, h)
}

/// Draws the legend in `area` (from [`inside_box`] or [`below_box`]).
fn draw_legend(svg: &mut Svg, block: &LegendBlock, area: Area) {
    if block.is_empty() {
        return;
    }
    svg.open_group("legend", None);
    svg.boxed_rect(
        area,
        WHITE,
        &Stroke::solid(LEGEND_FRAME, 0.4),
        Some("legend-box"),
    );
    let mut top = area.top + PADDING;
    for (row, height) in block.row_heights.iter().enumerate() {
        for column in 0..block.columns {
            let Some((label, glyph)) = block.entry(row, column) else {
                continue;
            };
            let left = area.left + PADDING + column as f64 * (block.column_width + COLUMN_GAP);
            // The glyph sits on the middle of the first line.
            let first = label.lines.first();
            let middle = first.map_or(top + height / 2.0, |l| {
                let baseline = top + l.ascent(label.size);
                baseline - (l.ascent(label.size) - l.descent(label.size)) / 2.0
            });
            draw_glyph(svg, *glyph, left, middle);
            let text_left = left + GLYPH_WIDTH + GLYPH_GAP;
            for (line, baseline) in label.lines.iter().zip(label.baselines()) {
                svg.text(
                    line,
                    (text_left, top + baseline),
                    label.size,
                    Align::Start,
                    TextRole::Legend,
                    false,
                );
            }
        }
        top += height + ROW_GAP;
    }
    svg.close_group();
}

fn draw_glyph(svg: &mut Svg, glyph: Glyph, left: f64, y: f64) {
    let right = left + GLYPH_WIDTH;
    match glyph {
        Glyph::Line { stroke, marker } => {
            if let Some(stroke) = stroke {
                svg.polyline(&[(left, y), (right, y)], &stroke);
            }
            if let Some(ink) = marker {
                svg.circle(((left + right) / 2.0, y), MARKER_RADIUS, ink);
            }
        }
        Glyph::Patch(ink) => svg.fill_rect(Area::new(left, y - 2.5, right, y + 2.5), ink),
        Glyph::Bar(look) => draw_bar(
            svg,
            Area::new(left + 3.0, y - 3.0, right - 3.0, y + 3.0),
            look,
        ),
    }
}

/// A panel's legend: its content and where it goes.
#[derive(Debug, Clone)]
pub(super) struct LegendPlan {
    block: LegendBlock,
    placement: Placement,
}

impl LegendPlan {
    /// The legend of `entries` for a plot of `plot` (page points, any origin) showing `samples`,
    /// in a cell `cell_width` wide. Entries an earlier panel's legend already shows (in
    /// `explained`) are left out — a figure explains each style once — and the new ones are
    /// added. `None` without entries left or when the runner asked for none.
    pub fn new(
        entries: &[Entry],
        explained: &mut Vec<Entry>,
        plot: &Area,
        samples: &[Pt],
        hint: LegendPosition,
        cell_width: f64,
    ) -> Option<LegendPlan> {
        if hint == LegendPosition::None {
            return None;
        }
        let entries: Vec<Entry> = entries
            .iter()
            .filter(|e| !explained.contains(e))
            .cloned()
            .collect();
        if entries.is_empty() {
            return None;
        }
        explained.extend(entries.iter().cloned());
        let entries = &entries[..];
        let block = LegendBlock::inside(entries, plot.width());
        let placement = place(&block, plot, samples, hint);
        let block = match placement {
            Placement::Inside(..) => block,
            Placement::Below => LegendBlock::across(entries, cell_width - 2.0 * PAD),
        };
        Some(LegendPlan { block, placement })
    }

    /// Room taken under the axis label.
    pub fn extra_bottom(&self) -> f64 {
        match self.placement {
            Placement::Inside(..) => 0.0,
            Placement::Below => self.block.below_room(),
        }
    }

    /// The box on the page, for a plot at `plot` in `cell` whose labels end at `below_labels`.
    pub fn area(&self, plot: &Area, cell: &Area, below_labels: f64) -> Area {
        match self.placement {
            Placement::Inside(fx, fy) => inside_box(plot, self.block.size(), (fx, fy)),
            Placement::Below => below_box(&self.block, plot, cell, below_labels),
        }
    }

    pub fn draw(&self, svg: &mut Svg, area: Area) {
        draw_legend(svg, &self.block, area);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::style::palette;

    fn entry(label: &str) -> Entry {
        Entry {
            label: label.into(),
            glyph: Glyph::Patch(palette(0)),
        }
    }

    #[test]
    fn legend_goes_where_it_hides_least_or_below() {
        let plot = Area::new(0.0, 0.0, 200.0, 150.0);
        let block = LegendBlock::inside(&[entry("numerics"), entry("theory")], plot.width());
        // Data along the top edge: the legend goes to a lower corner.
        let top_line: Vec<Pt> = (0..200).map(|x| (x as f64, 5.0)).collect();
        let Placement::Inside(_, fy) = place(&block, &plot, &top_line, LegendPosition::Best) else {
            panic!("inside expected");
        };
        assert_eq!(fy, 1.0);
        // The preferred corner wins when it is as good as any.
        let at = place(&block, &plot, &top_line, LegendPosition::LowerLeft);
        assert_eq!(at, Placement::Inside(0.0, 1.0));
        // Data everywhere: below the axes.
        let everywhere: Vec<Pt> = (0..200)
            .flat_map(|x| (0..150).step_by(5).map(move |y| (x as f64, y as f64)))
            .collect();
        assert_eq!(
            place(&block, &plot, &everywhere, LegendPosition::Best),
            Placement::Below
        );
    }

    #[test]
    fn duplicates_merge_and_wide_legends_take_columns() {
        let entries = [entry("a"), entry("a"), entry("b"), entry("c")];
        let block = LegendBlock::across(&entries, 400.0);
        assert_eq!(block.entries.len(), 3);
        assert_eq!(block.columns, 3);
        assert!(block.size().0 <= 400.0);
        let narrow = LegendBlock::across(&entries, 40.0);
        assert_eq!(narrow.columns, 1);
    }
}

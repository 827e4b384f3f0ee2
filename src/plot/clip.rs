//! Clipping in axis coordinates. The SVG writer draws polylines as given, and out-of-range
//! points would be drawn over the labels, so every curve, band and arrow is cut to the plot
//! rectangle first.

pub(super) type Point = (f64, f64);

/// An axis-aligned rectangle `[x0, x1] × [y0, y1]` (x0 ≤ x1, y0 ≤ y1).
#[derive(Debug, Clone, Copy)]
pub(super) struct Rect {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
}

impl Rect {
    pub fn contains(&self, (x, y): Point) -> bool {
        (self.x0..=self.x1).contains(&x) && (self.y0..=self.y1).contains(&y)
    }

    /// The part of segment a→b inside (Liang–Barsky), as parameters `0 ≤ t0 ≤ t1 ≤ 1`.
    fn clip_parameters(&self, a: Point, b: Point) -> Option<(f64, f64)> {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let mut t0: f64 = 0.0;
        let mut t1: f64 = 1.0;
        // Each boundary as p·t ≤ q.
        for (p, q) in [
            (-dx, a.0 - self.x0),
            (dx, self.x1 - a.0),
            (-dy, a.1 - self.y0),
            (dy, self.y1 - a.1),
        ] {
            if p == 0.0 {
                if q < 0.0 {
                    return None;
                }
            } else {
                let t = q / p;
                if p < 0.0 {
                    t0 = t0.max(t);
                } else {
                    t1 = t1.min(t);
                }
            }
        }
        (t0 <= t1).then_some((t0, t1))
    }

    /// The part of segment a→b inside, if any.
    pub fn clip_segment(&self, a: Point, b: Point) -> Option<(Point, Point)> {
        let (t0, t1) = self.clip_parameters(a, b)?;
        let at = |t: f64| {
            if t == 0.0 {
                a
            } else if t == 1.0 {
                b
            } else {
                (a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1))
            }
        };
        Some((at(t0), at(t1)))
    }

    /// The visible pieces of a polyline; a lone point inside stays a one-point piece.
    pub fn clip_polyline(&self, points: &[Point]) -> Vec<Vec<Point>> {
        let mut pieces: Vec<Vec<Point>> = Vec::new();
        let mut current: Vec<Point> = Vec::new();
        if let [only] = points {
            if self.contains(*only) {
                pieces.push(vec![*only]);
            }
            return pieces;
        }
        for pair in points.windows(2) {
            match self.clip_segment(pair[0], pair[1]) {
                Some((a, b)) => {
                    if current.is_empty() {
                        current.push(a);
                    } else if current.last() != Some(&a) {
                        // Re-entered: the segment starts at a new boundary point.
                        pieces.push(std::mem::take(&mut current));
                        current.push(a);
                    }
                    current.push(b);
                    if b != pair[1] {
                        pieces.push(std::mem::take(&mut current));
                    }
                }
                None => {
                    if !current.is_empty() {
                        pieces.push(std::mem::take(&mut current));
                    }
                }
            }
        }
        if !current.is_empty() {
            pieces.push(current);
        }
        pieces
    }

    /// A polygon cut to the rectangle (Sutherland–Hodgman; the rectangle is convex).
    pub fn clip_polygon(&self, polygon: &[Point]) -> Vec<Point> {
        // Each edge: which side is inside, and where a segment crosses it.
        type Inside<'e> = &'e dyn Fn(Point) -> bool;
        type Cross<'e> = &'e dyn Fn(Point, Point) -> Point;
        let edges: [(Inside, Cross); 4] = [
            (&|p| p.0 >= self.x0, &|a, b| cross_vertical(self.x0, a, b)),
            (&|p| p.0 <= self.x1, &|a, b| cross_vertical(self.x1, a, b)),
            (&|p| p.1 >= self.y0, &|a, b| cross_horizontal(self.y0, a, b)),
            (&|p| p.1 <= self.y1, &|a, b| cross_horizontal(self.y1, a, b)),
        ];
        let mut output = polygon.to_vec();
        for (inside, cross) in edges {
            let input = std::mem::take(&mut output);
            let Some(&last) = input.last() else { break };
            let mut previous = last;
            for &point in &input {
                match (inside(previous), inside(point)) {
                    (true, true) => output.push(point),
                    (true, false) => output.push(cross(previous, point)),
                    (false, true) => {
                        output.push(cross(previous, point));
                        output.push(point);
                    }
                    (false, false) => {}
                }
                previous = point;
            }
        }
        output
    }
}

/// Where segment a→b crosses the vertical line at `x` (a and b on opposite sides).
fn cross_vertical(x: f64, a: Point, b: Point) -> Point {
    (x, a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0))
}

/// Where segment a→b crosses the horizontal line at `y` (a and b on opposite sides).
fn cross_horizontal(y: f64, a: Point, b: Point) -> Point {
    (a.0 + (b.0 - a.0) * (y - a.1) / (b.1 - a.1), y)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: Rect = Rect {
        x0: 0.0,
        x1: 1.0,
        y0: 0.0,
        y1: 1.0,
    };

    #[test]
    fn segments_are_cut_at_the_boundary() {
        let (a, b) = UNIT.clip_segment((-1.0, 0.5), (2.0, 0.5)).unwrap();
        assert_eq!((a, b), ((0.0, 0.5), (1.0, 0.5)));
        assert!(UNIT.clip_segment((-1.0, 2.0), (2.0, 2.0)).is_none());
        let (a, b) = UNIT.clip_segment((0.5, 0.5), (0.5, 3.0)).unwrap();
        assert_eq!(a, (0.5, 0.5));
        assert!((b.1 - 1.0).abs() < 1e-15);
    }

    #[test]
    fn polyline_leaving_and_reentering_splits_in_two() {
        let line = [(0.1, 0.5), (0.5, 2.0), (0.9, 0.5), (0.95, 0.6)];
        let pieces = UNIT.clip_polyline(&line);
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert_eq!(pieces[0].len(), 2);
        assert_eq!(pieces[1].len(), 3);
        assert!(pieces.iter().flatten().all(|&p| UNIT.contains(p)));
        assert_eq!(UNIT.clip_polyline(&[(0.5, 0.5)]), vec![vec![(0.5, 0.5)]]);
        assert!(UNIT.clip_polyline(&[(5.0, 0.5)]).is_empty());
    }

    #[test]
    fn polygon_clipping_keeps_the_area_inside() {
        // A square [-1, 2]² clips to the unit square: area 1.
        let big = [(-1.0, -1.0), (2.0, -1.0), (2.0, 2.0), (-1.0, 2.0)];
        let clipped = UNIT.clip_polygon(&big);
        let area: f64 = (0..clipped.len())
            .map(|i| {
                let (a, b) = (clipped[i], clipped[(i + 1) % clipped.len()]);
                a.0 * b.1 - b.0 * a.1
            })
            .sum::<f64>()
            / 2.0;
        assert!((area.abs() - 1.0).abs() < 1e-12, "area {area}");
        assert!(UNIT
            .clip_polygon(&[(3.0, 3.0), (4.0, 3.0), (4.0, 4.0)])
            .is_empty());
    }
}

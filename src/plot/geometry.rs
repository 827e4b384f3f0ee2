//! Rectangles and points on the page, in printed points (y grows downwards).

/// A point on the page.
pub(super) type Pt = (f64, f64);

/// An axis-aligned rectangle on the page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Area {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl Area {
    pub fn new(left: f64, top: f64, right: f64, bottom: f64) -> Self {
        Area {
            left,
            top,
            right,
            bottom,
        }
    }
    /// The rectangle of `width` × `height` whose top-left corner is `(left, top)`.
    pub fn sized(left: f64, top: f64, width: f64, height: f64) -> Self {
        Area::new(left, top, left + width, top + height)
    }
    pub fn width(&self) -> f64 {
        self.right - self.left
    }
    pub fn height(&self) -> f64 {
        self.bottom - self.top
    }
    pub fn center_x(&self) -> f64 {
        (self.left + self.right) / 2.0
    }
    pub fn center_y(&self) -> f64 {
        (self.top + self.bottom) / 2.0
    }
    pub fn contains(&self, (x, y): Pt) -> bool {
        self.left <= x && x <= self.right && self.top <= y && y <= self.bottom
    }
    pub fn intersects(&self, other: &Area) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }
    /// Shrunk by `d` on every side.
    pub fn inset(&self, d: f64) -> Area {
        Area::new(self.left + d, self.top + d, self.right - d, self.bottom - d)
    }
    /// Moved right by `dx` and down by `dy`.
    pub fn shifted(&self, dx: f64, dy: f64) -> Area {
        Area::new(
            self.left + dx,
            self.top + dy,
            self.right + dx,
            self.bottom + dy,
        )
    }
}

/// Points every `step` along a polyline (its vertices included): what a legend or label would
/// hide of it.
pub(super) fn sample_polyline(points: &[Pt], step: f64, out: &mut Vec<Pt>) {
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

/// Points on a grid of spacing at most `step` over a rectangle (a bar).
pub(super) fn sample_area(a: &Area, step: f64, out: &mut Vec<Pt>) {
    let nx = (a.width() / step).ceil().max(1.0) as usize;
    let ny = (a.height() / step).ceil().max(1.0) as usize;
    for i in 0..=nx {
        for j in 0..=ny {
            out.push((
                a.left + a.width() * i as f64 / nx as f64,
                a.top + a.height() * j as f64 / ny as f64,
            ));
        }
    }
}

/// The polyline with the points that change it by less than `tolerance` removed
/// (Ramer–Douglas–Peucker): every point that sticks out by more — peaks, corners, extremes —
/// stays, so at a tolerance well under the line width the drawing does not change.
pub(super) fn simplify(points: &[Pt], tolerance: f64) -> Vec<Pt> {
    if points.len() < 3 {
        return points.to_vec();
    }
    let mut keep = vec![false; points.len()];
    keep[0] = true;
    keep[points.len() - 1] = true;
    let mut stack = vec![(0, points.len() - 1)];
    while let Some((first, last)) = stack.pop() {
        let (a, b) = (points[first], points[last]);
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let length = dx.hypot(dy);
        let distance = |p: Pt| {
            if length == 0.0 {
                (p.0 - a.0).hypot(p.1 - a.1)
            } else {
                ((p.0 - a.0) * dy - (p.1 - a.1) * dx).abs() / length
            }
        };
        let farthest = (first + 1..last)
            .map(|i| (i, distance(points[i])))
            .max_by(|x, y| x.1.total_cmp(&y.1));
        if let Some((i, d)) = farthest {
            if d > tolerance {
                keep[i] = true;
                stack.push((first, i));
                stack.push((i, last));
            }
        }
    }
    points
        .iter()
        .zip(keep)
        .filter_map(|(&p, k)| k.then_some(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simplification_keeps_peaks_and_drops_straight_runs() {
        let line: Vec<Pt> = (0..1000).map(|i| (i as f64 * 0.1, 5.0)).collect();
        assert_eq!(simplify(&line, 0.05), vec![(0.0, 5.0), (99.9, 5.0)]);
        let mut spike = line.clone();
        spike[500].1 = 40.0;
        let kept = simplify(&spike, 0.05);
        assert!(kept.contains(&(50.0, 40.0)), "{kept:?}");
        assert!(kept.len() <= 5);
        // A smooth curve keeps few points but stays within the tolerance.
        let curve: Vec<Pt> = (0..5000)
            .map(|i| {
                let x = i as f64 * 0.04;
                (x, 50.0 + 30.0 * (x / 20.0).sin())
            })
            .collect();
        let kept = simplify(&curve, 0.05);
        assert!(kept.len() < 300, "{} points", kept.len());
    }

    #[test]
    fn samples_cover_lines_and_areas() {
        let mut out = Vec::new();
        sample_polyline(&[(0.0, 0.0), (10.0, 0.0)], 1.0, &mut out);
        assert_eq!(out.len(), 11);
        out.clear();
        sample_area(&Area::new(0.0, 0.0, 2.0, 2.0), 1.0, &mut out);
        assert_eq!(out.len(), 9);
        let a = Area::sized(1.0, 2.0, 3.0, 4.0);
        assert_eq!((a.right, a.bottom, a.center_x()), (4.0, 6.0, 2.5));
        assert!(a.intersects(&a.shifted(1.0, 1.0)) && !a.intersects(&a.shifted(3.0, 0.0)));
    }
}

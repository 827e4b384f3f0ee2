//! The phase portrait of the Theorem 2 system, shared by the scenarios that draw it: the
//! invariant lines y = ρx (unstable manifold of the saddle) and y = −ρ̄x (its stable manifold,
//! the bad line), the physical boundary g = x² + c − y² = 0, the stationary points, the
//! direction field, and the trajectories (numerics solid, closed form dashed).

use crate::flow::VectorField;
use crate::models::histogram::Thm2System;
use crate::plot::{Arrow, LegendPosition, LinePanel, LineStyle, Series};
use crate::stats;

/// A trajectory to draw: integrated (solid) and closed form (dashed).
pub struct PhaseTrajectory {
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub closed_x: Vec<f64>,
    pub closed_y: Vec<f64>,
}

/// The phase portrait panel on a square window that contains the trajectories and the nodes.
pub fn phase_portrait(sys: &Thm2System, trajectories: &[PhaseTrajectory]) -> LinePanel {
    let imb = sys.imbalance();
    let finite_max = |v: &[f64]| stats::max_abs(v.iter().filter(|x| x.is_finite()));
    let extent = stats::max_with(
        imb.rho.sqrt() * 1.3,
        trajectories
            .iter()
            .map(|t| finite_max(&t.x).max(finite_max(&t.y))),
    )
    .min(1e3)
        * 1.05;
    let mut panel = LinePanel::new(
        format!("phase portrait (c = {}, c₁ = {})", sys.c, sys.c1),
        "x",
        "y",
    )
    .x_range(-extent, extent)
    .y_range(-extent, extent)
    .legend(emptiest_corner(trajectories));
    let line = |slope: f64| {
        // the segment of y = slope·x inside the window
        let xe = extent / slope.abs().max(1.0);
        (vec![-xe, xe], vec![-slope * xe, slope * xe])
    };
    let (x, y) = line(imb.rho);
    panel =
        panel.series(Series::new("y = ρx (unstable manifold)", x, y, LineStyle::Dotted).color(2));
    let (x, y) = line(-imb.rhob);
    panel =
        panel.series(Series::new("y = −ρ̄x (bad line, L = 0)", x, y, LineStyle::Dotted).color(6));
    // g = 0: y = ±√(x² + c), drawn as four branches with a shared label on the first
    for (i, (sx, sy)) in [(1.0, 1.0), (-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0)]
        .into_iter()
        .enumerate()
    {
        let (xs, ys): (Vec<f64>, Vec<f64>) = (0..=200)
            .map(|k| extent * k as f64 / 200.0)
            .filter(|x| x * x + sys.c >= 0.0)
            .map(|x| (sx * x, sy * (x * x + sys.c).sqrt()))
            .unzip();
        let label = if i == 0 {
            "g = 0 (physical boundary)"
        } else {
            ""
        };
        panel = panel.series(Series::new(label, xs, ys, LineStyle::Dashed).color(5));
    }
    let fps = sys.fixed_points();
    panel = panel.series(
        Series::new(
            "stationary points",
            fps.iter().map(|f| f.x).collect(),
            fps.iter().map(|f| f.y).collect(),
            LineStyle::Markers,
        )
        .color(4),
    );
    for (i, t) in trajectories.iter().enumerate() {
        let first = i == 0;
        panel = panel
            .series(
                Series::numerics(if first { "ODE" } else { "" }, t.x.clone(), t.y.clone()).color(0),
            )
            .series(
                Series::theory(
                    if first { "closed form" } else { "" },
                    t.closed_x.clone(),
                    t.closed_y.clone(),
                )
                .color(1),
            );
    }
    // direction field: unit arrows of length extent/14 on an 11×11 grid
    let mut dz = [0.0f64; 2];
    let h = extent / 14.0;
    for i in 0..11 {
        for j in 0..11 {
            let x = -extent + 2.0 * extent * (i as f64 + 0.5) / 11.0;
            let y = -extent + 2.0 * extent * (j as f64 + 0.5) / 11.0;
            sys.rhs(0.0, &[x, y], &mut dz);
            let n = dz[0].hypot(dz[1]);
            if n > 0.0 && n.is_finite() {
                panel = panel.arrow(Arrow {
                    from: (x, y),
                    to: (x + h * dz[0] / n, y + h * dz[1] / n),
                });
            }
        }
    }
    panel
}

/// The legend goes into the quadrant the trajectories visit least.
fn emptiest_corner(trajectories: &[PhaseTrajectory]) -> LegendPosition {
    let mut count = [0usize; 4];
    for t in trajectories {
        for (x, y) in t.x.iter().zip(&t.y) {
            let i = usize::from(*x < 0.0) + 2 * usize::from(*y < 0.0);
            count[i] += 1;
        }
    }
    let corners = [
        LegendPosition::UpperRight,
        LegendPosition::UpperLeft,
        LegendPosition::LowerRight,
        LegendPosition::LowerLeft,
    ];
    let best = (0..4).min_by_key(|&i| count[i]).unwrap_or(0);
    corners[best]
}

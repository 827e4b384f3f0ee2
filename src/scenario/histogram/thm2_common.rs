//! Shared by the Theorem 2 scenarios (`thm2-closed-form`, `thm2-limits`): the grid of systems
//! and initial points of spec 000 R8's recipe, the comparison of one integrated trajectory with
//! the closed form, and the summing of solver statistics over many small integrations.

use serde::{Deserialize, Serialize};

use crate::flow::{integrate, linspace, OdeConfig, SolverStats, Trajectory};
use crate::models::histogram::{Thm2ClosedForm, Thm2System};
use crate::scenario::param::{NonEmpty, Positive};
use crate::scenario::{InputError, RunError, Scenario};

use crate::scenario::param::Nonzero;
use crate::stats;

/// The grid of spec 000 R8: every c × every c_1 × an n × n grid of (x_0, y_0) on
/// [−half_width, half_width]², plus the special initial points of [`special_points`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thm2Grid {
    /// Imbalance constants c.
    pub c: NonEmpty<f64>,
    /// Time scales c_1 > 0.
    pub c1: NonEmpty<Positive>,
    /// Points per axis of the (x_0, y_0) grid (0 = special points only).
    pub points: usize,
    /// The (x_0, y_0) grid covers [−half_width, half_width]².
    pub half_width: Positive,
    /// x_0 of the special points (x_0 = 0, y_0 = 0, K = 0, L = 0, L = ±1e-6); nonzero, else
    /// K = 0 and L = 0 would both be the origin.
    pub special_x0: Nonzero,
}

/// One system and initial point of the grid.
#[derive(Debug, Clone, Copy)]
pub struct Thm2Case {
    pub sys: Thm2System,
    pub x0: f64,
    pub y0: f64,
    /// Which special point this is ("grid" for the regular grid).
    pub kind: &'static str,
}

impl Thm2Case {
    pub fn closed_form(&self) -> Thm2ClosedForm {
        self.sys.closed_form(self.x0, self.y0)
    }
}

/// "c = …, c1 = …, (x0, y0) = (…, …) [kind]" for check notes.
pub fn describe(case: &Thm2Case) -> String {
    format!(
        "c = {}, c1 = {}, (x0, y0) = ({:.4}, {:.4}) [{}]",
        case.sys.c, case.sys.c1, case.x0, case.y0, case.kind
    )
}

/// Offset from the bad line of the "near the bad line" special points (spec 000 R8).
pub const NEAR_BAD_LINE: f64 = 1e-6;

impl Thm2Grid {
    /// A grid needs 0 or ≥ 2 points per axis; `key` is the parameter's path for messages.
    pub fn validate(&self, sc: &Scenario, key: &str) -> Result<(), InputError> {
        if self.points == 1 {
            return Err(sc.invalid(
                &format!("{key}.points"),
                "a grid needs 0 or ≥ 2 points per axis",
            ));
        }
        Ok(())
    }

    /// How many cases [`Thm2Grid::cases`] makes (counted without building them).
    pub fn case_count(&self) -> f64 {
        let systems = (self.c.len() * self.c1.len()) as f64;
        systems * ((self.points as f64).powi(2) + SPECIAL_POINTS as f64)
    }

    /// All cases, system by system.
    pub fn cases(&self) -> Vec<Thm2Case> {
        let axis = linspace(-*self.half_width, *self.half_width, self.points);
        let mut cases = Vec::new();
        for &c in &*self.c {
            for &c1 in &*self.c1 {
                let sys = Thm2System { c, c1: *c1 };
                for &y0 in &axis {
                    for &x0 in &axis {
                        cases.push(Thm2Case {
                            sys,
                            x0,
                            y0,
                            kind: "grid",
                        });
                    }
                }
                cases.extend(special_points(sys, *self.special_x0));
            }
        }
        cases
    }
}

/// The special points of spec 000 R8 for one system: x_0 = 0, y_0 = 0, K = 0 (y_0 = ρx_0, the
/// unstable manifold), L = 0 (y_0 = −ρ̄x_0, the stable manifold of the saddle) and L = ±1e-6.
/// The products are plain (not fused), so K and L are exactly 0 where intended.
pub fn special_points(sys: Thm2System, x0: f64) -> Vec<Thm2Case> {
    let imb = sys.imbalance();
    let on_bad_line = -(imb.rhob * x0);
    let case = |x0, y0, kind| Thm2Case { sys, x0, y0, kind };
    vec![
        case(0.0, x0, "x0 = 0"),
        case(x0, 0.0, "y0 = 0"),
        case(x0, imb.rho * x0, "K = 0"),
        case(x0, on_bad_line, "L = 0"),
        case(x0, on_bad_line + NEAR_BAD_LINE, "L = +1e-6"),
        case(x0, on_bad_line - NEAR_BAD_LINE, "L = -1e-6"),
    ]
}

/// How many special points [`special_points`] gives per system.
const SPECIAL_POINTS: usize = 6;

/// How far one integrated trajectory is from the closed form.
pub struct Comparison {
    /// max over the compared samples of max(|x − x_cf|, |y − y_cf|).
    pub max_error: f64,
    /// The compared window is t ∈ [0, t_compared].
    pub t_compared: f64,
    pub trajectory: Trajectory,
}

/// The window on which an integration from the bad line L = 0 can be compared with the closed
/// form. The saddle repels at rate c_1ρ̄, so solver error ε grows like εe^{c_1ρ̄t} and the
/// numerical trajectory escapes after ≈ ln(1/ε)/(c_1ρ̄) (spec 000 §7.4). The spec's window
/// 5/(c_1ρ) is safe only when ρ̄ ≤ ρ-ish: at c = −3 it means c_1ρ̄t = 54. So the window is also
/// capped at an amplification e^{max_growth}.
pub fn bad_line_window(sys: Thm2System, max_growth: f64) -> f64 {
    let imb = sys.imbalance();
    (5.0 / imb.rho).min(max_growth / imb.rhob) / sys.c1
}

/// Integrates the case on `times` and compares it with the closed form on t ≤ `t_compared`.
pub fn compare_with_closed_form(
    case: &Thm2Case,
    times: &[f64],
    t_compared: f64,
    ode: &OdeConfig,
) -> Result<Comparison, RunError> {
    let cf = case.closed_form();
    let trajectory = integrate(&case.sys, &[case.x0, case.y0], times, ode, None)?;
    let max_error = stats::max(
        (0..trajectory.len())
            .filter(|&k| trajectory.t[k] <= t_compared)
            .map(|k| {
                let s = cf.at(trajectory.t[k]);
                let z = trajectory.state(k);
                stats::larger((z[0] - s.x).abs(), (z[1] - s.y).abs())
            }),
    );
    Ok(Comparison {
        max_error,
        t_compared,
        trajectory,
    })
}

/// Sums the work of many integrations into one record (wall time and counts add up).
pub fn add_stats(total: &mut SolverStats, s: &SolverStats) {
    if total.method.is_empty() {
        total.method = s.method.clone();
    }
    total.steps += s.steps;
    total.rhs_evals += s.rhs_evals;
    total.jvp_evals += s.jvp_evals;
    total.linear_solver_setups += s.linear_solver_setups;
    total.error_test_failures += s.error_test_failures;
    total.nonlinear_iterations += s.nonlinear_iterations;
    total.nonlinear_failures += s.nonlinear_failures;
    total.wall_seconds += s.wall_seconds;
}

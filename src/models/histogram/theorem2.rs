//! Theorem 2's scaled 2-D system ẋ = c_1(y − x³ − cx), ẏ = c_1(x − x²y) (spec 000 §2.5d, R8) and
//! its complete closed form (spec 000 §2.6, derived).
//!
//! For a df column i: x = v_i/√μ_i, y = p_i/μ_i^{3/2} (p_i = q_iᵀm_i), c = δ_i = β_i/μ_i,
//! c_1 = μ_i. Constants: ρ = √(1+c²/4) + c/2, ρ̄ = 1/ρ, A = (ρ+ρ̄)/2 (spec 000 §0).
//!
//! The closed form is written without cancellation: with τ = c_1t, w = e^{−2Aτ},
//! E = (e^{−2ρ̄τ} − w)/c (E = τw at c = 0, always evaluated through expm1 of a negative argument),
//! K = ρx_0 − y_0, L = ρ̄x_0 + y_0, g_0 = x_0² + c − y_0²:
//!
//! ```text
//! W = w(1 − x_0y_0) + g_0E
//! D = ρL²(1 − w) + w(ρ̄K²(1 − w) + 4A²) + 4A²g_0E        (> 0; a sum of non-negative terms if g_0 ≥ 0)
//! x = (L + Kw)/√D,  y = (ρL − ρ̄Kw)/√D
//! 1 − xy = 4A²W/D
//! ρ̄ − x² = [w(4A²(ρ̄ − x_0²) + (1 + ρ̄²)K²(1 − w)) + 4A²ρ̄g_0E]/D
//! g = x² + c − y² = 4A²g_0e^{−2ρ̄τ}/D,   ‖q⊥(t)‖/‖q⊥(0)‖ = 2Ae^{−ρ̄τ}/√D
//! ```
//!
//! D here is the spec's D(t) = (ρL − ρ̄Kw)(L + Kw) + 4A²W expanded: the cross terms cancel
//! exactly, which removes the spec form's cancellation when |x_0y_0| is large (D(0) = 4A²
//! exactly). The ρ̄ − x² numerator is the spec's 4A²ρ̄W − (1 + ρ̄²)Kw(L + Kw) regrouped the same
//! way. On the bad
//! line L = 0 everything is divided through by e^{−2ρ̄τ} analytically, so nothing underflows.

use super::brent_root;
use super::HistogramError;
use crate::flow::VectorField;

/// ρ, ρ̄, A of an imbalance δ (spec 000 §0), computed without cancellation for large |δ|:
/// A = hypot(1, δ/2); the larger of ρ, ρ̄ is A + |δ|/2 and the other its reciprocal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Imbalance {
    /// δ (Theorem 2's c).
    pub delta: f64,
    /// ρ = √(1+δ²/4) + δ/2.
    pub rho: f64,
    /// ρ̄ = 1/ρ = √(1+δ²/4) − δ/2.
    pub rhob: f64,
    /// A = (ρ + ρ̄)/2 = √(1+δ²/4) (the paper's a of Theorem 2).
    pub a: f64,
}

impl Imbalance {
    /// The constants of δ (spec 000 §0 numerics).
    pub fn new(delta: f64) -> Self {
        let a = 1f64.hypot(0.5 * delta);
        let large = a + 0.5 * delta.abs();
        let (rho, rhob) = if delta >= 0.0 {
            (large, 1.0 / large)
        } else {
            (1.0 / large, large)
        };
        Self {
            delta,
            rho,
            rhob,
            a,
        }
    }
}

/// Type of a stationary point of the scaled system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixedPointKind {
    /// The origin: one unstable and one stable direction.
    Saddle,
    /// ±(√ρ̄, √ρ): both eigenvalues negative (improper node at c = 0).
    StableNode,
}

/// A stationary point with the eigen-decomposition of its Jacobian (spec 000 R8, derived).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thm2FixedPoint {
    pub x: f64,
    pub y: f64,
    pub kind: FixedPointKind,
    /// Eigenvalues of the Jacobian.
    pub eigenvalues: [f64; 2],
    /// Eigenvectors (x, y), in the order of `eigenvalues`.
    pub eigenvectors: [[f64; 2]; 2],
}

/// Theorem 2's system ẋ = c_1(y − x³ − cx), ẏ = c_1(x − x²y), c_1 > 0 (spec 000 §2.5d, eq. 2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thm2System {
    /// The imbalance constant c (= δ_i for a df column).
    pub c: f64,
    /// The time scale c_1 > 0 (= μ_i for a df column).
    pub c1: f64,
}

impl Thm2System {
    /// ρ, ρ̄, A of c.
    pub fn imbalance(&self) -> Imbalance {
        Imbalance::new(self.c)
    }

    /// The Jacobian `c_1 [[−3x² − c, 1], [1 − 2xy, −x²]]` (row-major).
    pub fn jacobian(&self, x: f64, y: f64) -> [[f64; 2]; 2] {
        let c1 = self.c1;
        [
            [c1 * (-3.0 * x * x - self.c), c1],
            [c1 * (1.0 - 2.0 * x * y), -c1 * x * x],
        ]
    }

    /// The three stationary points (spec 000 R8): the origin, a saddle with eigenvalues +c_1ρ̄
    /// (eigenvector (1, ρ)) and −c_1ρ (eigenvector (1, −ρ̄), the whole stable manifold); and
    /// ±(√ρ̄, √ρ), stable nodes with eigenvalues −2ρ̄c_1 (eigenvector (1, ρ)) and −2Ac_1
    /// (eigenvector (1, ρ̄), tangent to g = 0). No others exist.
    pub fn fixed_points(&self) -> [Thm2FixedPoint; 3] {
        let Imbalance { rho, rhob, a, .. } = self.imbalance();
        let c1 = self.c1;
        let node = |sign: f64| Thm2FixedPoint {
            x: sign * rhob.sqrt(),
            y: sign * rho.sqrt(),
            kind: FixedPointKind::StableNode,
            eigenvalues: [-2.0 * rhob * c1, -2.0 * a * c1],
            eigenvectors: [[1.0, rho], [1.0, rhob]],
        };
        [
            Thm2FixedPoint {
                x: 0.0,
                y: 0.0,
                kind: FixedPointKind::Saddle,
                eigenvalues: [c1 * rhob, -c1 * rho],
                eigenvectors: [[1.0, rho], [1.0, -rhob]],
            },
            node(1.0),
            node(-1.0),
        ]
    }

    /// The corrected decay rate of the residues |ρ̄ − x²|, |1 − xy|: 2 min(ρ̄, A) c_1 (spec 000
    /// R8, E7). For c = 0 the decay carries an extra factor t (t e^{−2c_1t}).
    pub fn residue_rate(&self) -> f64 {
        let imb = self.imbalance();
        2.0 * imb.rhob.min(imb.a) * self.c1
    }

    /// The rate Theorem 2 claims, 2ρ̄c_1; wrong for c < 0 where ρ̄ > A (spec 000 E7). Reported
    /// beside [`Self::residue_rate`], never asserted.
    pub fn paper_residue_rate(&self) -> f64 {
        2.0 * self.imbalance().rhob * self.c1
    }

    /// The closed-form solution from (x_0, y_0) ∈ ℝ² (g_0 = x_0² + c − y_0²).
    pub fn closed_form(&self, x0: f64, y0: f64) -> Thm2ClosedForm {
        let g0 = (x0 - y0) * (x0 + y0) + self.c;
        Thm2ClosedForm::with_g0(*self, x0, y0, g0)
    }
}

impl VectorField for Thm2System {
    fn dim(&self) -> usize {
        2
    }

    fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
        let (x, y) = (z[0], z[1]);
        dz[0] = self.c1 * (y - x * x * x - self.c * x);
        dz[1] = self.c1 * (x - x * x * y);
    }

    fn jvp(&self, _t: f64, z: &[f64], u: &[f64], out: &mut [f64]) {
        let j = self.jacobian(z[0], z[1]);
        out[0] = j[0][0] * u[0] + j[0][1] * u[1];
        out[1] = j[1][0] * u[0] + j[1][1] * u[1];
    }
}

/// The state of the scaled system at one time, with its residues computed without
/// cancellation (spec 000 §2.6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thm2State {
    pub x: f64,
    pub y: f64,
    /// 1 − xy.
    pub one_minus_xy: f64,
    /// ρ̄ − x².
    pub rhob_minus_x2: f64,
    /// g = x² + c − y² (= ‖q⊥‖²/μ for a df column; ġ = −2c_1x²g).
    pub g: f64,
    /// ‖q⊥(t)‖/‖q⊥(0)‖ of the df column (q⊥ keeps its direction).
    pub q_perp_ratio: f64,
    /// ½c_1²\[(1 − xy)² + x²g\]: the exact df column loss when c_1 = μ (spec 000 §2.6).
    pub loss: f64,
}

/// The closed-form trajectory of [`Thm2System`] from one initial point (spec 000 §2.6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thm2ClosedForm {
    sys: Thm2System,
    imb: Imbalance,
    x0: f64,
    y0: f64,
    g0: f64,
    k: f64,
    l: f64,
    one_minus_x0y0: f64,
    rhob_minus_x0sq: f64,
}

impl Thm2ClosedForm {
    /// The solution from (x_0, y_0) with g_0 = x_0² + c − y_0² supplied by the caller: a df column
    /// knows g_0 = ‖q⊥(0)‖²/μ exactly, while x_0² + c − y_0² would cancel when q⊥(0) is small.
    pub fn with_g0(sys: Thm2System, x0: f64, y0: f64, g0: f64) -> Self {
        let imb = sys.imbalance();
        Self {
            sys,
            imb,
            x0,
            y0,
            g0,
            // Plain products (not fused) so that y_0 = −(ρ̄·x_0) gives L = 0 exactly.
            k: imb.rho * x0 - y0,
            l: imb.rhob * x0 + y0,
            one_minus_x0y0: (-x0).mul_add(y0, 1.0),
            rhob_minus_x0sq: (-x0).mul_add(x0, imb.rhob),
        }
    }

    /// The system.
    pub fn system(&self) -> Thm2System {
        self.sys
    }

    /// ρ, ρ̄, A.
    pub fn imbalance(&self) -> Imbalance {
        self.imb
    }

    /// (x_0, y_0).
    pub fn initial(&self) -> (f64, f64) {
        (self.x0, self.y0)
    }

    /// g_0 = x_0² + c − y_0².
    pub fn g0(&self) -> f64 {
        self.g0
    }

    /// K = ρx_0 − y_0 (ρx − y = 2AKw/√D keeps its sign).
    pub fn k(&self) -> f64 {
        self.k
    }

    /// L = ρ̄x_0 + y_0 (ρ̄x + y = 2AL/√D keeps its sign); L = 0 is the bad line.
    pub fn l(&self) -> f64 {
        self.l
    }

    /// c_2 = L/K of the proof (spec 000 R8).
    pub fn c2(&self) -> f64 {
        self.l / self.k
    }

    /// The state at time t ≥ 0 (spec 000 §2.6), finite for every t (no overflow; residues
    /// underflow gracefully to 0 only below ~1e-308).
    pub fn at(&self, t: f64) -> Thm2State {
        let Imbalance { rho, rhob, a, .. } = self.imb;
        let (c, c1) = (self.sys.c, self.sys.c1);
        let tau = c1 * t;
        let (x, y, one_minus_xy, rhob_minus_x2, g, q_perp_ratio);
        if self.l == 0.0 {
            // Bad line y = −ρ̄x: D = 4A²e^{−2ρ̄τ}S with S = 1 − ρ̄x_0² expm1(−2ρτ) ≥ 1.
            let s = 1.0 - rhob * self.x0 * self.x0 * (-2.0 * rho * tau).exp_m1();
            x = self.x0 * (-rho * tau).exp() / s.sqrt();
            y = -rhob * x;
            one_minus_xy = rhob.mul_add(x * x, 1.0);
            rhob_minus_x2 = (-x).mul_add(x, rhob);
            g = self.g0 / s;
            q_perp_ratio = 1.0 / s.sqrt();
        } else {
            let w = (-2.0 * a * tau).exp();
            let one_minus_w = -(-2.0 * a * tau).exp_m1();
            let slow = (-2.0 * rhob * tau).exp();
            let e = if c > 0.0 {
                slow * (-(-c * tau).exp_m1()) / c
            } else if c < 0.0 {
                w * (c * tau).exp_m1() / c
            } else {
                tau * w
            };
            let four_a2 = 4.0 * a * a;
            let big_w = w * self.one_minus_x0y0 + self.g0 * e;
            let dd = rho * self.l * self.l * one_minus_w
                + w * (rhob * self.k * self.k * one_minus_w + four_a2)
                + four_a2 * self.g0 * e;
            let sqrt_d = dd.sqrt();
            x = (self.l + self.k * w) / sqrt_d;
            y = (rho * self.l - rhob * self.k * w) / sqrt_d;
            one_minus_xy = four_a2 * big_w / dd;
            rhob_minus_x2 = (w
                * (four_a2 * self.rhob_minus_x0sq
                    + (1.0 + rhob * rhob) * self.k * self.k * one_minus_w)
                + four_a2 * rhob * self.g0 * e)
                / dd;
            g = four_a2 * self.g0 * slow / dd;
            q_perp_ratio = 2.0 * a * (-rhob * tau).exp() / sqrt_d;
        }
        Thm2State {
            x,
            y,
            one_minus_xy,
            rhob_minus_x2,
            g,
            q_perp_ratio,
            loss: 0.5 * c1 * c1 * (one_minus_xy * one_minus_xy + x * x * g),
        }
    }

    /// The limit (spec 000 R8, sign rule derived): sign(L)·(√ρ̄, √ρ) if L ≠ 0, else (0, 0).
    /// (The paper prints "(x∞², y∞²) = (√ρ̄, √ρ)" and gives no sign, E4, E13.)
    pub fn limit(&self) -> (f64, f64) {
        if self.l == 0.0 {
            (0.0, 0.0)
        } else {
            let sign = self.l.signum();
            (sign * self.imb.rhob.sqrt(), sign * self.imb.rho.sqrt())
        }
    }

    /// (t_x, t_y): the time at which x crosses 0 (case r_0 < −ρ̄: t_x = −ln(−c_2)/(2Ac_1) for
    /// −c_2 ∈ (0, 1)) and at which y crosses 0 (case −ρ̄ < r_0 ≤ 0: t_y = −ln(ρ²c_2)/(2Ac_1) for
    /// ρ²c_2 ∈ (0, 1]) (spec 000 R8). At most one exists.
    pub fn sign_change_times(&self) -> (Option<f64>, Option<f64>) {
        let Imbalance { rho, a, .. } = self.imb;
        let rate = 2.0 * a * self.sys.c1;
        if self.l == 0.0 || self.k == 0.0 {
            return (None, None);
        }
        let (abs_l, abs_k) = (self.l.abs(), self.k.abs());
        if self.l.signum() != self.k.signum() {
            let t_x = (abs_l < abs_k).then(|| (abs_k.ln() - abs_l.ln()) / rate);
            (t_x, None)
        } else {
            let t_y =
                (rho * rho * abs_l <= abs_k).then(|| -(rho * rho * (abs_l / abs_k)).ln() / rate);
            (None, t_y)
        }
    }

    /// The onset time T = max(0, t_x, t_y) after which xy > 0 and r = y/x moves monotonically
    /// to ρ (spec 000 R8 fix); ∞ on the bad line L = 0.
    pub fn onset_time(&self) -> f64 {
        if self.l == 0.0 {
            return f64::INFINITY;
        }
        let (t_x, t_y) = self.sign_change_times();
        t_x.or(t_y).unwrap_or(0.0).max(0.0)
    }

    /// T as printed in Theorem 2, for reporting only (spec 000 E6): 2Ac_1T = −ln|L/K| if
    /// −ρ̄x_0 > y_0; −ln(L/K) + ln ρ² if −ρ̄x_0 < y_0 < 0; 0 otherwise. The "+ ln ρ²" should be
    /// "− ln ρ²" and the conditions assume x_0 > 0; NaN where the printed log is undefined.
    pub fn paper_onset_time(&self) -> f64 {
        let Imbalance { rho, rhob, a, .. } = self.imb;
        let rate = 2.0 * a * self.sys.c1;
        let c2 = self.c2();
        if -rhob * self.x0 > self.y0 {
            -c2.abs().ln() / rate
        } else if self.y0 < 0.0 {
            (-c2.ln() + (rho * rho).ln()) / rate
        } else {
            0.0
        }
    }

    /// The Riccati ratio r = y/x = ρ − 2A/(c_2e^{2Ac_1t} + 1), written as (ρL − ρ̄Kw)/(L + Kw)
    /// (spec 000 §2.5g, R12); it has a pole at t_x when r_0 < −ρ̄.
    pub fn riccati_r(&self, t: f64) -> f64 {
        let Imbalance { rho, rhob, a, .. } = self.imb;
        let w = (-2.0 * a * self.sys.c1 * t).exp();
        (rho * self.l - rhob * self.k * w) / (self.l + self.k * w)
    }

    /// s = (1 − xy)/((ρx − y)(ρ̄x + y)) = ((1 + cs_0)e^{cc_1t} − 1)/c, evaluated as
    /// s_0e^{cc_1t} + expm1(cc_1t)/c (s_0 + c_1t at c = 0) (spec 000 §2.5h, R12).
    pub fn s(&self, t: f64) -> f64 {
        let (c, tau) = (self.sys.c, self.sys.c1 * t);
        let s0 = self.one_minus_x0y0 / (self.k * self.l);
        if c == 0.0 {
            s0 + tau
        } else {
            s0 * (c * tau).exp() + (c * tau).exp_m1() / c
        }
    }

    /// The decay rate of the loss ½c_1²\[(1 − xy)² + x²g\]: 2ρ̄c_1 (slow mode through g, any sign of
    /// c; spec 000 R9, E7), or 4Ac_1 when g_0 = 0 (physical boundary: the slow mode is absent).
    pub fn loss_rate(&self) -> f64 {
        if self.g0 == 0.0 {
            4.0 * self.imb.a * self.sys.c1
        } else {
            2.0 * self.imb.rhob * self.sys.c1
        }
    }

    /// Small-init estimate of the time at which xy = ½: ln(4A²/(ρL²))/(2Ac_1) (spec 000 D3).
    pub fn half_time_estimate(&self) -> f64 {
        let Imbalance { rho, a, .. } = self.imb;
        (4.0 * a * a / (rho * self.l * self.l)).ln() / (2.0 * a * self.sys.c1)
    }

    /// The first time at which xy = ½ (1 − xy = ½, i.e. D = 8A²W, spec 000 D3), found by Brent on
    /// the closed form. Requires 1 − x_0y_0 > ½ and L ≠ 0.
    pub fn half_time(&self) -> Result<f64, HistogramError> {
        if self.one_minus_x0y0 <= 0.5 || self.l == 0.0 {
            return Err(HistogramError::NoSolution(
                "xy = ½ is reached only from 1 − x_0y_0 > ½ off the bad line".into(),
            ));
        }
        let f = |t: f64| self.at(t).one_minus_xy - 0.5;
        // Scan on a grid finer than the escape scale 1/(2Ac_1) so that the first crossing is
        // bracketed.
        let step = 0.25 / (self.imb.a * self.sys.c1);
        let mut lo = 0.0;
        for _ in 0..1_000_000 {
            let hi = lo + step;
            if f(hi) <= 0.0 {
                return brent_root(f, lo, hi, 1e-14 * hi.max(1.0));
            }
            lo = hi;
        }
        Err(HistogramError::NoSolution("xy did not reach ½".into()))
    }
}

#[cfg(test)]
#[path = "theorem2_tests.rs"]
mod tests;

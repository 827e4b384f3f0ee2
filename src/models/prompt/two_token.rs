//! The reduced two-token model (C-2tok) of spec 002 §1.5, §2.7: n = 2 tokens under A2, so each
//! sample evolves on its own through the logit difference u_i = w_i1 − w_i2, with s_i = σ(u_i)
//! the attention on token 1, δ_i = a_i1 − a_i2 and s_i* = (y_i − a_i2)/δ_i ∈ (0, 1):
//!
//!   u̇_i = −c_i s_i(1 − s_i)(s_i − s_i*),   ṡ_i = −c_i s_i²(1 − s_i)²(s_i − s_i*),   c_i = 2δ_i²/N,
//!
//! the gradient flow u̇ = −2∇_u L of L = (1/N)Σ ½δ_i²(s_i − s_i*)² (the factor 2 because
//! u = w₁ − w₂ and ẇ = −∇_w L under A2). Its equilibrium is u_i* = ln(s_i*/(1 − s_i*)) = ±ln R_i*,
//! where the linear rate is λ_i = c_i(s_i*(1 − s_i*))² = c_i R_i²/(1 + R_i)⁴ ≈ c_i/R_i² ("rate ∝ R⁻²").
//!
//! Numerics: s − s* is never formed by subtraction: with x = u − u* and 1 − s = 1/(1 + e^u),
//! s − s* = s*(1 − s)·expm1(x) exactly, so the velocity keeps full relative accuracy near u*
//! and the state can be the deviation x itself ([`TwoToken::deviation`]), in which the tail
//! decays to 1e−300 without losing digits.
//!
//! The closed form ([`ClosedForm`]) is the implicit solution t(s) = −(F(s) − F(s₀))/c with the
//! partial fractions F of spec §2.7; s(t) is found by Newton on y = ln|s − s*| (dF/dy =
//! 1/(s²(1 − s)²) > 0, so the root is unique and bracketed).

use crate::flow::VectorField;

/// (s, 1 − s) = (σ(u), σ(−u)) without cancellation, generic over dual numbers.
fn sigmoid_pair(u: f64) -> (f64, f64) {
    if u >= 0.0 {
        let e = (-u).exp();
        let inv = 1.0 / (e + 1.0);
        (inv, e * inv)
    } else {
        let e = u.exp();
        let inv = 1.0 / (e + 1.0);
        (e * inv, inv)
    }
}

/// u̇ of one sample as a function of its logit difference u, with x = u − u* the deviation
/// (passed separately so that it keeps its relative accuracy): −c s*·s(1 − s)²·expm1(x).
pub fn velocity(u: f64, x: f64, c: f64, s_star: f64) -> f64 {
    let (s, q) = sigmoid_pair(u);
    -(s * q * q * x.exp_m1()) * (c * s_star)
}

/// d u̇/du of one sample: −c s*·s(1 − s)²·[(1 − s)·expm1(x) − 2s·expm1(x) + eˣ].
pub fn velocity_derivative(u: f64, x: f64, c: f64, s_star: f64) -> f64 {
    let (s, q) = sigmoid_pair(u);
    let m = x.exp_m1();
    -c * s_star * s * q * q * (q * m - 2.0 * s * m + x.exp())
}

/// λ = c(s*(1 − s*))², the linear rate at u* (spec §2.7).
pub fn tail_rate(c: f64, s_star: f64) -> f64 {
    c * (s_star * (1.0 - s_star)).powi(2)
}

/// λ as a function of the attention ratio R = s*/(1 − s*) at the equilibrium: cR²/(1 + R)⁴.
pub fn tail_rate_from_ratio(c: f64, ratio: f64) -> f64 {
    c * ratio * ratio / (1.0 + ratio).powi(4)
}

/// d ln λ / d ln R = 2 − 4R/(1 + R): → −2 as R → ∞.
pub fn rate_log_slope(ratio: f64) -> f64 {
    2.0 - 4.0 * ratio / (1.0 + ratio)
}

/// s* with R = s*/(1 − s*) (s* > ½ for R > 1).
pub fn s_star_from_ratio(ratio: f64) -> f64 {
    ratio / (1.0 + ratio)
}

/// u = ln(s/(1 − s)).
pub fn logit(s: f64) -> f64 {
    (s / (1.0 - s)).ln()
}

/// The stiffness ratio λ₁/λ₂ of two samples with equal c and equilibrium ratios R₁ < R₂ (both
/// > 1): [(1 + R₂)²R₁ / ((1 + R₁)²R₂)]² (spec §2.7).
pub fn stiffness_ratio(r1: f64, r2: f64) -> f64 {
    ((1.0 + r2).powi(2) * r1 / ((1.0 + r1).powi(2) * r2)).powi(2)
}

/// Independent two-token samples: u̇_i = −c_i s_i(1 − s_i)(s_i − s_i*), as a [`VectorField`]
/// with the exact (diagonal) Jacobian. The state is u (absolute) or x = u − u* (deviation).
#[derive(Debug, Clone, PartialEq)]
pub struct TwoToken {
    c: Vec<f64>,
    s_star: Vec<f64>,
    u_star: Vec<f64>,
    /// Whether the state is x = u − u* (otherwise u).
    deviation: bool,
}

impl TwoToken {
    /// Samples with c_i = 2δ_i²/N and equilibria s_i* ∈ (0, 1); the state is u.
    pub fn new(c: Vec<f64>, s_star: Vec<f64>) -> Self {
        assert_eq!(c.len(), s_star.len(), "one c per sample");
        assert!(
            s_star.iter().all(|&s| s > 0.0 && s < 1.0) && c.iter().all(|&c| c > 0.0),
            "need s* ∈ (0, 1) and c > 0"
        );
        let u_star = s_star.iter().map(|&s| logit(s)).collect();
        TwoToken {
            c,
            s_star,
            u_star,
            deviation: false,
        }
    }

    /// From (δ_i, s_i*) and the sample count N of the loss: c_i = 2δ_i²/N.
    pub fn from_values(delta: &[f64], s_star: Vec<f64>, samples: usize) -> Self {
        let c = delta.iter().map(|d| 2.0 * d * d / samples as f64).collect();
        TwoToken::new(c, s_star)
    }

    /// The same samples with the deviation x = u − u* as the state.
    pub fn deviation(mut self) -> Self {
        self.deviation = true;
        self
    }

    pub fn c(&self) -> &[f64] {
        &self.c
    }
    pub fn s_star(&self) -> &[f64] {
        &self.s_star
    }
    pub fn u_star(&self) -> &[f64] {
        &self.u_star
    }

    /// The state of the logit differences u.
    pub fn state_of(&self, u: &[f64]) -> Vec<f64> {
        u.iter()
            .zip(&self.u_star)
            .map(|(&u, &us)| if self.deviation { u - us } else { u })
            .collect()
    }

    /// (u_i, x_i) of state component i.
    fn split(&self, i: usize, state: f64) -> (f64, f64) {
        if self.deviation {
            (state + self.u_star[i], state)
        } else {
            (state, state - self.u_star[i])
        }
    }

    /// The per-sample rates λ_i = c_i(s_i*(1 − s_i*))² (the eigenvalues of −Jacobian at u*).
    pub fn rates(&self) -> Vec<f64> {
        self.c
            .iter()
            .zip(&self.s_star)
            .map(|(&c, &s)| tail_rate(c, s))
            .collect()
    }

    /// The model loss L(u) = Σ_i (c_i/4)(s_i − s_i*)² = (1/N)Σ ½δ_i²(s_i − s_i*)² (u̇ = −2∇_u L).
    pub fn loss(&self, u: &[f64]) -> f64 {
        u.iter()
            .zip(self.c.iter().zip(&self.s_star))
            .map(|(&u, (&c, &s_star))| {
                let (s, _) = sigmoid_pair(u);
                c / 4.0 * (s - s_star).powi(2)
            })
            .sum()
    }

    /// One gradient-descent step in p, seen in u: u ← u − 2η∇_u L = u + η·u̇ (A2: KKᵀ = I).
    pub fn gd_step(&self, state: &mut [f64], eta: f64) {
        for (i, x) in state.iter_mut().enumerate() {
            let (u, dev) = self.split(i, *x);
            *x += eta * velocity(u, dev, self.c[i], self.s_star[i]);
        }
    }
}

impl VectorField for TwoToken {
    fn dim(&self) -> usize {
        self.c.len()
    }
    fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
        for (i, (&zi, d)) in z.iter().zip(dz.iter_mut()).enumerate() {
            let (u, x) = self.split(i, zi);
            *d = velocity(u, x, self.c[i], self.s_star[i]);
        }
    }
    fn jvp(&self, _t: f64, z: &[f64], v: &[f64], out: &mut [f64]) {
        for (i, ((&zi, &vi), o)) in z.iter().zip(v).zip(out.iter_mut()).enumerate() {
            let (u, x) = self.split(i, zi);
            *o = velocity_derivative(u, x, self.c[i], self.s_star[i]) * vi;
        }
    }
}

/// The exact solution of one sample, ṡ = −c s²(1 − s)²(s − s*) from s(0) = s₀ (spec §2.7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClosedForm {
    pub c: f64,
    pub s_star: f64,
    pub s0: f64,
}

impl ClosedForm {
    pub fn new(c: f64, s_star: f64, s0: f64) -> Self {
        assert!(c > 0.0 && s_star > 0.0 && s_star < 1.0 && s0 > 0.0 && s0 < 1.0);
        ClosedForm { c, s_star, s0 }
    }

    /// F without its ln|s − s*| term (smooth on (0, 1)): A ln s − B/s − C ln(1 − s) + D/(1 − s).
    fn smooth_part(&self, s: f64) -> f64 {
        let p = self.s_star;
        let q = 1.0 - p;
        let a = -2.0 / p - 1.0 / (p * p);
        let b = -1.0 / p;
        let c = 2.0 / q + 1.0 / (q * q);
        let d = 1.0 / q;
        a * s.ln() - b / s - c * (1.0 - s).ln() + d / (1.0 - s)
    }

    /// E = 1/(s*²(1 − s*)²), the coefficient of ln|s − s*|.
    fn e_coeff(&self) -> f64 {
        1.0 / (self.s_star * (1.0 - self.s_star)).powi(2)
    }

    /// F(s) = A ln s − B/s − C ln(1 − s) + D/(1 − s) + E ln|s − s*| (spec §2.7), an
    /// antiderivative of 1/(s²(1 − s)²(s − s*)).
    pub fn antiderivative(&self, s: f64) -> f64 {
        self.smooth_part(s) + self.e_coeff() * (s - self.s_star).abs().ln()
    }

    /// t(s) = −(F(s) − F(s₀))/c, the time at which the trajectory passes s (s between s₀ and s*).
    pub fn time_at(&self, s: f64) -> f64 {
        -(self.antiderivative(s) - self.antiderivative(self.s0)) / self.c
    }

    /// The deviation x(t) = u(t) − u* from the implicit solution (exact to rounding; 0 once
    /// |s − s*| is below the smallest normal number).
    pub fn deviation_at(&self, t: f64) -> f64 {
        let e = self.offset_at(t);
        // x = ln(s/s*) − ln((1 − s)/(1 − s*)) with s = s* + e
        (e / self.s_star).ln_1p() - (-e / (1.0 - self.s_star)).ln_1p()
    }

    /// s(t).
    pub fn s_at(&self, t: f64) -> f64 {
        self.s_star + self.offset_at(t)
    }

    /// s(t) − s*: Newton (safeguarded by bisection) on y = ln|s − s*| for
    /// G(y) = F(s* ± eʸ) − F(s₀) + ct = 0, increasing in y with G' = 1/(s²(1 − s)²).
    fn offset_at(&self, t: f64) -> f64 {
        let p = self.s_star;
        let e0 = self.s0 - p;
        if e0 == 0.0 {
            return 0.0;
        }
        let sign = e0.signum();
        let target = self.antiderivative(self.s0) - self.c * t;
        let (ee, smooth) = (self.e_coeff(), |y: f64| {
            self.smooth_part(p + sign * y.exp())
        });
        let g = |y: f64| ee * y + smooth(y) - target;
        let mut hi = e0.abs().ln();
        if t <= 0.0 {
            return e0;
        }
        // bracket: G(hi) = ct > 0; step down until G < 0 (or below the normal range)
        let mut lo = hi - 1.0;
        while g(lo) > 0.0 {
            let width = hi - lo;
            hi = lo;
            lo -= 2.0 * width;
            if lo < -740.0 {
                if g(-740.0) > 0.0 {
                    return 0.0;
                }
                lo = -740.0;
                break;
            }
        }
        let mut y = 0.5 * (lo + hi);
        for _ in 0..200 {
            let gy = g(y);
            if gy > 0.0 {
                hi = y;
            } else {
                lo = y;
            }
            let s = p + sign * y.exp();
            let newton = y - gy * (s * (1.0 - s)).powi(2);
            let next = if newton > lo && newton < hi {
                newton
            } else {
                0.5 * (lo + hi)
            };
            if (next - y).abs() <= 1e-15 * y.abs().max(1.0) {
                y = next;
                break;
            }
            y = next;
        }
        sign * y.exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodiff::{ad_grad_hvp, rel_err};
    use crate::flow::{integrate, Method, OdeConfig};
    use num_dual::{Dual64, DualNum};

    /// L(u) from its definition (1/N)Σ ½δ²(σ(u_i) − s_i*)², c = 2δ²/N, generic over dual numbers.
    fn reference_loss<D: DualNum<f64> + Copy>(c: &[f64], s_star: &[f64], u: &[D]) -> D {
        u.iter()
            .zip(c.iter().zip(s_star))
            .fold(D::from(0.0), |acc, (&u, (&c, &s))| {
                let r = (-u).exp().recip_plus_one() - s;
                acc + r * r * (c / 4.0)
            })
    }

    trait RecipPlusOne {
        fn recip_plus_one(self) -> Self;
    }
    impl<D: DualNum<f64> + Copy> RecipPlusOne for D {
        /// 1/(1 + self)
        fn recip_plus_one(self) -> Self {
            (self + 1.0).recip()
        }
    }

    /// u̇ from its definition −c σ(u)(1 − σ(u))(σ(u) − s*), generic over dual numbers.
    fn reference_velocity<D: DualNum<f64> + Copy>(u: D, c: f64, s_star: f64) -> D {
        let s = (-u).exp().recip_plus_one();
        -(s * (-s + 1.0) * (s - s_star)) * c
    }

    const CASES: [(f64, f64, f64); 3] = [(0.9, 0.5, 1.0), (0.99, 0.3, 2.0), (0.2, 0.7, 0.5)];

    #[test]
    fn antiderivative_differentiates_to_the_integrand() {
        for (s_star, s0, c) in CASES {
            let cf = ClosedForm::new(c, s_star, s0);
            for s in [0.05, 0.3, 0.55, 0.8, 0.97] {
                if (s - s_star).abs() < 0.02 {
                    continue;
                }
                let h = 1e-6;
                let fd = (cf.antiderivative(s + h) - cf.antiderivative(s - h)) / (2.0 * h);
                let exact = 1.0 / (s * s * (1.0 - s).powi(2) * (s - s_star));
                assert!((fd / exact - 1.0).abs() < 1e-6, "s* = {s_star}, s = {s}");
            }
        }
    }

    #[test]
    fn closed_form_matches_a_tight_integration() {
        for (s_star, s0, c) in CASES {
            let cf = ClosedForm::new(c, s_star, s0);
            let model = TwoToken::new(vec![c], vec![s_star]).deviation();
            let x0 = logit(s0) - logit(s_star);
            let times = [0.0, 1.0, 10.0, 100.0, 1000.0];
            let cfg = OdeConfig::new(Method::Tsit45, 1e-12, 1e-300);
            let tr = integrate(&model, &[x0], &times, &cfg, None).unwrap();
            for (k, &t) in times.iter().enumerate() {
                let exact = cf.deviation_at(t);
                let x = tr.state(k)[0];
                if exact.abs() > 1e-280 {
                    assert!(
                        (x / exact - 1.0).abs() < 1e-8,
                        "s* = {s_star}, t = {t}: ODE {x:e} vs closed form {exact:e}"
                    );
                }
                // t(s) inverts s(t)
                let s = cf.s_at(t);
                if (s - s_star).abs() > 1e-3 {
                    assert!((cf.time_at(s) - t).abs() < 1e-9 * t.max(1.0));
                }
            }
        }
    }

    #[test]
    fn velocity_is_minus_twice_the_gradient_and_the_jacobian_is_exact() {
        let model = TwoToken::new(vec![1.0, 0.5, 2.0], vec![0.9, 0.2, 0.6]);
        let u = [0.3, -2.0, 1.5];
        let dir = [0.7, -0.4, 1.1];
        let (c, s) = (model.c().to_vec(), model.s_star().to_vec());
        let (g, hv) = ad_grad_hvp(
            |z| reference_loss(&c, &s, z),
            |z| reference_loss(&c, &s, z),
            &u,
            &dir,
        );
        assert!((model.loss(&u) - reference_loss(&c, &s, &u)).abs() < 1e-15);
        let mut rhs = [0.0; 3];
        let mut jv = [0.0; 3];
        model.rhs(0.0, &u, &mut rhs);
        model.jvp(0.0, &u, &dir, &mut jv);
        let minus2g: Vec<f64> = g.iter().map(|x| -2.0 * x).collect();
        let minus2hv: Vec<f64> = hv.iter().map(|x| -2.0 * x).collect();
        assert!(rel_err(&rhs, &minus2g) < 1e-13);
        assert!(rel_err(&jv, &minus2hv) < 1e-13);
        // the deviation state has the same field and Jacobian
        let dev = model.clone().deviation();
        let x = dev.state_of(&u);
        let (mut r2, mut j2) = ([0.0; 3], [0.0; 3]);
        dev.rhs(0.0, &x, &mut r2);
        dev.jvp(0.0, &x, &dir, &mut j2);
        assert!(rel_err(&r2, &rhs) < 1e-13 && rel_err(&j2, &jv) < 1e-13);
    }

    #[test]
    fn derivative_matches_num_dual_far_from_and_at_equilibrium() {
        for (s_star, c) in [(0.9, 1.0), (0.2, 0.5), (1.0 - 1e-6, 3.0)] {
            let us = logit(s_star);
            for x in [-5.0, -0.3, 0.0, 1e-3, 2.0, 8.0] {
                let d = reference_velocity(Dual64::new(us + x, 1.0), c, s_star);
                let exact = velocity_derivative(us + x, x, c, s_star);
                // the reference subtracts s − s* and 1 − s: compare to its own rounding (relative to
                // c·s(1 − s)·max(s, s*), the size of the terms it cancels, over min(s, 1 − s))
                let (s, q) = sigmoid_pair(us + x);
                let scale = c * s * q * (s * q + s.max(s_star));
                assert!(
                    (d.eps - exact).abs() <= 1e-12 * scale,
                    "s* = {s_star}, x = {x}: {} vs {exact}",
                    d.eps
                );
                assert!(
                    (d.re - velocity(us + x, x, c, s_star)).abs() <= 1e-14 * scale / q.min(s),
                    "value at s* = {s_star}, x = {x}: {} vs {}",
                    d.re,
                    velocity(us + x, x, c, s_star)
                );
            }
            // −dv/du at u* is the tail rate
            let at = -velocity_derivative(us, 0.0, c, s_star);
            assert!((at / tail_rate(c, s_star) - 1.0).abs() < 1e-14);
        }
    }

    #[test]
    fn rate_formulas_agree() {
        for r in [1.5, 10.0, 1e4] {
            let s = s_star_from_ratio(r);
            assert!((tail_rate(2.0, s) / tail_rate_from_ratio(2.0, r) - 1.0).abs() < 1e-12);
            let h = 1e-5;
            let fd = (tail_rate_from_ratio(1.0, r * (1.0 + h)).ln()
                - tail_rate_from_ratio(1.0, r * (1.0 - h)).ln())
                / ((1.0 + h).ln() - (1.0 - h).ln());
            assert!((fd - rate_log_slope(r)).abs() < 1e-7);
        }
        // spec §7.3: κ = 7.23 at (R₁, R₂) = (2, 10)
        assert!((stiffness_ratio(2.0, 10.0) - 7.23).abs() < 5e-3);
        let (l1, l2) = (
            tail_rate_from_ratio(1.0, 2.0),
            tail_rate_from_ratio(1.0, 1e3),
        );
        assert!((stiffness_ratio(2.0, 1e3) / (l1 / l2) - 1.0).abs() < 1e-12);
    }
}

//! Closed-form solutions of spec 004 §2.7, in the log domain so that they hold for any α:
//!
//! - CF1, the orthogonal diagonal-linear flow (Σ = I, G_i = β*_i − β_i): z = w_i² solves the
//!   Riccati equation ż = −½(z − z₊)(z − z₋), whose Möbius variable r = (z − z₊)/(z − z₋)
//!   decays as r₀ e^{−γt}, γ = √(4β*² + c²). The roots are evaluated without cancellation
//!   (z₊ z₋ = −c², only ln c is used), so c² may underflow (α < 1e−70) without harm.
//! - CF2, the balanced scalar flow (c = 0): the logistic curve.

use super::coords::{beta_and_speed, log_add_exp, log_sub_exp};

/// ln(b + √(b² + c²)) from ln c, exact for either sign of b and for c² below the f64 range
/// (for b < 0 it is 2 ln c − ln(√(b² + c²) − b)).
fn ln_positive_root(b: f64, ln_c: f64) -> f64 {
    if b == 0.0 {
        return ln_c;
    }
    let c = ln_c.exp();
    let hyp = b.hypot(c);
    if b > 0.0 {
        (b + hyp).ln()
    } else {
        2.0 * ln_c - (hyp - b).ln()
    }
}

/// One coordinate of the orthogonal diagonal-linear flow (CF1) in the log layout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RiccatiCoordinate {
    /// β*.
    pub teacher: f64,
    /// ln c (normalized orientation, c > 0).
    pub ln_c: f64,
    /// γ = √(4β*² + c²).
    pub rate: f64,
    /// ln z₊ (the stable root, z₊ > 0) and ln|z₋| = 2 ln c − ln z₊ (z₋ < 0).
    ln_z_plus: f64,
    ln_z_minus: f64,
    /// ln|r₀| and sgn r₀ (0 when the start is the equilibrium).
    ln_r0: f64,
    sign_r0: f64,
}

impl RiccatiCoordinate {
    /// The coordinate with teacher β*, conserved ln c and initial ζ(0) = ln w(0).
    pub fn new(teacher: f64, ln_c: f64, zeta0: f64) -> Self {
        let ln_z_plus = ln_positive_root(2.0 * teacher, ln_c);
        let ln_z_minus = 2.0 * ln_c - ln_z_plus;
        let (ln_r0, sign_r0) = Self::mobius(2.0 * zeta0, ln_z_plus, ln_z_minus);
        RiccatiCoordinate {
            teacher,
            ln_c,
            rate: (2.0 * teacher).hypot(ln_c.exp()),
            ln_z_plus,
            ln_z_minus,
            ln_r0,
            sign_r0,
        }
    }

    /// (ln|r|, sgn r) of r = (z − z₊)/(z − z₋) for ln z.
    fn mobius(ln_z: f64, ln_z_plus: f64, ln_z_minus: f64) -> (f64, f64) {
        let numerator = log_sub_exp(ln_z, ln_z_plus);
        let denominator = log_add_exp(ln_z, ln_z_minus);
        (numerator - denominator, (ln_z - ln_z_plus).signum())
    }

    /// ζ(t) = ½ ln z(t), z = (z₊ − z₋ r)/(1 − r). With z₋ < 0: for r < 0 (start below z₊)
    /// z = (z₊ − |r||z₋|)/(1 + |r|), whose numerator is z(1 + |r|) > 0; for 0 < r < 1
    /// z = (z₊ + r|z₋|)/(1 − r). Each part is formed in the log domain.
    pub fn zeta_at(&self, t: f64) -> f64 {
        if self.sign_r0 == 0.0 {
            return 0.5 * self.ln_z_plus;
        }
        let ln_r = self.ln_r0 - self.rate * t;
        let ln_z = if self.sign_r0 < 0.0 {
            log_sub_exp(self.ln_z_plus, self.ln_z_minus + ln_r) - log_add_exp(0.0, ln_r)
        } else {
            // 1 − r = −expm1(ln r), exact as r → 1
            log_add_exp(self.ln_z_plus, self.ln_z_minus + ln_r) - (-ln_r.exp_m1()).ln()
        };
        0.5 * ln_z
    }

    /// β(t) = (z − c²/z)/4.
    pub fn beta_at(&self, t: f64) -> f64 {
        beta_and_speed(self.zeta_at(t), self.ln_c, f64::INFINITY).0
    }

    /// The time at which β first reaches β*/2 (spec §2.7 "half-activation"), if it does:
    /// z_h = β* + √(β*² + c²), t_h = ln(r₀/r_h)/γ. None for β* = 0 or a start past z_h.
    pub fn half_time(&self) -> Option<f64> {
        if self.teacher == 0.0 {
            return None;
        }
        let ln_z_half = ln_positive_root(self.teacher, self.ln_c);
        let (ln_rh, sign_rh) = Self::mobius(ln_z_half, self.ln_z_plus, self.ln_z_minus);
        (sign_rh == self.sign_r0 && ln_rh < self.ln_r0).then(|| (self.ln_r0 - ln_rh) / self.rate)
    }
}

/// CF2, the balanced scalar flow β̇ = 2|β|(β* − β) (c = 0, sgn β₀ = sgn β*):
/// β(t) = β*/(1 + (β*/β₀ − 1) e^{−2|β*| t}).
pub fn logistic_beta(teacher: f64, beta0: f64, t: f64) -> f64 {
    teacher / (1.0 + (teacher / beta0 - 1.0) * (-2.0 * teacher.abs() * t).exp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{integrate, Method, OdeConfig};
    use crate::models::diagonal::coords::LogCoordinates;
    use crate::models::diagonal::events::{Layout, TransitionEvent, TransitionEvents};
    use crate::models::diagonal::linear::DiagLinear;
    use crate::models::diagonal::log_flow::{BalancedFlow, LogFlow};
    use crate::stats;

    #[test]
    fn riccati_closed_form_matches_the_log_flow_for_alpha_down_to_1e_100() {
        // spec §7 `diag-linear-riccati`: R1 in the log layout, ‖β_num − β_exact‖_∞ ≤ 1e−8 over the
        // whole run, half-times from root events to 1e−6 relative; t_h/Λ → 1/|β*|.
        let model = DiagLinear::r1();
        let teacher = model.teacher().unwrap().to_vec();
        let (u0, v0) = ([1.1, -0.7, 0.9, 0.5, 1.3], [0.4, 0.2, -0.3, -0.8, 0.6]);
        for alpha_exp in [2.0, 8.0, 32.0, 100.0] {
            let ln_alpha = -alpha_exp * 10f64.ln();
            let lambda = -ln_alpha;
            let (coords, zeta0) = LogCoordinates::from_init(&u0, &v0, ln_alpha).unwrap();
            let exact: Vec<RiccatiCoordinate> = (0..5)
                .map(|i| RiccatiCoordinate::new(teacher[i], coords.ln_c()[i], zeta0[i]))
                .collect();
            let flow = LogFlow::new(&model, coords.clone());
            let halves: Vec<TransitionEvent> = [0, 1, 2, 4]
                .iter()
                .map(|&i| TransitionEvent::BetaReaches {
                    index: i,
                    level: 0.5 * teacher[i],
                })
                .collect();
            let events = TransitionEvents::new(&model, Layout::Log(&coords), halves);
            let t_end = 10.0 * lambda;
            let times = crate::flow::linspace(0.0, t_end, 401);
            // the error of ζ ≈ −Λb is relative: rtol·Λ must stay well below 1e−8
            let cfg = OdeConfig::new(Method::Tsit45, 1e-12, 1e-12);
            let traj = events
                .with_events(false, |e| integrate(&flow, &zeta0, &times, &cfg, Some(e)))
                .unwrap();
            let mut worst = 0.0_f64;
            for k in 0..traj.len() {
                let beta = flow.beta(traj.state(k));
                for i in 0..5 {
                    worst = stats::larger(worst, (beta[i] - exact[i].beta_at(traj.t[k])).abs());
                }
            }
            assert!(worst <= 1e-8, "α = 1e-{alpha_exp}: β error {worst:e}");
            for (component, &i) in [0, 1, 2, 4].iter().enumerate() {
                let t_h = exact[i].half_time().unwrap();
                let event = traj.events.iter().find(|e| e.index == component).unwrap();
                assert!(
                    (event.t / t_h - 1.0).abs() <= 1e-6,
                    "{i}: {} vs {t_h}",
                    event.t
                );
                // O(1/Λ) convergence of the rescaled half time to 1/|β*|
                let offset = (t_h / lambda - 1.0 / teacher[i].abs()) * lambda;
                assert!(
                    offset.abs() < 3.0 / teacher[i].abs(),
                    "{i}: Λ-offset {offset}"
                );
            }
        }
    }

    #[test]
    fn riccati_handles_underflowing_c_and_both_signs() {
        // α = 1e−200: c = α² c̄ underflows to 0, and its square far more so
        let ln_c = -400.0 * 10f64.ln();
        for teacher in [0.8, -0.6] {
            let cf = RiccatiCoordinate::new(teacher, ln_c, 0.5 * ln_c + 0.3);
            assert!(cf.beta_at(0.0).abs() < 1e-300);
            let t_h = cf.half_time().unwrap();
            assert!((cf.beta_at(t_h) / teacher - 0.5).abs() < 1e-12);
            assert!((cf.beta_at(t_h + 60.0 / teacher.abs()) / teacher - 1.0).abs() < 1e-12);
            // from b = 1 either sign takes Λ/|β*| (w grows to b = 0 or shrinks to b = 2), with
            // Λ = −ln c / 2 for c̄ = 1
            let expected = (-0.5 * ln_c) / teacher.abs();
            assert!((t_h / expected - 1.0).abs() < 0.02, "{t_h} vs {expected}");
        }
    }

    #[test]
    fn logistic_matches_the_balanced_flow() {
        // CF2 against the reduced flow on one coordinate of R1
        let model = DiagLinear::r1();
        let flow = BalancedFlow::new(&model, vec![1], vec![-1.0]);
        let beta0: f64 = -1e-6;
        let times = crate::flow::linspace(0.0, 30.0, 31);
        let cfg = OdeConfig::new(Method::Tsit45, 1e-12, 1e-12);
        let traj = integrate(&flow, &[beta0.abs().ln()], &times, &cfg, None).unwrap();
        for k in 0..traj.len() {
            let beta = flow.beta(traj.state(k))[1];
            let exact = logistic_beta(-0.5, beta0, traj.t[k]);
            assert!(
                (beta - exact).abs() < 1e-9,
                "t = {}: {beta} vs {exact}",
                traj.t[k]
            );
        }
    }
}

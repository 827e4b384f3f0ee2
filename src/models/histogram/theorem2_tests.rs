//! Tests of the Theorem 2 system and its closed form (spec 000 §2.6, R8, R12).

use super::*;
use crate::models::histogram::testing::rk4;
use crate::stats;
use num_dual::Dual64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const CS: [f64; 7] = [-3.0, -1.0, -0.1, 0.0, 0.1, 1.0, 3.0];

fn max_state_error(cf: &Thm2ClosedForm, t_end: f64, steps: usize) -> f64 {
    let (x0, y0) = cf.initial();
    stats::max(
        rk4(&cf.system(), &[x0, y0], t_end, steps, steps / 100)
            .iter()
            .map(|(t, z)| {
                let s = cf.at(*t);
                stats::larger((s.x - z[0]).abs(), (s.y - z[1]).abs())
            }),
    )
}

#[test]
fn imbalance_constants_are_exact_for_large_delta() {
    for delta in [-1e8, -30.0, -2.0, -1e-9, 0.0, 1e-9, 0.5, 2.0, 30.0, 1e8] {
        let Imbalance { rho, rhob, a, .. } = Imbalance::new(delta);
        assert!((rho * rhob - 1.0).abs() <= 4e-16, "δ = {delta}");
        assert!(
            (rho - rhob - delta).abs() <= 4e-16 * rho.max(rhob),
            "δ = {delta}"
        );
        assert!((rho + rhob - 2.0 * a).abs() <= 4e-16 * a, "δ = {delta}");
    }
    // ρ̄(δ) = 1/δ − 1/δ³ + … for large δ: no cancellation in the small root.
    let rhob = Imbalance::new(1e8).rhob;
    assert!((rhob * 1e8 - 1.0).abs() <= 1e-15, "ρ̄ = {rhob:e}");
}

#[test]
fn jvp_matches_autodiff() {
    let sys = Thm2System { c: -0.7, c1: 1.3 };
    let rhs = |x: Dual64, y: Dual64| {
        (
            (y - x * x * x - x * sys.c) * sys.c1,
            (x - x * x * y) * sys.c1,
        )
    };
    let (z, u) = ([0.8, -1.1], [0.3, 2.0]);
    let (fx, fy) = rhs(Dual64::new(z[0], u[0]), Dual64::new(z[1], u[1]));
    let mut out = [0.0; 2];
    sys.jvp(0.0, &z, &u, &mut out);
    assert!((out[0] - fx.eps).abs() <= 1e-14 && (out[1] - fy.eps).abs() <= 1e-14);
    let mut dz = [0.0; 2];
    sys.rhs(0.0, &z, &mut dz);
    assert!((dz[0] - fx.re).abs() <= 1e-15 && (dz[1] - fy.re).abs() <= 1e-15);
}

/// R8(a): closed form vs RK4 (h ≈ 5e-4/c_1) on t ∈ \[0, 10/c_1\], over the recipe's c and c_1
/// grid, a 5×5 grid of (x_0, y_0) ∈ \[−2, 2\]² (non-physical points included) and the special
/// cases x_0 = 0, y_0 = 0, K = 0.
#[test]
fn closed_form_matches_rk4() {
    let mut worst: f64 = 0.0;
    for c in CS {
        for c1 in [0.5, 2.0] {
            let sys = Thm2System { c, c1 };
            let Imbalance { rho, .. } = sys.imbalance();
            let mut inits: Vec<(f64, f64)> = (0..25)
                .map(|k| (-2.0 + (k % 5) as f64, -2.0 + (k / 5) as f64))
                .collect();
            inits.extend([(0.0, 1.3), (0.7, 0.0), (1.2, 1.2 * rho), (-0.4, -0.4 * rho)]);
            for (x0, y0) in inits {
                let cf = sys.closed_form(x0, y0);
                if cf.l().abs() < 1e-2 {
                    continue;
                }
                worst = stats::larger(worst, max_state_error(&cf, 10.0 / c1, 20_000));
            }
        }
    }
    assert!(worst <= 1e-9, "max |closed − RK4| = {worst:e}");
}

/// Near and on the bad line the saddle amplifies integration error by ~1/|L| (spec R8(a)). On
/// L = 0 exactly the error grows like e^{c_1ρ̄t}, so compare only up to min(5/ρ, 11/ρ̄)/c_1 (the
/// spec's 5/(c_1ρ) alone amplifies by e^{54} at c = −3, where ρ̄ = 3.3).
#[test]
fn closed_form_near_and_on_bad_line() {
    for c in CS {
        let sys = Thm2System { c, c1: 1.0 };
        let Imbalance { rho, rhob, .. } = sys.imbalance();
        for l in [1e-6, -1e-6] {
            let cf = sys.closed_form(0.9, -rhob * 0.9 + l);
            let err = max_state_error(&cf, 10.0, 20_000);
            assert!(err <= 1e-9 / l.abs(), "c = {c}, L = {l:e}: {err:e}");
        }
        let cf = sys.closed_form(0.9, -rhob * 0.9);
        assert_eq!(cf.l(), 0.0);
        let err = max_state_error(&cf, (5.0 / rho).min(11.0 / rhob), 10_000);
        assert!(err <= 1e-9, "c = {c}, L = 0: {err:e}");
        // Bad line: convergence to the saddle at rate ρc_1 (R10): |x(t)| ≤ |x_0|e^{−ρt}.
        let far = cf.at(50.0 / rho);
        assert!(
            far.x.abs() <= 0.9 * (-50.0f64).exp() && far.x != 0.0,
            "x = {:e}",
            far.x
        );
        assert!(far.one_minus_xy.is_finite() && far.g.is_finite());
    }
}

/// The cancellation-free residues equal the direct expressions where those do not cancel, and
/// the exact forms of the invariants hold (spec §2.6, §2.7).
#[test]
fn residues_match_direct_formulas() {
    let mut rng = ChaCha8Rng::seed_from_u64(20);
    for _ in 0..300 {
        let sys = Thm2System {
            c: rng.random_range(-3.0..3.0),
            c1: rng.random_range(0.5..2.0),
        };
        let (x0, y0) = (rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0));
        let cf = sys.closed_form(x0, y0);
        let Imbalance { rho, rhob, a, .. } = sys.imbalance();
        for k in 0..=20 {
            let t = 0.1 * k as f64 / sys.c1;
            let s = cf.at(t);
            let (x, y) = (s.x, s.y);
            let tol = 1e-13;
            assert!((s.one_minus_xy - (1.0 - x * y)).abs() <= tol * (1.0 + (x * y).abs()));
            assert!((s.rhob_minus_x2 - (rhob - x * x)).abs() <= tol * (rhob + x * x));
            let g_direct = x * x + sys.c - y * y;
            assert!((s.g - g_direct).abs() <= tol * (x * x + sys.c.abs() + y * y));
            // g/g_0 = (‖q⊥‖ ratio)², and ρ̄x + y = 2AL/√D, ρx − y = 2AKw/√D.
            let ratio_sq = s.q_perp_ratio * s.q_perp_ratio;
            assert!((s.g - cf.g0() * ratio_sq).abs() <= tol * s.g.abs().max(1e-300));
            let sqrt_d = 2.0 * a * (-rhob * sys.c1 * t).exp() / s.q_perp_ratio;
            let w = (-2.0 * a * sys.c1 * t).exp();
            assert!(
                (rhob * x + y - 2.0 * a * cf.l() / sqrt_d).abs() <= tol * (1.0 + x.abs() + y.abs())
            );
            assert!(
                (rho * x - y - 2.0 * a * cf.k() * w / sqrt_d).abs()
                    <= tol * (1.0 + x.abs() + y.abs())
            );
        }
    }
}

/// Large |x_0y_0|: the expanded D keeps D(0) = 4A² exactly, so the state at t = 0 is the
/// initial point to rounding (the unexpanded D would lose ~8 digits here).
#[test]
fn large_initial_product_has_no_cancellation() {
    for c in [-2.0, 0.0, 1.5] {
        let sys = Thm2System { c, c1: 1.0 };
        let (x0, y0) = (1e4, -3e4);
        let s = sys.closed_form(x0, y0).at(0.0);
        assert!((s.x / x0 - 1.0).abs() <= 1e-15 && (s.y / y0 - 1.0).abs() <= 1e-15);
        assert!((s.one_minus_xy / (1.0 - x0 * y0) - 1.0).abs() <= 1e-15);
    }
}

/// Far in the tail (residues ≈ 1e-80 … 1e-270) the closed form equals its leading asymptotic
/// term, a plain product without cancellation whose relative corrections are below 1e-14:
/// c > 0: 1 − xy ≈ 4A²g_0e^{−2ρ̄τ}/(cρL²); c < 0: ≈ 4A²w((1 − x_0y_0) + g_0/|c|)/(ρL²);
/// c = 0: ≈ 4w((1 − x_0y_0) + g_0τ)/L² (and the analogous forms of ρ̄ − x²).
#[test]
fn tail_residues_match_leading_asymptotics() {
    let (x0, y0) = (0.3, 0.8);
    for c in [-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0] {
        let c1 = 1.5;
        let sys = Thm2System { c, c1 };
        let cf = sys.closed_form(x0, y0);
        let Imbalance { rho, rhob, a, .. } = sys.imbalance();
        let (k, l, g0) = (cf.k(), cf.l(), cf.g0());
        // Residues ≈ e^{−200}, and e^{−|c|τ} ≤ e^{−35} so that the corrections are negligible.
        let tau =
            (200.0 / sys.residue_rate() * c1).max(if c == 0.0 { 0.0 } else { 35.0 / c.abs() });
        let w = (-2.0 * a * tau).exp();
        let four_a2 = 4.0 * a * a;
        let (lead_xy, lead_x2) = if c > 0.0 {
            let e = (-2.0 * rhob * tau).exp() / c;
            (four_a2 * g0 * e, four_a2 * rhob * g0 * e)
        } else {
            let e_over_w = if c == 0.0 { tau } else { 1.0 / c.abs() };
            (
                four_a2 * w * ((1.0 - x0 * y0) + g0 * e_over_w),
                w * (four_a2 * (rhob - x0 * x0)
                    + (1.0 + rhob * rhob) * k * k
                    + four_a2 * rhob * g0 * e_over_w),
            )
        };
        let s = cf.at(tau / c1);
        let denominator = rho * l * l;
        let (e1, e2) = (
            (s.one_minus_xy / (lead_xy / denominator) - 1.0).abs(),
            (s.rhob_minus_x2 / (lead_x2 / denominator) - 1.0).abs(),
        );
        assert!(
            s.one_minus_xy.abs() < 1e-75 && s.one_minus_xy.abs() > 1e-300,
            "{:e}",
            s.one_minus_xy
        );
        assert!(
            e1 <= 1e-12 && e2 <= 1e-12,
            "c = {c}: {e1:e} {e2:e} at {:e}",
            s.one_minus_xy
        );
    }
}

/// R8(c), E7: log-slopes of the residues at t = 30/c_1, 31/c_1 are −2min(ρ̄, A)c_1 (not the
/// paper's −2ρ̄c_1 for c < 0), −2c_1 + 1/t at c = 0; the loss slope is −2ρ̄c_1 for every c.
#[test]
fn tail_rates_are_the_corrected_ones() {
    for c in [-2.0, -0.5, 0.0, 0.5, 2.0] {
        let c1 = 1.0;
        let sys = Thm2System { c, c1 };
        // x_0 = 1 makes the t-free part of the c = 0 residues small against the t-part.
        let cf = sys.closed_form(1.0, 0.3);
        let (s30, s31) = (cf.at(30.0), cf.at(31.0));
        let slope = |f: fn(&Thm2State) -> f64| (f(&s31).abs().ln() - f(&s30).abs().ln()) / 1.0;
        let predicted = -sys.residue_rate() + if c == 0.0 { 1.0 / 30.5 } else { 0.0 };
        let tol = if c == 0.0 { 5e-3 } else { 1e-3 };
        for (name, f) in [
            (
                "rhob-x2",
                (|s: &Thm2State| s.rhob_minus_x2) as fn(&Thm2State) -> f64,
            ),
            ("1-xy", |s: &Thm2State| s.one_minus_xy),
        ] {
            let measured = slope(f);
            assert!(
                (measured - predicted).abs() <= tol,
                "c = {c}, {name}: {measured} vs {predicted}"
            );
        }
        let loss_slope = slope(|s: &Thm2State| s.loss);
        assert!(
            (loss_slope + cf.loss_rate()).abs() <= 1e-3,
            "c = {c}: loss slope {loss_slope}"
        );
        if c < 0.0 {
            assert!(sys.paper_residue_rate() > sys.residue_rate() + 0.1);
        }
    }
    // g_0 = 0 (physical boundary): the slow mode is absent and the loss decays at 4Ac_1.
    let sys = Thm2System { c: 0.5, c1: 1.0 };
    let y0 = (0.09f64 + 0.5).sqrt();
    let cf = Thm2ClosedForm::with_g0(sys, 0.3, y0, 0.0);
    let slope = cf.at(16.0).loss.ln() - cf.at(15.0).loss.ln();
    assert!(
        (slope + 4.0 * sys.imbalance().a).abs() <= 1e-6,
        "slope {slope}"
    );
}

/// R12: x passes through 0 exactly at t_x when r_0 < −ρ̄ (the closed form is smooth there).
#[test]
fn x_vanishes_at_t_x() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let mut checked = 0;
    while checked < 50 {
        let sys = Thm2System {
            c: rng.random_range(-3.0..3.0),
            c1: rng.random_range(0.5..2.0),
        };
        let x0: f64 = rng.random_range(-2.0..2.0);
        let y0 = -x0 * (sys.imbalance().rhob + rng.random_range(0.01..3.0));
        let cf = sys.closed_form(x0, y0);
        if let (Some(t_x), None) = cf.sign_change_times() {
            let x = cf.at(t_x).x;
            assert!(x.abs() <= 1e-12, "x(t_x) = {x:e}");
            assert_eq!(cf.onset_time(), t_x);
            checked += 1;
        }
    }
}

/// R8(d): xy ≤ 0 on \[0, T) and xy > 0 on (T, T + 20/c_1\].
#[test]
fn onset_time_separates_signs() {
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    let mut nontrivial = 0;
    for _ in 0..2000 {
        let sys = Thm2System {
            c: rng.random_range(-3.0..3.0),
            c1: rng.random_range(0.5..2.0),
        };
        let cf = sys.closed_form(rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0));
        let t_onset = cf.onset_time();
        if t_onset > 0.0 {
            nontrivial += 1;
        }
        for k in (0..40).filter(|_| t_onset > 0.0) {
            let s = cf.at(t_onset * k as f64 / 40.0);
            assert!(
                s.x * s.y <= 1e-14,
                "before T = {t_onset}: xy = {}",
                s.x * s.y
            );
        }
        for k in 1..=40 {
            let s = cf.at(t_onset + 0.5 * k as f64 / sys.c1);
            assert!(s.x * s.y > 0.0, "after T = {t_onset}: xy = {}", s.x * s.y);
        }
        let _ = cf.paper_onset_time(); // reported only; may be negative or NaN
    }
    assert!(nontrivial > 500, "only {nontrivial} cases with T > 0");
}

/// R8(b), D2: the limit is sign(L)(√ρ̄, √ρ); |x² − ρ̄| ≤ 1e-8 at t = 40/(min(ρ̄, A)c_1).
#[test]
fn limits_follow_sign_rule() {
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    for _ in 0..500 {
        let sys = Thm2System {
            c: rng.random_range(-3.0..3.0),
            c1: rng.random_range(0.5..2.0),
        };
        let cf = sys.closed_form(rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0));
        let imb = sys.imbalance();
        let s = cf.at(80.0 / sys.residue_rate());
        let (x_inf, y_inf) = cf.limit();
        assert_eq!(x_inf.signum(), cf.l().signum());
        assert!(s.rhob_minus_x2.abs() <= 1e-8 && (s.x - x_inf).abs() <= 1e-8);
        assert!((s.y - y_inf).abs() <= 1e-8 * imb.rho.sqrt().max(1.0));
    }
}

/// R8(e): J·e = λe at each stationary point (≤ 1e-12), f = 0 there, and the eigenvalues solve
/// the characteristic polynomial (≤ 1e-10).
#[test]
fn fixed_point_eigenpairs() {
    for c in CS {
        let sys = Thm2System { c, c1: 1.7 };
        for p in sys.fixed_points() {
            let mut f = [0.0; 2];
            sys.rhs(0.0, &[p.x, p.y], &mut f);
            assert!(stats::max_abs(f) <= 1e-14);
            let j = sys.jacobian(p.x, p.y);
            let (tr, det) = (j[0][0] + j[1][1], j[0][0] * j[1][1] - j[0][1] * j[1][0]);
            for (lambda, e) in p.eigenvalues.iter().zip(p.eigenvectors) {
                let je = [
                    j[0][0] * e[0] + j[0][1] * e[1],
                    j[1][0] * e[0] + j[1][1] * e[1],
                ];
                let scale = lambda.abs().max(1.0) * e[0].abs().max(e[1].abs());
                assert!(
                    stats::larger((je[0] - lambda * e[0]).abs(), (je[1] - lambda * e[1]).abs())
                        <= 1e-12 * scale
                );
                assert!(
                    (lambda * lambda - tr * lambda + det).abs() <= 1e-10 * (tr * tr + det.abs())
                );
            }
            let stable = p.eigenvalues.iter().all(|l| *l < 0.0);
            assert_eq!(stable, p.kind == FixedPointKind::StableNode);
        }
    }
}

/// R12: the Riccati ratio r(t) and s(t) against RK4 states (away from the pole of r and while
/// the residues in s are well above the integration error).
#[test]
fn riccati_r_and_s_match_ode() {
    for c in CS {
        let sys = Thm2System { c, c1: 1.0 };
        let Imbalance { rho, rhob, .. } = sys.imbalance();
        for (x0, y0) in [(0.5, 1.5), (1.0, -0.5 * rhob), (1.0, -2.0 - rhob)] {
            let cf = sys.closed_form(x0, y0);
            for (t, z) in rk4(&sys, &[x0, y0], 2.0, 8000, 80) {
                let (x, y) = (z[0], z[1]);
                if x.abs() > 1e-2 {
                    let r = cf.riccati_r(t);
                    assert!(
                        (r - y / x).abs() <= 1e-9 * (1.0 + r.abs()),
                        "c {c}: r {r} vs {}",
                        y / x
                    );
                }
                let s_ode = (1.0 - x * y) / ((rho * x - y) * (rhob * x + y));
                let s = cf.s(t);
                assert!(
                    (s - s_ode).abs() <= 1e-8 * (1.0 + s.abs()),
                    "c {c} t {t}: s {s} vs {s_ode}"
                );
            }
        }
    }
}

/// D3: from small inits (|x_0|, |y_0| ~ 1e-4, δ ~ 1e-8) the time to xy = ½ is
/// ln(4A²/(ρL²))/(2Ac_1) to 1e-3 relative.
#[test]
fn half_time_estimate_for_small_init() {
    let mut rng = ChaCha8Rng::seed_from_u64(24);
    for _ in 0..8 {
        let scale = 10f64.powf(rng.random_range(-6.0..-2.0));
        let (x0, y0) = (
            scale * rng.random_range(-1.0..1.0),
            scale * rng.random_range(-1.0..1.0),
        );
        let g0 = scale * scale * rng.random_range(0.0..1.0);
        let c = g0 + y0 * y0 - x0 * x0;
        let sys = Thm2System {
            c,
            c1: rng.random_range(0.5..2.0),
        };
        let cf = Thm2ClosedForm::with_g0(sys, x0, y0, g0);
        let exact = cf.half_time().unwrap();
        let s = cf.at(exact);
        assert!((s.x * s.y - 0.5).abs() <= 1e-10);
        let estimate = cf.half_time_estimate();
        assert!(
            (estimate / exact - 1.0).abs() <= 1e-3,
            "{estimate} vs {exact}"
        );
    }
}

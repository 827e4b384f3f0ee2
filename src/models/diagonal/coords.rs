//! Coordinates of the diagonal flow (spec 004 §2.3–2.4): the WLOG orientation of each (u_i, v_i)
//! pair, the log layout ζ_i = ln w_i with the conserved ln c_i, and the conversions between
//! layouts, all in the log domain so that any α works (α = 1e−256 and e^{−2000} included).
//!
//! After orientation (swap if |v| > |u|, then multiply both by sgn u; spec §2.3, the corrected
//! §C.3) every pair has u > |v|, so w = u + v > 0 and c = u² − v² > 0, and
//! u = ½(e^ζ + e^{ln c − ζ}), v = ½(e^ζ − e^{ln c − ζ}), β = ¼(e^{2ζ} − e^{2 ln c − 2ζ}).
//! Orientation preserves β = u v, so β and the flow do not depend on it.

use super::DiagonalError;

/// Largest exponent the log-layout right-hand side evaluates, ln 1e8 (spec §8.2): true
/// trajectories never reach it (|β| stays bounded), trial steps of implicit solvers may.
pub const EXP_CAP: f64 = 18.420_680_743_952_367;

/// ln(eᵃ + eᵇ) without overflow.
pub fn log_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// ln|eᵃ − eᵇ| without overflow or cancellation (−∞ when a = b).
pub fn log_sub_exp(a: f64, b: f64) -> f64 {
    let hi = a.max(b);
    hi + (-(-(a - b).abs()).exp_m1()).ln()
}

/// ¼(eˣ − eʸ) as ¼ e^{max} (1 − e^{−|x−y|}), exact near x = y (expm1).
fn quarter_exp_difference(x: f64, y: f64) -> f64 {
    let d = x - y;
    if d == 0.0 {
        return 0.0;
    }
    0.25 * x.max(y).exp() * (-(-d.abs()).exp_m1()) * d.signum()
}

/// β_i = ¼(e^{2ζ} − e^{2 ln c − 2ζ}) and its derivative ∂β/∂ζ = u² + v² = ½(e^{2ζ} + e^{2 ln c − 2ζ}),
/// with both exponents capped at `cap` (the capped function's exact derivative; spec §8.2).
pub fn beta_and_speed(zeta: f64, ln_c: f64, cap: f64) -> (f64, f64) {
    let (x, y) = (2.0 * zeta, 2.0 * (ln_c - zeta));
    let (xc, yc) = (x.min(cap), y.min(cap));
    let beta = quarter_exp_difference(xc, yc);
    let live = |e: f64, capped: bool| if capped { 0.0 } else { e.exp() };
    let speed = 0.5 * (live(xc, x > cap) + live(yc, y > cap));
    (beta, speed)
}

/// ln|β_i| and sgn β_i from ζ_i and ln c_i (spec §2.4 "log-magnitude without overflow").
pub fn ln_abs_beta(zeta: f64, ln_c: f64) -> (f64, f64) {
    let (x, y) = (2.0 * zeta, 2.0 * (ln_c - zeta));
    (log_sub_exp(x, y) - 4.0_f64.ln(), (x - y).signum())
}

/// How a raw pair (u, v) was mapped to its normalized form (ũ, ṽ) with ũ > |ṽ|.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Orientation {
    /// u and v were exchanged (|v| > |u|).
    pub swapped: bool,
    /// Both were multiplied by −1 (after the swap, u < 0).
    pub negated: bool,
}

impl Orientation {
    /// The orientation of a raw pair; fails when |u| = |v| (c = 0, excluded by A4.3(i)).
    pub fn of(u: f64, v: f64) -> Result<Self, DiagonalError> {
        if !(u.is_finite() && v.is_finite()) || u.abs() == v.abs() {
            return Err(DiagonalError::Invalid(format!(
                "the pair (u, v) = ({u:e}, {v:e}) has |u| = |v| or is not finite: c = 0 \
                 violates Assumption 4.3(i) and has no log layout"
            )));
        }
        let swapped = v.abs() > u.abs();
        let lead = if swapped { v } else { u };
        Ok(Orientation {
            swapped,
            negated: lead < 0.0,
        })
    }

    /// (ũ, ṽ) from (u, v).
    pub fn normalize(self, u: f64, v: f64) -> (f64, f64) {
        let (a, b) = if self.swapped { (v, u) } else { (u, v) };
        if self.negated {
            (-a, -b)
        } else {
            (a, b)
        }
    }

    /// (u, v) from (ũ, ṽ).
    pub fn restore(self, nu: f64, nv: f64) -> (f64, f64) {
        let (a, b) = if self.negated { (-nu, -nv) } else { (nu, nv) };
        if self.swapped {
            (b, a)
        } else {
            (a, b)
        }
    }
}

/// The side data of the log layout (spec §2.4 layout 2): ln c_i (never c, which underflows
/// for α ≲ 1e−160) and each coordinate's orientation.
#[derive(Debug, Clone, PartialEq)]
pub struct LogCoordinates {
    ln_c: Vec<f64>,
    orientation: Vec<Orientation>,
}

impl LogCoordinates {
    /// The log layout of θ(0) = α θ_0 with θ_0 = (u0, v0), given ln α (any value, e.g. −2000):
    /// ln c_i = 2 ln α + ln(ũ0² − ṽ0²), ζ_i(0) = ln α + ln(ũ0 + ṽ0). Returns (coordinates, ζ(0)).
    pub fn from_init(
        u0: &[f64],
        v0: &[f64],
        ln_alpha: f64,
    ) -> Result<(Self, Vec<f64>), DiagonalError> {
        if u0.len() != v0.len() || !ln_alpha.is_finite() {
            return Err(DiagonalError::Invalid(
                "u0 and v0 need equal lengths and ln α must be finite".into(),
            ));
        }
        let mut ln_c = Vec::with_capacity(u0.len());
        let mut orientation = Vec::with_capacity(u0.len());
        let mut zeta = Vec::with_capacity(u0.len());
        for (&u, &v) in u0.iter().zip(v0) {
            let o = Orientation::of(u, v)?;
            let (nu, nv) = o.normalize(u, v);
            // c = (ũ − ṽ)(ũ + ṽ): both factors positive, no cancellation of squares
            ln_c.push(2.0 * ln_alpha + (nu - nv).ln() + (nu + nv).ln());
            zeta.push(ln_alpha + (nu + nv).ln());
            orientation.push(o);
        }
        Ok((LogCoordinates { ln_c, orientation }, zeta))
    }

    /// The log layout of a raw state (u, v), e.g. after a perturbation (re-normalizes and
    /// recomputes ln c; spec §8.4). Returns (coordinates, ζ).
    pub fn from_raw(u: &[f64], v: &[f64]) -> Result<(Self, Vec<f64>), DiagonalError> {
        Self::from_init(u, v, 0.0)
    }

    /// Replaces coordinate i of the log state (`self`, `zeta`) by the raw pair (u, v)
    /// (re-oriented, ln c recomputed), leaving every other coordinate's ζ_j and ln c_j exactly
    /// as they were. A perturbation must go through this rather than a raw round trip of the
    /// whole state: for a small pair with b ∉ {0, 2} the f64 values of u and v no longer
    /// resolve u ± v (spec §8.2), so only the perturbed pairs may pass through raw form.
    pub fn set_pair(
        &mut self,
        zeta: &mut [f64],
        i: usize,
        u: f64,
        v: f64,
    ) -> Result<(), DiagonalError> {
        let (single, z) = Self::from_raw(&[u], &[v])?;
        self.ln_c[i] = single.ln_c[0];
        self.orientation[i] = single.orientation[0];
        zeta[i] = z[0];
        Ok(())
    }

    pub fn p(&self) -> usize {
        self.ln_c.len()
    }

    /// ln c_i = ln(u_i² − v_i²) of the normalized pairs.
    pub fn ln_c(&self) -> &[f64] {
        &self.ln_c
    }

    pub fn orientation(&self) -> &[Orientation] {
        &self.orientation
    }

    /// β_i from ζ_i (uncapped).
    pub fn beta_i(&self, i: usize, zeta_i: f64) -> f64 {
        beta_and_speed(zeta_i, self.ln_c[i], f64::INFINITY).0
    }

    /// β = u ⊙ v of a log state.
    pub fn beta(&self, zeta: &[f64], out: &mut [f64]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.beta_i(i, zeta[i]);
        }
    }

    /// ln|β_i| and sgn β_i.
    pub fn ln_abs_beta(&self, i: usize, zeta_i: f64) -> (f64, f64) {
        ln_abs_beta(zeta_i, self.ln_c[i])
    }

    /// ln ũ_i = ln max(|u_i|, |v_i|) = ln ½(e^ζ + e^{ln c − ζ}).
    pub fn ln_weight(&self, i: usize, zeta_i: f64) -> f64 {
        log_add_exp(zeta_i, self.ln_c[i] - zeta_i) - std::f64::consts::LN_2
    }

    /// The normalized pair (ũ_i, ṽ_i), ũ > |ṽ|.
    pub fn normalized_pair(&self, i: usize, zeta_i: f64) -> (f64, f64) {
        let other = self.ln_c[i] - zeta_i;
        let nu = self.ln_weight(i, zeta_i).exp();
        let nv = 0.5 * (zeta_i - other).signum() * log_sub_exp(zeta_i, other).exp();
        (nu, nv)
    }

    /// The raw state [u; v] (original orientation) of a log state.
    pub fn raw_state(&self, zeta: &[f64]) -> Vec<f64> {
        let p = self.p();
        let mut state = vec![0.0; 2 * p];
        for i in 0..p {
            let (nu, nv) = self.normalized_pair(i, zeta[i]);
            let (u, v) = self.orientation[i].restore(nu, nv);
            state[i] = u;
            state[p + i] = v;
        }
        state
    }
}

/// The rescaled log scale b = log_α w = −ζ/Λ with Λ = ln(1/α) (spec §2.4 layout 3).
pub fn log_scale(zeta: &[f64], lambda: f64) -> Vec<f64> {
    zeta.iter().map(|z| -z / lambda).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(from: f64, to: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|k| from + (to - from) * k as f64 / (n - 1) as f64)
            .collect()
    }

    #[test]
    fn orientation_round_trips_and_keeps_the_product() {
        for (u, v) in [
            (0.3, 0.1),
            (0.3, -0.1),
            (-0.3, 0.1),
            (0.1, 0.3),
            (-0.1, -0.3),
            (0.1, -0.3),
        ] {
            let o = Orientation::of(u, v).unwrap();
            let (nu, nv) = o.normalize(u, v);
            assert!(nu > nv.abs(), "({u}, {v}) → ({nu}, {nv})");
            assert_eq!(nu * nv, u * v);
            assert_eq!(o.restore(nu, nv), (u, v));
        }
        assert!(Orientation::of(0.2, -0.2).is_err());
    }

    #[test]
    fn set_pair_replaces_one_pair_and_keeps_the_others_exactly() {
        // α = 1e−32: coordinate 0 sits at b = 1.5, where u ≈ −v ≈ 5e−9 and w = u + v ≈ 1e−48
        // is far below the rounding of u: a raw round trip of the whole state would lose it.
        let ln_alpha = -32.0 * 10f64.ln();
        let (mut coords, mut zeta) =
            LogCoordinates::from_init(&[0.8, 1.1], &[-0.3, 0.4], ln_alpha).unwrap();
        zeta[0] = -1.5 * -ln_alpha;
        let (before_c, before_z) = (coords.ln_c()[0], zeta[0]);
        coords.set_pair(&mut zeta, 1, -0.2, 0.7).unwrap();
        assert_eq!((coords.ln_c()[0], zeta[0]), (before_c, before_z));
        let raw = coords.raw_state(&zeta);
        assert!(
            (raw[1] + 0.2).abs() < 1e-15 && (raw[3] - 0.7).abs() < 1e-15,
            "{raw:?}"
        );
        assert!((coords.beta_i(1, zeta[1]) + 0.14).abs() < 1e-15);
        assert!(coords.set_pair(&mut zeta, 1, 0.3, -0.3).is_err());
    }

    #[test]
    fn raw_to_log_to_raw_is_exact_to_rounding() {
        let u = [0.7, -0.2, 0.05, -1.3, 0.4];
        let v = [0.1, 0.9, -0.04, 0.6, -0.8];
        let (coords, zeta) = LogCoordinates::from_raw(&u, &v).unwrap();
        let back = coords.raw_state(&zeta);
        // a few ulps of the pair's size (ln and exp each round once), far below the
        // 1e−14 of spec §7 `reconstruction-lemmas`
        for i in 0..5 {
            let size = u[i].abs().max(v[i].abs());
            assert!((back[i] - u[i]).abs() <= 2e-15 * size, "u[{i}]");
            assert!((back[5 + i] - v[i]).abs() <= 2e-15 * size, "v[{i}]");
            let beta = coords.beta_i(i, zeta[i]);
            assert!((beta - u[i] * v[i]).abs() <= 2e-15 * size * size, "{i}");
            let (ln_b, sign) = coords.ln_abs_beta(i, zeta[i]);
            assert!((ln_b.exp() * sign / (u[i] * v[i]) - 1.0).abs() < 1e-14);
        }
    }

    #[test]
    fn log_layout_survives_alpha_far_below_the_f64_range() {
        // α = e^{−2000}: c = α² c̄ is e^{−4000}, yet ln c, ζ and the plateau values are exact.
        let (coords, zeta) = LogCoordinates::from_init(&[0.8], &[-0.3], -2000.0).unwrap();
        assert!((coords.ln_c()[0] - (-4000.0 + (0.64_f64 - 0.09).ln())).abs() < 1e-12);
        assert!((zeta[0] - (-2000.0 + 0.5_f64.ln())).abs() < 1e-12);
        assert_eq!(coords.beta_i(0, zeta[0]), 0.0); // underflows, correctly
                                                    // active with s = +1 (ζ = ln w ≈ 0): β = ¼ w², the c-term is e^{−4000}
        assert!((coords.beta_i(0, 0.0) - 0.25).abs() < 1e-16);
        // active with s = −1 (ζ ≈ ln c): β = −¼ c²/w²
        let lc = coords.ln_c()[0];
        assert!((coords.beta_i(0, lc) + 0.25).abs() < 1e-15);
        // b ≈ 1 (ζ = ½ ln c): β = 0 and ln|β| finite-free (−∞ exactly at the crossing)
        assert_eq!(coords.beta_i(0, 0.5 * lc), 0.0);
    }

    #[test]
    fn speed_is_the_derivative_of_beta_and_vanishes_past_the_cap() {
        let ln_c = -3.0;
        for zeta in [-2.0, -1.5, -0.3, 0.8] {
            let (_, speed) = beta_and_speed(zeta, ln_c, EXP_CAP);
            let h = 1e-6;
            let fd = (beta_and_speed(zeta + h, ln_c, EXP_CAP).0
                - beta_and_speed(zeta - h, ln_c, EXP_CAP).0)
                / (2.0 * h);
            assert!((speed - fd).abs() < 1e-8 * speed, "{zeta}: {speed} vs {fd}");
        }
        // past the cap on the 2ζ side only the (tiny) c-term still moves
        let (beta, speed) = beta_and_speed(30.0, ln_c, EXP_CAP);
        assert_eq!(beta, 0.25 * (EXP_CAP.exp() - (2.0 * (ln_c - 30.0)).exp()));
        assert!(speed < 1e-20);
    }

    /// Lemmas D.1–D.3 on the grid of spec §4: α ∈ {1e−16, 1e−32, 1e−64}, c̄ ∈ [0.1, 10],
    /// margin c ∈ {0.2, 0.5}, b on 200 points of [−0.5, 2.5].
    #[test]
    fn lemmas_d1_to_d3_hold_on_the_reconstruction_grid() {
        let mut checked = [0usize; 3];
        for ln_alpha in [-16.0 * 10f64.ln(), -32.0 * 10f64.ln(), -64.0 * 10f64.ln()] {
            let lambda = -ln_alpha;
            for c_bar in [0.1, 0.5, 1.0, 3.0, 10.0] {
                let ln_c = 2.0 * ln_alpha + f64::ln(c_bar);
                let coords = LogCoordinates {
                    ln_c: vec![ln_c],
                    orientation: vec![Orientation {
                        swapped: false,
                        negated: false,
                    }],
                };
                for b in grid(-0.5, 2.5, 200) {
                    let zeta = -b * lambda;
                    let ln_u = coords.ln_weight(0, zeta);
                    let (_, nv) = coords.normalized_pair(0, zeta);
                    for margin in [0.2, 0.5] {
                        if b > margin && b < 2.0 - margin {
                            // D.1: max(|u|, |v|) ≤ α^{c/2}
                            assert!(ln_u <= 0.5 * margin * ln_alpha, "D.1 at b = {b}");
                            checked[0] += 1;
                        }
                        if b <= -margin || b >= 2.0 + margin {
                            assert!(ln_u > 0.0, "D.2 at b = {b}"); // |u| > 1
                            checked[1] += 1;
                        }
                        if b > 1.0 + margin {
                            assert!(nv < 0.0, "D.3 at b = {b}");
                            checked[2] += 1;
                        } else if b < 1.0 - margin {
                            assert!(nv > 0.0, "D.3 at b = {b}");
                            checked[2] += 1;
                        }
                    }
                }
            }
        }
        assert!(checked.iter().all(|&n| n > 500), "{checked:?}");
    }
}

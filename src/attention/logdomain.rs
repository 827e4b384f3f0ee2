//! Log-domain arithmetic for the token-selection model (spec 003 §8.2).
//!
//! Once logit gaps pass ≈ 37, the interesting quantities (1 − φ_opt, L − L*, ∇L) are far below
//! the rounding error of the O(1) quantities they are differences of, and past ≈ 745 they
//! underflow f64 altogether. Every such quantity is therefore carried as a [`SignedLog`]
//! (sign · e^log) and only turned into an f64 after a common scale has been divided out.

use crate::stats;

/// A real number sign · e^log; zero has sign 0 and log −∞.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignedLog {
    /// −1, 0 or +1.
    pub sign: f64,
    /// ln of the magnitude (−∞ for zero).
    pub log: f64,
}

impl SignedLog {
    pub const ZERO: SignedLog = SignedLog {
        sign: 0.0,
        log: f64::NEG_INFINITY,
    };

    /// The positive number e^log (zero when log = −∞).
    pub fn exp(log: f64) -> Self {
        if log == f64::NEG_INFINITY {
            Self::ZERO
        } else {
            SignedLog { sign: 1.0, log }
        }
    }

    pub fn from_f64(x: f64) -> Self {
        if x == 0.0 {
            Self::ZERO
        } else {
            SignedLog {
                sign: x.signum(),
                log: x.abs().ln(),
            }
        }
    }

    pub fn is_zero(self) -> bool {
        self.sign == 0.0
    }

    /// The value divided by e^shift, as an f64 (underflows gracefully to 0).
    pub fn scaled(self, shift: f64) -> f64 {
        if self.is_zero() {
            0.0
        } else {
            self.sign * (self.log - shift).exp()
        }
    }

    /// The value as an f64.
    pub fn value(self) -> f64 {
        self.scaled(0.0)
    }

    /// Σ terms, exact up to rounding relative to the largest term (any cancellation is the
    /// terms' own, not the representation's).
    pub fn sum<I: Iterator<Item = SignedLog> + Clone>(terms: I) -> Self {
        let top = stats::max(terms.clone().filter(|t| !t.is_zero()).map(|t| t.log));
        if top == f64::NEG_INFINITY {
            return Self::ZERO;
        }
        let total: f64 = terms.map(|t| t.scaled(top)).sum();
        if total == 0.0 {
            Self::ZERO
        } else {
            SignedLog {
                sign: total.signum(),
                log: top + total.abs().ln(),
            }
        }
    }
}

impl std::ops::Neg for SignedLog {
    type Output = SignedLog;
    fn neg(self) -> Self {
        SignedLog {
            sign: -self.sign,
            log: self.log,
        }
    }
}

impl std::ops::Mul for SignedLog {
    type Output = SignedLog;
    fn mul(self, other: Self) -> Self {
        if self.is_zero() || other.is_zero() {
            Self::ZERO
        } else {
            SignedLog {
                sign: self.sign * other.sign,
                log: self.log + other.log,
            }
        }
    }
}

/// ln Σ e^{a_k} over the finite-or-(−∞) values yielded; −∞ for an empty or all-(−∞) input.
pub fn log_sum_exp<I: Iterator<Item = f64> + Clone>(values: I) -> f64 {
    let top = stats::max_with(f64::NEG_INFINITY, values.clone());
    if top.is_infinite() {
        return top;
    }
    top + values.map(|v| (v - top).exp()).sum::<f64>().ln()
}

/// softplus(x) = ln(1 + eˣ) without overflow or cancellation.
pub fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// ln σ(x) = −softplus(−x).
pub fn log_sigmoid(x: f64) -> f64 {
    -softplus(-x)
}

/// ln(eˣ − 1) for x > 0, given x and ln x (ln x carries the information when x underflows).
pub fn log_expm1(x: f64, log_x: f64) -> f64 {
    if x < 1e-5 {
        // ln((eˣ − 1)/x) = x/2 + x²/24 + O(x⁴)
        log_x + x * (0.5 + x / 24.0)
    } else if x <= 30.0 {
        x.exp_m1().ln()
    } else {
        x + (-(-x).exp()).ln_1p()
    }
}

/// ln softplus(r) = ln ln(1 + eʳ), accurate for every r (softplus(r) ≈ eʳ for r ≪ 0).
pub fn log_softplus(r: f64) -> f64 {
    if r < -20.0 {
        // ln(ln(1+x)/x) = −x/2 + x²/24… with x = eʳ < 3e−9
        let x = r.exp();
        r - 0.5 * x
    } else {
        softplus(r).ln()
    }
}

/// Writes vₜ − φᵀv for every token t, with φ = exp(`log_softmax`), as signed logs.
///
/// Computed around the pivot a = argmax φ: v_a − φᵀv = Σ_{t≠a} φ_t (v_a − v_t) is a sum of
/// terms that carry the small weights φ_t explicitly, and vₜ − φᵀv = (vₜ − v_a) + (v_a − φᵀv).
/// This keeps the centred values exact when attention saturates (φ_a → 1), where the direct
/// difference vₜ − φᵀv loses everything below the rounding of v_a.
pub fn centered(values: &[f64], log_softmax: &[f64], pivot: usize, out: &mut [SignedLog]) {
    let va = values[pivot];
    centered_with_gaps(
        values,
        log_softmax,
        pivot,
        |t| (va - values[t]).abs().ln(),
        out,
    );
}

/// [`centered`] given ln|v_pivot − v_t| for every t ≠ pivot (with v_pivot ≠ v_t) by
/// `log_gap`: the logarithms of fixed values computed once (the fixed-decoder model's scores).
pub fn centered_with_gaps(
    values: &[f64],
    log_softmax: &[f64],
    pivot: usize,
    log_gap: impl Fn(usize) -> f64,
    out: &mut [SignedLog],
) {
    let va = values[pivot];
    // the terms φ_t(v_a − v_t) go to `out` first, so the signed sum (two passes) forms each once
    for (t, (o, (&v, &ls))) in out
        .iter_mut()
        .zip(values.iter().zip(log_softmax))
        .enumerate()
    {
        *o = if t == pivot || v == va {
            SignedLog::ZERO
        } else {
            let gap = SignedLog {
                sign: (va - v).signum(),
                log: log_gap(t),
            };
            SignedLog::exp(ls) * gap
        };
    }
    let at_pivot = SignedLog::sum(out.iter().copied());
    let eps = at_pivot.value();
    for (t, (o, &v)) in out.iter_mut().zip(values).enumerate() {
        *o = if t == pivot || v == va {
            at_pivot
        } else {
            SignedLog::from_f64((v - va) + eps)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_sums_survive_underflow() {
        // e^{-1000}·(3 − 1) = 2e^{-1000}: f64 cannot hold it, the signed log can
        let terms = [
            SignedLog::exp(-1000.0 + 3f64.ln()),
            -SignedLog::exp(-1000.0),
        ];
        let s = SignedLog::sum(terms.iter().copied());
        assert_eq!(s.sign, 1.0);
        assert!((s.log - (-1000.0 + 2f64.ln())).abs() < 1e-12);
        assert_eq!(
            SignedLog::sum([SignedLog::ZERO].iter().copied()),
            SignedLog::ZERO
        );
        assert!((SignedLog::from_f64(-2.5).value() + 2.5).abs() < 1e-15);
    }

    #[test]
    fn scalar_helpers_match_direct_formulas_where_those_are_exact() {
        for x in [-50.0f64, -3.0, 0.0, 2.0, 40.0, 800.0] {
            let direct = if x < 30.0 { x.exp().ln_1p() } else { x };
            assert!((softplus(x) - direct).abs() <= 1e-14 * direct.abs().max(1e-300));
        }
        // ln(eˣ−1) on both sides of each branch switch
        for x in [1e-7f64, 1e-5, 0.5, 30.0, 31.0, 900.0] {
            let reference = if x < 700.0 { x.exp_m1().ln() } else { x };
            assert!((log_expm1(x, x.ln()) - reference).abs() < 1e-12 * reference.abs().max(1.0));
        }
        // x far below f64: only ln x is known
        assert!((log_expm1(0.0, -2000.0) + 2000.0).abs() < 1e-12);
        for r in [-800.0, -25.0, -19.0, 0.0, 5.0, 100.0] {
            let reference = if r < -700.0 { r } else { softplus(r).ln() };
            assert!((log_softplus(r) - reference).abs() < 1e-12 * reference.abs().max(1.0));
        }
        let lse = log_sum_exp([-1000.0, -1000.0, f64::NEG_INFINITY].iter().copied());
        assert!((lse - (-1000.0 + 2f64.ln())).abs() < 1e-12);
        assert_eq!(log_sum_exp(std::iter::empty()), f64::NEG_INFINITY);
    }

    #[test]
    fn centred_values_keep_saturated_residues() {
        // φ = (1 − 2e^{-800}, e^{-800}, e^{-800}), v = (1, 0, 0): v_0 − φᵀv = 2e^{-800}
        let ls = [-2.0 * (-800f64).exp(), -800.0, -800.0];
        let v = [1.0, 0.0, 0.0];
        let mut out = [SignedLog::ZERO; 3];
        centered(&v, &ls, 0, &mut out);
        assert_eq!(out[0].sign, 1.0);
        assert!((out[0].log - (-800.0 + 2f64.ln())).abs() < 1e-12);
        assert!((out[1].value() + 1.0).abs() < 1e-15);
        // moderate case against the direct formula
        let ls = [0.2f64.ln(), 0.3f64.ln(), 0.5f64.ln()];
        let v = [1.5, -2.0, 0.25];
        let mean = 0.2 * 1.5 - 0.3 * 2.0 + 0.5 * 0.25;
        centered(&v, &ls, 2, &mut out);
        for t in 0..3 {
            assert!((out[t].value() - (v[t] - mean)).abs() < 1e-15);
        }
    }
}

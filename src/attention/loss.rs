//! The two margin losses ℓ(m) of spec 003 §1.1, in the log domain.

use serde::{Deserialize, Serialize};

use super::logdomain::{log_expm1, log_sigmoid, log_softplus, softplus};

/// A decreasing loss of the margin m = y·Φ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// ℓ(m) = e^{−m} (the paper's theory).
    Exponential,
    /// ℓ(m) = ln(1 + e^{−m}), ℓ'(m) = −σ(−m).
    Logistic,
}

impl Loss {
    /// ln ℓ(m).
    pub fn log_value(self, m: f64) -> f64 {
        match self {
            Loss::Exponential => -m,
            Loss::Logistic => log_softplus(-m),
        }
    }

    /// ℓ(m).
    pub fn value(self, m: f64) -> f64 {
        match self {
            Loss::Exponential => (-m).exp(),
            Loss::Logistic => softplus(-m),
        }
    }

    /// ln |ℓ'(m)| (ℓ' < 0 everywhere).
    pub fn log_neg_derivative(self, m: f64) -> f64 {
        match self {
            Loss::Exponential => -m,
            Loss::Logistic => log_sigmoid(-m),
        }
    }

    /// ln(ℓ''(m)/|ℓ'(m)|): 0 for the exponential loss, ln σ(m) for the logistic one.
    pub fn log_curvature_ratio(self, m: f64) -> f64 {
        match self {
            Loss::Exponential => 0.0,
            Loss::Logistic => log_sigmoid(m),
        }
    }

    /// ln(ℓ(γ − δ) − ℓ(γ)) for δ ≥ 0 given with its logarithm: the excess of a sample whose
    /// best reachable margin is γ and whose attention falls short of it by δ (spec 003 §8.2).
    pub fn log_excess(self, gamma: f64, delta: f64, log_delta: f64) -> f64 {
        if log_delta == f64::NEG_INFINITY {
            return f64::NEG_INFINITY;
        }
        let log_growth = log_expm1(delta, log_delta);
        match self {
            // e^{−γ}(e^δ − 1)
            Loss::Exponential => -gamma + log_growth,
            // ln(1 + e^{δ−γ}) − ln(1 + e^{−γ}) = ln(1 + σ(−γ)(e^δ − 1))
            Loss::Logistic => log_softplus(log_sigmoid(-gamma) + log_growth),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excess_matches_the_direct_difference_where_that_is_exact() {
        for loss in [Loss::Exponential, Loss::Logistic] {
            for (gamma, delta) in [(1.0, 0.5), (-2.0, 3.0), (0.3, 1e-3), (4.0, 20.0)] {
                let direct = loss.value(gamma - delta) - loss.value(gamma);
                let got = loss.log_excess(gamma, delta, f64::ln(delta)).exp();
                assert!(
                    (got - direct).abs() < 1e-13 * direct,
                    "{loss:?} {gamma} {delta}"
                );
            }
        }
    }

    #[test]
    fn excess_far_below_rounding_keeps_its_leading_term() {
        // δ = e^{−900}: excess = ℓ'(γ)·(−δ)(1 + O(δ)), i.e. ln|ℓ'(γ)| − 900
        for loss in [Loss::Exponential, Loss::Logistic] {
            let got = loss.log_excess(1.0, 0.0, -900.0);
            let want = loss.log_neg_derivative(1.0) - 900.0;
            assert!((got - want).abs() < 1e-12, "{loss:?}: {got} vs {want}");
        }
    }

    #[test]
    fn derivatives_are_consistent() {
        let h = 1e-6;
        for loss in [Loss::Exponential, Loss::Logistic] {
            for m in [-3.0, 0.0, 2.5] {
                let fd = (loss.value(m + h) - loss.value(m - h)) / (2.0 * h);
                let d1 = -loss.log_neg_derivative(m).exp();
                assert!((fd - d1).abs() < 1e-8, "{loss:?} ℓ' at {m}");
                let fd2 = (loss.log_neg_derivative(m + h).exp()
                    - loss.log_neg_derivative(m - h).exp())
                    / (2.0 * h);
                // ℓ'' = −d|ℓ'|/dm
                let d2 = (loss.log_neg_derivative(m) + loss.log_curvature_ratio(m)).exp();
                assert!((-fd2 - d2).abs() < 1e-8, "{loss:?} ℓ'' at {m}");
            }
        }
    }
}

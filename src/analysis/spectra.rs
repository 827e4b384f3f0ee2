//! Singular spectra of weight matrices and the rank measures the papers use: stable rank
//! ‖A‖_F²/‖A‖_2² (spec 004's "gradual rank increase"), effective rank (Roy & Vetterli 2007),
//! numerical rank, and the nuclear norm (spec 001's implicit bias).
//!
//! Compute the [`SingularSpectrum`] once and read every measure from it. The zero matrix has
//! every rank measure 0 by convention (the ratios are 0/0 there), which is what a plot of
//! rank(W(t) − W(0)) wants at t = 0.

use super::linearize::iteration_cap;
use super::AnalysisError;
use nalgebra::{DMatrix, SVD};

/// Singular values σ_1 ≥ σ_2 ≥ … ≥ 0 of a matrix (min(rows, cols) of them).
#[derive(Debug, Clone, PartialEq)]
pub struct SingularSpectrum {
    values: Vec<f64>,
}

impl SingularSpectrum {
    /// The singular values of `matrix` (no singular vectors are computed).
    pub fn of(matrix: &DMatrix<f64>) -> Result<Self, AnalysisError> {
        if let Some(k) = matrix.iter().position(|x| !x.is_finite()) {
            return Err(AnalysisError::NonFinite {
                what: format!("matrix entry {k} (column-major) in a singular value decomposition"),
            });
        }
        let n = matrix.nrows().min(matrix.ncols());
        if n == 0 {
            return Ok(SingularSpectrum { values: Vec::new() });
        }
        // Capped so that a pathological input fails instead of looping.
        let max_sweeps = iteration_cap(n);
        let svd = SVD::try_new(matrix.clone(), false, false, f64::EPSILON, max_sweeps).ok_or_else(
            || AnalysisError::NotConverged {
                method: "singular value decomposition".into(),
                iterations: max_sweeps,
                detail: format!("{}×{} matrix", matrix.nrows(), matrix.ncols()),
            },
        )?;
        let mut values: Vec<f64> = svd.singular_values.iter().copied().collect();
        values.sort_by(|a, b| b.total_cmp(a));
        Ok(SingularSpectrum { values })
    }

    /// σ_1 ≥ σ_2 ≥ …
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// ‖A‖_2 = σ_1 (0 for an empty matrix).
    pub fn spectral_norm(&self) -> f64 {
        self.values.first().copied().unwrap_or(0.0)
    }

    /// ‖A‖_F = (Σ σ_i²)^½, scaled by σ_1 against overflow.
    pub fn frobenius_norm(&self) -> f64 {
        self.spectral_norm() * self.stable_rank().sqrt()
    }

    /// ‖A‖_* = Σ σ_i.
    pub fn nuclear_norm(&self) -> f64 {
        self.values.iter().sum()
    }

    /// ‖A‖_F² / ‖A‖_2² = Σ (σ_i/σ_1)² ∈ [1, rank] (0 for the zero matrix).
    pub fn stable_rank(&self) -> f64 {
        let top = self.spectral_norm();
        if top == 0.0 {
            return 0.0;
        }
        self.values.iter().map(|s| (s / top).powi(2)).sum()
    }

    /// exp(−Σ p_i ln p_i) with p_i = σ_i / Σσ: the exponential of the entropy of the normalized
    /// singular values, ∈ [1, rank] (0 for the zero matrix).
    pub fn effective_rank(&self) -> f64 {
        let total = self.nuclear_norm();
        if total == 0.0 {
            return 0.0;
        }
        let entropy: f64 = self
            .values
            .iter()
            .map(|s| s / total)
            .filter(|&p| p > 0.0)
            .map(|p| -p * p.ln())
            .sum();
        entropy.exp()
    }

    /// Number of singular values above `rel_tol`·σ_1.
    pub fn numerical_rank(&self, rel_tol: f64) -> usize {
        let threshold = rel_tol * self.spectral_norm();
        self.values.iter().filter(|&&s| s > threshold).count()
    }
}

/// Singular values of `matrix`, descending.
pub fn singular_values(matrix: &DMatrix<f64>) -> Result<Vec<f64>, AnalysisError> {
    SingularSpectrum::of(matrix).map(|s| s.values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DVector;

    /// The Householder reflection I − 2wwᵀ/‖w‖² (orthogonal).
    fn reflection(w: &[f64]) -> DMatrix<f64> {
        let w = DVector::from_column_slice(w).normalize();
        DMatrix::identity(w.len(), w.len()) - (&w * w.transpose()) * 2.0
    }

    /// U Σ Vᵀ with Σ = diag(3, 2, 1, 0) padded to 4×5 and fixed orthogonal U, V.
    fn rotated_diagonal() -> DMatrix<f64> {
        let mut sigma = DMatrix::zeros(4, 5);
        for (i, s) in [3.0, 2.0, 1.0, 0.0].into_iter().enumerate() {
            sigma[(i, i)] = s;
        }
        let u = reflection(&[1.0, -2.0, 0.5, 3.0]);
        let v = reflection(&[0.3, 1.0, -1.0, 2.0, 0.7]) * reflection(&[2.0, 0.0, 1.0, -1.0, 1.0]);
        u * sigma * v.transpose()
    }

    #[test]
    fn rank_measures_of_a_rotated_diagonal() {
        let s = SingularSpectrum::of(&rotated_diagonal()).unwrap();
        let want = [3.0, 2.0, 1.0, 0.0];
        for (got, want) in s.values().iter().zip(want) {
            assert!((got - want).abs() < 1e-14, "{:?}", s.values());
        }
        assert!((s.spectral_norm() - 3.0).abs() < 1e-14);
        assert!((s.frobenius_norm() - 14.0_f64.sqrt()).abs() < 1e-14);
        assert!((s.nuclear_norm() - 6.0).abs() < 1e-14);
        assert!((s.stable_rank() - 14.0 / 9.0).abs() < 1e-14);
        // p = (1/2, 1/3, 1/6): entropy (1/2) ln 2 + (1/3) ln 3 + (1/6) ln 6.
        let entropy = 0.5 * 2.0_f64.ln() + 3.0_f64.ln() / 3.0 + 6.0_f64.ln() / 6.0;
        assert!((s.effective_rank() - entropy.exp()).abs() < 1e-14);
        assert_eq!(s.numerical_rank(1e-10), 3);
        assert_eq!(s.numerical_rank(0.5), 2);
    }

    #[test]
    fn identity_rank_one_and_zero_matrices() {
        let identity = SingularSpectrum::of(&DMatrix::identity(6, 6)).unwrap();
        assert_eq!(identity.values(), &[1.0; 6]);
        assert!((identity.stable_rank() - 6.0).abs() < 1e-14);
        assert!((identity.effective_rank() - 6.0).abs() < 1e-13);

        let u = DVector::from_column_slice(&[1.0, 2.0, 2.0]);
        let v = DVector::from_column_slice(&[3.0, 0.0, 4.0, 0.0]);
        let rank_one = SingularSpectrum::of(&(&u * v.transpose())).unwrap();
        assert!((rank_one.nuclear_norm() - 15.0).abs() < 1e-13);
        assert!((rank_one.stable_rank() - 1.0).abs() < 1e-14);
        assert!((rank_one.effective_rank() - 1.0).abs() < 1e-14);
        assert_eq!(rank_one.numerical_rank(1e-12), 1);

        let zero = SingularSpectrum::of(&DMatrix::zeros(3, 2)).unwrap();
        assert_eq!(zero.values(), &[0.0, 0.0]);
        let measures = [
            zero.stable_rank(),
            zero.effective_rank(),
            zero.nuclear_norm(),
        ];
        assert_eq!(measures, [0.0; 3]);
        assert_eq!(zero.numerical_rank(1e-12), 0);
        assert!(singular_values(&DMatrix::zeros(0, 4)).unwrap().is_empty());
    }

    #[test]
    fn huge_entries_do_not_overflow_and_nan_is_rejected() {
        let big = DMatrix::from_diagonal(&DVector::from_column_slice(&[1e200, 1e200]));
        let s = SingularSpectrum::of(&big).unwrap();
        assert!((s.stable_rank() - 2.0).abs() < 1e-14);
        assert!((s.frobenius_norm() / (2.0_f64.sqrt() * 1e200) - 1.0).abs() < 1e-14);
        let mut bad = DMatrix::identity(2, 2);
        bad[(1, 0)] = f64::NAN;
        assert!(matches!(
            SingularSpectrum::of(&bad),
            Err(AnalysisError::NonFinite { .. })
        ));
    }
}

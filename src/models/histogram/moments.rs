//! Row-quadratic losses ℓ = ½ Σ_a Δ_aᵀ H_a Δ_a of Δ = Q Diag(v) − M (spec 000 §1.4).
//!
//! ℓ_tf decouples across rows of Δ with H_a = T3\[a,·,·\] = (1/n) Σ_k c_k\[a\] c_k c_kᵀ; ℓ_df is the
//! case H_a = I; a constant H_a = B Bᵀ gives the generic f = ½‖(Q Diag(v) − M) B‖² of Lemma A.1.

use crate::stats;
use nalgebra::{DMatrix, SymmetricEigen};

/// d symmetric PSD matrices H_a ∈ ℝ^{d×d}, one per row a of Δ, stored flat: H_a\[b, b'\] at
/// `a·d² + b·d + b'`. For histogram data this is the third-moment tensor T3 (spec 000 §1.4).
#[derive(Debug, Clone, PartialEq)]
pub struct RowMoments {
    d: usize,
    entries: Vec<f64>,
}

/// Extreme eigenvalues of one H_a (spec 000 R3, E16).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowSpectrum {
    /// λ_min(H_a): zero loss forces Δ_a = 0 only if this is > 0.
    pub lambda_min: f64,
    /// λ_max(H_a).
    pub lambda_max: f64,
}

impl RowMoments {
    /// T3\[a,b,b'\] = (1/n) Σ_k c_k\[a\] c_k\[b\] c_k\[b'\] from counts (d × n, column k = c_k)
    /// (spec 000 §1.4). Fully symmetric in (a, b, b').
    pub fn from_counts(counts: &DMatrix<f64>) -> Self {
        let d = counts.nrows();
        let inv_n = 1.0 / counts.ncols() as f64;
        let mut entries = vec![0.0; d * d * d];
        for c in counts.column_iter() {
            for a in 0..d {
                let weight = c[a] * inv_n;
                if weight == 0.0 {
                    continue;
                }
                let row = &mut entries[a * d * d..(a + 1) * d * d];
                for b in 0..d {
                    let wb = weight * c[b];
                    for bp in 0..d {
                        row[b * d + bp] += wb * c[bp];
                    }
                }
            }
        }
        Self { d, entries }
    }

    /// H_a = I for every row: the df-linear loss ℓ_df (spec 000 §2.3, "T3 = identity").
    pub fn identity(d: usize) -> Self {
        Self::uniform(&DMatrix::identity(d, d))
    }

    /// H_a = h for every row: f = ½‖(Q Diag(v) − M) B‖² with h = B Bᵀ (spec 000 R6).
    /// Panics unless h is square.
    pub fn uniform(h: &DMatrix<f64>) -> Self {
        let d = h.nrows();
        assert_eq!(h.ncols(), d, "H must be square");
        let row: Vec<f64> = h.transpose().iter().copied().collect(); // row-major h
        Self {
            d,
            entries: row.repeat(d),
        }
    }

    /// The dimension d.
    pub fn dim(&self) -> usize {
        self.d
    }

    /// H_a\[b, b'\] (= T3\[a, b, b'\] for histogram data).
    pub fn get(&self, a: usize, b: usize, bp: usize) -> f64 {
        self.entries[(a * self.d + b) * self.d + bp]
    }

    /// H_a as a matrix.
    pub fn row_matrix(&self, a: usize) -> DMatrix<f64> {
        DMatrix::from_fn(self.d, self.d, |b, bp| self.get(a, b, bp))
    }

    /// G\[a, b\] = Σ_{b'} H_a\[b, b'\] Δ\[a, b'\] for Δ, G stored row-major (d², index a·d + b): the
    /// gradient ∂ℓ/∂W at W = Q Diag(v) (spec 000 §2.3). No allocation.
    pub fn contract(&self, delta: &[f64], g: &mut [f64]) {
        let d = self.d;
        for a in 0..d {
            let delta_row = &delta[a * d..(a + 1) * d];
            let h_rows = self.entries[a * d * d..(a + 1) * d * d].chunks_exact(d);
            for (g_ab, h_row) in g[a * d..(a + 1) * d].iter_mut().zip(h_rows) {
                *g_ab = h_row.iter().zip(delta_row).map(|(h, x)| h * x).sum();
            }
        }
    }

    /// ½ Σ_a Δ_aᵀ H_a Δ_a for a d × d matrix Δ (the T3 form of ℓ_tf, spec 000 §1.4).
    pub fn quadratic_loss(&self, delta: &DMatrix<f64>) -> f64 {
        let d = self.d;
        let row_major: Vec<f64> = delta.transpose().iter().copied().collect();
        let mut g = vec![0.0; d * d];
        self.contract(&row_major, &mut g);
        0.5 * row_major.iter().zip(&g).map(|(x, y)| x * y).sum::<f64>()
    }

    /// Extreme eigenvalues of every H_a (spec 000 R3, E16).
    pub fn row_spectra(&self) -> Vec<RowSpectrum> {
        (0..self.d)
            .map(|a| {
                let eig = SymmetricEigen::new(self.row_matrix(a)).eigenvalues;
                RowSpectrum {
                    lambda_min: stats::min(eig.iter()),
                    lambda_max: stats::max(eig.iter()),
                }
            })
            .collect()
    }

    /// (min_a λ_min(H_a), max_a λ_max(H_a) / min_a λ_min(H_a)): zero ℓ_tf ⇔ Q Diag(v) = M iff the
    /// first is > 0 (spec 000 R3, E16); the second is the reported condition number.
    pub fn conditioning(&self) -> (f64, f64) {
        let spectra = self.row_spectra();
        let lambda_min = stats::min(spectra.iter().map(|s| s.lambda_min));
        let lambda_max = stats::max(spectra.iter().map(|s| s.lambda_max));
        (lambda_min, lambda_max / lambda_min)
    }
}

#[cfg(test)]
mod tests {
    use crate::models::histogram::data::{task_matrix, HistogramData, Task};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn third_moment_is_symmetric_and_matches_definition() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let d = 5;
        let data = HistogramData::sample(task_matrix(&Task::Eq, d), 12, 9, &mut rng);
        let t3 = data.third_moment();
        for a in 0..d {
            for b in 0..d {
                for bp in 0..d {
                    let direct: f64 = data
                        .counts
                        .column_iter()
                        .map(|c| c[a] * c[b] * c[bp])
                        .sum::<f64>()
                        / 9.0;
                    let x = t3.get(a, b, bp);
                    assert!((x - direct).abs() <= 1e-12 * direct.max(1.0));
                    for y in [t3.get(a, bp, b), t3.get(b, a, bp), t3.get(bp, b, a)] {
                        assert!((x - y).abs() <= 1e-12 * x.abs().max(1.0));
                    }
                }
            }
        }
    }

    /// E16: n ≥ d generic samples make every H_a positive definite; n < d makes them singular.
    #[test]
    fn row_moments_definite_iff_enough_samples() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let d = 10;
        let data = HistogramData::sample(task_matrix(&Task::Eq, d), 100, 100, &mut rng);
        let (lambda_min, cond) = data.third_moment().conditioning();
        // Spec prototype (another draw): spec(H_a) ⊂ [46, 1.03e4], cond ≈ 223.
        assert!(
            lambda_min > 20.0 && lambda_min < 100.0,
            "λ_min {lambda_min}"
        );
        assert!(cond > 50.0 && cond < 1000.0, "cond {cond}");
        let few = HistogramData::sample(task_matrix(&Task::Eq, d), 100, d - 2, &mut rng);
        let (lambda_min_few, _) = few.third_moment().conditioning();
        assert!(lambda_min_few.abs() <= 1e-9, "λ_min {lambda_min_few}");
    }
}

//! Histogram tasks, string data and the transformer loss evaluated from the data (spec 000 §1).
//!
//! Symbols are 0-based indices 0..d (a ↔ 0, b ↔ 1, …). A task is a matrix M with
//! y_j = Σ_{j'} M\[s_j, s_{j'}\] = (M c)_{s_j}, i.e. y = X M c (spec §1.2).

use nalgebra::{DMatrix, DVector};
use rand::Rng;

use super::moments::RowMoments;

/// A histogram task (spec 000 §1.2). The order of symbols is a ↔ index 0 < 1 < … < d−1.
#[derive(Debug, Clone, PartialEq)]
pub enum Task {
    /// Equality histogram, M = I_d (μ_b = 1).
    Eq,
    /// Less-than histogram, M(a, b) = 1 if a ≥ b (μ_b = √(d − b) for 0-based b).
    Lt,
    /// Threshold histogram, M(a, b) = 1 if |a − b| ≤ d_thr.
    Thr { d_thr: usize },
    /// Any relation or real weights M (extension of spec §1.2); must be d × d.
    Custom(DMatrix<f64>),
}

impl Task {
    /// M\[a, b\] straight from the task's definition (the relation R(a, b) of spec §1.2).
    pub fn relation(&self, a: usize, b: usize) -> f64 {
        let holds = match self {
            Task::Eq => a == b,
            Task::Lt => a >= b,
            Task::Thr { d_thr } => a.abs_diff(b) <= *d_thr,
            Task::Custom(m) => return m[(a, b)],
        };
        f64::from(u8::from(holds))
    }

    /// Short name for files and legends: "eq", "lt", "thr", "custom".
    pub fn name(&self) -> &'static str {
        match self {
            Task::Eq => "eq",
            Task::Lt => "lt",
            Task::Thr { .. } => "thr",
            Task::Custom(_) => "custom",
        }
    }
}

/// The task matrix M ∈ ℝ^{d×d} (spec 000 §1.2). Panics if a `Custom` matrix is not d × d.
pub fn task_matrix(task: &Task, d: usize) -> DMatrix<f64> {
    if let Task::Custom(m) = task {
        assert_eq!(m.shape(), (d, d), "custom task matrix must be {d}×{d}");
    }
    DMatrix::from_fn(d, d, |a, b| task.relation(a, b))
}

/// Column norms μ_b = ‖m_b‖ (spec 000 §0): the time scale of column b of the df flow.
pub fn column_norms(m: &DMatrix<f64>) -> DVector<f64> {
    DVector::from_iterator(m.ncols(), m.column_iter().map(|col| col.norm()))
}

/// A string of `seq_len` symbols drawn i.i.d. uniformly from 0..d (spec 000 §1.3).
pub fn sample_string(rng: &mut impl Rng, d: usize, seq_len: usize) -> Vec<usize> {
    (0..seq_len).map(|_| rng.random_range(0..d)).collect()
}

/// Symbol counts c_b = #{j : s_j = b}, so that XᵀX = Diag(c) (spec 000 §0).
pub fn symbol_counts(s: &[usize], d: usize) -> DVector<f64> {
    let mut c = DVector::zeros(d);
    for &symbol in s {
        c[symbol] += 1.0;
    }
    c
}

/// The one-hot matrix X ∈ {0,1}^{N×d}, X\[j, s_j\] = 1 (spec 000 §0).
pub fn one_hot(s: &[usize], d: usize) -> DMatrix<f64> {
    DMatrix::from_fn(s.len(), d, |j, b| f64::from(u8::from(s[j] == b)))
}

/// Targets y = X M c, i.e. y_j = (M c)_{s_j} (spec 000 §1.2).
pub fn targets(m: &DMatrix<f64>, s: &[usize]) -> DVector<f64> {
    let mc = m * symbol_counts(s, m.nrows());
    DVector::from_iterator(s.len(), s.iter().map(|&symbol| mc[symbol]))
}

/// Targets by brute-force counting, y_j = Σ_{j'} R(s_j, s_{j'}) (spec 000 R1), independent of
/// the matrix algebra of [`targets`].
pub fn brute_force_targets(task: &Task, s: &[usize]) -> DVector<f64> {
    DVector::from_iterator(
        s.len(),
        s.iter()
            .map(|&sj| s.iter().map(|&sk| task.relation(sj, sk)).sum::<f64>()),
    )
}

/// The model output ŷ = X Q Xᵀ X v, evaluated literally from the one-hot X (spec 000 §1.1).
pub fn model_output(q: &DMatrix<f64>, v: &DVector<f64>, s: &[usize]) -> DVector<f64> {
    let x = one_hot(s, q.nrows());
    &x * (q * (x.transpose() * (&x * v)))
}

/// A dataset of n strings of one task (spec 000 §1.3).
#[derive(Debug, Clone)]
pub struct HistogramData {
    /// Alphabet size d.
    pub d: usize,
    /// The task matrix M.
    pub m: DMatrix<f64>,
    /// The strings s_k (symbols in 0..d).
    pub strings: Vec<Vec<usize>>,
    /// Counts, d × n: column k is c_k.
    pub counts: DMatrix<f64>,
    /// Targets y_k = X_k M c_k.
    pub targets: Vec<DVector<f64>>,
}

impl HistogramData {
    /// The dataset of the given strings for the task matrix `m` (d × d).
    pub fn from_strings(m: DMatrix<f64>, strings: Vec<Vec<usize>>) -> Self {
        let d = m.nrows();
        let counts = DMatrix::from_columns(
            &strings
                .iter()
                .map(|s| symbol_counts(s, d))
                .collect::<Vec<_>>(),
        );
        let targets = strings.iter().map(|s| targets(&m, s)).collect();
        Self {
            d,
            m,
            strings,
            counts,
            targets,
        }
    }

    /// n strings of length `seq_len`, symbols i.i.d. uniform on 0..d (spec 000 §1.3).
    pub fn sample(m: DMatrix<f64>, seq_len: usize, n: usize, rng: &mut impl Rng) -> Self {
        let d = m.nrows();
        let strings = (0..n).map(|_| sample_string(rng, d, seq_len)).collect();
        Self::from_strings(m, strings)
    }

    /// Number of strings n.
    pub fn n(&self) -> usize {
        self.strings.len()
    }

    /// ℓ_tf = 1/(2n) Σ_k ‖X_k Q X_kᵀ X_k v − y_k‖², the raw form (spec 000 §1.4).
    pub fn loss_raw(&self, q: &DMatrix<f64>, v: &DVector<f64>) -> f64 {
        let total: f64 = self
            .strings
            .iter()
            .zip(&self.targets)
            .map(|(s, y)| (model_output(q, v, s) - y).norm_squared())
            .sum();
        total / (2.0 * self.n() as f64)
    }

    /// ℓ_tf = 1/(2n) Σ_k ‖Diag(c_k)^{1/2} (Q Diag(v) − M) c_k‖², Lemma 3.1's form (spec 000 R2).
    pub fn loss_lemma(&self, q: &DMatrix<f64>, v: &DVector<f64>) -> f64 {
        let delta = q * DMatrix::from_diagonal(v) - &self.m;
        let total: f64 = self
            .counts
            .column_iter()
            .map(|c| {
                let r = &delta * c;
                r.iter()
                    .zip(c.iter())
                    .map(|(ra, ca)| ca * ra * ra)
                    .sum::<f64>()
            })
            .sum();
        total / (2.0 * self.n() as f64)
    }

    /// The third-moment tensor T3 as per-row moment matrices H_a (spec 000 §1.4).
    pub fn third_moment(&self) -> RowMoments {
        RowMoments::from_counts(&self.counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// "adbcba" with d = 4 (the paper prints "adbcb", spec E2).
    const ADBCBA: [usize; 6] = [0, 3, 1, 2, 1, 0];

    #[test]
    fn adbcba_example_outputs() {
        let cases = [
            (Task::Eq, [2.0, 1.0, 2.0, 1.0, 2.0, 2.0]),
            (Task::Lt, [2.0, 6.0, 4.0, 5.0, 4.0, 2.0]),
            (Task::Thr { d_thr: 2 }, [5.0, 4.0, 6.0, 6.0, 6.0, 5.0]),
        ];
        for (task, expected) in cases {
            let m = task_matrix(&task, 4);
            let expected = DVector::from_row_slice(&expected);
            assert_eq!(targets(&m, &ADBCBA), expected, "{}", task.name());
            assert_eq!(brute_force_targets(&task, &ADBCBA), expected);
            // The exact construction (Q, v) = (M, 1) of spec §1.2.
            assert_eq!(
                model_output(&m, &DVector::repeat(4, 1.0), &ADBCBA),
                expected
            );
        }
    }

    #[test]
    fn column_norms_match_spec_tables() {
        let lt = column_norms(&task_matrix(&Task::Lt, 10));
        for b in 0..10 {
            assert!((lt[b] * lt[b] - (10 - b) as f64).abs() <= 1e-14);
        }
        let thr = column_norms(&task_matrix(&Task::Thr { d_thr: 2 }, 26));
        let squares: Vec<f64> = thr.iter().map(|mu| (mu * mu).round()).collect();
        assert_eq!(&squares[..4], &[3.0, 4.0, 5.0, 5.0]);
        assert_eq!(&squares[22..], &[5.0, 5.0, 4.0, 3.0]);
    }

    /// R1: X M c equals brute-force counting exactly, for all tasks and sizes of the recipe.
    #[test]
    fn targets_equal_brute_force_counts() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for d in [4, 10, 26] {
            for seq_len in [1, 6, 100] {
                let tasks = [
                    Task::Eq,
                    Task::Lt,
                    Task::Thr { d_thr: 0 },
                    Task::Thr { d_thr: 1 },
                    Task::Thr { d_thr: 2 },
                    Task::Thr { d_thr: 5 },
                ];
                for task in tasks {
                    let s = sample_string(&mut rng, d, seq_len);
                    let m = task_matrix(&task, d);
                    assert_eq!(targets(&m, &s), brute_force_targets(&task, &s));
                }
            }
        }
    }

    /// R2: raw, Lemma 3.1 and T3 forms of ℓ_tf agree to 1e-12 relative.
    #[test]
    fn lemma31_three_forms_agree() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let d = 10;
        let data = HistogramData::sample(task_matrix(&Task::Lt, d), 100, 30, &mut rng);
        let q = DMatrix::from_fn(d, d, |_, _| {
            rng.sample::<f64, _>(rand_distr::StandardNormal)
        });
        let v = DVector::from_fn(d, |_, _| rng.sample::<f64, _>(rand_distr::StandardNormal));
        let raw = data.loss_raw(&q, &v);
        let lemma = data.loss_lemma(&q, &v);
        let t3 = data
            .third_moment()
            .quadratic_loss(&(&q * DMatrix::from_diagonal(&v) - &data.m));
        assert!(raw > 1.0);
        assert!(
            (raw - lemma).abs() <= 1e-12 * raw,
            "raw {raw} lemma {lemma}"
        );
        assert!((raw - t3).abs() <= 1e-12 * raw, "raw {raw} t3 {t3}");
        // The exact construction has zero loss.
        assert_eq!(data.loss_raw(&data.m, &DVector::repeat(d, 1.0)), 0.0);
    }
}

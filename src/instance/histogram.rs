//! Instance layout of the histogram family (seed 000): a task matrix, the strings of one or more
//! datasets, and one or more initial states (Q₀, v₀).
//!
//! | array | shape | meaning |
//! |---|---|---|
//! | `M` | (d, d) | task matrix: targets y = X M c (eq: I, lt: lower-triangular ones, any real weights); every column m_i ≠ 0 (μ_i = ‖m_i‖ is column i's time scale); scenarios that run one df flow per task (bad-init, limit-kkt) take k stacked, (k, d, d) ([`TaskMatrices`]) |
//! | `strings` | (n, N) or (k, n, N) | n strings of length N, symbols 0..d−1 (integers); k stacked datasets, one per trial |
//! | `Q0` | (d, d) or (k, d, d) | initial merged query-key matrix Q (or k of them, one per trial) |
//! | `v0` | (d,) or (k, d) | initial merged value vector v |
//!
//! `thm2-onset-time` studies Theorem 2's two-dimensional system alone and reads its cases from a
//! file of its own ([`Thm2Cases`]): `cases` (k, 4), rows (c, c₁, x₀, y₀) with c₁ > 0.
//!
//! `M` and `strings` are the data (`data_file`), `Q0` and `v0` the initial state (`init_file`);
//! one file may hold all four (a run's `instance.npz` does). The df-linear loss needs only `M`;
//! the transformer loss needs `strings`, and its theorems need every per-row moment matrix
//! H_a = (1/n) Σ_k c_k\[a\] c_k c_kᵀ positive definite ([`TaskStrings::require_definite`]).
//!
//! ```python
//! import numpy as np
//! rng = np.random.default_rng(0)
//! np.savez("mine.npz", M=np.eye(4), strings=rng.integers(0, 4, (20, 12)),
//!          Q0=0.3 * rng.standard_normal((4, 4)), v0=0.3 * rng.standard_normal(4))
//! ```

use nalgebra::{DMatrix, DVector};

use super::{Array, Arrays, InstanceError, InstanceFile};
use crate::models::histogram::layout::state_from_qv;
use crate::models::histogram::RowMoments;

/// Every array name of the family (data and initial state may share one file).
const NAMES: [&str; 4] = ["M", "strings", "Q0", "v0"];

/// Refuses arrays the family does not know; arrays of a run over several instances (under
/// `<label>_`, e.g. `problem0_M`, as such a run writes its `instance.npz`) get a hint.
fn deny_unknown_names(a: &Arrays) -> Result<(), InstanceError> {
    a.deny_unknown(&NAMES).map_err(|e| {
        let prefixed = NAMES.iter().find_map(|n| {
            e.key
                .strip_suffix(n)?
                .strip_suffix('_')
                .map(|label| (label, n))
        });
        match prefixed {
            Some((label, name)) => InstanceError::new(
                &e.key,
                format!(
                    "the arrays of one of several instances (`{label}_` + {name}, as a run over \
                     several writes its instance.npz): save one instance's arrays under their \
                     own names ({})",
                    NAMES.join(", ")
                ),
            ),
            None => e,
        }
    })
}

/// The data: the task matrix and the strings of each dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStrings {
    pub m: DMatrix<f64>,
    /// One entry per dataset (trial), each a list of strings of equal length; empty when the
    /// file has no `strings` (enough for the df-linear loss).
    pub datasets: Vec<Vec<Vec<usize>>>,
}

/// The initial states (Q₀, v₀), one per trial, in the canonical layout
/// z = \[q_1; v_1; …; q_d; v_d\].
#[derive(Debug, Clone, PartialEq)]
pub struct InitialStates {
    pub d: usize,
    pub states: Vec<Vec<f64>>,
}

impl TaskStrings {
    /// The alphabet size d.
    pub fn d(&self) -> usize {
        self.m.nrows()
    }

    /// The datasets, refusing a file without `strings` (the transformer loss needs them).
    pub fn require_strings(&self) -> Result<&[Vec<Vec<usize>>], InstanceError> {
        if self.datasets.is_empty() {
            return Err(InstanceError::new(
                "strings",
                "missing: the transformer loss ℓ_tf is computed from the strings (shape (n, N))",
            ));
        }
        Ok(&self.datasets)
    }

    /// Exactly one dataset (for runs of a single instance).
    pub fn single_dataset(&self) -> Result<&[Vec<usize>], InstanceError> {
        match self.require_strings()? {
            [one] => Ok(one),
            many => Err(InstanceError::new(
                "strings",
                format!(
                    "{} stacked datasets: this run takes one, of shape (n, N)",
                    many.len()
                ),
            )),
        }
    }

    /// The third-moment matrices H_a of each dataset, refusing any dataset whose H_a are not all
    /// positive definite: then zero ℓ_tf does not force Q Diag(v) = M and the transformer
    /// theorems do not apply (spec 000 R3, E16). λ_min ≤ 1e-12·λ_max counts as singular
    /// (rounding leaves ~1e-16·λ_max on an exactly singular H_a).
    pub fn require_definite(&self) -> Result<Vec<RowMoments>, InstanceError> {
        let d = self.d();
        let datasets = self.require_strings()?;
        let stacked = datasets.len() > 1;
        datasets
            .iter()
            .enumerate()
            .map(|(k, strings)| {
                let counts = counts_of(strings, d);
                let moments = RowMoments::from_counts(&counts);
                let (lambda_min, cond) = moments.conditioning();
                if lambda_min.is_finite() && cond.is_finite() && 1.0 / cond > 1e-12 {
                    return Ok(moments);
                }
                let key = if stacked {
                    format!("strings[{k}]")
                } else {
                    "strings".to_string()
                };
                Err(InstanceError::new(
                    key,
                    format!(
                        "the row moment matrices H_a = (1/n) Σ c[a] c cᵀ are singular \
                         (min λ_min = {lambda_min:.3e}, max λ / min λ = {cond:.3e}): with \
                         n = {} strings over d = {d} symbols zero loss does not force \
                         Q Diag(v) = M (need n ≥ d strings whose count vectors span ℝ^d, \
                         spec 000 R3, E16)",
                        strings.len()
                    ),
                ))
            })
            .collect()
    }
}

/// Counts c_k of each string as the columns of a d × n matrix.
fn counts_of(strings: &[Vec<usize>], d: usize) -> DMatrix<f64> {
    DMatrix::from_fn(d, strings.len(), |b, k| {
        strings[k].iter().filter(|&&s| s == b).count() as f64
    })
}

/// Name of the first task an `M` equals ("eq", "lt", "thr") or "custom": outputs describe the
/// data they ran on, whether it came from the seed or from a file.
pub fn task_name(m: &DMatrix<f64>) -> &'static str {
    use crate::models::histogram::{task_matrix, Task};
    let d = m.nrows();
    if *m == task_matrix(&Task::Eq, d) {
        "eq"
    } else if *m == task_matrix(&Task::Lt, d) {
        "lt"
    } else if (0..d).any(|d_thr| *m == task_matrix(&Task::Thr { d_thr }, d)) {
        "thr"
    } else {
        "custom"
    }
}

/// [`task_name`] with the threshold of a `thr` task ("thr, D = 2"), for titles.
pub fn task_label(m: &DMatrix<f64>) -> String {
    use crate::models::histogram::{task_matrix, Task};
    let d = m.nrows();
    match (0..d).find(|&d_thr| *m == task_matrix(&Task::Thr { d_thr }, d)) {
        Some(d_thr) if task_name(m) == "thr" => format!("thr, D = {d_thr}"),
        _ => task_name(m).to_string(),
    }
}

impl InstanceFile for TaskStrings {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("M", "task matrix (d, d), every column nonzero"),
        (
            "strings",
            "optional: symbols 0..d−1, (n, N) or k stacked datasets (k, n, N)",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        deny_unknown_names(a)?;
        a.check_finite()?;
        let m_arr = a.shaped("M", &[None, None])?;
        let d = m_arr.shape[0];
        if m_arr.shape[1] != d || d == 0 {
            return Err(InstanceError::new(
                "M",
                format!("must be square (d, d) with d ≥ 1, got {:?}", m_arr.shape),
            ));
        }
        let m = DMatrix::from_column_slice(d, d, &m_arr.to_column_major());
        require_nonzero_columns(&m, "M[:, ")?;
        let datasets = match a.get("strings") {
            None => Vec::new(),
            Some(s) => read_strings(s, d)?,
        };
        Ok(TaskStrings { m, datasets })
    }

    fn to_arrays(&self) -> Arrays {
        let d = self.d();
        let mut a = Arrays::new();
        let row_major: Vec<f64> = self.m.transpose().iter().copied().collect();
        a.insert("M", Array::matrix(d, d, row_major));
        if let Some(first) = self.datasets.first() {
            let (n, len) = (first.len(), first[0].len());
            let data: Vec<f64> = self
                .datasets
                .iter()
                .flatten()
                .flatten()
                .map(|&s| s as f64)
                .collect();
            let shape = match self.datasets.len() {
                1 => vec![n, len],
                k => vec![k, n, len],
            };
            a.insert("strings", Array::new(&shape, data));
        }
        a
    }
}

/// Refuses a zero column i of a task matrix, naming it `{prefix}{i}]`.
fn require_nonzero_columns(m: &DMatrix<f64>, prefix: &str) -> Result<(), InstanceError> {
    match (0..m.ncols()).find(|&i| m.column(i).norm() == 0.0) {
        None => Ok(()),
        Some(i) => Err(InstanceError::new(
            format!("{prefix}{i}]"),
            "column is zero: μ_i = ‖m_i‖ must be > 0 (the time scale of column i; Theorem 1 \
             assumes it)",
        )),
    }
}

/// The task matrices of the scenarios that run one df flow per task (bad-init, limit-kkt): `M`
/// of shape (d, d), or k stacked (k, d, d), one per run; `strings` are not used.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskMatrices {
    pub ms: Vec<DMatrix<f64>>,
}

impl TaskMatrices {
    /// The alphabet size d.
    pub fn d(&self) -> usize {
        self.ms[0].nrows()
    }
}

impl InstanceFile for TaskMatrices {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[(
        "M",
        "task matrix (d, d) or k stacked (k, d, d), one per run, every column nonzero",
    )];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        deny_unknown_names(a)?;
        a.check_finite()?;
        let m_arr = a.require("M")?;
        let (k, d, stacked) = match m_arr.shape.as_slice() {
            &[r, c] if r == c && r > 0 => (1, r, false),
            &[k, r, c] if r == c && r > 0 && k > 0 => (k, r, true),
            other => {
                return Err(InstanceError::new(
                    "M",
                    format!("expected shape (d, d) or (k, d, d) with d ≥ 1, got {other:?}"),
                ))
            }
        };
        let ms = (0..k)
            .map(|j| {
                let row_major = m_arr.data[j * d * d..(j + 1) * d * d].to_vec();
                let m = DMatrix::from_row_slice(d, d, &row_major);
                let prefix = if stacked {
                    format!("M[{j}, :, ")
                } else {
                    "M[:, ".to_string()
                };
                require_nonzero_columns(&m, &prefix)?;
                Ok(m)
            })
            .collect::<Result<Vec<_>, InstanceError>>()?;
        Ok(TaskMatrices { ms })
    }

    fn to_arrays(&self) -> Arrays {
        let d = self.d();
        let data: Vec<f64> = self
            .ms
            .iter()
            .flat_map(|m| m.transpose().iter().copied().collect::<Vec<_>>())
            .collect();
        let shape = match self.ms.len() {
            1 => vec![d, d],
            k => vec![k, d, d],
        };
        let mut a = Arrays::new();
        a.insert("M", Array::new(&shape, data));
        a
    }
}

/// The cases of Theorem 2's system ẋ = c₁(y − x³ − cx), ẏ = c₁(x − x²y) (`thm2-onset-time`):
/// `cases` of shape (k, 4), row j = (c, c₁, x₀, y₀) with c₁ > 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Thm2Cases {
    pub cases: Vec<[f64; 4]>,
}

impl InstanceFile for Thm2Cases {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[(
        "cases",
        "(k, 4): rows (c, c1, x0, y0) of Theorem 2's system, c1 > 0",
    )];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&["cases"])?;
        a.check_finite()?;
        let arr = a.shaped("cases", &[None, Some(4)])?;
        if arr.shape[0] == 0 {
            return Err(InstanceError::new("cases", "needs at least one case (row)"));
        }
        let cases: Vec<[f64; 4]> = arr
            .data
            .chunks(4)
            .map(|r| [r[0], r[1], r[2], r[3]])
            .collect();
        if let Some(j) = cases.iter().position(|r| r[1] <= 0.0) {
            return Err(InstanceError::new(
                format!("cases[{j}, 1]"),
                format!(
                    "c1 = {} must be positive (the time scale ‖m_i‖)",
                    cases[j][1]
                ),
            ));
        }
        Ok(Thm2Cases { cases })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        a.insert(
            "cases",
            Array::new(&[self.cases.len(), 4], self.cases.concat()),
        );
        a
    }
}

/// `strings` of shape (n, N) or (k, n, N): integer symbols in 0..d.
fn read_strings(s: &Array, d: usize) -> Result<Vec<Vec<Vec<usize>>>, InstanceError> {
    let (k, n, len) = match s.shape.as_slice() {
        &[n, len] => (1, n, len),
        &[k, n, len] => (k, n, len),
        other => {
            return Err(InstanceError::new(
                "strings",
                format!("expected shape (n, N) or (k, n, N), got {other:?}"),
            ))
        }
    };
    if k == 0 || n == 0 || len == 0 {
        return Err(InstanceError::new(
            "strings",
            format!(
                "needs at least one string of at least one symbol, got shape {:?}",
                s.shape
            ),
        ));
    }
    if let Some(pos) = s
        .data
        .iter()
        .position(|&x| x.fract() != 0.0 || x < 0.0 || x >= d as f64)
    {
        let idx: Vec<String> = s.index_of(pos).iter().map(usize::to_string).collect();
        return Err(InstanceError::new(
            format!("strings[{}]", idx.join(", ")),
            format!(
                "a symbol must be an integer in 0..{} (d = {d} from M), got {}",
                d - 1,
                s.data[pos]
            ),
        ));
    }
    Ok(s.data
        .chunks(n * len)
        .map(|dataset| {
            dataset
                .chunks(len)
                .map(|string| string.iter().map(|&x| x as usize).collect())
                .collect()
        })
        .collect())
}

impl InitialStates {
    /// One initial state per trial from k stacked (Q, v) pairs (Q column-major, as nalgebra).
    pub fn from_states(d: usize, states: Vec<Vec<f64>>) -> Self {
        InitialStates { d, states }
    }

    /// Refuses states of another alphabet size than the data's.
    pub fn require_alphabet(&self, d: usize) -> Result<(), InstanceError> {
        if self.d == d {
            return Ok(());
        }
        Err(InstanceError::new(
            "Q0",
            format!(
                "initial state for d = {} symbols, but the data has d = {d}",
                self.d
            ),
        ))
    }

    /// Exactly one initial state (for runs of a single instance).
    pub fn single_state(&self) -> Result<&[f64], InstanceError> {
        match self.states.as_slice() {
            [one] => Ok(one),
            many => Err(InstanceError::new(
                "Q0",
                format!(
                    "{} stacked initial states: this run takes one, Q0 of shape (d, d)",
                    many.len()
                ),
            )),
        }
    }
}

impl InstanceFile for InitialStates {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("Q0", "initial Q, (d, d) or k stacked (k, d, d)"),
        ("v0", "initial v, (d,) or k stacked (k, d)"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        deny_unknown_names(a)?;
        a.check_finite()?;
        let q = a.require("Q0")?;
        let (k, d, stacked) = match q.shape.as_slice() {
            &[r, c] if r == c && r > 0 => (1, r, false),
            &[k, r, c] if r == c && r > 0 && k > 0 => (k, r, true),
            other => {
                return Err(InstanceError::new(
                    "Q0",
                    format!("expected shape (d, d) or (k, d, d) with d ≥ 1, got {other:?}"),
                ))
            }
        };
        let v = if stacked {
            a.shaped("v0", &[Some(k), Some(d)])?
        } else {
            a.shaped("v0", &[Some(d)])?
        };
        let states = (0..k)
            .map(|t| {
                let q_t = Array::matrix(d, d, q.data[t * d * d..(t + 1) * d * d].to_vec());
                let q_t = DMatrix::from_column_slice(d, d, &q_t.to_column_major());
                let v_t = DVector::from_column_slice(&v.data[t * d..(t + 1) * d]);
                state_from_qv(&q_t, &v_t)
            })
            .collect();
        Ok(InitialStates { d, states })
    }

    fn to_arrays(&self) -> Arrays {
        let d = self.d;
        let (mut q, mut v) = (Vec::new(), Vec::new());
        for z in &self.states {
            let (q_t, v_t) = crate::models::histogram::state_to_qv(z);
            q.extend(q_t.transpose().iter());
            v.extend(v_t.iter());
        }
        let k = self.states.len();
        let (q_shape, v_shape) = match k {
            1 => (vec![d, d], vec![d]),
            _ => (vec![k, d, d], vec![k, d]),
        };
        let mut a = Arrays::new();
        a.insert("Q0", Array::new(&q_shape, q))
            .insert("v0", Array::new(&v_shape, v));
        a
    }
}

/// The arrays of data and initial states together (a run's `instance.npz`).
pub fn instance_arrays(data: &TaskStrings, init: &InitialStates) -> Arrays {
    let mut a = data.to_arrays();
    for (name, array) in init.to_arrays().iter() {
        a.insert(name, array.clone());
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrays(json: &str) -> Arrays {
        Arrays::from_json_str(json).unwrap()
    }

    #[test]
    fn reads_writes_and_reads_back() {
        let a = arrays(
            r#"{"M": [[1, 0], [1, 1]], "strings": [[0, 1, 1], [1, 1, 0]],
                "Q0": [[1, 2], [3, 4]], "v0": [5, 6]}"#,
        );
        let data = TaskStrings::from_arrays(&a).unwrap();
        let init = InitialStates::from_arrays(&a).unwrap();
        assert_eq!(data.datasets, vec![vec![vec![0, 1, 1], vec![1, 1, 0]]]);
        assert_eq!(data.m[(1, 0)], 1.0);
        assert_eq!(data.m[(0, 1)], 0.0);
        // z = [q_1; v_1; q_2; v_2] with q_i the columns of Q0
        assert_eq!(init.states, vec![vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]]);
        assert_eq!(instance_arrays(&data, &init), a);
        assert_eq!(task_name(&data.m), "lt");
    }

    #[test]
    fn refusals_name_the_entry() {
        let bad = |json: &str| TaskStrings::from_arrays(&arrays(json)).unwrap_err().key;
        assert_eq!(bad(r#"{"M": [[1, 0], [0, 0]]}"#), "M[:, 1]");
        assert_eq!(bad(r#"{"M": [[1, 0, 0], [0, 1, 0]]}"#), "M");
        assert_eq!(
            bad(r#"{"M": [[1, 0], [0, 1]], "strings": [[0, 2]]}"#),
            "strings[0, 1]"
        );
        assert_eq!(
            bad(r#"{"M": [[1, 0], [0, 1]], "strings": [[0, 0.5]]}"#),
            "strings[0, 1]"
        );
        assert_eq!(bad(r#"{"M": [[1, 0], [0, 1]], "S": 1}"#), "S");
        let prefixed = TaskStrings::from_arrays(&arrays(r#"{"M": [[1]], "problem0_M": [[1]]}"#));
        let e = prefixed.unwrap_err();
        assert_eq!(e.key, "problem0_M");
        assert!(e.reason.contains("`problem0_` + M"), "{}", e.reason);
        let singular = r#"{"M": [[1, 0], [0, 1]], "strings": [[0, 1], [1, 0]]}"#;
        let data = TaskStrings::from_arrays(&arrays(singular)).unwrap();
        assert_eq!(data.require_definite().unwrap_err().key, "strings");
        let init = |json: &str| InitialStates::from_arrays(&arrays(json)).unwrap_err().key;
        assert_eq!(init(r#"{"Q0": [[1, 0], [0, 1]], "v0": [1, 2, 3]}"#), "v0");
        assert_eq!(init(r#"{"Q0": [1, 2]}"#), "Q0");
        let stacked = |json: &str| TaskMatrices::from_arrays(&arrays(json)).unwrap_err().key;
        assert_eq!(
            stacked(r#"{"M": [[[1, 0], [0, 1]], [[1, 0], [1, 0]]]}"#),
            "M[1, :, 1]"
        );
        assert_eq!(stacked(r#"{"M": [[1, 0], [1, 0]]}"#), "M[:, 1]");
        assert_eq!(stacked(r#"{"M": [[[1, 0, 0], [0, 1, 0]]]}"#), "M");
    }

    #[test]
    fn thm2_cases_read_back_and_refuse_c1_le_0() {
        let a = arrays(r#"{"cases": [[-0.5, 1, 1.2, -1.6], [1, 2, 0, 0.5]]}"#);
        let t = Thm2Cases::from_arrays(&a).unwrap();
        assert_eq!(t.cases[1], [1.0, 2.0, 0.0, 0.5]);
        assert_eq!(t.to_arrays(), a);
        let bad = |json: &str| Thm2Cases::from_arrays(&arrays(json)).unwrap_err().key;
        assert_eq!(
            bad(r#"{"cases": [[0, 1, 0, 0], [0, 0, 1, 1]]}"#),
            "cases[1, 1]"
        );
        assert_eq!(bad(r#"{"cases": [[0, 1, 0]]}"#), "cases");
        assert_eq!(bad(r#"{"cases": [[0, 1, 0, 0]], "M": [[1]]}"#), "M");
    }

    #[test]
    fn stacked_task_matrices_read_back() {
        let a = arrays(r#"{"M": [[[1, 0], [0, 1]], [[1, 0], [1, 1]]]}"#);
        let t = TaskMatrices::from_arrays(&a).unwrap();
        assert_eq!(t.ms.len(), 2);
        assert_eq!(task_name(&t.ms[1]), "lt");
        assert_eq!(t.to_arrays(), a);
    }
}

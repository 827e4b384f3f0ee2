//! Token selection (paper 003): tokens, labels, the fixed decoder, optional queries, and the
//! initial attention matrix W₀.
//!
//! | array | shape     | meaning                                                           |
//! |-------|-----------|-------------------------------------------------------------------|
//! | `X`   | (n, T, d) | tokens: `X[i, t]` is token t of sequence i (T ≥ 2)                 |
//! | `y`   | (n,)      | labels ±1                                                          |
//! | `u`   | (d,)      | the fixed decoder; scores γ_{i,t} = y_i uᵀx_{i,t}                  |
//! | `z`   | (n, d)    | optional queries q_i (default: the first token of each sequence)   |
//! | `opt` | (n,)      | optional optimal-token indices; must be argmax_t γ_{i,t} if given  |
//! | `W0`  | (d, d)    | initial state W₀ (rows as numpy prints them; a separate init file) |
//! |       | (k, d, d) | or k starts, for the scenarios that run several initializations    |
//! | `u0`  | (d,)      | joint training only: the initial trained decoder (default 0)       |
//!
//! ```python
//! X = np.random.randn(8, 4, 6); y = np.sign(np.random.randn(8)); u = np.eye(6)[0]
//! X[:, 0] += 2 * y[:, None] * u                     # token 0 scores highest in every sequence
//! np.savez("mine.npz", X=X, y=y, u=u, W0=np.zeros((6, 6)))
//! ```
//!
//! The paper's theorems assume (and the code needs) a **unique optimal token** per sequence,
//! opt_i = argmax_t γ_{i,t} with no tie (Def. 1), and a **feasible W-SVM**: some W with
//! (x_{i,opt} − x_{i,t})ᵀ W q_i ≥ 1 for every i and t ≠ opt_i (§2, the direction W(t)/‖W(t)‖
//! approaches). Both are checked here; the W-SVM is solved once (dual QP with its KKT
//! certificate) and kept, since the flow compares its direction with it.

use nalgebra::DMatrix;

use super::{Array, Arrays, InstanceError, InstanceFile};
use crate::analysis::svm::{
    solve_l2, L2Solution, RankOneConstraints, SvmError, SvmMethod, VectorConstraints,
};
use crate::attention::TokenData;

/// Relative score gap below which two tokens tie for the optimum (as the fixed-decoder model
/// decides, so an instance accepted here is accepted by the model).
pub const TIE_TOL: f64 = 1e-12;

/// The data of a token-selection instance: tokens, labels, queries, decoder, optimal tokens
/// and their W-SVM.
#[derive(Debug, Clone)]
pub struct TokenSelectData {
    pub data: TokenData,
    pub u: Vec<f64>,
    pub opt: Vec<usize>,
    /// The W-SVM min ½‖W‖²_F s.t. (x_{i,opt} − x_{i,t})ᵀ W q_i ≥ 1 (vec(W) column-major).
    pub wsvm: L2Solution,
}

impl TokenSelectData {
    /// Validates tokens, labels and decoder (queries default to the first tokens): a unique
    /// optimal token per sequence and a feasible W-SVM.
    pub fn new(data: TokenData, u: Vec<f64>) -> Result<Self, InstanceError> {
        let opt = optimal_tokens(&data, &u)?;
        let cons = RankOneConstraints::w_svm(&data.view(), &opt).map_err(svm_error)?;
        let wsvm = solve_l2(&cons, SvmMethod::Dual).map_err(svm_error)?;
        Ok(TokenSelectData { data, u, opt, wsvm })
    }

    /// The W-SVM solution as a d × d matrix.
    pub fn wsvm_matrix(&self) -> DMatrix<f64> {
        DMatrix::from_column_slice(self.data.d, self.data.d, &self.wsvm.w)
    }
}

/// The arrays X, y, u of tokens and a decoder, and z when the queries are not the first tokens
/// (what [`TokenSelectData::from_arrays`] reads back).
pub fn token_arrays(data: &TokenData, u: &[f64]) -> Arrays {
    let (n, t, d) = (data.n, data.t, data.d);
    let mut a = Arrays::new();
    a.insert("X", Array::new(&[n, t, d], data.x.clone()))
        .insert("y", Array::vector(&data.y))
        .insert("u", Array::vector(u));
    if (0..n).any(|i| data.query(i) != data.token(i, 0)) {
        a.insert("z", Array::matrix(n, d, data.queries.clone()));
    }
    a
}

/// opt_i = argmax_t y_i uᵀx_{i,t}, refusing ties (naming the sequence) and all-zero scores.
fn optimal_tokens(data: &TokenData, u: &[f64]) -> Result<Vec<usize>, InstanceError> {
    let g = data.scores(u);
    (0..data.n)
        .map(|i| {
            let row = &g[i * data.t..(i + 1) * data.t];
            let best = (0..data.t).fold(0, |b, t| if row[t] > row[b] { t } else { b });
            let scale = row.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let tied = (0..data.t).find(|&t| t != best && row[best] - row[t] <= TIE_TOL * scale);
            match tied {
                _ if scale == 0.0 => Err(InstanceError::new(
                    format!("X[{i}]"),
                    "every score y_i uᵀx_{i,t} is 0: no optimal token (Def. 1)",
                )),
                Some(t) => Err(InstanceError::new(
                    format!("X[{i}]"),
                    format!(
                        "no unique optimal token: tokens {best} and {t} tie for the largest score \
                         y_i uᵀx_(i,t) = {} (Def. 1 needs a strict maximum)",
                        row[best]
                    ),
                )),
                None => Ok(best),
            }
        })
        .collect()
}

fn svm_error(e: SvmError) -> InstanceError {
    match e {
        SvmError::Infeasible { detail, .. } => InstanceError::new(
            "X",
            format!(
                "the W-SVM is infeasible (no W has (x_opt − x_t)ᵀ W q ≥ 1 for every non-optimal \
                 token, so the optimal tokens cannot be selected): {detail}"
            ),
        ),
        SvmError::Invalid { field, reason } => InstanceError::new(field, reason),
        other => InstanceError::new("X", format!("no certified W-SVM solution: {other}")),
    }
}

impl InstanceFile for TokenSelectData {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("X", "tokens, shape (n, T, d), T ≥ 2"),
        ("y", "labels ±1, shape (n,)"),
        ("u", "fixed decoder, shape (d,)"),
        (
            "z",
            "optional queries, shape (n, d); default: the first tokens",
        ),
        (
            "opt",
            "optional optimal tokens, shape (n,); must be argmax_t y_i uᵀx_(i,t)",
        ),
        (
            "W0",
            "the initial state, shape (d, d) (read by the init file; allowed here)",
        ),
        (
            "u0",
            "joint training's initial decoder, shape (d,) (read by the init file; allowed here)",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&["X", "y", "u", "z", "opt", "W0", "u0"])?;
        a.check_finite()?;
        let (data, u) = super::read_tokens(a)?;
        let n = data.n;
        let inst = Self::new(data, u)?;
        // wsvm-kkt writes the optimal tokens it used; they must be the decoder's
        if a.get("opt").is_some() {
            let opt = a.vector("opt", Some(n))?;
            if let Some(i) = (0..n).find(|&i| opt[i] != inst.opt[i] as f64) {
                return Err(InstanceError::new(
                    format!("opt[{i}]"),
                    format!(
                        "is {} but the optimal token argmax_t y_i uᵀx_(i,t) is {} (the fixed \
                         decoder selects it)",
                        opt[i], inst.opt[i]
                    ),
                ));
            }
        }
        Ok(inst)
    }

    fn to_arrays(&self) -> Arrays {
        token_arrays(&self.data, &self.u)
    }
}

/// Joint training's tokens (paper 003 Sec. 4): X, y, u (, z) as [`TokenSelectData`] reads
/// them, and optionally `opt` (n,), the optimal tokens by construction (DM's first tokens,
/// Cond. 1(ii)), which `u` need not score highest since u is trained; without `opt`,
/// argmax_t y_i uᵀx_{i,t}. The W-SVM and the u-SVM (min ½‖u‖² s.t. y_i uᵀx_{i,opt} ≥ 1,
/// the decoder's max-margin direction) with these optimal tokens must be feasible.
#[derive(Debug, Clone)]
pub struct JointData {
    pub data: TokenData,
    pub u: Vec<f64>,
    pub opt: Vec<usize>,
}

impl InstanceFile for JointData {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("X", "tokens, shape (n, T, d), T ≥ 2"),
        ("y", "labels ±1, shape (n,)"),
        (
            "u",
            "a decoder, shape (d,); names the optimal tokens when opt is absent",
        ),
        (
            "z",
            "optional queries, shape (n, d); default: the first tokens",
        ),
        (
            "opt",
            "optional optimal tokens by construction, shape (n,), in 0..T",
        ),
        (
            "W0",
            "the initial state, shape (d, d) (read by the init file; allowed here)",
        ),
        (
            "u0",
            "the initial decoder, shape (d,) (read by the init file; allowed here)",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&["X", "y", "u", "z", "opt", "W0", "u0"])?;
        a.check_finite()?;
        let (data, u) = super::read_tokens(a)?;
        let opt = match a.get("opt") {
            None => optimal_tokens(&data, &u)?,
            Some(_) => {
                let raw = a.vector("opt", Some(data.n))?;
                let bad = raw
                    .iter()
                    .position(|&o| !(o.fract() == 0.0 && o >= 0.0 && o < data.t as f64));
                if let Some(i) = bad {
                    return Err(InstanceError::new(
                        format!("opt[{i}]"),
                        format!("is {} but must be a token index in 0..{}", raw[i], data.t),
                    ));
                }
                raw.iter().map(|&o| o as usize).collect()
            }
        };
        let cons = RankOneConstraints::w_svm(&data.view(), &opt).map_err(svm_error)?;
        solve_l2(&cons, SvmMethod::Dual).map_err(svm_error)?;
        let u_infeasible = |e: &dyn std::fmt::Display| {
            InstanceError::new(
                "X",
                format!(
                    "the u-SVM is infeasible (no u has y_i uᵀx_(i,opt) ≥ 1 for every sequence): \
                     {e}"
                ),
            )
        };
        let u_cons =
            VectorConstraints::u_svm(&data.view(), &data.y, &opt).map_err(|e| u_infeasible(&e))?;
        solve_l2(&u_cons, SvmMethod::Dual).map_err(|e| u_infeasible(&e))?;
        Ok(JointData { data, u, opt })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = token_arrays(&self.data, &self.u);
        let opt: Vec<f64> = self.opt.iter().map(|&o| o as f64).collect();
        a.insert("opt", Array::vector(&opt));
        a
    }
}

/// The initial attention matrix W₀ (array `W0`, square).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenSelectInit {
    /// vec(W₀), column-major (the models' layout).
    pub w0: Vec<f64>,
    pub d: usize,
}

impl TokenSelectInit {
    /// W₀ must be d × d for tokens in ℝ^d.
    pub fn for_dimension(&self, d: usize) -> Result<&[f64], InstanceError> {
        require_dimension(self.d, d).map(|_| self.w0.as_slice())
    }
}

/// W₀ (of side `have`) must be d × d for tokens in ℝ^d.
fn require_dimension(have: usize, d: usize) -> Result<(), InstanceError> {
    if have == d {
        Ok(())
    } else {
        Err(InstanceError::new(
            "W0",
            format!("is {have} × {have} but the tokens have d = {d} (W₀ must be d × d)"),
        ))
    }
}

impl InstanceFile for TokenSelectInit {
    const ARRAYS: &'static [(&'static str, &'static str)] =
        &[("W0", "the initial attention matrix, shape (d, d)")];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        let w = a.shaped("W0", &[None, None])?;
        if w.shape[0] != w.shape[1] {
            return Err(InstanceError::new(
                "W0",
                format!("must be square (d, d), got shape {:?}", w.shape),
            ));
        }
        a.check_finite()?;
        Ok(TokenSelectInit {
            w0: w.to_column_major(),
            d: w.shape[0],
        })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        a.insert("W0", Array::from_column_major(self.d, self.d, &self.w0));
        a
    }
}

/// The initial state (u₀, W₀) of joint training (arrays `W0`, (d, d), and `u0`, (d,); u₀
/// defaults to 0, the paper's Cond. 1(i)). The data file's `u` only names the optimal tokens;
/// the trained decoder starts at u₀.
#[derive(Debug, Clone, PartialEq)]
pub struct JointInit {
    pub d: usize,
    pub u0: Vec<f64>,
    /// vec(W₀), column-major.
    pub w0: Vec<f64>,
}

impl JointInit {
    /// (u₀, vec W₀) as the joint model's state, both d-dimensional for tokens in ℝ^d.
    pub fn state(&self, d: usize) -> Result<Vec<f64>, InstanceError> {
        require_dimension(self.d, d)?;
        Ok(self.u0.iter().chain(&self.w0).copied().collect())
    }
}

impl InstanceFile for JointInit {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("W0", "the initial attention matrix, shape (d, d)"),
        ("u0", "optional initial decoder, shape (d,); default 0"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        let TokenSelectInit { w0, d } = TokenSelectInit::from_arrays(a)?;
        let u0 = match a.get("u0") {
            Some(_) => a.vector("u0", Some(d))?.to_vec(),
            None => vec![0.0; d],
        };
        a.check_finite()?;
        Ok(JointInit { d, u0, w0 })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = TokenSelectInit {
            w0: self.w0.clone(),
            d: self.d,
        }
        .to_arrays();
        a.insert("u0", Array::vector(&self.u0));
        a
    }
}

/// The initial attention matrices of a scenario that runs one or several starts (array `W0`:
/// (d, d) for one start, (k, d, d) for k starts, each W₀ row-major as numpy prints it).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenSelectStarts {
    pub d: usize,
    /// vec(W₀) of each start, column-major (the models' layout).
    pub starts: Vec<Vec<f64>>,
}

impl TokenSelectStarts {
    /// Every start must be d × d for tokens in ℝ^d.
    pub fn require_dimension(&self, d: usize) -> Result<(), InstanceError> {
        require_dimension(self.d, d)
    }
}

impl InstanceFile for TokenSelectStarts {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[(
        "W0",
        "the initial attention matrix, shape (d, d), or k of them, shape (k, d, d)",
    )];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        let w = a.require("W0")?;
        let (k, rows, cols) = match w.shape[..] {
            [rows, cols] => (1, rows, cols),
            [k, rows, cols] if k >= 1 => (k, rows, cols),
            _ => {
                return Err(InstanceError::new(
                    "W0",
                    format!(
                        "must be (d, d) or a stack (k, d, d) with k ≥ 1, got shape {:?}",
                        w.shape
                    ),
                ))
            }
        };
        if rows != cols || rows == 0 {
            return Err(InstanceError::new(
                "W0",
                format!(
                    "each W₀ must be square (d, d) with d ≥ 1, got shape {:?}",
                    w.shape
                ),
            ));
        }
        a.check_finite()?;
        let starts = w
            .data
            .chunks(rows * cols)
            .take(k)
            .map(|m| Array::matrix(rows, cols, m.to_vec()).to_column_major())
            .collect();
        Ok(TokenSelectStarts { d: rows, starts })
    }

    /// One start as (d, d) (what the single-start scenarios and the generic flow read), several
    /// as (k, d, d).
    fn to_arrays(&self) -> Arrays {
        let d = self.d;
        let rows: Vec<f64> = self
            .starts
            .iter()
            .flat_map(|w| Array::from_column_major(d, d, w).data)
            .collect();
        let shape = match self.starts.len() {
            1 => vec![d, d],
            k => vec![k, d, d],
        };
        let mut a = Arrays::new();
        a.insert("W0", Array::new(&shape, rows));
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_token_arrays() -> Arrays {
        let mut a = Arrays::new();
        a.insert("X", Array::new(&[1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]))
            .insert("y", Array::vector(&[1.0]))
            .insert("u", Array::vector(&[1.0, 0.0]));
        a
    }

    #[test]
    fn the_two_token_instance_reads_back_with_its_closed_form_wsvm() {
        let inst = TokenSelectData::from_arrays(&two_token_arrays()).unwrap();
        assert_eq!(inst.opt, vec![0]);
        // W_mm = D/2 with D = (e₁ − e₂)e₁ᵀ; column-major (W₁₁, W₂₁, W₁₂, W₂₂)
        for (w, want) in inst.wsvm.w.iter().zip([0.5, -0.5, 0.0, 0.0]) {
            assert!((w - want).abs() < 1e-10, "{:?}", inst.wsvm.w);
        }
        assert_eq!(inst.to_arrays(), two_token_arrays());
    }

    #[test]
    fn ties_and_infeasible_wsvms_name_the_array() {
        let mut a = two_token_arrays();
        a.insert("u", Array::vector(&[1.0, 1.0]));
        let e = TokenSelectData::from_arrays(&a).unwrap_err();
        assert_eq!(e.key, "X[0]");
        // the same sequence with opposite labels: opt = 0 asks (x₁ − x₂)ᵀ W x₁ ≥ 1, opt = 1 asks
        // (x₂ − x₁)ᵀ W x₁ ≥ 1 — no W does both
        let mut a = two_token_arrays();
        a.insert(
            "X",
            Array::new(&[2, 2, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]),
        )
        .insert("y", Array::vector(&[1.0, -1.0]));
        let e = TokenSelectData::from_arrays(&a).unwrap_err();
        assert_eq!(e.key, "X", "{e}");
        assert!(e.reason.contains("infeasible"), "{e}");
    }

    #[test]
    fn w0_is_read_row_major_and_must_be_square() {
        let mut a = Arrays::new();
        a.insert("W0", Array::matrix(2, 2, vec![1.0, 2.0, 3.0, 4.0]));
        let init = TokenSelectInit::from_arrays(&a).unwrap();
        assert_eq!(init.w0, vec![1.0, 3.0, 2.0, 4.0]);
        assert_eq!(init.to_arrays(), a);
        assert_eq!(init.for_dimension(3).unwrap_err().key, "W0");
        a.insert("W0", Array::matrix(2, 3, vec![0.0; 6]));
        assert_eq!(TokenSelectInit::from_arrays(&a).unwrap_err().key, "W0");
    }

    #[test]
    fn joint_starts_read_u0_of_side_d_or_default_to_zero() {
        let mut a = Arrays::new();
        a.insert("W0", Array::matrix(2, 2, vec![1.0, 2.0, 3.0, 4.0]));
        let init = JointInit::from_arrays(&a).unwrap();
        assert_eq!(init.state(2).unwrap(), vec![0.0, 0.0, 1.0, 3.0, 2.0, 4.0]);
        a.insert("u0", Array::vector(&[5.0, 6.0]));
        let init = JointInit::from_arrays(&a).unwrap();
        assert_eq!(init.state(2).unwrap()[..2], [5.0, 6.0]);
        assert_eq!(init.to_arrays(), a);
        assert_eq!(init.state(3).unwrap_err().key, "W0");
        a.insert("u0", Array::vector(&[5.0, 6.0, 7.0]));
        let e = JointInit::from_arrays(&a).unwrap_err();
        assert_eq!(e.key, "u0", "{e}");
    }

    #[test]
    fn starts_read_one_matrix_or_a_stack() {
        let mut a = Arrays::new();
        a.insert("W0", Array::matrix(2, 2, vec![1.0, 2.0, 3.0, 4.0]));
        let one = TokenSelectStarts::from_arrays(&a).unwrap();
        assert_eq!(one.starts, vec![vec![1.0, 3.0, 2.0, 4.0]]);
        assert_eq!(one.to_arrays(), a);
        let stack = Array::new(&[2, 2, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        a.insert("W0", stack);
        let two = TokenSelectStarts::from_arrays(&a).unwrap();
        assert_eq!(two.starts[1], vec![5.0, 7.0, 6.0, 8.0]);
        assert_eq!(two.to_arrays(), a);
        assert_eq!(two.require_dimension(3).unwrap_err().key, "W0");
        a.insert("W0", Array::new(&[1, 2, 3], vec![0.0; 6]));
        assert_eq!(TokenSelectStarts::from_arrays(&a).unwrap_err().key, "W0");
        a.insert("W0", Array::vector(&[0.0; 4]));
        assert_eq!(TokenSelectStarts::from_arrays(&a).unwrap_err().key, "W0");
    }
}

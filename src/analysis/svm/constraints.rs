//! The margin-constraint families of the max-margin programs.

use nalgebra::DMatrix;
use serde::Serialize;

use super::{SvmError, TokenView};

/// Which sequence and token a constraint compares (token = the optimal token for the u-SVM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConstraintLabel {
    pub sequence: usize,
    pub token: usize,
}

/// Linear margin constraints ⟨w, f_k⟩ ≥ 1, k = 1..m, on w ∈ ℝ^p.
pub trait MarginConstraints {
    /// Number of constraints m.
    fn count(&self) -> usize;
    /// Dimension p of w.
    fn dim(&self) -> usize;
    /// Gram matrix G_kl = ⟨f_k, f_l⟩ (m × m).
    fn gram(&self) -> DMatrix<f64>;
    /// Σ_k α_k f_k.
    fn combine(&self, alpha: &[f64]) -> Vec<f64>;
    /// ⟨w, f_k⟩ for every k.
    fn margins(&self, w: &[f64]) -> Vec<f64>;
    /// The m × p matrix with rows f_k (for the primal programs).
    fn dense(&self) -> DMatrix<f64>;
    fn labels(&self) -> &[ConstraintLabel];
}

/// Rank-one constraints ⟨W, a_k q_kᵀ⟩ = a_kᵀ W q_k ≥ 1 on W ∈ ℝ^{rows×cols}, w = vec(W)
/// column-major. The Gram matrix is (A Aᵀ) ∘ (Q Qᵀ): no d² objects are formed for the dual.
#[derive(Debug, Clone, PartialEq)]
pub struct RankOneConstraints {
    /// Rows a_kᵀ (m × rows).
    pub a: DMatrix<f64>,
    /// Rows q_kᵀ (m × cols).
    pub q: DMatrix<f64>,
    pub labels: Vec<ConstraintLabel>,
}

/// Vector constraints ⟨w, f_k⟩ ≥ 1 with the rows f_kᵀ of `f` (m × p).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorConstraints {
    pub f: DMatrix<f64>,
    pub labels: Vec<ConstraintLabel>,
}

fn check_tokens(tokens: &TokenView, opt: &[usize]) -> Result<(), SvmError> {
    let invalid = |field: &str, reason: String| SvmError::Invalid {
        field: field.into(),
        reason,
    };
    if tokens.x.len() != tokens.n * tokens.t * tokens.d {
        return Err(invalid(
            "X",
            format!(
                "expected n·T·d = {} entries",
                tokens.n * tokens.t * tokens.d
            ),
        ));
    }
    if tokens.queries.len() != tokens.n * tokens.d {
        return Err(invalid(
            "z",
            format!("expected n·d = {} entries", tokens.n * tokens.d),
        ));
    }
    if opt.len() != tokens.n {
        return Err(invalid(
            "opt",
            format!("expected {} indices, got {}", tokens.n, opt.len()),
        ));
    }
    if let Some(i) = opt.iter().position(|&o| o >= tokens.t) {
        return Err(invalid(
            &format!("opt[{i}]"),
            format!("{} is not a token index < T = {}", opt[i], tokens.t),
        ));
    }
    Ok(())
}

impl RankOneConstraints {
    /// The W-SVM constraints (x_{i,opt} − x_{i,t})ᵀ W q_i ≥ 1 for every i and t ≠ opt_i.
    pub fn w_svm(tokens: &TokenView, opt: &[usize]) -> Result<Self, SvmError> {
        check_tokens(tokens, opt)?;
        let d = tokens.d;
        let m = tokens.n * (tokens.t - 1);
        let mut a = DMatrix::zeros(m, d);
        let mut q = DMatrix::zeros(m, d);
        let mut labels = Vec::with_capacity(m);
        for (i, &o) in opt.iter().enumerate() {
            for t in (0..tokens.t).filter(|&t| t != o) {
                let k = labels.len();
                for r in 0..d {
                    a[(k, r)] = tokens.token(i, o)[r] - tokens.token(i, t)[r];
                    q[(k, r)] = tokens.query(i)[r];
                }
                labels.push(ConstraintLabel {
                    sequence: i,
                    token: t,
                });
            }
        }
        Ok(RankOneConstraints { a, q, labels })
    }

    /// Rows and columns of W.
    pub fn shape(&self) -> (usize, usize) {
        (self.a.ncols(), self.q.ncols())
    }

    /// vec(W) (column-major) as a matrix.
    pub fn matrix(&self, w: &[f64]) -> DMatrix<f64> {
        let (r, c) = self.shape();
        DMatrix::from_column_slice(r, c, w)
    }

    /// The diagonal restriction W = Diag(β): constraints βᵀ(a_k ⊙ q_k) ≥ 1 (square W only).
    pub fn diagonal(&self) -> Result<VectorConstraints, SvmError> {
        if self.a.ncols() != self.q.ncols() {
            return Err(SvmError::Invalid {
                field: "W".into(),
                reason: "the diagonal restriction needs a square W".into(),
            });
        }
        Ok(VectorConstraints {
            f: self.a.component_mul(&self.q),
            labels: self.labels.clone(),
        })
    }
}

impl MarginConstraints for RankOneConstraints {
    fn count(&self) -> usize {
        self.labels.len()
    }
    fn dim(&self) -> usize {
        self.a.ncols() * self.q.ncols()
    }
    fn gram(&self) -> DMatrix<f64> {
        (&self.a * self.a.transpose()).component_mul(&(&self.q * self.q.transpose()))
    }
    fn combine(&self, alpha: &[f64]) -> Vec<f64> {
        // W = Aᵀ Diag(α) Q
        let mut scaled = self.a.clone();
        for (k, &al) in alpha.iter().enumerate() {
            scaled.row_mut(k).scale_mut(al);
        }
        (scaled.transpose() * &self.q).as_slice().to_vec()
    }
    fn margins(&self, w: &[f64]) -> Vec<f64> {
        let wm = self.matrix(w);
        let wq = &wm * self.q.transpose(); // rows × m: column k is W q_k
        (0..self.count())
            .map(|k| self.a.row(k).transpose().dot(&wq.column(k)))
            .collect()
    }
    fn dense(&self) -> DMatrix<f64> {
        let (r, c) = self.shape();
        DMatrix::from_fn(self.count(), r * c, |k, j| {
            self.a[(k, j % r)] * self.q[(k, j / r)]
        })
    }
    fn labels(&self) -> &[ConstraintLabel] {
        &self.labels
    }
}

impl VectorConstraints {
    /// The u-SVM constraints y_i uᵀx_{i,opt_i} ≥ 1 (spec 003 §3.5).
    pub fn u_svm(tokens: &TokenView, y: &[f64], opt: &[usize]) -> Result<Self, SvmError> {
        check_tokens(tokens, opt)?;
        if y.len() != tokens.n {
            return Err(SvmError::Invalid {
                field: "y".into(),
                reason: format!("expected {} labels, got {}", tokens.n, y.len()),
            });
        }
        let f = DMatrix::from_fn(tokens.n, tokens.d, |i, r| y[i] * tokens.token(i, opt[i])[r]);
        let labels = (0..tokens.n)
            .map(|i| ConstraintLabel {
                sequence: i,
                token: opt[i],
            })
            .collect();
        Ok(VectorConstraints { f, labels })
    }
}

impl MarginConstraints for VectorConstraints {
    fn count(&self) -> usize {
        self.f.nrows()
    }
    fn dim(&self) -> usize {
        self.f.ncols()
    }
    fn gram(&self) -> DMatrix<f64> {
        &self.f * self.f.transpose()
    }
    fn combine(&self, alpha: &[f64]) -> Vec<f64> {
        (self.f.transpose() * nalgebra::DVector::from_column_slice(alpha))
            .as_slice()
            .to_vec()
    }
    fn margins(&self, w: &[f64]) -> Vec<f64> {
        (&self.f * nalgebra::DVector::from_column_slice(w))
            .as_slice()
            .to_vec()
    }
    fn dense(&self) -> DMatrix<f64> {
        self.f.clone()
    }
    fn labels(&self) -> &[ConstraintLabel] {
        &self.labels
    }
}

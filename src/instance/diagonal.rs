//! Seed 004 (diagonal networks and diagonal attention heads): the data and the initial
//! direction θ̄₀ of an incremental-learning run.
//!
//! **Data** ([`DiagonalData`]), one of two models:
//!
//! | array       | shape       | meaning                                                        |
//! |-------------|-------------|----------------------------------------------------------------|
//! | `Sigma`     | (p, p)      | diagonal linear network: covariance Σ = E\[xxᵀ\], symmetric ≻ 0 |
//! | `beta_star` | (p,)        | its teacher β* (loss ½ (β − β*)ᵀΣ(β − β*))                     |
//! | `X`         | (N, n, d)   | attention head: N inputs of n tokens in ℝ^d                    |
//! | `a_star`    | (d,)        | teacher KQ diagonal a* (labels Y = f(X; a*, c*), realizable)    |
//! | `c_star`    | (d,)        | teacher VO diagonal c*                                         |
//! | `Y`         | (N, n, d)   | instead of a teacher: the labels themselves                    |
//!
//! The attention loss is the mean squared error (1/N) Σ_s ‖f(X_s) − Y_s‖²/(n d) (spec §5.1).
//!
//! **Initial direction** ([`DiagonalInit`]): `u0`, `v0` of shape (p,) (p = 2d for attention:
//! u = \[w_K; w_V\], v = \[w_Q; w_O\]); a run starts at α·(u0, v0) with α its own parameter, so
//! one direction serves every α (spec §1.4). Each |u0_i| ≠ |v0_i| (assumption A4.3(i): the
//! conserved c_i = u0_i² − v0_i² is not 0, the log layout needs it).
//!
//! `np.savez("mine.npz", Sigma=S, beta_star=b, u0=u, v0=v)` writes a complete linear instance.

use nalgebra::DMatrix;

use super::{Array, Arrays, InstanceError, InstanceFile};

/// Every array name of the layout (data and initial direction may share one file).
const NAMES: &[&str] = &[
    "Sigma",
    "beta_star",
    "X",
    "Y",
    "a_star",
    "c_star",
    "u0",
    "v0",
];

/// The data of a seed-004 instance.
#[derive(Debug, Clone, PartialEq)]
pub enum DiagonalData {
    /// Diagonal linear network, realizable teacher: L̃(β) = ½ (β − β*)ᵀΣ(β − β*).
    Linear {
        sigma: DMatrix<f64>,
        beta_star: Vec<f64>,
    },
    /// Diagonal attention head on N samples X_s ∈ ℝ^{n×d} (row-major, concatenated).
    Attention {
        count: usize,
        n: usize,
        d: usize,
        x: Vec<f64>,
        labels: Labels,
    },
}

/// Where the attention labels come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Labels {
    /// A teacher head β* = \[a*; c*\]: Y = f(X; β*), so the loss can reach 0.
    Teacher { a_star: Vec<f64>, c_star: Vec<f64> },
    /// The user's labels, concatenated like X.
    Given(Vec<f64>),
}

impl DiagonalData {
    /// Number p of product coordinates β (2d for attention).
    pub fn p(&self) -> usize {
        match self {
            DiagonalData::Linear { beta_star, .. } => beta_star.len(),
            DiagonalData::Attention { d, .. } => 2 * d,
        }
    }

    /// Whether a zero-loss β exists by construction (a teacher), so "the loss reaches 0"
    /// is a claim about this instance.
    pub fn realizable(&self) -> bool {
        !matches!(
            self,
            DiagonalData::Attention {
                labels: Labels::Given(_),
                ..
            }
        )
    }
}

impl InstanceFile for DiagonalData {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "Sigma",
            "(p, p) covariance Σ of the diagonal linear network, symmetric positive definite",
        ),
        ("beta_star", "(p,) its teacher β*"),
        (
            "X",
            "(N, n, d) attention inputs (instead of Sigma, beta_star)",
        ),
        ("a_star", "(d,) teacher KQ diagonal: Y = f(X; a*, c*)"),
        ("c_star", "(d,) teacher VO diagonal"),
        (
            "Y",
            "(N, n, d) attention labels (instead of a_star, c_star)",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(NAMES)?;
        a.check_finite()?;
        match (a.get("Sigma").is_some(), a.get("X").is_some()) {
            (true, true) => Err(InstanceError::new(
                "X",
                "give either a linear network (Sigma, beta_star) or an attention head (X, …), \
                 not both",
            )),
            (false, false) => Err(InstanceError::new(
                "Sigma",
                "missing: give Sigma and beta_star (diagonal linear network) or X with a_star, \
                 c_star or Y (diagonal attention head)",
            )),
            (true, false) => linear(a),
            (false, true) => attention(a),
        }
    }

    fn to_arrays(&self) -> Arrays {
        let mut out = Arrays::new();
        match self {
            DiagonalData::Linear { sigma, beta_star } => {
                let p = beta_star.len();
                out.insert("Sigma", Array::from_column_major(p, p, sigma.as_slice()))
                    .insert("beta_star", Array::vector(beta_star));
            }
            DiagonalData::Attention {
                count,
                n,
                d,
                x,
                labels,
            } => {
                let shape = [*count, *n, *d];
                out.insert("X", Array::new(&shape, x.clone()));
                match labels {
                    Labels::Teacher { a_star, c_star } => {
                        out.insert("a_star", Array::vector(a_star))
                            .insert("c_star", Array::vector(c_star));
                    }
                    Labels::Given(y) => {
                        out.insert("Y", Array::new(&shape, y.clone()));
                    }
                }
            }
        }
        out
    }
}

fn linear(a: &Arrays) -> Result<DiagonalData, InstanceError> {
    for name in ["X", "Y", "a_star", "c_star"] {
        if a.get(name).is_some() {
            return Err(InstanceError::new(
                name,
                "belongs to an attention instance, but the file holds Sigma (a linear network)",
            ));
        }
    }
    let s = a.shaped("Sigma", &[None, None])?;
    let p = s.shape[0];
    if p == 0 || s.shape[1] != p {
        return Err(InstanceError::new(
            "Sigma",
            format!("must be a non-empty square matrix, got shape {:?}", s.shape),
        ));
    }
    let beta_star = a.vector("beta_star", Some(p))?.to_vec();
    let sigma = DMatrix::from_row_slice(p, p, &s.data);
    // the same tolerance as the model (DiagLinear): numpy's X.T @ X is symmetric to rounding
    let scale = sigma.amax();
    for i in 0..p {
        for j in 0..i {
            if (sigma[(i, j)] - sigma[(j, i)]).abs() > 1e-14 * scale {
                return Err(InstanceError::new(
                    format!("Sigma[{i}, {j}]"),
                    format!(
                        "Σ must be symmetric: {} here, {} at Sigma[{j}, {i}]",
                        sigma[(i, j)],
                        sigma[(j, i)]
                    ),
                ));
            }
        }
    }
    if sigma.clone().cholesky().is_none() {
        return Err(InstanceError::new(
            "Sigma",
            "not positive definite: Algorithm 1 needs Σ_AA ≻ 0 on every support (a unique \
             minimizer per stage)",
        ));
    }
    Ok(DiagonalData::Linear { sigma, beta_star })
}

fn attention(a: &Arrays) -> Result<DiagonalData, InstanceError> {
    if let Some(name) = ["Sigma", "beta_star"]
        .into_iter()
        .find(|n| a.get(n).is_some())
    {
        return Err(InstanceError::new(
            name,
            "belongs to a linear network, but the file holds X (an attention head)",
        ));
    }
    let xa = a.shaped("X", &[None, None, None])?;
    let (count, n, d) = (xa.shape[0], xa.shape[1], xa.shape[2]);
    if count == 0 || n == 0 || d == 0 {
        return Err(InstanceError::new(
            "X",
            format!("needs N, n, d ≥ 1, got shape {:?}", xa.shape),
        ));
    }
    let teacher = a.get("a_star").is_some() || a.get("c_star").is_some();
    let labels = match (teacher, a.get("Y").is_some()) {
        (true, true) => {
            return Err(InstanceError::new(
                "Y",
                "give either the labels Y or the teacher (a_star, c_star), not both",
            ))
        }
        (true, false) => Labels::Teacher {
            a_star: a.vector("a_star", Some(d))?.to_vec(),
            c_star: a.vector("c_star", Some(d))?.to_vec(),
        },
        (false, true) => Labels::Given(
            a.shaped("Y", &[Some(count), Some(n), Some(d)])?
                .data
                .clone(),
        ),
        (false, false) => {
            return Err(InstanceError::new(
                "Y",
                "missing: give the labels Y (N, n, d) or the teacher a_star, c_star (d,)",
            ))
        }
    };
    Ok(DiagonalData::Attention {
        count,
        n,
        d,
        x: xa.data.clone(),
        labels,
    })
}

/// The initial direction θ̄₀ = (u0, v0); a run starts at α θ̄₀.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagonalInit {
    pub u0: Vec<f64>,
    pub v0: Vec<f64>,
}

impl DiagonalInit {
    /// Refuses a direction of the wrong length for `p` product coordinates.
    pub fn check_dim(&self, p: usize) -> Result<(), InstanceError> {
        if self.u0.len() != p {
            return Err(InstanceError::new(
                "u0",
                format!(
                    "has length {}, the data have p = {p} coordinates (2d for attention)",
                    self.u0.len()
                ),
            ));
        }
        Ok(())
    }
}

impl InstanceFile for DiagonalInit {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("u0", "(p,) initial direction of u (the run starts at α·u0)"),
        ("v0", "(p,) initial direction of v, |v0_i| ≠ |u0_i|"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(NAMES)?;
        a.check_finite()?;
        let u0 = a.vector("u0", None)?.to_vec();
        let v0 = a.vector("v0", Some(u0.len()))?.to_vec();
        if u0.is_empty() {
            return Err(InstanceError::new("u0", "is empty"));
        }
        if let Some(i) = (0..u0.len()).find(|&i| u0[i].abs() == v0[i].abs()) {
            return Err(InstanceError::new(
                format!("v0[{i}]"),
                format!(
                    "|v0| = |u0| = {} here: the conserved c = u0² − v0² is 0 (A4.3(i) needs \
                     c_i ≠ 0)",
                    u0[i].abs()
                ),
            ));
        }
        Ok(DiagonalInit { u0, v0 })
    }

    fn to_arrays(&self) -> Arrays {
        let mut out = Arrays::new();
        out.insert("u0", Array::vector(&self.u0))
            .insert("v0", Array::vector(&self.v0));
        out
    }
}

/// The arrays of data and initial direction in one set (what a run writes as `instance.npz`).
pub fn instance_arrays(data: &DiagonalData, init: Option<&DiagonalInit>) -> Arrays {
    let mut out = data.to_arrays();
    if let Some(init) = init {
        out.merge_prefixed("", init.to_arrays());
    }
    out
}

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
//!
//! **The full-matrix head** of `full-matrix-rank` (beyond the diagonal theory) has a layout of
//! its own: inputs `X`, a low-rank teacher as thin SVDs (`kq_U`, `kq_sigma`, `kq_V`, `vo_U`,
//! `vo_sigma`, `vo_V`) in [`FullMatrixData`], and the unit initialization `W_K0`, `W_Q0`,
//! `W_V0`, `W_O0` (d, d_h) in [`FullMatrixInit`].

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

/// The array names of the full-matrix head layout ([`FullMatrixData`], [`FullMatrixInit`]).
const FULL_NAMES: &[&str] = &[
    "X", "kq_U", "kq_sigma", "kq_V", "vo_U", "vo_sigma", "vo_V", "W_K0", "W_Q0", "W_V0", "W_O0",
];

/// Columns of a teacher frame are orthonormal when max|UᵀU − I| is at most this (numpy's SVD
/// gives ~1e-15).
const FRAME_TOL: f64 = 1e-10;

/// A low-rank teacher product P* = U diag(σ) Vᵀ (d×d), as its thin SVD: the scenario follows
/// each teacher mode (u_k, σ_k, v_k) through training.
#[derive(Debug, Clone, PartialEq)]
pub struct LowRankTeacher {
    /// U (d×r), Σ (r), V (d×r): orthonormal columns, σ strictly decreasing and positive.
    pub u: DMatrix<f64>,
    pub sigma: Vec<f64>,
    pub v: DMatrix<f64>,
}

impl LowRankTeacher {
    /// The product U diag(σ) Vᵀ.
    pub fn product(&self) -> DMatrix<f64> {
        let s = DMatrix::from_diagonal(&nalgebra::DVector::from_column_slice(&self.sigma));
        &self.u * s * self.v.transpose()
    }

    fn read(a: &Arrays, prefix: &str, d: usize) -> Result<Self, InstanceError> {
        let (u_name, s_name, v_name) = (
            format!("{prefix}_U"),
            format!("{prefix}_sigma"),
            format!("{prefix}_V"),
        );
        let sigma = a.vector(&s_name, None)?.to_vec();
        let r = sigma.len();
        if r == 0 || r > d {
            return Err(InstanceError::new(
                &s_name,
                format!("rank r = {r}: need 1 ≤ r ≤ d = {d} singular values"),
            ));
        }
        if let Some(k) = sigma.iter().position(|&s| s <= 0.0) {
            return Err(InstanceError::new(
                format!("{s_name}[{k}]"),
                format!("singular value {} must be positive", sigma[k]),
            ));
        }
        if let Some(k) = (1..r).find(|&k| sigma[k] >= sigma[k - 1]) {
            return Err(InstanceError::new(
                format!("{s_name}[{k}]"),
                format!(
                    "singular values must decrease strictly ({} after {}): the modes are told \
                     apart by their σ",
                    sigma[k],
                    sigma[k - 1]
                ),
            ));
        }
        let frame = |name: &str| -> Result<DMatrix<f64>, InstanceError> {
            let f = a.shaped(name, &[Some(d), Some(r)])?;
            let m = DMatrix::from_row_slice(d, r, &f.data);
            let gram = m.transpose() * &m - DMatrix::<f64>::identity(r, r);
            match gram.iter().position(|x| x.abs() > FRAME_TOL) {
                None => Ok(m),
                Some(k) => Err(InstanceError::new(
                    name,
                    format!(
                        "columns {} and {} are not orthonormal (|uᵢᵀuⱼ − δᵢⱼ| = {:.3e} > \
                         {FRAME_TOL:e}): give the thin SVD, e.g. numpy's U[:, :r]",
                        k % r,
                        k / r,
                        gram[k].abs()
                    ),
                )),
            }
        };
        Ok(LowRankTeacher {
            u: frame(&u_name)?,
            sigma,
            v: frame(&v_name)?,
        })
    }

    fn write(&self, out: &mut Arrays, prefix: &str) {
        let (d, r) = self.u.shape();
        out.insert(
            &format!("{prefix}_U"),
            Array::from_column_major(d, r, self.u.as_slice()),
        )
        .insert(&format!("{prefix}_sigma"), Array::vector(&self.sigma))
        .insert(
            &format!("{prefix}_V"),
            Array::from_column_major(d, r, self.v.as_slice()),
        );
    }
}

/// The data of the full-matrix attention head f(X) = smax(X W_K W_Qᵀ Xᵀ) X W_V W_Oᵀ
/// (`full-matrix-rank`, spec 004 §5.4), labelled by a low-rank teacher:
///
/// | array | shape | meaning |
/// |---|---|---|
/// | `X` | (N, n, d) | N inputs of n tokens in ℝ^d |
/// | `kq_U`, `kq_sigma`, `kq_V` | (d, r), (r,), (d, r) | teacher A* = W_K*W_Q*ᵀ = U diag(σ) Vᵀ: orthonormal columns, σ > 0 strictly decreasing |
/// | `vo_U`, `vo_sigma`, `vo_V` | (d, r'), (r',), (d, r') | teacher M* = W_V*W_O*ᵀ, likewise |
///
/// Labels are Y = f(X; A*, M*) (realizable), loss the mean squared error of spec §5.1. From a
/// teacher product P: `U, s, Vt = np.linalg.svd(P); r = (s > 1e-10 * s[0]).sum()`, then
/// `kq_U=U[:, :r], kq_sigma=s[:r], kq_V=Vt[:r].T`.
#[derive(Debug, Clone, PartialEq)]
pub struct FullMatrixData {
    pub count: usize,
    pub n: usize,
    pub d: usize,
    /// The inputs, row-major (N, n, d).
    pub x: Vec<f64>,
    /// A* and M*, in this order.
    pub teacher: [LowRankTeacher; 2],
}

impl InstanceFile for FullMatrixData {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("X", "(N, n, d) inputs"),
        ("kq_U", "(d, r) left singular vectors of A* = W_K*W_Q*ᵀ"),
        (
            "kq_sigma",
            "(r,) its singular values, positive, strictly decreasing",
        ),
        ("kq_V", "(d, r) its right singular vectors"),
        ("vo_U", "(d, r') left singular vectors of M* = W_V*W_O*ᵀ"),
        ("vo_sigma", "(r',) its singular values"),
        ("vo_V", "(d, r') its right singular vectors"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(FULL_NAMES)?;
        a.check_finite()?;
        let xa = a.shaped("X", &[None, None, None])?;
        let (count, n, d) = (xa.shape[0], xa.shape[1], xa.shape[2]);
        if count == 0 || n == 0 || d == 0 {
            return Err(InstanceError::new(
                "X",
                format!("needs N, n, d ≥ 1, got shape {:?}", xa.shape),
            ));
        }
        Ok(FullMatrixData {
            count,
            n,
            d,
            x: xa.data.clone(),
            teacher: [
                LowRankTeacher::read(a, "kq", d)?,
                LowRankTeacher::read(a, "vo", d)?,
            ],
        })
    }

    fn to_arrays(&self) -> Arrays {
        let mut out = Arrays::new();
        out.insert(
            "X",
            Array::new(&[self.count, self.n, self.d], self.x.clone()),
        );
        self.teacher[0].write(&mut out, "kq");
        self.teacher[1].write(&mut out, "vo");
        out
    }
}

/// The unit initialization θ₁ of the full-matrix head: `W_K0`, `W_Q0`, `W_V0`, `W_O0`, each
/// (d, d_h); a run at init scale s starts at s·θ₁ (one file serves every s).
#[derive(Debug, Clone, PartialEq)]
pub struct FullMatrixInit {
    pub d: usize,
    pub d_h: usize,
    /// θ₁ = [W_K; W_Q; W_V; W_O], each row-major d×d_h (the flow's state layout).
    pub theta: Vec<f64>,
}

/// The factor names of [`FullMatrixInit`], in the state's order.
const FACTORS: [&str; 4] = ["W_K0", "W_Q0", "W_V0", "W_O0"];

impl FullMatrixInit {
    /// Refuses an init for another token dimension than the data's.
    pub fn check_dim(&self, d: usize) -> Result<(), InstanceError> {
        if self.d == d {
            return Ok(());
        }
        Err(InstanceError::new(
            "W_K0",
            format!(
                "has d = {} rows, the data have d = {d} (X's last axis)",
                self.d
            ),
        ))
    }
}

impl InstanceFile for FullMatrixInit {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "W_K0",
            "(d, d_h) key factor of θ₁ (the run at scale s starts at s·θ₁)",
        ),
        ("W_Q0", "(d, d_h) query factor"),
        ("W_V0", "(d, d_h) value factor"),
        ("W_O0", "(d, d_h) output factor"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(FULL_NAMES)?;
        a.check_finite()?;
        let first = a.shaped(FACTORS[0], &[None, None])?;
        let (d, d_h) = (first.shape[0], first.shape[1]);
        if d == 0 || d_h == 0 {
            return Err(InstanceError::new(
                FACTORS[0],
                format!("needs d, d_h ≥ 1, got shape {:?}", first.shape),
            ));
        }
        let mut theta = Vec::with_capacity(4 * d * d_h);
        for name in FACTORS {
            theta.extend(&a.shaped(name, &[Some(d), Some(d_h)])?.data);
        }
        Ok(FullMatrixInit { d, d_h, theta })
    }

    fn to_arrays(&self) -> Arrays {
        let size = self.d * self.d_h;
        let mut out = Arrays::new();
        for (k, name) in FACTORS.iter().enumerate() {
            let block = self.theta[k * size..(k + 1) * size].to_vec();
            out.insert(name, Array::matrix(self.d, self.d_h, block));
        }
        out
    }
}

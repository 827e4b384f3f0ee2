//! Prompt (p-) attention, paper 002: the instances its scenarios read and write.
//!
//! [`StationaryPoint`] — an interior stationary point z* of the simplex dynamics and the Hessian H
//! of the outer loss there (Theorem 2, eq. 18; `thm2-condition-bound`):
//!
//! | array    | shape  | meaning                                                        |
//! |----------|--------|----------------------------------------------------------------|
//! | `z_star` | (n,)   | attention at z*: entries > 0 summing to 1 (|Σ − 1| ≤ 1e−12), n ≥ 2 |
//! | `H`      | (n, n) | Hessian of the outer loss at z*: symmetric positive definite   |
//!
//! `np.savez("zstar.npz", z_star=np.array([0.7, 0.2, 0.1]), H=np.diag([1.0, 2.0, 3.0]))`.
//! Theorem 2 needs μ = λ_min(H) > 0 (spec 002 erratum E11), so H must be positive definite.

use nalgebra::DMatrix;

use super::{Array, Arrays, InstanceError, InstanceFile};

/// z* in the open simplex and the SPD Hessian H of the outer loss at z*.
#[derive(Debug, Clone, PartialEq)]
pub struct StationaryPoint {
    pub z_star: Vec<f64>,
    pub h: DMatrix<f64>,
}

/// How far Σz may be from 1 (a user's float64 vector normalized by its sum is within ~nε).
const SIMPLEX_SUM_TOL: f64 = 1e-12;

/// A point of the open simplex: every entry > 0, the sum 1, at least two entries.
fn open_simplex_point<'a>(a: &'a Arrays, name: &str) -> Result<&'a [f64], InstanceError> {
    let z = a.vector(name, None)?;
    if z.len() < 2 {
        return Err(InstanceError::new(name, "need n ≥ 2 entries"));
    }
    if let Some(i) = z.iter().position(|&x| x <= 0.0) {
        return Err(InstanceError::new(
            format!("{name}[{i}]"),
            format!(
                "entries must be > 0 (an interior point of the simplex), got {}",
                z[i]
            ),
        ));
    }
    let sum: f64 = z.iter().sum();
    if (sum - 1.0).abs() > SIMPLEX_SUM_TOL {
        return Err(InstanceError::new(
            name,
            format!("entries must sum to 1 (within {SIMPLEX_SUM_TOL:e}), got {sum}"),
        ));
    }
    Ok(z)
}

/// A symmetric positive definite n × n matrix (symmetric to 1e−12 relative to its largest entry;
/// positive definite by a Cholesky factorization).
fn spd_matrix(a: &Arrays, name: &str, n: usize) -> Result<DMatrix<f64>, InstanceError> {
    let arr = a.shaped(name, &[Some(n), Some(n)])?;
    let m = DMatrix::from_row_slice(n, n, &arr.data);
    let scale = m.amax();
    for i in 0..n {
        for j in 0..i {
            if (m[(i, j)] - m[(j, i)]).abs() > 1e-12 * scale {
                return Err(InstanceError::new(
                    format!("{name}[{i}, {j}]"),
                    format!(
                        "must be symmetric: {} ≠ {name}[{j}, {i}] = {}",
                        m[(i, j)],
                        m[(j, i)]
                    ),
                ));
            }
        }
    }
    if m.clone().cholesky().is_none() {
        return Err(InstanceError::new(
            name,
            "must be positive definite (Theorem 2 needs μ = λ_min > 0, spec 002 E11)",
        ));
    }
    Ok(m)
}

impl InstanceFile for StationaryPoint {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "z_star",
            "(n,) interior stationary point: entries > 0 summing to 1, n ≥ 2",
        ),
        (
            "H",
            "(n, n) symmetric positive definite Hessian of the outer loss at z*",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&["z_star", "H"])?;
        let z_star = open_simplex_point(a, "z_star")?.to_vec();
        let h = spd_matrix(a, "H", z_star.len())?;
        Ok(StationaryPoint { z_star, h })
    }

    fn to_arrays(&self) -> Arrays {
        let n = self.z_star.len();
        let mut a = Arrays::new();
        a.insert("z_star", Array::vector(&self.z_star))
            .insert("H", Array::from_column_major(n, n, self.h.as_slice()));
        a
    }
}

/// Samples of the prompt-attention model f(X) = φ(XWp)ᵀXv (spec 002 §1.1) with their labels,
/// and the frozen key matrix W — the data of the generic prompt flow:
///
/// | array | shape     | meaning                                                         |
/// |-------|-----------|-----------------------------------------------------------------|
/// | `X`   | (N, n, d) | N samples of n ≥ 2 tokens in ℝ^d                                 |
/// | `y`   | (N,)      | real labels (the squared loss ½(f − y)²)                         |
/// | `W`   | (d, d)    | optional frozen key matrix, K_i = X_i W (default: the identity) |
/// | `p0`, `v0` | (d,) | the initial state (read by the init file; allowed here)          |
///
/// `np.savez("mine.npz", X=X, y=y, p0=np.zeros(d), v0=np.ones(d) / np.sqrt(d))`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSamples {
    /// X (N, n, d), row-major as numpy writes it.
    pub x: Array,
    pub y: Vec<f64>,
    /// W row-major, when given.
    pub w: Option<Vec<f64>>,
}

impl PromptSamples {
    pub fn samples(&self) -> usize {
        self.x.shape[0]
    }
    pub fn tokens(&self) -> usize {
        self.x.shape[1]
    }
    pub fn d(&self) -> usize {
        self.x.shape[2]
    }
}

impl InstanceFile for PromptSamples {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("X", "samples, shape (N, n, d), n ≥ 2 tokens"),
        ("y", "real labels, shape (N,)"),
        (
            "W",
            "optional frozen key matrix, shape (d, d): K_i = X_i W (default: the identity)",
        ),
        (
            "p0",
            "the initial p, shape (d,) (read by the init file; allowed here)",
        ),
        (
            "v0",
            "the initial v, shape (d,) (read by the init file; allowed here)",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&["X", "y", "W", "p0", "v0"])?;
        a.check_finite()?;
        let x = a.shaped("X", &[None, None, None])?.clone();
        let (samples, tokens, d) = (x.shape[0], x.shape[1], x.shape[2]);
        if samples == 0 || d == 0 {
            return Err(InstanceError::new(
                "X",
                "need N ≥ 1 samples in d ≥ 1 dimensions",
            ));
        }
        if tokens < 2 {
            // one token gets all the attention: φ is constant and p has no gradient
            return Err(InstanceError::new(
                "X",
                format!("need n ≥ 2 tokens per sample (softmax over one token is constant), got {tokens}"),
            ));
        }
        let y = a.vector("y", Some(samples))?.to_vec();
        let w = match a.get("W") {
            Some(_) => Some(a.shaped("W", &[Some(d), Some(d)])?.data.clone()),
            None => None,
        };
        Ok(PromptSamples { x, y, w })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        a.insert("X", self.x.clone())
            .insert("y", Array::vector(&self.y));
        if let Some(w) = &self.w {
            let d = self.d();
            a.insert("W", Array::matrix(d, d, w.clone()));
        }
        a
    }
}

/// The initial state (p₀, v₀) of the prompt flow (v₀ is the frozen v when only p is trained).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptInit {
    pub p0: Vec<f64>,
    pub v0: Vec<f64>,
}

impl PromptInit {
    /// Refuses an initial state of another dimension than the data's.
    pub fn check_dim(&self, d: usize) -> Result<(), InstanceError> {
        for (name, v) in [("p0", &self.p0), ("v0", &self.v0)] {
            if v.len() != d {
                return Err(InstanceError::new(
                    name,
                    format!("has {} entries; the data's tokens are in ℝ^{d}", v.len()),
                ));
            }
        }
        Ok(())
    }
}

impl InstanceFile for PromptInit {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("p0", "the initial p, shape (d,)"),
        (
            "v0",
            "the initial v, shape (d,); the frozen v when only p is trained",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.check_finite()?;
        let p0 = a.vector("p0", None)?.to_vec();
        let v0 = a.vector("v0", None)?.to_vec();
        if v0.len() != p0.len() {
            return Err(InstanceError::new(
                "v0",
                format!("has {} entries but p0 has {}", v0.len(), p0.len()),
            ));
        }
        Ok(PromptInit { p0, v0 })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        a.insert("p0", Array::vector(&self.p0))
            .insert("v0", Array::vector(&self.v0));
        a
    }
}

//! Seed 001 (softmax attention with separately trained key and query): the data and the
//! initial state of a run.
//!
//! | array | shape | meaning |
//! |---|---|---|
//! | `X` | (n, T, d) | tokens x_{i,t} of n sequences of T ≥ 2 tokens |
//! | `y` | (n,) | labels ±1 |
//! | `u` | (d,) | the fixed value/decoder vector v: token scores γ_{i,t} = y_i vᵀx_{i,t} |
//! | `z` | (n, d) | queries z_i (optional: the first tokens x_{i,1} when absent) |
//! | `K0`, `Q0` | (d, d_e) | initial key and query matrices (full parametrization) |
//! | `xi_k`, `xi_q` | (d,) | initial diagonals ξ_k, ξ_q (diagonal parametrization, β = ξ_k ⊙ ξ_q) |
//! | `W0` | (d, d) | initial combined matrix W = KQᵀ (the W parametrization) |
//!
//! The data must give every sequence a unique optimal token opt_i = argmax_t γ_{i,t} (the
//! paper's Def. 3.1; ties are degenerate). Whether a W (or a diagonal W) separates the optimal
//! tokens — assumption A1 (A1-diag) — depends on the parametrization and is checked where the
//! max-margin programs are solved (the flow family, the scenarios).

use nalgebra::DMatrix;

use super::{Array, Arrays, InstanceError, InstanceFile};
use crate::attention::{Instance, TokenData};

/// Every array name of the family: a data file may hold the initial state too (a run's
/// `instance.npz` holds both), so each reader accepts all of them and refuses any other.
pub const NAMES: &[&str] = &["X", "y", "u", "z", "K0", "Q0", "xi_k", "xi_q", "W0"];

/// Relative tie tolerance of the optimal tokens (as [`crate::attention::FixedDecoder`] uses).
const TIE_TOL: f64 = 1e-12;

/// Tokens, labels, decoder and queries, with the optimal tokens they imply.
#[derive(Debug, Clone)]
pub struct KqData {
    pub instance: Instance,
}

impl KqData {
    /// The data of an instance (the optimal tokens are recomputed from its decoder when read).
    pub fn new(instance: Instance) -> Self {
        KqData { instance }
    }
    pub fn d(&self) -> usize {
        self.instance.data.d
    }
}

impl InstanceFile for KqData {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("X", "tokens, (n, T, d), T ≥ 2"),
        ("y", "labels ±1, (n,)"),
        (
            "u",
            "decoder (value vector) v, (d,); every sequence needs a unique optimal token",
        ),
        ("z", "queries, (n, d); optional (default: the first tokens)"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(NAMES)?;
        a.check_finite()?;
        let (data, u) = super::read_tokens(a)?;
        let opt = optimal_tokens(&data, &u)?;
        Ok(KqData {
            instance: Instance {
                data,
                decoder: u,
                opt,
            },
        })
    }

    fn to_arrays(&self) -> Arrays {
        let data = &self.instance.data;
        let mut a = Arrays::new();
        a.insert("X", Array::new(&[data.n, data.t, data.d], data.x.clone()))
            .insert("y", Array::vector(&data.y))
            .insert("u", Array::vector(&self.instance.decoder))
            .insert("z", Array::matrix(data.n, data.d, data.queries.clone()));
        a
    }
}

/// opt_i = argmax_t γ_{i,t}; a tie is refused under the decoder's name (the decoder decides
/// which token is optimal), the message naming the sequence and its scores.
fn optimal_tokens(data: &TokenData, u: &[f64]) -> Result<Vec<usize>, InstanceError> {
    data.optimal_tokens(u, TIE_TOL).map_err(|e| {
        InstanceError::new(
            "u",
            format!("{e}: Def. 3.1 needs one token per sequence scoring strictly highest"),
        )
    })
}

/// The initial state, in one of the three parametrizations.
#[derive(Debug, Clone, PartialEq)]
pub enum KqInit {
    /// K(0), Q(0) ∈ ℝ^{d×d_e}.
    Full { k: DMatrix<f64>, q: DMatrix<f64> },
    /// ξ_k(0), ξ_q(0) ∈ ℝ^d (K = [Diag ξ_k, 0], Q = [Diag ξ_q, 0]).
    Diagonal { xi_k: Vec<f64>, xi_q: Vec<f64> },
    /// W(0) ∈ ℝ^{d×d}.
    Combined { w: DMatrix<f64> },
}

impl KqInit {
    /// The parametrization's name in `[params.model]` (`full`, `diagonal`, `w`).
    pub fn parametrization(&self) -> &'static str {
        match self {
            KqInit::Full { .. } => "full",
            KqInit::Diagonal { .. } => "diagonal",
            KqInit::Combined { .. } => "w",
        }
    }

    /// The token dimension d the state is for.
    pub fn d(&self) -> usize {
        match self {
            KqInit::Full { k, .. } => k.nrows(),
            KqInit::Diagonal { xi_k, .. } => xi_k.len(),
            KqInit::Combined { w } => w.nrows(),
        }
    }

    /// The name of the array whose first axis is d (for a dimension mismatch with the data).
    pub fn first_array(&self) -> &'static str {
        match self {
            KqInit::Full { .. } => "K0",
            KqInit::Diagonal { .. } => "xi_k",
            KqInit::Combined { .. } => "W0",
        }
    }
}

impl InstanceFile for KqInit {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "K0",
            "initial key matrix, (d, d_e) — full parametrization, with Q0",
        ),
        ("Q0", "initial query matrix, (d, d_e)"),
        (
            "xi_k",
            "initial key diagonal, (d,) — diagonal parametrization, with xi_q",
        ),
        ("xi_q", "initial query diagonal, (d,)"),
        (
            "W0",
            "initial combined matrix W = KQᵀ, (d, d) — the W parametrization",
        ),
    ];

    /// Exactly one of the three states (K0 and Q0, xi_k and xi_q, or W0) must be present.
    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(NAMES)?;
        a.check_finite()?;
        let present: Vec<&str> = ["K0", "Q0", "xi_k", "xi_q", "W0"]
            .into_iter()
            .filter(|n| a.get(n).is_some())
            .collect();
        let init = match present.as_slice() {
            ["K0", "Q0"] => {
                let k = a.shaped("K0", &[None, None])?;
                let q = a.shaped("Q0", &[Some(k.shape[0]), Some(k.shape[1])])?;
                if k.shape[0] == 0 || k.shape[1] == 0 {
                    return Err(InstanceError::new(
                        "K0",
                        "needs d ≥ 1 rows and d_e ≥ 1 columns",
                    ));
                }
                let m = |x: &Array| DMatrix::from_row_slice(x.shape[0], x.shape[1], &x.data);
                KqInit::Full { k: m(k), q: m(q) }
            }
            ["xi_k", "xi_q"] => {
                let xi_k = a.vector("xi_k", None)?.to_vec();
                let xi_q = a.vector("xi_q", Some(xi_k.len()))?.to_vec();
                KqInit::Diagonal { xi_k, xi_q }
            }
            ["W0"] => {
                let w = a.shaped("W0", &[None, None])?;
                if w.shape[0] != w.shape[1] {
                    return Err(InstanceError::new(
                        "W0",
                        format!("must be square (d, d), got {:?}", w.shape),
                    ));
                }
                KqInit::Combined {
                    w: DMatrix::from_row_slice(w.shape[0], w.shape[1], &w.data),
                }
            }
            _ => {
                return Err(InstanceError::new(
                    "(initial state)",
                    format!(
                        "expected exactly one of K0 + Q0 (full), xi_k + xi_q (diagonal) or W0 (w); \
                         the file holds {}",
                        if present.is_empty() {
                            "none of them".to_string()
                        } else {
                            present.join(", ")
                        }
                    ),
                ))
            }
        };
        Ok(init)
    }

    fn to_arrays(&self) -> Arrays {
        let m = |x: &DMatrix<f64>| Array::from_column_major(x.nrows(), x.ncols(), x.as_slice());
        let mut a = Arrays::new();
        match self {
            KqInit::Full { k, q } => a.insert("K0", m(k)).insert("Q0", m(q)),
            KqInit::Diagonal { xi_k, xi_q } => a
                .insert("xi_k", Array::vector(xi_k))
                .insert("xi_q", Array::vector(xi_q)),
            KqInit::Combined { w } => a.insert("W0", m(w)),
        };
        a
    }
}

/// Several diagonal initial states, one per row (`xi_k`, `xi_q` of shape (runs, d)): the runs
/// of `diag-l1-vs-l2`, each a KQ flow from (ξ_k(0), ξ_q(0)). A single state may be given as two
/// vectors of shape (d,).
#[derive(Debug, Clone, PartialEq)]
pub struct DiagonalInits {
    pub xi_k: Vec<Vec<f64>>,
    pub xi_q: Vec<Vec<f64>>,
}

impl InstanceFile for DiagonalInits {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("xi_k", "initial key diagonals, (runs, d) or (d,)"),
        ("xi_q", "initial query diagonals, same shape as xi_k"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(NAMES)?;
        a.check_finite()?;
        let k = a.require("xi_k")?;
        let rows = |x: &Array| -> Vec<Vec<f64>> {
            let d = *x.shape.last().unwrap_or(&0);
            x.data.chunks(d.max(1)).map(<[f64]>::to_vec).collect()
        };
        let k_rows = match k.shape.len() {
            1 | 2 if k.data.is_empty() => {
                return Err(InstanceError::new("xi_k", "holds no initial state"))
            }
            1 | 2 => rows(k),
            _ => {
                return Err(InstanceError::new(
                    "xi_k",
                    format!("expected shape (runs, d) or (d,), got {:?}", k.shape),
                ))
            }
        };
        let expected: Vec<Option<usize>> = k.shape.iter().map(|&n| Some(n)).collect();
        let q = a.shaped("xi_q", &expected)?;
        Ok(DiagonalInits {
            xi_k: k_rows,
            xi_q: rows(q),
        })
    }

    fn to_arrays(&self) -> Arrays {
        let runs = self.xi_k.len();
        let d = self.xi_k.first().map_or(0, Vec::len);
        let mut a = Arrays::new();
        a.insert("xi_k", Array::matrix(runs, d, self.xi_k.concat()))
            .insert("xi_q", Array::matrix(runs, d, self.xi_q.concat()));
        a
    }
}

/// Several full initial states, one per run (`K0`, `Q0` of shape (runs, d, d_e)): the seeds of
/// `full-nuclear-vs-frobenius` and `aligned-random-init`. A single state may be given as two
/// (d, d_e) matrices.
#[derive(Debug, Clone, PartialEq)]
pub struct FullInits {
    pub k: Vec<DMatrix<f64>>,
    pub q: Vec<DMatrix<f64>>,
}

impl FullInits {
    pub fn d(&self) -> usize {
        self.k[0].nrows()
    }
    pub fn de(&self) -> usize {
        self.k[0].ncols()
    }
}

impl InstanceFile for FullInits {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("K0", "initial key matrices, (runs, d, d_e) or (d, d_e)"),
        ("Q0", "initial query matrices, same shape as K0"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(NAMES)?;
        a.check_finite()?;
        let k = a.require("K0")?;
        let (runs, d, de) = match k.shape.as_slice() {
            &[d, de] => (1, d, de),
            &[runs, d, de] => (runs, d, de),
            _ => {
                return Err(InstanceError::new(
                    "K0",
                    format!(
                        "expected shape (runs, d, d_e) or (d, d_e), got {:?}",
                        k.shape
                    ),
                ))
            }
        };
        if runs == 0 || d == 0 || de == 0 {
            return Err(InstanceError::new(
                "K0",
                format!(
                    "needs at least one (d ≥ 1) × (d_e ≥ 1) matrix, got shape {:?}",
                    k.shape
                ),
            ));
        }
        let expected: Vec<Option<usize>> = k.shape.iter().map(|&n| Some(n)).collect();
        let q = a.shaped("Q0", &expected)?;
        let split = |x: &Array| -> Vec<DMatrix<f64>> {
            x.data
                .chunks(d * de)
                .map(|m| DMatrix::from_row_slice(d, de, m))
                .collect()
        };
        Ok(FullInits {
            k: split(k),
            q: split(q),
        })
    }

    fn to_arrays(&self) -> Arrays {
        let (runs, d, de) = (self.k.len(), self.d(), self.de());
        let stack = |ms: &[DMatrix<f64>]| {
            let data = ms
                .iter()
                .flat_map(|m| Array::from_column_major(d, de, m.as_slice()).data)
                .collect();
            Array::new(&[runs, d, de], data)
        };
        let mut a = Arrays::new();
        a.insert("K0", stack(&self.k)).insert("Q0", stack(&self.q));
        a
    }
}

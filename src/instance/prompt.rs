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
//! The simplex scenarios (`thm2-linearization`, `eq16-simplex-map`) read (z*, H) as the (C-quad)
//! loss ½(z − z*)ᵀH(z − z*) + c𝟙ᵀz and their starts from [`SimplexInit`] (`zeta_dir`, `w0`).

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
    open_simplex_row(z, name, |i| format!("{name}[{i}]"))?;
    Ok(z)
}

/// Every entry of `z` > 0 (`entry(i)` names entry i) and the sum 1 (`key` names the vector).
fn open_simplex_row(
    z: &[f64],
    key: &str,
    entry: impl Fn(usize) -> String,
) -> Result<(), InstanceError> {
    if let Some(i) = z.iter().position(|&x| x <= 0.0) {
        return Err(InstanceError::new(
            entry(i),
            format!(
                "entries must be > 0 (an interior point of the simplex), got {}",
                z[i]
            ),
        ));
    }
    let sum: f64 = z.iter().sum();
    if (sum - 1.0).abs() > SIMPLEX_SUM_TOL {
        return Err(InstanceError::new(
            key,
            format!("entries must sum to 1 (within {SIMPLEX_SUM_TOL:e}), got {sum}"),
        ));
    }
    Ok(())
}

/// A symmetric positive definite n × n matrix (symmetric to 1e−12 relative to its largest entry;
/// positive definite by a Cholesky factorization).
fn spd_matrix(a: &Arrays, name: &str, n: usize) -> Result<DMatrix<f64>, InstanceError> {
    let arr = a.shaped(name, &[Some(n), Some(n)])?;
    spd_rows(&arr.data, n, name, |i, j| format!("{name}[{i}, {j}]"))
}

/// [`spd_matrix`] of the row-major n × n `data`, named `key` (`entry(i, j)` names an entry).
fn spd_rows(
    data: &[f64],
    n: usize,
    key: &str,
    entry: impl Fn(usize, usize) -> String,
) -> Result<DMatrix<f64>, InstanceError> {
    let m = DMatrix::from_row_slice(n, n, data);
    let scale = m.amax();
    for i in 0..n {
        for j in 0..i {
            if (m[(i, j)] - m[(j, i)]).abs() > 1e-12 * scale {
                return Err(InstanceError::new(
                    entry(i, j),
                    format!(
                        "must be symmetric: {} ≠ {} = {}",
                        m[(i, j)],
                        entry(j, i),
                        m[(j, i)]
                    ),
                ));
            }
        }
    }
    if m.clone().cholesky().is_none() {
        return Err(InstanceError::new(
            key,
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
        a.deny_unknown(&SIMPLEX_NAMES)?;
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

/// Every array name of [`ConditionInstances`].
const CONDITION_NAMES: [&str; 8] = [
    "z_star",
    "H",
    "sweep_z",
    "sweep_H",
    "sweep_sizes",
    "curve_g",
    "curve_H_gauss",
    "curve_H_tail",
];

/// Everything `thm2-condition-bound` uses, each part optional (the run draws what is missing):
///
/// | array           | shape           | meaning                                                    |
/// |-----------------|-----------------|------------------------------------------------------------|
/// | `z_star`, `H`   | (n,), (n, n)    | the given point, as [`StationaryPoint`]                     |
/// | `sweep_z`       | (Σn,) or (m, n) | the sweep's m points z*, concatenated (each interior, n ≥ 2) |
/// | `sweep_H`       | (Σn²,) or (m, n, n) | their SPD Hessians, each n × n row-major, concatenated  |
/// | `sweep_sizes`   | (m,)            | each point's n (with a flat `sweep_z`)                      |
/// | `curve_g`       | (draws, n)      | the Gaussian-logit curves' draws g (z = φ(s·g) per scale s) |
/// | `curve_H_gauss` | (n, n)          | the SPD H of the Gaussian-logit curves (n of `curve_g`)     |
/// | `curve_H_tail`  | (n_t, n_t)      | the SPD H of the dominant-token curve (its n_t tokens)      |
///
/// ```python
/// zs = [rng.dirichlet(np.ones(n)) for n in (3, 5)]; Hs = [np.diag(np.arange(1.0, n + 1)) for n in (3, 5)]
/// np.savez("sweep.npz", sweep_z=np.concatenate(zs), sweep_H=np.concatenate([h.ravel() for h in Hs]),
///          sweep_sizes=[3, 5])
/// ```
/// `sweep_z` and `sweep_H` come together, and so do the three curve arrays.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionInstances {
    pub point: Option<StationaryPoint>,
    pub sweep: Option<Vec<StationaryPoint>>,
    pub curves: Option<ConditionCurves>,
}

/// The random numbers of `thm2-condition-bound`'s curves.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionCurves {
    /// One draw g per row.
    pub g: Vec<Vec<f64>>,
    pub h_gauss: DMatrix<f64>,
    pub h_tail: DMatrix<f64>,
}

/// Whether any of `names` is in the file; then all must be.
fn all_or_none(a: &Arrays, names: &[&str]) -> Result<bool, InstanceError> {
    let given: Vec<&&str> = names.iter().filter(|n| a.get(n).is_some()).collect();
    match (given.len(), names.iter().find(|n| a.get(n).is_none())) {
        (0, _) => Ok(false),
        (_, None) => Ok(true),
        (_, Some(missing)) => Err(InstanceError::new(
            *missing,
            format!("missing: {} come together", names.join(", ")),
        )),
    }
}

impl ConditionInstances {
    fn sweep_from(a: &Arrays) -> Result<Vec<StationaryPoint>, InstanceError> {
        let rows = ragged_rows_sized(a, "sweep_z", "sweep_sizes")?;
        // (Σn²,) concatenated, or (m, n, n) for one n: the same numbers row-major
        let h = &a.require("sweep_H")?.data;
        let want: usize = rows.iter().map(|(_, z)| z.len() * z.len()).sum();
        if h.len() != want {
            return Err(InstanceError::new(
                "sweep_H",
                format!("holds {} entries, but the sizes need Σn² = {want}", h.len()),
            ));
        }
        let mut at = 0;
        let mut points = Vec::with_capacity(rows.len());
        for (k, (start, z)) in rows.into_iter().enumerate() {
            open_simplex_row(z, &format!("sweep_z[{start}..]"), |j| {
                format!("sweep_z[{}]", start + j)
            })?;
            let n = z.len();
            let block = &h[at..at + n * n];
            let h = spd_rows(block, n, &format!("sweep_H (point {k})"), |i, j| {
                format!("sweep_H[{}] (point {k}, entry [{i}, {j}])", at + i * n + j)
            })?;
            at += n * n;
            points.push(StationaryPoint {
                z_star: z.to_vec(),
                h,
            });
        }
        Ok(points)
    }

    fn curves_from(a: &Arrays) -> Result<ConditionCurves, InstanceError> {
        let g = a.shaped("curve_g", &[None, None])?;
        let (draws, n) = (g.shape[0], g.shape[1]);
        if draws == 0 || n < 3 {
            return Err(InstanceError::new(
                "curve_g",
                format!("needs ≥ 1 draw of n ≥ 3 logits, got {:?}", g.shape),
            ));
        }
        let rows = g.data.chunks(n).map(<[f64]>::to_vec).collect();
        let h_gauss = spd_matrix(a, "curve_H_gauss", n)?;
        let tail = a
            .require("curve_H_tail")?
            .shape
            .first()
            .copied()
            .unwrap_or(0);
        if tail < 3 {
            return Err(InstanceError::new(
                "curve_H_tail",
                "needs n_t ≥ 3 tokens (an n_t × n_t matrix)",
            ));
        }
        let h_tail = spd_matrix(a, "curve_H_tail", tail)?;
        Ok(ConditionCurves {
            g: rows,
            h_gauss,
            h_tail,
        })
    }
}

impl InstanceFile for ConditionInstances {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("z_star", "(n,): the given point (with H)"),
        ("H", "(n, n): its SPD Hessian"),
        ("sweep_z", "(Σn,): the sweep's points, concatenated"),
        (
            "sweep_H",
            "(Σn²,): their SPD Hessians, row-major, concatenated",
        ),
        ("sweep_sizes", "(m,): each point's n ≥ 2"),
        ("curve_g", "(draws, n): the Gaussian-logit curves' draws g"),
        (
            "curve_H_gauss",
            "(n, n): SPD H of the Gaussian-logit curves",
        ),
        (
            "curve_H_tail",
            "(n_t, n_t): SPD H of the dominant-token curve",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&CONDITION_NAMES)?;
        let point = match all_or_none(a, &["z_star", "H"])? {
            true => {
                let z_star = open_simplex_point(a, "z_star")?.to_vec();
                let h = spd_matrix(a, "H", z_star.len())?;
                Some(StationaryPoint { z_star, h })
            }
            false => None,
        };
        let sweep = match all_or_none(a, &["sweep_z", "sweep_H"])? {
            true => Some(Self::sweep_from(a)?),
            false => None,
        };
        let curves = match all_or_none(a, &["curve_g", "curve_H_gauss", "curve_H_tail"])? {
            true => Some(Self::curves_from(a)?),
            false => None,
        };
        if point.is_none() && sweep.is_none() && curves.is_none() {
            return Err(InstanceError::new(
                "z_star",
                "missing (the file holds none of z_star/H, sweep_*, curve_*)",
            ));
        }
        Ok(ConditionInstances {
            point,
            sweep,
            curves,
        })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        if let Some(pt) = &self.point {
            a.merge_prefixed("", pt.to_arrays());
        }
        if let Some(sweep) = &self.sweep {
            let z: Vec<f64> = sweep.iter().flat_map(|p| p.z_star.clone()).collect();
            // row-major blocks (H is symmetric, but the file holds what was used, entry for entry)
            let h: Vec<f64> = sweep
                .iter()
                .flat_map(|p| p.h.transpose().as_slice().to_vec())
                .collect();
            let sizes: Vec<f64> = sweep.iter().map(|p| p.z_star.len() as f64).collect();
            a.insert("sweep_z", Array::vector(&z))
                .insert("sweep_H", Array::vector(&h))
                .insert("sweep_sizes", Array::vector(&sizes));
        }
        if let Some(c) = &self.curves {
            let n = c.g[0].len();
            let square =
                |m: &DMatrix<f64>| Array::from_column_major(m.nrows(), m.ncols(), m.as_slice());
            a.insert("curve_g", Array::matrix(c.g.len(), n, c.g.concat()))
                .insert("curve_H_gauss", square(&c.h_gauss))
                .insert("curve_H_tail", square(&c.h_tail));
        }
        a
    }
}

/// Samples of the two-token model (C-2tok) of spec 002 §1.5 (`two-token-closed-form`): per
/// sample the equilibrium attention s*, the speed c = 2δ²/N and the start s₀ of the flow
/// ṡ = −c s²(1 − s)²(s − s*).
///
/// | array    | shape | meaning                                         |
/// |----------|-------|-------------------------------------------------|
/// | `s_star` | (k,)  | equilibrium attention s* ∈ (0, 1)               |
/// | `c`      | (k,)  | c = 2δ²/N > 0 (δ = a₁ − a₂ the value gap)        |
/// | `s0`     | (k,)  | initial attention s₀ ∈ (0, 1)                    |
///
/// `np.savez("cases.npz", s_star=[0.9, 0.2], c=[1.0, 0.5], s0=[0.5, 0.7])`.
#[derive(Debug, Clone, PartialEq)]
pub struct TwoTokenCases {
    /// (s*, s₀, c) per sample.
    pub cases: Vec<[f64; 3]>,
}

impl InstanceFile for TwoTokenCases {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        ("s_star", "(k,): equilibrium attention s* ∈ (0, 1)"),
        ("c", "(k,): c = 2δ²/N > 0"),
        ("s0", "(k,): initial attention s₀ ∈ (0, 1)"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&["s_star", "c", "s0"])?;
        let s_star = a.vector("s_star", None)?;
        if s_star.is_empty() {
            return Err(InstanceError::new("s_star", "needs k ≥ 1 samples"));
        }
        let k = Some(s_star.len());
        let (c, s0) = (a.vector("c", k)?, a.vector("s0", k)?);
        let open = |name: &str, v: &[f64]| match v.iter().position(|&x| !(x > 0.0 && x < 1.0)) {
            Some(i) => Err(InstanceError::new(
                format!("{name}[{i}]"),
                format!("must lie in (0, 1) (an attention weight), got {}", v[i]),
            )),
            None => Ok(()),
        };
        open("s_star", s_star)?;
        open("s0", s0)?;
        if let Some(i) = c.iter().position(|&x| x <= 0.0) {
            return Err(InstanceError::new(
                format!("c[{i}]"),
                format!("must be > 0 (c = 2δ²/N), got {}", c[i]),
            ));
        }
        let cases = (0..s_star.len())
            .map(|i| [s_star[i], s0[i], c[i]])
            .collect();
        Ok(TwoTokenCases { cases })
    }

    fn to_arrays(&self) -> Arrays {
        let col = |j: usize| -> Vec<f64> { self.cases.iter().map(|r| r[j]).collect() };
        let mut a = Arrays::new();
        a.insert("s_star", Array::vector(&col(0)))
            .insert("s0", Array::vector(&col(1)))
            .insert("c", Array::vector(&col(2)));
        a
    }
}

/// Every array name of the simplex layouts ([`StationaryPoint`], [`SimplexInit`]): the point and
/// the starts may share one file (a run's `instance.npz` does).
const SIMPLEX_NAMES: [&str; 4] = ["z_star", "H", "zeta_dir", "w0"];

/// How far Σζ may be from 0, relative to Σ|ζ| (a float64 tangent vector is within ~nε).
const TANGENT_TOL: f64 = 1e-12;

/// Starting points of the simplex scenarios, beside a [`StationaryPoint`]:
///
/// | array      | shape  | meaning                                                          |
/// |------------|--------|------------------------------------------------------------------|
/// | `zeta_dir` | (n,)   | direction of the perturbation ζ₀ of z* in T = 𝟙^⊥ (entries sum to 0 within 1e−12·Σ\|ζ\|); the run rescales it to ‖ζ₀‖ = `params.zeta0` (`thm2-linearization`) |
/// | `w0`       | (m, n) | logits of m starting points z₀ = φ(w₀) (any reals; from z use `np.log(z)`; `eq16-simplex-map`) |
///
/// `np.savez("starts.npz", w0=np.log(rng.dirichlet(np.ones(6), size=10)))`. Each scenario reads
/// the array it names and refuses a file missing it; the lengths are checked against z*.
#[derive(Debug, Clone, PartialEq)]
pub struct SimplexInit {
    pub zeta_dir: Option<Vec<f64>>,
    pub w0: Option<Vec<Vec<f64>>>,
}

impl SimplexInit {
    /// Checks the lengths against z* of n entries.
    pub fn require_fits(&self, n: usize) -> Result<(), InstanceError> {
        let dir = self.zeta_dir.iter().map(|z| ("zeta_dir", z.len()));
        let w0 = self.w0.iter().map(|w| ("w0", w[0].len()));
        match dir.chain(w0).find(|&(_, len)| len != n) {
            Some((name, len)) => Err(InstanceError::new(
                name,
                format!("has {len} entries per point, but z* has n = {n}"),
            )),
            None => Ok(()),
        }
    }

    /// `zeta_dir`, or an error saying this scenario needs it.
    pub fn require_zeta_dir(&self) -> Result<&[f64], InstanceError> {
        self.zeta_dir.as_deref().ok_or_else(|| {
            InstanceError::new(
                "zeta_dir",
                "missing: this scenario perturbs z* along zeta_dir (n,)",
            )
        })
    }

    /// `w0`, or an error saying this scenario needs it.
    pub fn require_w0(&self) -> Result<&[Vec<f64>], InstanceError> {
        self.w0.as_deref().ok_or_else(|| {
            InstanceError::new(
                "w0",
                "missing: this scenario starts at z₀ = φ(w₀), w0 (m, n)",
            )
        })
    }
}

impl InstanceFile for SimplexInit {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "zeta_dir",
            "(n,): direction of ζ₀ in T (sum 0), rescaled to ‖ζ₀‖ = params.zeta0",
        ),
        ("w0", "(m, n): logits of the starting points z₀ = φ(w₀)"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&SIMPLEX_NAMES)?;
        let zeta_dir = match a.get("zeta_dir") {
            None => None,
            Some(_) => {
                let z = a.vector("zeta_dir", None)?;
                let l1: f64 = z.iter().map(|x| x.abs()).sum();
                let sum: f64 = z.iter().sum();
                if z.len() < 2 || l1 == 0.0 {
                    return Err(InstanceError::new(
                        "zeta_dir",
                        "needs n ≥ 2 entries, not all zero (a direction)",
                    ));
                }
                if sum.abs() > TANGENT_TOL * l1 {
                    return Err(InstanceError::new(
                        "zeta_dir",
                        format!(
                            "must lie in T = 𝟙^⊥ (the simplex's tangent space): entries sum to \
                             {sum:e}, more than {TANGENT_TOL:e}·Σ|ζ|"
                        ),
                    ));
                }
                Some(z.to_vec())
            }
        };
        let w0 = match a.get("w0") {
            None => None,
            Some(_) => {
                let m = a.shaped("w0", &[None, None])?;
                if m.shape[0] == 0 || m.shape[1] < 2 {
                    return Err(InstanceError::new(
                        "w0",
                        format!("needs m ≥ 1 points of n ≥ 2 logits, got {:?}", m.shape),
                    ));
                }
                Some(m.data.chunks(m.shape[1]).map(<[f64]>::to_vec).collect())
            }
        };
        if zeta_dir.is_none() && w0.is_none() {
            return Err(InstanceError::new(
                "zeta_dir",
                "missing (the file holds neither zeta_dir nor w0)",
            ));
        }
        Ok(SimplexInit { zeta_dir, w0 })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        if let Some(z) = &self.zeta_dir {
            a.insert("zeta_dir", Array::vector(z));
        }
        if let Some(w) = &self.w0 {
            a.insert("w0", Array::matrix(w.len(), w[0].len(), w.concat()));
        }
        a
    }
}

/// Every array name of the synthetic-teacher layouts ([`TeacherData`], [`StudentInit`]): data and
/// initial state may share one file (a run's `instance.npz` does).
const TEACHER_NAMES: [&str; 5] = ["X", "xi_p", "xi_v", "p0", "v0"];

/// The synthetic teacher data of spec 002 §1.2 (`hessian-conditioning-vs-r`,
/// `local-rate-vs-hessian`, `spurious-sparse-minimum`, the `fig1-*` runs of `training-run`): the
/// tokens of one or more trials and the teacher's directions. A run at teacher scale σ_p labels
/// the samples with the softmax teacher p_T = σ_p ξ_p, v_T = ξ_v: y_i = φ(X_i p_T)ᵀX_i v_T, so one
/// file serves every σ_p (common random numbers, spec §1.2 step 3).
///
/// | array  | shape                        | meaning                                          |
/// |--------|------------------------------|--------------------------------------------------|
/// | `X`    | (N, n, d) or (k, N, n, d)    | N samples of n ≥ 2 tokens in ℝ^d; k trials       |
/// | `xi_p` | (d,) or (k, d)               | teacher direction of p (p_T = σ_p ξ_p)           |
/// | `xi_v` | (d,) or (k, d)               | teacher value vector v_T = ξ_v                   |
///
/// `np.savez("teacher.npz", X=rng.standard_normal((100, 8, 20)), xi_p=rng.standard_normal(20),
/// xi_v=rng.standard_normal(20))`. With k stacked trials `xi_p` and `xi_v` are stacked too.
#[derive(Debug, Clone, PartialEq)]
pub struct TeacherData {
    /// Samples N, tokens per sample n, token dimension d.
    pub samples: usize,
    pub n_tokens: usize,
    pub d: usize,
    /// Per trial: X row-major (N·n·d), ξ_p, ξ_v.
    pub trials: Vec<TeacherTrial>,
}

/// One trial of [`TeacherData`].
#[derive(Debug, Clone, PartialEq)]
pub struct TeacherTrial {
    pub x: Vec<f64>,
    pub xi_p: Vec<f64>,
    pub xi_v: Vec<f64>,
}

/// The student's initial state of the synthetic-teacher scenarios: `p0` (d,) or (k, d), and `v0`
/// of the same shape (needed only where v is trained; with v frozen at v_T it is not read).
#[derive(Debug, Clone, PartialEq)]
pub struct StudentInit {
    /// One p₀ per trial.
    pub p0: Vec<Vec<f64>>,
    /// One v₀ per trial, if the file has `v0`.
    pub v0: Option<Vec<Vec<f64>>>,
}

/// `name` as one vector of length `d` per trial: shape (d,) (one trial) or (k, d) (k trials);
/// `stacked` says which shape is required (`None`: either). `d = None` accepts any length.
fn per_trial_vectors(
    a: &Arrays,
    name: &str,
    stacked: Option<bool>,
    d: Option<usize>,
) -> Result<Vec<Vec<f64>>, InstanceError> {
    let arr = a.require(name)?;
    let rows: Vec<Vec<f64>> = if stacked.unwrap_or(arr.shape.len() == 2) {
        let m = a.shaped(name, &[None, d])?;
        let len = m.shape[1].max(1);
        m.data.chunks(len).map(<[f64]>::to_vec).collect()
    } else {
        vec![a.vector(name, d)?.to_vec()]
    };
    if rows.is_empty() || rows[0].is_empty() {
        return Err(InstanceError::new(
            name,
            format!(
                "needs at least one trial and d ≥ 1, got shape {:?}",
                arr.shape
            ),
        ));
    }
    Ok(rows)
}

/// Vectors of one per trial as an array: (d,) for one trial, (k, d) for k.
fn stack_vectors(rows: &[Vec<f64>]) -> Array {
    match rows {
        [one] => Array::vector(one),
        _ => Array::matrix(rows.len(), rows[0].len(), rows.concat()),
    }
}

impl TeacherData {
    /// Exactly one trial (for scenarios that run one): refuses k > 1 stacked trials.
    pub fn single_trial(&self) -> Result<&TeacherTrial, InstanceError> {
        match self.trials.as_slice() {
            [one] => Ok(one),
            many => Err(InstanceError::new(
                "X",
                format!(
                    "{} stacked trials: this scenario runs one, of shape (N, n, d)",
                    many.len()
                ),
            )),
        }
    }
}

impl InstanceFile for TeacherData {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "X",
            "(N, n, d) or (k, N, n, d): N samples of n ≥ 2 tokens in ℝ^d, k trials",
        ),
        ("xi_p", "(d,) or (k, d): teacher direction, p_T = σ_p ξ_p"),
        ("xi_v", "(d,) or (k, d): teacher value vector v_T = ξ_v"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&TEACHER_NAMES)?;
        let x = a.require("X")?;
        let (k, dims) = match x.shape.as_slice() {
            [n_s, n_t, d] => (None, [*n_s, *n_t, *d]),
            [k, n_s, n_t, d] => (Some(*k), [*n_s, *n_t, *d]),
            _ => {
                return Err(InstanceError::new(
                    "X",
                    format!(
                        "expected shape (N, n, d) or (k, N, n, d), got {:?}",
                        x.shape
                    ),
                ))
            }
        };
        let [samples, n_tokens, d] = dims;
        if samples == 0 || n_tokens < 2 || d == 0 || k == Some(0) {
            return Err(InstanceError::new(
                "X",
                format!(
                    "needs k ≥ 1 trials of N ≥ 1 samples of n ≥ 2 tokens (softmax over one \
                     token is constant) in d ≥ 1 dimensions, got shape {:?}",
                    x.shape
                ),
            ));
        }
        let stacked = Some(k.is_some());
        let xi_p = per_trial_vectors(a, "xi_p", stacked, Some(d))?;
        let xi_v = per_trial_vectors(a, "xi_v", stacked, Some(d))?;
        let trials = k.unwrap_or(1);
        for (name, rows) in [("xi_p", &xi_p), ("xi_v", &xi_v)] {
            if rows.len() != trials {
                return Err(InstanceError::new(
                    name,
                    format!("{} rows, but X holds {trials} trial(s)", rows.len()),
                ));
            }
        }
        let len = samples * n_tokens * d;
        let trials = x
            .data
            .chunks(len)
            .zip(xi_p)
            .zip(xi_v)
            .map(|((x, xi_p), xi_v)| TeacherTrial {
                x: x.to_vec(),
                xi_p,
                xi_v,
            })
            .collect();
        Ok(TeacherData {
            samples,
            n_tokens,
            d,
            trials,
        })
    }

    fn to_arrays(&self) -> Arrays {
        let k = self.trials.len();
        let dims = [self.samples, self.n_tokens, self.d];
        let shape = match k {
            1 => dims.to_vec(),
            _ => [&[k][..], &dims].concat(),
        };
        let x: Vec<f64> = self.trials.iter().flat_map(|t| t.x.clone()).collect();
        let xi_p: Vec<Vec<f64>> = self.trials.iter().map(|t| t.xi_p.clone()).collect();
        let xi_v: Vec<Vec<f64>> = self.trials.iter().map(|t| t.xi_v.clone()).collect();
        let mut a = Arrays::new();
        a.insert("X", Array::new(&shape, x))
            .insert("xi_p", stack_vectors(&xi_p))
            .insert("xi_v", stack_vectors(&xi_v));
        a
    }
}

impl StudentInit {
    /// Requires `v0` (for runs that train v), naming what is missing.
    pub fn require_v0(&self) -> Result<&[Vec<f64>], InstanceError> {
        self.v0.as_deref().ok_or_else(|| {
            InstanceError::new(
                "v0",
                "missing: this run trains v and starts it at v0 (shape like p0)",
            )
        })
    }

    /// Checks the state against the data: dimension d and k trials.
    pub fn require_fits(&self, d: usize, trials: usize) -> Result<(), InstanceError> {
        let v0 = self.v0.iter().map(|v| ("v0", v));
        for (name, rows) in std::iter::once(("p0", &self.p0)).chain(v0) {
            if rows[0].len() != d {
                return Err(InstanceError::new(
                    name,
                    format!(
                        "vectors of length {}, but the data has d = {d}",
                        rows[0].len()
                    ),
                ));
            }
            if rows.len() != trials {
                return Err(InstanceError::new(
                    name,
                    format!(
                        "{} initial state(s), but the data holds {trials} trial(s): one per trial",
                        rows.len()
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl InstanceFile for StudentInit {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "p0",
            "(d,) or (k, d): the student's initial p, one per trial",
        ),
        (
            "v0",
            "optional, shaped like p0: the initial v (read where v is trained)",
        ),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&TEACHER_NAMES)?;
        let p0 = per_trial_vectors(a, "p0", None, None)?;
        let stacked = Some(a.require("p0")?.shape.len() == 2);
        let v0 = match a.get("v0") {
            None => None,
            Some(_) => {
                let v0 = per_trial_vectors(a, "v0", stacked, Some(p0[0].len()))?;
                if v0.len() != p0.len() {
                    return Err(InstanceError::new(
                        "v0",
                        format!("{} rows, but p0 has {}", v0.len(), p0.len()),
                    ));
                }
                Some(v0)
            }
        };
        Ok(StudentInit { p0, v0 })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        a.insert("p0", stack_vectors(&self.p0));
        if let Some(v0) = &self.v0 {
            a.insert("v0", stack_vectors(v0));
        }
        a
    }
}

/// Attention vectors for Lemma 1 (`lemma1-softmax-jacobian`): m instances, each given by its
/// logits w (z = φ(w)) or directly by z on the open simplex (then w = ln z).
///
/// | array    | shape               | meaning                                                   |
/// |----------|---------------------|-----------------------------------------------------------|
/// | `logits` | (m, n) or (Σn,)     | logits of m instances of n ≥ 2 tokens (any reals)          |
/// | `z`      | (m, n) or (Σn,)     | instead of `logits`: rows > 0 summing to 1 (within 1e−12)  |
/// | `sizes`  | (m,)                | with a flat (Σn,) array: each instance's n (ragged)        |
/// | `family` | (m,)                | optional label: 0 given, 1 Gaussian logits, 2 Dirichlet(1) |
/// | `scale`  | (m,)                | optional logit scale s of a Gaussian instance (w = s·g)    |
///
/// `np.savez("att.npz", logits=3.0 * rng.standard_normal((10, 6)))`. A run writes the flat form
/// with `sizes`, `family` and `scale`, so its instances come back with their labels.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionVectors {
    pub instances: Vec<LabelledAttention>,
    /// Whether the file gave z (then it is written back as z, exactly) rather than logits.
    pub given_z: bool,
}

/// One instance of [`AttentionVectors`].
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledAttention {
    pub logits: Vec<f64>,
    pub z: Vec<f64>,
    pub family: AttentionFamily,
    /// The logit scale of a Gaussian instance (NaN otherwise).
    pub scale: f64,
}

/// Where an attention vector came from (labels in outputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionFamily {
    Given,
    Gaussian,
    Dirichlet,
}

impl AttentionFamily {
    pub fn name(self) -> &'static str {
        match self {
            AttentionFamily::Given => "given",
            AttentionFamily::Gaussian => "gaussian",
            AttentionFamily::Dirichlet => "dirichlet",
        }
    }
    fn code(self) -> f64 {
        match self {
            AttentionFamily::Given => 0.0,
            AttentionFamily::Gaussian => 1.0,
            AttentionFamily::Dirichlet => 2.0,
        }
    }
}

/// The rows of a (m, n) array, or of a flat (Σn,) array cut by `sizes`; each row's first flat
/// index is returned for messages.
fn ragged_rows<'a>(a: &'a Arrays, name: &str) -> Result<Vec<(usize, &'a [f64])>, InstanceError> {
    ragged_rows_sized(a, name, "sizes")
}

/// [`ragged_rows`] with the sizes in the array `sizes_name`.
fn ragged_rows_sized<'a>(
    a: &'a Arrays,
    name: &str,
    sizes_name: &str,
) -> Result<Vec<(usize, &'a [f64])>, InstanceError> {
    let arr = a.require(name)?;
    let sizes: Vec<usize> = match (arr.shape.len(), a.get(sizes_name)) {
        (2, None) => vec![arr.shape[1]; arr.shape[0]],
        (1, Some(_)) => {
            let s = a.vector(sizes_name, None)?;
            if let Some(i) = s.iter().position(|&k| k.fract() != 0.0 || k < 2.0) {
                return Err(InstanceError::new(
                    format!("{sizes_name}[{i}]"),
                    format!("each instance needs an integer n ≥ 2 tokens, got {}", s[i]),
                ));
            }
            let sizes: Vec<usize> = s.iter().map(|&k| k as usize).collect();
            let total: usize = sizes.iter().sum();
            if total != arr.data.len() {
                return Err(InstanceError::new(
                    sizes_name,
                    format!(
                        "sum to {total}, but {name} holds {} entries",
                        arr.data.len()
                    ),
                ));
            }
            sizes
        }
        (2, Some(_)) => {
            return Err(InstanceError::new(
                sizes_name,
                format!("only with a flat (Σn,) {name}; {name} is (m, n)"),
            ))
        }
        _ => {
            return Err(InstanceError::new(
                name,
                format!(
                    "expected (m, n), or (Σn,) with `{sizes_name}`, got shape {:?}",
                    arr.shape
                ),
            ))
        }
    };
    if sizes.is_empty() || sizes.iter().any(|&k| k < 2) {
        return Err(InstanceError::new(
            name,
            format!(
                "needs m ≥ 1 instances of n ≥ 2 tokens, got shape {:?}",
                arr.shape
            ),
        ));
    }
    let mut start = 0;
    Ok(sizes
        .iter()
        .map(|&k| {
            let row = (start, &arr.data[start..start + k]);
            start += k;
            row
        })
        .collect())
}

/// A per-instance label vector `name` of length m, if present.
fn per_instance<'a>(
    a: &'a Arrays,
    name: &str,
    m: usize,
) -> Result<Option<&'a [f64]>, InstanceError> {
    a.get(name).map(|_| a.vector(name, Some(m))).transpose()
}

impl InstanceFile for AttentionVectors {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "logits",
            "(m, n) or flat (Σn,) with `sizes`: logits of m instances, n ≥ 2",
        ),
        (
            "z",
            "instead of logits: rows on the open simplex (> 0, summing to 1)",
        ),
        ("sizes", "(m,): n of each instance, with a flat array"),
        (
            "family",
            "optional (m,): 0 given, 1 Gaussian logits, 2 Dirichlet(1)",
        ),
        ("scale", "optional (m,): logit scale of a Gaussian instance"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&["logits", "z", "sizes", "family", "scale"])?;
        let given_z = match (a.get("logits"), a.get("z")) {
            (Some(_), Some(_)) => {
                return Err(InstanceError::new("z", "give either logits or z, not both"))
            }
            (None, None) => {
                return Err(InstanceError::new(
                    "logits",
                    "missing (give `logits` or `z`)",
                ))
            }
            (_, z) => z.is_some(),
        };
        let name = if given_z { "z" } else { "logits" };
        let rows = ragged_rows(a, name)?;
        let flat = a.require(name)?.shape.len() == 1;
        let m = rows.len();
        let family = per_instance(a, "family", m)?;
        let scale = per_instance(a, "scale", m)?;
        let mut instances = Vec::with_capacity(m);
        for (i, (start, row)) in rows.into_iter().enumerate() {
            let family = match family.map(|f| f[i]) {
                None => AttentionFamily::Given,
                Some(0.0) => AttentionFamily::Given,
                Some(1.0) => AttentionFamily::Gaussian,
                Some(2.0) => AttentionFamily::Dirichlet,
                Some(c) => {
                    return Err(InstanceError::new(
                        format!("family[{i}]"),
                        format!("0 (given), 1 (Gaussian) or 2 (Dirichlet), got {c}"),
                    ))
                }
            };
            let scale = match (family, scale) {
                (AttentionFamily::Gaussian, Some(s)) => s[i],
                _ => f64::NAN,
            };
            let (logits, z) = if given_z {
                let row_key = if flat {
                    format!("z[{start}..]")
                } else {
                    format!("z[{i}]")
                };
                open_simplex_row(row, &row_key, |j| match flat {
                    true => format!("z[{}]", start + j),
                    false => format!("z[{i}, {j}]"),
                })?;
                (row.iter().map(|x| x.ln()).collect(), row.to_vec())
            } else {
                let mut z = vec![0.0; row.len()];
                crate::models::prompt::softmax::softmax_into(row, &mut z);
                (row.to_vec(), z)
            };
            instances.push(LabelledAttention {
                logits,
                z,
                family,
                scale,
            });
        }
        Ok(AttentionVectors { instances, given_z })
    }

    fn to_arrays(&self) -> Arrays {
        let inst = &self.instances;
        let values: Vec<f64> = inst
            .iter()
            .flat_map(|i| if self.given_z { &i.z } else { &i.logits }.clone())
            .collect();
        let sizes: Vec<f64> = inst.iter().map(|i| i.logits.len() as f64).collect();
        let family: Vec<f64> = inst.iter().map(|i| i.family.code()).collect();
        let scale: Vec<f64> = inst
            .iter()
            .map(|i| if i.scale.is_nan() { 0.0 } else { i.scale })
            .collect();
        let mut a = Arrays::new();
        let name = if self.given_z { "z" } else { "logits" };
        a.insert(name, Array::vector(&values))
            .insert("sizes", Array::vector(&sizes))
            .insert("family", Array::vector(&family))
            .insert("scale", Array::vector(&scale));
        a
    }
}

/// How far ‖u‖ may be from 1 (a float64 vector divided by its norm is within ~nε).
const UNIT_TOL: f64 = 1e-12;

/// Every array name of the orthogonal-block layouts ([`OrthData`], [`OrthInit`]).
const ORTH_NAMES: [&str; 7] = ["X", "v", "u", "p_teacher", "xi", "p0", "points"];

/// Data of the overparameterized-theory scenarios (`lemma2-pl-inequality`, `thm1-linear-rate`,
/// `prop1-value-scaling`; built-in: the orthogonal blocks C-orth of spec 002 §1.5). W = I, so the
/// keys are the tokens; labels come from a teacher, y_i = φ(X_i p_T)ᵀX_i v.
///
/// | array       | shape      | meaning                                                       |
/// |-------------|------------|---------------------------------------------------------------|
/// | `X`         | (N, n, d)  | N samples of n ≥ 2 tokens in ℝ^d (A2: X_iX_jᵀ = δ_ij I_n)     |
/// | `v`         | (d,)       | value vector, frozen (A1) — Lemma 2                            |
/// | `u`         | (d,)       | unit direction of v = αu (‖u‖ = 1 within 1e−12) — Thm 1, Prop. 1 |
/// | `p_teacher` | (d,)       | teacher p_T — Lemma 2, Prop. 1                                 |
/// | `xi`        | (d,)       | teacher offset, p_T = p₀ + εξ — Theorem 1                      |
///
/// Each scenario reads the arrays it names and refuses a file missing one. Assumption A2 is not
/// required of a file: the checks whose proofs need it measure it and are skipped when it fails.
#[derive(Debug, Clone, PartialEq)]
pub struct OrthData {
    pub samples: usize,
    pub n_tokens: usize,
    pub d: usize,
    /// X row-major (N·n·d).
    pub x: Vec<f64>,
    /// The optional vectors of length d by name (`v`, `u`, `p_teacher`, `xi`).
    pub vectors: std::collections::BTreeMap<String, Vec<f64>>,
}

/// Initial state / evaluation points of the orthogonal-block scenarios: `p0` (d,) the start
/// (Theorem 1, Prop. 1; for Lemma 2 the base of the tight instance) and `points` (m, d), the
/// random p at which Lemma 2 is evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct OrthInit {
    pub p0: Option<Vec<f64>>,
    pub points: Option<Vec<Vec<f64>>>,
}

impl OrthData {
    /// The vector `name`, or an error saying this scenario needs it.
    pub fn require(&self, name: &str) -> Result<&[f64], InstanceError> {
        self.vectors.get(name).map(Vec::as_slice).ok_or_else(|| {
            InstanceError::new(
                name,
                format!(
                    "missing: this scenario needs `{name}` of shape ({},)",
                    self.d
                ),
            )
        })
    }
}

impl InstanceFile for OrthData {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "X",
            "(N, n, d): N samples of n ≥ 2 tokens (A2: X_iX_jᵀ = δ_ij I)",
        ),
        ("v", "(d,): frozen value vector (Lemma 2)"),
        ("u", "(d,): unit direction of v = αu (Theorem 1, Prop. 1)"),
        ("p_teacher", "(d,): teacher p_T (Lemma 2, Prop. 1)"),
        ("xi", "(d,): teacher offset p_T = p₀ + εξ (Theorem 1)"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&ORTH_NAMES)?;
        let x = a.shaped("X", &[None, None, None])?;
        let [samples, n_tokens, d] = [x.shape[0], x.shape[1], x.shape[2]];
        if samples == 0 || n_tokens < 2 || d == 0 {
            return Err(InstanceError::new(
                "X",
                format!(
                    "needs N ≥ 1 samples of n ≥ 2 tokens in d ≥ 1 dimensions, got shape {:?}",
                    x.shape
                ),
            ));
        }
        let mut vectors = std::collections::BTreeMap::new();
        for name in ["v", "u", "p_teacher", "xi"] {
            if a.get(name).is_some() {
                vectors.insert(name.to_string(), a.vector(name, Some(d))?.to_vec());
            }
        }
        if let Some(u) = vectors.get("u") {
            let norm = u.iter().map(|x| x * x).sum::<f64>().sqrt();
            if (norm - 1.0).abs() > UNIT_TOL {
                return Err(InstanceError::new(
                    "u",
                    format!(
                        "must be a unit vector (‖u‖ = 1 within {UNIT_TOL:e}), got ‖u‖ = {norm}"
                    ),
                ));
            }
        }
        Ok(OrthData {
            samples,
            n_tokens,
            d,
            x: x.data.clone(),
            vectors,
        })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        a.insert(
            "X",
            Array::new(&[self.samples, self.n_tokens, self.d], self.x.clone()),
        );
        for (name, v) in &self.vectors {
            a.insert(name, Array::vector(v));
        }
        a
    }
}

impl OrthInit {
    /// Checks the lengths against the data's d.
    pub fn require_fits(&self, d: usize) -> Result<(), InstanceError> {
        let p0 = self.p0.iter().map(|p| ("p0", p.len()));
        let points = self.points.iter().map(|p| ("points", p[0].len()));
        match p0.chain(points).find(|&(_, len)| len != d) {
            Some((name, len)) => Err(InstanceError::new(
                name,
                format!("vectors of length {len}, but the data has d = {d}"),
            )),
            None => Ok(()),
        }
    }

    /// `p0`, or an error saying this scenario needs it.
    pub fn require_p0(&self) -> Result<&[f64], InstanceError> {
        self.p0
            .as_deref()
            .ok_or_else(|| InstanceError::new("p0", "missing: this scenario starts at p0 (d,)"))
    }
}

impl InstanceFile for OrthInit {
    const ARRAYS: &'static [(&'static str, &'static str)] = &[
        (
            "p0",
            "(d,): the start (the tight instance's base for Lemma 2)",
        ),
        ("points", "(m, d): the p at which Lemma 2 is evaluated"),
    ];

    fn from_arrays(a: &Arrays) -> Result<Self, InstanceError> {
        a.deny_unknown(&ORTH_NAMES)?;
        let p0 = a
            .get("p0")
            .map(|_| a.vector("p0", None).map(<[f64]>::to_vec))
            .transpose()?;
        let points = match a.get("points") {
            None => None,
            Some(_) => {
                let m = a.shaped("points", &[None, None])?;
                if m.shape[0] == 0 || m.shape[1] == 0 {
                    return Err(InstanceError::new(
                        "points",
                        format!("needs m ≥ 1 points in d ≥ 1 dimensions, got {:?}", m.shape),
                    ));
                }
                Some(m.data.chunks(m.shape[1]).map(<[f64]>::to_vec).collect())
            }
        };
        if p0.is_none() && points.is_none() {
            return Err(InstanceError::new(
                "p0",
                "missing (the file holds neither p0 nor points)",
            ));
        }
        Ok(OrthInit { p0, points })
    }

    fn to_arrays(&self) -> Arrays {
        let mut a = Arrays::new();
        if let Some(p0) = &self.p0 {
            a.insert("p0", Array::vector(p0));
        }
        if let Some(points) = &self.points {
            a.insert(
                "points",
                Array::matrix(points.len(), points[0].len(), points.concat()),
            );
        }
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

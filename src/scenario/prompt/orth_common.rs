//! What the seed-002 overparameterized-theory scenarios (Lemma 2, Theorem 1, Proposition 1)
//! share: instances on the orthogonal-block data (C-orth, spec §1.5) on which A2 holds, or —
//! to show what A2 buys — on Gaussian tokens of the same shape; or on a user's data and
//! initial state ([`OrthFiles`]), where A2 is measured ([`a2_violation`]) and the checks whose
//! proofs need it are skipped when it fails.

use std::path::{Path, PathBuf};

use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;

use crate::instance::prompt::{OrthData, OrthInit};
use crate::instance::{Arrays, InstanceError, InstanceFile};
use crate::models::prompt::data::{labelled, orthogonal_blocks, PromptData};
use crate::models::prompt::{Attention, PromptModel, Trained};
use crate::scenario::cost::{n, Cost};
use crate::scenario::{InputError, Report, Scenario};

use super::common::file_error;

/// A2 counts as holding on a user's data when max |X_iX_jᵀ − δ_ij I| ≤ this (rounding of an
/// orthogonal matrix's rows in float64 is ~1e−15).
pub const A2_TOL: f64 = 1e-10;

/// max_{i,j} |K_iK_jᵀ − δ_ij I_n| (entrywise): 0 exactly when A2 holds.
pub fn a2_violation(data: &PromptData) -> f64 {
    let (n, d) = (data.n_tokens, data.d);
    let keys: Vec<DMatrix<f64>> = (0..data.samples)
        .map(|i| DMatrix::from_row_slice(n, d, data.keys(i)))
        .collect();
    let mut worst: f64 = 0.0;
    for (i, ki) in keys.iter().enumerate() {
        for (j, kj) in keys.iter().enumerate() {
            let mut g = ki * kj.transpose();
            if i == j {
                g -= DMatrix::identity(n, n);
            }
            worst = worst.max(g.amax());
        }
    }
    worst
}

/// Runs `check` if the data are the built-in ones or A2 holds on the user's (violation ≤
/// [`A2_TOL`]); else skips check `id` (titled `name`) with the measured violation.
pub fn if_a2(
    rep: &mut Report,
    user_a2: Option<f64>,
    (id, name): (&str, &str),
    check: impl FnOnce(&mut Report),
) {
    match user_a2 {
        Some(v) if v > A2_TOL => rep.skip(
            id,
            name,
            format!(
                "its proof needs A2 (K_iK_jᵀ = δ_ij I), which the data file violates: max \
                 |X_iX_jᵀ − δ_ij I| = {v:.3e} > {A2_TOL:e}"
            ),
        ),
        _ => check(rep),
    }
}

/// The instance files of the orthogonal-block scenarios: `data_file` ([`OrthData`]: `X` and
/// the vectors a scenario names) and `init_file` ([`OrthInit`]: `p0`, `points`).
pub struct OrthFiles {
    data: Option<(PathBuf, OrthData)>,
    init: Option<(PathBuf, OrthInit)>,
}

impl OrthFiles {
    /// Reads the files, requiring the data `vectors` and (if an init file is given) p0 and,
    /// with `points`, the evaluation points; `d_default` is the built-in d.
    pub fn read(
        sc: &Scenario,
        data_file: Option<&Path>,
        init_file: Option<&Path>,
        vectors: &[&str],
        points: bool,
        d_default: usize,
    ) -> Result<Self, InputError> {
        let data = data_file
            .map(|f| {
                let data: OrthData = sc.read_instance("data_file", f)?;
                let path = sc.input_path("data_file", f);
                for name in vectors {
                    data.require(name)
                        .map_err(|e| file_error(&path, "data_file", e))?;
                }
                Ok::<_, InputError>((path, data))
            })
            .transpose()?;
        let init = init_file
            .map(|f| {
                let init: OrthInit = sc.read_instance("init_file", f)?;
                let path = sc.input_path("init_file", f);
                let d = data.as_ref().map_or(d_default, |(_, t)| t.d);
                init.require_p0()
                    .map(|_| ())
                    .and_then(|()| match (points, &init.points) {
                        (true, None) => Err(InstanceError::new(
                            "points",
                            "missing: this scenario evaluates at points (m, d)",
                        )),
                        _ => Ok(()),
                    })
                    .and_then(|()| init.require_fits(d))
                    .map_err(|e| file_error(&path, "init_file", e))?;
                Ok::<_, InputError>((path, init))
            })
            .transpose()?;
        Ok(OrthFiles { data, init })
    }

    /// The user's data: tokens (labels zero) and the named vectors; `None` for the built-in.
    pub fn data(&self) -> Option<(PromptData, &OrthData)> {
        self.data.as_ref().map(|(_, t)| {
            let tokens = PromptData::new(
                t.n_tokens,
                t.d,
                t.samples,
                t.x.clone(),
                vec![0.0; t.samples],
            );
            (tokens, t)
        })
    }

    pub fn init(&self) -> Option<&OrthInit> {
        self.init.as_ref().map(|(_, i)| i)
    }
}

/// `instance.npz` of an orthogonal-block run: the tokens and named vectors, and the start /
/// evaluation points.
pub fn orth_instance(data: &PromptData, vectors: &[(&str, &[f64])], init: OrthInit) -> Arrays {
    let mut a = OrthData {
        samples: data.samples,
        n_tokens: data.n_tokens,
        d: data.d,
        x: data.x.clone(),
        vectors: vectors
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_vec()))
            .collect(),
    }
    .to_arrays();
    a.merge_prefixed("", init.to_arrays());
    a
}

/// N samples of n tokens in d = nN dimensions: C-orth (A2: K_iK_jᵀ = δ_ij I) or, with
/// `gaussian`, i.i.d. N(0, 1/d) tokens (A2 fails). Labels are zero.
pub fn blocks(n_tokens: usize, samples: usize, gaussian: bool, rng: &mut impl Rng) -> PromptData {
    if gaussian {
        let d = n_tokens * samples;
        let scale = 1.0 / (d as f64).sqrt();
        let x = gaussian_vec(rng, samples * n_tokens * d, scale);
        PromptData::new(n_tokens, d, samples, x, vec![0.0; samples])
    } else {
        orthogonal_blocks(n_tokens, samples, rng)
    }
}

/// The cost of the tokens of [`blocks`] (N·n·nN doubles).
pub fn orth_tokens_cost(tokens: usize, samples: usize) -> Cost {
    let d = tokens * samples;
    Cost::new().doubles(
        "tokens, samples",
        "the tokens",
        n(samples) * n(tokens) * n(d),
    )
}

pub fn gaussian_vec(rng: &mut impl Rng, len: usize, scale: f64) -> Vec<f64> {
    (0..len)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

/// A uniformly random unit vector.
pub fn unit_vec(rng: &mut impl Rng, len: usize) -> Vec<f64> {
    let g = gaussian_vec(rng, len, 1.0);
    let norm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
    g.iter().map(|x| x / norm).collect()
}

/// The p-only model (A1, v frozen) on `data` with labels y_i = f(X_i; p_T, v_T).
pub fn p_model(data: PromptData, v: &[f64], p_teacher: &[f64], v_teacher: &[f64]) -> PromptModel {
    let data = labelled(data, Attention::Softmax, p_teacher, v_teacher);
    PromptModel::new(data, Attention::Softmax, Trained::P { v: v.to_vec() })
}

pub fn norm(x: &[f64]) -> f64 {
    x.iter().map(|a| a * a).sum::<f64>().sqrt()
}

//! What the seed-002 overparameterized-theory scenarios (Lemma 2, Theorem 1, Proposition 1)
//! share: instances on the orthogonal-block data (C-orth, spec §1.5) on which A2 holds, or —
//! to show what A2 buys — on Gaussian tokens of the same shape.

use rand::Rng;
use rand_distr::StandardNormal;

use crate::models::prompt::data::{labelled, orthogonal_blocks, PromptData};
use crate::models::prompt::{Attention, PromptModel, Trained};

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

//! Test support: the loss written directly from its definition, generic over num-dual numbers,
//! as an independent forward-mode-AD reference for the log-domain models.

use num_dual::DualNum;

pub(crate) use crate::autodiff::{ad_grad_hvp, rel_err};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use super::data::TokenData;
use super::loss::Loss;
use crate::stats;

/// L(u, W) = (1/n) Σ ℓ(γ_iᵀ softmax(X_i W q_i)), W column-major, with a max-shifted softmax.
pub(crate) fn reference_loss<T: DualNum<f64> + Copy>(
    data: &TokenData,
    u: &[T],
    w: &[T],
    loss: Loss,
) -> T {
    let d = data.d;
    let mut total = T::from(0.0);
    for i in 0..data.n {
        let q = data.query(i);
        let p: Vec<T> = (0..d)
            .map(|r| (0..d).fold(T::from(0.0), |acc, c| acc + w[c * d + r] * q[c]))
            .collect();
        let logits: Vec<T> = (0..data.t)
            .map(|t| {
                let x = data.token(i, t);
                (0..d).fold(T::from(0.0), |acc, r| acc + p[r] * x[r])
            })
            .collect();
        let top = stats::max(logits.iter().map(|s| s.re()));
        let e: Vec<T> = logits.iter().map(|&s| (s - top).exp()).collect();
        let z = e.iter().fold(T::from(0.0), |a, &b| a + b);
        let margin = (0..data.t).fold(T::from(0.0), |acc, t| {
            let x = data.token(i, t);
            let gamma = (0..d).fold(T::from(0.0), |a, k| a + u[k] * x[k]) * data.y[i];
            acc + e[t] * gamma
        }) / z;
        total += match loss {
            Loss::Exponential => (-margin).exp(),
            Loss::Logistic => (-margin).exp().ln_1p(),
        };
    }
    total / data.n as f64
}

pub(crate) fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

pub(crate) fn gaussian_vec(rng: &mut impl Rng, len: usize, scale: f64) -> Vec<f64> {
    (0..len)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

/// Generic random data (no Ass. 2, no orthogonality): n = 3, T = 3, d = 3.
pub(crate) fn random_data(rng: &mut impl Rng) -> TokenData {
    let (n, t, d) = (3, 3, 3);
    let x = gaussian_vec(rng, n * t * d, 1.0);
    let y = vec![1.0, -1.0, 1.0];
    TokenData::new(n, t, d, x, y).unwrap()
}

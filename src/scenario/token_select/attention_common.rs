//! Numerics shared by this group's seed-003 scenarios: NaN-propagating max/min for check values,
//! raw logits s_{i,t} = x_{i,t}ᵀ W q_i, logit
//! gaps, the naive f64 evaluation of L − L* (the negative control of spec 003 §8.2), random
//! initial matrices, and least-squares lines through already-logarithmic data.

use rand::Rng;
use rand_distr::StandardNormal;

pub use crate::analysis::fit::line_fit;
use crate::attention::TokenData;
use crate::stats;

/// s_{i,t} = x_{i,t}ᵀ W q_i (n × T, row-major) for W column-major d × d.
pub fn logits(data: &TokenData, w: &[f64]) -> Vec<f64> {
    let d = data.d;
    let mut wq = vec![0.0; d];
    let mut s = Vec::with_capacity(data.n * data.t);
    for i in 0..data.n {
        wq.iter_mut().for_each(|x| *x = 0.0);
        for (c, &qc) in data.query(i).iter().enumerate() {
            for (o, &wrc) in wq.iter_mut().zip(&w[c * d..(c + 1) * d]) {
                *o += wrc * qc;
            }
        }
        for t in 0..data.t {
            s.push(data.token(i, t).iter().zip(&wq).map(|(x, y)| x * y).sum());
        }
    }
    s
}

/// min_{i, t≠opt_i} (s_{i,opt} − s_{i,t}): the smallest logit gap, which sets 1 − φ_opt and
/// the excess loss once attention saturates.
pub fn min_logit_gap(t: usize, logits: &[f64], opt: &[usize]) -> f64 {
    stats::min(opt.iter().enumerate().flat_map(|(i, &o)| {
        let row = &logits[i * t..(i + 1) * t];
        (0..t)
            .filter(move |&k| k != o)
            .map(move |k| row[o] - row[k])
    }))
}

/// L − L* for the exponential loss evaluated the textbook way in f64: a max-shifted softmax,
/// margins m_i = γ_iᵀφ_i, L = mean e^{−m_i}, minus L* = mean e^{−γ_{i,opt}}. Exact algebra,
/// but the difference cancels catastrophically once the logit gap passes ≈ ln(1/ε) ≈ 37.
pub fn naive_excess(t: usize, logits: &[f64], gamma: &[f64], opt: &[usize]) -> f64 {
    let n = opt.len() as f64;
    let mut loss = 0.0;
    let mut loss_star = 0.0;
    for (i, &o) in opt.iter().enumerate() {
        let row = &logits[i * t..(i + 1) * t];
        let g = &gamma[i * t..(i + 1) * t];
        let top = stats::max(row.iter());
        let weights: Vec<f64> = row.iter().map(|s| (s - top).exp()).collect();
        let total: f64 = weights.iter().sum();
        let margin: f64 = weights.iter().zip(g).map(|(w, g)| w / total * g).sum();
        loss += (-margin).exp() / n;
        loss_star += (-g[o]).exp() / n;
    }
    loss - loss_star
}

/// A d × d matrix with iid N(0, std²) entries.
pub fn gaussian_matrix(d: usize, std: f64, rng: &mut impl Rng) -> Vec<f64> {
    (0..d * d)
        .map(|_| std * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

/// A uniformly random direction of ℝ^{d×d} (unit Frobenius norm).
pub fn unit_direction(d: usize, rng: &mut impl Rng) -> Vec<f64> {
    let mut w = gaussian_matrix(d, 1.0, rng);
    let norm = crate::flow::norm(&w);
    w.iter_mut().for_each(|x| *x /= norm);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_fit_recovers_a_line_and_its_residual() {
        let x = [0.0, 1.0, 2.0, 3.0];
        let y = [1.0, -1.0, -3.0, -4.0];
        let f = line_fit(&x, &y);
        // least squares through (0,1), (1,−1), (2,−3), (3,−4): slope −1.7, intercept 0.8,
        // residuals 0.2, −0.1, −0.4, 0.3
        assert!((f.slope + 1.7).abs() < 1e-12 && (f.intercept - 0.8).abs() < 1e-12);
        assert!((f.max_residual - 0.4).abs() < 1e-12);
    }

    #[test]
    fn naive_excess_is_exact_at_small_gaps_and_cancels_at_large_ones() {
        // two-token example: L − L* = e^{−1} expm1(σ(−g)) with g the logit gap
        let (gamma, opt) = ([1.0, 0.0], [0usize]);
        let exact = |g: f64| (-1.0f64).exp() * (1.0 / (1.0 + g.exp())).exp_m1();
        let rel = |g: f64| (naive_excess(2, &[g, 0.0], &gamma, &opt) / exact(g) - 1.0).abs();
        assert!(rel(2.0) < 1e-13);
        assert!(rel(20.0) < 1e-6);
        assert!(rel(40.0) > 0.5);
        assert_eq!(min_logit_gap(2, &[3.0, 0.5], &opt), 2.5);
    }
}

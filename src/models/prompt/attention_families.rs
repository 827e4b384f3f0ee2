//! Families of attention vectors z ∈ Δ̊^{n−1} for the Lemma 1 and Theorem 2 studies (spec 002
//! §3.1, §3.6). Each is given by its logits w (z = φ(w)), so that ln R = max w − min w is exact
//! and no probability is divided.

use rand::Rng;
use rand_distr::{Exp1, StandardNormal};

use super::softmax::{log_attention_ratio, softmax_into};

/// An attention vector with its logits.
#[derive(Debug, Clone, PartialEq)]
pub struct Attention {
    pub logits: Vec<f64>,
    pub z: Vec<f64>,
}

impl Attention {
    fn from_logits(logits: Vec<f64>) -> Self {
        let mut z = vec![0.0; logits.len()];
        softmax_into(&logits, &mut z);
        Attention { logits, z }
    }

    /// ln R = ln(max z/min z), from the logits.
    pub fn ln_ratio(&self) -> f64 {
        log_attention_ratio(&self.logits)
    }

    /// Gaussian logits at scale s: w = s·g, g ~ N(0, I_n).
    pub fn gaussian_logits<R: Rng + ?Sized>(n: usize, scale: f64, rng: &mut R) -> Self {
        Self::scaled(&Self::standard_normal(n, rng), scale)
    }

    /// n i.i.d. N(0, 1) draws, to scale with [`Attention::scaled`] (common random numbers
    /// across scales).
    pub fn standard_normal<R: Rng + ?Sized>(n: usize, rng: &mut R) -> Vec<f64> {
        (0..n).map(|_| rng.sample(StandardNormal)).collect()
    }

    /// Logits s·g.
    pub fn scaled(g: &[f64], scale: f64) -> Self {
        Self::from_logits(g.iter().map(|x| scale * x).collect())
    }

    /// One dominant token plus a uniform tail, z = (1 − (n−1)ε, ε, …, ε) (§3.6), for
    /// 0 < ε < 1/n; logits (ln(1 − (n−1)ε), ln ε, …).
    pub fn dominant_token(n: usize, tail: f64) -> Self {
        let mut logits = vec![tail.ln(); n];
        logits[0] = (-((n - 1) as f64) * tail).ln_1p();
        Self::from_logits(logits)
    }

    /// The ε of [`Attention::dominant_token`] with attention ratio R: (1 − (n−1)ε)/ε = R.
    pub fn dominant_token_tail(n: usize, ratio: f64) -> f64 {
        1.0 / (ratio + (n - 1) as f64)
    }

    /// Dirichlet(1, …, 1): z = E/ΣE with E_j ~ Exp(1), logits ln E_j.
    pub fn dirichlet<R: Rng + ?Sized>(n: usize, rng: &mut R) -> Self {
        Self::from_logits(
            (0..n)
                .map(|_| rng.sample::<f64, _>(Exp1).max(f64::MIN_POSITIVE).ln())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn families_have_the_stated_ratios() {
        let a = Attention::dominant_token(10, Attention::dominant_token_tail(10, 1e6));
        assert!((a.ln_ratio() - 1e6f64.ln()).abs() < 1e-12);
        assert_eq!(a.z[1], a.z[9]);
        assert!(
            (a.z.iter().sum::<f64>() - 1.0).abs() < 1e-14,
            "{}",
            a.z.iter().sum::<f64>() - 1.0
        );
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let g = Attention::gaussian_logits(20, 2.0, &mut rng);
        let spread = stats::max_with(0.0, g.z.iter()) / stats::min_with(1.0, g.z.iter());
        assert!((g.ln_ratio() - spread.ln()).abs() < 1e-12);
        let d = Attention::dirichlet(5, &mut rng);
        assert!(d.z.iter().all(|&x| x > 0.0) && (d.z.iter().sum::<f64>() - 1.0).abs() < 1e-15);
    }
}

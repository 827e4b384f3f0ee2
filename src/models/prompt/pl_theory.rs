//! The overparameterized theory of paper 002 (spec §3.2–3.4): the PL inequality of Lemma 2, the
//! constants of Theorem 1 in both readings, and the quantities Proposition 1 scales with α.
//!
//! With the squared loss (m = L = 1), ∇_p L = Fᵀg with g_i = f_i − y_i and ‖g‖² = 2N·L, so
//! ½‖∇L‖² ≥ ½σ²_min(F)‖g‖² = mNσ²_min(F)·L: the constant the derivation gives is mNσ²_min, not
//! the paper's 2mσ²_min (smaller for N ≥ 2, **larger — so false — for N = 1**). Under A2 the rows
//! of F are orthogonal, so σ_i(F) = (1/N)‖J(z_i)a_i‖ (spec §2.2).
//!
//! Theorem 1's constants (spec §3.3), with C_σ = max_i σ_max(X_i), s_W = σ_max(W), ΔL = L₀ − L*:
//! L′ = s_W² C_σ³ L‖v‖(2C_σ‖v‖ + 3√(2ΔL/m)), η = c₂/L′, μ = c₁/L′ (literal) or c₁L′ (intended),
//! C_p = √(2ΔL/(mN))·s_W C_σ²‖v‖c₂L / (L′(1 − √(1 − c₁c₂))) (×√N with the fix of E3),
//! M_p = ‖p₀‖ + C_p, γ = (1/√N)·min(2, 3C_σ s_W C_p)·C_σ² s_W‖v‖, and the hypothesis margin
//! σ_min(F(p₀)) − γ − √(μ/(2m)).

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::model::PromptModel;
use super::softmax::softmax_into;
use crate::flow::GradientFlow;
use crate::stats;

/// Which reading of Theorem 1's μ (spec E2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading {
    /// μ = c₁/L′ as printed (then ημ = c₁c₂/L′²).
    Literal,
    /// μ = c₁L′ (then ημ = c₁c₂, as C_p and c₂ < 1/c₁ assume).
    Intended,
}

impl Reading {
    pub fn name(self) -> &'static str {
        match self {
            Reading::Literal => "literal",
            Reading::Intended => "intended",
        }
    }
}

/// Singular values of F(p) (descending) from the SVD.
pub fn f_singular_values(model: &PromptModel, theta: &[f64]) -> Vec<f64> {
    let f = model.f_matrix(theta);
    let mut s: Vec<f64> = f.singular_values().iter().copied().collect();
    s.sort_by(|a, b| b.total_cmp(a));
    s
}

/// σ_min(F(p)) = σ_N (the N-th singular value; 0 if N > d).
pub fn f_sigma_min(model: &PromptModel, theta: &[f64]) -> f64 {
    let data = model.data();
    if data.samples > data.d {
        return 0.0;
    }
    f_singular_values(model, theta)[data.samples - 1]
}

/// The A2 closed form of the row norms of F: (1/N)‖J(z_i)a_i‖ per sample (spec §2.2); their
/// minimum is σ_min(F) when A2 holds.
pub fn f_row_norms_closed_form(model: &PromptModel, p: &[f64], v: &[f64]) -> Vec<f64> {
    let data = model.data();
    let (n, d) = (data.n_tokens, data.d);
    let logits = model.logits(p);
    let mut z = vec![0.0; n];
    (0..data.samples)
        .map(|i| {
            softmax_into(&logits[i], &mut z);
            let x = data.tokens(i);
            let a: Vec<f64> = (0..n)
                .map(|j| {
                    x[j * d..(j + 1) * d]
                        .iter()
                        .zip(v)
                        .map(|(a, b)| a * b)
                        .sum()
                })
                .collect();
            let f: f64 = z.iter().zip(&a).map(|(z, a)| z * a).sum();
            let b2: f64 = z.iter().zip(&a).map(|(z, a)| (z * (a - f)).powi(2)).sum();
            b2.sqrt() / data.samples as f64
        })
        .collect()
}

/// ½‖∇L(p)‖² / (L(p) − L*) (∞ if L = L*), the best pointwise PL constant at p.
pub fn pl_ratio(model: &PromptModel, theta: &[f64], loss_star: f64) -> (f64, f64) {
    let mut g = vec![0.0; model.dim()];
    model.grad(theta, &mut g);
    let half_grad2 = 0.5 * g.iter().map(|x| x * x).sum::<f64>();
    (half_grad2, model.loss(theta) - loss_star)
}

/// C_σ = max_i σ_max(X_i).
pub fn c_sigma(model: &PromptModel) -> f64 {
    let data = model.data();
    stats::max((0..data.samples).map(|i| {
        let x_i = DMatrix::from_row_slice(data.n_tokens, data.d, data.tokens(i));
        stats::max(x_i.singular_values().iter())
    }))
}

/// Inputs of Theorem 1 that are not the data: loss gap, ‖v‖, ‖p₀‖, σ_min(F(p₀)) and the choices.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thm1Inputs {
    pub c_sigma: f64,
    /// σ_max(W).
    pub sigma_w: f64,
    pub samples: usize,
    /// L₀ − L*.
    pub loss_gap: f64,
    pub v_norm: f64,
    pub p0_norm: f64,
    pub sigma_min_f0: f64,
    pub c1: f64,
    pub c2: f64,
    /// Strong convexity m and smoothness L of ℓ (1 and 1 for ½(f − y)²).
    pub m: f64,
    pub ell_smooth: f64,
}

/// Theorem 1's constants in one reading and one C_p variant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thm1Constants {
    pub l_prime: f64,
    pub mu: f64,
    pub eta: f64,
    pub c_p: f64,
    pub m_p: f64,
    pub gamma: f64,
    /// σ_min(F(p₀)) − γ − √(μ/(2m)): the hypothesis holds iff > 0.
    pub margin: f64,
    /// 1 − ημ, the per-step factor of (14).
    pub contraction: f64,
}

impl Thm1Inputs {
    pub fn constants(&self, reading: Reading, sqrt_n_fix: bool) -> Thm1Constants {
        let (cs, sw, v, m, l) = (
            self.c_sigma,
            self.sigma_w,
            self.v_norm,
            self.m,
            self.ell_smooth,
        );
        let n = self.samples as f64;
        let root_gap = (2.0 * self.loss_gap / m).sqrt();
        let l_prime = sw * sw * cs.powi(3) * l * v * (2.0 * cs * v + 3.0 * root_gap);
        let eta = self.c2 / l_prime;
        let mu = match reading {
            Reading::Literal => self.c1 / l_prime,
            Reading::Intended => self.c1 * l_prime,
        };
        let fix = if sqrt_n_fix { n.sqrt() } else { 1.0 };
        let c_p = (2.0 * self.loss_gap / (m * n)).sqrt() * fix * sw * cs * cs * v * self.c2 * l
            / (l_prime * (1.0 - (1.0 - self.c1 * self.c2).sqrt()));
        let gamma = (2.0f64).min(3.0 * cs * sw * c_p) * cs * cs * sw * v / n.sqrt();
        Thm1Constants {
            l_prime,
            mu,
            eta,
            c_p,
            m_p: self.p0_norm + c_p,
            gamma,
            margin: self.sigma_min_f0 - gamma - (mu / (2.0 * m)).sqrt(),
            contraction: 1.0 - eta * mu,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::prompt::data::{labelled, orthogonal_blocks};
    use crate::models::prompt::model::{Attention, Trained};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn instance(samples: usize, rng: &mut ChaCha8Rng) -> (PromptModel, Vec<f64>, Vec<f64>) {
        let data = orthogonal_blocks(2, samples, rng);
        let d = data.d;
        let mut g = |s: f64| -> Vec<f64> {
            (0..d)
                .map(|_| s * rng.sample::<f64, _>(rand_distr::StandardNormal))
                .collect()
        };
        let (v, pt, p) = (g(2.0), g(1.0), g(1.0));
        let data = labelled(data, Attention::Softmax, &pt, &v);
        let model = PromptModel::new(data, Attention::Softmax, Trained::P { v: v.clone() });
        (model, v, p)
    }

    #[test]
    fn sigma_min_closed_form_under_a2_and_the_pl_constant() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for samples in [1, 3, 5] {
            let (model, v, p) = instance(samples, &mut rng);
            let rows = f_row_norms_closed_form(&model, &p, &v);
            let closed = stats::min(rows.iter());
            let svd = f_sigma_min(&model, &p);
            assert!((closed / svd - 1.0).abs() < 1e-12, "{closed} vs {svd}");
            let (lhs, gap) = pl_ratio(&model, &p, 0.0);
            let n = samples as f64;
            assert!(lhs >= n * svd * svd * gap * (1.0 - 1e-12));
            if samples == 1 {
                // N = 1: ½‖∇L‖² = σ²L exactly, half of the paper's 2mσ²L
                assert!((lhs / (svd * svd * gap) - 1.0).abs() < 1e-10);
            }
        }
    }

    #[test]
    fn readings_differ_only_in_mu() {
        let inp = Thm1Inputs {
            c_sigma: 1.0,
            sigma_w: 1.0,
            samples: 5,
            loss_gap: 0.01,
            v_norm: 10.0,
            p0_norm: 1.0,
            sigma_min_f0: 0.5,
            c1: 0.5,
            c2: 1.0,
            m: 1.0,
            ell_smooth: 1.0,
        };
        let (a, b) = (
            inp.constants(Reading::Literal, false),
            inp.constants(Reading::Intended, false),
        );
        assert_eq!(a.l_prime, b.l_prime);
        assert_eq!(a.c_p, b.c_p);
        assert!((a.mu * a.l_prime * a.l_prime / b.mu - 1.0).abs() < 1e-12);
        assert!((b.eta * b.mu - 0.5).abs() < 1e-12);
        let fixed = inp.constants(Reading::Literal, true);
        assert!((fixed.c_p / a.c_p - 5f64.sqrt()).abs() < 1e-12);
    }
}

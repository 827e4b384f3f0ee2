//! The attention head with diagonal weights (spec 004 §1.2): W_K = diag(w_K) etc., so that
//! f(X; β) = smax(X diag(a) Xᵀ) X diag(c) with a = w_K ⊙ w_Q (KQ entries) and c = w_V ⊙ w_O
//! (VO entries). Layout β = [a; c], u = [w_K; w_V], v = [w_Q; w_O]: index r ∈ [0, d) is KQ[r],
//! d + r is VO[r]; rank(W_K W_Qᵀ) = nnz(a) and rank(W_V W_Oᵀ) = nnz(c).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::kernel::{mat_mul, mat_mul_nt};
use super::{AttentionHead, AttentionSamples, LossScale, ScoreValueMap};
use crate::models::diagonal::DiagonalError;

/// β = [a; c] ↦ (S = X diag(a) Xᵀ, V = X diag(c)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiagonalScores {
    pub d: usize,
}

impl ScoreValueMap for DiagonalScores {
    fn d(&self) -> usize {
        self.d
    }

    fn p(&self) -> usize {
        2 * self.d
    }

    /// S_mj = Σ_r a_r X_mr X_jr (as (X diag a) Xᵀ), V_mr = X_mr c_r.
    fn forward(
        &self,
        beta: &[f64],
        x: &[f64],
        n: usize,
        s: &mut [f64],
        v: &mut [f64],
        work: &mut [f64],
    ) {
        let d = self.d;
        let (a, c) = beta.split_at(d);
        for m in 0..n {
            for r in 0..d {
                work[m * d + r] = x[m * d + r] * a[r];
                v[m * d + r] = x[m * d + r] * c[r];
            }
        }
        mat_mul_nt(work, x, s, (n, d, n), false);
    }

    /// ∂/∂a_r = Σ_m X_mr (dS X)_mr = (Xᵀ dS X)_rr, ∂/∂c_r = Σ_m X_mr dV_mr.
    fn adjoint(
        &self,
        x: &[f64],
        n: usize,
        ds: &[f64],
        dv: &[f64],
        grad: &mut [f64],
        work: &mut [f64],
    ) {
        let d = self.d;
        mat_mul(ds, x, work, (n, n, d), false);
        for m in 0..n {
            for r in 0..d {
                grad[r] += x[m * d + r] * work[m * d + r];
                grad[d + r] += x[m * d + r] * dv[m * d + r];
            }
        }
    }

    fn coordinate_name(&self, i: usize) -> String {
        if i < self.d {
            format!("KQ[{i}]")
        } else {
            format!("VO[{}]", i - self.d)
        }
    }
}

/// The diagonal attention head in its student–teacher task (spec §1.5, §2.2).
pub type DiagonalAttention = AttentionHead<DiagonalScores>;

impl AttentionHead<DiagonalScores> {
    /// N samples of n Gaussian tokens in ℝ^d labelled by the teacher (a*, c*), loss scale κ.
    pub fn student_teacher(
        n: usize,
        count: usize,
        a_star: &[f64],
        c_star: &[f64],
        scale: LossScale,
        rng: &mut impl rand::Rng,
    ) -> Result<Self, DiagonalError> {
        let d = a_star.len();
        if c_star.len() != d || n == 0 || count == 0 {
            return Err(DiagonalError::Invalid(
                "a* and c* need the same length d, and n, N must be positive".into(),
            ));
        }
        let map = DiagonalScores { d };
        let teacher: Vec<f64> = a_star.iter().chain(c_star).copied().collect();
        let x = AttentionSamples::gaussian_inputs(count, n, d, rng);
        let samples = AttentionSamples::from_teacher(&map, &teacher, n, x)?;
        AttentionHead::new(map, samples, scale.kappa(n, d))
    }

    /// The mini reference instance M1 (spec §3.6): n = 4, d = 6, N = 64, a* = (1.5, −1, 0, 0,
    /// 0, 0), c* = (0, 0, 1, −0.7, 0.5, 0), κ = 1/(nd); inputs from ChaCha8 with `data_seed`.
    pub fn mini(data_seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(data_seed);
        Self::student_teacher(
            4,
            64,
            &Self::MINI_KQ,
            &Self::MINI_VO,
            LossScale::Mean,
            &mut rng,
        )
        .expect("the mini instance is valid")
    }

    /// The M1 teacher's KQ entries a*.
    pub const MINI_KQ: [f64; 6] = [1.5, -1.0, 0.0, 0.0, 0.0, 0.0];
    /// The M1 teacher's VO entries c*.
    pub const MINI_VO: [f64; 6] = [0.0, 0.0, 1.0, -0.7, 0.5, 0.0];

    /// Token dimension d (β has 2d entries).
    pub fn d(&self) -> usize {
        self.map().d
    }

    /// Whether β-index i is a KQ entry (else a VO entry).
    pub fn is_kq(&self, i: usize) -> bool {
        i < self.d()
    }

    /// (rank W_K W_Qᵀ, rank W_V W_Oᵀ) = (#{r : |a_r| > thr}, #{r : |c_r| > thr}).
    pub fn ranks(&self, beta: &[f64], threshold: f64) -> (usize, usize) {
        let d = self.d();
        let count = |xs: &[f64]| xs.iter().filter(|x| x.abs() > threshold).count();
        (count(&beta[..d]), count(&beta[d..]))
    }

    /// Closed form at β = 0 (spec §2.2, CF4): G_{c_r}(0) = 2κ n mean_s(x̄_{s,r} ȳ_{s,r}) with
    /// x̄, ȳ the token averages; G_a(0) = 0. Returns the full g(0) ∈ ℝ^{2d}.
    pub fn g_at_zero(&self) -> Vec<f64> {
        let (samples, d) = (self.samples(), self.d());
        let (n, count) = (samples.n, samples.count());
        let mut g = vec![0.0; 2 * d];
        for s in 0..count {
            let (x, y) = (samples.x_of(s), samples.y_of(s));
            for r in 0..d {
                let x_mean: f64 = (0..n).map(|m| x[m * d + r]).sum::<f64>() / n as f64;
                let y_mean: f64 = (0..n).map(|m| y[m * d + r]).sum::<f64>() / n as f64;
                g[d + r] += x_mean * y_mean;
            }
        }
        let factor = 2.0 * self.kappa() * n as f64 / count as f64;
        g[d..].iter_mut().for_each(|x| *x *= factor);
        g
    }
}

//! Samples of the prompt-attention model and the data constructions of spec 002: the synthetic
//! teacher data of §1.2 (with common random numbers across σ_p) and the orthogonal-block data
//! (C-orth) of §1.5 on which Assumption A2 holds exactly.

use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;

use super::model::{Attention, PromptModel, Trained};

/// N samples X_i ∈ ℝ^{n×d} with labels y_i and a frozen W ∈ ℝ^{d×d}.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptData {
    /// Tokens per sample n.
    pub n_tokens: usize,
    /// Token dimension d.
    pub d: usize,
    /// Number of samples N.
    pub samples: usize,
    /// X_i row-major at `x[i*n*d ..][..n*d]`.
    pub x: Vec<f64>,
    /// K_i = X_i W, same layout; `None` when W = I (then K_i = X_i and the model reads X_i once
    /// per pass instead of twice).
    keys: Option<Vec<f64>>,
    pub y: Vec<f64>,
}

impl PromptData {
    /// Data with W = I (so K_i = X_i), as in all of the paper's experiments.
    pub fn new(n_tokens: usize, d: usize, samples: usize, x: Vec<f64>, y: Vec<f64>) -> Self {
        assert!(n_tokens >= 1 && d >= 1 && samples >= 1, "empty data");
        assert_eq!(x.len(), samples * n_tokens * d, "X must be N × n × d");
        assert_eq!(y.len(), samples, "one label per sample");
        PromptData {
            n_tokens,
            d,
            samples,
            keys: None,
            x,
            y,
        }
    }

    /// Data with a general frozen W (row-major d × d): K_i = X_i W.
    pub fn with_w(
        n_tokens: usize,
        d: usize,
        samples: usize,
        x: Vec<f64>,
        w: &[f64],
        y: Vec<f64>,
    ) -> Self {
        let mut data = PromptData::new(n_tokens, d, samples, x, y);
        assert_eq!(w.len(), d * d, "W must be d × d");
        let wm = DMatrix::from_row_slice(d, d, w);
        let mut keys = vec![0.0; data.x.len()];
        for (k, xr) in keys.chunks_exact_mut(d).zip(data.x.chunks_exact(d)) {
            for (c, kc) in k.iter_mut().enumerate() {
                *kc = (0..d).map(|r| xr[r] * wm[(r, c)]).sum();
            }
        }
        data.keys = Some(keys);
        data
    }

    /// X_i (row-major n × d).
    pub fn tokens(&self, i: usize) -> &[f64] {
        let len = self.n_tokens * self.d;
        &self.x[i * len..(i + 1) * len]
    }

    /// K_i = X_i W (row-major n × d).
    pub fn keys(&self, i: usize) -> &[f64] {
        let len = self.n_tokens * self.d;
        match &self.keys {
            Some(k) => &k[i * len..(i + 1) * len],
            None => self.tokens(i),
        }
    }

    /// Whether W = I (K_i = X_i).
    pub fn identity_w(&self) -> bool {
        self.keys.is_none()
    }

    pub fn set_labels(&mut self, y: Vec<f64>) {
        assert_eq!(y.len(), self.samples, "one label per sample");
        self.y = y;
    }
}

fn gaussian_vec(rng: &mut impl Rng, len: usize, scale: f64) -> Vec<f64> {
    (0..len)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

/// The synthetic teacher–student data of spec §1.2: n = d tokens, X_i i.i.d. N(0, 1), W = I,
/// a teacher p_T = σ_p ξ_p, v_T = σ_v ξ_v shared by all samples, noiseless labels
/// y_i = φ(X_i p_T)ᵀX_i v_T (or the linear teacher's), and the student init p₀, v₀ ~ N(0, I/d).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Synthetic {
    pub d: usize,
    pub samples: usize,
    /// Standard deviation σ_p of the teacher's p (sets the teacher's attention sparsity).
    pub sigma_p: f64,
    pub sigma_v: f64,
    /// The teacher's attention (the paper's labels are always from a softmax teacher).
    pub teacher: Attention,
}

/// One draw of [`Synthetic`].
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticDraw {
    pub data: PromptData,
    /// The teacher's directions ξ_p, ξ_v (p_T = σ_p ξ_p, v_T = σ_v ξ_v): what an instance file
    /// stores, so that one file serves every σ_p.
    pub xi_p: Vec<f64>,
    pub xi_v: Vec<f64>,
    pub p_teacher: Vec<f64>,
    pub v_teacher: Vec<f64>,
    pub p0: Vec<f64>,
    pub v0: Vec<f64>,
}

impl Synthetic {
    /// Draws, in this order, X, then ξ_p and ξ_v, then (p₀, v₀): for a fixed RNG state only
    /// σ_p changes the teacher (common random numbers across σ_p, spec §1.2 step 3).
    pub fn draw(&self, rng: &mut impl Rng) -> SyntheticDraw {
        let (d, n) = (self.d, self.samples);
        let x = gaussian_vec(rng, n * d * d, 1.0);
        let xi_p = gaussian_vec(rng, d, 1.0);
        let xi_v = gaussian_vec(rng, d, 1.0);
        let (p0, v0) = student_start(d, rng);
        let tokens = PromptData::new(d, d, n, x, vec![0.0; n]);
        self.with_numbers(tokens, xi_p, xi_v, p0, v0)
    }

    /// The draw made of given numbers (e.g. a user's instance file): tokens X_i (any n, d; the
    /// labels of `tokens` are replaced by the teacher's), directions ξ_p, ξ_v ∈ ℝ^d and the
    /// student's start (p₀, v₀). The sizes are the data's; `self.d` and `self.samples` are not
    /// used.
    pub fn with_numbers(
        &self,
        tokens: PromptData,
        xi_p: Vec<f64>,
        xi_v: Vec<f64>,
        p0: Vec<f64>,
        v0: Vec<f64>,
    ) -> SyntheticDraw {
        let p_teacher: Vec<f64> = xi_p.iter().map(|x| self.sigma_p * x).collect();
        let v_teacher: Vec<f64> = xi_v.iter().map(|x| self.sigma_v * x).collect();
        let data = labelled(tokens, self.teacher, &p_teacher, &v_teacher);
        SyntheticDraw {
            data,
            xi_p,
            xi_v,
            p_teacher,
            v_teacher,
            p0,
            v0,
        }
    }
}

/// p₀, v₀ ~ N(0, I/d) (the synthetic student's start), drawn from `rng`.
pub fn student_start(d: usize, rng: &mut impl Rng) -> (Vec<f64>, Vec<f64>) {
    let init_scale = 1.0 / (d as f64).sqrt();
    let p0 = gaussian_vec(rng, d, init_scale);
    let v0 = gaussian_vec(rng, d, init_scale);
    (p0, v0)
}

/// The data with labels y_i = f(X_i; p, v) of the given attention.
pub fn labelled(data: PromptData, attention: Attention, p: &[f64], v: &[f64]) -> PromptData {
    let model = PromptModel::new(data, attention, Trained::PV);
    let y = model.outputs(p, v);
    let mut data = model.data().clone();
    data.set_labels(y);
    data
}

/// Orthogonal-block data (C-orth, spec §1.5) satisfying A2, K_iK_jᵀ = δ_ij I_n: d = nN, a
/// random orthogonal Q ∈ ℝ^{d×d} (QR of a Gaussian matrix, signs fixed by diag R > 0), and X_i
/// = rows in..(i+1)n of Qᵀ, with W = I. Labels are zero; set them with [`labelled`].
pub fn orthogonal_blocks(n_tokens: usize, samples: usize, rng: &mut impl Rng) -> PromptData {
    let d = n_tokens * samples;
    let g = DMatrix::from_column_slice(d, d, &gaussian_vec(rng, d * d, 1.0));
    let qr = g.qr();
    let (mut q, r) = (qr.q(), qr.r());
    for c in 0..d {
        if r[(c, c)] < 0.0 {
            q.column_mut(c).neg_mut();
        }
    }
    // Row k of Qᵀ is column k of Q.
    let x: Vec<f64> = (0..d)
        .flat_map(|k| q.column(k).iter().copied().collect::<Vec<_>>())
        .collect();
    PromptData::new(n_tokens, d, samples, x, vec![0.0; samples])
}

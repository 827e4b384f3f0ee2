//! The data models of spec 003 §1.3. Random generators draw from a caller-provided RNG, so a
//! seeded ChaCha gives the same instance on every platform.

use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::attention::data::{dot, TokenData};
use crate::attention::{Instance, TokenError};

/// Where the optimal token sits in its sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptPosition {
    /// Token 1, which is also the query.
    First,
    /// Uniform over the T positions, drawn per sequence.
    Random,
}

impl OptPosition {
    fn draw(self, t: usize, rng: &mut impl Rng) -> usize {
        match self {
            OptPosition::First => 0,
            OptPosition::Random => rng.random_range(0..t),
        }
    }
}

fn gaussian(rng: &mut impl Rng) -> f64 {
    rng.sample(StandardNormal)
}

/// Example 1 (Fig. 2): μ = m e₁, decoder u = e₁, y_i = ±1 uniform, x_{i,opt} = y_i μ + z,
/// other tokens z, with noise z ⟂ μ so that γ_{i,opt} = m and every other score is exactly 0
/// (Ass. 2 holds exactly, Δ_i = m, κ = 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example1 {
    pub n: usize,
    pub t: usize,
    pub d: usize,
    /// Signal strength m = ‖μ‖ > 0.
    pub signal: f64,
    /// Noise scale σ: z ~ N(0, σ²(I − e₁e₁ᵀ)).
    pub noise: f64,
    pub opt_position: OptPosition,
    /// `ex1-orth`: the nT noise vectors are an orthonormal set in e₁^⊥ scaled to σ√(d−1), so
    /// every non-optimal token is exactly orthogonal to every other token (needs d ≥ nT + 1).
    pub orthogonal: bool,
    /// Footnote 5: x_{i,opt} = y_iμ exactly (no noise on the optimal token), so the optimal
    /// tokens of the two classes are antipodal, x_{+,opt} = −x_{−,opt}.
    #[serde(default)]
    pub antipodal: bool,
    /// ω ≥ 0 (ex1-orth only): every non-optimal token gets ω·σ√(d−1)·e for one more
    /// orthonormal e ⟂ μ shared by all, so non-optimal tokens have pairwise cosine ω²/(1 + ω²)
    /// (breaks Ass. 1 while keeping Ass. 2 exact; needs d ≥ nT + 2). 0 draws nothing more.
    #[serde(default)]
    pub overlap: f64,
}

impl Example1 {
    /// The toolkit default `ex1`: n = 8, T = 4, d = 32, m = 1, σ = 1/√d.
    pub fn ex1() -> Self {
        let d = 32;
        Example1 {
            n: 8,
            t: 4,
            d,
            signal: 1.0,
            noise: 1.0 / (d as f64).sqrt(),
            opt_position: OptPosition::First,
            orthogonal: false,
            antipodal: false,
            overlap: 0.0,
        }
    }

    /// The default `ex1-orth`: as [`Example1::ex1`] with d = 48 and orthogonal noise.
    pub fn ex1_orth() -> Self {
        let d = 48;
        Example1 {
            d,
            noise: 1.0 / (d as f64).sqrt(),
            orthogonal: true,
            ..Self::ex1()
        }
    }

    pub fn generate(&self, rng: &mut impl Rng) -> Result<Instance, TokenError> {
        let (n, t, d) = (self.n, self.t, self.d);
        if n == 0 || t < 2 || d < 2 {
            return Err(TokenError::Invalid(format!(
                "ex1 needs n ≥ 1, T ≥ 2, d ≥ 2; got n = {n}, T = {t}, d = {d}"
            )));
        }
        if !(self.signal > 0.0 && self.signal.is_finite()) {
            return Err(TokenError::Invalid(format!(
                "signal must be positive (a zero signal ties every score), got {}",
                self.signal
            )));
        }
        if !(self.noise >= 0.0 && self.noise.is_finite()) {
            return Err(TokenError::Invalid(format!(
                "noise must be ≥ 0, got {}",
                self.noise
            )));
        }
        if !(self.overlap >= 0.0 && self.overlap.is_finite()) {
            return Err(TokenError::Invalid(format!(
                "overlap must be ≥ 0, got {}",
                self.overlap
            )));
        }
        if self.overlap > 0.0 && !self.orthogonal {
            return Err(TokenError::Invalid(
                "overlap needs the orthogonal (ex1-orth) noise".into(),
            ));
        }
        let shared = usize::from(self.overlap > 0.0);
        if self.orthogonal && d < n * t + 1 + shared {
            return Err(TokenError::Invalid(format!(
                "ex1-orth needs d ≥ nT + 1 = {} (one more with overlap), got d = {d}",
                n * t + 1
            )));
        }
        // the shared direction ω·σ√(d−1)·e of the non-optimal tokens (empty without overlap)
        let mut shared_e = Vec::new();
        let noise = if self.orthogonal {
            let basis = orthonormal_in_complement_of_e1(n * t + shared, d, rng);
            let scale = self.noise * ((d - 1) as f64).sqrt();
            let mut x: Vec<f64> = basis[..n * t * d].iter().map(|v| v * scale).collect();
            // e is drawn last, so that ω = 0 keeps every original draw
            shared_e = basis[n * t * d..]
                .iter()
                .map(|v| v * scale * self.overlap)
                .collect();
            if shared == 1 {
                for token in x.chunks_mut(d) {
                    token.iter_mut().zip(&shared_e).for_each(|(x, e)| *x += e);
                }
            }
            x
        } else {
            (0..n * t * d)
                .map(|k| {
                    if k % d == 0 {
                        0.0
                    } else {
                        self.noise * gaussian(rng)
                    }
                })
                .collect::<Vec<f64>>()
        };
        let mut x = noise;
        let mut y = Vec::with_capacity(n);
        let mut opt = Vec::with_capacity(n);
        for i in 0..n {
            let yi = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            let o = self.opt_position.draw(t, rng);
            let opt_token = &mut x[(i * t + o) * d..(i * t + o + 1) * d];
            if self.antipodal {
                opt_token.iter_mut().for_each(|x| *x = 0.0);
            } else {
                // e belongs to the non-optimal tokens only (a no-op without overlap)
                opt_token
                    .iter_mut()
                    .zip(&shared_e)
                    .for_each(|(x, e)| *x -= e);
            }
            opt_token[0] = yi * self.signal;
            y.push(yi);
            opt.push(o);
        }
        let mut decoder = vec![0.0; d];
        decoder[0] = 1.0;
        Ok(Instance {
            data: TokenData::new(n, t, d, x, y)?,
            decoder,
            opt,
        })
    }
}

/// The synthetic analogue of the paper's Fig. 9 (binary MNIST patches; spec 003 §5): each
/// sequence is T patches, one of them the signal of its class — s₀ for y = −1, s₁ for y = +1,
/// two fixed random unit vectors standing in for the 0/1 digits — at a uniformly random
/// position, the others Gaussian noise; the decoder is the fixed linear classifier u = s₁ − s₀
/// (the paper's classifier pre-trained on 0/1). The noise is drawn orthogonal to u, so every
/// noise patch scores exactly 0 and the signal patch scores y uᵀs_y = 1 − s₀ᵀs₁ > 0 in both
/// classes: Ass. 2 holds by construction. The query of a sequence is its first patch (the
/// family's convention), noise or signal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchSignals {
    pub n: usize,
    pub t: usize,
    pub d: usize,
    /// Noise scale σ: noise patches ~ N(0, σ²(I − ûûᵀ)).
    pub noise: f64,
}

impl PatchSignals {
    /// The toolkit default `patches`: n = 16 images of T = 6 patches in ℝ³², σ = 1/√d.
    pub fn patches() -> Self {
        let d = 32;
        PatchSignals {
            n: 16,
            t: 6,
            d,
            noise: 1.0 / (d as f64).sqrt(),
        }
    }

    pub fn generate(&self, rng: &mut impl Rng) -> Result<Instance, TokenError> {
        let (n, t, d) = (self.n, self.t, self.d);
        if n == 0 || t < 2 || d < 3 {
            return Err(TokenError::Invalid(format!(
                "patches need n ≥ 1, T ≥ 2, d ≥ 3; got n = {n}, T = {t}, d = {d}"
            )));
        }
        if !(self.noise >= 0.0 && self.noise.is_finite()) {
            return Err(TokenError::Invalid(format!(
                "noise must be ≥ 0, got {}",
                self.noise
            )));
        }
        let unit = |rng: &mut _| {
            let v: Vec<f64> = (0..d).map(|_| gaussian(rng)).collect();
            let norm = dot(&v, &v).sqrt();
            v.into_iter().map(|x| x / norm).collect::<Vec<f64>>()
        };
        let signals = [unit(rng), unit(rng)];
        let decoder: Vec<f64> = signals[1]
            .iter()
            .zip(&signals[0])
            .map(|(a, b)| a - b)
            .collect();
        let u_sq = dot(&decoder, &decoder);
        let mut x = Vec::with_capacity(n * t * d);
        let mut y = Vec::with_capacity(n);
        let mut opt = Vec::with_capacity(n);
        for _ in 0..n {
            let yi = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            let o = rng.random_range(0..t);
            for k in 0..t {
                if k == o {
                    x.extend_from_slice(&signals[usize::from(yi > 0.0)]);
                } else {
                    let mut z: Vec<f64> = (0..d).map(|_| self.noise * gaussian(rng)).collect();
                    // twice, so the residual along u is at rounding level of z, not of z·u
                    for _pass in 0..2 {
                        let c = dot(&z, &decoder) / u_sq;
                        z.iter_mut().zip(&decoder).for_each(|(z, u)| *z -= c * u);
                    }
                    x.extend(z);
                }
            }
            y.push(yi);
            opt.push(o);
        }
        Ok(Instance {
            data: TokenData::new(n, t, d, x, y)?,
            decoder,
            opt,
        })
    }
}

/// `count` orthonormal vectors of ℝ^d with first coordinate 0 (flat, count × d): modified
/// Gram–Schmidt with one re-orthogonalization pass, orthogonal to ≈ 1e−16.
fn orthonormal_in_complement_of_e1(count: usize, d: usize, rng: &mut impl Rng) -> Vec<f64> {
    let mut basis: Vec<f64> = Vec::with_capacity(count * d);
    for _ in 0..count {
        let mut v: Vec<f64> = (0..d)
            .map(|k| if k == 0 { 0.0 } else { gaussian(rng) })
            .collect();
        for _pass in 0..2 {
            for b in basis.chunks(d) {
                let c = dot(&v, b);
                v.iter_mut().zip(b).for_each(|(x, y)| *x -= c * y);
            }
        }
        let nv = dot(&v, &v).sqrt();
        basis.extend(v.iter().map(|x| x / nv));
    }
    basis
}

/// The two-token example (Sec. 3.3): n = 1, d = 2, x₁ = e₁ (optimal token and query), x₂ = e₂,
/// u = e₁, y = +1; γ = (1, 0), D = (e₁ − e₂)e₁ᵀ and W_mm = D/2.
pub fn two_token() -> Instance {
    let data = TokenData::new(1, 2, 2, vec![1.0, 0.0, 0.0, 1.0], vec![1.0])
        .expect("the two-token example is well formed");
    Instance {
        data,
        decoder: vec![1.0, 0.0],
        opt: vec![0],
    }
}

/// The bad-stationary-direction instance (App. C.1, spec 003 §1.3): d = 3, n = 2, T = 2,
/// X₁ = [e₁; e₂] with y₁ = +1, X₂ = [−e₁; e₃] with y₂ = −1, u = e₁; γ_i = (1, 0) and
/// W_mm = (2/3, −1/3, 1/3) e₁ᵀ.
pub fn bad_init() -> Instance {
    #[rustfmt::skip]
    let x = vec![
        1.0, 0.0, 0.0,   0.0, 1.0, 0.0,
        -1.0, 0.0, 0.0,  0.0, 0.0, 1.0,
    ];
    let data =
        TokenData::new(2, 2, 3, x, vec![1.0, -1.0]).expect("the bad-init instance is well formed");
    Instance {
        data,
        decoder: vec![1.0, 0.0, 0.0],
        opt: vec![0, 0],
    }
}

/// The bad direction W_bad = (e₂ + e₃)e₁ᵀ/√2 of [`bad_init`] (column-major vec), orthogonal to
/// W_mm; along R·W_bad the loss tends to (1 + e^{−1})/2 instead of L* = e^{−1}.
pub fn bad_direction() -> Vec<f64> {
    let s = std::f64::consts::FRAC_1_SQRT_2;
    let mut w = vec![0.0; 9];
    // column 0 holds W[·, 0]
    w[1] = s;
    w[2] = s;
    w
}

/// The joint-training model DM (Fig. 3): x_{i,opt} ~ N(0, σ_o² I), y_i = sign⟨u*, x_{i,opt}⟩,
/// the other T − 1 tokens ~ N(0, σ² I). The law is rotation invariant, so u* = e₁ loses no
/// generality.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussianJoint {
    pub n: usize,
    pub t: usize,
    pub d: usize,
    /// σ_o, the optimal token's scale.
    pub sigma_opt: f64,
    /// σ < σ_o (Cond. 1(ii): the optimal token has the larger norm).
    pub sigma: f64,
    pub opt_position: OptPosition,
}

impl GaussianJoint {
    /// The toolkit default `dm`: n = 6, T = 2, d = 64, σ_o = 1/√d, σ = 0.5/√d.
    pub fn dm() -> Self {
        let d = 64;
        let s = 1.0 / (d as f64).sqrt();
        GaussianJoint {
            n: 6,
            t: 2,
            d,
            sigma_opt: s,
            sigma: 0.5 * s,
            opt_position: OptPosition::First,
        }
    }

    pub fn generate(&self, rng: &mut impl Rng) -> Result<Instance, TokenError> {
        let (n, t, d) = (self.n, self.t, self.d);
        if n == 0 || t < 2 || d == 0 {
            return Err(TokenError::Invalid(format!(
                "DM needs n ≥ 1, T ≥ 2, d ≥ 1; got n = {n}, T = {t}, d = {d}"
            )));
        }
        if !(self.sigma_opt > 0.0 && self.sigma >= 0.0 && self.sigma_opt.is_finite()) {
            return Err(TokenError::Invalid(format!(
                "DM needs σ_o > 0 and σ ≥ 0, got σ_o = {}, σ = {}",
                self.sigma_opt, self.sigma
            )));
        }
        let mut x = vec![0.0; n * t * d];
        let mut y = Vec::with_capacity(n);
        let mut opt = Vec::with_capacity(n);
        for i in 0..n {
            let o = self.opt_position.draw(t, rng);
            for tok in 0..t {
                let scale = if tok == o { self.sigma_opt } else { self.sigma };
                for k in 0..d {
                    x[(i * t + tok) * d + k] = scale * gaussian(rng);
                }
            }
            y.push(if x[(i * t + o) * d] >= 0.0 { 1.0 } else { -1.0 });
            opt.push(o);
        }
        let mut decoder = vec![0.0; d];
        decoder[0] = 1.0;
        Ok(Instance {
            data: TokenData::new(n, t, d, x, y)?,
            decoder,
            opt,
        })
    }
}

//! The random datasets of spec 001 §5.1, drawn from a caller-provided RNG (a seeded ChaCha gives
//! the same instance on every platform): `random-A2` (equal non-optimal scores by
//! construction) and `random-A4` (the general-weights structure of Assumption 4).

use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use super::assumptions::{validate, AssumptionReport};
use crate::attention::{Instance, TokenData, TokenError};

fn gaussian(rng: &mut impl Rng) -> f64 {
    rng.sample(StandardNormal)
}

fn sign(rng: &mut impl Rng) -> f64 {
    if rng.random::<bool>() {
        1.0
    } else {
        -1.0
    }
}

/// random-A2 ("score channel"): decoder v = e_d, labels y_i = ±1 uniform, optimal token
/// uniform in \[L\] (catches indexing bugs), the first d − 1 coordinates of every token N(0, 1),
/// the last y_i(γ_nopt + Δ·1[l = opt]), queries z_i ~ N(0, I_d). So γ_{i,opt} = γ_nopt + Δ and
/// every other score is exactly γ_nopt (Assumption 2 holds exactly).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomA2 {
    pub n: usize,
    /// Tokens per sequence L ≥ 2.
    pub tokens: usize,
    /// Dimension d ≥ 2.
    pub d: usize,
    /// Score gap Δ > 0.
    pub delta: f64,
    /// Common non-optimal score γ_nopt.
    pub gamma_nopt: f64,
    /// z_{i,d} = 0: then B_{il,d} = 0 and β_d stays 0 in the diagonal flows.
    pub zero_last_query: bool,
}

impl Default for RandomA2 {
    /// Spec 001 §5.1 defaults: d = 5, n = 2, L = 3, Δ = 3, γ_nopt = 0.
    fn default() -> Self {
        RandomA2 {
            n: 2,
            tokens: 3,
            d: 5,
            delta: 3.0,
            gamma_nopt: 0.0,
            zero_last_query: false,
        }
    }
}

impl RandomA2 {
    /// One draw (no assumption beyond A2 is guaranteed; see [`first_valid`]).
    pub fn generate(&self, rng: &mut impl Rng) -> Result<Instance, TokenError> {
        let (n, t, d) = (self.n, self.tokens, self.d);
        if n == 0 || t < 2 || d < 2 {
            return Err(TokenError::Invalid(format!(
                "random-A2 needs n ≥ 1, L ≥ 2, d ≥ 2; got n = {n}, L = {t}, d = {d}"
            )));
        }
        if !(self.delta > 0.0 && self.delta.is_finite() && self.gamma_nopt.is_finite()) {
            return Err(TokenError::Invalid(format!(
                "random-A2 needs a finite Δ > 0 and a finite γ_nopt; got Δ = {}, γ_nopt = {}",
                self.delta, self.gamma_nopt
            )));
        }
        let mut x = vec![0.0; n * t * d];
        let mut y = Vec::with_capacity(n);
        let mut opt = Vec::with_capacity(n);
        let mut z = Vec::with_capacity(n * d);
        for i in 0..n {
            let label = sign(rng);
            let o = rng.random_range(0..t);
            for l in 0..t {
                let token = &mut x[(i * t + l) * d..(i * t + l + 1) * d];
                for v in &mut token[..d - 1] {
                    *v = gaussian(rng);
                }
                let score = self.gamma_nopt + if l == o { self.delta } else { 0.0 };
                token[d - 1] = label * score;
            }
            for k in 0..d {
                let q = gaussian(rng);
                z.push(if self.zero_last_query && k == d - 1 {
                    0.0
                } else {
                    q
                });
            }
            y.push(label);
            opt.push(o);
        }
        let mut decoder = vec![0.0; d];
        decoder[d - 1] = 1.0;
        Ok(Instance {
            data: TokenData::with_queries(n, t, d, x, y, z)?,
            decoder,
            opt,
        })
    }
}

/// random-A4: x_{i,opt} = a_i e_i, z_i = s_i b_i e_i (s_i = ±1), the non-optimal tokens in
/// pairs c·x_{i,opt} ± r with r ~ N(0, ρ²) on span(e_{n+1}, …, e_d), decoder
/// v = Σ_i t_i y_i e_i with t_i a_i = γ_opt: every sample has γ_{i,opt} = γ_opt and
/// γ_{i,nopt} = c γ_opt, so A2 and A4 hold exactly and A3 at W = 0 holds iff
/// (1 − c)γ_opt ≥ Δ*(n, L). The optimal token sits at a uniform position; the pairs are
/// consecutive among the others.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomA4 {
    pub n: usize,
    /// Tokens per sequence L (odd, ≥ 3).
    pub tokens: usize,
    /// Dimension d ≥ n + 1.
    pub d: usize,
    /// Optimal score γ_opt > 0 (t_i a_i).
    pub gamma_opt: f64,
    /// Pair constant c ∈ [−1, 1).
    pub c: f64,
    /// Scale ρ of the pair offsets r.
    pub offset_scale: f64,
}

impl Default for RandomA4 {
    /// toy-4's shape and scores: n = 2, L = 3, d = 4, γ_opt = 4, c = 0.2 (Δ = 3.2).
    fn default() -> Self {
        RandomA4 {
            n: 2,
            tokens: 3,
            d: 4,
            gamma_opt: 4.0,
            c: 0.2,
            offset_scale: 1.0,
        }
    }
}

impl RandomA4 {
    pub fn generate(&self, rng: &mut impl Rng) -> Result<Instance, TokenError> {
        let (n, t, d) = (self.n, self.tokens, self.d);
        if n == 0 || t < 3 || t % 2 == 0 || d < n + 1 {
            return Err(TokenError::Invalid(format!(
                "random-A4 needs n ≥ 1, odd L ≥ 3 and d ≥ n + 1; got n = {n}, L = {t}, d = {d}"
            )));
        }
        let valid = self.gamma_opt > 0.0
            && self.gamma_opt.is_finite()
            && (-1.0..1.0).contains(&self.c)
            && self.offset_scale > 0.0
            && self.offset_scale.is_finite();
        if !valid {
            return Err(TokenError::Invalid(format!(
                "random-A4 needs γ_opt > 0, c ∈ [−1, 1), ρ > 0; got {}, {}, {}",
                self.gamma_opt, self.c, self.offset_scale
            )));
        }
        let mut x = vec![0.0; n * t * d];
        let (mut y, mut opt) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut z = vec![0.0; n * d];
        let mut decoder = vec![0.0; d];
        for i in 0..n {
            let a = rng.random_range(0.5..2.0);
            let b = rng.random_range(0.5..2.0);
            let label = sign(rng);
            let o = rng.random_range(0..t);
            z[i * d + i] = sign(rng) * b;
            decoder[i] = label * self.gamma_opt / a;
            x[(i * t + o) * d + i] = a;
            let others: Vec<usize> = (0..t).filter(|&l| l != o).collect();
            for pair in others.chunks(2) {
                let r: Vec<f64> = (n..d).map(|_| self.offset_scale * gaussian(rng)).collect();
                for (&l, s) in pair.iter().zip([1.0, -1.0]) {
                    let token = &mut x[(i * t + l) * d..(i * t + l + 1) * d];
                    token[i] = self.c * a;
                    for (v, rk) in token[n..].iter_mut().zip(&r) {
                        *v = s * rk;
                    }
                }
            }
            y.push(label);
            opt.push(o);
        }
        Ok(Instance {
            data: TokenData::with_queries(n, t, d, x, y, z)?,
            decoder,
            opt,
        })
    }
}

/// Gaussian data (paper Sec. 3.1's remark, Tarzanagh et al. 2023a Thm 1): every token x_il, query
/// z_i and the decoder v i.i.d. N(0, I_d), labels y_i = ±1 uniform; the optimal token is the
/// argmax of γ_il = y_i vᵀx_il (unique with probability one; a tie is an error).
pub fn gaussian_instance(
    n: usize,
    tokens: usize,
    d: usize,
    rng: &mut impl Rng,
) -> Result<Instance, TokenError> {
    if n == 0 || tokens < 2 || d == 0 {
        return Err(TokenError::Invalid(format!(
            "Gaussian data need n ≥ 1, L ≥ 2, d ≥ 1; got n = {n}, L = {tokens}, d = {d}"
        )));
    }
    let x: Vec<f64> = (0..n * tokens * d).map(|_| gaussian(rng)).collect();
    let z: Vec<f64> = (0..n * d).map(|_| gaussian(rng)).collect();
    let y: Vec<f64> = (0..n).map(|_| sign(rng)).collect();
    let decoder: Vec<f64> = (0..d).map(|_| gaussian(rng)).collect();
    let data = TokenData::with_queries(n, tokens, d, x, y, z)?;
    let opt = data.optimal_tokens(&decoder, 1e-12)?;
    Ok(Instance { data, decoder, opt })
}

/// Draws until an instance satisfies A1, A1-diag and A3 at W(0) = 0 (spec 001 §5.1:
/// "check A1/A1-diag by LP and A3 at init; resample otherwise"); returns it with its
/// assumption report and the number of draws, or an error after `max_draws`.
pub fn first_valid(
    max_draws: usize,
    mut draw: impl FnMut() -> Result<Instance, TokenError>,
) -> Result<(Instance, AssumptionReport, usize), TokenError> {
    for k in 1..=max_draws {
        let inst = draw()?;
        let report = validate(&inst, None)
            .map_err(|e| TokenError::Invalid(format!("validating draw {k}: {e}")))?;
        if report.a1 && report.a1_diag && report.a3.slack >= 0.0 {
            return Ok((inst, report, k));
        }
    }
    Err(TokenError::Degenerate(format!(
        "no draw in {max_draws} satisfied A1, A1-diag and A3 at W = 0"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn random_a2_has_equal_non_optimal_scores_and_random_optimal_positions() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let gen = RandomA2 {
            n: 6,
            tokens: 4,
            gamma_nopt: -0.5,
            zero_last_query: true,
            ..RandomA2::default()
        };
        let inst = gen.generate(&mut rng).unwrap();
        let g = inst.data.scores(&inst.decoder);
        for i in 0..6 {
            for l in 0..4 {
                let want = if l == inst.opt[i] { 2.5 } else { -0.5 };
                assert!((g[i * 4 + l] - want).abs() < 1e-15);
            }
            assert_eq!(inst.data.query(i)[4], 0.0);
        }
        assert!(inst.opt.iter().any(|&o| o != inst.opt[0]), "{:?}", inst.opt);
        let report = validate(&inst, None).unwrap();
        assert!(report.a2_spread < 1e-15);
    }

    #[test]
    fn random_a4_satisfies_a2_and_a4_and_the_validators_see_it() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        // Δ = (1 − c)γ_opt = 8 ≥ Δ*(3, 5) = 5.45: A3 holds at W = 0
        let gen = RandomA4 {
            n: 3,
            tokens: 5,
            d: 6,
            gamma_opt: 10.0,
            ..RandomA4::default()
        };
        let (inst, report, draws) = first_valid(10, || gen.generate(&mut rng)).unwrap();
        assert_eq!(draws, 1);
        assert!(report.a2_spread < 1e-14);
        assert!(report.a4.holds(1e-12), "{:?}", report.a4);
        for c in report.a4.pair_constants.iter().flatten() {
            assert!((c - 0.2).abs() < 1e-12);
        }
        // Δ = 3.2 < Δ*(3, 5): A3 fails at W = 0 on every draw, so first_valid refuses
        let slow = RandomA4 {
            gamma_opt: 4.0,
            ..gen
        };
        let err = first_valid(3, || slow.generate(&mut rng)).unwrap_err();
        assert!(err.to_string().contains("A3"), "{err}");
        assert_eq!(inst.data.n, 3);
    }

    #[test]
    fn invalid_generator_settings_are_errors() {
        let mut rng = ChaCha20Rng::seed_from_u64(0);
        let even = RandomA4 {
            tokens: 4,
            ..RandomA4::default()
        };
        assert!(even.generate(&mut rng).is_err());
        let flat = RandomA2 {
            delta: 0.0,
            ..RandomA2::default()
        };
        assert!(flat.generate(&mut rng).is_err());
    }
}

//! Token data of spec 003 §1.1: n sequences X_i ∈ ℝ^{T×d} with labels y_i = ±1 and one query
//! per sequence (the first token unless given), token scores γ_{i,t} = y_i uᵀx_{i,t}, optimal
//! tokens, and the quantities of Assumptions 1–2 and Sec. 3.1.

use serde::Serialize;

use super::TokenError;
use crate::analysis::svm::{TokenProblem, TokenView};
use crate::stats;

/// n sequences of T tokens in ℝ^d, their labels and queries.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenData {
    pub n: usize,
    pub t: usize,
    pub d: usize,
    /// Tokens: x_{i,t} is `x[(i*T + t)*d ..][..d]`.
    pub x: Vec<f64>,
    /// Labels ±1.
    pub y: Vec<f64>,
    /// Queries: q_i is `queries[i*d ..][..d]`.
    pub queries: Vec<f64>,
}

/// A dataset with its decoder and the optimal token of each sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub data: TokenData,
    /// The fixed decoder u (ex1, two-token, bad-init) or the label direction u* (DM).
    pub decoder: Vec<f64>,
    /// The optimal token of each sequence by construction.
    pub opt: Vec<usize>,
}

impl TokenData {
    /// Data whose queries are the first tokens, q_i = x_{i,1} (spec 003 §1.1).
    pub fn new(n: usize, t: usize, d: usize, x: Vec<f64>, y: Vec<f64>) -> Result<Self, TokenError> {
        if n == 0 || t < 2 || d == 0 {
            return Err(TokenError::Invalid(format!(
                "need n ≥ 1, T ≥ 2, d ≥ 1; got n = {n}, T = {t}, d = {d}"
            )));
        }
        if x.len() != n * t * d {
            return Err(TokenError::Invalid(format!(
                "x has {} entries, expected n·T·d = {}",
                x.len(),
                n * t * d
            )));
        }
        let queries = (0..n)
            .flat_map(|i| x[i * t * d..i * t * d + d].to_vec())
            .collect();
        Self::with_queries(n, t, d, x, y, queries)
    }

    /// The data of a validated user problem (tokens, labels and queries; its decoder and
    /// optimal tokens stay with the problem).
    pub fn from_problem(p: &TokenProblem) -> Result<Self, TokenError> {
        Self::with_queries(p.n, p.t, p.d, p.x.clone(), p.y.clone(), p.queries.clone())
    }

    /// Data with explicit queries (n × d).
    pub fn with_queries(
        n: usize,
        t: usize,
        d: usize,
        x: Vec<f64>,
        y: Vec<f64>,
        queries: Vec<f64>,
    ) -> Result<Self, TokenError> {
        let check = |name: &str, len: usize, want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(TokenError::Invalid(format!(
                    "{name} has {len} entries, expected {want}"
                )))
            }
        };
        check("x", x.len(), n * t * d)?;
        check("y", y.len(), n)?;
        check("queries", queries.len(), n * d)?;
        if let Some(i) = y.iter().position(|&v| v != 1.0 && v != -1.0) {
            return Err(TokenError::Invalid(format!(
                "label y[{i}] = {} is not ±1",
                y[i]
            )));
        }
        if x.iter().chain(&queries).any(|v| !v.is_finite()) {
            return Err(TokenError::Invalid("tokens or queries not finite".into()));
        }
        Ok(TokenData {
            n,
            t,
            d,
            x,
            y,
            queries,
        })
    }

    /// Token x_{i,t}.
    pub fn token(&self, i: usize, t: usize) -> &[f64] {
        let start = (i * self.t + t) * self.d;
        &self.x[start..start + self.d]
    }

    /// Tokens of sequence i as a row-major T × d block.
    pub fn sequence(&self, i: usize) -> &[f64] {
        &self.x[i * self.t * self.d..(i + 1) * self.t * self.d]
    }

    /// Query q_i.
    pub fn query(&self, i: usize) -> &[f64] {
        &self.queries[i * self.d..(i + 1) * self.d]
    }

    /// The tokens, queries and shapes as the max-margin programs take them.
    pub fn view(&self) -> TokenView<'_> {
        TokenView {
            n: self.n,
            t: self.t,
            d: self.d,
            x: &self.x,
            queries: &self.queries,
        }
    }

    /// Token scores γ_{i,t} = y_i uᵀx_{i,t} (n × T, row-major) into `out`.
    pub fn scores_into(&self, u: &[f64], out: &mut [f64]) {
        for i in 0..self.n {
            for t in 0..self.t {
                out[i * self.t + t] = self.y[i] * dot(u, self.token(i, t));
            }
        }
    }

    /// Token scores γ (n × T, row-major).
    pub fn scores(&self, u: &[f64]) -> Vec<f64> {
        let mut g = vec![0.0; self.n * self.t];
        self.scores_into(u, &mut g);
        g
    }

    /// opt_i = argmax_t γ_{i,t} for each i; a tie within `rel_tol`·max|γ_i| is an error naming
    /// the sample (spec 003 Def. 1: ties are degenerate).
    pub fn optimal_tokens(&self, u: &[f64], rel_tol: f64) -> Result<Vec<usize>, TokenError> {
        let g = self.scores(u);
        (0..self.n)
            .map(|i| {
                let row = &g[i * self.t..(i + 1) * self.t];
                let best = argmax(row);
                let scale = stats::max_abs(row.iter());
                let tie = row
                    .iter()
                    .enumerate()
                    .any(|(t, &v)| t != best && row[best] - v <= rel_tol * scale);
                if tie || scale == 0.0 {
                    Err(TokenError::Degenerate(format!(
                        "sequence {i} has no unique optimal token (scores {row:?})"
                    )))
                } else {
                    Ok(best)
                }
            })
            .collect()
    }

    /// Assumption checks and the Sec. 3.1 constants for decoder u and optimal tokens `opt`.
    pub fn assumptions(&self, u: &[f64], opt: &[usize]) -> Assumptions {
        let g = self.scores(u);
        let (mut spread, mut scale) = (0.0f64, 0.0f64);
        let mut gaps = Vec::with_capacity(self.n);
        for i in 0..self.n {
            let row = &g[i * self.t..(i + 1) * self.t];
            let others = row.iter().enumerate().filter(|&(t, _)| t != opt[i]);
            let hi = stats::max(others.clone().map(|(_, &v)| v));
            let lo = stats::min(others.map(|(_, &v)| v));
            spread = stats::larger(spread, hi - lo);
            scale = stats::max_with(scale, row.iter().map(|v| v.abs()));
            gaps.push(row[opt[i]] - hi);
        }
        let token_bound =
            stats::max((0..self.n * self.t).map(|k| norm(&self.x[k * self.d..(k + 1) * self.d])));
        let gap_max = stats::max(gaps.iter());
        let gap_min = stats::min(gaps.iter());
        Assumptions {
            rho_orth: self.max_nonopt_cosine(opt),
            nonopt_score_spread: spread,
            score_scale: scale,
            token_bound,
            gaps,
            gap_max,
            gap_min,
            kappa: gap_max / gap_min,
        }
    }

    /// ρ_orth = max |cos∠(x_{i,t}, x_{j,τ})| over non-optimal x_{i,t} and every other token
    /// (Ass. 1a as made checkable in spec 003 §4.1).
    pub fn max_nonopt_cosine(&self, opt: &[usize]) -> f64 {
        let tokens = self.n * self.t;
        let norms: Vec<f64> = (0..tokens)
            .map(|k| norm(&self.x[k * self.d..(k + 1) * self.d]))
            .collect();
        let mut worst = 0.0f64;
        for a in 0..tokens {
            if a % self.t == opt[a / self.t] {
                continue;
            }
            for b in 0..tokens {
                if b == a || norms[a] == 0.0 || norms[b] == 0.0 {
                    continue;
                }
                let xa = &self.x[a * self.d..(a + 1) * self.d];
                let xb = &self.x[b * self.d..(b + 1) * self.d];
                worst = stats::larger(worst, (dot(xa, xb) / (norms[a] * norms[b])).abs());
            }
        }
        worst
    }
}

/// Ass. 1–2 diagnostics and the Sec. 3.1 constants (spec 003 §1.1, §4.1) except Γ, which needs
/// the W-SVM.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assumptions {
    /// Ass. 1a: largest |cosine| between a non-optimal token and any other token.
    pub rho_orth: f64,
    /// Ass. 2: max_i (max − min of the non-optimal scores); 0 when Ass. 2 holds exactly.
    pub nonopt_score_spread: f64,
    /// max |γ_{i,t}|, the scale `nonopt_score_spread` is judged against.
    pub score_scale: f64,
    /// B = max ‖x_{i,t}‖.
    pub token_bound: f64,
    /// Δ_i = γ_{i,opt} − max_{t≠opt} γ_{i,t}.
    pub gaps: Vec<f64>,
    pub gap_max: f64,
    pub gap_min: f64,
    /// κ = Δ̄/Δ̲.
    pub kappa: f64,
}

impl Assumptions {
    /// Whether Ass. 2 holds to `rel_tol` · max|γ| (spec 003 §4.1 uses 1e−12).
    pub fn equal_nonopt_scores(&self, rel_tol: f64) -> bool {
        self.nonopt_score_spread <= rel_tol * self.score_scale
    }
}

pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub(crate) fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// Index of the first largest entry.
pub(crate) fn argmax(v: &[f64]) -> usize {
    v.iter()
        .enumerate()
        .fold(0, |best, (k, &x)| if x > v[best] { k } else { best })
}

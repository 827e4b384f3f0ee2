//! One attention head f(X) = smax(X A Xᵀ) X M with square loss on a fixed training set
//! (spec 004 §1.2 eq. 1, §1.5, §2.2): L̃ = (1/N) Σ_s κ ‖F_s − Y_s‖_F².
//!
//! - [`AttentionHead`]: the loss as a [`BetaLoss`] for any linear [`ScoreValueMap`]
//!   β ↦ (A, M), with exact gradient and Hessian-vector product (the shared `kernel`);
//! - [`DiagonalScores`]: A = diag(a), M = diag(c), β = [a; c] (p = 2d): the diagonal head of
//!   the theory, with index r ∈ \[0, d) = KQ\[r\] and d + r = VO\[r\];
//! - [`MatrixScores`]: full A, M (β = [vec A; vec M], p = 2d²), the products W_K W_Qᵀ and
//!   W_V W_Oᵀ of [`FactorizedAttention`] (spec §5.4).
//!
//! Large sample sets are split into a fixed number of chunks evaluated in parallel (rayon),
//! each with its own scratch; the chunking does not depend on the thread count, so results are
//! reproducible bit for bit.

mod diagonal;
mod factorized;
mod kernel;

pub use diagonal::{DiagonalAttention, DiagonalScores};
pub use factorized::{FactorizedAttention, MatrixAttention, MatrixScores};

use std::ops::Range;
use std::sync::Mutex;

use rand::Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;

use super::network::BetaLoss;
use super::DiagonalError;
use kernel::SampleWork;

/// A linear map from the parameters β to the scores S = X A(β) Xᵀ (n×n) and values
/// V = X M(β) (n×d) of one sample, and its adjoint.
pub trait ScoreValueMap: Sync {
    /// Token dimension d.
    fn d(&self) -> usize;
    /// Number of parameters p.
    fn p(&self) -> usize;
    /// Writes S and V for the sample X (n×d, row-major); `work` has n·d entries.
    fn forward(
        &self,
        beta: &[f64],
        x: &[f64],
        n: usize,
        s: &mut [f64],
        v: &mut [f64],
        work: &mut [f64],
    );
    /// Adds to `grad` the pull-back of (dS, dV): ∂/∂β of ⟨dS, S(β)⟩ + ⟨dV, V(β)⟩.
    fn adjoint(
        &self,
        x: &[f64],
        n: usize,
        ds: &[f64],
        dv: &[f64],
        grad: &mut [f64],
        work: &mut [f64],
    );
    /// Display name of parameter i.
    fn coordinate_name(&self, i: usize) -> String;
}

/// Normalization κ of the per-sample squared error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossScale {
    /// κ = 1/(n d): PyTorch `MSELoss` mean reduction (spec §5.1 default).
    Mean,
    /// κ = ½: half the summed squared error.
    HalfSum,
}

impl LossScale {
    pub fn kappa(self, n: usize, d: usize) -> f64 {
        match self {
            LossScale::Mean => 1.0 / (n * d) as f64,
            LossScale::HalfSum => 0.5,
        }
    }
}

/// A fixed training set of N samples X_s, Y_s ∈ ℝ^{n×d} (row-major, concatenated).
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionSamples {
    pub n: usize,
    pub d: usize,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
}

impl AttentionSamples {
    pub fn new(n: usize, d: usize, x: Vec<f64>, y: Vec<f64>) -> Result<Self, DiagonalError> {
        let size = n * d;
        if size == 0 || x.is_empty() || !x.len().is_multiple_of(size) || y.len() != x.len() {
            return Err(DiagonalError::Invalid(format!(
                "samples must be n×d = {n}×{d} blocks with as many labels as inputs \
                 (got {} and {} values)",
                x.len(),
                y.len()
            )));
        }
        if x.iter().chain(&y).any(|v| !v.is_finite()) {
            return Err(DiagonalError::Invalid("non-finite sample value".into()));
        }
        Ok(AttentionSamples { n, d, x, y })
    }

    /// N i.i.d. standard Gaussian inputs X_s ∈ ℝ^{n×d} (spec §1.5), concatenated.
    pub fn gaussian_inputs(count: usize, n: usize, d: usize, rng: &mut impl Rng) -> Vec<f64> {
        (0..count * n * d)
            .map(|_| rng.sample::<f64, _>(StandardNormal))
            .collect()
    }

    /// The inputs with labels Y_s = f(X_s; β*) of a teacher head (spec §1.5).
    pub fn from_teacher<M: ScoreValueMap>(
        map: &M,
        teacher: &[f64],
        n: usize,
        x: Vec<f64>,
    ) -> Result<Self, DiagonalError> {
        let d = map.d();
        if teacher.len() != map.p() {
            return Err(DiagonalError::Invalid(format!(
                "teacher has {} parameters, the map {}",
                teacher.len(),
                map.p()
            )));
        }
        let mut y = vec![0.0; x.len()];
        let mut chunk = Chunk::new(n, d, map.p());
        for (xs, ys) in x.chunks(n * d).zip(y.chunks_mut(n * d)) {
            chunk.scores(map, teacher, xs);
            chunk.work.output(&chunk.s, &chunk.v, ys);
        }
        Self::new(n, d, x, y)
    }

    /// Number of samples N.
    pub fn count(&self) -> usize {
        self.x.len() / (self.n * self.d)
    }

    pub fn x_of(&self, s: usize) -> &[f64] {
        let size = self.n * self.d;
        &self.x[s * size..(s + 1) * size]
    }

    pub fn y_of(&self, s: usize) -> &[f64] {
        let size = self.n * self.d;
        &self.y[s * size..(s + 1) * size]
    }
}

/// Scratch and accumulators of one chunk of samples.
#[derive(Debug)]
struct Chunk {
    n: usize,
    s: Vec<f64>,
    v: Vec<f64>,
    dir_s: Vec<f64>,
    dir_v: Vec<f64>,
    nd: Vec<f64>,
    work: SampleWork,
    acc: Vec<f64>,
    loss: f64,
}

impl Chunk {
    fn new(n: usize, d: usize, p: usize) -> Self {
        Chunk {
            n,
            s: vec![0.0; n * n],
            v: vec![0.0; n * d],
            dir_s: vec![0.0; n * n],
            dir_v: vec![0.0; n * d],
            nd: vec![0.0; n * d],
            work: SampleWork::new(n, d),
            acc: vec![0.0; p],
            loss: 0.0,
        }
    }

    fn scores<M: ScoreValueMap>(&mut self, map: &M, beta: &[f64], x: &[f64]) {
        map.forward(beta, x, self.n, &mut self.s, &mut self.v, &mut self.nd);
    }
}

/// What one pass over the samples computes.
#[derive(Clone, Copy)]
enum Pass<'a> {
    Loss,
    Gradient,
    Hvp(&'a [f64]),
}

/// Work (multiply-adds) above which the samples are split into chunks evaluated in parallel.
const PARALLEL_WORK: usize = 2_000_000;
/// Number of chunks of a parallel evaluation (fixed, for reproducible sums).
const CHUNKS: usize = 16;

/// The square-loss attention head on a training set, as a β-loss (spec §2.2).
#[derive(Debug)]
pub struct AttentionHead<M> {
    samples: AttentionSamples,
    kappa: f64,
    map: M,
    ranges: Vec<Range<usize>>,
    chunks: Vec<Mutex<Chunk>>,
}

impl<M: ScoreValueMap> AttentionHead<M> {
    /// The head with parameter map `map` on `samples`, per-sample weight κ.
    pub fn new(map: M, samples: AttentionSamples, kappa: f64) -> Result<Self, DiagonalError> {
        if samples.d != map.d() || !(kappa.is_finite() && kappa > 0.0) {
            return Err(DiagonalError::Invalid(format!(
                "samples have d = {} but the map d = {}, or κ = {kappa} is not positive",
                samples.d,
                map.d()
            )));
        }
        let (n, d, count) = (samples.n, samples.d, samples.count());
        let work = count * n * d * (n + d);
        let pieces = if work >= PARALLEL_WORK {
            CHUNKS.min(count)
        } else {
            1
        };
        let ranges: Vec<Range<usize>> = (0..pieces)
            .map(|c| c * count / pieces..(c + 1) * count / pieces)
            .collect();
        let chunks = (0..pieces)
            .map(|_| Mutex::new(Chunk::new(n, d, map.p())))
            .collect();
        Ok(AttentionHead {
            samples,
            kappa,
            map,
            ranges,
            chunks,
        })
    }

    pub fn samples(&self) -> &AttentionSamples {
        &self.samples
    }

    pub fn kappa(&self) -> f64 {
        self.kappa
    }

    pub fn map(&self) -> &M {
        &self.map
    }

    /// The head's output F = smax(X A Xᵀ) X M for sample X (n×d) at β.
    pub fn output(&self, beta: &[f64], x: &[f64]) -> Vec<f64> {
        let (n, d) = (self.samples.n, self.samples.d);
        let mut chunk = Chunk::new(n, d, self.map.p());
        chunk.scores(&self.map, beta, x);
        let mut out = vec![0.0; n * d];
        chunk.work.output(&chunk.s, &chunk.v, &mut out);
        out
    }

    /// One chunk of a pass: its loss and (for gradient or hvp) accumulated vector.
    fn run_chunk(&self, chunk: &mut Chunk, range: Range<usize>, beta: &[f64], pass: Pass) {
        let n = self.samples.n;
        let coef = 2.0 * self.kappa / self.samples.count() as f64;
        chunk.loss = 0.0;
        chunk.acc.iter_mut().for_each(|a| *a = 0.0);
        for s in range {
            let (x, y) = (self.samples.x_of(s), self.samples.y_of(s));
            chunk.scores(&self.map, beta, x);
            chunk.loss += chunk.work.forward(&chunk.s, &chunk.v, y, coef);
            match pass {
                Pass::Loss => {}
                Pass::Gradient => {
                    chunk.work.backward(&chunk.v);
                    let w = &chunk.work;
                    self.map
                        .adjoint(x, n, &w.ds, &w.dv, &mut chunk.acc, &mut chunk.nd);
                }
                Pass::Hvp(dir) => {
                    chunk.work.backward(&chunk.v);
                    self.map
                        .forward(dir, x, n, &mut chunk.dir_s, &mut chunk.dir_v, &mut chunk.nd);
                    chunk
                        .work
                        .second_order(&chunk.v, &chunk.dir_s, &chunk.dir_v, coef);
                    let w = &chunk.work;
                    self.map
                        .adjoint(x, n, &w.dir_ds, &w.dir_dv, &mut chunk.acc, &mut chunk.nd);
                }
            }
        }
    }

    /// Runs a pass over all samples; sums the chunk results in a fixed order into `out` (if
    /// given) and returns the loss.
    fn pass(&self, beta: &[f64], pass: Pass, out: Option<&mut [f64]>) -> f64 {
        let job = |c: usize| {
            let mut chunk = self.chunks[c].lock().expect("chunk scratch poisoned");
            self.run_chunk(&mut chunk, self.ranges[c].clone(), beta, pass);
        };
        if self.chunks.len() == 1 {
            job(0);
        } else {
            (0..self.chunks.len()).into_par_iter().for_each(job);
        }
        let mut loss = 0.0;
        let mut out = out;
        if let Some(o) = out.as_deref_mut() {
            o.iter_mut().for_each(|x| *x = 0.0);
        }
        for chunk in &self.chunks {
            let chunk = chunk.lock().expect("chunk scratch poisoned");
            loss += chunk.loss;
            if let Some(o) = out.as_deref_mut() {
                o.iter_mut().zip(&chunk.acc).for_each(|(x, a)| *x += a);
            }
        }
        loss
    }
}

impl<M: ScoreValueMap> BetaLoss for AttentionHead<M> {
    fn p(&self) -> usize {
        self.map.p()
    }

    fn loss(&self, beta: &[f64]) -> f64 {
        self.pass(beta, Pass::Loss, None)
    }

    fn grad_beta(&self, beta: &[f64], out: &mut [f64]) {
        self.pass(beta, Pass::Gradient, Some(out));
    }

    fn hvp_beta(&self, beta: &[f64], dir: &[f64], out: &mut [f64]) {
        self.pass(beta, Pass::Hvp(dir), Some(out));
    }

    fn coordinate_name(&self, i: usize) -> String {
        self.map.coordinate_name(i)
    }
}

#[cfg(test)]
mod tests;

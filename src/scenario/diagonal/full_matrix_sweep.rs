//! The numerics of `full-matrix-rank`: the low-rank student–teacher instance of spec 004 §5.4
//! and one exact gradient-flow run of the full-matrix head per init scale s, with the spectra of
//! Δ(W_K W_Qᵀ) and Δ(W_V W_Oᵀ) along it and the emergence times of their singular values
//! (root-finding events, so they are not limited by the output grid).

use nalgebra::DMatrix;
use rand_distr::{Distribution, StandardNormal};

use crate::analysis::spectra::SingularSpectrum;
use crate::flow::{integrate, norm, Descent, Events, GradientFlow, OdeConfig, SolverStats};
use crate::instance::diagonal::{FullMatrixData, LowRankTeacher};
use crate::models::diagonal::{
    AttentionSamples, BetaLoss, FactorizedAttention, LossScale, MatrixAttention, MatrixScores,
};
use crate::scenario::{RunContext, RunError};

use super::common::{DATA_STREAM, FIRST_FREE_STREAM, INIT_STREAM};

/// The two products whose updates the paper's Figs. 1, 4, 6, 7 follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    /// W_K W_Qᵀ (the score matrix A).
    Kq,
    /// W_V W_Oᵀ (the value–output matrix M).
    Vo,
}

impl Product {
    pub const BOTH: [Product; 2] = [Product::Kq, Product::Vo];

    pub fn name(self) -> &'static str {
        match self {
            Product::Kq => "KQ",
            Product::Vo => "VO",
        }
    }

    fn of(self, flow: &FactorizedAttention, theta: &[f64]) -> DMatrix<f64> {
        match self {
            Product::Kq => flow.kq_product(theta),
            Product::Vo => flow.vo_product(theta),
        }
    }
}

/// The instance: sizes, the inputs, the teacher products and their singular values
/// (descending).
pub struct Instance {
    pub d: usize,
    pub d_h: usize,
    pub tokens: usize,
    pub samples: usize,
    /// The inputs X, row-major (N, n, d); labels are the teacher's outputs on them.
    x: Vec<f64>,
    /// (A*, M*) and their nonzero singular values, indexed like [`Product::BOTH`].
    pub teacher: [DMatrix<f64>; 2],
    pub teacher_sigma: [Vec<f64>; 2],
    /// The teacher's singular frames (U, V) (d×rank each), to tell which teacher mode a
    /// singular value of Δ belongs to.
    frames: [(DMatrix<f64>, DMatrix<f64>); 2],
}

impl Instance {
    /// Teacher products U diag(σ) Vᵀ with Haar-random orthonormal frames U, V ∈ ℝ^{d×r} drawn
    /// from the scenario's first free stream (so they do not depend on the data or the init),
    /// and N Gaussian inputs from the data stream.
    pub fn new(
        (d, d_h, tokens, samples): (usize, usize, usize, usize),
        sigma_kq: &[f64],
        sigma_vo: &[f64],
        ctx: &RunContext,
    ) -> Self {
        let mut rng = ctx.rng(FIRST_FREE_STREAM);
        let mut teacher = |sigma: &[f64]| {
            let mut frame = || {
                DMatrix::<f64>::from_fn(d, sigma.len(), |_, _| StandardNormal.sample(&mut rng))
                    .qr()
                    .q()
            };
            let (u, v) = (frame(), frame());
            LowRankTeacher {
                u,
                sigma: sigma.to_vec(),
                v,
            }
        };
        let teachers = [teacher(sigma_kq), teacher(sigma_vo)];
        let x = AttentionSamples::gaussian_inputs(samples, tokens, d, &mut ctx.rng(DATA_STREAM));
        Self::from_data(
            &FullMatrixData {
                count: samples,
                n: tokens,
                d,
                x,
                teacher: teachers,
            },
            d_h,
        )
    }

    /// The instance of a data file (or of the draws of [`Instance::new`]) with head dimension
    /// d_h.
    pub fn from_data(data: &FullMatrixData, d_h: usize) -> Self {
        Instance {
            d: data.d,
            d_h,
            tokens: data.n,
            samples: data.count,
            x: data.x.clone(),
            teacher: data.teacher.each_ref().map(LowRankTeacher::product),
            teacher_sigma: data.teacher.each_ref().map(|t| t.sigma.clone()),
            frames: data.teacher.each_ref().map(|t| (t.u.clone(), t.v.clone())),
        }
    }

    /// The data, as `instance.npz` holds it.
    pub fn data(&self) -> FullMatrixData {
        let teacher = |i: usize| LowRankTeacher {
            u: self.frames[i].0.clone(),
            sigma: self.teacher_sigma[i].clone(),
            v: self.frames[i].1.clone(),
        };
        FullMatrixData {
            count: self.samples,
            n: self.tokens,
            d: self.d,
            x: self.x.clone(),
            teacher: [teacher(0), teacher(1)],
        }
    }

    /// The factorized head on the N inputs labelled by the teacher, with the MSE normalization
    /// κ = 1/(n d) of spec §5.1. Deterministic: every call builds the same head, so parallel
    /// runs each own one.
    pub fn flow(&self) -> Result<FactorizedAttention, RunError> {
        let failed = |e| RunError::Other(format!("building the student–teacher head: {e}"));
        let map = MatrixScores { d: self.d };
        // β* = [vec A*; vec M*], row-major
        let teacher: Vec<f64> = self
            .teacher
            .iter()
            .flat_map(|p| p.transpose().as_slice().to_vec())
            .collect();
        let samples = AttentionSamples::from_teacher(&map, &teacher, self.tokens, self.x.clone())
            .map_err(failed)?;
        let head = MatrixAttention::new(map, samples, LossScale::Mean.kappa(self.tokens, self.d))
            .map_err(failed)?;
        Ok(FactorizedAttention::new(head, self.d_h))
    }

    /// θ_1 with entries N(0, 1/d) from the init stream; run s starts at s·θ_1.
    pub fn unit_init(&self, flow: &FactorizedAttention, ctx: &RunContext) -> Vec<f64> {
        flow.default_init(&mut ctx.rng(INIT_STREAM))
    }

    /// The share u_kᵀ Δ v_k / σ*_k of each teacher mode k of product p in Δ.
    pub fn mode_shares(&self, p: Product, delta: &DMatrix<f64>) -> Vec<f64> {
        let (u, v) = &self.frames[p as usize];
        let sigma = &self.teacher_sigma[p as usize];
        (0..sigma.len())
            .map(|k| (u.column(k).transpose() * delta * v.column(k))[(0, 0)] / sigma[k])
            .collect()
    }

    /// The emergence threshold τ = fraction·min_j σ*_j of product p. One level for all modes,
    /// so that t_j is when the numerical rank of Δ at τ reaches j, whichever teacher mode comes
    /// first: the KQ modes need not emerge in the order of the teacher's singular values (their
    /// rates depend on how A*'s singular vectors meet M*), and a per-mode level f·σ*_j would then
    /// time the j-th singular value of Δ against the wrong mode.
    pub fn threshold(&self, p: Product, fraction: f64) -> f64 {
        let sigma = &self.teacher_sigma[p as usize];
        fraction * sigma[sigma.len() - 1]
    }

    /// Singular values g_j of ∇_M L̃ at A = M = 0, descending: with A = 0 the attention is
    /// uniform and M solves a linear regression, so VO mode j of a small init grows like
    /// s² e^{2 g_j t} and emerges at t_j = ln(1/s)/g_j + O(1) (spec §5.4 analysis).
    pub fn vo_rates_at_zero(&self, flow: &FactorizedAttention) -> Result<Vec<f64>, RunError> {
        let d = self.d;
        let head = flow.head();
        let mut grad = vec![0.0; head.p()];
        head.grad_beta(&vec![0.0; head.p()], &mut grad);
        let g_m = DMatrix::from_row_slice(d, d, &grad[d * d..]);
        Ok(spectrum(&g_m)?.values().to_vec())
    }
}

fn spectrum(m: &DMatrix<f64>) -> Result<SingularSpectrum, RunError> {
    SingularSpectrum::of(m).map_err(|e| RunError::Other(format!("singular values: {e}")))
}

/// The first time σ_j(Δ) reaches the product's emergence threshold τ (the numerical rank of Δ
/// at level τ becomes j), and the size of the next singular value then.
#[derive(Debug, Clone, Copy)]
pub struct Emergence {
    pub t: f64,
    /// σ_{j+1}(Δ(t))/τ (NaN for the last teacher mode): how far the next mode has already grown
    /// when this one emerges (0 for perfectly sequential emergence, < 1 whenever t_j < t_{j+1}).
    pub leak: f64,
    pub loss: f64,
    /// Which teacher mode (0-based, in decreasing σ*) this singular value of Δ belongs to: the
    /// not yet emerged mode with the largest share u_kᵀΔv_k/σ*_k at t_j.
    pub mode: usize,
}

/// One run at init scale s.
pub struct ScaleRun {
    pub scale: f64,
    pub t: Vec<f64>,
    pub loss: Vec<f64>,
    /// Per product: the top singular values of Δ at each sample (`top` of them).
    pub sigma: [Vec<Vec<f64>>; 2],
    /// Per product: the stable rank of Δ at each sample (0 at t = 0).
    pub stable_rank: [Vec<f64>; 2],
    /// Per product and teacher mode j: its emergence, if it happened before t_end.
    pub emergence: [Vec<Option<Emergence>>; 2],
    /// Per product: stable rank of the initial velocity Δ̇(0) (the t → 0 limit of sr(Δ(t))).
    pub initial_velocity_rank: [f64; 2],
    /// Per product: stable rank of teacher − product(0), the final Δ if the flow reaches the
    /// teacher (the global minimum; the products are identifiable from the data).
    pub predicted_final_rank: [f64; 2],
    /// Per product: ‖P(T) − P*‖_F / ‖P*‖_F.
    pub teacher_error: [f64; 2],
    /// Largest Hessian eigenvalue at θ(T) (power iteration on the exact hvp).
    pub lambda_max: f64,
    pub stats: SolverStats,
}

impl ScaleRun {
    /// Number of orders of magnitude the loss fell: log10(L(0)/L(T)).
    pub fn loss_orders(&self) -> f64 {
        (self.loss[0] / self.loss[self.loss.len() - 1]).log10()
    }
}

/// What one run needs besides the scale.
pub struct RunSpec<'a> {
    pub instance: &'a Instance,
    pub unit_init: &'a [f64],
    /// Output times (t = 0 first).
    pub times: &'a [f64],
    pub fraction: f64,
    pub top: usize,
    pub power_iterations: usize,
    pub ode: OdeConfig,
}

/// Integrates the exact gradient flow from s·θ_1 and measures the spectra of Δ on the output
/// grid and the emergence times by events g_j = σ_j(Δ) − τ, τ = fraction·min_j σ*_j.
pub fn run_scale(spec: &RunSpec, scale: f64) -> Result<ScaleRun, RunError> {
    let inst = spec.instance;
    let flow = inst.flow()?;
    let theta0: Vec<f64> = spec.unit_init.iter().map(|x| scale * x).collect();
    let start = Product::BOTH.map(|p| p.of(&flow, &theta0));
    let delta = |p: Product, theta: &[f64]| p.of(&flow, theta) - &start[p as usize];
    let ranks = inst.teacher_sigma.each_ref().map(Vec::len);
    let event_fn = |theta: &[f64], out: &mut [f64]| {
        let mut k = 0;
        for p in Product::BOTH {
            // a failed decomposition (non-finite state) leaves NaN; the solver reports the state
            let values = SingularSpectrum::of(&delta(p, theta))
                .map(|s| s.values().to_vec())
                .unwrap_or_default();
            let level = inst.threshold(p, spec.fraction);
            for j in 0..inst.teacher_sigma[p as usize].len() {
                out[k] = values.get(j).copied().unwrap_or(f64::NAN) - level;
                k += 1;
            }
        }
    };
    let roots = |_t: f64, theta: &[f64], out: &mut [f64]| event_fn(theta, out);
    let events = Events {
        count: ranks[0] + ranks[1],
        func: &roots,
        terminal: false,
    };
    let traj = integrate(
        &Descent(&flow),
        &theta0,
        spec.times,
        &spec.ode,
        Some(&events),
    )?;

    let mut run = ScaleRun {
        scale,
        t: traj.t.clone(),
        loss: Vec::with_capacity(traj.len()),
        sigma: [Vec::new(), Vec::new()],
        stable_rank: [Vec::new(), Vec::new()],
        emergence: ranks.map(|r| vec![None; r]),
        initial_velocity_rank: [0.0; 2],
        predicted_final_rank: [0.0; 2],
        teacher_error: [0.0; 2],
        lambda_max: 0.0,
        stats: traj.stats.clone(),
    };
    for k in 0..traj.len() {
        let theta = traj.state(k);
        let loss = flow.loss(theta);
        if !loss.is_finite() {
            return Err(RunError::Other(format!(
                "s = {scale}: non-finite loss at t = {}",
                traj.t[k]
            )));
        }
        run.loss.push(loss);
        for p in Product::BOTH {
            let sp = spectrum(&delta(p, theta))?;
            run.stable_rank[p as usize].push(sp.stable_rank());
            let mut top: Vec<f64> = sp.values().iter().take(spec.top).copied().collect();
            top.resize(spec.top, 0.0);
            run.sigma[p as usize].push(top);
        }
    }
    // the first crossing of each event function is upward, since σ_j(Δ(0)) = 0
    let mut offset = 0;
    for p in Product::BOTH {
        let rank = inst.teacher_sigma[p as usize].len();
        let level = inst.threshold(p, spec.fraction);
        let mut assigned = vec![false; rank];
        for j in 0..rank {
            let Some(ev) = traj.events.iter().find(|e| e.index == offset + j) else {
                continue;
            };
            let change = delta(p, &ev.state);
            let values = spectrum(&change)?.values().to_vec();
            let shares = inst.mode_shares(p, &change);
            let mode = (0..rank)
                .filter(|&k| !assigned[k])
                .max_by(|&a, &b| shares[a].abs().total_cmp(&shares[b].abs()))
                .unwrap_or(j);
            assigned[mode] = true;
            let leak = if j + 1 < rank {
                values[j + 1] / level
            } else {
                f64::NAN
            };
            run.emergence[p as usize][j] = Some(Emergence {
                t: ev.t,
                leak,
                loss: flow.loss(&ev.state),
                mode,
            });
        }
        offset += rank;
    }
    let final_theta = traj.last_state();
    for p in Product::BOTH {
        let i = p as usize;
        let teacher = &inst.teacher[i];
        run.initial_velocity_rank[i] =
            spectrum(&initial_velocity(&flow, &theta0, p))?.stable_rank();
        run.predicted_final_rank[i] = spectrum(&(teacher - &start[i]))?.stable_rank();
        run.teacher_error[i] = (p.of(&flow, final_theta) - teacher).norm() / teacher.norm();
    }
    run.lambda_max = largest_hessian_eigenvalue(&flow, final_theta, spec.power_iterations);
    Ok(run)
}

/// Δ̇(0) = d/dt P(θ(t)) at t = 0 for θ̇ = −∇L: the products are bilinear in the factors, so
/// the central difference (P(θ + v) − P(θ − v))/2 with v = −∇L(θ) is exact.
fn initial_velocity(flow: &FactorizedAttention, theta: &[f64], p: Product) -> DMatrix<f64> {
    let mut grad = vec![0.0; theta.len()];
    flow.grad(theta, &mut grad);
    let plus: Vec<f64> = theta.iter().zip(&grad).map(|(x, g)| x - g).collect();
    let minus: Vec<f64> = theta.iter().zip(&grad).map(|(x, g)| x + g).collect();
    (p.of(flow, &plus) - p.of(flow, &minus)) * 0.5
}

/// λ_max(∇²L(θ)) by power iteration on the exact Hessian-vector product: the explicit
/// integrator's step is stability-limited to h ≲ 3.3/λ_max at the end of the run.
fn largest_hessian_eigenvalue(flow: &FactorizedAttention, theta: &[f64], iterations: usize) -> f64 {
    let n = theta.len();
    // a fixed start with components along every coordinate
    let mut v: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64 / 7.0).collect();
    let mut hv = vec![0.0; n];
    let mut lambda = 0.0;
    for _ in 0..iterations {
        let scale = norm(&v);
        v.iter_mut().for_each(|x| *x /= scale);
        flow.hvp(theta, &v, &mut hv);
        lambda = v.iter().zip(&hv).map(|(a, b)| a * b).sum();
        std::mem::swap(&mut v, &mut hv);
    }
    lambda
}

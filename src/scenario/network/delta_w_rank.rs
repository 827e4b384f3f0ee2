//! `delta-w-rank` (seed 004 Figs. 1, 4–7; spec 004 §5.3–5.4 "full-matrix attention student–teacher
//! from small init"): the stand-in for ViTs trained with Adam, where ΔW = W_K(t)W_Q(t)ᵀ −
//! W_K(0)W_Q(0)ᵀ of an attention head has low stable rank that grows incrementally, more clearly so
//! for smaller init. Here the one-layer softmax attention regressor of [`crate::models::network`]
//! with its score matrix factored, W = W_K W_Qᵀ (W_K, W_Q ∈ ℝ^{d×m} trained, readout v fixed to
//! the teacher's), learns the labels of a teacher whose W_T has rank r with distinct singular
//! values, by full-batch Adam from W_K(0), W_Q(0) = s·G/√d for a small and a large scale s (one
//! Gaussian G for both). Measured along training: σ_k(ΔW) and the stable rank ‖ΔW‖²_F/‖ΔW‖²₂.
//!
//! The paper's claim is empirical (no theorem covers Adam or a full-matrix W), and on this task
//! whether the σ_k emerge one at a time depends on the draw of data and teacher; so the run draws
//! a batch of instances and checks fractions and worst cases over it, the figure showing the
//! first instance.

use nalgebra::DMatrix;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::analysis::spectra::SingularSpectrum;
use crate::flow::{Method, OdeConfig};
use crate::instance::{Array, Arrays};
use crate::models::network::{Adam, AttentionRegression, Scratch};
use crate::plot::{Figure, LegendPosition, LinePanel, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Fraction, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Check, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Token dimension d (W_K, W_Q ∈ ℝ^{d×width}).
    pub d: AtLeast<1>,
    /// Inner width m of the factorization W = W_K W_Qᵀ (m = d: ΔW can reach full rank).
    pub width: AtLeast<1>,
    /// Tokens per sequence T (the first one is the query).
    pub tokens: AtLeast<2>,
    /// Samples n.
    pub n: AtLeast<1>,
    /// Singular values of the teacher W_T, decreasing; their number is its rank r.
    pub teacher_singular_values: Vec<f64>,
    /// Small init scale s: W_K(0), W_Q(0) = s·G/√d.
    pub small_init: Positive,
    /// Large init scale (the default-init regime, where emergence is not sequential).
    pub large_init: f64,
    /// The optimizer: full-batch Adam (the paper's) or plain gradient descent (the theory's
    /// gradient flow, discretized).
    pub optimizer: Optimizer,
    /// Learning rate (Adam's lr, or the GD step) and number of full-batch steps.
    pub lr: Positive,
    pub steps: AtLeast<1>,
    /// ΔW's singular values are recorded every `record_every` steps.
    pub record_every: AtLeast<1>,
    /// σ_k has emerged at the first recorded step with σ_k(ΔW) ≥ this · σ_k(W_T).
    pub emergence_fraction: Fraction,
    /// Instances (data, teacher singular vectors, readout, init direction) drawn from the seed.
    pub instances: AtLeast<1>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    Adam,
    Gd,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// An instance is incremental when min_k t_{k+1}/t_k over its emergence steps ≥ this (> 1:
    /// one at a time).
    pub min_emergence_gap: Positive,
    /// Small init: the fraction of incremental instances ≥ this.
    pub min_incremental_fraction: Fraction,
    /// Small init: stable rank of ΔW at t_1 (σ_1 just emerged) ≤ this.
    pub max_early_stable_rank: Positive,
    /// Small init: stable rank at the end − at t_1 ≥ this (the rank grows).
    pub min_rank_growth: Positive,
    /// Small init: stable rank at the end ≤ r + this (spec 004 §5.4: ≤ teacher rank + 1).
    pub rank_slack: Positive,
    /// Fraction of incremental instances: small init − large init ≥ this (smaller init ⇒ more
    /// incremental).
    pub min_fraction_contrast: Fraction,
    /// Median over instances of (large init's final stable rank − small init's) ≥ this.
    pub min_rank_difference: Positive,
    /// Small init, from t_1 on: the largest relative drop of the stable rank (srank_i −
    /// srank_j)/srank_i, i < j, ≤ this (spec 004 §5.4: non-decreasing up to 5% noise). Absent:
    /// the drop is reported, not checked (under Adam the stable rank overshoots, see the Adam
    /// scenario file).
    #[serde(default)]
    pub max_rank_drop: Option<Positive>,
    /// Small init: σ_{r+1}(ΔW)/σ_r(ΔW) at the end ≤ this (ΔW has numerical rank r).
    pub max_tail_ratio: Positive,
}

/// Rules across fields (the ranges are the types).
fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if *p.record_every > *p.steps {
        return Err(sc.invalid("params.record_every", "must be at most params.steps"));
    }
    let sv = &p.teacher_singular_values;
    if sv.len() < 2 || sv.len() > (*p.d).min(*p.width) {
        return Err(sc.invalid(
            "params.teacher_singular_values",
            format!(
                "needs a rank r with 2 ≤ r ≤ min(d, width) = {} (an order of emergence needs two \
                 values), got {}",
                (*p.d).min(*p.width),
                sv.len()
            ),
        ));
    }
    if sv.iter().any(|s| !(s.is_finite() && *s > 0.0)) || sv.windows(2).any(|w| w[1] >= w[0]) {
        return Err(sc.invalid(
            "params.teacher_singular_values",
            "must be finite, positive and strictly decreasing (distinct σ can emerge in order)",
        ));
    }
    if !p.large_init.is_finite() || *p.small_init >= p.large_init {
        return Err(sc.invalid(
            "params.large_init",
            "must be finite and exceed params.small_init",
        ));
    }
    Ok(())
}

fn normal(rng: &mut ChaCha20Rng, k: usize, scale: f64) -> Vec<f64> {
    (0..k)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

/// A random d×d matrix (row-major) with the given singular values: Q₁ diag(σ) Q₂ᵀ with Q₁, Q₂
/// the orthogonal factors of Gaussian matrices.
fn teacher_matrix(rng: &mut ChaCha20Rng, d: usize, sigma: &[f64]) -> Vec<f64> {
    let mut q = || {
        DMatrix::from_row_slice(d, d, &normal(rng, d * d, 1.0))
            .qr()
            .q()
    };
    let (u, w) = (q(), q());
    let mut s = DMatrix::zeros(d, d);
    for (k, &sk) in sigma.iter().enumerate() {
        s[(k, k)] = sk;
    }
    let t = u * s * w.transpose();
    (0..d * d).map(|i| t[(i / d, i % d)]).collect()
}

/// The factored student z = (W_K, W_Q), each d×m row-major, with W = W_K W_Qᵀ and v fixed.
struct Factored<'a> {
    model: &'a AttentionRegression,
    v: &'a [f64],
    m: usize,
}

impl Factored<'_> {
    fn merged(&self, z: &[f64]) -> Vec<f64> {
        let (d, m) = (self.model.d(), self.m);
        let (k, q) = z.split_at(d * m);
        let mut w = vec![0.0; d * d];
        for a in 0..d {
            for b in 0..d {
                w[a * d + b] = (0..m).map(|j| k[a * m + j] * q[b * m + j]).sum();
            }
        }
        w
    }

    /// L(z) and ∇L(z) by the chain rule through W = W_K W_Qᵀ: with G = ∂L/∂W (the model's exact
    /// backpropagation), ∂L/∂W_K = G W_Q and ∂L/∂W_Q = Gᵀ W_K.
    fn loss_grad(&self, z: &[f64], theta: &mut Vec<f64>, gt: &mut [f64], grad: &mut [f64]) -> f64 {
        let (d, m) = (self.model.d(), self.m);
        theta.clear();
        theta.extend(self.merged(z));
        theta.extend_from_slice(self.v);
        let loss = self
            .model
            .loss_grad(theta, gt, &mut Scratch::new(self.model));
        let (k, q) = z.split_at(d * m);
        let (gk, gq) = grad.split_at_mut(d * m);
        for a in 0..d {
            for j in 0..m {
                gk[a * m + j] = (0..d).map(|b| gt[a * d + b] * q[b * m + j]).sum();
                gq[a * m + j] = (0..d).map(|b| gt[b * d + a] * k[b * m + j]).sum();
            }
        }
        loss
    }
}

/// Singular values (decreasing) and stable rank of a d×d row-major matrix; NaN where the
/// decomposition fails (a diverged run), so that every check on them fails.
fn spectrum(d: usize, w: &[f64]) -> (Vec<f64>, f64) {
    SingularSpectrum::of(&DMatrix::from_row_slice(d, d, w))
        .map_or((vec![f64::NAN; d], f64::NAN), |s| {
            (s.values().to_vec(), s.stable_rank())
        })
}

/// One training run from init scale s: the recorded steps with σ(ΔW) and the loss.
struct ScaleRun {
    name: &'static str,
    scale: f64,
    steps: Vec<usize>,
    sigmas: Vec<Vec<f64>>,
    stable_rank: Vec<f64>,
    losses: Vec<f64>,
    /// emergence step of each σ_k, k < r (None: never within the horizon)
    emergence: Vec<Option<usize>>,
}

impl ScaleRun {
    fn stable_rank_at(&self, step: usize) -> f64 {
        self.steps
            .iter()
            .position(|&k| k == step)
            .map_or(f64::NAN, |i| self.stable_rank[i])
    }
    fn final_stable_rank(&self) -> f64 {
        self.stable_rank[self.stable_rank.len() - 1]
    }
    /// σ_{k+1}/σ_k of ΔW at the end (k = r: the part of ΔW outside the teacher's rank).
    fn final_tail_ratio(&self, r: usize) -> f64 {
        let s = &self.sigmas[self.sigmas.len() - 1];
        s[r] / s[r - 1]
    }
    /// The largest relative drop (srank_i − srank_j)/srank_i over recorded i < j from step
    /// `from` on, and the step i where it starts.
    fn largest_rank_drop(&self, from: usize) -> (f64, usize) {
        let mut worst = (0.0, from);
        let mut top = (f64::NEG_INFINITY, from);
        for (&k, &sr) in self.steps.iter().zip(&self.stable_rank) {
            if k < from {
                continue;
            }
            if sr > top.0 || sr.is_nan() {
                top = (sr, k);
            }
            let drop = (top.0 - sr) / top.0;
            if drop > worst.0 || drop.is_nan() {
                worst = (drop, top.1);
            }
        }
        worst
    }
    /// min_k t_{k+1}/t_k; NaN when some σ_k never emerged.
    fn gap(&self) -> f64 {
        let t: Option<Vec<f64>> = self.emergence.iter().map(|t| t.map(|k| k as f64)).collect();
        t.map_or(f64::NAN, |t| stats::min(t.windows(2).map(|w| w[1] / w[0])))
    }
    fn describe(&self) -> String {
        let t: Vec<String> = self
            .emergence
            .iter()
            .map(|t| t.map_or("never".into(), |k| k.to_string()))
            .collect();
        format!(
            "{} init s = {:e}: emergence steps t_1..t_r = [{}], stable rank at t_1 = {:.3}, at \
             the end = {:.3}, loss {:.3e} → {:.3e}",
            self.name,
            self.scale,
            t.join(", "),
            self.emergence[0].map_or(f64::NAN, |k| self.stable_rank_at(k)),
            self.final_stable_rank(),
            self.losses[0],
            self.losses[self.losses.len() - 1]
        )
    }
}

fn train(
    name: &'static str,
    f: &Factored,
    direction: &[f64],
    scale: f64,
    teacher_sv: &[f64],
    p: &Params,
) -> ScaleRun {
    let d = *p.d;
    let s0 = scale / (d as f64).sqrt();
    let mut z: Vec<f64> = direction.iter().map(|g| s0 * g).collect();
    let w0 = f.merged(&z);
    let mut adam = (p.optimizer == Optimizer::Adam).then(|| Adam::new(*p.lr, z.len()));
    let (mut theta, mut gt, mut grad) = (Vec::new(), vec![0.0; f.model.dim()], vec![0.0; z.len()]);
    let mut run = ScaleRun {
        name,
        scale,
        steps: Vec::new(),
        sigmas: Vec::new(),
        stable_rank: Vec::new(),
        losses: Vec::new(),
        emergence: vec![None; teacher_sv.len()],
    };
    for k in 0..=*p.steps {
        let loss = f.loss_grad(&z, &mut theta, &mut gt, &mut grad);
        if k > 0 && (k % *p.record_every == 0 || k == *p.steps) {
            let dw: Vec<f64> = theta[..d * d].iter().zip(&w0).map(|(a, b)| a - b).collect();
            let (s, stable_rank) = spectrum(d, &dw);
            for (t, (&sk, &tk)) in run.emergence.iter_mut().zip(s.iter().zip(teacher_sv)) {
                if t.is_none() && sk >= *p.emergence_fraction * tk {
                    *t = Some(k);
                }
            }
            run.stable_rank.push(stable_rank);
            run.steps.push(k);
            run.sigmas.push(s);
            run.losses.push(loss);
        } else if k == 0 {
            run.losses.push(loss);
        }
        if k < *p.steps {
            match adam.as_mut() {
                Some(adam) => adam.step(&mut z, &grad),
                None => z.iter_mut().zip(&grad).for_each(|(zi, g)| *zi -= *p.lr * g),
            }
        }
    }
    run
}

/// A check on the shape of the incremental trajectories: id, title, the measured value of an
/// instance, whether the largest value is the worst, and the bound (None: reported only).
type ShapeCheck<'a> = (
    &'a str,
    &'a str,
    &'a dyn Fn(&Instance) -> f64,
    bool,
    Option<f64>,
);

/// One drawn instance (data, teacher, readout, init direction) and its two runs.
struct Instance {
    x: Vec<f64>,
    w_teacher: Vec<f64>,
    v: Vec<f64>,
    direction: Vec<f64>,
    teacher_rank: f64,
    small: ScaleRun,
    large: ScaleRun,
}

impl Instance {
    /// The stable rank of ΔW at t_1 of the small init, and its largest relative drop after t_1.
    fn early_and_drop(&self) -> (f64, f64) {
        match self.small.emergence[0] {
            Some(t1) => (
                self.small.stable_rank_at(t1),
                self.small.largest_rank_drop(t1).0,
            ),
            None => (f64::NAN, f64::NAN),
        }
    }
}

fn draw_and_train(p: &Params, mut rng: ChaCha20Rng) -> Instance {
    let (d, m, t) = (*p.d, *p.width, *p.tokens);
    let sv = &p.teacher_singular_values;
    let x = normal(&mut rng, *p.n * t * d, 1.0);
    let w_teacher = teacher_matrix(&mut rng, d, sv);
    // readout with O(1) outputs, shared by teacher and student
    let v = normal(&mut rng, d, 1.0 / (d as f64).sqrt());
    let direction = normal(&mut rng, 2 * d * m, 1.0);
    let probe = AttentionRegression::new(d, t, x.clone(), vec![0.0; *p.n]);
    let mut theta_t = w_teacher.clone();
    theta_t.extend_from_slice(&v);
    let model = probe.with_labels(probe.predict(&theta_t));
    let f = Factored {
        model: &model,
        v: &v,
        m,
    };
    Instance {
        small: train("small", &f, &direction, *p.small_init, sv, p),
        large: train("large", &f, &direction, p.large_init, sv, p),
        teacher_rank: spectrum(d, &w_teacher).1,
        x,
        w_teacher,
        v,
        direction,
    }
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let (d, m, t) = (*p.d, *p.width, *p.tokens);
    let sv = &p.teacher_singular_values;
    let r = sv.len();
    // instance i from stream i of the seed: the batch is reproducible and each instance alone too
    let batch: Vec<Instance> = (0..*p.instances)
        .map(|i| draw_and_train(p, ctx.rng(i as u64)))
        .collect();

    let mut rep = Report::default();
    let first = &batch[0];
    let mut inst = Arrays::new();
    inst.insert("X", Array::new(&[*p.n, t, d], first.x.clone()))
        .insert("W_teacher", Array::matrix(d, d, first.w_teacher.clone()))
        .insert("v", Array::vector(&first.v))
        .insert(
            "G_K",
            Array::matrix(d, m, first.direction[..d * m].to_vec()),
        )
        .insert(
            "G_Q",
            Array::matrix(d, m, first.direction[d * m..].to_vec()),
        );
    rep.instance = Some(inst);

    let incremental = |run: &ScaleRun| run.gap() >= *c.min_emergence_gap;
    let mut table = Table::new(&[
        "instance",
        "gap_small",
        "gap_large",
        "incremental_small",
        "incremental_large",
        "stable_rank_t1_small",
        "stable_rank_drop_small",
        "stable_rank_end_small",
        "stable_rank_end_large",
        "tail_ratio_small",
        "tail_ratio_large",
    ]);
    for (i, b) in batch.iter().enumerate() {
        let (early, drop) = b.early_and_drop();
        table.push(vec![
            i.into(),
            b.small.gap().into(),
            b.large.gap().into(),
            usize::from(incremental(&b.small)).into(),
            usize::from(incremental(&b.large)).into(),
            early.into(),
            drop.into(),
            b.small.final_stable_rank().into(),
            b.large.final_stable_rank().into(),
            b.small.final_tail_ratio(r).into(),
            b.large.final_tail_ratio(r).into(),
        ]);
    }
    rep.tables.push(("instances".into(), table));

    let count = |pick: &dyn Fn(&Instance) -> bool| batch.iter().filter(|b| pick(b)).count();
    let inc_small = count(&|b| incremental(&b.small));
    let inc_large = count(&|b| incremental(&b.large));
    let total = *p.instances as f64;
    let (frac_small, frac_large) = (inc_small as f64 / total, inc_large as f64 / total);
    let optimizer = match p.optimizer {
        Optimizer::Adam => "full-batch Adam (β₁ = 0.9, β₂ = 0.999, ε = 1e−8), lr",
        Optimizer::Gd => "full-batch GD, step",
    };
    let setting = format!(
        "{} instances of n = {}, T = {t}, d = {d}, m = {m}; teacher σ(W_T) = {sv:?}; {optimizer} \
         = {}, {} steps; t_k = first step (of every {}) with σ_k(ΔW) ≥ {}·σ_k(W_T); an instance \
         is incremental when min_k t_{{k+1}}/t_k ≥ {}",
        *p.instances,
        *p.n,
        *p.lr,
        *p.steps,
        *p.record_every,
        *p.emergence_fraction,
        *c.min_emergence_gap
    );
    let gaps = |pick: &dyn Fn(&Instance) -> f64| {
        let g: Vec<String> = batch.iter().map(|b| format!("{:.2}", pick(b))).collect();
        g.join(", ")
    };
    rep.at_least(
            "incremental-fraction",
            "small init: fraction of instances with min_k t_{k+1}/t_k ≥ c (σ_k(ΔW) emerge one at a time)",
            frac_small,
            *c.min_incremental_fraction,
        )
        .note(format!(
            "{inc_small} of {} incremental at s = {:e}; gaps [{}]; instance 0: {}; {setting}",
            *p.instances,
            *p.small_init,
            gaps(&|b| b.small.gap()),
            first.small.describe()
        ))
        .paper_claim(
            "seed 004 §5 and Figs. 1, 6: from small init the singular values of ΔW_K W_Qᵀ are \
             learnt one at a time (incremental rank)",
        );
    rep.at_least(
        "smaller-init-more-incremental",
        "fraction of incremental instances: small init − large init",
        frac_small - frac_large,
        *c.min_fraction_contrast,
    )
    .note(format!(
        "{inc_small} incremental at s = {:e}, {inc_large} at s = {:e}, of {}; large-init gaps \
         [{}]; instance 0: {}",
        *p.small_init,
        p.large_init,
        *p.instances,
        gaps(&|b| b.large.gap()),
        first.large.describe()
    ))
    .paper_claim("seed 004 §5: smaller initialization ⇒ more clearly incremental dynamics");

    // the shape of an incremental trajectory, on the instances where the σ_k emerged in order
    let sequential: Vec<(usize, &Instance)> = batch
        .iter()
        .enumerate()
        .filter(|(_, b)| incremental(&b.small))
        .collect();
    let worst_over = |value: &dyn Fn(&Instance) -> f64, largest: bool| {
        let items = sequential.iter().map(|(i, b)| (value(b), *i));
        if largest {
            stats::worst(items)
        } else {
            stats::best(items)
        }
    };
    let on_sequential = format!(
        "over the {inc_small} incremental instances (the others fail incremental-fraction's count)"
    );
    let growth = |b: &Instance| b.small.final_stable_rank() - b.early_and_drop().0;
    let shape_checks: [ShapeCheck; 3] = [
        (
            "early-stable-rank-worst",
            "small init: stable rank ‖ΔW‖²_F/‖ΔW‖²₂ at t_1 (σ_1 just emerged), worst instance",
            &|b| b.early_and_drop().0,
            true,
            Some(*c.max_early_stable_rank),
        ),
        (
            "stable-rank-grows-worst",
            "small init: stable rank of ΔW at the end − at t_1, worst instance",
            &growth,
            false,
            Some(*c.min_rank_growth),
        ),
        (
            "stable-rank-monotone-worst",
            "small init, t ≥ t_1: max_{i<j} (srank_i − srank_j)/srank_i of ΔW, worst instance",
            &|b| b.early_and_drop().1,
            true,
            c.max_rank_drop.map(|b| *b),
        ),
    ];
    let worst_drop = worst_over(&|b| b.early_and_drop().1, true);
    rep.derive(
        "worst_rank_drop_small",
        worst_drop.map_or(f64::NAN, |(x, _)| x),
    );
    for (id, title, value, largest, bound) in shape_checks {
        match (worst_over(value, largest), bound) {
            (_, None) => rep.skip(
                id,
                title,
                format!(
                    "not claimed for this optimizer (no checks.max_rank_drop): worst drop {:.3} \
                     {on_sequential}",
                    worst_drop.map_or(f64::NAN, |(x, _)| x)
                ),
            ),
            (Some((x, i)), Some(bound)) => {
                let check = if largest {
                    Check::at_most(id, title, x, bound)
                } else {
                    Check::at_least(id, title, x, bound)
                };
                rep.check(check.note(format!(
                    "worst: instance {i}, {}; {on_sequential}",
                    batch[i].small.describe()
                )));
            }
            (None, Some(_)) => rep.skip(id, title, "no instance is incremental at the small init"),
        }
    }
    let worst_all = |value: &dyn Fn(&Instance) -> f64| {
        stats::worst(batch.iter().enumerate().map(|(i, b)| (value(b), i)))
            .expect("at least one instance")
    };
    let (srank_small, i_srank) = worst_all(&|b| b.small.final_stable_rank());
    rep.at_most(
        "small-init-stable-rank-worst",
        "small init: stable rank of ΔW at the end ≤ r + slack, worst instance",
        srank_small,
        r as f64 + *c.rank_slack,
    )
    .note(format!(
        "teacher rank r = {r}; worst: instance {i_srank}, {} (its teacher's own stable rank \
         {:.3})",
        batch[i_srank].small.describe(),
        batch[i_srank].teacher_rank
    ))
    .paper_claim("spec 004 §5.4 (expectation, not a theorem): stable rank ≤ teacher rank + 1");
    let (tail, i_tail) = worst_all(&|b| b.small.final_tail_ratio(r));
    rep.at_most(
        "small-init-rank-r-worst",
        "small init: σ_{r+1}(ΔW)/σ_r(ΔW) at the end (ΔW has numerical rank r), worst instance",
        tail,
        *c.max_tail_ratio,
    )
    .note(format!(
        "worst: instance {i_tail}; large init on the same instance: {:.3e}; r = {r}",
        batch[i_tail].large.final_tail_ratio(r)
    ));
    let differences: Vec<f64> = batch
        .iter()
        .map(|b| b.large.final_stable_rank() - b.small.final_stable_rank())
        .collect();
    let median_difference = stats::median(&differences);
    rep.at_least(
        "smaller-init-lower-rank",
        "median over instances of the final stable rank of ΔW: large init − small init",
        median_difference,
        *c.min_rank_difference,
    )
    .note(format!(
        "differences [{}]; instance 0: {}; {}",
        differences
            .iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(", "),
        first.large.describe(),
        first.small.describe()
    ))
    .paper_claim("seed 004 Fig. 7: smaller init scale ⇒ lower stable rank of ΔW_K W_Qᵀ");

    rep.derive("instances", *p.instances);
    rep.derive("incremental_small", inc_small);
    rep.derive("incremental_large", inc_large);
    rep.derive("median_rank_difference", median_difference);
    rep.derive(
        "median_tail_ratio_small",
        stats::median(
            &batch
                .iter()
                .map(|b| b.small.final_tail_ratio(r))
                .collect::<Vec<_>>(),
        ),
    );
    rep.derive(
        "median_tail_ratio_large",
        stats::median(
            &batch
                .iter()
                .map(|b| b.large.final_tail_ratio(r))
                .collect::<Vec<_>>(),
        ),
    );
    for run in [&first.small, &first.large] {
        let name = run.name;
        rep.derive(&format!("emergence_gap_{name}"), run.gap());
        rep.derive(&format!("stable_rank_end_{name}"), run.final_stable_rank());
        rep.derive(
            &format!("loss_ratio_{name}"),
            run.losses[run.losses.len() - 1] / run.losses[0],
        );
        for (k, t) in run.emergence.iter().enumerate() {
            rep.derive(
                &format!("t_{}_{name}", k + 1),
                t.map_or(f64::NAN, |s| s as f64),
            );
        }
    }

    let mut cols = vec![
        "init".to_string(),
        "step".into(),
        "loss".into(),
        "stable_rank".into(),
    ];
    cols.extend((1..=d).map(|k| format!("sigma_{k}")));
    let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
    rep.series = Table::new(&cols);
    for run in [&first.small, &first.large] {
        for (i, s) in run.sigmas.iter().enumerate() {
            let mut row = vec![
                run.scale.into(),
                run.steps[i].into(),
                run.losses[i + 1].into(),
                run.stable_rank[i].into(),
            ];
            row.extend(s.iter().map(|&x| x.into()));
            rep.series.push(row);
        }
    }
    let step_label = match p.optimizer {
        Optimizer::Adam => "Adam step",
        Optimizer::Gd => "GD step",
    };
    let shown = (r + 1).min(d);
    let sigma_panel = |run: &ScaleRun| {
        let x: Vec<f64> = run.steps.iter().map(|&k| k as f64).collect();
        let mut panel = LinePanel::new(
            format!("σ_k(ΔW), {} init s = {:e}", run.name, run.scale),
            step_label,
            "σ_k(W(t) − W(0))",
        )
        .log_y()
        .legend(LegendPosition::LowerRight);
        for k in 0..shown {
            panel = panel.series(
                Series::numerics(
                    format!("σ_{}", k + 1),
                    x.clone(),
                    run.sigmas.iter().map(|s| s[k]).collect(),
                )
                .color(k),
            );
        }
        for (k, t) in run.emergence.iter().enumerate() {
            if let Some(t) = t {
                panel = panel.vline(RefLine::new(*t as f64, format!("t_{}", k + 1)).color(k));
            }
        }
        panel
    };
    let mut rank_panel = LinePanel::new("stable rank of ΔW", step_label, "‖ΔW‖²_F / ‖ΔW‖²₂")
        .legend(LegendPosition::LowerRight);
    for (color, run) in [&first.small, &first.large].into_iter().enumerate() {
        rank_panel = rank_panel.series(
            Series::numerics(
                format!("{} init s = {:e}", run.name, run.scale),
                run.steps.iter().map(|&k| k as f64).collect(),
                run.stable_rank.clone(),
            )
            .color(color),
        );
    }
    rank_panel = rank_panel.hline(RefLine::new(first.teacher_rank, "teacher W_T"));
    rep.figure = Some(
        Figure::new(3)
            .title(format!(
                "Seed 004 stand-in: ΔW = W_K W_Qᵀ − W_K(0)W_Q(0)ᵀ, teacher rank {r} (instance 0 \
                 of {})",
                *p.instances
            ))
            .panel(sigma_panel(&first.small))
            .panel(sigma_panel(&first.large))
            .panel(rank_panel),
    );
    Ok(rep)
}

/// Per instance, two runs of `steps` gradients (backpropagation plus the d²m chain rule) and a
/// d×d SVD per record.
fn cost(p: &Params, _ctx: &RunContext) -> Cost {
    let (d, t, m) = (n(*p.d), n(*p.tokens), n(*p.width));
    let grad = n(*p.n) * (4.0 * d * d + 6.0 * t * d) + 6.0 * d * d * m;
    let records = n(*p.steps / p.record_every.max(1) + 1);
    let runs = 2.0 * n(*p.instances);
    Cost::new()
        .doubles("n", "tokens of one instance", n(*p.n) * t * d)
        .work(
            "steps",
            "full-batch training from two init scales",
            runs * n(*p.steps),
            grad,
        )
        .work(
            "record_every",
            "SVDs of ΔW",
            runs * records,
            20.0 * d * d * d,
        )
        .table("steps", 2.0 * records, d + 4.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "network.delta-w-rank",
    paper: "004",
    summary:
        "Figs. 1, 4–7 stand-in: one softmax attention layer with W = W_K W_Qᵀ trained by Adam \
         (or GD) on rank-r teachers; from small init σ_k(ΔW) emerge one at a time on a \
         fraction of the instances and ΔW keeps rank r, unlike from large init.",
    // Adam or GD only, no ODE solve
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &[
        "emergence_gap_*",
        "incremental_*",
        "instances",
        "loss_ratio_*",
        "median_rank_difference",
        "median_tail_ratio_*",
        "stable_rank_end_*",
        "t_*",
        "worst_rank_drop_small",
    ],
    run,
};

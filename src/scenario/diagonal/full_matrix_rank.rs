//! `full-matrix-rank` (spec 004 §5.3, §5.4 first bullet, §6 #17, §7 `tiny-attn-rank`; beyond the
//! paper's theory): the full-matrix attention head f(X) = smax(X W_K W_Qᵀ Xᵀ) X W_V W_Oᵀ learns a
//! teacher whose products A* = W_K*W_Q*ᵀ and M* = W_V*W_O*ᵀ have rank 2, from θ(0) = s·θ_1
//! (θ_1 ~ N(0, 1/d), the same for every s). Along the exact gradient flow we follow the stable
//! rank and the singular values of Δ(W_K W_Qᵀ) = W_K W_Qᵀ(t) − W_K W_Qᵀ(0) and of Δ(W_V W_Oᵀ):
//! the CPU-sized analogue of the paper's Figs. 1, 4, 6, 7.
//!
//! What the theory of the diagonal case predicts here, and is checked (thresholds in [`Checks`]):
//! - M = 0 makes F ≡ 0, so ∇_A L̃ = 0 there: VO modes must emerge before KQ modes (the matrix
//!   version of spec §2.2 "stage 1 always activates a VO coordinate");
//! - while A ≈ 0 the attention is uniform and M follows a two-layer linear regression: VO mode j
//!   grows like s²e^{2g_j t}, g_j = σ_j(∇_M L̃(0)), so its emergence time is t_j = ln(1/s)/g_j + O(1)
//!   (the matrix analogue of t̂_k = T_kΛ + O(1)), modes emerge one at a time, and the next mode's
//!   size at t_j shrinks like s^{2(1 − g_{j+1}/g_j)};
//! - the products are identifiable, so the flow ends at the teacher and Δ(T) → P* − P(0): its
//!   stable rank is sr(P* − P(0)), → sr(P*) ≤ rank P* as s → 0 but large at s = 1 (Fig. 7);
//! - sr(Δ(t)) → sr(Δ̇(0)) as t → 0: Δ̇(0) = V₀V₀ᵀG + G O₀O₀ᵀ has stable rank > 1, so the stable
//!   rank first *falls* towards 1 while the top mode outgrows the others. "Non-decreasing" (spec
//!   §7) can hold only from the first emergence on, and only if the modes come one at a time in
//!   decreasing order of σ*: a later, larger mode must overtake the earlier one, and sr(Δ)
//!   overshoots (≈ 2 at the crossing) before settling at sr(P*). The KQ modes need not come in
//!   teacher order (their rates depend on how A*'s singular vectors meet M*); in the default
//!   instance they come reversed at every s, so only VO gets the monotonicity check.
//!
//! Emergence: t_j is the first time σ_j(Δ) reaches τ = fraction·min_j σ*_j (root-finding events),
//! i.e. the numerical rank of Δ at level τ steps from j − 1 to j.

use crate::scenario::param::Open01;
use crate::scenario::param::{AtLeast, Positive};
use std::path::PathBuf;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::flow::{logspace, Method, OdeConfig};
use crate::instance::diagonal::{FullMatrixData, FullMatrixInit};
use crate::instance::{InstanceError, InstanceFile};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};

use super::full_matrix_checks::{
    check_convergence, check_emergence, check_final_rank, check_rank_growth, emergence_time,
    rank_drop,
};
use super::full_matrix_figure::figure;
use super::full_matrix_sweep::{run_scale, Instance, Product, RunSpec, ScaleRun};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Token dimension d.
    pub d: AtLeast<1>,
    /// Head dimension d_h: W_K, W_Q, W_V, W_O ∈ ℝ^{d×d_h}.
    pub d_h: AtLeast<1>,
    /// Tokens per sample n.
    pub tokens: AtLeast<1>,
    /// Training samples N.
    pub samples: AtLeast<1>,
    /// Singular values of the teacher's W_K*W_Q*ᵀ, strictly decreasing (rank = length).
    pub teacher_kq: Vec<f64>,
    /// Singular values of the teacher's W_V*W_O*ᵀ, strictly decreasing.
    pub teacher_vo: Vec<f64>,
    /// Init scales s: θ(0) = s·θ_1.
    pub scales: Vec<f64>,
    /// Horizon T of every run.
    pub t_end: Positive,
    /// First of the log-spaced output times (after t = 0).
    pub t_first: Positive,
    /// Number of log-spaced output times.
    pub outputs: AtLeast<2>,
    /// Mode j has emerged once σ_j(Δ) ≥ fraction·σ*_j.
    pub emergence_fraction: Open01,
    /// Singular values of Δ recorded per sample.
    pub top: AtLeast<1>,
    /// Power iterations for λ_max(∇²L(θ(T))) (the stiffness report).
    pub power_iterations: usize,
    /// The inputs `X` and the low-rank teacher as thin SVDs (`kq_U`, `kq_sigma`, `kq_V`, `vo_U`,
    /// `vo_sigma`, `vo_V`): replaces d, tokens, samples, teacher_kq, teacher_vo and the draws.
    /// README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The unit initialization θ₁ (`W_K0`, `W_Q0`, `W_V0`, `W_O0`, each (d, d_h)): replaces d_h
    /// and the draw; run s starts at s·θ₁.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

/// The user's files, read and checked against each other and the parameters they keep.
struct Files {
    data: Option<FullMatrixData>,
    init: Option<FullMatrixInit>,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<Files, InputError> {
    let data: Option<FullMatrixData> = p
        .data_file
        .as_ref()
        .map(|f| sc.read_instance("data_file", f))
        .transpose()?;
    let init: Option<FullMatrixInit> = p
        .init_file
        .as_ref()
        .map(|f| sc.read_instance("init_file", f))
        .transpose()?;
    let file_error = |key: &str, file: &PathBuf, e: InstanceError| {
        InputError::new(
            &sc.input_path(key, file),
            e.key,
            format!("{} (file given by params.{key})", e.reason),
        )
    };
    let d = data.as_ref().map_or(*p.d, |x| x.d);
    let d_h = init.as_ref().map_or(*p.d_h, |i| i.d_h);
    if let (Some(init), Some(f)) = (&init, &p.init_file) {
        init.check_dim(d)
            .map_err(|e| file_error("init_file", f, e))?;
    }
    if let (Some(data), Some(f)) = (&data, &p.data_file) {
        // the student W_K W_Qᵀ has rank ≤ d_h: a teacher of higher rank is out of its reach
        for (prefix, t) in ["kq", "vo"].iter().zip(&data.teacher) {
            if t.sigma.len() > d_h {
                return Err(file_error(
                    "data_file",
                    f,
                    InstanceError::new(
                        format!("{prefix}_sigma"),
                        format!(
                            "teacher rank {} > d_h = {d_h}: the student's product has rank ≤ \
                             d_h and cannot reach it",
                            t.sigma.len()
                        ),
                    ),
                ));
            }
        }
    }
    if let (None, Some(f)) = (&data, &p.init_file) {
        let rank = p.teacher_kq.len().max(p.teacher_vo.len());
        if rank > d_h {
            return Err(file_error(
                "init_file",
                f,
                InstanceError::new(
                    "W_K0",
                    format!(
                        "d_h = {d_h} columns, below the teacher's rank {rank} (params.teacher_kq, \
                         teacher_vo): the student's products could not reach it"
                    ),
                ),
            ));
        }
    }
    if *p.top > d {
        return Err(sc.invalid("params.top", format!("at most d = {d} values")));
    }
    Ok(Files { data, init })
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// min over s of log10(L(0)/L(T)). When the last mode emerges the loss is still ≥ 0.07·L(0)
    /// (emergence.csv), so 3 orders certify that every teacher mode has been learned; below that the loss decays at rates set by the
    /// O(s²) initialization left in the unused directions.
    pub min_loss_orders: f64,
    /// max over s and products of ‖P(T) − P*‖_F/‖P*‖_F: the flow reaches the teacher. What is
    /// left at T is the initialization in the d_h − rank unused directions of the factors,
    /// whose gradient is proportional to its own size, so it decays only algebraically (≈ 1%
    /// at T = 2000 for s = 0.3 and s = 1, far less for small s).
    pub max_teacher_error: Positive,
    /// max over s of |sr(Δ(T)) − sr(P* − P(0))|: sr is Lipschitz in P with constant
    /// ≲ 2(1 + sr)/σ_1, so a teacher error of 2% allows a few 1e-2.
    pub final_rank_tol: Positive,
    /// The "small" scales s ≤ small_scale are those of the spec's expectations (s ≤ 0.1).
    pub small_scale: f64,
    /// Small s: sr(Δ(T)) ≤ rank P* + rank_excess (spec §7 `tiny-attn-rank`: + 1).
    pub rank_excess: f64,
    /// Smallest s: σ_{j+1}(Δ(t_j))/τ ≤ max_leak for every j, τ the emergence threshold (the
    /// ratio is < 1 whenever t_j < t_{j+1}, which a common threshold makes automatic): 0.25
    /// asks the next singular value to be a quarter of the threshold when one emerges, i.e.
    /// clearly separated steps. Theory: the leak vanishes like a power of s (VO:
    /// s^{2(1 − g_{j+1}/g_j)}).
    pub max_leak: Positive,
    /// |g_j · dt_j/d ln(1/s) − 1| for the VO modes, fitted over the small scales. Mode 1's
    /// slope is 1/g_1 up to finite-s offsets (measured 0.5%); a later mode grows at g_j only
    /// until the earlier ones are learned, after which the empirical covariance of the token
    /// means couples them, an O(N^{-1/2}) = 6% change of its rate at N = 256 (measured 3.6%).
    /// A factor-2 error in the rate (g vs 2g) would show as 0.5.
    pub slope_rel_tol: Positive,
    /// Small s with sequential emergence (leak ≤ max_leak for that product): largest relative
    /// drop of sr(Δ) below its running maximum after the first emergence (spec §7: 5% noise).
    pub max_rank_drop: Positive,
    /// max over s, products of |sr(Δ(t₀))/sr(Δ̇(0)) − 1| at the first output time t₀: the
    /// relative change of Δ/t over [0, t₀] is O(t₀·‖∇²L‖), ≲ 1e-2 for t₀ = 0.1.
    pub early_rank_tol: Positive,
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    for (key, sigma) in [
        ("params.teacher_kq", &p.teacher_kq),
        ("params.teacher_vo", &p.teacher_vo),
    ] {
        if sigma.is_empty() || sigma.len() > p.d_h.min(*p.d) {
            return Err(sc.invalid(key, "rank must be between 1 and min(d, d_h)"));
        }
        if sigma.iter().any(|s| !(s.is_finite() && *s > 0.0))
            || sigma.windows(2).any(|w| w[1] >= w[0])
        {
            return Err(sc.invalid(key, "singular values must be positive, strictly decreasing"));
        }
    }
    if p.scales.is_empty() || p.scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(sc.invalid("params.scales", "need positive init scales"));
    }
    let mut sorted = p.scales.clone();
    sorted.sort_by(f64::total_cmp);
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(sc.invalid("params.scales", "scales must be distinct"));
    }
    if p.t_first >= p.t_end {
        return Err(sc.invalid("params.t_first", "must be below t_end"));
    }
    let count_below = |limit: f64| p.scales.iter().filter(|&&s| s <= limit).count();
    if count_below(c.small_scale) < 2 {
        return Err(sc.invalid(
            "checks.small_scale",
            "the ln(1/s) slope needs at least two scales s ≤ small_scale",
        ));
    }
    read_files(p, sc)?;
    Ok(())
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let d_h = files.init.as_ref().map_or(*p.d_h, |i| i.d_h);
    let inst = match &files.data {
        Some(data) => Instance::from_data(data, d_h),
        None => Instance::new(
            (*p.d, d_h, *p.tokens, *p.samples),
            &p.teacher_kq,
            &p.teacher_vo,
            ctx,
        ),
    };
    let probe = inst.flow()?;
    let unit_init = match files.init {
        Some(init) => init.theta,
        None => inst.unit_init(&probe, ctx),
    };
    let vo_rates = inst.vo_rates_at_zero(&probe)?;
    let mut times = vec![0.0];
    times.extend(logspace(*p.t_first, *p.t_end, *p.outputs));
    let spec = RunSpec {
        instance: &inst,
        unit_init: &unit_init,
        times: &times,
        fraction: *p.emergence_fraction,
        top: *p.top,
        power_iterations: p.power_iterations,
        ode: ctx.ode,
    };
    let mut scales = p.scales.clone();
    scales.sort_by(|a, b| b.total_cmp(a));
    // independent runs: one head (with its own scratch) per run, in parallel
    let runs: Vec<ScaleRun> = scales
        .par_iter()
        .map(|&s| run_scale(&spec, s))
        .collect::<Result<_, _>>()?;

    let init = FullMatrixInit {
        d: inst.d,
        d_h,
        theta: unit_init.clone(),
    };
    let mut instance = inst.data().to_arrays();
    instance.merge_prefixed("", init.to_arrays());
    let mut rep = Report {
        instance: Some(instance),
        ..Default::default()
    };
    for r in &runs {
        rep.stats(format!("flow s = {}", r.scale), &r.stats);
    }
    check_convergence(&mut rep, c, &runs);
    check_final_rank(&mut rep, c, &inst, &runs);
    check_emergence(
        &mut rep,
        c,
        (&inst, *p.emergence_fraction),
        &runs,
        &vo_rates,
    );
    check_rank_growth(&mut rep, c, &runs);
    derive(&mut rep, p, &inst, &runs, &vo_rates);
    rep.series = series(*p.top, &runs);
    rep.tables.push((
        "emergence".into(),
        emergence_table(&inst, *p.emergence_fraction, &runs),
    ));
    rep.tables
        .push(("final".into(), final_table(*p.t_end, &runs)));
    rep.figure = Some(figure(&inst, &runs, *p.emergence_fraction, c.small_scale));
    Ok(rep)
}

fn derive(rep: &mut Report, p: &Params, inst: &Instance, runs: &[ScaleRun], vo_rates: &[f64]) {
    let teacher_rank = |i: usize| {
        let s = &inst.teacher_sigma[i];
        s.iter().map(|x| (x / s[0]).powi(2)).sum::<f64>()
    };
    rep.derive("teacher_stable_rank_kq", teacher_rank(0));
    rep.derive("teacher_stable_rank_vo", teacher_rank(1));
    let ranks = inst.teacher_sigma[1].len();
    rep.derive("vo_rates_g", &vo_rates[..ranks]);
    rep.derive(
        "vo_emergence_slope_theory",
        vo_rates[..ranks]
            .iter()
            .map(|g| 1.0 / g)
            .collect::<Vec<_>>(),
    );
    // measured dt_j/d ln(1/s) between the two smallest scales, every product and mode
    let (a, b) = (&runs[runs.len() - 2], &runs[runs.len() - 1]);
    let ln_ratio = (a.scale / b.scale).ln();
    for prod in Product::BOTH {
        let slopes: Vec<f64> = (0..inst.teacher_sigma[prod as usize].len())
            .map(|j| (emergence_time(b, prod, j) - emergence_time(a, prod, j)) / ln_ratio)
            .collect();
        rep.derive(
            &format!("emergence_slope_{}", prod.name().to_lowercase()),
            slopes,
        );
    }
    for prod in Product::BOTH {
        let name = prod.name().to_lowercase();
        rep.derive(
            &format!("rank_drop_after_t1_{name}"),
            runs.iter().map(|r| rank_drop(r, prod)).collect::<Vec<_>>(),
        );
        rep.derive(
            &format!("emergence_order_{name}"),
            runs.iter()
                .map(|r| {
                    r.emergence[prod as usize]
                        .iter()
                        .map(|e| e.map(|e| e.mode + 1))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>(),
        );
    }
    rep.derive(
        "lambda_max_final",
        runs.iter().map(|r| r.lambda_max).collect::<Vec<_>>(),
    );
    // T·λ_max: the explicit method needs ≳ T·λ_max/3.3 steps; the run used far fewer than an
    // implicit method's dense Jacobians would cost (dim hvps each)
    rep.derive(
        "stiffness_t_lambda_max",
        runs.iter()
            .map(|r| *p.t_end * r.lambda_max)
            .collect::<Vec<_>>(),
    );
}

fn series(top: usize, runs: &[ScaleRun]) -> Table {
    let mut headers = vec!["s".to_string(), "t".into(), "loss".into()];
    for p in Product::BOTH {
        headers.push(format!("sr_{}", p.name().to_lowercase()));
    }
    for kind in ["sigma", "normalized"] {
        for p in Product::BOTH {
            headers.extend((1..=top).map(|j| format!("{}_{kind}_{j}", p.name().to_lowercase())));
        }
    }
    let mut table = Table {
        headers,
        rows: Vec::new(),
    };
    for r in runs {
        for k in 0..r.t.len() {
            let mut row: Vec<Cell> = vec![r.scale.into(), r.t[k].into(), r.loss[k].into()];
            row.extend(Product::BOTH.map(|p| Cell::Num(r.stable_rank[p as usize][k])));
            row.extend(
                Product::BOTH
                    .iter()
                    .flat_map(|p| r.sigma[*p as usize][k].iter().map(|&v| Cell::Num(v))),
            );
            for p in Product::BOTH {
                let sigma = &r.sigma[p as usize][k];
                let top_value = sigma[0];
                row.extend(
                    sigma
                        .iter()
                        .map(|&v| Cell::Num(if top_value > 0.0 { v / top_value } else { 0.0 })),
                );
            }
            table.push(row);
        }
    }
    table
}

/// Per s, product and j: t_j (σ_j(Δ) reaches τ), the teacher mode it belongs to and its σ*,
/// the next singular value over τ then, and the loss then.
fn emergence_table(inst: &Instance, fraction: f64, runs: &[ScaleRun]) -> Table {
    let mut table = Table::new(&[
        "s",
        "product",
        "j",
        "t_emerge",
        "threshold",
        "teacher_mode",
        "teacher_sigma",
        "leak_next",
        "loss_at_emergence",
    ]);
    for r in runs {
        for p in Product::BOTH {
            let sigma = &inst.teacher_sigma[p as usize];
            for (j, e) in r.emergence[p as usize].iter().enumerate() {
                let mut row: Vec<Cell> = vec![r.scale.into(), p.name().into(), (j + 1).into()];
                row.extend(
                    match e {
                        Some(e) => [
                            e.t,
                            inst.threshold(p, fraction),
                            (e.mode + 1) as f64,
                            sigma[e.mode],
                            e.leak,
                            e.loss,
                        ],
                        None => [f64::NAN; 6],
                    }
                    .map(Cell::Num),
                );
                table.push(row);
            }
        }
    }
    table
}

fn final_table(t_end: f64, runs: &[ScaleRun]) -> Table {
    let mut table = Table::new(&[
        "s",
        "loss_0",
        "loss_T",
        "loss_orders",
        "teacher_error_kq",
        "teacher_error_vo",
        "sr_kq_T",
        "sr_kq_predicted",
        "sr_vo_T",
        "sr_vo_predicted",
        "sr_kq_initial_velocity",
        "sr_vo_initial_velocity",
        "steps",
        "rhs_evals",
        "lambda_max_T",
        "t_end_lambda_max",
    ]);
    for r in runs {
        let last = r.t.len() - 1;
        table.push(vec![
            r.scale.into(),
            r.loss[0].into(),
            r.loss[last].into(),
            r.loss_orders().into(),
            r.teacher_error[0].into(),
            r.teacher_error[1].into(),
            r.stable_rank[0][last].into(),
            r.predicted_final_rank[0].into(),
            r.stable_rank[1][last].into(),
            r.predicted_final_rank[1].into(),
            r.initial_velocity_rank[0].into(),
            r.initial_velocity_rank[1].into(),
            r.stats.steps.into(),
            r.stats.rhs_evals.into(),
            r.lambda_max.into(),
            (t_end * r.lambda_max).into(),
        ]);
    }
    table
}

/// The data (N samples of n tokens in ℝ^d, inputs and targets) and per init scale one flow of
/// the factorized head (dimension 4·d·d_h, gradient ~3·N·(4n·d·d_h + 2n²(d + d_h))) with every
/// output kept, and the power iterations at its end.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let (d, d_h, tokens, samples) = (n(*p.d), n(*p.d_h), n(*p.tokens), n(*p.samples));
    let dim = 4.0 * d * d_h;
    let grad = 3.0 * samples * (4.0 * tokens * d * d_h + 2.0 * tokens * tokens * (d + d_h));
    let runs = n(p.scales.len());
    Cost::new()
        .doubles(
            "samples, tokens, d",
            "the inputs and targets",
            2.0 * samples * tokens * d,
        )
        .ode("d, d_h, samples, tokens", runs, dim, grad, ctx.ode.method)
        .records(
            "outputs, d, d_h",
            runs,
            n(*p.outputs) + 1.0,
            dim + n(*p.top),
        )
        .work(
            "power_iterations",
            "power iterations",
            runs * n(p.power_iterations),
            2.0 * grad,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.full-matrix-rank",
    paper: "004",
    summary: "Beyond the theory: the full-matrix attention head from small init (init-scale \
              sweep): stable rank and singular values of Δ(W_K W_Qᵀ), Δ(W_V W_Oᵀ) over training, \
              emergence times vs ln(1/s), final rank vs s (Figs. 1, 4, 6, 7 analogue).",
    // mildly stiff at most (T·λ_max ≈ 400): the explicit method is stability-limited only in
    // the tail, while an implicit one would assemble dense 512×512 Jacobians from hvps
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &["teacher_stable_rank_kq", "teacher_stable_rank_vo"],
    run,
};

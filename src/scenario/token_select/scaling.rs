//! `scaling` (issue 21): what one gradient flow costs as the parameter count P = d² grows, for a
//! non-stiff solve (Tsit45) and two implicit ones (Bdf with a dense Newton matrix, and the
//! matrix-free TR-BDF2 with Newton–Krylov), on the token-selection flow of Example 1 in
//! the log clock τ = ln(1 + t) (the flow of `gd-asymptotic`), from W₀ ~ N(0, init_scale²).
//!
//! Cost model (per unit of simulated time τ; n sequences of T tokens held fixed):
//! - one gradient (rhs) is O(nTd + nd²) = O(P) flops, one exact Hessian-vector product too;
//! - Tsit45 takes a number of steps set by the dynamics, not by P: its gradient count is O(P⁰)
//!   and its wall time O(P¹);
//! - Bdf with a dense Newton matrix assembles each Jacobian from P Hessian-vector products
//!   (O(P) gradient-equivalents, O(P²) flops) and factorizes it (O(P³) flops, O(P²) memory):
//!   its gradient-equivalent count is O(P¹) and its wall time between O(P²) and O(P³);
//! - TR-BDF2 with Newton–GMRES on the exact Hessian-vector product assembles nothing: its
//!   products per step depend on the conditioning of I − γhJ, not on P, so its
//!   gradient-equivalent count is O(P⁰) like Tsit45's, its wall time O(P¹) and its memory a
//!   few dozen state vectors.
//!
//! The checks hold deterministic work counts to these exponents: Tsit45's and TR-BDF2–Krylov's
//! gradient-equivalents (P⁰) and Bdf's Hessian-vector products (P¹; its gradient-equivalents add the rhs evaluations
//! of the Newton iterations, a P⁰ term that dominates below P ≈ 10³, so their fitted exponent
//! approaches 1 only from below).
//! Wall times are measured and fitted too, but a clock is not reproducible: they go to
//! `timing.csv` and `timing.svg` only, the two files `tests/determinism.rs` exempts.
//!
//! Memory: the peak heap a solve holds on its thread ([`crate::memory::peak_heap`], measured when
//! the counting allocator is installed, as in the `attnflow` binary; skipped otherwise). Model:
//! Tsit45 and TR-BDF2–Krylov keep a fixed number of state vectors, O(P¹); Bdf keeps the Jacobian,
//! the Newton matrix and its LU, O(P²). Its exponent is checked per method; the bytes go to
//! `timing.csv` (allocation sizes of faer's blocked kernels may depend on the machine's caches).

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::analysis::fit::{log_log_slope_fit, Window};
use crate::attention::{FixedDecoder, Loss};
use crate::flow::lu::allocate_thread_workspace;
use crate::flow::{integrate, Method, OdeConfig, SolverStats};
use crate::memory::peak_heap;
use crate::models::token_select::{Example1, LogTimeGradientFlow};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::{no_validation, Kind};
use crate::scenario::{Report, RunContext, RunError, Table};

use super::common::DATA_STREAM;
use super::params::{Band, Sizes};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Example 1 sequences and tokens per sequence (noise σ = 1/√d, signal 1).
    pub n: AtLeast<1>,
    pub t: AtLeast<2>,
    /// W₀ entries iid N(0, init_scale²).
    pub init_scale: Positive,
    /// GF time the flow is followed to (τ_end = ln(1 + t_end)).
    pub t_end: Positive,
    /// Dimensions d (P = d² parameters) solved with Tsit45, increasing.
    pub tsit45_d: Sizes<2, 2>,
    /// Dimensions solved with Bdf (dense LU: keep P ≲ 2·10³), increasing.
    pub bdf_d: Sizes<2, 2>,
    /// Dimensions solved with the matrix-free TR-BDF2–Krylov, increasing.
    pub krylov_d: Sizes<2, 2>,
    /// Gradient-equivalents of one Hessian-vector product (cost model; ≈ 2 measured by
    /// benches/solvers.rs, `token_ex1_d32_t1e10/{rhs,jvp}`).
    pub hvp_cost: Positive,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Band for the fitted exponent of Tsit45's gradient-equivalents per unit τ against P
    /// (model: 0).
    pub tsit45_work_exponent: Band,
    /// Band for the exponent of Bdf's Hessian-vector products per unit τ (model: 1, the P
    /// products of each Jacobian).
    pub bdf_work_exponent: Band,
    /// Band for the exponent of TR-BDF2–Krylov's gradient-equivalents per unit τ (model: 0).
    pub krylov_work_exponent: Band,
    /// Bands for the exponent of the peak heap of a solve in P: Tsit45 and TR-BDF2–Krylov keep
    /// state vectors (model 1), Bdf dense P × P matrices (model 2).
    pub vectors_memory_exponent: Band,
    pub bdf_memory_exponent: Band,
}

/// One solve: its size, work counts, wall time and peak heap (None: not measured).
struct Point {
    method: Method,
    d: usize,
    stats: SolverStats,
    peak_heap: Option<usize>,
}

impl Point {
    fn params(&self) -> f64 {
        n(self.d * self.d)
    }
    fn gradient_equivalents(&self, hvp_cost: f64) -> f64 {
        n(self.stats.rhs_evals) + hvp_cost * n(self.stats.jvp_evals)
    }
}

/// The log-clock gradient flow of Example 1 at dimension d: the solver's statistics and the
/// peak heap of the solve.
fn solve(
    p: &Params,
    d: usize,
    cfg: &OdeConfig,
    ctx: &RunContext,
) -> Result<(SolverStats, Option<usize>), RunError> {
    let spec = Example1 {
        n: *p.n,
        t: *p.t,
        d,
        noise: 1.0 / (d as f64).sqrt(),
        ..Example1::ex1()
    };
    let mut rng = ctx.rng(DATA_STREAM);
    let inst = spec
        .generate(&mut rng)
        .map_err(|e| RunError::Other(format!("ex1 data at d = {d}: {e}")))?;
    let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential)
        .map_err(|e| RunError::Other(format!("ex1 model at d = {d}: {e}")))?;
    let w0: Vec<f64> = (0..d * d)
        .map(|_| *p.init_scale * rng.sample::<f64, _>(rand_distr::StandardNormal))
        .collect();
    let flow = LogTimeGradientFlow::new(&model);
    let taus = [0.0, LogTimeGradientFlow::tau_of(*p.t_end)];
    let z0 = flow.initial_state(&w0);
    let (tr, peak) = peak_heap(|| integrate(&flow, &z0, &taus, cfg, None));
    Ok((tr?.stats, peak))
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rep = Report::default();
    let tau_end = LogTimeGradientFlow::tau_of(*p.t_end);
    // faer's kernels allocate a per-thread workspace on first use: held before measuring, so
    // the solves' peaks measure their growth with P only (its size is not reported: it depends on
    // the machine's caches and on whether an earlier scenario on this thread already made it)
    allocate_thread_workspace();
    let mut points = Vec::new();
    for (method, ds) in [
        (Method::Tsit45, &p.tsit45_d),
        (Method::Bdf, &p.bdf_d),
        (Method::TrBdf2Krylov, &p.krylov_d),
    ] {
        let cfg = OdeConfig { method, ..ctx.ode };
        for &d in ds.iter() {
            let (stats, peak_heap) = solve(p, d, &cfg, ctx)?;
            rep.stats(format!("{} d={d}", method.name()), &stats);
            points.push(Point {
                method,
                d,
                stats,
                peak_heap,
            });
        }
    }
    let mut series = Table::new(&[
        "method",
        "d",
        "params",
        "steps",
        "rhs_evals",
        "jvp_evals",
        "linear_solver_setups",
        "gradient_equivalents_per_tau",
    ]);
    let mut timing = Table::new(&[
        "method",
        "d",
        "params",
        "wall_seconds_per_tau",
        "peak_heap_bytes",
    ]);
    for q in &points {
        series.push(vec![
            q.method.name().into(),
            n(q.d).into(),
            q.params().into(),
            n(q.stats.steps).into(),
            n(q.stats.rhs_evals).into(),
            n(q.stats.jvp_evals).into(),
            n(q.stats.linear_solver_setups).into(),
            (q.gradient_equivalents(*p.hvp_cost) / tau_end).into(),
        ]);
        timing.push(vec![
            q.method.name().into(),
            n(q.d).into(),
            q.params().into(),
            (q.stats.wall_seconds / tau_end).into(),
            q.peak_heap.map_or(f64::NAN, n).into(),
        ]);
    }
    rep.series = series;
    rep.tables.push(("timing".into(), timing));

    let all = Window::Time {
        from: 0.0,
        to: f64::INFINITY,
    };
    let mut work_panel = LinePanel::new(
        "work: gradient-equivalents per unit τ",
        "parameters P = d²",
        "gradient-equivalents / τ",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::UpperLeft);
    let mut time_panel = LinePanel::new("wall time per unit τ", "parameters P = d²", "seconds / τ")
        .log_x()
        .log_y()
        .legend(LegendPosition::UpperLeft);
    // (method, checked count, its band and model exponent, gradient-equivalents' and wall
    // time's model exponents)
    type Count = fn(&Point, f64) -> f64;
    let models: [(Method, &str, Count, [f64; 2], &str, &str, &str); 3] = [
        (
            Method::Tsit45,
            "gradient-equivalents",
            |q, c| q.gradient_equivalents(c),
            *c.tsit45_work_exponent,
            "0",
            "0",
            "1",
        ),
        (
            Method::Bdf,
            "Hessian-vector products",
            |q, _| n(q.stats.jvp_evals),
            *c.bdf_work_exponent,
            "1",
            "→ 1",
            "2 to 3",
        ),
        (
            Method::TrBdf2Krylov,
            "gradient-equivalents",
            |q, c| q.gradient_equivalents(c),
            *c.krylov_work_exponent,
            "0",
            "0",
            "1",
        ),
    ];
    for (k, (method, counted, count, band, count_model, work_model, time_model)) in
        models.into_iter().enumerate()
    {
        let pts: Vec<&Point> = points.iter().filter(|q| q.method == method).collect();
        let x: Vec<f64> = pts.iter().map(|q| q.params()).collect();
        let work: Vec<f64> = pts
            .iter()
            .map(|q| q.gradient_equivalents(*p.hvp_cost) / tau_end)
            .collect();
        let wall: Vec<f64> = pts.iter().map(|q| q.stats.wall_seconds / tau_end).collect();
        let name = method.name();
        // figure text: the method's name in print (an underscore would be read as a subscript)
        let label = method.label();
        let fit = |y: &[f64], what: &str| {
            log_log_slope_fit(&x, y, all)
                .map_err(|e| RunError::Other(format!("{name} {what} exponent: {e}")))
        };
        let work_fit = fit(&work, "work")?;
        let counts: Vec<f64> = pts
            .iter()
            .map(|q| count(q, *p.hvp_cost) / tau_end)
            .collect();
        let count_fit = fit(&counts, "count")?;
        rep.derive(&format!("{name}_work_exponent"), count_fit.slope);
        rep.within(
            &format!("exponent-per-tau-model.{name}-{counted}-{count_model}"),
            &format!("{name}: exponent of {counted} per τ in P (model {count_model})"),
            count_fit.slope,
            band[0],
            band[1],
        )
        .note(format!(
            "sizes d = {:?}",
            pts.iter().map(|q| q.d).collect::<Vec<_>>()
        ));
        // the wall-time fit is drawn, not checked or stored with the reproducible outputs
        let time_label = match log_log_slope_fit(&x, &wall, all) {
            Ok(f) => format!("{label}: P^{{{:.2}}} (model {time_model})", f.slope),
            Err(_) => format!("{label}: no fit (model {time_model})"),
        };
        work_panel = work_panel.series(
            Series::new(
                format!("{label}: P^{{{:.2}}} (model {work_model})", work_fit.slope),
                x.clone(),
                work,
                LineStyle::SolidMarkers,
            )
            .color(k),
        );
        time_panel =
            time_panel.series(Series::new(time_label, x, wall, LineStyle::SolidMarkers).color(k));
    }
    let memory_panel = memory_checks(&points, c, &mut rep)?;
    // 1e10 printed as 10¹⁰ (real superscripts in figure text)
    let log10_t = p.t_end.log10();
    let horizon = if log10_t.fract() == 0.0 {
        format!("10^{{{log10_t}}}")
    } else {
        format!("{:e}", *p.t_end)
    };
    let title = format!(
        "Cost of the Example-1 gradient flow (n = {}, T = {}) to t = {horizon} against P",
        *p.n, *p.t
    );
    rep.figure = Some(Figure::new(1).title(title.clone()).panel(work_panel));
    let timing_figure = match memory_panel {
        Some(memory) => Figure::new(2).panel(time_panel).panel(memory),
        None => Figure::new(1).panel(time_panel),
    };
    rep.figures
        .push(("timing".into(), timing_figure.title(title)));
    Ok(rep)
}

/// The exponent of each method's peak heap in P against the memory model, and its panel; the
/// checks are skipped (and no panel drawn) when the counting allocator is not installed.
fn memory_checks(
    points: &[Point],
    c: &Checks,
    rep: &mut Report,
) -> Result<Option<LinePanel>, RunError> {
    let all = Window::Time {
        from: 0.0,
        to: f64::INFINITY,
    };
    let mut panel = LinePanel::new("peak heap of one solve", "parameters P = d²", "bytes")
        .log_x()
        .log_y()
        .legend(LegendPosition::UpperLeft);
    let mut measured_any = false;
    for (k, (method, band, model)) in [
        (Method::Tsit45, *c.vectors_memory_exponent, "1"),
        (Method::Bdf, *c.bdf_memory_exponent, "2"),
        (Method::TrBdf2Krylov, *c.vectors_memory_exponent, "1"),
    ]
    .into_iter()
    .enumerate()
    {
        let pts: Vec<&Point> = points.iter().filter(|q| q.method == method).collect();
        let name = method.name();
        let id = format!("memory-exponent.{name}");
        let title = format!("{name}: exponent of a solve's peak heap in P (model {model})");
        let Some(bytes) = pts
            .iter()
            .map(|q| q.peak_heap.map(n))
            .collect::<Option<Vec<f64>>>()
        else {
            rep.skip(
                &id,
                title,
                "heap memory is counted only where attnflow's allocator is installed (the \
                 attnflow binary installs it; attnflow::memory::PeakHeap)",
            );
            continue;
        };
        let x: Vec<f64> = pts.iter().map(|q| q.params()).collect();
        let fit = log_log_slope_fit(&x, &bytes, all)
            .map_err(|e| RunError::Other(format!("{name} memory exponent: {e}")))?;
        rep.derive(&format!("{name}_memory_exponent"), fit.slope);
        rep.within(&id, &title, fit.slope, band[0], band[1])
            .note(format!(
                "peak heap {:.3e} … {:.3e} bytes at P = {} … {}; faer's one-time per-thread \
                 workspace is allocated before the solves and not counted",
                bytes[0],
                bytes[bytes.len() - 1],
                x[0],
                x[x.len() - 1]
            ));
        panel = panel.series(
            Series::new(
                format!("{}: P^{{{:.2}}} (model {model})", method.label(), fit.slope),
                x,
                bytes,
                LineStyle::SolidMarkers,
            )
            .color(k),
        );
        measured_any = true;
    }
    Ok(measured_any.then_some(panel))
}

/// Per size: the model (n·T·d tokens), one solve of d² + 1 states; Bdf's dense Newton matrix,
/// its LU and the stored Jacobian (3 (d² + 1)² doubles) refreshed from d² + 1 products.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let mut cost = Cost::new();
    for (method, ds, key) in [
        (Method::Tsit45, &p.tsit45_d, "tsit45_d"),
        (Method::Bdf, &p.bdf_d, "bdf_d"),
        (Method::TrBdf2Krylov, &p.krylov_d, "krylov_d"),
    ] {
        for &d in ds.iter() {
            let dim = n(d * d + 1);
            let grad_flops = 4.0 * n(*p.n) * (n(*p.t) * n(d) + n(d * d));
            cost = cost
                .doubles(key, "tokens, workspace", n(*p.n * *p.t * d) + 8.0 * dim)
                .ode(key, 1.0, dim, grad_flops, method);
        }
    }
    let sizes = p.tsit45_d.len() + p.bdf_d.len() + p.krylov_d.len();
    cost.table("tsit45_d, bdf_d, krylov_d", n(sizes), 8.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.scaling",
    paper: "003",
    summary: "Cost of the Example-1 gradient flow against its parameter count P = d² (10²…10⁵): \
              Tsit45, Bdf and matrix-free TR-BDF2–Krylov work (gradient-equivalents per unit time) with fitted exponents \
              checked against the cost model, and wall time (timing.csv, timing.svg).",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate: no_validation,
    cost,
    quantities: &[
        "tsit45_work_exponent",
        "bdf_work_exponent",
        "tr_bdf2_krylov_work_exponent",
        "*_memory_exponent",
    ],
    run,
};

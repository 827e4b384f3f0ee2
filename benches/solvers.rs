//! Solver benchmarks on the seed-000 flows (the solves of the `work-precision` scenario):
//! each integrator at one tolerance and gradient descent to the same horizon, on ℓ_df (eq, d = 10)
//! and ℓ_tf (eq, d = 10, N = n = 100), plus the hot-path kernels (tf gradient and Hessian-vector
//! product at d = 10 and 26, which must not allocate: see tests/histogram_tf_alloc.rs).
//!
//!
//! The token-selection group is the seed-003 flow of issue 21: Example 1 (n = 8, T = 4, d = 32,
//! 1,025 states) in the log clock τ = ln(1 + t) to t = 1e10 from W₀ ~ N(0, 0.01²), with Tsit45
//! and Bdf, and its gradient and Hessian-vector product.
//!
//! The scaling group times the same flow from P = d² = 10² to 10⁵ parameters per method.
//!
//! Run: `cargo bench --bench solvers` (a few minutes). Measurement times are short on purpose;
//! pass `-- --measurement-time 10` for tighter intervals.

use std::hint::black_box;
use std::time::Duration;

use attnflow::attention::{FixedDecoder, Loss};
use attnflow::flow::{
    gradient_descent, integrate_flow, DiscreteConfig, GradientFlow, Method, OdeConfig, Recording,
    StepRule,
};
use attnflow::flow::{integrate, LinearSolver, VectorField};
use attnflow::models::histogram::{task_matrix, DfFlow, HistogramData, Task, TfFlow};
use attnflow::models::token_select::{Example1, LogTimeGradientFlow};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

const RTOL: f64 = 1e-8;
const ATOL: f64 = 1e-10;

/// The eq-task dataset and a N(0, σ²) init, seeded.
fn setup(d: usize, seq_len: usize, n: usize, sigma: f64) -> (HistogramData, Vec<f64>) {
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    let data = HistogramData::sample(task_matrix(&Task::Eq, d), seq_len, n, &mut rng);
    let z0 = (0..d * (d + 1))
        .map(|_| {
            let x: f64 = StandardNormal.sample(&mut rng);
            sigma * x
        })
        .collect();
    (data, z0)
}

/// Every integrator at (RTOL, ATOL) and GD with step `eta`, all to `t_end`.
fn bench_solves(
    c: &mut Criterion,
    group: &str,
    flow: &dyn GradientFlow,
    z0: &[f64],
    t_end: f64,
    eta: f64,
) {
    let mut g = c.benchmark_group(group);
    let times = [0.0, t_end];
    for method in Method::ALL {
        let cfg = OdeConfig::new(method, RTOL, ATOL);
        g.bench_function(BenchmarkId::new("ode", method.name()), |b| {
            b.iter(|| integrate_flow(flow, black_box(z0), &times, &cfg).expect("solve"))
        });
    }
    let steps = (t_end / eta).round() as usize;
    let cfg = DiscreteConfig::new(StepRule::Constant { eta }, steps, Recording::Every(steps));
    g.bench_function(BenchmarkId::new("gd", format!("eta={eta}")), |b| {
        b.iter(|| gradient_descent(flow, black_box(z0), &cfg).expect("gd"))
    });
    g.finish();
}

fn solves(c: &mut Criterion) {
    let (data, z0) = setup(10, 100, 100, 0.5);
    bench_solves(
        c,
        "df_eq_d10_t20",
        &DfFlow::new(data.m.clone()),
        &z0,
        20.0,
        1e-2,
    );
    bench_solves(c, "tf_eq_d10_t1", &TfFlow::from_data(&data), &z0, 1.0, 1e-4);
}

/// Example 1 at dimension d (noise 1/√d, seeded) and W₀ ~ N(0, 0.01²).
fn token_setup(d: usize) -> (FixedDecoder, Vec<f64>) {
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    let spec = Example1 {
        d,
        noise: 1.0 / (d as f64).sqrt(),
        ..Example1::ex1()
    };
    let inst = spec.generate(&mut rng).expect("ex1");
    let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential).expect("model");
    let w0 = (0..model.dim())
        .map(|_| {
            let x: f64 = StandardNormal.sample(&mut rng);
            0.01 * x
        })
        .collect();
    (model, w0)
}

fn token_select(c: &mut Criterion) {
    let (model, w0) = token_setup(32);
    let flow = LogTimeGradientFlow::new(&model);
    let z0 = flow.initial_state(&w0);
    let taus = [0.0, LogTimeGradientFlow::tau_of(1e10)];
    let mut g = c.benchmark_group("token_ex1_d32_t1e10");
    for method in [Method::Tsit45, Method::Bdf] {
        let cfg = OdeConfig::new(method, RTOL, ATOL);
        g.bench_function(BenchmarkId::new("ode", method.name()), |b| {
            b.iter(|| integrate(&flow, black_box(&z0), &taus, &cfg, None).expect("solve"))
        });
    }
    g.finish();
    // the dense factorization behind Bdf's Newton systems, each backend forced (`auto` picks by
    // dimension and symmetry)
    let mut g = c.benchmark_group("linear_solver");
    let (data, tf_z0) = setup(10, 100, 100, 0.5);
    let tf = TfFlow::from_data(&data);
    for lu in [
        LinearSolver::Nalgebra,
        LinearSolver::Faer,
        LinearSolver::Cholesky,
        LinearSolver::LowRank,
    ] {
        let cfg = OdeConfig {
            linear_solver: lu,
            ..OdeConfig::new(Method::Bdf, RTOL, ATOL)
        };
        let name = format!("{lu:?}").to_lowercase();
        g.bench_function(BenchmarkId::new("tf_d10_bdf", &name), |b| {
            b.iter(|| integrate_flow(&tf, black_box(&tf_z0), &[0.0, 1.0], &cfg).expect("solve"))
        });
        // the token flow's log clock adds a state: its Jacobian is not symmetric
        if lu != LinearSolver::Cholesky {
            g.bench_function(BenchmarkId::new("token_d32_bdf", &name), |b| {
                b.iter(|| integrate(&flow, black_box(&z0), &taus, &cfg, None).expect("solve"))
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group("token_ex1_d32_t1e10");
    let v: Vec<f64> = z0.iter().rev().copied().collect();
    let mut out = vec![0.0; z0.len()];
    g.bench_function("rhs", |b| {
        b.iter(|| flow.rhs(1.0, black_box(&z0), &mut out))
    });
    g.bench_function("jvp", |b| {
        b.iter(|| flow.jvp(1.0, black_box(&z0), black_box(&v), &mut out))
    });
    g.finish();
}

/// Cost against the number of parameters P = d² on the token flow to t = 1e10 (the `scaling`
/// scenario's flow): Tsit45 and the matrix-free TR-BDF2–Krylov from P = 10² to 10⁴ (Tsit45 also
/// 10⁵), Bdf (with `auto`'s low-rank Newton solver) to P ≈ 10³, where its dense Jacobian is 8 MB.
fn scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("scaling_token_t1e10");
    let runs: [(Method, &[usize]); 3] = [
        (Method::Tsit45, &[10, 32, 100, 316]),
        (Method::TrBdf2Krylov, &[10, 32, 100]),
        (Method::Bdf, &[10, 20, 32]),
    ];
    for (method, dims) in runs {
        for &d in dims {
            let (model, w0) = token_setup(d);
            let flow = LogTimeGradientFlow::new(&model);
            let z0 = flow.initial_state(&w0);
            let taus = [0.0, LogTimeGradientFlow::tau_of(1e10)];
            let cfg = OdeConfig::new(method, RTOL, ATOL);
            g.bench_function(BenchmarkId::new(method.name(), d * d), |b| {
                b.iter(|| integrate(&flow, black_box(&z0), &taus, &cfg, None).expect("solve"))
            });
        }
    }
    g.finish();
}

fn kernels(c: &mut Criterion) {
    let mut g = c.benchmark_group("kernels");
    for d in [10, 26] {
        let (data, z) = setup(d, 100, 2 * d, 0.5);
        let u: Vec<f64> = z.iter().rev().copied().collect();
        let mut out = vec![0.0; z.len()];
        let flows: [(&str, Box<dyn GradientFlow>); 2] = [
            ("tf", Box::new(TfFlow::from_data(&data))),
            ("df", Box::new(DfFlow::new(data.m.clone()))),
        ];
        for (name, flow) in &flows {
            g.bench_function(BenchmarkId::new(format!("{name}_grad"), d), |b| {
                b.iter(|| flow.grad(black_box(&z), &mut out))
            });
            g.bench_function(BenchmarkId::new(format!("{name}_hvp"), d), |b| {
                b.iter(|| flow.hvp(black_box(&z), black_box(&u), &mut out))
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = solves, token_select, scaling, kernels
}
criterion_main!(benches);

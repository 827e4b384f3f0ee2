//! Your own model, from scratch: a two-layer linear network ŷ(x) = Σⱼ aⱼ bⱼᵀx fitted by least
//! squares to a linear teacher y = β*ᵀx, written against attnflow's engine.
//!
//! 1. implement [`GradientFlow`]: the loss, its gradient and its exact Hessian-vector product
//!    (and the flow's conserved quantities aⱼ² − ‖bⱼ‖²);
//! 2. check the gradient and the Hessian-vector product against forward-mode AD (num-dual);
//! 3. integrate the gradient flow with an implicit (Bdf) and an explicit (Tsit45) method;
//! 4. analyse: the stationary point the flow reaches, its Hessian spectrum (a minimum on a
//!    manifold of minimizers: zero modes along the manifold), and the saddle at the origin;
//! 5. draw the loss curves to an SVG.
//!
//! Run: `cargo run --release --example own_model -- [--out DIR]` (default: the system's temp
//! folder). `cargo test` runs it too.

use std::path::PathBuf;

use attnflow::analysis::linearize::{conditioning, hessian, symmetric_eigenvalues};
use attnflow::analysis::stationary::{find_stationary, NewtonOptions, Target};
use attnflow::flow::{integrate_flow, linspace, GradientFlow, Method, OdeConfig};
use attnflow::plot::{render_svg, Figure, LinePanel, Series};
use num_dual::{DualNum, HyperDual64};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// ℓ(a, B) = (1/2N) Σₙ (Σⱼ aⱼ bⱼᵀxₙ − yₙ)², state z = (a ∈ ℝʰ, B ∈ ℝ^{h×d} row-major).
struct TwoLayer {
    /// Inputs, n × d row-major.
    x: Vec<f64>,
    y: Vec<f64>,
    d: usize,
    h: usize,
}

impl TwoLayer {
    fn n(&self) -> usize {
        self.y.len()
    }
    fn input(&self, n: usize) -> &[f64] {
        &self.x[n * self.d..(n + 1) * self.d]
    }
    /// bⱼᵀx for row j of B (stored after the h entries of a).
    fn hidden<T: DualNum<f64> + Copy>(&self, z: &[T], j: usize, x: &[f64]) -> T {
        let b = &z[self.h + j * self.d..self.h + (j + 1) * self.d];
        b.iter()
            .zip(x)
            .fold(T::from(0.0), |s, (bk, xk)| s + *bk * *xk)
    }
    /// The loss, written once for f64 and for the dual numbers of the AD check.
    fn loss_of<T: DualNum<f64> + Copy>(&self, z: &[T]) -> T {
        let mut total = T::from(0.0);
        for n in 0..self.n() {
            let x = self.input(n);
            let pred = (0..self.h).fold(T::from(0.0), |s, j| s + z[j] * self.hidden(z, j, x));
            let r = pred - self.y[n];
            total += r * r;
        }
        total * (0.5 / self.n() as f64)
    }
}

impl GradientFlow for TwoLayer {
    fn dim(&self) -> usize {
        self.h * (1 + self.d)
    }
    fn loss(&self, z: &[f64]) -> f64 {
        self.loss_of(z)
    }
    /// ∂ℓ/∂aⱼ = (1/N) Σ rₙ bⱼᵀxₙ, ∂ℓ/∂bⱼ = (1/N) Σ rₙ aⱼ xₙ with rₙ = ŷₙ − yₙ.
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let (h, d, w) = (self.h, self.d, 1.0 / self.n() as f64);
        g.fill(0.0);
        for n in 0..self.n() {
            let x = self.input(n);
            let r = (0..h).map(|j| z[j] * self.hidden(z, j, x)).sum::<f64>() - self.y[n];
            for j in 0..h {
                g[j] += w * r * self.hidden(z, j, x);
                for k in 0..d {
                    g[h + j * d + k] += w * r * z[j] * x[k];
                }
            }
        }
    }
    /// The directional derivative of the gradient along u = (uₐ, U): with δŷₙ = Σⱼ (uₐⱼ bⱼᵀxₙ +
    /// aⱼ Uⱼᵀxₙ), (H u)ₐⱼ = (1/N) Σ (δŷₙ bⱼᵀxₙ + rₙ Uⱼᵀxₙ) and
    /// (H u)_{bⱼ} = (1/N) Σ (δŷₙ aⱼ + rₙ uₐⱼ) xₙ.
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
        let (h, d, w) = (self.h, self.d, 1.0 / self.n() as f64);
        out.fill(0.0);
        for n in 0..self.n() {
            let x = self.input(n);
            let r = (0..h).map(|j| z[j] * self.hidden(z, j, x)).sum::<f64>() - self.y[n];
            let dy: f64 = (0..h)
                .map(|j| u[j] * self.hidden(z, j, x) + z[j] * self.hidden(u, j, x))
                .sum();
            for j in 0..h {
                out[j] += w * (dy * self.hidden(z, j, x) + r * self.hidden(u, j, x));
                for k in 0..d {
                    out[h + j * d + k] += w * (dy * z[j] + r * u[j]) * x[k];
                }
            }
        }
    }
    /// Gradient flow of a two-layer linear network keeps aⱼ² − ‖bⱼ‖² (the balancedness).
    fn invariant_names(&self) -> Vec<String> {
        (0..self.h).map(|j| format!("a_{j}² − ‖b_{j}‖²")).collect()
    }
    fn invariants(&self, z: &[f64], out: &mut [f64]) {
        for (j, o) in out.iter_mut().enumerate() {
            let b = &z[self.h + j * self.d..self.h + (j + 1) * self.d];
            *o = z[j] * z[j] - b.iter().map(|v| v * v).sum::<f64>();
        }
    }
}

/// (∇ℓ, ∇²ℓ·v) by forward-mode AD: one hyper-dual pass per coordinate.
fn ad_grad_hvp(model: &TwoLayer, z: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let n = z.len();
    let mut grad = vec![0.0; n];
    let mut hvp = vec![0.0; n];
    for j in 0..n {
        let dual: Vec<HyperDual64> = (0..n)
            .map(|k| HyperDual64::new(z[k], if k == j { 1.0 } else { 0.0 }, v[k], 0.0))
            .collect();
        let l = model.loss_of(&dual);
        grad[j] = l.eps1;
        hvp[j] = l.eps1eps2;
    }
    (grad, hvp)
}

fn max_rel_err(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `--out DIR`; other arguments (a test harness's) are ignored
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let out_dir = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("attnflow-own-model"));

    // data: 40 Gaussian inputs in ℝ³, teacher β* = (1, −2, 0.5); one seed drives everything
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let (d, h, count) = (3, 2, 40);
    let beta = [1.0, -2.0, 0.5];
    let x: Vec<f64> = (0..count * d)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let y: Vec<f64> = (0..count)
        .map(|n| (0..d).map(|k| beta[k] * x[n * d + k]).sum())
        .collect();
    let model = TwoLayer { x, y, d, h };
    let z0: Vec<f64> = (0..model.dim())
        .map(|_| 0.1 * rng.random_range(-1.0..1.0))
        .collect();

    // 1–2. exact derivatives, checked against forward-mode AD at a random point
    let probe: Vec<f64> = (0..model.dim())
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let v: Vec<f64> = (0..model.dim())
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let (ad_grad, ad_hvp) = ad_grad_hvp(&model, &probe, &v);
    let mut grad = vec![0.0; model.dim()];
    let mut hv = vec![0.0; model.dim()];
    model.grad(&probe, &mut grad);
    model.hvp(&probe, &v, &mut hv);
    let (grad_err, hvp_err) = (max_rel_err(&grad, &ad_grad), max_rel_err(&hv, &ad_hvp));
    println!(
        "gradient vs AD: relative error {grad_err:.1e}; Hessian-vector product: {hvp_err:.1e}"
    );
    assert!(grad_err < 1e-12 && hvp_err < 1e-12);

    // 3. the gradient flow, implicit and explicit
    let times = linspace(0.0, 60.0, 121);
    let mut runs = Vec::new();
    for method in [Method::Bdf, Method::Tsit45] {
        let traj = integrate_flow(&model, &z0, &times, &OdeConfig::new(method, 1e-10, 1e-12))?;
        let drift = attnflow::stats::max(
            traj.invariants
                .iter()
                .flat_map(|(_, v)| v.iter().map(|x| (x - v[0]).abs())),
        );
        println!(
            "{:>6}: ℓ(60) = {:.3e} in {} steps ({} Hessian-vector products), invariant drift \
             {drift:.1e}, stop: {:?}",
            method.name(),
            traj.loss.last().unwrap(),
            traj.stats.steps,
            traj.stats.jvp_evals,
            traj.stop
        );
        assert!(drift < 1e-7, "{} broke a conservation law", method.name());
        runs.push((method, traj));
    }
    let (end_bdf, end_tsit) = (runs[0].1.last_state(), runs[1].1.last_state());
    assert!(
        max_rel_err(end_bdf, end_tsit) < 1e-6,
        "the two integrators disagree"
    );

    // 4. the flow's end point polished to a minimum: the product Bᵀa recovers β*, and the
    // Hessian has d positive eigenvalues and h(1 + d) − d zero modes (the minimizer manifold)
    let minimum = find_stationary(&model, end_bdf, &NewtonOptions::new(Target::Minimum))?;
    let recovered: Vec<f64> = (0..d)
        .map(|k| {
            (0..h)
                .map(|j| minimum.z[j] * minimum.z[h + j * d + k])
                .sum()
        })
        .collect();
    let spectrum = symmetric_eigenvalues(&hessian(&model, &minimum.z)?.matrix)?;
    let kappa = conditioning(&spectrum, 1e-8)?;
    let eigenvalues: Vec<String> = spectrum.iter().map(|v| format!("{v:.2e}")).collect();
    println!(
        "minimum: ℓ = {:.1e}, ‖∇ℓ‖ = {:.1e}, Bᵀa = {recovered:.6?}, Hessian eigenvalues [{}], \
         inertia {:?}, κ of the non-flat directions {:.2}",
        minimum.loss,
        minimum.grad_norm,
        eigenvalues.join(", "),
        minimum.inertia,
        kappa.kappa_nonzero
    );
    assert!(max_rel_err(&recovered, &beta) < 1e-8);
    assert_eq!(minimum.morse_index(), 0);
    assert_eq!(minimum.inertia.positive, d);
    assert_eq!(minimum.inertia.zero, model.dim() - d);
    // the origin is a saddle: one descent direction per hidden unit
    let origin = find_stationary(
        &model,
        &vec![1e-3; model.dim()],
        &NewtonOptions::new(Target::Any),
    )?;
    println!(
        "saddle near the origin: ‖z‖ = {:.1e}, ℓ = {:.3}, inertia {:?}",
        attnflow::flow::norm(&origin.z),
        origin.loss,
        origin.inertia
    );
    assert_eq!(origin.morse_index(), h);

    // 5. the loss along both integrations
    let mut panel = LinePanel::new("Two-layer linear network", "t", "loss").log_y();
    for (i, (method, traj)) in runs.iter().enumerate() {
        panel = panel
            .series(Series::numerics(method.name(), traj.t.clone(), traj.loss.clone()).color(i));
    }
    std::fs::create_dir_all(&out_dir)?;
    let path = out_dir.join("own_model.svg");
    std::fs::write(&path, render_svg(&Figure::single(panel))?)?;
    println!("figure written to {}", path.display());
    Ok(())
}

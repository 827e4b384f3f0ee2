//! TR-BDF2 with matrix-free Newton–Krylov linear algebra: the implicit method for stiff flows too
//! large for a dense Newton matrix.
//!
//! diffsol's implicit methods factorize the Newton matrix I − γhJ, assembled from n Jacobian-vector
//! products: O(n²) memory and O(n³) work per factorization, out of reach beyond a few thousand
//! parameters (one LU of a 10⁴ × 10⁴ matrix takes minutes). Here the Newton systems are solved by
//! restarted GMRES whose operator is the field's exact Jacobian-vector product (for a gradient
//! flow the analytic Hessian-vector product −∇²ℓ·u): nothing is assembled, memory is a few dozen
//! state vectors, and a step costs a number of products that grows with the conditioning of
//! I − γhJ, not with n².
//!
//! The method is TR-BDF2 (Bank et al. 1985; Hosea & Shampine 1996) with γ = 2 − √2: a trapezoidal
//! stage to t + γh, then a BDF2 stage to t + h; second order, L-stable, both stages with the same
//! coefficient γh/2 on the field. The local error is estimated from f at t, t + γh and t + h
//! (its third derivative via the divided difference) and filtered through (I − γhJ/2)⁻¹, as
//! Shampine recommends for stiff components; steps are accepted on the weighted RMS norm of
//! [`OdeConfig`]'s tolerances. Samples come from the cubic Hermite interpolant of each step.
//! Every vector is allocated once per solve; events are not supported (use a diffsol method).

use std::cell::Cell;
use std::time::Instant;

use super::trajectory::{SolverStats, Trajectory};
use super::{FlowError, OdeConfig, VectorField};

/// TR-BDF2's γ: the trapezoidal stage ends at t + γh.
const GAMMA: f64 = 2.0 - std::f64::consts::SQRT_2;
/// The coefficient of h·f in both stages: γ/2 = (1 − γ)/(2 − γ).
const D: f64 = GAMMA / 2.0;
/// Krylov subspace dimension before a restart.
const KRYLOV_DIM: usize = 30;
/// Restarts of GMRES before a linear solve counts as failed.
const MAX_RESTARTS: usize = 20;
/// Newton iterations per stage before the step is retried with h/4.
const NEWTON_MAX: usize = 7;
/// A stage's Newton iteration has converged when its remaining error (the update times the
/// contraction rate) is this small in the weighted RMS norm (1 = the local error tolerance).
const NEWTON_TOL: f64 = 3e-2;
/// GMRES stops at this weighted RMS residual: far below the Newton tolerance, so inexact linear
/// solves do not slow Newton's convergence.
const KRYLOV_TOL: f64 = 1e-3;

/// The constant of TR-BDF2's local error C·h³·z‴ (Hosea & Shampine 1996, eq. 2.4 with γ = 2 − √2).
fn error_constant() -> f64 {
    (-3.0 * GAMMA * GAMMA + 4.0 * GAMMA - 2.0) / (12.0 * (2.0 - GAMMA))
}

/// Counts of one solve, and why a step attempt failed.
#[derive(Default)]
struct Counters {
    rhs: Cell<usize>,
    jvp: Cell<usize>,
    newton: usize,
    newton_failures: usize,
    rejected: usize,
}

/// Workspace of one solve: every vector the steps need, allocated once.
struct Solver<'a, V: VectorField + ?Sized> {
    field: &'a V,
    n: usize,
    cfg: OdeConfig,
    /// Error weights 1/(atol + rtol·|z|) of the current step.
    weight: Vec<f64>,
    /// GMRES: orthonormal basis (KRYLOV_DIM + 1 vectors), Hessenberg matrix, Givens rotations.
    basis: Vec<f64>,
    hess: Vec<f64>,
    cs: Vec<f64>,
    sn: Vec<f64>,
    g: Vec<f64>,
    work: Vec<f64>,
    /// Newton's contraction rate, estimated from successive updates and carried across stages
    /// and steps (as CVODE does): near-linear stages then stop after one iteration.
    rate: f64,
    counters: Counters,
}

impl<'a, V: VectorField + ?Sized> Solver<'a, V> {
    fn new(field: &'a V, cfg: &OdeConfig) -> Self {
        let n = field.dim();
        let m = KRYLOV_DIM.min(n).max(1);
        Solver {
            field,
            n,
            cfg: *cfg,
            weight: vec![0.0; n],
            basis: vec![0.0; (m + 1) * n],
            hess: vec![0.0; (m + 1) * m],
            cs: vec![0.0; m],
            sn: vec![0.0; m],
            g: vec![0.0; m + 1],
            work: vec![0.0; n],
            rate: 1.0,
            counters: Counters::default(),
        }
    }

    fn rhs(&self, t: f64, z: &[f64], out: &mut [f64]) {
        self.counters.rhs.set(self.counters.rhs.get() + 1);
        self.field.rhs(t, z, out);
    }

    /// Weighted RMS norm of `v`.
    fn norm(&self, v: &[f64]) -> f64 {
        let s: f64 = v
            .iter()
            .zip(&self.weight)
            .map(|(x, w)| (x * w).powi(2))
            .sum();
        (s / self.n as f64).sqrt()
    }

    fn set_weights(&mut self, a: &[f64], b: &[f64]) {
        let (rtol, atol) = (self.cfg.rtol, self.cfg.atol);
        for ((w, x), y) in self.weight.iter_mut().zip(a).zip(b) {
            *w = 1.0 / (atol + rtol * x.abs().max(y.abs()));
        }
    }

    /// Solves (I − c·J(t, z))·x = b by restarted GMRES on the system scaled by the error weights
    /// (so its Euclidean residual is the weighted one), with x₀ = 0. `x` receives the solution;
    /// false when [`MAX_RESTARTS`] restarts do not reach [`KRYLOV_TOL`].
    fn solve(&mut self, t: f64, z: &[f64], c: f64, b: &[f64], x: &mut [f64]) -> bool {
        let n = self.n;
        let m = KRYLOV_DIM.min(n).max(1);
        let target = KRYLOV_TOL * (n as f64).sqrt();
        x.iter_mut().for_each(|v| *v = 0.0);
        for _ in 0..MAX_RESTARTS {
            // r = W(b − A x), the scaled residual, as the first basis vector
            self.apply(t, z, c, x);
            for i in 0..n {
                self.basis[i] = self.weight[i] * (b[i] - self.work[i]);
            }
            let beta = dot(&self.basis[..n], &self.basis[..n]).sqrt();
            if beta <= target {
                return true;
            }
            self.basis[..n].iter_mut().for_each(|v| *v /= beta);
            self.g.iter_mut().for_each(|v| *v = 0.0);
            self.g[0] = beta;
            let mut k_used = 0;
            let mut converged = false;
            for k in 0..m {
                // w = Â v_k with Â = W A W⁻¹
                let (done, rest) = self.basis.split_at_mut((k + 1) * n);
                let v_k = &done[k * n..];
                let w = &mut rest[..n];
                for i in 0..n {
                    w[i] = v_k[i] / self.weight[i];
                }
                self.counters.jvp.set(self.counters.jvp.get() + 1);
                self.field.jvp(t, z, w, &mut self.work);
                for i in 0..n {
                    w[i] = self.weight[i] * (w[i] - c * self.work[i]);
                }
                // modified Gram–Schmidt against v_0 … v_k
                for j in 0..=k {
                    let h = dot(&done[j * n..(j + 1) * n], w);
                    self.hess[j * m + k] = h;
                    w.iter_mut()
                        .zip(&done[j * n..(j + 1) * n])
                        .for_each(|(wi, vi)| *wi -= h * vi);
                }
                let h_next = dot(w, w).sqrt();
                self.hess[(k + 1) * m + k] = h_next;
                if h_next > 0.0 {
                    w.iter_mut().for_each(|wi| *wi /= h_next);
                }
                // apply the previous rotations to column k, then a new one zeroing h_{k+1,k}
                for j in 0..k {
                    let (a, b2) = (self.hess[j * m + k], self.hess[(j + 1) * m + k]);
                    self.hess[j * m + k] = self.cs[j] * a + self.sn[j] * b2;
                    self.hess[(j + 1) * m + k] = -self.sn[j] * a + self.cs[j] * b2;
                }
                let (a, b2) = (self.hess[k * m + k], self.hess[(k + 1) * m + k]);
                let r = a.hypot(b2);
                let (cs, sn) = if r == 0.0 {
                    (1.0, 0.0)
                } else {
                    (a / r, b2 / r)
                };
                self.cs[k] = cs;
                self.sn[k] = sn;
                self.hess[k * m + k] = r;
                self.hess[(k + 1) * m + k] = 0.0;
                self.g[k + 1] = -sn * self.g[k];
                self.g[k] *= cs;
                k_used = k + 1;
                if self.g[k + 1].abs() <= target || h_next == 0.0 {
                    converged = true;
                    break;
                }
            }
            // back-substitute R y = g and add W⁻¹ V y to x
            let mut y = [0.0; KRYLOV_DIM];
            for i in (0..k_used).rev() {
                let s: f64 = (i + 1..k_used).map(|j| self.hess[i * m + j] * y[j]).sum();
                y[i] = (self.g[i] - s) / self.hess[i * m + i];
            }
            for (j, yj) in y.iter().enumerate().take(k_used) {
                let v = &self.basis[j * n..(j + 1) * n];
                for i in 0..n {
                    x[i] += yj * v[i] / self.weight[i];
                }
            }
            if converged {
                return x.iter().all(|v| v.is_finite());
            }
        }
        false
    }

    /// `work` = (I − c·J(t, z))·x.
    fn apply(&mut self, t: f64, z: &[f64], c: f64, x: &[f64]) {
        self.counters.jvp.set(self.counters.jvp.get() + 1);
        let mut jx = std::mem::take(&mut self.work);
        self.field.jvp(t, z, x, &mut jx);
        for (j, xi) in jx.iter_mut().zip(x) {
            *j = xi - c * *j;
        }
        self.work = jx;
    }

    /// Newton's method for the stage equation z − c·f(t, z) = r from the guess in `z`; on success
    /// `f` holds f(t, z) at the solution.
    fn stage(
        &mut self,
        t: f64,
        c: f64,
        r: &[f64],
        z: &mut [f64],
        f: &mut [f64],
        scratch: &mut Scratch,
    ) -> bool {
        let mut previous = f64::INFINITY;
        for iteration in 0..NEWTON_MAX {
            self.counters.newton += 1;
            self.rhs(t, z, f);
            for i in 0..self.n {
                scratch.residual[i] = r[i] - z[i] + c * f[i];
            }
            if !self.solve(t, z, c, &scratch.residual, &mut scratch.delta) {
                return false;
            }
            let size = self.norm(&scratch.delta);
            z.iter_mut()
                .zip(&scratch.delta)
                .for_each(|(zi, di)| *zi += di);
            // diverging (or NaN): retry the step with a smaller h
            if !(size <= 2.0 * previous) {
                self.rate = 1.0;
                return false;
            }
            if iteration > 0 {
                self.rate = (0.3 * self.rate).max(size / previous);
            }
            // the remaining error of a contraction with this rate is about size·rate
            if size * self.rate.min(1.0) <= NEWTON_TOL {
                self.rhs(t, z, f);
                return z.iter().chain(f.iter()).all(|v| v.is_finite());
            }
            previous = size;
        }
        false
    }
}

/// Two scratch vectors of the Newton iterations (the stage residual and the update).
struct Scratch {
    residual: Vec<f64>,
    delta: Vec<f64>,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The cubic Hermite interpolant at θ ∈ [0, 1] of a step of length h from (z₀, f₀) to (z₁, f₁).
fn hermite(theta: f64, h: f64, z0: &[f64], f0: &[f64], z1: &[f64], f1: &[f64], out: &mut [f64]) {
    let (t2, t3) = (theta * theta, theta * theta * theta);
    let (a0, b0) = (2.0 * t3 - 3.0 * t2 + 1.0, (t3 - 2.0 * t2 + theta) * h);
    let (a1, b1) = (3.0 * t2 - 2.0 * t3, (t3 - t2) * h);
    for i in 0..out.len() {
        out[i] = a0 * z0[i] + b0 * f0[i] + a1 * z1[i] + b1 * f1[i];
    }
}

/// Integrates ż = f(t, z) from `z0` at `times[0]` with TR-BDF2 and Newton–GMRES, sampling at every
/// entry of `times` (checked by the caller: increasing, at least two). A step whose Newton or
/// GMRES iteration fails is retried with h/4; the solve fails when h falls below round-off of t.
pub fn integrate<V: VectorField + ?Sized>(
    field: &V,
    z0: &[f64],
    times: &[f64],
    cfg: &OdeConfig,
) -> Result<Trajectory, FlowError> {
    let start = Instant::now();
    let n = field.dim();
    let mut s = Solver::new(field, cfg);
    let mut scratch = Scratch {
        residual: vec![0.0; n],
        delta: vec![0.0; n],
    };
    let (t0, t_end) = (times[0], *times.last().expect("at least two times"));
    let fail = |t_reached: f64, reason: String| FlowError::SolverFailed {
        method: cfg.method.name().into(),
        t_reached,
        t_end,
        reason,
    };
    let mut t = t0;
    let mut z = z0.to_vec();
    let mut f = vec![0.0; n];
    s.rhs(t, &z, &mut f);
    let [mut zg, mut fg, mut z1, mut f1, mut r, mut est, mut e] =
        std::array::from_fn(|_| vec![0.0; n]);
    let mut traj = Trajectory::new(n);
    traj.push(t0, &z);
    let mut next = 1;
    // first step: 1% of the state's size at the initial rate (Hairer, Nørsett & Wanner II.4)
    s.set_weights(&z, &z);
    let (size, rate) = (s.norm(&z), s.norm(&f));
    let mut h = match size < 1e-5 || rate < 1e-5 {
        true => 1e-6,
        false => 0.01 * size / rate,
    }
    .min(t_end - t0);
    let mut growth_cap = 5.0;
    let mut steps = 0;
    let a = 1.0 / (GAMMA * (2.0 - GAMMA));
    let b = (1.0 - GAMMA).powi(2) / (GAMMA * (2.0 - GAMMA));
    while t < t_end {
        if steps >= cfg.max_steps {
            return Err(fail(
                t,
                format!("reached the maximum of {} steps", cfg.max_steps),
            ));
        }
        // stretch a step that would leave a sliver before the end
        let last = t + 1.1 * h >= t_end;
        if last {
            h = t_end - t;
        }
        if h <= 16.0 * f64::EPSILON * t.abs().max(t_end.abs()) {
            return Err(fail(t, format!("step size {h:e} too small")));
        }
        let t_new = if last { t_end } else { t + h };
        s.set_weights(&z, &z);
        // trapezoidal stage to t + γh, guessed by Euler
        for i in 0..n {
            r[i] = z[i] + D * h * f[i];
            zg[i] = z[i] + GAMMA * h * f[i];
        }
        let mut ok = s.stage(t + GAMMA * h, D * h, &r, &mut zg, &mut fg, &mut scratch);
        if ok {
            // BDF2 stage to t + h, guessed by extrapolating the first stage
            for i in 0..n {
                r[i] = a * zg[i] - b * z[i];
                z1[i] = z[i] + (zg[i] - z[i]) / GAMMA;
            }
            ok = s.stage(t_new, D * h, &r, &mut z1, &mut f1, &mut scratch);
        }
        let c = 2.0 * error_constant() * h;
        if ok {
            for i in 0..n {
                est[i] =
                    c * (f[i] / GAMMA - fg[i] / (GAMMA * (1.0 - GAMMA)) + f1[i] / (1.0 - GAMMA));
            }
            s.set_weights(&z, &z1);
            ok = s.solve(t_new, &z1, D * h, &est, &mut e);
        }
        if !ok {
            s.counters.newton_failures += 1;
            h *= 0.25;
            growth_cap = 1.0;
            continue;
        }
        let err = s.norm(&e);
        if !(err <= 1.0) {
            s.counters.rejected += 1;
            h *= if err.is_finite() {
                (0.9 * err.powf(-1.0 / 3.0)).clamp(0.2, 0.9)
            } else {
                0.25
            };
            growth_cap = 1.0;
            continue;
        }
        steps += 1;
        while next < times.len() && times[next] <= t_new {
            if times[next] >= t_new {
                traj.push(t_new, &z1);
            } else {
                let theta = (times[next] - t) / (t_new - t);
                hermite(theta, t_new - t, &z, &f, &z1, &f1, &mut scratch.residual);
                traj.push(times[next], &scratch.residual);
            }
            next += 1;
        }
        t = t_new;
        std::mem::swap(&mut z, &mut z1);
        std::mem::swap(&mut f, &mut f1);
        h *= (0.9 * err.max(1e-12).powf(-1.0 / 3.0)).clamp(0.2, growth_cap);
        growth_cap = 5.0;
    }
    let c = &s.counters;
    traj.stats = SolverStats {
        method: cfg.method.name().into(),
        steps,
        rhs_evals: c.rhs.get(),
        jvp_evals: c.jvp.get(),
        linear_solver_setups: 0,
        error_test_failures: c.rejected,
        nonlinear_iterations: c.newton,
        nonlinear_failures: c.newton_failures,
        wall_seconds: start.elapsed().as_secs_f64(),
    };
    Ok(traj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{integrate_flow, linspace, GradientFlow, Method, VectorField};

    /// ℓ(z) = ½ Σ aᵢ zᵢ² with aᵢ log-spaced over `decades` decades: z(t)ᵢ = e^{−aᵢt} z₀ᵢ, a stiff
    /// flow of any size with a known solution.
    struct Quadratic {
        a: Vec<f64>,
    }
    impl Quadratic {
        fn new(n: usize, decades: f64) -> Self {
            let a = (0..n)
                .map(|i| 10f64.powf(decades * i as f64 / (n - 1) as f64))
                .collect();
            Quadratic { a }
        }
    }
    impl GradientFlow for Quadratic {
        fn dim(&self) -> usize {
            self.a.len()
        }
        fn loss(&self, z: &[f64]) -> f64 {
            0.5 * z.iter().zip(&self.a).map(|(z, a)| a * z * z).sum::<f64>()
        }
        fn grad(&self, z: &[f64], g: &mut [f64]) {
            g.iter_mut()
                .zip(z.iter().zip(&self.a))
                .for_each(|(g, (z, a))| *g = a * z);
        }
        fn hvp(&self, _z: &[f64], u: &[f64], out: &mut [f64]) {
            out.iter_mut()
                .zip(u.iter().zip(&self.a))
                .for_each(|(o, (u, a))| *o = a * u);
        }
    }

    fn solve(n: usize) -> (Quadratic, crate::flow::Trajectory, OdeConfig) {
        let flow = Quadratic::new(n, 4.0);
        let times = linspace(0.0, 1.0, 5);
        let cfg = OdeConfig::new(Method::TrBdf2Krylov, 1e-6, 1e-9);
        let tr = integrate_flow(&flow, &vec![1.0; n], &times, &cfg).unwrap();
        (flow, tr, cfg)
    }

    /// 10⁴ parameters, Hessian spectrum over four decades (stiffness 10⁴ on [0, 1]): the samples
    /// follow e^{−aᵢt} to the tolerance, with no factorization and no rejected Newton iteration.
    #[test]
    fn a_large_stiff_flow_follows_its_exact_solution() {
        let (flow, tr, cfg) = solve(10_000);
        let err = crate::stats::max((0..tr.len()).map(|k| {
            let exact: Vec<f64> = flow.a.iter().map(|a| (-a * tr.t[k]).exp()).collect();
            crate::stats::max_abs_diff(tr.state(k), &exact)
        }));
        // the global error of a second-order method over the transient: a few times rtol
        assert!(err < 1e1 * cfg.rtol, "max error {err:e}");
        let st = &tr.stats;
        assert_eq!(
            (st.linear_solver_setups, st.nonlinear_failures),
            (0, 0),
            "{st:?}"
        );
        assert!(st.jvp_evals > 0 && st.steps > 0, "{st:?}");
    }

    /// Matrix-free: the same spectrum on 10³ and 10⁴ parameters takes about the same steps and
    /// products (a dense Newton matrix would cost 10× the products and 10³× the factorizations).
    #[test]
    fn the_work_does_not_grow_with_the_parameter_count() {
        let (_, small, _) = solve(1_000);
        let (_, large, _) = solve(10_000);
        for (what, a, b) in [
            ("steps", small.stats.steps, large.stats.steps),
            ("products", small.stats.jvp_evals, large.stats.jvp_evals),
        ] {
            let ratio = b as f64 / a as f64;
            assert!(
                (0.7..1.5).contains(&ratio),
                "{what}: {a} at 10³, {b} at 10⁴"
            );
        }
    }

    /// A field with a non-symmetric Jacobian (GMRES, not CG): ż = Az, A with eigenvalues −1 ± 2i
    /// and −10⁴. The samples agree with the matrix exponential as closely as diffsol's own
    /// TR-BDF2 (dense LU) at the same tolerances: a second-order method's global error over
    /// ~2·10³ steps is ~10² rtol for both.
    #[test]
    fn a_non_symmetric_stiff_field_is_solved_as_accurately_as_diffsols_tr_bdf2() {
        struct Field;
        impl VectorField for Field {
            fn dim(&self) -> usize {
                3
            }
            fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
                dz[0] = -z[0] + 2.0 * z[1];
                dz[1] = -2.0 * z[0] - z[1];
                dz[2] = -1e4 * z[2];
            }
            fn jvp(&self, t: f64, _z: &[f64], u: &[f64], out: &mut [f64]) {
                self.rhs(t, u, out);
            }
        }
        let times = linspace(0.0, 3.0, 7);
        let worst = |method| {
            let cfg = OdeConfig::new(method, 1e-8, 1e-10);
            let tr = crate::flow::integrate(&Field, &[1.0, 0.0, 1.0], &times, &cfg, None).unwrap();
            crate::stats::max((0..tr.len()).map(|k| {
                let t = tr.t[k];
                let (s, c) = (2.0 * t).sin_cos();
                let exact = [(-t).exp() * c, -(-t).exp() * s, (-1e4 * t).exp()];
                crate::stats::max_abs_diff(tr.state(k), &exact)
            }))
        };
        let (krylov, dense) = (worst(Method::TrBdf2Krylov), worst(Method::TrBdf2));
        assert!(
            krylov < 2.0 * dense && krylov < 1e-5,
            "Krylov {krylov:e}, diffsol {dense:e}"
        );
    }
}

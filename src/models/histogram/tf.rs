//! The transformer flow ℓ_tf(Q, v) = ½ Σ_a Δ_aᵀ H_a Δ_a, Δ = Q Diag(v) − M, with H_a = T3\[a,·,·\]
//! (spec 000 §1.4, §2.3). Cost O(d³) per evaluation, independent of n and N.

use std::cell::RefCell;

use nalgebra::DMatrix;

use super::data::HistogramData;
use super::layout::{self, q_index, v_index};
use super::moments::RowMoments;
use crate::flow::GradientFlow;

/// Work arrays (row-major d × d) so that loss, grad and hvp do not allocate.
#[derive(Debug, Clone)]
struct Scratch {
    delta: Vec<f64>,
    g: Vec<f64>,
    delta_w: Vec<f64>,
    delta_g: Vec<f64>,
}

/// Gradient flow of a row-quadratic loss of W = Q Diag(v) on the canonical state (spec 000
/// §2.1, §2.3): ℓ_tf for `RowMoments` = T3, ℓ_df for the identity, Lemma A.1's generic
/// f = ½‖(Q Diag(v) − M) B‖² for a uniform H = B Bᵀ.
#[derive(Debug, Clone)]
pub struct TfFlow {
    d: usize,
    m: DMatrix<f64>,
    moments: RowMoments,
    scratch: RefCell<Scratch>,
}

impl TfFlow {
    /// The flow for moments H_a and task matrix M (both d-dimensional; panics otherwise).
    pub fn new(moments: RowMoments, m: DMatrix<f64>) -> Self {
        let d = moments.dim();
        assert_eq!(m.shape(), (d, d), "M must be d×d with d = moments.dim()");
        let zeros = vec![0.0; d * d];
        Self {
            d,
            m,
            moments,
            scratch: RefCell::new(Scratch {
                delta: zeros.clone(),
                g: zeros.clone(),
                delta_w: zeros.clone(),
                delta_g: zeros,
            }),
        }
    }

    /// ℓ_tf of a dataset: H_a = T3\[a,·,·\] of its counts (spec 000 §1.4).
    pub fn from_data(data: &HistogramData) -> Self {
        Self::new(data.third_moment(), data.m.clone())
    }

    /// The moment matrices H_a.
    pub fn moments(&self) -> &RowMoments {
        &self.moments
    }

    /// The task matrix M.
    pub fn m(&self) -> &DMatrix<f64> {
        &self.m
    }

    /// Δ = Q Diag(v) − M (row-major) and G = ∂ℓ/∂W into the scratch arrays.
    fn residual_and_gradient(&self, z: &[f64], s: &mut Scratch) {
        let d = self.d;
        for a in 0..d {
            for b in 0..d {
                s.delta[a * d + b] = z[q_index(d, a, b)] * z[v_index(d, b)] - self.m[(a, b)];
            }
        }
        self.moments.contract(&s.delta, &mut s.g);
    }
}

impl GradientFlow for TfFlow {
    fn dim(&self) -> usize {
        self.d * (self.d + 1)
    }

    fn loss(&self, z: &[f64]) -> f64 {
        let s = &mut *self.scratch.borrow_mut();
        self.residual_and_gradient(z, s);
        0.5 * s.delta.iter().zip(&s.g).map(|(x, y)| x * y).sum::<f64>()
    }

    /// ∂ℓ/∂Q\[a,b\] = G\[a,b\] v_b, ∂ℓ/∂v_b = Σ_a Q\[a,b\] G\[a,b\] (spec 000 §2.3).
    fn grad(&self, z: &[f64], out: &mut [f64]) {
        let d = self.d;
        let s = &mut *self.scratch.borrow_mut();
        self.residual_and_gradient(z, s);
        for b in 0..d {
            let v_b = z[v_index(d, b)];
            let mut g_v = 0.0;
            for a in 0..d {
                let g_ab = s.g[a * d + b];
                out[q_index(d, a, b)] = g_ab * v_b;
                g_v += z[q_index(d, a, b)] * g_ab;
            }
            out[v_index(d, b)] = g_v;
        }
    }

    /// For a direction (U, u): δW = U Diag(v) + Q Diag(u), δG = T3\[δW\];
    /// ∇²ℓ·(U, u) = (δG Diag(v) + G Diag(u), diag(Uᵀ G) + diag(Qᵀ δG)) (spec 000 §2.3).
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
        let d = self.d;
        let s = &mut *self.scratch.borrow_mut();
        self.residual_and_gradient(z, s);
        for a in 0..d {
            for b in 0..d {
                s.delta_w[a * d + b] =
                    u[q_index(d, a, b)] * z[v_index(d, b)] + z[q_index(d, a, b)] * u[v_index(d, b)];
            }
        }
        self.moments.contract(&s.delta_w, &mut s.delta_g);
        for b in 0..d {
            let (v_b, u_b) = (z[v_index(d, b)], u[v_index(d, b)]);
            let mut out_v = 0.0;
            for a in 0..d {
                let (g_ab, dg_ab) = (s.g[a * d + b], s.delta_g[a * d + b]);
                out[q_index(d, a, b)] = dg_ab * v_b + g_ab * u_b;
                out_v += u[q_index(d, a, b)] * g_ab + z[q_index(d, a, b)] * dg_ab;
            }
            out[v_index(d, b)] = out_v;
        }
    }

    fn invariant_names(&self) -> Vec<String> {
        layout::beta_names(self.d)
    }

    fn invariants(&self, z: &[f64], out: &mut [f64]) {
        layout::betas(z, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::histogram::data::{task_matrix, Task};
    use crate::models::histogram::df::DfFlow;
    use crate::models::histogram::layout::gd_beta_drift;
    use crate::models::histogram::testing::{autodiff_errors, gaussian_vec, rel_err};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn tf_flow(rng: &mut ChaCha8Rng, task: &Task, d: usize) -> TfFlow {
        TfFlow::from_data(&HistogramData::sample(task_matrix(task, d), 12, 8, rng))
    }

    #[test]
    fn df_grad_and_hvp_match_autodiff() {
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        for task in [Task::Eq, Task::Lt, Task::Thr { d_thr: 1 }] {
            let d = 5;
            let m = task_matrix(&task, d);
            let flow = DfFlow::new(m.clone());
            for _ in 0..3 {
                let z = gaussian_vec(&mut rng, d * (d + 1), 1.0);
                let u = gaussian_vec(&mut rng, d * (d + 1), 1.0);
                let (e_loss, e_grad, e_hvp) =
                    autodiff_errors(&flow, &m, &RowMoments::identity(d), &z, &u);
                assert!(
                    e_loss <= 1e-13 && e_grad <= 1e-10 && e_hvp <= 1e-10,
                    "{}: {e_loss:e} {e_grad:e} {e_hvp:e}",
                    task.name()
                );
            }
        }
    }

    #[test]
    fn tf_grad_and_hvp_match_autodiff() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for task in [Task::Eq, Task::Lt, Task::Thr { d_thr: 1 }] {
            let d = 4;
            let flow = tf_flow(&mut rng, &task, d);
            let z = gaussian_vec(&mut rng, d * (d + 1), 1.0);
            let u = gaussian_vec(&mut rng, d * (d + 1), 1.0);
            let (e_loss, e_grad, e_hvp) = autodiff_errors(&flow, flow.m(), flow.moments(), &z, &u);
            assert!(
                e_loss <= 1e-13 && e_grad <= 1e-10 && e_hvp <= 1e-10,
                "{}: {e_loss:e} {e_grad:e} {e_hvp:e}",
                task.name()
            );
        }
    }

    /// Spec §2.3: with T3 = identity the tf code is the df field (to rounding).
    #[test]
    fn tf_with_identity_moments_is_df() {
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let d = 6;
        let m = task_matrix(&Task::Lt, d);
        let (df, tf) = (
            DfFlow::new(m.clone()),
            TfFlow::new(RowMoments::identity(d), m),
        );
        let n = d * (d + 1);
        let z = gaussian_vec(&mut rng, n, 1.0);
        let u = gaussian_vec(&mut rng, n, 1.0);
        let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
        df.grad(&z, &mut a);
        tf.grad(&z, &mut b);
        assert_eq!(a, b, "gradients must agree bitwise");
        // The losses sum the same squares in another order.
        assert!((df.loss(&z) - tf.loss(&z)).abs() <= 1e-15 * df.loss(&z));
        df.hvp(&z, &u, &mut a);
        tf.hvp(&z, &u, &mut b);
        assert!(
            rel_err(&a, &b) <= 1e-15,
            "hvp rel err {:e}",
            rel_err(&a, &b)
        );
    }

    /// Lemma A.1 generalized (spec R6): f = ½‖(Q Diag(v) − M)B‖² has the same structure; its
    /// gradient is orthogonal to every β-level-set normal, so β̇ = 0 along the flow.
    #[test]
    fn lemma_a1_generic_loss_conserves_beta() {
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        let d = 4;
        let b = DMatrix::from_vec(d, d, gaussian_vec(&mut rng, d * d, 1.0));
        let flow = TfFlow::new(
            RowMoments::uniform(&(&b * b.transpose())),
            task_matrix(&Task::Eq, d),
        );
        let z = gaussian_vec(&mut rng, d * (d + 1), 1.0);
        let u = gaussian_vec(&mut rng, d * (d + 1), 1.0);
        let (_, e_grad, e_hvp) = autodiff_errors(&flow, flow.m(), flow.moments(), &z, &u);
        assert!(e_grad <= 1e-10 && e_hvp <= 1e-10, "{e_grad:e} {e_hvp:e}");
        let mut g = vec![0.0; z.len()];
        flow.grad(&z, &mut g);
        // dβ_i/dt = −2(q_i·∇_{q_i}ℓ − v_i ∂ℓ/∂v_i) must vanish.
        for i in 0..d {
            let (q, v) = layout::column(&z, d, i);
            let (gq, gv) = layout::column(&g, d, i);
            let q_dot_gq: f64 = q.iter().zip(gq).map(|(x, y)| x * y).sum();
            let scale = q_dot_gq.abs().max((v * gv).abs());
            assert!((q_dot_gq - v * gv).abs() <= 1e-13 * scale, "column {i}");
        }
    }

    /// Spec §2.4: one GD step changes β_i by exactly η²(‖∇_{q_i}ℓ‖² − (∂ℓ/∂v_i)²).
    #[test]
    fn gd_step_beta_drift_formula() {
        let mut rng = ChaCha8Rng::seed_from_u64(14);
        let d = 5;
        let df = DfFlow::new(task_matrix(&Task::Lt, d));
        let tf = tf_flow(&mut rng, &Task::Eq, d);
        let flows: [(&dyn GradientFlow, f64); 2] = [(&df, 0.05), (&tf, 1e-3)];
        for (flow, eta) in flows {
            let z = gaussian_vec(&mut rng, d * (d + 1), 0.7);
            let mut g = vec![0.0; z.len()];
            flow.grad(&z, &mut g);
            let z_next: Vec<f64> = z.iter().zip(&g).map(|(x, gx)| x - eta * gx).collect();
            let (mut before, mut after, mut drift) = (vec![0.0; d], vec![0.0; d], vec![0.0; d]);
            flow.invariants(&z, &mut before);
            flow.invariants(&z_next, &mut after);
            gd_beta_drift(&g, eta, &mut drift);
            for i in 0..d {
                let measured = after[i] - before[i];
                // The subtraction of two β's of size |β| limits the comparison to ~ε|β|.
                let scale = before[i].abs().max(1.0);
                assert!(
                    (measured - drift[i]).abs() <= 1e-12 * scale,
                    "column {i}: measured {measured:e} formula {:e}",
                    drift[i]
                );
                assert!(
                    drift[i].abs() > 1e-6,
                    "drift too small to test: {:e}",
                    drift[i]
                );
            }
        }
    }
}

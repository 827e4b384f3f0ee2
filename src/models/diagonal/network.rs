//! Networks with diagonal weights (spec 004 §1.1, Definition 3.1): the output depends on
//! θ = (u, v) ∈ ℝ^{2p} only through β = u ⊙ v, so a model is a loss L̃(β) ([`BetaLoss`]) and
//! the training loss L(θ) = L̃(u ⊙ v) follows generically ([`DiagonalNet`]).
//!
//! Sign convention (spec §0): `grad_beta` is the gradient ∇L̃(β); the paper's g(β) = −∇L̃(β)
//! is [`BetaLoss::g`]. The flow is u̇ = v ⊙ g, v̇ = u ⊙ g (spec §2.1, eq. 4).

use std::cell::RefCell;

use crate::flow::GradientFlow;

/// A loss L̃(β) on the products β = u ⊙ v, with its exact gradient and Hessian-vector product.
/// Implementations must not allocate in `grad_beta` and `hvp_beta` (hot path of every flow).
pub trait BetaLoss {
    /// Number p of product coordinates.
    fn p(&self) -> usize;
    /// L̃(β).
    fn loss(&self, beta: &[f64]) -> f64;
    /// Writes ∇L̃(β) into `out`.
    fn grad_beta(&self, beta: &[f64], out: &mut [f64]);
    /// Writes ∇²L̃(β) · dir into `out`.
    fn hvp_beta(&self, beta: &[f64], dir: &[f64], out: &mut [f64]);
    /// Writes the paper's g(β) = −∇L̃(β) (eq. 4) into `out`.
    fn g(&self, beta: &[f64], out: &mut [f64]) {
        self.grad_beta(beta, out);
        out.iter_mut().for_each(|x| *x = -*x);
    }
    /// Display name of coordinate i (e.g. "KQ\[3\]" for the attention head).
    fn coordinate_name(&self, i: usize) -> String {
        format!("β[{i}]")
    }
}

impl<L: BetaLoss + ?Sized> BetaLoss for &L {
    fn p(&self) -> usize {
        (**self).p()
    }
    fn loss(&self, beta: &[f64]) -> f64 {
        (**self).loss(beta)
    }
    fn grad_beta(&self, beta: &[f64], out: &mut [f64]) {
        (**self).grad_beta(beta, out)
    }
    fn hvp_beta(&self, beta: &[f64], dir: &[f64], out: &mut [f64]) {
        (**self).hvp_beta(beta, dir, out)
    }
    fn g(&self, beta: &[f64], out: &mut [f64]) {
        (**self).g(beta, out)
    }
    fn coordinate_name(&self, i: usize) -> String {
        (**self).coordinate_name(i)
    }
}

/// The gradient ∇L̃(β) of a loss at β, allocated (for analysis code, not for hot paths).
pub fn grad_beta_vec<L: BetaLoss + ?Sized>(loss: &L, beta: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; loss.p()];
    loss.grad_beta(beta, &mut out);
    out
}

/// The paper's g(β) = −∇L̃(β), allocated.
pub fn g_vec<L: BetaLoss + ?Sized>(loss: &L, beta: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; loss.p()];
    loss.g(beta, &mut out);
    out
}

/// The dense Hessian block H_SS = ∇²L̃(β) restricted to the coordinates `set` (row-major
/// |S|×|S|, symmetrized), from |S| Hessian-vector products.
pub fn hessian_block<L: BetaLoss + ?Sized>(loss: &L, beta: &[f64], set: &[usize]) -> Vec<f64> {
    let (p, m) = (loss.p(), set.len());
    let (mut unit, mut column) = (vec![0.0; p], vec![0.0; p]);
    let mut block = vec![0.0; m * m];
    for (c, &j) in set.iter().enumerate() {
        unit[j] = 1.0;
        loss.hvp_beta(beta, &unit, &mut column);
        unit[j] = 0.0;
        for (r, &i) in set.iter().enumerate() {
            block[r * m + c] = column[i];
        }
    }
    for r in 0..m {
        for c in 0..r {
            let mean = 0.5 * (block[r * m + c] + block[c * m + r]);
            block[r * m + c] = mean;
            block[c * m + r] = mean;
        }
    }
    block
}

/// Raw state layout y = [u_0..u_{p−1}, v_0..v_{p−1}] (spec §2.1): the products β = u ⊙ v.
pub fn products(state: &[f64], beta: &mut [f64]) {
    let p = beta.len();
    let (u, v) = state.split_at(p);
    beta.iter_mut()
        .zip(u.iter().zip(v))
        .for_each(|(b, (x, y))| *b = x * y);
}

/// The conserved quantities c_i = u_i² − v_i² (Lemma 4.2), as (u − v)(u + v) to avoid the
/// cancellation of two squares.
pub fn conserved(state: &[f64], c: &mut [f64]) {
    let p = c.len();
    let (u, v) = state.split_at(p);
    c.iter_mut()
        .zip(u.iter().zip(v))
        .for_each(|(ci, (x, y))| *ci = (x - y) * (x + y));
}

#[derive(Debug, Clone)]
struct NetScratch {
    beta: Vec<f64>,
    grad: Vec<f64>,
    dbeta: Vec<f64>,
    hdbeta: Vec<f64>,
}

/// The training loss L(u, v) = L̃(u ⊙ v) of a network with diagonal weights as a
/// [`GradientFlow`] on the raw layout y = [u; v] (spec §2.1, §2.4 layout 1). Its gradient and
/// exact Hessian-vector product follow from the β-loss by the chain rule; the c_i are its
/// invariants. Reliable for α ≳ 1e−6 only (spec §8.2); use the log layout below that.
#[derive(Debug, Clone)]
pub struct DiagonalNet<L> {
    loss: L,
    scratch: RefCell<NetScratch>,
}

impl<L: BetaLoss> DiagonalNet<L> {
    pub fn new(loss: L) -> Self {
        let p = loss.p();
        let zeros = vec![0.0; p];
        DiagonalNet {
            loss,
            scratch: RefCell::new(NetScratch {
                beta: zeros.clone(),
                grad: zeros.clone(),
                dbeta: zeros.clone(),
                hdbeta: zeros,
            }),
        }
    }

    /// The β-loss.
    pub fn beta_loss(&self) -> &L {
        &self.loss
    }
}

impl<L: BetaLoss> GradientFlow for DiagonalNet<L> {
    fn dim(&self) -> usize {
        2 * self.loss.p()
    }

    fn loss(&self, z: &[f64]) -> f64 {
        let s = &mut *self.scratch.borrow_mut();
        products(z, &mut s.beta);
        self.loss.loss(&s.beta)
    }

    /// ∇_u L = v ⊙ ∇L̃, ∇_v L = u ⊙ ∇L̃.
    fn grad(&self, z: &[f64], out: &mut [f64]) {
        let p = self.loss.p();
        let s = &mut *self.scratch.borrow_mut();
        products(z, &mut s.beta);
        self.loss.grad_beta(&s.beta, &mut s.grad);
        let (u, v) = z.split_at(p);
        let (gu, gv) = out.split_at_mut(p);
        for i in 0..p {
            gu[i] = v[i] * s.grad[i];
            gv[i] = u[i] * s.grad[i];
        }
    }

    /// For a direction (δu, δv): δβ = δu ⊙ v + u ⊙ δv, h = ∇²L̃ δβ;
    /// ∇²L (δu, δv) = (v ⊙ h + δv ⊙ ∇L̃, u ⊙ h + δu ⊙ ∇L̃).
    fn hvp(&self, z: &[f64], dir: &[f64], out: &mut [f64]) {
        let p = self.loss.p();
        let s = &mut *self.scratch.borrow_mut();
        products(z, &mut s.beta);
        self.loss.grad_beta(&s.beta, &mut s.grad);
        let (u, v) = z.split_at(p);
        let (du, dv) = dir.split_at(p);
        for i in 0..p {
            s.dbeta[i] = du[i] * v[i] + u[i] * dv[i];
        }
        self.loss.hvp_beta(&s.beta, &s.dbeta, &mut s.hdbeta);
        let (ou, ov) = out.split_at_mut(p);
        for i in 0..p {
            ou[i] = v[i] * s.hdbeta[i] + dv[i] * s.grad[i];
            ov[i] = u[i] * s.hdbeta[i] + du[i] * s.grad[i];
        }
    }

    fn invariant_names(&self) -> Vec<String> {
        (0..self.loss.p())
            .map(|i| format!("c[{}]", self.loss.coordinate_name(i)))
            .collect()
    }

    fn invariants(&self, z: &[f64], out: &mut [f64]) {
        conserved(z, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{integrate_flow, Method, OdeConfig};
    use crate::models::diagonal::linear::DiagLinear;
    use crate::models::diagonal::testing::{autodiff_grad_hvp, rel_err, Reference};
    use num_dual::DualNum;

    /// L(u, v) written directly in (u, v) for a diagonal-linear square loss, for num-dual.
    struct RawLinear<'a>(&'a DiagLinear);

    impl Reference for RawLinear<'_> {
        fn dim(&self) -> usize {
            2 * self.0.p()
        }
        fn eval<T: DualNum<f64> + Copy>(&self, z: &[T]) -> T {
            let p = self.0.p();
            let beta: Vec<T> = (0..p).map(|i| z[i] * z[p + i]).collect();
            self.0.reference_loss(&beta)
        }
    }

    #[test]
    fn chain_rule_gradient_and_hvp_match_forward_mode_ad() {
        let model = DiagLinear::r2();
        let net = DiagonalNet::new(&model);
        let z = [0.7, -0.4, 1.1, 0.3, 0.9, -0.6];
        let dir = [0.2, -1.0, 0.5, 0.8, -0.3, 0.4];
        let (grad_ad, hvp_ad) = autodiff_grad_hvp(&RawLinear(&model), &z, &dir);
        let (mut grad, mut hvp) = (vec![0.0; 6], vec![0.0; 6]);
        net.grad(&z, &mut grad);
        net.hvp(&z, &dir, &mut hvp);
        assert!(rel_err(&grad, &grad_ad) <= 1e-13, "{grad:?} vs {grad_ad:?}");
        assert!(rel_err(&hvp, &hvp_ad) <= 1e-13, "{hvp:?} vs {hvp_ad:?}");
        let loss_ad = RawLinear(&model).eval(&z);
        assert!((net.loss(&z) - loss_ad).abs() <= 1e-14 * loss_ad.abs().max(1.0));
    }

    #[test]
    fn conservation_law_holds_along_the_raw_flow() {
        // Lemma 4.2 at α = 0.1 over the first two R2 stages: c drifts only by the tolerance.
        let model = DiagLinear::r2();
        let net = DiagonalNet::new(&model);
        let z0 = [0.13, -0.05, 0.08, 0.02, 0.11, -0.03];
        let times = crate::flow::linspace(0.0, 6.0, 61);
        let cfg = OdeConfig::new(Method::Tsit45, 1e-12, 1e-14);
        let traj = integrate_flow(&net, &z0, &times, &cfg).unwrap();
        let drift = traj.max_invariant_drift();
        assert!(drift <= 1e-11, "c drift {drift:e}");
        // the loss decreases (I4) and the first two stages have happened (β_0 is active)
        assert!(traj.loss.windows(2).all(|w| w[1] <= w[0] + 1e-14));
        let mut beta = [0.0; 3];
        products(traj.last_state(), &mut beta);
        assert!(beta[0] > 0.3, "{beta:?}");
    }
}

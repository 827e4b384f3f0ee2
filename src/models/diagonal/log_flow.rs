//! The diagonal flow as vector fields: the log layout ζ̇ = G(β(ζ)) (spec 004 §2.4 layout 2, the
//! primary formulation, §8.2), the rescaled clock τ = t/Λ (eq. 14), and the reduced balanced
//! flow on an active set (layout 4, stage B of Algorithm 1). Each has an exact Jacobian-vector
//! product built from the β-loss's Hessian-vector product, for the implicit solvers.
//!
//! The raw layout y = [u; v] is [`Descent`](crate::flow::Descent) of
//! [`DiagonalNet`](super::DiagonalNet).

use std::cell::RefCell;

use super::coords::{beta_and_speed, LogCoordinates, EXP_CAP};
use super::network::BetaLoss;
use crate::flow::VectorField;

#[derive(Debug, Clone)]
struct FieldScratch {
    beta: Vec<f64>,
    speed: Vec<f64>,
    work: Vec<f64>,
    out: Vec<f64>,
}

impl FieldScratch {
    fn new(p: usize) -> Self {
        let zeros = vec![0.0; p];
        FieldScratch {
            beta: zeros.clone(),
            speed: zeros.clone(),
            work: zeros.clone(),
            out: zeros,
        }
    }
}

/// ζ̇ = G(β(ζ)) with ζ_i = ln w_i, β_i = ¼(e^{2ζ_i} − e^{2 ln c_i − 2ζ_i}) (spec §2.4).
/// Plateaus are exactly linear in ζ, an absolute tolerance on ζ is a relative one on w, and
/// c is conserved exactly; the exponentials are capped at [`EXP_CAP`] (spec §8.2).
/// Jacobian: ∂ζ̇/∂ζ = −H(β) diag(u² + v²) (spec §2.5).
#[derive(Debug, Clone)]
pub struct LogFlow<L> {
    loss: L,
    coords: LogCoordinates,
    scratch: RefCell<FieldScratch>,
}

impl<L: BetaLoss> LogFlow<L> {
    /// The log-layout field of `loss` with side data `coords` (from
    /// [`LogCoordinates::from_init`]). Panics if the dimensions differ.
    pub fn new(loss: L, coords: LogCoordinates) -> Self {
        assert_eq!(loss.p(), coords.p(), "loss and coordinates disagree on p");
        let scratch = RefCell::new(FieldScratch::new(loss.p()));
        LogFlow {
            loss,
            coords,
            scratch,
        }
    }

    pub fn coords(&self) -> &LogCoordinates {
        &self.coords
    }

    pub fn beta_loss(&self) -> &L {
        &self.loss
    }

    /// β(ζ), allocated (uncapped; for output).
    pub fn beta(&self, zeta: &[f64]) -> Vec<f64> {
        let mut beta = vec![0.0; self.coords.p()];
        self.coords.beta(zeta, &mut beta);
        beta
    }

    /// L̃(β(ζ)).
    pub fn loss_at(&self, zeta: &[f64]) -> f64 {
        self.loss.loss(&self.beta(zeta))
    }

    fn fill_beta(&self, zeta: &[f64], s: &mut FieldScratch) {
        let ln_c = self.coords.ln_c();
        for i in 0..zeta.len() {
            (s.beta[i], s.speed[i]) = beta_and_speed(zeta[i], ln_c[i], EXP_CAP);
        }
    }
}

impl<L: BetaLoss> VectorField for LogFlow<L> {
    fn dim(&self) -> usize {
        self.coords.p()
    }

    fn rhs(&self, _t: f64, zeta: &[f64], dz: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.fill_beta(zeta, s);
        self.loss.g(&s.beta, dz);
    }

    fn jvp(&self, _t: f64, zeta: &[f64], dir: &[f64], out: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.fill_beta(zeta, s);
        s.work
            .iter_mut()
            .zip(s.speed.iter().zip(dir))
            .for_each(|(w, (v, d))| *w = v * d);
        self.loss.hvp_beta(&s.beta, &s.work, out);
        out.iter_mut().for_each(|x| *x = -*x);
    }
}

/// A field in the rescaled clock τ = t/Λ (spec §1.4, eq. 14): dz/dτ = Λ f(Λτ, z). With the
/// log layout, b = −ζ/Λ then moves at db/dτ = −G (layout 3).
pub struct RescaledTime<'a, V: ?Sized> {
    pub inner: &'a V,
    /// Λ = ln(1/α) > 0.
    pub lambda: f64,
}

impl<V: VectorField + ?Sized> VectorField for RescaledTime<'_, V> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn rhs(&self, tau: f64, z: &[f64], dz: &mut [f64]) {
        self.inner.rhs(self.lambda * tau, z, dz);
        dz.iter_mut().for_each(|x| *x *= self.lambda);
    }
    fn jvp(&self, tau: f64, z: &[f64], dir: &[f64], out: &mut [f64]) {
        self.inner.jvp(self.lambda * tau, z, dir, out);
        out.iter_mut().for_each(|x| *x *= self.lambda);
    }
}

/// The reduced balanced flow on an active set A with fixed signs s_A (spec §2.4 layout 4,
/// §3.3): η_a = ln|β_{i_a}|, β_{i_a} = s_a e^{η_a}, η̇_a = 2 s_a G_{i_a}(β), every coordinate
/// outside A held at exactly 0 (invariant I5). Jacobian: ∂η̇_a/∂η_b = −2 s_a H_{i_a i_b} β_{i_b}.
/// The exponent is capped at [`EXP_CAP`] like the log layout.
#[derive(Debug, Clone)]
pub struct BalancedFlow<L> {
    loss: L,
    active: Vec<usize>,
    signs: Vec<f64>,
    scratch: RefCell<FieldScratch>,
}

impl<L: BetaLoss> BalancedFlow<L> {
    /// The flow on `active` (distinct indices) with `signs` (±1, one per active index).
    pub fn new(loss: L, active: Vec<usize>, signs: Vec<f64>) -> Self {
        assert_eq!(active.len(), signs.len(), "one sign per active coordinate");
        let scratch = RefCell::new(FieldScratch::new(loss.p()));
        BalancedFlow {
            loss,
            active,
            signs,
            scratch,
        }
    }

    pub fn active(&self) -> &[usize] {
        &self.active
    }

    pub fn signs(&self) -> &[f64] {
        &self.signs
    }

    /// The full β ∈ ℝ^p of a reduced state η (uncapped).
    pub fn beta(&self, eta: &[f64]) -> Vec<f64> {
        let mut beta = vec![0.0; self.loss.p()];
        for (a, &i) in self.active.iter().enumerate() {
            beta[i] = self.signs[a] * eta[a].exp();
        }
        beta
    }

    /// The reduced state η of a β that is sign-consistent on A (−∞ where β_i = 0).
    pub fn eta(&self, beta: &[f64]) -> Vec<f64> {
        self.active.iter().map(|&i| beta[i].abs().ln()).collect()
    }

    fn fill_beta(&self, eta: &[f64], s: &mut FieldScratch) {
        s.beta.iter_mut().for_each(|b| *b = 0.0);
        for (a, &i) in self.active.iter().enumerate() {
            s.beta[i] = self.signs[a] * eta[a].min(EXP_CAP).exp();
        }
    }
}

impl<L: BetaLoss> VectorField for BalancedFlow<L> {
    fn dim(&self) -> usize {
        self.active.len()
    }

    fn rhs(&self, _t: f64, eta: &[f64], d_eta: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.fill_beta(eta, s);
        self.loss.g(&s.beta, &mut s.out);
        for (a, &i) in self.active.iter().enumerate() {
            d_eta[a] = 2.0 * self.signs[a] * s.out[i];
        }
    }

    fn jvp(&self, _t: f64, eta: &[f64], dir: &[f64], out: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.fill_beta(eta, s);
        s.work.iter_mut().for_each(|w| *w = 0.0);
        for (a, &i) in self.active.iter().enumerate() {
            // ∂β_i/∂η_a = β_i below the cap, 0 above it
            let live = if eta[a] < EXP_CAP { s.beta[i] } else { 0.0 };
            s.work[i] = live * dir[a];
        }
        self.loss.hvp_beta(&s.beta, &s.work, &mut s.out);
        for (a, &i) in self.active.iter().enumerate() {
            out[a] = -2.0 * self.signs[a] * s.out[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::linearize::jacobian;
    use crate::flow::{integrate, Descent, Method, OdeConfig};
    use crate::models::diagonal::linear::DiagLinear;
    use crate::models::diagonal::network::{products, DiagonalNet};
    use crate::models::diagonal::testing::max_diff;
    use crate::stats;

    /// Central differences of the field, column by column.
    fn fd_jacobian(field: &dyn VectorField, z: &[f64]) -> Vec<Vec<f64>> {
        let n = field.dim();
        (0..n)
            .map(|j| {
                let h = 1e-6 * z[j].abs().max(1.0);
                let (mut zp, mut zm) = (z.to_vec(), z.to_vec());
                zp[j] += h;
                zm[j] -= h;
                let (mut fp, mut fm) = (vec![0.0; n], vec![0.0; n]);
                field.rhs(0.0, &zp, &mut fp);
                field.rhs(0.0, &zm, &mut fm);
                fp.iter()
                    .zip(&fm)
                    .map(|(a, b)| (a - b) / (2.0 * h))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn jacobian_vector_products_match_differences_of_the_field() {
        let model = DiagLinear::r2();
        let (coords, _) = LogCoordinates::from_raw(&[0.9, 0.3, -0.7], &[0.2, -0.25, 0.4]).unwrap();
        let log = LogFlow::new(&model, coords);
        let balanced = BalancedFlow::new(&model, vec![2, 0], vec![-1.0, 1.0]);
        let zeta = [-0.2, -0.9, -0.4];
        let eta = [-0.5, -1.1];
        for (field, z) in [
            (&log as &dyn VectorField, &zeta[..]),
            (&balanced as &dyn VectorField, &eta[..]),
        ] {
            let jac = jacobian(field, 0.0, z).unwrap();
            let fd = fd_jacobian(field, z);
            for (j, column) in fd.iter().enumerate() {
                let exact: Vec<f64> = jac.column(j).iter().copied().collect();
                assert!(max_diff(&exact, column) < 1e-8, "{exact:?} vs {column:?}");
            }
        }
    }

    #[test]
    fn log_and_raw_layouts_give_the_same_trajectory() {
        // eq. 6/7 row of spec §4 at α = 1e−2: reconstructed (u, v) agree to 1e−8 relative.
        let model = DiagLinear::r2();
        let (u0, v0) = ([0.8, -0.5, 1.2], [0.3, 0.9, -0.4]);
        let ln_alpha = (1e-2_f64).ln();
        let (coords, zeta0) = LogCoordinates::from_init(&u0, &v0, ln_alpha).unwrap();
        let log = LogFlow::new(&model, coords.clone());
        let net = DiagonalNet::new(&model);
        let raw0: Vec<f64> = u0.iter().chain(&v0).map(|x| 1e-2 * x).collect();
        let times = crate::flow::linspace(0.0, 12.0, 25);
        let cfg = OdeConfig::new(Method::Tsit45, 1e-12, 1e-14);
        let log_traj = integrate(&log, &zeta0, &times, &cfg, None).unwrap();
        let raw_traj = integrate(&Descent(&net), &raw0, &times, &cfg, None).unwrap();
        let mut worst = 0.0_f64;
        for k in 0..times.len() {
            let from_log = coords.raw_state(log_traj.state(k));
            let raw = raw_traj.state(k);
            let scale = stats::max_abs(raw.iter());
            worst = stats::larger(worst, max_diff(&from_log, raw) / scale);
        }
        assert!(worst < 1e-8, "layouts differ by {worst:e}");
        // and the run went through the first transitions
        let mut beta = [0.0; 3];
        products(raw_traj.last_state(), &mut beta);
        assert!(beta[2] > 0.3 && beta[0] > 0.1, "{beta:?}");
    }

    #[test]
    fn rescaled_time_is_the_same_curve() {
        let model = DiagLinear::r1();
        let (coords, zeta0) =
            LogCoordinates::from_init(&[1.0; 5], &[0.5; 5], -16.0 * 10f64.ln()).unwrap();
        let log = LogFlow::new(&model, coords);
        let lambda = 16.0 * 10f64.ln();
        let rescaled = RescaledTime {
            inner: &log,
            lambda,
        };
        let cfg = OdeConfig::new(Method::Tsit45, 1e-11, 1e-11);
        let t = integrate(&log, &zeta0, &[0.0, 1.5 * lambda], &cfg, None).unwrap();
        let tau = integrate(&rescaled, &zeta0, &[0.0, 1.5], &cfg, None).unwrap();
        assert!(max_diff(t.last_state(), tau.last_state()) < 1e-8);
    }
}

//! The diagonal models of spec 001 §1.2, §2.2 (paper Sec. 4, Lemma 4.1, Lemma A.1): W = Diag(β)
//! with exponential loss, L(β) = L_W(Diag β), parameterized four ways:
//! - `Wdiag`: β trained directly ([`DiagonalLoss`]; the comparison model, Frobenius bias);
//! - `KQdiag` raw: (ξ_k, ξ_q) with β = ξ_k ⊙ ξ_q ([`Factored`]`<`[`KeyQuery`]`>`; K = [Diag ξ_k, 0],
//!   Q = [Diag ξ_q, 0]); conserved ξ_k^{⊙2} − ξ_q^{⊙2};
//! - `wpm`: (w₊, w₋) with β = (w₊^{⊙2} − w₋^{⊙2})/2 ([`Factored`]`<`[`PlusMinus`]`>`, Lemma 4.1);
//!   conserved w₊ ⊙ w₋;
//! - `KQdiag` reduced: β̇ = 2√(β^{⊙2} + κ^{⊙2}) ⊙ (−∇_β L) ([`ReducedKq`], Lemma A.1), the same
//!   β(t) as the raw flow with κ = |ξ_k² − ξ_q²|/2 (= ω_0² under init (5)).
//!
//! The loss, gradient and Hessian of L(β) are those of seed 003's log-domain fixed-decoder model
//! ([`FixedDecoder`], `Loss::Exponential`, explicit queries) restricted to the diagonal: ∇_β L =
//! diag ∇_W L(Diag β), ∇²_β L·u = diag ∇²_W L(Diag β)·Diag u. Everything is returned at a scale
//! (e^{−s}∇L with its log-scale s), so the τ-time flows ([`super::log_time`]) run to τ = 1e8.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::marker::PhantomData;

use super::log_time::ScaledGradient;
use crate::analysis::svm::{MarginConstraints, RankOneConstraints, VectorConstraints};
use crate::attention::{FixedDecoder, Instance, Loss, TokenError};
use crate::flow::{GradientFlow, VectorField};
use crate::stats;

#[derive(Debug)]
struct Scratch {
    /// Diag β, Diag u and a d × d result (column-major).
    w: Vec<f64>,
    v: Vec<f64>,
    full: Vec<f64>,
}

/// L(β) = (1/n) Σ_i exp(−γ_iᵀσ(X_i Diag(β) z_i)); as a [`GradientFlow`] its loss is the excess
/// L − L* (same gradient and Hessian), state β ∈ ℝ^d (the `Wdiag` model).
#[derive(Debug)]
pub struct DiagonalLoss {
    model: FixedDecoder,
    d: usize,
    /// B_il = z_i ⊙ (x_i,opt − x_il): the margins βᵀB_il.
    constraints: VectorConstraints,
    scratch: RefCell<Scratch>,
}

impl DiagonalLoss {
    /// The diagonal model of an instance (unique optimal tokens required; exponential loss).
    pub fn new(inst: &Instance) -> Result<Self, TokenError> {
        let model = FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential)?;
        let d = inst.data.d;
        let constraints = RankOneConstraints::w_svm(&inst.data.view(), &inst.opt)
            .and_then(|c| c.diagonal())
            .map_err(|e| TokenError::Invalid(e.to_string()))?;
        Ok(DiagonalLoss {
            model,
            d,
            constraints,
            scratch: RefCell::new(Scratch {
                w: vec![0.0; d * d],
                v: vec![0.0; d * d],
                full: vec![0.0; d * d],
            }),
        })
    }

    /// Dimension d of β.
    pub fn d(&self) -> usize {
        self.d
    }

    /// The combined-W model this is the diagonal restriction of.
    pub fn model(&self) -> &FixedDecoder {
        &self.model
    }

    /// The diagonal constraints B_il (rows), as the ℓ1/ℓ2 SVMs take them.
    pub fn constraints(&self) -> &VectorConstraints {
        &self.constraints
    }

    fn embed(d: usize, beta: &[f64], w: &mut [f64]) {
        w.iter_mut().for_each(|x| *x = 0.0);
        for (j, &b) in beta.iter().enumerate() {
            w[j * d + j] = b;
        }
    }

    fn diag_of(&self, beta: &[f64]) -> Vec<f64> {
        let mut w = vec![0.0; self.d * self.d];
        Self::embed(self.d, beta, &mut w);
        w
    }

    /// ln(L(β) − L*), exact however saturated the attention is.
    pub fn log_excess(&self, beta: &[f64]) -> f64 {
        self.model.log_excess_loss(&self.diag_of(beta))
    }

    /// ln L(β).
    pub fn log_loss(&self, beta: &[f64]) -> f64 {
        self.model.log_loss(&self.diag_of(beta))
    }

    /// ln L* = ln((1/n) Σ e^{−γ_i,opt}).
    pub fn log_loss_star(&self) -> f64 {
        self.model.log_loss_star()
    }

    /// The margins βᵀB_il.
    pub fn margins(&self, beta: &[f64]) -> Vec<f64> {
        self.constraints.margins(beta)
    }

    /// µ(β) = min_il βᵀB_il (Def. 4.1).
    pub fn margin(&self, beta: &[f64]) -> f64 {
        stats::min(self.margins(beta))
    }
}

impl ScaledGradient for DiagonalLoss {
    fn dim(&self) -> usize {
        self.d
    }
    fn grad_scaled(&self, beta: &[f64], g: &mut [f64]) -> f64 {
        let d = self.d;
        let mut sc = self.scratch.borrow_mut();
        let Scratch { w, full, .. } = &mut *sc;
        Self::embed(d, beta, w);
        let s = self.model.unit_gradient(w, full);
        for (j, gj) in g.iter_mut().enumerate() {
            *gj = full[j * d + j];
        }
        s
    }
    fn hvp_scaled(&self, beta: &[f64], u: &[f64], shift: f64, out: &mut [f64]) {
        let d = self.d;
        let mut sc = self.scratch.borrow_mut();
        let Scratch { w, v, full } = &mut *sc;
        Self::embed(d, beta, w);
        Self::embed(d, u, v);
        self.model.hvp_scaled(w, v, shift, full);
        for (j, o) in out.iter_mut().enumerate() {
            *o = full[j * d + j];
        }
    }
}

impl GradientFlow for DiagonalLoss {
    fn dim(&self) -> usize {
        self.d
    }
    /// The excess L − L*.
    fn loss(&self, beta: &[f64]) -> f64 {
        self.log_excess(beta).exp()
    }
    fn grad(&self, beta: &[f64], g: &mut [f64]) {
        let s = self.grad_scaled(beta, g);
        let scale = s.exp();
        g.iter_mut().for_each(|x| *x *= scale);
    }
    fn hvp(&self, beta: &[f64], u: &[f64], out: &mut [f64]) {
        self.hvp_scaled(beta, u, 0.0, out);
    }
}

/// A coordinatewise two-factor parameterization β_j = b(a_j, c_j) of the diagonal.
pub trait Factorization {
    /// Name of the model ("kq-diag", "wpm").
    const NAME: &'static str;
    /// Name of the conserved quantity per coordinate.
    const INVARIANT: &'static str;
    /// β = b(a, c).
    fn beta(a: f64, c: f64) -> f64;
    /// (∂b/∂a, ∂b/∂c).
    fn partials(a: f64, c: f64) -> (f64, f64);
    /// (∂²b/∂a², ∂²b/∂a∂c, ∂²b/∂c²) (constant for both models).
    const SECOND: (f64, f64, f64);
    /// The conserved quantity of the flow (a coordinatewise function of (a, c)).
    fn invariant(a: f64, c: f64) -> f64;
}

/// β = ξ_k ⊙ ξ_q (the separately trained key and query, restricted to the diagonal);
/// ξ̇_k = −∇L ⊙ ξ_q, ξ̇_q = −∇L ⊙ ξ_k conserve ξ_k^{⊙2} − ξ_q^{⊙2}.
#[derive(Debug, Clone, Copy)]
pub struct KeyQuery;

impl Factorization for KeyQuery {
    const NAME: &'static str = "kq-diag";
    const INVARIANT: &'static str = "xi_k^2 - xi_q^2";
    fn beta(a: f64, c: f64) -> f64 {
        a * c
    }
    fn partials(a: f64, c: f64) -> (f64, f64) {
        (c, a)
    }
    const SECOND: (f64, f64, f64) = (0.0, 1.0, 0.0);
    fn invariant(a: f64, c: f64) -> f64 {
        a * a - c * c
    }
}

/// β = (w₊^{⊙2} − w₋^{⊙2})/2 (Lemma 4.1); ẇ_± = ∓∇L ⊙ w_± conserve w₊ ⊙ w₋.
#[derive(Debug, Clone, Copy)]
pub struct PlusMinus;

impl Factorization for PlusMinus {
    const NAME: &'static str = "wpm";
    const INVARIANT: &'static str = "w_plus*w_minus";
    fn beta(a: f64, c: f64) -> f64 {
        0.5 * (a * a - c * c)
    }
    fn partials(a: f64, c: f64) -> (f64, f64) {
        (a, -c)
    }
    const SECOND: (f64, f64, f64) = (1.0, 0.0, -1.0);
    fn invariant(a: f64, c: f64) -> f64 {
        a * c
    }
}

#[derive(Debug)]
struct FactorScratch {
    beta: Vec<f64>,
    g: Vec<f64>,
    dbeta: Vec<f64>,
    h: Vec<f64>,
}

impl FactorScratch {
    fn new(d: usize) -> RefCell<Self> {
        RefCell::new(FactorScratch {
            beta: vec![0.0; d],
            g: vec![0.0; d],
            dbeta: vec![0.0; d],
            h: vec![0.0; d],
        })
    }
}

/// The loss L(b(a, c)) of a two-factor diagonal parameterization; state (a; c) ∈ ℝ^{2d}
/// (e.g. (ξ_k; ξ_q) or (w₊; w₋)). Gradient (∇_βL ⊙ ∂_a b; ∇_βL ⊙ ∂_c b); Hessian-vector product
/// ∇²_βL·δβ ⊙ ∂b + ∇_βL ⊙ (∂²b · u), δβ = ∂_a b ⊙ u_a + ∂_c b ⊙ u_c (exact).
/// `L` is `&DiagonalLoss` (borrowed, as the scenarios compare several parameterizations of one
/// loss) or `DiagonalLoss` (owned, for a model that must stand alone, e.g. the generic flow).
pub struct Factored<P, L: Borrow<DiagonalLoss>> {
    loss: L,
    scratch: RefCell<FactorScratch>,
    _p: PhantomData<P>,
}

impl<P: Factorization, L: Borrow<DiagonalLoss>> Factored<P, L> {
    pub fn new(loss: L) -> Self {
        let d = loss.borrow().d();
        Factored {
            loss,
            scratch: FactorScratch::new(d),
            _p: PhantomData,
        }
    }

    pub fn loss_model(&self) -> &DiagonalLoss {
        self.loss.borrow()
    }

    /// β of a state (a; c).
    pub fn beta(&self, z: &[f64]) -> Vec<f64> {
        let d = self.loss_model().d();
        (0..d).map(|j| P::beta(z[j], z[d + j])).collect()
    }

    fn fill_beta(d: usize, z: &[f64], beta: &mut [f64]) {
        for (j, b) in beta.iter_mut().enumerate() {
            *b = P::beta(z[j], z[d + j]);
        }
    }
}

/// The state (a; c) of a two-factor parameterization from its two halves.
pub fn factored_state(a: &[f64], c: &[f64]) -> Vec<f64> {
    a.iter().chain(c).copied().collect()
}

impl<P: Factorization, L: Borrow<DiagonalLoss>> ScaledGradient for Factored<P, L> {
    fn dim(&self) -> usize {
        2 * self.loss_model().d()
    }
    fn grad_scaled(&self, z: &[f64], out: &mut [f64]) -> f64 {
        let d = self.loss_model().d();
        let mut sc = self.scratch.borrow_mut();
        let FactorScratch { beta, g, .. } = &mut *sc;
        Self::fill_beta(d, z, beta);
        let s = self.loss_model().grad_scaled(beta, g);
        for j in 0..d {
            let (pa, pc) = P::partials(z[j], z[d + j]);
            out[j] = g[j] * pa;
            out[d + j] = g[j] * pc;
        }
        s
    }
    fn hvp_scaled(&self, z: &[f64], u: &[f64], shift: f64, out: &mut [f64]) {
        let d = self.loss_model().d();
        let mut sc = self.scratch.borrow_mut();
        let FactorScratch { beta, g, dbeta, h } = &mut *sc;
        Self::fill_beta(d, z, beta);
        let s = self.loss_model().grad_scaled(beta, g);
        for j in 0..d {
            let (pa, pc) = P::partials(z[j], z[d + j]);
            dbeta[j] = pa * u[j] + pc * u[d + j];
        }
        self.loss_model().hvp_scaled(beta, dbeta, shift, h);
        let c = if s == f64::NEG_INFINITY {
            0.0
        } else {
            (s - shift).exp()
        };
        let (aa, ac, cc) = P::SECOND;
        for j in 0..d {
            let (pa, pc) = P::partials(z[j], z[d + j]);
            let gj = c * g[j];
            out[j] = h[j] * pa + gj * (aa * u[j] + ac * u[d + j]);
            out[d + j] = h[j] * pc + gj * (ac * u[j] + cc * u[d + j]);
        }
    }
}

impl<P: Factorization, L: Borrow<DiagonalLoss>> GradientFlow for Factored<P, L> {
    fn dim(&self) -> usize {
        2 * self.loss_model().d()
    }
    fn loss(&self, z: &[f64]) -> f64 {
        self.loss_model().loss(&self.beta(z))
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let s = self.grad_scaled(z, g);
        let scale = s.exp();
        g.iter_mut().for_each(|x| *x *= scale);
    }
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
        self.hvp_scaled(z, u, 0.0, out);
    }
    fn invariant_names(&self) -> Vec<String> {
        (0..self.loss_model().d())
            .map(|j| format!("{}[{j}]", P::INVARIANT))
            .collect()
    }
    fn invariants(&self, z: &[f64], out: &mut [f64]) {
        let d = self.loss_model().d();
        for (j, o) in out.iter_mut().enumerate() {
            *o = P::invariant(z[j], z[d + j]);
        }
    }
}

/// The reduced KQdiag flow on β alone (Lemma A.1, spec §2.2), in the clock τ = ln(1 + t):
/// dβ/dτ = −2 e^τ √(β^{⊙2} + κ^{⊙2}) ⊙ ∇_βL(β), Jacobian
/// −2 e^τ [Diag(β/√(β²+κ²) ⊙ ∇L) + Diag(√(β²+κ²)) ∇²L] (exact). Not a gradient flow in β (a
/// mirror flow with the hyperbolic-entropy potential), hence a [`VectorField`].
pub struct ReducedKq<'a> {
    loss: &'a DiagonalLoss,
    kappa: Vec<f64>,
    scratch: RefCell<FactorScratch>,
}

impl<'a> ReducedKq<'a> {
    /// κ_j = |ξ_k,j(0)² − ξ_q,j(0)²|/2 (= ω_0,j² under init (5)).
    pub fn new(loss: &'a DiagonalLoss, kappa: Vec<f64>) -> Self {
        assert_eq!(kappa.len(), loss.d(), "κ must have d entries");
        let d = loss.d();
        ReducedKq {
            loss,
            kappa,
            scratch: FactorScratch::new(d),
        }
    }

    /// κ of a raw initialization (ξ_k(0), ξ_q(0)).
    pub fn kappa_of(xi_k: &[f64], xi_q: &[f64]) -> Vec<f64> {
        xi_k.iter()
            .zip(xi_q)
            .map(|(a, c)| 0.5 * (a * a - c * c).abs())
            .collect()
    }

    pub fn kappa(&self) -> &[f64] {
        &self.kappa
    }
}

impl VectorField for ReducedKq<'_> {
    fn dim(&self) -> usize {
        self.loss.d()
    }
    fn rhs(&self, tau: f64, beta: &[f64], dz: &mut [f64]) {
        let s = self.loss.grad_scaled(beta, dz);
        if s == f64::NEG_INFINITY {
            dz.iter_mut().for_each(|x| *x = 0.0);
            return;
        }
        let speed = (tau + s).exp();
        for ((o, &b), &k) in dz.iter_mut().zip(beta).zip(&self.kappa) {
            *o *= -2.0 * speed * b.hypot(k);
        }
    }
    fn jvp(&self, tau: f64, beta: &[f64], u: &[f64], out: &mut [f64]) {
        let mut sc = self.scratch.borrow_mut();
        let FactorScratch { g, h, .. } = &mut *sc;
        let s = self.loss.grad_scaled(beta, g);
        self.loss.hvp_scaled(beta, u, -tau, h);
        let c = if s == f64::NEG_INFINITY {
            0.0
        } else {
            (tau + s).exp()
        };
        for j in 0..beta.len() {
            let r = beta[j].hypot(self.kappa[j]);
            let radial = if r > 0.0 { beta[j] / r } else { 0.0 };
            out[j] = -2.0 * (radial * c * g[j] * u[j] + r * h[j]);
        }
    }
}

/// Init (5): ξ_k(0) = √2 ω_0, ξ_q(0) = 0 (β(0) = 0, κ = ω_0²).
pub fn init5(omega0: &[f64]) -> (Vec<f64>, Vec<f64>) {
    (
        omega0
            .iter()
            .map(|w| std::f64::consts::SQRT_2 * w)
            .collect(),
        vec![0.0; omega0.len()],
    )
}

/// A (w₊, w₋) initialization matched to (ξ_k, ξ_q) as Lemma 4.1 asks (β(0) = w(0) and
/// w₊² + w₋² = ξ_k² + ξ_q²), with w₊² + w₋² scaled by `energy_scale` (1 = matched; ≠ 1 breaks
/// condition (4) while keeping β(0)): w₊ = √(Sλ/2 + β), w₋ = √(Sλ/2 − β), both ≥ 0. Returns
/// `None` when a square root would be negative (λ < 1 with a coordinate where |β| = S/2).
pub fn wpm_matched(xi_k: &[f64], xi_q: &[f64], energy_scale: f64) -> Option<(Vec<f64>, Vec<f64>)> {
    let mut wp = Vec::with_capacity(xi_k.len());
    let mut wm = Vec::with_capacity(xi_k.len());
    for (&a, &c) in xi_k.iter().zip(xi_q) {
        let (beta, half) = (a * c, 0.5 * energy_scale * (a * a + c * c));
        if half - beta.abs() < 0.0 {
            return None;
        }
        wp.push((half + beta).sqrt());
        wm.push((half - beta).sqrt());
    }
    Some((wp, wm))
}

#[cfg(test)]
#[path = "diagonal_tests.rs"]
mod tests;

//! Continuous-time limits of GD, NGD and the Polyak step (spec 003 §2.3, §8.3) as
//! [`VectorField`]s, all evaluated in the log domain so that they follow the common path to
//! arc lengths where GF time is 10¹⁰ and beyond.
//!
//! The three fixed-decoder flows trace one curve (path-equivalence fact of §2.3); each carries
//! the extra clock or arc-length states needed to compare them on that curve.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use super::joint::JointModel;
use crate::attention::FixedDecoder;
use crate::flow::{GradientFlow, VectorField};

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Work vectors of the flows: a unit gradient direction and a scaled Hessian-vector product.
#[derive(Debug)]
struct Scratch {
    g: Vec<f64>,
    h: Vec<f64>,
}

impl Scratch {
    fn new(dim: usize) -> RefCell<Self> {
        RefCell::new(Scratch {
            g: vec![0.0; dim],
            h: vec![0.0; dim],
        })
    }
}

/// Normalized gradient flow in arc length s: dW/ds = −∇L/‖∇L‖ (the limit of NGD with
/// s = ηk), with two clocks carried along the path:
/// - ψ = ln(1 + t_GF), dψ/ds = exp(−ψ − ln‖∇L‖): gradient-flow time, finite up to t ≈ 10³⁰⁸;
/// - t_PF, dt_PF/ds = ‖∇L‖/(L − L*): Polyak-flow time, which stays O(s).
///
/// State: (vec W, ψ, t_PF), dimension d² + 2.
pub struct NormalizedFlow<'a> {
    model: &'a FixedDecoder,
    scratch: RefCell<Scratch>,
}

impl<'a> NormalizedFlow<'a> {
    pub fn new(model: &'a FixedDecoder) -> Self {
        NormalizedFlow {
            model,
            scratch: Scratch::new(model.dim()),
        }
    }

    /// (W₀, ψ = 0, t_PF = 0).
    pub fn initial_state(&self, w0: &[f64]) -> Vec<f64> {
        let mut z = w0.to_vec();
        z.extend([0.0, 0.0]);
        z
    }

    /// ln(1 + t_GF) of a state.
    pub fn log1p_gf_time(&self, z: &[f64]) -> f64 {
        z[self.model.dim()]
    }

    /// Polyak-flow time t_PF of a state.
    pub fn pf_time(&self, z: &[f64]) -> f64 {
        z[self.model.dim() + 1]
    }
}

impl VectorField for NormalizedFlow<'_> {
    fn dim(&self) -> usize {
        self.model.dim() + 2
    }
    fn rhs(&self, _s: f64, z: &[f64], dz: &mut [f64]) {
        let m = self.model.dim();
        let (w, psi) = (&z[..m], z[m]);
        let (dw, clocks) = dz.split_at_mut(m);
        let lg = self.model.gradient_direction(w, dw);
        if lg.log_norm == f64::NEG_INFINITY {
            // an exact stationary point: the normalized flow is undefined, stay put
            clocks.iter_mut().for_each(|c| *c = 0.0);
            return;
        }
        dw.iter_mut().for_each(|x| *x = -*x);
        clocks[0] = (-psi - lg.log_norm).exp();
        clocks[1] = (lg.log_norm - lg.log_excess).exp();
    }
    fn jvp(&self, _s: f64, z: &[f64], v: &[f64], out: &mut [f64]) {
        let m = self.model.dim();
        let (w, psi) = (&z[..m], z[m]);
        let mut sc = self.scratch.borrow_mut();
        let Scratch { g, h } = &mut *sc;
        let lg = self.model.gradient_direction(w, g);
        if lg.log_norm == f64::NEG_INFINITY {
            out.iter_mut().for_each(|x| *x = 0.0);
            return;
        }
        // h = ∇²L V/‖∇L‖, and d ln‖∇L‖ = ĝ·h
        self.model.hvp_scaled(w, &v[..m], lg.log_norm, h);
        let gh = dot(g, h);
        for ((o, &hk), &gk) in out[..m].iter_mut().zip(h.iter()).zip(g.iter()) {
            *o = -(hk - gk * gh);
        }
        let psi_rate = (-psi - lg.log_norm).exp();
        out[m] = -psi_rate * (gh + v[m]);
        let pf_rate = (lg.log_norm - lg.log_excess).exp();
        out[m + 1] = pf_rate * (gh - pf_rate * dot(g, &v[..m]));
    }
}

/// Gradient flow dW/dt = −∇L in the log clock τ = ln(1 + t): dW/dτ = −e^τ ∇L, formed as
/// −exp(τ + ln‖∇L‖)·∇L/‖∇L‖ so that neither factor under- or overflows. A last state
/// component accumulates the arc length s, ds/dτ = ‖dW/dτ‖.
///
/// State: (vec W, s); the integration variable is τ (use [`LogTimeGradientFlow::tau_of`]).
pub struct LogTimeGradientFlow<'a> {
    model: &'a FixedDecoder,
    scratch: RefCell<Scratch>,
}

impl<'a> LogTimeGradientFlow<'a> {
    pub fn new(model: &'a FixedDecoder) -> Self {
        LogTimeGradientFlow {
            model,
            scratch: Scratch::new(model.dim()),
        }
    }

    /// (W₀, s = 0).
    pub fn initial_state(&self, w0: &[f64]) -> Vec<f64> {
        let mut z = w0.to_vec();
        z.push(0.0);
        z
    }

    /// τ = ln(1 + t).
    pub fn tau_of(t: f64) -> f64 {
        t.ln_1p()
    }

    /// t = e^τ − 1.
    pub fn t_of(tau: f64) -> f64 {
        tau.exp_m1()
    }
}

impl VectorField for LogTimeGradientFlow<'_> {
    fn dim(&self) -> usize {
        self.model.dim() + 1
    }
    fn rhs(&self, tau: f64, z: &[f64], dz: &mut [f64]) {
        let m = self.model.dim();
        let (dw, ds) = dz.split_at_mut(m);
        let log_norm = self.model.unit_gradient(&z[..m], dw);
        let speed = (tau + log_norm).exp();
        dw.iter_mut().for_each(|x| *x *= -speed);
        ds[0] = speed;
    }
    fn jvp(&self, tau: f64, z: &[f64], v: &[f64], out: &mut [f64]) {
        let m = self.model.dim();
        let mut sc = self.scratch.borrow_mut();
        let Scratch { g, h } = &mut *sc;
        self.model.unit_gradient(&z[..m], g);
        // h = e^τ ∇²L V
        self.model.hvp_scaled(&z[..m], &v[..m], -tau, h);
        out[..m].iter_mut().zip(h.iter()).for_each(|(o, x)| *o = -x);
        out[m] = dot(g, h);
    }
}

/// Polyak flow dW/dt = −(L − L*)∇L/‖∇L‖², with the arc length s as a last state component
/// (ds/dt = (L − L*)/‖∇L‖, bounded above and below on the path, spec 003 Thm 7).
///
/// State: (vec W, s).
pub struct PolyakFlow<'a> {
    model: &'a FixedDecoder,
    scratch: RefCell<Scratch>,
}

impl<'a> PolyakFlow<'a> {
    pub fn new(model: &'a FixedDecoder) -> Self {
        PolyakFlow {
            model,
            scratch: Scratch::new(model.dim()),
        }
    }

    /// (W₀, s = 0).
    pub fn initial_state(&self, w0: &[f64]) -> Vec<f64> {
        let mut z = w0.to_vec();
        z.push(0.0);
        z
    }
}

impl VectorField for PolyakFlow<'_> {
    fn dim(&self) -> usize {
        self.model.dim() + 1
    }
    fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
        let m = self.model.dim();
        let (dw, ds) = dz.split_at_mut(m);
        let lg = self.model.gradient_direction(&z[..m], dw);
        if lg.log_norm == f64::NEG_INFINITY {
            // an exact stationary point (dw is already zero)
            ds[0] = 0.0;
            return;
        }
        let rate = (lg.log_excess - lg.log_norm).exp();
        dw.iter_mut().for_each(|x| *x *= -rate);
        ds[0] = rate;
    }
    fn jvp(&self, _t: f64, z: &[f64], v: &[f64], out: &mut [f64]) {
        let m = self.model.dim();
        let mut sc = self.scratch.borrow_mut();
        let Scratch { g, h } = &mut *sc;
        let lg = self.model.gradient_direction(&z[..m], g);
        if lg.log_norm == f64::NEG_INFINITY {
            out.iter_mut().for_each(|x| *x = 0.0);
            return;
        }
        self.model.hvp_scaled(&z[..m], &v[..m], lg.log_norm, h);
        let rate = (lg.log_excess - lg.log_norm).exp();
        let gh = dot(g, h);
        // d rate = ĝ·V − rate·ĝ·h, d ĝ = h − ĝ(ĝ·h)
        let d_rate = dot(g, &v[..m]) - rate * gh;
        for ((o, &hk), &gk) in out[..m].iter_mut().zip(h.iter()).zip(g.iter()) {
            *o = -(d_rate * gk + rate * (hk - gk * gh));
        }
        out[m] = d_rate;
    }
}

/// How the joint flow normalizes its gradient (spec 003 §2.2, §8.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum JointNormalization {
    /// du/ds = −∇_uL/‖∇_uL‖, dW/ds = −(1 + s/s₀)^{−α} ∇_WL/‖∇_WL‖: the limit of Eq. (10) with
    /// s₀ = η (α = 1/3 is "NGD-joint", α = 0 is Fig. 3's "NGD"). A different path from GF.
    PerBlock { alpha: f64, s0: f64 },
    /// dθ/ds = −∇L/‖∇L‖ over θ = (u, W): the same path as the plain joint gradient flow.
    Full,
}

/// The normalized joint flow on z = (u, vec W). A block whose gradient vanishes exactly (∇_W L
/// at u = 0) does not move; start after one discrete u-step to avoid the 0/0 at the origin.
pub struct JointNormalizedFlow<'a> {
    model: &'a JointModel,
    normalization: JointNormalization,
    scratch: RefCell<Scratch>,
}

impl<'a> JointNormalizedFlow<'a> {
    pub fn new(model: &'a JointModel, normalization: JointNormalization) -> Self {
        JointNormalizedFlow {
            model,
            normalization,
            scratch: Scratch::new(model.dim()),
        }
    }

    /// Writes the unit direction of the field (before the sign and the W-factor) into `g` and
    /// returns the block log-norms.
    fn directions(&self, z: &[f64], g: &mut [f64]) -> super::joint::JointLogGradient {
        let d = self.model.data().d;
        let (gu, gw) = g.split_at_mut(d);
        let lg = self.model.block_gradients(z, gu, gw);
        if self.normalization == JointNormalization::Full {
            let top = lg.log_norm_u.max(lg.log_norm_w);
            let (cu, cw) = if top == f64::NEG_INFINITY {
                (0.0, 0.0)
            } else {
                ((lg.log_norm_u - top).exp(), (lg.log_norm_w - top).exp())
            };
            let total = cu.hypot(cw);
            if total > 0.0 {
                gu.iter_mut().for_each(|x| *x *= cu / total);
                gw.iter_mut().for_each(|x| *x *= cw / total);
            }
        }
        lg
    }

    fn w_factor(&self, s: f64) -> f64 {
        match self.normalization {
            JointNormalization::PerBlock { alpha, s0 } => (1.0 + s / s0).powf(-alpha),
            JointNormalization::Full => 1.0,
        }
    }
}

/// out = −factor·(h − ĝ(ĝ·h)) on one block: the derivative of −factor·ĝ with h = H·v/‖g‖.
fn project_out(g: &[f64], h: &[f64], factor: f64, out: &mut [f64]) {
    let gh = dot(g, h);
    for ((o, &hk), &gk) in out.iter_mut().zip(h).zip(g) {
        *o = -factor * (hk - gk * gh);
    }
}

impl VectorField for JointNormalizedFlow<'_> {
    fn dim(&self) -> usize {
        self.model.dim()
    }
    fn rhs(&self, s: f64, z: &[f64], dz: &mut [f64]) {
        self.directions(z, dz);
        let d = self.model.data().d;
        let f = self.w_factor(s);
        dz[..d].iter_mut().for_each(|x| *x = -*x);
        dz[d..].iter_mut().for_each(|x| *x *= -f);
    }
    fn jvp(&self, s: f64, z: &[f64], v: &[f64], out: &mut [f64]) {
        let d = self.model.data().d;
        let mut sc = self.scratch.borrow_mut();
        let Scratch { g, h } = &mut *sc;
        let lg = self.directions(z, g);
        match self.normalization {
            JointNormalization::PerBlock { .. } => {
                for (range, log_norm, factor) in [
                    (0..d, lg.log_norm_u, 1.0),
                    (d..g.len(), lg.log_norm_w, self.w_factor(s)),
                ] {
                    if log_norm == f64::NEG_INFINITY {
                        out[range].iter_mut().for_each(|x| *x = 0.0);
                        continue;
                    }
                    self.model.hvp_scaled(z, v, log_norm, h);
                    project_out(
                        &g[range.clone()],
                        &h[range.clone()],
                        factor,
                        &mut out[range],
                    );
                }
            }
            JointNormalization::Full => {
                let top = lg.log_norm_u.max(lg.log_norm_w);
                if top == f64::NEG_INFINITY {
                    out.iter_mut().for_each(|x| *x = 0.0);
                    return;
                }
                let log_norm = top
                    + (lg.log_norm_u - top)
                        .exp()
                        .hypot((lg.log_norm_w - top).exp())
                        .ln();
                self.model.hvp_scaled(z, v, log_norm, h);
                project_out(g, h, 1.0, out);
            }
        }
    }
}

//! Joint training of the decoder u and W (spec 003 §1.4b): L(u, W) = (1/n) Σ ℓ(m_i) with
//! time-dependent scores γ_i = y_i X_i u and optimal tokens argmax_t γ_{i,t}(u). The state is
//! z = (u, vec W) ∈ ℝ^{d + d²}, W column-major.

use std::cell::RefCell;

use crate::attention::data::{argmax, TokenData};
use crate::attention::eval::{self, Direction, Workspace};
use crate::attention::fixed::Attention;
use crate::attention::loss::Loss;
use crate::flow::{norm, GradientFlow};

/// Log-domain gradient of the joint loss, block by block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JointLogGradient {
    /// ln L (inf L = 0 in the joint setting).
    pub log_loss: f64,
    /// ln ‖∇_u L‖ and ln ‖∇_W L‖ (−∞ for a vanishing block, e.g. ∇_W L at u = 0).
    pub log_norm_u: f64,
    pub log_norm_w: f64,
}

#[derive(Debug)]
struct Scratch {
    ws: Workspace,
    gamma: Vec<f64>,
    log_gaps: Vec<f64>,
    opt: Vec<usize>,
}

/// The joint (u, W) model.
#[derive(Debug)]
pub struct JointModel {
    data: TokenData,
    loss: Loss,
    scratch: RefCell<Scratch>,
}

impl JointModel {
    pub fn new(data: TokenData, loss: Loss) -> Self {
        let scratch = RefCell::new(Scratch {
            ws: Workspace::new(data.n, data.t, data.d),
            gamma: vec![0.0; data.n * data.t],
            log_gaps: vec![0.0; data.n * data.t * data.t],
            opt: vec![0; data.n],
        });
        JointModel {
            data,
            loss,
            scratch,
        }
    }

    pub fn data(&self) -> &TokenData {
        &self.data
    }

    /// Splits a state into (u, vec W).
    pub fn split<'z>(&self, z: &'z [f64]) -> (&'z [f64], &'z [f64]) {
        assert_eq!(z.len(), self.dim(), "state must have d + d² entries");
        z.split_at(self.data.d)
    }

    fn evaluated(&self, z: &[f64]) -> std::cell::RefMut<'_, Scratch> {
        let (u, w) = self.split(z);
        let mut s = self.scratch.borrow_mut();
        let Scratch {
            ws,
            gamma,
            log_gaps,
            opt,
        } = &mut *s;
        self.data.scores_into(u, gamma);
        eval::score_log_gaps(gamma, self.data.t, log_gaps);
        for (i, o) in opt.iter_mut().enumerate() {
            *o = argmax(&gamma[i * self.data.t..(i + 1) * self.data.t]);
        }
        eval::evaluate(&self.data, w, (gamma, log_gaps), opt, self.loss, ws);
        s
    }

    /// ln L(u, W).
    pub fn log_loss(&self, z: &[f64]) -> f64 {
        eval::log_loss(&self.evaluated(z).ws, self.loss)
    }

    /// Unit block directions ∇_u L/‖∇_u L‖ and ∇_W L/‖∇_W L‖ (zeros for a vanishing block) and
    /// the log-norms.
    pub fn block_gradients(
        &self,
        z: &[f64],
        dir_u: &mut [f64],
        dir_w: &mut [f64],
    ) -> JointLogGradient {
        let mut s = self.evaluated(z);
        let t = self.data.t;
        let log_loss = eval::log_loss(&s.ws, self.loss);
        let unit = |v: &mut [f64], scale: f64| {
            if scale == f64::NEG_INFINITY {
                v.iter_mut().for_each(|x| *x = 0.0);
                return scale;
            }
            let nv = norm(v);
            if nv == 0.0 {
                return f64::NEG_INFINITY;
            }
            v.iter_mut().for_each(|x| *x /= nv);
            scale + nv.ln()
        };
        let su = eval::u_gradient_scale(&s.ws, t);
        eval::u_gradient(&self.data, &s.ws, su, dir_u);
        let log_norm_u = unit(dir_u, su);
        let sw = eval::w_gradient_scale(&s.ws, t);
        eval::w_gradient(&self.data, &mut s.ws, sw, dir_w);
        let log_norm_w = unit(dir_w, sw);
        JointLogGradient {
            log_loss,
            log_norm_u,
            log_norm_w,
        }
    }

    /// e^{−shift} ∇²L(z) · v for v = (δu, vec V).
    pub fn hvp_scaled(&self, z: &[f64], v: &[f64], shift: f64, out: &mut [f64]) {
        let (du, dw) = self.split(v);
        let (out_u, out_w) = out.split_at_mut(self.data.d);
        let mut s = self.evaluated(z);
        let dir = Direction { w: dw, u: Some(du) };
        eval::hessian_vector(&self.data, &mut s.ws, dir, shift, out_w, Some(out_u));
    }

    /// Optimal tokens argmax_t γ_{i,t}(u) at the state's decoder.
    pub fn optimal_tokens(&self, z: &[f64]) -> Vec<usize> {
        self.evaluated(z).opt.clone()
    }

    /// φ_{i,opt(u)} at the state.
    pub fn phi_opt(&self, z: &[f64]) -> Vec<f64> {
        self.attention(z).phi_opt
    }

    /// φ_{i,opt(u)}, ln(1 − φ_{i,opt(u)}) and the margins m_i = γ_iᵀφ_i at the state (the
    /// per-sample losses are ℓ(m_i)).
    pub fn attention(&self, z: &[f64]) -> Attention {
        let s = self.evaluated(z);
        let t = self.data.t;
        Attention {
            phi_opt: (0..self.data.n)
                .map(|i| s.ws.ls[i * t + s.opt[i]].exp())
                .collect(),
            log_one_minus_phi_opt: (0..self.data.n)
                .map(|i| eval::log_one_minus_phi_opt(&s.ws, i))
                .collect(),
            margins: s.ws.samples.iter().map(|x| x.margin).collect(),
        }
    }
}

impl GradientFlow for JointModel {
    fn dim(&self) -> usize {
        self.data.d + self.data.d * self.data.d
    }
    fn loss(&self, z: &[f64]) -> f64 {
        self.log_loss(z).exp()
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let (gu, gw) = g.split_at_mut(self.data.d);
        let lg = self.block_gradients(z, gu, gw);
        let (nu, nw) = (lg.log_norm_u.exp(), lg.log_norm_w.exp());
        gu.iter_mut().for_each(|x| *x *= nu);
        gw.iter_mut().for_each(|x| *x *= nw);
    }
    fn hvp(&self, z: &[f64], v: &[f64], out: &mut [f64]) {
        self.hvp_scaled(z, v, 0.0, out);
    }
}

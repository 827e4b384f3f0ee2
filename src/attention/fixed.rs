//! Training W with the decoder fixed (spec 003 §1.4a): L(W) = (1/n) Σ_i ℓ(γ_iᵀφ(X_i W q_i)).

use std::cell::RefCell;

use super::data::TokenData;
use super::eval::{self, Direction, Workspace};
use super::logdomain::log_sum_exp;
use super::loss::Loss;
use super::TokenError;
use crate::flow::GradientFlow;

/// Log-domain summary of the loss and its gradient at one W.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogGradient {
    /// ln(L − L*).
    pub log_excess: f64,
    /// ln ‖∇L‖ (−∞ when the gradient vanishes exactly).
    pub log_norm: f64,
}

/// Per-sequence attention at one W.
#[derive(Debug, Clone, PartialEq)]
pub struct Attention {
    /// φ_{i,opt}.
    pub phi_opt: Vec<f64>,
    /// ln(1 − φ_{i,opt}), exact when φ_{i,opt} rounds to 1.
    pub log_one_minus_phi_opt: Vec<f64>,
    /// Margins m_i = γ_iᵀφ_i.
    pub margins: Vec<f64>,
}

/// The fixed-decoder model. As a [`GradientFlow`] on vec(W) (column-major, d²) its loss is the
/// excess L − L* (L* = (1/n) Σ ℓ(γ_{i,opt}) = inf L): the gradient and Hessian are those of L,
/// and the Polyak step (L − L*)/‖∇L‖² needs no cancelling subtraction.
#[derive(Debug)]
pub struct FixedDecoder {
    data: TokenData,
    decoder: Vec<f64>,
    loss: Loss,
    gamma: Vec<f64>,
    /// ln|γ_{i,a} − γ_{i,b}| ([`eval::score_log_gaps`]): fixed with the decoder.
    log_gaps: Vec<f64>,
    opt: Vec<usize>,
    ws: RefCell<Workspace>,
}

impl FixedDecoder {
    /// The model for data, decoder u and loss; each sequence must have a unique optimal token.
    pub fn new(data: TokenData, decoder: Vec<f64>, loss: Loss) -> Result<Self, TokenError> {
        if decoder.len() != data.d {
            return Err(TokenError::Invalid(format!(
                "decoder has {} entries, expected d = {}",
                decoder.len(),
                data.d
            )));
        }
        let opt = data.optimal_tokens(&decoder, 1e-12)?;
        let gamma = data.scores(&decoder);
        let mut log_gaps = vec![0.0; data.n * data.t * data.t];
        eval::score_log_gaps(&gamma, data.t, &mut log_gaps);
        let ws = RefCell::new(Workspace::new(data.n, data.t, data.d));
        Ok(FixedDecoder {
            data,
            decoder,
            loss,
            gamma,
            log_gaps,
            opt,
            ws,
        })
    }

    pub fn data(&self) -> &TokenData {
        &self.data
    }

    pub fn decoder(&self) -> &[f64] {
        &self.decoder
    }

    pub fn loss_kind(&self) -> Loss {
        self.loss
    }

    /// Token scores γ (n × T, row-major).
    pub fn scores(&self) -> &[f64] {
        &self.gamma
    }

    /// opt_i = argmax_t γ_{i,t}.
    pub fn optimal_tokens(&self) -> &[usize] {
        &self.opt
    }

    /// ln L* = ln((1/n) Σ ℓ(γ_{i,opt})).
    pub fn log_loss_star(&self) -> f64 {
        let t = self.data.t;
        log_sum_exp(
            self.opt
                .iter()
                .enumerate()
                .map(|(i, &o)| self.loss.log_value(self.gamma[i * t + o])),
        ) - (self.data.n as f64).ln()
    }

    fn check(&self, w: &[f64]) {
        assert_eq!(w.len(), self.data.d * self.data.d, "W must have d² entries");
    }

    fn evaluated(&self, w: &[f64]) -> std::cell::RefMut<'_, Workspace> {
        self.check(w);
        let mut ws = self.ws.borrow_mut();
        // the scores are fixed, so the state at the W last evaluated is still valid
        if ws.at != w {
            let scores = (&self.gamma[..], &self.log_gaps[..]);
            eval::evaluate(&self.data, w, scores, &self.opt, self.loss, &mut ws);
            ws.at.clear();
            ws.at.extend_from_slice(w);
        }
        ws
    }

    /// ln(L(W) − L*), exact for any logit gap.
    pub fn log_excess_loss(&self, w: &[f64]) -> f64 {
        eval::log_excess(&self.evaluated(w), self.loss)
    }

    /// ln L(W).
    pub fn log_loss(&self, w: &[f64]) -> f64 {
        eval::log_loss(&self.evaluated(w), self.loss)
    }

    /// Writes the unit gradient direction ∇L/‖∇L‖ into `direction` (zeros if ∇L = 0) and
    /// returns ln ‖∇L‖ (−∞ there); nothing underflows however saturated W is.
    pub fn unit_gradient(&self, w: &[f64], direction: &mut [f64]) -> f64 {
        let mut ws = self.evaluated(w);
        let scale = eval::w_gradient_scale(&ws, self.data.t);
        if scale == f64::NEG_INFINITY {
            direction.iter_mut().for_each(|x| *x = 0.0);
            return scale;
        }
        eval::w_gradient(&self.data, &mut ws, scale, direction);
        let norm = crate::flow::norm(direction);
        let inv = norm.recip();
        direction.iter_mut().for_each(|x| *x *= inv);
        scale + norm.ln()
    }

    /// [`FixedDecoder::unit_gradient`] and ln(L − L*) (which a gradient flow's right-hand side
    /// does not need: n more logarithms and exponentials).
    pub fn gradient_direction(&self, w: &[f64], direction: &mut [f64]) -> LogGradient {
        let log_norm = self.unit_gradient(w, direction);
        LogGradient {
            log_excess: self.log_excess_loss(w),
            log_norm,
        }
    }

    /// e^{−shift} ∇²L(W) · V: the Hessian-vector product at the scale e^shift (pass ln ‖∇L‖ to
    /// get H V/‖∇L‖, which stays O(1) where H itself underflows).
    pub fn hvp_scaled(&self, w: &[f64], v: &[f64], shift: f64, out: &mut [f64]) {
        let mut ws = self.evaluated(w);
        let dir = Direction { w: v, u: None };
        eval::hessian_vector(&self.data, &mut ws, dir, shift, out, None);
    }

    /// φ_{i,opt}, ln(1 − φ_{i,opt}) and the margins at W.
    pub fn attention(&self, w: &[f64]) -> Attention {
        let ws = self.evaluated(w);
        let t = self.data.t;
        Attention {
            phi_opt: ws
                .samples
                .iter()
                .enumerate()
                .map(|(i, s)| ws.ls[i * t + s.opt].exp())
                .collect(),
            log_one_minus_phi_opt: (0..self.data.n)
                .map(|i| eval::log_one_minus_phi_opt(&ws, i))
                .collect(),
            margins: ws.samples.iter().map(|s| s.margin).collect(),
        }
    }
}

impl GradientFlow for FixedDecoder {
    fn dim(&self) -> usize {
        self.data.d * self.data.d
    }
    /// The excess loss L − L*.
    fn loss(&self, w: &[f64]) -> f64 {
        self.log_excess_loss(w).exp()
    }
    fn grad(&self, w: &[f64], g: &mut [f64]) {
        let log_norm = self.unit_gradient(w, g);
        let norm = log_norm.exp();
        g.iter_mut().for_each(|x| *x *= norm);
    }
    fn hvp(&self, w: &[f64], v: &[f64], out: &mut [f64]) {
        self.hvp_scaled(w, v, 0.0, out);
    }
}

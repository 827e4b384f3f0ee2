//! The paper's discrete optimizers in the log domain (spec 003 §2.1, §2.2, §8.2).
//!
//! The engine's [`crate::flow::gradient_descent`] works on f64 gradients, which underflow once
//! logit gaps pass ≈ 700 and make NGD's direction meaningless well before that. These steppers
//! use the models' unit gradient directions and log-norms instead, so NGD and the Polyak step
//! run to any norm; GD legitimately stalls when its step underflows, and says so.

use serde::{Deserialize, Serialize};

use super::joint::JointModel;
use crate::attention::{FixedDecoder, TokenError};
use crate::flow::GradientFlow;

/// How NGD with momentum combines past gradients (spec 003 §2.1, Fig. 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Momentum {
    /// (A) heavy ball on normalized steps: v ← βv + ∇L/‖∇L‖, W ← W − ηv.
    Normalized,
    /// (B) PyTorch-like: buf ← β·buf + ∇L, W ← W − min(η/‖∇L‖, cap)·buf.
    Raw,
}

/// A fixed-decoder update W ← W − (step)·direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum FixedRule {
    /// W ← W − η∇L.
    Gd { eta: f64 },
    /// W ← W − min(η/‖∇L‖, cap)∇L (cap = ∞ is the analysed NGD).
    Ngd { eta: f64, cap: f64 },
    /// W ← W − min((L − L*)/‖∇L‖², cap)∇L.
    Polyak { cap: f64 },
    /// NGD with momentum β (cap applies to semantics B only).
    NgdMomentum {
        eta: f64,
        beta: f64,
        momentum: Momentum,
        cap: f64,
    },
}

fn check_positive(name: &str, x: f64) -> Result<(), TokenError> {
    if x > 0.0 && !x.is_nan() {
        Ok(())
    } else {
        Err(TokenError::Invalid(format!(
            "{name} must be positive, got {x}"
        )))
    }
}

impl FixedRule {
    fn validate(&self) -> Result<(), TokenError> {
        match *self {
            FixedRule::Gd { eta } => check_positive("eta", eta),
            FixedRule::Ngd { eta, cap } => {
                check_positive("eta", eta).and(check_positive("cap", cap))
            }
            FixedRule::Polyak { cap } => check_positive("cap", cap),
            FixedRule::NgdMomentum { eta, beta, cap, .. } => {
                check_positive("eta", eta)?;
                check_positive("cap", cap)?;
                if (0.0..1.0).contains(&beta) {
                    Ok(())
                } else {
                    Err(TokenError::Invalid(format!(
                        "beta must be in [0, 1), got {beta}"
                    )))
                }
            }
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepReport {
    /// ln(L − L*) and ln ‖∇L‖ before the step.
    pub log_excess: f64,
    pub log_grad_norm: f64,
    /// ‖W_{k+1} − W_k‖.
    pub length: f64,
    /// Whether the cap bounded the step.
    pub capped: bool,
    /// The step rounded to nothing although the gradient is nonzero (GD deep in the tail).
    pub stalled: bool,
}

/// ln of the distance moved along −∇L/‖∇L‖ and whether the cap bounded it, for the rules
/// without memory (`None` for momentum).
fn along_gradient(rule: FixedRule, log_excess: f64, ln_norm: f64) -> Option<(f64, bool)> {
    let capped = |free: f64, cap: f64| (free.min(cap.ln() + ln_norm), cap.ln() + ln_norm < free);
    match rule {
        FixedRule::Gd { eta } => Some((eta.ln() + ln_norm, false)),
        FixedRule::Ngd { eta, cap } => Some(capped(eta.ln(), cap)),
        FixedRule::Polyak { cap } => Some(capped(log_excess - ln_norm, cap)),
        FixedRule::NgdMomentum { .. } => None,
    }
}

/// Runs a [`FixedRule`] on a [`FixedDecoder`]; holds the momentum buffer.
pub struct FixedStepper<'a> {
    model: &'a FixedDecoder,
    rule: FixedRule,
    direction: Vec<f64>,
    buffer: Vec<f64>,
}

impl<'a> FixedStepper<'a> {
    /// A stepper for `rule` (caps may be +∞; every other parameter must be positive).
    pub fn new(model: &'a FixedDecoder, rule: FixedRule) -> Result<Self, TokenError> {
        rule.validate()?;
        let dim = model.dim();
        Ok(FixedStepper {
            model,
            rule,
            direction: vec![0.0; dim],
            buffer: vec![0.0; dim],
        })
    }

    /// One update of `w` in place.
    pub fn step(&mut self, w: &mut [f64]) -> StepReport {
        let lg = self.model.gradient_direction(w, &mut self.direction);
        let ln_norm = lg.log_norm;
        let mut report = StepReport {
            log_excess: lg.log_excess,
            log_grad_norm: ln_norm,
            length: 0.0,
            capped: false,
            stalled: false,
        };
        if ln_norm == f64::NEG_INFINITY {
            return report;
        }
        match along_gradient(self.rule, lg.log_excess, ln_norm) {
            Some((ln_length, capped)) => {
                let length = ln_length.exp();
                w.iter_mut()
                    .zip(&self.direction)
                    .for_each(|(x, g)| *x -= length * g);
                report.length = length;
                report.capped = capped;
            }
            None => (report.length, report.capped) = self.momentum_step(w, ln_norm),
        }
        report.stalled = report.length == 0.0;
        report
    }

    /// The momentum update from the current unit direction; returns (‖ΔW‖, capped).
    fn momentum_step(&mut self, w: &mut [f64], ln_norm: f64) -> (f64, bool) {
        let FixedRule::NgdMomentum {
            eta,
            beta,
            momentum,
            cap,
        } = self.rule
        else {
            return (0.0, false);
        };
        let (scale, grad_scale, capped) = match momentum {
            Momentum::Normalized => (eta, 1.0, false),
            Momentum::Raw => (
                (eta.ln() - ln_norm).min(cap.ln()).exp(),
                ln_norm.exp(),
                cap.ln() < eta.ln() - ln_norm,
            ),
        };
        let mut sq = 0.0;
        for ((x, b), g) in w.iter_mut().zip(&mut self.buffer).zip(&self.direction) {
            *b = beta * *b + grad_scale * g;
            *x -= scale * *b;
            sq += (scale * *b).powi(2);
        }
        (sq.sqrt(), capped)
    }
}

/// The joint update of Eq. (10) and its companions (spec 003 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum JointRule {
    /// u ← u − η(k+1)^{−α_u} ĝ_u, W ← W − η(k+1)^{−α} ĝ_W (per-block normalized; α = 1/3 is
    /// "NGD-joint", α = 0 Fig. 3's "NGD"). A block with an exactly zero gradient is skipped.
    Ngd { eta: f64, alpha: f64, alpha_u: f64 },
    /// θ ← θ − η∇L on both blocks.
    Gd { eta: f64 },
    /// θ ← θ − min(L/‖∇L‖², cap)∇L over the full θ (L* = 0).
    Polyak { cap: f64 },
}

/// Runs a [`JointRule`] on a [`JointModel`].
pub struct JointStepper<'a> {
    model: &'a JointModel,
    rule: JointRule,
    direction: Vec<f64>,
    iteration: usize,
}

impl<'a> JointStepper<'a> {
    pub fn new(model: &'a JointModel, rule: JointRule) -> Result<Self, TokenError> {
        match rule {
            JointRule::Ngd {
                eta,
                alpha,
                alpha_u,
            } => {
                check_positive("eta", eta)?;
                if !(alpha >= 0.0 && alpha_u >= 0.0) {
                    return Err(TokenError::Invalid(format!(
                        "alpha and alpha_u must be ≥ 0, got {alpha} and {alpha_u}"
                    )));
                }
            }
            JointRule::Gd { eta } => check_positive("eta", eta)?,
            JointRule::Polyak { cap } => check_positive("cap", cap)?,
        }
        Ok(JointStepper {
            model,
            rule,
            direction: vec![0.0; model.dim()],
            iteration: 0,
        })
    }

    /// One update of z = (u, vec W) in place; returns ln L before the step.
    pub fn step(&mut self, z: &mut [f64]) -> f64 {
        let d = self.model.data().d;
        let (du, dw) = self.direction.split_at_mut(d);
        let lg = self.model.block_gradients(z, du, dw);
        let k = self.iteration as f64;
        self.iteration += 1;
        // (block length of u, block length of W) along the unit block directions
        let (len_u, len_w) = match self.rule {
            JointRule::Ngd {
                eta,
                alpha,
                alpha_u,
            } => (eta * (k + 1.0).powf(-alpha_u), eta * (k + 1.0).powf(-alpha)),
            JointRule::Gd { eta } => (
                (eta.ln() + lg.log_norm_u).exp(),
                (eta.ln() + lg.log_norm_w).exp(),
            ),
            JointRule::Polyak { cap } => {
                let top = lg.log_norm_u.max(lg.log_norm_w);
                let ln_full = top
                    + (lg.log_norm_u - top)
                        .exp()
                        .hypot((lg.log_norm_w - top).exp())
                        .ln();
                let ln_step = (lg.log_loss - 2.0 * ln_full).min(cap.ln());
                (
                    (ln_step + lg.log_norm_u).exp(),
                    (ln_step + lg.log_norm_w).exp(),
                )
            }
        };
        let moves = |ln_norm: f64, len: f64| {
            if ln_norm == f64::NEG_INFINITY {
                0.0
            } else {
                len
            }
        };
        let (len_u, len_w) = (moves(lg.log_norm_u, len_u), moves(lg.log_norm_w, len_w));
        z[..d]
            .iter_mut()
            .zip(du.iter())
            .for_each(|(x, g)| *x -= len_u * g);
        z[d..]
            .iter_mut()
            .zip(dw.iter())
            .for_each(|(x, g)| *x -= len_w * g);
        lg.log_loss
    }
}

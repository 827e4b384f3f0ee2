//! Root functions for stage transitions (spec 004 §4 "measured transition time", §8.4), usable
//! with [`crate::flow::Events`] on the log layout (primary) or the raw layout. Every function is
//! evaluated in the log domain where a magnitude is involved, so that the thresholds work for
//! any α.

use std::cell::RefCell;

use super::algorithm1::Schedule;
use super::coords::LogCoordinates;
use super::network::{products, BetaLoss};
use crate::flow::{Event, Events};
use crate::stats;

/// Which state the integrator carries.
#[derive(Debug, Clone, Copy)]
pub enum Layout<'a> {
    /// y = [u; v].
    Raw,
    /// ζ = ln w with the given side data.
    Log(&'a LogCoordinates),
}

/// One scalar event function; it changes sign where the described crossing happens.
#[derive(Debug, Clone, PartialEq)]
pub enum TransitionEvent {
    /// (β_i − level)·sgn(level): β_i passes `level` (≠ 0) moving away from 0. Spec §4: the
    /// transition into stage k is |β_{i_{k−1}}| = ½|β^k_{i_{k−1}}| with sign σ_{k−1}.
    BetaReaches { index: usize, level: f64 },
    /// ln max(|u_i|, |v_i|) − ln_level: the weights of coordinate i cross e^{ln_level}
    /// (non-negligibility at 1e−5, Fig. 11; the race event u_{i_k} = ρ, L.C.9).
    WeightReaches { index: usize, ln_level: f64 },
    /// b_i − level with b_i = log_α w_i = −ln w_i / Λ: the log-scale thresholds of Algorithm 1
    /// (b = 0 or 2 means active; b = 1 is the sign change of β_i).
    LogScaleReaches {
        index: usize,
        level: f64,
        lambda: f64,
    },
    /// ‖β − target‖_∞ − radius (the convergence event of L.C.10).
    DistanceTo { target: Vec<f64>, radius: f64 },
    /// L̃(β) − level (the theory-free loss-midpoint event).
    LossLevel { level: f64 },
}

/// A set of event functions on one layout of one model.
pub struct TransitionEvents<'a, L> {
    loss: &'a L,
    layout: Layout<'a>,
    events: Vec<TransitionEvent>,
    beta: RefCell<Vec<f64>>,
}

impl<'a, L: BetaLoss> TransitionEvents<'a, L> {
    pub fn new(loss: &'a L, layout: Layout<'a>, events: Vec<TransitionEvent>) -> Self {
        let p = loss.p();
        TransitionEvents {
            loss,
            layout,
            events,
            beta: RefCell::new(vec![0.0; p]),
        }
    }

    /// The spec §4 transition events of a schedule: component k − 1 is
    /// β_{i_{k−1}} reaching `fraction`·β^k_{i_{k−1}} (½ in the spec), for k = 1..K.
    pub fn for_schedule(
        loss: &'a L,
        layout: Layout<'a>,
        schedule: &Schedule,
        fraction: f64,
    ) -> Self {
        let events = schedule
            .stages
            .iter()
            .filter_map(|s| {
                let act = s.entered_by.as_ref()?;
                Some(TransitionEvent::BetaReaches {
                    index: act.index,
                    level: fraction * s.beta[act.index],
                })
            })
            .collect();
        Self::new(loss, layout, events)
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn events(&self) -> &[TransitionEvent] {
        &self.events
    }

    fn beta_i(&self, z: &[f64], i: usize) -> f64 {
        match self.layout {
            Layout::Raw => z[i] * z[self.loss.p() + i],
            Layout::Log(c) => c.beta_i(i, z[i]),
        }
    }

    fn fill_beta(&self, z: &[f64], beta: &mut [f64]) {
        match self.layout {
            Layout::Raw => products(z, beta),
            Layout::Log(c) => c.beta(z, beta),
        }
    }

    /// Writes every event function at state z into `out`.
    pub fn eval(&self, z: &[f64], out: &mut [f64]) {
        let p = self.loss.p();
        for (o, event) in out.iter_mut().zip(&self.events) {
            *o = match *event {
                TransitionEvent::BetaReaches { index, level } => {
                    (self.beta_i(z, index) - level) * level.signum()
                }
                TransitionEvent::WeightReaches { index, ln_level } => {
                    let ln_weight = match self.layout {
                        Layout::Raw => z[index].abs().max(z[p + index].abs()).ln(),
                        Layout::Log(c) => c.ln_weight(index, z[index]),
                    };
                    ln_weight - ln_level
                }
                TransitionEvent::LogScaleReaches {
                    index,
                    level,
                    lambda,
                } => {
                    // |w| = |u + v| in any orientation (swapping and negating keep |u + v|)
                    let ln_w = match self.layout {
                        Layout::Raw => (z[index] + z[p + index]).abs().ln(),
                        Layout::Log(_) => z[index],
                    };
                    -ln_w / lambda - level
                }
                TransitionEvent::DistanceTo { ref target, radius } => {
                    let beta = &mut *self.beta.borrow_mut();
                    self.fill_beta(z, beta);
                    let dist = stats::max_abs(beta.iter().zip(target).map(|(b, t)| b - t));
                    dist - radius
                }
                TransitionEvent::LossLevel { level } => {
                    let beta = &mut *self.beta.borrow_mut();
                    self.fill_beta(z, beta);
                    self.loss.loss(beta) - level
                }
            };
        }
    }

    /// Runs `body` with these functions as engine [`Events`] (stopping at the first one if
    /// `terminal`), e.g. `ev.with_events(false, |e| integrate(&flow, &z0, &t, &cfg, Some(e)))`.
    pub fn with_events<R>(&self, terminal: bool, body: impl FnOnce(&Events) -> R) -> R {
        let func = |_t: f64, z: &[f64], out: &mut [f64]| self.eval(z, out);
        body(&Events {
            count: self.len(),
            func: &func,
            terminal,
        })
    }
}

/// Measured transition times t̂_k (spec §4) from the events of a run with
/// [`TransitionEvents::for_schedule`]: for k = 1..=`stages`, the first root of component k − 1
/// after t̂_{k−1} (None once a transition is missing).
pub fn transition_times(events: &[Event], stages: usize) -> Vec<Option<f64>> {
    let mut times = Vec::with_capacity(stages);
    let mut after = f64::NEG_INFINITY;
    for k in 1..=stages {
        let found = events
            .iter()
            .find(|e| e.index == k - 1 && e.t > after)
            .map(|e| e.t);
        times.push(found);
        match found {
            Some(t) => after = t,
            None => after = f64::INFINITY,
        }
    }
    times
}

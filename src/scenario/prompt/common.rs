//! What the seed-002 scenarios share: the synthetic teacher data of spec 002 §1.2 drawn per
//! trial from the scenario seed, with common random numbers across σ_p, and the model built on
//! a draw for the chosen training mode.

use serde::{Deserialize, Serialize};

use crate::models::prompt::{Attention, PromptModel, Synthetic, SyntheticDraw, Trained};
use crate::scenario::cost::{n, Cost};
use crate::scenario::RunContext;

/// Random stream of trial k is `TRIAL_STREAM + k`: the same for every σ_p, so only the
/// teacher's scale changes between σ_p values of one trial (spec §1.2 step 3).
pub const TRIAL_STREAM: u64 = 1000;
/// First stream free for a scenario's own randomness.
pub const FIRST_FREE_STREAM: u64 = 1;

/// Which parameters are trained (spec §5 E5: the theorems freeze v, the experiments do not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrainName {
    /// p only, v frozen at the teacher's v_T (Assumption A1).
    P,
    /// p and v from (p₀, v₀).
    Pv,
}

/// Trial `trial` of the synthetic data (n = d tokens, N samples, σ_v = 1, softmax teacher).
pub fn synthetic_draw(
    ctx: &RunContext,
    d: usize,
    samples: usize,
    sigma_p: f64,
    trial: usize,
) -> SyntheticDraw {
    let spec = Synthetic {
        d,
        samples,
        sigma_p,
        sigma_v: 1.0,
        teacher: Attention::Softmax,
    };
    spec.draw(&mut ctx.rng(TRIAL_STREAM + trial as u64))
}

/// The student model on a draw and its initial state: (p₀, v₀) for `Pv`, p₀ with v = v_T for `P`.
pub fn student(
    draw: &SyntheticDraw,
    attention: Attention,
    train: TrainName,
) -> (PromptModel, Vec<f64>) {
    let trained = match train {
        TrainName::P => Trained::P {
            v: draw.v_teacher.clone(),
        },
        TrainName::Pv => Trained::PV,
    };
    let model = PromptModel::new(draw.data.clone(), attention, trained);
    let theta0 = model.state(&draw.p0, &draw.v0);
    (model, theta0)
}

/// The teacher's parameters as a state of `model` (for Hessians at the teacher).
pub fn teacher_state(model: &PromptModel, draw: &SyntheticDraw) -> Vec<f64> {
    model.state(&draw.p_teacher, &draw.v_teacher)
}

/// The cost (see [`crate::scenario::cost`]) of `count` synthetic draws of N samples X_i ∈ ℝ^{d×d}
/// held at once (N·d² doubles each; `key` names the keys they grow with).
pub fn synthetic_data(key: &'static str, count: f64, d: usize, samples: usize) -> Cost {
    Cost::new().doubles(
        key,
        "the samples X_i (N·d² doubles)",
        count * n(samples) * n(d) * n(d),
    )
}

/// Floating-point operations of one loss and gradient of the prompt model on N samples of
/// `tokens` tokens in ℝ^d (the logits X_i p, the softmax, the output and their adjoints).
pub fn prompt_grad(tokens: usize, d: usize, samples: usize) -> f64 {
    6.0 * n(samples) * n(tokens) * n(d)
}

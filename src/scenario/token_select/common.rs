//! What every seed-003 scenario shares: the named data models (spec 003 §1.3) drawn from the
//! scenario seed, and the W-SVM direction every optimizer is measured against (§3).

use serde::{Deserialize, Serialize};

use crate::analysis::svm::{solve_l2, L2Solution, RankOneConstraints, SvmMethod};
use crate::attention::{Instance, TokenError};
use crate::models::token_select::generators::{bad_init, two_token};
use crate::models::token_select::{Example1, GaussianJoint};
use crate::scenario::cost::{n, Cost};
use crate::scenario::{RunContext, RunError, Scenario};

/// Random stream of the data (tokens, labels, decoder).
pub const DATA_STREAM: u64 = 0;
/// First stream free for a scenario's own randomness (initializations, trials, …).
pub const FIRST_FREE_STREAM: u64 = 1;

/// The data models of spec 003 §1.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataName {
    /// Example 1 (optimal token first, Gaussian noise).
    Ex1,
    /// Example 1 with non-optimal tokens orthogonal to u (ρ_orth = 0).
    Ex1Orth,
    /// The two-token instance of §4.2 (closed forms).
    TwoToken,
    /// The bad-initialization instance of Fig. 8.
    BadInit,
    /// The joint-training Gaussian model DM.
    Dm,
}

/// Draws the named data model from the scenario seed's data stream.
pub fn build_instance(name: DataName, ctx: &RunContext) -> Result<Instance, RunError> {
    draw_instance(name, ctx.scenario)
        .map_err(|e| RunError::Other(format!("generating the {name:?} data: {e}")))
}

/// The named data model drawn from the seed's data stream (also while preparing a run).
pub fn draw_instance(name: DataName, sc: &Scenario) -> Result<Instance, TokenError> {
    let mut rng = sc.rng(DATA_STREAM);
    match name {
        DataName::Ex1 => Example1::ex1().generate(&mut rng),
        DataName::Ex1Orth => Example1::ex1_orth().generate(&mut rng),
        DataName::Dm => GaussianJoint::dm().generate(&mut rng),
        DataName::TwoToken => Ok(two_token()),
        DataName::BadInit => Ok(bad_init()),
    }
}

/// The W-SVM of an instance (dual QP, polished, with its KKT certificate).
pub fn w_svm(instance: &Instance) -> Result<(RankOneConstraints, L2Solution), RunError> {
    let cons = RankOneConstraints::w_svm(&instance.data.view(), &instance.opt)
        .map_err(|e| RunError::Other(format!("W-SVM constraints: {e}")))?;
    let sol =
        solve_l2(&cons, SvmMethod::Dual).map_err(|e| RunError::Other(format!("W-SVM: {e}")))?;
    Ok((cons, sol))
}

/// The largest built-in data model for cost estimates (see [`crate::scenario::cost`]): dm has
/// W ∈ ℝ^{64×64}; one loss and gradient of a fixed-decoder or joint run costs a few n·d² (the
/// products W z_i and the outer products of the gradient; ex1: n = 8, d = 32; dm: n = 6,
/// d = 64), so costs that depend only on the data model are constants.
pub const BUILT_IN_W: f64 = 4096.0;
pub const BUILT_IN_GRAD: f64 = 5e4;

/// `runs` optimizer runs of `steps` iterations each on a built-in data model: the iterations,
/// and the checkpoints (every step up to 1000, then ~60 per decade) with their table rows.
pub fn optimizer_runs(key: &'static str, runs: f64, steps: usize) -> Cost {
    let steps = n(steps);
    let checkpoints = steps.min(1000.0) + 60.0 * steps.max(1.0).log10();
    Cost::new()
        .work(key, "optimizer iterations", runs * steps, BUILT_IN_GRAD)
        .work(
            key,
            "checkpoint probes",
            runs * checkpoints,
            2.0 * BUILT_IN_GRAD,
        )
        .table(key, runs * checkpoints, 12.0)
}

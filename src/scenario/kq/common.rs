//! What every seed-001 scenario shares: the named datasets (spec 001 §5.1) and the
//! max-margin solutions the trajectories are measured against.

use serde::{Deserialize, Serialize};

use crate::models::kq::toys;
use crate::models::token_select::Instance;
use crate::scenario::{RunContext, RunError};

/// Random stream of the data (random datasets).
pub const DATA_STREAM: u64 = 0;
/// First stream free for a scenario's own randomness (initializations, trials, …).
pub const FIRST_FREE_STREAM: u64 = 1;

/// The datasets of spec 001 §5.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataName {
    /// One constraint (d = 3): ℓ1 β* = (1, 0, 0), ℓ2 (0.8, 0.4, 0).
    Toy1,
    /// The diagonal discriminator toy-2(1.6): ℓ1 β* = (0, 0.625, 0, 0).
    Toy2b,
    /// toy-2(1.2): unique ℓ1 solution with a slow off-support exponent 1/6.
    Toy2Slow,
    /// toy-2(1.0): a degenerate LP (the ℓ1 solution set is a segment).
    Toy2Degenerate,
    /// The full-model discriminator (d = 2): W_* rank one, W_F rank two.
    Toy3,
    /// Assumption-4 data (d = 4, L = 3): aligned limit W* = Diag(1/2.4, −1/1.6, 0, 0).
    Toy4,
}

/// Builds the named dataset (the scenario seed's data stream feeds the random ones).
pub fn build_instance(name: DataName, _ctx: &RunContext) -> Result<Instance, RunError> {
    Ok(match name {
        DataName::Toy1 => toys::toy1(),
        DataName::Toy2b => toys::toy2b(),
        DataName::Toy2Slow => toys::toy2(1.2),
        DataName::Toy2Degenerate => toys::toy2(1.0),
        DataName::Toy3 => toys::toy3(),
        DataName::Toy4 => toys::toy4(),
    })
}

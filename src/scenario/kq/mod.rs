//! Scenarios of seed 001 (separately trained key and query matrices, nuclear-norm bias;
//! spec 001 §7).

pub mod common;

use super::registry::ScenarioKind;

/// The seed-001 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![]
}

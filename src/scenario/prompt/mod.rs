//! Scenarios of seed 002 (softmax conditioning of prompt attention; spec 002 §6–7).

pub mod common;

use super::registry::ScenarioKind;

/// The seed-002 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![]
}

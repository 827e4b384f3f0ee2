//! Scenarios of seed 004 (incremental learning of networks with diagonal weights; spec 004 §7).

pub mod common;

use super::registry::ScenarioKind;

/// The seed-004 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![]
}

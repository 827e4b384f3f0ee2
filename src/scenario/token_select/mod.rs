//! Scenarios of seed 003 (implicit bias of self-attention toward the W-SVM; spec 003 §7).

pub mod common;

use super::registry::ScenarioKind;

/// The seed-003 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![]
}

//! Scenarios of seed 000 (linear self-attention on histogram tasks; spec 000 §6).

mod phase;
pub mod thm2_trajectory;

use super::registry::ScenarioKind;

/// The seed-000 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![&thm2_trajectory::KIND]
}

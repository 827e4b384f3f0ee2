//! Scenarios of seed 003 (implicit bias of self-attention toward the W-SVM; spec 003 §7).

mod arc_length;
pub mod common;
pub mod flow_path_equivalence;
pub mod joint_common;
mod joint_record;
pub mod joint_training;
pub mod tokens_bad_init;

use super::registry::ScenarioKind;

/// The seed-003 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &tokens_bad_init::KIND,
        &flow_path_equivalence::KIND,
        &joint_training::KIND,
    ]
}

//! Scenarios of seed 000 (linear self-attention on histogram tasks; spec 000 §6).

pub mod fixed_points;
mod fixed_points_column;
pub mod lemma31;
mod phase;
pub mod stiffness_report;
mod task_param;
pub mod tasks;
mod tf_common;
pub mod tf_vs_df;
pub mod thm2_closed_form;
mod thm2_common;
pub mod thm2_limits;
pub mod thm2_onset;
pub mod thm2_rates;
pub mod thm2_trajectory;
pub mod threshold_weights;
pub mod work_precision;
mod worst_case;

use super::registry::ScenarioKind;

/// The seed-000 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &tasks::KIND,
        &lemma31::KIND,
        &thm2_trajectory::KIND,
        &thm2_closed_form::KIND,
        &thm2_limits::KIND,
        &thm2_rates::KIND,
        &thm2_onset::KIND,
        &fixed_points::KIND,
        &tf_vs_df::KIND,
        &threshold_weights::KIND,
        &stiffness_report::KIND,
        &work_precision::KIND,
    ]
}

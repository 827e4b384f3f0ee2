//! Scenarios of seed 000 (linear self-attention on histogram tasks; spec 000 §6).

pub mod bad_init;
pub mod conservation;
mod df_common;
pub mod fixed_points;
mod fixed_points_column;
pub mod gd_vs_flow;
pub mod imbalance_sweep;
mod instance_files;
pub mod lemma31;
pub mod limit_kkt;
pub mod near_saddle;
mod phase;
mod sizes;
pub mod small_init_staircase;
pub mod stiffness_report;
mod task_param;
pub mod tasks;
mod tf_common;
pub mod tf_vs_df;
pub mod thm1_loss_decay;
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
        &conservation::KIND,
        &thm1_loss_decay::KIND,
        &imbalance_sweep::KIND,
        &bad_init::KIND,
        &near_saddle::KIND,
        &limit_kkt::KIND,
        &small_init_staircase::KIND,
        &gd_vs_flow::KIND,
        &tf_vs_df::KIND,
        &threshold_weights::KIND,
        &stiffness_report::KIND,
        &work_precision::KIND,
    ]
}

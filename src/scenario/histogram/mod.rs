//! Scenarios of seed 000 (linear self-attention on histogram tasks; spec 000 §6).

mod bad_init;
mod conservation;
mod df_common;
mod fixed_points;
mod fixed_points_column;
mod gd_vs_flow;
mod imbalance_sweep;
mod instance_files;
mod lemma31;
mod lemma_a2;
mod limit_kkt;
mod near_saddle;
mod phase;
mod sizes;
mod small_init_staircase;
mod stiffness_report;
mod task_param;
mod tasks;
mod tf_common;
mod tf_vs_df;
mod thm1_loss_decay;
mod thm2_closed_form;
mod thm2_common;
mod thm2_limits;
mod thm2_onset;
mod thm2_rates;
mod thm2_trajectory;
mod threshold_weights;
mod work_precision;
mod worst_case;

use super::registry::ScenarioKind;

/// The seed-000 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &tasks::KIND,
        &lemma31::KIND,
        &lemma_a2::KIND,
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

//! Scenarios of seed 004 (incremental learning of networks with diagonal weights; spec 004 §7).

pub mod algorithm1_attn;
mod algorithm1_common;
mod basics_common;
pub mod common;
pub mod conservation_law;
pub mod entries;
pub mod fig2_loss;
mod figures_common;
mod full_matrix_checks;
mod full_matrix_figure;
pub mod full_matrix_rank;
mod full_matrix_sweep;
pub mod gd_vs_flow;
pub mod gradient_check;
pub mod greedy;
pub mod hessian_strict_min;
pub mod linearization_spectrum;
pub mod log_scale_tracking;
pub mod noise_robustness;
pub mod nondegeneracy;
mod perturb_common;
pub mod perturb_plateau;
pub mod perturb_stage_start;
pub mod plateau_convergence;
pub mod rank_staircase;
pub mod raw_vs_log;
pub mod reconstruction_lemmas;
pub mod riccati;
pub mod stage1;
pub mod stage_times;
mod sweeps_common;
pub mod transition_width;

use super::registry::ScenarioKind;

/// The seed-004 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &conservation_law::KIND,
        &reconstruction_lemmas::KIND,
        &gradient_check::KIND,
        &riccati::KIND,
        &greedy::KIND,
        &stage1::KIND,
        &algorithm1_attn::KIND,
        &nondegeneracy::KIND,
        &hessian_strict_min::KIND,
        &linearization_spectrum::KIND,
        &stage_times::KIND,
        &plateau_convergence::KIND,
        &log_scale_tracking::KIND,
        &rank_staircase::KIND,
        &transition_width::KIND,
        &raw_vs_log::KIND,
        &fig2_loss::KIND,
        &entries::KQ_KIND,
        &entries::VO_KIND,
        &perturb_plateau::KIND,
        &perturb_stage_start::KIND,
        &noise_robustness::KIND,
        &gd_vs_flow::KIND,
        &full_matrix_rank::KIND,
    ]
}

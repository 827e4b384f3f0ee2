//! Scenarios of seed 004 (incremental learning of networks with diagonal weights; spec 004 §7).

mod algorithm1_attn;
mod algorithm1_common;
mod basics_common;
pub(crate) mod common;
mod conservation_law;
mod diag_transformer;
mod entries;
mod exp_loss_limitation;
mod fig2_loss;
mod figures_common;
mod full_matrix_checks;
mod full_matrix_figure;
mod full_matrix_rank;
mod full_matrix_sweep;
mod gd_vs_flow;
mod gradient_check;
mod greedy;
mod hessian_strict_min;
mod linearization_spectrum;
mod lipschitz;
mod log_scale_tracking;
mod noise_robustness;
mod nondegeneracy;
mod perturb_common;
mod perturb_plateau;
mod perturb_stage_start;
mod plateau_convergence;
mod rank_staircase;
mod raw_vs_log;
mod reconstruction_lemmas;
mod riccati;
mod stage1;
mod stage_times;
mod sweeps_common;
mod transition_width;

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
        &lipschitz::KIND,
        &exp_loss_limitation::KIND,
        &diag_transformer::KIND,
    ]
}

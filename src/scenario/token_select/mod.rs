//! Scenarios of seed 003 (implicit bias of self-attention toward the W-SVM; spec 003 §7).

mod antipodal_opt;
mod arc_length;
mod assumption_check;
mod asymptotic_linearization;
mod attention_common;
pub(crate) mod common;
mod fig2_fixed_decoder;
mod fixed_common;
mod fixed_linearization;
mod flow_path_equivalence;
mod gd_asymptotic;
mod init_scale;
mod joint_common;
mod joint_norm_lower;
mod joint_record;
mod joint_self_bound;
#[cfg(test)]
mod joint_tests;
mod joint_training;
mod ngd_fixed_decoder;
mod params;
mod polyak_step;
mod scaling;
mod softmax_sparsification;
mod stable_numerics;
mod svm_common;
mod tokens_bad_init;
mod two_token_rates;
mod usvm_kkt;
mod wsvm_kkt;

use super::registry::ScenarioKind;

/// The seed-003 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &wsvm_kkt::KIND,
        &usvm_kkt::KIND,
        &assumption_check::KIND,
        &init_scale::KIND,
        &two_token_rates::KIND,
        &stable_numerics::KIND,
        &ngd_fixed_decoder::KIND,
        &softmax_sparsification::KIND,
        &polyak_step::KIND,
        &gd_asymptotic::KIND,
        &fig2_fixed_decoder::KIND,
        &asymptotic_linearization::KIND,
        &tokens_bad_init::KIND,
        &flow_path_equivalence::KIND,
        &joint_training::KIND,
        &scaling::KIND,
        &antipodal_opt::KIND,
    ]
}

//! Scenarios of seed 003 (implicit bias of self-attention toward the W-SVM; spec 003 §7).

mod arc_length;
pub mod assumption_check;
pub mod asymptotic_linearization;
mod attention_common;
pub mod common;
pub mod fig2_fixed_decoder;
mod fixed_common;
mod fixed_linearization;
pub mod flow_path_equivalence;
pub mod gd_asymptotic;
pub mod init_scale;
pub mod joint_common;
mod joint_record;
pub mod joint_training;
pub mod ngd_fixed_decoder;
pub mod polyak_step;
pub mod softmax_sparsification;
pub mod stable_numerics;
mod svm_common;
pub mod tokens_bad_init;
pub mod two_token_rates;
pub mod usvm_kkt;
pub mod wsvm_kkt;

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
    ]
}

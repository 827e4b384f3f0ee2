//! Scenarios of seed 001 (separately trained key and query matrices, nuclear-norm bias;
//! spec 001 §7).

mod aligned_closed_form;
mod aligned_random_init;
mod assumption_validators;
pub(crate) mod common;
// seed-001 diagonal scenarios (wt-ka)
mod diag_kkt_certificate;
mod diag_l1_vs_l2;
mod diag_random_batch;
mod early_linearization;
mod full_common;
mod full_nuclear_vs_frobenius;
mod full_random_batch;
mod norm_divergence;
mod nuclear_svm;
mod param_equivalence;
mod separability_rate;
mod sinh_representation;
mod svm_solvers;

use super::registry::ScenarioKind;

/// The seed-001 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &nuclear_svm::KIND,
        &svm_solvers::KIND,
        &assumption_validators::KIND,
        // seed-001 diagonal scenarios (wt-ka)
        &param_equivalence::KIND,
        &diag_l1_vs_l2::KIND,
        &diag_random_batch::KIND,
        &full_nuclear_vs_frobenius::KIND,
        &full_random_batch::KIND,
        &norm_divergence::KIND,
        &aligned_closed_form::KIND,
        &aligned_random_init::KIND,
        &early_linearization::KIND,
        &sinh_representation::KIND,
        &diag_kkt_certificate::KIND,
        &separability_rate::KIND,
    ]
}

//! Scenarios of seed 001 (separately trained key and query matrices, nuclear-norm bias;
//! spec 001 §7).

pub mod aligned_closed_form;
pub mod aligned_random_init;
pub mod assumption_validators;
pub mod common;
// seed-001 diagonal scenarios (wt-ka)
pub mod diag_l1_vs_l2;
pub mod early_linearization;
pub mod full_common;
pub mod full_nuclear_vs_frobenius;
pub mod nuclear_svm;
pub mod param_equivalence;
pub mod svm_solvers;

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
        &full_nuclear_vs_frobenius::KIND,
        &aligned_closed_form::KIND,
        &aligned_random_init::KIND,
        &early_linearization::KIND,
    ]
}

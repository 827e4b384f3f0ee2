//! Scenarios of seed 001 (separately trained key and query matrices, nuclear-norm bias;
//! spec 001 §7).

pub mod aligned_closed_form;
pub mod aligned_random_init;
pub mod assumption_validators;
pub mod common;
pub mod early_linearization;
pub mod full_common;
pub mod full_nuclear_vs_frobenius;
pub mod nuclear_svm;
pub mod svm_solvers;

use super::registry::ScenarioKind;

/// The seed-001 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &nuclear_svm::KIND,
        &svm_solvers::KIND,
        &assumption_validators::KIND,
        &full_nuclear_vs_frobenius::KIND,
        &aligned_closed_form::KIND,
        &aligned_random_init::KIND,
        &early_linearization::KIND,
    ]
}

//! Scenarios of seed 004 (incremental learning of networks with diagonal weights; spec 004 §7).

pub mod algorithm1_attn;
mod algorithm1_common;
pub mod common;
pub mod hessian_strict_min;
pub mod linearization_spectrum;
pub mod nondegeneracy;

use super::registry::ScenarioKind;

/// The seed-004 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &algorithm1_attn::KIND,
        &nondegeneracy::KIND,
        &hessian_strict_min::KIND,
        &linearization_spectrum::KIND,
    ]
}

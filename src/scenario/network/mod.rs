//! Synthetic stand-ins for the papers' network experiments that cannot run here (a ViT on
//! MNIST): small softmax attention models with exact gradients and Hessians
//! ([`crate::models::network`]).

mod delta_w_rank;
mod teacher_sparsity;

use super::registry::ScenarioKind;

/// The network stand-in kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![&teacher_sparsity::KIND, &delta_w_rank::KIND]
}

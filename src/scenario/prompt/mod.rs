//! Scenarios of seed 002 (softmax conditioning of prompt attention; spec 002 §6–7).

mod assumptions;
pub mod common;
mod eq16_simplex_map;
mod hessian_common;
mod hessian_conditioning_vs_r;
mod lemma1_softmax_jacobian;
mod lemma2_pl_inequality;
mod local_rate_vs_hessian;
mod orth_common;
mod prop1_value_scaling;
mod simplex_common;
mod spurious_sparse_minimum;
mod stiffness_attention_flow;
mod stiffness_two_token;
mod thm1_linear_rate;
mod thm2_condition_bound;
mod thm2_condition_figure;
mod thm2_linearization;
mod training_run;
mod two_token_closed_form;

use super::registry::ScenarioKind;

/// The seed-002 kinds.
pub fn kinds() -> Vec<&'static dyn ScenarioKind> {
    vec![
        &lemma1_softmax_jacobian::KIND,
        &eq16_simplex_map::KIND,
        &thm2_linearization::KIND,
        &thm2_condition_bound::KIND,
        &two_token_closed_form::KIND,
        &stiffness_two_token::KIND,
        &lemma2_pl_inequality::KIND,
        &thm1_linear_rate::KIND,
        &prop1_value_scaling::KIND,
        &training_run::KIND,
        &local_rate_vs_hessian::KIND,
        &hessian_conditioning_vs_r::KIND,
        &spurious_sparse_minimum::KIND,
        &stiffness_attention_flow::KIND,
        &assumptions::KIND,
    ]
}

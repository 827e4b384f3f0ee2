//! Seed-002 figure sweeps (spec 002 §6 items 11–13: Fig. 1 left and right with the p-only panel,
//! Fig. 2) in their quick configurations, each with a perturbed setting that makes a sweep check
//! fail, and GD divergence reported as an error naming the step.

mod common;

use common::{assert_all_pass, passes, sweep_quick};

#[test]
fn fig1_underparameterized() {
    let c = sweep_quick("fig1-underparameterized", &[]).unwrap();
    assert_all_pass("fig1-underparameterized", &c);
}

/// Ten times smaller steps: the dense teacher is not fitted in the quick run's iterations.
#[test]
fn fig1_underparameterized_fails_with_a_tiny_step() {
    let c = sweep_quick("fig1-underparameterized", &["eta=0.01"]).unwrap();
    assert!(!passes(&c, "final-loss.sigma-p-0-1"));
}

#[test]
fn fig1_overparameterized() {
    let c = sweep_quick("fig1-overparameterized", &[]).unwrap();
    assert_all_pass("fig1-overparameterized", &c);
}

/// Stopped after 100 iterations the loss is not small yet.
#[test]
fn fig1_overparameterized_fails_when_stopped_early() {
    let c = sweep_quick(
        "fig1-overparameterized",
        &["iterations=100", "loss_at=[100]", "rate_window=[20, 100]"],
    )
    .unwrap();
    assert!(!passes(&c, "final-loss"));
}

#[test]
fn fig1_overparameterized_d400() {
    let c = sweep_quick("fig1-overparameterized-d400", &[]).unwrap();
    assert_all_pass("fig1-overparameterized-d400", &c);
}

#[test]
fn fig1_overparameterized_p_only() {
    let c = sweep_quick("fig1-overparameterized-p-only", &[]).unwrap();
    assert_all_pass("fig1-overparameterized-p-only", &c);
}

/// η = 0.1 (the (p, v) step) throws the p-only run into saturated attention at once, at both σ_p.
#[test]
fn fig1_p_only_fails_with_the_pv_step() {
    let c = sweep_quick("fig1-overparameterized-p-only", &["eta=0.1"]).unwrap();
    assert!(!passes(&c, "final-loss-ratio"));
}

#[test]
fn fig2_linear_attention() {
    let c = sweep_quick("fig2-linear-attention", &[]).unwrap();
    assert_all_pass("fig2-linear-attention", &c);
}

/// The spec's η = 0.003 is at the linear model's edge of stability: the loss rises again.
#[test]
fn fig2_detects_the_edge_of_stability() {
    let c = sweep_quick(
        "fig2-linear-attention",
        &["eta=0.003", "sweep.seeds=[2, 3]", "iterations=10000"],
    )
    .unwrap();
    assert!(!passes(&c, "descent"));
}

/// A step far too large diverges: an error naming the step.
#[test]
fn fig2_divergence_is_an_error_naming_the_step() {
    let e = sweep_quick("fig2-linear-attention", &["eta=0.05"]).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("diverged at step"), "{msg}");
}

//! Coverage of seed-004 claims checked inside the Algorithm-1 runner: Lemma D.4 (no immediate
//! re-activation) and Assumption 2.1 (bounded data). Each check passes on the shipped scenario
//! and fails on a parameter that mimics a plausible error.

mod common;
use common::{check, run_quick};

#[test]
fn every_waiting_coordinate_needs_positive_time_to_activate() {
    let rep = run_quick("algorithm1-attn", &[]);
    let ck = check(&rep, "lemma-d4-delta-positive");
    assert!(ck.pass, "min Δ = {}", ck.measured);
    assert!(ck.measured > 0.0 && ck.measured.is_finite());
}

#[test]
fn the_papers_zero_initial_b_violates_lemma_d4() {
    // Algorithm 1 as printed starts from b⁰ = 0 (spec 004 §6 #1): every coordinate with g_i > 0
    // would activate at once, Δ_0(i) = 0
    let rep = run_quick("algorithm1-attn", &["paper_initial_b=true"]);
    let ck = check(&rep, "lemma-d4-delta-positive");
    assert!(!ck.pass);
    assert_eq!(ck.measured, 0.0);
}

/// Assumption 2.1's bounds are reported (a loaded training set is finite by validation, so they
/// are not a check that could fail).
#[test]
fn the_training_data_bounds_are_reported() {
    let rep = run_quick("algorithm1-attn", &[]);
    assert!(!rep
        .checks
        .iter()
        .any(|c| c.id == "assumption-2-1-bounded-data"));
    for key in ["max_norm_x", "max_norm_y"] {
        let v = rep.derived[key].as_f64().unwrap();
        assert!(v.is_finite() && v > 0.0, "{key} = {v}");
    }
}

#[test]
fn a_dropped_coordinate_waits_a_positive_time_before_returning() {
    // R2 drops a coordinate (b ∈ {0, 2} afterwards): the non-trivial case of Lemma D.4
    let rep = run_quick("diag-linear-greedy", &["instances=[\"r2\"]"]);
    let ck = check(&rep, "lemma-d4-delta-positive.r2");
    assert!(ck.pass, "min Δ = {}", ck.measured);
    let dropped = rep.derived["lemma_d4_dropped_count.R2"].as_f64().unwrap();
    assert!(dropped >= 1.0, "{dropped}");
    let min_dropped = rep.derived["lemma_d4_min_delta_dropped.R2"]
        .as_f64()
        .unwrap();
    assert!(
        min_dropped > 0.0 && min_dropped.is_finite(),
        "{min_dropped}"
    );
}

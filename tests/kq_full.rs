//! Seed-001 full key–query scenarios (spec 001 §2.6(d), §4, §5.1, §7) in their fast
//! configurations, each with a setting that makes a check fail.

mod common;

#[test]
fn full_nuclear_vs_frobenius_quick() {
    let r = common::run_quick("full-nuclear-vs-frobenius", &[]);
    common::assert_all_pass("full-nuclear-vs-frobenius", &r);
    let gap = r.derived["svm_distance"].as_f64().unwrap();
    assert!((gap - 0.4216).abs() < 1e-4, "‖W_F − W_*‖ = {gap}");
}

#[test]
fn full_nuclear_vs_frobenius_short_horizon_fails_the_direction_checks() {
    // at τ = 10 neither direction is within the τ = 1e4 bounds
    let r = common::run_quick("full-nuclear-vs-frobenius", &["tau_max=10.0", "seeds=1"]);
    assert!(!common::passes(&r, "KQ: max ‖Ŵ − W_*‖_F"));
    assert!(!common::passes(&r, "W: max ‖Ŵ − W_F‖_F"));
}

#[test]
fn aligned_closed_form_quick() {
    let r = common::run_quick("aligned-closed-form", &[]);
    common::assert_all_pass("aligned-closed-form", &r);
}

#[test]
fn aligned_closed_form_broken_a4_loses_the_alignment() {
    // spec §4 negative control: 0.1·e_4 added to token 1 of sample 1
    let r = common::run_quick("aligned-closed-form", &["a4_break=0.1"]);
    assert!(!common::passes(&r, "Lemma 5.1: max off-diagonal"));
}

#[test]
fn early_linearization_quick() {
    let r = common::run_quick("early-linearization", &[]);
    common::assert_all_pass("early-linearization", &r);
}

#[test]
fn early_linearization_spec_slope_claim_fails() {
    // spec §7's "halves when s halves" (slope 1) is refuted by the same measurement
    let r = common::run_quick("early-linearization", &["checks.slope_target=1.0"]);
    assert!(!common::passes(&r, "d ln(rel err)/d ln s"));
    assert!(common::passes(&r, "Jacobian at K = Q = 0"));
}

#[test]
fn aligned_random_init_quick() {
    let r = common::run_quick("aligned-random-init", &[]);
    common::assert_all_pass("aligned-random-init", &r);
}

#[test]
fn aligned_random_init_short_horizon_fails_the_nuclear_gap() {
    let r = common::run_quick("aligned-random-init", &["tau_max=3.0", "seeds=1"]);
    assert!(!common::passes(&r, "max over seeds ‖Ŵ‖_*/OPT_*"));
}

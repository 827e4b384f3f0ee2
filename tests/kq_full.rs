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
    assert!(!common::passes(&r, "kq-tau"));
    assert!(!common::passes(&r, "tau"));
}

#[test]
fn full_nuclear_vs_frobenius_sigma_opt_before_separation_fails() {
    // seed 0's KQ flow separates its optimal tokens only at τ ≈ 2.4 (W's at ≈ 0.29): at τ = 2
    // one run is unseparated, and neither excess loss follows its limit law yet
    let r = common::run_quick("full-nuclear-vs-frobenius", &["tau_max=2.0", "seeds=1"]);
    assert!(!common::passes(&r, "separated-for-good"));
    assert!(!common::passes(&r, "kq-sigma-opt-rate"));
    let sep = r.derived["w_separation_tau"][0].as_f64().unwrap();
    assert!(sep > 0.2 && sep < 0.4, "W separates at τ = {sep}");
}

#[test]
fn full_nuclear_vs_frobenius_kq_law_is_not_met_early() {
    // the KQ law t ln t·(L − L*) → OPT_*/2 is asymptotic (deviation ~ln τ/τ): at τ = 30 it is
    // off by ~4%, far outside the bound, while every run is separated
    let r = common::run_quick("full-nuclear-vs-frobenius", &["tau_max=30.0", "seeds=1"]);
    assert!(common::passes(&r, "separated-for-good"));
    assert!(!common::passes(&r, "kq-sigma-opt-rate"));
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
    assert!(!common::passes(&r, "lemma-off-diagonal-ktkv-qtqv-over"));
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
    assert!(!common::passes(&r, "ln-rel-err-ln-fixed"));
    assert!(common::passes(&r, "jacobian-eigenvalues-vs"));
}

#[test]
fn aligned_random_init_quick() {
    let r = common::run_quick("aligned-random-init", &[]);
    common::assert_all_pass("aligned-random-init", &r);
}

#[test]
fn aligned_random_init_short_horizon_fails_the_nuclear_gap() {
    let r = common::run_quick("aligned-random-init", &["tau_max=3.0", "seeds=1"]);
    assert!(!common::passes(&r, "over-seeds-opt-tau"));
}

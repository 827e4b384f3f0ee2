//! Seed-001 diagonal scenarios (Lemma 4.1, Theorem 4.1; spec 001 §4, §7) in their fast
//! configurations, and perturbed settings that make their checks fail.

mod common;

#[test]
fn param_equivalence_quick() {
    let r = common::run_quick("param-equivalence", &[]);
    common::assert_all_pass("param-equivalence", &r);
}

#[test]
fn param_equivalence_checks_can_fail() {
    // a control that hardly breaks condition (4) stays within 1e-2 of the matched flow
    let r = common::run_quick("param-equivalence", &["control_scale=1.0001"]);
    assert!(common::passes(&r, "beta-xi-xi-reduced-flows-agree"));
    assert!(!common::passes(
        &r,
        "negative-control-start-breaking-gives-different"
    ));
    // a loose integrator neither reproduces β(t) to 1e-7 nor conserves the invariants
    let r = common::run_quick(
        "param-equivalence",
        &["solver.rtol=1e-5", "solver.atol=1e-8"],
    );
    assert!(!common::passes(&r, "beta-xi-xi-reduced-flows-agree"));
    assert!(!common::passes(&r, "conserved-xi-k2-xi-q2-drift"));
}

#[test]
fn diag_l1_vs_l2_quick() {
    let r = common::run_quick("diag-l1-vs-l2", &[]);
    common::assert_all_pass("diag-l1-vs-l2", &r);
    assert!(r.figure.is_some());
}

#[test]
fn diag_l1_vs_l2_slow_exponent_fails_the_distance_checks() {
    // toy-2(1.2): unique ℓ1 solution but off-support exponent 1/6 — at τ = 1e8 the KQ direction
    // is still 7e-2 away (spec §5.1 "slow convergence"), while the LP and W checks still pass
    let r = common::run_quick("diag-l1-vs-l2", &["data=[\"toy2-slow\"]"]);
    assert!(common::passes(
        &r,
        "l1-lp-certificate-polished-kkt.toy2-slow"
    ));
    assert!(!common::passes(
        &r,
        "kq-beta-beta-tau-thm.toy2-slow-omega0-1"
    ));
    assert!(!common::passes(&r, "kq-beta-opt1.toy2-slow-omega0-1"));
    assert!(common::passes(&r, "derived-beta-tau.toy2-slow"));
}

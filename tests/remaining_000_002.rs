//! Claims of seeds 000 and 002 checked late: Remark 5 of seed 002 (Theorem 2 without
//! convexity), Theorem 1's ‖p_t‖ ≤ M_p with the printed and the corrected C_p, and the App. A.2
//! derivative identities of seed 000 (dĝ/dt at rounding level, Cases 2 and 3). Each check
//! passes on the shipped scenario and fails on a parameter that mimics a plausible error.

mod common;
use common::{assert_all_pass, check, load_error, passes, run_quick};

const THM2_NONCONVEX: [&str; 6] = [
    "flow-dv-central-differences-vs-j2hp",
    "flow-dv-exact-jvp-vs-j2h",
    "logit-flow-jacobian-exact-jvp-vs",
    "gd-map-jacobian-central-differences-vs",
    "contraction-ratio-eta-lambda-j2h",
    "contraction-btzeta-xi-xi-bt-eta",
];

#[test]
fn theorem_2_holds_at_a_non_global_minimum_of_a_non_convex_loss() {
    let rep = run_quick("thm2-nonconvex", &[]);
    assert_all_pass("thm2-nonconvex", &rep);
    for id in THM2_NONCONVEX {
        assert!(passes(&rep, id), "{id}");
    }
    // the run exercises Remark 5 only if the loss is non-convex and z* a local minimum
    assert!(check(&rep, "ripple-nonconvex-witness").measured < -10.0);
    assert!(check(&rep, "ripple-zstar-not-global-minimum").measured < 0.0);
    assert!(check(&rep, "ripple-hessian-positive-at-zstar").measured > 0.0);
    assert!(passes(&rep, "ripple-corrected-condition-bound"));
}

#[test]
fn a_ripple_without_its_tilt_leaves_z_star_non_stationary_and_fails() {
    let rep = run_quick("thm2-nonconvex", &["ripple.tilt=false"]);
    assert!(!passes(&rep, "ripple-zstar-stationary"));
    for id in [
        "flow-dv-exact-jvp-vs-j2h",
        "gd-map-jacobian-central-differences-vs",
    ] {
        assert!(!passes(&rep, id), "{id}");
    }
}

#[test]
fn a_convex_loss_fails_the_non_convexity_witnesses() {
    // amplitude 0 is (C-quad): nothing about Remark 5 is shown, and the run says so
    let rep = run_quick("thm2-nonconvex", &["ripple.amplitude=0"]);
    assert!(!passes(&rep, "ripple-nonconvex-witness"));
    assert!(!passes(&rep, "ripple-zstar-not-global-minimum"));
    assert!(passes(&rep, "ripple-zstar-stationary"));
}

#[test]
fn a_ripple_needs_the_bound_tolerance() {
    let e = load_error(
        "thm2-linearization",
        &[
            "ripple.amplitude=0.025",
            "ripple.frequency=40",
            "ripple.phase=1.45",
        ],
    );
    assert!(e.to_string().contains("checks.bound_rel_tol"), "{e}");
}

#[test]
fn theorem_1_printed_c_p_fails_while_the_corrected_reading_holds() {
    let rep = run_quick("thm1-printed-cp", &[]);
    assert_all_pass("thm1-printed-cp", &rep);
    let corrected = check(&rep, "m-p-corrected-where-hypothesis-holds");
    assert!(corrected.pass && corrected.measured < 1.0);
    // the literal printed M_p is exceeded by far more than rounding
    let demo = check(&rep, "printed-cp-m-p-violated");
    assert!(demo.pass && demo.measured > 4e-10, "{}", demo.measured);
    // the √N alone does not repair the literal reading (c₁ = 0.2)
    let literal = rep.derived["literal_sqrt_n_max_norm_ratio"]
        .as_f64()
        .unwrap();
    assert!(literal > 1.0, "{literal}");
}

#[test]
fn the_printed_c_p_demonstration_and_the_corrected_bound_can_fail() {
    // at c₁ = 0.1, after 500 steps ‖p_t‖ has not yet passed the printed M_p: no demonstration
    let rep = run_quick("thm1-printed-cp", &["steps=500", "c1s=[0.1, 1e-6]"]);
    assert!(!passes(&rep, "printed-cp-m-p-violated"));
    // a step-size bug (GD at 10⁴ η) breaks the corrected ‖p_t‖ ≤ M_p
    let rep = run_quick("thm1-printed-cp", &["gd_step_scale=1e4"]);
    assert!(!passes(&rep, "m-p-corrected-where-hypothesis-holds"));
}

#[test]
fn ghat_rate_is_rounding_also_at_c_2() {
    // the identity holds at every state: at c = 2 (s grows like e^{2c₁t}) the residual is still
    // a fraction of an ulp of the summands, and the paper's factor still fails by ~10¹⁴ ε
    let rep = run_quick("lemma-a2-invariants", &["c=2", "x0=0.3"]);
    assert_all_pass("lemma-a2-invariants", &rep);
    assert!(check(&rep, "ghat-rate").measured < 4.0);
    let rep = run_quick("lemma-a2-invariants", &["c=2", "x0=0.3", "ghat_factor=1"]);
    assert!(check(&rep, "ghat-rate").measured > 1e10);
}

#[test]
fn case_2_and_3_derivatives_hold_in_corrected_form_and_fail_as_printed() {
    let rep = run_quick("lemma-a2-invariants", &["c1=0.5"]);
    for id in ["case2-derivative", "case3-derivative"] {
        assert!(passes(&rep, id), "{id}");
        assert!(check(&rep, id).paper_claim.is_some(), "{id}");
    }
    // the printed factor (x² + X + ρ̄) and the printed rate without c₁ fail
    let rep = run_quick("lemma-a2-invariants", &["c1=0.5", "paper_cases=true"]);
    for id in ["case2-derivative", "case3-derivative"] {
        assert!(!passes(&rep, id), "{id}");
        assert!(check(&rep, id).measured > 1e10, "{id}");
    }
    // Case 2 with X ≡ x² would hold trivially: refused
    let e = load_error("lemma-a2-invariants", &["case2_shift=0"]);
    assert!(e.to_string().contains("params.case2_shift"), "{e}");
}

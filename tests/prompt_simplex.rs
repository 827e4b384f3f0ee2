//! Seed-002 simplex scenarios (Lemma 1, eq. 16, Theorem 2) in their fast configurations, each
//! with a setting that makes one of its checks fail.

mod common;

use common::passes;

#[test]
fn lemma1_softmax_jacobian() {
    let r = common::run_quick("lemma1-softmax-jacobian", &[]);
    common::assert_all_pass("lemma1-softmax-jacobian", &r);
}

/// A coarse step leaves central differences with an O(h²) truncation error far above 1e−7.
#[test]
fn lemma1_eq7_fails_with_a_coarse_difference_step() {
    let r = common::run_quick("lemma1-softmax-jacobian", &["fd_step=0.1"]);
    assert!(!passes(&r, "eq-ij-dphi-fd-phi-ij"));
    assert!(passes(&r, "claim-interlacing-lambda-outside"));
}

#[test]
fn eq16_simplex_map() {
    let r = common::run_quick("eq16-simplex-map", &[]);
    common::assert_all_pass("eq16-simplex-map", &r);
}

/// Far outside the small-step regime the remainder is not quadratic in η.
#[test]
fn eq16_remainder_is_not_quadratic_at_large_steps() {
    let r = common::run_quick(
        "eq16-simplex-map",
        &[
            "eta_max=100.0",
            "flow_time=100.0",
            "checks.order_eta_max=50.0",
        ],
    );
    assert!(!passes(&r, "eq-16-remainder-order-eta-eta"));
    assert!(passes(&r, "simplex-invariance-tz"));
}

#[test]
fn thm2_linearization() {
    let r = common::run_quick("thm2-linearization", &[]);
    common::assert_all_pass("thm2-linearization", &r);
}

/// Started far from z*, the GD map no longer follows its linearization.
#[test]
fn thm2_linearization_is_local() {
    let r = common::run_quick("thm2-linearization", &["zeta0=0.05"]);
    assert!(!passes(&r, "contraction-btzeta-xi-xi-bt-eta"));
    assert!(passes(&r, "flow-dv-central-differences-vs-j2hp"));
}

#[test]
fn thm2_condition_bound() {
    let r = common::run_quick("thm2-condition-bound", &[]);
    common::assert_all_pass("thm2-condition-bound", &r);
}

/// Near-uniform attention (R ≈ 1) has κ ≈ 1, not n²: the n² limit needs a dominant token.
#[test]
fn thm2_dominant_token_limit_needs_large_r() {
    let r = common::run_quick("thm2-condition-bound", &["tail_r_min=1.0"]);
    assert!(!passes(&r, "dominant-token-kappa-n2-n2.1e0"));
    assert!(passes(&r, "sweep-corrected-bound-mu-rho2-kappa"));
}

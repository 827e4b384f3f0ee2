//! Seed-003 fixed-decoder scenarios (NGD, Polyak, GD asymptotics, sparsification,
//! linearization, Fig. 2) in their fast configurations, each with a setting that makes one of
//! its checks fail.

mod common;

use common::passes_each as passes;

#[test]
fn ngd_fixed_decoder() {
    let r = common::run_quick("ngd-fixed-decoder", &[]);
    common::assert_all_pass("ngd-fixed-decoder", &r);
}

/// ‖W₀‖B² ≫ 1 violates Lemma 2's small-initialization premise: NGD still aligns, but not
/// by k = 1000, while every exact bound keeps holding.
#[test]
fn ngd_fixed_decoder_large_init_is_not_aligned_by_k_1000() {
    let r = common::run_quick(
        "ngd-fixed-decoder",
        &["inits=[{kind=\"random_unit\", scale=30.0}]"],
    );
    assert_eq!(passes(&r, "global-corr.random-unit-30-1000"), [false]);
    assert!(
        passes(&r, "thm-certified-skeleton-k0-corr-bound.random-unit-30-*")
            .iter()
            .all(|&p| p)
    );
    for lemma4 in ["lemma-ln-mm-ln", "lemma-ln-ln-2b2p", "lemma-rho-mm"] {
        assert!(passes(&r, lemma4).iter().all(|&p| p));
    }
}

#[test]
fn softmax_sparsification() {
    let r = common::run_quick("softmax-sparsification", &[]);
    common::assert_all_pass("softmax-sparsification", &r);
}

/// From a large W₀ the direction is still far from W_mm in the fit window, so the exponent of
/// 1 − φ_opt in ‖W‖ is not yet −Γ; the certified bound still holds.
#[test]
fn softmax_sparsification_exponent_needs_alignment() {
    let r = common::run_quick(
        "softmax-sparsification",
        &["init={kind=\"random_unit\", scale=30.0}"],
    );
    assert!(passes(
        &r,
        "lemma-exponent-slope-vs-gamma-gamma.ln-1-min-i-phi-i-opt"
    )
    .iter()
    .all(|&p| !p));
    assert!(passes(&r, "lemma-certified-bound-ln-phi-opt")
        .iter()
        .all(|&p| p));
}

#[test]
fn polyak_step() {
    let r = common::run_quick("polyak-step", &[]);
    common::assert_all_pass("polyak-step", &r);
}

/// A cap no Polyak step reaches never turns PS into GD(cap).
#[test]
fn polyak_step_detects_a_cap_that_never_binds() {
    let r = common::run_quick("polyak-step", &["caps=[1e300]"]);
    assert_eq!(passes(&r, "cap-binds-sw-exists.ps-cap-1e300"), [false]);
    for sandwich in [
        "thm-sandwich-lower-ln-mm-ln",
        "thm-sandwich-upper-ln-ln-2b2",
    ] {
        assert!(passes(&r, sandwich).iter().all(|&p| p));
    }
}

#[test]
fn gd_asymptotic() {
    let r = common::run_quick("gd-asymptotic", &[]);
    common::assert_all_pass("gd-asymptotic", &r);
}

/// ‖W‖ − (ln t)/Γ is bounded only asymptotically: a window reaching back to t ≈ 1 includes
/// the initial transient.
#[test]
fn gd_asymptotic_norm_offset_is_asymptotic() {
    let r = common::run_quick("gd-asymptotic", &["offset_window_fraction=1e-4"]);
    assert!(passes(&r, "ln-gamma-variation").iter().any(|&p| !p));
    assert!(passes(&r, "increases-corr-between-checkpoints")
        .iter()
        .all(|&p| p));
}

#[test]
fn fig2_fixed_decoder() {
    let r = common::run_quick("fig2-fixed-decoder", &[]);
    common::assert_all_pass("fig2-fixed-decoder", &r);
}

/// The reversed ordering (GD aligns faster than NGD) is refuted.
#[test]
fn fig2_fixed_decoder_refutes_gd_faster_than_ngd() {
    let r = common::run_quick(
        "fig2-fixed-decoder",
        &["checks.alignment_faster=[[\"GD\", \"NGD cap 1e6\"]]"],
    );
    assert_eq!(passes(&r, "fig-corr-corr"), [false]);
}

#[test]
fn asymptotic_linearization() {
    let r = common::run_quick("asymptotic-linearization", &[]);
    common::assert_all_pass("asymptotic-linearization", &r);
}

/// The exponential surrogate is an asymptotic statement: at margins ≈ 1 it is off by ≈ 30%.
#[test]
fn asymptotic_linearization_surrogate_needs_large_margins() {
    let r = common::run_quick("asymptotic-linearization", &["margin_threshold=1.0"]);
    assert_eq!(passes(&r, "surrogate-sigmac-once"), [false]);
    assert!(passes(&r, "conserved-w0-projection-off-span")
        .iter()
        .all(|&p| p));
}

//! Seed-004 basics (conservation law, reconstruction lemmas, gradient, closed forms, Algorithm 1
//! on the linear references, stage 1) in their fast configurations, each with a deliberately
//! wrong setting that makes a check fail.

mod common;

use common::passes;

#[test]
fn conservation_law() {
    let r = common::run_quick("conservation-law", &[]);
    common::assert_all_pass("conservation-law", &r);
}

/// At rtol 1e-6 the raw integrator's drift of u² − v² (≈ 1e-6 relative) exceeds Lemma 4.2's
/// 1e-9 audit bound, and the raw and log layouts drift apart.
#[test]
fn conservation_law_detects_a_loose_integrator() {
    let r = common::run_quick("conservation-law", &["solver.rtol=1e-6"]);
    assert!(!passes(&r, "lemma-relative-drift-i2-i2"));
    assert!(!passes(&r, "eq-raw-vs-log-layout-relative"));
}

#[test]
fn reconstruction_lemmas() {
    let r = common::run_quick("reconstruction-lemmas", &[]);
    common::assert_all_pass("reconstruction-lemmas", &r);
}

/// Lemmas D.1–D.3 hold "for α small enough": at α = 0.1 all three fail on the grid, while the
/// conversion itself (eq. 7, round trip) stays exact.
#[test]
fn reconstruction_lemmas_need_small_alpha() {
    let r = common::run_quick("reconstruction-lemmas", &["alphas=[0.1]"]);
    assert!(!passes(&r, "lemma-over-log-alpha"));
    assert!(!passes(&r, "lemma-over-predicted-sign-sgn"));
    assert!(passes(&r, "eq-plain-f64-vs-log-domain"));
    assert!(passes(&r, "raw-log-raw-round-trip-scales"));
}

#[test]
fn gradient_check() {
    let r = common::run_quick("gradient-check", &[]);
    common::assert_all_pass("gradient-check", &r);
}

/// A central-difference step of 1e-2 has an O(h²) truncation error far above 1e-8·max|G|.
#[test]
fn gradient_check_detects_a_coarse_difference_step() {
    let r = common::run_quick("gradient-check", &["fd_step=1e-2"]);
    assert!(!passes(&r, "d3-fd-over-random-beta"));
    assert!(passes(&r, "cf4-vo-2kappan-mean"));
}

#[test]
fn diag_linear_riccati() {
    let r = common::run_quick("diag-linear-riccati", &[]);
    common::assert_all_pass("diag-linear-riccati", &r);
}

/// With rtol = atol = 1e-6 the log-layout flow misses the exact Riccati solution by ≈ 5e-5.
#[test]
fn diag_linear_riccati_detects_a_loose_integrator() {
    let r = common::run_quick(
        "diag-linear-riccati",
        &["solver.rtol=1e-6", "solver.atol=1e-6"],
    );
    assert!(!passes(&r, "cf1-beta-num-beta-exact-inf"));
    assert!(!passes(&r, "cf2-balanced-flow-vs-logistic-beta"));
}

#[test]
fn diag_linear_greedy() {
    let r = common::run_quick("diag-linear-greedy", &[]);
    common::assert_all_pass("diag-linear-greedy", &r);
}

/// A reference drop margin s·G = −0.03 instead of −0.02925 (2.5 % off) is detected, and the
/// re-entry structure still holds.
#[test]
fn diag_linear_greedy_detects_a_wrong_drop_margin() {
    let r = common::run_quick("diag-linear-greedy", &["checks.r2.drop_signed_g=-0.03"]);
    assert!(!passes(&r, "r2-dropped-coordinate-vs-reference"));
    assert!(passes(&r, "r2-dropped-coordinate-re-enters-opposite"));
}

/// Without R2-degenerate in the run, the flag check is absent; with only R2-degenerate, the
/// A4.3(iii) flag is raised.
#[test]
fn diag_linear_greedy_flags_the_degenerate_drop() {
    let r = common::run_quick("diag-linear-greedy", &["instances=[\"r2-degenerate\"]"]);
    assert!(passes(&r, "a4-iii-flag-drop-raised.r2-degenerate"));
    assert!(!r.checks.iter().any(|c| c.id.starts_with("r2-")));
}

#[test]
fn stage1_linear_regime() {
    let r = common::run_quick("stage1-linear-regime", &[]);
    common::assert_all_pass("stage1-linear-regime", &r);
}

/// At α = 1e-2 the weights are no longer small by 0.8 T_1Λ: eq. (8) is off by ≈ 9e-3 > 1e-3,
/// while the normalized offset of the transition stays O(1).
#[test]
fn stage1_linear_regime_breaks_at_large_alpha() {
    let r = common::run_quick("stage1-linear-regime", &["alpha=1e-2"]);
    assert!(!passes(&r, "eq-ln-ln-inf-1lambda"));
    assert!(passes(&r, "offset-vs-logistic-half-time"));
}

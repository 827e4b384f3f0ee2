//! Weak checks made real (seed 004 diagonal, seed 001 early-linearization): each check's bound
//! comes from the theory, and a plausible bug makes it fail.

mod common;

use common::{passes, run_quick, sweep_quick};

/// A loose integrator (rtol = atol = 1e-5) moves t̂_1 by ≈ 9e-5 in |g|-units: off the logistic
/// half-time expansion (bound 1e-6 + α^m + |α⁴ term|).
#[test]
fn stage1_offset_fails_with_a_loose_integrator() {
    assert!(passes(
        &run_quick("stage1-linear-regime", &[]),
        "offset-vs-logistic-half-time"
    ));
    let r = run_quick(
        "stage1-linear-regime",
        &["solver.rtol=1e-5", "solver.atol=1e-5"],
    );
    assert!(!passes(&r, "offset-vs-logistic-half-time"));
}

/// The R1 offsets match the logistic expansion to α⁴ within the half-time precision.
#[test]
fn riccati_offset_matches_the_logistic_expansion() {
    let r = run_quick("diag-linear-riccati", &[]);
    assert!(passes(&r, "offset-vs-logistic-expansion"));
    let r = run_quick(
        "diag-linear-riccati",
        &["solver.rtol=1e-6", "solver.atol=1e-6"],
    );
    assert!(!passes(&r, "offset-vs-logistic-expansion"));
}

/// A loose integrator (rtol 1e-6) is far from Duhamel's prediction of the linearization error.
#[test]
fn early_linearization_duhamel_fails_with_a_loose_integrator() {
    assert!(passes(
        &run_quick("early-linearization", &[]),
        "error-vs-duhamel"
    ));
    let r = run_quick("early-linearization", &["solver.rtol=1e-6"]);
    assert!(!passes(&r, "error-vs-duhamel"));
}

/// Including α = 1e−4 (offsets not yet converged: spread 0.069) fails the spread check.
#[test]
fn raw_vs_log_offset_spread_fails_before_convergence() {
    let r = sweep_quick("raw-vs-log", &[]).unwrap();
    assert!(passes(&r, "log-layout-offset-spread"));
    let r = sweep_quick("raw-vs-log", &["checks.offset_log10_alpha_max=-4.0"]).unwrap();
    assert!(!passes(&r, "log-layout-offset-spread"));
}

/// A plateau-0 window reaching into the first transition (0.999·T_1) fails the exact
/// Λ(b_α − b_th) = −ln w0 constant.
#[test]
fn log_scale_plateau0_fails_when_the_window_reaches_the_transition() {
    let r = sweep_quick("log-scale-tracking", &[]).unwrap();
    assert!(passes(&r, "plateau-0-tracking-over-alpha.mini"));
    let r = sweep_quick("log-scale-tracking", &["linear_fraction=0.999"]).unwrap();
    assert!(!passes(&r, "plateau-0-tracking-over-alpha.mini"));
}

/// mini drops nothing: A4.3(iii) is skipped with a reason, never passed; r2 measures it.
#[test]
fn nondegeneracy_clause_iii_is_skipped_without_drops() {
    let r = run_quick("nondegeneracy", &[]);
    assert!(!r
        .checks
        .iter()
        .any(|c| c.id == "a4-iii-over-drops-theta.mini"));
    assert!(r
        .skipped
        .iter()
        .any(|s| s.id == "a4-iii-over-drops-theta.mini"));
    assert!(passes(&r, "a4-iii-over-drops-theta.r2"));
}

/// With α = 1e−16 in the compared set the last race (VO/KQ at rate ≈ 0.05) is 0.06 off its
/// limit: the spread check fails; the default (α ≤ 1e−32) passes.
#[test]
fn transition_width_race_offset_spread_fails_before_convergence() {
    let r = sweep_quick("transition-width", &[]).unwrap();
    assert!(passes(&r, "offset-spread"));
    let r = sweep_quick(
        "transition-width",
        &[
            "sweep.grid.log10_alpha=[-16.0, -64.0]",
            "checks.offset_log10_alpha_max=-16.0",
        ],
    )
    .unwrap();
    assert!(!passes(&r, "offset-spread"));
}

//! Seed-000 scenarios on the df flow (spec 000 R6, R9–R11, D2, D3, D5, §2.4, Fig. 3, Fig. 4), in
//! their fast configurations, plus runs with deliberately wrong settings that show the checks
//! can fail.

mod common;

use attnflow::scenario::Report;

/// Whether check `base` passed on every instance it ran on.
fn check_passes(report: &Report, base: &str) -> bool {
    common::passes_each(report, base).iter().all(|&p| p)
}

#[test]
fn conservation() {
    let r = common::run_quick("conservation", &[]);
    common::assert_all_pass("conservation", &r);
}

/// A loose solver tolerance breaks conservation of β beyond the rtol-1e-10 bound (spec §2.7.1).
#[test]
fn conservation_fails_at_loose_tolerance() {
    let r = common::run_quick("conservation", &["solver.rtol=1e-6"]);
    assert!(!check_passes(&r, "beta-drift-beta"));
    assert!(!check_passes(&r, "beta-drift-beta"));
}

#[test]
fn thm1_loss_decay() {
    let r = common::run_quick("thm1-loss-decay", &[]);
    common::assert_all_pass("thm1-loss-decay", &r);
}

/// At rtol 1e-6 the ODE leaves the closed form and its tail slope is noise.
#[test]
fn thm1_loss_decay_fails_at_loose_tolerance() {
    let r = common::run_quick("thm1-loss-decay", &["solver.rtol=1e-6", "trials=2"]);
    assert!(!check_passes(&r, "ode-closed-form"));
    assert!(!check_passes(&r, "over-trials-ode-slope-2alpha"));
}

#[test]
fn imbalance_sweep() {
    let r = common::run_quick("imbalance-sweep", &[]);
    common::assert_all_pass("imbalance-sweep", &r);
}

/// Fitted too early (ℓ ∈ [1e-4, 1e-1]) the slope mixes the columns' rates and misses 2α by > 1%.
#[test]
fn imbalance_sweep_fails_on_an_early_window() {
    let r = common::run_quick("imbalance-sweep", &["tail_window=[1e-4, 1e-1]"]);
    assert!(!check_passes(&r, "delta-late-slope-2alpha-delta"));
}

#[test]
fn bad_init() {
    let r = common::run_quick("bad-init", &[]);
    common::assert_all_pass("bad-init", &r);
}

/// Stopped too early, the run from the paper's set has not yet converged (E5 check can fail).
#[test]
fn bad_init_paper_set_check_can_fail() {
    let r = common::run_quick("bad-init", &["paper_horizon=0.5"]);
    assert!(!check_passes(&r, "lt-paper-set-itm-rho-alpha"));
}

#[test]
fn near_saddle() {
    let r = common::run_quick("near-saddle", &[]);
    common::assert_all_pass("near-saddle", &r);
}

/// Far from the bad set (ε = 0.8, 0.4) there is no plateau at ½‖M‖².
#[test]
fn near_saddle_far_from_the_bad_set_has_no_plateau() {
    let r = common::run_quick(
        "near-saddle",
        &["epsilons=[0.8, 0.4]", "plateau_max_eps=0.8"],
    );
    assert!(!check_passes(&r, "over-eps-longest-time"));
}

#[test]
fn limit_kkt() {
    let r = common::run_quick("limit-kkt", &[]);
    common::assert_all_pass("limit-kkt", &r);
}

/// Stopped at T + 5/α the flow is not yet at the minimizer of Φ.
#[test]
fn limit_kkt_fails_before_convergence() {
    let r = common::run_quick("limit-kkt", &["horizon=5"]);
    assert!(!check_passes(&r, "end-inf-sign-rule"));
    assert!(!check_passes(&r, "kkt-feasibility-diag"));
}

#[test]
fn small_init_staircase() {
    let r = common::run_quick("small-init-staircase", &[]);
    common::assert_all_pass("small-init-staircase", &r);
}

/// D3's escape-time formula is a small-init asymptotic: at σ = 0.09 it is off by > 2%.
#[test]
fn small_init_formula_fails_for_a_large_init() {
    let r = common::run_quick("small-init-staircase", &["sigma=0.09"]);
    assert!(!check_passes(&r, "ode-d3"));
}

#[test]
fn gd_vs_flow() {
    let r = common::run_quick("gd-vs-flow", &[]);
    common::assert_all_pass("gd-vs-flow", &r);
}

/// GD is first order, not second: halving η halves the gap instead of quartering it.
#[test]
fn gd_is_not_second_order() {
    let r = common::run_quick("gd-vs-flow", &["checks.halving_ratio=[0.2, 0.3]"]);
    assert!(!check_passes(&r, "gap-eta-gap-eta"));
}

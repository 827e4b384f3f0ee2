//! Seed-004 α-sweep scenarios (spec 004 §7: stage-times, plateau-convergence,
//! log-scale-tracking, rank-staircase, transition-width, raw-vs-log) in their fast
//! configurations, each with a deliberately wrong setting that makes a check fail.

mod common;

use common::passes_each as passes;

#[test]
fn stage_times() {
    let r = common::run_quick("stage-times", &[]);
    common::assert_all_pass("stage-times", &r);
}

/// At α ≥ 1e−8 the stages are not separated (Λ·gap·|g| < 5): mini's last transitions are
/// missing at 1e−2 and 1e−4, and R2's offsets a_k still depend on Λ (the slope is off).
#[test]
fn stage_times_fail_at_large_alpha() {
    let r = common::run_quick(
        "stage-times",
        &["log10_alpha=[-2, -4, -8]", "cross_log10_alpha=[-8]"],
    );
    assert!(passes(&r, "mini: transitions not found").iter().all(|p| !p));
    assert!(passes(&r, "R2: max_k |slope").iter().all(|p| !p));
    assert!(passes(&r, "R2: spread").iter().all(|p| !p));
    // the solvers still agree: the failure is the finite-α physics, not the numerics
    assert!(passes(&r, "R2: max relative").iter().all(|p| *p));
}

/// Loose tolerances are caught by the halved-tolerance and solver cross-checks.
#[test]
fn stage_times_detect_loose_tolerances() {
    let r = common::run_quick("stage-times", &["solver.rtol=1e-4", "solver.atol=1e-4"]);
    assert!(passes(&r, "tol/2").iter().all(|p| !p));
    assert!(passes(&r, "(bdf)").iter().all(|p| !p));
}

#[test]
fn plateau_convergence() {
    let r = common::run_quick("plateau-convergence", &[]);
    common::assert_all_pass("plateau-convergence", &r);
}

/// At α = 1e−8 the plateau error is far above 1e−3 on the short plateaus.
#[test]
fn plateau_convergence_fails_at_large_alpha() {
    let r = common::run_quick(
        "plateau-convergence",
        &[
            "log10_alpha=[-4, -6, -8]",
            "checks.reference_log10_alpha=-8",
        ],
    );
    assert!(passes(&r, "max_k err_k at").iter().all(|p| !p));
}

#[test]
fn log_scale_tracking() {
    let r = common::sweep_quick("log-scale-tracking", &[]).unwrap();
    common::assert_all_pass("log-scale-tracking", &r);
}

/// The spec's window alone (sign_radius = ∞ in effect) includes samples inside transitions,
/// where eq. (29) does not hold: the sweep's check fails, and so do the runs at large α.
#[test]
fn log_scale_tracking_sign_check_fails_inside_transitions() {
    let r = common::sweep_quick("log-scale-tracking", &["checks.sign_radius=10.0"]).unwrap();
    assert!(passes(&r, "mini: samples with sgn").iter().all(|p| !p));
    assert!(passes(&r, "runs failing their own checks")
        .iter()
        .all(|p| !p));
    assert!(passes(&r, "mini: max over α").iter().all(|p| *p));
}

/// A grid the reduction cannot use is refused before anything runs, naming the key.
#[test]
fn log_scale_tracking_refuses_unusable_grids() {
    for set in [
        "sweep.grid.log10_alpha=[-16.0]",
        "sweep.grid.log10_alpha=[-32.0, -16.0]",
        "sweep.grid.log10_alpha=[-16.0, -16.0]",
    ] {
        let key = refused_key("log-scale-tracking", set);
        assert_eq!(key, "sweep.grid.log10_alpha", "{set}");
    }
    let key = refused_key("log-scale-tracking", "sweep.grid.samples=[100, 200]");
    assert!(key.starts_with("sweep.grid"), "{key}");
}

/// The key of the input error that `set` provokes in scenario `name` (quick mode).
fn refused_key(name: &str, set: &str) -> String {
    use attnflow::scenario::run::{default_scenario_dir, load_and_validate, resolve};
    let path = resolve(name, &default_scenario_dir()).expect("scenario exists");
    let ov = attnflow::scenario::Overrides {
        set: vec![set.to_string()],
        quick: true,
        ..Default::default()
    };
    match load_and_validate(&path, &ov) {
        Ok(_) => panic!("{name}: `{set}` was accepted"),
        Err(e) => e.key,
    }
}

#[test]
fn rank_staircase() {
    let r = common::run_quick("rank-staircase", &[]);
    common::assert_all_pass("rank-staircase", &r);
}

/// Without the eligibility rule, α = 1e−16 is counted on plateaus it has not reached yet.
#[test]
fn rank_staircase_miscounts_ineligible_alpha() {
    let r = common::run_quick(
        "rank-staircase",
        &["log10_alpha=[-16]", "checks.eligibility=1e6"],
    );
    assert!(passes(&r, "counted set ≠ S_k").iter().all(|p| !p));
}

#[test]
fn transition_width() {
    let r = common::sweep_quick("transition-width", &[]).unwrap();
    common::assert_all_pass("transition-width", &r);
}

/// At α ≥ 1e−32 the short plateaus never come within 1e−4 of β^k before the next race, so
/// their widths cannot be measured at two values of α.
#[test]
fn transition_width_needs_small_alpha() {
    let r = common::sweep_quick(
        "transition-width",
        &["sweep.grid.log10_alpha=[-16.0, -32.0]"],
    )
    .unwrap();
    assert!(passes(&r, "fewer than min_widths").iter().all(|p| !p));
    assert!(passes(&r, "sgn β_(i_k)").iter().all(|p| *p));
}

/// A grid the reduction cannot use is refused before anything runs, naming the key.
#[test]
fn transition_width_refuses_unusable_grids() {
    for set in [
        "sweep.grid.log10_alpha=[-64.0]",
        "sweep.grid.log10_alpha=[-128.0, -64.0]",
    ] {
        let key = refused_key("transition-width", set);
        assert_eq!(key, "sweep.grid.log10_alpha", "{set}");
    }
    let key = refused_key("transition-width", "sweep.grid.rho=[1e-2, 1e-3]");
    assert_eq!(key, "sweep.grid.rho");
}

#[test]
fn raw_vs_log() {
    let r = common::run_quick("raw-vs-log", &[]);
    common::assert_all_pass("raw-vs-log", &r);
}

/// At α = 1e−8 the raw f64 layout has already lost the conserved c of the dropped coordinate.
#[test]
fn raw_vs_log_disagree_at_small_alpha() {
    let r = common::run_quick("raw-vs-log", &["checks.agreement_log10_alpha=-8"]);
    assert!(passes(&r, "max |β_raw − β_log|").iter().all(|p| !p));
}

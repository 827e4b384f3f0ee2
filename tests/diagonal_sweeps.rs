//! Seed-004 α-sweep scenarios (spec 004 §7: stage-times, plateau-convergence,
//! log-scale-tracking, rank-staircase, transition-width, raw-vs-log) in their fast
//! configurations, each with a deliberately wrong setting that makes a check fail.

mod common;

use attnflow::scenario::run::{default_scenario_dir, load_and_validate, resolve};
use attnflow::scenario::{InputError, Overrides};
use common::passes_each as passes;

/// The refusal of scenario `name` in quick mode with `set`.
fn refused(name: &str, set: &str) -> InputError {
    let path = resolve(name, &default_scenario_dir()).expect("scenario exists");
    let ov = Overrides {
        set: vec![set.to_string()],
        quick: true,
        ..Default::default()
    };
    match load_and_validate(&path, &ov) {
        Ok(_) => panic!("{name}: {set} was accepted"),
        Err(e) => e,
    }
}

#[test]
fn stage_times() {
    let r = common::sweep_quick("stage-times", &[]).unwrap();
    common::assert_all_pass("stage-times", &r);
}

/// At α ≥ 1e−8 the stages are not separated (Λ·gap·|g| < 5): mini's last transitions are
/// missing at 1e−2 and 1e−4, and R2's offsets a_k still depend on Λ (the slope is off).
#[test]
fn stage_times_fail_at_large_alpha() {
    let r = common::sweep_quick(
        "stage-times",
        &[
            "sweep.grid.log10_alpha=[-2.0, -4.0, -8.0]",
            "cross_log10_alpha=[-8.0]",
            "checks.spread_min_log10_alpha=-8.0",
        ],
    )
    .unwrap();
    assert_eq!(
        passes(&r, "transitions-not-found-alpha.mini-1e-*"),
        [false, false, true]
    );
    assert!(passes(&r, "slope-vs-lambda.r2").iter().all(|p| !p));
    assert!(passes(&r, "spread-over-conv-lambda-tau.r2")
        .iter()
        .all(|p| !p));
    // the solvers still agree: the failure is the finite-α physics, not the numerics
    assert!(passes(&r, "relative-tau-tau-alpha.r2-tsit45-bdf-1e-8")
        .iter()
        .all(|p| *p));
}

/// Loose tolerances are caught by the halved-tolerance and solver cross-checks.
#[test]
fn stage_times_detect_loose_tolerances() {
    let r = common::sweep_quick("stage-times", &["solver.rtol=1e-4", "solver.atol=1e-4"]).unwrap();
    assert!(passes(&r, "tau-tol-tau-tol-alpha").iter().all(|p| !p));
    assert!(passes(&r, "relative-tau-tau-alpha").iter().all(|p| !p));
}

/// A grid the regression cannot use is refused before anything runs, naming the key.
#[test]
fn stage_times_refuses_unusable_grids() {
    for (set, key) in [
        (
            "sweep.grid.log10_alpha=[-16.0, -32.0]",
            "sweep.grid.log10_alpha",
        ),
        (
            "sweep.grid.log10_alpha=[-32.0, -16.0, -64.0]",
            "sweep.grid.log10_alpha",
        ),
        (
            "sweep.grid.log10_alpha=[-256.0, -512.0, -1024.0]",
            "sweep.grid.log10_alpha",
        ),
        ("cross_log10_alpha=[-20.0]", "params.cross_log10_alpha"),
    ] {
        let e = common::load_error("stage-times", &[set]);
        assert_eq!(e.key, key, "{set}: {e}");
    }
}

#[test]
fn plateau_convergence() {
    let r = common::sweep_quick("plateau-convergence", &[]).unwrap();
    common::assert_all_pass("plateau-convergence", &r);
    // the reduction's law across α and the reference run's check are both there
    assert!(passes(&r, "alpha-steps-where-err-does-not")
        .iter()
        .all(|p| *p));
    assert_eq!(passes(&r, "err-alpha-1e.64"), [true]);
}

/// At α = 1e−8 the plateau error is far above 1e−3 on the short plateaus.
#[test]
fn plateau_convergence_fails_at_large_alpha() {
    let r = common::sweep_quick(
        "plateau-convergence",
        &[
            "sweep.grid.log10_alpha=[-4.0, -6.0, -8.0]",
            "checks.reference_log10_alpha=-8.0",
        ],
    )
    .unwrap();
    assert!(passes(&r, "err-alpha-1e.8").iter().all(|p| !p));
}

/// The exponent law needs two α, in decreasing order, with the reference α among them.
#[test]
fn plateau_convergence_refuses_bad_grids() {
    for (set, key) in [
        ("sweep.grid.log10_alpha=[-64.0]", "sweep.grid.log10_alpha"),
        (
            "sweep.grid.log10_alpha=[-64.0, -32.0]",
            "sweep.grid.log10_alpha",
        ),
        (
            "sweep.grid.log10_alpha=[-16.0, -32.0]",
            "checks.reference_log10_alpha",
        ),
        ("sweep.grid.samples=[60, 100]", "sweep.grid"),
    ] {
        let e = refused("plateau-convergence", set);
        assert!(e.key.starts_with(key), "{set}: {e}");
    }
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
    assert!(passes(&r, "samples-sgn-theta-alpha-sgn-theta.mini")
        .iter()
        .all(|p| !p));
    assert!(passes(&r, "runs-failing-their-own-checks")
        .iter()
        .all(|p| !p));
    assert!(passes(&r, "plateau-0-tracking-over-alpha.mini")
        .iter()
        .all(|p| *p));
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
    let r = common::sweep_quick("rank-staircase", &[]).unwrap();
    common::assert_all_pass("rank-staircase", &r);
    assert!(passes(&r, "stages-no-eligible-alpha").iter().all(|p| *p));
    assert!(passes(&r, "eligible-alpha-counted-set").iter().all(|p| *p));
}

/// Without the eligibility rule, α = 1e−16 is counted on plateaus it has not reached yet; with
/// it, α = 1e−16 alone leaves stages uncounted, which the reduction catches.
#[test]
fn rank_staircase_miscounts_ineligible_alpha() {
    let r = common::sweep_quick(
        "rank-staircase",
        &["sweep.grid.log10_alpha=[-16.0]", "checks.eligibility=1e6"],
    )
    .unwrap();
    assert!(passes(&r, "eligible-alpha-counted-set").iter().all(|p| !p));
    let r = common::sweep_quick("rank-staircase", &["sweep.grid.log10_alpha=[-16.0]"]).unwrap();
    assert!(passes(&r, "stages-no-eligible-alpha").iter().all(|p| !p));
    assert!(passes(&r, "eligible-alpha-counted-set").iter().all(|p| *p));
}

/// A grid that is not a decreasing list of α in (0, 1), or sweeps something else, is refused.
#[test]
fn rank_staircase_refuses_bad_grids() {
    for (set, key) in [
        (
            "sweep.grid.log10_alpha=[-128.0, -64.0]",
            "sweep.grid.log10_alpha",
        ),
        ("sweep.grid.log10_alpha=[-128.0, 0.0]", "params.log10_alpha"),
        ("sweep.grid.fixed_threshold=[1e-5, 1e-6]", "sweep.grid"),
        ("sweep.seeds=2", "sweep.seeds"),
    ] {
        let e = refused("rank-staircase", set);
        assert!(e.key.starts_with(key), "{set}: {e}");
    }
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
        &[
            "sweep.grid.log10_alpha=[-16.0, -32.0]",
            "checks.offset_log10_alpha_max=-16.0",
        ],
    )
    .unwrap();
    assert!(passes(&r, "transitions-fewer-than-widths-measured")
        .iter()
        .all(|p| !p));
    for id in ["races-sgn-beta-sigma", "races-sgn-beta-sigma-this-alpha"] {
        assert!(passes(&r, id).iter().all(|p| *p));
    }
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
    let r = common::sweep_quick("raw-vs-log", &[]).unwrap();
    common::assert_all_pass("raw-vs-log", &r);
}

/// At α = 1e−8 the raw f64 layout has already lost the conserved c of the dropped coordinate.
#[test]
fn raw_vs_log_disagree_at_small_alpha() {
    let r = common::sweep_quick("raw-vs-log", &["checks.agreement_log10_alpha=-8"]).unwrap();
    assert!(passes(&r, "beta-raw-beta-log-alpha-1e.8")
        .iter()
        .all(|p| !p));
}

/// A grid without the reference α of the agreement check is refused, naming the grid.
#[test]
fn raw_vs_log_refuses_a_grid_without_the_reference_alpha() {
    use attnflow::scenario::run::{default_scenario_dir, load_and_validate, resolve};
    let path = resolve("raw-vs-log", &default_scenario_dir()).unwrap();
    let ov = attnflow::scenario::Overrides {
        set: vec!["sweep.grid.log10_alpha=[-8.0, -16.0]".into()],
        quick: true,
        ..Default::default()
    };
    let err = load_and_validate(&path, &ov).err().expect("refused");
    assert!(err.key.starts_with("sweep.grid"), "{err}");
}

//! A NaN measurement fails every kind of check: NaN compares false against any bound, and every
//! reduction of measured values (the `stats` module, and the library functions built on it)
//! propagates NaN instead of dropping it the way `f64::max` does.

use attnflow::analysis::fit::line_fit;
use attnflow::analysis::svm::lp::L1Kkt;
use attnflow::analysis::svm::qp::L2Kkt;
use attnflow::flow::trajectory::Trajectory;
use attnflow::scenario::Check;
use attnflow::stats;

const NAN: f64 = f64::NAN;

/// Every kind of check on `measured`, with bounds that a finite value in [0, 1] passes.
fn every_kind(measured: f64) -> [Check; 5] {
    [
        Check::at_most("c", "at_most", measured, 1.0),
        Check::at_least("c", "at_least", measured, 0.0),
        Check::within("c", "within", measured, 0.0, 1.0),
        Check::close("c", "close", measured, 0.5, 0.5),
        Check::holds("c", "holds", measured <= 1.0),
    ]
}

#[test]
fn a_finite_measurement_passes_the_reference_checks() {
    for c in every_kind(0.5) {
        assert!(c.pass, "{} failed on 0.5", c.name);
    }
}

#[test]
fn a_nan_measurement_fails_every_kind_of_check() {
    for c in every_kind(NAN) {
        assert!(!c.pass, "{} passed on NaN", c.name);
    }
}

/// The values a run would reduce, one of them NaN (where a failed solve or 0/0 leaves it).
const WITH_NAN: [f64; 5] = [0.25, 0.5, NAN, 0.75, 0.5];
/// The x86 default NaN has its sign bit set: sorting with `total_cmp` puts it first, not last.
const WITH_NEGATIVE_NAN: [f64; 3] = [0.25, -NAN, 0.75];

#[test]
fn every_reduction_of_a_list_with_a_nan_fails_every_kind_of_check() {
    for v in [&WITH_NAN[..], &WITH_NEGATIVE_NAN[..], &[NAN, NAN][..]] {
        let reductions = [
            ("max", stats::max(v)),
            ("min", stats::min(v)),
            ("max_with", stats::max_with(0.0, v)),
            ("min_with", stats::min_with(1.0, v)),
            ("max_abs", stats::max_abs(v)),
            ("max_abs_diff", stats::max_abs_diff(v, &vec![0.0; v.len()])),
            ("range.0", stats::range(v).0),
            ("range.1", stats::range(v).1),
            ("mean", stats::mean(v)),
            ("median", stats::median(v)),
            ("geomean", stats::geomean(v)),
            ("worst", stats::worst(v.iter().map(|&x| (x, ()))).unwrap().0),
            ("best", stats::best(v.iter().map(|&x| (x, ()))).unwrap().0),
        ];
        for (name, measured) in reductions {
            for c in every_kind(measured) {
                assert!(!c.pass, "{name} of {v:?} passed {}", c.name);
            }
        }
    }
}

#[test]
fn the_plain_folds_this_module_replaces_would_have_passed() {
    // the failure mode the stats module exists for: a NaN dropped by f64::max, an all-NaN
    // fold left at −∞, a NaN sorted out of the middle
    let dropped = WITH_NAN.iter().copied().fold(0.0, f64::max);
    assert!(Check::at_most("c", "f64::max", dropped, 1.0).pass);
    let all_nan = [NAN, NAN].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert!(Check::at_most("c", "all-NaN f64::max", all_nan, 1.0).pass);
    let mut sorted = WITH_NEGATIVE_NAN;
    sorted.sort_by(f64::total_cmp);
    assert!(Check::within("c", "total_cmp median", sorted[1], 0.0, 1.0).pass);
}

#[test]
fn an_empty_set_of_measurements_fails_rather_than_passing_vacuously() {
    let none: [f64; 0] = [];
    for measured in [
        stats::max(none),
        stats::min(none),
        stats::mean(&none),
        stats::median(&none),
    ] {
        for c in every_kind(measured) {
            assert!(!c.pass, "{} passed on an empty set", c.name);
        }
    }
}

#[test]
fn a_nan_invariant_sample_fails_the_drift_check() {
    let mut traj = Trajectory::new(1);
    traj.invariants = vec![("beta".into(), vec![1.0, 1.0 + 1e-12, NAN, 1.0])];
    let drift = traj.max_invariant_drift();
    assert!(!Check::at_most("c", "max invariant drift", drift, 1e-9).pass);
    traj.invariants = vec![("beta".into(), vec![1.0, 1.0 + 1e-12, 1.0])];
    assert!(Check::at_most("c", "max invariant drift", traj.max_invariant_drift(), 1e-9).pass);
}

#[test]
fn a_nan_sample_fails_a_fit_residual_check() {
    let fit = line_fit(&[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, NAN, 4.0]);
    assert!(!Check::at_most("c", "max residual", fit.max_residual, 1e-9).pass);
}

#[test]
fn a_nan_kkt_residual_is_not_certified() {
    let l2 = L2Kkt {
        primal_infeasibility: 0.0,
        dual_infeasibility: 0.0,
        complementary_slackness: NAN,
        stationarity: 1e-14,
        duality_gap: 1e-15,
    };
    assert!(l2.max().is_nan());
    assert!(!l2.passes(1e-8), "a NaN residual certified an SVM solution");
    let l1 = L1Kkt {
        primal_infeasibility: 0.0,
        dual_infeasibility: NAN,
        stationarity: 0.0,
        complementary_slackness: 0.0,
        duality_gap: 0.0,
    };
    assert!(!l1.passes(1e-8));
}

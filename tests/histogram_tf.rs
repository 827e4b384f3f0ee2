//! Seed 000, transformer and solver scenarios (spec 000 §6 rows 16–18 and the work-precision
//! study) in their fast configurations, and runs with a deliberately wrong setting that must make
//! a named check fail (so that the checks are known to bite).

mod common;

#[test]
fn tf_vs_df() {
    let r = common::run_quick("tf-vs-df", &[]);
    common::assert_all_pass("tf-vs-df", &r);
}

/// Stopped long before the limit, the tf state is not yet the df limit modulo sign.
#[test]
fn tf_vs_df_limit_check_fails_before_convergence() {
    let r = common::run_quick("tf-vs-df", &["t_end_tf=0.5"]);
    let c = common::check(&r, "tf-end-df-modulo-per-column");
    assert!(!c.pass, "{c:?}");
}

#[test]
fn threshold_weights() {
    let r = common::run_quick("threshold-weights", &[]);
    common::assert_all_pass("threshold-weights", &r);
}

/// At t = 0.05 the flow is still far from Q Diag(v) = M.
#[test]
fn threshold_weights_product_check_fails_early() {
    let r = common::run_quick("threshold-weights", &["t_end=0.05"]);
    let c = common::check(&r, "diag-end");
    assert!(!c.pass, "{c:?}");
}

#[test]
fn stiffness_report() {
    let r = common::run_quick("stiffness-report", &[]);
    common::assert_all_pass("stiffness-report", &r);
}

/// Counting the d rescaling modes as nonzero (a zero threshold below rounding) must break the
/// κ comparison with D4 and the zero-mode count.
#[test]
fn stiffness_report_fails_when_zero_modes_are_not_excluded() {
    let r = common::run_quick("stiffness-report", &["zero_mode_tol=1e-30"]);
    for name in [
        "kappa-dense-kappa-d4-kappa-d4",
        "problems-whose-limit-hessian-has-zero",
    ] {
        let c = common::check(&r, name);
        assert!(!c.pass, "{c:?}");
    }
}

#[test]
fn work_precision() {
    let r = common::run_quick("work-precision", &[]);
    common::assert_all_pass("work-precision", &r);
}

/// On the non-stiff df problem Tsit45 is cheaper than Bdf once Bdf's Jacobians are counted:
/// declaring it stiff must fail the gradient-equivalents check (the rhs-only count does not
/// discriminate, since BDF spends about one rhs per step).
#[test]
fn work_precision_stiffness_check_fails_on_a_non_stiff_problem() {
    let r = common::run_quick(
        "work-precision",
        &[
            "problems=[{ name = \"df d=6\", flow = \"df\", task = \"eq\", d = 6, sigma = 0.5, \
           t_end = 10.0, etas = [0.04, 0.02, 0.01], hvp_cost = 1.5, stiff = true }]",
        ],
    );
    let c = common::check(&r, "bdf-loses.df-d-6-gradient-equivalents");
    assert!(!c.pass, "{c:?}");
}

//! Seed-002 Hessian scenarios (spec 002 §6 items 9, 10, 14 and §7.3 stiffness-attention-flow) in
//! their fast configurations, each with a setting that makes one of its checks fail.

mod common;

use common::passes;

#[test]
fn local_rate_vs_hessian() {
    let r = common::run_quick("local-rate-vs-hessian", &[]);
    common::assert_all_pass("local-rate-vs-hessian", &r);
}

/// Stopping GD at L < 1e−12 leaves it ~1e−6 away from p_T: recovery fails, the rate still holds.
#[test]
fn local_rate_recovery_needs_a_deep_tail() {
    let r = common::run_quick(
        "local-rate-vs-hessian",
        &["loss_floor=1e-12", "window_lo=1e-11"],
    );
    assert!(!passes(&r, "gd-recovers-teacher-final"));
    assert!(passes(&r, "gd-tail-vs-linearization-fitted-slope"));
}

#[test]
fn hessian_conditioning_vs_r() {
    let r = common::run_quick("hessian-conditioning-vs-r", &[]);
    common::assert_all_pass("hessian-conditioning-vs-r", &r);
}

/// The linear (p, v) Hessian at (p_T, v_T) depends on p_T, hence on σ_p.
#[test]
fn linear_pv_hessian_depends_on_sigma() {
    let r = common::run_quick("hessian-conditioning-vs-r", &["linear_train=pv"]);
    assert!(!passes(&r, "linear-attention-kappa-lin-identical-across"));
    assert!(passes(&r, "per-sample-slope-median-log10-kappa"));
}

#[test]
fn spurious_sparse_minimum() {
    let r = common::run_quick("spurious-sparse-minimum", &[]);
    common::assert_all_pass("spurious-sparse-minimum", &r);
}

/// Trial 0 stalls too, but escapes toward the boundary: no interior strict minimum.
#[test]
fn boundary_escape_is_not_a_strict_minimum() {
    let r = common::run_quick("spurious-sparse-minimum", &["trial=0"]);
    assert!(!passes(&r, "strict-local-minimum-lambda-lambda-2l"));
    assert!(passes(&r, "spurious-loss-minimum"));
}

/// A non-sparse teacher (σ_p = 0.1): the flow reaches the global minimum, not a spurious one.
#[test]
fn dense_teacher_has_no_spurious_minimum() {
    let r = common::run_quick("spurious-sparse-minimum", &["sigma_p=0.1"]);
    assert!(!passes(&r, "spurious-loss-minimum"));
    assert!(passes(&r, "stationary-after-newton-polish"));
}

#[test]
fn stiffness_attention_flow() {
    let r = common::run_quick("stiffness-attention-flow", &[]);
    common::assert_all_pass("stiffness-attention-flow", &r);
}

/// Capping the explicit solver far below its stability-limited step count: no slope to fit.
#[test]
fn stiffness_explicit_cap_fails_the_slope() {
    let r = common::run_quick("stiffness-attention-flow", &["explicit_max_steps=100"]);
    assert!(!passes(&r, "explicit-tsit45-log-log-slope-rhs"));
    assert!(passes(&r, "implicit-log-log-slope-rhs-hvp.bdf"));
}

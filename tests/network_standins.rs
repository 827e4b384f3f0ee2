//! Synthetic stand-ins for the papers' network experiments (`scenarios/network/`).

mod common;
use common::{assert_all_pass, check, load_error, passes, run_quick};

/// Seed 002 Fig. 3 stand-in: the shipped quick config passes both checks.
#[test]
fn teacher_sparsity_quick_passes() {
    let rep = run_quick("teacher-sparsity", &[]);
    assert_all_pass("teacher-sparsity", &rep);
    // the calibration of the teachers' mean ln R is exact
    let ln_r = |k: &str| rep.derived[k].as_f64().unwrap();
    assert!((ln_r("teacher_ln_r_dense") - 20f64.ln()).abs() < 1e-9);
    assert!((ln_r("teacher_ln_r_sparse") - 1e7f64.ln()).abs() < 1e-9);
}

/// A dense "sparse" teacher (both R ≈ 20) mimics a wrong calibration: the two students see the
/// same labels, the slowdown is 1 and the check fails.
#[test]
fn equally_sparse_teachers_fail_the_slowdown_check() {
    let rep = run_quick("teacher-sparsity", &["r_sparse=20.0"]);
    assert!(!passes(&rep, "sparse-teacher-slower"));
    assert!((check(&rep, "sparse-teacher-slower").measured - 1.0).abs() < 1e-12);
}

/// R ≤ 1 is no attention ratio: refused with the key named.
#[test]
fn ratio_below_one_is_refused() {
    let e = load_error("teacher-sparsity", &["r_dense=0.5"]);
    assert_eq!(e.key, "params.r_dense");
}

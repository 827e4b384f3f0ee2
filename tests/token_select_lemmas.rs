//! Seed-003 lemmas of the joint-training analysis covered late (issue 20): Lemma 12 (u_mm
//! separates the attended features once φ_opt ≥ ½) and Lemma 13 (PL-like bound with the
//! dual-norm constant, loss between consecutive iterates), checked inside joint-training.

mod common;
use common::{passes, run_quick};

const NGD: &str = "ngd-eta-0-1";
const NGD_JOINT: &str = "ngd-joint-alpha-0-333-eta-0-1";

#[test]
fn lemmas_12_and_13_hold_along_eq10_runs() {
    let r = run_quick("joint-training", &[]);
    for run in [NGD, NGD_JOINT] {
        for id in [
            "lem-12-u-mm-separates",
            "lem-13-pl-like",
            "lem-13-loss-between-iterates",
        ] {
            assert!(passes(&r, &format!("{id}.{run}")), "{id}.{run}");
        }
    }
    assert!(r.derived["ngd_lemma12_min_margin"].as_f64().unwrap() > 0.0);
}

#[test]
fn loss_between_iterates_fails_with_a_huge_step() {
    // η = 100: one normalized step moves the margins by tens, so L jumps within a segment
    let r = run_quick("joint-training", &["ngd_eta=100"]);
    assert!(!passes(&r, "lem-13-loss-between-iterates.ngd-eta-100"));
    // the other two are properties of the state, not of the step: they still hold
    assert!(passes(&r, "lem-12-u-mm-separates.ngd-eta-100"));
    assert!(passes(&r, "lem-13-pl-like.ngd-eta-100"));
}

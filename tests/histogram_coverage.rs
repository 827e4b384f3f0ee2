//! Coverage of seed-000 proof internals (App. A.2): Lemma A.2's invariant sets and the
//! derivative of the proof's ĝ. Each check passes on the shipped scenario and fails on a
//! parameter that mimics a plausible error.

mod common;
use common::{check, load_error, passes, run_quick};

const SETS: [&str; 3] = ["line-rho", "boundary-g", "line-minus-rhob"];

#[test]
fn flows_started_on_the_invariant_sets_stay_there() {
    let rep = run_quick("lemma-a2-invariants", &[]);
    for set in SETS {
        assert!(passes(&rep, &format!("invariant-set.{set}")), "{set}");
    }
    // the other sign of c, and a start on the other branch x₀ < 0
    let rep = run_quick("lemma-a2-invariants", &["c=2", "x0=-0.3"]);
    for set in SETS {
        assert!(
            passes(&rep, &format!("invariant-set.{set}")),
            "{set} at c = 2"
        );
    }
}

#[test]
fn a_start_off_the_sets_fails_the_invariance_checks() {
    let rep = run_quick("lemma-a2-invariants", &["offset=1e-6"]);
    for set in SETS {
        let ck = check(&rep, &format!("invariant-set.{set}"));
        assert!(!ck.pass, "{set}: {}", ck.measured);
        assert!(ck.measured >= 0.5e-6, "{set}: {}", ck.measured);
    }
}

#[test]
fn ghat_decays_at_twice_the_printed_rate() {
    let rep = run_quick("lemma-a2-invariants", &[]);
    assert!(passes(&rep, "ghat-rate"));
    // the paper's dĝ/dt = −c₁x²ĝ misses half of the rate: relative residual 1/2
    let paper = rep.derived["ghat_residual_paper"].as_f64().unwrap();
    assert!((paper - 0.5).abs() < 1e-6, "{paper}");
    let rep = run_quick("lemma-a2-invariants", &["ghat_factor=1"]);
    assert!(!passes(&rep, "ghat-rate"));
}

#[test]
fn a_start_that_has_no_point_on_the_boundary_is_rejected() {
    let e = load_error("lemma-a2-invariants", &["c=-2", "x0=1"]);
    assert!(e.to_string().contains("params.x0"), "{e}");
}

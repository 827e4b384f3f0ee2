//! Claims of paper 002 (prompt attention) that were only prose — Assumptions 2–4, Remarks 1, 2,
//! 4 and Theorem 1 where its hypothesis holds with margin: each check passes on the shipped quick
//! run and fails on a run that violates the claim's assumption or mimics a plausible bug.

mod common;

use common::{check, passes, run_quick};

/// A3 and A4 hold on the Theorem-1 instance (C-orth, W = I) with ratio 1 up to rounding; the
/// Remark-4 multi-head W is reported with rank ≤ h.
#[test]
fn a3_a4_hold_on_the_theorem1_instance() {
    let rep = run_quick("prompt-assumptions", &[]);
    for id in [
        "a3-x-i-surjective",
        "a4-w-full-rank",
        "remark4-multi-head-w-rank",
        "a2-at-d-nn",
    ] {
        assert!(passes(&rep, id), "{id}: {:?}", check(&rep, id));
    }
    assert!((check(&rep, "a3-x-i-surjective").measured - 1.0).abs() < 1e-12);
    let rank4 = rep.derived["remark4_w_rank"].as_f64().unwrap();
    assert_eq!(rank4, 5.0, "a product of d × 5 factors has rank 5");
}

/// A multi-head W = W_QW_Kᵀ with h = 5 < d = 10 (Remark 4) in place of W = I: A4 fails; a
/// full-width head (h = d) is full rank and passes.
#[test]
fn a4_fails_for_a_multi_head_w() {
    let rep = run_quick("prompt-assumptions", &["head_dim=5"]);
    assert!(!passes(&rep, "a4-w-full-rank"));
    assert!(check(&rep, "a4-w-full-rank").measured < 1e-14);
    let rep = run_quick("prompt-assumptions", &["head_dim=10"]);
    assert!(passes(&rep, "a4-w-full-rank"));
}

/// Remark 1: at n ≤ d = 6 < nN = 10 A2 is impossible (‖KKᵀ − I‖₂ ≥ 1); the paper's d ≥ n is
/// recorded. At d = nN (the instance no longer in Remark 1's gap) the check must fail.
#[test]
fn remark1_a2_needs_d_at_least_nn() {
    let rep = run_quick("prompt-assumptions", &[]);
    let c = check(&rep, "remark1-a2-impossible-below-nn");
    assert!(c.pass, "{c:?}");
    assert!(c.paper_claim.is_some());
    assert_eq!(rep.derived["remark1_key_rank"].as_f64().unwrap(), 6.0);
    let rep = run_quick("prompt-assumptions", &["remark1_d=10"]);
    assert!(!passes(&rep, "remark1-a2-impossible-below-nn"));
}

/// Remark 2: σ_min(F(p₀)) = 0 at d = 4 < N = 5; at d = N it is positive (the paper's "d ≤ N"
/// corrected to d < N), so putting d = N into the vacuity check fails it.
#[test]
fn remark2_sigma_min_vanishes_only_below_n() {
    let rep = run_quick("prompt-assumptions", &[]);
    assert!(passes(&rep, "remark2-sigma-min-f-zero-below-n"));
    let c = check(&rep, "remark2-sigma-min-f-positive-at-d-n");
    assert!(c.pass && c.paper_claim.is_some(), "{c:?}");
    let rep = run_quick("prompt-assumptions", &["remark2_d=5"]);
    assert!(!passes(&rep, "remark2-sigma-min-f-zero-below-n"));
}

/// Theorem 1 where its hypothesis holds with margin on every instance: margin ≥ 0, (14), ‖p_t‖
/// ≤ M_p, the linearization and the intended rate ratio ≥ 1 all pass.
#[test]
fn thm1_with_margin_passes() {
    let rep = run_quick("thm1-linear-rate-margin", &[]);
    for c in &rep.checks {
        assert!(c.pass, "{}: {:?}", c.id, c);
    }
    assert!(check(&rep, "hypothesis-margin").measured > 0.5);
}

/// A step 10⁴× η = c₂/L′ makes GD diverge: (14), ‖p_t‖ ≤ M_p and the rate ratio fail.
#[test]
fn thm1_with_margin_fails_with_too_large_a_step() {
    let rep = run_quick("thm1-linear-rate-margin", &["gd_step_scale=1e4"]);
    assert!(!passes(&rep, "14-where-hypothesis-holds-etamu-l0"));
    assert!(!passes(&rep, "where-hypothesis-holds"));
    assert!(!passes(&rep, "intended-rate-vs-bound"));
    assert!(
        passes(&rep, "hypothesis-margin"),
        "the hypothesis is about p₀, not GD"
    );
}

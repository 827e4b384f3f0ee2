//! `diag-transformer` (seed 004, Example 3.2 with Theorem 4.1 for a two-layer h): the shipped
//! configuration passes, and settings outside the theorem's assumptions make its checks fail.

mod common;

use attnflow::models::diagonal::{
    algorithm1, Algorithm1Options, BetaLoss, DiagTransformer, Flag, Termination, TransformerShape,
};
use common::passes;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

#[test]
fn diag_transformer_passes() {
    let r = common::run_quick("diag-transformer", &[]);
    common::assert_all_pass("diag-transformer", &r);
    // the plateau θ^0 = 0 and one stage per teacher entry: L1 VO, L2 VO, L1 KQ, L2 KQ
    assert_eq!(r.series.rows.len(), 5, "stage table");
}

/// The spec's size (d = 8, n = 6, d' = 16, N = 128; ≈ 80 s): Algorithm 1 finds six stages (L1 KQ[0]
/// enters with sign −, is dropped at stage 5 and returns with +), and at α = 1e−2048 … 1e−8192 every
/// check passes. At α ≥ 1e−512 the support check fails at plateau 5: the flow runs an O(1) time
/// ahead of Algorithm 1 there, and α^{m_5/2} leaves too small a margin (scenario file's comment).
#[test]
fn diag_transformer_passes_at_the_spec_size() {
    let r = common::run_quick(
        "diag-transformer",
        &[
            "shape.d=8",
            "shape.tokens=6",
            "shape.d_ff=16",
            "samples=128",
            "log10_alphas=[-2048, -4096, -8192]",
        ],
    );
    common::assert_all_pass("diag-transformer at the spec's size", &r);
    assert_eq!(r.series.rows.len(), 7, "stage table: θ^0 and six stages");
}

/// Two heads per layer are exchangeable: their VO entries tie exactly at β = 0, so Algorithm 1
/// stops at stage 0 (A4.3(ii)) and the flow checks have nothing to measure.
#[test]
fn two_heads_tie_at_stage_zero() {
    let r = common::run_quick("diag-transformer", &["shape.heads=2"]);
    assert!(passes(&r, "head-swap-tie-at-zero"));
    assert!(!passes(&r, "algorithm-converges"));
    assert!(r.skipped.iter().any(|s| s.id == "stage-time-slope"));
}

/// At α = 1e−4 … 1e−8 the stages are not separated (Λ·gap·|g| ≲ 5): every transition is found,
/// but the measured times do not regress onto T_k·Λ (slope error ≈ 1e−2), and no α resolves the
/// plateaus.
#[test]
fn large_alpha_fails_the_stage_time_regression() {
    let r = common::run_quick("diag-transformer", &["log10_alphas=[-4, -6, -8]"]);
    assert!(passes(&r, "transitions-not-found"));
    assert!(!passes(&r, "stage-time-slope"));
    assert!(!passes(&r, "flow-unresolved-stages"));
    assert!(passes(&r, "algorithm1-support-added-per-stage"));
}

/// A teacher whose last KQ entry is smaller (−1.0 instead of −1.5) leaves a slower last stage:
/// at α ≥ 1e−64 its slope error is above 1e−3 (it falls below only at α ≈ 1e−256), so the same
/// tolerance fails.
#[test]
fn slower_last_stage_fails_at_the_shipped_alphas() {
    let teacher = r#"teacher=[{layer=1,head=1,entry="VO",r=0,value=1.0},{layer=1,head=1,entry="KQ",r=0,value=1.5},{layer=2,head=1,entry="VO",r=0,value=0.8},{layer=2,head=1,entry="KQ",r=0,value=-1.0}]"#;
    let r = common::run_quick("diag-transformer", &[teacher]);
    assert!(!passes(&r, "stage-time-slope"));
    assert!(passes(&r, "transitions-not-found"));
}

/// The transformer of the shipped scenario's shape and teacher on a ChaCha8 data draw.
fn mini_transformer() -> DiagTransformer {
    let shape = TransformerShape {
        layers: 2,
        heads: 1,
        d: 4,
        tokens: 4,
        d_ff: 8,
    };
    let mut teacher = vec![0.0; shape.p()];
    // L1 VO[0], L1 KQ[0], L2 VO[0], L2 KQ[0] (blocks of 2d = 8 per layer)
    for (i, v) in [(4, 1.0), (0, 1.5), (12, 0.8), (8, -1.5)] {
        teacher[i] = v;
    }
    let (mut data, mut ffn) = (ChaCha8Rng::seed_from_u64(0), ChaCha8Rng::seed_from_u64(1));
    DiagTransformer::random(shape, 32, &teacher, &mut data, &mut ffn).unwrap()
}

/// A plausible bug: a Hessian-vector product with the wrong sign (a dropped minus in the
/// forward-over-reverse pass). Algorithm 1's stage points are then no strict minima of the
/// Hessian it sees (A4.4 flag, or a failed polish), which the scenario's `assumption-flags` and
/// `algorithm-converges` checks report.
struct SignBug(DiagTransformer);

impl BetaLoss for SignBug {
    fn p(&self) -> usize {
        self.0.p()
    }
    fn loss(&self, beta: &[f64]) -> f64 {
        self.0.loss(beta)
    }
    fn grad_beta(&self, beta: &[f64], out: &mut [f64]) {
        self.0.grad_beta(beta, out)
    }
    fn hvp_beta(&self, beta: &[f64], dir: &[f64], out: &mut [f64]) {
        self.0.hvp_beta(beta, dir, out);
        out.iter_mut().for_each(|x| *x = -*x);
    }
}

fn clean(loss: &impl BetaLoss) -> bool {
    match algorithm1(loss, &Algorithm1Options::default()) {
        Ok(s) => {
            s.termination == Termination::Converged
                && s.stages.iter().all(|st| {
                    !st.flags
                        .iter()
                        .any(|f| matches!(f, Flag::NotStrictMinimum { .. }))
                })
        }
        Err(_) => false,
    }
}

#[test]
fn a_wrong_sign_hessian_vector_product_is_caught() {
    assert!(clean(&mini_transformer()));
    assert!(!clean(&SignBug(mini_transformer())));
}

//! Lemma 10's lower bounds and Lemma 12 (spec 003 §4.3) fail on plausible bugs: the checks of
//! `joint-training` are handed a wrong update rule (Lemma 10) or a u_mm from the wrong data
//! (Lemma 12), on the shipped DM instance (seed 0) over the quick run's 1000 iterations.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::common::{w_svm, DATA_STREAM};
use super::joint_norm_lower::{replay, Mm, NormLower};
use super::joint_record::{run_one, Reference};
use super::joint_training::{lemma10_lower_checks, lemma12_check, u_svm};
use crate::attention::{Instance, Loss};
use crate::models::token_select::{GaussianJoint, JointModel, JointRule, JointStepper};
use crate::scenario::Report;

const ETA: f64 = 0.1;
const ITERATIONS: usize = 1000;
/// The shipped rounding allowance: −norm_slack·(1 + ηK).
const SLACK: f64 = -1e-12 * (1.0 + ETA * ITERATIONS as f64);

fn dm() -> Instance {
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    rng.set_stream(DATA_STREAM);
    GaussianJoint::dm().generate(&mut rng).expect("DM data")
}

fn ngd(alpha: f64) -> JointRule {
    JointRule::Ngd {
        eta: ETA,
        alpha,
        alpha_u: 0.0,
    }
}

/// One step of the optimizer under test, built on the model.
type MakeStep = dyn for<'m> Fn(&'m JointModel) -> Box<dyn FnMut(&mut [f64]) + 'm>;

/// The Eq. (10) stepper with the rule `rule` (a correct or a mis-scaled one).
fn stepper(rule: JointRule) -> Box<MakeStep> {
    Box::new(move |model| {
        let mut s = JointStepper::new(model, rule).expect("rule");
        Box::new(move |z| {
            s.step(z);
        })
    })
}

/// The verdicts of `lem-10-u-lower` and `lem-10-w-lower` when the bounds of the Eq. (10) rule
/// with exponent α judge the iterates of the optimizer `make`, and what the replay measured.
fn lemma10_verdicts(alpha: f64, make: &MakeStep) -> ((bool, bool), NormLower) {
    let inst = dm();
    let (_, w_sol) = w_svm(&inst).expect("W-SVM");
    let u_sol = u_svm(&inst.data, &inst.data.y, &inst.opt).expect("u-SVM");
    let a = inst.data.assumptions(&inst.decoder, &inst.opt);
    let model = JointModel::new(inst.data.clone(), Loss::Exponential);
    let mm = Mm {
        u_mm: &u_sol.w,
        w_mm: &w_sol.w,
        opt: &inst.opt,
        token_bound: a.token_bound,
        gamma: 1.0 / w_sol.norm,
    };
    let z0 = vec![0.0; model.data().d * (model.data().d + 1)];
    let lower = replay(
        &model,
        (ETA, alpha),
        &z0,
        ITERATIONS,
        &mm,
        &mut *make(&model),
    );
    let rf = Reference {
        model: &model,
        opt: &inst.opt,
        w_mm: &w_sol.w,
        u_mm: &u_sol.w,
    };
    let run = run_one(&rf, ngd(alpha), "NGD".into(), 1, &z0).expect("run");
    let mut rep = Report::default();
    lemma10_lower_checks(&mut rep, &run, &lower, SLACK);
    let pass = |base: &str| {
        rep.checks
            .iter()
            .find(|c| c.id.starts_with(base))
            .expect(base)
            .pass
    };
    ((pass("lem-10-u-lower"), pass("lem-10-w-lower")), lower)
}

#[test]
fn lemma10_lower_bounds_hold_for_eq10_and_w_margin_starts_at_ws_first_step() {
    for alpha in [0.0, 1.0 / 3.0] {
        let ((u, w), lower) = lemma10_verdicts(alpha, &*stepper(ngd(alpha)));
        assert!(u && w, "α = {alpha}");
        // ∇_WL = 0 at u₀ = 0: W first moves at step 1, and from there W's margin is positive
        assert_eq!(lower.w_first_step, Some(1));
        assert!(lower.w_margin > 0.0, "{}", lower.w_margin);
    }
}

#[test]
fn lemma10_lower_bounds_fail_for_plausible_update_bugs() {
    let third = 1.0 / 3.0;
    // the normalization of Eq. (10) dropped (plain GD at the same η): the u-steps shrink with L
    let ((u, _), _) = lemma10_verdicts(0.0, &*stepper(JointRule::Gd { eta: ETA }));
    assert!(!u);
    // W's factor (k+1)^{−α} applied to the u-block too: u's gains decay, its bound does not
    let u_decays = JointRule::Ngd {
        eta: ETA,
        alpha: third,
        alpha_u: third,
    };
    let ((u, _), _) = lemma10_verdicts(third, &*stepper(u_decays));
    assert!(!u);
    // the factor applied twice to W, (k+1)^{−2α}: W's gains fall behind Σ(s+1)^{−α}Γ/(2B²)
    let ((_, w), _) = lemma10_verdicts(third, &*stepper(ngd(2.0 * third)));
    assert!(!w);
    // u never updated: ∇_WL stays 0 at u = 0, so W never moves (NaN margin)
    let frozen_u: Box<MakeStep> = Box::new(|model| {
        let mut s = JointStepper::new(model, ngd(0.0)).expect("rule");
        let d = model.data().d;
        Box::new(move |z| {
            let u = z[..d].to_vec();
            s.step(z);
            z[..d].copy_from_slice(&u);
        })
    });
    let ((_, w), lower) = lemma10_verdicts(0.0, &*frozen_u);
    assert!(!w && lower.w_margin.is_nan() && lower.w_first_step.is_none());
}

/// The verdict of `lem-12-u-mm-separates` along the NGD run (α = 0) when the separator is the
/// u-SVM of the tokens `opt` with labels `y`, and the smallest margin measured.
fn lemma12_verdict(y: &[f64], opt: &[usize]) -> (bool, f64) {
    let inst = dm();
    let (_, w_sol) = w_svm(&inst).expect("W-SVM");
    let u_sol = u_svm(&inst.data, y, opt).expect("u-SVM");
    let model = JointModel::new(inst.data.clone(), Loss::Exponential);
    let rf = Reference {
        model: &model,
        opt: &inst.opt,
        w_mm: &w_sol.w,
        u_mm: &u_sol.w,
    };
    let z0 = vec![0.0; model.data().d * (model.data().d + 1)];
    let run = run_one(&rf, ngd(0.0), "NGD".into(), ITERATIONS, &z0).expect("run");
    let mut rep = Report::default();
    lemma12_check(&mut rep, &run, u_sol.norm);
    (rep.checks[0].pass, run.lemma12_min_margin)
}

#[test]
fn lemma12_fails_for_a_u_mm_from_the_wrong_data() {
    let inst = dm();
    let (pass, margin) = lemma12_verdict(&inst.data.y, &inst.opt);
    assert!(pass && margin > 0.0);
    // the label convention flipped (y ↦ −y): the separator points the wrong way
    let flipped: Vec<f64> = inst.data.y.iter().map(|y| -y).collect();
    let (pass, margin) = lemma12_verdict(&flipped, &inst.opt);
    assert!(!pass && margin < -0.5, "{margin}");
    // u_mm fitted on the non-optimal tokens (T = 2: the other position)
    let other: Vec<usize> = inst.opt.iter().map(|&o| 1 - o).collect();
    let (pass, margin) = lemma12_verdict(&inst.data.y, &other);
    assert!(!pass && margin < -0.5, "{margin}");
}

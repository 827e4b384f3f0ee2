//! Discrete optimizers against the two-token reference table (spec 003 §4.2), their log-domain
//! stability, and the model's coupling to the W-SVM.

use super::generators::{self, Example1, GaussianJoint};
use super::optim::*;
use super::*;
use crate::analysis::svm::{one_minus_cos, solve_l2, RankOneConstraints, SvmMethod};
use crate::attention::testing::{gaussian_vec, rng};
use crate::attention::{logdomain, FixedDecoder, Loss};
use crate::flow::GradientFlow;

fn two_token_model() -> FixedDecoder {
    let inst = generators::two_token();
    FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential).unwrap()
}

/// 1 − corr(W, W_mm) on the two-token example (W_mm ∝ (e₁ − e₂)e₁ᵀ).
fn two_token_misalignment(w: &[f64]) -> f64 {
    one_minus_cos(w, &[1.0, -1.0, 0.0, 0.0])
}

/// Runs `rule` from W₀ = I and returns 1 − corr at the requested iterations.
fn run(rule: FixedRule, checkpoints: &[usize]) -> Vec<f64> {
    let model = two_token_model();
    let mut stepper = FixedStepper::new(&model, rule).unwrap();
    let mut w = vec![1.0, 0.0, 0.0, 1.0];
    let mut out = vec![];
    for k in 1..=*checkpoints.last().unwrap() {
        stepper.step(&mut w);
        if checkpoints.contains(&k) {
            out.push(two_token_misalignment(&w));
        }
    }
    out
}

fn assert_rel(got: &[f64], want: &[f64], tol: f64, what: &str) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= tol * w, "{what}: {got:?} vs {want:?}");
    }
}

#[test]
fn two_token_optimizers_reproduce_the_reference_table() {
    let ngd = run(
        FixedRule::Ngd {
            eta: 0.1,
            cap: f64::INFINITY,
        },
        &[10, 100, 1000],
    );
    assert_rel(&ngd, &[1.874801e-1, 6.478591e-3, 7.394228e-5], 1e-6, "NGD");
    let ps = run(FixedRule::Polyak { cap: f64::INFINITY }, &[1, 10, 100]);
    assert_rel(&ps, &[2.1437e-1, 1.1570e-2, 1.4618e-4], 1e-4, "PS");
    let gd = run(FixedRule::Gd { eta: 1.0 }, &[100, 10_000]);
    assert_rel(&gd, &[7.2329e-2, 1.8403e-2], 1e-4, "GD");
}

#[test]
fn ngd_runs_to_norm_1000_without_losing_the_tail() {
    let model = two_token_model();
    let mut stepper = FixedStepper::new(
        &model,
        FixedRule::Ngd {
            eta: 1.0,
            cap: f64::INFINITY,
        },
    )
    .unwrap();
    let mut w = vec![1.0, 0.0, 0.0, 1.0];
    let mut last = None;
    for _ in 0..1000 {
        let r = stepper.step(&mut w);
        assert!(r.log_excess.is_finite() && r.log_grad_norm.is_finite());
        assert!((r.length - 1.0).abs() < 1e-12);
        last = Some(r);
    }
    // g = 1 + √2·1000, ln(L − L*) = −1 + ln σ(−g) + O(σ(−g)) = −1 − g − ln(1 + e^{−g})
    let g = w[0] - w[1];
    assert!((g - (1.0 + 2f64.sqrt() * 1000.0)).abs() < 1e-9);
    let now = model.log_excess_loss(&w);
    assert!((now - (-1.0 - g)).abs() < 1e-12 * g, "{now}");
    // the last step's report was taken one step (√2 in g) earlier
    assert!((last.unwrap().log_excess - (-1.0 - (g - 2f64.sqrt()))).abs() < 1e-9 * g);
    // GD from here: the step e^{−g} underflows and is flagged, not NaN
    let mut gd = FixedStepper::new(&model, FixedRule::Gd { eta: 1.0 }).unwrap();
    let before = w.clone();
    let r = gd.step(&mut w);
    assert!(r.stalled && w == before);
}

#[test]
fn polyak_cap_switches_to_gradient_descent_and_momentum_is_bounded() {
    let inst = Example1 {
        n: 4,
        t: 3,
        d: 8,
        ..Example1::ex1()
    }
    .generate(&mut rng(21))
    .unwrap();
    let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential).unwrap();
    let w0 = gaussian_vec(&mut rng(22), model.dim(), 0.01);
    let mut w = w0.clone();
    let mut ps = FixedStepper::new(&model, FixedRule::Polyak { cap: 10.0 }).unwrap();
    let reports: Vec<StepReport> = (0..200).map(|_| ps.step(&mut w)).collect();
    let k_switch = reports
        .iter()
        .position(|r| r.capped)
        .expect("the cap binds");
    assert!(k_switch < 100, "k_sw = {k_switch}");
    // once capped, every later step is GD(10): length = 10‖∇L‖
    for r in &reports[k_switch..] {
        assert!(r.capped);
        assert!((r.length.ln() - (10f64.ln() + r.log_grad_norm)).abs() < 1e-12);
    }
    let (eta, beta) = (0.1, 0.9);
    let rule = FixedRule::NgdMomentum {
        eta,
        beta,
        momentum: Momentum::Normalized,
        cap: f64::INFINITY,
    };
    let mut mom = FixedStepper::new(&model, rule).unwrap();
    let mut w = w0;
    for _ in 0..100 {
        assert!(mom.step(&mut w).length <= eta / (1.0 - beta) * (1.0 + 1e-12));
    }
    assert!(FixedStepper::new(&model, FixedRule::Ngd { eta: 0.0, cap: 1.0 }).is_err());
}

#[test]
fn joint_updates_obey_the_norm_bounds_of_lemma_10() {
    let inst = GaussianJoint {
        n: 4,
        d: 16,
        ..GaussianJoint::dm()
    }
    .generate(&mut rng(23))
    .unwrap();
    let model = JointModel::new(inst.data, Loss::Exponential);
    let d = model.data().d;
    let (eta, alpha) = (0.1, 1.0 / 3.0);
    let mut stepper = JointStepper::new(
        &model,
        JointRule::Ngd {
            eta,
            alpha,
            alpha_u: 0.0,
        },
    )
    .unwrap();
    let mut z = vec![0.0; model.dim()];
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let mut log_losses = vec![];
    for k in 1..=60usize {
        log_losses.push(stepper.step(&mut z));
        if k == 1 {
            // ∇_W L = 0 at u = 0: W stays at 0, u moves by η
            assert!(z[d..].iter().all(|&x| x == 0.0));
            assert!((norm(&z[..d]) - eta).abs() < 1e-15);
        }
        let w_bound: f64 = (0..k).map(|s| eta * ((s + 1) as f64).powf(-alpha)).sum();
        assert!(norm(&z[..d]) <= eta * k as f64 * (1.0 + 1e-12));
        assert!(norm(&z[d..]) <= w_bound * (1.0 + 1e-12));
    }
    assert!(
        log_losses.windows(2).skip(1).all(|p| p[1] < p[0]),
        "loss decreases"
    );
}

#[test]
fn w_svm_of_model_data_bounds_the_gradient_as_in_lemma_4() {
    // ex1-orth (Ass. 1–2 exact): ⟨−∇L, W_mm⟩ ≥ P(W) = (1/n)Σ|ℓ'_i|Δ_iφ_opt(1 − φ_opt) and
    // ‖∇L‖ ≤ 2B²P(W), at random W of norms 1e−2 … 1e2
    let inst = Example1 {
        n: 4,
        t: 3,
        d: 16,
        ..Example1::ex1_orth()
    }
    .generate(&mut rng(24))
    .unwrap();
    let model =
        FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential).unwrap();
    let c = RankOneConstraints::w_svm(&inst.data.view(), model.optimal_tokens()).unwrap();
    let svm = solve_l2(&c, SvmMethod::Dual).unwrap();
    assert!(svm.kkt.passes(1e-8));
    assert_eq!(
        svm.support.len(),
        c.labels.len(),
        "every ex1-orth constraint is a support vector"
    );
    let b = inst.data.assumptions(&inst.decoder, &inst.opt).token_bound;
    let mut r = rng(25);
    let mut dir = vec![0.0; model.dim()];
    for scale in [1e-2, 1e-1, 1.0, 10.0, 100.0] {
        let w = gaussian_vec(&mut r, model.dim(), scale / 16.0);
        let lg = model.gradient_direction(&w, &mut dir);
        let att = model.attention(&w);
        let log_p = logdomain::log_sum_exp(
            (0..inst.data.n)
                .map(|i| -att.margins[i] + att.phi_opt[i].ln() + att.log_one_minus_phi_opt[i]),
        ) - (inst.data.n as f64).ln();
        let along: f64 = -dir.iter().zip(&svm.w).map(|(g, m)| g * m).sum::<f64>();
        assert!(along > 0.0);
        assert!(lg.log_norm + along.ln() >= log_p - 1e-9, "scale {scale}");
        assert!(
            lg.log_norm <= (2.0 * b * b).ln() + log_p + 1e-9,
            "scale {scale}"
        );
    }
}

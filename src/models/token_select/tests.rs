//! Model tests: the joint model's derivatives against forward-mode AD, saturation against
//! closed forms, the data generators' guarantees.

use super::generators::{self, Example1, GaussianJoint};
use super::*;
use crate::attention::logdomain;
use crate::attention::testing::{
    ad_grad_hvp, gaussian_vec, random_data, reference_loss, rel_err, rng,
};
use crate::attention::{FixedDecoder, Loss};
use crate::flow::GradientFlow;
use crate::stats;

#[test]
fn joint_derivatives_match_forward_mode_ad() {
    let mut r = rng(2);
    for loss in [Loss::Exponential, Loss::Logistic] {
        let data = random_data(&mut r);
        let model = JointModel::new(data.clone(), loss);
        let z = gaussian_vec(&mut r, model.dim(), 0.8);
        let v = gaussian_vec(&mut r, model.dim(), 1.0);
        let d = data.d;
        let (g_ad, h_ad) = ad_grad_hvp(
            |x| reference_loss(&data, &x[..d], &x[d..], loss),
            |x| reference_loss(&data, &x[..d], &x[d..], loss),
            &z,
            &v,
        );
        let mut g = vec![0.0; model.dim()];
        let mut h = vec![0.0; model.dim()];
        model.grad(&z, &mut g);
        model.hvp(&z, &v, &mut h);
        let l_ref = reference_loss(&data, &z[..d], &z[d..], loss);
        assert!((model.loss(&z) - l_ref).abs() < 1e-13 * l_ref);
        assert!(
            rel_err(&g, &g_ad) < 1e-10,
            "{loss:?} grad {}",
            rel_err(&g, &g_ad)
        );
        assert!(
            rel_err(&h, &h_ad) < 1e-10,
            "{loss:?} hvp {}",
            rel_err(&h, &h_ad)
        );
    }
}

/// W = c·D̂ on the two-token example, D̂ = (e₁ − e₂)e₁ᵀ/√2: logit gap g = √2 c.
fn two_token_at_gap(g: f64) -> (FixedDecoder, Vec<f64>, Vec<f64>) {
    let inst = generators::two_token();
    let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential).unwrap();
    // column-major: W[0,0] = z[0], W[1,0] = z[1]
    let d_hat = vec![
        std::f64::consts::FRAC_1_SQRT_2,
        -std::f64::consts::FRAC_1_SQRT_2,
        0.0,
        0.0,
    ];
    let w = d_hat
        .iter()
        .map(|x| x * g / std::f64::consts::SQRT_2)
        .collect();
    (model, w, d_hat)
}

#[test]
fn two_token_stays_exact_at_logit_gaps_of_hundreds_to_thousands() {
    use logdomain::{log_sigmoid, softplus};
    for g in [5.0, 40.0, 100.0, 500.0, 1000.0] {
        let (model, w, d_hat) = two_token_at_gap(g);
        // L(g) = e^{−σ(g)}, L* = e^{−1}; L − L* = e^{−1} expm1(σ(−g))
        let s_neg = (-g).exp() / (1.0 + (-g).exp());
        let log_s_neg = log_sigmoid(-g);
        let want_excess = if s_neg > 1e-8 {
            -1.0 + s_neg.exp_m1().ln()
        } else {
            -1.0 + log_s_neg + s_neg / 2.0
        };
        // ∇L = f'(g) D with f' = −e^{−σ(g)} σ(g)σ(−g), ‖D‖ = √2
        let log_sig = log_sigmoid(g);
        let want_norm = -log_sig.exp() + log_sig + log_s_neg + 0.5 * 2f64.ln();
        let mut dir = vec![0.0; 4];
        let lg = model.gradient_direction(&w, &mut dir);
        assert!(
            (lg.log_excess - want_excess).abs() < 1e-12 * want_excess.abs(),
            "g={g}"
        );
        assert!(
            (lg.log_norm - want_norm).abs() < 1e-12 * want_norm.abs(),
            "g={g}"
        );
        assert!(rel_err(&dir, &d_hat.iter().map(|x| -x).collect::<Vec<_>>()) < 1e-15);
        // f'' = e^{−σ}σ'(σ' + σ(g) − σ(−g)) with σ' = σ(g)σ(−g): H D̂ = 2 f'' D̂
        let log_sp = log_sig + log_s_neg;
        let log_f2 = -log_sig.exp() + log_sp + (log_sp.exp() + log_sig.exp() - s_neg).ln();
        let mut h = vec![0.0; 4];
        model.hvp_scaled(&w, &d_hat, lg.log_norm, &mut h);
        let ratio = (2f64.ln() + log_f2 - lg.log_norm).exp();
        let want: Vec<f64> = d_hat.iter().map(|x| x * ratio).collect();
        assert!(rel_err(&h, &want) < 1e-12, "g={g}: {h:?} vs {want:?}");
        let att = model.attention(&w);
        assert!((att.log_one_minus_phi_opt[0] + softplus(g)).abs() < 1e-12 * g);
        assert!(att.phi_opt[0] <= 1.0 && att.margins[0] <= 1.0);
    }
}

#[test]
fn logistic_excess_at_large_gaps_keeps_its_leading_term() {
    let inst = generators::two_token();
    let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Logistic).unwrap();
    let (_, w, _) = two_token_at_gap(800.0);
    // L − L* = ln(1 + σ(−1) expm1(σ(−g))) ≈ σ(−1)e^{−g}
    let want = logdomain::log_sigmoid(-1.0) - 800.0;
    assert!((model.log_excess_loss(&w) - want).abs() < 1e-12 * 800.0);
    let mut dir = vec![0.0; 4];
    let lg = model.gradient_direction(&w, &mut dir);
    // |ℓ'(1)| e^{−g} √2
    let want = logdomain::log_sigmoid(-1.0) - 800.0 + 0.5 * 2f64.ln();
    assert!((lg.log_norm - want).abs() < 1e-12 * 800.0);
}

#[test]
fn saturated_multi_token_model_matches_the_logit_gap_formula() {
    // ex1-orth along a direction with every constraint margin ≥ 1: at scale R the gaps
    // g_k = ⟨W, D_k⟩ are ≥ R and the exact excess is (1/n) Σ_i e^{−γ_o} expm1(δ_i) with
    // δ_i = Σ_t Δ_t e^{−g_t}/(1 + Σ_t e^{−g_t}) — written here from the gaps, not the softmax.
    let inst = Example1 {
        n: 3,
        t: 3,
        d: 10,
        ..Example1::ex1_orth()
    }
    .generate(&mut rng(3))
    .unwrap();
    let model =
        FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential).unwrap();
    let data = &inst.data;
    let d = data.d;
    let dirs: Vec<f64> = {
        // Σ_i x_opt q_iᵀ/(‖x_opt‖²‖q_i‖²) separates here: non-opt tokens ⟂ everything
        let mut w = vec![0.0; d * d];
        for i in 0..data.n {
            let (a, q) = (data.token(i, inst.opt[i]), data.query(i));
            let s = a.iter().map(|x| x * x).sum::<f64>() * q.iter().map(|x| x * x).sum::<f64>();
            for c in 0..d {
                for r in 0..d {
                    w[c * d + r] += a[r] * q[c] / s;
                }
            }
        }
        w
    };
    for scale in [50.0, 300.0, 900.0] {
        let w: Vec<f64> = dirs.iter().map(|x| x * scale).collect();
        let mut log_terms = vec![];
        for i in 0..data.n {
            let o = inst.opt[i];
            let q = data.query(i);
            let logit = |t: usize| -> f64 {
                let x = data.token(i, t);
                (0..d)
                    .map(|c| (0..d).map(|r| x[r] * w[c * d + r]).sum::<f64>() * q[c])
                    .sum()
            };
            let gaps: Vec<f64> = (0..data.t)
                .filter(|&t| t != o)
                .map(|t| logit(o) - logit(t))
                .collect();
            assert!(gaps.iter().all(|&g| g > 0.9 * scale));
            let min_gap = stats::min(gaps.iter());
            // Δ_t = m = 1 for every non-opt token of ex1
            let log_delta = logdomain::log_sum_exp(gaps.iter().map(|g| -g))
                - logdomain::log_sum_exp(gaps.iter().map(|g| -g).chain([0.0]));
            let gamma_o = 1.0;
            // expm1(δ) = δ(1 + δ/2…), δ < e^{−45}: the correction is below 1e−19
            log_terms.push(-gamma_o + log_delta + 0.5 * (-min_gap).exp());
        }
        let want = logdomain::log_sum_exp(log_terms.iter().copied()) - (data.n as f64).ln();
        let got = model.log_excess_loss(&w);
        assert!(
            (got - want).abs() < 1e-12 * want.abs(),
            "R={scale}: {got} vs {want}"
        );
    }
}

#[test]
fn generators_meet_their_guarantees() {
    let ex1 = Example1::ex1().generate(&mut rng(4)).unwrap();
    let again = Example1::ex1().generate(&mut rng(4)).unwrap();
    assert_eq!(ex1, again, "same seed, same instance");
    let a = ex1.data.assumptions(&ex1.decoder, &ex1.opt);
    assert_eq!(a.nonopt_score_spread, 0.0, "Ass. 2 exact");
    assert!(a.equal_nonopt_scores(1e-12));
    assert_eq!((a.gap_min, a.gap_max, a.kappa), (1.0, 1.0, 1.0));
    assert_eq!(
        ex1.data.optimal_tokens(&ex1.decoder, 1e-12).unwrap(),
        ex1.opt
    );

    let orth = Example1::ex1_orth().generate(&mut rng(5)).unwrap();
    let a = orth.data.assumptions(&orth.decoder, &orth.opt);
    assert!(a.rho_orth <= 1e-12, "ρ_orth = {}", a.rho_orth);
    assert_eq!(a.nonopt_score_spread, 0.0);
    // noise norm σ√(d − 1) = √(47/48) on every non-opt token
    let want = (47.0f64 / 48.0).sqrt();
    let x = orth.data.token(0, 1);
    assert!((x.iter().map(|v| v * v).sum::<f64>().sqrt() - want).abs() < 1e-14);

    let random_pos = Example1 {
        opt_position: OptPosition::Random,
        ..Example1::ex1()
    }
    .generate(&mut rng(6))
    .unwrap();
    assert_eq!(
        random_pos
            .data
            .optimal_tokens(&random_pos.decoder, 1e-12)
            .unwrap(),
        random_pos.opt
    );
    assert!(random_pos.opt.iter().any(|&o| o != 0));

    let too_small = Example1 {
        d: 20,
        ..Example1::ex1_orth()
    };
    assert!(too_small.generate(&mut rng(7)).is_err());

    let dm = GaussianJoint::dm().generate(&mut rng(8)).unwrap();
    for i in 0..dm.data.n {
        let x = dm.data.token(i, dm.opt[i]);
        assert_eq!(dm.data.y[i], x[0].signum(), "label = sign⟨u*, x_opt⟩");
    }

    let bad = generators::bad_init();
    let g = bad.data.scores(&bad.decoder);
    assert_eq!(g, vec![1.0, 0.0, 1.0, 0.0]);
    let w_mm = [
        2.0 / 3.0,
        -1.0 / 3.0,
        1.0 / 3.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    ];
    let inner: f64 = generators::bad_direction()
        .iter()
        .zip(&w_mm)
        .map(|(a, b)| a * b)
        .sum();
    assert_eq!(inner, 0.0);
}

#[test]
fn bad_direction_loss_tends_to_the_wrong_limit() {
    let bad = generators::bad_init();
    let model = FixedDecoder::new(bad.data, bad.decoder, Loss::Exponential).unwrap();
    let w: Vec<f64> = generators::bad_direction()
        .iter()
        .map(|x| 60.0 * x)
        .collect();
    // L → (1 + e^{−1})/2 while L* = e^{−1}
    let want = ((1.0 + (-1.0f64).exp()) / 2.0).ln();
    assert!((model.log_loss(&w) - want).abs() < 1e-15);
    assert!((model.log_loss_star() + 1.0).abs() < 1e-15);
    let mut dir = vec![0.0; 9];
    assert!(model.gradient_direction(&w, &mut dir).log_norm < -60.0 / 2f64.sqrt() + 1.0);
}

#[test]
fn joint_attention_matches_the_fixed_decoder_at_the_same_u() {
    let inst = GaussianJoint {
        n: 4,
        d: 8,
        ..GaussianJoint::dm()
    }
    .generate(&mut rng(31))
    .unwrap();
    let joint = JointModel::new(inst.data.clone(), Loss::Exponential);
    let z = gaussian_vec(&mut rng(32), joint.dim(), 1.5);
    let (u, w) = joint.split(&z);
    let att = joint.attention(&z);
    let fixed = FixedDecoder::new(inst.data.clone(), u.to_vec(), Loss::Exponential).unwrap();
    let want = fixed.attention(w);
    assert!(rel_err(&att.margins, &want.margins) < 1e-14);
    assert!(rel_err(&att.phi_opt, &want.phi_opt) < 1e-14);
    assert!(rel_err(&att.log_one_minus_phi_opt, &want.log_one_minus_phi_opt) < 1e-14);
    // exponential loss: ln L = ln((1/n) Σ e^{−m_i})
    let n = inst.data.n as f64;
    let ln_l = logdomain::log_sum_exp(att.margins.iter().map(|m| -m)) - n.ln();
    assert!((ln_l - joint.log_loss(&z)).abs() < 1e-13 * ln_l.abs().max(1.0));
}

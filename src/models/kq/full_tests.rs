use nalgebra::DMatrix;
use num_dual::DualNum;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use super::*;
use crate::attention::testing;
use crate::autodiff::{ad_grad_hvp, rel_err};
use crate::flow::{integrate, Method, OdeConfig, VectorField};
use crate::models::kq::generators::RandomA2;
use crate::models::kq::log_time::LogTimeDescent;
use crate::models::kq::toys;

/// L(K, Q) = (1/n) Σ exp(−γ_iᵀ softmax(X_i KQᵀ z_i)): W = KQᵀ formed in dual numbers and
/// passed to seed 003's loss written from its definition (the independent AD reference).
fn reference_loss<T: DualNum<f64> + Copy>(inst: &Instance, de: usize, z: &[T]) -> T {
    let d = inst.data.d;
    let (k, q) = z.split_at(d * de);
    // column-major W: w[c·d + r] = Σ_a K[r, a] Q[c, a]
    let w: Vec<T> = (0..d * d)
        .map(|idx| {
            let (c, r) = (idx / d, idx % d);
            (0..de).fold(T::from(0.0), |s, a| s + k[r * de + a] * q[c * de + a])
        })
        .collect();
    let u: Vec<T> = inst.decoder.iter().map(|&x| T::from(x)).collect();
    testing::reference_loss(&inst.data, &u, &w, Loss::Exponential)
}

fn gaussian(rng: &mut impl Rng, len: usize, scale: f64) -> Vec<f64> {
    (0..len)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

fn random_a2(seed: u64, d: usize) -> Instance {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    RandomA2 {
        d,
        n: 3,
        tokens: 4,
        ..Default::default()
    }
    .generate(&mut rng)
    .unwrap()
}

#[test]
fn gradient_and_hvp_match_forward_mode_ad() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (inst, de, scale) in [
        (toys::toy3(), 3, 0.7),
        (toys::toy4(), 4, 0.5),
        (random_a2(1, 4), 5, 0.6),
        (random_a2(2, 3), 2, 1.0),
    ] {
        let m = FullKq::new(&inst, de).unwrap();
        let dim = GradientFlow::dim(&m);
        let z = gaussian(&mut rng, dim, scale);
        let v = gaussian(&mut rng, dim, 1.0);
        let (g_ad, h_ad) = ad_grad_hvp(
            |w| reference_loss(&inst, de, w),
            |w| reference_loss(&inst, de, w),
            &z,
            &v,
        );
        let mut g = vec![0.0; dim];
        let mut h = vec![0.0; dim];
        m.grad(&z, &mut g);
        m.hvp(&z, &v, &mut h);
        assert!(rel_err(&g, &g_ad) < 1e-11, "grad {}", rel_err(&g, &g_ad));
        assert!(rel_err(&h, &h_ad) < 1e-10, "hvp {}", rel_err(&h, &h_ad));
        // the loss is the excess over L*
        let l = reference_loss::<f64>(&inst, de, &z);
        let l_star = m.model().log_loss_star().exp();
        assert!((m.loss(&z) + l_star - l).abs() < 1e-13 * l, "loss");
        // the scaled forms agree with the plain ones
        let mut hs = vec![0.0; dim];
        ScaledGradient::hvp_scaled(&m, &z, &v, 3.0, &mut hs);
        let back: Vec<f64> = hs.iter().map(|x| x * 3f64.exp()).collect();
        assert!(rel_err(&back, &h) < 1e-13);
    }
}

#[test]
fn log_time_field_is_e_tau_times_the_gradient_flow() {
    let inst = toys::toy3();
    let m = FullKq::new(&inst, 2).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let z = gaussian(&mut rng, 8, 1.0);
    let u = gaussian(&mut rng, 8, 1.0);
    let f = LogTimeDescent(&m);
    let tau = 5.0;
    let (mut a, mut b) = (vec![0.0; 8], vec![0.0; 8]);
    f.rhs(tau, &z, &mut a);
    m.grad(&z, &mut b);
    let want: Vec<f64> = b.iter().map(|x| -tau.exp() * x).collect();
    assert!(rel_err(&a, &want) < 1e-13);
    f.jvp(tau, &z, &u, &mut a);
    m.hvp(&z, &u, &mut b);
    let want: Vec<f64> = b.iter().map(|x| -tau.exp() * x).collect();
    assert!(rel_err(&a, &want) < 1e-13);
}

#[test]
fn balance_is_conserved_along_the_log_time_flow() {
    let inst = toys::toy3();
    let m = FullKq::new(&inst, 3).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let z0 = gaussian(&mut rng, 12, 0.3);
    let cfg = OdeConfig::new(Method::Bdf, 1e-10, 1e-13);
    let times = [0.0, 1.0, 10.0, 100.0];
    let tr = integrate(&LogTimeDescent(&m), &z0, &times, &cfg, None).unwrap();
    let c0 = m.balance(&z0);
    let zl = tr.state(tr.len() - 1);
    let drift = (m.balance(zl) - &c0).norm();
    let scale = zl.iter().map(|x| x * x).sum::<f64>();
    assert!(drift < 1e-8 * scale.max(1.0), "drift {drift}");
    // the run separated the optimal tokens and heads to the rank-one nuclear solution
    let w = m.combined(zl);
    let wh = normalized_direction(m.model(), &w).unwrap();
    let r = 1.0 / 3f64.sqrt();
    let target = [1.0, r, r, 1.0 / 3.0];
    let err = wh
        .iter()
        .zip(target)
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        .sqrt();
    assert!(err < 0.05, "‖Ŵ − W_*‖ = {err} at τ = 100");
    let mut inv = vec![0.0; 6];
    m.invariants(zl, &mut inv);
    assert!((inv[1] - (m.balance(zl))[(0, 1)]).abs() < 1e-14);
}

#[test]
fn margins_are_homogeneous_and_the_direction_has_unit_margin() {
    let inst = toys::toy4();
    let model =
        FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut w = gaussian(&mut rng, 16, 1.0);
    // a separator plus noise: W* of toy-4 scaled up
    w[0] += 10.0 / 2.4;
    w[5] -= 10.0 / 1.6;
    let c = crate::analysis::svm::RankOneConstraints::w_svm(&inst.data.view(), &inst.opt).unwrap();
    use crate::analysis::svm::MarginConstraints;
    let want = c.margins(&w);
    assert!(rel_err(&margins(&model, &w), &want) < 1e-14);
    let mu = min_margin(&model, &w);
    let w3: Vec<f64> = w.iter().map(|x| 3.0 * x).collect();
    assert!((min_margin(&model, &w3) - 3.0 * mu).abs() < 1e-12 * mu.abs());
    let wh = normalized_direction(&model, &w).unwrap();
    assert!((min_margin(&model, &wh) - 1.0).abs() < 1e-14);
    let neg: Vec<f64> = w.iter().map(|x| -x).collect();
    assert!(normalized_direction(&model, &neg).is_none());
}

#[test]
fn origin_linearization_solves_the_linear_flow() {
    let inst = toys::toy3();
    let m = FullKq::new(&inst, 3).unwrap();
    let g0 = origin_gradient(m.model());
    let lin = OriginLinearization::new(&g0);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let k0 = DMatrix::from_vec(2, 3, gaussian(&mut rng, 6, 1.0));
    let q0 = DMatrix::from_vec(2, 3, gaussian(&mut rng, 6, 1.0));
    let (k, q) = lin.factors(&k0, &q0, 0.0);
    assert!((k - &k0).norm() < 1e-14 && (q - &q0).norm() < 1e-14);
    let (t, h) = (0.7, 1e-5);
    let (kp, qp) = lin.factors(&k0, &q0, t + h);
    let (km, qm) = lin.factors(&k0, &q0, t - h);
    let (k, q) = lin.factors(&k0, &q0, t);
    let dk = (kp - km) / (2.0 * h);
    let dq = (qp - qm) / (2.0 * h);
    assert!((dk - &g0 * &q).norm() < 1e-8);
    assert!((dq - g0.transpose() * &k).norm() < 1e-8);
    // spec §2.6(d): G_0 = (1/n) Σ e^{−γ_nopt − Δ_i/L}(Δ_i/L)(x_opt − x̄_i)z_iᵀ; toy-3 has L = 2,
    // x̄_i = x_opt/2, γ_nopt = 0
    let d1 = 2.0;
    let d2 = 1.0 + 3f64.sqrt();
    let u2 = DMatrix::from_vec(2, 1, vec![0.5, 3f64.sqrt() / 2.0]);
    let u1 = DMatrix::from_vec(2, 1, vec![1.0, 0.0]);
    let want = (&u1 * u1.transpose() * ((-d1 / 2.0).exp() * d1 / 4.0)
        + &u2 * u2.transpose() * ((-d2 / 2.0).exp() * d2 / 4.0))
        / 2.0;
    assert!((&g0 - want).norm() < 1e-14, "{g0}");
}

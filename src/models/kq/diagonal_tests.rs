//! The diagonal models against forward-mode AD (num-dual) of the loss written from its
//! definition, the τ-time Jacobian action against the field's own derivative, and the
//! conserved quantities along a flow.

use num_dual::DualNum;

use super::*;
use crate::attention::{testing, Loss};
use crate::autodiff::{ad_grad_hvp, rel_err};
use crate::flow::{integrate, Method, OdeConfig};
use crate::models::kq::log_time::LogTimeDescent;
use crate::models::kq::toys;

/// L(β) = (1/n) Σ_i exp(−γ_iᵀ softmax(X_i Diag(β) z_i)): seed 003's loss written from its
/// definition at W = Diag(β) (the independent AD reference).
fn reference<T: DualNum<f64> + Copy>(inst: &Instance, beta: &[T]) -> T {
    let d = inst.data.d;
    let w: Vec<T> = (0..d * d)
        .map(|idx| {
            if idx / d == idx % d {
                beta[idx % d]
            } else {
                T::from(0.0)
            }
        })
        .collect();
    let u: Vec<T> = inst.decoder.iter().map(|&x| T::from(x)).collect();
    testing::reference_loss(&inst.data, &u, &w, Loss::Exponential)
}

fn instances() -> Vec<Instance> {
    vec![toys::toy1(), toys::toy2b(), toys::toy4()]
}

fn point(d: usize, k: usize) -> Vec<f64> {
    (0..d)
        .map(|j| 0.3 * ((j + 2 * k) as f64).sin() + 0.1)
        .collect()
}

#[test]
fn wdiag_gradient_and_hvp_match_num_dual() {
    for inst in instances() {
        let loss = DiagonalLoss::new(&inst).unwrap();
        let d = loss.d();
        for k in 0..3 {
            let beta = point(d, k);
            let u = point(d, k + 7);
            let (g_ad, h_ad) =
                ad_grad_hvp(|b| reference(&inst, b), |b| reference(&inst, b), &beta, &u);
            let (mut g, mut h) = (vec![0.0; d], vec![0.0; d]);
            GradientFlow::grad(&loss, &beta, &mut g);
            GradientFlow::hvp(&loss, &beta, &u, &mut h);
            assert!(rel_err(&g, &g_ad) < 1e-12, "{g:?} {g_ad:?}");
            assert!(rel_err(&h, &h_ad) < 1e-11, "{h:?} {h_ad:?}");
            // excess loss + L* = L
            let l = reference(&inst, &beta);
            let total = GradientFlow::loss(&loss, &beta) + loss.log_loss_star().exp();
            assert!((total - l).abs() < 1e-14 * l);
        }
    }
}

fn factored_case<P: Factorization>() {
    for inst in instances() {
        let loss = DiagonalLoss::new(&inst).unwrap();
        let flow = Factored::<P, _>::new(&loss);
        let d = loss.d();
        for k in 0..3 {
            let z = point(2 * d, k);
            let u = point(2 * d, k + 5);
            let f = |x: &[_]| {
                let b: Vec<_> = (0..d).map(|j| beta_dual::<P, _>(x[j], x[d + j])).collect();
                reference(&inst, &b)
            };
            let fh = |x: &[_]| {
                let b: Vec<_> = (0..d).map(|j| beta_dual::<P, _>(x[j], x[d + j])).collect();
                reference(&inst, &b)
            };
            let (g_ad, h_ad) = ad_grad_hvp(f, fh, &z, &u);
            let (mut g, mut h) = (vec![0.0; 2 * d], vec![0.0; 2 * d]);
            GradientFlow::grad(&flow, &z, &mut g);
            GradientFlow::hvp(&flow, &z, &u, &mut h);
            assert!(rel_err(&g, &g_ad) < 1e-12, "{} {g:?} {g_ad:?}", P::NAME);
            assert!(rel_err(&h, &h_ad) < 1e-11, "{} {h:?} {h_ad:?}", P::NAME);
        }
    }
}

/// b(a, c) over dual numbers, from the factorization's constant second derivatives.
fn beta_dual<P: Factorization, T: DualNum<f64> + Copy>(a: T, c: T) -> T {
    let (aa, ac, cc) = P::SECOND;
    // both models are quadratic forms: b = ½(aa·a² + 2ac·ac + cc·c²)
    (a * a * aa + a * c * (2.0 * ac) + c * c * cc) * 0.5
}

#[test]
fn factored_gradients_and_hvps_match_num_dual() {
    // the quadratic form of SECOND reproduces beta() itself
    for (a, c) in [(0.7, -0.3), (1.5, 2.0)] {
        assert!((beta_dual::<KeyQuery, f64>(a, c) - KeyQuery::beta(a, c)).abs() < 1e-15);
        assert!((beta_dual::<PlusMinus, f64>(a, c) - PlusMinus::beta(a, c)).abs() < 1e-15);
    }
    factored_case::<KeyQuery>();
    factored_case::<PlusMinus>();
}

/// Central differences of the field along u against its exact Jacobian action.
fn jvp_vs_fd<V: VectorField>(field: &V, tau: f64, z: &[f64], u: &[f64]) -> f64 {
    let n = z.len();
    let h = 1e-6;
    let (mut p, mut m, mut j) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let zp: Vec<f64> = z.iter().zip(u).map(|(a, b)| a + h * b).collect();
    let zm: Vec<f64> = z.iter().zip(u).map(|(a, b)| a - h * b).collect();
    field.rhs(tau, &zp, &mut p);
    field.rhs(tau, &zm, &mut m);
    field.jvp(tau, z, u, &mut j);
    let fd: Vec<f64> = p.iter().zip(&m).map(|(a, b)| (a - b) / (2.0 * h)).collect();
    rel_err(&j, &fd)
}

#[test]
fn log_time_fields_are_finite_at_huge_tau_and_their_jvps_are_exact() {
    let inst = toys::toy2b();
    let loss = DiagonalLoss::new(&inst).unwrap();
    // on the asymptotic path β ≈ τ·β*₁ (both margins ≈ τ): the t-time gradient underflows
    // for τ > 745, the τ-field stays O(1)
    for tau in [5.0, 800.0, 1e5] {
        let beta = vec![0.01, 0.625 * tau, 0.02, 0.0];
        let u = vec![0.3, -0.2, 0.5, 0.1];
        let reduced = ReducedKq::new(&loss, vec![1.0; 4]);
        let mut dz = vec![0.0; 4];
        reduced.rhs(tau, &beta, &mut dz);
        assert!(dz.iter().all(|x| x.is_finite()) && dz.iter().any(|&x| x != 0.0));
        assert!(jvp_vs_fd(&reduced, tau, &beta, &u) < 1e-6 * tau.max(1.0));
        let w = LogTimeDescent(&loss);
        w.rhs(tau, &beta, &mut dz);
        assert!(dz.iter().all(|x| x.is_finite()) && dz.iter().any(|&x| x != 0.0));
        assert!(jvp_vs_fd(&w, tau, &beta, &u) < 1e-6 * tau.max(1.0));
        let kq = Factored::<KeyQuery, _>::new(&loss);
        let z: Vec<f64> = beta
            .iter()
            .map(|b| b.sqrt())
            .chain(beta.iter().map(|b| b.sqrt()))
            .collect();
        let uz: Vec<f64> = u.iter().chain(&u).copied().collect();
        let f = LogTimeDescent(&kq);
        let mut dz2 = vec![0.0; 8];
        f.rhs(tau, &z, &mut dz2);
        assert!(dz2.iter().all(|x| x.is_finite()));
        assert!(jvp_vs_fd(&f, tau, &z, &uz) < 1e-6 * tau.max(1.0));
    }
}

#[test]
fn raw_wpm_and_reduced_flows_agree_and_conserve() {
    let inst = toys::toy2b();
    let loss = DiagonalLoss::new(&inst).unwrap();
    let (xk, xq) = (vec![0.7, -0.4, 0.5, 0.3], vec![0.2, 0.9, -0.6, 0.1]);
    let (wp, wm) = wpm_matched(&xk, &xq, 1.0).unwrap();
    let kq = Factored::<KeyQuery, _>::new(&loss);
    let pm = Factored::<PlusMinus, _>::new(&loss);
    let beta0 = kq.beta(&factored_state(&xk, &xq));
    let reduced = ReducedKq::new(&loss, ReducedKq::kappa_of(&xk, &xq));
    let taus = [0.0, 1.0, 10.0, 100.0];
    let cfg = OdeConfig::new(Method::Bdf, 1e-11, 1e-13);
    let zk = factored_state(&xk, &xq);
    let zp = factored_state(&wp, &wm);
    let a = integrate(&LogTimeDescent(&kq), &zk, &taus, &cfg, None).unwrap();
    let b = integrate(&LogTimeDescent(&pm), &zp, &taus, &cfg, None).unwrap();
    let c = integrate(&reduced, &beta0, &taus, &cfg, None).unwrap();
    for k in 0..taus.len() {
        let (ba, bb) = (kq.beta(a.state(k)), pm.beta(b.state(k)));
        assert!(rel_err(&ba, &bb) < 1e-7, "{ba:?} {bb:?}");
        assert!(rel_err(&ba, c.state(k)) < 1e-7, "{ba:?} {:?}", c.state(k));
        let mut inv = vec![0.0; 4];
        kq.invariants(a.state(k), &mut inv);
        for j in 0..4 {
            assert!((inv[j] - (xk[j] * xk[j] - xq[j] * xq[j])).abs() < 1e-8);
        }
    }
}

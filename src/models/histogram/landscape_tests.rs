//! Tests of the df landscape: critical points (D1), bad set (R10), KKT (D5), imbalance (R11).

use super::*;
use crate::analysis::linearize::hessian;
use crate::flow::{Descent, GradientFlow};
use crate::models::histogram::data::{task_matrix, Task};
use crate::models::histogram::df::DfFlow;
use crate::models::histogram::testing::{gaussian_vec, rk4};
use crate::models::histogram::theory::{DfClosedForm, DfColumn};
use crate::stats;
use nalgebra::SymmetricEigen;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// D1: at constructed critical points the gradient vanishes, β is as requested, the loss is
/// ½Σ_S μ², and the eigenvalues of the dense Hessian (from the exact hvp) equal the formulas.
#[test]
fn critical_points_and_spectra() {
    let mut rng = ChaCha8Rng::seed_from_u64(40);
    let d = 4;
    for task in [Task::Eq, Task::Lt] {
        let m = task_matrix(&task, d);
        let flow = DfFlow::new(m.clone());
        for beta in [-1.0, 0.0, 0.7] {
            let betas = vec![beta, 0.3, beta, -0.4];
            let direction = DVector::from_vec(gaussian_vec(&mut rng, d, 1.0));
            let saddle = ColumnCritical::Saddle { direction };
            let kinds = vec![
                saddle.clone(),
                ColumnCritical::Minimum { sign: 1.0 },
                ColumnCritical::Minimum { sign: -1.0 },
                ColumnCritical::Minimum { sign: 1.0 },
            ];
            let point = df_critical_point(&m, &betas, &kinds);
            if beta < 0.0 {
                assert!(matches!(point, Err(HistogramError::NoSolution(_))));
                continue;
            }
            let z = point.unwrap();
            let mut g = vec![0.0; z.len()];
            flow.grad(&z, &mut g);
            assert!(g.iter().all(|x| x.abs() <= 1e-14), "gradient {g:?}");
            let mut beta_z = vec![0.0; d];
            flow.invariants(&z, &mut beta_z);
            for (a, b) in beta_z.iter().zip(&betas) {
                assert!((a - b).abs() <= 1e-14);
            }
            let expected_loss = df_critical_loss(&m, &kinds);
            assert!((flow.loss(&z) - expected_loss).abs() <= 1e-14 * expected_loss.max(1.0));
            let mut numeric: Vec<f64> = SymmetricEigen::new(hessian(&flow, &z).unwrap().matrix)
                .eigenvalues
                .iter()
                .copied()
                .collect();
            numeric.sort_by(f64::total_cmp);
            let formula = df_critical_spectrum(&m, &betas, &kinds);
            for (a, b) in numeric.iter().zip(&formula) {
                assert!(
                    (a - b).abs() <= 1e-8,
                    "β = {beta}: {numeric:?} vs {formula:?}"
                );
            }
            let index = formula.iter().filter(|l| **l < -1e-12).count();
            assert_eq!(index, 1, "one saddle column ⇒ index 1");
        }
    }
    // d = 1 with β > 0 has no saddle; (0, 0) with β = 0 has spectrum {±μ}.
    assert!(column_critical_point(
        &[2.0],
        0.5,
        &ColumnCritical::Saddle {
            direction: DVector::from_vec(vec![1.0])
        }
    )
    .is_err());
    let zero = ColumnCritical::Saddle {
        direction: DVector::zeros(1),
    };
    assert_eq!(column_hessian_spectrum(2.0, 0.0, 1, &zero), vec![-2.0, 2.0]);
}

/// R10: the p-solve lands on q·m + ρ̄μv = ε for any q⊥, v (always solvable, δ ≥ 0 at the root
/// for ε = 0 even when δ(p = 0) < 0); the fixed-δ construction has no solution iff δ < 0.
#[test]
fn bad_set_constructions() {
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let d = 5;
    let m = task_matrix(&Task::Lt, d);
    for i in 0..d {
        let m_i = m.column(i);
        for eps in [0.0, 0.01, 0.1] {
            for v in [-2.0, 0.3, 1.0] {
                let q_perp = gaussian_vec(&mut rng, d, 0.05);
                let q = bad_init_along_m(m_i.as_slice(), &q_perp, v, eps).unwrap();
                let value = bad_set_value(q.as_slice(), v, m_i.as_slice());
                assert!((value - eps).abs() <= 1e-13, "value {value:e} vs ε {eps}");
                let col = DfColumn::new(q.as_slice(), v, m_i.as_slice());
                assert!((col.bad_set_value() - eps).abs() <= 1e-13);
                if eps == 0.0 {
                    assert!(
                        col.beta() >= -1e-12,
                        "δ < 0 on the bad set: β = {}",
                        col.beta()
                    );
                }
            }
        }
        let dir = gaussian_vec(&mut rng, d, 1.0);
        for delta in [-0.5, -1e-3] {
            let r = bad_init_with_imbalance(m_i.as_slice(), &dir, 0.8, delta, 0.0);
            assert!(
                matches!(r, Err(HistogramError::NoSolution(_))),
                "δ = {delta}"
            );
        }
        for delta in [0.0, 0.4, 3.0] {
            let q = bad_init_with_imbalance(m_i.as_slice(), &dir, 0.8, delta, 0.0).unwrap();
            let col = DfColumn::new(q.as_slice(), 0.8, m_i.as_slice());
            let mu = m_i.norm();
            assert!((col.beta() / mu - delta).abs() <= 1e-13 * (1.0 + delta));
            assert!(col.bad_set_value().abs() <= 1e-13);
        }
    }
}

/// R10: from a bad init (ε = 0, δ_i ≥ 0) the flow goes to the saddle: at t = 5/min(μρ),
/// |v_i| ≤ 1e-2|v_i(0)|, |p_i| ≤ 1e-2|p_i(0)| and ℓ → ½Σμ_i² within 5% (RK4 of the full flow).
#[test]
fn bad_init_converges_to_saddle() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let d = 5;
    for task in [Task::Eq, Task::Lt] {
        let m = task_matrix(&task, d);
        let mut z0 = vec![0.0; d * (d + 1)];
        for i in 0..d {
            let dir = gaussian_vec(&mut rng, d, 1.0);
            let q = bad_init_with_imbalance(m.column(i).as_slice(), &dir, 1.0, 0.3, 0.0).unwrap();
            z0[i * (d + 1)..i * (d + 1) + d].copy_from_slice(q.as_slice());
            z0[i * (d + 1) + d] = 1.0;
        }
        let cf = DfClosedForm::new(&m, &z0);
        let t_end = 5.0 / stats::min(cf.columns().iter().map(|c| c.mu() * c.imbalance().rho));
        let flow = DfFlow::new(m.clone());
        let (_, z) = rk4(&Descent(&flow), &z0, t_end, 20_000, 20_000)
            .pop()
            .unwrap();
        let z = &z;
        for (i, col) in cf.columns().iter().enumerate() {
            let (q, v) = layout::column(z, d, i);
            let p: f64 = q.iter().zip(m.column(i).iter()).map(|(a, b)| a * b).sum();
            assert!(
                v.abs() <= 1e-2 && p.abs() <= 1e-2 * col.p0().abs(),
                "col {i}: v {v} p {p}"
            );
        }
        let saddle_loss = 0.5 * m.norm_squared();
        assert!(
            (flow.loss(z) / saddle_loss - 1.0).abs() <= 0.05,
            "ℓ = {}",
            flow.loss(z)
        );
        assert!((cf.loss(t_end) / saddle_loss - 1.0).abs() <= 0.05);
    }
}

/// D5: the flow limit minimizes Φ: v_i² = argmin Φ_i (found by Brent on Φ_i') to 1e-10, and the
/// KKT residuals at the limit are ≤ 1e-8 with the β of the initialization.
#[test]
fn limit_satisfies_kkt() {
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    let d = 6;
    for task in [Task::Eq, Task::Lt, Task::Thr { d_thr: 2 }] {
        let m = task_matrix(&task, d);
        for scale in [0.1, 1.0] {
            let z0 = gaussian_vec(&mut rng, d * (d + 1), scale);
            let mut betas = vec![0.0; d];
            DfFlow::new(m.clone()).invariants(&z0, &mut betas);
            let cf = DfClosedForm::new(&m, &z0);
            let mut z = vec![0.0; z0.len()];
            cf.state(cf.onset_time() + 40.0 / cf.alpha(), &mut z);
            for (i, col) in cf.columns().iter().enumerate() {
                let (mu, beta) = (col.mu(), betas[i]);
                let dphi = |u: f64| 0.5 * (1.0 - mu * mu / (u * u)) + 0.5 * beta / u;
                let u_star = brent_root(dphi, 1e-6, 1e6, 1e-14).unwrap();
                assert!((u_star / phi_minimizer(mu, beta) - 1.0).abs() <= 1e-10);
                assert!(phi_column(u_star, mu, beta) < phi_column(u_star * 1.01, mu, beta));
                let v = layout::column(&z, d, i).1;
                assert!(
                    (v * v / u_star - 1.0).abs() <= 1e-10,
                    "v² {} vs u* {u_star}",
                    v * v
                );
            }
            let kkt = kkt_residuals(&m, &z, &betas);
            assert!(kkt.feasibility <= 1e-8, "feasibility {:e}", kkt.feasibility);
            assert!(
                kkt.stationarity.iter().all(|r| *r <= 1e-8),
                "{:?}",
                kkt.stationarity
            );
            assert!(phi(&z, &betas).is_finite());
        }
    }
}

/// R11, E8: the imbalanced init has β = (μ_1δ_1, 0, …) and the late loss slope is
/// −2 min(ρ̄(δ_1), 1) (eq), i.e. α = 1/ρ(δ_1) for δ_1 > 0, not the paper's ρ(δ_1).
#[test]
fn imbalance_sweep_rates() {
    let mut rng = ChaCha8Rng::seed_from_u64(44);
    let d = 4;
    let m = task_matrix(&Task::Eq, d);
    for k in 0..31 {
        let delta_1 = -5.0 + 0.5 * k as f64;
        let z0 = imbalanced_init(&m, delta_1, &mut rng).unwrap();
        let mut betas = vec![0.0; d];
        DfFlow::new(m.clone()).invariants(&z0, &mut betas);
        assert!((betas[0] - delta_1).abs() <= 1e-13 * (1.0 + delta_1.abs()));
        assert!(betas[1..].iter().all(|b| b.abs() <= 1e-15));
        let cf = DfClosedForm::new(&m, &z0);
        let alpha = Imbalance::new(delta_1).rhob.min(1.0);
        assert!((cf.alpha() - alpha).abs() <= 1e-15);
        let t = cf.onset_time() + 60.0 / alpha;
        let slope = cf.loss(t + 0.5).ln() - cf.loss(t - 0.5).ln();
        assert!(
            (slope / (-2.0 * alpha) - 1.0).abs() <= 1e-2,
            "δ_1 = {delta_1}: {slope}"
        );
    }
}

//! Tests of the per-column df theory (spec 000 §2.6, R9, D2–D4).

use super::*;
use crate::analysis::linearize::hessian;
use crate::flow::{Descent, GradientFlow};
use crate::models::histogram::data::{task_matrix, Task};
use crate::models::histogram::df::DfFlow;
use crate::models::histogram::testing::{gaussian_vec, rk4};
use crate::stats;
use nalgebra::SymmetricEigen;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const TASKS: [Task; 3] = [Task::Eq, Task::Lt, Task::Thr { d_thr: 1 }];

#[test]
fn column_map_round_trip() {
    let mut rng = ChaCha8Rng::seed_from_u64(30);
    let d = 5;
    let m = task_matrix(&Task::Lt, d);
    let z0 = gaussian_vec(&mut rng, d * (d + 1), 1.0);
    let cf = DfClosedForm::new(&m, &z0);
    let mut z = vec![0.0; z0.len()];
    cf.state(0.0, &mut z);
    for (a, b) in z.iter().zip(&z0) {
        assert!((a - b).abs() <= 1e-15 * (1.0 + b.abs()), "{a} vs {b}");
    }
    for (i, col) in cf.columns().iter().enumerate() {
        let (q, v) = layout::column(&z0, d, i);
        let (x0, y0) = col.closed_form().initial();
        let p: f64 = q.iter().zip(m.column(i).iter()).map(|(a, b)| a * b).sum();
        assert!((x0 - v / col.mu().sqrt()).abs() <= 1e-15 * x0.abs().max(1.0));
        assert!((y0 - p / col.mu().powf(1.5)).abs() <= 1e-14 * y0.abs().max(1.0));
        assert!((col.closed_form().system().c - col.beta() / col.mu()).abs() <= 1e-15);
    }
}

/// R9(a): the closed-form df state equals an RK4 integration of the full (d² + d)-dim flow, and
/// the closed-form loss equals ℓ_df of the closed-form state (the exact decomposition).
#[test]
fn closed_form_matches_full_flow() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let d = 4;
    let mut worst_state: f64 = 0.0;
    let mut worst_loss: f64 = 0.0;
    for task in TASKS {
        let m = task_matrix(&task, d);
        let flow = DfFlow::new(m.clone());
        for scale in [0.3, 1.0] {
            let z0 = gaussian_vec(&mut rng, d * (d + 1), scale);
            let cf = DfClosedForm::new(&m, &z0);
            let mut z = vec![0.0; z0.len()];
            for (t, z_ode) in rk4(&Descent(&flow), &z0, 10.0, 20_000, 200) {
                cf.state(t, &mut z);
                let err = stats::max(z.iter().zip(&z_ode).map(|(a, b)| (a - b).abs()));
                worst_state = stats::larger(worst_state, err);
                let (loss_cf, loss_direct) = (cf.loss(t), flow.loss(&z));
                if loss_direct > 1e-8 {
                    worst_loss =
                        stats::larger(worst_loss, (loss_cf - loss_direct).abs() / loss_direct);
                }
            }
        }
    }
    assert!(worst_state <= 1e-9, "max |closed − RK4| = {worst_state:e}");
    assert!(
        worst_loss <= 1e-12,
        "loss decomposition rel err {worst_loss:e}"
    );
}

/// R9(b, c): the closed-form loss decays at −2α (local slope where ℓ ≈ 1e-40, within 1%), and
/// ℓ(t)e^{2αt} → Σ_{argmin} K_i within 1% at t* = T + max(40/α, 7/(α₂ − α)).
#[test]
fn loss_rate_and_asymptotic_constant() {
    let mut rng = ChaCha8Rng::seed_from_u64(32);
    let d = 5;
    let mut checked = 0;
    for task in TASKS {
        let m = task_matrix(&task, d);
        for _ in 0..6 {
            let z0 = gaussian_vec(&mut rng, d * (d + 1), 1.0 / (d as f64).sqrt());
            let cf = DfClosedForm::new(&m, &z0);
            let alpha = cf.alpha();
            let mut rates: Vec<f64> = cf
                .columns()
                .iter()
                .map(|c| c.mu() * c.imbalance().rhob)
                .collect();
            rates.sort_by(f64::total_cmp);
            let alpha2 = rates[1];
            if (alpha2 - alpha) / alpha < 0.05 {
                continue;
            }
            // Local slope where ℓ ≈ 1e-40.
            let t40 = cf.onset_time() + (40.0 * 10f64.ln() + cf.loss(0.0).ln()) / (2.0 * alpha);
            let slope = (cf.loss(t40 + 0.5).ln() - cf.loss(t40 - 0.5).ln()) / 1.0;
            assert!(
                (slope / (-2.0 * alpha) - 1.0).abs() <= 1e-2,
                "slope {slope} vs −2α {}",
                -2.0 * alpha
            );
            let t_star = cf.onset_time() + (40.0 / alpha).max(7.0 / (alpha2 - alpha));
            let loss = cf.loss(t_star);
            if loss < 1e-300 {
                continue;
            }
            let k_min: f64 = cf
                .columns()
                .iter()
                .filter(|c| c.mu() * c.imbalance().rhob == alpha)
                .map(|c| c.asymptote().constant)
                .sum();
            let ratio = loss * (2.0 * alpha * t_star).exp() / k_min;
            assert!((ratio - 1.0).abs() <= 1e-2, "ℓe^(2αt)/ΣK = {ratio}");
            assert!((cf.asymptotic_loss(t_star) / loss - 1.0).abs() <= 1e-2);
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} seeds checked");
}

/// R9 (q⊥ = 0 variant): a column with q ∥ m decays at 4Aμ with constant 8μ²A⁴(1 − x_0y_0)²/(ρ²L⁴).
#[test]
fn asymptote_without_orthogonal_part() {
    let m = [0.0, 3.0, 0.0];
    let col = DfColumn::new(&[0.0, 0.9, 0.0], 0.4, &m);
    assert_eq!(col.q_perp0().norm(), 0.0);
    let a = col.asymptote();
    let t = 12.0;
    let ratio = col.loss_at(t) / (a.constant * (-a.rate * t).exp());
    assert!((a.rate - 4.0 * col.imbalance().a * 3.0).abs() <= 1e-12);
    assert!((ratio - 1.0).abs() <= 1e-6, "ratio {ratio}");
}

/// D2: the limit is σ_i(m_i/√(μρ̄), √(μρ̄)) with σ_i = sign(p_i + ρ̄μv_i); ‖q_i(∞)‖² = μρ.
#[test]
fn limit_state_follows_sign_rule() {
    let mut rng = ChaCha8Rng::seed_from_u64(33);
    let d = 5;
    for task in TASKS {
        let m = task_matrix(&task, d);
        let z0 = gaussian_vec(&mut rng, d * (d + 1), 1.0);
        let cf = DfClosedForm::new(&m, &z0);
        let limit = cf.limit_state();
        let mut z = vec![0.0; z0.len()];
        cf.state(60.0 / cf.alpha(), &mut z);
        let err = stats::max(z.iter().zip(&limit).map(|(a, b)| (a - b).abs()));
        assert!(err <= 1e-8, "state at 60/α vs limit: {err:e}");
        assert!(DfFlow::new(m.clone()).loss(&limit) <= 1e-28);
        for (i, col) in cf.columns().iter().enumerate() {
            let (q, v) = layout::column(&limit, d, i);
            let imb = col.imbalance();
            assert_eq!(v.signum(), col.bad_set_value().signum());
            assert!((v * v - col.mu() * imb.rhob).abs() <= 1e-14 * col.mu());
            let q_sq: f64 = q.iter().map(|x| x * x).sum();
            assert!((q_sq - col.mu() * imb.rho).abs() <= 1e-13 * col.mu() * imb.rho);
        }
    }
}

/// R9: after T every column has x_iy_i > 0; T_paper is reported (typically not comparable).
#[test]
fn onset_time_and_kappa() {
    let mut rng = ChaCha8Rng::seed_from_u64(34);
    let d = 10;
    let m = task_matrix(&Task::Eq, d);
    for _ in 0..20 {
        let z0 = gaussian_vec(&mut rng, d * (d + 1), 1.0);
        let cf = DfClosedForm::new(&m, &z0);
        assert!(cf.is_good_init());
        let t_onset = cf.onset_time();
        for k in 1..=20 {
            let t = t_onset + 0.25 * k as f64;
            for col in cf.columns() {
                let s = col.closed_form().at(t);
                assert!(s.x * s.y > 0.0);
            }
        }
        let _ = cf.paper_onset_time();
        // D4: κ_df = max 2Aμ / min μρ̄ is the ratio of the extreme nonzero Hessian eigenvalues at
        // the limit (the d zero modes are the rescaling directions).
        let flow = DfFlow::new(m.clone());
        let eig =
            SymmetricEigen::new(hessian(&flow, &cf.limit_state()).unwrap().matrix).eigenvalues;
        let nonzero: Vec<f64> = eig.iter().copied().filter(|l| l.abs() > 1e-9).collect();
        assert_eq!(nonzero.len(), d * d);
        let max = stats::max(nonzero.iter());
        let min = stats::min(nonzero.iter());
        assert!((min / cf.alpha() - 1.0).abs() <= 1e-8);
        assert!(
            (max / min / cf.kappa() - 1.0).abs() <= 1e-8,
            "{} vs {}",
            max / min,
            cf.kappa()
        );
    }
    // A single column gives κ = 1 + ρ².
    let single = DfClosedForm::new(&DMatrix::identity(1, 1), &[1.3, 0.4]);
    let rho = single.columns()[0].imbalance().rho;
    assert!((single.kappa() - (1.0 + rho * rho)).abs() <= 1e-12 * single.kappa());
}

/// D3: with a small init the columns escape at t_{1/2,i} ≈ ln(2/|L_i|)/μ_i, in decreasing order
/// of μ_i for lt (the loss staircase).
#[test]
fn escape_times_small_init() {
    let mut rng = ChaCha8Rng::seed_from_u64(35);
    let d = 6;
    let m = task_matrix(&Task::Lt, d);
    let z0 = gaussian_vec(&mut rng, d * (d + 1), 1e-4);
    let cf = DfClosedForm::new(&m, &z0);
    for col in cf.columns() {
        let (exact, estimate) = (col.escape_time().unwrap(), col.escape_time_estimate());
        assert!(
            (estimate / exact - 1.0).abs() <= 2e-2,
            "{estimate} vs {exact}"
        );
    }
    // lt: the column with the largest μ (the first) is learned well before the last one.
    let times: Vec<f64> = cf
        .columns()
        .iter()
        .map(|c| c.escape_time().unwrap())
        .collect();
    assert!(times[0] < 0.6 * times[d - 1], "{times:?}");
}

//! The stage-time regression of spec 004 §4 (Theorem 4.1(ii)): on R2, measured transition
//! times t̂_k(α) from root events of the log-layout flow regress onto T_k·Λ with a relative slope
//! error ≤ 5e−4 over α = 1e−16 … 1e−256, including the drop and the opposite-sign re-entry.

use super::algorithm1::{algorithm1, Algorithm1Options, Schedule};
use super::coords::LogCoordinates;
use super::events::{transition_times, Layout, TransitionEvents};
use super::linear::DiagLinear;
use super::log_flow::LogFlow;
use crate::flow::{integrate, linspace, Method, OdeConfig, Trajectory};
use crate::stats;

/// The log-layout run of R2 at α = 10^{−decades} with the spec §4 transition events.
fn run_r2(schedule: &Schedule, decades: f64, method: Method, times: &[f64]) -> (f64, Trajectory) {
    let model = DiagLinear::r2();
    let lambda = decades * 10f64.ln();
    // one fixed θ_0 for every α (spec §1.4), |u0_i| ≠ |v0_i| (A4.3(i))
    let (coords, zeta0) =
        LogCoordinates::from_init(&[0.9, -0.4, 1.2], &[0.3, 0.8, -0.5], -lambda).unwrap();
    let flow = LogFlow::new(&model, coords.clone());
    let events = TransitionEvents::for_schedule(&model, Layout::Log(&coords), schedule, 0.5);
    let cfg = OdeConfig::new(method, 1e-10, 1e-10);
    let scaled: Vec<f64> = times.iter().map(|t| t * lambda).collect();
    let traj = events
        .with_events(false, |e| integrate(&flow, &zeta0, &scaled, &cfg, Some(e)))
        .unwrap();
    (lambda, traj)
}

#[test]
fn r2_transition_times_regress_onto_algorithm1_for_alpha_down_to_1e_256() {
    let model = DiagLinear::r2();
    let schedule = algorithm1(&model, &Algorithm1Options::default()).unwrap();
    let t_th = schedule.stage_times();
    assert_eq!(t_th.len(), 5);
    // the horizon covers the stage-4 offset a_4 ≈ 89 (= O(1)/|g|, g = 0.029) at α = 1e−16
    let horizon = [0.0, 1.1 * t_th[4]];
    let decades = [16.0, 32.0, 64.0, 128.0, 256.0];
    let mut measured: Vec<Vec<f64>> = vec![Vec::new(); 4];
    let mut lambdas = Vec::new();
    for &e in &decades {
        let (lambda, traj) = run_r2(&schedule, e, Method::Tsit45, &horizon);
        let t_hat = transition_times(&traj.events, 4);
        lambdas.push(lambda);
        for k in 0..4 {
            measured[k].push(t_hat[k].unwrap_or_else(|| panic!("α = 1e-{e}: no transition {k}")));
        }
    }
    for k in 1..=4 {
        let slope = crate::analysis::fit::line_fit(&lambdas, &measured[k - 1]).slope;
        let rel = (slope / t_th[k] - 1.0).abs();
        assert!(
            rel <= 5e-4,
            "stage {k}: slope {slope} vs T = {} (rel {rel:e})",
            t_th[k]
        );
        // normalized offsets |g_{i_{k−1}}|·|t̂_k − T_kΛ| are O(1) and Λ-independent over A_conv
        let rate = schedule.stages[k].entered_by.as_ref().unwrap().escape_rate;
        let offsets: Vec<f64> = lambdas
            .iter()
            .zip(&measured[k - 1])
            .map(|(l, t)| rate * (t - t_th[k] * l))
            .collect();
        assert!(
            offsets.iter().all(|o| o.abs() <= 10.0),
            "stage {k}: {offsets:?}"
        );
        let conv = &offsets[..4];
        let (lo, hi) = stats::range(conv);
        let spread = hi - lo;
        assert!(spread <= 0.05, "stage {k}: normalized offsets {offsets:?}");
    }
}

#[test]
fn explicit_and_implicit_solvers_agree_and_stage_one_is_linear_in_log_coordinates() {
    let model = DiagLinear::r2();
    let schedule = algorithm1(&model, &Algorithm1Options::default()).unwrap();
    let t_th = schedule.stage_times();
    let times = linspace(0.0, 1.1 * t_th[4], 401);
    let (lambda, erk) = run_r2(&schedule, 32.0, Method::Tsit45, &times);
    let (_, bdf) = run_r2(&schedule, 32.0, Method::Bdf, &times);
    let (a, b) = (
        transition_times(&erk.events, 4),
        transition_times(&bdf.events, 4),
    );
    for k in 0..4 {
        let (ta, tb) = (a[k].unwrap(), b[k].unwrap());
        assert!(
            (ta / tb - 1.0).abs() <= 1e-6,
            "stage {}: {ta} vs {tb}",
            k + 1
        );
    }
    assert!(bdf.stats.jvp_evals > 0);
    // eq. (8): ln w(t) = ln w(0) + g(0) t up to O(α^c) t for t ≤ 0.8 T_1 Λ
    let g0 = crate::models::diagonal::g_vec(&model, &[0.0; 3]);
    let zeta0 = erk.state(0).to_vec();
    let mut worst = 0.0_f64;
    for k in (0..erk.len()).take_while(|&k| erk.t[k] <= 0.8 * t_th[1] * lambda) {
        for i in 0..3 {
            worst = stats::larger(worst, (erk.state(k)[i] - zeta0[i] - g0[i] * erk.t[k]).abs());
        }
    }
    assert!(
        worst <= 1e-3,
        "stage-1 deviation from linear growth {worst:e}"
    );
}

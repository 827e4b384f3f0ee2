//! Shared by the df-flow scenarios of seed 000 (conservation, thm1-loss-decay, imbalance-sweep,
//! bad-init, near-saddle, limit-kkt, small-init-staircase, gd-vs-flow): the task parameter, the
//! Gaussian initialization, Theorem 2's coordinates of a state, and the comparison of integrated
//! trajectories with the closed form, which is the reference truth of every df check (spec 000
//! §7.7).

use nalgebra::DMatrix;

use crate::analysis::stationary::brent_root;
use crate::analysis::AnalysisError;
use crate::flow::{
    gradient_descent, DiscreteConfig, GradientFlow, Recording, StepRule, Trajectory,
};
use crate::models::histogram::{gd_beta_drift, layout, DfClosedForm};
use crate::scenario::RunError;
use crate::stats;

pub use super::task_param::TaskName;
pub use crate::models::histogram::layout::{gaussian_state, gaussian_vector};

/// An analysis failure as a run error that says which measurement failed.
pub fn analysis_failed(what: &str) -> impl Fn(AnalysisError) -> RunError + '_ {
    move |e| RunError::Other(format!("{what}: {e}"))
}

/// x_i y_i = v_i p_i/μ_i² of column i of z (p_i = q_iᵀm_i): the progress of column i towards
/// its minimizer (0 at the saddle, 1 at the limit; Theorem 2's scaled variables, spec 000
/// §2.5d).
pub fn column_xy(z: &[f64], m: &DMatrix<f64>, i: usize) -> f64 {
    let d = m.nrows();
    let (q, v) = layout::column(z, d, i);
    let m_i = m.column(i);
    let p: f64 = q.iter().zip(m_i.iter()).map(|(a, b)| a * b).sum();
    v * p / m_i.norm_squared()
}

/// max over the samples with t ≤ `t_max` and over all components of |z_ODE − z_closed form|.
pub fn closed_form_error(traj: &Trajectory, closed: &DfClosedForm, t_max: f64) -> f64 {
    let mut exact = vec![0.0; traj.dim];
    stats::max((0..traj.len()).filter(|&k| traj.t[k] <= t_max).map(|k| {
        closed.state(traj.t[k], &mut exact);
        stats::max(traj.state(k).iter().zip(&exact).map(|(a, b)| (a - b).abs()))
    }))
}

/// The time at which the closed-form loss falls to `level`, or `None` if it does not within
/// t ≤ 1e6 (on the bad set the loss stops at the saddle level). The loss is non-increasing
/// along the flow, so the crossing is unique; it is bracketed by doubling and refined by Brent
/// on ln ℓ, which stays well scaled down to 1e-300.
pub fn time_at_loss(closed: &DfClosedForm, level: f64) -> Option<f64> {
    let f = |t: f64| closed.loss(t).ln() - level.ln();
    if f(0.0) <= 0.0 {
        return Some(0.0);
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while f(hi) > 0.0 {
        lo = hi;
        hi *= 2.0;
        if hi > 1e6 {
            return None;
        }
    }
    brent_root(f, lo, hi, 1e-12 * hi).ok()
}

/// The per-column rates μ_iρ̄_i, sorted ascending (α is the first, α₂ the second).
pub fn sorted_rates(closed: &DfClosedForm) -> Vec<f64> {
    let mut r: Vec<f64> = closed
        .columns()
        .iter()
        .map(|c| c.mu() * c.imbalance().rhob)
        .collect();
    r.sort_by(f64::total_cmp);
    r
}

/// T_esc: the last time on a grid of step `dt` up to `t_max` at which some column has
/// x_iy_i < ½, i.e. has not yet left the saddle region (0 if none ever has).
pub fn escape_time(closed: &DfClosedForm, t_max: f64, dt: f64) -> f64 {
    let steps = (t_max / dt).ceil() as usize;
    stats::max(closed.columns().iter().map(|col| {
        let cf = col.closed_form();
        (0..=steps)
            .rev()
            .map(|k| k as f64 * dt)
            .find(|&t| {
                let s = cf.at(t);
                s.x * s.y < 0.5
            })
            .unwrap_or(0.0)
    }))
}

/// Gradient descent with the exact per-step drift of β_i (spec 000 §2.4, `gd_beta_drift`)
/// accumulated beside the measured β_i(k) − β_i(0).
pub struct GdAudit {
    /// The run, every iterate recorded.
    pub traj: Trajectory,
    /// Iteration numbers k.
    pub k: Vec<f64>,
    /// β_i(k) − β_i(0) of the column with the largest final drift.
    pub measured: Vec<f64>,
    /// Σ_{j<k} drift formula of that column.
    pub predicted: Vec<f64>,
    /// max_i |measured − predicted|/max(1, |β_i(0)|) per iterate.
    pub error: Vec<f64>,
    /// max_i |β_i(K) − β_i(0)|/max(1, |β_i(0)|): the size of the effect being checked.
    pub total_drift: f64,
}

pub fn audit_gd(
    flow: &dyn GradientFlow,
    z0: &[f64],
    eta: f64,
    steps: usize,
) -> Result<GdAudit, RunError> {
    let cfg = DiscreteConfig::new(StepRule::Constant { eta }, steps, Recording::Every(1));
    let traj = gradient_descent(flow, z0, &cfg)?;
    let d = layout::alphabet_size(flow.dim());
    let betas: Vec<&Vec<f64>> = traj.invariants.iter().map(|(_, b)| b).collect();
    let scale: Vec<f64> = betas.iter().map(|b| b[0].abs().max(1.0)).collect();
    let mut g = vec![0.0; flow.dim()];
    let mut step_drift = vec![0.0; d];
    let mut accumulated = vec![0.0; d];
    let mut predicted_all = vec![vec![0.0; d]];
    let mut error = vec![0.0];
    for k in 0..traj.len() - 1 {
        flow.grad(traj.state(k), &mut g);
        gd_beta_drift(&g, eta, &mut step_drift);
        accumulated
            .iter_mut()
            .zip(&step_drift)
            .for_each(|(a, s)| *a += s);
        predicted_all.push(accumulated.clone());
        let e = stats::max(
            (0..d).map(|i| (betas[i][k + 1] - betas[i][0] - accumulated[i]).abs() / scale[i]),
        );
        error.push(e);
    }
    let last = traj.len() - 1;
    let drift_of = |i: usize| (betas[i][last] - betas[i][0]).abs() / scale[i];
    // the column with the largest drift (the last of equal ones), NaN-propagating
    let (total_drift, column) =
        stats::worst((0..d).rev().map(|i| (drift_of(i), i))).unwrap_or((f64::NAN, 0));
    Ok(GdAudit {
        measured: betas[column].iter().map(|b| b - betas[column][0]).collect(),
        predicted: predicted_all.iter().map(|p| p[column]).collect(),
        k: (0..traj.len()).map(|k| k as f64).collect(),
        error,
        total_drift,
        traj,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{integrate_flow, linspace, Method, OdeConfig};
    use crate::models::histogram::DfFlow;
    use crate::scenario::Check;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// A NaN in one integrated state fails the closed-form check of the df scenarios instead of
    /// being dropped by the maximum over the samples.
    #[test]
    fn a_nan_state_fails_the_closed_form_check() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let d = 3;
        let m = TaskName::Lt.matrix(d, 0);
        let closed = DfClosedForm::new(&m, &gaussian_state(&mut rng, d, 0.5));
        let mut traj = Trajectory::new(d * (d + 1));
        let mut z = vec![0.0; traj.dim];
        for t in [0.0, 1.0, 2.0] {
            closed.state(t, &mut z);
            traj.t.push(t);
            traj.states.extend(&z);
        }
        let check = |traj: &Trajectory| {
            let error = closed_form_error(traj, &closed, 2.0);
            Check::at_most(
                "ode-closed-form",
                "max |z_ODE − z_closed form|",
                error,
                1e-12,
            )
        };
        assert!(check(&traj).pass);
        traj.states[d + 4] = f64::NAN;
        assert!(!check(&traj).pass);
    }

    #[test]
    fn helpers_agree_with_the_model() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let d = 4;
        let m = TaskName::Lt.matrix(d, 0);
        assert_eq!(m[(3, 0)], 1.0);
        assert_eq!(m[(0, 3)], 0.0);
        let z0 = gaussian_state(&mut rng, d, 0.5);
        let closed = DfClosedForm::new(&m, &z0);
        let flow = DfFlow::new(m.clone());
        let times = linspace(0.0, 3.0, 31);
        let cfg = OdeConfig::new(Method::Tsit45, 1e-10, 1e-12);
        let traj = integrate_flow(&flow, &z0, &times, &cfg).unwrap();
        assert!(closed_form_error(&traj, &closed, 3.0) <= 1e-7);
        // x_iy_i from the state = the closed form's x·y
        let mut z = vec![0.0; z0.len()];
        closed.state(1.5, &mut z);
        for (i, col) in closed.columns().iter().enumerate() {
            let s = col.closed_form().at(1.5);
            assert!((column_xy(&z, &m, i) - s.x * s.y).abs() <= 1e-13);
        }
        let level = 1e-3 * closed.loss(0.0);
        let t = time_at_loss(&closed, level).unwrap();
        assert!((closed.loss(t) / level - 1.0).abs() <= 1e-9, "t = {t}");
        assert_eq!(time_at_loss(&closed, 2.0 * closed.loss(0.0)), Some(0.0));
    }
}

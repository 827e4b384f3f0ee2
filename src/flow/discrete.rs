//! The papers' discrete optimizers on the same [`GradientFlow`] trait, returning the same
//! [`Trajectory`] as the integrators so that plots and checks treat both alike.
//!
//! Time is the accumulated step length t_k = Σ_{j<k} η_j (t = kη for constant steps), which is
//! the clock in which gradient descent approximates the gradient flow.

use serde::{Deserialize, Serialize};

use super::trajectory::{norm, SolverStats, StopReason, Trajectory};
use super::{FlowError, GradientFlow};

/// How the step z_{k+1} = z_k − η_k d_k is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepRule {
    /// Gradient descent, d = ∇ℓ, η constant.
    Constant { eta: f64 },
    /// Normalized gradient descent, d = ∇ℓ/‖∇ℓ‖, η constant.
    Normalized { eta: f64 },
    /// Polyak step η_k = min((ℓ − ℓ*)/‖∇ℓ‖², cap), d = ∇ℓ.
    Polyak { loss_star: f64, cap: f64 },
}

impl StepRule {
    pub fn name(&self) -> &'static str {
        match self {
            StepRule::Constant { .. } => "gd",
            StepRule::Normalized { .. } => "normalized_gd",
            StepRule::Polyak { .. } => "polyak",
        }
    }

    fn validate(&self) -> Result<(), String> {
        let positive = |name: &str, x: f64| {
            if x.is_finite() && x > 0.0 {
                Ok(())
            } else {
                Err(format!("{name} must be positive and finite, got {x}"))
            }
        };
        match *self {
            StepRule::Constant { eta } | StepRule::Normalized { eta } => positive("eta", eta),
            StepRule::Polyak { loss_star, cap } => {
                positive("cap", cap)?;
                if loss_star.is_finite() {
                    Ok(())
                } else {
                    Err(format!("loss_star must be finite, got {loss_star}"))
                }
            }
        }
    }
}

/// Which iterations are kept in the trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recording {
    /// Every k-th iteration (and the last).
    Every(usize),
    /// About `n` iterations log-spaced in k (and 0 and the last): for runs of 10⁶ steps.
    LogSpaced(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DiscreteConfig {
    pub rule: StepRule,
    /// Number of iterations.
    pub steps: usize,
    pub recording: Recording,
    /// The run is stopped as diverged once ℓ exceeds this factor times ℓ(z₀).
    pub divergence_factor: f64,
}

impl DiscreteConfig {
    pub fn new(rule: StepRule, steps: usize, recording: Recording) -> Self {
        DiscreteConfig {
            rule,
            steps,
            recording,
            divergence_factor: 1e8,
        }
    }
}

/// Runs the optimizer from `z0`; records the state, loss, ‖∇ℓ‖ and invariants at the recorded
/// iterations. Divergence and non-finite values are errors naming the step and time.
pub fn gradient_descent<F: GradientFlow + ?Sized>(
    flow: &F,
    z0: &[f64],
    cfg: &DiscreteConfig,
) -> Result<Trajectory, FlowError> {
    cfg.rule.validate().map_err(FlowError::Invalid)?;
    let n = flow.dim();
    if z0.len() != n {
        return Err(FlowError::Invalid(format!(
            "initial state has length {} but the loss has dimension {n}",
            z0.len()
        )));
    }
    let start = std::time::Instant::now();
    let keep = recorded_iterations(cfg.steps, cfg.recording);
    let mut traj = Trajectory::new(n);
    let mut z = z0.to_vec();
    let mut g = vec![0.0; n];
    let loss0 = flow.loss(&z);
    if !loss0.is_finite() {
        return Err(FlowError::NonFinite {
            quantity: "initial loss".into(),
            t: 0.0,
        });
    }
    let mut t = 0.0;
    let mut next_keep = 0;
    let mut evals = 0;
    for k in 0..=cfg.steps {
        if next_keep < keep.len() && keep[next_keep] == k {
            traj.push(t, &z);
            next_keep += 1;
        }
        if k == cfg.steps {
            break;
        }
        let loss = flow.loss(&z);
        flow.grad(&z, &mut g);
        evals += 1;
        let gn = norm(&g);
        if !loss.is_finite() || !gn.is_finite() {
            return Err(FlowError::NonFinite {
                quantity: format!("loss or gradient at step {k}"),
                t,
            });
        }
        if loss > cfg.divergence_factor * loss0.max(f64::MIN_POSITIVE) {
            let eta = match cfg.rule {
                StepRule::Constant { eta } | StepRule::Normalized { eta } => eta,
                StepRule::Polyak { cap, .. } => cap,
            };
            return Err(FlowError::Diverged {
                step: k,
                t,
                loss,
                loss0,
                factor: cfg.divergence_factor,
                eta,
            });
        }
        if gn < f64::MIN_POSITIVE {
            // the gradient is zero, or underflowed below the normal range of f64 (every entry
            // subnormal): a GD or Polyak step no longer moves any entry of z, and the direction
            // ∇ℓ/‖∇ℓ‖ of a normalized step has lost its precision (η/‖∇ℓ‖ may even overflow
            // to ∞, and ∞·0 = NaN). Stationary in floating point: stop here.
            traj.push(t, &z);
            traj.stop = StopReason::Converged { step: k, t };
            break;
        }
        let eta = match cfg.rule {
            StepRule::Constant { eta } | StepRule::Normalized { eta } => eta,
            StepRule::Polyak { loss_star, cap } => ((loss - loss_star) / (gn * gn)).clamp(0.0, cap),
        };
        match cfg.rule {
            // ∇ℓ/‖∇ℓ‖ entry by entry (each ≤ 1): η/‖∇ℓ‖ alone can overflow for a tiny gradient
            StepRule::Normalized { .. } => z
                .iter_mut()
                .zip(&g)
                .for_each(|(zi, gi)| *zi -= eta * (gi / gn)),
            _ => z.iter_mut().zip(&g).for_each(|(zi, gi)| *zi -= eta * gi),
        }
        t += eta;
    }
    traj.record_diagnostics(flow);
    traj.stats = SolverStats {
        method: cfg.rule.name().into(),
        steps: cfg.steps,
        rhs_evals: evals,
        wall_seconds: start.elapsed().as_secs_f64(),
        ..Default::default()
    };
    Ok(traj)
}

/// Sorted distinct iterations 0..=steps to record (always 0 and `steps`); public so that
/// optimizers outside [`gradient_descent`] record on the same schedule.
pub fn recorded_iterations(steps: usize, rec: Recording) -> Vec<usize> {
    let mut v: Vec<usize> = match rec {
        Recording::Every(every) => (0..=steps).step_by(every.max(1)).collect(),
        Recording::LogSpaced(count) => {
            let count = count.max(2);
            let top = (steps.max(1) as f64).ln();
            (0..count)
                .map(|j| (top * j as f64 / (count - 1) as f64).exp().round() as usize)
                .chain([0])
                .collect()
        }
    };
    v.push(steps);
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ℓ = ½ Σ a_i z_i²: GD contracts each coordinate by (1 − η a_i) per step.
    struct Quadratic(Vec<f64>);
    impl GradientFlow for Quadratic {
        fn dim(&self) -> usize {
            self.0.len()
        }
        fn loss(&self, z: &[f64]) -> f64 {
            0.5 * z.iter().zip(&self.0).map(|(z, a)| a * z * z).sum::<f64>()
        }
        fn grad(&self, z: &[f64], g: &mut [f64]) {
            g.iter_mut()
                .zip(z.iter().zip(&self.0))
                .for_each(|(g, (z, a))| *g = a * z);
        }
        fn hvp(&self, _z: &[f64], u: &[f64], out: &mut [f64]) {
            self.grad(u, out);
        }
    }

    #[test]
    fn constant_steps_follow_the_exact_contraction() {
        let q = Quadratic(vec![1.0, 10.0]);
        let cfg = DiscreteConfig::new(StepRule::Constant { eta: 0.05 }, 40, Recording::Every(10));
        let tr = gradient_descent(&q, &[1.0, 1.0], &cfg).unwrap();
        assert_eq!(tr.len(), 5);
        for k in 0..tr.len() {
            let it = 10 * k as i32;
            assert!((tr.t[k] - 0.05 * it as f64).abs() < 1e-12);
            assert!((tr.state(k)[0] - 0.95f64.powi(it)).abs() < 1e-14);
            assert!((tr.state(k)[1] - 0.5f64.powi(it)).abs() < 1e-14);
        }
    }

    #[test]
    fn the_stop_reason_says_whether_every_step_ran() {
        let q = Quadratic(vec![1.0, 10.0]);
        let cfg = DiscreteConfig::new(StepRule::Constant { eta: 0.05 }, 40, Recording::Every(10));
        assert_eq!(
            gradient_descent(&q, &[1.0, 1.0], &cfg).unwrap().stop,
            StopReason::Success
        );
        // η = 1/a lands on the minimum after one step: the gradient is exactly zero there
        let q = Quadratic(vec![2.0]);
        let cfg = DiscreteConfig::new(StepRule::Constant { eta: 0.5 }, 10, Recording::Every(1));
        let tr = gradient_descent(&q, &[1.0], &cfg).unwrap();
        assert_eq!(tr.stop, StopReason::Converged { step: 1, t: 0.5 });
        assert_eq!(tr.last_state(), &[0.0]);
    }

    #[test]
    fn too_large_a_step_is_reported_as_divergence() {
        let q = Quadratic(vec![1.0, 10.0]);
        let cfg = DiscreteConfig::new(StepRule::Constant { eta: 0.3 }, 1000, Recording::Every(1));
        match gradient_descent(&q, &[1.0, 1.0], &cfg) {
            Err(FlowError::Diverged { step, eta, .. }) => {
                // |1 − 3| = 2 per step: loss grows 4× per step, past 1e8 after ≥ 13 steps
                assert!((13..20).contains(&step), "{step}");
                assert_eq!(eta, 0.3);
            }
            other => panic!("expected divergence, got {other:?}"),
        }
    }

    #[test]
    fn normalized_and_polyak_steps() {
        let q = Quadratic(vec![1.0]);
        let cfg = DiscreteConfig::new(StepRule::Normalized { eta: 0.1 }, 5, Recording::Every(1));
        let tr = gradient_descent(&q, &[1.0], &cfg).unwrap();
        assert!((tr.last_state()[0] - 0.5).abs() < 1e-14);
        // Polyak with ℓ* = 0 on a 1-D quadratic: η = ½ a z²/(a z)² = 1/(2a), halves z
        let cfg = DiscreteConfig::new(
            StepRule::Polyak {
                loss_star: 0.0,
                cap: 10.0,
            },
            3,
            Recording::Every(1),
        );
        let tr = gradient_descent(&q, &[1.0], &cfg).unwrap();
        assert!((tr.last_state()[0] - 0.125).abs() < 1e-14);
    }

    #[test]
    fn log_spaced_recording_keeps_ends() {
        let it = recorded_iterations(1_000_000, Recording::LogSpaced(20));
        assert_eq!(it[0], 0);
        assert_eq!(*it.last().unwrap(), 1_000_000);
        assert!(it.len() >= 15 && it.len() <= 21);
    }
}

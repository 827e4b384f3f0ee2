//! Shared by the toy-task figure scenarios (spec 004 §5.2, §7 `fig2-loss` … `diag-gd-vs-flow`):
//! the instance with its Algorithm-1 schedule and the θ_0 shared by every α, the τ grid up to
//! the horizon 1.2·T_last (§5.1), one log-layout run per α, the plateau interiors on which the
//! numerics are held against β_th and loss_th (§4), and the colour and label of each α.

use crate::flow::{linspace, OdeConfig};
use crate::models::diagonal::{BetaLoss, Schedule};
use crate::scenario::{RunContext, RunError};
use crate::stats;

pub use super::basics_common::alpha_label;
use super::common::{alpha_run, AlphaRun, Instance, InstanceName, UserFiles, USER_LABEL};
use super::sweeps_common::Setup;
use crate::instance::Arrays;

/// Palette indices of the α curves, smallest α first (the strongest colours go to the curves
/// closest to the theory, which the plot draws dark and dashed on top); yellow last.
const ALPHA_COLORS: [usize; 7] = [1, 0, 3, 2, 4, 5, 6];

/// An instance with its theory (Algorithm 1) and its initial direction θ_0.
pub struct Toy {
    pub instance: Instance,
    pub schedule: Schedule,
    pub init: (Vec<f64>, Vec<f64>),
    /// T_last: the last finite stage time (spec §5.1 horizon 1.2·T_last).
    pub t_last: f64,
    /// The data and θ_0 as written to `instance.npz`.
    pub arrays: Arrays,
}

impl Toy {
    /// Builds the instance (the built-in `name`, or the user's `files`), runs Algorithm 1 and
    /// takes θ_0 (the seed's or the init file's), as [`Setup::with_files`]: a schedule that
    /// stopped on a failed assumption or a tie has no theory curve to draw, an error here.
    pub fn build(
        name: InstanceName,
        files: &UserFiles,
        ctx: &RunContext,
    ) -> Result<Self, RunError> {
        let setup = Setup::with_files(name, files, ctx)?;
        Ok(Toy {
            t_last: setup.last_time(),
            arrays: setup.instance_arrays(),
            instance: setup.instance,
            schedule: setup.schedule,
            init: setup.init,
        })
    }

    pub fn loss(&self) -> &dyn BetaLoss {
        self.instance.loss()
    }

    /// `samples` equally spaced τ from 0 to `horizon`·T_last.
    pub fn taus(&self, horizon: f64, samples: usize) -> Vec<f64> {
        linspace(0.0, horizon * self.t_last, samples)
    }

    /// The log-layout flow from α θ_0 sampled at `taus`, with the transition events.
    pub fn run(&self, alpha: f64, taus: &[f64], cfg: &OdeConfig) -> Result<AlphaRun, RunError> {
        alpha_run(
            self.loss(),
            &self.init,
            alpha.ln(),
            &self.schedule,
            taus,
            cfg,
        )
    }

    /// The interiors [T_k + δ_k, T_{k+1} − δ_k] of the plateaus that start before `tau_end`,
    /// δ_k = `margin`·(T_{k+1} − T_k) (spec §4, eqs. 9–12 row); the last one ends at `tau_end`
    /// and uses the length T_last·(horizon − 1) = `tau_end` − T_last for its margin.
    pub fn interiors(&self, tau_end: f64, margin: f64) -> Vec<Plateau> {
        self.schedule
            .stages
            .iter()
            .filter(|s| s.t_start < tau_end)
            .map(|s| {
                let end = self.schedule.stage_end(s.k).min(tau_end);
                let delta = margin * (end - s.t_start);
                Plateau {
                    k: s.k,
                    lo: s.t_start + delta,
                    hi: end - delta,
                }
            })
            .collect()
    }
}

/// The interior of plateau k in rescaled time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plateau {
    pub k: usize,
    pub lo: f64,
    pub hi: f64,
}

/// For each interior, the sup of `value(j, k)` over the samples j with τ_j inside it (−∞ for
/// an interior without samples).
pub fn sup_per_plateau(
    interiors: &[Plateau],
    taus: &[f64],
    value: impl Fn(usize, usize) -> f64,
) -> Vec<f64> {
    interiors
        .iter()
        .map(|pl| {
            stats::max_with(
                f64::NEG_INFINITY,
                (0..taus.len())
                    .filter(|&j| pl.lo <= taus[j] && taus[j] <= pl.hi)
                    .map(|j| value(j, pl.k)),
            )
        })
        .collect()
}

/// Whether every measured transition τ̂_k (k = 1..) lies between the interiors it separates,
/// hi_{k−1} < τ̂_k < lo_k. At finite α the transition comes at τ̂_k = T_k + a_k/Λ (spec §3.4,
/// §6 #12); while the lag a_k/Λ exceeds the margin, an interior contains part of a transition
/// and its sup error is the size of the jump whatever α is. Transitions before `tau_end` that
/// were not measured count as misplaced.
pub fn transitions_outside_interiors(
    interiors: &[Plateau],
    tau_hats: &[Option<f64>],
    tau_end: f64,
) -> bool {
    interiors.windows(2).all(|w| {
        let (before, after) = (&w[0], &w[1]);
        match tau_hats.get(after.k - 1).copied().flatten() {
            Some(t) => before.hi < t && t < after.lo,
            None => after.lo >= tau_end,
        }
    })
}

/// The instance's name as written in scenario files ("small").
pub fn instance_label(name: InstanceName, files: &UserFiles) -> String {
    if files.data_file.is_some() {
        return USER_LABEL.to_string();
    }
    serde_json::to_value(name)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Palette index of the j-th of `count` α (sorted from large to small).
pub fn alpha_color(j: usize, count: usize) -> usize {
    ALPHA_COLORS[(count - 1 - j) % ALPHA_COLORS.len()]
}

/// Validates a list of initialization scales: non-empty, each in (0, 1), strictly decreasing
/// (the order of the colours and of the convergence checks).
pub fn check_alphas(alphas: &[f64]) -> Result<(), String> {
    if alphas.is_empty() {
        return Err("need at least one α".into());
    }
    if let Some(a) = alphas
        .iter()
        .find(|a| !(a.is_finite() && **a > 0.0 && **a < 1.0))
    {
        return Err(format!("every α must lie in (0, 1), got {a}"));
    }
    if alphas.windows(2).any(|w| w[1] >= w[0]) {
        return Err("list the α values strictly decreasing".into());
    }
    Ok(())
}

/// The step curve of a per-stage value on [0, `tau_end`]: (T_k, v_k) … (T_{k+1}, v_k), with
/// vertical jumps at the T_k (spec §3.4: loss_th and β_th are step functions).
pub fn step_curve(schedule: &Schedule, tau_end: f64, value: impl Fn(usize) -> f64) -> Curve {
    let mut curve = Curve::default();
    for s in schedule.stages.iter().filter(|s| s.t_start < tau_end) {
        let end = schedule.stage_end(s.k).min(tau_end);
        let v = value(s.k);
        curve.x.extend([s.t_start, end]);
        curve.y.extend([v, v]);
    }
    curve
}

/// Floor of the plateau-error prediction: the integrator's resolution of β with tolerances
/// 1e−10 on ζ (spec §7 `fig8-kq-entries`, §8.3).
pub const PLATEAU_FLOOR: f64 = 1e-8;

/// e_k(τ) = min(m_k(τ), λ_act·(τ − τ_0)) (spec §4 T4.1(i) with τ_0 = T_k): the predicted
/// exponent of the plateau error ‖β_α(τ) − β^k‖ ≈ α^{e_k(τ)}, from the coordinates still
/// growing (m_k) and the stage-B relaxation at the slowest active rate λ_act, which starts at
/// the transition τ_0. Stage 0 has no active block.
pub fn predicted_exponent(schedule: &Schedule, k: usize, tau: f64, relax_from: f64) -> f64 {
    let stage = &schedule.stages[k];
    let relaxation = match stage.diagnostics.active_rates.first() {
        Some(rate) => rate * (tau - relax_from),
        None => f64::INFINITY,
    };
    stage.neglect_exponent(tau).min(relaxation)
}

/// The time of plateau k where the predicted error α^{e_k(τ)} is smallest: the argmax of the
/// concave e_k over [T_k, T_{k+1}] (the last stage: [T_K, T_K + `horizon`]). Unlike τ*_k
/// (argmax of m_k alone, spec §3.4), which is T_k itself when every neglected coordinate only
/// grows, this accounts for the relaxation into θ^k after the transition.
pub fn best_predicted_time(schedule: &Schedule, k: usize, horizon: f64) -> f64 {
    let start = schedule.stages[k].t_start;
    let e = |tau: f64| predicted_exponent(schedule, k, tau, start);
    let (mut lo, mut hi) = (start, schedule.stage_end(k).min(start + horizon));
    for _ in 0..200 {
        let (x1, x2) = (lo + (hi - lo) / 3.0, hi - (hi - lo) / 3.0);
        if e(x1) < e(x2) {
            lo = x1;
        } else {
            hi = x2;
        }
    }
    0.5 * (lo + hi)
}

/// The indices in `within` that belong to the support of some stage, in order of activation
/// (the order of their colours in every figure).
pub fn support_order(schedule: &Schedule, within: std::ops::Range<usize>) -> Vec<usize> {
    let mut order = Vec::new();
    for s in &schedule.stages {
        for &i in &s.support {
            if within.contains(&i) && !order.contains(&i) {
                order.push(i);
            }
        }
    }
    order
}

/// x and y of one plotted curve.
#[derive(Debug, Clone, Default)]
pub struct Curve {
    pub x: Vec<f64>,
    pub y: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::diagonal::{algorithm1, Algorithm1Options, DiagLinear};

    /// R1 (spec §3.6): T = 0, 1, 2, 4, 8; after stage 1, b = (0, 1.5, 0.75, 1, 1.125) and
    /// the active rate of β_0 = 1 with H = I is 2.
    fn r1_toy() -> Toy {
        let model = DiagLinear::r1();
        let schedule = algorithm1(&model, &Algorithm1Options::default()).unwrap();
        Toy {
            instance: Instance::Linear(model),
            schedule,
            init: (vec![1.0; 5], vec![0.5; 5]),
            t_last: 8.0,
            arrays: Arrays::new(),
        }
    }

    #[test]
    fn interiors_and_lagging_transitions() {
        let toy = r1_toy();
        let interiors = toy.interiors(9.6, 0.1);
        let bounds: Vec<(f64, f64)> = interiors.iter().map(|p| (p.lo, p.hi)).collect();
        let expected = [(0.1, 0.9), (1.1, 1.9), (2.2, 3.8), (4.4, 7.6), (8.16, 9.44)];
        assert_eq!(bounds.len(), expected.len());
        for ((lo, hi), (a, b)) in bounds.iter().zip(expected) {
            assert!(
                (lo - a).abs() < 1e-12 && (hi - b).abs() < 1e-12,
                "{bounds:?}"
            );
        }
        let on_time = [Some(1.0), Some(2.0), Some(4.0), Some(8.0)];
        assert!(transitions_outside_interiors(&interiors, &on_time, 9.6));
        // a lag of 0.15 at T_2 stays below δ_2 = 0.2, 0.25 enters interior 2
        let small_lag = [Some(1.0), Some(2.15), Some(4.0), Some(8.0)];
        assert!(transitions_outside_interiors(&interiors, &small_lag, 9.6));
        let big_lag = [Some(1.0), Some(2.25), Some(4.0), Some(8.0)];
        assert!(!transitions_outside_interiors(&interiors, &big_lag, 9.6));
        let missing = [Some(1.0), Some(2.0), None, Some(8.0)];
        assert!(!transitions_outside_interiors(&interiors, &missing, 9.6));
    }

    #[test]
    fn predicted_exponent_and_its_best_time_on_r1() {
        let toy = r1_toy();
        let s = &toy.schedule;
        // m_1(τ) = 2(2 − b_1(τ)) = 2 − τ (coordinate 1 heads for b = 2), relaxation 2(τ − 1)
        let e = predicted_exponent(s, 1, 1.1, 1.0);
        assert!((e - 0.2).abs() < 1e-12, "{e}");
        assert!((predicted_exponent(s, 1, 1.9, 1.0) - 0.1).abs() < 1e-12);
        // counted from a later transition the relaxation term is smaller
        assert!((predicted_exponent(s, 1, 1.1, 1.05) - 0.1).abs() < 1e-12);
        // the two meet at τ = 4/3
        let best = best_predicted_time(s, 1, 10.0);
        assert!((best - 4.0 / 3.0).abs() < 1e-9, "{best}");
    }
}

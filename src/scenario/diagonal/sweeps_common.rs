//! What the α-sweep scenarios of spec 004 §7 share (stage-times, plateau-convergence,
//! log-scale-tracking, rank-staircase, transition-width, raw-vs-log): one instance with its
//! Algorithm-1 schedule and θ_0, α grids given as log10 α or ln α, the predicted error exponent
//! of a plateau and its best-separated time, output grids that contain given times, and
//! labels and colours per α.

use crate::flow::{linspace, OdeConfig};
use crate::models::diagonal::{Schedule, Termination};
use crate::scenario::reduce::{numeric_grid, SweepRun, SweepRuns};
use crate::scenario::sweep::{Seeds, SweepSpec};
use crate::scenario::{InputError, RunContext, RunError, Scenario};
use crate::stats;

use super::common::{alpha_run, shared_schedule, AlphaRun, Instance, InstanceName, UserFiles};
use crate::instance::diagonal::{instance_arrays, DiagonalData, DiagonalInit};
use crate::instance::Arrays;

/// Smallest ||u0_i| − |v0_i|| of θ_0 (Assumption 4.3(i), spec §4).
pub const INIT_MARGIN: f64 = 1e-3;

/// One instance ready for α sweeps: the β-loss, its Algorithm-1 schedule, and the initial
/// direction θ_0 shared by every α (spec §1.4).
pub struct Setup {
    /// The instance's name in tables and checks ("mini", "R2", or "data" for a user's file).
    label: String,
    /// The data the instance was built from (written to `instance.npz`).
    pub data: DiagonalData,
    pub instance: Instance,
    pub schedule: Schedule,
    pub init: (Vec<f64>, Vec<f64>),
}

impl Setup {
    /// Builds the instance — the user's data file, else the built-in `name` — with θ_0 from
    /// the init file (else the seed's) and runs Algorithm 1; a schedule that stopped on a
    /// failed assumption or a tie cannot be swept and is an error.
    pub fn with_files(
        name: InstanceName,
        files: &UserFiles,
        ctx: &RunContext,
    ) -> Result<Self, RunError> {
        let (label, data, instance) = files.instance(name, ctx)?;
        let schedule = match &files.data_file {
            None => shared_schedule(name, ctx)?,
            Some(_) => instance.schedule()?,
        };
        if let Termination::Failed { .. } | Termination::Tie { .. } = schedule.termination {
            return Err(RunError::Other(format!(
                "Algorithm 1 on {label} stopped early: {:?}",
                schedule.termination
            )));
        }
        if schedule.stages.len() < 2 {
            return Err(RunError::Other(format!(
                "Algorithm 1 on {label} found no transition"
            )));
        }
        let init = files.init(instance.loss().p(), INIT_MARGIN, ctx)?;
        Ok(Setup {
            label,
            data,
            instance,
            schedule,
            init: (init.u0, init.v0),
        })
    }

    /// The data and θ_0 as written to `instance.npz`.
    pub fn instance_arrays(&self) -> Arrays {
        let init = DiagonalInit {
            u0: self.init.0.clone(),
            v0: self.init.1.clone(),
        };
        instance_arrays(&self.data, Some(&init))
    }

    /// The log-layout flow from α θ_0 (ln α = `ln_alpha`) sampled at rescaled times `taus`, with
    /// the transition events of the schedule.
    pub fn run(&self, ln_alpha: f64, taus: &[f64], cfg: &OdeConfig) -> Result<AlphaRun, RunError> {
        alpha_run(
            self.instance.loss(),
            &self.init,
            ln_alpha,
            &self.schedule,
            taus,
            cfg,
        )
    }

    /// K: the number of finite transitions T_1 < … < T_K.
    pub fn transitions(&self) -> usize {
        self.schedule.stages.len() - 1
    }

    /// T_K, the start of the last stage.
    pub fn last_time(&self) -> f64 {
        self.schedule.stages.last().map_or(0.0, |s| s.t_start)
    }

    /// |g_{i_{k−1}}(θ^{k−1})|: the escape rate of the saddle left at T_k (k ≥ 1).
    pub fn escape_rate(&self, k: usize) -> f64 {
        self.schedule.stages[k]
            .entered_by
            .as_ref()
            .map_or(f64::NAN, |a| a.escape_rate)
    }

    /// "name of i_{k−1} ± " for stage k ≥ 1, e.g. "VO[2]+".
    pub fn activation_label(&self, k: usize) -> String {
        self.schedule.stages[k]
            .entered_by
            .as_ref()
            .map_or_else(String::new, |a| {
                format!("{}{}", a.name, if a.sign > 0.0 { "+" } else { "−" })
            })
    }

    pub fn label(&self) -> &str {
        &self.label
    }
}

/// Short display name of an instance.
pub fn instance_label(name: InstanceName) -> &'static str {
    match name {
        InstanceName::R1 => "R1",
        InstanceName::R2 => "R2",
        InstanceName::R2Degenerate => "R2-degenerate",
        InstanceName::Mini => "mini",
        InstanceName::Small => "small",
        InstanceName::Paper => "paper",
    }
}

/// ln α of each log10 α.
pub fn ln_alphas(log10_alpha: &[f64]) -> Vec<f64> {
    log10_alpha
        .iter()
        .map(|e| e * std::f64::consts::LN_10)
        .collect()
}

/// "1e-32" for α = 10^{−32}, "e^-2000" otherwise.
pub fn alpha_label(ln_alpha: f64) -> String {
    let decades = ln_alpha / std::f64::consts::LN_10;
    if (decades - decades.round()).abs() < 1e-6 {
        format!("1e{}", decades.round())
    } else {
        format!("e^{}", fmt_short(ln_alpha))
    }
}

fn fmt_short(x: f64) -> String {
    if x == x.round() {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// Refuses an α list that is empty, has α ≥ 1 or non-finite entries, or is not strictly
/// decreasing (Λ = ln 1/α must grow along the list, so "decreasing in Λ" means along the list).
pub fn validate_ln_alphas(
    sc: &Scenario,
    key: &str,
    ln_alpha: &[f64],
    min_len: usize,
) -> Result<(), InputError> {
    if ln_alpha.len() < min_len {
        return Err(sc.invalid(key, format!("need at least {min_len} values of α")));
    }
    if ln_alpha.iter().any(|a| !(a.is_finite() && *a < 0.0)) {
        return Err(sc.invalid(key, "every α must be in (0, 1)"));
    }
    if ln_alpha.windows(2).any(|w| w[1] >= w[0]) {
        return Err(sc.invalid(key, "α must be strictly decreasing (Λ increasing)"));
    }
    Ok(())
}

/// e_k(τ) = min(m_k(τ), λ_act,k·(τ − T_k)): the predicted exponent of ‖β_α(τ) − β^k‖_∞ ≈ α^{e_k}
/// on plateau k. The neglected coordinates contribute α^{m_k} (spec §3.4), and the stage-B
/// relaxation started at T_k decays like e^{−λ_act(t − T_kΛ)} = α^{λ_act(τ − T_k)} with λ_act the
/// smallest eigenvalue of 2H_SS diag|β^k_S| (spec §4 T4.1(i)). Stage 0 has no relaxation.
pub fn predicted_exponent(schedule: &Schedule, k: usize, tau: f64) -> f64 {
    let stage = &schedule.stages[k];
    let relaxation = stage
        .diagnostics
        .active_rates
        .first()
        .map_or(f64::INFINITY, |rate| rate * (tau - stage.t_start));
    stage.neglect_exponent(tau).min(relaxation)
}

/// (τ†_k, e†_k): the time in [T_k, min(T_{k+1}, `end`)] where the predicted exponent e_k is
/// largest, and its value. e_k is a minimum of linear functions of τ, hence concave: ternary
/// search. Unlike the τ*_k of spec §3.4 (argmax of m_k alone), τ†_k accounts for the relaxation
/// after the transition: τ*_k = T_k whenever m_k decreases from T_k, and at T_k the flow is in
/// the middle of the transition (the error there is O(1), not α^{m*_k}).
pub fn best_separated_time(schedule: &Schedule, k: usize, end: f64) -> (f64, f64) {
    let start = schedule.stages[k].t_start;
    let (mut lo, mut hi) = (start, schedule.stage_end(k).min(end));
    let span = hi - lo;
    for _ in 0..200 {
        let (x1, x2) = (lo + (hi - lo) / 3.0, hi - (hi - lo) / 3.0);
        if predicted_exponent(schedule, k, x1) < predicted_exponent(schedule, k, x2) {
            lo = x1;
        } else {
            hi = x2;
        }
    }
    let mut tau = 0.5 * (lo + hi);
    if tau - start <= 1e-12 * span.max(1.0) {
        tau = start; // the maximum is at the start (stage 0: τ† = 0 exactly)
    }
    (tau, predicted_exponent(schedule, k, tau))
}

/// `samples` equally spaced times on [0, `end`] merged with `points` (each in [0, end]);
/// returns the grid and the index of each point in it.
pub fn grid_with_points(end: f64, samples: usize, points: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut grid = linspace(0.0, end, samples);
    grid.extend_from_slice(points);
    grid.sort_by(f64::total_cmp);
    grid.dedup();
    let index = points
        .iter()
        .map(|p| {
            grid.iter()
                .position(|g| g == p)
                .expect("point is in the grid")
        })
        .collect();
    (grid, index)
}

/// max − min of a list (NaN if it is empty or any entry is NaN, so a missing value fails checks).
pub fn spread(values: &[f64]) -> f64 {
    let (min, max) = stats::range(values);
    max - min
}

/// The entry of a list farthest from 1 on the log scale (NaN or a non-positive entry is
/// returned as is, so that it fails any range check).
pub fn farthest_from_one(values: &[f64]) -> f64 {
    let mut worst = 1.0_f64;
    for &v in values {
        if v.is_nan() || v <= 0.0 {
            return v;
        }
        if v.ln().abs() > worst.ln().abs() {
            worst = v;
        }
    }
    worst
}

/// Whether `next` < `previous` (false if either is NaN: a missing value is no decrease).
pub fn decreases(previous: f64, next: f64) -> bool {
    next.partial_cmp(&previous) == Some(std::cmp::Ordering::Less)
}

/// Refuses a grid with fewer than two α ≤ 10^`max_log10` (`checks.offset_log10_alpha_max`): the
/// spread of the offsets over the small α needs two of them.
pub fn require_two_small_alphas(
    sc: &Scenario,
    grid: &[f64],
    max_log10: f64,
) -> Result<(), InputError> {
    if grid.iter().filter(|&&a| a <= max_log10).count() >= 2 {
        return Ok(());
    }
    Err(sc.invalid(
        "sweep.grid.log10_alpha",
        format!(
            "fewer than two α ≤ 1e{max_log10} (checks.offset_log10_alpha_max): the offsets' \
             spread needs two"
        ),
    ))
}

/// The α grid of a sweep whose reduction states a law across α: `sweep.grid.log10_alpha` with at
/// least `min_len` values, every α in (0, 1), strictly decreasing; no grid key besides it and
/// `also_swept` (e.g. `instance`), and one seed, so that the runs are one per (…, α) at one θ_0.
pub fn log10_alpha_sweep(
    sc: &Scenario,
    spec: &SweepSpec,
    min_len: usize,
    also_swept: &[&str],
) -> Result<Vec<f64>, InputError> {
    let grid = numeric_grid(sc, spec, "log10_alpha", min_len)?;
    validate_ln_alphas(sc, "sweep.grid.log10_alpha", &ln_alphas(&grid), min_len)?;
    if let Some(other) = spec
        .grid
        .keys()
        .find(|k| *k != "log10_alpha" && !also_swept.contains(&k.as_str()))
    {
        let swept = std::iter::once("log10_alpha")
            .chain(also_swept.iter().copied())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(sc.invalid(
            &format!("sweep.grid.{other}"),
            format!("this kind sweeps only {swept} (set other parameters with --set)"),
        ));
    }
    let one_seed = match &spec.seeds {
        None | Some(Seeds::Count(1)) => true,
        Some(Seeds::List(v)) => v.len() == 1,
        Some(Seeds::Count(_)) => false,
    };
    if !one_seed {
        return Err(sc.invalid(
            "sweep.seeds",
            "the reduction is a law across α at one seed: give one seed",
        ));
    }
    Ok(grid)
}

/// The runs of an α sweep in order of increasing Λ = ln 1/α (decreasing α).
pub fn runs_by_lambda(runs: &SweepRuns) -> Vec<&SweepRun> {
    let mut v: Vec<&SweepRun> = runs.runs.iter().collect();
    v.sort_by(|a, b| {
        b.grid_value("log10_alpha")
            .total_cmp(&a.grid_value("log10_alpha"))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::diagonal::{algorithm1, Algorithm1Options, DiagLinear};

    #[test]
    fn best_separated_time_balances_neglect_and_relaxation() {
        let schedule = algorithm1(&DiagLinear::r2(), &Algorithm1Options::default()).unwrap();
        for k in 1..schedule.stages.len() - 1 {
            let (tau, e) = best_separated_time(&schedule, k, f64::INFINITY);
            let (t0, t1) = (schedule.stages[k].t_start, schedule.stage_end(k));
            assert!(
                tau > t0 && tau < t1,
                "stage {k}: τ† = {tau} not inside ({t0}, {t1})"
            );
            // the maximum of a concave function: no grid point does better
            let best_on_grid = stats::max(
                linspace(t0, t1, 2001)
                    .into_iter()
                    .map(|t| predicted_exponent(&schedule, k, t)),
            );
            assert!(
                e >= best_on_grid - 1e-9 && e > 0.0,
                "stage {k}: {e} vs {best_on_grid}"
            );
            // the spec's τ*_k (m_k alone) sits at T_k on R2 stage 1, where e_k = 0
            let (tau_star, _) = schedule.best_separated_time(k, f64::INFINITY);
            assert!(predicted_exponent(&schedule, k, tau_star) <= e);
        }
        let (tau_star, _) = schedule.best_separated_time(1, f64::INFINITY);
        assert!((tau_star - schedule.stages[1].t_start).abs() < 1e-9);
    }

    #[test]
    fn grids_labels_fits_and_nan_propagation() {
        let (grid, idx) = grid_with_points(10.0, 11, &[2.5, 4.0]);
        assert_eq!(grid.len(), 12);
        assert_eq!((grid[idx[0]], grid[idx[1]]), (2.5, 4.0));
        assert_eq!(alpha_label(-32.0 * std::f64::consts::LN_10), "1e-32");
        assert_eq!(alpha_label(-2000.0), "e^-2000");
        let fit = crate::analysis::fit::line_fit(&[1.0, 2.0, 3.0], &[3.0, 5.0, 7.0]);
        let (s, c) = (fit.slope, fit.intercept);
        assert!((s - 2.0).abs() < 1e-12 && (c - 1.0).abs() < 1e-12);
        assert!(spread(&[1.0, f64::NAN]).is_nan());
        assert_eq!(spread(&[1.0, 4.0, 2.0]), 3.0);
    }
}

//! `noise-robustness`: the formal test of Assumption 4.5 (spec 004 §4 row A4.5, §7). For each
//! stage k with T_{k+1} < ∞, start the balanced reduced flow (spec §2.4 layout 4) from
//! ũ = u^k + δξ on S_k ∪ {i_k} (signs s̃ = (s^k on S_k, σ_k on i_k), spec §6 #7) with the new
//! coordinate ũ_{i_k} ∈ [1e−6, δ]: every sample must reach ‖β − β^{k+1}‖_∞ ≤ 1e−6, at a hitting
//! time ≈ ln(1/ũ_{i_k})/|g_{i_k}(θ^k)| + C (the escape from the saddle at its unstable rate).

use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use std::path::PathBuf;

use std::cell::RefCell;

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use super::common::{schedule_cost, InstanceName, UserFiles, FIRST_FREE_STREAM};
use crate::flow::{integrate, Events, Method, OdeConfig, SolverStats};
use crate::instance::InstanceFile;
use crate::models::diagonal::{BalancedFlow, BetaLoss, Schedule};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::figures_common::instance_label;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The instance (spec §7: mini).
    pub instance: InstanceName,
    /// Samples per stage and δ (spec §4: 50).
    pub samples: AtLeast<3>,
    /// Perturbation sizes δ (spec §4: 1e−2, 1e−3).
    pub deltas: NonEmpty<f64>,
    /// Smallest initial size of the new coordinate: ũ_{i_k} is log-uniform on [min_new, δ]
    /// (spec §4: 1e−6).
    pub min_new: Positive,
    /// Hitting radius ‖β − β^{k+1}‖_∞ (spec §4: 1e−6).
    pub radius: Positive,
    /// The user's data (Σ, β* or the attention arrays, README "Your own data") instead of
    /// `instance` (the perturbations are drawn from the seed).
    #[serde(default)]
    pub data_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// |slope·|g_{i_k}| − 1| of the fitted hitting time vs ln(1/ũ_{i_k}) (spec §4: 10%).
    pub slope_rel_tol: Positive,
}

/// The user's data file of this run (none: the built-in instance).
fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &None)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    files(p).validate(p.instance, sc)?;
    if p.deltas.iter().any(|d| !(*d > *p.min_new && *d < 1.0)) {
        return Err(sc.invalid("params.deltas", "each δ must lie in (min_new, 1)"));
    }
    Ok(())
}

/// One sample: the new coordinate's initial size and when (if) the flow hit the radius.
struct Sample {
    u_new: f64,
    hit: Option<f64>,
}

/// All samples of one stage and one δ, with the fitted slope of t_hit against ln(1/ũ).
struct Batch {
    k: usize,
    delta: f64,
    samples: Vec<Sample>,
    slope: f64,
    intercept: f64,
}

/// Least-squares line y = a + b x; returns (b, a).
fn fit_line(x: &[f64], y: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx) * (a - mx)).sum();
    let slope = sxy / sxx;
    (slope, my - slope * mx)
}

/// The reduced flow of stage k from one perturbed start; returns the hitting time of
/// ‖β − β^{k+1}‖_∞ = radius (None if not reached by t_max), and adds the solver's work to
/// `work`.
#[allow(clippy::too_many_arguments)]
fn hitting_time(
    loss: &dyn BetaLoss,
    flow: &BalancedFlow<&dyn BetaLoss>,
    eta0: &[f64],
    target: &[f64],
    radius: f64,
    t_max: f64,
    cfg: &OdeConfig,
    work: &mut SolverStats,
) -> Result<Option<f64>, RunError> {
    let beta = RefCell::new(vec![0.0; loss.p()]);
    let distance = |_t: f64, eta: &[f64], out: &mut [f64]| {
        let b = &mut *beta.borrow_mut();
        for (a, &i) in flow.active().iter().enumerate() {
            b[i] = flow.signs()[a] * eta[a].exp();
        }
        let d = stats::max_abs(b.iter().zip(target).map(|(x, y)| x - y));
        out[0] = d - radius;
    };
    let events = Events {
        count: 1,
        func: &distance,
        terminal: true,
    };
    let traj = integrate(flow, eta0, &[0.0, t_max], cfg, Some(&events))?;
    let s = &traj.stats;
    work.method = s.method.clone();
    work.steps += s.steps;
    work.rhs_evals += s.rhs_evals;
    work.jvp_evals += s.jvp_evals;
    work.linear_solver_setups += s.linear_solver_setups;
    work.error_test_failures += s.error_test_failures;
    work.nonlinear_iterations += s.nonlinear_iterations;
    work.nonlinear_failures += s.nonlinear_failures;
    work.wall_seconds += s.wall_seconds;
    Ok(traj.events.first().map(|e| e.t))
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let (_, data, instance) = files(p).instance(p.instance, ctx)?;
    let loss = instance.loss();
    let schedule = instance.schedule()?;
    let mut rng = ctx.rng(FIRST_FREE_STREAM);
    let mut rep = Report::default();
    let mut batches = Vec::new();
    for k in 0..schedule.stages.len() - 1 {
        let (stage, next) = (&schedule.stages[k], &schedule.stages[k + 1]);
        let act = next
            .entered_by
            .as_ref()
            .expect("stage k+1 has an activation");
        let mut active = stage.support.clone();
        let mut signs: Vec<f64> = active.iter().map(|&i| stage.beta[i].signum()).collect();
        active.push(act.index);
        signs.push(act.sign);
        let flow = BalancedFlow::new(loss, active.clone(), signs);
        let rate = act.escape_rate;
        let relax = next
            .diagnostics
            .active_rates
            .first()
            .copied()
            .unwrap_or(rate);
        // escape from the smallest start, then relaxation to the radius, with room to spare
        let t_max =
            10.0 * ((1.0 / *p.min_new).ln() / rate + (1.0 / *p.radius).ln() / relax.min(rate));
        for &delta in p.deltas.iter() {
            let mut samples = Vec::with_capacity(*p.samples);
            let mut work = SolverStats::default();
            for _ in 0..*p.samples {
                let mut eta = Vec::with_capacity(active.len());
                for &i in &stage.support {
                    let xi: f64 = StandardNormal.sample(&mut rng);
                    let u = stage.beta[i].abs().sqrt() + delta * xi;
                    if u <= 0.0 {
                        return Err(RunError::Other(format!(
                            "δ = {delta} clips u^{k} on {} to 0 (the sample leaves the support)",
                            loss.coordinate_name(i)
                        )));
                    }
                    eta.push(2.0 * u.ln());
                }
                let u_new = (rng.random_range(p.min_new.ln()..delta.ln())).exp();
                eta.push(2.0 * u_new.ln());
                let hit = hitting_time(
                    loss, &flow, &eta, &next.beta, *p.radius, t_max, &ctx.ode, &mut work,
                )?;
                samples.push(Sample { u_new, hit });
            }
            rep.stats(format!("stage {k}, δ = {delta:e}: all samples"), &work);
            let (x, y): (Vec<f64>, Vec<f64>) = samples
                .iter()
                .filter_map(|s| s.hit.map(|t| ((1.0 / s.u_new).ln(), t)))
                .unzip();
            let (slope, intercept) = if x.len() >= 2 {
                fit_line(&x, &y)
            } else {
                (f64::NAN, f64::NAN)
            };
            batches.push(Batch {
                k,
                delta,
                samples,
                slope,
                intercept,
            });
        }
    }

    let total: usize = batches.iter().map(|b| b.samples.len()).sum();
    let reached: usize = batches
        .iter()
        .map(|b| b.samples.iter().filter(|s| s.hit.is_some()).count())
        .sum();
    rep.at_least(
        &format!(
            "fraction-perturbed-starts-reaching-beta-beta.{:e}",
            p.radius
        ),
        &format!(
            "fraction of perturbed starts reaching ‖β − β^(k+1)‖_∞ ≤ {:e}",
            p.radius
        ),
        reached as f64 / total as f64,
        1.0,
    )
    .note(format!(
        "A4.5: {reached} of {total} samples ({} stages × {} δ × {})",
        schedule.stages.len() - 1,
        p.deltas.len(),
        p.samples
    ));
    let escape = |k: usize| escape_rate(&schedule, k);
    let worst = stats::max(batches.iter().map(|b| (b.slope * escape(b.k) - 1.0).abs()));
    rep.at_most(
        "over-stages-delta-slope-theta-hitting",
        "max over stages and δ of |slope·|g_(i_k)(θ^k)| − 1| (hitting time vs ln(1/ũ_(i_k)))",
        worst,
        *c.slope_rel_tol,
    )
    .note(
        batches
            .iter()
            .map(|b| {
                format!(
                    "k={} δ={:e}: slope {:.4} vs 1/|g| = {:.4}",
                    b.k,
                    b.delta,
                    b.slope,
                    1.0 / escape(b.k)
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    );

    let mut table = Table::new(&["stage", "delta", "u_new", "ln_inv_u_new", "hitting_time"]);
    for b in &batches {
        for s in &b.samples {
            table.push(vec![
                b.k.into(),
                b.delta.into(),
                s.u_new.into(),
                (1.0 / s.u_new).ln().into(),
                s.hit.unwrap_or(f64::NAN).into(),
            ]);
        }
    }
    rep.series = table;
    rep.derive(
        "slopes",
        batches
            .iter()
            .map(|b| (b.k, b.delta, b.slope, 1.0 / escape(b.k)))
            .collect::<Vec<_>>(),
    );
    rep.figure = Some(figure(p, &schedule, loss, &batches));
    rep.instance = Some(data.to_arrays());
    Ok(rep)
}

/// |g_{i_k}(θ^k)|.
fn escape_rate(schedule: &Schedule, k: usize) -> f64 {
    schedule.stages[k + 1]
        .entered_by
        .as_ref()
        .map_or(f64::NAN, |a| a.escape_rate)
}

fn figure(p: &Params, schedule: &Schedule, loss: &dyn BetaLoss, batches: &[Batch]) -> Figure {
    let mut fig = Figure::new(3).title(format!(
        "Assumption 4.5: hitting time of ‖β − β^(k+1)‖ ≤ {:e} from perturbed starts ({} \
         instance, {} samples per δ)",
        p.radius,
        instance_label(p.instance, &files(p)),
        p.samples
    ));
    for k in 0..schedule.stages.len() - 1 {
        let act = schedule.stages[k + 1].entered_by.as_ref().unwrap();
        let mut panel = LinePanel::new(
            format!(
                "stage {k} → {}: {} (|g| = {:.3e})",
                k + 1,
                loss.coordinate_name(act.index),
                act.escape_rate
            ),
            "ln(1/ũ_(i_k))",
            "hitting time t",
        )
        .legend(if k == 0 {
            LegendPosition::UpperLeft
        } else {
            LegendPosition::None
        });
        let mut all = (Vec::new(), Vec::new());
        for (n, b) in batches.iter().filter(|b| b.k == k).enumerate() {
            let (x, y): (Vec<f64>, Vec<f64>) = b
                .samples
                .iter()
                .filter_map(|s| s.hit.map(|t| ((1.0 / s.u_new).ln(), t)))
                .unzip();
            let (lo, hi) = x
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, c), v| {
                    (a.min(*v), c.max(*v))
                });
            panel = panel
                .series(
                    Series::new(
                        format!("δ = {:e}", b.delta),
                        x.clone(),
                        y.clone(),
                        LineStyle::Markers,
                    )
                    .color(n),
                )
                .series(
                    Series::numerics(
                        format!("fit, δ = {:e}", b.delta),
                        vec![lo, hi],
                        vec![b.intercept + b.slope * lo, b.intercept + b.slope * hi],
                    )
                    .color(n),
                );
            all.0.extend(x);
            all.1.extend(y);
        }
        if !all.0.is_empty() {
            // the theory slope 1/|g| through the centroid of all points
            let n = all.0.len() as f64;
            let (mx, my) = (all.0.iter().sum::<f64>() / n, all.1.iter().sum::<f64>() / n);
            let (lo, hi) = all
                .0
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, c), v| {
                    (a.min(*v), c.max(*v))
                });
            let s = 1.0 / act.escape_rate;
            panel = panel.series(Series::theory(
                "slope 1/|g_{i_k}(θ^k)|",
                vec![lo, hi],
                vec![my + s * (lo - mx), my + s * (hi - mx)],
            ));
        }
        fig = fig.panel(panel);
    }
    fig
}

/// Algorithm 1 and, per stage (at most p) and δ, one flow with hitting events per sample.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let size = p.instance.size();
    let solves = size.p * n(p.deltas.len()) * n(*p.samples);
    schedule_cost("instance", p.instance).ode(
        "samples, deltas",
        solves,
        2.0 * size.p,
        size.grad,
        ctx.ode.method,
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.noise-robustness",
    paper: "004",
    summary: "Assumption 4.5 (formal): from 50 perturbed starts per stage and δ, the balanced \
              reduced flow reaches β^(k+1); hitting time grows like ln(1/ũ_(i_k))/|g_(i_k)|.",
    solver: OdeConfig::new(Method::Bdf, 1e-11, 1e-11),
    validate,
    cost,
    quantities: &[],
    run,
};

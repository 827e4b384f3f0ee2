//! `fig10-perturb-plateau`: the paper's Fig. 3(a)/10, the perturbation test of Assumption 4.4
//! (spec 004 §5.2, §7): at a few times of the α = 1e−32 flow, add N(0, σ²) noise to every
//! non-negligible raw weight and continue; the perturbed flow returns to the unperturbed one.
//! Compared in β space: the noise changes the conserved c_i of the active pairs, so (u, v)
//! settle O(σ) away while β returns (spec §6 #16).

use crate::scenario::param::{AtLeast, Fraction, Positive};
use crate::scenario::param::{Open01, OpenHalf};
use std::path::PathBuf;

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::common::{flow_cost, schedule_cost, InstanceName, UserFiles, FIRST_FREE_STREAM};
use crate::flow::{linspace, Method, OdeConfig};
use crate::plot::{Figure, LegendPosition, LinePanel, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Report, RunContext, RunError, Table};
use crate::stats;

use super::figures_common::{alpha_label, instance_label, Toy};
use super::perturb_common::{continue_flow, entry_colors, perturb, LogState, Window};

/// Where the perturbation times are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Draw {
    /// τ_j in the first half of a plateau k ≥ 1, [T_k + margin·ΔT_k, T_k + ½ΔT_k] (the spec's
    /// pass/fail protocol: the horizon stays in the plateau).
    Plateaus,
    /// τ_j ~ U[0, 1.1·T_last] (the paper's random epochs); only the times at least
    /// margin·ΔT_k from a transition, whose horizon ends inside the plateau, are checked.
    Uniform,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The toy task (spec §5.1).
    pub instance: InstanceName,
    /// Initialization scale of the perturbed run (the paper: 1e−32).
    pub alpha: Open01,
    /// Number of perturbation times (the paper: 5).
    pub perturbations: AtLeast<1>,
    pub draw: Draw,
    /// Noise standard deviation (the paper: 0.05).
    pub sigma: Positive,
    /// Raw weights with |·| above this are perturbed (the paper: 1e−5, spec §6 #14).
    pub threshold: Positive,
    /// Distance of the checked times from a transition, as a fraction of the plateau length.
    pub plateau_margin: OpenHalf,
    /// Horizon t_h = min(rates/λ_min^act, fraction·ΔT_k·Λ) (spec §5.2: 20 and 0.45).
    pub horizon_rates: Positive,
    pub horizon_fraction: Fraction,
    /// Only plateaus whose horizon spans at least this many relaxation times 1/λ_min^act are
    /// drawn and checked: on a shorter plateau the perturbation cannot have decayed by t_h.
    pub min_relaxations: Positive,
    /// Samples per window.
    pub samples: AtLeast<10>,
    /// The user's data (Σ, β* or the attention arrays, README "Your own data") instead of
    /// `instance`.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's initial direction θ_0 = (u0, v0) instead of the seed's (the same for every α).
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// ‖β_pert − β_orig‖_∞ at the horizon (spec §5.2: 1e−3).
    pub max_beta_distance: Positive,
}

/// The user's files of this run (none: the built-in instance and the seed's θ_0).
fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &p.init_file)
}

/// One perturbation and its outcome.
struct Outcome {
    tau: f64,
    k: usize,
    scalars: usize,
    /// t − t_j of the window samples.
    dt: Vec<f64>,
    perturbed: Vec<Vec<f64>>,
    original: Vec<Vec<f64>>,
    /// Pairs perturbed outside the support S_k.
    outside_support: usize,
    /// Whether the window lies inside a resolved plateau interior and only support pairs
    /// were perturbed (checked).
    checked: bool,
}

impl Outcome {
    fn distance_at(&self, j: usize) -> f64 {
        stats::max_abs_diff(&self.perturbed[j], &self.original[j])
    }
    fn final_distance(&self) -> f64 {
        self.distance_at(self.dt.len() - 1)
    }
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let toy = Toy::build(p.instance, &files(p), ctx)?;
    let schedule = &toy.schedule;
    let t_last = toy.t_last;
    let lambda = -p.alpha.ln();
    // the last plateau ends at the figure horizon 1.2·T_last (spec §5.1)
    let plateau_end = |k: usize| schedule.stage_end(k).min(1.2 * t_last);
    let plateau_len = |k: usize| plateau_end(k) - schedule.stages[k].t_start;
    // t_h = min(rates/λ_min^act, fraction·ΔT_k·Λ), and λ_min^act·t_h: how many relaxation
    // times of the plateau it spans (stage 0 has no active pair: nothing to perturb)
    let horizon_of = |k: usize| {
        let by_length = *p.horizon_fraction * plateau_len(k) * lambda;
        match schedule.stages[k].diagnostics.active_rates.first() {
            Some(&rate) => {
                let t_h = (*p.horizon_rates / rate).min(by_length);
                (t_h, rate * t_h)
            }
            None => (by_length, 0.0),
        }
    };
    let resolved = |k: usize| horizon_of(k).1 >= *p.min_relaxations;
    let long_enough: Vec<usize> = (1..schedule.stages.len())
        .filter(|&k| resolved(k))
        .collect();
    if long_enough.is_empty() && p.draw == Draw::Plateaus {
        return Err(RunError::Other(format!(
            "no plateau at α = {:e} spans {} relaxation times 1/λ_min^act",
            p.alpha, p.min_relaxations
        )));
    }
    // on a plateau draw, the pairs still growing (weights ≈ α^{m_k(τ)/2}) must be below the
    // threshold, or the paper's rule would perturb a pair outside the support
    let negligible = (1.0 / *p.threshold).ln();
    let below_threshold =
        |k: usize, tau: f64| schedule.stages[k].neglect_exponent(tau) * lambda > 2.0 * negligible;
    let mut rng = ctx.rng(FIRST_FREE_STREAM);
    let mut taus = Vec::with_capacity(*p.perturbations);
    for _ in 0..100 * *p.perturbations {
        if taus.len() == *p.perturbations {
            break;
        }
        match p.draw {
            Draw::Plateaus => {
                let k = long_enough[rng.random_range(0..long_enough.len())];
                let (start, len) = (schedule.stages[k].t_start, plateau_len(k));
                let tau = rng.random_range(start + *p.plateau_margin * len..start + 0.5 * len);
                if below_threshold(k, tau) {
                    taus.push(tau);
                }
            }
            Draw::Uniform => taus.push(rng.random_range(0.0..1.1 * t_last)),
        }
    }
    if taus.len() < *p.perturbations {
        return Err(RunError::Other(format!(
            "at α = {:e} the growing pairs exceed the threshold {:e} on the first halves of \
             the resolved plateaus",
            p.alpha, p.threshold
        )));
    }
    taus.sort_by(f64::total_cmp);
    let mut grid = vec![0.0];
    grid.extend(taus.iter().copied());
    grid.dedup();
    let main = toy.run(*p.alpha, &grid, &ctx.ode)?;
    let mut rep = Report::default();
    rep.stats("flow to the perturbation times", &main.traj.stats);

    let mut outcomes = Vec::with_capacity(taus.len());
    for &tau in &taus {
        let j = grid.iter().position(|&t| t == tau).unwrap();
        let state = LogState {
            coords: main.coords.clone(),
            zeta: main.traj.state(j).to_vec(),
        };
        let k = schedule.stage_index(tau);
        let stage = &schedule.stages[k];
        let len = plateau_len(k);
        let (t_h, _) = horizon_of(k);
        let t0 = tau * lambda;
        let times: Vec<f64> = linspace(t0, t0 + t_h, *p.samples);
        let pert = perturb(&state, *p.sigma, *p.threshold, &[], &mut rng)?;
        let (tr_o, original) = continue_flow(toy.loss(), &state, &times, &ctx.ode)?;
        let (tr_p, perturbed) = continue_flow(toy.loss(), &pert.state, &times, &ctx.ode)?;
        rep.stats(format!("unperturbed from τ = {tau:.3}"), &tr_o.stats);
        rep.stats(format!("perturbed from τ = {tau:.3}"), &tr_p.stats);
        let margin = *p.plateau_margin * len;
        // A4.4 perturbs within the support: a growing pair already above the threshold would be
        // kicked into its own transition (the paper's rule selects by size, not by support)
        let within_support = pert.pairs.iter().all(|i| stage.support.contains(i));
        let checked = pert.scalars > 0
            && within_support
            && resolved(k)
            && tau >= stage.t_start + margin
            && tau + t_h / lambda <= plateau_end(k) - margin;
        outcomes.push(Outcome {
            tau,
            k,
            scalars: pert.scalars,
            outside_support: pert
                .pairs
                .iter()
                .filter(|i| !stage.support.contains(i))
                .count(),
            dt: times.iter().map(|t| t - t0).collect(),
            perturbed,
            original,
            checked,
        });
    }

    let checked: Vec<&Outcome> = outcomes.iter().filter(|o| o.checked).collect();
    let worst = if checked.is_empty() {
        f64::INFINITY
    } else {
        stats::max(checked.iter().map(|o| o.final_distance()))
    };
    rep.at_most(
        &format!(
            "over-perturbations-beta-pert-beta-orig.{:e}-{}",
            p.alpha, p.sigma
        ),
        &format!(
            "max over perturbations of ‖β_pert − β_orig‖_∞ at the horizon (α = {:e}, σ = {})",
            p.alpha, p.sigma
        ),
        worst,
        *c.max_beta_distance,
    )
    .note(format!(
        "A4.4: θ^k is a strict local minimum on its support, so the perturbed flow returns; \
         {} of {} perturbation times are checked (inside a plateau interior, on a plateau \
         whose horizon spans ≥ {} relaxation times, only pairs of S_k above the \
         threshold); compared in β (c_i of the perturbed \
         pairs changes, spec §6 #16); λ_min^act·t_h per plateau: {}",
        checked.len(),
        outcomes.len(),
        p.min_relaxations,
        (1..schedule.stages.len())
            .map(|k| format!("k={k}: {:.1}", horizon_of(k).1))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .paper_claim(
        "spec §5.2: any plateau, with t_h capped at 0.45·ΔT_k·Λ; where the cap leaves few \
         relaxation times the perturbation has not decayed (small, stage 3 at 1e−32: 1.6 \
         relaxation times, distance 2.7e−2)",
    );
    let mut table = Table::new(&[
        "tau_j",
        "stage",
        "scalars_perturbed",
        "pairs_outside_support",
        "distance_after_perturbation",
        "horizon_t",
        "distance_at_horizon",
        "checked",
    ]);
    for o in &outcomes {
        table.push(vec![
            o.tau.into(),
            o.k.into(),
            o.scalars.into(),
            o.outside_support.into(),
            o.distance_at(0).into(),
            (*o.dt.last().unwrap()).into(),
            o.final_distance().into(),
            (if o.checked { 1.0 } else { 0.0 }).into(),
        ]);
    }
    rep.series = table;
    rep.derive("stage_times", schedule.stage_times());
    rep.figure = Some(figure(p, &toy, &outcomes));
    rep.instance = Some(toy.arrays.clone());
    Ok(rep)
}

fn figure(p: &Params, toy: &Toy, outcomes: &[Outcome]) -> Figure {
    let schedule = &toy.schedule;
    // the entries of the perturbed plateaus, coloured as in every figure of the schedule
    let colors: Vec<(usize, usize)> = entry_colors(schedule, toy.loss().p())
        .into_iter()
        .filter(|(i, _)| {
            outcomes
                .iter()
                .any(|o| schedule.stages[o.k].support.contains(i))
        })
        .collect();
    let mut fig = Figure::new(3).title(format!(
        "Fig. 10 / 3(a): perturbation by N(0, {}²) of the weights above {:e} at {} times, \
         {} ({} instance)",
        p.sigma,
        p.threshold,
        outcomes.len(),
        alpha_label(*p.alpha),
        instance_label(p.instance, &files(p))
    ));
    let mut distances = LinePanel::new(
        "return to the unperturbed flow",
        "t − t_j (unrescaled)",
        "‖β_{pert} − β_{orig}‖_∞",
    )
    .log_y()
    .y_range(1e-11, 1.0)
    .legend(LegendPosition::UpperRight);
    for (n, o) in outcomes.iter().enumerate() {
        let support = &schedule.stages[o.k].support;
        let entries: Vec<(usize, usize)> = colors
            .iter()
            .copied()
            .filter(|(i, _)| support.contains(i))
            .collect();
        let window = Window {
            title: format!(
                "τ_j = {:.2} (stage {}{})",
                o.tau,
                o.k,
                if o.checked { "" } else { ", not checked" }
            ),
            dt: o.dt.clone(),
            perturbed: &o.perturbed,
            original: &o.original,
            entries,
            levels: None,
        };
        fig = fig.panel(window.panel(toy.loss(), (n == 0).then_some(colors.as_slice())));
        let d: Vec<f64> = (0..o.dt.len()).map(|j| o.distance_at(j)).collect();
        let color = n % 6;
        distances = distances.series(
            Series::numerics(format!("τ_j = {:.2}", o.tau), o.dt.clone(), d.clone()).color(color),
        );
        // the slowest relaxation of the plateau (spec §2.5): d(0)·e^{−λ_min^act t}
        if let Some(rate) = schedule.stages[o.k].diagnostics.active_rates.first() {
            let label = if n + 1 == outcomes.len() {
                "d(0)·exp(−λ_min^act t)"
            } else {
                ""
            };
            let decay = o.dt.iter().map(|t| d[0] * (-rate * t).exp()).collect();
            distances = distances.series(Series::theory(label, o.dt.clone(), decay).color(color));
        }
    }
    fig.panel(distances)
}

/// Algorithm 1, the unperturbed run and one perturbed window per perturbation time, `samples`
/// each.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let runs = n(*p.perturbations) + 1.0;
    schedule_cost("instance", p.instance).and(flow_cost(
        "perturbations, samples",
        p.instance,
        runs,
        n(*p.samples),
        ctx.ode.method,
    ))
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.fig10-perturb-plateau",
    paper: "004",
    summary: "Fig. 3(a)/10, Assumption 4.4: weights perturbed on plateaus of the α = 1e−32 flow \
              return to the unperturbed trajectory (compared in β).",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
    validate: |p, _, sc| files(p).validate(p.instance, sc).map(drop),
    cost,
    quantities: &[],
    run,
};

//! `rank-staircase`: Theorem 1.1 / 4.1 "support grows by at most one per stage" and, for the
//! attention head, "at most one of rank(W_K W_Qᵀ), rank(W_V W_Oᵀ) changes per stage, by at most
//! +1" (spec 004 §4 row "rank staircase", §7). At the best-separated time τ†_k of each plateau the
//! entries of β above the α-adaptive threshold thr_k = α^{m_k(τ†_k)/2} are exactly S_k; the
//! paper-style fixed threshold 1e−5 is reported beside it.

use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::param::{Negative, NonNegative};
use serde::{Deserialize, Serialize};

use std::path::PathBuf;

use super::common::{sampled_run_cost, InstanceName, UserFiles};
use crate::flow::{Method, OdeConfig};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::Cost;
use crate::scenario::reduce::{SweepRuns, SweptKind};
use crate::scenario::registry::Kind;
use crate::scenario::report::Cell;
use crate::scenario::sweep::SweepSpec;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::sweeps_common::{
    alpha_label, best_separated_time, grid_with_points, log10_alpha_sweep, runs_by_lambda, Setup,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub instance: InstanceName,
    /// log10 α of this run (the sweep sets it from `sweep.grid.log10_alpha`).
    pub log10_alpha: Negative,
    /// How far past T_K the last plateau is followed, in τ.
    pub final_stage_span: Positive,
    /// Output samples per run (the step plots).
    pub samples: AtLeast<2>,
    /// The paper-style fixed threshold (Fig. 11 protocol "non-negligible"), reported only.
    pub fixed_threshold: Positive,
    /// The user's data (Σ, β* or the attention arrays, README "Your own data") instead of
    /// `instance`; every run of the sweep uses it.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's initial direction θ_0 = (u0, v0) instead of the seed's (the same for every α).
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// α is eligible for stage k when thr_k ≤ this · min_{i∈S_k}|β^k_i| (spec §4: 1e−3).
    pub eligibility: Positive,
    /// Largest number of indices a stage may add to the counted set (Theorem 1.1: 1).
    pub max_added: NonNegative,
}

fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &p.init_file)
}

/// Any α grid will do (one α may cover every stage); it must be an α grid.
fn validate_sweep(
    _: &Params,
    _: &Checks,
    spec: &SweepSpec,
    sc: &Scenario,
) -> Result<(), InputError> {
    log10_alpha_sweep(sc, spec, 1, &[]).map(|_| ())
}

/// Indices of β above a threshold.
fn counted(beta: &[f64], threshold: f64) -> Vec<usize> {
    (0..beta.len())
        .filter(|&i| beta[i].abs() > threshold)
        .collect()
}

/// (rank_KQ, rank_VO) of a set of β-indices for the attention head; (|set|, 0) otherwise.
fn ranks(setup: &Setup, set: &[usize]) -> (usize, usize) {
    match setup.instance.attention() {
        Some(head) => {
            let kq = set.iter().filter(|&&i| head.is_kq(i)).count();
            (kq, set.len() - kq)
        }
        None => (set.len(), 0),
    }
}

/// One α: at τ†_k of every stage, the counted set against S_k (`counts.csv`, with eligibility
/// and whether the counted set — and the fixed-threshold one — equals S_k), the per-α laws
/// (counted set = S_k where eligible; at most `max_added` new indices and at most one rank
/// change of +1 between consecutive eligible stages), and the rank step curves (`series.csv`).
fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let setup = Setup::with_files(p.instance, &files(p), ctx)?;
    let schedule = &setup.schedule;
    let stages = schedule.stages.len();
    let tau_end = setup.last_time() + *p.final_stage_span;
    let best: Vec<(f64, f64)> = (0..stages)
        .map(|k| best_separated_time(schedule, k, tau_end))
        .collect();
    // the adaptive threshold uses the neglect exponent m_k at τ†_k (the entries it separates
    // from are O(α^{m_k}); the relaxation error of the support does not change the count)
    let m_best: Vec<f64> = best
        .iter()
        .map(|b| schedule.neglect_exponent(b.0))
        .collect();
    let points: Vec<f64> = best.iter().map(|b| b.0).collect();
    let (taus, index) = grid_with_points(tau_end, *p.samples, &points);
    let is_attention = setup.instance.attention().is_some();
    let la = *p.log10_alpha * std::f64::consts::LN_10;
    let mut rep = Report {
        series: Table::new(&[
            "tau",
            "rank_KQ",
            "rank_VO",
            "rank_KQ_fixed",
            "rank_VO_fixed",
            "rank_KQ_th",
            "rank_VO_th",
        ]),
        ..Default::default()
    };
    let mut counts = Table::new(&[
        "k",
        "tau_best",
        "threshold",
        "eligible",
        "count",
        "support_size",
        "count_fixed",
        "counted_is_support",
        "fixed_is_support",
    ]);
    let (mut mismatches, mut tested, mut too_many_added, mut block_violations) = (0, 0, 0, 0);
    let mut max_added = 0usize;
    let mut fixed_mismatches = 0;
    let run = setup.run(la, &taus, &ctx.ode)?;
    rep.stats(format!("α={}", alpha_label(la)), &run.traj.stats);
    let thresholds: Vec<f64> = m_best.iter().map(|m| (0.5 * m * la).exp()).collect();
    let mut previous: Option<Vec<usize>> = None;
    for k in 0..stages {
        let stage = &schedule.stages[k];
        // +∞ for an empty support: no entry too small to resolve
        let smallest = stats::min_with(
            f64::INFINITY,
            stage.support.iter().map(|&i| stage.beta[i].abs()),
        );
        let eligible = thresholds[k] <= *c.eligibility * smallest;
        let beta = run.beta(index[k]);
        let set = counted(&beta, thresholds[k]);
        let fixed = counted(&beta, *p.fixed_threshold);
        fixed_mismatches += usize::from(fixed != stage.support);
        let flag = |b: bool| -> Cell { f64::from(u8::from(b)).into() };
        counts.push(vec![
            k.into(),
            best[k].0.into(),
            thresholds[k].into(),
            flag(eligible),
            set.len().into(),
            stage.support.len().into(),
            fixed.len().into(),
            flag(set == stage.support),
            flag(fixed == stage.support),
        ]);
        if !eligible {
            previous = None;
            continue;
        }
        tested += 1;
        mismatches += usize::from(set != stage.support);
        if let Some(prev) = previous.as_ref() {
            let added = set.iter().filter(|i| !prev.contains(i)).count();
            max_added = max_added.max(added);
            too_many_added += usize::from(added as f64 > *c.max_added);
            let (a, b) = (ranks(&setup, prev), ranks(&setup, &set));
            let changed = usize::from(a.0 != b.0) + usize::from(a.1 != b.1);
            let grew_too_much = b.0 > a.0 + 1 || b.1 > a.1 + 1;
            block_violations += usize::from(changed > 1 || grew_too_much);
        }
        previous = Some(set);
    }
    // step curves: the adaptive threshold α^{m_k(τ)/2} of the theory's stage at τ (equal
    // to thr_k at τ†_k; it follows the neglected entries as they grow or shrink)
    let tau = run.taus();
    let mut curves = [(); 6].map(|_| Vec::with_capacity(tau.len()));
    for (s, &t) in tau.iter().enumerate() {
        let k = schedule.stage_index(t);
        let beta = run.beta(s);
        let threshold = (0.5 * schedule.neglect_exponent(t) * la).exp();
        let num = ranks(&setup, &counted(&beta, threshold));
        let fixed = ranks(&setup, &counted(&beta, *p.fixed_threshold));
        let th = ranks(&setup, &schedule.stages[k].support);
        let values = [num.0, num.1, fixed.0, fixed.1, th.0, th.1].map(|v| v as f64);
        let mut row = vec![t.into()];
        row.extend(values.iter().map(|&v| v.into()));
        rep.series.push(row);
        for (curve, v) in curves.iter_mut().zip(values) {
            curve.push(v);
        }
    }
    rep.at_most(
        "eligible-alpha-counted-set",
        "eligible (α, k) with counted set ≠ S_k",
        mismatches as f64,
        0.0,
    )
    .note(format!(
        "{tested} eligible stages k at α = {}; count #{{i : |β_i(τ†_k)| > α^(m_k(τ†_k)/2)}}",
        alpha_label(la)
    ))
    .paper_claim(
        "spec §4 counts at τ*_k = argmax m_k, which is T_k (mid-transition) on every mini \
         plateau; τ†_k = argmax min(m_k, λ_act(τ − T_k)) is used",
    );
    rep.at_most(
        "consecutive-eligible-stages-adding-more-than",
        "consecutive eligible stages adding more than max_added indices",
        too_many_added as f64,
        0.0,
    )
    .note(format!(
        "largest number of indices added: {max_added} (Theorem 1.1: ≤ 1)"
    ));
    if is_attention {
        rep.at_most(
            "stages-where-both-ranks-change-or",
            "stages where both ranks change or one grows by more than 1",
            block_violations as f64,
            0.0,
        )
        .note("rank W_K W_Qᵀ = #KQ entries, rank W_V W_Oᵀ = #VO entries above the threshold");
    }
    rep.derive("eligible_stages", tested);
    rep.derive("max_added", max_added);
    rep.derive("is_attention", u8::from(is_attention));
    rep.derive("fixed_threshold_mismatches", fixed_mismatches);
    rep.derive(
        "fixed_threshold_note",
        format!(
            "count at τ†_k with the paper's fixed {:e} differs from |S_k| at {fixed_mismatches} \
             of {stages} stages (reported, not checked)",
            p.fixed_threshold,
        ),
    );
    rep.tables.push(("counts".into(), counts));
    rep.figure = Some(
        Figure::new(1)
            .title(format!(
                "Rank staircase: {}, α = {}",
                setup.label(),
                alpha_label(la)
            ))
            .panel(panel(
                setup.label(),
                la,
                &tau,
                curves,
                is_attention,
                LegendPosition::UpperLeft,
            )),
    );
    rep.instance = Some(setup.instance_arrays());
    Ok(rep)
}

fn title(instance: &str) -> String {
    format!(
        "Rank staircase on {instance}: ranks of W_K W_Qᵀ and W_V W_Oᵀ vs τ (threshold \
         α^(m_k(τ)/2) solid, fixed 1e−5 dotted, Algorithm 1 dashed)"
    )
}

/// Across α: every stage is eligible at some α of the sweep (so every stage was counted); the
/// combined tables, the fixed-threshold tally, and the step plots of every α.
fn reduce(p: &Params, c: &Checks, runs: &SweepRuns) -> Result<Report, RunError> {
    let other = |e: String| RunError::Other(e);
    let sorted = runs_by_lambda(runs);
    let mut eligible_stages: Vec<bool> = Vec::new();
    let (mut fixed_mismatches, mut pairs, mut tested) = (0usize, 0usize, 0usize);
    let mut panels = Vec::new();
    for (j, run) in sorted.iter().enumerate() {
        let counts = run.table("counts").map_err(other)?;
        let eligible = counts.column("eligible").map_err(other)?;
        if eligible_stages.is_empty() {
            eligible_stages = vec![false; eligible.len()];
        }
        if eligible.len() != eligible_stages.len() {
            return Err(other(format!(
                "{}: other stages than the first run's",
                counts.path.display()
            )));
        }
        for (seen, &e) in eligible_stages.iter_mut().zip(&eligible) {
            *seen |= e == 1.0;
        }
        tested += eligible.iter().filter(|&&e| e == 1.0).count();
        let fixed = counts.column("fixed_is_support").map_err(other)?;
        fixed_mismatches += fixed.iter().filter(|&&f| f != 1.0).count();
        pairs += fixed.len();
        let series = run.table("series").map_err(other)?;
        let col = |name: &str| series.column(name).map_err(other);
        let curves = [
            col("rank_KQ")?,
            col("rank_VO")?,
            col("rank_KQ_fixed")?,
            col("rank_VO_fixed")?,
            col("rank_KQ_th")?,
            col("rank_VO_th")?,
        ];
        let la = run.grid_value("log10_alpha") * std::f64::consts::LN_10;
        panels.push(panel(
            files(p).label(p.instance),
            la,
            &col("tau")?,
            curves,
            run.quantity("is_attention") == 1.0,
            if j == 0 {
                LegendPosition::LowerRight
            } else {
                LegendPosition::None
            },
        ));
    }
    let mut rep = Report {
        series: runs.stacked("series").map_err(other)?,
        ..Default::default()
    };
    let uncovered = eligible_stages.iter().filter(|e| !**e).count();
    rep.at_most(
        "stages-no-eligible-alpha",
        "stages with no eligible α",
        uncovered as f64,
        0.0,
    )
    .note(format!(
        "α is eligible for stage k when α^(m_k/2) ≤ {:e}·min_(S_k)|β^k|; {tested} eligible \
         (α, k) over {} α",
        c.eligibility,
        sorted.len()
    ));
    rep.derive("eligible_pairs", tested);
    rep.derive("fixed_threshold_mismatches", fixed_mismatches);
    rep.derive(
        "fixed_threshold_note",
        format!(
            "count at τ†_k with the paper's fixed {:e} differs from |S_k| at {fixed_mismatches} \
             of {pairs} (α, k) (reported, not checked)",
            p.fixed_threshold,
        ),
    );
    rep.tables
        .push(("counts".into(), runs.stacked("counts").map_err(other)?));
    let mut figure = Figure::new(panels.len().min(4)).title(title(files(p).label(p.instance)));
    for p in panels {
        figure = figure.panel(p);
    }
    rep.figure = Some(figure);
    Ok(rep)
}

fn panel(
    instance: &str,
    ln_alpha: f64,
    tau: &[f64],
    curves: [Vec<f64>; 6],
    is_attention: bool,
    legend: LegendPosition,
) -> LinePanel {
    let names: [&str; 2] = if is_attention {
        ["rank W_K W_Qᵀ", "rank W_V W_Oᵀ"]
    } else {
        ["|supp β|", ""]
    };
    let mut panel = LinePanel::new(
        format!("{instance}, α = {}", alpha_label(ln_alpha)),
        "τ",
        "rank",
    )
    .legend(legend);
    let [kq, vo, kq_fixed, vo_fixed, kq_th, vo_th] = curves;
    let blocks = if is_attention { 2 } else { 1 };
    for (b, (num, fixed, th)) in [(kq, kq_fixed, kq_th), (vo, vo_fixed, vo_th)]
        .into_iter()
        .take(blocks)
        .enumerate()
    {
        panel = panel
            .series(Series::numerics(names[b], tau.to_vec(), num).color(b))
            .series(
                Series::new(
                    format!("{} (fixed 1e−5)", names[b]),
                    tau.to_vec(),
                    fixed,
                    LineStyle::Dotted,
                )
                .color(b),
            )
            .series(
                Series::theory(format!("{} (Algorithm 1)", names[b]), tau.to_vec(), th).color(b),
            );
    }
    panel
}

fn cost(p: &Params, ctx: &RunContext) -> Cost {
    sampled_run_cost(p.instance, *p.samples, ctx.ode.method)
}

pub static KIND: SweptKind<Params, Checks> = SweptKind {
    kind: Kind {
        name: "diagonal.rank-staircase",
        paper: "004",
        summary: "Theorem 1.1: the entries of β above the α-adaptive threshold α^(m_k/2) at each \
                  plateau's best-separated time are exactly S_k; the support gains at most one \
                  index per stage, and at most one of rank W_K W_Qᵀ, rank W_V W_Oᵀ changes, by at \
                  most +1; step plots vs Algorithm 1 (fixed threshold 1e−5 reported). A sweep: \
                  one α per run, every stage eligible at some α in the reduction.",
        solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
        validate: |p, _, sc| files(p).validate(p.instance, sc).map(drop),
        cost,
        quantities: &[
            "eligible_stages",
            "fixed_threshold_mismatches",
            "is_attention",
            "max_added",
        ],
        run,
    },
    validate_sweep,
    reduce,
};

//! `fig8-kq-entries` and `fig9-vo-entries`: the paper's Figs. 8 and 9 (and 2(b)) — each KQ
//! entry (w_K ⊙ w_Q)_r or VO entry (w_V ⊙ w_O)_r of the diagonal attention head against rescaled
//! time, one panel per α, with Algorithm 1's step functions β_th(τ) = β^k dashed (spec 004 §3.4,
//! §5.2, §7). One runner, parametrized by the block.
//!
//! The check (spec §4 T4.1(i), §7): for α ≤ `check_below`, on each plateau interior the error of
//! the block, max_r |β_r(τ) − β^k_r|, is at most 10·α^{e_k(τ)} + 1e−8, where
//! e_k(τ) = min(m_k(τ), λ_act·(τ − T_k)) is the predicted exponent: m_k the neglect exponent of
//! the coordinates still growing, λ_act the slowest stage-B relaxation rate (§3.4).

use crate::scenario::param::{AboveOne, OpenHalf};
use crate::scenario::param::{AtLeast, Positive};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::common::{flow_cost, schedule_cost, InstanceName, UserFiles};
use crate::flow::{Method, OdeConfig};
use crate::models::diagonal::{BetaLoss, DiagonalAttention, Schedule};
use crate::plot::{Figure, LegendPosition, LinePanel, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::figures_common::{
    alpha_label, check_alphas, instance_label, predicted_exponent, step_curve, sup_per_plateau,
    support_order, transitions_outside_interiors, Toy,
};

/// Which diagonal product of the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// a = w_K ⊙ w_Q (diag of W_K W_Qᵀ), β indices 0..d.
    Kq,
    /// c = w_V ⊙ w_O (diag of W_V W_Oᵀ), β indices d..2d.
    Vo,
}

impl Block {
    fn indices(self, d: usize) -> std::ops::Range<usize> {
        match self {
            Block::Kq => 0..d,
            Block::Vo => d..2 * d,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Block::Kq => "KQ",
            Block::Vo => "VO",
        }
    }
    fn product(self) -> &'static str {
        match self {
            Block::Kq => "diag(w_K) diag(w_Q)",
            Block::Vo => "diag(w_V) diag(w_O)",
        }
    }
}

/// Entries drawn in their own colour (the others share one).
const DISTINCT_ENTRIES: usize = 6;
/// Colour of the entries that never enter a support (yellow: faint on purpose).
const OTHER_COLOR: usize = 7;

/// The start τ_0 of the relaxation clock in e_k(τ) = min(m_k(τ), λ_act (τ − τ_0)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelaxationClock {
    /// τ_0 = τ̂_k, the measured transition (T_k + a_k/Λ).
    #[default]
    Measured,
    /// τ_0 = T_k (spec §4 T4.1(i)); misses the factor e^{λ_act a_k} of the finite-α lag.
    Theory,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The toy task (spec §5.1): mini, small (default) or paper (heavy). Attention only.
    pub instance: InstanceName,
    /// Initialization scales, strictly decreasing; one panel each (spec §4 A_paper).
    pub alphas: Vec<f64>,
    /// Output samples on τ ∈ [0, horizon·T_last].
    pub samples: AtLeast<10>,
    /// Horizon as a multiple of the last finite stage time T_last (spec §5.1: 1.2).
    pub horizon: AboveOne,
    /// Plateau interiors: [T_k + δ_k, T_{k+1} − δ_k], δ_k = margin·(T_{k+1} − T_k).
    pub plateau_margin: OpenHalf,
    /// The error bound is checked for the α ≤ this value (spec §7: 1e−16).
    pub check_below: f64,
    /// Where the relaxation term λ_act (τ − τ_0) of e_k starts: at the measured transition
    /// τ̂_k (`measured`, default) or at T_k as the spec writes it (`theory`).
    #[serde(default)]
    pub relaxation_clock: RelaxationClock,
    /// If set, an extra figure `fig2b.svg` overlays both blocks at this α (Fig. 2(b)).
    #[serde(default)]
    pub overlay_alpha: Option<f64>,
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
    /// Constant in front of α^{e_k(τ)} (spec §7: 10).
    pub factor: Positive,
    /// Integrator floor added to the bound (spec §7: 1e−8; tolerances 1e−10 on ζ, §8.3).
    pub floor: Positive,
}

/// The user's files of this run (none: the built-in instance and the seed's θ_0).
fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &p.init_file)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    check_alphas(&p.alphas).map_err(|r| sc.invalid("params.alphas", r))?;
    files(p).validate_attention(p.instance, "the KQ/VO entries figure", sc)?;
    if !p.alphas.iter().any(|a| *a <= p.check_below) {
        return Err(sc.invalid("params.check_below", "no α lies at or below it"));
    }
    if let Some(a) = p.overlay_alpha.filter(|a| !p.alphas.contains(a)) {
        return Err(sc.invalid(
            "params.overlay_alpha",
            format!("{a} is not one of params.alphas"),
        ));
    }
    Ok(())
}

/// One α: β of the block at every sample, and the plateau errors against their bounds.
struct AlphaEntries {
    alpha: f64,
    /// entries[r][j]: entry r of the block at sample j.
    entries: Vec<Vec<f64>>,
    /// Per interior: sup error, the bound 10 α^{e_min} + floor with the chosen relaxation
    /// clock, and the same with the relaxation from T_k (the spec's).
    sup_errors: Vec<f64>,
    sup_bounds: Vec<f64>,
    spec_bounds: Vec<f64>,
    separated: bool,
}

fn run_block(block: Block, p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let toy = Toy::build(p.instance, &files(p), ctx)?;
    let head: &DiagonalAttention = toy
        .instance
        .attention()
        .ok_or_else(|| RunError::Other("not an attention instance".into()))?;
    let schedule = &toy.schedule;
    let indices = block.indices(head.d());
    let taus = toy.taus(*p.horizon, *p.samples);
    let tau_end = *taus.last().unwrap();
    let interiors = toy.interiors(tau_end, *p.plateau_margin);
    let mut rep = Report::default();
    let mut results = Vec::with_capacity(p.alphas.len());
    let mut overlay = None;
    for &alpha in &p.alphas {
        let run = toy.run(alpha, &taus, &ctx.ode)?;
        rep.stats(format!("flow α = {alpha:e}"), &run.traj.stats);
        let betas: Vec<Vec<f64>> = (0..run.traj.len()).map(|j| run.beta(j)).collect();
        let lambda = run.lambda;
        let error = |j: usize, k: usize| {
            stats::max(
                indices
                    .clone()
                    .map(|i| (betas[j][i] - schedule.stages[k].beta[i]).abs()),
            )
        };
        let bound = |e: f64| *c.factor * (-e * lambda).exp() + *c.floor;
        let tau_hats: Vec<Option<f64>> = run
            .transitions
            .iter()
            .map(|t| t.map(|t| t / lambda))
            .collect();
        // the relaxation into θ^k starts at the measured transition τ̂_k = T_k + a_k/Λ, or at
        // T_k as the spec writes it
        let start = |k: usize, measured: bool| match (k, measured) {
            (0, _) => 0.0,
            (_, true) => tau_hats[k - 1].unwrap_or(schedule.stages[k].t_start),
            (_, false) => schedule.stages[k].t_start,
        };
        let e_min = |measured: bool| {
            sup_per_plateau(&interiors, &taus, |j, k| {
                -predicted_exponent(schedule, k, taus[j], start(k, measured))
            })
            .into_iter()
            .map(|e| bound(-e))
            .collect::<Vec<_>>()
        };
        let sup_errors = sup_per_plateau(&interiors, &taus, error);
        if Some(alpha) == p.overlay_alpha {
            overlay = Some(betas.clone());
        }
        results.push(AlphaEntries {
            alpha,
            entries: indices
                .clone()
                .map(|i| betas.iter().map(|b| b[i]).collect())
                .collect(),
            sup_bounds: e_min(p.relaxation_clock == RelaxationClock::Measured),
            spec_bounds: e_min(false),
            sup_errors,
            separated: transitions_outside_interiors(&interiors, &tau_hats, tau_end),
        });
    }

    for r in results.iter().filter(|r| r.alpha <= p.check_below) {
        let worst =
            |bounds: &[f64]| stats::max(r.sup_errors.iter().zip(bounds).map(|(e, b)| e / b));
        rep.at_most(
            &format!(
                "entries-alpha-over-plateaus-sup-error.{}-{:e}",
                block.name(),
                r.alpha
            ),
            &format!(
                "{} entries, α = {:e}: max over plateaus of sup error / (10·α^e_min + 1e−8)",
                block.name(),
                r.alpha
            ),
            worst(&r.sup_bounds),
            1.0,
        )
        .note(format!(
            "T4.1(i): on each interior, max_r |β_r − β^k_r| ≤ {}·α^(e_min) + {:e}, e_min = \
             min over the interior of e_k(τ) = min(m_k(τ), λ_act (τ − τ_0)), relaxation \
             clock τ_0 = {}; per plateau: {}",
            c.factor,
            c.floor,
            match p.relaxation_clock {
                RelaxationClock::Measured => "τ̂_k (measured transition)",
                RelaxationClock::Theory => "T_k",
            },
            r.sup_errors
                .iter()
                .zip(&r.sup_bounds)
                .enumerate()
                .map(|(k, (e, b))| format!("k={k}: {e:.2e} ≤ {b:.2e}"))
                .collect::<Vec<_>>()
                .join("; ")
        ))
        .paper_claim(format!(
            "spec §4/§7: relaxation counted from T_k, λ_act (τ − T_k): ratio {:.3} here; \
             the finite-α lag a_k = Λ(τ̂_k − T_k) multiplies the error by e^(λ_act a_k), \
             which the constant 10 does not cover in general (e.g. mini, VO block)",
            worst(&r.spec_bounds)
        ));
    }

    fill_series(
        &mut rep,
        block,
        head,
        schedule,
        &taus,
        &results,
        indices.clone(),
    );
    rep.derive("stage_times", schedule.stage_times());
    rep.derive(
        "transitions_outside_interiors",
        results.iter().map(|r| r.separated).collect::<Vec<_>>(),
    );
    let supported = support_order(schedule, indices.clone());
    rep.figure = Some(entries_figure(
        block, p, head, schedule, &taus, &results, &supported,
    ));
    if let (Some(alpha), Some(betas)) = (p.overlay_alpha, overlay) {
        rep.figures.push((
            "fig2b".into(),
            overlay_figure(p, head, schedule, &taus, alpha, &betas),
        ));
    }
    rep.instance = Some(toy.arrays.clone());
    Ok(rep)
}

fn fill_series(
    rep: &mut Report,
    block: Block,
    head: &DiagonalAttention,
    schedule: &Schedule,
    taus: &[f64],
    results: &[AlphaEntries],
    indices: std::ops::Range<usize>,
) {
    let mut headers = vec!["tau".to_string()];
    let mut columns: Vec<Vec<f64>> = vec![taus.to_vec()];
    for i in indices.clone() {
        headers.push(format!("theory_{}", head.coordinate_name(i)));
        columns.push(taus.iter().map(|&t| schedule.beta_at(t)[i]).collect());
    }
    for r in results {
        for (i, entry) in indices.clone().zip(&r.entries) {
            headers.push(format!("alpha_{:e}_{}", r.alpha, head.coordinate_name(i)));
            columns.push(entry.clone());
        }
    }
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let column_refs: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
    rep.series = Table::new(&header_refs);
    rep.series.push_columns(&[], &column_refs);
    rep.derive("block", block.name());
}

/// Entry curves of one block at one α (numerics solid, one colour per supported entry) with
/// the Algorithm-1 steps dashed black.
#[allow(clippy::too_many_arguments)]
fn entry_panel(
    title: String,
    y_label: &str,
    head: &DiagonalAttention,
    schedule: &Schedule,
    taus: &[f64],
    curves: &[(usize, Vec<f64>)],
    supported: &[usize],
    legend: bool,
) -> LinePanel {
    let tau_end = *taus.last().unwrap();
    let mut panel = LinePanel::new(title, "τ = t / ln(1/α)", y_label).legend(if legend {
        LegendPosition::LowerLeft
    } else {
        LegendPosition::None
    });
    // supported entries first (legend order), then the rest in one faint colour
    let rank = |i: usize| supported.iter().position(|&s| s == i);
    let mut ordered: Vec<&(usize, Vec<f64>)> = curves.iter().collect();
    ordered.sort_by_key(|(i, _)| rank(*i).unwrap_or(usize::MAX));
    let mut other_labelled = false;
    for (i, values) in ordered {
        let (label, color) = match rank(*i) {
            Some(r) if r < DISTINCT_ENTRIES => (head.coordinate_name(*i), r),
            _ if !other_labelled => {
                other_labelled = true;
                ("other entries".to_string(), OTHER_COLOR)
            }
            _ => (String::new(), OTHER_COLOR),
        };
        panel = panel.series(Series::numerics(label, taus.to_vec(), values.clone()).color(color));
    }
    for (n, &i) in supported.iter().enumerate() {
        let step = step_curve(schedule, tau_end, |k| schedule.stages[k].beta[i]);
        let label = if n == 0 { "β_{th} (Algorithm 1)" } else { "" };
        panel = panel.series(Series::theory(label, step.x, step.y));
    }
    panel
}

fn entries_figure(
    block: Block,
    p: &Params,
    head: &DiagonalAttention,
    schedule: &Schedule,
    taus: &[f64],
    results: &[AlphaEntries],
    supported: &[usize],
) -> Figure {
    let indices = block.indices(head.d());
    let mut fig = Figure::new(3.min(results.len())).title(format!(
        "Fig. {}: entries of {} vs τ per α ({} instance); Algorithm 1 dashed",
        match block {
            Block::Kq => "8",
            Block::Vo => "9",
        },
        block.product(),
        instance_label(p.instance, &files(p))
    ));
    for (n, r) in results.iter().enumerate() {
        let curves: Vec<(usize, Vec<f64>)> = indices.clone().zip(r.entries.clone()).collect();
        fig = fig.panel(entry_panel(
            alpha_label(r.alpha),
            &format!("{} entries", block.name()),
            head,
            schedule,
            taus,
            &curves,
            supported,
            n == 0,
        ));
    }
    fig
}

/// Fig. 2(b): both blocks at one α in one panel.
fn overlay_figure(
    p: &Params,
    head: &DiagonalAttention,
    schedule: &Schedule,
    taus: &[f64],
    alpha: f64,
    betas: &[Vec<f64>],
) -> Figure {
    let all = 0..2 * head.d();
    let supported = support_order(schedule, all.clone());
    let curves: Vec<(usize, Vec<f64>)> = all
        .map(|i| (i, betas.iter().map(|b| b[i]).collect()))
        .collect();
    Figure::single(entry_panel(
        format!(
            "Fig. 2(b): KQ and VO entries, {} ({} instance)",
            alpha_label(alpha),
            instance_label(p.instance, &files(p))
        ),
        "entries of diag(w_K)diag(w_Q), diag(w_V)diag(w_O)",
        head,
        schedule,
        taus,
        &curves,
        &supported,
        true,
    ))
    .aspect(0.58)
}

fn run_kq(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    run_block(Block::Kq, p, c, ctx)
}

fn run_vo(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    run_block(Block::Vo, p, c, ctx)
}

const SOLVER: OdeConfig = OdeConfig::new(Method::Tsit45, 1e-10, 1e-10);

/// Algorithm 1 and one log-layout run per α, every sample kept.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let runs = n(p.alphas.len());
    schedule_cost("instance", p.instance).and(flow_cost(
        "alphas, samples",
        p.instance,
        runs,
        n(*p.samples),
        ctx.ode.method,
    ))
}

pub static KQ_KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.fig8-kq-entries",
    paper: "004",
    summary: "Fig. 8 (and 2(b)): the KQ entries (w_K ⊙ w_Q)_r vs rescaled time, one panel per α, \
              against Algorithm 1's β_th; plateau errors within 10·α^e_k + 1e−8.",
    solver: SOLVER,
    validate,
    cost,
    quantities: &[],
    run: run_kq,
};

pub static VO_KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.fig9-vo-entries",
    paper: "004",
    summary: "Fig. 9: the VO entries (w_V ⊙ w_O)_r vs rescaled time, one panel per α, against \
              Algorithm 1's β_th; plateau errors within 10·α^e_k + 1e−8.",
    solver: SOLVER,
    validate,
    cost,
    quantities: &[],
    run: run_vo,
};

//! `algorithm1-attn`: Algorithm 1 (spec 004 §3) on the diagonal attention head — the limiting
//! stagewise dynamics as α → 0 with its per-stage diagnostics (§3.5), the stage table, and the
//! theory curves loss_th(τ), b_th(τ) and the rank staircase (§3.4, §7).

use crate::scenario::param::AboveOne;
use crate::scenario::param::{AtLeast, Positive};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::algorithm1_common::{
    flag_text, lemma_d4_check, schedule_checks, termination_text, Algorithm1Params, Scheduled,
    STAGE_B_SOLVER,
};
use super::common::{schedule_cost, InstanceName, UserFiles};
use crate::flow::linspace;
use crate::instance::InstanceFile;
use crate::models::diagonal::{Activation, DiagonalAttention, Schedule};
use crate::plot::{Figure, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, Report, RunContext, RunError, Table};
use crate::stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Attention instance: mini, small or paper (spec §5.1).
    pub instance: InstanceName,
    /// Theory curves are drawn on τ ∈ [0, horizon_factor · T_last] (spec §5.1: 1.2).
    pub horizon_factor: AboveOne,
    /// τ samples of the theory table.
    pub samples: AtLeast<2>,
    #[serde(default)]
    pub algorithm1: Algorithm1Params,
    /// The user's attention data (X with a_star, c_star or Y; README "Your own data") instead
    /// of `instance`.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// Evaluate the stage-0 Δ of the Lemma D.4 check with the b⁰ = 0 printed in the paper's
    /// Algorithm 1 (a typo, spec §6 #1) instead of b⁰ = 1: mimics that bug; false by default.
    #[serde(default)]
    pub paper_initial_b: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max_k max_{i∈S_k} |G_i(β^k)|: θ^k is stationary on its support (spec §7 algorithm1-attn,
    /// 1e−10).
    pub max_stationarity: Positive,
    /// max_k ‖β^k_{ε₁} − β^k_{ε₂}‖_∞ / max(1, ‖β^k‖_∞): the limit (13) does not depend on ε
    /// (spec §3.3, §4 row eq. 13: 1e−8).
    pub max_eps_difference: Positive,
    /// L̃(β^K) at the terminal stage: the realizable teacher is recovered (spec §7, 1e−10).
    pub max_terminal_loss: Positive,
    /// |T_1 · max|g(0)| − 1|: T_1 = 1/max_r |G_{c_r}(0)| with the closed form of G at 0
    /// (spec §2.2, CF3/CF4); rounding only.
    pub max_t1_rel_error: Positive,
}

/// (rank W_K W_Qᵀ, rank W_V W_Oᵀ) of every stage's β^k (exact zeros off the support).
fn stage_ranks(head: &DiagonalAttention, schedule: &Schedule) -> Vec<(usize, usize)> {
    schedule
        .stages
        .iter()
        .map(|s| head.ranks(&s.beta, 0.0))
        .collect()
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = UserFiles::new(&p.data_file, &None);
    let sched = Scheduled::with_files(p.instance, &files, &p.algorithm1.options(&ctx.ode), ctx)?;
    let head = sched
        .instance
        .attention()
        .ok_or_else(|| RunError::Other("not an attention instance".into()))?;
    let s = &sched.schedule;
    let ranks = stage_ranks(head, s);
    let mut rep = Report {
        series: stage_table(&sched, &ranks),
        instance: Some(sched.data.to_arrays()),
        ..Default::default()
    };
    stage_checks(&mut rep, &sched, head, &ranks, c);
    lemma_d4_check(&mut rep, s, "", p.paper_initial_b);
    data_bounds(&mut rep, head);

    let t_last = s.stages.last().map_or(0.0, |st| st.t_start);
    let tau_end = if t_last > 0.0 {
        *p.horizon_factor * t_last
    } else {
        1.0
    };
    rep.tables
        .push(("theory".into(), theory_table(&sched, *p.samples, tau_end)));
    rep.figure = Some(figure(&sched, &ranks, tau_end));
    rep.derive("termination", termination_text(&s.termination));
    rep.derive("stage_times", s.stage_times());
    rep.derive(
        "activations",
        s.stages
            .iter()
            .filter_map(|st| st.entered_by.as_ref())
            .map(signed_name)
            .collect::<Vec<_>>(),
    );
    rep.derive("scale_max_abs_g0", s.scale);
    rep.derive("tol_g", s.tol_g);
    rep.derive("kappa_loss", head.kappa());
    Ok(rep)
}

/// Assumption 2.1 (ℓ C², data bounded): the squared loss is C²; on a finite training set the
/// bound holds with C = max‖X‖_F, max‖Y‖_F. Reported, not checked: every loaded value is finite
/// (instances are validated at load), so a finiteness check could not fail.
fn data_bounds(rep: &mut Report, head: &DiagonalAttention) {
    let samples = head.samples();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    rep.derive(
        "max_norm_x",
        stats::max((0..samples.count()).map(|k| norm(samples.x_of(k)))),
    );
    rep.derive(
        "max_norm_y",
        stats::max((0..samples.count()).map(|k| norm(samples.y_of(k)))),
    );
}

/// The stage table (spec §7 "Data and figure contents"): row k is the plateau (T_k, T_{k+1})
/// around θ^k; i_k, σ_k, Δ* and gap_k describe the activation that ends it.
fn stage_table(sched: &Scheduled, ranks: &[(usize, usize)]) -> Table {
    let s = &sched.schedule;
    let mut t = Table::new(&[
        "k",
        "T_k",
        "i_k",
        "sigma_k",
        "delta_star",
        "gap_k",
        "loss",
        "support_size",
        "rank_KQ",
        "rank_VO",
        "lambda_min",
        "kappa",
        "dropped",
        "stationarity",
        "eps_difference",
        "flags",
    ]);
    for (k, st) in s.stages.iter().enumerate() {
        let next = s.stages.get(k + 1).and_then(|n| n.entered_by.as_ref());
        let dropped: Vec<String> = st
            .dropped
            .iter()
            .map(|d| sched.coordinate(d.index))
            .collect();
        let flags: Vec<String> = st.flags.iter().map(flag_text).collect();
        t.push(vec![
            k.into(),
            st.t_start.into(),
            next.map_or("none".into(), |a| a.name.clone()).into(),
            next.map_or(0.0, |a| a.sign).into(),
            next.map_or(f64::INFINITY, |a| a.delta).into(),
            next.map_or(f64::INFINITY, |a| a.gap).into(),
            st.loss.into(),
            st.support.len().into(),
            ranks[k].0.into(),
            ranks[k].1.into(),
            nan_if_empty(st.support.is_empty(), st.diagnostics.lambda_min),
            nan_if_empty(st.support.is_empty(), st.diagnostics.kappa),
            Cell::Text(dropped.join(" ")),
            st.diagnostics.stationarity.into(),
            st.diagnostics.eps_difference.into(),
            Cell::Text(flags.join("; ")),
        ]);
    }
    t
}

/// "VO\[3\]+": an activation's coordinate with its sign σ.
fn signed_name(a: &Activation) -> String {
    format!("{}{}", a.name, if a.sign > 0.0 { "+" } else { "−" })
}

/// A Hessian diagnostic of the empty support has no value.
fn nan_if_empty(empty: bool, x: f64) -> Cell {
    Cell::Num(if empty { f64::NAN } else { x })
}

fn stage_checks(
    rep: &mut Report,
    sched: &Scheduled,
    head: &DiagonalAttention,
    ranks: &[(usize, usize)],
    c: &Checks,
) {
    let s = &sched.schedule;
    let ids = [
        "algorithm-converges-inf",
        "assumption-flags-raised-a4-a4-eq",
        "beta-stationarity",
    ];
    schedule_checks(rep, s, ids, *c.max_stationarity);
    let eps = stats::max(s.stages.iter().map(|st| {
        let norm = stats::max_with(1.0, st.beta.iter().map(|b| b.abs()));
        st.diagnostics.eps_difference / norm
    }));
    rep.at_most(
        "stage-eps-independence",
        "STAGE_B ε-independence",
        eps,
        *c.max_eps_difference,
    )
    .note("max_k ‖β_{ε₁} − β_{ε₂}‖_∞ / max(1, ‖β^k‖_∞) over the ε list (eq. 13 limit exists)");
    let first = s.stages.get(1).and_then(|st| st.entered_by.as_ref());
    rep.holds(
        "stage-activates-vo-coordinate",
        "stage 1 activates a VO coordinate",
        first.is_some_and(|a| !head.is_kq(a.index)),
    )
    .note(format!(
        "G_KQ(0) = 0 because c = 0 (spec §2.2); first activation: {}",
        first.map_or("none".into(), |a| a.name.clone())
    ));
    let g0 = head.g_at_zero();
    let t1_closed = 1.0 / stats::max_abs(g0.iter());
    let t1 = s.stages.get(1).map_or(f64::NAN, |st| st.t_start);
    rep.at_most(
        "t-1-1-g-0-1",
        "|T_1 / (1/max|g(0)|) − 1|",
        (t1 / t1_closed - 1.0).abs(),
        *c.max_t1_rel_error,
    )
    .note(format!(
        "T_1 = {t1:.9} vs closed form {t1_closed:.9} (G_VO(0), spec §2.2 CF4)"
    ));
    let added = ranks
        .windows(2)
        .map(|w| w[1].0.saturating_sub(w[0].0) + w[1].1.saturating_sub(w[0].1))
        .max()
        .unwrap_or(0);
    rep.at_most(
        "rank-added-per-stage",
        "max rank added per stage",
        added as f64,
        1.0,
    )
    .note("Thm 1.1: rank KQ + rank VO grows by at most one per stage");
    let not_one = ranks
        .windows(2)
        .filter(|w| usize::from(w[1].0 != w[0].0) + usize::from(w[1].1 != w[0].1) != 1)
        .count();
    rep.at_most(
        "stages-where-not-exactly-one-rank",
        "stages where not exactly one of rank KQ, rank VO changes",
        not_one as f64,
        0.0,
    )
    .note("spec §4 rank staircase: exactly one of the two ranks changes, by ≤ 1");
    let terminal = s.stages.last().map_or(f64::NAN, |st| st.loss);
    let name = "terminal plateau loss L̃(β^K)";
    if sched.data.realizable() {
        rep.at_most(
            "terminal-plateau-loss",
            name,
            terminal,
            *c.max_terminal_loss,
        )
        .note("realizable teacher: the last plateau recovers it");
    } else {
        rep.skip(
            "terminal-plateau-loss",
            name,
            "the data give labels Y, not a teacher: a zero loss need not be reachable",
        );
    }
}

/// τ, loss_th, rank_KQ, rank_VO and b_th of every coordinate on a τ grid plus the T_k.
fn theory_table(sched: &Scheduled, samples: usize, tau_end: f64) -> Table {
    let s = &sched.schedule;
    let p = sched.instance.loss().p();
    let mut headers = vec!["tau".to_string(), "loss_th".into(), "stage".into()];
    headers.extend((0..p).map(|i| format!("b_th[{}]", sched.coordinate(i))));
    let mut t = Table {
        headers,
        rows: Vec::new(),
    };
    let mut taus = linspace(0.0, tau_end, samples);
    taus.extend(s.stage_times());
    taus.sort_by(f64::total_cmp);
    taus.dedup();
    for tau in taus {
        let mut row: Vec<Cell> = vec![tau.into(), s.loss_at(tau).into(), s.stage_index(tau).into()];
        row.extend(s.log_scale_at(tau).into_iter().map(Cell::Num));
        t.push(row);
    }
    t
}

/// Step-function samples (x_k, y_k) held until x_{k+1}, up to `end`.
fn steps(starts: &[f64], values: &[f64], end: f64) -> (Vec<f64>, Vec<f64>) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (k, (&t, &v)) in starts.iter().zip(values).enumerate() {
        let stop = starts.get(k + 1).copied().unwrap_or(end).min(end);
        x.extend([t, stop]);
        y.extend([v, v]);
    }
    (x, y)
}

fn figure(sched: &Scheduled, ranks: &[(usize, usize)], tau_end: f64) -> Figure {
    let s = &sched.schedule;
    let times = s.stage_times();
    let losses: Vec<f64> = s.stages.iter().map(|st| st.loss).collect();
    let (lx, ly) = steps(&times, &losses, tau_end);
    let mut loss_panel = LinePanel::new("(a) loss_{th}(τ) = L̃(β^k)", "τ = t / ln(1/α)", "L̃")
        .series(Series::numerics("Algorithm 1", lx, ly).color(0))
        .x_range(0.0, tau_end);
    // unlabelled: stage times can be closer than a label is wide; the title names them
    for &t in &times[1..] {
        loss_panel = loss_panel.vline(RefLine::new(t, ""));
    }
    let sequence: Vec<String> = s
        .stages
        .iter()
        .filter_map(|st| st.entered_by.as_ref())
        .map(signed_name)
        .collect();

    // b_th is piecewise linear with kinks at the T_k: its values there and at the end are exact
    let mut knots = times.clone();
    knots.push(tau_end);
    let b_at: Vec<Vec<f64>> = knots.iter().map(|&t| s.log_scale_at(t)).collect();
    let activated: Vec<usize> = s
        .stages
        .iter()
        .filter_map(|st| st.entered_by.as_ref().map(|a| a.index))
        .fold(Vec::new(), |mut v, i| {
            if !v.contains(&i) {
                v.push(i);
            }
            v
        });
    let mut b_panel = LinePanel::new(
        // the title on one line; on the axis, 0 and 2 are the active coordinates' signs
        "(b) log-scales b_{th}(τ) = log_α w",
        "τ",
        "b_{th} (0: active +, 2: −)",
    )
    .x_range(0.0, tau_end)
    .hline(RefLine::new(1.0, "b⁰ = 1"));
    let (mut ox, mut oy) = (Vec::new(), Vec::new());
    let p = sched.instance.loss().p();
    for i in (0..p).filter(|i| !activated.contains(i)) {
        if b_at.iter().all(|b| b[i] == 1.0) {
            continue; // g_i ≡ 0 at every θ^k: never moves
        }
        ox.extend(knots.iter().copied().chain([f64::NAN]));
        oy.extend(b_at.iter().map(|b| b[i]).chain([f64::NAN]));
    }
    for (n, &i) in activated.iter().enumerate() {
        let y = b_at.iter().map(|b| b[i]).collect();
        b_panel = b_panel.series(Series::numerics(sched.coordinate(i), knots.clone(), y).color(n));
    }
    if !ox.is_empty() {
        b_panel = b_panel.series(Series::new("never activated", ox, oy, LineStyle::Dotted));
    }

    let kq: Vec<f64> = ranks.iter().map(|r| r.0 as f64).collect();
    let vo: Vec<f64> = ranks.iter().map(|r| r.1 as f64).collect();
    let (kx, ky) = steps(&times, &kq, tau_end);
    let (vx, vy) = steps(&times, &vo, tau_end);
    let rank_panel = LinePanel::new("(c) rank staircase of θ^k", "τ", "rank")
        .series(Series::numerics("rank W_K W_Qᵀ = |S_k ∩ KQ|", kx, ky).color(0))
        .series(Series::numerics("rank W_V W_Oᵀ = |S_k ∩ VO|", vx, vy).color(1))
        .x_range(0.0, tau_end);
    Figure::new(3)
        .title(format!(
            "Algorithm 1 on the diagonal attention head ({} instance), α → 0: {}",
            sched.label(),
            sequence.join(" → ")
        ))
        .aspect(0.84)
        .panel(loss_panel)
        .panel(b_panel)
        .panel(rank_panel)
}

/// Algorithm 1 on the instance (a constant per instance) and the theory table, one row per τ
/// sample with every coordinate.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let coords = p.instance.size().p;
    schedule_cost("instance", p.instance).table("samples", n(*p.samples), coords + 2.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.algorithm1-attn",
    paper: "004",
    summary: "Algorithm 1 on the diagonal attention head (spec 004 §3): stage table with \
              stationarity, ε-independence, gaps and Hessian diagnostics; VO first, one rank \
              per stage, teacher recovered; loss_th, b_th and rank staircase.",
    solver: STAGE_B_SOLVER,
    validate: |p, _, sc| {
        UserFiles::new(&p.data_file, &None)
            .validate_attention(p.instance, "algorithm1-attn", sc)
            .map(drop)
    },
    cost,
    quantities: &[
        "kappa_loss",
        "lemma_d4_dropped_count",
        "lemma_d4_min_delta",
        "lemma_d4_min_delta_dropped",
        "max_norm_x",
        "max_norm_y",
        "scale_max_abs_g0",
        "tol_g",
    ],
    run,
};

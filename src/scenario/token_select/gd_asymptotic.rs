//! `gd-asymptotic` (Thm 6; spec 003 §4.2, §8.1): plain GD (and the gradient flow it follows,
//! integrated in the log clock τ = ln(1 + t) to t = 10¹⁰) converges in direction to W_mm, but
//! only logarithmically: ‖W‖ = (1/Γ) ln t + O(1) and 1 − corr = O(1/ln²t).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::flow::{integrate, logspace, Method, OdeConfig, SolverStats};
use crate::models::token_select::{FixedRule, LogTimeGradientFlow};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Check, InputError, Report, RunContext, RunError, Scenario};
use crate::stats;

use super::common::{optimizer_runs, DataName, UserFiles, BUILT_IN_GRAD, BUILT_IN_W};
use super::fixed_common::{checkpoint_row, checkpoint_table, trace, Init, Probing, Setup};
use super::fixed_linearization::Linearization;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub data: DataName,
    /// GD step η (GD_k follows the gradient flow at t = ηk).
    pub eta: f64,
    /// GD iterations K.
    pub steps: usize,
    pub init: Init,
    /// Horizon of the gradient flow (0 = no flow run).
    pub flow_t_end: f64,
    /// Flow output points per decade of t.
    pub flow_points_per_decade: usize,
    /// 1 − corr must be non-increasing from this time (t = ηk for GD) on.
    pub burn_in: f64,
    /// The rate checks start at the first entry; the spec's early envelope constant is
    /// fitted on this window.
    pub envelope_window: [f64; 2],
    /// NGD reference run (η, steps) for the non-support part of ‖w̃_⊥‖² (spec §4.4).
    pub reference_eta: f64,
    pub reference_steps: usize,
    /// ‖W‖ − (ln t)/Γ is judged on [t_end·offset_window_fraction, t_end].
    pub offset_window_fraction: f64,
    /// The user's tokens (X, y, u, optional z), replacing `data`.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's W₀ (array `W0`, d × d), replacing `init`.
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Relative rise of 1 − corr between consecutive checkpoints counted as an increase.
    pub monotone_rel_tol: f64,
    /// Factor on the early-fitted constant of the spec's envelope (spec §4.2: 2); reported.
    pub envelope_factor: f64,
    /// Eq. 3 lower side: (1 − corr)·ln²t ≥ floor_factor × its minimum on the fit window.
    pub floor_factor: f64,
    /// Largest variation of ‖W‖ − (ln t)/Γ on the window (spec §4.2: 0.5).
    pub offset_variation_max: f64,
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    sc.require_positive(&[
        ("params.eta", p.eta),
        ("params.init.scale", p.init.scale()),
        ("params.burn_in", p.burn_in),
        ("checks.envelope_factor", c.envelope_factor),
        ("checks.floor_factor", c.floor_factor),
        ("params.reference_eta", p.reference_eta),
        ("checks.offset_variation_max", c.offset_variation_max),
    ])?;
    if c.monotone_rel_tol < 0.0 {
        return Err(sc.invalid("checks.monotone_rel_tol", "must be ≥ 0"));
    }
    let horizon = p.eta * p.steps as f64;
    let [a, b] = p.envelope_window;
    if !(1.0 < a && a < b && b < horizon) {
        return Err(sc.invalid(
            "params.envelope_window",
            format!("need 1 < t₁ < t₂ < ηK = {horizon}"),
        ));
    }
    if p.burn_in >= horizon {
        return Err(sc.invalid("params.burn_in", "must be below ηK"));
    }
    if !(p.offset_window_fraction > 0.0 && p.offset_window_fraction < 1.0) {
        return Err(sc.invalid("params.offset_window_fraction", "must be in (0, 1)"));
    }
    if p.flow_t_end != 0.0 && p.flow_t_end <= horizon {
        return Err(sc.invalid(
            "params.flow_t_end",
            "must be 0 (no flow) or beyond the GD horizon ηK",
        ));
    }
    if p.flow_t_end > 0.0 && p.flow_points_per_decade == 0 {
        return Err(sc.invalid("params.flow_points_per_decade", "must be positive"));
    }
    UserFiles::new(&p.data_file, &p.init_file).validate(p.data, 1, sc)
}

/// A sampled run in time t (t = ηk for GD).
#[derive(Default)]
struct Run {
    label: String,
    t: Vec<f64>,
    misalignment: Vec<f64>,
    norm: Vec<f64>,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let setup = Setup::build(p.data, UserFiles::new(&p.data_file, &p.init_file), 1, ctx)?;
    let initial = setup.start(&p.init, ctx);
    let mut rep = Report {
        instance: Some(setup.instance(std::slice::from_ref(&initial))),
        ..Report::default()
    };
    setup.derive_constants(&mut rep);
    setup.premise_checks(&mut rep);
    let w0 = initial.w0;
    let mut table = checkpoint_table();
    let mut gd = Run {
        label: format!("GD η = {}", p.eta),
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let mut stalled = 0usize;
    trace(
        &setup,
        FixedRule::Gd { eta: p.eta },
        &w0,
        p.steps,
        Probing::Checkpoints,
        |v| {
            table.push(checkpoint_row(&gd.label, &v));
            if v.step.is_some_and(|s| s.stalled) {
                stalled += 1;
            }
            if v.k > 0 {
                gd.t.push(p.eta * v.k as f64);
                gd.misalignment.push(v.probe.one_minus_corr);
                gd.norm.push(v.probe.norm);
            }
        },
    )?;
    rep.stats(
        &gd.label,
        &SolverStats {
            method: "gd".into(),
            steps: p.steps,
            rhs_evals: p.steps,
            wall_seconds: start.elapsed().as_secs_f64(),
            ..Default::default()
        },
    );
    rep.derive("gd_stalled_checkpoints", stalled);
    let mut runs = vec![gd];
    if p.flow_t_end > 0.0 {
        let flow = gradient_flow(p, &setup, &w0, ctx, &mut rep)?;
        for k in 0..flow.t.len() {
            table.push(vec![
                flow.label.as_str().into(),
                flow.t[k].into(),
                f64::NAN.into(),
                flow.norm[k].into(),
                f64::NAN.into(),
                flow.misalignment[k].into(),
                flow.misalignment[k].log10().into(),
                f64::NAN.into(),
                f64::NAN.into(),
                f64::NAN.into(),
                f64::NAN.into(),
                f64::NAN.into(),
            ]);
        }
        runs.push(flow);
    }
    rep.series = table;
    let lin = Linearization::new(&setup)?;
    let (perp_limit, reference) =
        lin.path_offset(&setup, &w0, p.reference_eta, p.reference_steps)?;
    let limit = setup.margin.powi(2) * perp_limit / 2.0;
    rep.derive("perp_limit", perp_limit);
    rep.derive("perp_non_support_reference", reference.non_support);
    rep.derive("rate_constant_limit", limit);
    let mut envelopes = Vec::new();
    for r in &runs {
        envelopes.push(checks(p, c, &setup, r, limit, &mut rep));
    }
    rep.figure = Some(figure(p, &setup, &runs, &envelopes, limit));
    Ok(rep)
}

/// The gradient flow from W₀ in the log clock τ = ln(1 + t), sampled log-spaced in t.
fn gradient_flow(
    p: &Params,
    setup: &Setup,
    w0: &[f64],
    ctx: &RunContext,
    rep: &mut Report,
) -> Result<Run, RunError> {
    let field = LogTimeGradientFlow::new(&setup.model);
    let decades = p.flow_t_end.log10();
    let mut taus = vec![0.0];
    taus.extend(
        logspace(
            1.0,
            p.flow_t_end,
            (decades * p.flow_points_per_decade as f64) as usize + 1,
        )
        .into_iter()
        .map(LogTimeGradientFlow::tau_of),
    );
    let tr = integrate(&field, &field.initial_state(w0), &taus, &ctx.ode, None)?;
    rep.stats("gradient flow (log clock)", &tr.stats);
    let dim = w0.len();
    let mut direction = vec![0.0; dim];
    let mut run = Run {
        label: "gradient flow".into(),
        ..Default::default()
    };
    for k in 1..tr.len() {
        let probe = setup.probe(&tr.state(k)[..dim], &mut direction);
        run.t.push(LogTimeGradientFlow::t_of(tr.t[k]));
        run.misalignment.push(probe.one_minus_corr);
        run.norm.push(probe.norm);
    }
    rep.derive("flow_arc_length_end", tr.last_state()[dim]);
    Ok(run)
}

/// Thm 6's checks on one run; returns the spec's early-fitted envelope constant.
fn checks(p: &Params, c: &Checks, setup: &Setup, r: &Run, limit: f64, rep: &mut Report) -> f64 {
    let label = &r.label;
    let gamma = setup.margin;
    let increases =
        r.t.windows(2)
            .zip(r.misalignment.windows(2))
            .filter(|(t, m)| t[0] >= p.burn_in && m[1] > m[0] * (1.0 + c.monotone_rel_tol))
            .count();
    rep.check(
        Check::at_most(
            &format!("increases-corr-between-checkpoints.{label}-{}", p.burn_in),
            &format!(
                "[{label}] increases of 1 − corr between checkpoints, t ≥ {}",
                p.burn_in
            ),
            increases as f64,
            0.0,
        )
        .note("Thm 6: the direction converges to W_mm; log-spaced checkpoints"),
    );
    let [a, b] = p.envelope_window;
    // (1 − corr)·ln²t on t ≥ a, and on the fit window [a, b]
    let scaled: Vec<(f64, f64)> =
        r.t.iter()
            .zip(&r.misalignment)
            .filter(|(&t, _)| t >= a)
            .map(|(&t, &m)| (t, m * t.ln().powi(2)))
            .collect();
    let in_window = scaled.iter().filter(|(t, _)| *t <= b).map(|&(_, v)| v);
    let early = c.envelope_factor * stats::max(in_window.clone());
    let floor = c.floor_factor * stats::min(in_window);
    let (lo, hi) = stats::range(scaled.iter().map(|&(_, v)| v));
    let t_end = *r.t.last().unwrap_or(&f64::NAN);
    let at_end = scaled.last().map_or(f64::NAN, |&(_, v)| v);
    rep.check(
        Check::at_most(
            &format!("thm-rate-corr-ln2t-gamma2.{label}-{a}"),
            &format!("[{label}] Thm 6 rate: max_t (1−corr)·ln²t / (Γ²‖w̃_⊥‖²/2), t ≥ {a}"),
            hi / limit,
            1.0,
        )
        .note(format!(
            "the §8.1 limit Γ²‖w̃_⊥‖²/2 = {limit:.4} is approached from below ({at_end:.4} at \
             t = {t_end:.3e}); the spec's early envelope {} × max on [{a}, {b}] = {early:.4} \
             is exceeded by a factor {:.3}",
            c.envelope_factor,
            hi / early
        ))
        .paper_claim(format!(
            "spec §4.2 recipe: 1 − corr ≤ C/ln²t with C = {} × max of (1−corr)·ln²t on \
             [{a}, {b}]",
            c.envelope_factor
        )),
    );
    rep.check(
        Check::at_least(
            &format!("eq-gd-slow-corr-ln2t-floor.{label}-{a}"),
            &format!("[{label}] Eq. 3 (GD is slow): min_t (1−corr)·ln²t / floor, t ≥ {a}"),
            lo / floor,
            1.0,
        )
        .note(format!(
            "floor = {} × min on [{a}, {b}] = {floor:.4}: 1 − corr = Ω(1/ln²t)",
            c.floor_factor
        )),
    );
    let from = t_end * p.offset_window_fraction;
    let offsets: Vec<f64> =
        r.t.iter()
            .zip(&r.norm)
            .filter(|(&t, _)| t >= from)
            .map(|(t, n)| n - t.ln() / gamma)
            .collect();
    let (lo, hi) = stats::range(&offsets);
    rep.check(
        Check::at_most(
            &format!("ln-gamma-variation.{label}-{from:.3e}-{t_end:.3e}"),
            &format!("[{label}] ‖W‖ − (ln t)/Γ: variation on [{from:.3e}, {t_end:.3e}]"),
            hi - lo,
            c.offset_variation_max,
        )
        .note(format!(
            "values in [{lo:.4}, {hi:.4}]; ‖W‖ = ‖W_mm‖ ln t + O(1)"
        )),
    );
    rep.derive(
        &format!("[{label}] final_one_minus_corr"),
        r.misalignment.last(),
    );
    rep.derive(&format!("[{label}] final_norm"), r.norm.last());
    rep.derive(&format!("[{label}] early_envelope_C"), early);
    rep.derive(&format!("[{label}] rate_constant_end"), at_end);
    early
}

fn figure(p: &Params, setup: &Setup, runs: &[Run], envelopes: &[f64], limit: f64) -> Figure {
    let gamma = setup.margin;
    let mut align = LinePanel::new(
        "Alignment with W_{mm} (Thm 6)",
        "t = ηk",
        "1 − corr(W, W_{mm})",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerLeft);
    let mut scaled = LinePanel::new("Logarithmic rate", "t = ηk", "(1 − corr)·ln²t")
        .log_x()
        .legend(LegendPosition::UpperLeft);
    let mut offset = LinePanel::new("Norm growth", "t = ηk", "‖W‖ − (ln t)/Γ")
        .log_x()
        .legend(LegendPosition::LowerRight);
    let [a, b] = p.envelope_window;
    let t_max = stats::max_with(a, runs.iter().filter_map(|r| r.t.last().copied()));
    let late = logspace(a, t_max, 200);
    align = align
        .series(
            Series::theory(
                "Γ²‖w̃_⊥‖²/(2 ln²t)",
                late.clone(),
                late.iter().map(|t| limit / t.ln().powi(2)).collect(),
            )
            .color(6),
        )
        .series(
            Series::new(
                "early fit × 2 / ln²t",
                late.clone(),
                late.iter().map(|t| envelopes[0] / t.ln().powi(2)).collect(),
                LineStyle::Dotted,
            )
            .color(3),
        );
    // the flow first, so that GD (which follows it up to ηK) is drawn on top
    for (color, r) in runs.iter().enumerate().rev() {
        let style = LineStyle::Solid;
        align = align.series(
            Series::new(r.label.clone(), r.t.clone(), r.misalignment.clone(), style).color(color),
        );
        scaled = scaled.series(
            Series::new(
                r.label.clone(),
                r.t.clone(),
                r.t.iter()
                    .zip(&r.misalignment)
                    .map(|(t, m)| m * t.ln().powi(2))
                    .collect(),
                style,
            )
            .color(color),
        );
        offset = offset.series(
            Series::new(
                r.label.clone(),
                r.t.clone(),
                r.t.iter()
                    .zip(&r.norm)
                    .map(|(t, n)| n - t.ln() / gamma)
                    .collect(),
                style,
            )
            .color(color),
        );
    }
    scaled = scaled
        .log_y()
        .hline(RefLine::new(limit, "limit Γ²‖w̃_⊥‖²/2").color(6))
        .hline(
            RefLine::new(envelopes[0], "early fit × 2")
                .color(3)
                .style(LineStyle::Dotted),
        )
        .vline(RefLine::new(a, "fit window").style(LineStyle::Dotted))
        .vline(RefLine::new(b, "").style(LineStyle::Dotted));
    Figure::new(3)
        .title(format!(
            "GD (η = {}) and gradient flow on {}: Γ = {gamma:.4}",
            p.eta, setup.data
        ))
        .aspect(0.82)
        .panel(align)
        .panel(scaled)
        .panel(offset)
}

/// GD for `steps` and the NGD reference for `reference_steps` iterations, and the gradient
/// flow (dimension d² ≤ 4096) on a log grid, on a built-in data model.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let decades = p.flow_t_end.max(1.0).log10() + 1.0;
    let flow = if p.flow_t_end > 0.0 { 1.0 } else { 0.0 };
    optimizer_runs("steps", 1.0, p.steps)
        .and(optimizer_runs("reference_steps", 1.0, p.reference_steps))
        .ode(
            "flow_t_end",
            flow,
            BUILT_IN_W,
            BUILT_IN_GRAD,
            ctx.ode.method,
        )
        .records(
            "flow_points_per_decade",
            flow,
            decades * n(p.flow_points_per_decade),
            BUILT_IN_W,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.gd-asymptotic",
    paper: "003",
    summary: "Thm 6: GD (10⁵ steps) and the gradient flow in the log clock (to t = 10¹⁰) align \
              with W_mm monotonically but only logarithmically: 1 − corr ≤ C/ln²t and \
              ‖W‖ − (ln t)/Γ bounded.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "*_stalled_checkpoints",
        "B",
        "B2_over_Gamma",
        "Delta_max",
        "Gamma",
        "W_mm_norm",
        "[*] early_envelope_C",
        "[*] final_norm",
        "[*] final_one_minus_corr",
        "[*] rate_constant_end",
        "constraints",
        "flow_arc_length_end",
        "kappa",
        "kkt_max_residual",
        "log_L_star",
        "perp_limit",
        "perp_non_support_reference",
        "rate_constant_limit",
        "rho_orth",
        "support_size",
    ],
    run,
};

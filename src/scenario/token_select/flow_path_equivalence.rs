//! `flow-path-equivalence` (spec 003 §2.3, §8.3): gradient flow, normalized gradient flow and
//! Polyak flow are time changes of one another, so they trace one curve in W and every
//! direction quantity is the same function of the arc length s; "NGD is faster" is a change of
//! clock (GF time t(s) grows like e^{Γs}) plus an O(η) discretization error of NGD.
//!
//! The NGF is integrated in s with its GF clock ψ = ln(1 + t) and PF clock; GF (in log time
//! τ = ln(1 + t)) and PF (in its own time) carry an arc-length state, and diffsol's root finder
//! stops them at the arc lengths where the three are compared.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::analysis::svm::one_minus_cos;
use crate::attention::{FixedDecoder, Loss};
use crate::flow::{integrate, linspace, GradientFlow, Method, OdeConfig};
use crate::models::token_select::{
    Example1, FixedStepper, LogTimeGradientFlow, NormalizedFlow, PolyakFlow,
};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::arc_length::{flow_curve, stop_at_arc_lengths, Curve, OnPath};
use super::common::{instance_arrays, w_svm, DataName, UserFiles, DATA_STREAM, FIRST_FREE_STREAM};
use super::fixed_common::ngd;
use super::joint_common::log10_from_ln;
use super::params::Grid;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Example 1 sizes (noise σ = 1/√d, signal 1, optimal token first).
    pub n: AtLeast<1>,
    pub t: AtLeast<2>,
    pub d: AtLeast<2>,
    /// W₀ entries iid N(0, init_scale²).
    pub init_scale: Positive,
    /// Arc length the flows are followed to.
    pub s_end: Positive,
    /// Arc lengths at which the flows and NGD are compared (each ≤ s_end).
    pub arc_checkpoints: Grid,
    /// Two NGD step lengths; their error ratio must match their ratio.
    pub ngd_etas: [Positive; 2],
    /// Spacing in s of the NGF output (and of the NGD curves); a multiple of every η.
    pub grid_step: Positive,
    /// Output samples of the GF (uniform in τ) and PF (uniform in t) curves.
    pub flow_samples: AtLeast<2>,
    /// The tokens X, y, u (, z) instead of the Example-1 draw (layout
    /// `instance::token_select`; n, t, d and the noise are then the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The start W0 (d, d) instead of the draw N(0, init_scale²).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max over the checkpoints of |corr_GF(s) − corr_NGF(s)| and of |corr_PF(s) − corr_NGF(s)|
    /// (spec §7: 1e−6; exact in the limit, so this is solver accuracy at rtol 1e−8).
    pub corr_agreement: Positive,
    /// NGD error ratio err(η₁)/err(η₂) divided by η₁/η₂ must lie in this band (spec §7: 4–6
    /// for a 5× smaller η, i.e. [0.8, 1.2]).
    pub eta_ratio_band: [f64; 2],
    /// GF time at s_end must exceed this (spec §7: 1e6; prototype 1.06e10).
    pub min_gf_time: Positive,
    /// |slope of ln t_GF(s) on [s_end/2, s_end] ÷ Γ − 1| (the e^{Γs} growth of §2.3; an
    /// asymptotic law, so it needs s_end ≫ 1/Γ).
    pub growth_rate_tol: Positive,
    /// Relative agreement of the clocks: GF's τ where its arc length reaches s vs the NGF's
    /// ψ(s), and PF's time there vs the NGF's PF clock.
    pub clock_tol: Positive,
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let files = UserFiles::new(&p.data_file, &p.init_file);
    match p.data_file {
        Some(_) => files.validate(DataName::Ex1, 1, sc)?,
        None => files.starts(*p.d, 1, sc).map(|_| ())?,
    }
    if p.arc_checkpoints.iter().any(|&s| s > *p.s_end) {
        return Err(sc.invalid("params.arc_checkpoints", "need arc lengths in (0, s_end]"));
    }
    let multiple = |x: f64, eta: f64| ((x / eta).round() * eta - x).abs() <= 1e-9 * x;
    for eta in p.ngd_etas.map(f64::from) {
        if !multiple(*p.grid_step, eta) || p.arc_checkpoints.iter().any(|&s| !multiple(s, eta)) {
            return Err(sc.invalid(
                "params.ngd_etas",
                format!("grid_step and every arc checkpoint must be multiples of η = {eta}"),
            ));
        }
    }
    if !multiple(*p.s_end, *p.grid_step) {
        return Err(sc.invalid("params.grid_step", "s_end must be a multiple of grid_step"));
    }
    let [lo, hi] = c.eta_ratio_band;
    if !(lo > 0.0 && hi > lo) {
        return Err(sc.invalid("checks.eta_ratio_band", "need 0 < lo < hi"));
    }
    Ok(())
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = UserFiles::new(&p.data_file, &p.init_file);
    let inst = match p.data_file {
        // the file replaces the data model whatever its name
        Some(_) => files.instance(DataName::Ex1, ctx.scenario)?.1,
        None => Example1 {
            n: *p.n,
            t: *p.t,
            d: *p.d,
            noise: 1.0 / (*p.d as f64).sqrt(),
            ..Example1::ex1()
        }
        .generate(&mut ctx.rng(DATA_STREAM))
        .map_err(|e| RunError::Other(format!("ex1 data: {e}")))?,
    };
    let model = FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential)
        .map_err(|e| RunError::Other(format!("ex1 model: {e}")))?;
    let (_, svm) = w_svm(&inst)?;
    let w_mm = svm.w.clone();
    let gamma = 1.0 / svm.norm;
    let m = model.dim();
    let w0: Vec<f64> = match files.starts(inst.data.d, 1, ctx.scenario)? {
        Some(starts) => starts[0].clone(),
        None => {
            use rand::Rng;
            let mut rng = ctx.rng(FIRST_FREE_STREAM);
            (0..m)
                .map(|_| *p.init_scale * rng.sample::<f64, _>(rand_distr::StandardNormal))
                .collect()
        }
    };
    let mut rep = Report::default();
    rep.instance = Some(instance_arrays(&inst, std::slice::from_ref(&w0)));
    rep.derive("gamma_margin", gamma);
    rep.derive("w_mm_norm", svm.norm);

    // NGF in arc length on the grid plus the checkpoints
    let steps = (*p.s_end / *p.grid_step).round() as usize;
    let mut grid = linspace(0.0, *p.s_end, steps + 1);
    grid.extend(p.arc_checkpoints.iter());
    grid.sort_by(f64::total_cmp);
    grid.dedup_by(|a, b| (*a - *b).abs() <= 1e-12 * b.abs().max(1.0));
    let ngf = NormalizedFlow::new(&model);
    let tr_ngf = integrate(&ngf, &ngf.initial_state(&w0), &grid, &ctx.ode, None)?;
    rep.stats("normalized flow (arc length s)", &tr_ngf.stats);
    let ngf_at = |s: f64| {
        let k = grid
            .iter()
            .position(|&g| (g - s).abs() <= 1e-9 * s.max(1.0))
            .expect("checkpoints are on the grid");
        tr_ngf.state(k)
    };
    let psi: Vec<f64> = (0..tr_ngf.len())
        .map(|k| ngf.log1p_gf_time(tr_ngf.state(k)))
        .collect();
    let ngf_mis: Vec<f64> = (0..tr_ngf.len())
        .map(|k| one_minus_cos(&tr_ngf.state(k)[..m], &w_mm))
        .collect();
    let ngf_log_excess: Vec<f64> = (0..tr_ngf.len())
        .map(|k| model.log_excess_loss(&tr_ngf.state(k)[..m]))
        .collect();

    // GF in log time and PF in its own time, stopped at each checkpoint arc length
    let cps = p.arc_checkpoints.to_vec();
    let psi_end = ngf.log1p_gf_time(ngf_at(*p.s_end));
    let t_pf_end = ngf.pf_time(ngf_at(*p.s_end));
    let gf = LogTimeGradientFlow::new(&model);
    let gf_horizons: Vec<f64> = cps
        .iter()
        .map(|&s| ngf.log1p_gf_time(ngf_at(s)) + 1.0)
        .collect();
    let gf_run = stop_at_arc_lengths(
        &gf,
        gf.initial_state(&w0),
        m,
        &cps,
        &gf_horizons,
        &linspace(0.0, psi_end + 1.0, *p.flow_samples),
        &ctx.ode,
        &w_mm,
    )?;
    rep.stats("gradient flow (log time τ)", &gf_run.stats);
    let pf = PolyakFlow::new(&model);
    let pf_horizons: Vec<f64> = cps
        .iter()
        .map(|&s| 1.1 * ngf.pf_time(ngf_at(s)) + 1.0)
        .collect();
    let pf_run = stop_at_arc_lengths(
        &pf,
        pf.initial_state(&w0),
        m,
        &cps,
        &pf_horizons,
        &linspace(0.0, 1.1 * t_pf_end, *p.flow_samples),
        &ctx.ode,
        &w_mm,
    )?;
    rep.stats("Polyak flow", &pf_run.stats);
    let (gf_cp, pf_cp) = (&gf_run.stops, &pf_run.stops);

    // NGD with both step lengths, recorded on the grid
    let mut ngd_runs = Vec::new();
    for eta in p.ngd_etas.map(f64::from) {
        let mut stepper = FixedStepper::new(&model, ngd(eta))
            .map_err(|e| RunError::Other(format!("NGD: {e}")))?;
        let mut w = w0.clone();
        let k_end = (*p.s_end / eta).round() as usize;
        let mut on_grid: Vec<OnPath> = Vec::with_capacity(grid.len());
        let mut next = 0;
        for k in 0..=k_end {
            let s = k as f64 * eta;
            if next < grid.len() && (s - grid[next]).abs() <= 1e-9 * s.max(1.0) {
                on_grid.push(OnPath {
                    s: grid[next],
                    misalignment: one_minus_cos(&w, &w_mm),
                    w: w.clone(),
                });
                next += 1;
            }
            if k < k_end {
                stepper.step(&mut w);
            }
        }
        ngd_runs.push((eta, on_grid));
    }

    // the comparisons at each checkpoint
    let mut table = Table::new(&[
        "s",
        "one_minus_corr_ngf",
        "one_minus_corr_gf",
        "one_minus_corr_pf",
        "gf_tau_at_s",
        "ngf_psi_at_s",
        "pf_time_at_s",
        "ngf_pf_clock_at_s",
        "ngd_error_eta1",
        "ngd_error_eta2",
        "ngd_path_distance_eta1",
        "ngd_path_distance_eta2",
    ]);
    let (mut flow_gap, mut clock_gap, mut arc_gap) = (0.0f64, 0.0f64, 0.0f64);
    let ngd_grid_at = |run: &[OnPath], s: f64| {
        run.iter()
            .find(|x| (x.s - s).abs() <= 1e-9 * s.max(1.0))
            .expect("checkpoints are on the grid")
            .clone()
    };
    let eta_ratio = *p.ngd_etas[0] / *p.ngd_etas[1];
    for (j, &s) in cps.iter().enumerate() {
        let z = ngf_at(s);
        let mis_ngf = one_minus_cos(&z[..m], &w_mm);
        let (tau_gf, on_gf) = &gf_cp[j];
        let (t_pf, on_pf) = &pf_cp[j];
        flow_gap = stats::max([
            flow_gap,
            (on_gf.misalignment - mis_ngf).abs(),
            (on_pf.misalignment - mis_ngf).abs(),
        ]);
        arc_gap = stats::max([arc_gap, (on_gf.s - s).abs() / s, (on_pf.s - s).abs() / s]);
        let psi_s = ngf.log1p_gf_time(z);
        let pf_clock = ngf.pf_time(z);
        clock_gap = stats::max([
            clock_gap,
            (tau_gf - psi_s).abs() / psi_s,
            (t_pf - pf_clock).abs() / pf_clock,
        ]);
        let errors: Vec<(f64, f64)> = ngd_runs
            .iter()
            .map(|(_, run)| {
                let at = ngd_grid_at(run, s);
                let dist = crate::flow::norm(
                    &at.w
                        .iter()
                        .zip(&z[..m])
                        .map(|(a, b)| a - b)
                        .collect::<Vec<f64>>(),
                );
                ((at.misalignment - mis_ngf).abs(), dist)
            })
            .collect();
        let ratio = errors[0].0 / errors[1].0 / eta_ratio;
        rep.within(
            &format!("ngd-corr-error-ratio-eta-ratio.{s}"),
            &format!("s = {s}: NGD corr error ratio ÷ η ratio"),
            ratio,
            c.eta_ratio_band[0],
            c.eta_ratio_band[1],
        )
        .note(format!(
            "|corr_NGD − corr_NGF| = {:.3e} (η = {}), {:.3e} (η = {}); path distance \
             ratio ÷ η ratio = {:.3}",
            errors[0].0,
            p.ngd_etas[0],
            errors[1].0,
            p.ngd_etas[1],
            errors[0].1 / errors[1].1 / eta_ratio
        ));
        table.push(vec![
            Cell::Num(s),
            mis_ngf.into(),
            on_gf.misalignment.into(),
            on_pf.misalignment.into(),
            (*tau_gf).into(),
            psi_s.into(),
            (*t_pf).into(),
            pf_clock.into(),
            errors[0].0.into(),
            errors[1].0.into(),
            errors[0].1.into(),
            errors[1].1.into(),
        ]);
    }
    rep.at_most(
        "corr-gf-corr-ngf-corr-pf",
        "max_s |corr_GF − corr_NGF|, |corr_PF − corr_NGF| at the checkpoints",
        flow_gap,
        *c.corr_agreement,
    )
    .note("[D] GF, NGF and PF share one path: corr is a function of arc length alone");
    rep.at_most(
        "relative-gap-clocks-gf-tau-vs",
        "max_s relative gap of the clocks (GF τ vs NGF ψ, PF t vs NGF t_PF)",
        clock_gap,
        *c.clock_tol,
    )
    .note(format!(
        "dt/ds = 1/‖∇L‖ and dt_PF/ds = ‖∇L‖/(L − L*); arc length at the GF/PF events \
         matches its target to {arc_gap:.1e}"
    ));
    let increasing = psi.windows(2).all(|w| w[1] > w[0]);
    rep.holds(
        "ln-strictly-increasing-grid",
        "ln(1 + t(s)) strictly increasing on the grid",
        increasing,
    );
    let t_end = psi_end.exp_m1();
    let gf_time = "GF time t(s_end)";
    match p.data_file {
        None => {
            rep.at_least("gf-time", gf_time, t_end, *c.min_gf_time)
                .note(
                    "t(s) = ∫ ds/‖∇L‖ grows like e^{Γs} (spec §2.3; prototype 1.06e10 at s = 20)",
                );
        }
        Some(_) => rep.skip(
            "gf-time",
            gf_time,
            format!(
                "the threshold is Example 1's (its margin Γ at s = 20); on this data t(s_end) = \
                 {t_end:.3e} with Γ = {gamma:.4}, and its growth law is the next check"
            ),
        ),
    }
    // ln t(s) against s over the last half: the e^{Γs} growth law
    let half: Vec<usize> = (0..grid.len())
        .filter(|&k| grid[k] >= *p.s_end / 2.0)
        .collect();
    let slope = crate::analysis::fit::line_fit(
        &half.iter().map(|&k| grid[k]).collect::<Vec<_>>(),
        &half.iter().map(|&k| psi[k]).collect::<Vec<_>>(),
    )
    .slope;
    rep.close(
        "slope-ln-gf-over-end-end",
        "slope of ln t_GF(s) over s ∈ [s_end/2, s_end], ÷ Γ",
        slope / gamma,
        1.0,
        *c.growth_rate_tol,
    )
    .note(format!(
        "t(s) grows like e^{{Γs}} (spec §2.3): dt/ds = 1/‖∇L‖ and ln(L − L*) ≈ −Γs; \
         Γ = 1/‖W_mm‖ = {gamma:.5}, slope = {slope:.5}"
    ));
    rep.derive("gf_time_at_s_end", t_end);
    rep.derive("pf_time_at_s_end", t_pf_end);
    rep.derive("one_minus_corr_at_s_end", *ngf_mis.last().unwrap());
    rep.tables.push(("checkpoints".into(), table));

    let mut series = Table::new(&[
        "s",
        "ln_1p_gf_time",
        "pf_time",
        "one_minus_corr_ngf",
        "log10_excess_loss",
        "one_minus_corr_ngd_eta1",
        "one_minus_corr_ngd_eta2",
    ]);
    for k in 0..grid.len() {
        let ngd = |r: usize| {
            ngd_runs[r]
                .1
                .iter()
                .find(|x| (x.s - grid[k]).abs() <= 1e-9 * grid[k].max(1.0))
                .map_or(f64::NAN, |x| x.misalignment)
        };
        series.push(vec![
            Cell::Num(grid[k]),
            psi[k].into(),
            ngf.pf_time(tr_ngf.state(k)).into(),
            ngf_mis[k].into(),
            log10_from_ln(ngf_log_excess[k]).into(),
            ngd(0).into(),
            ngd(1).into(),
        ]);
    }
    rep.series = series;
    let curves = FlowCurves {
        grid: &grid,
        psi: &psi,
        ngf_mis: &ngf_mis,
        ngf_log_excess: &ngf_log_excess,
        gf: flow_curve(&gf_run.samples, m, &w_mm, &model),
        pf: flow_curve(&pf_run.samples, m, &w_mm, &model),
        pf_clock: (0..tr_ngf.len())
            .map(|k| ngf.pf_time(tr_ngf.state(k)))
            .collect(),
    };
    let (name, sizes) = (
        if p.data_file.is_some() {
            "your data"
        } else {
            "ex1"
        },
        &inst.data,
    );
    let data = (name, sizes.n, sizes.t, sizes.d);
    rep.figure = Some(figure(&curves, &ngd_runs, gamma, data));
    Ok(rep)
}

struct FlowCurves<'a> {
    grid: &'a [f64],
    psi: &'a [f64],
    ngf_mis: &'a [f64],
    ngf_log_excess: &'a [f64],
    gf: Curve,
    pf: Curve,
    pf_clock: Vec<f64>,
}

/// (a) 1 − corr vs s for the three flows and NGD; (b) the clocks t_GF(s), t_PF(s);
/// (c) NGD's deviation from the NGF divided by η; (d) L − L* vs s.
/// `data`: the data's name in the title and its sizes n, T, d.
fn figure(
    c: &FlowCurves,
    ngd: &[(f64, Vec<OnPath>)],
    gamma: f64,
    data: (&str, usize, usize, usize),
) -> Figure {
    let s: Vec<f64> = c.grid[1..].to_vec();
    let mut align = LinePanel::new(
        "(a) alignment along the common path",
        "arc length s",
        "1 − corr(W, W_mm)",
    )
    .log_y()
    .legend(LegendPosition::UpperRight)
    .series(Series::numerics("NGF", s.clone(), c.ngf_mis[1..].to_vec()).color(0))
    .series(samples(
        "GF (in log time)",
        &c.gf,
        c.gf.misalignment.clone(),
        1,
    ))
    .series(samples("PF", &c.pf, c.pf.misalignment.clone(), 2));
    for (r, (eta, run)) in ngd.iter().enumerate() {
        align = align.series(
            Series::numerics(
                format!("NGD η = {eta} (s = ηk)"),
                run[1..].iter().map(|x| x.s).collect(),
                run[1..].iter().map(|x| x.misalignment).collect(),
            )
            .color(3 + r),
        );
    }
    let t_gf: Vec<f64> = c.psi[1..].iter().map(|x| x.exp_m1()).collect();
    let (s_last, t_last) = (*s.last().unwrap(), *t_gf.last().unwrap());
    let growth: Vec<f64> = s
        .iter()
        .map(|&x| t_last * (gamma * (x - s_last)).exp())
        .collect();
    let clocks = LinePanel::new("(b) the clocks along the path", "arc length s", "time")
        .log_y()
        .legend(LegendPosition::UpperLeft)
        .series(Series::numerics("t_{GF}(s) = ∫ds/‖∇L‖", s.clone(), t_gf).color(1))
        .series(Series::numerics("t_{PF}(s)", s.clone(), c.pf_clock[1..].to_vec()).color(2))
        .series(
            Series::theory(
                "∝ exp(Γs), Γ = 1/‖W_mm‖ (through the end)",
                s.clone(),
                growth,
            )
            .color(1),
        )
        .series(samples(
            "GF samples (own clock)",
            &c.gf,
            c.gf.clock.iter().map(|x| x.exp_m1()).collect(),
            1,
        ))
        .series(samples(
            "PF samples (own clock)",
            &c.pf,
            c.pf.clock.clone(),
            2,
        ));
    let mut dev = LinePanel::new(
        "(c) NGD − NGF: O(η) (curves coincide)",
        "arc length s = ηk",
        "|corr_NGD − corr_NGF| / η",
    )
    .log_y()
    .legend(LegendPosition::UpperRight);
    for (r, (eta, run)) in ngd.iter().enumerate() {
        let (x, y): (Vec<f64>, Vec<f64>) = run[1..]
            .iter()
            .filter_map(|o| {
                let k = c
                    .grid
                    .iter()
                    .position(|&g| (g - o.s).abs() <= 1e-9 * g.max(1.0))?;
                Some((o.s, (o.misalignment - c.ngf_mis[k]).abs() / eta))
            })
            .unzip();
        dev = dev.series(Series::numerics(format!("η = {eta}"), x, y).color(3 + r));
    }
    let ln10_end = *c.ngf_log_excess.last().unwrap() / std::f64::consts::LN_10;
    let decay: Vec<f64> = s
        .iter()
        .map(|&x| ln10_end - gamma * (x - s_last) / std::f64::consts::LN_10)
        .collect();
    let loss = LinePanel::new(
        "(d) excess loss along the path",
        "arc length s",
        "log₁₀(L − L*)",
    )
    .legend(LegendPosition::UpperRight)
    .series(Series::theory("∝ exp(−Γs) (through the end)", s.clone(), decay).color(0))
    .series(
        Series::numerics(
            "NGF",
            s.clone(),
            c.ngf_log_excess[1..]
                .iter()
                .map(|&x| log10_from_ln(x))
                .collect(),
        )
        .color(0),
    )
    .series(samples("GF", &c.gf, c.gf.log10_excess.clone(), 1))
    .series(samples("PF", &c.pf, c.pf.log10_excess.clone(), 2));
    Figure::new(2)
        .title(format!(
            "GF, NGF and PF trace one path ({}, n = {}, T = {}, d = {}); NGD follows it to O(η)",
            data.0, data.1, data.2, data.3
        ))
        .panel(align)
        .panel(clocks)
        .panel(dev)
        .panel(loss)
}

/// A flow's own samples, as markers in its colour against arc length.
fn samples(label: &str, curve: &Curve, y: Vec<f64>, color: usize) -> Series {
    Series::new(label, curve.s.clone(), y, LineStyle::Markers).color(color)
}

/// Example 1 with W ∈ ℝ^{d×d} (gradient ~4·n·T·d²): three flows (dimension d²) sampled every
/// `grid_step` of arc length and at `flow_samples` points, and NGD for s_end/η steps per η.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let dim = n(*p.d) * n(*p.d);
    let grad = 4.0 * n(*p.n) * n(*p.t) * dim;
    let grid = *p.s_end / *p.grid_step + n(*p.flow_samples);
    let ngd: f64 = p.ngd_etas.iter().map(|eta| *p.s_end / **eta).sum();
    Cost::new()
        .doubles("n, t, d", "the tokens", n(*p.n) * n(*p.t) * n(*p.d))
        .ode("d", 3.0, dim, grad, ctx.ode.method)
        .records("s_end, grid_step, flow_samples, d", 3.0, grid, dim)
        .work("s_end, ngd_etas", "NGD steps", ngd, grad)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.flow-path-equivalence",
    paper: "003",
    summary: "Spec 003 §2.3: gradient, normalized-gradient and Polyak flows trace one path \
              (corr is a function of arc length s alone); the GF clock t(s) grows like e^{Γs}; \
              NGD deviates from the path by O(η).",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "gamma_margin",
        "gf_time_at_s_end",
        "one_minus_corr_at_s_end",
        "pf_time_at_s_end",
        "w_mm_norm",
    ],
    run,
};

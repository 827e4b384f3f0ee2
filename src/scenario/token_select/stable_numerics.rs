//! `stable-numerics` (spec 003 §8.2 regression): NGD in the log domain to ‖W‖ = 10³ on the
//! two-token example and ex1. Nothing may become NaN or infinite, NGD must keep its exact step
//! length, and ln(L − L*) must stay exact (two-token closed form) and linear in ‖W‖ with slope
//! −Γ long after e^{−g} has underflowed. A naive f64 evaluation along the same iterates is the
//! negative control: it must be flagged as breaking near the logit gap ln(1/ε) ≈ 37.
//!
//! `data_file` (X, y, u, optional z) replaces the list of data models by one run on the
//! user's tokens; `init_file` (array `W0`, d × d) replaces the start of every run. On a data
//! file the two-token closed forms (a property of that instance) and the naive-break window
//! (calibrated on the built-in instances: the break sits at g ≈ ln(C/ε) with an
//! instance-dependent C) are skipped; the finiteness, step-length, slope and line checks run.
//! On the built-in two-token data from another W₀ the closed forms hold with that W₀'s c₀, p.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::analysis::svm::one_minus_cos;
use crate::attention::logdomain::softplus;
use crate::attention::{FixedDecoder, Loss};
use crate::flow::{Method, OdeConfig};
use crate::instance::run_instance;
use crate::models::token_select::FixedStepper;
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::attention_common::{gaussian_matrix, line_fit, logits, min_logit_gap, naive_excess};
use super::common::{
    instance_arrays, w_svm, DataName, Source, UserFiles, BUILT_IN_GRAD, FIRST_FREE_STREAM,
};
use super::fixed_common::ngd;
use super::params::Band;
use super::two_token_rates::Start;
use crate::scenario::param::Open01;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Data models (spec 003 §1.3); two-token starts at W₀ = I (its canonical init), the
    /// others at iid N(0, init_std²) entries.
    pub data: NonEmpty<DataName>,
    /// NGD step length η (uncapped: the analysed algorithm).
    pub eta: Positive,
    /// Run until ‖W‖ ≥ target_norm.
    pub target_norm: Positive,
    /// Entry scale of the Gaussian W₀.
    pub init_std: Positive,
    /// The slope of ln(L − L*) against ‖W‖ is fitted on ‖W‖ ≥ fit_from·target_norm.
    pub fit_from: Open01,
    /// The user's tokens (X, y, u, optional z), replacing the list `data` by one run.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's start (array `W0`, d × d), replacing the start of every run.
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// |slope/(−Γ) − 1| of ln(L − L*) vs ‖W‖ (spec 003 §4.2 Lemma 1: −ln(L − L*)/‖W‖ → Γ).
    pub slope_rel_tol: Positive,
    /// max |residual| of ln(L − L*) about its fitted line (nats): "linear in ‖W‖".
    pub max_line_residual: Positive,
    /// |NGD step length/η − 1| at every step: the normalized direction never degrades.
    pub step_length_rel_tol: Positive,
    /// Two-token: |ln(L − L*) − (−1 + ln expm1(σ(−g)))|/|ln(L − L*)| at every step (§4.2).
    pub closed_form_rel_tol: Positive,
    /// Two-token: |(1 − corr)/closed form − 1|, closed form p/(c² + p + c√(c² + p)) with
    /// c = c₀ + ηk (§4.2).
    pub direction_rel_tol: Positive,
    /// The naive evaluation is "broken" once its relative error exceeds this.
    pub naive_break_rel_error: Positive,
    /// The smallest logit gap where the naive evaluation breaks must lie in this range
    /// (§8.2: σ(g) rounds to 1 at g ≈ ln(2/ε) ≈ 36.7).
    pub naive_break_gap: Band,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    // a run shorter than ~50 steps has no tail to fit
    if *p.target_norm < 50.0 * *p.eta {
        return Err(sc.invalid(
            "params.target_norm",
            format!("must be ≥ 50·eta = {} for a tail to fit", 50.0 * *p.eta),
        ));
    }
    UserFiles::new(&p.data_file, &p.init_file).validate_each(&p.data, 1, sc)
}

/// One NGD run, one row per step.
#[derive(Default)]
struct Run {
    norm: Vec<f64>,
    log_excess: Vec<f64>,
    /// ln L (for the cancellation factor L/(L − L*) of the naive subtraction).
    log_loss: Vec<f64>,
    naive: Vec<f64>,
    gap: Vec<f64>,
    one_minus_corr: Vec<f64>,
    /// |step length/η − 1| (steps only, one fewer than the rows).
    step_error: Vec<f64>,
    non_finite: usize,
}

fn non_finite(xs: &[f64]) -> usize {
    xs.iter().filter(|x| !x.is_finite()).count()
}

/// NGD from w until ‖W‖ ≥ target; records every iterate (including the last).
fn ngd_run(
    model: &FixedDecoder,
    mut w: Vec<f64>,
    w_mm: &[f64],
    p: &Params,
) -> Result<Run, RunError> {
    let mut stepper =
        FixedStepper::new(model, ngd(*p.eta)).map_err(|e| RunError::Other(e.to_string()))?;
    let (data, opt, gamma) = (model.data(), model.optimal_tokens(), model.scores());
    let mut run = Run::default();
    // ‖W‖ grows by at most η per step: the cap only guards against a stalled run
    let max_steps = (2.0 * (*p.target_norm + crate::flow::norm(&w)) / *p.eta).ceil() as usize + 10;
    for _ in 0..=max_steps {
        let s = logits(data, &w);
        let norm = crate::flow::norm(&w);
        run.norm.push(norm);
        run.log_excess.push(model.log_excess_loss(&w));
        run.log_loss.push(model.log_loss(&w));
        run.naive.push(naive_excess(data.t, &s, gamma, opt));
        run.gap.push(min_logit_gap(data.t, &s, opt));
        run.one_minus_corr.push(one_minus_cos(&w, w_mm));
        let attention = model.attention(&w);
        run.non_finite += non_finite(&w) + non_finite(&attention.log_one_minus_phi_opt);
        if norm >= *p.target_norm {
            return Ok(run);
        }
        let r = stepper.step(&mut w);
        run.non_finite += non_finite(&[r.log_excess, r.log_grad_norm, r.length]);
        run.step_error.push((r.length / *p.eta - 1.0).abs());
    }
    Err(RunError::Other(format!(
        "NGD did not reach ‖W‖ = {} in {max_steps} steps",
        *p.target_norm
    )))
}

/// Two-token closed forms along NGD from W₀ (spec 003 §4.2; the iterate moves along D̂ only):
/// ln(L − L*) from the logit gap, and 1 − corr from c_k = c₀ + ηk.
fn two_token_errors(run: &Run, eta: f64, start: Start) -> (f64, f64) {
    let mut loss_err = 0.0f64;
    let mut dir_err = 0.0f64;
    for k in 0..run.norm.len() {
        let g = run.gap[k];
        // L − L* = e^{−1} expm1(σ(−g)), σ(−g) = e^{−softplus(g)}
        let sig = (-softplus(g)).exp();
        let exact = -1.0 + crate::attention::logdomain::log_expm1(sig, -softplus(g));
        loss_err = stats::larger(loss_err, ((run.log_excess[k] - exact) / exact).abs());
        let closed = start.misalignment(start.c0 + eta * k as f64);
        dir_err = stats::larger(dir_err, (run.one_minus_corr[k] / closed - 1.0).abs());
    }
    (loss_err, dir_err)
}

/// First iterate where the naive evaluation is off by more than `tol` relative (or is not a
/// positive finite number).
fn naive_break(run: &Run, tol: f64) -> Option<usize> {
    (0..run.norm.len()).find(|&k| {
        let naive = run.naive[k];
        !(naive.is_finite() && naive > 0.0)
            || ((naive.ln() - run.log_excess[k]).exp() - 1.0).abs() > tol
    })
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rep = Report {
        series: Table::new(&[
            "data",
            "k",
            "norm_W",
            "ln_excess",
            "ln_abs_naive_excess",
            "naive_relative_error",
            "min_logit_gap",
            "one_minus_corr",
        ]),
        ..Report::default()
    };
    let files = UserFiles::new(&p.data_file, &p.init_file);
    let instances = files.instances(&p.data, ctx.scenario)?;
    let mut fig = Figure::new(instances.len()).title(format!(
        "NGD (η = {}) to ‖W‖ = {} in the log domain (top); the naive evaluation breaks \
         near logit gap 37 (bottom)",
        *p.eta, *p.target_norm
    ));
    let mut zooms = Vec::new();
    let mut used = Vec::new();
    for (j, (source, inst)) in instances.into_iter().enumerate() {
        let label = source.key();
        let (_, svm) = w_svm(&inst)?;
        let gamma_mm = 1.0 / svm.norm;
        let d = inst.data.d;
        let w0 = match files.starts(d, 1, ctx.scenario)? {
            Some(mut starts) => starts.swap_remove(0),
            None if source == Source::Named(DataName::TwoToken) => vec![1.0, 0.0, 0.0, 1.0],
            None => gaussian_matrix(d, *p.init_std, &mut ctx.rng(FIRST_FREE_STREAM + j as u64)),
        };
        used.push((
            label.clone(),
            instance_arrays(&inst, std::slice::from_ref(&w0)),
        ));
        let start = Start::of(&w0);
        let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential)
            .map_err(|e| RunError::Other(format!("{label}: {e}")))?;
        let run = ngd_run(&model, w0, &svm.w, p)?;
        let steps = run.step_error.len();

        rep.at_most(
            &format!("non-finite-values.{label}"),
            &format!("{label}: non-finite values"),
            run.non_finite as f64,
            0.0,
        )
        .note(format!(
            "W, ln(L − L*), ln‖∇L‖, ln(1 − φ_opt) over {steps} NGD steps to ‖W‖ = {:.0}, \
             min logit gap {:.0}",
            run.norm.last().unwrap(),
            run.gap.last().unwrap()
        ));
        let worst_step = stats::max(run.step_error.iter());
        rep.at_most(
            &format!("ngd-step-length-eta.{label}"),
            &format!("{label}: max |NGD step length/η − 1|"),
            worst_step,
            *c.step_length_rel_tol,
        );

        let from = *p.fit_from * *p.target_norm;
        let tail: Vec<usize> = (0..run.norm.len())
            .filter(|&k| run.norm[k] >= from)
            .collect();
        let xs: Vec<f64> = tail.iter().map(|&k| run.norm[k]).collect();
        let ys: Vec<f64> = tail.iter().map(|&k| run.log_excess[k]).collect();
        let fit = line_fit(&xs, &ys);
        rep.at_most(
            &format!("slope-ln-vs-gamma.{label}"),
            &format!("{label}: |slope of ln(L − L*) vs ‖W‖ / (−Γ) − 1|"),
            (fit.slope / -gamma_mm - 1.0).abs(),
            *c.slope_rel_tol,
        )
        .note(format!(
            "slope {:.6} vs −Γ = {:.6} on ‖W‖ ∈ [{from:.0}, {:.0}] ({} iterates)",
            fit.slope,
            -gamma_mm,
            run.norm.last().unwrap(),
            fit.points
        ));
        rep.at_most(
            &format!("ln-line-fit-window.{label}"),
            &format!("{label}: max |ln(L − L*) − line| on the fit window"),
            fit.max_residual,
            *c.max_line_residual,
        );
        if source == Source::Named(DataName::TwoToken) {
            let (loss_err, dir_err) = two_token_errors(&run, *p.eta, start);
            rep.at_most(
                &format!("rel-error-ln-vs-closed-form.{label}"),
                &format!("{label}: max rel. error of ln(L − L*) vs closed form"),
                loss_err,
                *c.closed_form_rel_tol,
            )
            .note("−1 + ln expm1(σ(−g)) at every iterate, g = W₁₁ − W₂₁ (§4.2)");
            if start.p > 0.0 {
                rep.at_most(
                    &format!("corr-closed-form.{label}"),
                    &format!("{label}: max |(1 − corr)/closed form − 1|"),
                    dir_err,
                    *c.direction_rel_tol,
                )
                .note("p/(c² + p + c√(c² + p)), c = c₀ + ηk (§4.2), via dist²/2");
            } else {
                rep.skip(
                    &format!("corr-closed-form.{label}"),
                    format!("{label}: max |(1 − corr)/closed form − 1|"),
                    "W₀ of init_file lies along D̂ (p = 0): 1 − corr ≡ 0, no rate to compare",
                );
            }
        } else {
            let half = run.one_minus_corr[tail[0]];
            let last = *run.one_minus_corr.last().unwrap();
            rep.at_most(
                &format!("corr-end-fit-start.{label}"),
                &format!("{label}: (1 − corr) at the end / at the fit start"),
                last / half,
                1.0,
            )
            .note("the NGD direction keeps improving in the tail (it did not in naive f64, §8.1)");
        }
        let broken = naive_break(&run, *c.naive_break_rel_error);
        let gap_at_break = broken.map_or(f64::NAN, |k| run.gap[k]);
        let break_title = format!("{label}: logit gap where the naive f64 excess breaks");
        if source.is_file() {
            rep.skip(
                &format!("naive-break-gap.{label}"),
                &break_title,
                "the window checks.naive_break_gap is calibrated on the built-in instances (the \
                 break sits at g ≈ ln(C/ε), C depends on the data); the break is reported in \
                 params.json",
            );
        } else {
            rep.within(
                &format!("naive-break-gap.{label}"),
                &break_title,
                gap_at_break,
                c.naive_break_gap[0],
                c.naive_break_gap[1],
            )
            .note(format!(
                "negative control: first iterate with relative error > {} (NaN: never broke)",
                *c.naive_break_rel_error
            ));
        }
        rep.derive(
            &label,
            serde_json::json!({
                "Gamma": gamma_mm,
                "steps": steps,
                "final_norm": run.norm.last(),
                "final_min_logit_gap": run.gap.last(),
                "final_ln_excess": run.log_excess.last(),
                "fit_slope": fit.slope,
                "fit_intercept": fit.intercept,
                "naive_break_iterate": broken,
                "naive_break_norm": broken.map(|k| run.norm[k]),
                "naive_break_gap": gap_at_break,
            }),
        );

        let naive_log: Vec<f64> = run
            .naive
            .iter()
            .map(|&x| if x != 0.0 { x.abs().ln() } else { f64::NAN })
            .collect();
        // relative error of the naive value (1 once it has collapsed to 0) and its prediction:
        // the subtraction L − L* amplifies the unit roundoff u by L/(L − L*)
        let naive_error: Vec<f64> = (0..run.norm.len())
            .map(|k| {
                (((run.naive[k].abs().ln() - run.log_excess[k]).exp()) - 1.0)
                    .abs()
                    .min(1.0)
            })
            .map(|e| if e.is_nan() { 1.0 } else { e })
            .collect();
        let predicted: Vec<f64> = (0..run.norm.len())
            .map(|k| (f64::EPSILON / 2.0 * (run.log_loss[k] - run.log_excess[k]).exp()).min(1.0))
            .collect();
        for k in 0..run.norm.len() {
            rep.series.push(vec![
                label.as_str().into(),
                k.into(),
                run.norm[k].into(),
                run.log_excess[k].into(),
                naive_log[k].into(),
                naive_error[k].into(),
                run.gap[k].into(),
                run.one_minus_corr[k].into(),
            ]);
        }
        let line_x = vec![0.0, *p.target_norm];
        let line_y: Vec<f64> = line_x
            .iter()
            .map(|x| fit.intercept + fit.slope * x)
            .collect();
        let mut full = LinePanel::new(
            format!("{label}: NGD to ‖W‖ = {}", *p.target_norm),
            "‖W‖",
            "ln(L − L*)",
        )
        .series(Series::numerics("log domain", run.norm.clone(), run.log_excess.clone()).color(0))
        .series(
            Series::theory(
                format!("fit, slope {:.4} (−Γ = {:.4})", fit.slope, -gamma_mm),
                line_x,
                line_y,
            )
            .color(2),
        )
        .series(
            Series::new(
                "naive ln|L − L*|",
                run.norm.clone(),
                naive_log,
                LineStyle::Dotted,
            )
            .color(1),
        )
        .legend(LegendPosition::UpperRight);
        let upto = broken.map_or(run.norm.len(), |k| (2 * k).clamp(10, run.norm.len()));
        let mut zoom = LinePanel::new(
            format!("{label}: the naive double-precision evaluation"),
            "‖W‖",
            "relative error of naive L − L*",
        )
        .log_y()
        .y_range(1e-17, 3.0)
        .series(
            Series::numerics(
                "naive evaluation",
                run.norm[..upto].to_vec(),
                naive_error[..upto].to_vec(),
            )
            .color(1),
        )
        .series(
            Series::theory(
                "u·L/(L − L*) (cancellation)",
                run.norm[..upto].to_vec(),
                predicted[..upto].to_vec(),
            )
            .color(1),
        )
        .hline(RefLine::new(*c.naive_break_rel_error, "break threshold").style(LineStyle::Dotted))
        .legend(LegendPosition::LowerRight);
        if let Some(k) = broken {
            let mark = RefLine::new(run.norm[k], format!("breaks at g = {:.1}", run.gap[k]))
                .style(LineStyle::Dotted);
            full = full.vline(mark.clone());
            zoom = zoom.vline(mark);
        }
        fig = fig.panel(full);
        zooms.push(zoom);
    }
    for z in zooms {
        fig = fig.panel(z);
    }
    rep.figure = Some(fig);
    rep.instance = Some(run_instance(used));
    Ok(rep)
}

/// Per data model NGD until ‖W‖ ≥ target_norm: each step has length η, so at least
/// target_norm/η steps, with a probe per step.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let steps = *p.target_norm / *p.eta;
    Cost::new()
        .work(
            "target_norm, eta",
            "NGD steps",
            n(p.data.len()) * steps,
            2.0 * BUILT_IN_GRAD,
        )
        .doubles(
            "target_norm, eta",
            "the per-step norms and losses",
            4.0 * steps,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.stable-numerics",
    paper: "003",
    summary: "NGD in the log domain to ‖W‖ = 10³ (spec 003 §8.2): no NaN/Inf, exact step \
              lengths, ln(L − L*) exact and linear in ‖W‖ with slope −Γ; the naive f64 \
              evaluation (negative control) breaks near logit gap 37.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[],
    run,
};

//! `polyak-step` (Thm 7; spec 003 §4.2): the Polyak step η_k = min((L − L*)/‖∇L‖², cap).
//! At every iterate the gradient is sandwiched by the excess loss,
//! Γ φ_min (L − L*) ≤ ⟨−∇L, W̄_mm⟩ ≤ ‖∇L‖ ≤ 2B²(1 + Δ̄)(L − L*),
//! so uncapped PS is NGD with η_eff = (L − L*)/‖∇L‖ ∈ [1/(2B²(1+Δ̄)), 1/(Γφ_min)]; with a cap,
//! every step from the first capped one k_sw on is capped, i.e. the run is GD(cap).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::flow::{Method, OdeConfig, SolverStats};
use crate::models::token_select::FixedRule;
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario};
use crate::stats;

use super::common::{optimizer_runs, DataName, UserFiles};
use super::fixed_common::{
    checkpoint_row, checkpoint_table, fixed_quantities, trace, Cap, Init, Probing, Setup,
};
use crate::scenario::param::Negative;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub data: DataName,
    /// Iterations K.
    pub steps: AtLeast<1>,
    pub init: Init,
    /// Step caps η_max ("none" = the analysed rule).
    pub caps: NonEmpty<Cap>,
    /// Figure only: lower end of the log₁₀(L − L*) axis (curves below it leave the panel).
    pub loss_axis_floor: Negative,
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
    /// Slack of the exact inequalities, in ln (spec §4: 1e−9).
    pub rel_slack: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if let Some(i) = p.caps.iter().position(|c| c.value() <= 0.0) {
        return Err(sc.invalid(&format!("params.caps[{i}]"), "a cap must be positive"));
    }
    UserFiles::new(&p.data_file, &p.init_file).validate(p.data, 1, sc)
}

/// Every-iterate accumulators of one run.
struct Sandwich {
    /// min_k ln⟨−∇L, W̄_mm⟩ − ln(Γ φ_min (L − L*)).
    lower: f64,
    /// max_k ln‖∇L‖ − ln(2B²(1 + Δ̄)(L − L*)).
    upper: f64,
    /// Range of η_eff = (L − L*)/‖∇L‖.
    eta_eff: (f64, f64),
    /// First capped step, and the uncapped steps after it as (k, (L−L*)/‖∇L‖²/cap).
    k_switch: Option<usize>,
    uncapped_after: Vec<(usize, f64)>,
    /// Iterations whose ‖∇L‖ is not below the certified switch level η_eff,min/cap.
    last_above_level: Option<usize>,
    /// Capped steps (every k) and uncapped steps at or below the certified level.
    uncapped_below_level: usize,
    /// Lemma 5 analogue (uncapped): min_k ⟨W_k,W̄⟩ − (⟨W₀,W̄⟩ + kΓ/(4B⁴(1+Δ̄))) and
    /// max_k ‖W_k‖ − (‖W₀‖ + Σ_{s<k} 1/(Γ φ_min(W_s))).
    lemma5_lower: f64,
    lemma5_upper: f64,
}

#[derive(Default)]
struct Curves {
    k: Vec<f64>,
    misalignment: Vec<f64>,
    eta_eff: Vec<f64>,
    eta_eff_ceiling: Vec<f64>,
    log10_step: Vec<f64>,
    log10_excess: Vec<f64>,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = UserFiles::new(&p.data_file, &p.init_file);
    let (setup, initial, mut rep) = Setup::single(p.data, files, &p.init, ctx)?;
    setup.premise_checks(&mut rep);
    let (gamma, b2) = (setup.margin, setup.b2());
    let delta_max = setup.assumptions.gap_max;
    let upper_factor = 2.0 * b2 * (1.0 + delta_max);
    let eta_eff_floor = 1.0 / upper_factor;
    let w0 = initial.w0;
    let mut table = checkpoint_table();
    let mut runs = Vec::new();
    for cap in p.caps.iter() {
        let label = format!("PS {}", cap.label());
        let cap_value = cap.value();
        let mut acc = Sandwich {
            lower: f64::INFINITY,
            upper: f64::NEG_INFINITY,
            eta_eff: (f64::INFINITY, 0.0),
            k_switch: None,
            uncapped_after: Vec::new(),
            last_above_level: None,
            uncapped_below_level: 0,
            lemma5_lower: f64::INFINITY,
            lemma5_upper: f64::NEG_INFINITY,
        };
        let mut curves = Curves::default();
        let (mut norm0, mut proj0, mut ceiling_sum) = (0.0, 0.0, 0.0);
        let start = std::time::Instant::now();
        trace(
            &setup,
            FixedRule::Polyak { cap: cap_value },
            &w0,
            *p.steps,
            Probing::EveryStep,
            |v| {
                let pr = v.probe;
                let phi_min = pr.phi_min();
                let log_along_mm = pr.log_grad_norm + pr.rho.ln();
                acc.lower = stats::smaller(
                    acc.lower,
                    log_along_mm - (gamma * phi_min).ln() - pr.log_excess,
                );
                acc.upper = stats::larger(
                    acc.upper,
                    pr.log_grad_norm - upper_factor.ln() - pr.log_excess,
                );
                let eta_eff = (pr.log_excess - pr.log_grad_norm).exp();
                acc.eta_eff = (
                    stats::smaller(acc.eta_eff.0, eta_eff),
                    stats::larger(acc.eta_eff.1, eta_eff),
                );
                if v.k == 0 {
                    norm0 = pr.norm;
                    proj0 = pr.proj;
                } else if cap_value.is_infinite() {
                    let k = v.k as f64;
                    acc.lemma5_lower = stats::smaller(
                        acc.lemma5_lower,
                        pr.proj - (proj0 + k * gamma / (2.0 * b2) * eta_eff_floor),
                    );
                    acc.lemma5_upper =
                        stats::larger(acc.lemma5_upper, pr.norm - (norm0 + ceiling_sum));
                }
                ceiling_sum += 1.0 / (gamma * phi_min);
                if let Some(step) = v.step {
                    let below = pr.log_grad_norm <= (eta_eff_floor / cap_value).ln();
                    if !below {
                        acc.last_above_level = Some(v.k);
                    } else if !step.capped {
                        acc.uncapped_below_level += 1;
                    }
                    match (acc.k_switch, step.capped) {
                        (None, true) => acc.k_switch = Some(v.k),
                        (Some(_), false) => acc.uncapped_after.push((
                            v.k,
                            (pr.log_excess - 2.0 * pr.log_grad_norm).exp() / cap_value,
                        )),
                        _ => {}
                    }
                }
                if v.checkpoint {
                    table.push(checkpoint_row(&label, &v));
                    if v.k > 0 {
                        curves.k.push(v.k as f64);
                        curves.misalignment.push(pr.one_minus_corr);
                        curves.eta_eff.push(eta_eff);
                        curves.eta_eff_ceiling.push(1.0 / (gamma * phi_min));
                        curves.log10_step.push(
                            (pr.log_excess - 2.0 * pr.log_grad_norm).min(cap_value.ln())
                                / std::f64::consts::LN_10,
                        );
                        curves
                            .log10_excess
                            .push(pr.log_excess / std::f64::consts::LN_10);
                    }
                }
            },
        )?;
        rep.stats(
            label.clone(),
            &SolverStats {
                method: "polyak".into(),
                steps: *p.steps,
                rhs_evals: 2 * *p.steps,
                wall_seconds: start.elapsed().as_secs_f64(),
                ..Default::default()
            },
        );
        checks(c, &label, cap_value, &acc, &mut rep);
        runs.push((label, cap_value, curves, acc.k_switch));
    }
    rep.series = table;
    rep.derive("eta_eff_floor", eta_eff_floor);
    rep.figure = Some(figure(p, &setup, &runs, eta_eff_floor));
    Ok(rep)
}

fn checks(c: &Checks, label: &str, cap: f64, acc: &Sandwich, rep: &mut Report) {
    rep.at_least(
        &format!("thm-sandwich-lower-ln-mm-ln.{label}"),
        &format!("[{label}] Thm 7 sandwich (lower): min_k ln⟨−∇L,W̄_mm⟩ − ln(Γφ_min(L−L*))"),
        acc.lower,
        -*c.rel_slack,
    )
    .note("every k");
    rep.at_most(
        &format!("thm-sandwich-upper-ln-ln-2b2.{label}"),
        &format!("[{label}] Thm 7 sandwich (upper): max_k ln‖∇L‖ − ln(2B²(1+Δ̄)(L−L*))"),
        acc.upper,
        *c.rel_slack,
    )
    .note(format!(
        "every k; η_eff = (L−L*)/‖∇L‖ ranged over [{:.4}, {:.4}]",
        acc.eta_eff.0, acc.eta_eff.1
    ));
    if cap.is_infinite() {
        rep.at_least(
            &format!("lemma-eta-eff-2b2-delta-mm.{label}"),
            &format!("[{label}] Lemma 5 (η_eff ≥ 1/(2B²(1+Δ̄))): min_k ⟨W_k,W̄_mm⟩ − lower_k"),
            acc.lemma5_lower,
            0.0,
        )
        .note("lower_k = ⟨W₀,W̄_mm⟩ + k·Γ/(2B²)·1/(2B²(1+Δ̄)), every k ≥ 1");
        rep.at_most(
            &format!("lemma-eta-eff-gammaphi-upper.{label}"),
            &format!("[{label}] Lemma 5 (η_eff ≤ 1/(Γφ_min)): max_k ‖W_k‖ − upper_k"),
            acc.lemma5_upper,
            0.0,
        )
        .note("upper_k = ‖W₀‖ + Σ_{s<k} 1/(Γφ_min(W_s)), every k ≥ 1");
    } else {
        rep.holds(
            &format!("cap-binds-sw-exists.{label}"),
            &format!("[{label}] the cap binds (k_sw exists)"),
            acc.k_switch.is_some(),
        )
        .note(format!("k_sw = {:?}", acc.k_switch));
        let k_cert = acc.last_above_level.map_or(0, |k| k + 1);
        rep.at_most(
            &format!("uncapped-steps-2b2-delta-cap.{label}"),
            &format!("[{label}] uncapped steps with ‖∇L‖ ≤ 1/(2B²(1+Δ̄)·cap)"),
            acc.uncapped_below_level as f64,
            0.0,
        )
        .note(format!(
            "the sandwich forces (L−L*)/‖∇L‖² > cap there; ‖∇L‖ stays below that level \
             from k = {k_cert} on, so PS = GD(cap) from then"
        ));
        let exceptions: Vec<String> = acc
            .uncapped_after
            .iter()
            .map(|(k, r)| format!("k = {k} (step/cap = {r:.4})"))
            .collect();
        rep.at_most(
            &format!("uncapped-steps-after-cert-ps-gd.{label}"),
            &format!("[{label}] uncapped steps after k_cert (PS = GD(cap) from k_cert)"),
            acc.uncapped_after
                .iter()
                .filter(|(k, _)| *k >= k_cert)
                .count() as f64,
            0.0,
        )
        .note(format!(
            "k_sw = {:?}, k_cert = {k_cert}; uncapped steps after k_sw: [{}]",
            acc.k_switch,
            exceptions.join(", ")
        ))
        .paper_claim("spec §4.2 recipe: every step from the first capped one (k_sw) on is capped");
    }
}

fn figure(
    p: &Params,
    setup: &Setup,
    runs: &[(String, f64, Curves, Option<usize>)],
    eta_eff_floor: f64,
) -> Figure {
    let mut align = LinePanel::new(
        "Alignment with W_{mm}",
        "iteration k",
        "1 − corr(W_k, W_{mm})",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerLeft);
    let mut eff = LinePanel::new(
        "Effective NGD step (Thm 7 sandwich)",
        "iteration k",
        "η_eff = (L − L*)/‖∇L‖",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::UpperRight)
    .hline(RefLine::new(eta_eff_floor, "1/(2B²(1+Δ̄))"));
    let top_cap = stats::max_with(1.0, runs.iter().map(|r| r.1).filter(|c| c.is_finite())).log10();
    let bottom = stats::axis_min(
        f64::INFINITY,
        runs.iter().flat_map(|r| r.2.log10_step.iter()),
    );
    let mut steps = LinePanel::new(
        "Step size",
        "iteration k",
        "log₁₀ η_k, η_k = min((L − L*)/‖∇L‖², cap)",
    )
    .log_x()
    .y_range(bottom - 0.5, top_cap + 4.0)
    .legend(LegendPosition::UpperLeft);
    let mut loss = LinePanel::new("Excess loss", "iteration k", "log₁₀(L − L*)")
        .log_x()
        .y_range(*p.loss_axis_floor, 1.0)
        .legend(LegendPosition::LowerLeft);
    for (color, (label, cap, cv, k_sw)) in runs.iter().enumerate() {
        align = align.series(
            Series::numerics(label.clone(), cv.k.clone(), cv.misalignment.clone()).color(color),
        );
        eff = eff
            .series(Series::numerics(label.clone(), cv.k.clone(), cv.eta_eff.clone()).color(color));
        if cap.is_infinite() {
            eff = eff.series(
                Series::theory(
                    "1/(Γφ_min) (uncapped run)",
                    cv.k.clone(),
                    cv.eta_eff_ceiling.clone(),
                )
                .color(color),
            );
        }
        steps = steps.series(
            Series::numerics(label.clone(), cv.k.clone(), cv.log10_step.clone()).color(color),
        );
        if cap.is_finite() {
            steps = steps.hline(RefLine::new(cap.log10(), label.clone()).color(color));
            if let Some(k) = k_sw.filter(|&k| k > 0) {
                steps = steps.vline(
                    RefLine::new(k as f64, "k_{sw}")
                        .color(color)
                        .style(LineStyle::Dotted),
                );
            }
        }
        loss = loss.series(
            Series::numerics(label.clone(), cv.k.clone(), cv.log10_excess.clone()).color(color),
        );
    }
    Figure::new(2)
        .title(format!(
            "Polyak step on {} (W₀: {}): Γ = {:.3}, B = {:.3}, Δ̄ = {}",
            setup.data,
            setup.init_label(&p.init),
            setup.margin,
            setup.token_bound,
            setup.assumptions.gap_max
        ))
        .panel(align)
        .panel(eff)
        .panel(steps)
        .panel(loss)
}

/// One Polyak-step run of `steps` iterations per cap on a built-in data model.
fn cost(p: &Params, _: &RunContext) -> Cost {
    optimizer_runs("steps, caps", n(p.caps.len()), *p.steps)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.polyak-step",
    paper: "003",
    summary: "Thm 7: the Polyak step with caps none / 10 / 10⁶; the gradient–excess-loss \
              sandwich at every iterate (PS = NGD with bounded η_eff) and, with a cap, GD(cap) \
              from the switch iterate k_sw on.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: fixed_quantities!["eta_eff_floor",],
    run,
};

//! `stage-times`: Theorem 4.1(ii) and "each stage lasts Θ(log 1/α)" (spec 004 §4, §7). On each
//! instance, the measured transition times t̂_k(α) of the log-layout flow (root events at
//! |β_{i_{k−1}}| = ½|β^k_{i_{k−1}}|) over A_conv ∪ A_ext regress onto T_k·Λ + a_k: the slope is
//! T_k of Algorithm 1, and the offsets a_k = Λ(τ̂_k − T_k) are O(1/|g_{i_{k−1}}|) and
//! Λ-independent. Stage durations D_k = t̂_{k+1} − t̂_k are Θ(Λ) with ρ_k → 1 at rate O(1/Λ).
//! The event times are checked against an implicit solver (Bdf with the exact Jacobian-vector
//! product) and against a run at halved tolerances.

use serde::{Deserialize, Serialize};

use crate::flow::{linspace, Method, OdeConfig, SolverStats};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, Check, InputError, Report, RunContext, RunError, Scenario, Table};

use super::common::{alpha_run, InstanceName};
use super::sweeps_common::{
    alpha_label, decreases, farthest_from_one, ln_alphas, nan_max, spread, validate_ln_alphas,
    Setup,
};
use crate::analysis::fit::line_fit;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Instances swept (spec §7: mini and R2).
    pub instances: Vec<InstanceName>,
    /// A_conv as log10 α (strictly decreasing); the offset spread is measured over these.
    pub log10_alpha: Vec<f64>,
    /// A_ext as ln α (below A_conv; log layout only): added to the regression and the ρ checks.
    #[serde(default)]
    pub ext_ln_alpha: Vec<f64>,
    /// Integration horizon τ_end = horizon_factor · T_K (covers the offsets a_k/Λ).
    pub horizon_factor: f64,
    /// Implicit solver for the cross-check (exact Jacobian-vector product).
    pub cross_method: Method,
    /// log10 α of the cross-check runs (a subset of A_conv; Bdf costs more per step).
    pub cross_log10_alpha: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// |slope/T_k − 1| of the fit t̂_k = slope·Λ + a_k (spec §4 T4.1(ii): 5e−4).
    pub slope_rel_tol: f64,
    /// |g_{i_{k−1}}|·|t̂_k − T_kΛ| ≤ this (spec §4 T4.1(ii): O(1), ≤ 10).
    pub offset_max: f64,
    /// |g_{i_{k−1}}|·(max − min over A_conv of Λ(τ̂_k − T_k)) ≤ this (spec §4: 0.05).
    pub offset_spread_max: f64,
    /// ρ_k = D_k/((T_{k+1} − T_k)Λ) ∈ [rho_min, rho_max] (spec §4 "Θ(log 1/α)": [0.5, 2]).
    pub rho_min: f64,
    pub rho_max: f64,
    /// Consecutive ratios of Λ|ρ_k − 1| over the grid lie in [1/x, x] (spec §4: x = 2).
    pub rho_ratio_max: f64,
    /// Relative agreement of τ̂_k between the two solvers (spec §8.5: 1e−6).
    pub cross_rel_tol: f64,
    /// |τ̂_k(tol/2) − τ̂_k(tol)| ≤ this · T_k (spec §8.3: 1e−7).
    pub tol_sensitivity: f64,
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.instances.is_empty() {
        return Err(sc.invalid("params.instances", "need at least one instance"));
    }
    validate_ln_alphas(sc, "params.log10_alpha", &ln_alphas(&p.log10_alpha), 2)?;
    let all = all_ln_alphas(p);
    validate_ln_alphas(sc, "params.ext_ln_alpha", &all, 3)?;
    if p.horizon_factor <= 1.0 || !p.horizon_factor.is_finite() {
        return Err(sc.invalid("params.horizon_factor", "must be > 1"));
    }
    if p.cross_log10_alpha
        .iter()
        .any(|a| !p.log10_alpha.contains(a))
    {
        return Err(sc.invalid(
            "params.cross_log10_alpha",
            "every cross-check α must be one of log10_alpha",
        ));
    }
    sc.require_positive(&[
        ("checks.slope_rel_tol", c.slope_rel_tol),
        ("checks.offset_max", c.offset_max),
        ("checks.offset_spread_max", c.offset_spread_max),
        ("checks.rho_min", c.rho_min),
        ("checks.cross_rel_tol", c.cross_rel_tol),
        ("checks.tol_sensitivity", c.tol_sensitivity),
    ])?;
    if c.rho_max <= c.rho_min || c.rho_ratio_max <= 1.0 {
        return Err(sc.invalid(
            "checks.rho_max",
            "need rho_max > rho_min and rho_ratio_max > 1",
        ));
    }
    Ok(())
}

fn all_ln_alphas(p: &Params) -> Vec<f64> {
    let mut all = ln_alphas(&p.log10_alpha);
    all.extend_from_slice(&p.ext_ln_alpha);
    all
}

/// Transition times of one instance over an α grid with one solver configuration.
struct Sweep {
    lambda: Vec<f64>,
    /// t̂_k (unrescaled) per α, k = 1..K (NaN where no transition was found).
    t_hat: Vec<Vec<f64>>,
    stats: Vec<SolverStats>,
}

fn sweep(
    setup: &Setup,
    ln_alpha: &[f64],
    cfg: &OdeConfig,
    tau_end: f64,
) -> Result<Sweep, RunError> {
    let taus = linspace(0.0, tau_end, 64);
    let mut out = Sweep {
        lambda: Vec::new(),
        t_hat: Vec::new(),
        stats: Vec::new(),
    };
    for &la in ln_alpha {
        let run = alpha_run(
            setup.instance.loss(),
            &setup.init,
            la,
            &setup.schedule,
            &taus,
            cfg,
        )?;
        out.lambda.push(run.lambda);
        out.t_hat.push(
            run.transitions
                .iter()
                .map(|t| t.unwrap_or(f64::NAN))
                .collect(),
        );
        out.stats.push(run.traj.stats);
    }
    Ok(out)
}

/// Largest relative difference max |x/y − 1| between two sweeps' τ̂_k (NaN-propagating).
fn max_relative_difference(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    nan_max(
        a.iter()
            .zip(b)
            .flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p / q - 1.0).abs())),
    )
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rep = Report {
        series: Table::new(&[
            "instance",
            "ln_alpha",
            "Lambda",
            "k",
            "T_k",
            "tau_hat",
            "offset",
            "normalized_offset",
            "rho_prev",
            "tau_hat_cross",
            "tau_hat_half_tol",
        ]),
        ..Default::default()
    };
    let ln_all = all_ln_alphas(p);
    let conv = p.log10_alpha.len();
    let mut figure = Figure::new(2)
        .title("Stage times: t̂_k = T_k·Λ + a_k with Λ-independent offsets (Theorem 4.1(ii))");
    for &name in &p.instances {
        let setup = Setup::build(name, ctx)?;
        let label = setup.label();
        let kk = setup.transitions();
        let t_th = setup.schedule.stage_times();
        let tau_end = p.horizon_factor * setup.last_time();
        let main = sweep(&setup, &ln_all, &ctx.ode, tau_end)?;
        let half_cfg = OdeConfig {
            rtol: 0.5 * ctx.ode.rtol,
            atol: 0.5 * ctx.ode.atol,
            ..ctx.ode
        };
        let half = sweep(&setup, &ln_all, &half_cfg, tau_end)?;
        let cross_cfg = OdeConfig {
            method: p.cross_method,
            ..ctx.ode
        };
        let cross = sweep(
            &setup,
            &ln_alphas(&p.cross_log10_alpha),
            &cross_cfg,
            tau_end,
        )?;
        for (j, s) in main.stats.iter().enumerate() {
            rep.stats(format!("{label} α={}", alpha_label(ln_all[j])), s);
        }
        for (j, s) in cross.stats.iter().enumerate() {
            let la = ln_alphas(&p.cross_log10_alpha)[j];
            rep.stats(
                format!("{label} α={} {}", alpha_label(la), p.cross_method.name()),
                s,
            );
        }

        // offsets a_k = t̂_k − T_kΛ and their normalization by the escape rate
        let offset = |j: usize, k: usize| main.t_hat[j][k - 1] - t_th[k] * main.lambda[j];
        let normalized = |j: usize, k: usize| setup.escape_rate(k) * offset(j, k);
        let missing = main.t_hat.iter().flatten().filter(|t| t.is_nan()).count();
        rep.check(
            Check::at_most(
                &format!("{label}: transitions not found over the α grid"),
                missing as f64,
                0.0,
            )
            .note(format!("{kk} transitions × {} values of α", ln_all.len())),
        );
        let mut slope_err = Vec::new();
        let mut spreads = Vec::new();
        for k in 1..=kk {
            let y: Vec<f64> = main.t_hat.iter().map(|t| t[k - 1]).collect();
            let fit = line_fit(&main.lambda, &y);
            let (slope, intercept) = (fit.slope, fit.intercept);
            slope_err.push((slope / t_th[k] - 1.0).abs());
            let conv_offsets: Vec<f64> = (0..conv).map(|j| normalized(j, k)).collect();
            spreads.push(spread(&conv_offsets));
            rep.derive(&format!("{label}.T_{k}"), t_th[k]);
            rep.derive(&format!("{label}.slope_{k}"), slope);
            rep.derive(&format!("{label}.intercept_{k}"), intercept);
        }
        rep.check(
            Check::at_most(
                &format!("{label}: max_k |slope_k/T_k − 1| of t̂_k vs Λ"),
                nan_max(slope_err.iter().copied()),
                c.slope_rel_tol,
            )
            .note(format!(
                "least squares over {} α (A_conv ∪ A_ext); per stage: {}",
                ln_all.len(),
                fmt_list(&slope_err)
            )),
        );
        let max_offset = nan_max(
            (0..ln_all.len())
                .flat_map(|j| (1..=kk).map(move |k| (j, k)))
                .map(|(j, k)| normalized(j, k).abs()),
        );
        rep.check(
            Check::at_most(
                &format!("{label}: max |g_(i_(k−1))|·|t̂_k − T_kΛ|"),
                max_offset,
                c.offset_max,
            )
            .note("normalized offset over all α and stages; O(1) by T4.1(ii)"),
        );
        rep.check(
            Check::at_most(
                &format!("{label}: spread over A_conv of |g|·Λ(τ̂_k − T_k)"),
                nan_max(spreads.iter().copied()),
                c.offset_spread_max,
            )
            .note(format!("per stage: {}", fmt_list(&spreads))),
        );

        // stage durations ρ_k = D_k/((T_{k+1} − T_k)Λ), D_k = t̂_{k+1} − t̂_k (t̂_0 = 0)
        let rho = |j: usize, k: usize| {
            let start = if k == 0 { 0.0 } else { main.t_hat[j][k - 1] };
            (main.t_hat[j][k] - start) / ((t_th[k + 1] - t_th[k]) * main.lambda[j])
        };
        let rhos: Vec<f64> = (0..ln_all.len())
            .flat_map(|j| (0..kk).map(move |k| (j, k)))
            .map(|(j, k)| rho(j, k))
            .collect();
        rep.check(
            Check::within(
                &format!("{label}: ρ_k farthest from 1"),
                farthest_from_one(&rhos),
                c.rho_min,
                c.rho_max,
            )
            .note("each stage lasts Θ(Λ): D_k/((T_{k+1} − T_k)Λ) over all α ≤ 1e−16 and k"),
        );
        let mut not_decreasing = 0;
        let mut ratios = Vec::new();
        for k in 0..kk {
            let dev: Vec<f64> = (0..ln_all.len()).map(|j| (rho(j, k) - 1.0).abs()).collect();
            not_decreasing += dev.windows(2).filter(|w| !decreases(w[0], w[1])).count();
            ratios.extend(
                dev.windows(2)
                    .zip(main.lambda.windows(2))
                    .map(|(d, l)| (l[1] * d[1]) / (l[0] * d[0])),
            );
        }
        rep.check(
            Check::at_most(
                &format!("{label}: steps where |ρ_k − 1| does not decrease as Λ grows"),
                not_decreasing as f64,
                0.0,
            )
            .note("ρ_k → 1 as α → 0, strictly along the grid"),
        );
        rep.check(
            Check::within(
                &format!("{label}: consecutive ratio of Λ|ρ_k − 1| farthest from 1"),
                farthest_from_one(&ratios),
                1.0 / c.rho_ratio_max,
                c.rho_ratio_max,
            )
            .note("ρ_k − 1 = O(1/Λ): Λ|ρ_k − 1| roughly constant over the grid"),
        );
        let cross_index: Vec<usize> = p
            .cross_log10_alpha
            .iter()
            .map(|a| p.log10_alpha.iter().position(|b| b == a).unwrap())
            .collect();
        let main_at_cross: Vec<Vec<f64>> =
            cross_index.iter().map(|&j| main.t_hat[j].clone()).collect();
        rep.check(
            Check::at_most(
                &format!(
                    "{label}: max relative |τ̂_k({}) − τ̂_k({})|",
                    ctx.ode.method.name(),
                    p.cross_method.name()
                ),
                max_relative_difference(&cross.t_hat, &main_at_cross),
                c.cross_rel_tol,
            )
            .note(format!(
                "same tolerances (rtol {:e}, atol {:e}), α = {}",
                ctx.ode.rtol,
                ctx.ode.atol,
                fmt_alphas(&ln_alphas(&p.cross_log10_alpha))
            )),
        );
        let sensitivity = nan_max((0..ln_all.len()).flat_map(|j| {
            let (main, half) = (&main, &half);
            let t_th = &t_th;
            (1..=kk).map(move |k| {
                (half.t_hat[j][k - 1] - main.t_hat[j][k - 1]).abs() / (main.lambda[j] * t_th[k])
            })
        }));
        rep.check(
            Check::at_most(
                &format!("{label}: max_k |τ̂_k(tol/2) − τ̂_k(tol)|/T_k"),
                sensitivity,
                c.tol_sensitivity,
            )
            .note("rtol and atol halved; over all α"),
        );

        // table and figure
        for (j, &la) in ln_all.iter().enumerate() {
            let cross_j = cross_index.iter().position(|&i| i == j);
            for (k, &t_k) in t_th.iter().enumerate().take(kk + 1).skip(1) {
                let lambda = main.lambda[j];
                rep.series.push(vec![
                    Cell::from(label),
                    la.into(),
                    lambda.into(),
                    k.into(),
                    t_k.into(),
                    (main.t_hat[j][k - 1] / lambda).into(),
                    offset(j, k).into(),
                    normalized(j, k).into(),
                    rho(j, k - 1).into(),
                    cross_j
                        .map_or(f64::NAN, |i| cross.t_hat[i][k - 1] / lambda)
                        .into(),
                    (half.t_hat[j][k - 1] / lambda).into(),
                ]);
            }
        }
        let mut offsets_panel = LinePanel::new(
            format!("{label}: normalized offsets |g_(i_(k−1))|·Λ(τ̂_k − T_k)"),
            "Λ = ln(1/α)",
            "|g|·Λ(τ̂_k − T_k)",
        )
        .log_x()
        .legend(LegendPosition::UpperLeft);
        let all_offsets: Vec<f64> = (0..ln_all.len())
            .flat_map(|j| (1..=kk).map(move |k| (j, k)))
            .map(|(j, k)| normalized(j, k))
            .filter(|v| v.is_finite())
            .collect();
        if let Some((lo, hi)) = headroom(&all_offsets, 0.9) {
            offsets_panel = offsets_panel.y_range(lo, hi);
        }
        let mut extrapolation = LinePanel::new(
            format!("{label}: τ̂_k/T_k vs 1/Λ, fit extrapolated to α → 0"),
            "1/Λ",
            "τ̂_k / T_k",
        )
        .hline(RefLine::new(1.0, "T_k (Algorithm 1)"))
        .legend(LegendPosition::UpperLeft);
        let inv: Vec<f64> = main.lambda.iter().map(|l| 1.0 / l).collect();
        for (k, &t_k) in t_th.iter().enumerate().take(kk + 1).skip(1) {
            let name = format!("k={k} {}", setup.activation_label(k));
            let y: Vec<f64> = (0..ln_all.len()).map(|j| normalized(j, k)).collect();
            offsets_panel = offsets_panel.series(
                Series::new(
                    name.clone(),
                    main.lambda.clone(),
                    y,
                    LineStyle::SolidMarkers,
                )
                .color(k - 1),
            );
            let ratio: Vec<f64> = (0..ln_all.len())
                .map(|j| main.t_hat[j][k - 1] / (main.lambda[j] * t_k))
                .collect();
            let fit = line_fit(&inv, &ratio);
            let (slope, intercept) = (fit.slope, fit.intercept);
            let x_max = inv.iter().fold(0.0_f64, |m, &x| m.max(x));
            extrapolation = extrapolation
                .series(Series::new(name, inv.clone(), ratio, LineStyle::Markers).color(k - 1))
                .series(
                    Series::theory(
                        "",
                        vec![0.0, x_max],
                        vec![intercept, intercept + slope * x_max],
                    )
                    .color(k - 1),
                );
        }
        figure = figure.panel(offsets_panel).panel(extrapolation);
    }
    rep.derive(
        "alphas",
        ln_all.iter().map(|&a| alpha_label(a)).collect::<Vec<_>>(),
    );
    rep.figure = Some(figure);
    Ok(rep)
}

/// A y-range around `values` with `top` × (their range) of free space above them for the legend.
fn headroom(values: &[f64], top: f64) -> Option<(f64, f64)> {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let range = (hi - lo).max(0.1 * hi.abs().max(1.0));
    lo.is_finite()
        .then_some((lo - 0.1 * range, hi + top * range))
}

fn fmt_list(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.2e}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt_alphas(ln_alpha: &[f64]) -> String {
    ln_alpha
        .iter()
        .map(|&a| alpha_label(a))
        .collect::<Vec<_>>()
        .join(", ")
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.stage-times",
    paper: "004",
    summary: "Theorem 4.1(ii) and Θ(log 1/α): measured transition times t̂_k(α) over \
              α = 1e−16 … e^−2000 regress onto T_k·Λ (Algorithm 1) with Λ-independent offsets \
              O(1/|g|); stage durations ρ_k → 1 at rate 1/Λ; explicit vs implicit solver and \
              halved tolerances agree.",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
    validate,
    run,
};

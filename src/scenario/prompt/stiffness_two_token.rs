//! `stiffness-two-token` (spec 002 §7.1–7.3, first benchmark): two samples of the two-token
//! model (C-2tok), one with a moderate equilibrium ratio R₁ (fast mode) and one with a large R₂
//! (slow mode), integrated in the u-coordinates to T = 25/λ_slow. The stiffness ratio is
//! κ = λ₁/λ₂ = [(1 + R₂)²R₁/((1 + R₁)²R₂)]² ≈ R₂²/16·(…) ∝ R₂². Cost — rhs evaluations, steps,
//! Jacobian evaluations, LU factorizations, not wall time — of the explicit Tsit45 (pinned at its
//! stability limit h ≈ 3.3/λ_max once the fast mode has decayed: cost ∝ κ), the implicit BDF,
//! ESDIRK34 and TR-BDF2 with the exact (diagonal) Jacobian (cost ≈ O(log T), flat in κ), and GD at
//! η = 1.9/λ_max (explicit Euler, iterations to ‖u − u*‖∞ ≤ tol ∝ κ).
//!
//! Explicit work is capped (`explicit_max_steps`, `gd_max_iters`): a capped run records the time
//! it reached, its work is a lower bound, and the work to T is extrapolated linearly (the step is
//! pinned, so steps ∝ time).

use std::cell::Cell;

use serde::{Deserialize, Serialize};

use crate::analysis::fit::line_fit;
use crate::flow::{integrate, FlowError, Method, OdeConfig, VectorField};
use crate::models::prompt::two_token::{s_star_from_ratio, stiffness_ratio, TwoToken};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::AboveOne;
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Equilibrium ratio of the fast sample (spec: 2, not 1, so that u₁* ≠ 0 in floating point).
    pub r1: AboveOne,
    /// Equilibrium ratios of the slow sample (spec: 10, 1e2, 1e3, 1e4).
    pub r2s: Vec<f64>,
    /// δ = a₁ − a₂ of both samples and N (spec: δ = 1, N = 2, so c = 2δ²/N = 1).
    pub delta: Positive,
    pub samples: AtLeast<1>,
    /// Horizon T = horizon_factor/λ_slow (spec: 25).
    pub horizon_factor: Positive,
    /// Initial logit differences (spec: u(0) = 0).
    pub u0: f64,
    /// Integrators (implicit ones with the exact Jacobian) and their tolerances (spec: rtol
    /// 1e−8, atol 1e−10).
    pub methods: NonEmpty<Method>,
    pub rtol: f64,
    pub atol: f64,
    /// Step cap of the explicit integrator (spec: 5e6; lowered for the run budget).
    pub explicit_max_steps: AtLeast<1>,
    /// GD: η = gd_factor/λ_max (spec: 1.9), run until ‖u − u*‖∞ ≤ gd_tol or gd_max_iters.
    pub gd_factor: f64,
    pub gd_tol: Positive,
    pub gd_max_iters: AtLeast<1>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Every implicit method: rhs evaluations at the largest κ ≤ this × at the smallest (spec:
    /// BDF at R₂ = 1e3 ≤ 4 × BDF at R₂ = 10).
    pub implicit_growth_max: Positive,
    /// Every implicit method: log–log slope of rhs evaluations vs κ ≤ this (theory ≈ 0).
    pub implicit_slope_max: f64,
    /// Tsit45 steps vs κ over the uncapped runs with κ ≥ stiff_kappa: log–log slope in [lo, hi]
    /// (theory 1; spec: ≥ 50× per decade of R₂ = 100× in κ, i.e. slope ≥ 0.85).
    pub explicit_slope_lo: f64,
    pub explicit_slope_hi: f64,
    /// GD iterations vs κ (κ ≥ stiff_kappa, uncapped): log–log slope in [lo, hi] (theory 1).
    pub gd_slope_lo: f64,
    pub gd_slope_hi: f64,
    pub stiff_kappa: f64,
    /// For κ ≥ advantage_kappa, Tsit45 rhs evaluations ≥ this × BDF's (spec: 10× at κ ≥ 1e3).
    pub advantage_min: Positive,
    pub advantage_kappa: f64,
    /// Every uncapped integration ends with ‖u(T) − u*‖∞ ≤ this (spec: 1e−6).
    pub final_error_max: Positive,
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.r2s.len() < 2 || p.r2s.iter().any(|&r| r <= *p.r1) {
        return Err(sc.invalid("params.r2s", "need at least 2 ratios R₂ > R₁"));
    }
    if p.r2s.windows(2).any(|w| w[1] <= w[0]) {
        return Err(sc.invalid("params.r2s", "must increase"));
    }
    if !p.methods.contains(&Method::Bdf) || !p.methods.contains(&Method::Tsit45) {
        return Err(sc.invalid("params.methods", "the advantage check needs bdf and tsit45"));
    }
    OdeConfig::new(Method::Bdf, p.rtol, p.atol)
        .validate()
        .map_err(|r| sc.invalid("params.rtol", r))?;
    if !(p.gd_factor > 0.0 && p.gd_factor < 2.0) {
        return Err(sc.invalid("params.gd_factor", "GD is stable only for η·λ_max < 2"));
    }
    if c.explicit_slope_lo >= c.explicit_slope_hi || c.gd_slope_lo >= c.gd_slope_hi {
        return Err(sc.invalid("checks.explicit_slope_lo", "each lo must be below its hi"));
    }
    Ok(())
}

/// The field with evaluation counters (they survive a capped, failed solve).
struct Counted<'a> {
    field: &'a TwoToken,
    rhs: Cell<usize>,
    jvp: Cell<usize>,
}

impl VectorField for Counted<'_> {
    fn dim(&self) -> usize {
        self.field.dim()
    }
    fn rhs(&self, t: f64, z: &[f64], dz: &mut [f64]) {
        self.rhs.set(self.rhs.get() + 1);
        self.field.rhs(t, z, dz);
    }
    fn jvp(&self, t: f64, z: &[f64], u: &[f64], out: &mut [f64]) {
        self.jvp.set(self.jvp.get() + 1);
        self.field.jvp(t, z, u, out);
    }
}

/// The work of one solver at one κ.
#[derive(Debug, Clone)]
struct Work {
    solver: String,
    r2: f64,
    kappa: f64,
    horizon: f64,
    steps: usize,
    rhs: usize,
    jvp: usize,
    lu: usize,
    /// ‖u(T) − u*‖∞ (GD: at its last iterate).
    final_error: f64,
    capped: bool,
    /// Time (GD: flow time kη) reached.
    t_reached: f64,
    /// Steps to T, extrapolated linearly from a capped run (= steps otherwise).
    steps_to_end: f64,
}

fn max_deviation(model: &TwoToken, u: &[f64]) -> f64 {
    stats::max(u.iter().zip(model.u_star()).map(|(a, b)| (a - b).abs()))
}

fn integrate_one(
    model: &TwoToken,
    method: Method,
    r2: f64,
    kappa: f64,
    horizon: f64,
    p: &Params,
) -> Result<Work, RunError> {
    let mut cfg = OdeConfig::new(method, p.rtol, p.atol);
    if !method.is_implicit() {
        cfg.max_steps = *p.explicit_max_steps;
    }
    let counted = Counted {
        field: model,
        rhs: Cell::new(0),
        jvp: Cell::new(0),
    };
    let u0 = vec![p.u0; model.dim()];
    let result = integrate(&counted, &u0, &[0.0, horizon], &cfg, None);
    let base = Work {
        solver: method.name().into(),
        r2,
        kappa,
        horizon,
        steps: 0,
        rhs: counted.rhs.get(),
        jvp: counted.jvp.get(),
        lu: 0,
        final_error: f64::NAN,
        capped: false,
        t_reached: horizon,
        steps_to_end: 0.0,
    };
    match result {
        Ok(tr) => Ok(Work {
            steps: tr.stats.steps,
            lu: tr.stats.linear_solver_setups,
            final_error: max_deviation(model, tr.last_state()),
            steps_to_end: tr.stats.steps as f64,
            ..base
        }),
        Err(FlowError::SolverFailed { t_reached, .. })
            if !method.is_implicit() && t_reached > 0.0 =>
        {
            let steps = *p.explicit_max_steps;
            Ok(Work {
                steps,
                capped: true,
                t_reached,
                steps_to_end: steps as f64 * horizon / t_reached,
                ..base
            })
        }
        Err(e) => Err(RunError::Other(format!(
            "{} at R₂ = {r2}: {e}",
            method.name()
        ))),
    }
}

fn gradient_descent(
    model: &TwoToken,
    r2: f64,
    kappa: f64,
    lambda_max: f64,
    p: &Params,
) -> Result<Work, RunError> {
    let eta = p.gd_factor / lambda_max;
    let mut u = vec![p.u0; model.dim()];
    let mut iters = 0usize;
    let mut err = max_deviation(model, &u);
    while err > *p.gd_tol && iters < *p.gd_max_iters {
        model.gd_step(&mut u, eta);
        iters += 1;
        // the deviation is checked every 64 iterations (and at the cap): cheap, and the
        // count is exact to within 64
        if iters.is_multiple_of(64) || iters == *p.gd_max_iters {
            err = max_deviation(model, &u);
            if !err.is_finite() || err > 1e6 {
                return Err(RunError::Other(format!(
                    "GD at R₂ = {r2} diverged (η = {eta:.3e}, iteration {iters})"
                )));
            }
        }
    }
    let capped = err > *p.gd_tol;
    // at the cap: extrapolate with the slow mode's contraction 1 − ηλ_slow
    let lambda_slow = lambda_max / kappa;
    let remaining = if capped {
        (err / *p.gd_tol).ln() / -(1.0 - eta * lambda_slow).ln()
    } else {
        0.0
    };
    Ok(Work {
        solver: "gd".into(),
        r2,
        kappa,
        horizon: iters as f64 * eta,
        steps: iters,
        rhs: iters,
        jvp: 0,
        lu: 0,
        final_error: err,
        capped,
        t_reached: iters as f64 * eta,
        steps_to_end: iters as f64 + remaining,
    })
}

/// Least-squares log–log slope of y vs κ over the given runs (NaN with fewer than 2).
fn slope(runs: &[&Work], y: impl Fn(&Work) -> f64) -> f64 {
    if runs.len() < 2 {
        return f64::NAN;
    }
    let x: Vec<f64> = runs.iter().map(|w| w.kappa.ln()).collect();
    let v: Vec<f64> = runs.iter().map(|w| y(w).ln()).collect();
    line_fit(&x, &v).slope
}

fn run(p: &Params, c: &Checks, _ctx: &RunContext) -> Result<Report, RunError> {
    let mut all: Vec<Work> = Vec::new();
    let mut rep = Report::default();
    for &r2 in &p.r2s {
        let model = TwoToken::from_values(
            &[*p.delta, *p.delta],
            vec![s_star_from_ratio(*p.r1), s_star_from_ratio(r2)],
            *p.samples,
        );
        let rates = model.rates();
        let (lmin, lmax) = stats::range(&rates);
        let kappa = lmax / lmin;
        let horizon = *p.horizon_factor / lmin;
        for &m in p.methods.iter() {
            all.push(integrate_one(&model, m, r2, kappa, horizon, p)?);
        }
        all.push(gradient_descent(&model, r2, kappa, lmax, p)?);
    }
    let of = |name: &str| -> Vec<&Work> { all.iter().filter(|w| w.solver == name).collect() };

    // implicit: flat in κ
    let implicit: Vec<Method> = p
        .methods
        .iter()
        .copied()
        .filter(|m| m.is_implicit())
        .collect();
    let mut growth = 0.0f64;
    let mut implicit_slope = f64::NEG_INFINITY;
    let mut implicit_note = Vec::new();
    for m in &implicit {
        let runs = of(m.name());
        let (first, last) = (runs[0], runs[runs.len() - 1]);
        let g = last.rhs as f64 / first.rhs as f64;
        let s = slope(&runs, |w| w.rhs as f64);
        growth = stats::larger(growth, g);
        implicit_slope = stats::larger(implicit_slope, s);
        implicit_note.push(format!(
            "{}: {} → {} rhs ({} → {} steps), slope {s:.3}",
            m.name(),
            first.rhs,
            last.rhs,
            first.steps,
            last.steps
        ));
        rep.derive(&format!("{}_rhs_slope", m.name()), s);
    }
    let kappas = format!(
        "κ = {}",
        of("bdf")
            .iter()
            .map(|w| format!("{:.3e}", w.kappa))
            .collect::<Vec<_>>()
            .join(", ")
    );
    rep.at_most(
        "implicit-rhs-evaluations-largest-kappa-smallest",
        "implicit: rhs evaluations at the largest κ / at the smallest (max over methods)",
        growth,
        *c.implicit_growth_max,
    )
    .note(format!("{}; {kappas}", implicit_note.join("; ")));
    rep.at_most(
        "implicit-log-log-slope-rhs-evaluations",
        "implicit: log–log slope of rhs evaluations vs κ (max over methods)",
        implicit_slope,
        c.implicit_slope_max,
    )
    .note("theory ≈ 0: steps limited by accuracy only, O(log T)");

    // explicit: ∝ κ
    let tsit = of("tsit45");
    let stiff_uncapped: Vec<&Work> = tsit
        .iter()
        .copied()
        .filter(|w| !w.capped && w.kappa >= c.stiff_kappa)
        .collect();
    let explicit_slope = slope(&stiff_uncapped, |w| w.steps as f64);
    let pinned: Vec<String> = tsit
        .iter()
        .filter(|w| w.kappa >= c.stiff_kappa)
        .map(|w| {
            // mean step over the run × λ_max: ≈ 3.3 when pinned at the stability limit
            let lmax = *p.horizon_factor * w.kappa / w.horizon;
            format!(
                "κ = {:.2e}: {}{} steps, mean h·λ_max = {:.2}",
                w.kappa,
                if w.capped { "capped at " } else { "" },
                w.steps,
                w.t_reached / w.steps as f64 * lmax
            )
        })
        .collect();
    rep.derive("tsit45_steps_slope", explicit_slope);
    rep.within(
        "explicit-tsit45-log-log-slope-steps",
        "explicit Tsit45: log–log slope of steps vs κ (uncapped, κ ≥ stiff_kappa)",
        explicit_slope,
        c.explicit_slope_lo,
        c.explicit_slope_hi,
    )
    .note(format!(
        "theory 1 (h pinned at ≈ 3.3/λ_max, T ∝ 1/λ_min); {} runs; {}",
        stiff_uncapped.len(),
        pinned.join("; ")
    ));
    let gd = of("gd");
    let gd_uncapped: Vec<&Work> = gd
        .iter()
        .copied()
        .filter(|w| !w.capped && w.kappa >= c.stiff_kappa)
        .collect();
    let gd_slope = slope(&gd_uncapped, |w| w.steps as f64);
    rep.derive("gd_iterations_slope", gd_slope);
    rep.within(
        "gd-eta-lambda-log-log-slope",
        "GD at η = 1.9/λ_max: log–log slope of iterations to tol vs κ",
        gd_slope,
        c.gd_slope_lo,
        c.gd_slope_hi,
    )
    .note(format!(
        "theory ≈ 1: ln(|e₀|/tol)·κ/1.9 iterations; {} uncapped runs; iterations: {}",
        gd_uncapped.len(),
        gd.iter()
            .map(|w| format!("{}{}", if w.capped { "≥" } else { "" }, w.steps))
            .collect::<Vec<_>>()
            .join(", ")
    ));

    // BDF vs Tsit45 at large κ (a capped Tsit45 count is a lower bound: the ratio is too)
    let bdf = of("bdf");
    let advantage = stats::min(
        bdf.iter()
            .zip(&tsit)
            .filter(|(b, _)| b.kappa >= c.advantage_kappa)
            .map(|(b, t)| t.rhs as f64 / b.rhs as f64),
    );
    rep.derive("min_tsit45_over_bdf_rhs", advantage);
    rep.at_least(
        "kappa-advantage-kappa-tsit45-rhs-evaluations",
        "κ ≥ advantage_kappa: Tsit45 rhs evaluations / BDF rhs evaluations (min)",
        advantage,
        *c.advantage_min,
    )
    .note("cost in rhs evaluations, not wall time: outputs stay reproducible");
    let final_error = stats::max(
        all.iter()
            .filter(|w| w.solver != "gd" && !w.capped)
            .map(|w| w.final_error),
    );
    let capped = all.iter().filter(|w| w.capped).count();
    rep.at_most(
        "uncapped-integrations-inf",
        "uncapped integrations: max ‖u(T) − u*‖∞",
        final_error,
        *c.final_error_max,
    )
    .note(format!(
        "T = {}/λ_slow; rtol {:e}, atol {:e}; {capped} capped runs (explicit_max_steps = {}, \
         gd_max_iters = {})",
        *p.horizon_factor, p.rtol, p.atol, *p.explicit_max_steps, *p.gd_max_iters
    ));
    let formula = stats::max(
        p.r2s
            .iter()
            .zip(&bdf)
            .map(|(&r2, w)| (stiffness_ratio(*p.r1, r2) / w.kappa - 1.0).abs()),
    );
    rep.derive("kappa_formula_rel_error", formula);

    rep.series = Table::new(&[
        "solver",
        "r2",
        "kappa",
        "horizon",
        "steps",
        "rhs_evals",
        "jacobian_evals",
        "lu_factorizations",
        "final_error",
        "capped",
        "t_reached",
        "steps_to_horizon",
    ]);
    for w in &all {
        rep.series.push(vec![
            w.solver.clone().into(),
            w.r2.into(),
            w.kappa.into(),
            w.horizon.into(),
            w.steps.into(),
            w.rhs.into(),
            w.jvp.into(),
            w.lu.into(),
            w.final_error.into(),
            w.capped.to_string().into(),
            w.t_reached.into(),
            w.steps_to_end.into(),
        ]);
    }
    let mut names: Vec<String> = p.methods.iter().map(|m| m.name().to_string()).collect();
    names.push("gd".into());
    rep.figure = Some(figure(&all, &names));
    Ok(rep)
}

fn figure(all: &[Work], names: &[String]) -> Figure {
    let kappas: Vec<f64> = all
        .iter()
        .filter(|w| w.solver == "gd")
        .map(|w| w.kappa)
        .collect();
    let mut panel = LinePanel::new(
        "two-token model, T = 25/λ_slow",
        "stiffness ratio κ = λ_max/λ_min",
        "gradient evaluations (GD: iterations)",
    )
    .log_x()
    .log_y()
    .y_range(10.0, 1e12)
    .legend(LegendPosition::UpperLeft);
    let mut reference = 0.0f64;
    for (k, name) in names.iter().enumerate() {
        let runs: Vec<&Work> = all.iter().filter(|w| &w.solver == name).collect();
        let x: Vec<f64> = runs.iter().map(|w| w.kappa).collect();
        // capped runs: their extrapolated work to T, in rhs evaluations per step
        let y: Vec<f64> = runs
            .iter()
            .map(|w| w.rhs as f64 * w.steps_to_end / w.steps.max(1) as f64)
            .collect();
        if name == "tsit45" {
            reference = y[0];
        }
        let capped = runs.iter().any(|w| w.capped);
        // the methods as the literature prints them (TR-BDF2, Tsit5(4)); "gd" is GD
        let shown = Method::parse(name).map_or_else(|| "GD".to_string(), |m| m.label().to_string());
        let label = if capped {
            format!("{shown} (capped: extrapolated)")
        } else {
            shown
        };
        panel = panel.series(Series::new(label, x, y, LineStyle::SolidMarkers).color(k));
    }
    let (k0, k1) = (kappas[0], *kappas.last().unwrap());
    panel = panel
        .series(Series::new(
            "reference slopes 1 and 0",
            vec![k0, k1],
            vec![reference, reference * k1 / k0],
            LineStyle::Dotted,
        ))
        .series(Series::new(
            "",
            vec![k0, k1],
            vec![reference, reference],
            LineStyle::Dotted,
        ));
    Figure::single(panel).title("Stiffness (two-token model): explicit work ∝ κ, implicit flat")
}

/// Per slow ratio R₂: one two-dimensional solve per method (the explicit one capped at
/// `explicit_max_steps`) and GD for up to `gd_max_iters`, O(N) per evaluation.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let runs = n(p.r2s.len());
    let eval = 20.0 * n(*p.samples);
    Cost::new()
        .work(
            "explicit_max_steps, r2s",
            "Tsit45 steps",
            runs * 6.0 * n(*p.explicit_max_steps),
            eval,
        )
        .ode("r2s", runs * n(p.methods.len()), 2.0, eval, Method::Bdf)
        .work(
            "gd_max_iters, r2s",
            "GD steps",
            runs * n(*p.gd_max_iters),
            eval,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "prompt.stiffness-two-token",
    paper: "002",
    summary: "Two-token model with R₁ = 2 and growing R₂ (κ ∝ R₂²): explicit Tsit45 and GD work \
              grows ∝ κ, implicit BDF/ESDIRK34/TR-BDF2 (exact Jacobian) stays flat.",
    solver: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "*_iterations_slope",
        "bdf_rhs_slope",
        "esdirk34_rhs_slope",
        "kappa_formula_rel_error",
        "min_tsit45_over_bdf_rhs",
        "tr_bdf2_rhs_slope",
        "tsit45_steps_slope",
    ],
    run,
};

//! `thm2-limits` (spec 000 R8(b), D2): where the Theorem 2 system goes. Off the bad line the
//! limit is sign(L)·(√ρ̄, √ρ), L = ρ̄x_0 + y_0 (the paper's garbled "(x∞², y∞²) = (√ρ̄, √ρ)"
//! without a sign rule, E4, E13); on it (L = 0) the trajectory runs into the saddle at the origin
//! at rate c_1ρ.

use serde::{Deserialize, Serialize};

use crate::flow::{integrate, linspace, Method, OdeConfig, SolverStats};
use crate::models::histogram::{Thm2ClosedForm, Thm2System};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::Positive;
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::thm2_common::{add_stats, describe, Thm2Case, Thm2Grid};
use super::worst_case::WorstCase;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The systems and initial points (spec 000 R8 recipe).
    pub grid: Thm2Grid,
    /// Off the bad line the limit is read at t_end = horizon/(min(ρ̄, A)c_1) (spec R8(b): 40).
    pub horizon: Positive,
    /// On the bad line the decay is measured at t = bad_line_time/(c_1ρ) (spec R8(b): 5).
    pub bad_line_time: Positive,
    /// Basin panels: one per c, all with time scale `basin_c1`, on a `basin_points`² grid
    /// of [−basin_half_width, basin_half_width]² (their limits are checked too).
    pub basin_c: Vec<f64>,
    pub basin_c1: Positive,
    pub basin_points: usize,
    pub basin_half_width: Positive,
    /// Bad-line panel: |x(t)/x_0| from (x_0, −ρ̄x_0) for these c (x_0 = grid.special_x0).
    pub bad_line_c: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max(|x(t_end)² − ρ̄|, |y(t_end)² − ρ|) of the integrated trajectories (spec 000 R8(b)).
    pub limit_tol: Positive,
    /// On the bad line |x|, |y| ≤ saddle_factor·|initial value| at t = 5/(c_1ρ) (spec 000 R8(b);
    /// the exact decay is ≤ e^{−5} ≈ 6.7e-3 there).
    pub saddle_factor: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    p.grid.validate(sc, "params.grid")?;
    if p.basin_points == 1 {
        return Err(sc.invalid("params.basin_points", "need 0 or ≥ 2 points per axis"));
    }
    Ok(())
}

/// Where one integrated trajectory ended, against the sign rule.
struct Outcome {
    x: f64,
    y: f64,
    /// max(|x² − ρ̄|, |y² − ρ|).
    limit_error: f64,
    /// Whether sign(x) = sign(y) = sign(L).
    sign_ok: bool,
}

/// Integrates a case with L ≠ 0 to t_end = horizon/(min(ρ̄, A)c_1).
fn limit_of(
    case: &Thm2Case,
    horizon: f64,
    ode: &OdeConfig,
) -> Result<(Outcome, SolverStats), RunError> {
    let imb = case.sys.imbalance();
    let t_end = horizon / (imb.rhob.min(imb.a) * case.sys.c1);
    let tr = integrate(&case.sys, &[case.x0, case.y0], &[0.0, t_end], ode, None)?;
    let z = tr.last_state();
    let (x, y) = (z[0], z[1]);
    let sign = case.closed_form().l().signum();
    Ok((
        Outcome {
            x,
            y,
            limit_error: stats::larger((x * x - imb.rhob).abs(), (y * y - imb.rho).abs()),
            sign_ok: x.signum() == sign && y.signum() == sign,
        },
        tr.stats,
    ))
}

/// max(|x(t)/x_0|, |y(t)/y_0|) on the bad line at t = time/(c_1ρ), from the closed form (the
/// integrated trajectory escapes the saddle after ≈ ln(1/tol)/(c_1ρ̄), spec 000 §7.4).
fn bad_line_decay(cf: &Thm2ClosedForm, time: f64) -> f64 {
    let sys = cf.system();
    let s = cf.at(time / (sys.c1 * sys.imbalance().rho));
    let (x0, y0) = cf.initial();
    let ratio = |now: f64, start: f64| {
        if start == 0.0 {
            now.abs()
        } else {
            (now / start).abs()
        }
    };
    stats::larger(ratio(s.x, x0), ratio(s.y, y0))
}

#[derive(Default)]
struct Tally {
    /// Integrated trajectories off the bad line whose limit has the wrong sign.
    sign_failures: usize,
    /// max(|x² − ρ̄|, |y² − ρ|) at t_end, over the trajectories off the bad line.
    limit: WorstCase,
    /// max |x|/|x_0|, |y|/|y_0| on the bad line at t = 5/(c_1ρ).
    decay: WorstCase,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rep = Report {
        series: Table::new(&[
            "c",
            "c1",
            "x0",
            "y0",
            "kind",
            "L",
            "x_end",
            "y_end",
            "limit_error",
            "sign_ok",
            "bad_line_decay",
        ]),
        ..Default::default()
    };
    let mut tally = Tally::default();
    let mut stats = SolverStats::default();
    let mut basin_panels = Vec::new();
    // the R8 grid, then one set per basin panel (their limits are checked as well)
    let mut sets = vec![(None, p.grid.cases())];
    let axis = linspace(-*p.basin_half_width, *p.basin_half_width, p.basin_points);
    for &bc in &p.basin_c {
        let sys = Thm2System {
            c: bc,
            c1: *p.basin_c1,
        };
        let cases = axis
            .iter()
            .flat_map(|&y0| {
                axis.iter().map(move |&x0| Thm2Case {
                    sys,
                    x0,
                    y0,
                    kind: "basin",
                })
            })
            .collect();
        sets.push((Some(sys), cases));
    }
    for (basin_sys, cases) in sets {
        let mut classes: [(Vec<f64>, Vec<f64>); 3] = Default::default();
        for case in &cases {
            let cf = case.closed_form();
            let l = cf.l();
            let nan = f64::NAN;
            let (x_end, y_end, limit_error, sign_ok, decay) = if l == 0.0 {
                let decay = bad_line_decay(&cf, *p.bad_line_time);
                tally.decay.add(decay, || describe(case));
                (nan, nan, nan, nan, decay)
            } else {
                let (o, s) = limit_of(case, *p.horizon, &ctx.ode)?;
                add_stats(&mut stats, &s);
                tally.sign_failures += usize::from(!o.sign_ok);
                tally.limit.add(o.limit_error, || describe(case));
                (o.x, o.y, o.limit_error, f64::from(u8::from(o.sign_ok)), nan)
            };
            let class = if l == 0.0 {
                2
            } else {
                usize::from(x_end < 0.0)
            };
            classes[class].0.push(case.x0);
            classes[class].1.push(case.y0);
            rep.series.push(vec![
                case.sys.c.into(),
                case.sys.c1.into(),
                case.x0.into(),
                case.y0.into(),
                case.kind.into(),
                l.into(),
                x_end.into(),
                y_end.into(),
                limit_error.into(),
                sign_ok.into(),
                decay.into(),
            ]);
        }
        if let Some(sys) = basin_sys {
            basin_panels.push(basin_panel(sys, *p.basin_half_width, classes));
        }
    }
    rep.stats(format!("{} integrations", tally.limit.count), &stats);
    rep.at_most(
        "integrated-limits-sign-sign",
        "integrated limits with sign ≠ sign(L)",
        tally.sign_failures as f64,
        0.0,
    )
    .note(format!(
        "{} trajectories off the bad line (grid and basin panels), limit read at \
         t = {}/(min(ρ̄, A)c1)",
        tally.limit.count, *p.horizon
    ))
    .paper_claim("Theorem 2 prints (x∞², y∞²) = (√ρ̄, √ρ) and gives no sign rule (E4, E13)");
    rep.at_most(
        "end-rho-end-rho",
        "max(|x(t_end)² − ρ̄|, |y(t_end)² − ρ|)",
        tally.limit.value,
        *c.limit_tol,
    )
    .note(format!("worst at {}", tally.limit.at))
    .paper_claim("x∞² = √ρ̄, y∞² = √ρ (E4)");
    rep.at_most(
        "bad-line-x0-y0-c1rho",
        "bad line: max |x|/|x0|, |y|/|y0| at t = 5/(c1ρ)",
        tally.decay.value,
        *c.saddle_factor,
    )
    .note(format!(
        "{} initial points with L = 0, closed form (the exact decay is ≤ e^(−{}))",
        tally.decay.count, *p.bad_line_time
    ));
    let decay_panel = bad_line_panel(p, c, ctx, &mut rep)?;
    let mut fig = Figure::new(basin_panels.len() + 1)
        .aspect(0.92)
        .title("Theorem 2 limits: sign(L)·(√ρ̄, √ρ) off the bad line, the saddle on it");
    for panel in basin_panels {
        fig = fig.panel(panel);
    }
    rep.figure = Some(fig.panel(decay_panel));
    Ok(rep)
}

/// Initial points coloured by the integrated limit, with the bad line and the nodes.
fn basin_panel(sys: Thm2System, half_width: f64, classes: [(Vec<f64>, Vec<f64>); 3]) -> LinePanel {
    let imb = sys.imbalance();
    let [plus, minus, on_line] = classes;
    let xe = half_width.min(half_width / imb.rhob);
    let mut panel = LinePanel::new(
        format!(
            "limit of each initial point (c = {}, c₁ = {})",
            sys.c, sys.c1
        ),
        "x₀",
        "y₀",
    )
    .x_range(-half_width * 1.05, half_width * 1.05)
    .y_range(-half_width * 1.05, half_width * 1.05)
    .series(Series::new("→ +(√ρ̄, √ρ)", plus.0, plus.1, LineStyle::Markers).color(0))
    .series(Series::new("→ −(√ρ̄, √ρ)", minus.0, minus.1, LineStyle::Markers).color(1));
    if !on_line.0.is_empty() {
        panel = panel.series(
            Series::new("L = 0 → saddle", on_line.0, on_line.1, LineStyle::Markers).color(2),
        );
    }
    panel
        .series(
            Series::new(
                "y = −ρ̄x (L = 0)",
                vec![-xe, xe],
                vec![imb.rhob * xe, -imb.rhob * xe],
                LineStyle::Dashed,
            )
            .color(3),
        )
        .series(
            Series::new(
                "nodes ±(√ρ̄, √ρ)",
                vec![imb.rhob.sqrt(), -imb.rhob.sqrt()],
                vec![imb.rho.sqrt(), -imb.rho.sqrt()],
                LineStyle::Markers,
            )
            .color(6),
        )
}

/// |x(t)/x_0| on the bad line against c_1ρt: closed form (≈ e^{−c_1ρt}) and the integrated
/// trajectory, which escapes once the saddle has amplified its error to O(1).
fn bad_line_panel(
    p: &Params,
    c: &Checks,
    ctx: &RunContext,
    rep: &mut Report,
) -> Result<LinePanel, RunError> {
    let x0 = *p.grid.special_x0;
    let s_end = 2.0 * *p.bad_line_time;
    let mut panel = LinePanel::new("bad line L = 0: decay into the saddle", "c₁ρt", "|x(t)/x₀|")
        .log_y()
        .legend(LegendPosition::LowerLeft)
        .vline(RefLine::new(*p.bad_line_time, "t = 5/(c₁ρ)"))
        .hline(RefLine::new(*c.saddle_factor, "bound").style(LineStyle::Dotted));
    let mut stats = SolverStats::default();
    for (k, &bc) in p.bad_line_c.iter().enumerate() {
        let sys = Thm2System {
            c: bc,
            c1: *p.basin_c1,
        };
        let imb = sys.imbalance();
        let case = Thm2Case {
            sys,
            x0,
            y0: -(imb.rhob * x0),
            kind: "L = 0",
        };
        let scale = sys.c1 * imb.rho;
        let s_axis = linspace(0.0, s_end, 201);
        let times: Vec<f64> = s_axis.iter().map(|s| s / scale).collect();
        let tr = integrate(&sys, &[case.x0, case.y0], &times, &ctx.ode, None)?;
        add_stats(&mut stats, &tr.stats);
        let cf = case.closed_form();
        let closed: Vec<f64> = times.iter().map(|&t| (cf.at(t).x / x0).abs()).collect();
        let ode: Vec<f64> = tr.component(0).iter().map(|x| (x / x0).abs()).collect();
        panel = panel
            .series(Series::numerics(format!("c = {bc}"), s_axis.clone(), ode).color(k))
            .series(Series::theory("", s_axis, closed).color(k));
    }
    rep.stats("bad-line panel", &stats);
    // legend entries for the two line styles, drawn as single points under the curves' start
    Ok(panel
        .series(Series::numerics("ODE", vec![0.0], vec![1.0]).color(6))
        .series(Series::theory("closed form", vec![0.0], vec![1.0]).color(6)))
}

/// One two-dimensional solve per case of the grid and of each basin panel (basin_points²).
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let basin = n(p.basin_c.len()) * n(p.basin_points).powi(2);
    let cases = p.grid.case_count() + basin + n(p.bad_line_c.len());
    Cost::new()
        .ode(
            "grid.points, basin_points",
            cases,
            2.0,
            20.0,
            ctx.ode.method,
        )
        .doubles(
            "grid.points, basin_points",
            "per-case limits and classes",
            8.0 * cases,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.thm2-limits",
    paper: "000",
    summary: "Theorem 2 limits over R8's grid: sign(L)·(√ρ̄, √ρ) off the bad line \
              L = ρ̄x₀ + y₀ = 0, decay into the saddle on it (spec 000 R8b, D2; E4, E13).",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &[],
    run,
};

//! `thm2-onset-time` (spec 000 R8(d), E6): the time T after which xy > 0 in the Theorem 2
//! system, i.e. the last sign change of x or y. Corrected: T = max(0, t_x, t_y) with
//! t_x = −ln(−c_2)/(2Ac_1) (r_0 < −ρ̄, x crosses 0) and t_y = −ln(ρ²c_2)/(2Ac_1) (−ρ̄ < r_0 ≤ 0,
//! y crosses 0), c_2 = L/K. The paper prints "+ ln ρ²" for "− ln ρ²" and conditions that assume
//! x_0 > 0 (E6). Checked on random (c, c_1, x_0, y_0): on a fine grid of the closed form, and
//! with the root finder of the integrator on a subset.

use std::path::PathBuf;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::flow::{integrate, linspace, Events, Method, OdeConfig, SolverStats};
use crate::instance::histogram::Thm2Cases;
use crate::instance::InstanceFile;
use crate::models::histogram::{Thm2ClosedForm, Thm2System};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::thm2_common::add_stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Number of random cases (spec 000 R8(d): 2000).
    pub cases: usize,
    /// c ~ U(c_range), c_1 ~ U(c1_range), x_0, y_0 ~ U(−half_width, half_width).
    pub c_range: [f64; 2],
    pub c1_range: [f64; 2],
    pub half_width: Positive,
    /// xy > 0 is checked on (T, T + after/c_1] (spec R8(d): 20).
    pub after: Positive,
    /// Closed-form samples per case on [0, T + after/c_1].
    pub grid_samples: AtLeast<2>,
    /// Besides the grid, xy is probed at T ± probe/c_1: T is sharp, not only within the grid.
    pub probe: Positive,
    /// The first `ode_cases` cases are also integrated, locating sign changes as events.
    pub ode_cases: usize,
    /// Cases drawn as x(t), y(t) traces: [c, c_1, x_0, y_0] each.
    pub traces: Vec<[f64; 4]>,
    /// The cases (`cases`, (k, 4), rows (c, c_1, x_0, y_0)): replace cases, c_range, c1_range,
    /// half_width and the draws. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max c_1·|t_event − T| of the integrated sign changes: the event is located on the dense
    /// output, whose error δ ≈ 1e-9 moves a crossing by δ/|ẋ| (|ẋ| = O(c_1|L|) at T).
    pub event_time_tol: Positive,
}

/// The cases of the file, if one is given.
fn file_cases(p: &Params, sc: &Scenario) -> Result<Option<Vec<[f64; 4]>>, InputError> {
    p.data_file
        .as_deref()
        .map(|f| Ok(sc.read_instance::<Thm2Cases>("data_file", f)?.cases))
        .transpose()
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let given = file_cases(p, sc)?;
    let range_ok = |r: [f64; 2]| r[0] <= r[1];
    if !range_ok(p.c_range) {
        return Err(sc.invalid("params.c_range", "need low ≤ high"));
    }
    if !(range_ok(p.c1_range) && p.c1_range[0] > 0.0) {
        return Err(sc.invalid("params.c1_range", "need 0 < low ≤ high"));
    }
    let cases = given.as_ref().map_or(p.cases, Vec::len);
    if cases == 0 {
        return Err(sc.invalid("params.cases", "need at least one case"));
    }
    if p.ode_cases > cases {
        return Err(sc.invalid(
            "params.ode_cases",
            format!("cannot exceed the number of cases ({cases})"),
        ));
    }
    if let Some(bad) = p.traces.iter().position(|t| t[1] <= 0.0) {
        return Err(sc.invalid(&format!("params.traces[{bad}]"), "c1 must be positive"));
    }
    Ok(())
}

/// Samples where sign(xy) disagrees with sign(t − onset): xy ≤ 0 is required before the onset
/// and xy > 0 after it. A NaN onset violates everywhere.
fn sign_violations(cf: &Thm2ClosedForm, onset: f64, times: &[f64]) -> usize {
    times
        .iter()
        .filter(|&&t| {
            let s = cf.at(t);
            let xy = s.x * s.y;
            !(if t < onset { xy <= 0.0 } else { xy > 0.0 })
        })
        .count()
}

/// The sample times of one case: a grid on [0, T + after/c_1] without T itself, and T ± probe.
fn sample_times(onset: f64, c1: f64, p: &Params) -> Vec<f64> {
    let end = onset + *p.after / c1;
    let mut times: Vec<f64> = linspace(0.0, end, *p.grid_samples)
        .into_iter()
        .filter(|&t| t != onset && t > 0.0)
        .collect();
    let probe = *p.probe / c1;
    times.push(onset + probe);
    if onset - probe > 0.0 {
        times.push(onset - probe);
    }
    times
}

#[derive(Default)]
struct PaperTally {
    equal: usize,
    differs: usize,
    nan: usize,
    negative: usize,
    violating: usize,
}

/// The cases: the file's, else `p.cases` drawn from stream 1 (c, c_1, x_0, y_0 uniform).
fn cases(p: &Params, ctx: &RunContext) -> Result<Vec<[f64; 4]>, RunError> {
    if let Some(cases) = file_cases(p, ctx.scenario)? {
        return Ok(cases);
    }
    let mut rng = ctx.rng(1);
    let mut draw = |r: [f64; 2]| {
        if r[0] == r[1] {
            r[0]
        } else {
            rng.random_range(r[0]..r[1])
        }
    };
    Ok((0..p.cases)
        .map(|_| {
            let c = draw(p.c_range);
            let c1 = draw(p.c1_range);
            let x0 = draw([-*p.half_width, *p.half_width]);
            let y0 = draw([-*p.half_width, *p.half_width]);
            [c, c1, x0, y0]
        })
        .collect())
}

fn run(p: &Params, chk: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let cases = cases(p, ctx)?;
    let mut rep = Report {
        instance: Some(
            Thm2Cases {
                cases: cases.clone(),
            }
            .to_arrays(),
        ),
        series: Table::new(&[
            "c",
            "c1",
            "x0",
            "y0",
            "T",
            "T_paper",
            "violations",
            "violations_paper",
            "ode_sign_changes",
            "ode_last_change",
        ]),
        ..Default::default()
    };
    let (mut violations, mut samples) = (0usize, 0usize);
    let mut paper = PaperTally::default();
    let (mut event_count_errors, mut worst_event) = (0usize, 0.0f64);
    let mut stats = SolverStats::default();
    // scatter of the printed T against the corrected one: (equal, differs)
    let mut scatter: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    for (k, &[c, c1, x0, y0]) in cases.iter().enumerate() {
        let sys = Thm2System { c, c1 };
        let cf = sys.closed_form(x0, y0);
        let onset = cf.onset_time();
        let printed = cf.paper_onset_time();
        let times = sample_times(onset, c1, p);
        let v = sign_violations(&cf, onset, &times);
        let v_paper = sign_violations(&cf, printed, &times);
        violations += v;
        samples += times.len();
        let same = (printed - onset).abs() <= 1e-12 * onset.max(1.0);
        if printed.is_nan() {
            paper.nan += 1;
        } else if same {
            paper.equal += 1;
        } else {
            paper.differs += 1;
        }
        paper.negative += usize::from(printed < 0.0);
        paper.violating += usize::from(v_paper > 0);
        if printed.is_finite() {
            let i = usize::from(!same);
            scatter[i].0.push(onset);
            scatter[i].1.push(printed);
        }
        let (mut changes, mut last_change) = (f64::NAN, f64::NAN);
        if k < p.ode_cases {
            // x and y as event functions: every sign change of either is located
            let func = |_t: f64, z: &[f64], g: &mut [f64]| g.copy_from_slice(z);
            let events = Events {
                count: 2,
                func: &func,
                terminal: false,
            };
            let end = onset + *p.after / c1;
            let tr = integrate(&sys, &[x0, y0], &[0.0, end], &ctx.ode, Some(&events))?;
            add_stats(&mut stats, &tr.stats);
            let expected = usize::from(onset > 0.0);
            event_count_errors += usize::from(tr.events.len() != expected);
            changes = tr.events.len() as f64;
            if let Some(ev) = tr.events.last() {
                last_change = ev.t;
                if onset > 0.0 {
                    worst_event = stats::larger(worst_event, c1 * (ev.t - onset).abs());
                }
            }
        }
        rep.series.push(vec![
            c.into(),
            c1.into(),
            x0.into(),
            y0.into(),
            onset.into(),
            printed.into(),
            v.into(),
            v_paper.into(),
            changes.into(),
            last_change.into(),
        ]);
    }
    rep.stats(format!("{} integrations", p.ode_cases), &stats);
    let claim = format!(
        "printed T (Theorem 2): equal to the corrected T in {} cases, different in {}, NaN in \
         {}, negative in {}; it violates the sign rule in {} of {} cases (E6)",
        paper.equal,
        paper.differs,
        paper.nan,
        paper.negative,
        paper.violating,
        cases.len()
    );
    rep.at_most(
        "closed-form-samples-sign-xy-sign",
        "closed form: samples with sign(xy) ≠ sign(t − T)",
        violations as f64,
        0.0,
    )
    .note(format!(
        "{} cases, {samples} samples on [0, T + {}/c1] and at T ± {:e}/c1",
        cases.len(),
        *p.after,
        *p.probe
    ))
    .paper_claim(claim);
    if p.ode_cases > 0 {
        rep.at_most(
            "ode-cases-whose-number-sign-changes",
            "ODE: cases whose number of sign changes of x, y ≠ [T > 0]",
            event_count_errors as f64,
            0.0,
        )
        .note(format!(
            "{} integrated cases; x and y are event functions",
            p.ode_cases
        ));
        rep.at_most(
            "ode-c1-last-sign-change",
            "ODE: max c1·|last sign change − T|",
            worst_event,
            *chk.event_time_tol,
        )
        .note("event location of the integrator against the corrected T");
    }
    rep.derive("paper_T_equal", paper.equal);
    rep.derive("paper_T_differs", paper.differs);
    rep.derive("paper_T_nan", paper.nan);
    rep.derive("paper_T_negative", paper.negative);
    rep.derive("paper_T_violates_sign_rule", paper.violating);

    let mut fig = Figure::new(2)
        .title("Onset time T of Theorem 2: corrected vs printed")
        .panel(scatter_panel(scatter, paper.nan));
    let mut trace_stats = SolverStats::default();
    for trace in &p.traces {
        let (panel, s) = trace_panel(*trace, p, ctx)?;
        add_stats(&mut trace_stats, &s);
        fig = fig.panel(panel);
    }
    rep.stats("traces", &trace_stats);
    rep.figure = Some(fig);
    Ok(rep)
}

fn scatter_panel(scatter: [(Vec<f64>, Vec<f64>); 2], nan: usize) -> LinePanel {
    let [equal, differs] = scatter;
    let t_max = stats::max_with(0.0, equal.0.iter().chain(&differs.0));
    let title = if nan > 0 {
        format!("printed T vs corrected T ({nan} printed values NaN, not shown)")
    } else {
        "printed T vs corrected T".to_string()
    };
    LinePanel::new(title, "corrected T", "T printed in Theorem 2")
        .legend(LegendPosition::UpperLeft)
        .series(Series::new("printed = corrected", equal.0, equal.1, LineStyle::Markers).color(2))
        .series(
            Series::new(
                "printed ≠ corrected",
                differs.0,
                differs.1,
                LineStyle::Markers,
            )
            .color(1),
        )
        .series(Series::theory("diagonal", vec![0.0, t_max], vec![0.0, t_max]).color(6))
}

/// x(t), y(t) of one case, integrated and in closed form, with T and the printed T.
fn trace_panel(
    [c, c1, x0, y0]: [f64; 4],
    p: &Params,
    ctx: &RunContext,
) -> Result<(LinePanel, SolverStats), RunError> {
    let sys = Thm2System { c, c1 };
    let cf = sys.closed_form(x0, y0);
    let onset = cf.onset_time();
    let printed = cf.paper_onset_time();
    let reach = stats::max_with(0.0, [onset, printed].into_iter().filter(|t| t.is_finite()));
    let times = linspace(0.0, reach + 0.25 * *p.after / c1, 300);
    let tr = integrate(&sys, &[x0, y0], &times, &ctx.ode, None)?;
    let closed = |f: fn(f64, f64) -> f64| -> Vec<f64> {
        times
            .iter()
            .map(|&t| {
                let s = cf.at(t);
                f(s.x, s.y)
            })
            .collect()
    };
    let mut panel = LinePanel::new(
        format!("c = {c}, c₁ = {c1}, (x₀, y₀) = ({x0}, {y0})"),
        "t",
        "x(t), y(t)",
    )
    .legend(LegendPosition::LowerRight)
    .series(Series::numerics("x (ODE)", times.clone(), tr.component(0)).color(0))
    .series(Series::theory("x closed form", times.clone(), closed(|x, _| x)).color(0))
    .series(Series::numerics("y (ODE)", times.clone(), tr.component(1)).color(1))
    .series(Series::theory("y closed form", times.clone(), closed(|_, y| y)).color(1))
    .hline(RefLine::new(0.0, "").style(LineStyle::Dotted));
    let same = (printed - onset).abs() <= 1e-12 * onset.max(1.0);
    if onset.is_finite() {
        let label = if same { "T (= printed)" } else { "T" };
        panel = panel.vline(RefLine::new(onset, label).color(6));
    }
    if printed.is_finite() && !same {
        panel = panel.vline(
            RefLine::new(printed, "T printed")
                .style(LineStyle::Dotted)
                .color(3),
        );
    }
    Ok((panel, tr.stats))
}

/// The closed form at `grid_samples` times per case (one case held at a time) and
/// `ode_cases` two-dimensional solves with events.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let cases = n(p.cases);
    Cost::new()
        .work(
            "cases, grid_samples",
            "closed-form samples",
            cases * n(*p.grid_samples),
            100.0,
        )
        .doubles(
            "grid_samples",
            "one case's sample times",
            2.0 * n(*p.grid_samples),
        )
        .doubles("cases", "per-case onset times", 8.0 * cases)
        .ode(
            "ode_cases",
            n(p.ode_cases) + n(p.traces.len()),
            2.0,
            20.0,
            ctx.ode.method,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.thm2-onset-time",
    paper: "000",
    summary: "Theorem 2 onset time: xy ≤ 0 before the corrected T = max(0, t_x, t_y) and xy > 0 \
              after, over random (c, c₁, x₀, y₀), closed form and integrator events; how often \
              the printed T differs, is NaN or negative (spec 000 R8d, E6).",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &[
        "paper_T_differs",
        "paper_T_equal",
        "paper_T_nan",
        "paper_T_negative",
        "paper_T_violates_sign_rule",
    ],
    run,
};

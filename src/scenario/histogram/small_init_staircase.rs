//! `small-init-staircase` (spec 000 D3, extension): from a small init each df column leaves the
//! saddle at 0 at its own escape time t_{1/2,i} = ln(4A_i²/(ρ_iL_i²))/(2A_iμ_i) ≈ ln(2/|L_i|)/μ_i,
//! so on lt the columns are learned in decreasing order of μ_i and the loss is a staircase.

use std::cmp::Ordering;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::instance_files::{df_instance, InstanceFiles};
use super::sizes;
use crate::analysis::fit::{first_crossing, Direction, TimeAxis};
use crate::analysis::stages::{detect_stages, StageOptions, Stages};
use crate::flow::{integrate_flow, linspace, Method, OdeConfig};
use crate::instance::histogram::task_name;
use crate::models::histogram::{DfClosedForm, DfFlow};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::df_common::{analysis_failed, closed_form_error, column_xy, gaussian_state, TaskName};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub task: TaskName,
    #[serde(default)]
    pub d_thr: usize,
    pub d: AtLeast<2>,
    /// Init scale σ ≪ 1: Q_0, v_0 entries i.i.d. N(0, σ²) (δ_i = O(σ²), so A_i ≈ ρ_i ≈ 1).
    pub sigma: Positive,
    pub t_end: Positive,
    pub samples: AtLeast<100>,
    /// Stage detection on the loss: a drop is where −d ln ℓ/dt exceeds `rate_threshold` and ln ℓ
    /// falls by at least `min_log_drop` (smoothed over ±`half_window` samples).
    pub rate_threshold: Positive,
    pub min_log_drop: Positive,
    pub half_window: usize,
    /// The task matrix (`M`); replaces task, d_thr and d. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial state (`Q0`, `v0`); replaces sigma and the draw. D3's escape times are
    /// asymptotics for a small init: on a large one the checks measure how far they are off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max_i |t_{1/2,i}(ODE)/t_{1/2,i}(D3 formula) − 1| (D3: 2%).
    pub escape_tol: Positive,
    /// max |z_ODE − z_closed form| (R9(a): 1e-7).
    pub closed_form_tol: Positive,
    /// max |plateau level/(½Σ_unlearned μ_j²) − 1| over the plateaus after the first drop: the
    /// loss between escapes is that of the columns still at the saddle (D1: ½Σ_S μ_i²), plus the
    /// tails of the columns just learned.
    pub plateau_level_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), *p.d)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc)?.require_df_single()?;
    if *p.sigma >= 0.1 {
        return Err(sc.invalid(
            "params.sigma",
            "D3's escape-time formula is for small inits (σ ≪ 1)",
        ));
    }
    Ok(())
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let m = files.task_matrix(|| p.task.matrix(*p.d, p.d_thr));
    let d = m.nrows();
    let z0 = files.single_init(|| gaussian_state(&mut ctx.rng(7), d, *p.sigma))?;
    let closed = DfClosedForm::new(&m, &z0);
    let times = linspace(0.0, *p.t_end, *p.samples);
    let traj = integrate_flow(&DfFlow::new(m.clone()), &z0, &times, &ctx.ode)?;
    let mut rep = Report::default();
    rep.instance = Some(df_instance(&m, vec![z0]));
    rep.stats("ode", &traj.stats);

    let xy: Vec<Vec<f64>> = (0..d)
        .map(|i| {
            (0..traj.len())
                .map(|k| column_xy(traj.state(k), &m, i))
                .collect()
        })
        .collect();
    let predicted: Vec<f64> = closed
        .columns()
        .iter()
        .map(|col| col.escape_time_estimate())
        .collect();
    let exact: Vec<f64> = closed
        .columns()
        .iter()
        .map(|col| col.escape_time().unwrap_or(f64::NAN))
        .collect();
    let measured = xy
        .iter()
        .map(|series| {
            first_crossing(&traj.t, series, 0.5, Direction::Up)
                .map(|t| t.unwrap_or(f64::NAN))
                .map_err(analysis_failed("escape time"))
        })
        .collect::<Result<Vec<f64>, _>>()?;
    let mus: Vec<f64> = closed.columns().iter().map(|col| col.mu()).collect();

    rep.at_most(
        "ode-d3",
        "max_i |t½,i(ODE) / t½,i(D3) − 1|",
        stats::max(
            measured
                .iter()
                .zip(&predicted)
                .map(|(m, p)| (m / p - 1.0).abs()),
        ),
        *c.escape_tol,
    )
    .note(format!(
        "t½,i = first time x_iy_i = ½ on the ODE samples vs ln(4A_i²/(ρ_iL_i²))/(2A_iμ_i); \
         NaN if a column has not escaped by t = {}",
        *p.t_end
    ));
    // pairs (i, j) escaping in the other order than `key` says (a column that never escaped,
    // NaN, counts as out of order)
    let inversions = |key: &[f64]| {
        (0..d)
            .flat_map(|i| (0..d).map(move |j| (i, j)))
            .filter(|&(i, j)| {
                key[i] < key[j] && measured[i].partial_cmp(&measured[j]) != Some(Ordering::Less)
            })
            .count()
    };
    let neg_mu: Vec<f64> = mus.iter().map(|m| -m).collect();
    let mu_inversions = inversions(&neg_mu);
    rep.at_most(
        "column-pairs-escaping-out-predicted-order",
        "column pairs escaping out of the predicted order",
        inversions(&predicted) as f64,
        0.0,
    )
    .note(format!(
        "order of t½,i ≈ ln(2/|L_i|)/μ_i (D3); by μ_i alone {mu_inversions} pairs are out of \
         order: the spread of ln(1/|L_i|) over a random init still matters at σ = {:e}",
        *p.sigma
    ));
    rep.at_most(
        "ode-closed-form",
        "max |z_ODE − z_closed form|",
        closed_form_error(&traj, &closed, *p.t_end),
        *c.closed_form_tol,
    )
    .note("near the saddle the error is amplified by ~1/|L_i| (spec R8(a))");

    let options = StageOptions {
        axis: TimeAxis::Linear,
        rate_threshold: *p.rate_threshold,
        min_log_drop: *p.min_log_drop,
        half_window: p.half_window,
    };
    let stages =
        detect_stages(&traj.t, &traj.loss, &options).map_err(analysis_failed("loss stages"))?;
    let unexplained = stages
        .drops
        .iter()
        .filter(|drop| {
            !predicted
                .iter()
                .any(|&t| drop.span.start <= t && t <= drop.span.end)
        })
        .count();
    rep.at_most(
        "loss-drops-without-predicted-inside",
        "loss drops without a predicted t½,i inside",
        unexplained as f64,
        0.0,
    )
    .note(format!(
        "{} drops detected (rate > {}, Δln ℓ ≥ {}): each is a column leaving the saddle",
        stages.drops.len(),
        *p.rate_threshold,
        *p.min_log_drop
    ));
    // each plateau between drops sits at ½ Σ μ_j² over the columns not yet learned
    let level_error = plateau_level_error(&stages, &predicted, &mus);
    rep.at_most(
        "plateau-level-sigma-unlearned-mu-j2",
        "max |plateau level / ½Σ_(unlearned) μ_j² − 1|",
        level_error,
        *c.plateau_level_tol,
    )
    .note("plateaus after the first drop, unlearned = predicted t½ after the plateau's middle");
    rep.derive("drops", stages.drops.len());
    rep.derive("pairs_out_of_mu_order", mu_inversions);
    rep.derive("escape_times_predicted", &predicted);
    rep.derive("escape_times_measured", &measured);

    let mut table = Table::new(&[
        "column",
        "mu",
        "L",
        "t_half_predicted",
        "t_half_exact",
        "t_half_ode",
    ]);
    for (i, col) in closed.columns().iter().enumerate() {
        table.push(vec![
            (i + 1).into(),
            col.mu().into(),
            col.closed_form().l().into(),
            predicted[i].into(),
            exact[i].into(),
            measured[i].into(),
        ]);
    }
    rep.tables.push(("escape_times".into(), table));
    rep.series = Table::new(&["t", "loss"]);
    rep.series.push_columns(&[], &[&traj.t, &traj.loss]);
    let about = format!("σ = {:e}, {} task, d = {d}", *p.sigma, task_name(&m));
    rep.figure = Some(figure(
        &about, &traj.t, &traj.loss, &xy, &predicted, &measured, &closed,
    ));
    Ok(rep)
}

/// max over plateaus (after the first drop) of |level/(½Σ_{unlearned} μ_j²) − 1|, where the
/// unlearned columns are those whose predicted escape lies after the plateau's middle.
fn plateau_level_error(stages: &Stages, predicted: &[f64], mus: &[f64]) -> f64 {
    stats::max(stages.plateaus.iter().skip(1).map(|pl| {
        let middle = 0.5 * (pl.span.start + pl.span.end);
        let expected: f64 = predicted
            .iter()
            .zip(mus)
            .filter(|(&t, _)| t > middle)
            .map(|(_, mu)| 0.5 * mu * mu)
            .sum();
        (pl.level / expected - 1.0).abs()
    }))
}

/// `about`: the init scale, the task and d, for the title.
fn figure(
    about: &str,
    t: &[f64],
    loss: &[f64],
    xy: &[Vec<f64>],
    predicted: &[f64],
    measured: &[f64],
    closed: &DfClosedForm,
) -> Figure {
    let mus: Vec<f64> = closed.columns().iter().map(|c| c.mu()).collect();
    // the loss of the columns still at the saddle (D1: ½Σ_S μ_i²) between predicted escapes
    let steps: Vec<f64> = t
        .iter()
        .map(|&s| {
            predicted
                .iter()
                .zip(&mus)
                .filter(|(&tp, _)| tp > s)
                .map(|(_, mu)| 0.5 * mu * mu)
                .sum()
        })
        .collect();
    let staircase = LinePanel::new("loss staircase", "t", "ℓ(t)")
        .legend(LegendPosition::UpperRight)
        .series(Series::numerics("ℓ (ODE)", t.to_vec(), loss.to_vec()).color(0))
        .series(Series::theory("½Σ μ_j² over j with t_{½,j} > t", t.to_vec(), steps).color(1));
    let mut progress = LinePanel::new("x_i y_i per column (●: predicted t_{½,i})", "t", "x_i y_i")
        .legend(LegendPosition::None)
        .hline(RefLine::new(0.5, "½"));
    for (i, series) in xy.iter().enumerate() {
        progress = progress
            .series(Series::numerics("", t.to_vec(), series.clone()).color(i % 8))
            .series(
                Series::new("", vec![predicted[i]], vec![0.5], LineStyle::Markers).color(i % 8),
            );
    }
    // escape time against μ: the trend ln(2/|L|)/μ at the median |L|, scattered by ln|L_i|
    let mut abs_l: Vec<f64> = closed
        .columns()
        .iter()
        .map(|c| c.closed_form().l().abs())
        .collect();
    abs_l.sort_by(f64::total_cmp);
    let median_l = abs_l[abs_l.len() / 2];
    let (mu_lo, mu_hi) = mus.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &m| {
        (lo.min(m), hi.max(m))
    });
    let mu_grid = linspace(mu_lo, mu_hi, 100);
    let order = LinePanel::new("escape time vs column norm", "μ_i = ‖m_i‖", "t_{½,i}")
        .legend(LegendPosition::UpperRight)
        .series(Series::new("ODE", mus.clone(), measured.to_vec(), LineStyle::Markers).color(0))
        .series(
            Series::theory(
                "ln(2/|L|)/μ at the median |L_i|",
                mu_grid.clone(),
                mu_grid
                    .iter()
                    .map(|mu| (2.0 / median_l).ln() / mu)
                    .collect(),
            )
            .color(1),
        );
    Figure::new(3)
        .title(format!(
            "Small init ({about}): columns leave the saddle one by one at t_{{½,i}} ≈ \
             ln(2/|L_i|)/μ_i"
        ))
        .panel(staircase)
        .panel(progress)
        .panel(order)
}

/// One df solve, every sample kept and tabled.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    sizes::df_solves(
        sizes::Keys {
            solves: "d",
            samples: "samples, d",
        },
        1.0,
        *p.d,
        n(*p.samples),
        ctx.ode.method,
    )
    .table("samples", n(*p.samples), 2.0 * n(*p.d))
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.small-init-staircase",
    paper: "000",
    summary: "Extension D3 (spec 000): from a small init the columns escape the saddle at \
              t½,i ≈ ln(2/|L_i|)/μ_i, in order of μ_i; on lt the loss is a staircase.",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-14),
    validate,
    cost,
    quantities: &["drops", "pairs_out_of_mu_order"],
    run,
};

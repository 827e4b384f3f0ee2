//! `near-saddle` (paper Fig. 4, App. A.3; spec 000 §4 Fig. 4, E11): inits at distance ε from the
//! bad set (q_iᵀm_i + ρ̄_iμ_iv_i = ε) first fall to the saddle level ½‖M‖_F², stay there for
//! ≈ ln(1/ε)/(μρ̄), then escape and decay at the usual rate: the plateau lengthens by ln 10/(μρ̄)
//! per decade of ε while the late decay rate does not change (the paper says it becomes "much
//! smaller", E11).

use std::path::PathBuf;

use nalgebra::DMatrix;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use rand::Rng;

use super::instance_files::{df_instance, InstanceFiles};
use super::sizes;
use crate::analysis::fit::{first_crossing, log_slope_fit, Direction, Window};
use crate::analysis::stages::plateaus;
use crate::flow::{integrate_flow, linspace, Method, OdeConfig, Trajectory};
use crate::instance::histogram::task_name;
use crate::models::histogram::landscape::bad_init_along_m;
use crate::models::histogram::{DfClosedForm, DfFlow};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::PositiveRange;
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::df_common::{analysis_failed, closed_form_error, TaskName};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Alphabet size of the eq task (Fig. 4; the per-decade law ln 10/(μρ̄) needs equal column
    /// norms μ_i, otherwise the crossing of ℓ = escape_level is set by whichever column escapes
    /// last).
    pub d: usize,
    /// Distances ε from the bad set, in decreasing order (decades apart in the paper).
    pub epsilons: Vec<f64>,
    /// Base init: v = v0·1, Q = −I + off_diagonal·N(0,1) off the diagonal; then the component of
    /// each q_i along m_i is solved so that q_iᵀm_i + ρ̄_iμ_iv_i = ε (spec R10, §4 Fig. 4).
    pub v0: Positive,
    pub off_diagonal: Positive,
    pub t_end: Positive,
    pub samples: AtLeast<50>,
    /// The plateaus are checked for ε ≤ this.
    pub plateau_max_eps: f64,
    /// The loss level whose crossing time measures the escape (Fig. 4: ℓ < 1).
    pub escape_level: f64,
    /// ODE slope fit window on ℓ after the escape.
    pub late_window: PositiveRange,
    /// The task matrix (`M`); replaces the eq task of size d. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial states (`Q0`, `v0`), one per ε, every column at bad-set value ε (refused
    /// otherwise); replaces v0, off_diagonal and the construction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// The plateau band is ½‖M‖_F²(1 ± band) (spec: [4.5, 5.5] for d = 10).
    pub plateau_band: Positive,
    /// Minimal length of the longest plateau in the band, for ε ≤ plateau_max_eps (spec: 1.5).
    pub plateau_min_length: Positive,
    /// |Δt(ℓ < escape_level) per decade of ε / (ln 10/(μρ̄)) − 1| (spec: 10%).
    pub decade_tol: Positive,
    /// max/min − 1 of the late slopes over ε (spec: 10%; E11).
    pub late_slope_tol: Positive,
    /// max |z_ODE − z_closed form| (spec: 1e-7).
    pub closed_form_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), p.d)
}

/// The order of the runs, for messages about the init file.
const RUN_ORDER: &str = "one per ε of params.epsilons";

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let files = read_files(p, sc)?;
    files.require_df_data()?;
    if files.data().is_none() && p.d < 2 {
        return Err(sc.invalid("params.d", "need d ≥ 2"));
    }
    if p.epsilons.len() < 2
        || p.epsilons.iter().any(|&e| e <= 0.0)
        || p.epsilons.windows(2).any(|w| w[1] >= w[0])
    {
        return Err(sc.invalid(
            "params.epsilons",
            "need ≥ 2 positive values in decreasing order",
        ));
    }
    if !p.epsilons.iter().any(|&e| e <= p.plateau_max_eps) {
        return Err(sc.invalid(
            "params.plateau_max_eps",
            "no ε is small enough for the plateau check",
        ));
    }
    if p.late_window[1] >= p.escape_level {
        return Err(sc.invalid("params.late_window", "need high < escape_level"));
    }
    let m = files.task_matrix(|| TaskName::Eq.matrix(p.d, 0));
    if let Some(inits) = files.run_inits(p.epsilons.len(), RUN_ORDER)? {
        let columns: Vec<usize> = (0..m.nrows()).collect();
        files.require_bad_set_value(
            &vec![m; inits.len()],
            &inits,
            &columns,
            &p.epsilons,
            "Fig. 4 starts every column at distance ε of params.epsilons from the bad set",
        )?;
    }
    Ok(())
}

/// The Fig. 4 init at distance ε from the bad set: the shared off-diagonal noise `noise` as
/// q⊥, v = v0·1, and q_iᵀm_i solved per column (spec §4 Fig. 4, R10).
fn near_bad_state(
    p: &Params,
    m: &DMatrix<f64>,
    noise: &DMatrix<f64>,
    eps: f64,
) -> Result<Vec<f64>, RunError> {
    let d = m.nrows();
    let mut z = vec![0.0; d * (d + 1)];
    for i in 0..d {
        let q = bad_init_along_m(
            m.column(i).as_slice(),
            noise.column(i).as_slice(),
            *p.v0,
            eps,
        )
        .map_err(|e| RunError::Other(format!("ε = {eps}, column {}: {e}", i + 1)))?;
        let block = &mut z[i * (d + 1)..(i + 1) * (d + 1)];
        block[..d].copy_from_slice(q.as_slice());
        block[d] = *p.v0;
    }
    Ok(z)
}

/// One ε: the run and what is measured on it.
struct NearRun {
    eps: f64,
    traj: Trajectory,
    closed: DfClosedForm,
    /// Mean over columns of μ_iρ̄_i (the escape rate).
    escape_rate: f64,
    /// α = min_i μ_iρ̄_i (the late rate is 2α).
    alpha: f64,
    t_escape: Option<f64>,
    longest_plateau: f64,
    late_slope: f64,
    closed_error: f64,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let m = files.task_matrix(|| TaskName::Eq.matrix(p.d, 0));
    let d = m.nrows();
    let flow = DfFlow::new(m.clone());
    // the init file's states (one per ε, checked by validate), else built from seeded noise
    let inits = match files.run_inits(p.epsilons.len(), RUN_ORDER)? {
        Some(inits) => inits,
        None => {
            let mut rng = ctx.rng(5);
            let noise = DMatrix::from_fn(d, d, |a, b| {
                if a == b {
                    0.0
                } else {
                    *p.off_diagonal * rng.sample::<f64, _>(StandardNormal)
                }
            });
            p.epsilons
                .iter()
                .map(|&eps| near_bad_state(p, &m, &noise, eps))
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    let saddle = 0.5 * m.norm_squared();
    let times = linspace(0.0, *p.t_end, *p.samples);
    let mut runs = Vec::new();
    let mut rep = Report::default();
    rep.instance = Some(df_instance(&m, inits.clone()));
    for (&eps, z0) in p.epsilons.iter().zip(inits) {
        let closed = DfClosedForm::new(&m, &z0);
        let traj = integrate_flow(&flow, &z0, &times, &ctx.ode)?;
        rep.stats(format!("ε = {eps}"), &traj.stats);
        let escape_rate = closed
            .columns()
            .iter()
            .map(|col| col.mu() * col.imbalance().rhob)
            .sum::<f64>()
            / d as f64;
        let t_escape = first_crossing(&traj.t, &traj.loss, p.escape_level, Direction::Down)
            .map_err(analysis_failed("escape time"))?;
        let band = (
            saddle * (1.0 - *c.plateau_band),
            saddle * (1.0 + *c.plateau_band),
        );
        // no plateau in the band: the longest has length 0
        let longest_plateau = stats::max_with(
            0.0,
            plateaus(&traj.t, &traj.loss, band.0, band.1)
                .map_err(analysis_failed("plateaus"))?
                .iter()
                .map(|iv| iv.length()),
        );
        let [low, high] = *p.late_window;
        let late_slope = log_slope_fit(&traj.t, &traj.loss, Window::Value { low, high })
            .map_err(analysis_failed("late slope"))?
            .slope;
        runs.push(NearRun {
            eps,
            alpha: closed.alpha(),
            closed_error: closed_form_error(&traj, &closed, *p.t_end),
            closed,
            escape_rate,
            t_escape,
            longest_plateau,
            late_slope,
            traj,
        });
    }

    let small: Vec<&NearRun> = runs.iter().filter(|r| r.eps <= p.plateau_max_eps).collect();
    rep.at_least(
        &format!(
            "over-eps-longest-time.{}-{}",
            p.plateau_max_eps, *c.plateau_band
        ),
        &format!(
            "min over ε ≤ {} of the longest time with ℓ ∈ ½‖M‖²(1 ± {})",
            p.plateau_max_eps, *c.plateau_band
        ),
        stats::min(small.iter().map(|r| r.longest_plateau)),
        *c.plateau_min_length,
    )
    .note(format!("saddle level ½‖M‖_F² = {saddle} (Fig. 4)"));
    let decade_name = format!(
        "max |Δt(ℓ < {}) per decade of ε / (ln 10/(μρ̄)) − 1|",
        p.escape_level
    );
    // one escape rate per decade needs the columns to leave together: equal ‖m_i‖ (eq task)
    let (mu_lo, mu_hi) = stats::range((0..d).map(|i| m.column(i).norm()));
    if mu_hi > mu_lo * (1.0 + 1e-12) {
        rep.skip(
            "escape-decade",
            decade_name,
            format!(
                "the column norms μ_i of M differ ({mu_lo:.4} to {mu_hi:.4}): the columns leave \
                 the saddle one after another, and no single ln 10/(μρ̄) per decade is predicted"
            ),
        );
    } else {
        let mut worst_decade: f64 = 0.0;
        for pair in runs.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let (Some(ta), Some(tb)) = (a.t_escape, b.t_escape) else {
                worst_decade = f64::NAN;
                continue;
            };
            let decades = (a.eps / b.eps).log10();
            let predicted =
                decades * std::f64::consts::LN_10 / (0.5 * (a.escape_rate + b.escape_rate));
            worst_decade = stats::larger(worst_decade, ((tb - ta) / predicted - 1.0).abs());
        }
        rep.at_most("escape-decade", &decade_name, worst_decade, *c.decade_tol)
            .note("μρ̄ averaged over the columns of the two inits; NaN if some run never escapes");
    }
    let slopes: Vec<f64> = runs.iter().map(|r| r.late_slope).collect();
    let (lo, hi) = stats::range(slopes.iter().map(|s| s.abs()));
    rep.at_most(
        "late-slopes-over-eps",
        "late slopes over ε: max/min − 1",
        hi / lo - 1.0,
        *c.late_slope_tol,
    )
    .note(format!(
        "ODE fit on ℓ ∈ [{:e}, {:e}]; slopes {slopes:.4?}",
        p.late_window[0], p.late_window[1]
    ))
    .paper_claim("App. A.3: near the bad set \"the rate of decay is much smaller\" (E11)");
    rep.at_most(
        "ode-closed-form",
        "max |z_ODE − z_closed form|",
        stats::max(runs.iter().map(|r| r.closed_error)),
        *c.closed_form_tol,
    )
    .note(format!("all ε, t ≤ {}", *p.t_end));

    let mut table = Table::new(&[
        "eps",
        "t_escape",
        "longest_plateau",
        "late_slope",
        "minus_2_alpha",
        "mean_mu_rhob",
    ]);
    for r in &runs {
        table.push(vec![
            r.eps.into(),
            r.t_escape.unwrap_or(f64::NAN).into(),
            r.longest_plateau.into(),
            r.late_slope.into(),
            (-2.0 * r.alpha).into(),
            r.escape_rate.into(),
        ]);
    }
    rep.tables.push(("summary".into(), table));
    rep.series = Table::new(&["eps", "t", "loss", "loss_closed"]);
    for r in &runs {
        let closed: Vec<f64> = r.traj.t.iter().map(|&t| r.closed.loss(t)).collect();
        rep.series
            .push_columns(&[r.eps.into()], &[&r.traj.t, &r.traj.loss, &closed]);
    }
    rep.figure = Some(figure(p, &m, &runs, saddle));
    Ok(rep)
}

fn figure(p: &Params, m: &DMatrix<f64>, runs: &[NearRun], saddle: f64) -> Figure {
    // two free decades above the plateau for the escape lines' label (it crossed the curves)
    let lowest = runs
        .iter()
        .flat_map(|r| r.traj.loss.iter().copied())
        .filter(|&l| l > 0.0)
        .fold(f64::INFINITY, f64::min);
    let highest = runs
        .iter()
        .flat_map(|r| r.traj.loss.iter().copied())
        .fold(saddle, f64::max);
    let mut losses = LinePanel::new("loss near the bad set (paper Fig. 4)", "t", "ℓ(t)")
        .log_y()
        .y_range(0.3 * lowest, 300.0 * highest)
        .legend(LegendPosition::LowerLeft)
        .hline(RefLine::new(saddle, "saddle ½‖M‖²_F"));
    for (j, r) in runs.iter().enumerate() {
        losses = losses
            .series(
                Series::numerics(
                    format!("ε = {}", r.eps),
                    r.traj.t.clone(),
                    r.traj.loss.clone(),
                )
                .color(j),
            )
            .series(
                Series::theory(
                    if j == 0 { "closed form" } else { "" },
                    r.traj.t.clone(),
                    r.traj.t.iter().map(|&t| r.closed.loss(t)).collect(),
                )
                .color(j),
            );
        if let Some(t) = r.t_escape {
            let label = if j == 0 {
                format!("ℓ = {}", p.escape_level)
            } else {
                String::new()
            };
            losses = losses.vline(RefLine::new(t, label).color(j));
        }
    }
    // escape time against decades of ε, with the predicted slope ln 10/(μρ̄) through the first
    let escaped: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|r| r.t_escape.map(|t| ((1.0 / r.eps).log10(), t)))
        .collect();
    let mut escape = LinePanel::new(
        format!("escape time t(ℓ < {}) per decade of ε", p.escape_level),
        "log₁₀(1/ε)",
        format!("t(ℓ < {})", p.escape_level),
    )
    .legend(LegendPosition::UpperLeft)
    .series(
        Series::new(
            "ODE",
            escaped.iter().map(|e| e.0).collect(),
            escaped.iter().map(|e| e.1).collect(),
            LineStyle::Markers,
        )
        .color(0),
    );
    if let Some(&(x0, t0)) = escaped.first() {
        let rate = runs.iter().map(|r| r.escape_rate).sum::<f64>() / runs.len() as f64;
        let xs: Vec<f64> = escaped.iter().map(|e| e.0).collect();
        escape = escape.series(
            Series::theory(
                format!("slope ln 10/(μρ̄) = {:.3}", std::f64::consts::LN_10 / rate),
                xs.clone(),
                xs.iter()
                    .map(|x| t0 + (x - x0) * std::f64::consts::LN_10 / rate)
                    .collect(),
            )
            .color(1),
        );
    }
    Figure::new(2)
        .title(format!(
            "Near the bad set q_iᵀm_i + ρ̄_iμ_iv_i = ε ({} task, d = {}): the plateau grows, the \
             rate stays",
            task_name(m),
            m.nrows()
        ))
        .panel(losses)
        .panel(escape)
}

/// One df solve per ε, every sample kept.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let runs = n(p.epsilons.len());
    sizes::df_solves(
        sizes::Keys {
            solves: "epsilons, d",
            samples: "epsilons, samples, d",
        },
        runs,
        p.d,
        n(*p.samples),
        ctx.ode.method,
    )
    .table("samples", runs * n(*p.samples), 6.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.near-saddle",
    paper: "000",
    summary: "Fig. 4 (spec 000 E11): inits at distance ε from the bad set plateau at ½‖M‖² for \
              ≈ ln(1/ε)/(μρ̄) and then decay at the unchanged rate 2α.",
    solver: OdeConfig::new(Method::Tsit45, 1e-12, 1e-14),
    validate,
    cost,
    quantities: &[],
    run,
};

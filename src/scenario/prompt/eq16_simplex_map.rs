//! `eq16-simplex-map` (eqs. 15–17; spec 002 §2.4, §3.5): the exact GD map on the simplex,
//! z ↦ φ(log z − (η/N)J∇ℓ̃), for a (C-quad) loss — it keeps z on the simplex; its remainder
//! r(η) = z₊ − (z − (η/N)J²∇ℓ̃) beyond the linear step of eq. (16) is of order η²
//! (‖r(η)‖/‖r(η/2)‖ → 4), tends to (η²/2N²)D²φ(w)[h, h] with h = J∇ℓ̃ (so the point c_t of eq.
//! 16 lies between the logits, E9), and stays below the crude bound (η²/2N²)·2n^{3/2}‖h‖² of
//! (41); and the map, iterated K = t/η times, converges to the gradient flow at first order.
//!
//! `data_file` (`z_star`, `H`: layout `instance::prompt::StationaryPoint`) replaces the drawn
//! (z*, A) and n, `init_file` (`w0` (m, n): layout `instance::prompt::SimplexInit`) the m = trials
//! Dirichlet starts. Eq. 16 and its bounds hold for any loss and start, so every check runs on a
//! user's instance.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::flow::{integrate, norm, Method, OdeConfig, VectorField};
use crate::instance::prompt::SimplexInit;
use crate::models::prompt::attention_families::Attention;
use crate::models::prompt::simplex::{
    softmax_second_derivative, LogitFlow, SimplexFlow, SimplexLoss,
};
use crate::models::prompt::softmax::{jacobian_apply, softmax_into};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::param::{AtLeastOne, NonNegative};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::file_error;
use super::simplex_common::{quad_instance, simplex_instance, SimplexFiles};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Tokens n (spec: 6).
    pub n: AtLeast<2>,
    /// Samples N (the 1/N of the dynamics).
    pub samples: AtLeast<1>,
    /// (C-quad): linear term c, condition number of A, logit scale of z* = φ(s·g).
    pub c: f64,
    pub condition: AtLeastOne,
    pub zstar_scale: Positive,
    /// Starting points z ~ Dirichlet(1).
    pub trials: AtLeast<1>,
    /// Step sizes η = eta_max/2^k, k = 0..=halvings.
    pub eta_max: Positive,
    pub halvings: AtLeast<1>,
    /// Iterations of the map at eta_max for the invariance check.
    pub invariance_steps: usize,
    /// Flow time t of the GD-vs-flow comparison (t/eta_max must be an integer).
    pub flow_time: Positive,
    /// Trials drawn in the figure.
    pub plotted_trials: usize,
    /// z* and H of the (C-quad) loss (layout `instance::prompt::StationaryPoint`), replacing
    /// the draw and n.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The starts' logits `w0` (m, n) (layout `instance::prompt::SimplexInit`), replacing the
    /// Dirichlet draws and `trials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max |𝟙ᵀz_k − 1| along the iterates (spec 1e−14).
    pub simplex_tol: NonNegative,
    /// |‖r(η)‖/‖r(η/2)‖ / 4 − 1| for η ≤ order_eta_max (spec: within 5% at η ≤ 1e−2).
    pub order_rel_tol: Positive,
    pub order_eta_max: Positive,
    /// ‖r/η² − D²φ[h,h]/(2N²)‖ / ‖D²φ[h,h]/(2N²)‖ at the smallest η (the deviation is O(η)).
    pub leading_term_tol: Positive,
    /// |err(η)/err(η/2) / 2 − 1| of GD vs the flow at time t for η ≤ order_eta_max (first order).
    pub gd_order_rel_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<SimplexFiles, InputError> {
    let (data, init) = (p.data_file.as_deref(), p.init_file.as_deref());
    let files = SimplexFiles::read(sc, data, init, Some(*p.n))?;
    if let (Some(init), Some(f)) = (&files.init, init) {
        init.require_w0()
            .map_err(|e| file_error(&sc.input_path("init_file", f), "init_file", e))?;
    }
    Ok(files)
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc)?;
    let k = *p.flow_time / *p.eta_max;
    if (k - k.round()).abs() > 1e-9 * k {
        return Err(sc.invalid("params.flow_time", "must be an integer multiple of eta_max"));
    }
    if *c.order_eta_max >= *p.eta_max
        || *c.order_eta_max < *p.eta_max / 2f64.powi(*p.halvings as i32 - 1)
    {
        return Err(sc.invalid(
            "checks.order_eta_max",
            "must leave at least one halving pair below it and lie below eta_max",
        ));
    }
    Ok(())
}

/// One starting point's measurements over the η ladder.
struct Trial {
    remainder: Vec<f64>,
    second_order: Vec<f64>,
    crude_bound: Vec<f64>,
    leading_term_error: f64,
    /// The same deviation with D²φ evaluated at z_t read as logits (the paper's c_t → z_t).
    literal_error: f64,
    gd_error: Vec<f64>,
}

/// The starts: Dirichlet(1) draws from stream 2, or the file's logits w0 (m of them); and
/// whether they are the draws (a file equal to them bit for bit is, see
/// [`SimplexFiles::quad_or`]).
fn starts(n: usize, files: &SimplexFiles, p: &Params, ctx: &RunContext) -> (Vec<Attention>, bool) {
    let given = files.init.as_ref().and_then(|i| i.w0.as_ref());
    let m = given.map_or(*p.trials, Vec::len);
    let mut rng = ctx.rng(2);
    let drawn: Vec<Attention> = (0..m).map(|_| Attention::dirichlet(n, &mut rng)).collect();
    match given {
        None => (drawn, true),
        Some(w0) => {
            let builtin = drawn.iter().zip(w0).all(|(a, w)| a.logits == *w);
            let starts = w0
                .iter()
                .map(|w| {
                    let mut z = vec![0.0; n];
                    softmax_into(w, &mut z);
                    Attention {
                        logits: w.clone(),
                        z,
                    }
                })
                .collect();
            (starts, builtin)
        }
    }
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let n = files.point.as_ref().map_or(*p.n, |pt| pt.z_star.len());
    let drawn = quad_instance(n, p.c, *p.condition, *p.zstar_scale, &mut ctx.rng(1));
    let (loss, _) = files.quad_or(drawn);
    let (starts, dirichlet) = starts(n, &files, p, ctx);
    let flow = SimplexFlow::new(&loss, *p.samples);
    let logit_flow = LogitFlow::new(&loss, *p.samples);
    let etas: Vec<f64> = (0..=*p.halvings)
        .map(|k| *p.eta_max / 2f64.powi(k as i32))
        .collect();
    let inv_n = flow.inv_samples();
    let mut rep = Report::default();
    let mut trials = Vec::new();
    let mut simplex_drift: f64 = 0.0;
    let (mut v, mut next, mut g, mut h, mut d2) = (
        vec![0.0; n],
        vec![0.0; n],
        vec![0.0; n],
        vec![0.0; n],
        vec![0.0; n],
    );
    for (trial, start) in starts.iter().enumerate() {
        let z = &start.z;
        flow.rhs(0.0, z, &mut v);
        loss.grad(z, &mut g);
        jacobian_apply(z, &g, &mut h);
        softmax_second_derivative(z, &h, &mut d2);
        let d2_norm = norm(&d2);
        // the paper's literal reading: D²φ(c_t) with c_t → z_t as the argument of φ
        let mut at_z = vec![0.0; n];
        softmax_into(z, &mut at_z);
        let mut d2_literal = vec![0.0; n];
        softmax_second_derivative(&at_z, &h, &mut d2_literal);
        let h_sq = h.iter().map(|x| x * x).sum::<f64>();
        let mut t = Trial {
            remainder: Vec::new(),
            second_order: Vec::new(),
            crude_bound: Vec::new(),
            leading_term_error: f64::NAN,
            literal_error: f64::NAN,
            gd_error: Vec::new(),
        };
        for &eta in &etas {
            flow.gd_map(z, eta, &mut next);
            let r: Vec<f64> = (0..n).map(|j| next[j] - z[j] - eta * v[j]).collect();
            let scale = 0.5 * eta * eta * inv_n * inv_n;
            t.remainder.push(norm(&r));
            t.second_order.push(scale * d2_norm);
            t.crude_bound
                .push(scale * 2.0 * (n as f64).powf(1.5) * h_sq);
            let dev: Vec<f64> = (0..n).map(|j| r[j] - scale * d2[j]).collect();
            t.leading_term_error = norm(&dev) / (scale * d2_norm);
            let dev: Vec<f64> = (0..n).map(|j| r[j] - scale * d2_literal[j]).collect();
            t.literal_error = norm(&dev) / (scale * norm(&d2_literal));
        }
        // GD (the map iterated) against the flow at time t, from the same start
        let traj = integrate(
            &logit_flow,
            &start.logits,
            &[0.0, *p.flow_time],
            &ctx.ode,
            None,
        )?;
        rep.stats(format!("logit flow, trial {trial}"), &traj.stats);
        let mut z_flow = vec![0.0; n];
        softmax_into(traj.last_state(), &mut z_flow);
        for &eta in &etas {
            let steps = (*p.flow_time / eta).round() as usize;
            let mut zk = z.clone();
            for _ in 0..steps {
                flow.gd_map(&zk, eta, &mut next);
                zk.copy_from_slice(&next);
                if eta == *p.eta_max {
                    simplex_drift =
                        stats::larger(simplex_drift, (zk.iter().sum::<f64>() - 1.0).abs());
                }
            }
            let err: Vec<f64> = (0..n).map(|j| zk[j] - z_flow[j]).collect();
            t.gd_error.push(norm(&err));
        }
        // the invariance run continues at eta_max well past the comparison horizon
        let mut zk = z.clone();
        for _ in 0..p.invariance_steps {
            flow.gd_map(&zk, *p.eta_max, &mut next);
            zk.copy_from_slice(&next);
            simplex_drift = stats::larger(simplex_drift, (zk.iter().sum::<f64>() - 1.0).abs());
        }
        trials.push(t);
    }

    let small: Vec<usize> = (0..etas.len() - 1)
        .filter(|&k| etas[k] <= *c.order_eta_max * (1.0 + 1e-12))
        .collect();
    let ratio_dev = |series: &dyn Fn(&Trial) -> &[f64], order: f64| {
        stats::max(trials.iter().flat_map(|t| {
            let s = series(t);
            small
                .iter()
                .map(move |&k| (s[k] / s[k + 1] / order - 1.0).abs())
        }))
    };
    let eta_range = format!(
        "η from {:.3e} down to {:.3e}, {} starts {}",
        etas[small[0]],
        etas[etas.len() - 1],
        starts.len(),
        match dirichlet {
            true => "z ~ Dirichlet(1)",
            false => "z₀ = φ(w₀) from init_file",
        }
    );
    rep.at_most(
        "simplex-invariance-tz",
        "simplex invariance: max |𝟙ᵀz_k − 1|",
        simplex_drift,
        *c.simplex_tol,
    )
    .note(format!(
        "{} iterations of the exact map at η = {} from each start",
        p.invariance_steps, *p.eta_max
    ));
    rep.at_most(
        "eq-16-remainder-order-eta-eta",
        "eq. 16 remainder order: max |‖r(η)‖/‖r(η/2)‖ / 4 − 1|",
        ratio_dev(&|t| &t.remainder, 4.0),
        *c.order_rel_tol,
    )
    .note(eta_range.clone());
    rep.at_most(
        "eq-16-remainder-vs-crude-bound",
        "eq. 16 remainder vs crude bound (η²/2N²)·2n^{3/2}‖J∇ℓ̃‖²: max ratio",
        stats::max(
            trials
                .iter()
                .flat_map(|t| t.remainder.iter().zip(&t.crude_bound).map(|(r, b)| r / b)),
        ),
        1.0,
    )
    .note("from |∂²φ_i/∂x_j∂x_k| ≤ 2 (41), every η and start");
    let literal = stats::min(trials.iter().map(|t| t.literal_error));
    rep.derive("literal_c_t_min_deviation", literal);
    rep.at_most(
            "eta-eta2-d2phi-2n2-rel-deviation", "r(η)/η² → D²φ(w)[h,h]/(2N²): rel. deviation at the smallest η",
            stats::max(trials.iter().map(|t| t.leading_term_error)),
            *c.leading_term_tol,
        )
        .note(format!(
            "h = J∇ℓ̃, D²φ at the logits w_t (E9); η = {:.3e}. With D²φ at z_t read as \
             logits (c_t → z_t, the literal reading) the deviation is ≥ {literal:.2} in every start",
            etas[etas.len() - 1]
        ))
        .paper_claim("c_t lies on the segment joining z_t and z_t+1");
    rep.at_most(
        "gd-flow-first-order-err-eta",
        "GD → flow at first order: max |err(η)/err(η/2) / 2 − 1|",
        ratio_dev(&|t| &t.gd_error, 2.0),
        *c.gd_order_rel_tol,
    )
    .note(format!(
        "err = ‖z_K − φ(w(t))‖, Kη = t = {}, logit flow by {}; {eta_range}",
        *p.flow_time,
        ctx.ode.method.name()
    ));
    rep.derive("etas", &etas);
    rep.derive("loss_c", p.c);

    rep.series = Table::new(&[
        "trial",
        "eta",
        "remainder_norm",
        "second_order_term_norm",
        "crude_bound",
        "gd_vs_flow_error",
    ]);
    for (i, t) in trials.iter().enumerate() {
        for (k, &eta) in etas.iter().enumerate() {
            rep.series.push(vec![
                i.into(),
                eta.into(),
                t.remainder[k].into(),
                t.second_order[k].into(),
                t.crude_bound[k].into(),
                t.gd_error[k].into(),
            ]);
        }
    }
    rep.figure = Some(figure(p, n, &etas, &trials));
    let w0: Vec<Vec<f64>> = starts.into_iter().map(|s| s.logits).collect();
    let init = SimplexInit {
        zeta_dir: None,
        w0: Some(w0),
    };
    rep.instance = Some(simplex_instance(&loss, init));
    Ok(rep)
}

/// `n` is the instance's (the file's, or the parameter).
fn figure(p: &Params, n: usize, etas: &[f64], trials: &[Trial]) -> Figure {
    let mut remainder = LinePanel::new(
        format!(
            "remainder of eq. 16 (n = {n}, N = {}, c = {})",
            *p.samples, p.c
        ),
        "step size η",
        "‖r(η)‖",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerRight);
    let mut gd = LinePanel::new(
        format!("GD map iterated vs gradient flow at t = {}", *p.flow_time),
        "step size η",
        "‖z_K − z(t)‖, Kη = t",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerRight);
    for (i, t) in trials.iter().take(p.plotted_trials).enumerate() {
        let label = |what: &str| {
            if i == 0 {
                what.to_string()
            } else {
                String::new()
            }
        };
        remainder = remainder
            .series(
                Series::new(
                    label("‖r(η)‖ (exact map)"),
                    etas.to_vec(),
                    t.remainder.clone(),
                    LineStyle::SolidMarkers,
                )
                .color(i),
            )
            .series(
                Series::theory(
                    label("(η²/2N²)‖D²φ[h,h]‖"),
                    etas.to_vec(),
                    t.second_order.clone(),
                )
                .color(i),
            )
            .series(
                Series::new(
                    label("crude bound (41)"),
                    etas.to_vec(),
                    t.crude_bound.clone(),
                    LineStyle::Dotted,
                )
                .color(i),
            );
        let first = t.gd_error[etas.len() - 1] / etas[etas.len() - 1];
        gd = gd
            .series(
                Series::new(
                    label("GD map, K = t/η steps"),
                    etas.to_vec(),
                    t.gd_error.clone(),
                    LineStyle::SolidMarkers,
                )
                .color(i),
            )
            .series(
                Series::theory(
                    label("∝ η (first order)"),
                    etas.to_vec(),
                    etas.iter().map(|e| first * e).collect(),
                )
                .color(i),
            );
    }
    Figure::new(2)
        .title(
            "Eq. 16: the exact simplex map φ(log z − (η/N)J∇ℓ̃) — O(η²) remainder, first-order GD",
        )
        .panel(remainder)
        .panel(gd)
}

/// Per trial: the map at every step size, one logit flow, GD to `flow_time` at every step size
/// (flow_time/η steps, doubling with each halving) and the invariance run; O(n²) per step.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let trials = n(*p.trials);
    let steps = *p.flow_time / *p.eta_max * (2f64.powf(n(*p.halvings) + 1.0) - 1.0);
    let step = 4.0 * n(*p.n) * n(*p.n);
    Cost::new()
        .work(
            "halvings, flow_time, trials",
            "GD steps of the map",
            trials * steps,
            step,
        )
        .work(
            "invariance_steps, trials",
            "invariance steps",
            trials * n(p.invariance_steps),
            step,
        )
        .ode("trials", trials, n(*p.n), step, ctx.ode.method)
        .doubles(
            "trials, halvings",
            "per-trial errors",
            trials * 4.0 * n(*p.halvings + 1),
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "prompt.eq16-simplex-map",
    paper: "002",
    summary: "Eq. 16 on a (C-quad) loss: the exact GD map keeps z on the simplex, its remainder \
              beyond the linear step is O(η²) → (η²/2N²)D²φ[h,h] (c_t between the logits), below \
              the crude bound of (41), and GD converges to the simplex flow at first order.",
    solver: OdeConfig::new(Method::Tsit45, 1e-12, 1e-14),
    validate,
    cost,
    quantities: &["literal_c_t_min_deviation", "loss_c"],
    run,
};

//! Following a flow with an arc-length state to given arc lengths (spec 003 §2.3): the GF
//! and PF of `flow-path-equivalence` are stopped where their accumulated arc length reaches
//! each checkpoint, so that they can be compared with the NGF at equal s.

use crate::analysis::svm::one_minus_cos;
use crate::attention::FixedDecoder;
use crate::flow::{integrate, Events, OdeConfig, SolverStats, VectorField};
use crate::scenario::RunError;

use super::joint_common::log10_from_ln;

/// W, 1 − corr and ln(L − L*) of a flow at one arc length.
#[derive(Debug, Clone)]
pub struct OnPath {
    pub s: f64,
    pub w: Vec<f64>,
    pub misalignment: f64,
}

/// A flow followed to each checkpoint arc length in turn: the samples on its own clock's grid
/// and, per checkpoint, (clock time, 1 − corr etc.) where its arc-length state reaches it.
pub struct ArcRun {
    pub stops: Vec<(f64, OnPath)>,
    /// (clock time, state) samples of the grid passed on the way.
    pub samples: Vec<(f64, Vec<f64>)>,
    pub stats: SolverStats,
}

/// Integrates `field` (arc length in state component `arc`) from `z0` at clock 0, stopping at
/// each checkpoint s_j by a terminal root of z[arc] − s_j and restarting from there; s_j must
/// be reached by clock time `horizons[j]`. (One integration with non-terminal roots fails in
/// diffsol 0.18 when a root falls in the step before the stop time: the root return skips the
/// step-size clamp to the stop time, and the next step overshoots it.)
#[allow(clippy::too_many_arguments)]
pub fn stop_at_arc_lengths<V: VectorField>(
    field: &V,
    z0: Vec<f64>,
    arc: usize,
    checkpoints: &[f64],
    horizons: &[f64],
    grid: &[f64],
    cfg: &OdeConfig,
    w_mm: &[f64],
) -> Result<ArcRun, RunError> {
    let mut run = ArcRun {
        stops: Vec::with_capacity(checkpoints.len()),
        samples: Vec::new(),
        stats: SolverStats::default(),
    };
    let (mut t0, mut z) = (0.0, z0);
    for (&s, &horizon) in checkpoints.iter().zip(horizons) {
        let root = move |_t: f64, y: &[f64], g: &mut [f64]| g[0] = y[arc] - s;
        let events = Events {
            count: 1,
            func: &root,
            terminal: true,
        };
        let mut times = vec![t0];
        times.extend(grid.iter().copied().filter(|&t| t > t0 && t < horizon));
        times.push(horizon.max(t0 * (1.0 + 1e-9) + 1e-9));
        let tr = integrate(field, &z, &times, cfg, Some(&events))?;
        add_stats(&mut run.stats, &tr.stats);
        let ev = tr.events.first().ok_or_else(|| {
            RunError::Other(format!(
                "{} did not reach arc length {s} by clock time {horizon}",
                cfg.method.name()
            ))
        })?;
        for k in 1..tr.len() {
            if tr.t[k] < ev.t {
                run.samples.push((tr.t[k], tr.state(k).to_vec()));
            }
        }
        let w = ev.state[..arc].to_vec();
        run.stops.push((
            ev.t,
            OnPath {
                s: ev.state[arc],
                misalignment: one_minus_cos(&w, w_mm),
                w,
            },
        ));
        (t0, z) = (ev.t, ev.state.clone());
    }
    Ok(run)
}

fn add_stats(total: &mut SolverStats, part: &SolverStats) {
    total.method.clone_from(&part.method);
    total.steps += part.steps;
    total.rhs_evals += part.rhs_evals;
    total.jvp_evals += part.jvp_evals;
    total.error_test_failures += part.error_test_failures;
    total.wall_seconds += part.wall_seconds;
}

/// (s, 1 − corr, log₁₀(L − L*), own clock) along a GF or PF trajectory's samples.
pub struct Curve {
    pub s: Vec<f64>,
    pub misalignment: Vec<f64>,
    pub log10_excess: Vec<f64>,
    pub clock: Vec<f64>,
}

pub fn flow_curve(
    samples: &[(f64, Vec<f64>)],
    m: usize,
    w_mm: &[f64],
    model: &FixedDecoder,
) -> Curve {
    let mut c = Curve {
        s: vec![],
        misalignment: vec![],
        log10_excess: vec![],
        clock: vec![],
    };
    for (t, z) in samples {
        c.s.push(z[m]);
        c.misalignment.push(one_minus_cos(&z[..m], w_mm));
        c.log10_excess
            .push(log10_from_ln(model.log_excess_loss(&z[..m])));
        c.clock.push(*t);
    }
    c
}

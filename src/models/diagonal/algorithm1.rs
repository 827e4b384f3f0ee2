//! Algorithm 1 (spec 004 §3, paper eqs. 10–13): the limiting stagewise dynamics as α → 0 —
//! stage times T_k, the activated coordinates i_k with signs σ_k, the log-scale vectors b^k and
//! the plateau points θ^k (β^k), with the per-stage diagnostics of spec §3.5.
//!
//! The paper's errata are fixed (spec §6): b⁰ = 1 (all ones; the paper's line 1 says 0, which
//! contradicts §C.5 and T_1 = min 1/|g_i(0)|), and Assumption 4.4 is checked as
//! L(ũ) ≥ L(θ^k) + c_k‖u^k − ũ‖² through H_SS ≻ 0 with c_k = ½λ_min(D H_SS D).

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::network::{g_vec, hessian_block, BetaLoss};
use super::stage_b::{stage_b, DroppedCoordinate, StageBOptions};
use super::DiagonalError;
use crate::analysis::linearize::symmetric_eigenvalues;
use crate::stats;

/// Settings of [`algorithm1`] (defaults: spec §3.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Algorithm1Options {
    /// Stop after this many activations.
    pub max_stages: usize,
    /// |g_i| ≤ tol_g_rel · max|G(0)| counts as g_i = 0 (Δ_i = ∞).
    pub tol_g_rel: f64,
    /// θ^k must be stationary on its support: max_S |G_i| ≤ tol_stat_rel · max|G(0)|.
    pub tol_stat_rel: f64,
    /// A finite runner-up with Δ − Δ* ≤ tol_tie · max(1, Δ*) is an A4.3(ii) tie.
    pub tol_tie: f64,
    /// Continue after a tie (flagged) instead of stopping.
    pub allow_ties: bool,
    /// b⁰; `None` is the corrected b⁰ = 1. A finite-α overlay may pass 1 − ln(w0_i)/Λ.
    pub initial_b: Option<Vec<f64>>,
    pub stage_b: StageBOptions,
}

impl Default for Algorithm1Options {
    fn default() -> Self {
        Algorithm1Options {
            max_stages: 64,
            tol_g_rel: 1e-9,
            tol_stat_rel: 1e-9,
            tol_tie: 1e-6,
            allow_ties: false,
            initial_b: None,
            stage_b: StageBOptions::default(),
        }
    }
}

/// The activation that ends stage k and starts stage k + 1 (eqs. 10–12).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Activation {
    /// i_k.
    pub index: usize,
    /// Its display name (e.g. "VO\[2\]").
    pub name: String,
    /// σ_k = sgn g_{i_k}(θ^k): the sign of β_{i_k} when it activates.
    pub sign: f64,
    /// Δ* = Δ_k(i_k) = T_{k+1} − T_k.
    pub delta: f64,
    /// A4.3(ii) margin: second smallest Δ minus Δ* (∞ when no other Δ is finite).
    pub gap: f64,
    /// |g_{i_k}(θ^k)|: the unstable rate of the saddle θ^k that is taken.
    pub escape_rate: f64,
    /// ln α below which the stage separates cleanly: Λ·gap·|g_{i_k}| ≥ 5 (spec §3.5).
    pub separation_ln_alpha: f64,
}

/// Per-stage diagnostics (spec §3.5).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct StageDiagnostics {
    /// max_{i∈S_k} |G_i(β^k)|.
    pub stationarity: f64,
    /// Eigenvalues of H_SS(β^k), ascending (A4.4: all > 0).
    pub hessian_eigenvalues: Vec<f64>,
    pub lambda_min: f64,
    pub lambda_max: f64,
    /// λ_max / λ_min.
    pub kappa: f64,
    /// Eigenvalues of 2 H_SS diag|β_S|, ascending: the relaxation rates of the active block of
    /// the linearized flow (spec §2.5).
    pub active_rates: Vec<f64>,
    /// c_k = ½ λ_min(D H_SS D), D = diag(2 s_i u_i): the A4.4 constant (equals the smallest
    /// active rate).
    pub c_k: f64,
    /// STAGE_B: max over ε of the limit's difference to the last ε.
    pub eps_difference: f64,
    /// STAGE_B: reduced-flow time used.
    pub reduced_time: f64,
}

/// A violated or doubtful assumption at one stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Flag {
    /// A4.3(ii): the winner of eq. (11) is not unique to tolerance.
    Tie { gap: f64 },
    /// A4.3(iii): a coordinate left the support with G_j = 0 (spec §3.3 "degenerate drops").
    DegenerateDrop { index: usize, signed_g: f64 },
    /// A4.4: H_SS(β^k) is not (robustly) positive definite.
    NotStrictMinimum { lambda_min: f64, kappa: f64 },
    /// Eq. (13): the stage-B limit depends on ε.
    EpsDependence { difference: f64 },
    /// The reduced flow did not settle by t_max; the limit is the active-set polish's.
    SlowLimit,
}

/// One stage k: the plateau (T_k, T_{k+1}) around θ^k.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stage {
    pub k: usize,
    /// T_k (rescaled time).
    pub t_start: f64,
    /// The activation that started this stage (None for k = 0).
    pub entered_by: Option<Activation>,
    /// b^k.
    pub b: Vec<f64>,
    /// β^k (θ^k = (√|β^k|, sgn β^k ⊙ √|β^k|)).
    pub beta: Vec<f64>,
    /// S_k = supp β^k, sorted.
    pub support: Vec<usize>,
    /// Coordinates of the active set that left the support at this stage's start.
    pub dropped: Vec<DroppedCoordinate>,
    /// L̃(β^k).
    pub loss: f64,
    /// g(θ^k) with g_S set to exactly 0: during the stage b(τ) = b^k − drift·(τ − T_k).
    pub drift: Vec<f64>,
    pub diagnostics: StageDiagnostics,
    pub flags: Vec<Flag>,
}

/// Why Algorithm 1 stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Termination {
    /// T_{K+1} = ∞: no coordinate activates any more; θ^K holds for all later τ.
    Converged,
    /// `max_stages` activations were computed.
    StageLimit,
    /// An A4.3(ii) tie at the end of this stage, and ties were not allowed.
    Tie { stage: usize },
    /// A theory assertion failed at this stage (Lemma D.4, stationarity, eq. 13).
    Failed { stage: usize, reason: String },
}

/// The output of Algorithm 1: the stages in order and why the recursion stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Schedule {
    pub stages: Vec<Stage>,
    pub termination: Termination,
    /// max|G(0)|: the scale of every relative tolerance.
    pub scale: f64,
    /// The g = 0 threshold tol_g_rel · scale.
    pub tol_g: f64,
}

/// Runs Algorithm 1 on `loss` (spec §3.2). Errors only on invalid options; a failing theory
/// assertion ends the schedule with [`Termination::Failed`] and keeps the stages so far.
pub fn algorithm1<L: BetaLoss>(
    loss: &L,
    opts: &Algorithm1Options,
) -> Result<Schedule, DiagonalError> {
    let p = loss.p();
    let b0 = opts.initial_b.clone().unwrap_or_else(|| vec![1.0; p]);
    if b0.len() != p || b0.iter().any(|b| !(b.is_finite() && *b > 0.0 && *b < 2.0)) {
        return Err(DiagonalError::Invalid(format!(
            "b⁰ needs {p} entries in (0, 2)"
        )));
    }
    let zero = vec![0.0; p];
    let scale = stats::max_abs(g_vec(loss, &zero).iter());
    let tol_g = opts.tol_g_rel * scale;
    let first = new_stage(loss, 0, 0.0, None, b0, zero, Vec::new(), Vec::new())?;
    let mut schedule = Schedule {
        stages: vec![first],
        termination: Termination::StageLimit,
        scale,
        tol_g,
    };
    for k in 0..opts.max_stages {
        match next_stage(loss, schedule.stages.last().unwrap(), scale, tol_g, opts)? {
            Step::Next(stage) => schedule.stages.push(*stage),
            Step::Stop(termination) => {
                schedule.termination = termination;
                return Ok(schedule);
            }
        }
        debug_assert_eq!(schedule.stages.len(), k + 2);
    }
    Ok(schedule)
}

enum Step {
    Next(Box<Stage>),
    Stop(Termination),
}

/// Δ_k(i) of eq. (10) with the b⁰ = 1 convention: b_i/g_i if g_i > 0, (2 − b_i)/|g_i| if
/// g_i < 0, ∞ if |g_i| ≤ tol_g.
pub fn time_until_active(b: f64, g: f64, tol_g: f64) -> f64 {
    if g.abs() <= tol_g {
        f64::INFINITY
    } else if g > 0.0 {
        b / g
    } else {
        (2.0 - b) / -g
    }
}

fn next_stage<L: BetaLoss>(
    loss: &L,
    stage: &Stage,
    scale: f64,
    tol_g: f64,
    opts: &Algorithm1Options,
) -> Result<Step, DiagonalError> {
    let k = stage.k;
    let fail = |reason: String| Ok(Step::Stop(Termination::Failed { stage: k, reason }));
    if stage.diagnostics.stationarity > opts.tol_stat_rel * scale {
        return fail(format!(
            "θ^{k} is not stationary on its support: max|G_S| = {:e}",
            stage.diagnostics.stationarity
        ));
    }
    let deltas: Vec<f64> = (0..loss.p())
        .map(|i| time_until_active(stage.b[i], stage.drift[i], tol_g))
        .collect();
    if let Some(i) = deltas.iter().position(|&d| d <= 0.0) {
        return fail(format!(
            "Lemma D.4 violated: Δ = {:e} ≤ 0 for {} (b = {}, g = {:e}): immediate re-activation",
            deltas[i],
            loss.coordinate_name(i),
            stage.b[i],
            stage.drift[i]
        ));
    }
    let mut order: Vec<usize> = (0..deltas.len()).collect();
    order.sort_by(|&i, &j| deltas[i].total_cmp(&deltas[j]));
    let (winner, best) = (order[0], deltas[order[0]]);
    if best == f64::INFINITY {
        return Ok(Step::Stop(Termination::Converged));
    }
    let gap = order.get(1).map_or(f64::INFINITY, |&j| deltas[j]) - best;
    let mut flags = Vec::new();
    if gap <= opts.tol_tie * best.max(1.0) {
        if !opts.allow_ties {
            return Ok(Step::Stop(Termination::Tie { stage: k }));
        }
        flags.push(Flag::Tie { gap });
    }
    let sign = stage.drift[winner].signum();
    let escape_rate = stage.drift[winner].abs();
    let mut b: Vec<f64> = stage
        .b
        .iter()
        .zip(&stage.drift)
        .map(|(b, g)| b - best * g)
        .collect();
    b[winner] = if sign > 0.0 { 0.0 } else { 2.0 };
    let limit = match stage_b(
        loss,
        &stage.beta,
        &stage.support,
        winner,
        sign,
        escape_rate,
        scale,
        tol_g,
        &opts.stage_b,
    ) {
        Ok(limit) => limit,
        Err(e) => return fail(format!("STAGE_B for {}: {e}", loss.coordinate_name(winner))),
    };
    let activation = Activation {
        index: winner,
        name: loss.coordinate_name(winner),
        sign,
        delta: best,
        gap,
        escape_rate,
        separation_ln_alpha: -5.0 / (gap * escape_rate),
    };
    for d in &limit.dropped {
        if d.signed_g.abs() <= tol_g {
            flags.push(Flag::DegenerateDrop {
                index: d.index,
                signed_g: d.signed_g,
            });
        }
    }
    let beta_norm = stats::max_with(1.0, limit.beta.iter().map(|x| x.abs()));
    if limit.eps_difference > opts.stage_b.eps_agreement * beta_norm {
        flags.push(Flag::EpsDependence {
            difference: limit.eps_difference,
        });
    }
    if !limit.flow_converged {
        flags.push(Flag::SlowLimit);
    }
    let mut next = new_stage(
        loss,
        k + 1,
        stage.t_start + best,
        Some(activation),
        b,
        limit.beta,
        limit.support,
        limit.dropped,
    )?;
    next.diagnostics.eps_difference = limit.eps_difference;
    next.diagnostics.reduced_time = limit.reduced_time;
    next.flags.extend(flags);
    Ok(Step::Next(Box::new(next)))
}

/// Assembles a stage record with its drift and Hessian diagnostics.
#[allow(clippy::too_many_arguments)]
fn new_stage<L: BetaLoss>(
    loss: &L,
    k: usize,
    t_start: f64,
    entered_by: Option<Activation>,
    b: Vec<f64>,
    beta: Vec<f64>,
    support: Vec<usize>,
    dropped: Vec<DroppedCoordinate>,
) -> Result<Stage, DiagonalError> {
    let mut drift = g_vec(loss, &beta);
    let stationarity = stats::max_abs(support.iter().map(|&i| drift[i]));
    // exact zeros on the support, else Δ_i ≈ 0 activates spurious coordinates (spec §3.2)
    support.iter().for_each(|&i| drift[i] = 0.0);
    let diagnostics = hessian_diagnostics(loss, &beta, &support, stationarity)?;
    let mut flags = Vec::new();
    let strict_minimum = diagnostics.lambda_min > 0.0 && diagnostics.kappa < 1e8;
    if !support.is_empty() && !strict_minimum {
        flags.push(Flag::NotStrictMinimum {
            lambda_min: diagnostics.lambda_min,
            kappa: diagnostics.kappa,
        });
    }
    Ok(Stage {
        k,
        t_start,
        entered_by,
        b,
        loss: loss.loss(&beta),
        beta,
        support,
        dropped,
        drift,
        diagnostics,
        flags,
    })
}

/// H_SS(β^k) spectrum, active relaxation rates and c_k (spec §2.5, §3.5, A4.4).
fn hessian_diagnostics<L: BetaLoss>(
    loss: &L,
    beta: &[f64],
    support: &[usize],
    stationarity: f64,
) -> Result<StageDiagnostics, DiagonalError> {
    let m = support.len();
    if m == 0 {
        return Ok(StageDiagnostics {
            stationarity,
            ..Default::default()
        });
    }
    let block = DMatrix::from_row_slice(m, m, &hessian_block(loss, beta, support));
    let eig = |mat: &DMatrix<f64>| {
        symmetric_eigenvalues(mat).map_err(|e| DiagonalError::NotConverged(e.to_string()))
    };
    let hessian_eigenvalues = eig(&block)?;
    // 2 H diag|β| is similar to the symmetric 2 R H R with R = diag(√|β|)
    let root: Vec<f64> = support.iter().map(|&i| beta[i].abs().sqrt()).collect();
    let sym = DMatrix::from_fn(m, m, |r, c| 2.0 * root[r] * block[(r, c)] * root[c]);
    let active_rates = eig(&sym)?;
    let (lambda_min, lambda_max) = (hessian_eigenvalues[0], hessian_eigenvalues[m - 1]);
    Ok(StageDiagnostics {
        stationarity,
        lambda_min,
        lambda_max,
        kappa: lambda_max / lambda_min,
        c_k: active_rates[0],
        hessian_eigenvalues,
        active_rates,
        eps_difference: 0.0,
        reduced_time: 0.0,
    })
}

//! STAGE_B of Algorithm 1 (spec 004 §3.3): the limit θ^{k+1} = lim_{ε→0} lim_{t→∞} ψ^k(t, ε)
//! of eq. (13), computed by the reduced balanced flow on the active set A = S_k ∪ {i_k}
//! ([`BalancedFlow`]), a Newton polish on the free set (`crate::analysis::stationary`), and a
//! sign-constrained KKT check: θ^{k+1} is a KKT point of min L̃(β) subject to β_j = 0 (j ∉ A)
//! and s_i β_i ≥ 0 (i ∈ A), with H_FF ≻ 0 and strictly negative s_j G_j at dropped j.

use std::cell::RefCell;

use super::log_flow::BalancedFlow;
use super::network::{g_vec, BetaLoss};
use super::DiagonalError;
use crate::analysis::stationary::{find_stationary, NewtonOptions, Target};
use crate::analysis::AnalysisError;
use crate::flow::{integrate, GradientFlow, Method, OdeConfig};
use crate::stats;

/// Settings of STAGE_B and its polish (defaults: spec §3.2, §3.3, §8.3).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StageBOptions {
    /// Initial sizes ε of the new coordinate (β_{i_k} = σ ε²); the limit must not depend on it.
    pub eps_list: Vec<f64>,
    /// Integrator of the reduced flow and its tolerances on η = ln|β|. Bdf by default: the
    /// flow relaxes to a fixed point through stiff active modes, where an implicit method takes
    /// large steps (mini attention: Algorithm 1 in 0.36 s with Bdf, 0.81 s with Tsit45, same
    /// T_k). The tolerances must stay well below `stationarity_rel`: an integrator's noise
    /// floor above it keeps condition (b) from ever holding (Tsit45 at rtol 1e−9 ran to t_max).
    pub method: Method,
    pub rtol: f64,
    pub atol: f64,
    /// Condition (b): |G_i| ≤ this × scale on the coordinates that have not dropped.
    pub stationarity_rel: f64,
    /// A coordinate has dropped when |β_i| ≤ this × max|β| (η_drop).
    pub drop_rel: f64,
    /// The polish frees the coordinates with |β_i| > this × max|β|.
    pub free_rel: f64,
    /// The polish stops at ‖G_F‖₂ ≤ this × scale.
    pub polish_rel: f64,
    /// Required agreement of the limits for different ε, relative to max(1, ‖β‖_∞).
    pub eps_agreement: f64,
    /// t_max = `escapes` · t_esc + `extra` / scale.
    pub t_max_escapes: f64,
    pub t_max_extra: f64,
}

impl Default for StageBOptions {
    fn default() -> Self {
        StageBOptions {
            eps_list: vec![1e-4, 1e-6],
            method: Method::Bdf,
            rtol: 1e-11,
            atol: 1e-11,
            stationarity_rel: 1e-9,
            drop_rel: 1e-12,
            free_rel: 1e-6,
            polish_rel: 1e-13,
            eps_agreement: 1e-8,
            t_max_escapes: 100.0,
            t_max_extra: 1e4,
        }
    }
}

/// A coordinate of the active set that left the support at the limit.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DroppedCoordinate {
    pub index: usize,
    /// Its sign s_j on the active set.
    pub sign: f64,
    /// s_j G_j(β^{k+1}): strictly negative under A4.3(iii) (spec §3.2).
    pub signed_g: f64,
}

/// The result of STAGE_B for one stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageLimit {
    /// β^{k+1}, exactly 0 off the support.
    pub beta: Vec<f64>,
    /// The free set F = supp β^{k+1}, sorted.
    pub support: Vec<usize>,
    pub dropped: Vec<DroppedCoordinate>,
    /// max_{i∈F} |G_i(β^{k+1})| after the polish.
    pub stationarity: f64,
    /// max over ε of ‖β_ε − β_{ε_last}‖_∞.
    pub eps_difference: f64,
    /// Reduced-flow time at which conditions (a)–(c) held (last ε).
    pub reduced_time: f64,
    /// False when the reduced flow hit t_max before (b)–(c) held (slow, e.g. algebraic decay of
    /// a degenerate drop) and the limit comes from the active-set polish alone.
    pub flow_converged: bool,
}

/// STAGE_B from the plateau point β^k with support `support` (signs from β^k), activating
/// `new_index` with sign `sign`, escape rate |g_{i_k}(θ^k)| = `escape_rate`; `scale` = max|G(0)|,
/// `tol_g` the zero threshold of g.
#[allow(clippy::too_many_arguments)]
pub fn stage_b<L: BetaLoss>(
    loss: &L,
    beta_k: &[f64],
    support: &[usize],
    new_index: usize,
    sign: f64,
    escape_rate: f64,
    scale: f64,
    tol_g: f64,
    opts: &StageBOptions,
) -> Result<StageLimit, DiagonalError> {
    let mut active = support.to_vec();
    let mut signs: Vec<f64> = support.iter().map(|&i| beta_k[i].signum()).collect();
    active.push(new_index);
    signs.push(sign);
    let flow = BalancedFlow::new(loss, active.clone(), signs.clone());
    let cfg = OdeConfig::new(opts.method, opts.rtol, opts.atol);
    let mut limits: Vec<StageLimit> = Vec::new();
    for &eps in &opts.eps_list {
        let mut eta: Vec<f64> = support.iter().map(|&i| beta_k[i].abs().ln()).collect();
        eta.push(2.0 * eps.ln());
        let t_esc = (1.0 / (eps * eps)).ln() / (2.0 * escape_rate);
        let t_max = opts.t_max_escapes * t_esc + opts.t_max_extra / scale;
        let (mut t, mut horizon) = (0.0, 2.0 * t_esc);
        let flow_converged = loop {
            let traj = integrate(&flow, &eta, &[t, horizon], &cfg, None)
                .map_err(|e| DiagonalError::NotConverged(format!("reduced stage-B flow: {e}")))?;
            eta = traj.last_state().to_vec();
            if limit_conditions_hold(loss, &flow.beta(&eta), &active, &signs, scale, opts) {
                break true;
            }
            if horizon >= t_max {
                break false;
            }
            t = horizon;
            horizon = (2.0 * horizon).min(t_max);
        };
        let beta = polish(loss, &flow.beta(&eta), &active, &signs, scale, opts)?;
        let mut limit = kkt_check(loss, beta, &active, &signs, tol_g)?;
        limit.reduced_time = horizon;
        limit.flow_converged = flow_converged;
        if !flow_converged && limit.dropped.iter().all(|d| d.signed_g < -tol_g) {
            return Err(DiagonalError::NotConverged(format!(
                "limit (13) not reached (A4.5): the reduced flow did not settle by t_max = \
                 {t_max:.3e} (ε = {eps:e}) although the polished point has no degenerate drop"
            )));
        }
        limits.push(limit);
    }
    let mut last = limits
        .pop()
        .ok_or_else(|| DiagonalError::Invalid("STAGE_B needs at least one ε".into()))?;
    last.eps_difference = stats::max(
        limits
            .iter()
            .map(|l| stats::max_abs(l.beta.iter().zip(&last.beta).map(|(a, b)| a - b))),
    );
    Ok(last)
}

/// Conditions (b) and (c) of spec §3.3 at β: the coordinates above η_drop are stationary to
/// `stationarity_rel`·scale, those below it still decay (s_i G_i < 0).
fn limit_conditions_hold<L: BetaLoss>(
    loss: &L,
    beta: &[f64],
    active: &[usize],
    signs: &[f64],
    scale: f64,
    opts: &StageBOptions,
) -> bool {
    let g = g_vec(loss, beta);
    let max_beta = stats::max_abs(beta.iter());
    active.iter().zip(signs).all(|(&i, &s)| {
        if beta[i].abs() > opts.drop_rel * max_beta {
            g[i].abs() <= opts.stationarity_rel * scale
        } else {
            s * g[i] < 0.0
        }
    })
}

/// POLISH (spec §3.3) as an active-set Newton method: Newton (saddle-free, exact Hessian) on
/// G_F = 0 over the free set F = {|β_i| > free_rel·max|β|}; coordinates that become too small
/// or change sign leave F and the Newton solve is repeated. Returns the polished β.
fn polish<L: BetaLoss>(
    loss: &L,
    beta: &[f64],
    active: &[usize],
    signs: &[f64],
    scale: f64,
    opts: &StageBOptions,
) -> Result<Vec<f64>, DiagonalError> {
    let mut beta = beta.to_vec();
    let is_free = |b: &[f64], i: usize, s: f64| {
        let max_beta = stats::max_abs(b.iter());
        s * b[i] > opts.free_rel * max_beta
    };
    let mut free: Vec<usize> = active
        .iter()
        .zip(signs)
        .filter(|(&i, &s)| is_free(&beta, i, s))
        .map(|(&i, _)| i)
        .collect();
    for _ in 0..=active.len() {
        for &j in active {
            if !free.contains(&j) {
                beta[j] = 0.0;
            }
        }
        if free.is_empty() {
            return Ok(beta);
        }
        let restricted = Restricted::new(loss, &beta, &free);
        let start: Vec<f64> = free.iter().map(|&i| beta[i]).collect();
        let mut newton = NewtonOptions::new(Target::Minimum);
        newton.grad_tol = opts.polish_rel * scale;
        let z = match find_stationary(&restricted, &start, &newton) {
            Ok(point) => point.z,
            // rounding can stop Newton above polish_rel; accept what still meets (b)
            Err(AnalysisError::StationaryNotFound { last, .. })
                if last.grad_norm <= opts.stationarity_rel * scale =>
            {
                last.z
            }
            Err(e) => return Err(DiagonalError::NotConverged(format!("stage-B polish: {e}"))),
        };
        free.iter().zip(&z).for_each(|(&i, &x)| beta[i] = x);
        let sign_of = |i: usize| signs[active.iter().position(|&a| a == i).unwrap()];
        let still_free: Vec<usize> = free
            .iter()
            .copied()
            .filter(|&i| is_free(&beta, i, sign_of(i)))
            .collect();
        if still_free == free {
            return Ok(beta);
        }
        free = still_free;
    }
    Err(DiagonalError::NotConverged(
        "stage-B polish: the free set did not settle".into(),
    ))
}

/// The KKT report of a polished point: support, stationarity on it, and s_j G_j of the dropped
/// coordinates. Fails if a dropped coordinate would regrow (s_j G_j > tol_g).
fn kkt_check<L: BetaLoss>(
    loss: &L,
    beta: Vec<f64>,
    active: &[usize],
    signs: &[f64],
    tol_g: f64,
) -> Result<StageLimit, DiagonalError> {
    let g = g_vec(loss, &beta);
    let mut support: Vec<usize> = active.iter().copied().filter(|&i| beta[i] != 0.0).collect();
    support.sort_unstable();
    let stationarity = stats::max_abs(support.iter().map(|&i| g[i]));
    let mut dropped = Vec::new();
    for (&j, &s) in active.iter().zip(signs) {
        if beta[j] == 0.0 {
            let signed_g = s * g[j];
            if signed_g > tol_g {
                return Err(DiagonalError::NotConverged(format!(
                    "stage-B limit is not a KKT point: dropped coordinate {j} has s·G = \
                     {signed_g:e} > 0 and would regrow"
                )));
            }
            dropped.push(DroppedCoordinate {
                index: j,
                sign: s,
                signed_g,
            });
        }
    }
    Ok(StageLimit {
        beta,
        support,
        dropped,
        stationarity,
        eps_difference: 0.0,
        reduced_time: 0.0,
        flow_converged: true,
    })
}

#[derive(Debug)]
struct RestrictedScratch {
    beta: Vec<f64>,
    full: Vec<f64>,
    dir: Vec<f64>,
}

/// L̃ as a function of β_F alone, every other coordinate fixed at its value in `base`.
struct Restricted<'a, L> {
    loss: &'a L,
    free: &'a [usize],
    scratch: RefCell<RestrictedScratch>,
}

impl<'a, L: BetaLoss> Restricted<'a, L> {
    fn new(loss: &'a L, base: &[f64], free: &'a [usize]) -> Self {
        let p = loss.p();
        Restricted {
            loss,
            free,
            scratch: RefCell::new(RestrictedScratch {
                beta: base.to_vec(),
                full: vec![0.0; p],
                dir: vec![0.0; p],
            }),
        }
    }

    fn embed(&self, z: &[f64], s: &mut RestrictedScratch) {
        self.free.iter().zip(z).for_each(|(&i, &x)| s.beta[i] = x);
    }
}

impl<L: BetaLoss> GradientFlow for Restricted<'_, L> {
    fn dim(&self) -> usize {
        self.free.len()
    }
    fn loss(&self, z: &[f64]) -> f64 {
        let s = &mut *self.scratch.borrow_mut();
        self.embed(z, s);
        self.loss.loss(&s.beta)
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.embed(z, s);
        self.loss.grad_beta(&s.beta, &mut s.full);
        self.free
            .iter()
            .zip(g.iter_mut())
            .for_each(|(&i, o)| *o = s.full[i]);
    }
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.embed(z, s);
        s.dir.iter_mut().for_each(|x| *x = 0.0);
        self.free.iter().zip(u).for_each(|(&i, &x)| s.dir[i] = x);
        self.loss.hvp_beta(&s.beta, &s.dir, &mut s.full);
        self.free
            .iter()
            .zip(out.iter_mut())
            .for_each(|(&i, o)| *o = s.full[i]);
    }
}

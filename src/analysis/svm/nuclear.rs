//! min ‖W‖_* s.t. ⟨W, a_k q_kᵀ⟩ ≥ 1: the nuclear-norm W-SVM of spec 001 §3.2, by the
//! Chambolle–Pock primal–dual iteration (pure Rust; clarabel's SDP cones need BLAS).
//!
//! Dual: max 1ᵀλ s.t. ‖Σ λ_k a_k q_kᵀ‖_op ≤ 1, λ ≥ 0. Every answer carries a rigorous bracket:
//! W/min(1, μ(W)) is primal feasible and λ/max(1, ‖M‖_op) dual feasible, so their objective
//! values enclose the optimum whatever the iteration's accuracy. Solutions can be
//! non-unique (a continuum in spec 001's toy-4): compare objective values, not matrices.

use nalgebra::{DMatrix, SymmetricEigen};
use serde::Serialize;

use super::constraints::{MarginConstraints, RankOneConstraints};
use super::qp::{solve_l2, SvmMethod};
use super::SvmError;

/// Stopping rule of the primal–dual iteration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NuclearSettings {
    /// Stop when the certified relative gap (upper − lower)/upper is below this.
    pub tol: f64,
    pub max_iterations: usize,
}

impl Default for NuclearSettings {
    fn default() -> Self {
        NuclearSettings {
            tol: 1e-9,
            max_iterations: 200_000,
        }
    }
}

/// KKT residuals of the certified pair (Ŵ, λ̂), with M = Σ λ̂_k a_k q_kᵀ and Ŵ = U_r Σ V_rᵀ.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NuclearKkt {
    /// max(0, 1 − min_k margin) (zero up to rounding: Ŵ is rescaled to feasibility).
    pub primal_infeasibility: f64,
    /// max(0, ‖M‖_op − 1) (zero up to rounding: λ̂ is rescaled to feasibility).
    pub dual_infeasibility: f64,
    /// max_k |λ̂_k (margin_k − 1)|.
    pub complementary_slackness: f64,
    /// M ∈ ∂‖Ŵ‖_*: max(‖M V_r − U_r‖_F, ‖Mᵀ U_r − V_r‖_F).
    pub subgradient: f64,
    /// (‖Ŵ‖_* − 1ᵀλ̂)/‖Ŵ‖_* ≥ 0: the certified relative gap.
    pub duality_gap: f64,
}

/// A certified nuclear-norm max-margin solution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NuclearSolution {
    /// Ŵ (vec, column-major), primal feasible.
    pub w: Vec<f64>,
    /// ‖Ŵ‖_* (an upper bound on the optimum OPT_*).
    pub nuclear_norm: f64,
    /// 1ᵀλ̂ (a lower bound on OPT_*).
    pub dual_value: f64,
    pub lambda: Vec<f64>,
    pub margins: Vec<f64>,
    pub singular_values: Vec<f64>,
    /// Numerical rank of Ŵ (singular values above 1e−6·σ_max).
    pub rank: usize,
    pub kkt: NuclearKkt,
    pub iterations: usize,
}

fn nuclear_norm(w: &DMatrix<f64>) -> f64 {
    w.clone().svd(false, false).singular_values.sum()
}

fn op_norm(m: &DMatrix<f64>) -> f64 {
    m.clone().svd(false, false).singular_values.max()
}

/// Singular-value soft thresholding: U max(Σ − τ, 0) Vᵀ.
fn shrink(w: DMatrix<f64>, tau: f64) -> DMatrix<f64> {
    let mut svd = w.svd(true, true);
    svd.singular_values
        .iter_mut()
        .for_each(|s| *s = (*s - tau).max(0.0));
    svd.recompose().expect("both factors were computed")
}

/// Solves min ‖W‖_* s.t. the rank-one margin constraints, starting from the Frobenius
/// solution (which also decides feasibility: both programs share the constraint set).
pub fn solve_nuclear(
    c: &RankOneConstraints,
    settings: &NuclearSettings,
) -> Result<NuclearSolution, SvmError> {
    let program = "nuclear-norm W-SVM";
    let frobenius = solve_l2(c, SvmMethod::Dual).map_err(|e| match e {
        SvmError::Infeasible { detail, .. } => SvmError::Infeasible {
            program: program.into(),
            detail,
        },
        other => other,
    })?;
    let m = c.count();
    let gram_top = SymmetricEigen::new(c.gram()).eigenvalues.max();
    let step = 0.99 / gram_top.sqrt();
    let mut w = c.matrix(&frobenius.w);
    let mut w_bar = w.clone();
    let mut lambda = vec![0.0; m];
    let mut best: Option<(f64, NuclearSolution)> = None;
    for it in 1..=settings.max_iterations {
        let margins = c.margins(w_bar.as_slice());
        for (l, g) in lambda.iter_mut().zip(&margins) {
            *l = (*l + step * (1.0 - g)).max(0.0);
        }
        let pull = c.matrix(&c.combine(&lambda));
        let w_next = shrink(&w + pull * step, step);
        w_bar = &w_next * 2.0 - &w;
        w = w_next;
        if it % 25 == 0 || it == settings.max_iterations {
            if let Some(sol) = certify(c, &w, &lambda, it) {
                let gap = sol.kkt.duality_gap;
                if gap <= settings.tol {
                    return Ok(sol);
                }
                if best.as_ref().is_none_or(|(g, _)| gap < *g) {
                    best = Some((gap, sol));
                }
            }
        }
    }
    Err(SvmError::Solver {
        program: program.into(),
        status: format!(
            "no certified solution within {} iterations (best certified gap {:.3e}, asked {:.1e})",
            settings.max_iterations,
            best.map_or(f64::INFINITY, |(g, _)| g),
            settings.tol
        ),
    })
}

/// Rescales (W, λ) to a feasible primal–dual pair and measures its KKT residuals; `None`
/// while W does not yet have a positive margin on every constraint.
fn certify(
    c: &RankOneConstraints,
    w: &DMatrix<f64>,
    lambda: &[f64],
    iterations: usize,
) -> Option<NuclearSolution> {
    let min_margin = c
        .margins(w.as_slice())
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    if min_margin.is_nan() || min_margin <= 0.0 {
        return None;
    }
    let w_hat = w / min_margin.min(1.0);
    let m_raw = c.matrix(&c.combine(lambda));
    let dual_scale = op_norm(&m_raw).max(1.0);
    let lambda_hat: Vec<f64> = lambda.iter().map(|l| l / dual_scale).collect();
    let m = m_raw / dual_scale;
    let margins = c.margins(w_hat.as_slice());
    let svd = w_hat.clone().svd(true, true);
    let (u, v_t) = (svd.u.as_ref()?, svd.v_t.as_ref()?);
    let s = &svd.singular_values;
    let top = s.max();
    // nalgebra does not order singular values: keep the numerically nonzero ones
    let keep: Vec<usize> = (0..s.len()).filter(|&k| s[k] > 1e-6 * top).collect();
    let rank = keep.len();
    let u_r = u.select_columns(&keep);
    let v_r = v_t.select_rows(&keep).transpose();
    let subgradient = (&m * &v_r - &u_r)
        .norm()
        .max((m.transpose() * &u_r - &v_r).norm());
    let norm = s.sum();
    let dual_value: f64 = lambda_hat.iter().sum();
    let mut singular_values: Vec<f64> = s.iter().copied().collect();
    singular_values.sort_by(|a, b| b.total_cmp(a));
    Some(NuclearSolution {
        kkt: NuclearKkt {
            primal_infeasibility: margins.iter().fold(0.0, |acc, &g| acc.max(1.0 - g)),
            dual_infeasibility: (op_norm(&m) - 1.0).max(0.0),
            complementary_slackness: lambda_hat
                .iter()
                .zip(&margins)
                .fold(0.0, |acc, (l, g)| acc.max((l * (g - 1.0)).abs())),
            subgradient,
            duality_gap: (norm - dual_value) / norm,
        },
        w: w_hat.as_slice().to_vec(),
        nuclear_norm: nuclear_norm(&w_hat),
        dual_value,
        lambda: lambda_hat,
        margins,
        singular_values,
        rank,
        iterations,
    })
}

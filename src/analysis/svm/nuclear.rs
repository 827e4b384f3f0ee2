//! min ‖W‖_* s.t. ⟨W, a_k q_kᵀ⟩ ≥ 1: the nuclear-norm W-SVM of spec 001 §3.2, by the
//! Chambolle–Pock primal–dual iteration (pure Rust; clarabel's SDP cones need BLAS), and its
//! restriction to diagonal W = Diag(β), where ‖W‖_* = ‖β‖₁ and the same iteration solves the
//! ℓ1-SVM (spec 001 §3.3) with soft thresholding in place of singular-value thresholding.
//!
//! Dual: max 1ᵀλ s.t. ‖Σ λ_k a_k q_kᵀ‖_op ≤ 1, λ ≥ 0. Every answer carries a rigorous bracket:
//! W/min(1, μ(W)) is primal feasible and λ/max(1, ‖M‖_op) dual feasible, so their objective
//! values enclose the optimum whatever the iteration's accuracy. Solutions can be
//! non-unique (a continuum in spec 001's toy-4): compare objective values, not matrices.

use nalgebra::{DMatrix, SymmetricEigen};
use serde::Serialize;

use super::constraints::{MarginConstraints, RankOneConstraints};
use super::lp::{L1Kkt, L1Solution};
use super::qp::{solve_l2, SvmMethod};
use super::SvmError;
use crate::stats;

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
    /// ‖M‖_op of the certificate M = Σ λ̂_k a_k q_kᵀ (≤ 1: λ̂ is dual feasible).
    pub certificate_op_norm: f64,
    /// Strict complementarity of this certificate, 1 − ‖(I − U_rU_rᵀ) M (I − V_rV_rᵀ)‖_op
    /// (spec 001 §2.8; 1 when Ŵ has full rank).
    pub complementarity_margin: f64,
    pub kkt: NuclearKkt,
    pub iterations: usize,
    /// (iteration, certified relative gap) at every certification of the run.
    pub gap_history: Vec<(usize, f64)>,
}

fn op_norm(m: &DMatrix<f64>) -> f64 {
    stats::max(m.clone().svd(false, false).singular_values.iter())
}

/// A norm with a cheap proximal map and its dual norm: what the primal–dual iteration needs.
pub(crate) trait ProxNorm {
    fn value(&self, w: &[f64]) -> f64;
    fn dual(&self, m: &[f64]) -> f64;
    /// w ← prox_{τ‖·‖}(w).
    fn shrink(&self, w: &mut [f64], tau: f64);
}

/// ‖W‖_* on vec(W) (column-major, rows × cols).
pub(crate) struct Nuclear {
    pub rows: usize,
    pub cols: usize,
}

impl ProxNorm for Nuclear {
    fn value(&self, w: &[f64]) -> f64 {
        DMatrix::from_column_slice(self.rows, self.cols, w)
            .svd(false, false)
            .singular_values
            .sum()
    }
    fn dual(&self, m: &[f64]) -> f64 {
        op_norm(&DMatrix::from_column_slice(self.rows, self.cols, m))
    }
    /// Singular-value soft thresholding U max(Σ − τ, 0) Vᵀ.
    fn shrink(&self, w: &mut [f64], tau: f64) {
        let mut svd = DMatrix::from_column_slice(self.rows, self.cols, w).svd(true, true);
        svd.singular_values
            .iter_mut()
            .for_each(|s| *s = (*s - tau).max(0.0));
        let shrunk = svd.recompose().expect("both factors were computed");
        w.copy_from_slice(shrunk.as_slice());
    }
}

/// ‖β‖₁ = ‖Diag β‖_*, whose prox is soft thresholding (the SVT of a diagonal matrix).
struct L1;

impl ProxNorm for L1 {
    fn value(&self, w: &[f64]) -> f64 {
        w.iter().map(|v| v.abs()).sum()
    }
    fn dual(&self, m: &[f64]) -> f64 {
        stats::max_abs(m.iter())
    }
    fn shrink(&self, w: &mut [f64], tau: f64) {
        w.iter_mut()
            .for_each(|v| *v = v.signum() * (v.abs() - tau).max(0.0));
    }
}

/// A feasible primal–dual pair and its objective values: lower ≤ OPT ≤ upper.
pub(crate) struct Bracket {
    pub w: Vec<f64>,
    pub lambda: Vec<f64>,
    pub upper: f64,
    pub lower: f64,
}

/// A certified bracket with the work it took.
pub(crate) struct Certified {
    pub bracket: Bracket,
    pub iterations: usize,
    /// (iteration, certified relative gap) at every certification.
    pub history: Vec<(usize, f64)>,
}

impl Bracket {
    pub fn gap(&self) -> f64 {
        (self.upper - self.lower) / self.upper
    }
}

/// Rescales (w, λ) to a feasible pair; `None` while w does not yet have a positive margin on
/// every constraint.
pub(crate) fn bracket<C: MarginConstraints + ?Sized>(
    c: &C,
    norm: &impl ProxNorm,
    w: &[f64],
    lambda: &[f64],
) -> Option<Bracket> {
    let min_margin = stats::min(c.margins(w));
    if min_margin.is_nan() || min_margin <= 0.0 {
        return None;
    }
    let scale = min_margin.min(1.0);
    let w: Vec<f64> = w.iter().map(|v| v / scale).collect();
    let dual_scale = norm.dual(&c.combine(lambda)).max(1.0);
    let lambda: Vec<f64> = lambda.iter().map(|l| l / dual_scale).collect();
    Some(Bracket {
        upper: norm.value(&w),
        lower: lambda.iter().sum(),
        w,
        lambda,
    })
}

/// Chambolle–Pock on min ‖w‖ + Σ λ_k (1 − ⟨f_k, w⟩) from `start`, steps 0.99/‖F‖; returns the
/// first bracket whose gap is below `settings.tol` with the gap history.
fn primal_dual<C: MarginConstraints + ?Sized>(
    c: &C,
    norm: &impl ProxNorm,
    start: Vec<f64>,
    settings: &NuclearSettings,
    program: &str,
) -> Result<Certified, SvmError> {
    let gram_top = SymmetricEigen::new(c.gram()).eigenvalues.max();
    let step = 0.99 / gram_top.sqrt();
    let mut w = start;
    let mut w_bar = w.clone();
    let mut lambda = vec![0.0; c.count()];
    let mut history = Vec::new();
    let mut best = f64::INFINITY;
    for it in 1..=settings.max_iterations {
        let margins = c.margins(&w_bar);
        for (l, g) in lambda.iter_mut().zip(&margins) {
            *l = (*l + step * (1.0 - g)).max(0.0);
        }
        let mut w_next: Vec<f64> = w
            .iter()
            .zip(c.combine(&lambda))
            .map(|(a, p)| a + step * p)
            .collect();
        norm.shrink(&mut w_next, step);
        for ((b, n), o) in w_bar.iter_mut().zip(&w_next).zip(&w) {
            *b = 2.0 * n - o;
        }
        w = w_next;
        if it % 25 == 0 || it == settings.max_iterations {
            if let Some(b) = bracket(c, norm, &w, &lambda) {
                let gap = b.gap();
                history.push((it, gap));
                best = stats::smaller(best, gap);
                if gap <= settings.tol {
                    return Ok(Certified {
                        bracket: b,
                        iterations: it,
                        history,
                    });
                }
            }
        }
    }
    Err(SvmError::Solver {
        program: program.into(),
        status: format!(
            "no certified solution within {} iterations (best certified gap {best:.3e}, asked \
             {:.1e})",
            settings.max_iterations, settings.tol
        ),
    })
}

pub(crate) fn renamed_infeasible(program: &str) -> impl Fn(SvmError) -> SvmError + '_ {
    move |e| match e {
        SvmError::Infeasible { detail, .. } => SvmError::Infeasible {
            program: program.into(),
            detail,
        },
        other => other,
    }
}

/// Solves min ‖W‖_* s.t. the rank-one margin constraints, starting from the Frobenius
/// solution (which also decides feasibility: both programs share the constraint set).
pub fn solve_nuclear(
    c: &RankOneConstraints,
    settings: &NuclearSettings,
) -> Result<NuclearSolution, SvmError> {
    let program = "nuclear-norm W-SVM";
    let frobenius = solve_l2(c, SvmMethod::Dual).map_err(renamed_infeasible(program))?;
    let (rows, cols) = c.shape();
    let run = primal_dual(c, &Nuclear { rows, cols }, frobenius.w, settings, program)?;
    Ok(nuclear_solution(c, run))
}

/// The nuclear-norm SVM restricted to diagonal W = Diag(β) (square W), i.e. the ℓ1-SVM
/// min ‖β‖₁ s.t. βᵀ(a_k ⊙ q_k) ≥ 1, by the same primal–dual iteration (soft thresholding is
/// the SVT of a diagonal matrix): the pure-Rust counterpart of [`super::solve_l1`]'s LP.
pub fn solve_nuclear_diagonal(
    c: &RankOneConstraints,
    settings: &NuclearSettings,
) -> Result<L1Solution, SvmError> {
    let program = "diagonal nuclear-norm W-SVM";
    let diag = c.diagonal()?;
    let start = solve_l2(&diag, SvmMethod::Dual).map_err(renamed_infeasible(program))?;
    let Certified {
        bracket: b,
        iterations,
        ..
    } = primal_dual(&diag, &L1, start.w, settings, program)?;
    let (kkt, coordinate_support) = L1Kkt::of(&diag, &b.w, &b.lambda);
    let margins = diag.margins(&b.w);
    let tight = (0..margins.len())
        .filter(|&k| margins[k] <= 1.0 + 1e-7)
        .collect();
    Ok(L1Solution {
        norm_l1: b.upper,
        beta: b.w,
        lambda: b.lambda,
        margins,
        coordinate_support,
        tight,
        kkt,
        iterations: iterations as u32,
    })
}

/// The certified solution of a feasible bracket (also used by the column-generation solver).
pub(crate) fn nuclear_solution(c: &RankOneConstraints, run: Certified) -> NuclearSolution {
    let Certified {
        bracket: b,
        iterations,
        history: gap_history,
    } = run;
    let w_hat = c.matrix(&b.w);
    let m = c.matrix(&c.combine(&b.lambda));
    let margins = c.margins(&b.w);
    let svd = w_hat.svd(true, true);
    let (u, v_t) = (
        svd.u.as_ref().expect("computed"),
        svd.v_t.as_ref().expect("computed"),
    );
    let s = &svd.singular_values;
    let top = stats::max(s.iter());
    // nalgebra does not order singular values: keep the numerically nonzero ones
    let keep: Vec<usize> = (0..s.len()).filter(|&k| s[k] > 1e-6 * top).collect();
    let u_r = u.select_columns(&keep);
    let v_r = v_t.select_rows(&keep).transpose();
    let subgradient = stats::larger(
        (&m * &v_r - &u_r).norm(),
        (m.transpose() * &u_r - &v_r).norm(),
    );
    let (rows, cols) = c.shape();
    let off_support = (DMatrix::identity(rows, rows) - &u_r * u_r.transpose())
        * &m
        * (DMatrix::identity(cols, cols) - &v_r * v_r.transpose());
    let certificate_op_norm = op_norm(&m);
    let mut singular_values: Vec<f64> = s.iter().copied().collect();
    singular_values.sort_by(|a, b| b.total_cmp(a));
    NuclearSolution {
        kkt: NuclearKkt {
            primal_infeasibility: stats::max_with(0.0, margins.iter().map(|&g| 1.0 - g)),
            dual_infeasibility: (certificate_op_norm - 1.0).max(0.0),
            complementary_slackness: stats::max_abs(
                b.lambda.iter().zip(&margins).map(|(l, g)| l * (g - 1.0)),
            ),
            subgradient,
            duality_gap: b.gap(),
        },
        nuclear_norm: b.upper,
        dual_value: b.lower,
        rank: keep.len(),
        certificate_op_norm,
        complementarity_margin: 1.0 - op_norm(&off_support),
        w: b.w,
        lambda: b.lambda,
        margins,
        singular_values,
        iterations,
        gap_history,
    }
}

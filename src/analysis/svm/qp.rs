//! min ½‖w‖² s.t. ⟨w, f_k⟩ ≥ 1 (Frobenius W-SVM, u-SVM, diagonal ℓ2-SVM), spec 003 §3.1–3.3.
//!
//! Solved by clarabel either as the dual max_{α≥0} 1ᵀα − ½αᵀGα (m variables, only the Gram
//! matrix) or as the primal QP (p variables, a cross-check for small p). The interior-point
//! answer is then polished: on its support S the KKT system G_SS α_S = 1 is solved exactly,
//! and the polished point is kept when it is certified (α_S > 0, every margin ≥ 1).

use clarabel::algebra::CscMatrix;
use clarabel::solver::{
    DefaultSettings, DefaultSolver, IPSolver, NonnegativeConeT, SolverStatus, ZeroConeT,
};
use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use super::constraints::MarginConstraints;
use super::SvmError;
use crate::stats;

/// Which program clarabel solves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SvmMethod {
    /// The dual QP in α ∈ ℝ^m (default: needs only the Gram matrix).
    Dual,
    /// The primal QP in w ∈ ℝ^p.
    Primal,
}

/// KKT residuals of a solution of min ½‖w‖² s.t. ⟨w, f_k⟩ ≥ 1 with multipliers α.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct L2Kkt {
    /// max(0, max_k (1 − ⟨w, f_k⟩)).
    pub primal_infeasibility: f64,
    /// max(0, −min_k α_k).
    pub dual_infeasibility: f64,
    /// max_k |α_k (⟨w, f_k⟩ − 1)|.
    pub complementary_slackness: f64,
    /// ‖w − Σ α_k f_k‖/‖w‖.
    pub stationarity: f64,
    /// |‖w‖² − 1ᵀα|/‖w‖² (strong duality: ‖w_mm‖² = 1ᵀα).
    pub duality_gap: f64,
}

impl L2Kkt {
    /// Whether every residual is at most `tol`.
    pub fn passes(&self, tol: f64) -> bool {
        self.max() <= tol
    }

    /// The largest residual.
    pub fn max(&self) -> f64 {
        stats::max([
            self.primal_infeasibility,
            self.dual_infeasibility,
            self.complementary_slackness,
            self.stationarity,
            self.duality_gap,
        ])
    }

    fn of<C: MarginConstraints + ?Sized>(c: &C, w: &[f64], alpha: &[f64], margins: &[f64]) -> Self {
        let norm_sq: f64 = w.iter().map(|x| x * x).sum();
        let recombined = c.combine(alpha);
        let stationarity = w
            .iter()
            .zip(&recombined)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt()
            / norm_sq.sqrt();
        L2Kkt {
            primal_infeasibility: stats::max_with(0.0, margins.iter().map(|&g| 1.0 - g)),
            dual_infeasibility: stats::max_with(0.0, alpha.iter().map(|&a| -a)),
            complementary_slackness: stats::max_abs(
                alpha.iter().zip(margins).map(|(a, g)| a * (g - 1.0)),
            ),
            stationarity,
            duality_gap: (norm_sq - alpha.iter().sum::<f64>()).abs() / norm_sq,
        }
    }
}

/// A certified max-margin solution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct L2Solution {
    /// The minimizer w (vec(W) column-major for rank-one constraints).
    pub w: Vec<f64>,
    /// ‖w‖; the max margin is Γ = 1/‖w‖.
    pub norm: f64,
    /// Multipliers α_k ≥ 0.
    pub alpha: Vec<f64>,
    /// ⟨w, f_k⟩.
    pub margins: Vec<f64>,
    /// Support {k : α_k > 0}.
    pub support: Vec<usize>,
    /// Tight constraints {k : ⟨w, f_k⟩ ≤ 1 + 1e−9}.
    pub tight: Vec<usize>,
    pub kkt: L2Kkt,
    pub method: SvmMethod,
    /// Whether the exact active-set polish replaced the interior-point answer.
    pub polished: bool,
    pub iterations: u32,
}

/// A solution is returned only when its largest KKT residual is below this.
pub const ACCEPT_TOL: f64 = 1e-6;

/// Solves min ½‖w‖² s.t. ⟨w, f_k⟩ ≥ 1. Infeasible constraints (including a zero f_k) and
/// non-finite data are errors; so is a solver answer whose KKT residuals exceed 1e−6.
pub fn solve_l2<C: MarginConstraints + ?Sized>(
    c: &C,
    method: SvmMethod,
) -> Result<L2Solution, SvmError> {
    let program = "max-margin QP";
    let m = c.count();
    if m == 0 {
        return Err(SvmError::Invalid {
            field: "constraints".into(),
            reason: "there are no margin constraints (every sequence needs T ≥ 2 tokens)".into(),
        });
    }
    let gram = c.gram();
    if gram.iter().any(|g| !g.is_finite()) {
        return Err(SvmError::Invalid {
            field: "X".into(),
            reason: "inner products of the tokens (and queries) overflow f64: rescale the data \
                     (entries near 1e154 or larger)"
                .into(),
        });
    }
    if let Some(k) = (0..m).find(|&k| gram[(k, k)] == 0.0) {
        let l = c.labels()[k];
        return Err(SvmError::Infeasible {
            program: program.into(),
            detail: format!(
                "constraint (sequence {}, token {}) is identically zero (equal tokens or a zero \
                 query), so its margin is 0 for every w",
                l.sequence, l.token
            ),
        });
    }
    let (alpha, w_ipm, iterations) = match method {
        SvmMethod::Dual => solve_dual(c, &gram)?,
        SvmMethod::Primal => solve_primal(c)?,
    };
    let (alpha, w, polished) = match polish(c, &gram, &alpha) {
        Some((a, w)) => (a, w, true),
        None => (alpha, w_ipm, false),
    };
    let margins = c.margins(&w);
    let kkt = L2Kkt::of(c, &w, &alpha, &margins);
    if !kkt.passes(ACCEPT_TOL) {
        return Err(SvmError::Solver {
            program: program.into(),
            status: format!("uncertified answer, KKT residuals {kkt:?}"),
        });
    }
    let top = stats::max(alpha.iter());
    let support = (0..m).filter(|&k| alpha[k] > 1e-9 * top).collect();
    let tight = (0..m).filter(|&k| margins[k] <= 1.0 + 1e-9).collect();
    Ok(L2Solution {
        norm: w.iter().map(|x| x * x).sum::<f64>().sqrt(),
        w,
        alpha,
        margins,
        support,
        tight,
        kkt,
        method,
        polished,
        iterations,
    })
}

/// Dense → CSC, keeping only nonzeros (and only the upper triangle when `upper`).
pub(crate) fn csc(mat: &DMatrix<f64>, upper: bool) -> CscMatrix<f64> {
    let (rows, cols) = mat.shape();
    let mut colptr = Vec::with_capacity(cols + 1);
    let mut rowval = Vec::new();
    let mut nzval = Vec::new();
    colptr.push(0);
    for j in 0..cols {
        let end = if upper { (j + 1).min(rows) } else { rows };
        for i in 0..end {
            let v = mat[(i, j)];
            if v != 0.0 {
                rowval.push(i);
                nzval.push(v);
            }
        }
        colptr.push(rowval.len());
    }
    CscMatrix::new(rows, cols, colptr, rowval, nzval)
}

pub(crate) fn settings() -> DefaultSettings<f64> {
    DefaultSettings {
        verbose: false,
        max_iter: 500,
        tol_gap_abs: 1e-11,
        tol_gap_rel: 1e-11,
        tol_feas: 1e-11,
        ..DefaultSettings::default()
    }
}

/// Solves min ½xᵀPx + cᵀx s.t. Ax ≤ b with clarabel, the first `equalities` rows holding with
/// equality; returns (x, z, status, iterations).
pub(crate) fn clarabel_solve(
    p: &CscMatrix<f64>,
    c: &[f64],
    a: &CscMatrix<f64>,
    b: &[f64],
    equalities: usize,
) -> Result<(Vec<f64>, Vec<f64>, SolverStatus, u32), SvmError> {
    let cones = if equalities == 0 {
        vec![NonnegativeConeT(b.len())]
    } else {
        vec![
            ZeroConeT(equalities),
            NonnegativeConeT(b.len() - equalities),
        ]
    };
    let mut solver =
        DefaultSolver::new(p, c, a, b, &cones, settings()).map_err(|e| SvmError::Solver {
            program: "clarabel setup".into(),
            status: format!("{e:?}"),
        })?;
    solver.solve();
    let s = &solver.solution;
    Ok((s.x.clone(), s.z.clone(), s.status, s.iterations))
}

fn infeasible<C: MarginConstraints + ?Sized>(c: &C, certificate: &[f64]) -> SvmError {
    let top = stats::max(certificate.iter());
    let involved: Vec<String> = certificate
        .iter()
        .enumerate()
        .filter(|&(_, &a)| a > 1e-6 * top)
        .map(|(k, _)| {
            let l = c.labels()[k];
            format!("(sequence {}, token {})", l.sequence, l.token)
        })
        .collect();
    SvmError::Infeasible {
        program: "max-margin QP".into(),
        detail: format!(
            "no w satisfies all {} margin constraints; a nonnegative combination of the \
             constraints {} vanishes (Farkas certificate)",
            c.count(),
            involved.join(", ")
        ),
    }
}

fn solver_failed(status: SolverStatus) -> SvmError {
    SvmError::Solver {
        program: "max-margin QP".into(),
        status: format!("{status:?}"),
    }
}

fn solve_dual<C: MarginConstraints + ?Sized>(
    c: &C,
    gram: &DMatrix<f64>,
) -> Result<(Vec<f64>, Vec<f64>, u32), SvmError> {
    let m = c.count();
    let neg_identity = csc(&(-DMatrix::<f64>::identity(m, m)), false);
    let (alpha, _, status, it) = clarabel_solve(
        &csc(gram, true),
        &vec![-1.0; m],
        &neg_identity,
        &vec![0.0; m],
        0,
    )?;
    match status {
        SolverStatus::Solved | SolverStatus::AlmostSolved => {
            let w = c.combine(&alpha);
            Ok((alpha, w, it))
        }
        // the dual is unbounded: its ray α ≥ 0 with Gα = 0, 1ᵀα > 0 certifies the primal
        SolverStatus::DualInfeasible | SolverStatus::AlmostDualInfeasible => {
            Err(infeasible(c, &alpha))
        }
        other => Err(solver_failed(other)),
    }
}

fn solve_primal<C: MarginConstraints + ?Sized>(
    c: &C,
) -> Result<(Vec<f64>, Vec<f64>, u32), SvmError> {
    let (m, p) = (c.count(), c.dim());
    let identity = csc(&DMatrix::<f64>::identity(p, p), true);
    let (w, alpha, status, it) = clarabel_solve(
        &identity,
        &vec![0.0; p],
        &csc(&(-c.dense()), false),
        &vec![-1.0; m],
        0,
    )?;
    match status {
        SolverStatus::Solved | SolverStatus::AlmostSolved => Ok((alpha, w, it)),
        SolverStatus::PrimalInfeasible | SolverStatus::AlmostPrimalInfeasible => {
            Err(infeasible(c, &alpha))
        }
        other => Err(solver_failed(other)),
    }
}

/// Exact solve of the KKT system on the interior-point support; `None` when the result is
/// not a certified optimum (then the interior-point answer stands).
fn polish<C: MarginConstraints + ?Sized>(
    c: &C,
    gram: &DMatrix<f64>,
    alpha: &[f64],
) -> Option<(Vec<f64>, Vec<f64>)> {
    let top = stats::max(alpha.iter());
    if top.is_nan() || top <= 0.0 {
        return None;
    }
    let support: Vec<usize> = (0..alpha.len())
        .filter(|&k| alpha[k] > 1e-6 * top)
        .collect();
    let g_ss = gram.select_rows(&support).select_columns(&support);
    let a_s = g_ss
        .cholesky()?
        .solve(&DVector::from_element(support.len(), 1.0));
    if a_s.iter().any(|&a| a.is_nan() || a <= 0.0) {
        return None;
    }
    let mut full = vec![0.0; alpha.len()];
    for (&k, &a) in support.iter().zip(a_s.iter()) {
        full[k] = a;
    }
    let w = c.combine(&full);
    if c.margins(&w).iter().any(|&g| g < 1.0 - 1e-10) {
        return None;
    }
    Some((full, w))
}

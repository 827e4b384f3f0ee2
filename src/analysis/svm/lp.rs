//! min ‖β‖₁ s.t. ⟨β, f_k⟩ ≥ 1: the ℓ1-SVM, equal to the nuclear-norm SVM restricted to
//! diagonal W (spec 001 §3.3), as an LP in β = p − r, p, r ≥ 0, solved by clarabel.
//!
//! LP optima can be non-unique; [`l1_solution_ranges`] measures the optimal face coordinate
//! by coordinate.

use clarabel::solver::SolverStatus;
use nalgebra::DMatrix;
use serde::Serialize;

use super::constraints::{MarginConstraints, VectorConstraints};
use super::qp::{clarabel_solve, csc, ACCEPT_TOL};
use super::SvmError;
use crate::stats;

/// KKT residuals of (β, λ) for the ℓ1-SVM (dual: max 1ᵀλ s.t. ‖Fᵀλ‖_∞ ≤ 1, λ ≥ 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct L1Kkt {
    /// max(0, max_k (1 − ⟨β, f_k⟩)).
    pub primal_infeasibility: f64,
    /// max(0, −min λ, ‖Fᵀλ‖_∞ − 1).
    pub dual_infeasibility: f64,
    /// max over β_j ≠ 0 of |(Fᵀλ)_j − sign β_j| (subgradient condition).
    pub stationarity: f64,
    /// max_k |λ_k (⟨β, f_k⟩ − 1)|.
    pub complementary_slackness: f64,
    /// |‖β‖₁ − 1ᵀλ|/‖β‖₁.
    pub duality_gap: f64,
}

impl L1Kkt {
    pub fn max(&self) -> f64 {
        stats::max([
            self.primal_infeasibility,
            self.dual_infeasibility,
            self.stationarity,
            self.complementary_slackness,
            self.duality_gap,
        ])
    }

    pub fn passes(&self, tol: f64) -> bool {
        self.max() <= tol
    }

    /// The residuals of (β, λ) and the coordinate support {j : |β_j| > 1e−7·max|β|}.
    pub fn of(c: &VectorConstraints, beta: &[f64], lambda: &[f64]) -> (Self, Vec<usize>) {
        let margins = c.margins(beta);
        let norm_l1: f64 = beta.iter().map(|v| v.abs()).sum();
        let correlation = c.f.transpose() * nalgebra::DVector::from_column_slice(lambda);
        let top = stats::max_abs(beta.iter());
        let support: Vec<usize> = (0..beta.len())
            .filter(|&j| beta[j].abs() > 1e-7 * top)
            .collect();
        let kkt = L1Kkt {
            primal_infeasibility: stats::max_with(0.0, margins.iter().map(|&g| 1.0 - g)),
            dual_infeasibility: stats::max_with(
                0.0,
                lambda
                    .iter()
                    .map(|&l| -l)
                    .chain(correlation.iter().map(|v| v.abs() - 1.0)),
            ),
            stationarity: stats::max(
                support
                    .iter()
                    .map(|&j| (correlation[j] - beta[j].signum()).abs()),
            ),
            complementary_slackness: stats::max_abs(
                lambda.iter().zip(&margins).map(|(l, g)| l * (g - 1.0)),
            ),
            duality_gap: (norm_l1 - lambda.iter().sum::<f64>()).abs() / norm_l1,
        };
        (kkt, support)
    }
}

/// A certified ℓ1-SVM solution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct L1Solution {
    pub beta: Vec<f64>,
    /// ‖β‖₁ (the optimal value OPT₁).
    pub norm_l1: f64,
    /// Multipliers λ_k ≥ 0.
    pub lambda: Vec<f64>,
    pub margins: Vec<f64>,
    /// Coordinates with |β_j| > 1e−7·max|β|.
    pub coordinate_support: Vec<usize>,
    /// Tight constraints {k : ⟨β, f_k⟩ ≤ 1 + 1e−7}.
    pub tight: Vec<usize>,
    pub kkt: L1Kkt,
    pub iterations: u32,
}

const PROGRAM: &str = "l1 max-margin LP";

/// The LP rows of ⟨p − r, f_k⟩ ≥ 1 and p, r ≥ 0 in the form A x ≤ b, x = (p, r).
fn lp_rows(f: &DMatrix<f64>) -> (DMatrix<f64>, Vec<f64>) {
    let (m, p) = f.shape();
    let mut a = DMatrix::zeros(m + 2 * p, 2 * p);
    a.view_mut((0, 0), (m, p)).copy_from(&(-f));
    a.view_mut((0, p), (m, p)).copy_from(f);
    a.view_mut((m, 0), (2 * p, 2 * p))
        .copy_from(&(-DMatrix::<f64>::identity(2 * p, 2 * p)));
    let mut b = vec![-1.0; m];
    b.extend(vec![0.0; 2 * p]);
    (a, b)
}

/// min costᵀx s.t. A x ≤ b, the first `equalities` rows with equality.
fn run_lp(
    cost: &[f64],
    a: &DMatrix<f64>,
    b: &[f64],
    equalities: usize,
) -> Result<(Vec<f64>, Vec<f64>, u32), SvmError> {
    let n = cost.len();
    let zero = csc(&DMatrix::zeros(n, n), true);
    let (x, z, status, it) = clarabel_solve(&zero, cost, &csc(a, false), b, equalities)?;
    match status {
        SolverStatus::Solved | SolverStatus::AlmostSolved => Ok((x, z, it)),
        SolverStatus::PrimalInfeasible | SolverStatus::AlmostPrimalInfeasible => {
            Err(SvmError::Infeasible {
                program: PROGRAM.into(),
                detail: "no β satisfies every margin constraint ⟨β, f_k⟩ ≥ 1".into(),
            })
        }
        other => Err(SvmError::Solver {
            program: PROGRAM.into(),
            status: format!("{other:?}"),
        }),
    }
}

fn check(c: &VectorConstraints) -> Result<(), SvmError> {
    if c.count() == 0 {
        return Err(SvmError::Invalid {
            field: "constraints".into(),
            reason: "there are no margin constraints".into(),
        });
    }
    if c.f.iter().any(|v| !v.is_finite()) {
        return Err(SvmError::Invalid {
            field: "X".into(),
            reason: "inner products of the tokens (and queries) overflow f64: rescale the data \
                     (entries near 1e154 or larger)"
                .into(),
        });
    }
    if let Some(k) = (0..c.count()).find(|&k| c.f.row(k).iter().all(|&v| v == 0.0)) {
        let l = c.labels[k];
        return Err(SvmError::Infeasible {
            program: PROGRAM.into(),
            detail: format!(
                "constraint (sequence {}, token {}) is identically zero",
                l.sequence, l.token
            ),
        });
    }
    Ok(())
}

/// Solves min ‖β‖₁ s.t. ⟨β, f_k⟩ ≥ 1 with a KKT certificate.
pub fn solve_l1(c: &VectorConstraints) -> Result<L1Solution, SvmError> {
    check(c)?;
    let (m, p) = (c.count(), c.dim());
    let (a, b) = lp_rows(&c.f);
    let (x, z, iterations) = run_lp(&vec![1.0; 2 * p], &a, &b, 0)?;
    let beta: Vec<f64> = (0..p).map(|j| x[j] - x[p + j]).collect();
    let lambda = z[..m].to_vec();
    let margins = c.margins(&beta);
    let norm_l1: f64 = beta.iter().map(|v| v.abs()).sum();
    let (kkt, coordinate_support) = L1Kkt::of(c, &beta, &lambda);
    if !kkt.passes(ACCEPT_TOL) {
        return Err(SvmError::Solver {
            program: PROGRAM.into(),
            status: format!("uncertified answer, KKT residuals {kkt:?}"),
        });
    }
    let tight = (0..m).filter(|&k| margins[k] <= 1.0 + 1e-7).collect();
    Ok(L1Solution {
        beta,
        norm_l1,
        lambda,
        margins,
        coordinate_support,
        tight,
        kkt,
        iterations,
    })
}

/// (min β_j, max β_j) over the near-optimal face {β feasible, ‖β‖₁ ≤ OPT₁(1 + rel_slack)} for
/// every coordinate j: the solution is unique when every range is tiny (spec 001 §3.3 uses
/// rel_slack = 1e−9 and ranges < 1e−7).
pub fn l1_solution_ranges(
    c: &VectorConstraints,
    opt_value: f64,
    rel_slack: f64,
) -> Result<Vec<(f64, f64)>, SvmError> {
    check(c)?;
    let p = c.dim();
    let (rows, mut b) = lp_rows(&c.f);
    // one more row: 1ᵀp + 1ᵀr ≤ OPT₁(1 + slack)
    let last = rows.nrows();
    let a = rows.insert_row(last, 1.0);
    b.push(opt_value * (1.0 + rel_slack));
    (0..p)
        .map(|j| {
            let mut cost = vec![0.0; 2 * p];
            let bound = |sign: f64, cost: &mut Vec<f64>| -> Result<f64, SvmError> {
                cost[j] = sign;
                cost[p + j] = -sign;
                let (x, _, _) = run_lp(cost, &a, &b, 0)?;
                Ok(x[j] - x[p + j])
            };
            let lo = bound(1.0, &mut cost)?;
            let hi = bound(-1.0, &mut cost)?;
            Ok((lo, hi))
        })
        .collect()
}

/// The best strict-complementarity margin of an ℓ1-SVM solution (spec 001 §2.8, §7
/// `diag-random-batch`): max over dual-optimal λ of 1 − max_{j∉J} |(Fᵀλ)_j|, J the support of
/// `sol.beta`, as the LP max t s.t. (Fᵀλ)_J = sign β_J, |(Fᵀλ)_j| ≤ 1 − t off J, λ ≥ 0 and
/// zero on the slack constraints, t ≤ 1 (KKT makes every such λ dual optimal). A margin near 0
/// means the LP is nearly degenerate (the KQ flow then converges slowly off the support).
pub fn l1_complementarity_margin(c: &VectorConstraints, sol: &L1Solution) -> Result<f64, SvmError> {
    check(c)?;
    let (m, p) = (c.count(), c.dim());
    let support = &sol.coordinate_support;
    let slack: Vec<usize> = (0..m).filter(|k| !sol.tight.contains(k)).collect();
    let off: Vec<usize> = (0..p).filter(|j| !support.contains(j)).collect();
    let equalities = support.len() + slack.len();
    let rows = equalities + 2 * off.len() + 1 + m;
    let (mut a, mut b) = (DMatrix::zeros(rows, m + 1), Vec::with_capacity(rows));
    let mut row = 0;
    for &j in support {
        a.view_mut((row, 0), (1, m))
            .copy_from(&c.f.column(j).transpose());
        b.push(sol.beta[j].signum());
        row += 1;
    }
    for &k in &slack {
        a[(row, k)] = 1.0;
        b.push(0.0);
        row += 1;
    }
    for &j in &off {
        for sign in [1.0, -1.0] {
            a.view_mut((row, 0), (1, m))
                .copy_from(&(c.f.column(j).transpose() * sign));
            a[(row, m)] = 1.0;
            b.push(1.0);
            row += 1;
        }
    }
    a[(row, m)] = 1.0;
    b.push(1.0);
    row += 1;
    for k in 0..m {
        a[(row + k, k)] = -1.0;
        b.push(0.0);
    }
    let mut cost = vec![0.0; m + 1];
    cost[m] = -1.0;
    let (x, _, _) = run_lp(&cost, &a, &b, equalities)?;
    Ok(x[m])
}

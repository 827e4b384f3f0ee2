//! An independent solver of the nuclear-norm W-SVM (spec 001 §3.2), to cross-check the
//! primal–dual iteration of [`super::nuclear`] (spec §7 `svm-solvers`: "PDHG vs an independent
//! solution"): column generation over the rank-one atoms u vᵀ (‖u‖ = ‖v‖ = 1, the extreme
//! points of the nuclear-norm ball). Each restricted master problem is an LP solved by clarabel,
//!   primal  min Σ_k μ_k  s.t.  Σ_k μ_k ⟨A_j, u_k v_kᵀ⟩ ≥ 1, μ ≥ 0   (W = Σ_k μ_k u_k v_kᵀ),
//!   dual    max 1ᵀλ     s.t.  u_kᵀ M(λ) v_k ≤ 1 ∀k, λ ≥ 0,
//! the dual being a polyhedral outer approximation of ‖M(λ)‖_op ≤ 1. Pricing adds the singular
//! pairs of M(λ) with σ > 1 (Kelley's cutting planes on the dual). The answer carries the same
//! certified bracket as the primal–dual iteration's.

use nalgebra::{DMatrix, DVector};

use super::constraints::{MarginConstraints, RankOneConstraints};
use super::nuclear::{
    bracket, nuclear_solution, renamed_infeasible, Certified, Nuclear, NuclearSettings,
    NuclearSolution,
};
use super::qp::{clarabel_solve, csc, solve_l2, SvmMethod};
use super::SvmError;
use crate::stats;
use clarabel::solver::SolverStatus;

const PROGRAM: &str = "nuclear-norm W-SVM (column generation)";

/// A rank-one atom u vᵀ with unit u, v.
struct Atom {
    u: DVector<f64>,
    v: DVector<f64>,
}

/// Solves min ‖W‖_* s.t. the rank-one margin constraints by column generation; `settings.tol`
/// bounds the certified relative gap, `settings.max_iterations` the number of LP solves.
pub fn solve_nuclear_cuts(
    c: &RankOneConstraints,
    settings: &NuclearSettings,
) -> Result<NuclearSolution, SvmError> {
    let frobenius = solve_l2(c, SvmMethod::Dual).map_err(renamed_infeasible(PROGRAM))?;
    let (rows, cols) = c.shape();
    let norm = Nuclear { rows, cols };
    // seed atoms: each constraint's own direction, and the singular pairs of W_F (so that the
    // first master problem has a feasible primal and a bounded dual)
    let mut atoms: Vec<Atom> = (0..c.count())
        .map(|k| Atom {
            u: c.a.row(k).transpose().normalize(),
            v: c.q.row(k).transpose().normalize(),
        })
        .collect();
    atoms.extend(singular_atoms(&c.matrix(&frobenius.w), 0.0));
    let mut history = Vec::new();
    let mut best = f64::INFINITY;
    for it in 1..=settings.max_iterations {
        let (lambda, mu) = master(c, &atoms)?;
        let w = atoms
            .iter()
            .zip(&mu)
            .fold(DMatrix::zeros(rows, cols), |w: DMatrix<f64>, (atom, &m)| {
                w + &atom.u * atom.v.transpose() * m
            });
        let m_of_lambda = c.matrix(&c.combine(&lambda));
        if let Some(b) = bracket(c, &norm, w.as_slice(), &lambda) {
            let gap = b.gap();
            history.push((it, gap));
            best = stats::smaller(best, gap);
            if gap <= settings.tol {
                let run = Certified {
                    bracket: b,
                    iterations: it,
                    history,
                };
                return Ok(nuclear_solution(c, run));
            }
        }
        let new = singular_atoms(&m_of_lambda, 1.0);
        if new.is_empty() {
            // λ is dual feasible and optimal for the master: only LP round-off separates the
            // bracket, which the tolerance does not accept
            break;
        }
        atoms.extend(new);
    }
    Err(SvmError::Solver {
        program: PROGRAM.into(),
        status: format!(
            "no certified solution within {} LP solves (best certified gap {best:.3e}, asked \
             {:.1e})",
            settings.max_iterations, settings.tol
        ),
    })
}

/// The singular pairs (u_i, v_i) of `m` with σ_i > `above`.
fn singular_atoms(m: &DMatrix<f64>, above: f64) -> Vec<Atom> {
    let svd = m.clone().svd(true, true);
    let (u, v_t) = (svd.u.expect("computed"), svd.v_t.expect("computed"));
    (0..svd.singular_values.len())
        .filter(|&i| svd.singular_values[i] > above)
        .map(|i| Atom {
            u: u.column(i).into_owned(),
            v: v_t.row(i).transpose(),
        })
        .collect()
}

/// The master LP max 1ᵀλ s.t. ⟨M(λ), u_k v_kᵀ⟩ ≤ 1, λ ≥ 0; returns λ and the atom weights μ.
fn master(c: &RankOneConstraints, atoms: &[Atom]) -> Result<(Vec<f64>, Vec<f64>), SvmError> {
    let m = c.count();
    let k = atoms.len();
    let mut a = DMatrix::zeros(k + m, m);
    for (r, atom) in atoms.iter().enumerate() {
        // ⟨A_j, u vᵀ⟩ = (a_jᵀu)(q_jᵀv)
        let coef = (&c.a * &atom.u).component_mul(&(&c.q * &atom.v));
        a.row_mut(r).copy_from(&coef.transpose());
    }
    for j in 0..m {
        a[(k + j, j)] = -1.0;
    }
    let mut b = vec![1.0; k];
    b.extend(vec![0.0; m]);
    let zero = csc(&DMatrix::zeros(m, m), true);
    let (x, z, status, _) = clarabel_solve(&zero, &vec![-1.0; m], &csc(&a, false), &b, 0)?;
    match status {
        SolverStatus::Solved | SolverStatus::AlmostSolved => Ok((x, z[..k].to_vec())),
        other => Err(SvmError::Solver {
            program: PROGRAM.into(),
            status: format!("master LP: {other:?}"),
        }),
    }
}

//! faer's dense LU with partial pivoting as the linear solver of diffsol's implicit methods.
//!
//! diffsol 0.18's own faer backend (`FaerLU`) factorizes with *full* pivoting, whose pivot search
//! over the whole trailing matrix keeps it from running at matrix-multiply speed: measured inside
//! Bdf on the token-selection flow (1,025 states) it was no faster than nalgebra's unblocked LU
//! (~87 ms per factorization). Partial pivoting — what LAPACK's `dgetrf` does, and backward stable
//! in practice for the Newton matrices I − γhJ of a stiff solve — lets faer use its blocked,
//! recursive kernel. One thread, so results do not depend on the machine's thread count.

use diffsol::{FaerMat, FaerVec, LaError, LaLinearOp, Matrix, MatrixCommon, Vector};
use diffsol_la::linear_solver::LinearSolver;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::{factor, solve};
use faer::perm::Perm;
use std::cell::RefCell;

use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Conj, Mat, MatMut, Par};

/// The packed factors of P·A = L·U (L unit lower, U upper, in one matrix) and the row
/// permutation; the Newton matrix is assembled into `matrix` and factorized into `lu`, both
/// allocated once per problem, and the solves' permutation scratch is allocated with them.
pub struct PartialPivLu {
    matrix: Option<FaerMat<f64>>,
    lu: Mat<f64>,
    perm: Option<Perm<usize>>,
    scratch: RefCell<Option<MemBuffer>>,
}

impl Default for PartialPivLu {
    fn default() -> Self {
        PartialPivLu {
            matrix: None,
            lu: Mat::new(),
            perm: None,
            scratch: RefCell::new(None),
        }
    }
}

/// Factorizes `a` in place (P·A = L·U, one thread) and returns P.
fn factorize(mut a: MatMut<'_, f64>) -> Perm<usize> {
    let n = a.nrows();
    let (mut fwd, mut inv) = (vec![0usize; n], vec![0usize; n]);
    factor::lu_in_place(
        a.rb_mut(),
        &mut fwd,
        &mut inv,
        Par::Seq,
        MemStack::new(&mut MemBuffer::new(
            factor::lu_in_place_scratch::<usize, f64>(n, n, Par::Seq, Default::default()),
        )),
        Default::default(),
    );
    Perm::new_checked(fwd.into_boxed_slice(), inv.into_boxed_slice(), n)
}

impl LinearSolver<FaerMat<f64>> for PartialPivLu {
    fn set_sparsity<
        C: LaLinearOp<T = f64, V = FaerVec<f64>, M = FaerMat<f64>, C = diffsol::FaerContext>,
    >(
        &mut self,
        op: &C,
    ) {
        let n = op.nrows();
        self.matrix = Some(FaerMat::new_from_sparsity(
            n,
            op.ncols(),
            op.sparsity(),
            *op.context(),
        ));
        self.lu = Mat::zeros(n, n);
        self.perm = None;
        // the forward and the transposed solve need the same scratch
        self.scratch = RefCell::new(Some(MemBuffer::new(
            solve::solve_in_place_scratch::<usize, f64>(n, 1, Par::Seq).or(
                solve::solve_transpose_in_place_scratch::<usize, f64>(n, 1, Par::Seq),
            ),
        )));
    }

    fn set_linearisation<
        C: LaLinearOp<T = f64, V = FaerVec<f64>, M = FaerMat<f64>, C = diffsol::FaerContext>,
    >(
        &mut self,
        op: &C,
    ) {
        let matrix = self
            .matrix
            .as_mut()
            .expect("set_sparsity comes before set_linearisation");
        op.matrix_inplace(matrix);
        self.lu.copy_from(matrix.inner());
        self.perm = Some(factorize(self.lu.as_mut()));
    }

    fn solve_in_place(&self, x: &mut FaerVec<f64>) -> Result<(), LaError> {
        self.solve(x, false)
    }

    fn solve_transpose_in_place(&self, x: &mut FaerVec<f64>) -> Result<(), LaError> {
        self.solve(x, true)
    }
}

/// Factorizes a 64 × 64 matrix, so that the calling thread holds the workspace faer's blocked
/// kernels allocate on their first use (~67 MB on the development machine, sized by its caches,
/// then reused by every factorization on the thread): a measurement of how a solve's memory
/// grows with its size calls this first, or it would count the one-time workspace as growth.
pub fn allocate_thread_workspace() {
    factorize(Mat::<f64>::identity(64, 64).as_mut());
}

impl PartialPivLu {
    fn solve(&self, x: &mut FaerVec<f64>, transpose: bool) -> Result<(), LaError> {
        let Some(perm) = &self.perm else {
            return Err(LaError::Other(
                "the LU is solved before it was factorized".into(),
            ));
        };
        let mut scratch = self.scratch.borrow_mut();
        let stack = MemStack::new(scratch.as_mut().expect("allocated with the factors"));
        let (lu, rhs) = (self.lu.as_ref(), x.inner_mut().as_mut());
        if transpose {
            solve::solve_transpose_in_place_with_conj(
                lu,
                lu,
                perm.rb(),
                Conj::No,
                rhs,
                Par::Seq,
                stack,
            );
        } else {
            solve::solve_in_place_with_conj(lu, lu, perm.rb(), Conj::No, rhs, Par::Seq, stack);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diffsol::{DenseMatrix, FaerContext};

    /// A fixed matrix handed over as diffsol hands over the Newton matrix.
    struct Fixed(FaerMat<f64>);

    impl LaLinearOp for Fixed {
        type T = f64;
        type V = FaerVec<f64>;
        type M = FaerMat<f64>;
        type C = FaerContext;
        fn nrows(&self) -> usize {
            self.0.nrows()
        }
        fn ncols(&self) -> usize {
            self.0.ncols()
        }
        fn context(&self) -> &FaerContext {
            self.0.context()
        }
        fn matrix_inplace(&self, y: &mut FaerMat<f64>) {
            y.copy_from(&self.0);
        }
    }

    /// A 200×200 system whose leading entry is 0 (no LU without row exchanges) and whose other
    /// entries are deterministic and mixed in sign: A·x = b and Aᵀ·x = b are solved to rounding.
    #[test]
    fn solves_a_system_that_needs_pivoting() {
        let n = 200;
        let entry = |i: usize, j: usize| {
            if i == 0 && j == 0 {
                0.0
            } else {
                ((i * 7 + j * 13) % 17) as f64 / 17.0 - 0.45 + if i == j { 2.0 } else { 0.0 }
            }
        };
        let data: Vec<f64> = (0..n * n).map(|k| entry(k % n, k / n)).collect();
        let ctx = FaerContext::default();
        let a = Fixed(FaerMat::from_vec(n, n, data, ctx));
        let mut lu = PartialPivLu::default();
        lu.set_sparsity(&a);
        lu.set_linearisation(&a);
        let x_true: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        for transpose in [false, true] {
            let b: Vec<f64> = (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| if transpose { entry(j, i) } else { entry(i, j) } * x_true[j])
                        .sum()
                })
                .collect();
            let mut x = FaerVec::from_vec(b, ctx);
            if transpose {
                lu.solve_transpose_in_place(&mut x).unwrap();
            } else {
                lu.solve_in_place(&mut x).unwrap();
            }
            let solved: Vec<f64> = (0..n).map(|i| x[i]).collect();
            let err = crate::stats::max_abs_diff(&solved, &x_true);
            assert!(err < 1e-12, "transpose = {transpose}: max error {err:e}");
        }
    }

    #[test]
    fn refuses_to_solve_before_factorizing() {
        let mut x = FaerVec::from_vec(vec![1.0], FaerContext::default());
        assert!(PartialPivLu::default().solve_in_place(&mut x).is_err());
    }
}

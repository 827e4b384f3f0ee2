//! faer's dense factorizations as the linear solvers of diffsol's implicit methods.
//!
//! [`PartialPivLu`]: diffsol 0.18's own faer backend (`FaerLU`) factorizes with *full* pivoting,
//! whose pivot search over the whole trailing matrix keeps it from running at matrix-multiply
//! speed: measured inside Bdf on the token-selection flow (1,025 states) it was no faster than
//! nalgebra's unblocked LU (~87 ms per factorization). Partial pivoting — what LAPACK's `dgetrf`
//! does, and backward stable in practice for the Newton matrices I − γhJ of a stiff solve — lets
//! faer use its blocked, recursive kernel.
//!
//! [`SymmetricCholesky`]: a gradient flow's Jacobian is −∇²ℓ, so its Newton matrix I + γh∇²ℓ is
//! symmetric, and positive definite wherever γh·λ_min(∇²ℓ) > −1 (always near a minimum). faer's
//! Cholesky LLᵀ of its lower triangle takes half the LU's flops and no pivoting; where a pivot is
//! not positive the same matrix is factorized by the partial-pivoting LU instead, so the solver
//! never fails where the LU would not. Its two triangular solves are plain column sweeps: at the
//! papers' sizes (~100 states) faer's recursive triangular solve spends ~5× the flops' worth of
//! instructions on a single right-hand side, and diffsol solves once per Newton iteration.
//!
//! Both run on one thread, so results do not depend on the machine's thread count.

use diffsol::{FaerMat, FaerVec, LaError, LaLinearOp, Matrix, MatrixCommon, Vector};
use diffsol_la::linear_solver::LinearSolver;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt;
use faer::linalg::lu::partial_pivoting::{factor, solve};
use faer::perm::Perm;
use std::cell::RefCell;

use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Conj, Mat, MatMut, MatRef, Par};

/// Dense factorization of the Newton matrix with faer: the partial-pivoting LU, or, when
/// `SYMMETRIC`, Cholesky with the LU as fallback. The Newton matrix is assembled into `matrix`
/// and factorized into `factors`, both allocated once per problem, as is the solves' scratch.
pub struct FaerDense<const SYMMETRIC: bool> {
    matrix: Option<FaerMat<f64>>,
    factors: Mat<f64>,
    kind: Factors,
    /// After a Cholesky factorization: Lᵀ (column-major, so that the back substitution runs down
    /// contiguous columns as the forward one does), and 1/L_jj (the solves' serial chain
    /// multiplies instead of dividing).
    upper: Mat<f64>,
    inverse_diagonal: Vec<f64>,
    scratch: RefCell<Option<MemBuffer>>,
}

/// LU with partial pivoting (P·A = L·U).
pub type PartialPivLu = FaerDense<false>;
/// Cholesky (A = L·Lᵀ from A's lower triangle) for symmetric Newton matrices, else LU.
pub type SymmetricCholesky = FaerDense<true>;

/// What `factors` holds.
enum Factors {
    None,
    /// L and U packed in one matrix, and the row permutation P.
    Lu(Perm<usize>),
    /// L in the lower triangle.
    Cholesky,
}

impl<const SYMMETRIC: bool> Default for FaerDense<SYMMETRIC> {
    fn default() -> Self {
        FaerDense {
            matrix: None,
            factors: Mat::new(),
            kind: Factors::None,
            upper: Mat::new(),
            inverse_diagonal: Vec::new(),
            scratch: RefCell::new(None),
        }
    }
}

/// Factorizes `a` in place (P·A = L·U, one thread) and returns P.
pub(super) fn lu_in_place(mut a: MatMut<'_, f64>) -> Perm<usize> {
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

/// Factorizes the lower triangle of `a` in place as L·Lᵀ (one thread); false where a pivot is
/// not positive (`a` is then partly overwritten).
fn cholesky(a: MatMut<'_, f64>, stack: &mut MemStack) -> bool {
    llt::factor::cholesky_in_place(a, Default::default(), Par::Seq, stack, Default::default())
        .is_ok()
}

/// Column `j` of a column-major matrix as a slice.
#[inline(always)]
pub(super) fn column(a: MatRef<'_, f64>, j: usize) -> &[f64] {
    a.col(j)
        .try_as_col_major()
        .expect("faer's owned matrices are column-major")
        .as_slice()
}

/// Runs `body` compiled for AVX2 where the CPU has it (found at run time), else for the
/// baseline. `body` must be `#[inline(always)]` code so that it is compiled into the AVX2 copy;
/// neither copy contracts to FMA, so both give the same bits.
#[inline(always)]
pub(super) fn with_avx2<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<R>(body: impl FnOnce() -> R) -> R {
            body()
        }
        // SAFETY: the CPU supports AVX2 (checked on the line above)
        return unsafe { avx2(body) };
    }
    body()
}

/// Solves L·Lᵀ·x = b in place (U = Lᵀ), both substitutions by columns: x_j is final once the
/// columns before it have been subtracted, then its multiple of column j is subtracted from the
/// rest (an axpy on contiguous memory), with AVX2 where the CPU has it.
fn cholesky_solve(l: MatRef<'_, f64>, u: MatRef<'_, f64>, inv_diag: &[f64], x: &mut [f64]) {
    with_avx2(
        #[inline(always)]
        || cholesky_solve_body(l, u, inv_diag, x),
    )
}

#[inline(always)]
fn cholesky_solve_body(l: MatRef<'_, f64>, u: MatRef<'_, f64>, inv_diag: &[f64], x: &mut [f64]) {
    let n = x.len();
    for j in 0..n {
        let col = column(l, j);
        x[j] *= inv_diag[j];
        let xj = x[j];
        for (xi, lij) in x[j + 1..].iter_mut().zip(&col[j + 1..]) {
            *xi -= xj * lij;
        }
    }
    for j in (0..n).rev() {
        let col = column(u, j);
        x[j] *= inv_diag[j];
        let xj = x[j];
        for (xi, uij) in x[..j].iter_mut().zip(&col[..j]) {
            *xi -= xj * uij;
        }
    }
}

/// The dense matrix diffsol's Newton operator `op` is assembled into (allocated once, in
/// `set_sparsity`; every `set_linearisation` refills it in place).
pub(super) fn newton_matrix<
    C: LaLinearOp<T = f64, V = FaerVec<f64>, M = FaerMat<f64>, C = diffsol::FaerContext>,
>(
    op: &C,
) -> FaerMat<f64> {
    FaerMat::new_from_sparsity(op.nrows(), op.ncols(), op.sparsity(), *op.context())
}

impl<const SYMMETRIC: bool> LinearSolver<FaerMat<f64>> for FaerDense<SYMMETRIC> {
    fn set_sparsity<
        C: LaLinearOp<T = f64, V = FaerVec<f64>, M = FaerMat<f64>, C = diffsol::FaerContext>,
    >(
        &mut self,
        op: &C,
    ) {
        self.matrix = Some(newton_matrix(op));
        self.allocate(op.nrows());
    }

    fn set_linearisation<
        C: LaLinearOp<T = f64, V = FaerVec<f64>, M = FaerMat<f64>, C = diffsol::FaerContext>,
    >(
        &mut self,
        op: &C,
    ) {
        let mut matrix = self
            .matrix
            .take()
            .expect("set_sparsity comes before set_linearisation");
        op.matrix_inplace(&mut matrix);
        self.factorize(matrix.inner().as_ref());
        self.matrix = Some(matrix);
    }

    fn solve_in_place(&self, x: &mut FaerVec<f64>) -> Result<(), LaError> {
        self.solve(x, false)
    }

    fn solve_transpose_in_place(&self, x: &mut FaerVec<f64>) -> Result<(), LaError> {
        self.solve(x, true)
    }
}

/// Factorizes a 256 × 256 matrix by LU and by Cholesky, so that the calling thread holds the
/// workspace faer's blocked kernels allocate on their first use (~67 MB on the development
/// machine, sized by its caches, then reused by every factorization on the thread): a
/// measurement of how a solve's memory grows with its size calls this first, or it would count
/// the one-time workspace as growth.
pub fn allocate_thread_workspace() {
    let n = 256;
    lu_in_place(Mat::<f64>::identity(n, n).as_mut());
    let scratch = llt::factor::cholesky_in_place_scratch::<f64>(n, Par::Seq, Default::default());
    let mut buffer = MemBuffer::new(scratch);
    cholesky(
        Mat::<f64>::identity(n, n).as_mut(),
        MemStack::new(&mut buffer),
    );
}

impl<const SYMMETRIC: bool> FaerDense<SYMMETRIC> {
    /// Allocates the factors and the solves' scratch for `n` states (once per problem).
    pub(super) fn allocate(&mut self, n: usize) {
        self.factors = Mat::zeros(n, n);
        self.kind = Factors::None;
        self.upper = Mat::zeros(n, n);
        self.inverse_diagonal = vec![0.0; n];
        // the forward and the transposed LU solve, and the Cholesky factorization, share it
        self.scratch = RefCell::new(Some(MemBuffer::new(
            solve::solve_in_place_scratch::<usize, f64>(n, 1, Par::Seq)
                .or(solve::solve_transpose_in_place_scratch::<usize, f64>(
                    n,
                    1,
                    Par::Seq,
                ))
                .or(llt::factor::cholesky_in_place_scratch::<f64>(
                    n,
                    Par::Seq,
                    Default::default(),
                )),
        )));
    }

    /// Factorizes the assembled Newton matrix `a` (after [`Self::allocate`]).
    pub(super) fn factorize(&mut self, a: MatRef<'_, f64>) {
        self.factors.copy_from(a);
        if SYMMETRIC {
            let mut scratch = self.scratch.borrow_mut();
            let stack = MemStack::new(scratch.as_mut().expect("allocated with the factors"));
            if cholesky(self.factors.as_mut(), stack) {
                self.upper.copy_from(self.factors.transpose());
                for (j, inv) in self.inverse_diagonal.iter_mut().enumerate() {
                    *inv = 1.0 / self.factors[(j, j)];
                }
                self.kind = Factors::Cholesky;
                return;
            }
            self.factors.copy_from(a);
        }
        self.kind = Factors::Lu(lu_in_place(self.factors.as_mut()));
    }

    pub(super) fn solve(&self, x: &mut FaerVec<f64>, transpose: bool) -> Result<(), LaError> {
        let perm = match &self.kind {
            Factors::None => {
                return Err(LaError::Other(
                    "the matrix is solved before it was factorized".into(),
                ))
            }
            // Lᵀ's transpose is L: the transposed solve is the same
            Factors::Cholesky => {
                let rhs = x.inner_mut().col_mut(0).try_as_col_major_mut();
                let rhs = rhs.expect("a one-batch faer vector is one contiguous column");
                cholesky_solve(
                    self.factors.as_ref(),
                    self.upper.as_ref(),
                    &self.inverse_diagonal,
                    rhs.as_slice_mut(),
                );
                return Ok(());
            }
            Factors::Lu(perm) => perm,
        };
        let mut scratch = self.scratch.borrow_mut();
        let stack = MemStack::new(scratch.as_mut().expect("allocated with the factors"));
        let (lu, rhs) = (self.factors.as_ref(), x.inner_mut().as_mut());
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
pub(super) mod tests {
    use super::*;
    use diffsol::{DenseMatrix, FaerContext};

    /// A fixed matrix handed over as diffsol hands over the Newton matrix.
    pub(in crate::flow) struct Fixed(pub FaerMat<f64>);

    impl Fixed {
        /// The n × n matrix with entries `entry(i, j)`.
        pub(in crate::flow) fn from_fn(n: usize, entry: impl Fn(usize, usize) -> f64) -> Fixed {
            let data: Vec<f64> = (0..n * n).map(|k| entry(k % n, k / n)).collect();
            Fixed(FaerMat::from_vec(n, n, data, FaerContext::default()))
        }
    }

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

    /// Solves A·x = b and Aᵀ·x = b for a known x and returns the larger error of the two (NaN
    /// if either solve gives NaN).
    pub(in crate::flow) fn solve_error(s: &impl LinearSolver<FaerMat<f64>>, a: &Fixed) -> f64 {
        let n = a.0.nrows();
        let x_true: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        crate::stats::max([false, true].map(|transpose| {
            let entry = |i, j| if transpose { a.0[(j, i)] } else { a.0[(i, j)] };
            let b: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| entry(i, j) * x_true[j]).sum())
                .collect();
            let mut x = FaerVec::from_vec(b, FaerContext::default());
            if transpose {
                s.solve_transpose_in_place(&mut x).unwrap();
            } else {
                s.solve_in_place(&mut x).unwrap();
            }
            let solved: Vec<f64> = (0..n).map(|i| x[i]).collect();
            crate::stats::max_abs_diff(&solved, &x_true)
        }))
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
        let a = Fixed::from_fn(n, entry);
        let mut lu = PartialPivLu::default();
        lu.set_sparsity(&a);
        lu.set_linearisation(&a);
        let err = solve_error(&lu, &a);
        assert!(err < 1e-12, "max error {err:e}");
    }

    /// A symmetric 150 × 150 system, positive definite (factorized by Cholesky) and then
    /// shifted to be indefinite (Cholesky meets a negative pivot; the LU takes over): both are
    /// solved to rounding, forward and transposed.
    #[test]
    fn cholesky_solves_symmetric_systems_and_falls_back_to_lu() {
        let n = 150;
        for (shift, expect_cholesky) in [(3.0, true), (-1.5, false)] {
            let entry = |i: usize, j: usize| {
                let off = (((i * j) % 11) as f64 - 5.0) / 200.0 + 0.01 * ((i + j) % 3) as f64;
                off + if i == j {
                    shift + (i as f64) / n as f64
                } else {
                    0.0
                }
            };
            let a = Fixed::from_fn(n, entry);
            let mut f = SymmetricCholesky::default();
            f.set_sparsity(&a);
            f.set_linearisation(&a);
            assert_eq!(matches!(f.kind, Factors::Cholesky), expect_cholesky);
            let err = solve_error(&f, &a);
            assert!(err < 1e-11, "shift {shift}: {err:e}");
        }
    }

    #[test]
    fn refuses_to_solve_before_factorizing() {
        let mut x = FaerVec::from_vec(vec![1.0], FaerContext::default());
        assert!(PartialPivLu::default().solve_in_place(&mut x).is_err());
    }
}

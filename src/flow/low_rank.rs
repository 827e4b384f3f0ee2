//! Newton matrices that are the identity plus a low-rank matrix, solved by the Woodbury identity.
//!
//! The Newton matrix of an implicit step is A = I − γhJ. Where the Jacobian J has a small rank r
//! — the token-selection flow's Hessian has rank ≤ nT (the loss sees W only through the nT
//! attention scores), so at d = 32 its 1,025 × 1,025 Newton matrix is the identity plus a matrix
//! of rank ~34 — a dense LU spends n³ flops on what r·n numbers describe. [`LowRankUpdate`]
//! finds B = A − I ≈ U·Vᵀ by cross approximation (rows and columns of B chosen one pair at a
//! time, O(n·r²) work and r strided row reads), accepts it only when a few random probes confirm
//! it, ‖(B − UVᵀ)Ω‖_F ≤ [`RELATIVE_TOLERANCE`]·‖AΩ‖_F, and solves
//! A x = b as x = b − U (I + VᵀU)⁻¹ Vᵀ b in O(n·r) per right-hand side.
//!
//! Between Jacobian evaluations diffsol only rescales γh, so B changes by a scalar: the probes'
//! images reveal it and the previous factors are reused, rescaled, without another
//! approximation. Where B is not of low rank (the approximation would need more than n/16 terms)
//! the same matrix is factorized densely — by [`SymmetricCholesky`](super::lu::SymmetricCholesky)
//! or [`PartialPivLu`](super::lu::PartialPivLu) — and so is every later one of the problem.
//!
//! Accuracy: dropping what the probes do not see perturbs A by about `RELATIVE_TOLERANCE`·‖A‖,
//! the size of a dense LU's own backward error (n·ε·‖A‖ ≈ 2e-13·‖A‖ at n = 1,000); a Newton
//! iteration, whose residual is evaluated exactly, converges to the same point either way. The
//! probe estimate fails to see a residual of norm ‖E‖ only if all four Gaussian probes are
//! nearly orthogonal to it (probability ≤ 10⁻⁴ for ‖E‖₂ ≥ 10·√(2/π)·tolerance, Halko,
//! Martinsson & Tropp 2011, §4.3); the consequence would be a slower Newton iteration, never a
//! wrong step (diffsol's error test judges the step).

use std::cell::RefCell;

use diffsol::{FaerMat, FaerVec, LaError, LaLinearOp, MatrixCommon, Vector};
use diffsol_la::linear_solver::LinearSolver;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Mat, MatRef};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

use super::lu::{column, newton_matrix, with_avx2, FaerDense};

/// Number of Gaussian probes that confirm an approximation.
const PROBES: usize = 4;

/// The probes' residual at which B ≈ UVᵀ is accepted, relative to ‖AΩ‖_F: above the rounding
/// of the assembled A (ε·√n relative) and at the size of a dense LU's backward error.
pub const RELATIVE_TOLERANCE: f64 = 1e-12;

/// At most this fraction of n terms (n/16): beyond it the cross approximation's strided row
/// reads and the O(n·r²) capacitance cost approach the dense factorization's.
const MAX_RANK_DIVISOR: usize = 16;

/// The Newton matrix as identity plus low rank (Woodbury), or densely factorized when it is not;
/// `SYMMETRIC` picks the dense fallback (Cholesky, else LU). See the module documentation.
pub struct LowRankUpdate<const SYMMETRIC: bool> {
    matrix: Option<FaerMat<f64>>,
    dense: FaerDense<SYMMETRIC>,
    /// Once a Newton matrix of the problem was not of low rank, the later ones are not tried.
    dense_only: bool,
    factored: Factored,
    max_rank: usize,
    /// Ω (n × PROBES), fixed per problem (seeded), and BΩ for the current and the previous B.
    probes: Mat<f64>,
    images: Mat<f64>,
    residual: Mat<f64>,
    /// B ≈ U Vᵀ with `rank` columns in use.
    u: Mat<f64>,
    v: Mat<f64>,
    rank: usize,
    /// VᵀU (rank × rank, column-major) and the LU of the capacitance matrix I + VᵀU.
    gram: Vec<f64>,
    capacitance: FaerDense<false>,
    /// Scratch: a row of B, the rows already used as pivots, and the solves' r-vector.
    row: Vec<f64>,
    used_rows: Vec<bool>,
    small: RefCell<FaerVec<f64>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Factored {
    None,
    LowRank,
    Dense,
}

/// Identity plus low rank, Cholesky as fallback (gradient flows).
pub type SymmetricLowRank = LowRankUpdate<true>;
/// Identity plus low rank, LU as fallback.
pub type GeneralLowRank = LowRankUpdate<false>;

impl<const SYMMETRIC: bool> Default for LowRankUpdate<SYMMETRIC> {
    fn default() -> Self {
        LowRankUpdate {
            matrix: None,
            dense: FaerDense::default(),
            dense_only: false,
            factored: Factored::None,
            max_rank: 0,
            probes: Mat::new(),
            images: Mat::new(),
            residual: Mat::new(),
            u: Mat::new(),
            v: Mat::new(),
            rank: 0,
            gram: Vec::new(),
            capacitance: FaerDense::default(),
            row: Vec::new(),
            used_rows: Vec::new(),
            small: RefCell::new(FaerVec::zeros(0, Default::default())),
        }
    }
}

fn frobenius(m: MatRef<'_, f64>) -> f64 {
    let mut sum = 0.0;
    for p in 0..m.ncols() {
        sum += column(m, p).iter().map(|x| x * x).sum::<f64>();
    }
    sum.sqrt()
}

/// BΩ = AΩ − Ω into the PROBES columns of `images` (`stride` apart), streaming A once by
/// columns while the image columns stay in cache (with AVX2 where the CPU has it).
fn images_of_probes(a: MatRef<'_, f64>, omega: MatRef<'_, f64>, images: &mut [f64], stride: usize) {
    with_avx2(
        #[inline(always)]
        || images_of_probes_body(a, omega, images, stride),
    )
}

#[inline(always)]
fn images_of_probes_body(
    a: MatRef<'_, f64>,
    omega: MatRef<'_, f64>,
    images: &mut [f64],
    stride: usize,
) {
    let n = a.nrows();
    for p in 0..PROBES {
        let image = &mut images[p * stride..p * stride + n];
        image
            .iter_mut()
            .zip(column(omega, p))
            .for_each(|(y, w)| *y = -w);
    }
    for j in 0..a.ncols() {
        let col = column(a, j);
        for p in 0..PROBES {
            let w = omega[(j, p)];
            let image = &mut images[p * stride..p * stride + n];
            for (y, x) in image.iter_mut().zip(col) {
                *y += w * x;
            }
        }
    }
}

/// Σ_i x_i y_i.
fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// y ← y − a·x.
fn sub_scaled(y: &mut [f64], a: f64, x: &[f64]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi -= a * xi;
    }
}

impl<const SYMMETRIC: bool> LowRankUpdate<SYMMETRIC> {
    fn allocate(&mut self, n: usize) {
        self.max_rank = n / MAX_RANK_DIVISOR;
        let mut rng = ChaCha20Rng::seed_from_u64(0);
        self.probes = Mat::from_fn(n, PROBES, |_, _| StandardNormal.sample(&mut rng));
        self.images = Mat::zeros(n, PROBES);
        self.residual = Mat::zeros(n, PROBES);
        self.u = Mat::zeros(n, self.max_rank);
        self.v = Mat::zeros(n, self.max_rank);
        self.rank = 0;
        self.row = vec![0.0; n];
        self.used_rows = vec![false; n];
        self.dense_only = false;
        self.factored = Factored::None;
    }

    /// `images` ← BΩ = AΩ − Ω, in one pass over A.
    fn probe(&mut self, a: MatRef<'_, f64>) {
        let n = a.nrows();
        let images = self.images.as_mut().try_as_col_major_mut();
        let images = images.expect("column-major");
        let stride = images.col_stride() as usize;
        // SAFETY: an owned faer matrix is one allocation of `ncols` columns `stride` apart
        let images = unsafe {
            std::slice::from_raw_parts_mut(images.as_ptr_mut(), stride * (PROBES - 1) + n)
        };
        images_of_probes(a, self.probes.as_ref(), images, stride);
    }

    /// ‖AΩ‖_F = ‖BΩ + Ω‖_F: the scale of the tolerance. Not ‖BΩ‖: A = I − γhJ is what diffsol
    /// assembles, so B = A − I is known only to ε·‖A‖ (early steps have ‖B‖ ~ 1e-7 and B's
    /// entries ~9 correct digits), as a dense LU of A is backward stable only to ε·‖A‖.
    fn probed_norm_of_a(&self) -> f64 {
        let mut sum = 0.0;
        for p in 0..PROBES {
            let (image, omega) = (
                column(self.images.as_ref(), p),
                column(self.probes.as_ref(), p),
            );
            sum += image
                .iter()
                .zip(omega)
                .map(|(y, w)| (y + w) * (y + w))
                .sum::<f64>();
        }
        sum.sqrt()
    }

    /// residual ← residual − s·u_l (v_lᵀΩ).
    fn subtract_term_from_residual(&mut self, l: usize, s: f64) {
        let (u, v) = (column(self.u.as_ref(), l), column(self.v.as_ref(), l));
        for p in 0..PROBES {
            let weight = s * dot(v, column(self.probes.as_ref(), p));
            let r = self
                .residual
                .col_mut(p)
                .try_as_col_major_mut()
                .expect("column-major");
            sub_scaled(r.as_slice_mut(), weight, u);
        }
    }

    /// The scale s with B ≈ s·UVᵀ that best fits the probes (least squares), if the previous
    /// factors, rescaled by it, pass the probe test: B changed only by diffsol's γh.
    fn rescaled_previous(&mut self, tolerance: f64) -> Option<f64> {
        if self.rank == 0 {
            return None;
        }
        // the previous prediction UVᵀΩ, in `residual`
        self.residual.fill(0.0);
        for l in 0..self.rank {
            self.subtract_term_from_residual(l, -1.0);
        }
        let (mut cross, mut norm) = (0.0, 0.0);
        for p in 0..PROBES {
            let predicted = column(self.residual.as_ref(), p);
            cross += dot(column(self.images.as_ref(), p), predicted);
            norm += dot(predicted, predicted);
        }
        let s = cross / norm;
        // residual ← images − s·prediction
        for p in 0..PROBES {
            let r = self.residual.col_mut(p).try_as_col_major_mut();
            let r = r.expect("column-major").as_slice_mut();
            for (ri, yi) in r.iter_mut().zip(column(self.images.as_ref(), p)) {
                *ri = yi - s * *ri;
            }
        }
        if !s.is_finite() || frobenius(self.residual.as_ref()) > tolerance {
            return None;
        }
        for l in 0..self.rank {
            self.u.col_mut(l).iter_mut().for_each(|x| *x *= s);
        }
        Some(s)
    }

    /// Cross approximation of B = A − I from its rows and columns, each new row the one where
    /// the probes' residual is largest; false if more than `max_rank` terms would be needed.
    fn cross_approximation(&mut self, a: MatRef<'_, f64>, tolerance: f64) -> bool {
        let n = a.nrows();
        self.rank = 0;
        self.used_rows.fill(false);
        self.residual.copy_from(&self.images);
        let mut residual_norm = frobenius(self.residual.as_ref());
        while residual_norm > tolerance {
            if self.rank == self.max_rank {
                eprintln!(
                    "DBG fail rank {} resid {:e} tol {:e}",
                    self.rank, residual_norm, tolerance
                );
                return false;
            }
            let residual = self.residual.as_ref();
            let pick = (0..n)
                .filter(|&i| !self.used_rows[i])
                .map(|i| {
                    (
                        i,
                        (0..PROBES).map(|p| residual[(i, p)].powi(2)).sum::<f64>(),
                    )
                })
                .max_by(|x, y| x.1.total_cmp(&y.1));
            let Some((i, _)) = pick else { return false };
            self.used_rows[i] = true;
            // row i of the residual B − UVᵀ
            for (j, r) in self.row.iter_mut().enumerate() {
                *r = column(a, j)[i];
            }
            self.row[i] -= 1.0;
            for l in 0..self.rank {
                sub_scaled(&mut self.row, self.u[(i, l)], column(self.v.as_ref(), l));
            }
            let (j, pivot) = self
                .row
                .iter()
                .copied()
                .enumerate()
                .max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()))
                .expect("n > 0");
            if pivot == 0.0 || !pivot.is_finite() {
                continue;
            }
            // column j of the residual, scaled by 1/pivot, is the new u; the row is the new v
            let k = self.rank;
            {
                let (earlier, mut rest) = self.u.as_mut().split_at_col_mut(k);
                let u = rest.rb_mut().col_mut(0).try_as_col_major_mut();
                let u = u.expect("column-major").as_slice_mut();
                u.copy_from_slice(column(a, j));
                u[j] -= 1.0;
                for l in 0..k {
                    sub_scaled(u, self.v[(j, l)], column(earlier.rb(), l));
                }
                u.iter_mut().for_each(|x| *x /= pivot);
            }
            self.v
                .col_mut(k)
                .iter_mut()
                .zip(&self.row)
                .for_each(|(x, r)| *x = *r);
            self.rank += 1;
            self.subtract_term_from_residual(k, 1.0);
            residual_norm = frobenius(self.residual.as_ref());
        }
        true
    }

    /// Factorizes the capacitance matrix I + VᵀU (by LU: it is not symmetric in general).
    /// `scale` > 0 rescales the previous VᵀU (U was rescaled); 0 forms it from new factors.
    fn factorize_capacitance(&mut self, scale: f64) {
        let r = self.rank;
        if scale > 0.0 {
            self.gram.iter_mut().for_each(|g| *g *= scale);
        } else {
            self.gram = (0..r * r)
                .map(|k| {
                    dot(
                        column(self.v.as_ref(), k % r),
                        column(self.u.as_ref(), k / r),
                    )
                })
                .collect();
        }
        let capacitance = Mat::<f64>::from_fn(r, r, |i, j| {
            let identity = if i == j { 1.0 } else { 0.0 };
            self.gram[i + j * r] + identity
        });
        self.capacitance.allocate(r);
        self.capacitance.factorize(capacitance.as_ref());
        self.small = RefCell::new(FaerVec::zeros(r, Default::default()));
    }

    /// x ← x − U C⁻¹ Vᵀ x, or, transposed, x − V C⁻ᵀ Uᵀ x.
    fn woodbury_solve(&self, x: &mut [f64], transpose: bool) -> Result<(), LaError> {
        let (left, right) = if transpose {
            (self.v.as_ref(), self.u.as_ref())
        } else {
            (self.u.as_ref(), self.v.as_ref())
        };
        let mut y = self.small.borrow_mut();
        for l in 0..self.rank {
            y[l] = dot(column(right, l), x);
        }
        self.capacitance.solve(&mut y, transpose)?;
        for l in 0..self.rank {
            sub_scaled(x, y[l], column(left, l));
        }
        Ok(())
    }
}

impl<const SYMMETRIC: bool> LinearSolver<FaerMat<f64>> for LowRankUpdate<SYMMETRIC> {
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
        let a = matrix.inner().as_ref();
        if !self.dense_only {
            self.probe(a);
            let tolerance = RELATIVE_TOLERANCE * self.probed_norm_of_a();
            let rescaled = self.rescaled_previous(tolerance);
            if rescaled.is_some() || self.cross_approximation(a, tolerance) {
                self.factorize_capacitance(rescaled.unwrap_or(0.0));
                self.factored = Factored::LowRank;
                self.matrix = Some(matrix);
                return;
            }
            // not identity plus low rank: factorize densely from now on
            self.dense_only = true;
            self.rank = 0;
            self.dense.allocate(a.nrows());
        }
        self.dense.factorize(a);
        self.factored = Factored::Dense;
        self.matrix = Some(matrix);
    }

    fn solve_in_place(&self, x: &mut FaerVec<f64>) -> Result<(), LaError> {
        self.solve(x, false)
    }

    fn solve_transpose_in_place(&self, x: &mut FaerVec<f64>) -> Result<(), LaError> {
        self.solve(x, true)
    }
}

impl<const SYMMETRIC: bool> LowRankUpdate<SYMMETRIC> {
    fn solve(&self, x: &mut FaerVec<f64>, transpose: bool) -> Result<(), LaError> {
        match self.factored {
            Factored::None => Err(LaError::Other(
                "the matrix is solved before it was factorized".into(),
            )),
            Factored::Dense => self.dense.solve(x, transpose),
            Factored::LowRank => {
                let rhs = x.inner_mut().col_mut(0).try_as_col_major_mut();
                let rhs = rhs.expect("a one-batch faer vector is one contiguous column");
                self.woodbury_solve(rhs.as_slice_mut(), transpose)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lu::tests::{solve_error, Fixed};
    use super::*;
    use crate::flow::{integrate_flow, GradientFlow, LinearSolver as Backend, Method, OdeConfig};

    fn gaussian(rows: usize, cols: usize, seed: u64) -> Mat<f64> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        Mat::from_fn(rows, cols, |_, _| StandardNormal.sample(&mut rng))
    }

    /// I + scale·XYᵀ for Gaussian X, Y (n × r).
    fn identity_plus_low_rank(n: usize, r: usize, scale: f64) -> Fixed {
        let (x, y) = (gaussian(n, r, 1), gaussian(n, r, 2));
        Fixed::from_fn(n, |i, j| {
            let b: f64 = (0..r).map(|l| x[(i, l)] * y[(j, l)]).sum();
            scale * b + if i == j { 1.0 } else { 0.0 }
        })
    }

    /// The error of a dense LU on the same system: the accuracy a backward-stable solve reaches
    /// at this matrix's condition.
    fn dense_error(a: &Fixed) -> f64 {
        let mut lu = super::super::lu::PartialPivLu::default();
        lu.set_sparsity(a);
        lu.set_linearisation(a);
        solve_error(&lu, a)
    }

    /// Within ten times the dense LU's error (or 1e-13).
    fn as_accurate_as_lu(s: &impl LinearSolver<FaerMat<f64>>, a: &Fixed) {
        let (err, lu) = (solve_error(s, a), dense_error(a));
        assert!(
            err <= (10.0 * lu).max(1e-13),
            "error {err:e}, dense LU {lu:e}"
        );
    }

    /// A = I + 30·XYᵀ of rank 7 is found to have rank 7 and solved, forward and transposed, as
    /// accurately as by a dense LU; the same B rescaled by 0.25 (what diffsol hands over when
    /// only γh changed) reuses the factors, and a new B of another rank is approximated afresh.
    #[test]
    fn solves_identity_plus_low_rank_and_reuses_rescaled_factors() {
        let (n, r) = (320, 7);
        let mut s = GeneralLowRank::default();
        let a = identity_plus_low_rank(n, r, 30.0);
        s.set_sparsity(&a);
        s.set_linearisation(&a);
        assert!(s.factored == Factored::LowRank);
        assert_eq!(s.rank, r);
        as_accurate_as_lu(&s, &a);
        let u_before = s.u[(3, 2)];
        let rescaled = identity_plus_low_rank(n, r, 7.5);
        s.set_linearisation(&rescaled);
        assert!(
            (s.u[(3, 2)] / u_before - 0.25).abs() < 1e-12,
            "factors rescaled, not rebuilt"
        );
        as_accurate_as_lu(&s, &rescaled);
        let other = identity_plus_low_rank(n, 11, 3.0);
        s.set_linearisation(&other);
        assert_eq!(s.rank, 11);
        as_accurate_as_lu(&s, &other);
    }

    /// A matrix that is not identity plus low rank is factorized densely (LU, or Cholesky when
    /// symmetric), and the next one of the problem goes straight to the dense factorization.
    #[test]
    fn falls_back_to_the_dense_factorization() {
        let n = 256;
        let full = Fixed::from_fn(n, |i, j| {
            let off = (((i * j) % 11) as f64 - 5.0) / 200.0;
            off + if i == j { 3.0 } else { 0.0 }
        });
        let mut s = SymmetricLowRank::default();
        s.set_sparsity(&full);
        s.set_linearisation(&full);
        assert!(s.factored == Factored::Dense && s.dense_only);
        as_accurate_as_lu(&s, &full);
        let low = identity_plus_low_rank(n, 3, 1.0);
        s.set_linearisation(&low);
        assert!(s.factored == Factored::Dense);
        as_accurate_as_lu(&s, &low);
    }

    /// ℓ(z) = Σ_k softplus(a_kᵀz) − bᵀz on 300 parameters with 6 directions a_k plus a ridge
    /// λ‖z‖²/2 of λ = 0: the Hessian has rank 6. Bdf's solution with the low-rank solver
    /// agrees with faer's dense LU to the solver tolerance, in the same number of steps.
    #[test]
    fn a_gradient_flow_with_a_low_rank_hessian_matches_the_dense_solve() {
        struct Softplus {
            a: Mat<f64>,
        }
        impl GradientFlow for Softplus {
            fn dim(&self) -> usize {
                self.a.nrows()
            }
            fn loss(&self, z: &[f64]) -> f64 {
                (0..self.a.ncols())
                    .map(|k| {
                        let s = dot(column(self.a.as_ref(), k), z);
                        (1.0 + (10.0 * s).exp()).ln() / 10.0 - 0.3 * s
                    })
                    .sum()
            }
            fn grad(&self, z: &[f64], g: &mut [f64]) {
                g.fill(0.0);
                for k in 0..self.a.ncols() {
                    let ak = column(self.a.as_ref(), k);
                    let s = dot(ak, z);
                    sub_scaled(g, 0.3 - 1.0 / (1.0 + (-10.0 * s).exp()), ak);
                }
            }
            fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
                out.fill(0.0);
                for k in 0..self.a.ncols() {
                    let ak = column(self.a.as_ref(), k);
                    let sigma = 1.0 / (1.0 + (-10.0 * dot(ak, z)).exp());
                    sub_scaled(out, -10.0 * sigma * (1.0 - sigma) * dot(ak, u), ak);
                }
            }
        }
        let flow = Softplus {
            a: gaussian(300, 6, 5),
        };
        let z0: Vec<f64> = (0..300).map(|i| ((i % 7) as f64 - 3.0) * 0.01).collect();
        let run = |backend| {
            let cfg = OdeConfig {
                linear_solver: backend,
                ..OdeConfig::new(Method::Bdf, 1e-8, 1e-10)
            };
            integrate_flow(&flow, &z0, &[0.0, 50.0], &cfg).unwrap()
        };
        let (low, dense) = (run(Backend::LowRank), run(Backend::Faer));
        assert_eq!(low.stats.steps, dense.stats.steps);
        let diff = crate::stats::max_abs_diff(low.state(1), dense.state(1));
        assert!(diff < 1e-8, "{diff:e}");
        assert!(low.loss[1] < 0.99 * low.loss[0]);
    }
}

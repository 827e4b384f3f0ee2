//! Linearizations: dense Hessians and Jacobians assembled from exact products, their spectra,
//! inertia and condition numbers.
//!
//! The matrices are assembled column by column from `hvp`/`jvp` on the unit vectors, so they are
//! exact up to rounding (no finite differences). A Hessian assembled this way is symmetric only
//! up to rounding, or not at all if the `hvp` has a bug: [`hessian`] symmetrizes it and reports
//! the asymmetry it removed, so a check can hold it against a bound.
//!
//! Zero eigenvalues matter here: the papers' losses have continuous symmetries (e.g. the
//! rescaling (q, v) ↦ (q/c, c v)), whose orbits are flat directions of every Hessian at a
//! stationary point. [`inertia`] and [`conditioning`] treat |λ| ≤ tol·max|λ| as zero and
//! exclude those modes from the "nonzero" condition number.

use super::AnalysisError;
use crate::flow::{GradientFlow, VectorField};
use crate::stats;
use nalgebra::{Complex, DMatrix, Schur, SymmetricEigen};

/// A Hessian assembled from Hessian-vector products, symmetrized.
#[derive(Debug, Clone)]
pub struct Hessian {
    /// (H + Hᵀ)/2 of the assembled H.
    pub matrix: DMatrix<f64>,
    /// max_ij |H_ij − H_ji| of the assembled H before symmetrization.
    pub asymmetry: f64,
}

impl Hessian {
    /// Asymmetry relative to the largest entry, max|H − Hᵀ| / max|H| (0 for H = 0).
    pub fn relative_asymmetry(&self) -> f64 {
        let scale = stats::max_abs(self.matrix.iter());
        if scale > 0.0 {
            self.asymmetry / scale
        } else {
            self.asymmetry
        }
    }
}

/// Eigen-decomposition of a symmetric matrix, eigenvalues sorted ascending.
#[derive(Debug, Clone)]
pub struct SymmetricSpectrum {
    /// Eigenvalues λ_1 ≤ … ≤ λ_n.
    pub values: Vec<f64>,
    /// Orthonormal eigenvectors; column i belongs to `values[i]`.
    pub vectors: DMatrix<f64>,
}

/// Counts of negative, zero and positive eigenvalues (zero meaning |λ| ≤ tol·max|λ|).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inertia {
    /// Eigenvalues below −tol·max|λ|: the Morse index at a stationary point.
    pub negative: usize,
    /// Eigenvalues with |λ| ≤ tol·max|λ|: flat directions (symmetries, degeneracies).
    pub zero: usize,
    /// Eigenvalues above tol·max|λ|.
    pub positive: usize,
}

/// Condition numbers of a symmetric matrix from its eigenvalues, in the 2-norm sense
/// (moduli |λ|); for a positive semi-definite matrix these are the ratios λmax/λmin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conditioning {
    /// The eigenvalue of largest modulus.
    pub largest: f64,
    /// The eigenvalue of smallest modulus.
    pub smallest: f64,
    /// The eigenvalue of smallest modulus among those not treated as zero (NaN if all are zero).
    pub smallest_nonzero: f64,
    /// κ = max|λ| / min|λ| (∞ for a singular matrix).
    pub kappa: f64,
    /// max|λ| / min{|λ| : |λ| > tol·max|λ|}: the conditioning of the non-flat directions.
    pub kappa_nonzero: f64,
    /// How many eigenvalues were treated as zero.
    pub zero_modes: usize,
}

/// Dense Hessian of `flow` at `z` from `dim` Hessian-vector products on the unit vectors.
pub fn hessian<F: GradientFlow + ?Sized>(flow: &F, z: &[f64]) -> Result<Hessian, AnalysisError> {
    let n = flow.dim();
    check_point(n, z)?;
    let raw = assemble_columns(n, |u, out| flow.hvp(z, u, out));
    check_finite_matrix(&raw, "Hessian entry")?;
    let transposed = raw.transpose();
    let asymmetry = stats::max_abs((&raw - &transposed).iter());
    Ok(Hessian {
        matrix: (raw + transposed) * 0.5,
        asymmetry,
    })
}

/// Dense Jacobian ∂f/∂z of `field` at (t, z) from `dim` Jacobian-vector products.
pub fn jacobian<V: VectorField + ?Sized>(
    field: &V,
    t: f64,
    z: &[f64],
) -> Result<DMatrix<f64>, AnalysisError> {
    let n = field.dim();
    check_point(n, z)?;
    let jac = assemble_columns(n, |u, out| field.jvp(t, z, u, out));
    check_finite_matrix(&jac, "Jacobian entry")?;
    Ok(jac)
}

/// Eigenvalues and eigenvectors of a symmetric matrix (only its lower triangle is read), sorted
/// ascending.
pub fn symmetric_eigen(matrix: &DMatrix<f64>) -> Result<SymmetricSpectrum, AnalysisError> {
    check_square(matrix)?;
    check_finite_matrix(matrix, "matrix entry")?;
    let n = matrix.nrows();
    if n == 0 {
        return Ok(SymmetricSpectrum {
            values: Vec::new(),
            vectors: DMatrix::zeros(0, 0),
        });
    }
    let eigen = SymmetricEigen::try_new(matrix.clone(), f64::EPSILON, iteration_cap(n))
        .ok_or_else(|| not_converged("symmetric eigen-decomposition", n))?;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| eigen.eigenvalues[i].total_cmp(&eigen.eigenvalues[j]));
    let values = order.iter().map(|&i| eigen.eigenvalues[i]).collect();
    let vectors = DMatrix::from_fn(n, n, |r, c| eigen.eigenvectors[(r, order[c])]);
    Ok(SymmetricSpectrum { values, vectors })
}

/// Eigenvalues of a symmetric matrix (only its lower triangle is read), sorted ascending.
pub fn symmetric_eigenvalues(matrix: &DMatrix<f64>) -> Result<Vec<f64>, AnalysisError> {
    symmetric_eigen(matrix).map(|s| s.values)
}

/// Eigenvalues of a general real square matrix (complex-conjugate pairs for rotations), sorted
/// by real part, then imaginary part.
///
/// From the real Schur form T = QᵀAQ: the 1×1 diagonal blocks are real eigenvalues and each 2×2
/// block gives a pair. The blocks are solved here rather than by nalgebra's
/// `complex_eigenvalues`, which assumes every 2×2 block has a negative discriminant and returns
/// NaN imaginary parts when an unsplit block has real eigenvalues.
pub fn eigenvalues(matrix: &DMatrix<f64>) -> Result<Vec<Complex<f64>>, AnalysisError> {
    check_square(matrix)?;
    check_finite_matrix(matrix, "matrix entry")?;
    let n = matrix.nrows();
    // nalgebra's Francis QR has no exceptional shifts, so it cycles on some structured inputs
    // (cyclic and companion matrices, nalgebra issue #611). The cap turns a cycle into a
    // failure; the retry on an orthogonally similar matrix, whose Hessenberg form lacks that
    // structure, usually converges and has the same eigenvalues to rounding.
    let schur = |m: DMatrix<f64>| Schur::try_new(m, f64::EPSILON, iteration_cap(n));
    let t = schur(matrix.clone())
        .or_else(|| {
            let q = scrambling_reflection(n);
            schur(&q * matrix * &q)
        })
        .ok_or_else(|| not_converged("real Schur decomposition", n))?
        .unpack()
        .1;
    let mut values = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        if i + 1 < n && t[(i + 1, i)] != 0.0 {
            let (a, b, c, d) = (t[(i, i)], t[(i, i + 1)], t[(i + 1, i)], t[(i + 1, i + 1)]);
            values.extend(block_2x2_eigenvalues(a, b, c, d));
            i += 2;
        } else {
            values.push(Complex::new(t[(i, i)], 0.0));
            i += 1;
        }
    }
    values.sort_by(|x, y| x.re.total_cmp(&y.re).then(x.im.total_cmp(&y.im)));
    Ok(values)
}

/// Inertia of a spectrum: eigenvalues with |λ| ≤ `zero_rel_tol`·max|λ| count as zero.
pub fn inertia(eigenvalues: &[f64], zero_rel_tol: f64) -> Inertia {
    let threshold = zero_threshold(eigenvalues, zero_rel_tol);
    let mut counts = Inertia {
        negative: 0,
        zero: 0,
        positive: 0,
    };
    for &lambda in eigenvalues {
        if lambda.abs() <= threshold {
            counts.zero += 1;
        } else if lambda < 0.0 {
            counts.negative += 1;
        } else {
            counts.positive += 1;
        }
    }
    counts
}

/// Condition numbers of a symmetric matrix with the given eigenvalues; those with
/// |λ| ≤ `zero_rel_tol`·max|λ| are zero modes, excluded from `kappa_nonzero`.
pub fn conditioning(eigenvalues: &[f64], zero_rel_tol: f64) -> Result<Conditioning, AnalysisError> {
    if eigenvalues.is_empty() {
        return Err(AnalysisError::Invalid(
            "condition number of an empty spectrum".into(),
        ));
    }
    if eigenvalues.iter().any(|x| !x.is_finite()) {
        return Err(AnalysisError::NonFinite {
            what: "eigenvalue".into(),
        });
    }
    let by_modulus = |a: &&f64, b: &&f64| a.abs().total_cmp(&b.abs());
    let largest = *eigenvalues.iter().max_by(by_modulus).expect("non-empty");
    let smallest = *eigenvalues.iter().min_by(by_modulus).expect("non-empty");
    let threshold = zero_threshold(eigenvalues, zero_rel_tol);
    let smallest_nonzero = eigenvalues
        .iter()
        .filter(|x| x.abs() > threshold)
        .min_by(by_modulus)
        .copied()
        .unwrap_or(f64::NAN);
    Ok(Conditioning {
        largest,
        smallest,
        smallest_nonzero,
        kappa: largest.abs() / smallest.abs(),
        kappa_nonzero: largest.abs() / smallest_nonzero.abs(),
        zero_modes: eigenvalues.iter().filter(|x| x.abs() <= threshold).count(),
    })
}

/// |λ| at or below which an eigenvalue counts as zero.
fn zero_threshold(eigenvalues: &[f64], zero_rel_tol: f64) -> f64 {
    zero_rel_tol * stats::max_abs(eigenvalues.iter())
}

/// Eigenvalues of [[a, b], [c, d]], real or a conjugate pair. With h = (a − d)/2 the
/// discriminant h² + bc is free of the cancellation in tr²/4 − det.
fn block_2x2_eigenvalues(a: f64, b: f64, c: f64, d: f64) -> [Complex<f64>; 2] {
    let half_diff = 0.5 * (a - d);
    let mean = 0.5 * (a + d);
    let discriminant = half_diff * half_diff + b * c;
    if discriminant >= 0.0 {
        // Add the root with the sign of `mean` and get the other from the product (= det),
        // so that neither eigenvalue suffers cancellation.
        let root = discriminant.sqrt();
        let big = mean + root.copysign(mean);
        let small = if big != 0.0 {
            (a * d - b * c) / big
        } else {
            0.0
        };
        [Complex::new(small, 0.0), Complex::new(big, 0.0)]
    } else {
        let im = (-discriminant).sqrt();
        [Complex::new(mean, -im), Complex::new(mean, im)]
    }
}

/// The Householder reflection I − 2wwᵀ (symmetric and orthogonal, so Q A Q is similar to A)
/// for a fixed unit vector w with irrational, unequal entries.
fn scrambling_reflection(n: usize) -> DMatrix<f64> {
    let w = nalgebra::DVector::from_fn(n, |i, _| ((i + 1) as f64).sqrt().fract() + 0.5);
    let w = w.normalize();
    DMatrix::identity(n, n) - (&w * w.transpose()) * 2.0
}

/// The n×n matrix whose column j is `product(e_j)`.
fn assemble_columns(n: usize, mut product: impl FnMut(&[f64], &mut [f64])) -> DMatrix<f64> {
    let mut matrix = DMatrix::zeros(n, n);
    let mut unit = vec![0.0; n];
    for j in 0..n {
        unit[j] = 1.0;
        product(&unit, matrix.column_mut(j).as_mut_slice());
        unit[j] = 0.0;
    }
    matrix
}

/// Cap on the total number of QR sweeps of an n×n eigen- or singular value problem: LAPACK's
/// 30·max(n, 10) (converging inputs need about two per eigenvalue).
pub(super) fn iteration_cap(n: usize) -> usize {
    30 * n.max(10)
}

fn not_converged(method: &str, n: usize) -> AnalysisError {
    AnalysisError::NotConverged {
        method: method.into(),
        iterations: iteration_cap(n),
        detail: format!("{n}×{n} matrix"),
    }
}

fn check_point(n: usize, z: &[f64]) -> Result<(), AnalysisError> {
    if z.len() != n {
        return Err(AnalysisError::Invalid(format!(
            "point has length {} but the flow has dimension {n}",
            z.len()
        )));
    }
    if z.iter().any(|x| !x.is_finite()) {
        return Err(AnalysisError::NonFinite {
            what: "coordinate of the linearization point".into(),
        });
    }
    Ok(())
}

fn check_square(matrix: &DMatrix<f64>) -> Result<(), AnalysisError> {
    if matrix.is_square() {
        Ok(())
    } else {
        Err(AnalysisError::Invalid(format!(
            "eigenvalues of a non-square {}×{} matrix",
            matrix.nrows(),
            matrix.ncols()
        )))
    }
}

fn check_finite_matrix(matrix: &DMatrix<f64>, what: &str) -> Result<(), AnalysisError> {
    match matrix.iter().position(|x| !x.is_finite()) {
        None => Ok(()),
        Some(k) => Err(AnalysisError::NonFinite {
            what: format!(
                "{what} ({}, {})",
                k % matrix.nrows().max(1),
                k / matrix.nrows().max(1)
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{AutoDiff, Rosenbrock};
    use crate::flow::Descent;

    /// ℓ(z) = ½ zᵀ A z with A the n×n second-difference matrix tridiag(−1, 2, −1), whose
    /// eigenvalues are 2 − 2 cos(kπ/(n+1)), k = 1..n.
    struct SecondDifference(usize);

    impl GradientFlow for SecondDifference {
        fn dim(&self) -> usize {
            self.0
        }
        fn loss(&self, z: &[f64]) -> f64 {
            let mut g = vec![0.0; self.0];
            self.grad(z, &mut g);
            0.5 * z.iter().zip(&g).map(|(a, b)| a * b).sum::<f64>()
        }
        fn grad(&self, z: &[f64], g: &mut [f64]) {
            self.hvp(z, z, g)
        }
        fn hvp(&self, _z: &[f64], u: &[f64], out: &mut [f64]) {
            let n = self.0;
            for i in 0..n {
                let left = if i > 0 { u[i - 1] } else { 0.0 };
                let right = if i + 1 < n { u[i + 1] } else { 0.0 };
                out[i] = 2.0 * u[i] - left - right;
            }
        }
    }

    /// A deliberately wrong "Hessian" [[1, 2], [4, 3]] (not symmetric).
    struct Skewed;

    impl GradientFlow for Skewed {
        fn dim(&self) -> usize {
            2
        }
        fn loss(&self, _z: &[f64]) -> f64 {
            0.0
        }
        fn grad(&self, _z: &[f64], g: &mut [f64]) {
            g.fill(0.0)
        }
        fn hvp(&self, _z: &[f64], u: &[f64], out: &mut [f64]) {
            out[0] = u[0] + 2.0 * u[1];
            out[1] = 4.0 * u[0] + 3.0 * u[1];
        }
    }

    /// ż = A z for a fixed non-symmetric A.
    struct Linear(DMatrix<f64>);

    impl VectorField for Linear {
        fn dim(&self) -> usize {
            self.0.nrows()
        }
        fn rhs(&self, _t: f64, z: &[f64], dz: &mut [f64]) {
            self.jvp(0.0, z, z, dz)
        }
        fn jvp(&self, _t: f64, _z: &[f64], u: &[f64], out: &mut [f64]) {
            let au = &self.0 * DMatrix::from_column_slice(u.len(), 1, u);
            out.copy_from_slice(au.as_slice());
        }
    }

    #[test]
    fn second_difference_hessian_and_spectrum_are_exact() {
        let n = 12;
        let h = hessian(&SecondDifference(n), &vec![0.3; n]).unwrap();
        assert_eq!(h.asymmetry, 0.0);
        for i in 0..n {
            for j in 0..n {
                let expected = match i.abs_diff(j) {
                    0 => 2.0,
                    1 => -1.0,
                    _ => 0.0,
                };
                assert_eq!(h.matrix[(i, j)], expected);
            }
        }
        let spectrum = symmetric_eigen(&h.matrix).unwrap();
        let mut worst = 0.0_f64;
        for (k, &lambda) in spectrum.values.iter().enumerate() {
            let theta = (k + 1) as f64 * std::f64::consts::PI / (n + 1) as f64;
            worst = stats::larger(worst, (lambda - 2.0 * (1.0 - theta.cos())).abs());
        }
        assert!(worst < 1e-14, "eigenvalue error {worst:e}");
        // The eigenvectors belong to the sorted eigenvalues: ‖A v − λ v‖ small for each.
        for k in 0..n {
            let v = spectrum.vectors.column(k);
            let residual = (&h.matrix * v - v * spectrum.values[k]).norm();
            assert!(residual < 1e-14, "eigenpair {k}: residual {residual:e}");
        }
    }

    #[test]
    fn autodiff_rosenbrock_hessian_matches_closed_form_and_descent_jacobian_is_its_negative() {
        let b = 100.0;
        let flow = AutoDiff(Rosenbrock { b });
        let h = hessian(&flow, &[1.0, 1.0]).unwrap();
        let expected = DMatrix::from_row_slice(2, 2, &[2.0 + 8.0 * b, -4.0 * b, -4.0 * b, 2.0 * b]);
        assert!(stats::max_abs((&h.matrix - &expected).iter()) < 1e-12);
        assert!(h.relative_asymmetry() < 1e-15);
        let z = [-0.7, 0.4];
        let jac = jacobian(&Descent(&flow), 0.0, &z).unwrap();
        let h = hessian(&flow, &z).unwrap();
        assert_eq!(stats::max_abs((jac + h.matrix).iter()), 0.0);
    }

    #[test]
    fn asymmetric_hvp_is_symmetrized_and_reported() {
        let h = hessian(&Skewed, &[0.0, 0.0]).unwrap();
        assert_eq!(h.asymmetry, 2.0);
        assert_eq!(
            h.matrix,
            DMatrix::from_row_slice(2, 2, &[1.0, 3.0, 3.0, 3.0])
        );
        assert!((h.relative_asymmetry() - 2.0 / 3.0).abs() < 1e-15);
    }

    #[test]
    fn jacobian_of_linear_field_is_its_matrix() {
        let a = DMatrix::from_row_slice(3, 3, &[0.5, -2.0, 1.0, 3.0, 0.0, -1.0, 0.25, 4.0, -3.0]);
        let jac = jacobian(&Linear(a.clone()), 1.5, &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(jac, a);
        assert!(jacobian(&Linear(a), 0.0, &[1.0]).is_err());
    }

    fn assert_complex_close(got: &[Complex<f64>], want: &[(f64, f64)], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (g, &(re, im)) in got.iter().zip(want) {
            assert!(
                (g.re - re).abs() <= tol && (g.im - im).abs() <= tol,
                "got {g}, want {re} + {im}i"
            );
        }
    }

    #[test]
    fn general_eigenvalues_of_rotations_saddles_and_similar_matrices() {
        let rotation = DMatrix::from_row_slice(2, 2, &[0.0, -1.0, 1.0, 0.0]);
        assert_complex_close(
            &eigenvalues(&rotation).unwrap(),
            &[(0.0, -1.0), (0.0, 1.0)],
            0.0,
        );

        // Spec 000 R8: the saddle Jacobian c1 [[−c, 1], [1, 0]] has eigenvalues c1 ρ̄ and −c1 ρ.
        let (c, c1) = (0.7_f64, 2.0);
        let rho = (1.0 + c * c / 4.0).sqrt() + c / 2.0;
        let saddle = DMatrix::from_row_slice(2, 2, &[-c * c1, c1, c1, 0.0]);
        let got = eigenvalues(&saddle).unwrap();
        assert_complex_close(&got, &[(-c1 * rho, 0.0), (c1 / rho, 0.0)], 1e-14);

        // S · blockdiag([[a, −b], [b, a]], r) · S⁻¹ with a non-orthogonal S.
        let (a, b, r) = (-0.3, 1.7, 2.5);
        let block = DMatrix::from_row_slice(3, 3, &[a, -b, 0.0, b, a, 0.0, 0.0, 0.0, r]);
        let s = DMatrix::from_row_slice(3, 3, &[1.0, 0.5, -0.2, 0.3, 2.0, 0.1, -0.4, 0.6, 1.5]);
        let m = &s * block * s.clone().try_inverse().unwrap();
        let got = eigenvalues(&m).unwrap();
        assert_complex_close(&got, &[(a, -b), (a, b), (r, 0.0)], 1e-13);
    }

    #[test]
    fn nearly_symmetric_2x2_has_real_eigenvalues_not_nan() {
        // nalgebra issue #655: complex_eigenvalues gives NaN imaginary parts on this matrix.
        let m = DMatrix::from_row_slice(2, 2, &[2.5000002, -1.4999999, -1.4999999, 2.4999998]);
        let got = eigenvalues(&m).unwrap();
        let exact = symmetric_eigenvalues(&m).unwrap();
        assert_complex_close(&got, &[(exact[0], 0.0), (exact[1], 0.0)], 1e-14);
        assert!((exact[1] - 3.9999999).abs() < 1e-9 && (exact[0] - 1.0000001).abs() < 1e-9);
    }

    #[test]
    fn cyclic_companion_matrix_converges_through_the_retry() {
        // nalgebra issue #611: Schur cycles forever on the companion matrix of
        // 434.396 x¹⁰ − 770.970, a scaled cyclic shift. The roots are r·e^{2πik/10} with
        // r = (770.970/434.396)^{1/10}; the retry on a reflected copy must find all ten.
        let n = 10;
        let c = 770.9700059294701 / 434.3959909081459;
        let mut m = DMatrix::zeros(n, n);
        m[(0, n - 1)] = c;
        for i in 1..n {
            m[(i, i - 1)] = 1.0;
        }
        assert!(Schur::try_new(m.clone(), f64::EPSILON, iteration_cap(n)).is_none());
        let values = eigenvalues(&m).unwrap();
        // Ten distinct roots (neighbours are 2r sin(π/10) ≈ 0.65 apart), each with v¹⁰ = c.
        for (k, v) in values.iter().enumerate() {
            assert!(
                (v.powu(10) - c).norm() < 1e-12 * c,
                "v = {v}: v¹⁰ = {}",
                v.powu(10)
            );
            for w in &values[k + 1..] {
                assert!((v - w).norm() > 0.6, "roots {v} and {w} coincide");
            }
        }
    }

    #[test]
    fn inertia_and_conditioning_exclude_zero_modes() {
        let spectrum = [-2.0, 1e-14, 0.0, 1.0, 4.0];
        assert_eq!(
            inertia(&spectrum, 1e-10),
            Inertia {
                negative: 1,
                zero: 2,
                positive: 2
            }
        );
        let c = conditioning(&spectrum, 1e-10).unwrap();
        assert_eq!((c.largest, c.smallest, c.smallest_nonzero), (4.0, 0.0, 1.0));
        assert_eq!(
            (c.kappa, c.kappa_nonzero, c.zero_modes),
            (f64::INFINITY, 4.0, 2)
        );

        // Spec 000 D4, one df column at a minimum with δ = 0 (μ = 1): nonzero spectrum
        // {ρ̄ (×(d−1)), 2A} = {1, 1, 1, 2} plus one zero mode, so κ_nonzero = 1 + ρ² = 2.
        let c = conditioning(&[3e-17, 1.0, 1.0, 1.0, 2.0], 1e-10).unwrap();
        assert_eq!((c.kappa_nonzero, c.zero_modes), (2.0, 1));
        let spd = conditioning(&[0.5, 3.0, 8.0], 1e-10).unwrap();
        assert_eq!(
            (spd.kappa, spd.kappa_nonzero, spd.zero_modes),
            (16.0, 16.0, 0)
        );
        assert!(conditioning(&[], 1e-10).is_err());
    }
}

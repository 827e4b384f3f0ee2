//! Theorem 2 on the tangent space T = 𝟙^⊥ (spec 002 §2.6, §3.6): the linearization
//! −(1/N)J²H of the simplex flow at an interior equilibrium, the condition number κ of J²H on
//! T, the paper's bound (18) and the corrected two-sided bound
//! (μ_T/L_T)(λ_n/λ₂)² ≤ κ ≤ (L_T/μ_T)(λ_n/λ₂)², z̃_{n−1}/z̃₂ ≤ λ_n/λ₂ ≤ R.
//!
//! J²H maps T to T and is similar there to the symmetric JHJ, so with B an orthonormal basis of
//! T its eigenvalues are those of BᵀJHJB (eigvalsh, §2.6). The same eigenvalues are the squared
//! singular values of CᵀJB for any factor H = CCᵀ; the SVD resolves them to relative error
//! ≈ ε√κ instead of ε·κ, which keeps κ meaningful up to ~1e20 (eigvalsh: ~1e10, §2.8). JB is
//! formed column by column as J b = z⊙(b − zᵀb), so rows of tiny z_i keep their scale.

use nalgebra::DMatrix;

use super::jacobian_spectrum::{jacobian_matrix, secular_eigenvalues};
use super::softmax::jacobian_apply;
use crate::analysis::linearize::symmetric_eigenvalues;
use crate::analysis::spectra::singular_values;
use crate::analysis::AnalysisError;

/// The Helmert basis of T = 𝟙^⊥ (n × (n−1), orthonormal): column k has 1/√(k(k+1)) in its
/// first k rows and −k/√(k(k+1)) in row k + 1 (an explicit form of the QR basis of §2.6).
pub fn tangent_basis(n: usize) -> DMatrix<f64> {
    DMatrix::from_fn(n, n.saturating_sub(1), |i, c| {
        let k = (c + 1) as f64;
        let scale = 1.0 / (k * (k + 1.0)).sqrt();
        match i {
            _ if i < c + 1 => scale,
            _ if i == c + 1 => -k * scale,
            _ => 0.0,
        }
    })
}

/// J(z)B, column by column.
fn jacobian_times_basis(z: &[f64]) -> DMatrix<f64> {
    let n = z.len();
    let basis = tangent_basis(n);
    let mut out = DMatrix::zeros(n, n - 1);
    let mut col = vec![0.0; n];
    for c in 0..n - 1 {
        jacobian_apply(z, basis.column(c).as_slice(), &mut col);
        out.column_mut(c).copy_from_slice(&col);
    }
    out
}

/// Eigenvalues of J(z)²H restricted to T, ascending, as eigvalsh(BᵀJHJB) (§2.6).
pub fn tangent_eigenvalues_eigh(z: &[f64], h: &DMatrix<f64>) -> Result<Vec<f64>, AnalysisError> {
    check_sizes(z, h)?;
    let jb = jacobian_times_basis(z);
    symmetric_eigenvalues(&(jb.transpose() * h * &jb))
}

/// Eigenvalues of J(z)²H restricted to T, ascending, as the squared singular values of CᵀJB,
/// H = CCᵀ (Cholesky; H must be positive definite).
pub fn tangent_eigenvalues_svd(z: &[f64], h: &DMatrix<f64>) -> Result<Vec<f64>, AnalysisError> {
    check_sizes(z, h)?;
    let factor = h
        .clone()
        .cholesky()
        .ok_or_else(|| AnalysisError::Invalid("H must be positive definite".into()))?;
    let m = factor.l().transpose() * jacobian_times_basis(z);
    let mut values: Vec<f64> = singular_values(&m)?.into_iter().map(|s| s * s).collect();
    values.reverse();
    Ok(values)
}

/// The linearization −(1/N)J(z)²H of the simplex flow on T in the basis B: −(1/N)BᵀJ²HB.
pub fn tangent_linearization(z: &[f64], h: &DMatrix<f64>, samples: usize) -> DMatrix<f64> {
    let basis = tangent_basis(z.len());
    let j = jacobian_matrix(z);
    -(basis.transpose() * &j * &j * h * &basis) / samples as f64
}

fn check_sizes(z: &[f64], h: &DMatrix<f64>) -> Result<(), AnalysisError> {
    let n = z.len();
    if n < 2 || h.nrows() != n || h.ncols() != n {
        return Err(AnalysisError::Invalid(format!(
            "need n ≥ 2 and an n×n H (n = {n}, H is {}×{})",
            h.nrows(),
            h.ncols()
        )));
    }
    Ok(())
}

/// κ of J²H on T at one z* with the quantities of (18) and of the corrected bound (§3.6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConditionReport {
    pub n: usize,
    /// κ = λ_max/λ_min of J²H on T, from the SVD route.
    pub kappa: f64,
    /// The same from eigvalsh(BᵀJHJB) (unreliable beyond κ ≈ 1e10).
    pub kappa_eigh: f64,
    /// μ, L: extreme eigenvalues of H.
    pub mu: f64,
    pub l: f64,
    /// μ_T, L_T: extreme eigenvalues of PHP on T (BᵀHB).
    pub mu_t: f64,
    pub l_t: f64,
    /// λ₂, λ_n of J(z*) (secular equation).
    pub lambda_2: f64,
    pub lambda_n: f64,
    /// R = z̃_n/z̃₁.
    pub r: f64,
    /// z̃_{n−1}/z̃₂ (1/(z̃₂/z̃₁) for n = 2).
    pub spread: f64,
}

impl ConditionReport {
    pub fn new(z: &[f64], h: &DMatrix<f64>) -> Result<Self, AnalysisError> {
        check_sizes(z, h)?;
        let n = z.len();
        let kappa_of = |v: &[f64]| v[v.len() - 1] / v[0];
        let kappa = kappa_of(&tangent_eigenvalues_svd(z, h)?);
        let kappa_eigh = kappa_of(&tangent_eigenvalues_eigh(z, h)?);
        let h_eig = symmetric_eigenvalues(h)?;
        let basis = tangent_basis(n);
        let ht_eig = symmetric_eigenvalues(&(basis.transpose() * h * &basis))?;
        let lambda = secular_eigenvalues(z)?;
        let mut sorted = z.to_vec();
        sorted.sort_by(f64::total_cmp);
        Ok(ConditionReport {
            n,
            kappa,
            kappa_eigh,
            mu: h_eig[0],
            l: h_eig[n - 1],
            mu_t: ht_eig[0],
            l_t: ht_eig[n - 2],
            lambda_2: lambda[1],
            lambda_n: lambda[n - 1],
            r: sorted[n - 1] / sorted[0],
            spread: sorted[n - 2] / sorted[1],
        })
    }

    /// ρ = λ_n/λ₂ of J(z*).
    pub fn rho(&self) -> f64 {
        self.lambda_n / self.lambda_2
    }
    /// The paper's (18): κ ≥ (μ/L)R².
    pub fn paper_bound(&self) -> f64 {
        self.mu / self.l * self.r * self.r
    }
    /// (μ_T/L_T)ρ² ≤ κ.
    pub fn corrected_lower(&self) -> f64 {
        self.mu_t / self.l_t * self.rho().powi(2)
    }
    /// κ ≤ (L_T/μ_T)ρ².
    pub fn corrected_upper(&self) -> f64 {
        self.l_t / self.mu_t * self.rho().powi(2)
    }
    /// What the proof of (18) actually yields, with H restricted to T: κ ≥ (L_T/μ_T)/ρ².
    pub fn proof_lower(&self) -> f64 {
        self.l_t / self.mu_t / self.rho().powi(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::prompt::simplex::random_spd;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn helmert_basis_is_orthonormal_and_tangent() {
        let b = tangent_basis(7);
        let gram = b.transpose() * &b;
        assert!(crate::stats::max_abs((gram - DMatrix::identity(6, 6)).iter()) < 1e-15);
        assert!(crate::stats::max_abs(b.row_sum().iter()) < 1e-15);
    }

    #[test]
    fn two_token_counterexample_has_kappa_one() {
        let h = DMatrix::identity(2, 2);
        let rep = ConditionReport::new(&[0.9, 0.1], &h).unwrap();
        assert!((rep.kappa - 1.0).abs() < 1e-15 && (rep.kappa_eigh - 1.0).abs() < 1e-15);
        assert!((rep.paper_bound() - 81.0).abs() < 1e-12);
    }

    #[test]
    fn the_two_routes_agree_and_the_corrected_bounds_hold() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let z = [0.02, 0.3, 0.05, 0.4, 0.13, 0.1];
        let h = random_spd(6, 30.0, &mut rng);
        let eigh = tangent_eigenvalues_eigh(&z, &h).unwrap();
        let svd = tangent_eigenvalues_svd(&z, &h).unwrap();
        for (a, b) in eigh.iter().zip(&svd) {
            assert!((a - b).abs() < 1e-13 * svd[4], "{eigh:?} vs {svd:?}");
        }
        let rep = ConditionReport::new(&z, &h).unwrap();
        assert!(rep.corrected_lower() <= rep.kappa && rep.kappa <= rep.corrected_upper());
        assert!(rep.spread <= rep.rho() && rep.rho() <= rep.r);
        assert!(rep.mu <= rep.mu_t && rep.l_t <= rep.l);
        assert!(rep.proof_lower() <= rep.kappa);
        // with H = I, κ = ρ² exactly
        let id = ConditionReport::new(&z, &DMatrix::identity(6, 6)).unwrap();
        assert!((id.kappa / id.rho().powi(2) - 1.0).abs() < 1e-13);
        // the linearization's spectrum is −(1/N)·that of J²H on T
        let lin = tangent_linearization(&z, &h, 3);
        let mut ev: Vec<f64> = crate::analysis::linearize::eigenvalues(&lin)
            .unwrap()
            .iter()
            .map(|c| -3.0 * c.re)
            .collect();
        ev.sort_by(f64::total_cmp);
        for (a, b) in ev.iter().zip(&svd) {
            assert!((a - b).abs() < 1e-12 * svd[4]);
        }
    }
}

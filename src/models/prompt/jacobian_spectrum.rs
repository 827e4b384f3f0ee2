//! The spectrum of the softmax Jacobian J(z) = diag(z) − zzᵀ on the open simplex (spec 002 §2.8,
//! §3.1): dense eigenvalues (nalgebra), eigenvalues to full relative accuracy from the secular
//! equation, and the facts of Lemma 1 with their interlacing extensions as measured numbers.
//!
//! J is a rank-one downdate of diag(z), so det(J − λI) = Π(z_j − λ)·(1 − Σ_j z_j²/(z_j − λ)).
//! With Σ z_j = 1 the secular function factors as 1 − Σ z_j²/(z_j − λ) = −λ·g(λ),
//! g(λ) = Σ_j z_j/(z_j − λ): the root λ₁ = 0 splits off and the others are the roots of g, which
//! is increasing between its poles, one in each gap (z̃_k, z̃_{k+1}) of the distinct sorted
//! entries. A value taken by m entries is an eigenvalue m − 1 times (eigenvectors supported on
//! the tie and orthogonal to z there) and enters g once with weight m·z̃_k. Each root is found by
//! bisection on the bit pattern of its offset τ from the nearer pole, with the pole distances
//! z_j − λ formed as (z_j − pole) − τ: the offset, and so every eigenvalue, comes out to a few
//! ulps relative, where eigvalsh only reaches ε·λ_max absolute (spec §2.8).

use nalgebra::DMatrix;

use crate::analysis::linearize::symmetric_eigenvalues;
use crate::analysis::AnalysisError;
use crate::stats;

/// J(z) = diag(z) − zzᵀ as a dense matrix. The diagonal z_i(1 − z_i) is formed as
/// z_i·Σ_{j≠i} z_j, which keeps its relative accuracy when z_i is close to 1.
pub fn jacobian_matrix(z: &[f64]) -> DMatrix<f64> {
    let n = z.len();
    let rest: Vec<f64> = (0..n)
        .map(|i| (0..n).filter(|&j| j != i).map(|j| z[j]).sum())
        .collect();
    DMatrix::from_fn(
        n,
        n,
        |i, j| {
            if i == j {
                z[i] * rest[i]
            } else {
                -z[i] * z[j]
            }
        },
    )
}

/// Eigenvalues of J(z), ascending, by nalgebra's symmetric eigensolver (absolute accuracy
/// about ε·λ_max).
pub fn dense_eigenvalues(z: &[f64]) -> Result<Vec<f64>, AnalysisError> {
    check_interior(z)?;
    symmetric_eigenvalues(&jacobian_matrix(z))
}

/// Eigenvalues of J(z), ascending, from the secular equation (module docs): λ₁ = 0 exactly,
/// the tie multiplicities exactly, and every other eigenvalue to a few ulps relative. Needs
/// z > 0 entrywise; z is taken as normalized (Σz = 1).
pub fn secular_eigenvalues(z: &[f64]) -> Result<Vec<f64>, AnalysisError> {
    check_interior(z)?;
    let mut sorted = z.to_vec();
    sorted.sort_by(f64::total_cmp);
    // distinct values with their summed weights m·z̃ (ties deflate to one pole)
    let mut poles: Vec<(f64, f64)> = Vec::with_capacity(sorted.len());
    let mut values = vec![0.0];
    for &x in &sorted {
        match poles.last_mut() {
            Some((v, w)) if *v == x => {
                *w += x;
                values.push(x);
            }
            _ => poles.push((x, x)),
        }
    }
    let mut distance = vec![0.0; poles.len()];
    for k in 0..poles.len().saturating_sub(1) {
        values.push(secular_root(&poles, k, &mut distance));
    }
    values.sort_by(f64::total_cmp);
    Ok(values)
}

/// The root of g(λ) = Σ w_j/(v_j − λ) in (v_k, v_{k+1}) (`poles` = (v_j, w_j), v ascending).
fn secular_root(poles: &[(f64, f64)], k: usize, distance: &mut [f64]) -> f64 {
    let (lo, hi) = (poles[k].0, poles[k + 1].0);
    let mid = lo + 0.5 * (hi - lo);
    // g increases from −∞ at v_k⁺ to +∞ at v_{k+1}⁻: the sign at the midpoint says which pole
    // is nearer the root, and the offset τ from that pole is what bisection resolves
    let g_mid: f64 = poles.iter().map(|&(v, w)| w / (v - mid)).sum();
    let (origin, sign) = if g_mid >= 0.0 { (lo, 1.0) } else { (hi, -1.0) };
    for (d, &(v, _)) in distance.iter_mut().zip(poles) {
        *d = v - origin;
    }
    // g at λ = origin + sign·t, for t > 0; g(λ) ≥ 0 means λ is at or past the root
    let past_root = |t: f64| {
        let g: f64 = distance
            .iter()
            .zip(poles)
            .map(|(&d, &(_, w))| w / (d - sign * t))
            .sum();
        (g >= 0.0) == (sign > 0.0)
    };
    // positive floats are ordered like their bit patterns: ≤ 64 halvings reach adjacent floats
    let (mut inside, mut outside) = (0u64, (mid - origin).abs().to_bits());
    while outside - inside > 1 {
        let probe = inside + (outside - inside) / 2;
        if past_root(f64::from_bits(probe)) {
            outside = probe;
        } else {
            inside = probe;
        }
    }
    origin + sign * f64::from_bits(outside)
}

fn check_interior(z: &[f64]) -> Result<(), AnalysisError> {
    if z.is_empty() {
        return Err(AnalysisError::Invalid("J(z) of an empty z".into()));
    }
    match z.iter().position(|&x| !(x.is_finite() && x > 0.0)) {
        Some(j) => Err(AnalysisError::Invalid(format!(
            "z must lie in the open simplex (z_{j} = {:e})",
            z[j]
        ))),
        None => Ok(()),
    }
}

/// The facts of Lemma 1 and their interlacing extensions (spec §3.1), as measured numbers for
/// one z and one spectrum of J(z) (dense or secular), each zero or positive when the fact fails.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lemma1Facts {
    /// max |J − Jᵀ| of [`jacobian_matrix`].
    pub asymmetry: f64,
    /// ‖J𝟙‖_∞ (J𝟙 = 0, claim 2).
    pub kernel_residual: f64,
    /// max(0, −λ₁): how far the spectrum dips below 0 (PSD, claim 1).
    pub negativity: f64,
    /// |λ₁| (λ₁ = 0, claim 3).
    pub lambda_1: f64,
    /// max_k distance of λ_{k+1} outside [z̃_k, z̃_{k+1}], k = 1..n−1 (rank-one interlacing; it
    /// contains z̃₁ ≤ λ₂ and λ_n ≤ z̃_n of claim 3, and λ_n ≥ z̃_{n−1}, λ₂ ≤ z̃₂).
    pub interlacing_violation: f64,
    /// Whether 0 = λ₁ < z̃₁ ≤ λ₂ ≤ … ≤ λ_n ≤ z̃_n < 1 holds exactly, as eq. (8) states.
    pub strict_chain: bool,
    /// λ_n (≤ ½).
    pub lambda_max: f64,
    /// |Σλ − (1 − ‖z‖²)|, with 1 − ‖z‖² = Σ_i z_i Σ_{j≠i} z_j.
    pub trace_error: f64,
    /// For n = 2, |λ₂ − 2z₁z₂|.
    pub two_token_error: Option<f64>,
}

impl Lemma1Facts {
    /// Measures the facts for `z` against `eigenvalues` (ascending, length n).
    pub fn measure(z: &[f64], eigenvalues: &[f64]) -> Result<Self, AnalysisError> {
        check_interior(z)?;
        let n = z.len();
        if eigenvalues.len() != n {
            return Err(AnalysisError::Invalid(format!(
                "{} eigenvalues for n = {n}",
                eigenvalues.len()
            )));
        }
        let j = jacobian_matrix(z);
        let asymmetry = stats::max_abs((&j - j.transpose()).iter());
        let kernel_residual = stats::max_abs((&j * nalgebra::DVector::from_element(n, 1.0)).iter());
        let mut sorted = z.to_vec();
        sorted.sort_by(f64::total_cmp);
        let interlacing_violation = stats::max((1..n).map(|k| {
            let l = eigenvalues[k];
            stats::max([sorted[k - 1] - l, l - sorted[k], 0.0])
        }));
        let lambda_max = eigenvalues[n - 1];
        let strict_chain = eigenvalues[0] == 0.0
            && 0.0 < sorted[0]
            && (n < 2 || sorted[0] <= eigenvalues[1])
            && eigenvalues.windows(2).all(|w| w[0] <= w[1])
            && lambda_max <= sorted[n - 1]
            && sorted[n - 1] < 1.0;
        let trace = j.trace();
        let eig_sum: f64 = eigenvalues.iter().sum();
        let two_token_error = (n == 2).then(|| (eigenvalues[1] - 2.0 * z[0] * z[1]).abs());
        Ok(Lemma1Facts {
            asymmetry,
            kernel_residual,
            negativity: (-eigenvalues[0]).max(0.0),
            lambda_1: eigenvalues[0].abs(),
            interlacing_violation,
            strict_chain,
            lambda_max,
            trace_error: (eig_sum - trace).abs(),
            two_token_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secular_and_dense_spectra_agree_on_a_generic_z() {
        let w = [0.3, -1.2, 2.5, 0.0, 1.1, -0.4, 0.9];
        let mut z = [0.0; 7];
        crate::models::prompt::softmax::softmax_into(&w, &mut z);
        let sec = secular_eigenvalues(&z).unwrap();
        let dense = dense_eigenvalues(&z).unwrap();
        assert!(
            crate::stats::max_abs_diff(&sec, &dense) < 1e-15,
            "{sec:?} vs {dense:?}"
        );
        let facts = Lemma1Facts::measure(&z, &sec).unwrap();
        assert!(facts.strict_chain && facts.interlacing_violation == 0.0);
        assert!(facts.trace_error < 1e-15 && facts.lambda_max <= 0.5);
    }

    #[test]
    fn secular_eigenvalues_keep_relative_accuracy_where_eigvalsh_cannot() {
        // one dominant token, tail ε: ε with multiplicity n − 2 and nε(1 − (n − 1)ε) (§3.6)
        let (n, eps) = (10, 1e-30);
        let mut z = vec![eps; n];
        z[0] = 1.0 - (n - 1) as f64 * eps;
        let sec = secular_eigenvalues(&z).unwrap();
        assert_eq!(sec[0], 0.0);
        assert!(sec[1..n - 1].iter().all(|&l| l == eps));
        let top = n as f64 * eps * z[0];
        assert!(
            (sec[n - 1] - top).abs() < 4e-16 * top,
            "{} vs {top}",
            sec[n - 1]
        );
        // n = 2: λ₂ = 2z₁z₂ at a logit gap of 60
        let z2 = [1.0 / (1.0 + (-60f64).exp()), 1.0 / (1.0 + 60f64.exp())];
        let sec2 = secular_eigenvalues(&z2).unwrap();
        let exact = 2.0 * z2[0] * z2[1];
        assert!((sec2[1] - exact).abs() < 4e-16 * exact);
    }

    #[test]
    fn ties_deflate_and_a_non_interior_z_is_refused() {
        let z = [0.25, 0.25, 0.25, 0.25];
        let sec = secular_eigenvalues(&z).unwrap();
        assert_eq!(sec, vec![0.0, 0.25, 0.25, 0.25]);
        let z = [0.1, 0.2, 0.2, 0.5];
        let sec = secular_eigenvalues(&z).unwrap();
        let dense = dense_eigenvalues(&z).unwrap();
        assert!(crate::stats::max_abs_diff(&sec, &dense) < 1e-15);
        assert_eq!(sec.iter().filter(|&&l| l == 0.2).count(), 1);
        assert!(secular_eigenvalues(&[0.5, 0.5, 0.0]).is_err());
        assert!(secular_eigenvalues(&[]).is_err());
    }

    #[test]
    fn facts_flag_a_spectrum_that_breaks_interlacing() {
        let z = [0.1, 0.3, 0.6];
        let mut sec = secular_eigenvalues(&z).unwrap();
        sec[1] = 0.05; // below z̃₁
        let facts = Lemma1Facts::measure(&z, &sec).unwrap();
        assert!((facts.interlacing_violation - 0.05).abs() < 1e-16);
        assert!(!facts.strict_chain);
    }
}

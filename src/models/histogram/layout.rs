//! The canonical state layout of both flows and what depends only on it (spec 000 §2.1, §2.4,
//! §2.7): z = \[q_1; v_1; q_2; v_2; …; q_d; v_d\] ∈ ℝ^{d(d+1)}, Q\[a, i\] at i(d+1) + a and v_i at
//! i(d+1) + d (0-based). Column blocks are contiguous, so the df Jacobian is block-diagonal.

use nalgebra::{DMatrix, DVector};

/// d from the state dimension d(d+1); panics if `dim` is not of that form.
pub fn alphabet_size(dim: usize) -> usize {
    let d = ((dim as f64).sqrt()).floor() as usize;
    assert_eq!(d * (d + 1), dim, "state dimension {dim} is not d(d+1)");
    d
}

/// Index of Q\[a, i\] in z (spec 000 §2.1).
pub fn q_index(d: usize, a: usize, i: usize) -> usize {
    i * (d + 1) + a
}

/// Index of v_i in z (spec 000 §2.1).
pub fn v_index(d: usize, i: usize) -> usize {
    i * (d + 1) + d
}

/// Column block i of z: (q_i, v_i).
pub fn column(z: &[f64], d: usize, i: usize) -> (&[f64], f64) {
    let block = &z[i * (d + 1)..(i + 1) * (d + 1)];
    (&block[..d], block[d])
}

/// z from (Q, v) (spec 000 §2.1). Panics unless Q is d × d and v has length d.
pub fn state_from_qv(q: &DMatrix<f64>, v: &DVector<f64>) -> Vec<f64> {
    let d = v.len();
    assert_eq!(q.shape(), (d, d), "Q must be d×d with d = len(v)");
    let mut z = Vec::with_capacity(d * (d + 1));
    for (q_i, &v_i) in q.column_iter().zip(v.iter()) {
        z.extend(q_i.iter());
        z.push(v_i);
    }
    z
}

/// (Q, v) from z (spec 000 §2.1).
pub fn state_to_qv(z: &[f64]) -> (DMatrix<f64>, DVector<f64>) {
    let d = alphabet_size(z.len());
    let q = DMatrix::from_fn(d, d, |a, i| z[q_index(d, a, i)]);
    let v = DVector::from_fn(d, |i, _| z[v_index(d, i)]);
    (q, v)
}

/// Names of the conserved quantities, "beta_1".."beta_d" (spec 000 §2.7).
pub fn beta_names(d: usize) -> Vec<String> {
    (1..=d).map(|i| format!("beta_{i}")).collect()
}

/// β_i = ‖q_i‖² − v_i², conserved by both flows (Lemma A.1, spec 000 §2.5b, R6).
pub fn betas(z: &[f64], out: &mut [f64]) {
    let d = alphabet_size(z.len());
    for (i, beta) in out.iter_mut().enumerate().take(d) {
        let (q, v) = column(z, d, i);
        *beta = q.iter().map(|x| x * x).sum::<f64>() - v * v;
    }
}

/// The exact change of β_i in one gradient-descent step z ↦ z − η∇ℓ (spec 000 §2.4), for any loss
/// f(Q Diag(v)): β_i' − β_i = η²(v_i²‖g_i‖² − (q_iᵀ g_i)²) with g_i = ∂f/∂w_i. Since
/// ∇_{q_i}ℓ = v_i g_i and ∂ℓ/∂v_i = q_iᵀ g_i, this is η²(‖∇_{q_i}ℓ‖² − (∂ℓ/∂v_i)²), computed
/// here from the state gradient `grad_z` (the linear term −2η(q_i·∇_{q_i}ℓ − v_i ∂ℓ/∂v_i)
/// vanishes identically).
pub fn gd_beta_drift(grad_z: &[f64], eta: f64, out: &mut [f64]) {
    let d = alphabet_size(grad_z.len());
    for (i, drift) in out.iter_mut().enumerate().take(d) {
        let (g_q, g_v) = column(grad_z, d, i);
        let g_q_sq: f64 = g_q.iter().map(|x| x * x).sum();
        *drift = eta * eta * (g_q_sq - g_v * g_v);
    }
}

/// Q₀, v₀ with entries i.i.d. N(0, σ²), in the canonical layout (spec 000 §1.5: the paper's
/// "random Gaussian initialization"; σ is given per scenario).
pub fn gaussian_state(rng: &mut impl rand::Rng, d: usize, sigma: f64) -> Vec<f64> {
    gaussian_vector(rng, d * (d + 1), sigma)
}

/// `len` numbers i.i.d. N(0, σ²).
pub fn gaussian_vector(rng: &mut impl rand::Rng, len: usize, sigma: f64) -> Vec<f64> {
    (0..len)
        .map(|_| sigma * rng.sample::<f64, _>(rand_distr::StandardNormal))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_round_trip_and_indices() {
        let d = 3;
        let q = DMatrix::from_fn(d, d, |a, i| (10 * a + i) as f64);
        let v = DVector::from_fn(d, |i, _| 100.0 + i as f64);
        let z = state_from_qv(&q, &v);
        assert_eq!(z.len(), 12);
        assert_eq!(z[q_index(d, 2, 1)], 21.0);
        assert_eq!(z[v_index(d, 2)], 102.0);
        let (q2, v2) = state_to_qv(&z);
        assert_eq!((q2, v2), (q, v));
        assert_eq!(beta_names(2), vec!["beta_1", "beta_2"]);
    }
}

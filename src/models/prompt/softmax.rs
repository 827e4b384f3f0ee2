//! The softmax φ and its Jacobian J(z) = diag(z) − zzᵀ, computed without forming J and without
//! dividing probabilities (z_min underflows long before the logits do).

use crate::stats;

/// z = φ(w), subtracting max w first.
pub fn softmax_into(w: &[f64], z: &mut [f64]) {
    let max = stats::max(w);
    let mut sum = 0.0;
    for (zj, &wj) in z.iter_mut().zip(w) {
        *zj = (wj - max).exp();
        sum += *zj;
    }
    z.iter_mut().for_each(|zj| *zj /= sum);
}

/// ln φ(w)_j = w_j − logsumexp(w).
pub fn log_softmax_into(w: &[f64], out: &mut [f64]) {
    let max = stats::max(w);
    let lse = max + w.iter().map(|&x| (x - max).exp()).sum::<f64>().ln();
    for (o, &wj) in out.iter_mut().zip(w) {
        *o = wj - lse;
    }
}

/// ln R = ln(max_j z_j / min_j z_j) = max_j w_j − min_j w_j, from the logits.
pub fn log_attention_ratio(w: &[f64]) -> f64 {
    let (lo, hi) = stats::range(w);
    hi - lo
}

/// out = J(z) u = z ⊙ (u − zᵀu 𝟙).
pub fn jacobian_apply(z: &[f64], u: &[f64], out: &mut [f64]) {
    let zu: f64 = z.iter().zip(u).map(|(a, b)| a * b).sum();
    for ((o, &zj), &uj) in out.iter_mut().zip(z).zip(u) {
        *o = zj * (uj - zu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_is_normalized_and_its_jacobian_matches_differences() {
        let w = [0.3, -1.2, 2.5, 0.0, 700.0 - 1e3];
        let mut z = [0.0; 5];
        softmax_into(&w, &mut z);
        assert!((z.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        let mut lz = [0.0; 5];
        log_softmax_into(&w, &mut lz);
        for (a, b) in z.iter().zip(&lz) {
            assert!((a.ln() - b).abs() < 1e-13 * b.abs().max(1.0));
        }
        assert_eq!(log_attention_ratio(&w), 2.5 - (700.0 - 1e3));
        // J u against central differences of φ along u (eq. 7).
        let u = [0.4, -0.1, 0.7, 0.2, -0.3];
        let mut ju = [0.0; 5];
        jacobian_apply(&z, &u, &mut ju);
        let h = 1e-6;
        let (mut zp, mut zm) = ([0.0; 5], [0.0; 5]);
        let wp: Vec<f64> = w.iter().zip(&u).map(|(a, b)| a + h * b).collect();
        let wm: Vec<f64> = w.iter().zip(&u).map(|(a, b)| a - h * b).collect();
        softmax_into(&wp, &mut zp);
        softmax_into(&wm, &mut zm);
        for j in 0..5 {
            let fd = (zp[j] - zm[j]) / (2.0 * h);
            assert!((fd - ju[j]).abs() < 1e-8, "{j}: {fd} vs {}", ju[j]);
        }
    }
}

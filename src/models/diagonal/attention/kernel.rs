//! The per-sample mathematics of one attention head with square loss, shared by the diagonal
//! and the full-matrix parametrizations (spec 004 §2.2). Both make the scores S = X A Xᵀ and
//! the values V = X M linear in the parameters, so everything after (S, V) is common:
//!
//! ```text
//! P = rowsoftmax(S)  (log domain: the row max is subtracted)     F = P V,  E = coef·(F − Y)
//! dV = Pᵀ E,   dP = E Vᵀ,   dS = P ⊙ (dP − rowdot(P, dP))            (reverse pass)
//! ```
//! with coef = 2κ/N, and for a direction (δS, δV) of the linear map (second order, forward over
//! reverse): δP = P ⊙ (δS − rowdot(P, δS)), δE = coef·(δP V + P δV), δdV = δPᵀE + PᵀδE,
//! δdP = δE Vᵀ + E δVᵀ, δdS = δP ⊙ (dP − rowdot(P, dP)) + P ⊙ (δdP − rowdot(δP, dP) −
//! rowdot(P, δdP)). Matrices are row-major slices: S, P n×n; V, F, E n×d.

use crate::stats;

/// C = A B with A m×k, B k×n (row-major); `acc` adds to C instead of overwriting it.
pub(super) fn mat_mul(
    a: &[f64],
    b: &[f64],
    c: &mut [f64],
    (m, k, n): (usize, usize, usize),
    acc: bool,
) {
    if !acc {
        c[..m * n].iter_mut().for_each(|x| *x = 0.0);
    }
    for i in 0..m {
        let row = &mut c[i * n..(i + 1) * n];
        for l in 0..k {
            let a_il = a[i * k + l];
            if a_il != 0.0 {
                row.iter_mut()
                    .zip(&b[l * n..(l + 1) * n])
                    .for_each(|(x, y)| *x += a_il * y);
            }
        }
    }
}

/// C = A Bᵀ with A m×k, B n×k.
pub(super) fn mat_mul_nt(
    a: &[f64],
    b: &[f64],
    c: &mut [f64],
    (m, k, n): (usize, usize, usize),
    acc: bool,
) {
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = a[i * k..(i + 1) * k]
                .iter()
                .zip(&b[j * k..(j + 1) * k])
                .map(|(x, y)| x * y)
                .sum();
            if acc {
                c[i * n + j] += dot;
            } else {
                c[i * n + j] = dot;
            }
        }
    }
}

/// C = Aᵀ B with A k×m, B k×n.
pub(super) fn mat_mul_tn(
    a: &[f64],
    b: &[f64],
    c: &mut [f64],
    (m, k, n): (usize, usize, usize),
    acc: bool,
) {
    if !acc {
        c[..m * n].iter_mut().for_each(|x| *x = 0.0);
    }
    for l in 0..k {
        let b_row = &b[l * n..(l + 1) * n];
        for i in 0..m {
            let a_li = a[l * m + i];
            if a_li != 0.0 {
                c[i * n..(i + 1) * n]
                    .iter_mut()
                    .zip(b_row)
                    .for_each(|(x, y)| *x += a_li * y);
            }
        }
    }
}

/// Row-wise softmax of the n×n scores in the log domain (row max subtracted before exp).
fn softmax_rows(s: &[f64], p: &mut [f64], n: usize) {
    for m in 0..n {
        let row = &s[m * n..(m + 1) * n];
        let out = &mut p[m * n..(m + 1) * n];
        let max = stats::max(row.iter());
        let mut total = 0.0;
        for (o, &x) in out.iter_mut().zip(row) {
            *o = (x - max).exp();
            total += *o;
        }
        out.iter_mut().for_each(|o| *o /= total);
    }
}

/// ⟨a_m, b_m⟩ for row m of two n×n matrices.
fn row_dot(a: &[f64], b: &[f64], m: usize, n: usize) -> f64 {
    a[m * n..(m + 1) * n]
        .iter()
        .zip(&b[m * n..(m + 1) * n])
        .map(|(x, y)| x * y)
        .sum()
}

/// out = P ⊙ (X − rowdot(P, X)): the softmax Jacobian (symmetric) applied to X, which is both
/// the reverse pass dS from dP and the forward derivative δP from δS.
fn softmax_pullback(p: &[f64], x: &[f64], out: &mut [f64], n: usize) {
    for m in 0..n {
        let rho = row_dot(p, x, m, n);
        for j in 0..n {
            out[m * n + j] = p[m * n + j] * (x[m * n + j] - rho);
        }
    }
}

/// Scratch of one sample's forward, reverse and second-order passes.
#[derive(Debug, Clone)]
pub(super) struct SampleWork {
    n: usize,
    d: usize,
    /// P = softmax(S).
    p: Vec<f64>,
    /// E = coef (F − Y).
    e: Vec<f64>,
    /// dP = E Vᵀ.
    dp: Vec<f64>,
    /// Reverse-pass outputs dS (n×n) and dV (n×d).
    pub ds: Vec<f64>,
    pub dv: Vec<f64>,
    /// Second order: δP, δE, δdP and the outputs δdS, δdV.
    dir_p: Vec<f64>,
    dir_e: Vec<f64>,
    dir_dp: Vec<f64>,
    pub dir_ds: Vec<f64>,
    pub dir_dv: Vec<f64>,
}

impl SampleWork {
    pub fn new(n: usize, d: usize) -> Self {
        let (nn, nd) = (vec![0.0; n * n], vec![0.0; n * d]);
        SampleWork {
            n,
            d,
            p: nn.clone(),
            e: nd.clone(),
            dp: nn.clone(),
            ds: nn.clone(),
            dv: nd.clone(),
            dir_p: nn.clone(),
            dir_e: nd.clone(),
            dir_dp: nn.clone(),
            dir_ds: nn,
            dir_dv: nd,
        }
    }

    /// The head's output F = softmax(S) V into `out` (n×d).
    pub fn output(&mut self, s: &[f64], v: &[f64], out: &mut [f64]) {
        let (n, d) = (self.n, self.d);
        softmax_rows(s, &mut self.p, n);
        mat_mul(&self.p, v, out, (n, n, d), false);
    }

    /// Forward pass: stores P and E = coef (F − Y), returns the sample's loss ½ coef ‖F − Y‖²
    /// (= κ‖F − Y‖²/N for coef = 2κ/N).
    pub fn forward(&mut self, s: &[f64], v: &[f64], y: &[f64], coef: f64) -> f64 {
        let (n, d) = (self.n, self.d);
        softmax_rows(s, &mut self.p, n);
        mat_mul(&self.p, v, &mut self.e, (n, n, d), false);
        let mut sq = 0.0;
        for (e, t) in self.e.iter_mut().zip(y) {
            let r = *e - t;
            sq += r * r;
            *e = coef * r;
        }
        0.5 * coef * sq
    }

    /// Reverse pass after [`forward`](Self::forward): dV = PᵀE, dP = E Vᵀ, dS.
    pub fn backward(&mut self, v: &[f64]) {
        let (n, d) = (self.n, self.d);
        mat_mul_tn(&self.p, &self.e, &mut self.dv, (n, n, d), false);
        mat_mul_nt(&self.e, v, &mut self.dp, (n, d, n), false);
        softmax_pullback(&self.p, &self.dp, &mut self.ds, n);
    }

    /// Second order after [`backward`](Self::backward), for the direction (δS, δV) of the
    /// scores and values: fills δdS and δdV.
    pub fn second_order(&mut self, v: &[f64], dir_s: &[f64], dir_v: &[f64], coef: f64) {
        let (n, d) = (self.n, self.d);
        softmax_pullback(&self.p, dir_s, &mut self.dir_p, n);
        mat_mul(&self.dir_p, v, &mut self.dir_e, (n, n, d), false);
        mat_mul(&self.p, dir_v, &mut self.dir_e, (n, n, d), true);
        self.dir_e.iter_mut().for_each(|x| *x *= coef);
        mat_mul_tn(&self.dir_p, &self.e, &mut self.dir_dv, (n, n, d), false);
        mat_mul_tn(&self.p, &self.dir_e, &mut self.dir_dv, (n, n, d), true);
        mat_mul_nt(&self.dir_e, v, &mut self.dir_dp, (n, d, n), false);
        mat_mul_nt(&self.e, dir_v, &mut self.dir_dp, (n, d, n), true);
        for m in 0..n {
            let rho = row_dot(&self.p, &self.dp, m, n);
            let mixed = row_dot(&self.dir_p, &self.dp, m, n) + row_dot(&self.p, &self.dir_dp, m, n);
            for j in 0..n {
                let k = m * n + j;
                self.dir_ds[k] =
                    self.dir_p[k] * (self.dp[k] - rho) + self.p[k] * (self.dir_dp[k] - mixed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_match_their_definitions() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2×3
        let b = [1.0, -1.0, 0.5, 2.0, 0.0, 1.0]; // 3×2
        let mut c = [0.0; 4];
        mat_mul(&a, &b, &mut c, (2, 3, 2), false);
        assert_eq!(c, [2.0, 6.0, 6.5, 12.0]);
        // A Bᵀ with B = the 2×3 matrix a itself: A Aᵀ
        mat_mul_nt(&a, &a, &mut c, (2, 3, 2), false);
        assert_eq!(c, [14.0, 32.0, 32.0, 77.0]);
        // Aᵀ A (3×3) accumulated twice
        let mut g = [0.0; 9];
        mat_mul_tn(&a, &a, &mut g, (3, 2, 3), false);
        mat_mul_tn(&a, &a, &mut g, (3, 2, 3), true);
        assert_eq!(g, [34.0, 44.0, 54.0, 44.0, 58.0, 72.0, 54.0, 72.0, 90.0]);
    }

    #[test]
    fn softmax_is_stable_for_huge_scores() {
        let s = [1000.0, 999.0, -1e308, 0.0];
        let mut p = [0.0; 4];
        softmax_rows(&s, &mut p, 2);
        let e = (-1.0_f64).exp();
        assert!((p[0] - 1.0 / (1.0 + e)).abs() < 1e-15 && (p[1] - e / (1.0 + e)).abs() < 1e-15);
        assert_eq!((p[2], p[3]), (0.0, 1.0));
    }
}

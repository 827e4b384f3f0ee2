//! A non-convex loss on the simplex with a known interior stationary point, for Remark 5 of
//! seed 002 ("convexity of ℓ is not needed" in Theorem 2): (C-quad) plus a cosine ripple,
//!
//!   ℓ̃(z) = ½(z − z*)ᵀA(z − z*) + c𝟙ᵀz − a Σ_i [cos(b d_i + φ_i) + b sin(φ_i) d_i],  d = z − z*,
//!
//! with phases φ_i = (−1)^i φ. The linear term cancels the ripple's slope at z*, so
//! ∇ℓ̃(z*) = c𝟙 exactly and z* is an interior equilibrium of the simplex flow; the Hessian
//! ∇²ℓ̃(z) = A + ab²·diag(cos(b d_i + φ_i)) is A + ab²cos φ·I at z* (positive definite for
//! cos φ ≥ 0) but has the diagonal entry A_kk − ab² < 0 wherever b d_k + φ_k ≡ π, so ℓ̃ is not
//! convex once ab² > min_k A_kk. The alternating slopes −ab sin φ_i tilt neighbouring ripple
//! wells, so z* is a local minimum that is not the global one (measured by the runner).

use super::simplex::{QuadLoss, SimplexLoss};

/// (C-quad) plus the cosine ripple above.
#[derive(Debug, Clone, PartialEq)]
pub struct RippledLoss {
    quad: QuadLoss,
    /// a, b, φ.
    amplitude: f64,
    frequency: f64,
    phase: f64,
    /// Whether the slope-cancelling linear term is included (false: z* is not stationary).
    tilted: bool,
}

impl RippledLoss {
    /// The ripple a, b, φ on `quad`; `tilted` = false leaves out the term −ab sin(φ_i)d_i that
    /// makes z* stationary (a plausible bug, for the tests).
    pub fn new(quad: QuadLoss, amplitude: f64, frequency: f64, phase: f64, tilted: bool) -> Self {
        RippledLoss {
            quad,
            amplitude,
            frequency,
            phase,
            tilted,
        }
    }

    pub fn quad(&self) -> &QuadLoss {
        &self.quad
    }

    /// φ_i = (−1)^i φ.
    pub fn phase_of(&self, i: usize) -> f64 {
        if i.is_multiple_of(2) {
            self.phase
        } else {
            -self.phase
        }
    }

    /// ab², the ripple's largest curvature.
    pub fn curvature(&self) -> f64 {
        self.amplitude * self.frequency * self.frequency
    }

    pub fn frequency(&self) -> f64 {
        self.frequency
    }

    /// The slope of the linear term along coordinate i: −ab sin φ_i (0 when untilted).
    fn tilt(&self, i: usize) -> f64 {
        match self.tilted {
            true => -self.amplitude * self.frequency * self.phase_of(i).sin(),
            false => 0.0,
        }
    }
}

impl SimplexLoss for RippledLoss {
    fn dim(&self) -> usize {
        self.quad.dim()
    }
    fn value(&self, z: &[f64]) -> f64 {
        let zs = self.quad.z_star();
        let ripple: f64 = (0..z.len())
            .map(|i| {
                let d = z[i] - zs[i];
                self.tilt(i) * d - self.amplitude * (self.frequency * d + self.phase_of(i)).cos()
            })
            .sum();
        self.quad.value(z) + ripple
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        self.quad.grad(z, g);
        let zs = self.quad.z_star();
        for (i, gi) in g.iter_mut().enumerate() {
            let arg = self.frequency * (z[i] - zs[i]) + self.phase_of(i);
            // at z* the two ripple terms are ab·sin φ_i − ab·sin φ_i = 0 exactly
            *gi += self.amplitude * self.frequency * arg.sin() + self.tilt(i);
        }
    }
    fn hvp(&self, z: &[f64], h: &[f64], out: &mut [f64]) {
        self.quad.hvp(z, h, out);
        let zs = self.quad.z_star();
        for (i, o) in out.iter_mut().enumerate() {
            let arg = self.frequency * (z[i] - zs[i]) + self.phase_of(i);
            *o += self.curvature() * arg.cos() * h[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodiff::{ad_grad_hvp, rel_err};
    use crate::models::prompt::simplex::random_spd;
    use num_dual::DualNum;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// ℓ̃ written from its definition for dual numbers.
    fn reference<T: DualNum<f64> + Copy>(loss: &RippledLoss, z: &[T]) -> T {
        let q = loss.quad();
        let (n, zs) = (z.len(), q.z_star());
        let (a, b) = (loss.amplitude, loss.frequency);
        let mut total = T::from(0.0);
        for i in 0..n {
            let di = z[i] - zs[i];
            for j in 0..n {
                total += di * (z[j] - zs[j]) * (0.5 * q.matrix()[(i, j)]);
            }
            let phi = loss.phase_of(i);
            total += z[i] * q.c() - (di * b + phi).cos() * a - di * (a * b * phi.sin());
        }
        total
    }

    fn loss(tilted: bool) -> (RippledLoss, Vec<f64>, Vec<f64>) {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let z_star = vec![0.3, 0.1, 0.25, 0.15, 0.2];
        let quad = QuadLoss::new(random_spd(5, 10.0, &mut rng), z_star, 1.5).unwrap();
        let z = vec![0.1, 0.35, 0.05, 0.3, 0.2];
        let u = vec![0.3, -1.0, 0.7, 0.2, -0.4];
        (RippledLoss::new(quad, 0.1, 20.0, 1.2, tilted), z, u)
    }

    #[test]
    fn derivatives_match_forward_mode_ad() {
        for tilted in [true, false] {
            let (l, z, u) = loss(tilted);
            // the reference always carries the tilt: compare the untilted loss by its offset
            let (g_ad, h_ad) = ad_grad_hvp(|x| reference(&l, x), |x| reference(&l, x), &z, &u);
            let (mut g, mut h) = (vec![0.0; 5], vec![0.0; 5]);
            l.grad(&z, &mut g);
            l.hvp(&z, &u, &mut h);
            let untilt: Vec<f64> = (0..5).map(|i| l.tilt(i) - loss(true).0.tilt(i)).collect();
            let g_ad: Vec<f64> = g_ad.iter().zip(&untilt).map(|(a, b)| a + b).collect();
            assert!(rel_err(&g, &g_ad) < 1e-14, "{g:?} vs {g_ad:?}");
            assert!(rel_err(&h, &h_ad) < 1e-14, "{h:?} vs {h_ad:?}");
            if tilted {
                assert!((l.value(&z) - reference(&l, &z)).abs() < 1e-14);
            }
        }
    }

    #[test]
    fn z_star_is_stationary_only_with_the_tilt() {
        let (l, _, _) = loss(true);
        let mut g = vec![0.0; 5];
        l.grad(l.quad().z_star(), &mut g);
        assert!(g.iter().all(|&x| x == 1.5), "{g:?}");
        let (l, _, _) = loss(false);
        l.grad(l.quad().z_star(), &mut g);
        assert!(g.iter().any(|&x| (x - 1.5).abs() > 1.0), "{g:?}");
    }
}

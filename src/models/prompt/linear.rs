//! The closed-form gradient flow of the linear-attention model with v frozen (spec 002 §2.3):
//! f_i = c_iᵀp with c_i = K_iᵀa_i, so the loss is quadratic with constant Hessian
//! H_lin = (1/N)CᵀC, independent of p and hence of the teacher's σ_p, and
//! p(t) = p_∞ + e^{−tH_lin}(p₀ − p_∞), p_∞ the least-squares solution nearest p₀.

use nalgebra::{DMatrix, DVector, SymmetricEigen};

use super::model::{Attention, PromptModel, Trained};

/// The exact flow of a p-only linear-attention model from one p₀.
#[derive(Debug, Clone)]
pub struct LinearFlow {
    /// Eigen-decomposition of H_lin.
    pub hessian: SymmetricEigen<f64, nalgebra::Dyn>,
    pub p_inf: DVector<f64>,
    p0: DVector<f64>,
}

impl LinearFlow {
    /// The flow of `model` (linear attention, p only) from p₀.
    pub fn new(model: &PromptModel, p0: &[f64]) -> Self {
        assert_eq!(
            model.attention(),
            Attention::Linear,
            "closed form of the linear model"
        );
        let Trained::P { v } = model.trained() else {
            panic!("the closed form needs v frozen");
        };
        let data = model.data();
        let (n_s, d) = (data.samples, data.d);
        let mut c = DMatrix::zeros(n_s, d);
        for i in 0..n_s {
            let a: Vec<f64> = data
                .tokens(i)
                .chunks_exact(d)
                .map(|x| x.iter().zip(v).map(|(a, b)| a * b).sum())
                .collect();
            for (row, &aj) in data.keys(i).chunks_exact(d).zip(&a) {
                for col in 0..d {
                    c[(i, col)] += aj * row[col];
                }
            }
        }
        let h = c.transpose() * &c / n_s as f64;
        let p0 = DVector::from_column_slice(p0);
        let y = DVector::from_column_slice(&data.y);
        let pinv = c
            .clone()
            .pseudo_inverse(1e-12)
            .expect("pseudo-inverse of C");
        let p_inf = &pinv * &y + (DMatrix::identity(d, d) - &pinv * &c) * &p0;
        LinearFlow {
            hessian: SymmetricEigen::new(h),
            p_inf,
            p0,
        }
    }

    /// p(t).
    pub fn at(&self, t: f64) -> Vec<f64> {
        let q = &self.hessian.eigenvectors;
        let coeff = q.transpose() * (&self.p0 - &self.p_inf);
        let decayed = DVector::from_iterator(
            coeff.len(),
            coeff
                .iter()
                .zip(self.hessian.eigenvalues.iter())
                .map(|(c, &l)| c * (-t * l.max(0.0)).exp()),
        );
        (&self.p_inf + q * decayed).as_slice().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::flow::{integrate_flow, linspace, Method, OdeConfig};
    use crate::models::prompt::Synthetic;

    #[test]
    fn closed_form_matches_the_integrated_flow() {
        let spec = Synthetic {
            d: 5,
            samples: 12,
            sigma_p: 1.0,
            sigma_v: 1.0,
            teacher: Attention::Softmax,
        };
        let draw = spec.draw(&mut ChaCha8Rng::seed_from_u64(2));
        let model = PromptModel::new(
            draw.data,
            Attention::Linear,
            Trained::P {
                v: draw.v_teacher.clone(),
            },
        );
        let exact = LinearFlow::new(&model, &draw.p0);
        let cfg = OdeConfig::new(Method::Bdf, 1e-11, 1e-13);
        let times = linspace(0.0, 20.0, 5);
        let traj = integrate_flow(&model, &draw.p0, &times, &cfg).unwrap();
        for (k, &t) in times.iter().enumerate() {
            let want = exact.at(t);
            let err = crate::autodiff::rel_err(traj.state(k), &want);
            assert!(err < 1e-8, "t = {t}: {err}");
        }
    }
}

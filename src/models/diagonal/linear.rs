//! The diagonal linear network with square loss (spec 004 §1.2, §2.2): h(x; β) = ⟨β, x⟩,
//! L̃(β) = ½ βᵀΣβ − rᵀβ (+ const), G(β) = r − Σβ, H = Σ; the reference instances R1, R2 and
//! R2-degenerate of spec §3.6; and the sign-constrained minimizer that characterizes every
//! stage-B limit of this convex model exactly (spec §3.3, "KKT characterization").

use nalgebra::{DMatrix, DVector};

use super::network::BetaLoss;
use super::DiagonalError;
use crate::stats;

/// L̃(β) = ½ βᵀΣβ − rᵀβ with Σ = E\[xxᵀ\], r = E\[xy\]. For a realizable teacher β* (r = Σβ*)
/// the loss is evaluated as ½ (β − β*)ᵀΣ(β − β*) ≥ 0 and the gradient as Σ(β − β*), so that
/// neither cancels near the minimum.
#[derive(Debug, Clone)]
pub struct DiagLinear {
    sigma: DMatrix<f64>,
    r: Vec<f64>,
    teacher: Option<Vec<f64>>,
}

impl DiagLinear {
    /// The loss ½ βᵀΣβ − rᵀβ (no constant) for a symmetric Σ.
    pub fn from_moments(sigma: DMatrix<f64>, r: Vec<f64>) -> Result<Self, DiagonalError> {
        let p = r.len();
        if sigma.shape() != (p, p) {
            return Err(DiagonalError::Invalid(format!(
                "Σ is {}×{} but r has length {p}",
                sigma.nrows(),
                sigma.ncols()
            )));
        }
        let asym = (&sigma - sigma.transpose()).amax();
        if asym > 1e-14 * sigma.amax() || sigma.iter().chain(&r).any(|x| !x.is_finite()) {
            return Err(DiagonalError::Invalid(
                "Σ must be symmetric and Σ, r finite".into(),
            ));
        }
        Ok(DiagLinear {
            sigma,
            r,
            teacher: None,
        })
    }

    /// The realizable loss ½ (β − β*)ᵀΣ(β − β*) = ½ βᵀΣβ − rᵀβ + ½ β*ᵀΣβ* with r = Σβ*.
    pub fn realizable(sigma: DMatrix<f64>, teacher: Vec<f64>) -> Result<Self, DiagonalError> {
        if sigma.ncols() != teacher.len() {
            return Err(DiagonalError::Invalid(format!(
                "Σ has {} columns but β* has length {}",
                sigma.ncols(),
                teacher.len()
            )));
        }
        let r = (&sigma * DVector::from_column_slice(&teacher))
            .as_slice()
            .to_vec();
        let mut model = Self::from_moments(sigma, r)?;
        model.teacher = Some(teacher);
        Ok(model)
    }

    /// Σ = I, G_i = β*_i − β_i: the coordinates decouple (closed form CF1, spec §2.7).
    pub fn orthogonal(teacher: Vec<f64>) -> Self {
        let p = teacher.len();
        Self::realizable(DMatrix::identity(p, p), teacher).expect("identity is valid")
    }

    /// R1 (spec §3.6): Σ = I, β* = (1, −0.5, 0.25, 0, −0.125); T = (0, 1, 2, 4, 8), then ∞.
    pub fn r1() -> Self {
        Self::orthogonal(vec![1.0, -0.5, 0.25, 0.0, -0.125])
    }

    /// Σ = [[1, 0, a], [0, 1, a], [a, a, 1]] with a = 0.95/√2 (spec §3.6, R2).
    pub fn r2_covariance() -> DMatrix<f64> {
        let a = 0.95 / 2.0_f64.sqrt();
        DMatrix::from_row_slice(3, 3, &[1.0, 0.0, a, 0.0, 1.0, a, a, a, 1.0])
    }

    /// R2 (spec §3.6): β* = (1, 0.8, −0.3); coordinate 2 enters, drops at stage 3 and
    /// re-enters with the opposite sign at T_4 = 72.584.
    pub fn r2() -> Self {
        Self::realizable(Self::r2_covariance(), vec![1.0, 0.8, -0.3]).expect("R2 is valid")
    }

    /// R2-degenerate (spec §3.6): β* = (1, 0.8, 0); coordinate 2 drops with G_2 = 0, which
    /// violates A4.3(iii) and must be flagged.
    pub fn r2_degenerate() -> Self {
        Self::realizable(Self::r2_covariance(), vec![1.0, 0.8, 0.0]).expect("valid")
    }

    pub fn sigma(&self) -> &DMatrix<f64> {
        &self.sigma
    }

    /// r = E\[xy\].
    pub fn r(&self) -> &[f64] {
        &self.r
    }

    /// β* of a realizable model.
    pub fn teacher(&self) -> Option<&[f64]> {
        self.teacher.as_deref()
    }

    /// The constant by which [`BetaLoss::loss`] exceeds ½ βᵀΣβ − rᵀβ (½ β*ᵀΣβ* if realizable,
    /// else 0); spec §3.6 lists plateau losses without it.
    pub fn constant(&self) -> f64 {
        self.teacher.as_ref().map_or(0.0, |t| {
            let t = DVector::from_column_slice(t);
            0.5 * t.dot(&(&self.sigma * &t))
        })
    }

    /// The minimizer of L̃ subject to β_j = 0 (j ∉ `active`) and s_i β_i ≥ 0 (i ∈ `active`,
    /// signs ±1): the exact stage-B limit of this convex model (spec §3.3). Lawson–Hanson
    /// active-set method on x = s ⊙ β ≥ 0 with Q = D Σ_AA D, q = D r_A; needs Σ_AA ≻ 0.
    pub fn sign_constrained_minimizer(
        &self,
        active: &[usize],
        signs: &[f64],
    ) -> Result<Vec<f64>, DiagonalError> {
        let m = active.len();
        if signs.len() != m {
            return Err(DiagonalError::Invalid(
                "one sign per active coordinate".into(),
            ));
        }
        let q_mat = DMatrix::from_fn(m, m, |a, b| {
            signs[a] * signs[b] * self.sigma[(active[a], active[b])]
        });
        let q = DVector::from_fn(m, |a, _| signs[a] * self.r[active[a]]);
        let tol = 1e-14 * q.amax().max(f64::MIN_POSITIVE);
        let mut x = DVector::zeros(m);
        let mut free: Vec<usize> = Vec::new();
        for _ in 0..3 * m + 10 {
            let w = &q - &q_mat * &x;
            let entering = (0..m)
                .filter(|a| !free.contains(a) && w[*a] > tol)
                .max_by(|&a, &b| w[a].total_cmp(&w[b]));
            let Some(t) = entering else {
                return Ok((0..self.r.len())
                    .map(|j| {
                        active
                            .iter()
                            .position(|&i| i == j)
                            .map_or(0.0, |a| signs[a] * x[a])
                    })
                    .collect());
            };
            free.push(t);
            loop {
                let z = solve_on(&q_mat, &q, &free)?;
                if free.iter().all(|&a| z[a] > 0.0) {
                    x = z;
                    break;
                }
                // step back to the boundary and release the coordinates that hit it
                let step = stats::min(
                    free.iter()
                        .filter(|&&a| z[a] <= 0.0)
                        .map(|&a| x[a] / (x[a] - z[a])),
                );
                x = &x + (&z - &x) * step;
                free.retain(|&a| x[a] > tol);
                (0..m)
                    .filter(|a| !free.contains(a))
                    .for_each(|a| x[a] = 0.0);
            }
        }
        Err(DiagonalError::NotConverged(
            "active-set iteration limit in the sign-constrained minimizer".into(),
        ))
    }

    /// ½ βᵀΣβ − rᵀβ + const written directly, for the forward-mode-AD tests.
    #[cfg(test)]
    pub(crate) fn reference_loss<T: num_dual::DualNum<f64> + Copy>(&self, beta: &[T]) -> T {
        let p = self.r.len();
        let mut total = T::from(self.constant());
        for i in 0..p {
            total -= beta[i] * self.r[i];
            for j in 0..p {
                total += beta[i] * beta[j] * (0.5 * self.sigma[(i, j)]);
            }
        }
        total
    }
}

/// z with z_F = Q_FF⁻¹ q_F and 0 elsewhere (Cholesky; fails if Q_FF is not positive definite).
fn solve_on(
    q_mat: &DMatrix<f64>,
    q: &DVector<f64>,
    free: &[usize],
) -> Result<DVector<f64>, DiagonalError> {
    let k = free.len();
    let sub = DMatrix::from_fn(k, k, |a, b| q_mat[(free[a], free[b])]);
    let rhs = DVector::from_fn(k, |a, _| q[free[a]]);
    let chol = sub.cholesky().ok_or_else(|| {
        DiagonalError::Invalid("Σ restricted to the active set is not positive definite".into())
    })?;
    let sol = chol.solve(&rhs);
    let mut z = DVector::zeros(q.len());
    free.iter().enumerate().for_each(|(a, &i)| z[i] = sol[a]);
    Ok(z)
}

impl BetaLoss for DiagLinear {
    fn p(&self) -> usize {
        self.r.len()
    }

    fn loss(&self, beta: &[f64]) -> f64 {
        let p = self.r.len();
        match &self.teacher {
            Some(t) => {
                let delta = |j: usize| beta[j] - t[j];
                let quadratic: f64 = (0..p)
                    .map(|i| delta(i) * (0..p).map(|j| self.sigma[(i, j)] * delta(j)).sum::<f64>())
                    .sum();
                0.5 * quadratic
            }
            None => (0..p)
                .map(|i| {
                    let row: f64 = (0..p).map(|j| self.sigma[(i, j)] * beta[j]).sum();
                    beta[i] * (0.5 * row - self.r[i])
                })
                .sum(),
        }
    }

    /// Σ(β − β*) when realizable, else Σβ − r.
    fn grad_beta(&self, beta: &[f64], out: &mut [f64]) {
        let p = self.r.len();
        for (i, o) in out.iter_mut().enumerate() {
            *o = match &self.teacher {
                Some(t) => (0..p).map(|j| self.sigma[(i, j)] * (beta[j] - t[j])).sum(),
                None => (0..p).map(|j| self.sigma[(i, j)] * beta[j]).sum::<f64>() - self.r[i],
            };
        }
    }

    fn hvp_beta(&self, _beta: &[f64], dir: &[f64], out: &mut [f64]) {
        let p = self.r.len();
        for (i, o) in out.iter_mut().enumerate() {
            *o = (0..p).map(|j| self.sigma[(i, j)] * dir[j]).sum();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::diagonal::testing::{autodiff_grad_hvp, rel_err, Reference};
    use num_dual::DualNum;

    struct Ref<'a>(&'a DiagLinear);
    impl Reference for Ref<'_> {
        fn dim(&self) -> usize {
            self.0.p()
        }
        fn eval<T: DualNum<f64> + Copy>(&self, z: &[T]) -> T {
            self.0.reference_loss(z)
        }
    }

    #[test]
    fn gradient_and_hvp_match_forward_mode_ad() {
        let from_moments =
            DiagLinear::from_moments(DiagLinear::r2_covariance(), vec![0.3, -0.2, 0.7]).unwrap();
        let beta = [0.4, -1.2, 0.9];
        let dir = [1.0, 0.3, -0.5];
        for model in [DiagLinear::r2(), from_moments] {
            let (grad_ad, hvp_ad) = autodiff_grad_hvp(&Ref(&model), &beta, &dir);
            let (mut grad, mut hvp) = ([0.0; 3], [0.0; 3]);
            model.grad_beta(&beta, &mut grad);
            model.hvp_beta(&beta, &dir, &mut hvp);
            assert!(rel_err(&grad, &grad_ad) <= 1e-14);
            assert!(rel_err(&hvp, &hvp_ad) <= 1e-14);
            let loss_ad = Ref(&model).eval(&beta);
            assert!((model.loss(&beta) - loss_ad).abs() <= 1e-14 * loss_ad.abs());
        }
    }

    #[test]
    fn realizable_loss_has_no_cancellation_at_the_teacher() {
        let model = DiagLinear::r2();
        let near = [1.0 + 1e-9, 0.8, -0.3];
        // ½ Σ_00 (1e−9)² exactly, although the naive form would cancel ~1 against ~1
        let loss = model.loss(&near);
        assert!((loss / 0.5e-18 - 1.0).abs() < 1e-6, "{loss:e}");
        let mut grad = [0.0; 3];
        model.grad_beta(&[1.0, 0.8, -0.3], &mut grad);
        assert_eq!(grad, [0.0; 3]);
    }

    #[test]
    fn sign_constrained_minimizer_reproduces_the_r2_plateaus() {
        // spec §3.6: β² on {0, 2} with signs (+, +); β³ on {0, 1, 2} with (+, +, +) drops
        // coordinate 2; β⁴ with coordinate 2 re-signed to − is β*.
        let model = DiagLinear::r2();
        let b2 = model
            .sign_constrained_minimizer(&[2, 0], &[1.0, 1.0])
            .unwrap();
        assert!(rel_err(&b2, &[0.342141, 0.0, 0.679319]) < 2e-6, "{b2:?}");
        let b3 = model
            .sign_constrained_minimizer(&[2, 0, 1], &[1.0, 1.0, 1.0])
            .unwrap();
        assert!(rel_err(&b3, &[0.798475, 0.598475, 0.0]) < 2e-6, "{b3:?}");
        assert_eq!(b3[2], 0.0);
        let b4 = model
            .sign_constrained_minimizer(&[0, 1, 2], &[1.0, 1.0, -1.0])
            .unwrap();
        assert!(rel_err(&b4, &[1.0, 0.8, -0.3]) < 1e-14, "{b4:?}");
        // KKT at β³: G_F = 0 and s_2 G_2 = −0.029250 < 0 (the strict drop of spec §3.6)
        let mut grad = [0.0; 3];
        model.grad_beta(&b3, &mut grad);
        assert!(grad[0].abs() < 1e-14 && grad[1].abs() < 1e-14);
        assert!((-grad[2] + 0.029250).abs() < 1e-6, "{}", -grad[2]);
    }
}

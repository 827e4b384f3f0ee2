//! Lemma A.1 of paper 001 (spec 001 §2.2 "optional augmented states", §2.6(a)): along the
//! diagonal key–query flow from init (5) the accumulated constraint weights
//! φ_il(t) = ∫₀ᵗ (2/n) ℓ_i r_il ds (r_il = −(Σ(g_i)γ_i)_l > 0 under A2) represent the state
//! exactly, β(t) = ω_0^{⊙2} ⊙ sinh(Bφ(t)), and β̇ = √(β^{⊙2} + ω_0^{⊙4}) ⊙ Bφ̇.
//!
//! [`PhiAugmented`] integrates (β; φ) in τ = ln(1 + t): β by the reduced flow [`ReducedKq`]
//! (whose gradient comes from the token-level model), φ from the margin representation of
//! Assumption 2 (spec §2.1) — two independent evaluations, so the identity tests both. The φ
//! rates are formed in the log domain, e^τ (2/n) ℓ_i r_il = (2/n) exp(τ + ln ℓ_i + ln σ_il +
//! ln σ_i,opt + ln Δ_i), finite however saturated the attention is (spec §2.4).

use super::diagonal::{DiagonalLoss, ReducedKq};
use crate::attention::logdomain::log_sum_exp;
use crate::flow::VectorField;

/// One sample's scores under Assumption 2: γ_i,opt = γ_i,nopt + Δ_i.
#[derive(Debug, Clone, Copy)]
struct SampleScores {
    nopt: f64,
    delta: f64,
}

/// Relative spread of the non-optimal scores accepted as Assumption 2 (spec §4: 1e-12).
const A2_TOL: f64 = 1e-12;

/// The reduced KQdiag flow with the φ states of Lemma A.1 appended: state (β; φ) ∈ ℝ^{d+m}
/// (φ ordered as the diagonal constraints B_il). φ does not feed back into β, so the
/// Jacobian is block lower triangular: (J_β 0; ∂φ̇/∂β 0), with
/// ∂φ̇_il/∂β · u = φ̇_il (−δm_il + (2 − Δ_iσ_i,opt) δ̄_i), δm_il = uᵀB_il,
/// δ̄_i = Σ_{k≠opt} σ_ik δm_ik (spec §2.3: d ln r_il = −δm_il + 2δ̄_i, d ln ℓ_i = −Δ_iσ_opt δ̄_i).
pub struct PhiAugmented<'a> {
    reduced: ReducedKq<'a>,
    loss: &'a DiagonalLoss,
    samples: Vec<SampleScores>,
    /// Sample of each constraint row.
    sample_of: Vec<usize>,
    /// The factor c of φ̇ = (c/n) ℓ r (Lemma A.1: c = 2; other values mimic a wrong factor).
    factor: f64,
}

/// Per-sample softmax state at one β: ln σ_i,opt and, per constraint, ln σ_il.
struct Softmax {
    log_opt: Vec<f64>,
    log_sigma: Vec<f64>,
}

impl<'a> PhiAugmented<'a> {
    /// The augmented flow with κ = ω_0^{⊙2} (init (5)) and φ̇ = (factor/n) ℓ_i r_il. Errors when
    /// Assumption 2 fails (the margin representation needs equal non-optimal scores).
    pub fn new(loss: &'a DiagonalLoss, kappa: Vec<f64>, factor: f64) -> Result<Self, String> {
        let model = loss.model();
        let (gamma, opt) = (model.scores(), model.optimal_tokens());
        let t = model.data().t;
        let mut samples = Vec::with_capacity(opt.len());
        for (i, &o) in opt.iter().enumerate() {
            let row = &gamma[i * t..(i + 1) * t];
            let others: Vec<f64> = (0..t).filter(|&l| l != o).map(|l| row[l]).collect();
            let (lo, hi) = (crate::stats::min(&others), crate::stats::max(&others));
            if hi - lo > A2_TOL * hi.abs().max(1.0) {
                return Err(format!(
                    "Assumption 2 fails on sequence {i}: non-optimal scores spread {:.3e} (the φ \
                     representation of Lemma A.1 uses equal non-optimal scores)",
                    hi - lo
                ));
            }
            samples.push(SampleScores {
                nopt: hi,
                delta: row[o] - hi,
            });
        }
        let sample_of = loss
            .constraints()
            .labels
            .iter()
            .map(|l| l.sequence)
            .collect();
        Ok(PhiAugmented {
            reduced: ReducedKq::new(loss, kappa),
            loss,
            samples,
            sample_of,
            factor,
        })
    }

    /// d (the β part of the state).
    pub fn d(&self) -> usize {
        self.loss.d()
    }

    /// m = n(L − 1) (the φ part of the state).
    pub fn m(&self) -> usize {
        self.sample_of.len()
    }

    /// The reduced β flow alone.
    pub fn reduced(&self) -> &ReducedKq<'a> {
        &self.reduced
    }

    fn softmax(&self, beta: &[f64]) -> Softmax {
        let margins = self.loss.margins(beta);
        let n = self.samples.len();
        let log_opt: Vec<f64> = (0..n)
            .map(|i| {
                let terms = std::iter::once(0.0).chain(
                    margins
                        .iter()
                        .zip(&self.sample_of)
                        .filter(|(_, &s)| s == i)
                        .map(|(m, _)| -m),
                );
                -log_sum_exp(terms)
            })
            .collect();
        let log_sigma = margins
            .iter()
            .zip(&self.sample_of)
            .map(|(m, &i)| -m + log_opt[i])
            .collect();
        Softmax { log_opt, log_sigma }
    }

    /// dφ/dτ = e^τ (c/n) ℓ_i r_il at (τ, β), with ln ℓ_i = −γ_i,nopt − Δ_iσ_i,opt and
    /// r_il = σ_il σ_i,opt Δ_i.
    pub fn phi_rates(&self, tau: f64, beta: &[f64]) -> Vec<f64> {
        let sm = self.softmax(beta);
        self.rates_from(tau, &sm)
    }

    fn rates_from(&self, tau: f64, sm: &Softmax) -> Vec<f64> {
        let scale = (self.factor / self.samples.len() as f64).ln();
        sm.log_sigma
            .iter()
            .zip(&self.sample_of)
            .map(|(ls, &i)| {
                let s = self.samples[i];
                let log_loss = -s.nopt - s.delta * sm.log_opt[i].exp();
                (scale + tau + log_loss + ls + sm.log_opt[i] + s.delta.ln()).exp()
            })
            .collect()
    }

    /// Lemma A.1's β̇ (in τ): √(β^{⊙2} + κ^{⊙2}) ⊙ B dφ/dτ, from the φ rates.
    pub fn beta_rate_formula(&self, tau: f64, beta: &[f64]) -> Vec<f64> {
        let rates = self.phi_rates(tau, beta);
        let bphi = self.combine(&rates);
        bphi.iter()
            .zip(beta)
            .zip(self.reduced.kappa())
            .map(|((u, b), k)| b.hypot(*k) * u)
            .collect()
    }

    /// Bφ = Σ_il φ_il B_il.
    pub fn combine(&self, phi: &[f64]) -> Vec<f64> {
        let f = &self.loss.constraints().f;
        (0..self.d())
            .map(|j| (0..self.m()).map(|k| phi[k] * f[(k, j)]).sum())
            .collect()
    }
}

impl VectorField for PhiAugmented<'_> {
    fn dim(&self) -> usize {
        self.d() + self.m()
    }
    fn rhs(&self, tau: f64, z: &[f64], dz: &mut [f64]) {
        let d = self.d();
        let (beta, (db, dphi)) = (&z[..d], dz.split_at_mut(d));
        self.reduced.rhs(tau, beta, db);
        dphi.copy_from_slice(&self.phi_rates(tau, beta));
    }
    fn jvp(&self, tau: f64, z: &[f64], u: &[f64], out: &mut [f64]) {
        let d = self.d();
        let (beta, ub) = (&z[..d], &u[..d]);
        let (ob, ophi) = out.split_at_mut(d);
        self.reduced.jvp(tau, beta, ub, ob);
        let sm = self.softmax(beta);
        let rates = self.rates_from(tau, &sm);
        let dm = self.loss.margins(ub);
        let mut dbar = vec![0.0; self.samples.len()];
        for (k, &i) in self.sample_of.iter().enumerate() {
            dbar[i] += sm.log_sigma[k].exp() * dm[k];
        }
        for (k, &i) in self.sample_of.iter().enumerate() {
            let s = self.samples[i];
            let opt = sm.log_opt[i].exp();
            ophi[k] = rates[k] * (-dm[k] + (2.0 - s.delta * opt) * dbar[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::kq::toys;
    use num_dual::{Dual64, DualNum};

    /// dφ/dτ written plainly (no log domain), generic for forward-mode AD.
    fn rates_reference<T: DualNum<f64> + Copy>(aug: &PhiAugmented, tau: f64, beta: &[T]) -> Vec<T> {
        let f = &aug.loss.constraints().f;
        let margins: Vec<T> = (0..aug.m())
            .map(|k| (0..aug.d()).fold(T::from(0.0), |acc, j| acc + beta[j] * f[(k, j)]))
            .collect();
        let n = aug.samples.len();
        (0..aug.m())
            .map(|k| {
                let i = aug.sample_of[k];
                let s = aug.samples[i];
                let mut denom = T::from(1.0);
                for (kk, &ii) in aug.sample_of.iter().enumerate() {
                    if ii == i {
                        denom += (-margins[kk]).exp();
                    }
                }
                let opt = denom.recip();
                let sigma = (-margins[k]).exp() * opt;
                let loss = (-(opt * s.delta) - s.nopt).exp();
                loss * sigma * opt * (s.delta * tau.exp() * aug.factor / n as f64)
            })
            .collect()
    }

    #[test]
    fn phi_jvp_matches_forward_mode_ad() {
        let inst = toys::toy4();
        let loss = DiagonalLoss::new(&inst).unwrap();
        let aug = PhiAugmented::new(&loss, vec![0.3, 1.0, 0.5, 0.7], 2.0).unwrap();
        let (d, m) = (aug.d(), aug.m());
        let beta = [0.4, -0.7, 0.2, 0.1];
        let u = [0.3, 0.5, -0.2, 0.9];
        let tau = 1.5;
        let mut z = beta.to_vec();
        z.extend(vec![0.1; m]);
        let mut uz = u.to_vec();
        uz.extend(vec![0.0; m]);
        let mut out = vec![0.0; d + m];
        aug.jvp(tau, &z, &uz, &mut out);
        let dual: Vec<Dual64> = (0..d).map(|j| Dual64::new(beta[j], u[j])).collect();
        let reference = rates_reference(&aug, tau, &dual);
        let plain = aug.phi_rates(tau, &beta);
        for k in 0..m {
            assert!((plain[k] - reference[k].re).abs() <= 1e-13 * plain[k].abs());
            let err = (out[d + k] - reference[k].eps).abs();
            assert!(
                err <= 1e-12 * reference[k].eps.abs().max(1e-300),
                "k = {k}: {err}"
            );
        }
    }

    #[test]
    fn beta_formula_matches_the_reduced_flow() {
        let inst = toys::toy2b();
        let loss = DiagonalLoss::new(&inst).unwrap();
        let aug = PhiAugmented::new(&loss, vec![0.25, 1.0, 0.09, 0.49], 2.0).unwrap();
        let beta = [0.3, 0.8, -0.1, 0.05];
        let mut rhs = vec![0.0; 4];
        aug.reduced().rhs(0.7, &beta, &mut rhs);
        let formula = aug.beta_rate_formula(0.7, &beta);
        for j in 0..4 {
            assert!((rhs[j] - formula[j]).abs() <= 1e-14 * rhs[j].abs().max(1.0));
        }
    }
}

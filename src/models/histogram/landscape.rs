//! The df loss landscape on a level set {β} (spec 000 R10, R11, D1, D5): stationary points and
//! their Hessian spectra, the bad set and (near-)bad initializations, the variational (KKT)
//! characterization of the limit, and imbalanced initializations.

use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::StandardNormal;

use crate::stats;

use super::brent_root;
use super::layout;
use super::theorem2::Imbalance;
use super::HistogramError;

/// The critical point a df column sits at (spec 000 D1).
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnCritical {
    /// Minimizer v = σ√(μρ̄), q = m/v, σ = ±1 (`sign` > 0 or < 0).
    Minimum { sign: f64 },
    /// Saddle v = 0, q ⊥ m, ‖q‖² = β (exists only for β ≥ 0, and for β > 0 only if d ≥ 2):
    /// `direction` is projected onto m^⊥ and scaled to length √β (ignored when β = 0).
    Saddle { direction: DVector<f64> },
}

fn norm_sq(x: &[f64]) -> f64 {
    x.iter().map(|a| a * a).sum()
}

fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// The component of `x` orthogonal to m̂ = m/μ.
fn project_out(x: &[f64], m: &[f64], mu: f64) -> DVector<f64> {
    let along = dot(x, m) / (mu * mu);
    DVector::from_iterator(x.len(), x.iter().zip(m).map(|(xa, ma)| xa - along * ma))
}

/// The point (q, v) of one column at the requested critical point with ‖q‖² − v² = β (spec 000
/// D1). Errors: saddles with β < 0 (empty set), or with β > 0 when d = 1 or the direction is
/// parallel to m.
pub fn column_critical_point(
    m: &[f64],
    beta: f64,
    kind: &ColumnCritical,
) -> Result<(DVector<f64>, f64), HistogramError> {
    let mu = norm_sq(m).sqrt();
    match kind {
        ColumnCritical::Minimum { sign } => {
            let v = sign.signum() * (mu * Imbalance::new(beta / mu).rhob).sqrt();
            Ok((
                DVector::from_iterator(m.len(), m.iter().map(|ma| ma / v)),
                v,
            ))
        }
        ColumnCritical::Saddle { direction } => {
            if beta < 0.0 {
                return Err(HistogramError::NoSolution(format!(
                    "the saddle set {{v = 0, q ⊥ m, ‖q‖² = β}} is empty for β = {beta} < 0"
                )));
            }
            if beta == 0.0 {
                return Ok((DVector::zeros(m.len()), 0.0));
            }
            let perp = project_out(direction.as_slice(), m, mu);
            let perp_norm = perp.norm();
            if perp_norm <= 1e-12 * direction.norm() || perp_norm == 0.0 {
                return Err(HistogramError::NoSolution(
                    "saddle direction has no component orthogonal to m (always so for d = 1)"
                        .into(),
                ));
            }
            Ok((perp * (beta.sqrt() / perp_norm), 0.0))
        }
    }
}

/// Eigenvalues (ascending) of the (d+1)×(d+1) Hessian block of ℓ_i at a critical point
/// (spec 000 D1): minimum {0, μρ̄ (×(d−1)), 2Aμ}; saddle {−μρ̄, 0 (×(d−1)), μρ}.
pub fn column_hessian_spectrum(mu: f64, beta: f64, d: usize, kind: &ColumnCritical) -> Vec<f64> {
    let Imbalance { rho, rhob, a, .. } = Imbalance::new(beta / mu);
    let (low, middle, high) = match kind {
        ColumnCritical::Minimum { .. } => (0.0, mu * rhob, 2.0 * a * mu),
        ColumnCritical::Saddle { .. } => (-mu * rhob, 0.0, mu * rho),
    };
    let mut spectrum = vec![low];
    spectrum.extend(std::iter::repeat_n(middle, d - 1));
    spectrum.push(high);
    spectrum.sort_by(f64::total_cmp);
    spectrum
}

/// The critical point of the full df flow with column kinds `kinds` on the level set `betas`
/// (spec 000 D1), in the canonical layout.
pub fn df_critical_point(
    m: &DMatrix<f64>,
    betas: &[f64],
    kinds: &[ColumnCritical],
) -> Result<Vec<f64>, HistogramError> {
    let d = m.nrows();
    if betas.len() != d || kinds.len() != d {
        return Err(HistogramError::Invalid(
            "need one β and one kind per column".into(),
        ));
    }
    let mut z = vec![0.0; d * (d + 1)];
    for (i, (beta, kind)) in betas.iter().zip(kinds).enumerate() {
        let (q, v) = column_critical_point(m.column(i).as_slice(), *beta, kind)?;
        let block = &mut z[i * (d + 1)..(i + 1) * (d + 1)];
        block[..d].copy_from_slice(q.as_slice());
        block[d] = v;
    }
    Ok(z)
}

/// The Hessian spectrum (ascending) of ℓ_df at that critical point (spec 000 D1): the union of
/// the column spectra. Its index (number of negative eigenvalues) is the number of saddle
/// columns, and every saddle is strict.
pub fn df_critical_spectrum(m: &DMatrix<f64>, betas: &[f64], kinds: &[ColumnCritical]) -> Vec<f64> {
    let d = m.nrows();
    let mut spectrum: Vec<f64> = (0..d)
        .flat_map(|i| column_hessian_spectrum(m.column(i).norm(), betas[i], d, &kinds[i]))
        .collect();
    spectrum.sort_by(f64::total_cmp);
    spectrum
}

/// ℓ_df at a critical point: ½ Σ_{saddle columns} μ_i² (spec 000 D1).
pub fn df_critical_loss(m: &DMatrix<f64>, kinds: &[ColumnCritical]) -> f64 {
    kinds
        .iter()
        .zip(m.column_iter())
        .filter(|(kind, _)| matches!(kind, ColumnCritical::Saddle { .. }))
        .map(|(_, col)| 0.5 * col.norm_squared())
        .sum()
}

/// The bad-set function q_iᵀm_i + ρ̄(δ_i)μ_iv_i with δ_i = (‖q_i‖² − v_i²)/μ_i (spec 000 R10;
/// the paper's Remark 1.1 omits μ_i, E5). The column converges to a saddle iff it is 0.
pub fn bad_set_value(q: &[f64], v: f64, m: &[f64]) -> f64 {
    let mu = norm_sq(m).sqrt();
    let delta = (norm_sq(q) - v * v) / mu;
    dot(q, m) + Imbalance::new(delta).rhob * mu * v
}

/// q = (p/μ)m̂ + q⊥ with the component p = qᵀm solved so that the bad-set function equals ε
/// (spec 000 R10; Fig. 4 uses ε ∈ {0.1, 0.01}), for fixed q⊥ (projected onto m^⊥) and v.
/// f(p) = p + ρ̄(δ(p))μv − ε, δ(p) = (p²/μ² + ‖q⊥‖² − v²)/μ, is solved by Brent on the
/// guaranteed bracket ε ± ρ̄(δ(0))μ|v| (δ(p) ≥ δ(0) and ρ̄ decreases). A root always exists,
/// and for ε = 0 its δ is ≥ 0 automatically (E17); β changes with p.
pub fn bad_init_along_m(
    m: &[f64],
    q_perp: &[f64],
    v: f64,
    eps: f64,
) -> Result<DVector<f64>, HistogramError> {
    let mu = norm_sq(m).sqrt();
    if !(mu > 0.0 && v.is_finite() && eps.is_finite()) {
        return Err(HistogramError::Invalid("need μ > 0 and finite v, ε".into()));
    }
    let perp = project_out(q_perp, m, mu);
    let perp_sq = perp.norm_squared();
    let rhob_of = |p: f64| Imbalance::new(((p / mu).powi(2) + perp_sq - v * v) / mu).rhob;
    let f = |p: f64| p + rhob_of(p) * mu * v - eps;
    let half_width = rhob_of(0.0) * mu * v.abs();
    let p = if half_width == 0.0 {
        eps
    } else {
        brent_root(
            f,
            eps - half_width,
            eps + half_width,
            1e-15 * (eps.abs() + half_width),
        )?
    };
    Ok(perp + DVector::from_iterator(m.len(), m.iter().map(|ma| p / (mu * mu) * ma)))
}

/// A (near-)bad column with prescribed imbalance δ (β = μδ kept fixed): p = ε − ρ̄(δ)μv and
/// q⊥ along `perp_direction` with ‖q⊥‖² = μδ + v² − p²/μ² (spec 000 R10, E17). For ε = 0 this
/// is impossible when δ < 0 (‖q⊥‖² = δ(μ + ρ̄v²) < 0) and is the ray q = −v m̂ when δ = 0: the
/// error then says "no solution".
pub fn bad_init_with_imbalance(
    m: &[f64],
    perp_direction: &[f64],
    v: f64,
    delta: f64,
    eps: f64,
) -> Result<DVector<f64>, HistogramError> {
    let mu = norm_sq(m).sqrt();
    let p = eps - Imbalance::new(delta).rhob * mu * v;
    let along = p / mu;
    let perp_sq = mu * delta + (v - along) * (v + along);
    if perp_sq < 0.0 {
        return Err(HistogramError::NoSolution(format!(
            "no column with δ = {delta}, v = {v} on q·m + ρ̄μv = {eps}: it would need \
             ‖q⊥‖² = {perp_sq:e} < 0"
        )));
    }
    let perp = project_out(perp_direction, m, mu);
    let perp_norm = perp.norm();
    let perp = if perp_sq == 0.0 {
        perp * 0.0
    } else if perp_norm > 0.0 {
        perp * (perp_sq.sqrt() / perp_norm)
    } else {
        return Err(HistogramError::Invalid(
            "perp_direction has no component orthogonal to m".into(),
        ));
    };
    Ok(perp + DVector::from_iterator(m.len(), m.iter().map(|ma| along / mu * ma)))
}

/// Φ_i(u) = ½(u + μ²/u) + (β/2) ln u, u = v_i² > 0: the reduced variational objective whose
/// minimizer is the limit of column i (spec 000 D5).
pub fn phi_column(u: f64, mu: f64, beta: f64) -> f64 {
    0.5 * (u + mu * mu / u) + 0.5 * beta * u.ln()
}

/// argmin Φ_i = μρ̄(β/μ), the positive root of u² + βu − μ² (unique, Φ'' > 0; spec 000 D5).
pub fn phi_minimizer(mu: f64, beta: f64) -> f64 {
    mu * Imbalance::new(beta / mu).rhob
}

/// Φ(Q, v) = Σ_i \[½(‖q_i‖² + v_i²) + (β_i/2) ln v_i²\], minimized (subject to Q Diag(v) = M) by the
/// df and tf limits up to sign (spec 000 D5); β = 0 gives the minimum-Frobenius factorization.
pub fn phi(z: &[f64], betas: &[f64]) -> f64 {
    let d = layout::alphabet_size(z.len());
    (0..d)
        .map(|i| {
            let (q, v) = layout::column(z, d, i);
            0.5 * (norm_sq(q) + v * v) + 0.5 * betas[i] * (v * v).ln()
        })
        .sum()
}

/// KKT residuals of min Φ s.t. Q Diag(v) = M at z (spec 000 D5).
#[derive(Debug, Clone, PartialEq)]
pub struct KktResiduals {
    /// max_{a,i} |(Q Diag(v) − M)\[a, i\]| (primal feasibility).
    pub feasibility: f64,
    /// |v_i + β_i/v_i − λ_iᵀq_i| per column (stationarity in v; stationarity in Q defines Λ).
    pub stationarity: Vec<f64>,
    /// The multiplier Λ = Q Diag(v)⁻¹.
    pub multipliers: DMatrix<f64>,
}

/// The KKT residuals at z for the level set `betas` (those of the initialization).
pub fn kkt_residuals(m: &DMatrix<f64>, z: &[f64], betas: &[f64]) -> KktResiduals {
    let d = m.nrows();
    let (q, v) = layout::state_to_qv(z);
    let multipliers = DMatrix::from_fn(d, d, |a, i| q[(a, i)] / v[i]);
    let feasibility = stats::max_abs((&q * DMatrix::from_diagonal(&v) - m).iter());
    let stationarity = (0..d)
        .map(|i| {
            let lambda_dot_q = multipliers.column(i).dot(&q.column(i));
            (v[i] + betas[i] / v[i] - lambda_dot_q).abs()
        })
        .collect();
    KktResiduals {
        feasibility,
        stationarity,
        multipliers,
    }
}

/// A unit vector drawn uniformly, at angle ≥ asin(0.1) from m.
fn unit_vector_off(m: &[f64], rng: &mut impl Rng) -> DVector<f64> {
    let mu_sq = norm_sq(m);
    loop {
        let u = DVector::from_fn(m.len(), |_, _| rng.sample::<f64, _>(StandardNormal)).normalize();
        let cos_sq = dot(u.as_slice(), m).powi(2) / mu_sq;
        if cos_sq <= 0.99 {
            return u;
        }
    }
}

/// The imbalanced initialization of spec 000 R11: column 1 has δ_1 (β_1 = μ_1δ_1) with
/// q_1 = s·u, v_1 = √(s² − β_1), s = √(max(β_1, 0) + 1); the other columns are balanced,
/// q_i = u_i, v_i = 1 (u random unit vectors not parallel to m_i). Then α = min(μ_1ρ̄(δ_1),
/// min_{i≥2} μ_i); for eq α = min(1/ρ(δ_1), 1), not ρ(δ_1) as the paper's Remark 1.2 says (E8).
pub fn imbalanced_init(
    m: &DMatrix<f64>,
    delta_1: f64,
    rng: &mut impl Rng,
) -> Result<Vec<f64>, HistogramError> {
    let d = m.nrows();
    if d < 2 {
        return Err(HistogramError::Invalid(
            "needs d ≥ 2 (q_i not parallel to m_i)".into(),
        ));
    }
    let mut z = vec![0.0; d * (d + 1)];
    for i in 0..d {
        let m_i = m.column(i);
        let u = unit_vector_off(m_i.as_slice(), rng);
        let (scale, v) = if i == 0 {
            let beta = m_i.norm() * delta_1;
            let s_sq = beta.max(0.0) + 1.0;
            (s_sq.sqrt(), (s_sq - beta).sqrt())
        } else {
            (1.0, 1.0)
        };
        let block = &mut z[i * (d + 1)..(i + 1) * (d + 1)];
        block[..d]
            .iter_mut()
            .zip(u.iter())
            .for_each(|(o, ua)| *o = scale * ua);
        block[d] = v;
    }
    Ok(z)
}

#[cfg(test)]
#[path = "landscape_tests.rs"]
mod tests;

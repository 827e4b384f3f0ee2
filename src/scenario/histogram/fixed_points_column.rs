//! The df-column half of `fixed-points` (spec 000 D1, D4): one column ℓ_i = ½‖v_iq_i − m_i‖² as
//! a flow of its own, its stationary points on a level set β (constructed, and found by Newton
//! from perturbed and from random starts) against the D1 spectra and D4's κ, and the full df
//! flow's critical points (Morse index |S|, loss ½Σ_S μ_i², κ at the limit).

use std::cell::RefCell;

use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::StandardNormal;

use crate::analysis::linearize::{conditioning, hessian, inertia, symmetric_eigenvalues};
use crate::analysis::stationary::{find_stationary, NewtonOptions, Target};
use crate::analysis::AnalysisError;
use crate::flow::GradientFlow;
use crate::models::histogram::landscape::{
    column_critical_point, column_hessian_spectrum, df_critical_loss, df_critical_point,
    df_critical_spectrum, ColumnCritical,
};
use crate::models::histogram::{DfClosedForm, DfFlow, Imbalance};
use crate::plot::{BarPanel, LineStyle};
use crate::scenario::{RunError, Table};
use crate::stats;

use super::fixed_points::Params;
use super::worst_case::WorstCase;

/// |λ| ≤ ZERO_MODE·max|λ| counts as a zero mode (the rescaling symmetry; rounding ~1e-16).
const ZERO_MODE: f64 = 1e-10;

/// Column i of the df flow as a flow of its own on (q_i, v_i) ∈ ℝ^{d+1}: the full flow is
/// block-diagonal, so its block i is evaluated with the other blocks at zero (scratch state in
/// a `RefCell`: no allocation per call).
pub(super) struct ColumnFlow {
    df: DfFlow,
    i: usize,
    scratch: RefCell<[Vec<f64>; 3]>,
}

impl ColumnFlow {
    pub fn new(m: DMatrix<f64>, i: usize) -> Self {
        let df = DfFlow::new(m);
        let n = df.dim();
        Self {
            df,
            i,
            scratch: RefCell::new([vec![0.0; n], vec![0.0; n], vec![0.0; n]]),
        }
    }
    fn block(&self) -> std::ops::Range<usize> {
        let b = self.df.d() + 1;
        self.i * b..(self.i + 1) * b
    }
}

impl GradientFlow for ColumnFlow {
    fn dim(&self) -> usize {
        self.df.d() + 1
    }
    fn loss(&self, z: &[f64]) -> f64 {
        let mut s = self.scratch.borrow_mut();
        s[0][self.block()].copy_from_slice(z);
        self.df.column_loss(&s[0], self.i)
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let mut s = self.scratch.borrow_mut();
        let [full, _, out] = &mut *s;
        full[self.block()].copy_from_slice(z);
        self.df.grad(full, out);
        g.copy_from_slice(&out[self.block()]);
    }
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
        let mut s = self.scratch.borrow_mut();
        let [full, dir, prod] = &mut *s;
        full[self.block()].copy_from_slice(z);
        dir[self.block()].copy_from_slice(u);
        self.df.hvp(full, dir, prod);
        out.copy_from_slice(&prod[self.block()]);
    }
}

/// What the column and full-flow studies measured, for the checks.
#[derive(Default)]
pub(super) struct ColumnTally {
    /// ‖∇ℓ‖ at the constructed points.
    pub grad: WorstCase,
    /// Hessian spectra at the constructed points (column and full flow) vs D1.
    pub hessian: WorstCase,
    /// κ from dense Hessians vs D4 (relative).
    pub kappa: WorstCase,
    /// Spectra at the Newton-found points vs D1 on their own level set.
    pub newton: WorstCase,
    pub newton_failures: Vec<String>,
    /// Level sets β ≥ 0 for which the model built no saddle.
    pub saddles_missing: Vec<String>,
    /// Saddles the model built for β < 0 (there are none).
    pub saddles_for_negative_beta: usize,
    /// Saddles Newton found from random starts, and their smallest β.
    pub saddles_found: usize,
    pub saddle_min_beta: f64,
    /// Full-flow critical points whose index or loss disagrees with D1.
    pub full_flow_failures: Vec<String>,
    pub full_flow_points: usize,
}

impl ColumnTally {
    pub fn new() -> Self {
        Self {
            saddle_min_beta: f64::INFINITY,
            ..Default::default()
        }
    }
}

pub(super) fn analysis_err(e: AnalysisError) -> RunError {
    RunError::Other(e.to_string())
}

/// β = ‖q‖² − v² of a column state (q, v).
fn beta_of(z: &[f64]) -> f64 {
    let (q, v) = z.split_at(z.len() - 1);
    q.iter().map(|a| a * a).sum::<f64>() - v[0] * v[0]
}

fn label(kind: &ColumnCritical) -> &'static str {
    match kind {
        ColumnCritical::Minimum { sign } if *sign > 0.0 => "min+",
        ColumnCritical::Minimum { .. } => "min−",
        ColumnCritical::Saddle { .. } => "saddle",
    }
}

/// k as a subscript (k < 10), for category labels.
pub(super) fn subscript(k: usize) -> char {
    char::from_u32(0x2080 + (k % 10) as u32).unwrap_or('?')
}

/// max |a_k − b_k| / max|b| of two ascending spectra.
fn spectrum_error(numerical: &[f64], formula: &[f64]) -> f64 {
    let scale = stats::max_abs(formula.iter()).max(f64::MIN_POSITIVE);
    stats::max(numerical.iter().zip(formula).map(|(a, b)| (a - b).abs())) / scale
}

fn hessian_eigenvalues<F: GradientFlow>(flow: &F, z: &[f64]) -> Result<Vec<f64>, RunError> {
    let h = hessian(flow, z).map_err(analysis_err)?;
    symmetric_eigenvalues(&h.matrix).map_err(analysis_err)
}

/// The stationary points of the column on the level set β: minima ±, and the saddle when
/// β ≥ 0 (D1). Each is checked for stationarity and its dense Hessian spectrum against D1 (κ
/// against D4 at the minimum), and Newton from perturbed starts must return to a point of the
/// same kind. Eigenvalues go to `series`; returns the bar panel of this β.
pub(super) fn level_set(
    p: &Params,
    flow: &ColumnFlow,
    beta: f64,
    rng: &mut impl Rng,
    newton_rng: &mut impl Rng,
    t: &mut ColumnTally,
    series: &mut Table,
) -> Result<BarPanel, RunError> {
    let m_col: Vec<f64> = flow.df.m().column(flow.i).iter().copied().collect();
    let mu = flow.df.m().column(flow.i).norm();
    let d = flow.df.d();
    let direction = DVector::from_fn(d, |_, _| rng.sample::<f64, _>(StandardNormal));
    let kinds = [
        ColumnCritical::Minimum { sign: 1.0 },
        ColumnCritical::Minimum { sign: -1.0 },
        ColumnCritical::Saddle { direction },
    ];
    let options = NewtonOptions::new(Target::Any);
    let (mut categories, mut numerical, mut formula) = (vec![], vec![], vec![]);
    for kind in &kinds {
        let name = label(kind);
        let (q, v) = match column_critical_point(&m_col, beta, kind) {
            Ok(point) => point,
            Err(_) if beta < 0.0 && name == "saddle" => continue,
            Err(e) => return Err(RunError::Other(e.to_string())),
        };
        if beta < 0.0 && name == "saddle" {
            t.saddles_for_negative_beta += 1;
        }
        let mut z: Vec<f64> = q.iter().copied().collect();
        z.push(v);
        let mut g = vec![0.0; z.len()];
        flow.grad(&z, &mut g);
        t.grad
            .add(crate::flow::norm(&g), || format!("β = {beta}, {name}"));
        let eig = hessian_eigenvalues(flow, &z)?;
        let expected = column_hessian_spectrum(mu, beta, d, kind);
        t.hessian.add(spectrum_error(&eig, &expected), || {
            format!("β = {beta}, {name}")
        });
        for (k, (a, b)) in eig.iter().zip(&expected).enumerate() {
            series.push(vec![
                beta.into(),
                name.into(),
                k.into(),
                (*a).into(),
                (*b).into(),
            ]);
        }
        if name != "min−" {
            let short = if name == "saddle" { "s" } else { "m" };
            categories.extend((1..=eig.len()).map(|k| format!("{short}{}", subscript(k))));
            numerical.extend(&eig);
            formula.extend(&expected);
        }
        if name == "min+" {
            // D4 for one column: κ = 2Aμ/(μρ̄) = 1 + ρ²
            let kappa = conditioning(&eig, ZERO_MODE)
                .map_err(analysis_err)?
                .kappa_nonzero;
            let rho = Imbalance::new(beta / mu).rho;
            let predicted = 1.0 + rho * rho;
            t.kappa.add((kappa / predicted - 1.0).abs(), || {
                format!("one column, β = {beta}: {kappa} vs 1 + ρ² = {predicted}")
            });
        }
        // Newton from perturbed starts must come back to a point of the same kind, with the
        // spectrum the formula gives on its own level set (Newton does not keep β)
        for start in 0..p.starts {
            let z0: Vec<f64> = z
                .iter()
                .map(|x| x + *p.perturbation * newton_rng.sample::<f64, _>(StandardNormal))
                .collect();
            let where_ = || format!("β = {beta}, {name}, start {start}");
            let found = match find_stationary(flow, &z0, &options) {
                Ok(found) => found,
                Err(e) => {
                    t.newton_failures.push(format!("{}: {e}", where_()));
                    continue;
                }
            };
            let index = usize::from(name == "saddle");
            let loss = if index == 1 { 0.5 * mu * mu } else { 0.0 };
            if found.morse_index() != index || (found.loss - loss).abs() > 1e-8 * mu * mu {
                t.newton_failures.push(format!(
                    "{}: reached index {} with loss {:e}",
                    where_(),
                    found.morse_index(),
                    found.loss
                ));
                continue;
            }
            let own = column_hessian_spectrum(mu, beta_of(&found.z), d, kind);
            t.newton
                .add(spectrum_error(&found.hessian_eigenvalues, &own), where_);
        }
    }
    if beta >= 0.0 && !categories.iter().any(|c| c.starts_with('s')) {
        t.saddles_missing.push(format!("β = {beta}"));
    }
    let title = if beta < 0.0 {
        format!("Hessian spectra, β = {beta} (no saddle for β < 0)")
    } else {
        format!("Hessian spectra, β = {beta}")
    };
    Ok(BarPanel::new(
        title,
        "λ₁ ≤ λ₂ ≤ … at the minimum (m) and the saddle (s)",
        "λ",
        categories,
    )
    .group("dense Hessian", numerical, LineStyle::Solid)
    .group("formula (D1)", formula, LineStyle::Dashed))
}

/// Newton from random starts anywhere: every saddle it finds lies in {v = 0, q ⊥ m}, whose
/// β = ‖q‖² ≥ 0, so no level set β < 0 holds a saddle.
pub(super) fn saddle_hunt(p: &Params, flow: &ColumnFlow, rng: &mut impl Rng, t: &mut ColumnTally) {
    let options = NewtonOptions::new(Target::Any);
    for _ in 0..p.random_starts {
        let z0: Vec<f64> = (0..=flow.df.d())
            .map(|_| *p.random_scale * rng.sample::<f64, _>(StandardNormal))
            .collect();
        if let Ok(found) = find_stationary(flow, &z0, &options) {
            if found.morse_index() > 0 {
                t.saddles_found += 1;
                t.saddle_min_beta = stats::smaller(t.saddle_min_beta, beta_of(&found.z));
            }
        }
    }
}

/// D1 and D4 on the full df flow: columns get β_i = betas[i mod len]; at the limit (all
/// minima) κ against D4, and at the critical point whose columns with β_i ≥ 0 are saddles the
/// spectrum, Morse index |S| and loss ½Σ_S μ_i².
pub(super) fn full_flow(
    m: &DMatrix<f64>,
    p: &Params,
    rng: &mut impl Rng,
    t: &mut ColumnTally,
) -> Result<(), RunError> {
    let d = m.nrows();
    let df = DfFlow::new(m.clone());
    let betas: Vec<f64> = (0..d).map(|i| p.betas[i % p.betas.len()]).collect();
    let minima: Vec<ColumnCritical> = (0..d)
        .map(|_| ColumnCritical::Minimum { sign: 1.0 })
        .collect();
    let model_err = |e: crate::models::histogram::HistogramError| RunError::Other(e.to_string());
    let z = df_critical_point(m, &betas, &minima).map_err(model_err)?;
    let eig = hessian_eigenvalues(&df, &z)?;
    let kappa = conditioning(&eig, ZERO_MODE)
        .map_err(analysis_err)?
        .kappa_nonzero;
    let predicted = DfClosedForm::new(m, &z).kappa();
    t.kappa.add((kappa / predicted - 1.0).abs(), || {
        format!("full df flow at its limit: {kappa} vs {predicted}")
    });
    let mixed: Vec<ColumnCritical> = betas
        .iter()
        .map(|&b| {
            if b >= 0.0 {
                ColumnCritical::Saddle {
                    direction: DVector::from_fn(d, |_, _| rng.sample::<f64, _>(StandardNormal)),
                }
            } else {
                ColumnCritical::Minimum { sign: -1.0 }
            }
        })
        .collect();
    for kinds in [&minima, &mixed] {
        let z = df_critical_point(m, &betas, kinds).map_err(model_err)?;
        let eig = hessian_eigenvalues(&df, &z)?;
        let expected = df_critical_spectrum(m, &betas, kinds);
        t.hessian.add(spectrum_error(&eig, &expected), || {
            "full df flow".to_string()
        });
        let saddles = kinds
            .iter()
            .filter(|k| matches!(k, ColumnCritical::Saddle { .. }))
            .count();
        let index = inertia(&eig, ZERO_MODE).negative;
        let (loss, expected_loss) = (df.loss(&z), df_critical_loss(m, kinds));
        t.full_flow_points += 1;
        if index != saddles || (loss - expected_loss).abs() > 1e-12 * expected_loss.max(1.0) {
            t.full_flow_failures.push(format!(
                "{saddles} saddle columns: index {index}, loss {loss} vs {expected_loss}"
            ));
        }
    }
    Ok(())
}

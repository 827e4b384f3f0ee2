//! Setup shared by the transformer (ℓ_tf) scenarios and the solver studies of seed 000: tasks by
//! name, seeded datasets and Gaussian initializations, the exact common limit of both flows and
//! Hessian spectra with the rescaling zero modes set apart.

use nalgebra::DMatrix;
use serde::Serialize;

use super::instance_files::{df_instance, tf_instance, InstanceFiles};
use crate::instance::{run_instance, Arrays};

use crate::analysis::linearize::{conditioning, hessian, symmetric_eigenvalues, Conditioning};
use crate::flow::GradientFlow;
use crate::models::histogram::layout::{column, gaussian_state, v_index};
use crate::models::histogram::{task_matrix, DfClosedForm, HistogramData, Task, TfFlow};
use crate::scenario::{InputError, RunContext, RunError, Scenario};
use crate::stats;

/// Random stream of the dataset of trial k: `DATA_STREAM + k`. Data and initialization use
/// separate streams, so changing one parameter keeps the other's random numbers (common random
/// numbers across parameter values).
pub const DATA_STREAM: u64 = 1_000;
/// Random stream of the initialization of trial k: `INIT_STREAM + k`.
pub const INIT_STREAM: u64 = 2_000;

pub use super::task_param::{default_d_thr, TaskName};

/// The dataset of trial `trial`: n strings of length `seq_len` on d symbols (spec 000 §1.3).
pub fn trial_data(
    ctx: &RunContext,
    task: &Task,
    d: usize,
    seq_len: usize,
    n: usize,
    trial: usize,
) -> HistogramData {
    let mut rng = ctx.rng(DATA_STREAM + trial as u64);
    HistogramData::sample(task_matrix(task, d), seq_len, n, &mut rng)
}

/// The initialization of trial `trial`: Gaussian with standard deviation σ.
pub fn trial_init(ctx: &RunContext, d: usize, sigma: f64, trial: usize) -> Vec<f64> {
    gaussian_state(&mut ctx.rng(INIT_STREAM + trial as u64), d, sigma)
}

/// The transformer flow of a dataset, refusing data whose H_a are singular: then zero loss does
/// not force Q Diag(v) = M (spec 000 R3, E16) and the tf limit is not the df one.
pub fn tf_flow_checked(data: &HistogramData) -> Result<(TfFlow, f64, f64), RunError> {
    let flow = TfFlow::from_data(data);
    let (lambda_min, cond) = flow.moments().conditioning();
    if lambda_min.is_nan() || lambda_min <= 0.0 {
        return Err(RunError::Other(format!(
            "the row moment matrices H_a are singular (min λ_min = {lambda_min:e}): n is too \
             small for Q Diag(v) = M to be the only zero-loss set (spec 000 R3, E16)"
        )));
    }
    Ok((flow, lambda_min, cond))
}

/// Comparison of two limit states column by column, modulo the sign symmetry
/// (q_i, v_i) ↦ (−q_i, −v_i) of both flows (spec 000 §2.7.5, R5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SignAlignment {
    /// Columns whose v_i have opposite signs.
    pub flipped: usize,
    /// max |a − s·b| over all entries, s_i = sign(v_a,i v_b,i).
    pub max_diff_mod_sign: f64,
    /// max |a − b| without alignment (what "the limits coincide", E10, would need).
    pub max_diff_raw: f64,
}

/// Compares states `a` and `b` (canonical layout) modulo per-column sign.
pub fn align_signs(a: &[f64], b: &[f64], d: usize) -> SignAlignment {
    let mut out = SignAlignment {
        flipped: 0,
        max_diff_mod_sign: 0.0,
        max_diff_raw: 0.0,
    };
    for i in 0..d {
        let (qa, va) = column(a, d, i);
        let (qb, vb) = column(b, d, i);
        let sign = if va * vb < 0.0 { -1.0 } else { 1.0 };
        out.flipped += usize::from(sign < 0.0);
        for (x, y) in qa.iter().chain([&va]).zip(qb.iter().chain([&vb])) {
            out.max_diff_mod_sign = stats::larger(out.max_diff_mod_sign, (x - sign * y).abs());
            out.max_diff_raw = stats::larger(out.max_diff_raw, (x - y).abs());
        }
    }
    out
}

/// The exact limit both flows share up to sign (spec 000 R5, D2): column i of the df
/// closed-form limit (v_i² = μ_iρ̄_i, q_i = m_i/v_i, from the conserved β_i), with the sign of
/// v_i taken from `signs_from` (e.g. the end state of the tf flow).
pub fn limit_with_signs(df: &DfClosedForm, signs_from: &[f64], d: usize) -> Vec<f64> {
    let mut z = df.limit_state();
    for i in 0..d {
        if z[v_index(d, i)] * signs_from[v_index(d, i)] < 0.0 {
            z[i * (d + 1)..(i + 1) * (d + 1)]
                .iter_mut()
                .for_each(|x| *x = -*x);
        }
    }
    z
}

/// The spectrum of ∇²ℓ at z (dense, from hvp), ascending, with its conditioning; eigenvalues
/// with |λ| ≤ `zero_rel_tol`·max|λ| are zero modes (at a limit: the d rescaling directions).
pub struct HessianSpectrum {
    pub values: Vec<f64>,
    pub conditioning: Conditioning,
    /// max|H − Hᵀ| / max|H| of the assembled matrix: a bound on hvp inconsistencies.
    pub relative_asymmetry: f64,
}

/// Dense Hessian spectrum of `flow` at `z` (spec 000 D4, R4).
pub fn hessian_spectrum<F: GradientFlow + ?Sized>(
    flow: &F,
    z: &[f64],
    zero_rel_tol: f64,
) -> Result<HessianSpectrum, RunError> {
    let analysis = |e: crate::analysis::AnalysisError| RunError::Other(e.to_string());
    let h = hessian(flow, z).map_err(analysis)?;
    let values = symmetric_eigenvalues(&h.matrix).map_err(analysis)?;
    let conditioning = conditioning(&values, zero_rel_tol).map_err(analysis)?;
    Ok(HessianSpectrum {
        values,
        conditioning,
        relative_asymmetry: h.relative_asymmetry(),
    })
}

/// Which loss a solver study trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowKind {
    /// ℓ_df = ½‖Q Diag(v) − M‖² (spec 000 §2.2); its closed form is the exact reference.
    Df,
    /// ℓ_tf on the sampled strings (spec 000 §2.3).
    Tf,
}

impl FlowKind {
    /// "df" or "tf".
    pub fn label(self) -> &'static str {
        match self {
            FlowKind::Df => "df",
            FlowKind::Tf => "tf",
        }
    }
}

/// One problem of a solver study (`work-precision`, `stiffness-report`): its task matrix, its
/// dataset (ℓ_tf only: ℓ_df needs only M) and its initial state, from the user's files or drawn
/// as trial 0 (problems of equal d share the draws).
pub struct StudyProblem {
    pub m: DMatrix<f64>,
    pub data: Option<HistogramData>,
    pub z0: Vec<f64>,
}

/// What a solver-study problem draws when no file replaces it.
pub struct StudyDraw<'a> {
    pub task: &'a Task,
    pub d: usize,
    pub sigma: f64,
    pub seq_len: usize,
    pub n: usize,
}

impl StudyProblem {
    /// The files' M (and one dataset, for ℓ_tf) and initial state, else the draws of `draw`.
    pub fn new(
        kind: FlowKind,
        files: &InstanceFiles,
        draw: &StudyDraw,
        ctx: &RunContext,
    ) -> Result<Self, RunError> {
        let data =
            match kind {
                FlowKind::Df => None,
                FlowKind::Tf => Some(files.single_dataset(|| {
                    trial_data(ctx, draw.task, draw.d, draw.seq_len, draw.n, 0)
                })?),
            };
        let m = match &data {
            Some(data) => data.m.clone(),
            None => files.task_matrix(|| task_matrix(draw.task, draw.d)),
        };
        let z0 = files.single_init(|| trial_init(ctx, m.nrows(), draw.sigma, 0))?;
        Ok(StudyProblem { m, data, z0 })
    }

    /// The alphabet size d.
    pub fn d(&self) -> usize {
        self.m.nrows()
    }

    /// The gradient flow of this problem's loss (ℓ_tf refuses singular H_a).
    pub fn flow(&self) -> Result<Box<dyn GradientFlow>, RunError> {
        Ok(match &self.data {
            None => Box::new(crate::models::histogram::DfFlow::new(self.m.clone())),
            Some(data) => Box::new(tf_flow_checked(data)?.0),
        })
    }

    /// The arrays this problem used (ℓ_df: M and the state; ℓ_tf: with the strings).
    pub fn instance(&self) -> Arrays {
        match &self.data {
            None => df_instance(&self.m, vec![self.z0.clone()]),
            Some(data) => tf_instance(data, vec![self.z0.clone()]),
        }
    }
}

/// `instance.npz` of a solver study: the problems' arrays merged into one instance when they
/// agree (e.g. all on one user file: the df problems then hold M, Q0, v0 and the tf ones add
/// the strings), so that it feeds back as `data_file`/`init_file`; otherwise (the built-in
/// problems of different d or σ) each problem's under `problem<k>_`.
pub fn study_instance(problems: &[&StudyProblem]) -> Arrays {
    let mut merged = Arrays::new();
    for arrays in problems.iter().map(|p| p.instance()) {
        for (name, a) in arrays.iter() {
            if merged.get(name).is_some_and(|held| held != a) {
                return run_instance(
                    problems
                        .iter()
                        .enumerate()
                        .map(|(k, p)| (format!("problem{k}"), p.instance()))
                        .collect(),
                );
            }
            merged.insert(name, a.clone());
        }
    }
    merged
}

/// Reads a solver study's files: an init file must fit the data's alphabet, else every
/// problem's d; ℓ_tf problems need one dataset with definite H_a.
pub fn read_study_files(
    sc: &Scenario,
    data_file: Option<&std::path::Path>,
    init_file: Option<&std::path::Path>,
    problems: &[(FlowKind, usize)],
) -> Result<InstanceFiles, InputError> {
    let d_first = problems.first().map_or(2, |p| p.1);
    let files = InstanceFiles::read(sc, data_file, init_file, d_first)?;
    if let Some(init) = files.init() {
        for &(_, d) in problems {
            init.require_alphabet(files.d(d))
                .map_err(|e| files.init_error(e))?;
        }
    }
    if problems.iter().any(|p| p.0 == FlowKind::Tf) {
        files.require_tf_single()?;
    } else {
        files.require_df_single()?;
    }
    Ok(files)
}

/// The dataset sizes of a transformer scenario: an alphabet (d ≥ 2), non-empty strings, and at
/// least d strings, without which the H_a are singular and zero loss does not force
/// Q Diag(v) = M (spec 000 R3, E16).
pub fn require_tf_data(
    sc: &Scenario,
    d: usize,
    seq_len: usize,
    n: usize,
) -> Result<(), InputError> {
    if d < 2 {
        return Err(sc.invalid("params.d", format!("the alphabet needs d ≥ 2, got {d}")));
    }
    if seq_len == 0 {
        return Err(sc.invalid("params.seq_len", "strings need at least one symbol"));
    }
    if n < d {
        return Err(sc.invalid(
            "params.n",
            format!("n = {n} < d = {d}: the H_a are singular (spec R3, E16)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::histogram::layout::betas;
    use crate::models::histogram::DfFlow;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn sign_alignment_counts_flips_and_ignores_them() {
        let d = 4;
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let a = gaussian_state(&mut rng, d, 1.0);
        let mut b = a.clone();
        for i in [1, 3] {
            b[i * (d + 1)..(i + 1) * (d + 1)]
                .iter_mut()
                .for_each(|x| *x = -*x);
        }
        b[0] += 1e-3;
        let s = align_signs(&a, &b, d);
        assert_eq!(s.flipped, 2);
        assert!((s.max_diff_mod_sign - 1e-3).abs() < 1e-15, "{s:?}");
        let largest_flipped = stats::max_abs(
            [1, 3]
                .iter()
                .flat_map(|&i| a[i * (d + 1)..(i + 1) * (d + 1)].iter()),
        );
        assert_eq!(s.max_diff_raw, 2.0 * largest_flipped);
    }

    /// The signed limit is a zero of both losses on the β level set of the init, and at it the
    /// df Hessian has exactly d zero modes and smallest nonzero eigenvalue α (spec D2, D4).
    #[test]
    fn signed_limit_is_a_common_zero_with_the_initial_betas() {
        let d = 5;
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let data = HistogramData::sample(task_matrix(&Task::Lt, d), 30, 12, &mut rng);
        let z0 = gaussian_state(&mut rng, d, 0.5);
        let signs = gaussian_state(&mut rng, d, 1.0);
        let closed = DfClosedForm::new(&data.m, &z0);
        let z = limit_with_signs(&closed, &signs, d);
        for i in 0..d {
            assert!(z[v_index(d, i)] * signs[v_index(d, i)] > 0.0, "column {i}");
        }
        let (tf, df) = (TfFlow::from_data(&data), DfFlow::new(data.m.clone()));
        let mut g = vec![0.0; z.len()];
        for flow in [&tf as &dyn GradientFlow, &df] {
            flow.grad(&z, &mut g);
            let grad_max = stats::max_abs(g.iter());
            assert!(flow.loss(&z) < 1e-24 && grad_max < 1e-10, "{grad_max:e}");
        }
        let (mut b0, mut b) = (vec![0.0; d], vec![0.0; d]);
        betas(&z0, &mut b0);
        betas(&z, &mut b);
        for (x, y) in b0.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-13 * x.abs().max(1.0), "β {x} vs {y}");
        }
        let spectrum = hessian_spectrum(&df, &z, 1e-9).unwrap();
        assert_eq!(spectrum.conditioning.zero_modes, d);
        let alpha = closed.alpha();
        assert!((spectrum.conditioning.smallest_nonzero - alpha).abs() <= 1e-12 * alpha);
    }
}

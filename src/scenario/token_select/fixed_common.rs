//! What the fixed-decoder scenarios share (spec 003 §4.2, §5, §8): the model with its W-SVM
//! and constants, the initializations, the log-spaced checkpoints, and one driver that runs a
//! [`FixedRule`] and measures every iterate in the log domain.

use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::analysis::svm::{one_minus_cos, L2Solution, RankOneConstraints};
use crate::attention::logdomain::log_sum_exp;
use crate::attention::{Assumptions, Attention, FixedDecoder, Loss};
use crate::flow::{norm, recorded_iterations, Recording};
use crate::models::token_select::{FixedRule, FixedStepper, StepReport};
use crate::scenario::param::Positive;
use crate::scenario::{Report, RunContext, RunError};
use crate::stats;

use super::common::{instance_arrays, w_svm, DataName, Source, UserFiles, FIRST_FREE_STREAM};

/// A fixed-decoder problem with its W-SVM and the constants of Sec. 3.1 (spec 003 §1.1, §3).
pub struct Setup {
    pub data: Source,
    /// The tokens and decoder, as `instance.npz` records them.
    tokens: crate::attention::Instance,
    /// The init file's starts (vec(W₀)), replacing the drawn initializations.
    user_starts: Option<Vec<Vec<f64>>>,
    pub model: FixedDecoder,
    pub constraints: RankOneConstraints,
    pub svm: L2Solution,
    /// W̄_mm = W_mm/‖W_mm‖ (vec, column-major).
    pub wmm_unit: Vec<f64>,
    /// Γ = 1/‖W_mm‖.
    pub margin: f64,
    /// B = max ‖x_{i,t}‖.
    pub token_bound: f64,
    pub assumptions: Assumptions,
}

impl Setup {
    /// The named data (or the user's `data_file`) with the exponential loss (the paper's
    /// theory) and its W-SVM; the init file's starts (at most `max_starts`) if one is given.
    pub fn build(
        data: DataName,
        files: UserFiles,
        max_starts: usize,
        ctx: &RunContext,
    ) -> Result<Self, RunError> {
        let (source, inst) = files.instance(data, ctx.scenario)?;
        let user_starts = files.starts(inst.data.d, max_starts, ctx.scenario)?;
        let (constraints, svm) = w_svm(&inst)?;
        let assumptions = inst.data.assumptions(&inst.decoder, &inst.opt);
        let model = FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential)
            .map_err(|e| RunError::Other(format!("fixed-decoder model: {e}")))?;
        if model.optimal_tokens() != inst.opt.as_slice() {
            return Err(RunError::Other(format!(
                "{source}: the decoder's optimal tokens {:?} differ from the generator's {:?}",
                model.optimal_tokens(),
                inst.opt
            )));
        }
        let wmm_unit = svm.w.iter().map(|x| x / svm.norm).collect();
        Ok(Setup {
            data: source,
            tokens: inst,
            user_starts,
            margin: 1.0 / svm.norm,
            token_bound: assumptions.token_bound,
            model,
            constraints,
            svm,
            wmm_unit,
            assumptions,
        })
    }

    /// [`Setup::build`] with the run's starts ([`Setup::starts`]) and its report begun:
    /// `instance.npz` of the tokens and the starts, and the instance's constants
    /// ([`Setup::derive_constants`]).
    pub fn begin(
        data: DataName,
        files: UserFiles,
        inits: &[Init],
        max_starts: usize,
        ctx: &RunContext,
    ) -> Result<(Self, Vec<Start>, Report), RunError> {
        let setup = Setup::build(data, files, max_starts, ctx)?;
        let starts = setup.starts(inits, ctx);
        let mut rep = Report {
            instance: Some(setup.instance(&starts)),
            ..Report::default()
        };
        setup.derive_constants(&mut rep);
        Ok((setup, starts, rep))
    }

    /// [`Setup::begin`] for a run from one start (`init`, or the init file's W₀).
    pub fn single(
        data: DataName,
        files: UserFiles,
        init: &Init,
        ctx: &RunContext,
    ) -> Result<(Self, Start, Report), RunError> {
        let (setup, mut starts, rep) =
            Setup::begin(data, files, std::slice::from_ref(init), 1, ctx)?;
        Ok((setup, starts.swap_remove(0), rep))
    }

    /// Number of sequences n.
    pub fn n(&self) -> usize {
        self.model.data().n
    }

    /// Tokens per sequence T.
    pub fn t(&self) -> usize {
        self.model.data().t
    }

    /// B², the factor in every gradient bound (‖D_{i,t}‖ ≤ 2B²).
    pub fn b2(&self) -> f64 {
        self.token_bound * self.token_bound
    }

    /// Measures the iterate W; `direction` (d² long) receives ∇L/‖∇L‖.
    pub fn probe(&self, w: &[f64], direction: &mut [f64]) -> Probe {
        let lg = self.model.gradient_direction(w, direction);
        let w_norm = norm(w);
        let proj = dot(w, &self.wmm_unit);
        // ⟨−ĝ, ·⟩: the descent direction's alignment with W̄_mm and with Ŵ
        let rho = -dot(direction, &self.wmm_unit);
        let along = -dot(direction, w) / w_norm;
        let eps_hat = if along > 0.0 {
            (1.0 - rho / along).max(0.0)
        } else {
            0.0
        };
        // 1 − ⟨−ĝ, v̂⟩ = ‖ĝ + v̂‖²/2 for unit ĝ, v̂: no cancellation as the two align
        let half_sq_sum = |unit: &mut dyn Iterator<Item = f64>| {
            0.5 * direction
                .iter()
                .zip(unit)
                .map(|(g, u)| (g + u).powi(2))
                .sum::<f64>()
        };
        let one_minus_rho = half_sq_sum(&mut self.wmm_unit.iter().copied());
        let one_minus_along = half_sq_sum(&mut w.iter().map(|x| x / w_norm));
        let attention = self.model.attention(w);
        let gaps = &self.assumptions.gaps;
        let loss = self.model.loss_kind();
        // Lemma 4: P(W) = (1/n) Σ_i |ℓ'(m_i)| Δ_i φ_{i,opt}(1 − φ_{i,opt})
        let log_p = log_sum_exp((0..self.n()).map(|i| {
            loss.log_neg_derivative(attention.margins[i])
                + gaps[i].ln()
                + attention.phi_opt[i].ln()
                + attention.log_one_minus_phi_opt[i]
        })) - (self.n() as f64).ln();
        Probe {
            norm: w_norm,
            proj,
            one_minus_corr: one_minus_cos(w, &self.wmm_unit),
            log_excess: lg.log_excess,
            log_grad_norm: lg.log_norm,
            rho,
            along,
            one_minus_rho,
            one_minus_along,
            eps_hat,
            log_p,
            attention,
        }
    }

    /// The starts of a run: the init file's W₀ (labelled `W₀ of init_file`, or `W₀[j] of
    /// init_file` for a stack), else `inits` drawn from their own streams.
    pub fn starts(&self, inits: &[Init], ctx: &RunContext) -> Vec<Start> {
        match &self.user_starts {
            Some(ws) if ws.len() == 1 => vec![Start {
                label: "W₀ of init_file".into(),
                w0: ws[0].clone(),
            }],
            Some(ws) => ws
                .iter()
                .enumerate()
                .map(|(j, w0)| Start {
                    label: format!("W₀[{j}] of init_file"),
                    w0: w0.clone(),
                })
                .collect(),
            None => inits
                .iter()
                .enumerate()
                .map(|(index, init)| Start {
                    label: init.label(),
                    w0: self.initial(init, index, ctx),
                })
                .collect(),
        }
    }

    /// The label of a single-initialization run's start: `init`'s, or `W₀ of init_file`.
    pub fn init_label(&self, init: &Init) -> String {
        match self.user_starts {
            Some(_) => "W₀ of init_file".into(),
            None => init.label(),
        }
    }

    /// `instance.npz`: the tokens, the decoder and the starts the run used.
    pub fn instance(&self, starts: &[Start]) -> crate::instance::Arrays {
        let w0: Vec<Vec<f64>> = starts.iter().map(|s| s.w0.clone()).collect();
        instance_arrays(&self.tokens, &w0)
    }

    /// W₀ for an initialization, from the init's own random stream.
    fn initial(&self, init: &Init, index: usize, ctx: &RunContext) -> Vec<f64> {
        let mut rng = ctx.rng(FIRST_FREE_STREAM + index as u64);
        let dim = self.wmm_unit.len();
        let mut gauss = || -> f64 { rng.sample(StandardNormal) };
        let scale = init.scale();
        match *init {
            Init::Gaussian { .. } => (0..dim).map(|_| scale * gauss()).collect(),
            Init::AntiAligned { .. } => self.wmm_unit.iter().map(|x| -scale * x).collect(),
            Init::RandomUnit { .. } => {
                let g: Vec<f64> = (0..dim).map(|_| gauss()).collect();
                let gn = norm(&g);
                g.iter().map(|x| scale * x / gn).collect()
            }
        }
    }

    /// Records Γ, B, Δ̄, κ, Ass. 2's relative score spread, ρ_orth, ‖W_mm‖, the support and the
    /// KKT residual.
    pub fn derive_constants(&self, rep: &mut Report) {
        let a = &self.assumptions;
        rep.derive("data", self.data);
        rep.derive("Gamma", self.margin);
        rep.derive("B", self.token_bound);
        rep.derive("Delta_max", a.gap_max);
        rep.derive("kappa", a.kappa);
        // Ass. 2: max_i (max − min of the non-optimal scores) / max|γ|, 0 when it holds exactly
        rep.derive("a2_relative_spread", a.nonopt_score_spread / a.score_scale);
        rep.derive("rho_orth", a.rho_orth);
        rep.derive("W_mm_norm", self.svm.norm);
        rep.derive("support_size", self.svm.support.len());
        rep.derive("constraints", self.constraints.labels.len());
        rep.derive("kkt_max_residual", self.svm.kkt.max());
        rep.derive("log_L_star", self.model.log_loss_star());
        rep.derive("B2_over_Gamma", self.b2() / self.margin);
    }

    /// The premises every fixed-decoder bound rests on: Ass. 2 (equal non-optimal scores,
    /// spec 003 §4.1, to 1e−12) and a certified W-SVM (§3.3, KKT residuals ≤ 1e−8).
    pub fn premise_checks(&self, rep: &mut Report) {
        let a = &self.assumptions;
        rep.at_most(
            "ass-spread-non-optimal-scores-gamma",
            "Ass. 2: spread of non-optimal scores / max|γ|",
            a.nonopt_score_spread / a.score_scale,
            1e-12,
        )
        .note("the Lemma 4 / Thm 7 forms of ∇L need equal non-optimal scores");
        rep.at_most(
            "svm-kkt-residual",
            "W-SVM KKT max residual",
            self.svm.kkt.max(),
            1e-8,
        )
        .note("Γ, W̄_mm and every alignment are measured against this certificate");
    }
}

/// NGD with step length `eta`, uncapped (the analysed rule).
pub fn ngd(eta: f64) -> FixedRule {
    FixedRule::Ngd {
        eta,
        cap: f64::INFINITY,
    }
}

/// The quantities of a kind built on [`Setup`] (those of [`Setup::derive_constants`]), then
/// the kind's own.
macro_rules! fixed_quantities {
    ($($own:literal),* $(,)?) => {
        &[
            "B",
            "B2_over_Gamma",
            "Delta_max",
            "Gamma",
            "W_mm_norm",
            "a2_relative_spread",
            "constraints",
            "kappa",
            "kkt_max_residual",
            "log_L_star",
            "rho_orth",
            "support_size",
            $($own),*
        ]
    };
}
pub(crate) use fixed_quantities;

/// One start of a run: its label and vec(W₀).
pub struct Start {
    pub label: String,
    pub w0: Vec<f64>,
}

/// W₀ (spec 003 §4.2: "any direction, small norm").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Init {
    /// iid N(0, scale²) entries.
    Gaussian { scale: Positive },
    /// −scale·W̄_mm (1 − corr = 2, the worst direction).
    AntiAligned { scale: Positive },
    /// scale·G/‖G‖ for a Gaussian G (a uniformly random direction).
    RandomUnit { scale: Positive },
}

impl Init {
    pub fn scale(&self) -> f64 {
        match *self {
            Init::Gaussian { scale } | Init::AntiAligned { scale } | Init::RandomUnit { scale } => {
                *scale
            }
        }
    }

    pub fn label(&self) -> String {
        match *self {
            Init::Gaussian { scale } => format!("Gaussian {scale}"),
            Init::AntiAligned { scale } => format!("−{scale}·W̄_mm"),
            Init::RandomUnit { scale } => format!("random unit ×{scale}"),
        }
    }
}

/// Everything measured at one iterate, in the log domain where it vanishes.
#[derive(Debug, Clone)]
pub struct Probe {
    pub norm: f64,
    /// ⟨W, W̄_mm⟩.
    pub proj: f64,
    /// 1 − corr(W, W_mm), cancellation-free.
    pub one_minus_corr: f64,
    /// ln(L − L*), ln ‖∇L‖.
    pub log_excess: f64,
    pub log_grad_norm: f64,
    /// ⟨−∇L, W̄_mm⟩/‖∇L‖ (Lemma 4's ρ(W)).
    pub rho: f64,
    /// ⟨−∇L, Ŵ⟩/‖∇L‖.
    pub along: f64,
    /// 1 − rho and 1 − along, cancellation-free.
    pub one_minus_rho: f64,
    pub one_minus_along: f64,
    /// Lemma 7's ε̂(W) = max(0, 1 − ρ/along) when along > 0, else 0.
    pub eps_hat: f64,
    /// ln P(W) of Lemma 4.
    pub log_p: f64,
    pub attention: Attention,
}

impl Probe {
    /// min_i φ_{i,opt}.
    pub fn phi_min(&self) -> f64 {
        stats::min(self.attention.phi_opt.iter())
    }

    /// mean_i φ_{i,opt}.
    pub fn phi_mean(&self) -> f64 {
        let p = &self.attention.phi_opt;
        p.iter().sum::<f64>() / p.len() as f64
    }

    /// ln(1 − min_i φ_{i,opt}) = max_i ln(1 − φ_{i,opt}).
    pub fn log_one_minus_phi_min(&self) -> f64 {
        stats::max(self.attention.log_one_minus_phi_opt.iter())
    }

    /// Whether every measured quantity is a number (ln values may be −∞ only for exact zeros).
    pub fn is_finite(&self) -> bool {
        [
            self.norm,
            self.proj,
            self.one_minus_corr,
            self.rho,
            self.along,
        ]
        .iter()
        .all(|x| x.is_finite())
            && !self.log_excess.is_nan()
            && !self.log_grad_norm.is_nan()
            && self.attention.phi_opt.iter().all(|x| x.is_finite())
    }
}

/// One visited iterate of [`trace`].
pub struct Visit<'a> {
    pub k: usize,
    /// W_k.
    pub w: &'a [f64],
    pub probe: &'a Probe,
    /// The step W_k → W_{k+1} (`None` at k = K).
    pub step: Option<&'a StepReport>,
    /// Whether k is a recorded checkpoint.
    pub checkpoint: bool,
}

/// Which iterates [`trace`] measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probing {
    /// Every k (for bounds asserted at every iterate).
    EveryStep,
    /// Only the checkpoints (long runs whose checks need only the recorded iterates).
    Checkpoints,
}

/// Runs `rule` from `w0` for `steps` steps and hands every measured iterate to `visit`;
/// returns W_K.
pub fn trace(
    setup: &Setup,
    rule: FixedRule,
    w0: &[f64],
    steps: usize,
    probing: Probing,
    mut visit: impl FnMut(Visit),
) -> Result<Vec<f64>, RunError> {
    let mut stepper = FixedStepper::new(&setup.model, rule)
        .map_err(|e| RunError::Other(format!("optimizer {rule:?}: {e}")))?;
    let keep = checkpoints(steps);
    let mut next = 0;
    let mut w = w0.to_vec();
    let mut before = w.clone();
    let mut direction = vec![0.0; w.len()];
    for k in 0..=steps {
        let checkpoint = keep.get(next) == Some(&k);
        if checkpoint {
            next += 1;
        }
        let measured = checkpoint || probing == Probing::EveryStep;
        let probe = measured.then(|| setup.probe(&w, &mut direction));
        let step = (k < steps).then(|| {
            before.copy_from_slice(&w);
            stepper.step(&mut w)
        });
        if let Some(probe) = &probe {
            visit(Visit {
                k,
                w: if step.is_some() { &before } else { &w },
                probe,
                step: step.as_ref(),
                checkpoint,
            });
        }
    }
    Ok(w)
}

/// The recorded iterations (spec 003 §7): every step up to K = 1000, else about 60 per decade,
/// log-spaced (always with 0 and K).
pub fn checkpoints(steps: usize) -> Vec<usize> {
    let recording = if steps <= 1000 {
        Recording::Every(1)
    } else {
        let decades = (steps as f64).log10();
        Recording::LogSpaced((60.0 * decades).ceil() as usize + 1)
    };
    recorded_iterations(steps, recording)
}

/// The checkpoint table shared by the fixed-decoder scenarios: one row per (run, k).
pub fn checkpoint_table() -> crate::scenario::Table {
    crate::scenario::Table::new(&[
        "run",
        "k",
        "log10_excess_loss",
        "norm_W",
        "proj_W_mm",
        "one_minus_corr",
        "log10_one_minus_corr",
        "phi_opt_mean",
        "phi_opt_min",
        "ln_one_minus_phi_opt_min",
        "rho",
        "eps_hat",
    ])
}

/// The row of [`checkpoint_table`] for a visit.
pub fn checkpoint_row(run: &str, v: &Visit) -> Vec<crate::scenario::Cell> {
    let p = v.probe;
    vec![
        run.into(),
        v.k.into(),
        (p.log_excess / std::f64::consts::LN_10).into(),
        p.norm.into(),
        p.proj.into(),
        p.one_minus_corr.into(),
        p.one_minus_corr.log10().into(),
        p.phi_mean().into(),
        p.phi_min().into(),
        p.log_one_minus_phi_min().into(),
        p.rho.into(),
        p.eps_hat.into(),
    ]
}

/// Least-squares slope of y against x (values taken as they are: pass logarithms for rates).
pub fn least_squares_slope(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
    }
    sxy / sxx
}

/// A step-size cap: a number, or `"none"` for the analysed (uncapped) rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cap {
    Value(f64),
    Named(NoCap),
}

/// The word `"none"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoCap {
    None,
}

impl Cap {
    /// The cap as a number (+∞ for none).
    pub fn value(self) -> f64 {
        match self {
            Cap::Value(v) => v,
            Cap::Named(NoCap::None) => f64::INFINITY,
        }
    }

    pub fn label(self) -> String {
        match self {
            Cap::Value(v) if (1e-3..1e4).contains(&v) => format!("cap {v}"),
            Cap::Value(v) => format!("cap {v:e}"),
            Cap::Named(NoCap::None) => "uncapped".into(),
        }
    }
}

pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_slope_is_exact_on_a_line() {
        let x = [1.0, 2.0, 4.0, 7.0];
        let y: Vec<f64> = x.iter().map(|v| 3.0 - 1.5 * v).collect();
        assert!((least_squares_slope(&x, &y) + 1.5).abs() < 1e-14);
    }

    #[test]
    fn caps_read_numbers_and_none() {
        #[derive(Deserialize)]
        struct T {
            caps: Vec<Cap>,
        }
        let t: T = toml::from_str("caps = [\"none\", 10, 1e6]").unwrap();
        let v: Vec<f64> = t.caps.iter().map(|c| c.value()).collect();
        assert_eq!(v, [f64::INFINITY, 10.0, 1e6]);
        assert!(toml::from_str::<T>("caps = [\"never\"]").is_err());
    }

    #[test]
    fn checkpoints_are_dense_early_and_log_spaced_late() {
        let short = checkpoints(1000);
        assert_eq!(short.len(), 1001);
        let long = checkpoints(100_000);
        assert_eq!((long[0], *long.last().unwrap()), (0, 100_000));
        // ≈ 60 per decade in the last decade
        let last_decade = long.iter().filter(|&&k| k >= 10_000).count();
        assert!((55..=66).contains(&last_decade), "{last_decade}");
    }
}

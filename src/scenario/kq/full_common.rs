//! What the full-parameterization scenarios share (spec 001 §2.4, §8): random factor
//! initializations, the τ = ln(1 + t) output grid, BDF runs of the KQ and combined-W flows
//! that turn a solver failure into a failed check naming the τ reached, and the per-sample
//! geometry of the margin-normalized direction Ŵ = W/µ(W).

use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::attention::FixedDecoder;
use crate::flow::{integrate, logspace, FlowError, Method, OdeConfig, Trajectory};
use crate::models::kq::full::{normalized_direction, FullKq};
use crate::models::kq::log_time::{LogTimeDescent, ScaledGradient};
use crate::scenario::cost::Cost;

use std::path::PathBuf;

use super::common::{chosen_data, DataName, FIRST_FREE_STREAM};
use crate::attention::Instance;
use crate::instance::kq::{FullInits, KqData};
use crate::instance::{Arrays, InstanceFile};
use crate::scenario::param::{AtLeast, Decades, Positive};
use crate::scenario::{InputError, Report, Scenario};
use crate::stats;

/// The log-time horizon of a full-model flow: τ_max in (1, 1e10] (spec §8: beyond µ ≈ 1e10
/// margins lose f64 resolution).
pub type FullHorizon = Decades<0, 10>;

/// Drift of the conserved balance C = KᵀK − QᵀQ (spec §2.5) at state `z` from its initial
/// value `c0`, relative to max(1, ‖K‖² + ‖Q‖²).
pub fn balance_drift(kq: &FullKq, z: &[f64], c0: &DMatrix<f64>) -> f64 {
    let size: f64 = z.iter().map(|x| x * x).sum();
    (kq.balance(z) - c0).norm() / size.max(1.0)
}

/// Parameters of the seeded full-model flow scenarios (full-nuclear-vs-frobenius,
/// aligned-random-init): one dataset, factors K(0), Q(0) ~ N(0, s²) per seed, τ output grid.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowRunParams {
    /// Dataset of spec §5.1 (toy-3 is the full-model discriminator, toy-4 satisfies A4);
    /// ignored when `data_file` is set.
    pub data: DataName,
    /// The user's data instead (X, y, u, optional z; README "Your own data", seed 001); must
    /// satisfy A1 (a W separates the optimal tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial factors instead of the seeded draws: K0, Q0 of shape (runs, d, d_e) (or
    /// (d, d_e) for one run); `de`, `init_scale` and `seeds` are then ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
    /// Embedding width d_e (the theorems take d_e ≥ d).
    pub de: AtLeast<1>,
    /// K(0), Q(0) entries i.i.d. N(0, s²) (spec §1.5: s ∈ [0.01, 0.5]; §7: 0.1).
    pub init_scale: Positive,
    /// Number of initializations (spec §7: seeds 0..4); W(0) = K(0)Q(0)ᵀ for the W flow.
    pub seeds: AtLeast<1>,
    /// Final log time τ_max (spec §7: 1e5 – 1e6).
    pub tau_max: FullHorizon,
    /// Output samples per decade of τ (spec §8: ≥ 5).
    pub per_decade: AtLeast<1>,
}

impl FlowRunParams {
    /// Refuses bad data and init files (the ranges are in the field types).
    pub fn validate(&self, sc: &Scenario) -> Result<(), InputError> {
        // bad files are refused here, before anything is written
        self.inputs(sc).map(|_| ())
    }

    /// The data and the initial factors of the runs: the named dataset or `data_file`, and per
    /// seed K(0), Q(0) ~ N(0, s²) (stream FIRST_FREE_STREAM + seed) or the rows of `init_file`.
    pub fn inputs(&self, sc: &Scenario) -> Result<FlowInputs, InputError> {
        let (label, inst) = chosen_data(sc, self.data, self.data_file.as_deref())?;
        let d = inst.data.d;
        let inits = match &self.init_file {
            Some(path) => {
                let f: FullInits = sc.read_instance("init_file", path)?;
                if f.d() != d {
                    return Err(InputError::new(
                        &sc.input_path("init_file", path),
                        "K0",
                        format!(
                            "has d = {} rows, the data have d = {d} (file given by params.init_file)",
                            f.d()
                        ),
                    ));
                }
                let names = (0..f.k.len()).map(|r| format!("init {r}")).collect();
                (names, f)
            }
            None => {
                let mut f = FullInits {
                    k: Vec::new(),
                    q: Vec::new(),
                };
                for seed in 0..*self.seeds {
                    let mut rng = sc.rng(FIRST_FREE_STREAM + seed as u64);
                    f.k.push(gaussian_matrix(&mut rng, d, *self.de, *self.init_scale));
                    f.q.push(gaussian_matrix(&mut rng, d, *self.de, *self.init_scale));
                }
                ((0..*self.seeds).map(|s| format!("seed {s}")).collect(), f)
            }
        };
        Ok(FlowInputs {
            label,
            inst,
            names: inits.0,
            inits: inits.1,
        })
    }
}

/// What a seeded full-model run starts from.
pub struct FlowInputs {
    /// The dataset's name, or [`super::common::USER_LABEL`].
    pub label: String,
    pub inst: Instance,
    /// Per run: `seed k` or `init r`.
    pub names: Vec<String>,
    pub inits: FullInits,
}

impl FlowInputs {
    /// Embedding width d_e of the initial factors.
    pub fn de(&self) -> usize {
        self.inits.de()
    }

    /// The setting in check notes: the data, d_e, where the initial factors come from.
    pub fn setting(&self, p: &FlowRunParams) -> String {
        let init = match &p.init_file {
            Some(_) => format!("K(0), Q(0) from init_file, {} runs", self.names.len()),
            None => format!("K(0), Q(0) ~ N(0, {}²), {} seeds", p.init_scale, p.seeds),
        };
        format!(
            "{}, d_e = {}, {init}, τ_max = {:e}",
            self.label,
            self.de(),
            p.tau_max
        )
    }

    /// `instance.npz`: the data and every run's K(0), Q(0).
    pub fn arrays(&self) -> Arrays {
        let mut a = KqData::new(self.inst.clone()).to_arrays();
        a.merge_prefixed("", self.inits.to_arrays());
        a
    }
}

/// d × d_e matrix with i.i.d. N(0, scale²) entries.
pub fn gaussian_matrix(rng: &mut impl Rng, rows: usize, cols: usize, scale: f64) -> DMatrix<f64> {
    DMatrix::from_fn(rows, cols, |_, _| {
        scale * rng.sample::<f64, _>(StandardNormal)
    })
}

/// τ = 0 followed by `per_decade` log-spaced values per decade from 0.1 to `tau_max`.
pub fn tau_grid(tau_max: f64, per_decade: usize) -> Vec<f64> {
    let decades = (tau_max / 0.1).log10().max(1.0);
    let mut t = vec![0.0];
    t.extend(logspace(
        0.1,
        tau_max,
        (decades * per_decade as f64).ceil() as usize + 1,
    ));
    t
}

/// Integrates the τ-time gradient flow of `model` with `cfg`. A failure is recorded as a
/// failed check "`label`: integrator reached τ_max" with the τ reached, and gives `None`.
pub fn run_log_time<M: ScaledGradient + ?Sized>(
    model: &M,
    z0: &[f64],
    taus: &[f64],
    cfg: &OdeConfig,
    label: &str,
    rep: &mut Report,
) -> Option<Trajectory> {
    match integrate(&LogTimeDescent(model), z0, taus, cfg, None) {
        Ok(tr) => {
            rep.stats(label, &tr.stats);
            Some(tr)
        }
        Err(e) => {
            let reached = match &e {
                FlowError::SolverFailed { t_reached, .. } => *t_reached,
                FlowError::NonFinite { t, .. } => *t,
                _ => f64::NAN,
            };
            rep.at_least(
                &format!("integrator-reached-tau.{label}"),
                &format!("{label}: integrator reached τ_max"),
                reached,
                *taus.last().unwrap(),
            )
            .note(format!("solver failure: {e}"));
            None
        }
    }
}

/// The normalized direction at one sample and its distances to reference solutions.
#[derive(Debug, Clone)]
pub struct DirectionSample {
    pub tau: f64,
    /// µ(W).
    pub mu: f64,
    /// ln(L(W) − L*), exact however saturated the softmax is.
    pub log_excess: f64,
    /// max_i ln(1 − σ_i,opt(W)): how far the least-attended optimal token is from all the weight.
    pub log_one_minus_sigma_opt: f64,
    /// Ŵ (column-major), empty before separation.
    pub w_hat: Vec<f64>,
    /// Singular values of Ŵ, largest first (NaN before separation).
    pub sigma: Vec<f64>,
}

impl DirectionSample {
    pub fn new(model: &FixedDecoder, tau: f64, w: &[f64]) -> Self {
        let d = model.data().d;
        let mu = crate::models::kq::full::min_margin(model, w);
        let log_excess = model.log_excess_loss(w);
        let log_one_minus_sigma_opt = stats::max(model.attention(w).log_one_minus_phi_opt);
        match normalized_direction(model, w) {
            Some(w_hat) => {
                let mut sigma: Vec<f64> = DMatrix::from_column_slice(d, d, &w_hat)
                    .singular_values()
                    .iter()
                    .copied()
                    .collect();
                sigma.sort_by(|a, b| b.total_cmp(a));
                DirectionSample {
                    tau,
                    mu,
                    log_excess,
                    log_one_minus_sigma_opt,
                    w_hat,
                    sigma,
                }
            }
            None => DirectionSample {
                tau,
                mu,
                log_excess,
                log_one_minus_sigma_opt,
                w_hat: Vec::new(),
                sigma: vec![f64::NAN; d],
            },
        }
    }

    pub fn separated(&self) -> bool {
        !self.w_hat.is_empty()
    }

    /// ‖Ŵ − target‖_F (NaN before separation).
    pub fn distance(&self, target: &[f64]) -> f64 {
        if !self.separated() {
            return f64::NAN;
        }
        frobenius_distance(&self.w_hat, target)
    }

    pub fn nuclear_norm(&self) -> f64 {
        self.sigma.iter().sum()
    }

    pub fn frobenius_norm(&self) -> f64 {
        self.sigma.iter().map(|s| s * s).sum::<f64>().sqrt()
    }

    /// σ₂/σ₁ (0 when d = 1).
    pub fn rank_ratio(&self) -> f64 {
        self.sigma.get(1).map_or(0.0, |s2| s2 / self.sigma[0])
    }
}

/// ‖A − B‖_F of two matrices stored alike.
pub fn frobenius_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// How many samples [`tau_grid`] makes (counted without building them).
pub fn tau_grid_len(tau_max: f64, per_decade: usize) -> f64 {
    let decades = (tau_max / 0.1).log10().max(1.0);
    (decades * per_decade as f64).ceil() + 2.0
}

/// The largest dimension d of the built-in datasets (toy-*, random-a2 and random-a4 at their
/// defaults: d ≤ 5, n·L ≤ 6 tokens): costs that depend only on the dataset are constants.
pub const BUILT_IN_D: f64 = 5.0;
const BUILT_IN_TOKENS: f64 = 6.0;

/// `solves` log-time flows of the full model K, Q ∈ ℝ^{d×d_e} (dimension 2·d·d_e) on a built-in
/// dataset, keeping `samples` states each.
pub fn full_flow_cost(
    key: &'static str,
    solves: f64,
    de: usize,
    samples: f64,
    method: Method,
) -> Cost {
    let dim = 2.0 * BUILT_IN_D * de as f64;
    let grad = 4.0 * BUILT_IN_TOKENS * BUILT_IN_D * dim;
    Cost::new()
        .ode(key, solves, dim, grad, method)
        .records(key, solves, samples, dim)
}

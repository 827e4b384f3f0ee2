//! `flow.kq`: the generic flow of seed 001's softmax attention with separately trained key and
//! query (spec 001), on any instance — tokens X, labels y, decoder u, queries z (layout:
//! [`crate::instance::kq`]) and an initial state in one of three parametrizations
//! (`[params.model] parametrization`):
//!
//! - `full`: K, Q ∈ ℝ^{d×d_e} ([`FullKq`]); the theory (Thm 1.1) says W = KQᵀ converges in
//!   direction to the nuclear-norm W-SVM solution; C = KᵀK − QᵀQ is conserved;
//! - `diagonal`: K = [Diag ξ_k, 0], Q = [Diag ξ_q, 0], β = ξ_k ⊙ ξ_q ([`Factored`]`<`[`KeyQuery`]`>`);
//!   Thm 4.1: β converges in direction to the ℓ1-SVM solution; ξ_k² − ξ_q² is conserved;
//! - `w`: the combined W trained directly ([`FixedDecoder`], seed 003's model with exponential
//!   loss); its direction goes to the Frobenius W-SVM solution.
//!
//! Each run compares the direction of W with both max-margin solutions that apply (the theory's
//! and the other parametrization's, so the difference is visible), each certified by
//! [`crate::analysis::svm`]. The data must give every sequence a unique optimal token and be
//! separable by a W (A1; by a diagonal W, A1-diag, for `diagonal`): otherwise no max-margin
//! solution exists and the file is refused.

use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use super::{Clock, Family, FlowKind, FlowModel, MaxMargin};
use crate::analysis::svm::{
    solve_l1, solve_l2, solve_nuclear, L1Kkt, L2Kkt, NuclearSettings, RankOneConstraints, SvmError,
    SvmMethod, VectorConstraints,
};
use crate::attention::{FixedDecoder, Loss};
use crate::flow::GradientFlow;
use crate::instance::kq::{KqData, KqInit};
use crate::instance::{Arrays, InstanceError, InstanceFile};
use crate::models::kq::diagonal::{factored_state, DiagonalLoss, Factored, KeyQuery};
use crate::models::kq::full::FullKq;
use crate::scenario::kq::common::{named_instance, DataName, FIRST_FREE_STREAM};
use crate::scenario::{InputError, Scenario};

pub static KIND: FlowKind<Kq> = FlowKind(Kq);

/// The seed-001 family.
pub struct Kq;

/// Which matrices are trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Parametrization {
    /// K and Q (d × d_e each).
    #[default]
    Full,
    /// The diagonals ξ_k, ξ_q.
    Diagonal,
    /// The combined W = KQᵀ.
    W,
}

/// `[params.model]` of `flow.kq`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    parametrization: Parametrization,
    /// The default instance's dataset (spec §5.1), used when no file is given.
    #[serde(default = "default_data")]
    data: DataName,
    /// Embedding width d_e of the default K, Q (default d).
    #[serde(default)]
    de: Option<usize>,
    /// Scale of the default initial state: K(0), Q(0) with i.i.d. N(0, init_scale²) entries;
    /// init (5) ξ_k(0) = √2·init_scale, ξ_q(0) = 0 for the diagonal; W(0) = K(0)Q(0)ᵀ for `w`.
    #[serde(default = "default_init_scale")]
    init_scale: f64,
    /// Largest residual of each max-margin certificate.
    #[serde(default = "default_certificate_tol")]
    certificate_tol: f64,
}

fn default_data() -> DataName {
    DataName::Toy3
}
fn default_init_scale() -> f64 {
    0.1
}
fn default_certificate_tol() -> f64 {
    1e-6
}

/// The options as the model reads them (`options` were validated while the scenario was parsed
/// when they come from a scenario file; a Rust caller's bad table is reported here).
fn options(table: &toml::Table) -> Result<Options, InstanceError> {
    super::model_options(table)
}

impl Family for Kq {
    fn name(&self) -> &'static str {
        "kq"
    }
    fn kind(&self) -> &'static str {
        "flow.kq"
    }
    fn paper(&self) -> &'static str {
        "001"
    }
    fn summary(&self) -> &'static str {
        "Seed 001 on any instance (X, y, u, z; K0 + Q0, xi_k + xi_q or W0): gradient flow of \
         separately trained K, Q (full or diagonal) or of W = KQᵀ, with the direction of W against \
         the certified nuclear-norm, ℓ1 and Frobenius max-margin solutions"
    }

    fn default_instance(&self, sc: &Scenario, table: &toml::Table) -> Result<Arrays, InputError> {
        let o: Options = sc.typed_subtable("params.model", table.clone())?;
        if !(o.init_scale.is_finite() && o.init_scale > 0.0) {
            return Err(sc.invalid("params.model.init_scale", "must be positive"));
        }
        let inst = named_instance(o.data, sc)
            .map_err(|e| sc.invalid("params.model.data", e.to_string()))?;
        let d = inst.data.d;
        let de = o.de.unwrap_or(d);
        if de == 0 {
            return Err(sc.invalid("params.model.de", "must be ≥ 1"));
        }
        let mut rng = sc.rng(FIRST_FREE_STREAM);
        let mut gaussian = |rows: usize, cols: usize| {
            DMatrix::from_fn(rows, cols, |_, _| {
                o.init_scale * rng.sample::<f64, _>(StandardNormal)
            })
        };
        let init = match o.parametrization {
            Parametrization::Full => KqInit::Full {
                k: gaussian(d, de),
                q: gaussian(d, de),
            },
            Parametrization::Diagonal => KqInit::Diagonal {
                xi_k: vec![std::f64::consts::SQRT_2 * o.init_scale; d],
                xi_q: vec![0.0; d],
            },
            Parametrization::W => {
                let k = gaussian(d, de);
                KqInit::Combined {
                    w: &k * gaussian(d, de).transpose(),
                }
            }
        };
        let mut arrays = KqData::new(inst).to_arrays();
        arrays.merge_prefixed("", init.to_arrays());
        Ok(arrays)
    }

    fn model(
        &self,
        data: &Arrays,
        init: &Arrays,
        table: &toml::Table,
    ) -> Result<Box<dyn FlowModel>, InstanceError> {
        let o = options(table)?;
        let data = KqData::from_arrays(data)?;
        let init = KqInit::from_arrays(init)?;
        let d = data.d();
        if init.d() != d {
            return Err(InstanceError::new(
                init.first_array(),
                format!("has {} rows for tokens of d = {d} coordinates", init.d()),
            ));
        }
        let wanted = serde_json::to_value(o.parametrization)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        if init.parametrization() != wanted {
            return Err(InstanceError::new(
                init.first_array(),
                format!(
                    "an initial state of the {} parametrization, but params.model.parametrization \
                     = \"{wanted}\" (give K0 + Q0 for full, xi_k + xi_q for diagonal, W0 for w)",
                    init.parametrization()
                ),
            ));
        }
        let inst = &data.instance;
        let bad = |e: &dyn std::fmt::Display| InstanceError::new("X", e.to_string());
        let constraints =
            RankOneConstraints::w_svm(&inst.data.view(), &inst.opt).map_err(|e| bad(&e))?;
        let z0: Vec<f64>;
        let margins = match &init {
            KqInit::Diagonal { xi_k, xi_q } => {
                z0 = factored_state(xi_k, xi_q);
                let diagonal = constraints.diagonal().map_err(|e| bad(&e))?;
                separable(solve_l1(&diagonal).map(|_| ()), "A1-diag", "diagonal W")?;
                Margins::Diagonal(diagonal)
            }
            KqInit::Full { k, q } => {
                // the state is [vec_row K; vec_row Q]
                z0 = k
                    .transpose()
                    .iter()
                    .chain(q.transpose().iter())
                    .copied()
                    .collect();
                separable(
                    solve_l2(&constraints, SvmMethod::Dual).map(|_| ()),
                    "A1",
                    "W",
                )?;
                Margins::Full(constraints)
            }
            KqInit::Combined { w } => {
                z0 = w.as_slice().to_vec();
                separable(
                    solve_l2(&constraints, SvmMethod::Dual).map(|_| ()),
                    "A1",
                    "W",
                )?;
                Margins::Full(constraints)
            }
        };
        let fixed = || {
            FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential)
                .map_err(|e| bad(&e))
        };
        let model = match &init {
            KqInit::Full { k, .. } => {
                Model::Full(FullKq::from_model(fixed()?, k.ncols()).map_err(|e| bad(&e))?)
            }
            KqInit::Diagonal { .. } => {
                Model::Diagonal(Factored::new(DiagonalLoss::new(inst).map_err(|e| bad(&e))?))
            }
            KqInit::Combined { .. } => Model::W(fixed()?),
        };
        Ok(Box::new(KqFlow {
            d,
            data,
            init,
            z0,
            model,
            margins,
            tolerance: o.certificate_tol,
        }))
    }
}

/// An infeasible max-margin program is bad data (the assumption named fails).
fn separable(r: Result<(), SvmError>, assumption: &str, what: &str) -> Result<(), InstanceError> {
    match r {
        Ok(()) => Ok(()),
        Err(SvmError::Infeasible { detail, .. }) => Err(InstanceError::new(
            "X",
            format!(
                "{assumption} fails: no {what} separates the optimal tokens ({detail}); the \
                 max-margin solution the flow is compared with does not exist"
            ),
        )),
        Err(e) => Err(InstanceError::new("X", format!("max-margin program: {e}"))),
    }
}

enum Model {
    Full(FullKq),
    Diagonal(Factored<KeyQuery, DiagonalLoss>),
    W(FixedDecoder),
}

impl Model {
    fn flow(&self) -> &dyn GradientFlow {
        match self {
            Model::Full(m) => m,
            Model::Diagonal(m) => m,
            Model::W(m) => m,
        }
    }
}

/// The constraint sets of the max-margin programs that apply.
enum Margins {
    /// A_il = (x_i,opt − x_il) z_iᵀ: nuclear-norm and Frobenius W-SVMs.
    Full(RankOneConstraints),
    /// B_il = diag A_il: ℓ1- and ℓ2-SVMs of β.
    Diagonal(VectorConstraints),
}

struct KqFlow {
    d: usize,
    data: KqData,
    init: KqInit,
    z0: Vec<f64>,
    model: Model,
    margins: Margins,
    tolerance: f64,
}

forward_gradient_flow!(KqFlow, self => self.model.flow());

fn l2_certificate(k: &L2Kkt) -> Vec<(String, f64)> {
    vec![
        ("primal infeasibility".into(), k.primal_infeasibility),
        ("dual infeasibility".into(), k.dual_infeasibility),
        ("stationarity".into(), k.stationarity),
        ("complementary slackness".into(), k.complementary_slackness),
        ("duality gap".into(), k.duality_gap),
    ]
}

fn l1_certificate(k: &L1Kkt) -> Vec<(String, f64)> {
    vec![
        ("primal infeasibility".into(), k.primal_infeasibility),
        ("dual infeasibility".into(), k.dual_infeasibility),
        ("stationarity".into(), k.stationarity),
        ("complementary slackness".into(), k.complementary_slackness),
        ("duality gap".into(), k.duality_gap),
    ]
}

impl FlowModel for KqFlow {
    fn initial_state(&self) -> Vec<f64> {
        self.z0.clone()
    }

    fn instance(&self) -> Arrays {
        let mut a = self.data.to_arrays();
        a.merge_prefixed("", self.init.to_arrays());
        a
    }

    /// W = KQᵀ (full), Diag(ξ_k ⊙ ξ_q) (diagonal) or W itself.
    fn matrices(&self, z: &[f64]) -> Vec<(String, DMatrix<f64>)> {
        let d = self.d;
        let w = match &self.model {
            Model::Full(m) => DMatrix::from_column_slice(d, d, &m.combined(z)),
            Model::Diagonal(m) => DMatrix::from_diagonal(&m.beta(z).into()),
            Model::W(_) => DMatrix::from_column_slice(d, d, z),
        };
        vec![("W".into(), w)]
    }

    /// Full and W: the nuclear-norm W-SVM (the KQ limit, Thm 1.1) and the Frobenius one (the W
    /// limit), certified by their duality gaps; diagonal: the ℓ1-SVM (the KQ limit, Thm 4.1) and
    /// the ℓ2-SVM (the diagonal W limit), certified by their KKT residuals.
    fn max_margin(&self) -> Result<Vec<MaxMargin>, String> {
        let d = self.d;
        let mm = |name: &str, solution: DMatrix<f64>, certificate| MaxMargin {
            name: name.into(),
            matrix: "W".into(),
            solution,
            certificate,
            tolerance: self.tolerance,
        };
        match &self.margins {
            Margins::Full(c) => {
                let frob = solve_l2(c, SvmMethod::Dual).map_err(|e| e.to_string())?;
                let nuc =
                    solve_nuclear(c, &NuclearSettings::default()).map_err(|e| e.to_string())?;
                let k = &nuc.kkt;
                // weak duality: a feasible W and dual-feasible λ with equal objectives are optimal
                let nuclear_certificate = vec![
                    ("primal infeasibility".into(), k.primal_infeasibility),
                    ("dual infeasibility".into(), k.dual_infeasibility),
                    ("complementary slackness".into(), k.complementary_slackness),
                    ("duality gap".into(), k.duality_gap),
                ];
                Ok(vec![
                    mm(
                        "nuclear-norm SVM",
                        DMatrix::from_column_slice(d, d, &nuc.w),
                        nuclear_certificate,
                    ),
                    mm(
                        "Frobenius W-SVM",
                        DMatrix::from_column_slice(d, d, &frob.w),
                        l2_certificate(&frob.kkt),
                    ),
                ])
            }
            Margins::Diagonal(c) => {
                let l1 = solve_l1(c).map_err(|e| e.to_string())?;
                let l2 = solve_l2(c, SvmMethod::Dual).map_err(|e| e.to_string())?;
                let diag = |b: &[f64]| DMatrix::from_diagonal(&b.to_vec().into());
                Ok(vec![
                    mm("l1-SVM", diag(&l1.beta), l1_certificate(&l1.kkt)),
                    mm("l2-SVM (diagonal)", diag(&l2.w), l2_certificate(&l2.kkt)),
                ])
            }
        }
    }

    /// The exponential loss decays like 1/t (W) or 1/(t ln t) (KQ): directions settle over
    /// decades of t.
    fn default_clock(&self) -> Clock {
        Clock::Log
    }
}

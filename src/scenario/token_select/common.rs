//! What every seed-003 scenario shares: the named data models (spec 003 §1.3) drawn from the
//! scenario seed, and the W-SVM direction every optimizer is measured against (§3).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, Serializer};

use crate::analysis::svm::{solve_l2, L2Solution, RankOneConstraints, SvmMethod};
use crate::attention::{Instance, TokenError};
use crate::instance::token_select::{token_arrays, TokenSelectData, TokenSelectStarts};
use crate::instance::{Arrays, InstanceError, InstanceFile};
use crate::models::token_select::generators::{bad_init, two_token};
use crate::models::token_select::{Example1, GaussianJoint, PatchSignals};
use crate::scenario::cost::{n, Cost};
use crate::scenario::{InputError, RunContext, RunError, Scenario};

/// Random stream of the data (tokens, labels, decoder).
pub const DATA_STREAM: u64 = 0;
/// First stream free for a scenario's own randomness (initializations, trials, …).
pub const FIRST_FREE_STREAM: u64 = 1;

/// The data models of spec 003 §1.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataName {
    /// Example 1 (optimal token first, Gaussian noise).
    Ex1,
    /// Example 1 with non-optimal tokens orthogonal to u (ρ_orth = 0).
    Ex1Orth,
    /// The two-token instance of §4.2 (closed forms).
    TwoToken,
    /// The bad-initialization instance of Fig. 8.
    BadInit,
    /// The joint-training Gaussian model DM.
    Dm,
    /// The Fig. 9 analogue: one class-signal patch among noise patches, u = s₁ − s₀.
    Patches,
}

/// Draws the named data model from the scenario seed's data stream.
pub fn build_instance(name: DataName, ctx: &RunContext) -> Result<Instance, RunError> {
    draw_instance(name, ctx.scenario)
        .map_err(|e| RunError::Other(format!("generating the {name:?} data: {e}")))
}

/// The named data model drawn from the seed's data stream (also while preparing a run).
pub fn draw_instance(name: DataName, sc: &Scenario) -> Result<Instance, TokenError> {
    let mut rng = sc.rng(DATA_STREAM);
    match name {
        DataName::Ex1 => Example1::ex1().generate(&mut rng),
        DataName::Ex1Orth => Example1::ex1_orth().generate(&mut rng),
        DataName::Dm => GaussianJoint::dm().generate(&mut rng),
        DataName::Patches => PatchSignals::patches().generate(&mut rng),
        DataName::TwoToken => Ok(two_token()),
        DataName::BadInit => Ok(bad_init()),
    }
}

/// Where a scenario's tokens come from: a named data model or the user's `data_file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Named(DataName),
    /// The user's tokens; titles and the derived `data` say `data_file` (a fixed word, so a
    /// run fed its own `instance.npz` writes the same outputs).
    File,
}

impl Source {
    /// Whether the tokens are the user's (checks of the built-in instance are skipped).
    pub fn is_file(self) -> bool {
        self == Source::File
    }

    /// As series labels and `instance.npz` prefixes print it: the model's key (`ex1`) or
    /// `data_file` (as `params.json` derives it).
    pub fn key(self) -> String {
        match self {
            Source::Named(name) => super::svm_common::data_label(name),
            Source::File => "data_file".into(),
        }
    }
}

/// As figure titles print it: the model's name (`Ex1`) or `data_file`.
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Named(name) => write!(f, "{name:?}"),
            Source::File => f.write_str("data_file"),
        }
    }
}

/// As `params.json` derives it: the model's key (`ex1`) or `data_file`.
impl Serialize for Source {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Source::Named(name) => name.serialize(s),
            Source::File => s.serialize_str("data_file"),
        }
    }
}

/// The user's files of a seed-003 scenario (the layout of [`crate::instance::token_select`]):
/// `params.data_file` (X, y, u, optional z) replaces the named data model and
/// `params.init_file` (W0: (d, d), or (k, d, d) for k starts) replaces the initializations
/// drawn from the seed. Read in `validate` (a bad file is bad input: exit 2, nothing written)
/// and again by the run.
#[derive(Debug, Clone, Copy)]
pub struct UserFiles<'a> {
    pub data_file: Option<&'a Path>,
    pub init_file: Option<&'a Path>,
}

impl<'a> UserFiles<'a> {
    pub fn new(data_file: &'a Option<PathBuf>, init_file: &'a Option<PathBuf>) -> Self {
        UserFiles {
            data_file: data_file.as_deref(),
            init_file: init_file.as_deref(),
        }
    }

    /// The tokens, their source and their optimal tokens: the data file's (validated: a
    /// unique optimal token per sequence and a feasible W-SVM), else `name` drawn from the
    /// scenario seed.
    pub fn instance(&self, name: DataName, sc: &Scenario) -> Result<(Source, Instance), RunError> {
        match self.data_file {
            Some(f) => {
                let data: TokenSelectData = sc.read_instance("data_file", f)?;
                let inst = Instance {
                    data: data.data,
                    decoder: data.u,
                    opt: data.opt,
                };
                Ok((Source::File, inst))
            }
            None => draw_instance(name, sc)
                .map(|inst| (Source::Named(name), inst))
                .map_err(|e| RunError::Other(format!("generating the {name:?} data: {e}"))),
        }
    }

    /// The instances of a run over several named data models: the data file's tokens once
    /// (they replace the whole list), else each model drawn from the scenario seed.
    pub fn instances(
        &self,
        names: &[DataName],
        sc: &Scenario,
    ) -> Result<Vec<(Source, Instance)>, RunError> {
        let names = match self.data_file {
            Some(_) => &names[..names.len().min(1)],
            None => names,
        };
        names.iter().map(|&name| self.instance(name, sc)).collect()
    }

    /// [`UserFiles::validate`] for a run over several named data models (see
    /// [`UserFiles::instances`]).
    pub fn validate_each(
        &self,
        names: &[DataName],
        max_starts: usize,
        sc: &Scenario,
    ) -> Result<(), InputError> {
        let names = match self.data_file {
            Some(_) => &names[..names.len().min(1)],
            None => names,
        };
        names
            .iter()
            .try_for_each(|&name| self.validate(name, max_starts, sc))
    }

    /// The init file's starts (vec(W₀) column-major), each d × d, at most `max_starts` of
    /// them; `None` without an init file.
    pub fn starts(
        &self,
        d: usize,
        max_starts: usize,
        sc: &Scenario,
    ) -> Result<Option<Vec<Vec<f64>>>, InputError> {
        let Some(f) = self.init_file else {
            return Ok(None);
        };
        let read: TokenSelectStarts = sc.read_instance("init_file", f)?;
        let k = read.starts.len();
        read.require_dimension(d)
            .and_then(|()| match k <= max_starts {
                true => Ok(()),
                false => Err(InstanceError::new(
                    "W0",
                    format!("holds {k} starts but this scenario runs at most {max_starts}"),
                )),
            })
            .map_err(|e| {
                InputError::new(
                    &sc.input_path("init_file", f),
                    e.key,
                    format!("{} (file given by params.init_file)", e.reason),
                )
            })?;
        Ok(Some(read.starts))
    }

    /// The init file's starts read as directions Ŵ of unit Frobenius norm, for scenarios that
    /// start at W₀ = r·Ŵ over radii r (at most `max_starts` of them); `None` without an init
    /// file. A direction off the unit sphere is refused, naming `W0[j]`.
    pub fn directions(
        &self,
        d: usize,
        max_starts: usize,
        sc: &Scenario,
    ) -> Result<Option<Vec<Vec<f64>>>, InputError> {
        let (Some(starts), Some(f)) = (self.starts(d, max_starts, sc)?, self.init_file) else {
            return Ok(None);
        };
        let off_unit = starts
            .iter()
            .map(|w| crate::flow::norm(w))
            .enumerate()
            .find(|(_, norm)| (norm - 1.0).abs() > UNIT_TOL);
        match off_unit {
            Some((j, norm)) => Err(InputError::new(
                &sc.input_path("init_file", f),
                format!("W0[{j}]"),
                format!(
                    "has Frobenius norm {norm} but this scenario reads each W0[j] as a direction \
                     Ŵ (W₀ = r·Ŵ for every radius r): it must be 1 to {UNIT_TOL:e} (file given \
                     by params.init_file)"
                ),
            )),
            None => Ok(Some(starts)),
        }
    }

    /// [`UserFiles::validate`] for a scenario that reads the init file's starts as directions
    /// (see [`UserFiles::directions`]).
    pub fn validate_directions(
        &self,
        name: DataName,
        max_starts: usize,
        sc: &Scenario,
    ) -> Result<(), InputError> {
        self.validate(name, max_starts, sc)?;
        if self.init_file.is_none() {
            return Ok(());
        }
        let (_, inst) = self
            .instance(name, sc)
            .map_err(|e| sc.invalid("params.data", e.to_string()))?;
        self.directions(inst.data.d, max_starts, sc).map(|_| ())
    }

    /// Reads both files as the run will, refusing bad ones before anything runs.
    pub fn validate(
        &self,
        name: DataName,
        max_starts: usize,
        sc: &Scenario,
    ) -> Result<(), InputError> {
        let d = match self.instance(name, sc) {
            Ok((_, inst)) => inst.data.d,
            Err(RunError::Input(e)) => return Err(e),
            Err(e) => return Err(sc.invalid("params.data", e.to_string())),
        };
        self.starts(d, max_starts, sc).map(|_| ())
    }
}

/// Relative distance from 1 of ‖Ŵ‖_F accepted for a direction of an init file (a numpy
/// `W / np.linalg.norm(W)` is within a few ulps).
const UNIT_TOL: f64 = 1e-9;

/// `instance.npz` of a run: the tokens X, y, u (z when the queries are not the first tokens)
/// and the starts W0 ((d, d) for one, (k, d, d) for several; none if `starts` is empty).
pub fn instance_arrays(inst: &Instance, starts: &[Vec<f64>]) -> Arrays {
    let mut a = token_arrays(&inst.data, &inst.decoder);
    if !starts.is_empty() {
        let w0 = TokenSelectStarts {
            d: inst.data.d,
            starts: starts.to_vec(),
        };
        a.merge_prefixed("", w0.to_arrays());
    }
    a
}

/// The W-SVM of an instance (dual QP, polished, with its KKT certificate).
pub fn w_svm(instance: &Instance) -> Result<(RankOneConstraints, L2Solution), RunError> {
    let cons = RankOneConstraints::w_svm(&instance.data.view(), &instance.opt)
        .map_err(|e| RunError::Other(format!("W-SVM constraints: {e}")))?;
    let sol =
        solve_l2(&cons, SvmMethod::Dual).map_err(|e| RunError::Other(format!("W-SVM: {e}")))?;
    Ok((cons, sol))
}

/// The largest built-in data model for cost estimates (see [`crate::scenario::cost`]): dm has
/// W ∈ ℝ^{64×64}; one loss and gradient of a fixed-decoder or joint run costs a few n·d² (the
/// products W z_i and the outer products of the gradient; ex1: n = 8, d = 32; dm: n = 6,
/// d = 64), so costs that depend only on the data model are constants.
pub const BUILT_IN_W: f64 = 4096.0;
pub const BUILT_IN_GRAD: f64 = 5e4;

/// `runs` optimizer runs of `steps` iterations each on a built-in data model: the iterations,
/// and the checkpoints (every step up to 1000, then ~60 per decade) with their table rows.
pub fn optimizer_runs(key: &'static str, runs: f64, steps: usize) -> Cost {
    let steps = n(steps);
    let checkpoints = steps.min(1000.0) + 60.0 * steps.max(1.0).log10();
    Cost::new()
        .work(key, "optimizer iterations", runs * steps, BUILT_IN_GRAD)
        .work(
            key,
            "checkpoint probes",
            runs * checkpoints,
            2.0 * BUILT_IN_GRAD,
        )
        .table(key, runs * checkpoints, 12.0)
}

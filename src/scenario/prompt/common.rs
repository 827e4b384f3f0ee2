//! What the seed-002 scenarios share: the synthetic teacher data of spec 002 §1.2 drawn per
//! trial from the scenario seed, with common random numbers across σ_p, or read from the
//! scenario's `data_file`/`init_file` ([`TeacherFiles`]), and the model built on a draw for the
//! chosen training mode.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::instance::prompt::{StudentInit, TeacherData, TeacherTrial};
use crate::instance::{Arrays, InstanceError, InstanceFile};
use crate::models::prompt::{
    student_start, Attention, PromptData, PromptModel, Synthetic, SyntheticDraw, Trained,
};
use crate::scenario::cost::{n, Cost};
use crate::scenario::{InputError, RunContext, Scenario};

/// Random stream of trial k is `TRIAL_STREAM + k`: the same for every σ_p, so only the
/// teacher's scale changes between σ_p values of one trial (spec §1.2 step 3).
pub const TRIAL_STREAM: u64 = 1000;
/// First stream free for a scenario's own randomness.
pub const FIRST_FREE_STREAM: u64 = 1;

/// Which parameters are trained (spec §5 E5: the theorems freeze v, the experiments do not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrainName {
    /// p only, v frozen at the teacher's v_T (Assumption A1).
    P,
    /// p and v from (p₀, v₀).
    Pv,
}

/// The synthetic teacher (σ_v = 1, softmax labels) at scale σ_p on `samples` samples of d = n
/// tokens (the sizes of the built-in draw).
fn synthetic(d: usize, samples: usize, sigma_p: f64) -> Synthetic {
    Synthetic {
        d,
        samples,
        sigma_p,
        sigma_v: 1.0,
        teacher: Attention::Softmax,
    }
}

/// The instance files of the synthetic-teacher scenarios: `data_file` (tokens `X` and teacher
/// directions `xi_p`, `xi_v`: [`TeacherData`]) and `init_file` (`p0`, `v0`: [`StudentInit`]),
/// read and checked against each other; either may be absent. A data file sets the sizes (N, n,
/// d) and the trial count; without an init file the start (p₀, v₀) ~ N(0, I/d) is drawn from
/// trial k's stream; without a data file the data are drawn as always.
pub struct TeacherFiles {
    data: Option<(PathBuf, TeacherData)>,
    init: Option<(PathBuf, StudentInit)>,
}

impl TeacherFiles {
    /// Reads the files. `d_default` is the scenario's d (the init's length without a data file),
    /// `trains_v` whether runs start v at v₀ (then the init file needs `v0`), `single` whether
    /// the scenario runs one trial (then stacked trials are refused).
    pub fn read(
        sc: &Scenario,
        data_file: Option<&Path>,
        init_file: Option<&Path>,
        d_default: usize,
        trains_v: bool,
        single: bool,
    ) -> Result<Self, InputError> {
        let data = data_file
            .map(|f| {
                let data: TeacherData = sc.read_instance("data_file", f)?;
                Ok::<_, InputError>((sc.input_path("data_file", f), data))
            })
            .transpose()?;
        let init = init_file
            .map(|f| {
                let init: StudentInit = sc.read_instance("init_file", f)?;
                Ok::<_, InputError>((sc.input_path("init_file", f), init))
            })
            .transpose()?;
        let files = TeacherFiles { data, init };
        if single {
            if let Some((path, data)) = &files.data {
                data.single_trial()
                    .map_err(|e| file_error(path, "data_file", e))?;
            }
        }
        if let Some((path, init)) = &files.init {
            let d = files.data().map_or(d_default, |t| t.d);
            let trials = match (files.data(), single) {
                (Some(t), _) => t.trials.len(),
                (None, true) => 1,
                (None, false) => init.p0.len(),
            };
            init.require_fits(d, trials)
                .and_then(|()| match trains_v {
                    true => init.require_v0().map(|_| ()),
                    false => Ok(()),
                })
                .map_err(|e| file_error(path, "init_file", e))?;
        }
        Ok(files)
    }

    fn data(&self) -> Option<&TeacherData> {
        self.data.as_ref().map(|(_, d)| d)
    }

    /// Whether a data file replaces the built-in draw (then checks tied to it are skipped).
    pub fn user_data(&self) -> bool {
        self.data.is_some()
    }

    /// The number of trials: the data file's, else the init file's, else `default`.
    pub fn trials(&self, default: usize) -> usize {
        match (self.data(), &self.init) {
            (Some(t), _) => t.trials.len(),
            (None, Some((_, init))) => init.p0.len(),
            (None, None) => default,
        }
    }

    /// Trial `trial` at teacher scale σ_p (trial 0 of a file for a one-trial scenario): the
    /// file's numbers where given, else the built-in draw of (d, samples).
    pub fn draw(
        &self,
        ctx: &RunContext,
        d: usize,
        samples: usize,
        sigma_p: f64,
        trial: usize,
    ) -> SyntheticDraw {
        let index = if self.trials(1) == 1 { 0 } else { trial };
        let mut draw = match self.data() {
            None => synthetic(d, samples, sigma_p).draw(&mut ctx.rng(TRIAL_STREAM + trial as u64)),
            Some(t) => {
                let TeacherTrial { x, xi_p, xi_v } = &t.trials[index];
                let (p0, v0) = student_start(t.d, &mut ctx.rng(TRIAL_STREAM + trial as u64));
                let tokens =
                    PromptData::new(t.n_tokens, t.d, t.samples, x.clone(), vec![0.0; t.samples]);
                synthetic(t.d, t.samples, sigma_p).with_numbers(
                    tokens,
                    xi_p.clone(),
                    xi_v.clone(),
                    p0,
                    v0,
                )
            }
        };
        if let Some((_, init)) = &self.init {
            draw.p0 = init.p0[index].clone();
            if let Some(v0) = &init.v0 {
                draw.v0 = v0[index].clone();
            }
        }
        draw
    }
}

/// `instance.npz` of a run on `draws` (one per trial, at any σ_p: the numbers do not depend on
/// it): the tokens and teacher directions, and the initial state the runs started from — none
/// (`None`), p₀ (`P`, v frozen at v_T) or (p₀, v₀) (`Pv`).
pub fn teacher_instance(draws: &[SyntheticDraw], init: Option<TrainName>) -> Arrays {
    let first = &draws[0].data;
    let data = TeacherData {
        samples: first.samples,
        n_tokens: first.n_tokens,
        d: first.d,
        trials: draws
            .iter()
            .map(|dr| TeacherTrial {
                x: dr.data.x.clone(),
                xi_p: dr.xi_p.clone(),
                xi_v: dr.xi_v.clone(),
            })
            .collect(),
    };
    let mut a = data.to_arrays();
    if let Some(train) = init {
        let start = StudentInit {
            p0: draws.iter().map(|dr| dr.p0.clone()).collect(),
            v0: (train == TrainName::Pv).then(|| draws.iter().map(|dr| dr.v0.clone()).collect()),
        };
        a.merge_prefixed("", start.to_arrays());
    }
    a
}

/// An error about an array of the file `path`, given by `params.<key>`.
pub fn file_error(path: &Path, key: &str, e: InstanceError) -> InputError {
    InputError::new(
        path,
        e.key,
        format!("{} (file given by params.{key})", e.reason),
    )
}

/// The student model on a draw and its initial state: (p₀, v₀) for `Pv`, p₀ with v = v_T for `P`.
pub fn student(
    draw: &SyntheticDraw,
    attention: Attention,
    train: TrainName,
) -> (PromptModel, Vec<f64>) {
    let trained = match train {
        TrainName::P => Trained::P {
            v: draw.v_teacher.clone(),
        },
        TrainName::Pv => Trained::PV,
    };
    let model = PromptModel::new(draw.data.clone(), attention, trained);
    let theta0 = model.state(&draw.p0, &draw.v0);
    (model, theta0)
}

/// The teacher's parameters as a state of `model` (for Hessians at the teacher).
pub fn teacher_state(model: &PromptModel, draw: &SyntheticDraw) -> Vec<f64> {
    model.state(&draw.p_teacher, &draw.v_teacher)
}

/// The cost (see [`crate::scenario::cost`]) of `count` synthetic draws of N samples X_i ∈ ℝ^{d×d}
/// held at once (N·d² doubles each; `key` names the keys they grow with).
pub fn synthetic_data(key: &'static str, count: f64, d: usize, samples: usize) -> Cost {
    Cost::new().doubles(
        key,
        "the samples X_i (N·d² doubles)",
        count * n(samples) * n(d) * n(d),
    )
}

/// Floating-point operations of one loss and gradient of the prompt model on N samples of
/// `tokens` tokens in ℝ^d (the logits X_i p, the softmax, the output and their adjoints).
pub fn prompt_grad(tokens: usize, d: usize, samples: usize) -> f64 {
    6.0 * n(samples) * n(tokens) * n(d)
}

//! The instance files of the seed-000 scenarios: `data_file` (task matrix `M`, `strings`) and
//! `init_file` (`Q0`, `v0`), read through [`crate::instance::histogram`], with every error naming
//! the file, the array and the reason (exit 2, nothing written). Scenarios read them while
//! validating (to refuse bad files before anything runs) and again when running. The scenarios
//! that run one df flow per task read k stacked task matrices instead ([`TaskMatrices`]).

use std::path::{Path, PathBuf};

use nalgebra::DMatrix;

use crate::instance::histogram::{instance_arrays, InitialStates, TaskMatrices, TaskStrings};

use super::task_param::TaskName;
use crate::instance::{Arrays, InstanceError, InstanceFile};
use crate::models::histogram::landscape::bad_set_value;
use crate::models::histogram::{layout, HistogramData};

/// A column of a given init is at bad-set value ε when |q_iᵀm_i + ρ̄_iμ_iv_i − ε| is at most
/// this times |q_iᵀm_i| + ρ̄_iμ_i|v_i|, the size of the two terms that cancel (the scenarios'
/// own constructor leaves ~1e-16).
const BAD_SET_REL: f64 = 1e-10;
use crate::scenario::{InputError, Scenario};

/// A data layout of the family: it fixes the alphabet size the initial states must have.
pub trait HistogramDataFile: InstanceFile {
    fn alphabet(&self) -> usize;
}

impl HistogramDataFile for TaskStrings {
    fn alphabet(&self) -> usize {
        self.d()
    }
}

impl HistogramDataFile for TaskMatrices {
    fn alphabet(&self) -> usize {
        self.d()
    }
}

/// The files a scenario was given, read and validated.
pub struct InstanceFiles<D = TaskStrings> {
    data: Option<(PathBuf, D)>,
    init: Option<(PathBuf, InitialStates)>,
}

impl<D: HistogramDataFile> InstanceFiles<D> {
    /// Reads `params.data_file` and `params.init_file` (either may be absent). Initial states
    /// must have the data's alphabet size; without a data file, `d_default` (the scenario's `d`).
    pub fn read(
        sc: &Scenario,
        data_file: Option<&Path>,
        init_file: Option<&Path>,
        d_default: usize,
    ) -> Result<Self, InputError> {
        let data = data_file
            .map(|f| {
                let data: D = sc.read_instance("data_file", f)?;
                Ok::<_, InputError>((sc.input_path("data_file", f), data))
            })
            .transpose()?;
        let init = init_file
            .map(|f| {
                let init: InitialStates = sc.read_instance("init_file", f)?;
                Ok::<_, InputError>((sc.input_path("init_file", f), init))
            })
            .transpose()?;
        let files = InstanceFiles { data, init };
        if let Some((_, init)) = &files.init {
            init.require_alphabet(files.d(d_default))
                .map_err(|e| files.init_error(e))?;
        }
        Ok(files)
    }

    pub fn data(&self) -> Option<&D> {
        self.data.as_ref().map(|(_, d)| d)
    }

    pub fn init(&self) -> Option<&InitialStates> {
        self.init.as_ref().map(|(_, i)| i)
    }

    /// The alphabet size: the data file's, else `d_default`.
    pub fn d(&self, d_default: usize) -> usize {
        self.data().map_or(d_default, D::alphabet)
    }

    /// An error about an array of the data file.
    pub fn data_error(&self, e: InstanceError) -> InputError {
        file_error(self.data.as_ref().map(|(p, _)| p.as_path()), "data_file", e)
    }

    /// An error about an array of the init file.
    pub fn init_error(&self, e: InstanceError) -> InputError {
        file_error(self.init.as_ref().map(|(p, _)| p.as_path()), "init_file", e)
    }

    /// The one initial state: the init file's, else `draw()`.
    pub fn single_init(&self, draw: impl FnOnce() -> Vec<f64>) -> Result<Vec<f64>, InputError> {
        match self.init() {
            Some(init) => Ok(init
                .single_state()
                .map_err(|e| self.init_error(e))?
                .to_vec()),
            None => Ok(draw()),
        }
    }

    /// The init file's states for `runs` runs, which it must hold exactly (one per run, in the
    /// order `order` describes); `None` without an init file.
    pub fn run_inits(&self, runs: usize, order: &str) -> Result<Option<Vec<Vec<f64>>>, InputError> {
        match self.init() {
            None => Ok(None),
            Some(init) if init.states.len() == runs => Ok(Some(init.states.clone())),
            Some(init) => Err(self.init_error(InstanceError::new(
                "Q0",
                format!(
                    "{} initial state(s), but this run has {runs} flows ({order}): one initial \
                     state per flow, stacked (k, d, d)",
                    init.states.len()
                ),
            ))),
        }
    }
}

impl<D: HistogramDataFile> InstanceFiles<D> {
    /// Refuses given initial states (run j on `ms[j]`) whose `columns` (0-based) are not at
    /// bad-set value `eps[j]`: the scenarios that start on or near the bad set (spec R10) need
    /// them there, and say so in `why`.
    pub fn require_bad_set_value(
        &self,
        ms: &[DMatrix<f64>],
        inits: &[Vec<f64>],
        columns: &[usize],
        eps: &[f64],
        why: &str,
    ) -> Result<(), InputError> {
        for (j, ((z, m), &eps)) in inits.iter().zip(ms).zip(eps).enumerate() {
            for &i in columns {
                let (q, v) = layout::column(z, m.nrows(), i);
                let m_i = m.column(i);
                let p: f64 = q.iter().zip(m_i.iter()).map(|(a, b)| a * b).sum();
                let value = bad_set_value(q, v, m_i.as_slice());
                let scale = p.abs() + (value - p).abs();
                if (value - eps).abs() <= BAD_SET_REL * scale {
                    continue;
                }
                let run = if inits.len() > 1 {
                    format!("{j}, ")
                } else {
                    String::new()
                };
                return Err(self.init_error(InstanceError::new(
                    format!("Q0[{run}:, {i}]"),
                    format!(
                        "column {} has q_iᵀm_i + ρ̄_iμ_iv_i = {value:.6e}, not {eps:e} (relative \
                         tolerance {BAD_SET_REL:e}): {why}",
                        i + 1
                    ),
                )));
            }
        }
        Ok(())
    }
}

impl InstanceFiles<TaskStrings> {
    /// For scenarios of ℓ_df: refuses a data alphabet below 2 symbols.
    pub fn require_df_data(&self) -> Result<(), InputError> {
        if self.data().is_some_and(|d| d.d() < 2) {
            return Err(self.data_error(InstanceError::new("M", "the alphabet needs d ≥ 2")));
        }
        Ok(())
    }

    /// For scenarios of ℓ_df on one initial state: refuses a data alphabet below 2 symbols and
    /// stacked initial states.
    pub fn require_df_single(&self) -> Result<(), InputError> {
        self.require_df_data()?;
        if let Some(init) = self.init() {
            init.single_state().map_err(|e| self.init_error(e))?;
        }
        Ok(())
    }

    /// For scenarios of ℓ_tf on one dataset and one initial state: besides
    /// [`Self::require_df_single`], refuses a data file without strings, with stacked datasets,
    /// or whose H_a are singular (then zero ℓ_tf does not force Q Diag(v) = M).
    pub fn require_tf_single(&self) -> Result<(), InputError> {
        self.require_df_single()?;
        if let Some(data) = self.data() {
            data.single_dataset().map_err(|e| self.data_error(e))?;
            data.require_definite().map_err(|e| self.data_error(e))?;
        }
        Ok(())
    }

    /// The one dataset: the data file's `M` and strings, else `draw()`.
    pub fn single_dataset(
        &self,
        draw: impl FnOnce() -> HistogramData,
    ) -> Result<HistogramData, InputError> {
        match self.data() {
            Some(file) => {
                let strings = file.single_dataset().map_err(|e| self.data_error(e))?;
                Ok(HistogramData::from_strings(
                    file.m.clone(),
                    strings.to_vec(),
                ))
            }
            None => Ok(draw()),
        }
    }

    /// The task matrix: the data file's `M`, else `default()`.
    pub fn task_matrix(&self, default: impl FnOnce() -> DMatrix<f64>) -> DMatrix<f64> {
        self.data().map_or_else(default, |d| d.m.clone())
    }

    /// The number of trials: the number of stacked datasets (when `count_datasets` and the
    /// data file has strings) and of initial states in the files, which must agree; `default`
    /// when no file says.
    pub fn trials(&self, default: usize, count_datasets: bool) -> Result<usize, InputError> {
        let from_data = self
            .data()
            .filter(|_| count_datasets)
            .map(|d| d.datasets.len())
            .filter(|&k| k > 0);
        let from_init = self.init().map(|i| i.states.len());
        match (from_data, from_init) {
            (Some(k_data), Some(k_init)) if k_data != k_init => {
                Err(self.init_error(InstanceError::new(
                    "Q0",
                    format!(
                        "{k_init} initial state(s), but the data file holds {k_data} dataset(s): \
                         one initial state per dataset"
                    ),
                )))
            }
            (Some(k), _) | (None, Some(k)) => Ok(k),
            (None, None) => Ok(default),
        }
    }
}

impl InstanceFiles<TaskMatrices> {
    /// The task matrix of each run: the data file's, else those of `tasks`.
    pub fn task_matrices(&self, tasks: &[TaskName], d: usize, d_thr: usize) -> Vec<DMatrix<f64>> {
        match self.data() {
            Some(data) => data.ms.clone(),
            None => tasks.iter().map(|t| t.matrix(d, d_thr)).collect(),
        }
    }
}

/// `instance.npz` of a run of ℓ_df: the task matrix and the initial states (no strings).
pub fn df_instance(m: &DMatrix<f64>, inits: Vec<Vec<f64>>) -> Arrays {
    let data = TaskStrings {
        m: m.clone(),
        datasets: Vec::new(),
    };
    instance_arrays(&data, &InitialStates::from_states(m.nrows(), inits))
}

/// `instance.npz` of a scenario that runs the df flow on several task matrices: the matrices,
/// stacked (k, d, d), and the initial states of its runs, stacked in the scenario's run order.
pub fn stacked_df_instance(ms: Vec<DMatrix<f64>>, inits: Vec<Vec<f64>>) -> Arrays {
    let d = ms[0].nrows();
    let mut a = TaskMatrices { ms }.to_arrays();
    for (name, array) in InitialStates::from_states(d, inits).to_arrays().iter() {
        a.insert(name, array.clone());
    }
    a
}

/// `instance.npz` of a run of ℓ_tf on one dataset: the task matrix, the strings and the
/// initial states.
pub fn tf_instance(data: &HistogramData, inits: Vec<Vec<f64>>) -> Arrays {
    let strings = TaskStrings {
        m: data.m.clone(),
        datasets: vec![data.strings.clone()],
    };
    instance_arrays(&strings, &InitialStates::from_states(data.d, inits))
}

fn file_error(path: Option<&Path>, key: &str, e: InstanceError) -> InputError {
    InputError::new(
        path.unwrap_or(Path::new("(no file)")),
        e.key,
        format!("{} (file given by params.{key})", e.reason),
    )
}

//! The instance files of the seed-000 scenarios: `data_file` (task matrix `M`, `strings`) and
//! `init_file` (`Q0`, `v0`), read through [`crate::instance::histogram`], with every error naming
//! the file, the array and the reason (exit 2, nothing written). Scenarios read them while
//! validating (to refuse bad files before anything runs) and again when running.

use std::path::{Path, PathBuf};

use nalgebra::DMatrix;

use crate::instance::histogram::{instance_arrays, InitialStates, TaskStrings};
use crate::instance::{Arrays, InstanceError};
use crate::scenario::{InputError, Scenario};

/// The files a scenario was given, read and validated.
pub struct InstanceFiles {
    data: Option<(PathBuf, TaskStrings)>,
    init: Option<(PathBuf, InitialStates)>,
}

impl InstanceFiles {
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
                let data: TaskStrings = sc.read_instance("data_file", f)?;
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

    pub fn data(&self) -> Option<&TaskStrings> {
        self.data.as_ref().map(|(_, d)| d)
    }

    pub fn init(&self) -> Option<&InitialStates> {
        self.init.as_ref().map(|(_, i)| i)
    }

    /// The alphabet size: the data file's, else `d_default`.
    pub fn d(&self, d_default: usize) -> usize {
        self.data().map_or(d_default, TaskStrings::d)
    }

    /// An error about an array of the data file.
    pub fn data_error(&self, e: InstanceError) -> InputError {
        file_error(self.data.as_ref().map(|(p, _)| p.as_path()), "data_file", e)
    }

    /// An error about an array of the init file.
    pub fn init_error(&self, e: InstanceError) -> InputError {
        file_error(self.init.as_ref().map(|(p, _)| p.as_path()), "init_file", e)
    }

    /// For scenarios of ℓ_df on one initial state: refuses a data alphabet below 2 symbols and
    /// stacked initial states.
    pub fn require_df_single(&self) -> Result<(), InputError> {
        if self.data().is_some_and(|d| d.d() < 2) {
            return Err(self.data_error(InstanceError::new("M", "the alphabet needs d ≥ 2")));
        }
        if let Some(init) = self.init() {
            init.single_state().map_err(|e| self.init_error(e))?;
        }
        Ok(())
    }

    /// The task matrix: the data file's `M`, else `default()`.
    pub fn task_matrix(&self, default: impl FnOnce() -> DMatrix<f64>) -> DMatrix<f64> {
        self.data().map_or_else(default, |d| d.m.clone())
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

/// `instance.npz` of a run of ℓ_df: the task matrix and the initial states (no strings).
pub fn df_instance(m: &DMatrix<f64>, inits: Vec<Vec<f64>>) -> Arrays {
    let data = TaskStrings {
        m: m.clone(),
        datasets: Vec::new(),
    };
    instance_arrays(&data, &InitialStates::from_states(m.nrows(), inits))
}

fn file_error(path: Option<&Path>, key: &str, e: InstanceError) -> InputError {
    InputError::new(
        path.unwrap_or(Path::new("(no file)")),
        e.key,
        format!("{} (file given by params.{key})", e.reason),
    )
}

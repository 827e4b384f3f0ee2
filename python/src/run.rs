//! `attnflow.run`: a scenario run exactly as `attnflow run` does it (same validation, same
//! outputs); the Python layer reads the written files back.

use std::path::{Path, PathBuf};

use attnflow::flow::Method;
use attnflow::scenario::run::{execute, load_and_validate, resolve, ExecOptions};
use attnflow::scenario::{Overrides, RunError};
use pyo3::prelude::*;

use crate::{input_error, run_error};

/// Runs `scenario` (a file, or a name under `dir`) with `--set` overrides, writes its outputs
/// under `out` and returns the run's output folder. InputError for bad input (nothing
/// written), RunError when the run fails.
#[pyfunction]
#[pyo3(signature = (scenario, set, seed, out, quick, dir, solver=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_scenario(
    py: Python<'_>,
    scenario: &str,
    set: Vec<String>,
    seed: Option<u64>,
    out: &str,
    quick: bool,
    dir: &str,
    solver: Option<&str>,
) -> PyResult<String> {
    let method = solver
        .map(|s| {
            Method::parse(s).ok_or_else(|| {
                input_error(format!(
                    "solver: unknown `{s}` (bdf, esdirk34, tr_bdf2, tsit45)"
                ))
            })
        })
        .transpose()?;
    let dir = PathBuf::from(dir);
    let overrides = Overrides {
        set,
        seed,
        method,
        quick,
        dir: Some(dir.clone()),
        allow_large: false,
    };
    let outcome = py.detach(|| -> Result<_, RunError> {
        let path = resolve(scenario, &dir)?;
        let ready = load_and_validate(&path, &overrides)?;
        execute(ready, Path::new(out), ExecOptions::default())
    });
    match outcome {
        Ok(o) => Ok(o.dir.display().to_string()),
        Err(RunError::Input(e)) => Err(input_error(e)),
        Err(e) => Err(run_error(e)),
    }
}

//! `attnflow._attnflow`: the Rust side of the Python package. Everything heavy (models, flows,
//! solvers, scenario runs) runs here with the GIL released; the Python layer (`python/attnflow`)
//! only shapes arguments and results.
//!
//! Conversions: an instance is a `dict[str, numpy.ndarray]` (float64, any shape, row-major as
//! numpy stores it by default) ⇄ [`attnflow::instance::Arrays`]. Errors: bad input raises
//! `attnflow.InputError` (a `ValueError`), a solver failure `attnflow.RunError` (a
//! `RuntimeError`), each carrying attnflow's message.

use std::path::Path;

use attnflow::instance::{Array, Arrays, InstanceError};
use numpy::{PyReadonlyArrayDyn, PyUntypedArrayMethods, ToPyArray};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

mod families;
mod model;
mod run;
mod svm;

create_exception!(
    _attnflow,
    InputError,
    PyValueError,
    "Bad input: the message names the file or array, the key and the reason."
);
create_exception!(
    _attnflow,
    RunError,
    PyRuntimeError,
    "A run or solver failed (integration failure, divergence, infeasible program, I/O)."
);

/// `attnflow.InputError` with `message`.
pub(crate) fn input_error(message: impl std::fmt::Display) -> PyErr {
    InputError::new_err(message.to_string())
}

/// `attnflow.RunError` with `message`.
pub(crate) fn run_error(message: impl std::fmt::Display) -> PyErr {
    RunError::new_err(message.to_string())
}

/// An instance error about `what` (a file, or "data"/"init" for arrays passed from Python).
pub(crate) fn instance_error(what: &str, e: &InstanceError) -> PyErr {
    input_error(format!("{what}: {}: {}", e.key, e.reason))
}

/// A `dict[str, array-like]` as attnflow arrays (float64, row-major).
pub(crate) fn arrays_from_dict(dict: &Bound<'_, PyDict>, what: &str) -> PyResult<Arrays> {
    let np = dict.py().import("numpy")?;
    let mut arrays = Arrays::new();
    for (key, value) in dict.iter() {
        let name: String = key
            .extract()
            .map_err(|_| input_error(format!("{what}: array names must be strings, got {key}")))?;
        let converted = np
            .call_method1("ascontiguousarray", (value,))
            .and_then(|a| a.call_method1("astype", ("float64",)))
            .map_err(|e| input_error(format!("{what}: {name}: not a numeric array ({e})")))?;
        let array: PyReadonlyArrayDyn<'_, f64> = converted.extract()?;
        let shape = array.shape().to_vec();
        let data = array.as_array().iter().copied().collect();
        arrays.insert(&name, Array::new(&shape, data));
    }
    arrays
        .check_finite()
        .map_err(|e| instance_error(what, &e))?;
    Ok(arrays)
}

/// Attnflow arrays as a `dict[str, numpy.ndarray]`.
pub(crate) fn arrays_to_dict<'py>(
    py: Python<'py>,
    arrays: &Arrays,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, array) in arrays.iter() {
        // numpy's own reshape: it also makes 0-d arrays (scalars) of shape ()
        let shape = pyo3::types::PyTuple::new(py, &array.shape)?;
        let shaped = array
            .data
            .to_pyarray(py)
            .call_method1("reshape", (shape,))?;
        dict.set_item(name, shaped)?;
    }
    Ok(dict)
}

/// Reads an instance file (`.npz` as written by `numpy.savez`, or `.json`) into a dict of
/// float64 arrays. Raises InputError naming the file, the array and the reason.
#[pyfunction]
fn load_instance<'py>(py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyDict>> {
    let arrays = Arrays::read(Path::new(path)).map_err(|e| instance_error(path, &e))?;
    arrays_to_dict(py, &arrays)
}

/// Writes a dict of arrays as an instance file (`.npz`), the format `load_instance` and the
/// command line's `data_file`/`init_file` read. Raises InputError for non-finite entries.
#[pyfunction]
fn save_instance(path: &str, arrays: &Bound<'_, PyDict>) -> PyResult<()> {
    if !path.to_ascii_lowercase().ends_with(".npz") {
        return Err(input_error(format!(
            "{path}: an instance file is written as .npz"
        )));
    }
    let arrays = arrays_from_dict(arrays, path)?;
    std::fs::write(path, arrays.to_npz_bytes()).map_err(|e| run_error(format!("{path}: {e}")))
}

#[pymodule]
fn _attnflow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add("RunError", m.py().get_type::<RunError>())?;
    // The scenario files of the checkout the package was built from: `pip install ./python`
    // builds from a checkout, and a wheel does not carry the repository's scenarios/ folder.
    m.add(
        "SOURCE_SCENARIOS",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios"),
    )?;
    m.add_function(wrap_pyfunction!(load_instance, m)?)?;
    m.add_function(wrap_pyfunction!(save_instance, m)?)?;
    m.add_function(wrap_pyfunction!(run::run_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(families::family_names, m)?)?;
    m.add_class::<model::Model>()?;
    svm::register(m)?;
    Ok(())
}

//! The max-margin solvers of `attnflow.analysis.svm` with their optimality certificates:
//! W-SVM (Frobenius), nuclear-norm W-SVM, ℓ1-SVM. Solutions come back as dicts of numpy arrays
//! and numbers; the certificate (KKT residuals) as a dict under `kkt`.

use attnflow::analysis::svm::{
    solve_l1, solve_l2, solve_nuclear, NuclearSettings, RankOneConstraints, SvmError, SvmMethod,
    TokenView, VectorConstraints,
};
use nalgebra::DMatrix;
use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Serialize;

use crate::{input_error, run_error};

fn svm_error(e: SvmError) -> PyErr {
    match e {
        SvmError::Invalid { .. } => input_error(e),
        _ => run_error(e),
    }
}

/// The W-SVM constraints of tokens `x` (n × T × d), queries `z` (n × d), optimal tokens `opt`.
fn w_constraints(
    x: &PyReadonlyArray3<'_, f64>,
    z: &PyReadonlyArray2<'_, f64>,
    opt: &[i64],
) -> PyResult<RankOneConstraints> {
    let [n, t, d] = [x.shape()[0], x.shape()[1], x.shape()[2]];
    if z.shape() != [n, d] {
        return Err(input_error(format!(
            "z: expected shape ({n}, {d}), got {:?}",
            z.shape()
        )));
    }
    if let Some(i) = opt.iter().position(|&o| o < 0) {
        return Err(input_error(format!(
            "opt[{i}]: {} is not a token index",
            opt[i]
        )));
    }
    let opt: Vec<usize> = opt.iter().map(|&o| o as usize).collect();
    let (xs, zs) = (
        x.as_array().iter().copied().collect::<Vec<_>>(),
        z.as_array().iter().copied().collect::<Vec<_>>(),
    );
    let view = TokenView {
        n,
        t,
        d,
        x: &xs,
        queries: &zs,
    };
    RankOneConstraints::w_svm(&view, &opt).map_err(svm_error)
}

/// A solution struct as a dict (through its serde form), with `w` reshaped to `shape`.
fn solution_dict<'py, S: Serialize>(
    py: Python<'py>,
    solution: &S,
    w_key: &str,
    shape: (usize, usize),
) -> PyResult<Bound<'py, PyDict>> {
    let json = serde_json::to_string(solution).map_err(run_error)?;
    let dict: Bound<'py, PyDict> = py
        .import("json")?
        .call_method1("loads", (json,))?
        .downcast_into()?;
    if let Some(w) = dict.get_item(w_key)? {
        let w: Vec<f64> = w.extract()?;
        // attnflow stores vec(W) column-major
        let m = DMatrix::from_column_slice(shape.0, shape.1, &w);
        let rows: Vec<Vec<f64>> = m.row_iter().map(|r| r.iter().copied().collect()).collect();
        dict.set_item("W", numpy::PyArray2::from_vec2(py, &rows)?)?;
    }
    Ok(dict)
}

/// Frobenius W-SVM: min ‖W‖_F s.t. (x_{i,opt_i} − x_{i,t})ᵀ W z_i ≥ 1 for all i, t ≠ opt_i.
#[pyfunction]
fn w_svm<'py>(
    py: Python<'py>,
    x: PyReadonlyArray3<'_, f64>,
    z: PyReadonlyArray2<'_, f64>,
    opt: Vec<i64>,
) -> PyResult<Bound<'py, PyDict>> {
    let c = w_constraints(&x, &z, &opt)?;
    let sol = py
        .detach(|| solve_l2(&c, SvmMethod::Dual))
        .map_err(svm_error)?;
    solution_dict(py, &sol, "w", c.shape())
}

/// Nuclear-norm W-SVM: min ‖W‖_* under the W-SVM constraints, with a certified duality gap.
#[pyfunction]
#[pyo3(signature = (x, z, opt, tol=1e-9, max_iterations=200_000))]
fn nuclear_svm<'py>(
    py: Python<'py>,
    x: PyReadonlyArray3<'_, f64>,
    z: PyReadonlyArray2<'_, f64>,
    opt: Vec<i64>,
    tol: f64,
    max_iterations: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let c = w_constraints(&x, &z, &opt)?;
    let settings = NuclearSettings {
        tol,
        max_iterations,
    };
    let sol = py
        .detach(|| solve_nuclear(&c, &settings))
        .map_err(svm_error)?;
    solution_dict(py, &sol, "w", c.shape())
}

/// ℓ1-SVM: min ‖β‖₁ s.t. ⟨β, f_k⟩ ≥ 1 for the rows f_k of `f` (m × p), by an LP with its KKT
/// certificate.
#[pyfunction]
fn l1_svm<'py>(py: Python<'py>, f: PyReadonlyArray2<'_, f64>) -> PyResult<Bound<'py, PyDict>> {
    let (m, p) = (f.shape()[0], f.shape()[1]);
    let rows: Vec<f64> = f.as_array().iter().copied().collect();
    if rows.iter().any(|v| !v.is_finite()) {
        return Err(input_error("f: non-finite entry"));
    }
    let labels = (0..m)
        .map(|k| attnflow::analysis::svm::ConstraintLabel {
            sequence: k,
            token: 0,
        })
        .collect();
    let c = VectorConstraints {
        f: DMatrix::from_row_slice(m, p, &rows),
        labels,
    };
    let sol = py.detach(|| solve_l1(&c)).map_err(svm_error)?;
    solution_dict(py, &sol, "", (0, 0))
}

/// 1 − cos∠(a, b) of two arrays of the same size, without cancellation.
#[pyfunction]
fn one_minus_cos(a: PyReadonlyArray1<'_, f64>, b: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    let (a, b) = (a.as_slice()?, b.as_slice()?);
    if a.len() != b.len() {
        return Err(input_error(format!(
            "b: length {} differs from a's {}",
            b.len(),
            a.len()
        )));
    }
    Ok(attnflow::analysis::svm::one_minus_cos(a, b))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(w_svm, m)?)?;
    m.add_function(wrap_pyfunction!(nuclear_svm, m)?)?;
    m.add_function(wrap_pyfunction!(l1_svm, m)?)?;
    m.add_function(wrap_pyfunction!(one_minus_cos, m)?)?;
    Ok(())
}

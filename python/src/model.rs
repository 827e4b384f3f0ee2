//! `attnflow.Model`: one family's model on an instance, with its exact derivatives, its flow
//! and the papers' discrete optimizers. The integration runs in Rust with the GIL released: no
//! Python code runs per step.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use attnflow::flow::{
    gradient_descent, integrate, integrate_log_time, linspace, logspace, Descent, DiscreteConfig,
    Method, OdeConfig, Recording, StepRule, Trajectory,
};
use attnflow::instance::Arrays;
use attnflow::scenario::flow::{Clock, FlowModel};
use attnflow::scenario::{Overrides, Scenario};
use nalgebra::DMatrix;
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, ToPyArray};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::{arrays_from_dict, arrays_to_dict, families, input_error, instance_error, run_error};

/// A model family's model on an instance (the Python layer documents the arguments).
#[pyclass(module = "attnflow._attnflow", name = "Model")]
pub struct Model {
    family: &'static str,
    /// `FlowModel` is `Send` only (models keep `RefCell` workspaces); the lock makes it shareable.
    inner: Mutex<Box<dyn FlowModel>>,
}

/// An instance argument: a path (read with the file's name in errors) or a dict of arrays.
fn instance_arg(value: &Bound<'_, PyAny>, what: &str) -> PyResult<(String, Arrays)> {
    if let Ok(path) = value.downcast::<PyString>() {
        let path = path.to_string();
        let arrays = Arrays::read(Path::new(&path)).map_err(|e| instance_error(&path, &e))?;
        return Ok((path, arrays));
    }
    let dict = value
        .downcast::<PyDict>()
        .map_err(|_| input_error(format!("{what}: expected a path or a dict of arrays")))?;
    Ok((what.to_string(), arrays_from_dict(dict, what)?))
}

impl Model {
    fn model(&self) -> MutexGuard<'_, Box<dyn FlowModel>> {
        // a panic inside a model call poisons the lock; the model itself is still usable
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `z` as a state of this model (length checked).
    fn state(&self, z: &PyReadonlyArray1<'_, f64>, name: &str) -> PyResult<Vec<f64>> {
        let v = z.as_slice()?.to_vec();
        let dim = self.model().dim();
        if v.len() != dim {
            return Err(input_error(format!(
                "{name}: has length {} but the model has dimension {dim}",
                v.len()
            )));
        }
        Ok(v)
    }
}

/// A trajectory as a dict: `t`, `states` (samples × dim), `loss`, `grad_norm`, `invariants`
/// (name → values), `stats_json` (solver statistics) and `stop_reason`.
fn trajectory_dict<'py>(
    py: Python<'py>,
    traj: &Trajectory,
    stop_reason: String,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("t", traj.t.to_pyarray(py))?;
    let states = traj.states.to_pyarray(py).reshape([traj.len(), traj.dim])?;
    out.set_item("states", states)?;
    out.set_item("loss", traj.loss.to_pyarray(py))?;
    out.set_item("grad_norm", traj.grad_norm.to_pyarray(py))?;
    let invariants = PyDict::new(py);
    for (name, values) in &traj.invariants {
        invariants.set_item(name, values.to_pyarray(py))?;
    }
    out.set_item("invariants", invariants)?;
    out.set_item(
        "stats_json",
        serde_json::to_string(&traj.stats).unwrap_or_default(),
    )?;
    out.set_item("stop_reason", stop_reason)?;
    Ok(out)
}

/// A matrix as a row-major numpy array.
fn matrix<'py>(py: Python<'py>, m: &DMatrix<f64>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let rows: Vec<Vec<f64>> = m.row_iter().map(|r| r.iter().copied().collect()).collect();
    Ok(PyArray2::from_vec2(py, &rows)?)
}

#[pymethods]
impl Model {
    #[new]
    #[pyo3(signature = (family, data=None, init=None, options_json="{}", seed=0))]
    fn new(
        py: Python<'_>,
        family: &str,
        data: Option<&Bound<'_, PyAny>>,
        init: Option<&Bound<'_, PyAny>>,
        options_json: &str,
        seed: u64,
    ) -> PyResult<Self> {
        let fam = families::find(family)?;
        let options: toml::Table =
            serde_json::from_str(options_json).map_err(|e| input_error(format!("options: {e}")))?;
        let data = data.map(|d| instance_arg(d, "data")).transpose()?;
        let init = init.map(|i| instance_arg(i, "init")).transpose()?;
        let default = match (&data, &init) {
            (None, None) => {
                // the default instance is drawn from the seed as a scenario would draw it
                let text = format!(
                    "kind = \"{}\"\ntitle = \"Python\"\nseed = {seed}\n",
                    fam.kind()
                );
                let sc =
                    Scenario::parse(Path::new("(attnflow.Model)"), &text, &Overrides::default())
                        .map_err(input_error)?;
                let arrays = fam.default_instance(&sc, &options).map_err(input_error)?;
                Some(("the default instance".to_string(), arrays))
            }
            _ => None,
        };
        let (d, i) = match (&data, &init, &default) {
            (Some(d), Some(i), _) => (d, i),
            (Some(d), None, _) | (None, Some(d), _) | (None, None, Some(d)) => (d, d),
            (None, None, None) => unreachable!("a default instance is drawn without data"),
        };
        let model = py.detach(|| fam.model(&d.1, &i.1, &options)).map_err(|e| {
            // name the source that holds the offending array
            let array = e.key.split('[').next().unwrap_or("").trim();
            let source = if d.1.get(array).is_some() { &d.0 } else { &i.0 };
            instance_error(source, &e)
        })?;
        Ok(Model {
            family: fam.name(),
            inner: Mutex::new(model),
        })
    }

    /// The family's name.
    #[getter]
    fn family(&self) -> &'static str {
        self.family
    }

    /// Number of parameters.
    #[getter]
    fn dim(&self) -> usize {
        self.model().dim()
    }

    /// ℓ(z).
    fn loss(&self, z: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
        let z = self.state(&z, "z")?;
        Ok(self.model().loss(&z))
    }

    /// ∇ℓ(z) (exact).
    fn grad<'py>(
        &self,
        py: Python<'py>,
        z: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let z = self.state(&z, "z")?;
        let mut g = vec![0.0; z.len()];
        self.model().grad(&z, &mut g);
        Ok(g.to_pyarray(py))
    }

    /// ∇²ℓ(z)·u (exact Hessian-vector product).
    fn hvp<'py>(
        &self,
        py: Python<'py>,
        z: PyReadonlyArray1<'_, f64>,
        u: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let z = self.state(&z, "z")?;
        let u = self.state(&u, "u")?;
        let mut out = vec![0.0; z.len()];
        self.model().hvp(&z, &u, &mut out);
        Ok(out.to_pyarray(py))
    }

    /// The instance's initial state.
    fn initial_state<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.model().initial_state().to_pyarray(py)
    }

    /// The data and initial state as a dict of arrays (what `save_instance` writes).
    fn instance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        arrays_to_dict(py, &self.model().instance())
    }

    /// The weight matrices of state `z`, by name.
    fn matrices<'py>(
        &self,
        py: Python<'py>,
        z: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let z = self.state(&z, "z")?;
        let out = PyDict::new(py);
        for (name, m) in self.model().matrices(&z) {
            out.set_item(name, matrix(py, &m)?)?;
        }
        Ok(out)
    }

    /// The max-margin solutions with their certificates: a list of dicts.
    fn max_margin<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let margins = py.detach(|| self.model().max_margin()).map_err(run_error)?;
        margins
            .iter()
            .map(|m| {
                let d = PyDict::new(py);
                d.set_item("name", &m.name)?;
                d.set_item("matrix", &m.matrix)?;
                d.set_item("solution", matrix(py, &m.solution)?)?;
                let cert = PyDict::new(py);
                for (k, r) in &m.certificate {
                    cert.set_item(k, r)?;
                }
                d.set_item("certificate", cert)?;
                d.set_item("tolerance", m.tolerance)?;
                Ok(d)
            })
            .collect()
    }

    /// The gradient flow sampled at `grid` (or `samples` times up to `t_end`, linear or
    /// log-spaced by `clock`); see the Python layer's `Model.flow`.
    #[pyo3(signature = (t_end, grid, method, rtol, atol, samples, clock, tau))]
    #[allow(clippy::too_many_arguments)]
    fn flow<'py>(
        &self,
        py: Python<'py>,
        t_end: Option<f64>,
        grid: Option<Vec<f64>>,
        method: &str,
        rtol: f64,
        atol: f64,
        samples: usize,
        clock: Option<&str>,
        tau: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let method = Method::parse(method).ok_or_else(|| {
            input_error(format!(
                "method: unknown `{method}` (bdf, esdirk34, tr_bdf2, tsit45)"
            ))
        })?;
        let cfg = OdeConfig::new(method, rtol, atol);
        if let Some((field, reason)) = cfg.invalid_field() {
            return Err(input_error(format!("{field}: {reason}")));
        }
        let clock = match clock {
            None => self.model().default_clock(),
            Some("linear") => Clock::Linear,
            Some("log") => Clock::Log,
            Some(other) => {
                return Err(input_error(format!(
                    "clock: `{other}` is not linear or log"
                )))
            }
        };
        let times = match (grid, t_end) {
            (Some(g), _) => g,
            (None, Some(t_end)) if t_end.is_finite() && t_end > 0.0 => {
                if samples < 2 {
                    return Err(input_error("samples: need at least 2"));
                }
                sample_times(t_end, samples, clock, tau)
            }
            (None, Some(t_end)) => {
                return Err(input_error(format!("t_end: must be positive, got {t_end}")))
            }
            (None, None) => return Err(input_error("t_end: give t_end or grid")),
        };
        if times.len() < 2 || times.windows(2).any(|w| !(w[1] > w[0])) || !times[0].is_finite() {
            return Err(input_error(
                "grid: needs at least 2 finite, increasing times",
            ));
        }
        let traj = py.detach(|| {
            let model = self.model();
            let z0 = model.initial_state();
            let flow = Descent(model.as_ref());
            let mut traj = match clock {
                Clock::Linear => integrate(&flow, &z0, &times, &cfg, None),
                Clock::Log => integrate_log_time(&flow, &z0, &times, tau, &cfg),
            }?;
            traj.record_diagnostics(model.as_ref());
            Ok::<_, attnflow::flow::FlowError>(traj)
        });
        let traj = traj.map_err(|e| match e {
            attnflow::flow::FlowError::Invalid(m) => input_error(m),
            other => run_error(other),
        })?;
        let stop = format!("reached t = {:e}", traj.last_t());
        trajectory_dict(py, &traj, stop)
    }

    /// A discrete optimizer: `rule` is gd, ngd or polyak (`eta` is Polyak's cap).
    #[pyo3(signature = (rule, eta, steps, loss_star, samples, clock))]
    fn discrete<'py>(
        &self,
        py: Python<'py>,
        rule: &str,
        eta: f64,
        steps: usize,
        loss_star: f64,
        samples: usize,
        clock: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let rule = match rule {
            "gd" => StepRule::Constant { eta },
            "ngd" => StepRule::Normalized { eta },
            "polyak" => StepRule::Polyak {
                loss_star,
                cap: eta,
            },
            other => return Err(input_error(format!("rule: unknown `{other}`"))),
        };
        if steps < 1 || samples < 2 {
            return Err(input_error("steps: need ≥ 1 steps and ≥ 2 samples"));
        }
        let recording = match clock {
            "linear" => Recording::Every((steps / (samples - 1)).max(1)),
            "log" => Recording::LogSpaced(samples),
            other => {
                return Err(input_error(format!(
                    "clock: `{other}` is not linear or log"
                )))
            }
        };
        let cfg = DiscreteConfig::new(rule, steps, recording);
        let traj = py.detach(|| {
            let model = self.model();
            gradient_descent(model.as_ref(), &model.initial_state(), &cfg)
        });
        let traj = traj.map_err(|e| match e {
            attnflow::flow::FlowError::Invalid(m) => input_error(m),
            other => run_error(other),
        })?;
        let stop = format!("{steps} steps done");
        trajectory_dict(py, &traj, stop)
    }
}

/// The sampled times of a flow, as the scenario runner samples them: linear, or t = 0 then
/// log-spaced from min(τ, t_end)·1e-3 for the log clock.
fn sample_times(t_end: f64, samples: usize, clock: Clock, tau: f64) -> Vec<f64> {
    match clock {
        Clock::Linear => linspace(0.0, t_end, samples),
        Clock::Log => {
            let start = (tau * 1e-3).min(t_end * 1e-3);
            let mut t = vec![0.0];
            t.extend(logspace(start, t_end, samples - 1));
            t
        }
    }
}

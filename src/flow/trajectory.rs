//! One trajectory type for the ODE integrators and the discrete optimizers, so that every
//! analysis, check and plot works on both.

use serde::Serialize;

use super::GradientFlow;

/// Work done by an integrator or optimizer, recorded with every result.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SolverStats {
    /// Name of the method ("bdf", "esdirk34", "tr_bdf2", "tsit45", "gd", ...).
    pub method: String,
    /// Accepted steps (integrators) or iterations (optimizers).
    pub steps: usize,
    /// Right-hand-side (gradient) evaluations.
    pub rhs_evals: usize,
    /// Jacobian-vector (Hessian-vector) product evaluations.
    pub jvp_evals: usize,
    /// Jacobian factorizations (linear solver setups) of the implicit methods.
    pub linear_solver_setups: usize,
    /// Rejected steps (local error test failures).
    pub error_test_failures: usize,
    /// Newton iterations of the implicit methods.
    pub nonlinear_iterations: usize,
    /// Newton convergence failures of the implicit methods.
    pub nonlinear_failures: usize,
    /// Wall-clock seconds spent in the solve.
    pub wall_seconds: f64,
}

/// An event (root of an event function) found during an integration.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Event {
    /// Index of the event function component that changed sign.
    pub index: usize,
    pub t: f64,
    /// State at the event time (interpolated).
    pub state: Vec<f64>,
}

/// Sampled solution of a flow or an optimizer: times, states and per-sample diagnostics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Trajectory {
    /// Sample times (for discrete optimizers, t = k·η or the accumulated step lengths).
    pub t: Vec<f64>,
    /// States, row-major: sample k is `states[k*dim .. (k+1)*dim]`.
    pub states: Vec<f64>,
    pub dim: usize,
    /// Loss at each sample (empty when the field has no loss).
    pub loss: Vec<f64>,
    /// ‖∇ℓ‖ at each sample (empty when the field has no loss).
    pub grad_norm: Vec<f64>,
    /// Conserved quantities: (name, value at each sample).
    pub invariants: Vec<(String, Vec<f64>)>,
    /// Events found (in time order).
    pub events: Vec<Event>,
    pub stats: SolverStats,
}

impl Trajectory {
    pub fn new(dim: usize) -> Self {
        Trajectory {
            dim,
            ..Default::default()
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    /// State at sample k.
    pub fn state(&self, k: usize) -> &[f64] {
        &self.states[k * self.dim..(k + 1) * self.dim]
    }

    /// Last sampled state.
    pub fn last_state(&self) -> &[f64] {
        self.state(self.len() - 1)
    }

    /// Last sample time.
    pub fn last_t(&self) -> f64 {
        *self.t.last().expect("empty trajectory")
    }

    pub(crate) fn push(&mut self, t: f64, z: &[f64]) {
        debug_assert_eq!(z.len(), self.dim);
        self.t.push(t);
        self.states.extend_from_slice(z);
    }

    /// Component `i` of the state over time.
    pub fn component(&self, i: usize) -> Vec<f64> {
        (0..self.len()).map(|k| self.state(k)[i]).collect()
    }

    /// Appends the continuation `next` of this trajectory (its first sample is this one's last,
    /// and is dropped); events are kept and the work is added up.
    pub fn append(&mut self, next: Trajectory) {
        debug_assert_eq!(self.dim, next.dim);
        if self.is_empty() {
            *self = next;
            return;
        }
        let dim = next.dim;
        self.t.extend_from_slice(next.t.get(1..).unwrap_or_default());
        self.states
            .extend_from_slice(next.states.get(dim..).unwrap_or_default());
        self.loss.extend_from_slice(next.loss.get(1..).unwrap_or_default());
        self.grad_norm
            .extend_from_slice(next.grad_norm.get(1..).unwrap_or_default());
        for ((_, mine), (_, theirs)) in self.invariants.iter_mut().zip(next.invariants) {
            mine.extend_from_slice(theirs.get(1..).unwrap_or_default());
        }
        self.events.extend(next.events);
        let (a, b) = (&mut self.stats, next.stats);
        a.steps += b.steps;
        a.rhs_evals += b.rhs_evals;
        a.jvp_evals += b.jvp_evals;
        a.linear_solver_setups += b.linear_solver_setups;
        a.error_test_failures += b.error_test_failures;
        a.nonlinear_iterations += b.nonlinear_iterations;
        a.nonlinear_failures += b.nonlinear_failures;
        a.wall_seconds += b.wall_seconds;
    }

    /// Fills `loss`, `grad_norm` and `invariants` from the flow at every sample.
    pub fn record_diagnostics<F: GradientFlow + ?Sized>(&mut self, flow: &F) {
        let names = flow.invariant_names();
        let mut g = vec![0.0; self.dim];
        let mut inv = vec![0.0; names.len()];
        let mut columns: Vec<Vec<f64>> = vec![Vec::with_capacity(self.len()); names.len()];
        self.loss.clear();
        self.grad_norm.clear();
        for k in 0..self.len() {
            let z = &self.states[k * self.dim..(k + 1) * self.dim];
            self.loss.push(flow.loss(z));
            flow.grad(z, &mut g);
            self.grad_norm.push(norm(&g));
            flow.invariants(z, &mut inv);
            for (c, v) in columns.iter_mut().zip(&inv) {
                c.push(*v);
            }
        }
        self.invariants = names.into_iter().zip(columns).collect();
    }

    /// Largest drift max_k |I(t_k) − I(t_0)| / max(1, |I(t_0)|) over all invariants (NaN if
    /// any drift is NaN or if the trajectory monitors no invariant: nothing measured).
    pub fn max_invariant_drift(&self) -> f64 {
        crate::stats::max(self.invariants.iter().flat_map(|(_, v)| {
            let v0 = v[0];
            v.iter().map(move |x| (x - v0).abs() / v0.abs().max(1.0))
        }))
    }

    /// The first sample whose state, loss or gradient norm is not finite: its index and which
    /// quantity it is (for the error message).
    pub fn first_non_finite(&self) -> Option<(usize, String)> {
        (0..self.len()).find_map(|k| {
            if let Some(i) = self.state(k).iter().position(|x| !x.is_finite()) {
                Some((k, format!("state component {i}")))
            } else if self.loss.get(k).is_some_and(|l| !l.is_finite()) {
                Some((k, "loss".to_string()))
            } else if self.grad_norm.get(k).is_some_and(|g| !g.is_finite()) {
                Some((k, "gradient norm".to_string()))
            } else {
                None
            }
        })
    }
}

/// Euclidean norm.
pub fn norm(v: &[f64]) -> f64 {
    // scaled to avoid overflow/underflow for extreme states
    let scale = crate::stats::max_abs(v.iter());
    if scale == 0.0 || !scale.is_finite() {
        return scale;
    }
    scale * v.iter().map(|x| (x / scale).powi(2)).sum::<f64>().sqrt()
}

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

/// Why an integration or an optimizer run ended (like SciML's return code). Failures are not
/// stop reasons but errors ([`super::FlowError`]), each carrying the time reached.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StopReason {
    /// Reached the last output time, or ran every iteration.
    #[default]
    Success,
    /// A terminal event: component `index` of the event function changed sign at time `t`.
    Event { index: usize, t: f64 },
    /// A discrete optimizer met a point where the gradient vanishes exactly at iteration `step`
    /// (time `t`): every later iterate is the same point, so the run stops early.
    Converged { step: usize, t: f64 },
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
    /// Why the run ended.
    pub stop: StopReason,
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
    /// and is dropped); events are kept, the work is added up, and the continuation's stop
    /// reason is the joined trajectory's.
    pub fn append(&mut self, next: Trajectory) {
        debug_assert_eq!(self.dim, next.dim);
        if self.is_empty() {
            *self = next;
            return;
        }
        let dim = next.dim;
        self.t
            .extend_from_slice(next.t.get(1..).unwrap_or_default());
        self.states
            .extend_from_slice(next.states.get(dim..).unwrap_or_default());
        self.loss
            .extend_from_slice(next.loss.get(1..).unwrap_or_default());
        self.grad_norm
            .extend_from_slice(next.grad_norm.get(1..).unwrap_or_default());
        for ((_, mine), (_, theirs)) in self.invariants.iter_mut().zip(next.invariants) {
            mine.extend_from_slice(theirs.get(1..).unwrap_or_default());
        }
        self.events.extend(next.events);
        self.stop = next.stop;
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

/// Below this a sum of squares may have lost terms to underflow (2⁻⁹⁰⁰: squares under 2⁻¹⁰²²
/// are then below its rounding unless there are more than 2⁶⁸ of them).
const SMALLEST_UNSCALED_SUM: f64 = f64::from_bits((1023 - 900) << 52);

/// Euclidean norm.
pub fn norm(v: &[f64]) -> f64 {
    // Four independent lanes, so the loops vectorize instead of waiting on one dependency chain
    // (this runs once per gradient of the token flows, on d² entries).
    let chunks = v.chunks_exact(4);
    let rest = chunks.remainder();
    // One pass first: where the sum of squares lies well inside the normal range, no square
    // overflowed and every square that underflowed is far below the sum's rounding, so it equals
    // the power-of-two-scaled sum below (scaling by 2^k commutes with rounding) and that second
    // pass is saved. A NaN or ±∞ entry, or a sum at the ends of the range, takes the scaled path.
    let mut sums = [0.0f64; 4];
    for c in chunks.clone() {
        for k in 0..4 {
            sums[k] += c[k] * c[k];
        }
    }
    let tail: f64 = rest.iter().map(|x| x * x).sum();
    let sum = (sums[0] + sums[1]) + (sums[2] + sums[3]) + tail;
    if (SMALLEST_UNSCALED_SUM..=f64::MAX).contains(&sum) {
        return sum.sqrt();
    }
    // f64::max skips NaN: a NaN entry makes the sum NaN below, or is looked for where the scale
    // alone decides.
    let mut lanes = [0.0f64; 4];
    for c in chunks.clone() {
        for k in 0..4 {
            lanes[k] = lanes[k].max(c[k].abs());
        }
    }
    let scale = rest.iter().fold(
        lanes[0].max(lanes[1]).max(lanes[2].max(lanes[3])),
        |m, x| m.max(x.abs()),
    );
    if scale == 0.0 || !scale.is_finite() {
        return if v.iter().any(|x| x.is_nan()) {
            f64::NAN
        } else {
            scale
        };
    }
    // scaled by the power of two at or below the largest entry, against overflow and underflow:
    // multiplying by its inverse is exact; at the ends of the range, where that inverse would
    // overflow, divided by the largest entry instead
    let exponent = scale.log2().floor();
    if exponent.abs() >= 1000.0 {
        return scale * v.iter().map(|x| (x / scale).powi(2)).sum::<f64>().sqrt();
    }
    let inv = (-exponent).exp2();
    let mut sums = [0.0f64; 4];
    for c in chunks {
        for k in 0..4 {
            let x = c[k] * inv;
            sums[k] += x * x;
        }
    }
    let tail: f64 = rest.iter().map(|x| (x * inv) * (x * inv)).sum();
    exponent.exp2() * ((sums[0] + sums[1]) + (sums[2] + sums[3]) + tail).sqrt()
}

#[cfg(test)]
mod tests {
    use super::norm;

    /// Exact where the answer is representable, NaN-propagating wherever the NaN sits, and free
    /// of overflow and underflow at the ends of the f64 range.
    #[test]
    fn norm_is_exact_scaled_and_nan_safe() {
        assert_eq!(norm(&[3.0, 4.0]), 5.0);
        assert_eq!(norm(&[0.0, 3.0, 0.0, 0.0, 4.0]), 5.0);
        assert_eq!(norm(&[]), 0.0);
        let ones = vec![1.0; 1024];
        assert_eq!(norm(&ones), 32.0);
        for nan_at in [0, 3, 4, 6] {
            let mut v = vec![0.0; 7];
            v[nan_at] = f64::NAN;
            assert!(norm(&v).is_nan(), "NaN at {nan_at}");
            v[1] = 2.0;
            assert!(norm(&v).is_nan(), "NaN at {nan_at} beside 2");
            v[2] = f64::INFINITY;
            assert!(norm(&v).is_nan(), "NaN at {nan_at} beside ∞");
        }
        assert_eq!(norm(&[1.0, f64::NEG_INFINITY]), f64::INFINITY);
        let huge = 1e300;
        assert!((norm(&[huge, huge, huge, huge, huge]) / (huge * 5f64.sqrt()) - 1.0).abs() < 1e-15);
        let tiny = 1e-310; // subnormal
        let got = norm(&[tiny, tiny, tiny, tiny]);
        assert!((got / (2.0 * tiny) - 1.0).abs() < 1e-4, "{got:e}");
    }

    /// The one-pass sum (inside the normal range) and the power-of-two-scaled sum (at its ends)
    /// give the same bits: norm(2ᵏv) = 2ᵏ norm(v) exactly wherever both are normal numbers.
    #[test]
    fn unscaled_and_scaled_paths_agree_bitwise() {
        let v: Vec<f64> = (0..1027)
            .map(|k| ((k * 7919 % 1009) as f64 - 504.5) * 1e-3 * (1.0 + (k % 13) as f64))
            .collect();
        let reference = norm(&v);
        // (beyond 2^975 the largest entry passes 2^1000, where the scaled path divides instead)
        for k in (-1000..=975).step_by(25) {
            let factor = 2f64.powi(k);
            let scaled: Vec<f64> = v.iter().map(|x| x * factor).collect();
            assert_eq!(norm(&scaled), reference * factor, "2^{k}");
        }
    }
}

//! Time reparametrizations for flows that must be followed to very long times.
//!
//! Along flows whose loss decays like 1/t and whose norm grows like log t (exponential-type
//! losses on separable data), the interesting behaviour is spread over decades of t. In the
//! log-time clock s = ln(1 + t/τ) the same trajectory takes O(1) time per decade, so an adaptive
//! integrator reaches t = 1e10 in a few hundred steps instead of following t itself.

use super::{FlowError, OdeConfig, Trajectory, VectorField};

/// The field ż = f(t, z) in the clock s = ln(1 + t/τ): dz/ds = (τ + t) f(t, z), t = τ(eˢ − 1).
pub struct LogClock<'a, V: ?Sized> {
    pub inner: &'a V,
    /// Time scale τ > 0: t ≪ τ runs in the original clock, t ≫ τ logarithmically.
    pub tau: f64,
    /// The clock value of the last sample: the field is evaluated at min(s, s_end). The
    /// solution on [0, s_end] is unchanged (no step goes past the stop time), but diffsol's
    /// initial-step heuristic probes the field at s₀ + 0.01‖z‖/‖ż‖ at every restart, which on
    /// a slow flow lands decades of t past the run, where dt/ds = τeˢ overflows and the
    /// heuristic returns a step below the solver's minimum ("step size too small").
    pub s_end: f64,
}

impl<V: ?Sized> LogClock<'_, V> {
    /// Original time of clock value s.
    pub fn t_of(&self, s: f64) -> f64 {
        self.tau * s.exp_m1()
    }
    /// Clock value of original time t.
    pub fn s_of(&self, t: f64) -> f64 {
        (t / self.tau).ln_1p()
    }
}

impl<V: VectorField + ?Sized> VectorField for LogClock<'_, V> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn rhs(&self, s: f64, z: &[f64], dz: &mut [f64]) {
        let s = s.min(self.s_end);
        self.inner.rhs(self.t_of(s), z, dz);
        let dt_ds = self.tau * s.exp();
        dz.iter_mut().for_each(|x| *x *= dt_ds);
    }
    fn jvp(&self, s: f64, z: &[f64], u: &[f64], out: &mut [f64]) {
        let s = s.min(self.s_end);
        self.inner.jvp(self.t_of(s), z, u, out);
        let dt_ds = self.tau * s.exp();
        out.iter_mut().for_each(|x| *x *= dt_ds);
    }
    // a positive multiple of a symmetric Jacobian is symmetric
    fn jacobian_is_symmetric(&self) -> bool {
        self.inner.jacobian_is_symmetric()
    }
}

/// Integrates `field` in the log clock with time scale `tau`, sampled at the original `times`;
/// the returned trajectory is in original time t.
pub fn integrate_log_time<V: VectorField + ?Sized>(
    field: &V,
    z0: &[f64],
    times: &[f64],
    tau: f64,
    cfg: &OdeConfig,
) -> Result<Trajectory, FlowError> {
    if !(tau.is_finite() && tau > 0.0) {
        return Err(FlowError::Invalid(format!(
            "log-clock scale τ must be positive, got {tau}"
        )));
    }
    let mut clock = LogClock {
        inner: field,
        tau,
        s_end: f64::INFINITY,
    };
    let s: Vec<f64> = times.iter().map(|&t| clock.s_of(t)).collect();
    clock.s_end = s.last().copied().unwrap_or(0.0);
    let mut traj = super::integrate(&clock, z0, &s, cfg, None).map_err(|e| match e {
        FlowError::SolverFailed {
            method,
            t_reached,
            reason,
            ..
        } => FlowError::SolverFailed {
            method: format!("{method} (log clock)"),
            t_reached: clock.t_of(t_reached),
            t_end: *times.last().unwrap_or(&0.0),
            reason,
        },
        FlowError::NonFinite { quantity, t } => FlowError::NonFinite {
            quantity,
            t: clock.t_of(t),
        },
        other => other,
    })?;
    traj.t = times.to_vec();
    traj.events.iter_mut().for_each(|e| e.t = clock.t_of(e.t));
    Ok(traj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{logspace, Method};

    /// ż = −z/(1+t): z(t) = z0/(1+t), a 1/t decay that runs to t = 1e10.
    struct Harmonic;
    impl VectorField for Harmonic {
        fn dim(&self) -> usize {
            1
        }
        fn rhs(&self, t: f64, z: &[f64], dz: &mut [f64]) {
            dz[0] = -z[0] / (1.0 + t);
        }
        fn jvp(&self, t: f64, _z: &[f64], u: &[f64], out: &mut [f64]) {
            out[0] = -u[0] / (1.0 + t);
        }
    }

    #[test]
    fn reaches_1e10_in_few_steps_with_small_relative_error() {
        let mut times = vec![0.0];
        times.extend(logspace(1e-2, 1e10, 25));
        for m in [Method::Tsit45, Method::Bdf] {
            // z falls to 1e-10: pure relative error control needs atol far below it
            let cfg = OdeConfig::new(m, 1e-10, 1e-24);
            let tr = integrate_log_time(&Harmonic, &[1.0], &times, 1.0, &cfg).unwrap();
            let worst = crate::stats::max(
                (0..tr.len()).map(|k| (tr.state(k)[0] * (1.0 + tr.t[k]) - 1.0).abs()),
            );
            assert!(worst < 1e-7, "{}: relative error {worst}", m.name());
            assert!(tr.stats.steps < 2000, "{} steps", tr.stats.steps);
            assert_eq!(tr.last_t(), 1e10);
        }
    }
}

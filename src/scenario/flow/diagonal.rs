//! The generic flow of seed 004: a network with diagonal weights — the diagonal linear network
//! (Σ, β*) or the diagonal attention head (X with a teacher or labels) — trained by gradient
//! flow on the raw layout θ = (u, v) from α·θ̄₀ (spec 004 §2.1; the model is
//! [`DiagonalNet`] over the instance's β-loss). Its invariants are the conserved
//! c_i = u_i² − v_i² (Lemma 4.2); the matrices analysed are β as a 1 × p row (linear) or
//! diag(a) = W_K W_Qᵀ and diag(c) = W_V W_Oᵀ (attention), whose rank grows one stage at a time.
//!
//! The family's own check compares the end point with Algorithm 1 (the α → 0 limit, spec §3):
//! once the flow has run past the last predicted transition T_K·ln(1/α) by the factor
//! `limit_after`, β(t_end) must be within `limit_tol` of the terminal stage limit β^K.

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::{Family, FlowKind, FlowModel};
use crate::flow::Trajectory;
use crate::instance::diagonal::{instance_arrays, DiagonalData, DiagonalInit};
use crate::instance::{Arrays, InstanceError, InstanceFile};
use crate::models::diagonal::{algorithm1, Algorithm1Options, DiagonalNet, Schedule, Termination};
use crate::scenario::diagonal::common::{builtin_data, draw_direction, Instance, InstanceName};
use crate::scenario::{InputError, Report, Scenario};
use crate::stats;

pub static KIND: FlowKind<Diagonal> = FlowKind(Diagonal);

/// Seed 004's family.
pub struct Diagonal;

/// `[params.model]` of `flow.diagonal`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelOptions {
    /// The built-in instance drawn when no data file is given (r1, r2, r2-degenerate, mini,
    /// small, paper).
    pub instance: InstanceName,
    /// The scale α of the initial state α·(u0, v0), as log10 α (the raw layout is reliable for
    /// α ≳ 1e−6, spec §8.2).
    pub log10_alpha: f64,
    /// Smallest ||u0_i| − |v0_i|| of the default direction (A4.3(i)).
    pub init_margin: f64,
    /// The end-point check runs when t_end ≥ limit_after · T_K · ln(1/α).
    pub limit_after: f64,
    /// ‖β(t_end) − β^K‖∞ / max(1, ‖β^K‖∞) allowed there (finite-α error).
    pub limit_tol: f64,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            instance: InstanceName::R1,
            log10_alpha: -3.0,
            init_margin: 1e-3,
            limit_after: 1.5,
            limit_tol: 1e-3,
        }
    }
}

impl ModelOptions {
    fn parse(options: &toml::Table) -> Result<Self, InstanceError> {
        let o: ModelOptions = super::model_options(options)?;
        if !(o.log10_alpha.is_finite() && o.log10_alpha < 0.0) {
            return Err(InstanceError::new(
                "params.model.log10_alpha",
                format!("α must lie in (0, 1), got log10 α = {}", o.log10_alpha),
            ));
        }
        for (key, v) in [
            ("init_margin", o.init_margin),
            ("limit_after", o.limit_after),
            ("limit_tol", o.limit_tol),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(InstanceError::new(
                    format!("params.model.{key}"),
                    format!("must be positive, got {v}"),
                ));
            }
        }
        Ok(o)
    }
}

impl Family for Diagonal {
    fn name(&self) -> &'static str {
        "diagonal"
    }
    fn kind(&self) -> &'static str {
        "flow.diagonal"
    }
    fn paper(&self) -> &'static str {
        "004"
    }
    fn summary(&self) -> &'static str {
        "Gradient flow of a diagonal linear network (Sigma, beta_star) or diagonal attention \
         head (X with a_star, c_star or Y) from α·(u0, v0): conserved c_i, rank of the weight \
         products stage by stage, end point against Algorithm 1's limit."
    }

    fn default_instance(&self, sc: &Scenario, options: &toml::Table) -> Result<Arrays, InputError> {
        let o: ModelOptions = sc.typed_subtable("params.model", options.clone())?;
        let data = builtin_data(o.instance, sc);
        let (u0, v0) = draw_direction(data.p(), o.init_margin, sc);
        Ok(instance_arrays(&data, Some(&DiagonalInit { u0, v0 })))
    }

    fn model(
        &self,
        data: &Arrays,
        init: &Arrays,
        options: &toml::Table,
    ) -> Result<Box<dyn FlowModel>, InstanceError> {
        let o = ModelOptions::parse(options)?;
        let d = DiagonalData::from_arrays(data)?;
        let i = DiagonalInit::from_arrays(init)?;
        i.check_dim(d.p())?;
        let instance =
            Instance::from_data(&d).map_err(|e| InstanceError::new("(data)", e.to_string()))?;
        // Algorithm 1 (the α → 0 limit) on this instance, for the end-point check
        let schedule = algorithm1(&instance.loss(), &Algorithm1Options::default())
            .map_err(|e| InstanceError::new("(data)", format!("Algorithm 1: {e}")))?;
        Ok(Box::new(DiagonalFlow {
            net: DiagonalNet::new(instance),
            data: d,
            init: i,
            options: o,
            schedule,
        }))
    }
}

/// The raw-layout flow of one instance from α·(u0, v0).
struct DiagonalFlow {
    net: DiagonalNet<Instance>,
    data: DiagonalData,
    init: DiagonalInit,
    options: ModelOptions,
    schedule: Schedule,
}

impl DiagonalFlow {
    fn alpha(&self) -> f64 {
        10f64.powf(self.options.log10_alpha)
    }
    fn beta(&self, z: &[f64]) -> Vec<f64> {
        let p = self.data.p();
        (0..p).map(|i| z[i] * z[p + i]).collect()
    }
}

forward_gradient_flow!(DiagonalFlow, self => &self.net);

impl FlowModel for DiagonalFlow {
    fn initial_state(&self) -> Vec<f64> {
        let alpha = self.alpha();
        self.init
            .u0
            .iter()
            .chain(&self.init.v0)
            .map(|x| alpha * x)
            .collect()
    }

    fn instance(&self) -> Arrays {
        instance_arrays(&self.data, Some(&self.init))
    }

    fn matrices(&self, z: &[f64]) -> Vec<(String, DMatrix<f64>)> {
        let beta = self.beta(z);
        match &self.data {
            DiagonalData::Linear { .. } => {
                vec![("beta".into(), DMatrix::from_row_slice(1, beta.len(), &beta))]
            }
            DiagonalData::Attention { d, .. } => {
                let (a, c) = beta.split_at(*d);
                vec![
                    ("KQ".into(), DMatrix::from_diagonal(&a.to_vec().into())),
                    ("VO".into(), DMatrix::from_diagonal(&c.to_vec().into())),
                ]
            }
        }
    }

    fn check(&self, traj: &Trajectory, rep: &mut Report) {
        let lambda = -self.alpha().ln();
        let times: Vec<f64> = self
            .schedule
            .stage_times()
            .iter()
            .skip(1)
            .filter(|t| t.is_finite())
            .map(|t| t * lambda)
            .collect();
        rep.derive("algorithm1.transition_times", times.clone());
        let name = "end point vs Algorithm 1's terminal limit: ‖β(t_end) − β^K‖∞ / max(1, ‖β^K‖∞)";
        let Some(last) = self.schedule.stages.last() else {
            return rep.skip("algorithm-1-limit", name, "Algorithm 1 found no stage");
        };
        if self.schedule.termination != Termination::Converged {
            return rep.skip(
                "algorithm-1-limit",
                name,
                "Algorithm 1 did not converge on this instance",
            );
        }
        let t_end = traj.t.last().copied().unwrap_or(0.0);
        let needed = self.options.limit_after * last.t_start * lambda;
        if t_end < needed {
            return rep.skip(
                "algorithm-1-limit",
                name,
                format!(
                    "t_end = {t_end} is before limit_after · T_K · ln(1/α) = {needed:.4} (the last \
                     stage has not converged yet)"
                ),
            );
        }
        let beta = self.beta(traj.last_state());
        let scale = stats::max_with(1.0, last.beta.iter().map(|b| b.abs()));
        let err = stats::max_abs_diff(&beta, &last.beta) / scale;
        rep.at_most("algorithm-1-limit", name, err, self.options.limit_tol)
            .note(format!(
                "K = {} transitions, T_K·ln(1/α) = {:.4}; the gap is O(α^c) at finite α",
                times.len(),
                last.t_start * lambda
            ));
    }
}

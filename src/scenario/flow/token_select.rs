//! `flow.token-select`: the attention matrix W of Φ(X) = uᵀXᵀsoftmax(X W q) trained with the
//! decoder u fixed (paper 003 §1.4a), on any instance of [`crate::instance::token_select`].
//!
//! The loss, its gradient and exact Hessian-vector product are the fixed-decoder model's
//! ([`FixedDecoder`], the excess L − L* computed in the log domain, so the flow can be followed
//! while L − L* falls to 1e−300); this adapter adds the instance, the W-SVM the direction of W
//! approaches (Thm. 2–4, with its KKT certificate) and one check that holds on every instance:
//! every gradient is Σ c_{i,t} x_{i,t} q_iᵀ, so W(t) − W(0) keeps its columns in the span of
//! the tokens and its rows in the span of the queries, whatever the optimizer.

use nalgebra::DMatrix;
use serde::Deserialize;

use super::{Clock, Family, FlowKind, FlowModel, MaxMargin};
use crate::attention::{FixedDecoder, Loss};
use crate::flow::Trajectory;
use crate::instance::token_select::{TokenSelectData, TokenSelectInit};
use crate::instance::{Array, Arrays, InstanceError, InstanceFile};
use crate::scenario::token_select::common::{draw_instance, DataName, FIRST_FREE_STREAM};
use crate::scenario::{InputError, Report, Scenario};
use crate::stats;

pub struct TokenSelect;

pub static KIND: FlowKind<TokenSelect> = FlowKind(TokenSelect);

/// How the default instance starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Init {
    Zero,
    Identity,
    /// Entries N(0, init_scale²/d) from the seed's first free stream.
    Gaussian,
}

/// `[params.model]`: the default instance (`data`, `init`, `init_scale`) and the model's own
/// options (`loss`, `span_tol`), which apply to user files too.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default = "default_data")]
    data: DataName,
    #[serde(default = "default_init")]
    init: Init,
    #[serde(default = "default_init_scale")]
    init_scale: f64,
    #[serde(default = "default_loss")]
    loss: Loss,
    /// Largest ‖W(t) − W(0) − P_X (W(t) − W(0)) P_Q‖/‖W(t) − W(0)‖ tolerated: the flow never
    /// leaves the span, so only round-off remains.
    #[serde(default = "default_span_tol")]
    span_tol: f64,
}

fn default_data() -> DataName {
    DataName::Ex1
}
fn default_init() -> Init {
    Init::Zero
}
fn default_init_scale() -> f64 {
    1.0
}
fn default_loss() -> Loss {
    Loss::Exponential
}
fn default_span_tol() -> f64 {
    1e-9
}

impl Options {
    fn parse(options: &toml::Table) -> Result<Self, InstanceError> {
        let o: Options = super::model_options(options)?;
        if !(o.span_tol.is_finite() && o.span_tol >= 0.0) {
            return Err(InstanceError::new(
                "params.model.span_tol",
                "must be a finite number ≥ 0",
            ));
        }
        if !o.init_scale.is_finite() {
            return Err(InstanceError::new(
                "params.model.init_scale",
                "must be finite",
            ));
        }
        Ok(o)
    }
}

impl Family for TokenSelect {
    fn name(&self) -> &'static str {
        "token-select"
    }
    fn kind(&self) -> &'static str {
        "flow.token-select"
    }
    fn paper(&self) -> &'static str {
        "003"
    }
    fn summary(&self) -> &'static str {
        "token selection: W of uᵀXᵀsoftmax(XWq) with u fixed, on X, y, u (, z) and W0, against the W-SVM"
    }

    fn default_instance(&self, sc: &Scenario, options: &toml::Table) -> Result<Arrays, InputError> {
        let o: Options = sc.typed_subtable("params.model", options.clone())?;
        let drawn = draw_instance(o.data, sc)
            .map_err(|e| sc.invalid("params.model.data", format!("cannot draw the data: {e}")))?;
        let d = drawn.data.d;
        let w0 = match o.init {
            Init::Zero => vec![0.0; d * d],
            Init::Identity => DMatrix::<f64>::identity(d, d).as_slice().to_vec(),
            Init::Gaussian => {
                use rand::Rng;
                let mut rng = sc.rng(FIRST_FREE_STREAM);
                let s = o.init_scale / (d as f64).sqrt();
                (0..d * d)
                    .map(|_| s * rng.sample::<f64, _>(rand_distr::StandardNormal))
                    .collect()
            }
        };
        let mut a = Arrays::new();
        a.insert(
            "X",
            Array::new(&[drawn.data.n, drawn.data.t, d], drawn.data.x),
        )
        .insert("y", Array::vector(&drawn.data.y))
        .insert("u", Array::vector(&drawn.decoder))
        .insert("W0", Array::from_column_major(d, d, &w0));
        Ok(a)
    }

    fn model(
        &self,
        data: &Arrays,
        init: &Arrays,
        options: &toml::Table,
    ) -> Result<Box<dyn FlowModel>, InstanceError> {
        let o = Options::parse(options)?;
        let inst = TokenSelectData::from_arrays(data)?;
        let w0 = TokenSelectInit::from_arrays(init)?;
        w0.for_dimension(inst.data.d)?;
        let model = FixedDecoder::new(inst.data.clone(), inst.u.clone(), o.loss)
            .map_err(|e| InstanceError::new("X", e.to_string()))?;
        let spans = (
            projector(&inst.data.x, inst.data.d),
            projector(&inst.data.queries, inst.data.d),
        );
        Ok(Box::new(TokenSelectFlow {
            model,
            inst,
            w0,
            spans,
            span_tol: o.span_tol,
        }))
    }
}

/// The orthogonal projector onto the span of the rows of `rows` (flat, `d` per row).
fn projector(rows: &[f64], d: usize) -> DMatrix<f64> {
    let m = DMatrix::from_row_slice(rows.len() / d, d, rows);
    let svd = m.transpose().svd(true, false);
    let u = svd.u.expect("asked for U");
    let top = svd.singular_values.max();
    let mut p = DMatrix::zeros(d, d);
    for (k, &s) in svd.singular_values.iter().enumerate() {
        if s > 1e-12 * top {
            let col = u.column(k);
            p += &col * col.transpose();
        }
    }
    p
}

struct TokenSelectFlow {
    model: FixedDecoder,
    inst: TokenSelectData,
    w0: TokenSelectInit,
    /// Projectors onto span{x_{i,t}} (columns of W) and span{q_i} (rows of W).
    spans: (DMatrix<f64>, DMatrix<f64>),
    span_tol: f64,
}

impl TokenSelectFlow {
    fn w(&self, z: &[f64]) -> DMatrix<f64> {
        DMatrix::from_column_slice(self.inst.data.d, self.inst.data.d, z)
    }
}

forward_gradient_flow!(TokenSelectFlow, self => &self.model);

impl FlowModel for TokenSelectFlow {
    fn initial_state(&self) -> Vec<f64> {
        self.w0.w0.clone()
    }
    fn instance(&self) -> Arrays {
        let mut a = self.inst.to_arrays();
        for (name, array) in self.w0.to_arrays().iter() {
            a.insert(name, array.clone());
        }
        a
    }
    fn matrices(&self, z: &[f64]) -> Vec<(String, DMatrix<f64>)> {
        vec![("W".into(), self.w(z))]
    }
    fn max_margin(&self) -> Result<Vec<MaxMargin>, String> {
        let k = &self.inst.wsvm.kkt;
        Ok(vec![MaxMargin {
            name: "W-SVM".into(),
            matrix: "W".into(),
            solution: self.inst.wsvm_matrix(),
            certificate: vec![
                ("primal infeasibility".into(), k.primal_infeasibility),
                ("dual infeasibility".into(), k.dual_infeasibility),
                ("complementary slackness".into(), k.complementary_slackness),
                ("stationarity".into(), k.stationarity),
                ("duality gap".into(), k.duality_gap),
            ],
            // spec 003 §3.3's acceptance of a W-SVM certificate
            tolerance: 1e-8,
        }])
    }
    fn default_clock(&self) -> Clock {
        Clock::Log
    }
    fn check(&self, traj: &Trajectory, rep: &mut Report) {
        let last = traj.len().saturating_sub(1);
        let z = &traj.states[last * traj.dim..(last + 1) * traj.dim];
        let att = self.model.attention(z);
        rep.derive("min_phi_opt", stats::min_with(f64::INFINITY, &att.phi_opt));
        let name = "W(t) − W(0) stays in span{x_i,t} ⊗ span{q_i}: largest relative residual";
        let d = self.inst.data.d;
        let (px, pq) = &self.spans;
        if px.trace().round() as usize == d && pq.trace().round() as usize == d {
            rep.skip(
                "span-residual",
                name,
                "the tokens and the queries each span ℝ^d: nothing to leave",
            );
            return;
        }
        let w0 = self.w(&self.w0.w0);
        let worst = stats::max_with(
            0.0,
            (1..traj.len()).map(|k| {
                let a = self.w(&traj.states[k * traj.dim..(k + 1) * traj.dim]) - &w0;
                let norm = a.norm();
                if norm == 0.0 {
                    0.0
                } else {
                    (&a - px * &a * pq).norm() / norm
                }
            }),
        );
        rep.at_most("span-residual", name, worst, self.span_tol)
            .note(
            "every gradient is Σ c_it x_it q_iᵀ (any optimizer); only round-off leaves the span",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_projector_of_two_tokens_in_r3() {
        let p = projector(&[1.0, 0.0, 0.0, 1.0, 1.0, 0.0], 3);
        let want = DMatrix::from_diagonal(&nalgebra::DVector::from_vec(vec![1.0, 1.0, 0.0]));
        assert!((p - want).norm() < 1e-12);
    }

    #[test]
    fn the_adapter_is_the_fixed_decoder_model() {
        let mut a = Arrays::new();
        a.insert("X", Array::new(&[1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]))
            .insert("y", Array::vector(&[1.0]))
            .insert("u", Array::vector(&[1.0, 0.0]))
            .insert("W0", Array::matrix(2, 2, vec![1.0, 0.0, 0.0, 1.0]));
        let m = TokenSelect.model(&a, &a, &toml::Table::new()).unwrap();
        assert_eq!(m.instance(), a);
        // two-token from W₀ = I: φ_opt = e/(e + 1), L − L* = e^{−φ_opt} − e^{−1}
        let phi = 1f64.exp() / (1f64.exp() + 1.0);
        let want = (-phi).exp() - (-1f64).exp();
        let got = m.loss(&m.initial_state());
        assert!((got - want).abs() < 1e-14 * want, "{got} vs {want}");
        let mm = m.max_margin().unwrap();
        assert!((mm[0].solution[(0, 0)] - 0.5).abs() < 1e-10);
        assert!((mm[0].solution[(1, 0)] + 0.5).abs() < 1e-10);
    }
}

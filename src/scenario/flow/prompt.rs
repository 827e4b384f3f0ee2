//! `flow.prompt`: the generic flow of seed 002's prompt attention f(X) = φ(XWp)ᵀXv (or the
//! linear attention (XWp)ᵀXv of its Section 5.2) under the squared loss
//! L = (1/N) Σ ½(f_i − y_i)², on labelled samples ([`crate::instance::prompt::PromptSamples`]:
//! X, y, W, with an initial state [`PromptInit`]: p0, v0) or on the paper's synthetic teacher
//! ([`TeacherData`]: X, ξ_p, ξ_v, labelled by p_T = σ_p ξ_p, v_T = ξ_v with σ_p =
//! `model.sigma_p`, the layout the seed-002 scenarios read, with [`StudentInit`]: p0 and an
//! optional v0, default v_T). One teacher file thus feeds this flow and the paper's scenarios
//! (`hessian-conditioning-vs-r`, the `fig1-*` runs, …) alike. p alone is trained with v frozen
//! at v₀ (Assumption A1, the theorems' setting) or p and v together (the paper's experiments).
//! The default instance is the teacher layout, drawn as the paper's scenarios draw trial k.
//!
//! The loss, gradient and exact Hessian-vector product are [`PromptModel`]'s. The family's
//! check is Lemma 2's PL inequality with the constant its derivation gives (spec 002 E1):
//! ∇_p L = F(p)ᵀg with g_i = f_i − y_i and ‖g‖² = 2N·L, so at every state
//! ½‖∇L‖² ≥ ½‖∇_p L‖² ≥ N σ²_min(F(p))·L — on any data, with F computed independently of the
//! gradient (row by row from the attention Jacobian). The paper's constant 2σ²_min is recorded
//! beside it (false for N = 1). The attention ratio R of the start and the end point is
//! recorded too: the sparser the attention, the worse the Hessian's conditioning (Theorem 2).

use nalgebra::DMatrix;
use serde::Deserialize;

use super::{Family, FlowKind, FlowModel};
use crate::flow::{GradientFlow, Trajectory};
use crate::instance::prompt::{PromptInit, PromptSamples, StudentInit, TeacherData, TeacherTrial};
use crate::instance::{Arrays, InstanceError, InstanceFile};
use crate::models::prompt::pl_theory::f_singular_values;
use crate::models::prompt::{
    Attention, PromptData, PromptModel, Synthetic, SyntheticDraw, Trained,
};
use crate::scenario::prompt::common::{TrainName, TRIAL_STREAM};
use crate::scenario::{InputError, Report, Scenario};
use crate::stats;

pub static KIND: FlowKind<Prompt> = FlowKind(Prompt);

/// The seed-002 family.
pub struct Prompt;

/// Which attention the student uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AttentionName {
    Softmax,
    Linear,
}

/// `[params.model]`: the model's own options (`attention`, `train`, `pl_tol`), which apply to
/// user files too, and the default instance (`d`, `samples`, `sigma_p`, `trial`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default = "default_attention")]
    attention: AttentionName,
    #[serde(default = "default_train")]
    train: TrainName,
    /// min ½‖∇L‖² / (Nσ²_min(F)L) may fall below 1 by this (round-off in F and ∇L).
    #[serde(default = "default_pl_tol")]
    pl_tol: f64,
    /// The teacher's scale σ_p: labels of a teacher file (and of the default instance) are
    /// y_i = φ(X_i p_T)ᵀX_i v_T with p_T = σ_p ξ_p, v_T = ξ_v; unused on labelled samples.
    #[serde(default = "default_sigma_p")]
    sigma_p: f64,
    /// The default instance: spec 002 §1.2's synthetic teacher data, n = d tokens in ℝ^d,
    /// N samples; trial k is random stream 1000 + k, as in the paper's scenarios.
    #[serde(default = "default_d")]
    d: usize,
    #[serde(default = "default_samples")]
    samples: usize,
    #[serde(default)]
    trial: usize,
}

fn default_attention() -> AttentionName {
    AttentionName::Softmax
}
fn default_train() -> TrainName {
    TrainName::P
}
fn default_pl_tol() -> f64 {
    1e-9
}
fn default_d() -> usize {
    20
}
fn default_samples() -> usize {
    10
}
fn default_sigma_p() -> f64 {
    1.0
}

impl Options {
    fn parse(options: &toml::Table) -> Result<Self, InstanceError> {
        let o: Options = super::model_options(options)?;
        o.check()?;
        Ok(o)
    }

    /// The ranges serde does not know.
    fn check(&self) -> Result<(), InstanceError> {
        let o = self;
        if !(o.pl_tol.is_finite() && o.pl_tol >= 0.0) {
            return Err(InstanceError::new(
                "params.model.pl_tol",
                "must be a finite number ≥ 0",
            ));
        }
        if !(o.sigma_p.is_finite() && o.sigma_p > 0.0) {
            return Err(InstanceError::new(
                "params.model.sigma_p",
                "must be a positive number",
            ));
        }
        Ok(())
    }
}

impl Family for Prompt {
    fn name(&self) -> &'static str {
        "prompt"
    }
    fn kind(&self) -> &'static str {
        "flow.prompt"
    }
    fn paper(&self) -> &'static str {
        "002"
    }
    fn summary(&self) -> &'static str {
        "prompt attention: p (and v) of φ(XWp)ᵀXv under the squared loss, on X, y (, W) or a \
         teacher X, xi_p, xi_v, and p0, v0: Lemma 2's PL inequality along the flow, attention \
         ratio R and Hessian κ"
    }

    fn default_instance(&self, sc: &Scenario, options: &toml::Table) -> Result<Arrays, InputError> {
        let o: Options = sc.typed_subtable("params.model", options.clone())?;
        o.check().map_err(|e| sc.invalid(&e.key, e.reason))?;
        if o.d < 2 || o.samples == 0 {
            return Err(sc.invalid(
                "params.model.d",
                "the default instance needs d ≥ 2 (n = d tokens) and samples ≥ 1",
            ));
        }
        let draw =
            teacher(o.d, o.samples, o.sigma_p).draw(&mut sc.rng(TRIAL_STREAM + o.trial as u64));
        // v starts at the teacher's v_T: with p alone trained (A1) the labels stay realizable
        let (p0, v0) = (draw.p0.clone(), draw.v_teacher.clone());
        Ok(teacher_arrays(&draw, p0, v0))
    }

    fn model(
        &self,
        data: &Arrays,
        init: &Arrays,
        options: &toml::Table,
    ) -> Result<Box<dyn FlowModel>, InstanceError> {
        let o = Options::parse(options)?;
        let (data, p0, v0, instance) = match data.get("xi_p") {
            Some(_) => from_teacher(data, init, o.sigma_p)?,
            None => from_samples(data, init)?,
        };
        let attention = match o.attention {
            AttentionName::Softmax => Attention::Softmax,
            AttentionName::Linear => Attention::Linear,
        };
        let trained = match o.train {
            TrainName::P => Trained::P { v: v0.clone() },
            TrainName::Pv => Trained::PV,
        };
        Ok(Box::new(PromptFlow {
            model: PromptModel::new(data, attention, trained),
            p0,
            v0,
            instance,
            pl_tol: o.pl_tol,
        }))
    }
}

/// The synthetic teacher of spec 002 §1.2 (softmax labels, σ_v = 1) at scale σ_p.
fn teacher(d: usize, samples: usize, sigma_p: f64) -> Synthetic {
    Synthetic {
        d,
        samples,
        sigma_p,
        sigma_v: 1.0,
        teacher: Attention::Softmax,
    }
}

/// A teacher draw with the start (p₀, v₀) in the teacher layout: what `instance.npz` holds.
fn teacher_arrays(draw: &SyntheticDraw, p0: Vec<f64>, v0: Vec<f64>) -> Arrays {
    let data = TeacherData {
        samples: draw.data.samples,
        n_tokens: draw.data.n_tokens,
        d: draw.data.d,
        trials: vec![TeacherTrial {
            x: draw.data.x.clone(),
            xi_p: draw.xi_p.clone(),
            xi_v: draw.xi_v.clone(),
        }],
    };
    let mut a = data.to_arrays();
    let start = StudentInit {
        p0: vec![p0],
        v0: Some(vec![v0]),
    };
    a.merge_prefixed("", start.to_arrays());
    a
}

/// What the flow runs on: labelled data, the start (p₀, v₀) and the instance as written.
type Instance = (PromptData, Vec<f64>, Vec<f64>, Arrays);

/// Labelled samples X, y (, W) with the start p0, v0.
fn from_samples(data: &Arrays, init: &Arrays) -> Result<Instance, InstanceError> {
    let samples = PromptSamples::from_arrays(data)?;
    let start = PromptInit::from_arrays(init)?;
    start.check_dim(samples.d())?;
    let (n_s, n, d) = (samples.samples(), samples.tokens(), samples.d());
    let x = samples.x.data.clone();
    let data = match &samples.w {
        None => PromptData::new(n, d, n_s, x, samples.y.clone()),
        Some(w) => PromptData::with_w(n, d, n_s, x, w, samples.y.clone()),
    };
    let mut instance = samples.to_arrays();
    instance.merge_prefixed("", start.to_arrays());
    Ok((data, start.p0, start.v0, instance))
}

/// One trial of the teacher layout X, ξ_p, ξ_v, labelled at σ_p, with the start p0 and v0
/// (default: the teacher's v_T, where the paper's p-only runs freeze v).
fn from_teacher(data: &Arrays, init: &Arrays, sigma_p: f64) -> Result<Instance, InstanceError> {
    data.check_finite()?;
    init.check_finite()?;
    let file = TeacherData::from_arrays(data)?;
    let trial = file.single_trial()?;
    let start = StudentInit::from_arrays(init)?;
    start.require_fits(file.d, 1)?;
    let tokens = PromptData::new(
        file.n_tokens,
        file.d,
        file.samples,
        trial.x.clone(),
        vec![0.0; file.samples],
    );
    let draw = teacher(file.d, file.samples, sigma_p).with_numbers(
        tokens,
        trial.xi_p.clone(),
        trial.xi_v.clone(),
        Vec::new(),
        Vec::new(),
    );
    let p0 = start.p0[0].clone();
    let v0 = start
        .v0
        .map_or_else(|| draw.v_teacher.clone(), |v| v[0].clone());
    let instance = teacher_arrays(&draw, p0.clone(), v0.clone());
    Ok((draw.data, p0, v0, instance))
}

struct PromptFlow {
    model: PromptModel,
    p0: Vec<f64>,
    v0: Vec<f64>,
    /// The arrays read (or drawn), in their layout: what `instance.npz` holds.
    instance: Arrays,
    pl_tol: f64,
}

forward_gradient_flow!(PromptFlow, self => &self.model);

impl FlowModel for PromptFlow {
    fn initial_state(&self) -> Vec<f64> {
        self.model.state(&self.p0, &self.v0)
    }

    fn instance(&self) -> Arrays {
        self.instance.clone()
    }

    /// p (and v when trained) as 1 × d rows: their change is a vector, of rank ≤ 1.
    fn matrices(&self, theta: &[f64]) -> Vec<(String, DMatrix<f64>)> {
        let (p, v) = self.model.split(theta);
        let row = |x: &[f64]| DMatrix::from_row_slice(1, x.len(), x);
        match self.model.trained() {
            Trained::P { .. } => vec![("p".into(), row(p))],
            Trained::PV => vec![("p".into(), row(p)), ("v".into(), row(v))],
        }
    }

    fn check(&self, traj: &Trajectory, rep: &mut Report) {
        let state = |k: usize| &traj.states[k * traj.dim..(k + 1) * traj.dim];
        let last = traj.len().saturating_sub(1);
        for (key, k) in [("start", 0), ("end", last)] {
            let (p, _) = self.model.split(state(k));
            let r = self.model.attention_stats(p);
            rep.derive(&format!("log10_r_{key}"), r.log10_geometric_mean);
        }

        let name = "Lemma 2 (PL): min over samples of ½‖∇L‖² / (N σ²_min(F(p)) L)";
        let (n_s, d) = (self.model.data().samples, self.model.data().d);
        if n_s > d {
            return rep.skip(
                "lemma-2-pl",
                name,
                format!(
                    "N = {n_s} samples > d = {d}: σ_min(F) = 0 and the inequality says nothing \
                     (Lemma 2 needs the overparameterized case N ≤ d)"
                ),
            );
        }
        let mut g = vec![0.0; traj.dim];
        let (mut derived, mut paper) = (Vec::new(), Vec::new());
        for k in 0..traj.len() {
            let theta = state(k);
            let loss = self.model.loss(theta);
            if loss == 0.0 {
                continue;
            }
            self.model.grad(theta, &mut g);
            let half_grad2 = 0.5 * g.iter().map(|x| x * x).sum::<f64>();
            let s_min = f_singular_values(&self.model, theta)[n_s - 1];
            derived.push(half_grad2 / (n_s as f64 * s_min * s_min * loss));
            paper.push(half_grad2 / (2.0 * s_min * s_min * loss));
        }
        if derived.is_empty() {
            return rep.skip(
                "lemma-2-pl",
                name,
                "the loss is 0 at every sample: nothing to bound",
            );
        }
        let worst = stats::min(derived.iter());
        rep.derive("pl_ratio_paper_min", stats::min(paper.iter()));
        rep.at_least("lemma-2-pl", name, worst, 1.0 - self.pl_tol)
            .note(format!(
                "∇_p L = F(p)ᵀg with ‖g‖² = 2N·L, F from the attention Jacobian row by row; \
                 {} samples of the trajectory; with the paper's constant 2σ²_min the ratio's \
                 minimum is {:.4} (≥ 1 needed)",
                derived.len(),
                stats::min(paper.iter())
            ))
            .paper_claim("Lemma 2: μ(p) = 2mσ²_min(F(p)) (the derivation gives mNσ²_min)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::Array;

    /// One sample of two tokens in ℝ²: X = I, y = 1, p₀ = 0, v₀ = (2, 0): f = ½(2 + 0) = 1 at
    /// p = 0, so L = 0; with y = 0, L = ½ and ∇_p L = (1/N)·Xᵀ J(z) X v · (f − y) = (½, −½)·1.
    #[test]
    fn the_adapter_is_the_prompt_model() {
        let mut a = Arrays::new();
        a.insert("X", Array::new(&[1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]))
            .insert("y", Array::vector(&[0.0]))
            .insert("p0", Array::vector(&[0.0, 0.0]))
            .insert("v0", Array::vector(&[2.0, 0.0]));
        let m = Prompt.model(&a, &a, &toml::Table::new()).unwrap();
        assert_eq!(m.instance(), a);
        let theta = m.initial_state();
        assert_eq!(theta, vec![0.0, 0.0]);
        assert!((m.loss(&theta) - 0.5).abs() < 1e-15);
        let mut g = vec![0.0; 2];
        m.grad(&theta, &mut g);
        // b = z ⊙ (a − f) = (½·(2 − 1), ½·(0 − 1)) = (½, −½), times the residual 1
        assert!(
            (g[0] - 0.5).abs() < 1e-15 && (g[1] + 0.5).abs() < 1e-15,
            "{g:?}"
        );
    }
}

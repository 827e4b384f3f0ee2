//! `prop1-value-scaling` (Proposition 1, App. C; spec 002 §3.4, §6 item 4): with v = αu the proof
//! takes L′ = Θ(α²), μ = O(α⁻²), C_p = O(α⁻²), γ = O(1/α) against σ_min(F(p₀)) = Θ(α), so Theorem
//! 1's hypothesis would hold for large α. But with fixed labels L₀ = Θ(α²) (f ∝ α), so C_p = Θ(1),
//! γ = Θ(α), and the margin σ_min(F(p₀)) − γ − √(μ/2m) scales like α with a limit of margin/α that
//! can be negative (E12). Checked: L₀/α² and margin/α converge (the corrected scaling), and in
//! this instance the margin is negative at every α (the proposition fails). With labels whose
//! residual at p₀ does not grow with α (`labels = "offset"`, the proof's implicit assumption),
//! the margin turns positive.
//!
//! `data_file` (`X`, `u` with ‖u‖ = 1, `p_teacher`; layout `instance::prompt::OrthData`) replaces
//! the drawn C-orth data and `init_file` (`p0`) the drawn start. The scaling checks hold for any
//! data; the count of α with a positive margin refutes Proposition 1 only where its hypothesis
//! A2 holds, measured on the file (skipped with the violation when it fails).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::common::prompt_grad;
use crate::flow::{GradientFlow, Method, OdeConfig};
use crate::models::prompt::data::labelled;
use crate::models::prompt::pl_theory::{c_sigma, f_sigma_min, Reading, Thm1Inputs};
use crate::models::prompt::{Attention, PromptModel, Trained};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::Open01;
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};

use super::orth_common::{
    a2_violation, blocks, gaussian_vec, if_a2, norm, orth_instance, orth_tokens_cost, unit_vec,
    OrthFiles, A2_TOL,
};
use crate::instance::prompt::OrthInit;

/// Which labels the α sweep uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Labels {
    /// y = f(p_T; v = u), fixed for every α (spec §3.4: the counterexample).
    Teacher,
    /// y = f(p₀; αu) + r with r the α = 1 teacher residual: L₀ does not grow with α.
    Offset,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// n, N (d = nN; spec: n = 2, N = 5, d = 10).
    pub tokens: AtLeast<2>,
    pub samples: AtLeast<1>,
    /// α sweep (spec: 1, 10, 1e2, 1e3, 1e4).
    pub alphas: Vec<f64>,
    /// c₁, c₂ (spec: 0.5, 1).
    pub c1: Open01,
    pub c2: f64,
    /// Teacher p_T ~ N(0, teacher_scale² I) at v = u (α = 1); student p₀ ~ N(0, I/d).
    pub teacher_scale: Positive,
    pub labels: Labels,
    /// Tokens, unit direction u and teacher (layout `instance::prompt::OrthData`: X, u,
    /// p_teacher), replacing the drawn data (then tokens and samples are not used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The start p₀ (`p0`, layout `instance::prompt::OrthInit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// |q(α_max)/q(α_prev) − 1| ≤ tol for q = L₀/α² and margin/α (convergence of the scaling).
    pub scaling_rel_tol: Positive,
    /// Number of α with a positive margin, per reading, must be ≤ this (the instance's
    /// counterexample: 0).
    pub max_positive: usize,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<OrthFiles, InputError> {
    let (data, init) = (p.data_file.as_deref(), p.init_file.as_deref());
    let d = *p.tokens * *p.samples;
    OrthFiles::read(sc, data, init, &["u", "p_teacher"], false, d)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc)?;
    if p.alphas.len() < 3 || p.alphas.windows(2).any(|w| !(w[1] > w[0] && w[0] > 0.0)) {
        return Err(sc.invalid("params.alphas", "need ≥ 3 increasing positive α"));
    }
    if !(p.c2 > 0.0 && p.c2 < 2.0f64.min(1.0 / *p.c1)) {
        return Err(sc.invalid("params.c2", "need 0 < c₂ < min(2, 1/c₁)"));
    }
    Ok(())
}

struct Row {
    alpha: f64,
    loss0: f64,
    sigma0: f64,
    /// (reading, margin, γ, √(μ/2m), C_p) for literal and intended.
    parts: Vec<(Reading, f64, f64, f64, f64)>,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let mut rng = ctx.rng(1);
    // the draw order of the built-in instance: data, u, p_T, p₀
    let (data, u, p_teacher, user_a2) = match files.data() {
        Some((tokens, f)) => {
            let u = f.require("u").expect("read").to_vec();
            let pt = f.require("p_teacher").expect("read").to_vec();
            let a2 = a2_violation(&tokens);
            (tokens, u, pt, Some(a2))
        }
        None => {
            let data = blocks(*p.tokens, *p.samples, false, &mut rng);
            let u = unit_vec(&mut rng, data.d);
            let pt = gaussian_vec(&mut rng, data.d, *p.teacher_scale);
            (data, u, pt, None)
        }
    };
    let d = data.d;
    let p0 = (files.init().and_then(|i| i.p0.clone()))
        .unwrap_or_else(|| gaussian_vec(&mut rng, d, 1.0 / (d as f64).sqrt()));
    let teacher_labels = labelled(data.clone(), Attention::Softmax, &p_teacher, &u).y;
    let at_one = PromptModel::new(data.clone(), Attention::Softmax, Trained::PV).outputs(&p0, &u);
    let residual: Vec<f64> = at_one
        .iter()
        .zip(&teacher_labels)
        .map(|(f, y)| y - f)
        .collect();

    let mut rows = Vec::new();
    for &alpha in &p.alphas {
        let v: Vec<f64> = u.iter().map(|x| alpha * x).collect();
        let y = match p.labels {
            Labels::Teacher => teacher_labels.clone(),
            Labels::Offset => {
                let f = PromptModel::new(data.clone(), Attention::Softmax, Trained::PV)
                    .outputs(&p0, &v);
                f.iter().zip(&residual).map(|(f, r)| f + r).collect()
            }
        };
        let mut dat = data.clone();
        dat.set_labels(y);
        let model = PromptModel::new(dat, Attention::Softmax, Trained::P { v: v.clone() });
        let loss0 = model.loss(&p0);
        let sigma0 = f_sigma_min(&model, &p0);
        let inputs = Thm1Inputs {
            c_sigma: c_sigma(&model),
            sigma_w: 1.0,
            samples: data.samples,
            loss_gap: loss0,
            v_norm: norm(&v),
            p0_norm: norm(&p0),
            sigma_min_f0: sigma0,
            c1: *p.c1,
            c2: p.c2,
            m: 1.0,
            ell_smooth: 1.0,
        };
        let parts = [Reading::Literal, Reading::Intended]
            .into_iter()
            .map(|r| {
                let k = inputs.constants(r, false);
                (r, k.margin, k.gamma, (k.mu / 2.0).sqrt(), k.c_p)
            })
            .collect();
        rows.push(Row {
            alpha,
            loss0,
            sigma0,
            parts,
        });
    }

    let mut rep = Report::default();
    let (last, prev) = (&rows[rows.len() - 1], &rows[rows.len() - 2]);
    let change = |a: f64, b: f64| (a / b - 1.0).abs();
    let loss_change = change(
        last.loss0 / last.alpha.powi(2),
        prev.loss0 / prev.alpha.powi(2),
    );
    rep.at_most(
        "l0-alpha2-converges-l0-theta-alpha2",
        "L₀/α² converges (L₀ = Θ(α²) with fixed labels): relative change over the last α step",
        loss_change,
        *c.scaling_rel_tol,
    )
    .note(format!(
        "L₀ = {:.4e} at α = {}, {:.4e} at α = {}",
        rows[0].loss0, rows[0].alpha, last.loss0, last.alpha
    ))
    .paper_claim("App. C treats L₀ as independent of α (so C_p = O(α⁻²), γ = O(1/α))");
    for (k, reading) in [Reading::Literal, Reading::Intended]
        .into_iter()
        .enumerate()
    {
        let per_alpha = |r: &Row| r.parts[k].1 / r.alpha;
        let limit = per_alpha(last);
        let conv = change(limit, per_alpha(prev));
        let positive = rows.iter().filter(|r| r.parts[k].1 > 0.0).count();
        rep.derive(
            &format!("{}_margin_over_alpha_limit", reading.name()),
            limit,
        );
        rep.at_most(
                &format!("margin-alpha-converges-relative-change-over.{}", reading.name()), &format!("{}: margin/α converges (relative change over the last α step)", reading.name()),
                conv,
                *c.scaling_rel_tol,
            )
            .note(format!(
                "margin/α = {:.4} at α = {} → {limit:.4} at α = {} (σ_min(F(p₀))/α = {:.4}, γ/α = {:.4}, √(μ/2m)/α = {:.3e})",
                per_alpha(&rows[0]),
                rows[0].alpha,
                last.alpha,
                last.sigma0 / last.alpha,
                last.parts[k].2 / last.alpha,
                last.parts[k].3 / last.alpha
            ));
        let name = format!(
            "{}: α values with a positive hypothesis margin",
            reading.name()
        );
        let id = format!("positive-margins.{}", reading.name());
        if_a2(&mut rep, user_a2, (&id, &name), |rep| {
            rep.at_most(&id, &name, positive as f64, c.max_positive as f64)
                .note(format!(
                    "labels {:?}; α ∈ {:?}; the margin scales like α with limit {limit:.4}·α",
                    p.labels, p.alphas
                ))
                .paper_claim(
                    "Proposition 1: there is A such that α > A ⇒ σ_min(F(p₀)) > γ + √(μ/2m)",
                );
        });
    }

    rep.series = Table::new(&[
        "alpha",
        "loss0",
        "sigma_min_f0",
        "reading",
        "margin",
        "gamma",
        "sqrt_mu_over_2m",
        "c_p",
        "margin_over_alpha",
    ]);
    for r in &rows {
        for &(reading, margin, gamma, root_mu, c_p) in &r.parts {
            rep.series.push(vec![
                r.alpha.into(),
                r.loss0.into(),
                r.sigma0.into(),
                reading.name().to_string().into(),
                margin.into(),
                gamma.into(),
                root_mu.into(),
                c_p.into(),
                (margin / r.alpha).into(),
            ]);
        }
    }
    let mut panel = LinePanel::new(
        format!(
            "{}, N = {}, {} labels, c₁ = {}, c₂ = {}",
            if user_a2.is_some_and(|a2| a2 > A2_TOL) {
                "non-A2"
            } else {
                "C-orth"
            },
            data.samples,
            match p.labels {
                Labels::Teacher => "teacher",
                Labels::Offset => "offset",
            },
            *p.c1,
            p.c2
        ),
        "α = ‖v‖",
        "quantity / α",
    )
    .log_x()
    .legend(LegendPosition::LowerLeft)
    .hline(RefLine::new(0.0, "").style(LineStyle::Dotted));
    let x = p.alphas.clone();
    panel = panel.series(
        Series::numerics(
            "σ_min(F(p₀))/α",
            x.clone(),
            rows.iter().map(|r| r.sigma0 / r.alpha).collect(),
        )
        .color(0),
    );
    for (k, reading) in [Reading::Literal, Reading::Intended]
        .into_iter()
        .enumerate()
    {
        panel = panel
            .series(
                Series::new(
                    format!("margin/α ({})", reading.name()),
                    x.clone(),
                    rows.iter().map(|r| r.parts[k].1 / r.alpha).collect(),
                    LineStyle::SolidMarkers,
                )
                .color(1 + k),
            )
            .series(
                Series::theory(
                    format!("(γ + √(μ/2m))/α ({})", reading.name()),
                    x.clone(),
                    rows.iter()
                        .map(|r| (r.parts[k].2 + r.parts[k].3) / r.alpha)
                        .collect(),
                )
                .color(1 + k),
            );
    }
    rep.figure = Some(Figure::single(panel).title(
        "Proposition 1: with fixed labels the hypothesis margin scales like α and stays negative",
    ));
    let init = OrthInit {
        p0: Some(p0.clone()),
        points: None,
    };
    rep.instance = Some(orth_instance(
        &data,
        &[("u", &u), ("p_teacher", &p_teacher)],
        init,
    ));
    Ok(rep)
}

/// The C-orth data and, per α, the constants of Proposition 1 from a few gradients and a
/// singular value decomposition of F (N × d).
fn cost(p: &Params, _: &RunContext) -> Cost {
    let d = *p.tokens * *p.samples;
    let grad = prompt_grad(*p.tokens, d, *p.samples);
    orth_tokens_cost(*p.tokens, *p.samples).work(
        "alphas",
        "constants per α",
        n(p.alphas.len()),
        10.0 * grad + 10.0 * n(*p.samples).powi(2) * n(d),
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "prompt.prop1-value-scaling",
    paper: "002",
    summary: "Proposition 1 vs α = ‖v‖: with fixed labels L₀ = Θ(α²), the margin of Theorem 1's \
              hypothesis scales like α with a negative limit (counterexample); corrected scaling checked.",
    solver: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &["intended_margin_over_alpha_limit", "literal_margin_over_alpha_limit"],
    run,
};

//! `usvm-kkt`: the u-SVM min ½‖u‖² s.t. y_i uᵀx_{i,opt} ≥ 1 (spec 003 §3.5) on draws of the
//! joint data model DM, solved by its dual and its primal QP, with the §3.3 certificate and
//! the agreement with an independent solution (Hildreth's dual coordinate ascent). The label
//! direction u*'s normalized margin is reported beside the max margin 1/‖u_mm‖ (it cannot
//! exceed it, by the definition of the max margin).
//!
//! `data_file` (X, y, u, optional z and `opt`, the layout of joint training) replaces the DM
//! draws by one problem, with u as the label direction u*; every check (the certificate, the
//! agreement) holds for any instance and runs on it.
//! `instance.npz` holds X, y, u, opt (one draw as they are, several under `draw<j>_`).

use std::path::PathBuf;

use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::analysis::svm::{one_minus_cos, L2Solution, MarginConstraints, VectorConstraints};
use crate::attention::Instance;
use crate::flow::{Method, OdeConfig};
use crate::instance::token_select::JointData;
use crate::instance::{run_instance, Arrays, InstanceFile};
use crate::models::token_select::GaussianJoint;
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::AtLeast;
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{DATA_STREAM, FIRST_FREE_STREAM};
use super::svm_common::{
    certificate_checks, complementarity_panel, solution_summary, solve_both, BothSolutions,
    KktChecks,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The data model DM (spec 003 §1.3): n, t, d, sigma_opt, sigma, opt_position.
    pub model: GaussianJoint,
    /// Independent draws of DM; draw 0 is the `dm` instance every seed-003 scenario uses.
    pub trials: AtLeast<1>,
    /// The primal QP has d variables; it is solved as a cross-check up to this many.
    pub primal_max_dim: AtLeast<1>,
    /// Sweep budget of the independent solution (Hildreth's dual coordinate ascent).
    pub independent_sweeps: AtLeast<1>,
    /// The user's problem (X, y, u, optional z and opt), replacing the DM draws.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// The §3.3 certificate thresholds.
    pub kkt: KktChecks,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    // the generator's own validation, on a throwaway stream
    p.model
        .generate(&mut rand_chacha::ChaCha20Rng::seed_from_u64(0))
        .map_err(|e| sc.invalid("params.model", e.to_string()))?;
    // the file's tokens, their optimal tokens and a feasible u-SVM
    match &p.data_file {
        Some(f) => sc.read_instance::<JointData>("data_file", f).map(|_| ()),
        None => Ok(()),
    }
}

/// One draw: its u-SVM constraints and the normalized margin of the label direction u*.
struct Draw {
    cons: VectorConstraints,
    label_direction: Vec<f64>,
    /// X, y, u, opt as `instance.npz` records them.
    arrays: Arrays,
}

fn draw(p: &Params, trial: usize, ctx: &RunContext) -> Result<Draw, RunError> {
    let stream = if trial == 0 {
        DATA_STREAM
    } else {
        FIRST_FREE_STREAM + trial as u64 - 1
    };
    let inst = p
        .model
        .generate(&mut ctx.rng(stream))
        .map_err(|e| RunError::Other(format!("DM draw {trial}: {e}")))?;
    problem(inst, &format!("draw {trial}"))
}

/// The u-SVM of an instance, with u as the label direction.
fn problem(inst: Instance, label: &str) -> Result<Draw, RunError> {
    let cons = VectorConstraints::u_svm(&inst.data.view(), &inst.data.y, &inst.opt)
        .map_err(|e| RunError::Other(format!("u-SVM constraints of {label}: {e}")))?;
    let arrays = JointData {
        data: inst.data,
        u: inst.decoder.clone(),
        opt: inst.opt,
    }
    .to_arrays();
    Ok(Draw {
        cons,
        label_direction: inst.decoder,
        arrays,
    })
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let draws = match &p.data_file {
        Some(f) => {
            let read: JointData = ctx.scenario.read_instance("data_file", f)?;
            let inst = Instance {
                data: read.data,
                decoder: read.u,
                opt: read.opt,
            };
            vec![problem(inst, "data_file")?]
        }
        None => (0..*p.trials)
            .map(|j| draw(p, j, ctx))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let trials = draws.len();
    let solved = draws
        .iter()
        .enumerate()
        .map(|(j, dr)| {
            solve_both(&dr.cons, *p.primal_max_dim, *p.independent_sweeps)
                .map_err(|e| RunError::Other(format!("u-SVM of DM draw {j}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let labels: Vec<String> = match p.data_file {
        Some(_) => vec!["data_file".into()],
        None => (0..trials).map(|j| format!("draw {j}")).collect(),
    };
    let labelled: Vec<(&str, &BothSolutions)> =
        labels.iter().map(String::as_str).zip(&solved).collect();
    let mut rep = Report {
        instance: Some(run_instance(
            draws
                .iter()
                .enumerate()
                .map(|(j, dr)| (format!("draw{j}"), dr.arrays.clone()))
                .collect(),
        )),
        ..Report::default()
    };
    certificate_checks(&mut rep, &labelled, &c.kkt);

    rep.series = Table::new(&["draw", "sample", "margin", "alpha", "active"]);
    let mut per_draw = Table::new(&[
        "draw",
        "max_margin",
        "label_direction_margin",
        "one_minus_corr_label_direction",
        "support_size",
    ]);
    let (mut worst_ratio, mut worst_at) = (f64::NEG_INFINITY, 0);
    let (mut xs, mut max_margins, mut star_margins) = (vec![], vec![], vec![]);
    let mut summary = serde_json::Map::new();
    for (j, (dr, sols)) in draws.iter().zip(&solved).enumerate() {
        let sol = &sols.dual;
        let star = &dr.label_direction;
        let star_norm = crate::flow::norm(star);
        let star_margin = stats::min(dr.cons.margins(star)) / star_norm;
        let max_margin = 1.0 / sol.norm;
        if star_margin / max_margin > worst_ratio {
            (worst_ratio, worst_at) = (star_margin / max_margin, j);
        }
        per_draw.push(vec![
            j.into(),
            max_margin.into(),
            star_margin.into(),
            one_minus_cos(&sol.w, star).into(),
            sol.support.len().into(),
        ]);
        for (i, &m) in sol.margins.iter().enumerate() {
            let is_active = sol.support.contains(&i);
            rep.series.push(vec![
                j.into(),
                i.into(),
                m.into(),
                sol.alpha[i].into(),
                usize::from(is_active).into(),
            ]);
        }
        xs.push(j as f64);
        max_margins.push(max_margin);
        star_margins.push(star_margin);
        summary.insert(labels[j].clone(), solution_summary(&dr.cons, sols));
    }
    // u* is feasible up to scale, so this is ≤ 1 by the definition of the max margin: reported
    rep.derive("label_direction_margin_ratio_max", worst_ratio);
    rep.derive("label_direction_margin_ratio_argmax", worst_at);
    rep.derive("draws", summary);
    let (n_seq, d) = match draws[0].arrays.get("X") {
        Some(x) => (x.shape[0], x.shape[2]),
        None => (p.model.n, p.model.d),
    };
    rep.derive("d_over_n", d as f64 / n_seq as f64);
    rep.tables.push(("draws".into(), per_draw));

    let groups: Vec<(String, &L2Solution)> = labels
        .iter()
        .zip(&solved)
        .map(|(l, sols)| (l.clone(), &sols.dual))
        .collect();
    let margins = complementarity_panel(&groups).legend(LegendPosition::None);
    let max_top = stats::max(max_margins.iter());
    let optimality = LinePanel::new(
        "max margin vs the label direction u*",
        "DM draw",
        "normalized margin",
    )
    .series(
        Series::new(
            "1/‖u_mm‖ (u-SVM)",
            xs.clone(),
            max_margins,
            LineStyle::SolidMarkers,
        )
        .color(1),
    )
    .series(
        Series::new(
            "min_i y_i⟨u*, x_{i,opt}⟩/‖u*‖",
            xs,
            star_margins,
            LineStyle::Markers,
        )
        .color(0),
    )
    .y_range(0.0, 1.6 * max_top)
    .legend(LegendPosition::UpperRight);
    rep.figure = Some(
        Figure::new(2)
            .title(match p.data_file {
                Some(_) => format!("u-SVM on data_file (n = {n_seq}, d = {d})"),
                None => format!("u-SVM on {trials} DM draws (n = {n_seq}, d = {d})"),
            })
            .panel(margins)
            .panel(optimality),
    );
    Ok(rep)
}

/// Per trial a DM draw (n·T tokens in ℝ^d), its u-SVM dual (O((nT)²·d)) and, for
/// d ≤ primal_max_dim, the primal QP in d variables with n constraints (sparse interior point:
/// ~30 iterations of O(d·n²)).
fn cost(p: &Params, _: &RunContext) -> Cost {
    let m = &p.model;
    let (tokens, d) = (n(m.n * m.t), n(m.d));
    let primal = if m.d <= *p.primal_max_dim {
        30.0 * d * n(m.n).powi(2)
    } else {
        0.0
    };
    Cost::new()
        .doubles(
            "model.n, model.t, model.d",
            "one draw's tokens and constraints",
            4.0 * tokens * d,
        )
        .work(
            "trials, model.d",
            "draws, duals and primals",
            n(*p.trials),
            10.0 * tokens * tokens * d + primal,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.usvm-kkt",
    paper: "003",
    summary: "The u-SVM (spec 003 §3.5) on draws of DM: dual and primal QPs with KKT \
              certificates and their agreement with an independent solution (Hildreth's \
              method); the label direction's margin is reported beside the max margin.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "d_over_n",
        "label_direction_margin_ratio_argmax",
        "label_direction_margin_ratio_max",
    ],
    run,
};

//! `full-random-batch` (Theorem 1.1 / 5.1 beyond their proven cases, experiment E2; spec 001 §7
//! row `full-random-batch`, §5.2 E2, §4 "Thm 1.1"): on random A2 datasets with d ∈ {4, 5, 6}
//! (d_e = d, K(0), Q(0) ~ N(0, s²)) the combined-W flow from W(0) = K(0)Q(0)ᵀ converges in
//! direction to the Frobenius SVM W_F on every dataset (Sec. 4.2, Tarzanagh et al. 2023a: a
//! theorem, hard check), and the separately trained K, Q flow reaches the nuclear-norm SVM
//! objective, ‖Ŵ‖_*/OPT_* − 1 small — a conjecture for non-aligned data, so only the spec's
//! fraction is checked. Flows in τ = ln(1 + t) with the exact Hessian-vector product.

use serde::{Deserialize, Serialize};

use crate::analysis::svm::NuclearSettings;
use crate::flow::{Method, OdeConfig};
use crate::instance::kq::{FullInits, KqData};
use crate::instance::{run_instance, InstanceFile};
use crate::models::kq::assumptions::a3_report;
use crate::models::kq::full::FullKq;
use crate::models::kq::generators::{first_valid, RandomA2};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Fraction, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{instance_svms, singular_values, DATA_STREAM, FIRST_FREE_STREAM};
use super::full_common::{
    frobenius_distance, full_flow_cost, gaussian_matrix, run_log_time, tau_grid, tau_grid_len,
    DirectionSample, FullHorizon,
};

/// Which SVM objective the KQ limits are measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KqTarget {
    /// ‖Ŵ‖_*/OPT_* − 1 (Theorem 1.1's conjecture).
    Nuclear,
    /// ‖Ŵ‖_F/‖W_F‖_F − 1 (the combined-W flow's bias; KQ limits are expected to miss it).
    Frobenius,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Random A2 datasets (spec §7: 20).
    pub instances: AtLeast<1>,
    /// Dimensions d, cycled over the instances (spec §7: 4, 5, 6); d_e = d.
    pub dims: Vec<usize>,
    /// random-A2 shape (spec §5.1 defaults: n = 2, L = 3, Δ = 3, γ_nopt = 0).
    pub n: AtLeast<1>,
    pub tokens: AtLeast<2>,
    pub delta: Positive,
    /// K(0), Q(0) entries i.i.d. N(0, s²) (spec §7: 0.1).
    pub init_scale: Positive,
    /// Final log time τ_max.
    pub tau_max: FullHorizon,
    /// Output samples per decade of τ.
    pub per_decade: AtLeast<1>,
    /// The SVM objective the KQ limits are compared with (spec: nuclear).
    pub kq_target: KqTarget,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// W: ‖Ŵ − W_F‖_F at τ_max on every dataset (spec §7: 1e−4, hard).
    pub w_direction: Positive,
    /// KQ: objective gap ‖Ŵ‖/OPT − 1 at τ_max counted as reached (spec §7: 1e−3).
    pub kq_gap: Positive,
    /// KQ: fraction of the datasets reaching `kq_gap` (spec §7: "expect ≥ 80%", soft).
    pub kq_fraction: Fraction,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.dims.is_empty() || p.dims.iter().any(|&d| !(2..=8).contains(&d)) {
        return Err(sc.invalid("params.dims", "a non-empty list of dimensions in [2, 8]"));
    }
    Ok(())
}

/// The horizon at which spec §5.2 (E2) states its expected fraction.
const SPEC_FRACTION_TAU: f64 = 1e8;

/// Draws of random-A2 before giving up on A1, A1-diag and A3 at W = 0 (spec §5.1 rule).
const MAX_DRAWS: usize = 100;

/// One dataset of the batch, its SVMs and both flows' end points.
struct Member {
    label: String,
    d: usize,
    /// A3 slack at W(0) = K(0)Q(0)ᵀ.
    a3_slack: f64,
    /// ‖W_F − W_*‖_F and the nuclear certificate's complementarity margin.
    svm_distance: f64,
    nuclear_margin: f64,
    /// W flow: ‖Ŵ − W_F‖_F at τ_max (NaN on a solver failure).
    w_direction: f64,
    /// KQ flow: objective gap against the chosen SVM, σ₂/σ₁ of Ŵ, at τ_max.
    kq_gap: f64,
    kq_rank_ratio: f64,
    /// The gap of the other SVM's solution under the target objective (nuclear target:
    /// ‖W_F‖_*/OPT_* − 1): how far apart the two biases are on this set.
    svm_gap: f64,
    /// W flow: its gap under the target objective at τ_max.
    w_gap: f64,
    /// KQ: the gap along the run, (τ, gap) once separated.
    kq_path: Vec<(f64, f64)>,
    arrays: crate::instance::Arrays,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let sc = ctx.scenario;
    let mut data_rng = sc.rng(DATA_STREAM);
    let mut init_rng = sc.rng(FIRST_FREE_STREAM);
    let taus = tau_grid(*p.tau_max, *p.per_decade);
    let mut rep = Report::default();
    let mut members = Vec::new();
    for k in 0..*p.instances {
        let d = p.dims[k % p.dims.len()];
        let label = format!("set-{k:02}-d{d}");
        let gen = RandomA2 {
            n: *p.n,
            tokens: *p.tokens,
            d,
            delta: *p.delta,
            gamma_nopt: 0.0,
            zero_last_query: false,
        };
        let fail = |e: String| RunError::Other(format!("{label}: {e}"));
        let (inst, _, _) = first_valid(MAX_DRAWS, || gen.generate(&mut data_rng))
            .map_err(|e| fail(e.to_string()))?;
        let svms = instance_svms(&inst, &label, &NuclearSettings::default())?;
        let kq = FullKq::new(&inst, d).map_err(|e| fail(e.to_string()))?;
        let inits = FullInits {
            k: vec![gaussian_matrix(&mut init_rng, d, d, *p.init_scale)],
            q: vec![gaussian_matrix(&mut init_rng, d, d, *p.init_scale)],
        };
        let z0 = kq.pack(&inits.k[0], &inits.q[0]);
        let w0 = kq.combined(&z0);
        let a3_slack = a3_report(&inst, Some(&w0))
            .map_err(|e| fail(e.to_string()))?
            .slack;
        let model = kq.model();
        let (w_f, opt_star) = (&svms.frobenius.w, svms.nuclear.nuclear_norm);
        let gap = |s: &DirectionSample| match p.kq_target {
            KqTarget::Nuclear => s.nuclear_norm() / opt_star - 1.0,
            KqTarget::Frobenius => s.frobenius_norm() / svms.frobenius.norm - 1.0,
        };
        let mut m = Member {
            label: label.clone(),
            d,
            a3_slack,
            svm_distance: frobenius_distance(w_f, &svms.nuclear.w),
            nuclear_margin: svms.nuclear.complementarity_margin,
            w_direction: f64::NAN,
            kq_gap: f64::NAN,
            kq_rank_ratio: f64::NAN,
            svm_gap: match p.kq_target {
                KqTarget::Nuclear => {
                    singular_values(&svms.constraints, w_f).iter().sum::<f64>() / opt_star - 1.0
                }
                KqTarget::Frobenius => {
                    frobenius_distance(&svms.nuclear.w, &vec![0.0; d * d]) / svms.frobenius.norm
                        - 1.0
                }
            },
            w_gap: f64::NAN,
            kq_path: Vec::new(),
            arrays: {
                let mut a = KqData::new(inst.clone()).to_arrays();
                a.merge_prefixed("", inits.to_arrays());
                a
            },
        };
        if let Some(tr) = run_log_time(&kq, &z0, &taus, &ctx.ode, &format!("KQ {label}"), &mut rep)
        {
            for j in 0..tr.len() {
                let s = DirectionSample::new(model, tr.t[j], &kq.combined(tr.state(j)));
                if s.separated() && s.tau > 0.0 {
                    m.kq_path.push((s.tau, gap(&s)));
                }
            }
            let last = DirectionSample::new(
                model,
                tr.t[tr.len() - 1],
                &kq.combined(tr.state(tr.len() - 1)),
            );
            m.kq_gap = gap(&last);
            m.kq_rank_ratio = last.rank_ratio();
        }
        if let Some(tr) = run_log_time(model, &w0, &taus, &ctx.ode, &format!("W {label}"), &mut rep)
        {
            let last = DirectionSample::new(model, tr.t[tr.len() - 1], tr.state(tr.len() - 1));
            m.w_direction = last.distance(w_f);
            m.w_gap = gap(&last);
        }
        members.push(m);
    }

    let sat: Vec<&Member> = members.iter().filter(|m| m.a3_slack >= 0.0).collect();
    let w_pass = |m: &Member| m.w_direction <= *c.w_direction;
    let kq_pass = |m: &Member| m.kq_gap <= *c.kq_gap;
    let passing = sat.iter().filter(|m| w_pass(m) && kq_pass(m)).count();
    let w_passing = sat.iter().filter(|m| w_pass(m)).count();
    let kq_passing = sat.iter().filter(|m| kq_pass(m)).count();
    rep.derive("instances", members.len());
    rep.derive("satisfying", sat.len());
    rep.derive("passing", passing);
    rep.derive("w_passing", w_passing);
    rep.derive("kq_passing", kq_passing);
    rep.derive(
        "violating_kq_gaps",
        members
            .iter()
            .filter(|m| m.a3_slack < 0.0)
            .map(|m| m.kq_gap)
            .collect::<Vec<_>>(),
    );
    let setting = format!(
        "random-A2 d ∈ {:?}, n = {}, L = {}, Δ = {}; d_e = d, K(0), Q(0) ~ N(0, {}²); τ_max = {:e}; \
         {} of {} sets satisfy A3 at W(0)",
        p.dims,
        *p.n,
        *p.tokens,
        *p.delta,
        *p.init_scale,
        *p.tau_max,
        sat.len(),
        members.len()
    );
    let (worst_w, worst_w_label) =
        stats::worst(sat.iter().map(|m| (m.w_direction, m.label.as_str())))
            .unwrap_or((f64::NAN, "-"));
    rep.derive("worst_w_direction", worst_w);
    rep.at_most(
        "w-frobenius-worst",
        "Sec. 4.2: worst ‖Ŵ_W − W_F‖_F at τ_max over the satisfying sets",
        worst_w,
        *c.w_direction,
    )
    .note(format!(
        "worst: {worst_w_label}; combined-W gradient flow → W_F-SVM (Tarzanagh et al. 2023a), \
         error O(1/µ); {setting}"
    ));
    rep.at_least(
        "w-passing-all-satisfying",
        "sets whose W flow reaches W_F ≥ satisfying sets",
        w_passing as f64,
        sat.len() as f64,
    )
    .note(format!(
        "{w_passing} of {} (a theorem: every set)",
        sat.len()
    ));
    let fraction = kq_passing as f64 / sat.len() as f64;
    let (worst_kq, worst_kq_label) =
        stats::worst(sat.iter().map(|m| (m.kq_gap, m.label.as_str()))).unwrap_or((f64::NAN, "-"));
    rep.derive("kq_fraction", fraction);
    rep.derive("worst_kq_gap", worst_kq);
    rep.derive(
        "median_kq_gap",
        stats::median(&sat.iter().map(|m| m.kq_gap).collect::<Vec<_>>()),
    );
    let target = match p.kq_target {
        KqTarget::Nuclear => "‖Ŵ‖_*/OPT_* − 1",
        KqTarget::Frobenius => "‖Ŵ‖_F/‖W_F‖_F − 1",
    };
    // where the two SVMs' objectives differ by more than the tolerance, the KQ limit must be
    // nearer the target objective than the combined-W limit (the bias that tells them apart)
    let distinct: Vec<&&Member> = sat.iter().filter(|m| m.svm_gap >= *c.kq_gap).collect();
    let (worst_ratio, worst_ratio_label) = stats::worst(
        distinct
            .iter()
            .map(|m| (m.kq_gap / m.w_gap, m.label.as_str())),
    )
    .unwrap_or((f64::NAN, "-"));
    rep.derive("distinct_sets", distinct.len());
    rep.derive("worst_kq_over_w_gap", worst_ratio);
    rep.at_most(
        "kq-nearer-than-w-worst",
        &format!(
            "KQ vs W: worst ({target})_KQ / ({target})_W at τ_max over the sets where the two \
             SVMs differ"
        ),
        worst_ratio,
        1.0,
    )
    .note(format!(
        "worst: {worst_ratio_label}; {} of {} satisfying sets have the other SVM's gap ≥ {:e}; \
         conjecture (Thm 1.1 beyond the aligned case): the separate K, Q flow is biased \
         toward the nuclear norm, the combined W toward the Frobenius norm",
        distinct.len(),
        sat.len(),
        *c.kq_gap
    ));
    let missing: Vec<String> = sat
        .iter()
        .filter(|m| !kq_pass(m))
        .map(|m| format!("{} {:.2e}", m.label, m.kq_gap))
        .collect();
    let title = format!(
        "KQ: fraction of the satisfying sets with {target} ≤ {:e} at τ_max",
        *c.kq_gap
    );
    let detail = format!(
        "{kq_passing} of {}; worst {worst_kq:.3e} ({worst_kq_label}); above the bound: [{}]",
        sat.len(),
        missing.join(", ")
    );
    if *p.tau_max >= SPEC_FRACTION_TAU {
        rep.at_least("kq-nuclear-fraction", &title, fraction, *c.kq_fraction)
            .note(format!(
                "{detail}. A conjecture beyond the aligned case of Thm 5.1, so the spec's soft \
                 fraction is checked, not every set"
            ))
            .paper_claim(
                "Theorem 1.1 (informal): GF on separate K, Q converges to a nuclear-norm SVM \
                 solution; proven for diagonal (Thm 4.1) and aligned (Thm 5.1) settings only; \
                 spec §5.2/§7 expects ≥ 80% of random sets within 1e-3 at τ = 1e8",
            );
    } else {
        rep.skip(
            "kq-nuclear-fraction",
            title,
            format!(
                "spec §5.2 states its ≥ {} at τ = {SPEC_FRACTION_TAU:e}; this run stops at τ_max = \
                 {:e} (the full flows' integrators fail near τ ≈ 4e4–8e4 on some sets), where the \
                 slow sets (weak complementarity margin, or a nuclear solution of rank > 1) are \
                 still converging: measured {detail} (derived kq_fraction)",
                *c.kq_fraction, *p.tau_max
            ),
        );
    }

    rep.series = Table::new(&[
        "label",
        "d",
        "a3_slack_w0",
        "svm_distance",
        "nuclear_margin",
        "w_dist_frobenius",
        "kq_gap",
        "kq_rank_ratio",
        "svm_gap",
        "w_gap",
        "w_pass",
        "kq_pass",
    ]);
    for m in &members {
        rep.series.push(vec![
            m.label.clone().into(),
            m.d.into(),
            m.a3_slack.into(),
            m.svm_distance.into(),
            m.nuclear_margin.into(),
            m.w_direction.into(),
            m.kq_gap.into(),
            m.kq_rank_ratio.into(),
            m.svm_gap.into(),
            m.w_gap.into(),
            usize::from(w_pass(m)).into(),
            usize::from(kq_pass(m)).into(),
        ]);
    }
    rep.instance = Some(run_instance(
        members
            .iter()
            .map(|m| (m.label.replace('-', "_"), m.arrays.clone()))
            .collect(),
    ));
    rep.figure = Some(figure(&members, target, c));
    Ok(rep)
}

fn figure(members: &[Member], target: &str, c: &Checks) -> Figure {
    let floor = super::common::log_axis_floor;
    let mut paths = LinePanel::new(
        format!("KQ flows: {target} along τ"),
        "τ = ln(1 + t)",
        target,
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerLeft)
    .hline(RefLine::new(*c.kq_gap, "bound"));
    for (i, m) in members.iter().enumerate() {
        let label = if i == 0 {
            "KQ, one line per set".to_string()
        } else {
            String::new()
        };
        paths = paths.series(
            Series::numerics(
                label,
                m.kq_path.iter().map(|x| x.0).collect(),
                m.kq_path.iter().map(|x| floor(x.1)).collect(),
            )
            .color(0),
        );
    }
    let ends = LinePanel::new(
        "at τ_max, against ‖W_F − W_*‖_F",
        "‖W_F − W_*‖_F (how different the two SVMs are)",
        "gap / distance",
    )
    .log_y()
    .legend(LegendPosition::LowerLeft)
    .hline(RefLine::new(*c.kq_gap, "KQ bound"))
    .series(
        Series::new(
            format!("KQ {target}"),
            members.iter().map(|m| m.svm_distance).collect(),
            members.iter().map(|m| floor(m.kq_gap)).collect(),
            LineStyle::Markers,
        )
        .color(0),
    )
    .series(
        Series::new(
            "W ‖Ŵ − W_F‖_F",
            members.iter().map(|m| m.svm_distance).collect(),
            members.iter().map(|m| floor(m.w_direction)).collect(),
            LineStyle::Markers,
        )
        .color(2),
    );
    Figure::new(2)
        .title("E2 on random A2 sets: separate K, Q → nuclear-norm SVM objective; combined W → W_F")
        .panel(paths)
        .panel(ends)
}

/// Per dataset one KQ and one W flow (dimension ≤ 2·d_max²) and the SVM solves.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let de = p.dims.iter().copied().max().unwrap_or(1);
    let samples = tau_grid_len(*p.tau_max, *p.per_decade);
    full_flow_cost(
        "instances, dims, tau_max, per_decade",
        2.0 * n(*p.instances),
        de,
        samples,
        ctx.ode.method,
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "kq.full-random-batch",
    paper: "001",
    summary: "E2 on 20 random A2 sets (d ∈ {4, 5, 6}, d_e = d, init N(0, 0.1²)): the combined-W \
              flow reaches the Frobenius SVM on every set (hard), the separate K, Q flow the \
              nuclear-norm SVM objective on the spec's fraction (a conjecture).",
    solver: OdeConfig::new(Method::TrBdf2, 1e-10, 1e-13),
    validate,
    cost,
    quantities: &[
        "instances",
        "satisfying",
        "passing",
        "w_passing",
        "kq_passing",
        "violating_kq_gaps",
        "worst_w_direction",
        "kq_fraction",
        "worst_kq_gap",
        "median_kq_gap",
        "distinct_sets",
        "worst_kq_over_w_gap",
    ],
    run,
};

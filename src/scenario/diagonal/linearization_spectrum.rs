//! `linearization-spectrum`: the plateau points θ^k of Algorithm 1 as saddles of the raw flow
//! u̇ = v⊙g, v̇ = u⊙g (spec 004 §2.5). The exact Jacobian (from Jacobian-vector products of the
//! raw network's descent field) has the eigenvalues {±g_j(θ^k) : j ∉ S_k} ∪ {0 (|S_k| times)}
//! ∪ eig(−2 H_SS diag|β^k_S|); its unstable directions are the inactive j with g_j ≠ 0. The
//! coordinate i_k that Algorithm 1 activates next is not always the fastest of them: Δ_k also
//! depends on the history stored in b^k.

use crate::scenario::param::Positive;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use super::algorithm1_common::{validate_instances, Algorithm1Params, Scheduled, STAGE_B_SOLVER};
use super::common::{schedule_cost, InstanceName, UserFiles};
use crate::analysis::linearize::{eigenvalues, jacobian};
use crate::flow::Descent;
use crate::instance::run_instance;
use crate::instance::InstanceFile;
use crate::models::diagonal::{hessian_block, BetaLoss, DiagonalNet, Schedule, Stage};
use crate::plot::{Figure, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::Cost;
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;
use nalgebra::DMatrix;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Instances whose plateau points are linearized (spec §7: mini).
    pub instances: Vec<InstanceName>,
    #[serde(default)]
    pub algorithm1: Algorithm1Params,
    /// The user's data (Σ, β* or the attention arrays, README "Your own data") instead of the
    /// built-in instance; `instances` must then list one (the file replaces it).
    #[serde(default)]
    pub data_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Sorted computed vs sorted predicted eigenvalues: max difference / max|λ| (spec §7:
    /// 1e−6).
    pub max_match_error: Positive,
    /// max |Im λ| / max|λ| of the computed spectrum: the raw field is a gradient field, so its
    /// Jacobian −∇²L is symmetric and the spectrum real (rounding only).
    pub max_imaginary: Positive,
}

/// The user's data file of this run (none: the built-in instances).
fn files(p: &Params) -> UserFiles {
    UserFiles::new(&p.data_file, &None)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    validate_instances(&p.instances, "params.instances", sc)?;
    files(p).refuse_instance_list("instances", &p.instances, sc)?;
    files(p).validate(p.instances[0], sc)?;
    Ok(())
}

/// The linearization at one plateau point.
struct StageSpectrum {
    k: usize,
    computed: Vec<f64>,
    predicted: Vec<f64>,
    /// max |computed − predicted| (both sorted) / max|λ|.
    match_error: f64,
    imaginary: f64,
    unstable_computed: usize,
    unstable_predicted: usize,
    /// (i_k, |g_{i_k}|) and (fastest inactive j, |g_j|); None at the last stage.
    taken: Option<(usize, f64)>,
    fastest: Option<(usize, f64)>,
}

fn real_parts(m: &DMatrix<f64>) -> Result<(Vec<f64>, f64), RunError> {
    let values = eigenvalues(m).map_err(|e| RunError::Other(e.to_string()))?;
    let imaginary = stats::max_abs(values.iter().map(|z| z.im));
    let mut re: Vec<f64> = values.iter().map(|z| z.re).collect();
    re.sort_by(f64::total_cmp);
    Ok((re, imaginary))
}

fn linearize(
    loss: &dyn BetaLoss,
    schedule: &Schedule,
    stage: &Stage,
) -> Result<StageSpectrum, RunError> {
    let net = DiagonalNet::new(loss);
    let jac = jacobian(&Descent(&net), 0.0, &stage.plateau_state())
        .map_err(|e| RunError::Other(e.to_string()))?;
    let (computed, imaginary) = real_parts(&jac)?;

    // prediction of spec §2.5 from g(θ^k) and H_SS alone
    let s = &stage.support;
    let m = s.len();
    let inactive: Vec<usize> = (0..loss.p()).filter(|j| !s.contains(j)).collect();
    let mut predicted: Vec<f64> = inactive
        .iter()
        .flat_map(|&j| [stage.drift[j], -stage.drift[j]])
        .collect();
    predicted.extend(std::iter::repeat_n(0.0, m));
    if m > 0 {
        let h = DMatrix::from_row_slice(m, m, &hessian_block(loss, &stage.beta, s));
        let active = DMatrix::from_fn(m, m, |r, c| -2.0 * h[(r, c)] * stage.beta[s[c]].abs());
        predicted.extend(real_parts(&active)?.0);
    }
    predicted.sort_by(f64::total_cmp);

    let scale = stats::max_abs(computed.iter().chain(&predicted));
    let match_error = stats::max_abs(computed.iter().zip(&predicted).map(|(x, y)| x - y)) / scale;
    // the same zero threshold as Algorithm 1's Δ = ∞ rule
    let unstable_computed = computed.iter().filter(|&&l| l > schedule.tol_g).count();
    let unstable_predicted = inactive
        .iter()
        .filter(|&&j| stage.drift[j].abs() > schedule.tol_g)
        .count();
    let taken = schedule
        .stages
        .get(stage.k + 1)
        .and_then(|n| n.entered_by.as_ref())
        .map(|a| (a.index, a.escape_rate));
    let fastest = inactive
        .iter()
        .map(|&j| (j, stage.drift[j].abs()))
        .filter(|&(_, g)| g > schedule.tol_g)
        .max_by(|a, b| a.1.total_cmp(&b.1));
    Ok(StageSpectrum {
        k: stage.k,
        computed,
        predicted,
        match_error,
        imaginary: imaginary / scale,
        unstable_computed,
        unstable_predicted,
        taken,
        fastest: fastest.filter(|_| taken.is_some()),
    })
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rep = Report {
        series: Table::new(&["instance", "k", "j", "predicted", "computed"]),
        ..Default::default()
    };
    let mut summary = Table::new(&[
        "instance",
        "k",
        "support_size",
        "match_error",
        "unstable_predicted",
        "unstable_computed",
        "i_k",
        "rate_i_k",
        "fastest",
        "fastest_rate",
    ]);
    let mut fig = Figure::new(p.instances.len().min(2)).title(
        "Spectrum of the raw-flow Jacobian at the plateau points θ^k: predicted (dashed) and computed (●)",
    );
    let mut datasets = Vec::new();
    for &name in &p.instances {
        let opts = p.algorithm1.options(&STAGE_B_SOLVER);
        let sched = Scheduled::with_files(name, &files(p), &opts, ctx)?;
        let label = sched.label();
        datasets.push((label.clone(), sched.data.to_arrays()));
        let loss = sched.instance.loss();
        let spectra = sched
            .schedule
            .stages
            .iter()
            .map(|st| linearize(loss, &sched.schedule, st))
            .collect::<Result<Vec<_>, _>>()?;
        for sp in &spectra {
            for (j, (pr, co)) in sp.predicted.iter().zip(&sp.computed).enumerate() {
                rep.series.push(vec![
                    Cell::Text(label.clone()),
                    sp.k.into(),
                    j.into(),
                    (*pr).into(),
                    (*co).into(),
                ]);
            }
            let name_of = |x: Option<(usize, f64)>| {
                x.map_or(Cell::Text("none".into()), |(i, _)| {
                    Cell::Text(sched.coordinate(i))
                })
            };
            let rate_of = |x: Option<(usize, f64)>| Cell::Num(x.map_or(f64::NAN, |(_, g)| g));
            summary.push(vec![
                Cell::Text(label.clone()),
                sp.k.into(),
                sched.schedule.stages[sp.k].support.len().into(),
                sp.match_error.into(),
                sp.unstable_predicted.into(),
                sp.unstable_computed.into(),
                name_of(sp.taken),
                rate_of(sp.taken),
                name_of(sp.fastest),
                rate_of(sp.fastest),
            ]);
        }
        instance_checks(&mut rep, &sched, &spectra, c);
        fig = fig.panel(panel(&label, &spectra));
    }
    rep.tables.push(("stages".into(), summary));
    rep.figure = Some(fig);
    rep.instance = Some(run_instance(datasets));
    Ok(rep)
}

fn instance_checks(rep: &mut Report, sched: &Scheduled, spectra: &[StageSpectrum], c: &Checks) {
    let label = sched.label();
    let worst = |f: fn(&StageSpectrum) -> f64| stats::max(spectra.iter().map(f));
    rep.at_most(
        &format!("spectrum-match-error-lambda.{label}"),
        &format!("{label}: spectrum match error / max|λ|"),
        worst(|s| s.match_error),
        *c.max_match_error,
    )
    .note(format!(
        "sorted eig of the exact Jacobian vs {{±g_j}} ∪ {{0^|S|}} ∪ eig(−2H_SS diag|β_S|), \
         {} plateaus",
        spectra.len()
    ));
    rep.at_most(
        &format!("im-lambda-lambda.{label}"),
        &format!("{label}: max |Im λ| / max|λ|"),
        worst(|s| s.imaginary),
        *c.max_imaginary,
    );
    let miscount = spectra
        .iter()
        .map(|s| s.unstable_computed.abs_diff(s.unstable_predicted))
        .max()
        .unwrap_or(0);
    rep.at_most(
        &format!("unstable-eigenvalues.{label}"),
        &format!("{label}: |#unstable eigenvalues − #{{j ∉ S: g_j ≠ 0}}|"),
        miscount as f64,
        0.0,
    )
    .note("max over plateaus; zero means |·| ≤ tol_g, Algorithm 1's Δ = ∞ threshold");
    let not_fastest: Vec<String> = spectra
        .iter()
        .filter_map(|s| match (s.taken, s.fastest) {
            (Some((i, g)), Some((j, h))) if i != j => Some(format!(
                "stage {}: {} (rate {g:.4}) taken, {} (rate {h:.4}) fastest",
                s.k,
                sched.coordinate(i),
                sched.coordinate(j)
            )),
            _ => None,
        })
        .collect();
    rep.derive(
        &format!("{label}.stages_where_i_k_is_not_fastest"),
        &not_fastest,
    );
}

/// Eigenvalues per stage: computed as dots, predicted as short theory levels (NaN-separated
/// strokes) through them, the rate |g_{i_k}| of the direction Algorithm 1 takes as a separate
/// marker.
fn panel(label: &str, spectra: &[StageSpectrum]) -> LinePanel {
    let all = || {
        spectra
            .iter()
            .flat_map(|s| s.computed.iter().chain(&s.predicted))
    };
    let (lo, hi) = (stats::axis_min(0.0, all()), stats::axis_max(0.0, all()));
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let half_width = 0.3;
    let (mut cx, mut cy) = (Vec::new(), Vec::new());
    let (mut px, mut py) = (Vec::new(), Vec::new());
    let (mut tx, mut ty) = (Vec::new(), Vec::new());
    for s in spectra {
        let k = s.k as f64;
        for &l in &s.computed {
            cx.push(k);
            cy.push(l);
        }
        for &l in &s.predicted {
            px.extend([k - half_width, k + half_width, f64::NAN]);
            py.extend([l, l, f64::NAN]);
        }
        if let Some((_, g)) = s.taken {
            tx.push(k);
            ty.push(g);
        }
    }
    LinePanel::new(
        format!("{label}: Jacobian eigenvalues at θ^k"),
        "plateau k",
        "eigenvalue of ∂(v⊙g, u⊙g)/∂(u, v)",
    )
    .series(Series::theory("predicted", px, py))
    .series(Series::new("computed (exact Jacobian)", cx, cy, LineStyle::Markers).color(0))
    .series(
        Series::new(
            "|g_{i_k}|: the unstable rate taken",
            tx,
            ty,
            LineStyle::Markers,
        )
        .color(3),
    )
    .hline(RefLine::new(0.0, ""))
    .x_range(-0.5, spectra.len() as f64 - 0.5)
    .y_range(lo - 0.05 * span, hi + 0.05 * span)
}

/// Per instance, Algorithm 1 and per stage (at most p) the dense Jacobian of the flow (2p × 2p)
/// and its spectrum.
fn cost(p: &Params, _: &RunContext) -> Cost {
    p.instances.iter().fold(Cost::new(), |cost, &name| {
        let size = name.size();
        cost.and(schedule_cost("instances", name)).dense_hessians(
            "instances",
            size.p,
            2.0 * size.p,
            2.0 * size.grad,
        )
    })
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.linearization-spectrum",
    paper: "004",
    summary: "Exact Jacobian spectrum of the raw flow at every plateau θ^k (spec 004 §2.5): \
              {±g_j} ∪ {0^|S|} ∪ eig(−2H_SS diag|β_S|), the unstable count, and whether the \
              next activation is the fastest unstable direction.",
    solver: STAGE_B_SOLVER,
    validate,
    cost,
    quantities: &[],
    run,
};

//! `init-scale` (Lemmas 2 and 3; spec 003 §4.2, §6.16): how small must ‖W₀‖ be?
//!
//! - Lemma 2, deterministic form [D]: ‖W₀‖_F B² ≤ c ⇒ max_{i,t}|s_{i,t}(W₀)| ≤ c and
//!   φ_{i,opt}(W₀) ≥ e^{−2c}/T, for every direction; its probabilistic form for Gaussian W₀
//!   with σ₀ = c/(B²√(2 ln(2nT/δ))) fails with probability ≤ δ (Gaussian tail + union bound).
//! - Lemma 3: along NGD, φ_{i,opt}(W_k) never decreases while it is below ½, hence
//!   min_k φ_{i,opt}(W_k) ≥ min(φ_{i,opt}(W₀), 1/(1 + e^{2ηB²})) ([D]: from φ ≥ ½ one step of
//!   length η moves each logit gap by ≤ 2ηB²).
//!
//! W₀ = r·Ŵ over a sweep of r and random unit directions Ŵ (shared by all r), plus the
//! anti-aligned direction −W̄_mm; the run reports the largest r up to which Lemma 3 held.
//!
//! `data_file` (X, y, u, optional z) replaces the named data for one sweep (`opt_positions`
//! then has nothing to place: the decoder picks the optimal tokens); `init_file` (array `W0`,
//! (k, d, d), each of unit Frobenius norm) replaces the directions Ŵ, the anti-aligned one
//! included. Lemmas 2 and 3 hold for any instance and direction, so every check runs on
//! them. `instance.npz` holds the tokens and the directions (one sweep as they are, several
//! under `first_`/`random_`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::analysis::svm::MarginConstraints;
use crate::attention::{FixedDecoder, Instance, Loss};
use crate::flow::{Method, OdeConfig};
use crate::instance::{run_instance, Arrays};
use crate::models::token_select::{Example1, FixedStepper, OptPosition};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::attention_common::{gaussian_matrix, logits, unit_direction};
use super::common::{
    build_instance, instance_arrays, optimizer_runs, w_svm, DataName, UserFiles, BUILT_IN_GRAD,
    DATA_STREAM, FIRST_FREE_STREAM,
};
use super::fixed_common::ngd;
use super::params::Grid;
use super::svm_common::data_label;
use crate::scenario::param::Open01;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Fixed-decoder data model (spec 003 §1.3): ex1, ex1-orth, two-token or bad-init.
    pub data: DataName,
    /// Where ex1's optimal token sits, one sweep each: `first` (the §1.3 default) and/or
    /// `random` (then most queries are noise tokens and some constraints are at obtuse angles).
    /// Other data models take `["first"]`.
    pub opt_positions: NonEmpty<OptPosition>,
    /// ‖W₀‖_F values r (increasing).
    pub scales: Grid,
    /// Random unit directions Ŵ per scale (the same directions at every scale).
    pub directions: usize,
    /// Also start from the anti-aligned W₀ = −r·W̄_mm.
    pub anti_aligned: bool,
    /// NGD step length η (uncapped).
    pub eta: Positive,
    /// NGD iterations per start (Lemma 3 is about the whole trajectory; decreases happen
    /// while φ_opt < ½, i.e. early).
    pub steps: AtLeast<1>,
    /// Lemma 2, probabilistic form: the c and δ of σ₀ = c/(B²√(2 ln(2nT/δ))).
    pub lemma2_c: Positive,
    pub lemma2_delta: Open01,
    /// Gaussian draws of W₀ for the probabilistic form.
    pub gaussian_trials: AtLeast<1>,
    /// The user's tokens (X, y, u, optional z), replacing `data` and `opt_positions`.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's directions Ŵ (array `W0`, (d, d) or (k, d, d), unit Frobenius norm),
    /// replacing `directions` and `anti_aligned`.
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Relative slack of the exact inequalities (spec 003 §4: 1e−9).
    pub rel_slack: Positive,
    /// Lemma 3 is asserted for every start with ‖W₀‖B² ≤ this (Lemma 2's "c": its value was
    /// lost, §0); larger scales are only reported.
    pub lemma3_max_c: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.data == DataName::Dm {
        return Err(sc.invalid(
            "params.data",
            "dm is the joint-training model; Lemmas 2–3 concern a fixed decoder (ex1, ex1-orth, \
             two-token, bad-init)",
        ));
    }
    let ex1_like = matches!(p.data, DataName::Ex1 | DataName::Ex1Orth);
    if !ex1_like && p.opt_positions[..] != [OptPosition::First] {
        return Err(sc.invalid(
            "params.opt_positions",
            "only ex1 and ex1-orth take \"random\"",
        ));
    }
    if p.directions == 0 && !p.anti_aligned {
        return Err(sc.invalid(
            "params.directions",
            "need at least one direction (or anti_aligned = true)",
        ));
    }
    UserFiles::new(&p.data_file, &p.init_file).validate_directions(p.data, usize::MAX, sc)
}

/// Lemma 3 along one NGD run from W₀.
struct Lemma3 {
    /// Steps at which some φ_{i,opt} < ½ decreased.
    decreases: usize,
    /// min_{i,k} φ_{i,opt}(W_k) / min(φ_{i,opt}(W₀), 1/(1 + e^{2ηB²})) (worst sample).
    bound_ratio: f64,
    /// min_{i,k} φ_{i,opt}(W_k).
    min_phi: f64,
}

fn lemma3(
    model: &FixedDecoder,
    w0: &[f64],
    p: &Params,
    floor: f64,
    slack: f64,
) -> Result<Lemma3, RunError> {
    let mut stepper =
        FixedStepper::new(model, ngd(*p.eta)).map_err(|e| RunError::Other(e.to_string()))?;
    let mut w = w0.to_vec();
    let mut phi = model.attention(&w).phi_opt;
    let bounds: Vec<f64> = phi.iter().map(|&f| f.min(floor)).collect();
    let mut lowest = phi.clone();
    let mut decreases = 0;
    for _ in 0..*p.steps {
        stepper.step(&mut w);
        let next = model.attention(&w).phi_opt;
        if next
            .iter()
            .zip(&phi)
            .any(|(&new, &old)| old < 0.5 && new < old * (1.0 - slack))
        {
            decreases += 1;
        }
        lowest
            .iter_mut()
            .zip(&next)
            .for_each(|(l, &v)| *l = stats::smaller(*l, v));
        phi = next;
    }
    Ok(Lemma3 {
        decreases,
        bound_ratio: stats::min(lowest.iter().zip(&bounds).map(|(l, b)| l / b)),
        min_phi: stats::min(lowest.iter()),
    })
}

/// One sweep over the scales for one instance.
struct Sweep {
    label: String,
    b: f64,
    t: usize,
    /// min over constraint pairs of cos∠(D_k, D_l).
    min_constraint_cos: f64,
    /// Worst over directions, per scale.
    max_logit: Vec<f64>,
    min_phi0: Vec<f64>,
    bound_ratio: Vec<f64>,
    decreasing_steps: Vec<usize>,
    /// Lemma 2 ratios (worst over all starts).
    logit_ratio: f64,
    phi_ratio: f64,
    /// Starts with ‖W₀‖B² ≤ c_max, and how many of them violated Lemma 3.
    asserted: usize,
    violations: usize,
    largest_holding: Option<f64>,
    first_failing: Option<f64>,
    model: FixedDecoder,
    /// The tokens and the directions, as `instance.npz` records them.
    instance: Arrays,
}

fn instance(p: &Params, position: OptPosition, ctx: &RunContext) -> Result<Instance, RunError> {
    match p.data {
        DataName::Ex1 | DataName::Ex1Orth if position != OptPosition::First => {
            let base = if p.data == DataName::Ex1 {
                Example1::ex1()
            } else {
                Example1::ex1_orth()
            };
            Example1 {
                opt_position: position,
                ..base
            }
            .generate(&mut ctx.rng(DATA_STREAM))
            .map_err(|e| RunError::Other(format!("{:?}: {e}", p.data)))
        }
        _ => build_instance(p.data, ctx),
    }
}

fn sweep(
    p: &Params,
    c: &Checks,
    position: OptPosition,
    ctx: &RunContext,
    rows: &mut Table,
) -> Result<Sweep, RunError> {
    let files = UserFiles::new(&p.data_file, &p.init_file);
    let (label, inst) = match files.data_file {
        Some(_) => {
            let (source, inst) = files.instance(p.data, ctx.scenario)?;
            (source.key(), inst)
        }
        None => match position {
            OptPosition::First => (data_label(p.data), instance(p, position, ctx)?),
            OptPosition::Random => (
                format!("{}, random opt position", data_label(p.data)),
                instance(p, position, ctx)?,
            ),
        },
    };
    let (cons, svm) = w_svm(&inst)?;
    // [D] logit gaps are linear in W and, under Ass. 2, −∇L = Σ c_{j,τ} D_{j,τ} with c ≥ 0: if
    // every ⟨D_k, D_l⟩ ≥ 0, no step of GD/NGD/PS lowers any gap, so Lemma 3 holds at every
    // scale and step size. The smallest constraint cosine says whether that shortcut applies.
    let gram = cons.gram();
    let min_constraint_cos = stats::min(
        (0..gram.nrows())
            .flat_map(|k| (0..gram.nrows()).map(move |l| (k, l)))
            .map(|(k, l)| gram[(k, l)] / (gram[(k, k)] * gram[(l, l)]).sqrt()),
    );
    let b = inst.data.assumptions(&inst.decoder, &inst.opt).token_bound;
    let (t, d) = (inst.data.t, inst.data.d);
    // the init file's directions, else random unit directions (the same stream, hence the
    // same directions, for every sweep), then −W̄_mm
    let directions = match files.directions(d, usize::MAX, ctx.scenario)? {
        Some(dirs) => dirs
            .into_iter()
            .enumerate()
            .map(|(j, w)| (format!("init_file {j}"), w))
            .collect(),
        None => {
            let mut rng = ctx.rng(FIRST_FREE_STREAM);
            let mut dirs: Vec<(String, Vec<f64>)> = (0..p.directions)
                .map(|j| (format!("random {j}"), unit_direction(d, &mut rng)))
                .collect();
            if p.anti_aligned {
                let anti = svm.w.iter().map(|x| -x / svm.norm).collect();
                dirs.push(("anti-aligned".into(), anti));
            }
            dirs
        }
    };
    let used: Vec<Vec<f64>> = directions.iter().map(|(_, w)| w.clone()).collect();
    let instance = instance_arrays(&inst, &used);
    let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential)
        .map_err(|e| RunError::Other(format!("{label}: {e}")))?;
    let b2 = b * b;
    let floor = 1.0 / (1.0 + (2.0 * *p.eta * b2).exp());
    let slack = *c.rel_slack;
    let mut sw = Sweep {
        label,
        b,
        t,
        min_constraint_cos,
        max_logit: vec![],
        min_phi0: vec![],
        bound_ratio: vec![],
        decreasing_steps: vec![],
        logit_ratio: 0.0,
        phi_ratio: f64::INFINITY,
        asserted: 0,
        violations: 0,
        largest_holding: None,
        first_failing: None,
        model,
        instance,
    };
    for &r in p.scales.iter() {
        let c_r = r * b2;
        let phi_bound = (-2.0 * c_r).exp() / t as f64;
        let (mut logit, mut phi0_min, mut ratio, mut steps) =
            (0.0f64, f64::INFINITY, f64::INFINITY, 0);
        for (name, dir) in &directions {
            let w0: Vec<f64> = dir.iter().map(|x| r * x).collect();
            let max_logit = logits(sw.model.data(), &w0)
                .iter()
                .fold(0.0f64, |m, s| stats::larger(m, s.abs()));
            let min_phi0 = stats::min(sw.model.attention(&w0).phi_opt);
            let l3 = lemma3(&sw.model, &w0, p, floor, slack)?;
            let violated = l3.decreases > 0 || l3.bound_ratio < 1.0 - slack;
            if c_r <= *c.lemma3_max_c {
                sw.asserted += 1;
                sw.violations += usize::from(violated);
            }
            sw.logit_ratio = stats::larger(sw.logit_ratio, max_logit / c_r);
            sw.phi_ratio = stats::smaller(sw.phi_ratio, min_phi0 / phi_bound);
            logit = stats::larger(logit, max_logit);
            phi0_min = stats::smaller(phi0_min, min_phi0);
            ratio = stats::smaller(ratio, l3.bound_ratio);
            steps = steps.max(l3.decreases);
            rows.push(vec![
                sw.label.as_str().into(),
                r.into(),
                c_r.into(),
                name.as_str().into(),
                max_logit.into(),
                min_phi0.into(),
                phi_bound.into(),
                l3.decreases.into(),
                l3.bound_ratio.into(),
                l3.min_phi.into(),
            ]);
        }
        let holds = steps == 0 && ratio >= 1.0 - slack;
        match (holds, sw.first_failing) {
            (true, None) => sw.largest_holding = Some(r),
            (false, None) => sw.first_failing = Some(r),
            _ => {}
        }
        sw.max_logit.push(logit);
        sw.min_phi0.push(phi0_min);
        sw.bound_ratio.push(ratio);
        sw.decreasing_steps.push(steps);
    }
    Ok(sw)
}

/// The prefix of a sweep's arrays in a several-sweep `instance.npz`.
fn position_key(position: OptPosition) -> String {
    match position {
        OptPosition::First => "first".into(),
        OptPosition::Random => "random".into(),
    }
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rep = Report {
        series: Table::new(&[
            "instance",
            "scale",
            "c_lemma2",
            "direction",
            "max_abs_logit",
            "min_phi_opt_init",
            "lemma2_phi_bound",
            "lemma3_decreasing_steps",
            "lemma3_bound_ratio",
            "min_phi_opt_run",
        ]),
        ..Report::default()
    };
    // a data file is one instance: its decoder, not a generator, places the optimal tokens
    let positions = match p.data_file {
        Some(_) => &p.opt_positions[..1],
        None => &p.opt_positions[..],
    };
    let sweeps = positions
        .iter()
        .map(|&pos| sweep(p, c, pos, ctx, &mut rep.series))
        .collect::<Result<Vec<_>, _>>()?;
    rep.instance = Some(run_instance(
        positions
            .iter()
            .zip(&sweeps)
            .map(|(pos, s)| (position_key(*pos), s.instance.clone()))
            .collect(),
    ));
    let starts = rep.series.rows.len();
    let slack = *c.rel_slack;
    rep.at_most(
        "lemma-starts-w0-w0-b2",
        "Lemma 2: max_{starts} max|s_{i,t}(W₀)| / (‖W₀‖B²)",
        stats::max(sweeps.iter().map(|s| s.logit_ratio)),
        1.0 + slack,
    )
    .note(format!("{starts} starts (scales × directions × instances)"));
    rep.at_least(
        "lemma-starts-phi-opt-w0-w0",
        "Lemma 2: min_{starts} min_i φ_{i,opt}(W₀) / (e^{−2‖W₀‖B²}/T)",
        stats::min(sweeps.iter().map(|s| s.phi_ratio)),
        1.0 - slack,
    );

    // Lemma 2, probabilistic form, on the first instance
    let first = &sweeps[0];
    let (data, b2) = (first.model.data(), first.b * first.b);
    let nt = (data.n * data.t) as f64;
    let sigma0 = *p.lemma2_c / (b2 * (2.0 * (2.0 * nt / *p.lemma2_delta).ln()).sqrt());
    let mut grng = ctx.rng(FIRST_FREE_STREAM + 1);
    let failures = (0..*p.gaussian_trials)
        .filter(|_| {
            let w0 = gaussian_matrix(data.d, sigma0, &mut grng);
            logits(data, &w0).iter().any(|s| s.abs() > *p.lemma2_c)
        })
        .count();
    rep.at_most(
        "lemma-gaussian-w0-fraction",
        "Lemma 2 (Gaussian W₀): fraction with max|s| > c",
        failures as f64 / *p.gaussian_trials as f64,
        *p.lemma2_delta,
    )
    .note(format!(
        "σ₀ = c/(B²√(2 ln(2nT/δ))) = {sigma0:.3e}, c = {}, δ = {}, {} draws on {}",
        *p.lemma2_c, *p.lemma2_delta, *p.gaussian_trials, first.label
    ));
    let floor = 1.0 / (1.0 + (2.0 * *p.eta * b2).exp());
    rep.at_most(
        "lemma-violating-runs-w0-b2",
        "Lemma 3: violating runs with ‖W₀‖B² ≤ c_max",
        sweeps.iter().map(|s| s.violations).sum::<usize>() as f64,
        0.0,
    )
    .note(format!(
        "{} NGD runs (η = {}, {} steps); a violation is a decrease of some φ_{{i,opt}} < ½ \
         or min_k φ_{{i,opt}} below min(φ_{{i,opt}}(W₀), 1/(1 + e^{{2ηB²}})) ({} = {floor:.4})",
        sweeps.iter().map(|s| s.asserted).sum::<usize>(),
        *p.eta,
        *p.steps,
        first.label
    ));
    for s in &sweeps {
        rep.derive(
            &s.label,
            serde_json::json!({
                "B": s.b,
                "min_constraint_cosine": s.min_constraint_cos,
                "lemma3_largest_scale_holding": s.largest_holding,
                "lemma3_first_scale_failing": s.first_failing,
                "lemma3_decreasing_steps_per_scale": s.decreasing_steps,
            }),
        );
    }
    rep.derive("lemma2_sigma0", sigma0);
    rep.derive("lemma2_gaussian_failures", failures);

    let scales = p.scales.to_vec();
    let cs: Vec<f64> = scales.iter().map(|r| r * b2).collect();
    let logits_panel = LinePanel::new(
        format!("Lemma 2 logits, {} (worst direction)", first.label),
        "‖W₀‖_F",
        "max_{i,t} |s_{i,t}(W₀)|",
    )
    .log_x()
    .log_y()
    .series(Series::numerics(
        "measured",
        scales.clone(),
        first.max_logit.clone(),
    ))
    .series(Series::theory("bound ‖W₀‖B²", scales.clone(), cs.clone()))
    .legend(LegendPosition::UpperLeft);
    let phi_panel = LinePanel::new(
        format!("Lemma 2 attention, {} (worst direction)", first.label),
        "‖W₀‖_F",
        "min_i φ_{i,opt}(W₀)",
    )
    .log_x()
    .log_y()
    .series(Series::numerics(
        "measured",
        scales.clone(),
        first.min_phi0.clone(),
    ))
    .series(Series::theory(
        "bound e^{−2‖W₀‖B²}/T",
        scales.clone(),
        cs.iter()
            .map(|c| (-2.0 * c).exp() / first.t as f64)
            .collect(),
    ))
    .legend(LegendPosition::LowerLeft);
    let mut lemma3_panel = LinePanel::new(
        format!("Lemma 3 along NGD (η = {}, {} steps)", *p.eta, *p.steps),
        "‖W₀‖_F",
        "fraction of steps lowering some φ_opt < ½",
    )
    .log_x()
    .y_range(-0.05, 1.05)
    .vline(RefLine::new(*c.lemma3_max_c / b2, "c_{max}").style(LineStyle::Dotted))
    .legend(LegendPosition::UpperLeft);
    for (j, s) in sweeps.iter().enumerate() {
        let fraction = s
            .decreasing_steps
            .iter()
            .map(|&k| k as f64 / *p.steps as f64)
            .collect();
        // one line per legend entry: "random opt position" (the data label) is shortened here
        let name = format!(
            "{}: min cos∠ = {:.2}",
            s.label.replace(", random opt position", ", random φ_opt"),
            s.min_constraint_cos
        );
        lemma3_panel = lemma3_panel
            .series(Series::new(name, scales.clone(), fraction, LineStyle::SolidMarkers).color(j));
    }
    rep.figure = Some(
        Figure::new(3)
            .title("Initialization scale (Lemmas 2 and 3): W₀ = r·Ŵ over random and anti-aligned Ŵ")
            .panel(logits_panel)
            .panel(phi_panel)
            .panel(lemma3_panel),
    );
    Ok(rep)
}

/// NGD for `steps` from every start (scales × directions, and the anti-aligned ones) per
/// optimal-token position, and the Gaussian draws of W₀.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let starts = n(p.scales.len()) * (n(p.directions) + f64::from(u8::from(p.anti_aligned)));
    let runs = n(p.opt_positions.len()) * starts;
    optimizer_runs("steps, scales, directions", runs, *p.steps).work(
        "gaussian_trials",
        "Gaussian draws of W₀",
        n(*p.gaussian_trials),
        BUILT_IN_GRAD,
    )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.init-scale",
    paper: "003",
    summary: "Initialization scale (Lemmas 2, 3): the deterministic Lemma 2 bound and its \
              Gaussian form over a sweep of ‖W₀‖, the Lemma 3 floor on φ_opt along NGD, and the \
              largest scale at which Lemma 3 still holds.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &["lemma2_gaussian_failures", "lemma2_sigma*"],
    run,
};

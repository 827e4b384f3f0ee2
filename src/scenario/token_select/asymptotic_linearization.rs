//! `asymptotic-linearization` (spec 003 §4.4): along NGD, L − L* becomes the exponential-loss
//! surrogate Σ_k c_k e^{−⟨W, D_k⟩} of a linear classifier on the features D_k, and the
//! iterate's offset from the W_mm ray converges to the w̃ that surrogate predicts, so that
//! 1 − corr ≈ ‖w̃_⊥‖²/(2‖W‖²).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::analysis::svm::MarginConstraints;
use crate::flow::{Method, OdeConfig};
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::Cost;
use crate::scenario::param::Positive;
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::{optimizer_runs, DataName, UserFiles};
use super::fixed_common::{
    checkpoint_row, checkpoint_table, fixed_quantities, ngd, trace, Init, Probing, Setup,
};
use super::fixed_linearization::{Linearization, PerpSplit};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub data: DataName,
    /// NGD step η.
    pub eta: Positive,
    /// Iterations K.
    pub steps: usize,
    pub init: Init,
    /// The surrogate ratio is judged where min_k ⟨W, D_k⟩ ≥ this (spec §4.4: 10).
    pub margin_threshold: Positive,
    /// ‖W_⊥‖² is compared with its prediction where ‖W‖ ≥ this (spec §4.4: 2000).
    pub norm_threshold: Positive,
    /// The user's tokens (X, y, u, optional z), replacing `data`.
    #[serde(default)]
    pub data_file: Option<PathBuf>,
    /// The user's W₀ (array `W0`, d × d), replacing `init`.
    #[serde(default)]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// |(L − L*)/surrogate − 1| allowed past the margin threshold (spec §4.4: 1e−3).
    pub surrogate_tol: Positive,
    /// |‖W_⊥‖² − ‖w̃_⊥‖²|/‖w̃_⊥‖² allowed past the norm threshold (spec §4.4: 0.1).
    pub perp_rel_tol: Positive,
    /// Drift of the conserved component (outside span{D_k}) relative to ‖W‖ (rounding only).
    pub conservation_tol: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    UserFiles::new(&p.data_file, &p.init_file).validate(p.data, 1, sc)
}

#[derive(Default)]
struct Curves {
    k: Vec<f64>,
    norm: Vec<f64>,
    min_margin: Vec<f64>,
    ratio_error: Vec<f64>,
    perp: Vec<PerpSplit>,
    misalignment: Vec<f64>,
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = UserFiles::new(&p.data_file, &p.init_file);
    let (setup, initial, mut rep) = Setup::single(p.data, files, &p.init, ctx)?;
    let lin = Linearization::new(&setup)?;
    setup.premise_checks(&mut rep);
    let w0 = initial.w0;
    let outside0 = lin.split(&w0, &setup.wmm_unit).outside;
    let rule = ngd(*p.eta);
    let mut table = checkpoint_table();
    let mut cv = Curves::default();
    let mut drift = 0.0f64;
    let mut final_w = Vec::new();
    let label = format!("NGD η = {}", *p.eta);
    trace(&setup, rule, &w0, p.steps, Probing::Checkpoints, |v| {
        let pr = v.probe;
        table.push(checkpoint_row(&label, &v));
        let margins = setup.constraints.margins(v.w);
        let min_margin = stats::min(margins.iter());
        let log_ratio = pr.log_excess - lin.log_surrogate(&margins);
        let split = lin.split(v.w, &setup.wmm_unit);
        drift = stats::larger(
            drift,
            (split.outside.sqrt() - outside0.sqrt()).abs() / pr.norm,
        );
        if v.k > 0 {
            cv.k.push(v.k as f64);
            cv.norm.push(pr.norm);
            cv.min_margin.push(min_margin);
            cv.ratio_error.push(log_ratio.exp_m1().abs());
            cv.perp.push(split);
            cv.misalignment.push(pr.one_minus_corr);
        }
        if v.step.is_none() {
            final_w = v.w.to_vec();
        }
    })?;
    rep.series = table;
    rep.tables
        .push(("linearization".into(), linearization_table(&cv)));
    let past_margin: Vec<f64> = (0..cv.k.len())
        .filter(|&j| cv.min_margin[j] >= *p.margin_threshold)
        .map(|j| cv.ratio_error[j])
        .collect();
    let worst_ratio = if past_margin.is_empty() {
        f64::NAN
    } else {
        stats::max(past_margin.iter())
    };
    rep.at_most(
        &format!("surrogate-sigmac-once.{}", *p.margin_threshold),
        &format!(
            "surrogate: max |(L−L*)/Σc_k e^(−⟨W,D_k⟩) − 1| once min_k⟨W,D_k⟩ ≥ {}",
            *p.margin_threshold
        ),
        worst_ratio,
        *c.surrogate_tol,
    )
    .note(format!(
        "over {} checkpoints; final |ratio − 1| = {:.3e}",
        past_margin.len(),
        cv.ratio_error.last().copied().unwrap_or(f64::NAN)
    ));
    let predicted_support = lin.predicted_support();
    let late: Vec<usize> = (0..cv.k.len())
        .filter(|&j| cv.norm[j] >= *p.norm_threshold)
        .collect();
    let last = cv.perp.last().copied();
    // the non-support part converges to a history-dependent limit: take its last value
    let non_support = last.map_or(f64::NAN, |s| s.non_support);
    let predicted = predicted_support + non_support + outside0;
    let worst_perp = if late.is_empty() {
        f64::NAN
    } else {
        stats::max(
            late.iter()
                .map(|&j| (cv.perp[j].total - predicted).abs() / predicted),
        )
    };
    rep.at_most(
        &format!("vs-predicted-relative-difference.{}", *p.norm_threshold),
        &format!(
            "‖W_⊥‖² vs predicted ‖w̃_⊥‖²: max relative difference at ‖W‖ ≥ {}",
            *p.norm_threshold
        ),
        worst_perp,
        *c.perp_rel_tol,
    )
    .note(format!(
        "predicted = {predicted_support:.4} (span D_S, closed form) + {non_support:.4} \
         (non-support part, measured) + {outside0:.4} (W₀ outside span D); measured {:.4} \
         at K",
        last.map_or(f64::NAN, |s| s.total)
    ));
    rep.at_most(
        "conserved-w0-projection-off-span",
        "conserved: max_k |‖P_⊥W_k‖ − ‖P_⊥W₀‖|/‖W_k‖ (P_⊥ = projection off span{D_k})",
        drift,
        *c.conservation_tol,
    )
    .note("every gradient lies in span{D_k}");
    let offset_error = last.map_or(f64::NAN, |s| s.offset_error);
    rep.derive("predicted_perp_support", predicted_support);
    rep.derive("perp_non_support_final", non_support);
    rep.derive("perp_outside_init", outside0);
    rep.derive("predicted_perp", predicted);
    rep.derive("measured_perp_final", last.map_or(f64::NAN, |s| s.total));
    rep.derive("offset_error_in_support_final", offset_error);
    rep.derive("log_c_over_alpha", &lin.log_c_over_alpha);
    rep.figure = Some(figure(p, &setup, &lin, &cv, predicted, &final_w));
    Ok(rep)
}

fn linearization_table(cv: &Curves) -> Table {
    let mut t = Table::new(&[
        "k",
        "norm_W",
        "min_margin",
        "surrogate_ratio_error",
        "perp_total",
        "perp_support",
        "perp_non_support",
        "perp_outside",
        "offset_error_support",
    ]);
    for j in 0..cv.k.len() {
        let s = cv.perp[j];
        t.push(
            [
                cv.k[j],
                cv.norm[j],
                cv.min_margin[j],
                cv.ratio_error[j],
                s.total,
                s.support,
                s.non_support,
                s.outside,
                s.offset_error,
            ]
            .into_iter()
            .map(Cell::Num)
            .collect(),
        );
    }
    t
}

fn figure(
    p: &Params,
    setup: &Setup,
    lin: &Linearization,
    cv: &Curves,
    predicted: f64,
    final_w: &[f64],
) -> Figure {
    // beyond a few times the threshold the ratio error is at rounding level
    let shown: Vec<usize> = (0..cv.k.len())
        .filter(|&j| cv.min_margin[j] <= 4.0 * *p.margin_threshold)
        .collect();
    let margin: Vec<f64> = shown.iter().map(|&j| cv.min_margin[j]).collect();
    let error: Vec<f64> = shown.iter().map(|&j| cv.ratio_error[j]).collect();
    let bound: Vec<f64> = margin
        .iter()
        .map(|m| (setup.t() - 1) as f64 * (-m).exp())
        .collect();
    let ratio = LinePanel::new(
        "Surrogate: (L − L*)/Σ c_k e^(−⟨W,D_k⟩)",
        "min_k ⟨W_k, D_k⟩",
        "|ratio − 1|",
    )
    .log_y()
    .y_range(1e-17, 10.0)
    .legend(LegendPosition::UpperRight)
    .series(Series::numerics("NGD", margin.clone(), error).color(0))
    .series(Series::theory("(T−1)·e^(−min margin)", margin, bound).color(6))
    .vline(RefLine::new(*p.margin_threshold, "threshold").style(LineStyle::Dotted));
    let pick = |f: fn(&PerpSplit) -> f64| cv.perp.iter().map(f).collect::<Vec<f64>>();
    let ends = vec![
        cv.norm.first().copied().unwrap_or(1.0),
        cv.norm.last().copied().unwrap_or(1.0),
    ];
    let perp = LinePanel::new("Offset from the W_{mm} ray", "‖W_k‖", "squared norm")
        .log_x()
        .log_y()
        .legend(LegendPosition::LowerRight)
        .series(Series::numerics("‖W_⊥‖²", cv.norm.clone(), pick(|s| s.total)).color(0))
        .series(Series::numerics("in span D_S", cv.norm.clone(), pick(|s| s.support)).color(2))
        .series(
            Series::numerics(
                "span D ⊖ span D_S",
                cv.norm.clone(),
                pick(|s| s.non_support),
            )
            .color(3),
        )
        .series(Series::numerics("outside span D", cv.norm.clone(), pick(|s| s.outside)).color(4))
        .series(Series::theory("‖w̃_⊥‖² predicted", ends.clone(), vec![predicted; 2]).color(0))
        .series(
            Series::theory(
                "w̃ in span D_S (closed form)",
                ends,
                vec![lin.predicted_support(); 2],
            )
            .color(2),
        );
    let law: Vec<f64> = cv.norm.iter().map(|r| predicted / (2.0 * r * r)).collect();
    let align = LinePanel::new("IB-vs-norm law", "‖W_k‖", "1 − corr(W_k, W_{mm})")
        .log_x()
        .log_y()
        .legend(LegendPosition::UpperRight)
        .series(Series::numerics("NGD", cv.norm.clone(), cv.misalignment.clone()).color(0))
        .series(Series::theory("‖w̃_⊥‖²/(2‖W‖²)", cv.norm.clone(), law).color(1));
    // ⟨W_K, D_k⟩ on the support against ln(c_k/α_k): slope 1, one common offset
    let margins = setup.constraints.margins(final_w);
    let support = &setup.svm.support;
    let x = lin.log_c_over_alpha.clone();
    let y: Vec<f64> = support.iter().map(|&k| margins[k]).collect();
    let shift = y.iter().zip(&x).map(|(a, b)| a - b).sum::<f64>() / x.len() as f64;
    let (lo, hi) = x
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let offsets = LinePanel::new("Support margins at k = K", "ln(c_k/α_k)", "⟨W_K, D_k⟩")
        .legend(LegendPosition::UpperLeft)
        .series(Series::new("k ∈ S (NGD)", x, y, LineStyle::Markers).color(0))
        .series(Series::theory("slope 1", vec![lo, hi], vec![lo + shift, hi + shift]).color(1));
    Figure::new(2)
        .title(format!(
            "Asymptotic linearization along NGD (η = {}) on {}: |S| = {} of {} constraints",
            *p.eta,
            setup.data,
            setup.svm.support.len(),
            setup.constraints.count()
        ))
        .panel(ratio)
        .panel(perp)
        .panel(align)
        .panel(offsets)
}

/// NGD for `steps` iterations on a built-in data model.
fn cost(p: &Params, _: &RunContext) -> Cost {
    optimizer_runs("steps", 1.0, p.steps)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "token_select.asymptotic-linearization",
    paper: "003",
    summary: "§4.4: along NGD the excess loss becomes the linear exponential-loss surrogate on \
              the features D_k, and ‖W_⊥‖² converges to the offset ‖w̃_⊥‖² it predicts \
              (1 − corr ≈ ‖w̃_⊥‖²/(2‖W‖²)).",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: fixed_quantities![
        "measured_perp_final",
        "offset_error_in_support_final",
        "perp_non_support_final",
        "perp_outside_init",
        "predicted_perp",
        "predicted_perp_support",
    ],
    run,
};

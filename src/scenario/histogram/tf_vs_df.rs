//! `tf-vs-df` (paper Fig. 2, Assumption 3.1; spec 000 R4, R5, E10, E15): the transformer flow
//! ℓ_tf and the df-linear flow ℓ_df from the same initialization, on several datasets.
//!
//! Assumption 3.1 says ℓ_tf(t) ≤ C ℓ_df(σt) for t ≥ T. The spec makes σ a prediction: both flows
//! tend to the same limit up to sign, where the late rates are set by the smallest nonzero
//! Hessian eigenvalues, so σ̂ = λ⁺_min(∇²ℓ_tf(z*)) / λ⁺_min(∇²ℓ_df(z*)). The run measures the
//! late log-slopes of both losses (σ̂_fit), the ratio R(t) = ℓ_tf(t)/ℓ_df(σ̂t) (ℓ_df from the
//! closed form, spec §2.6), and compares the two limits modulo the per-column sign (R5: the
//! paper's "the limits coincide" is wrong, E10).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::instance_files::InstanceFiles;
use super::sizes;
use crate::analysis::fit::{log_slope_fit, Window};
use crate::flow::{integrate_flow, linspace, Method, OdeConfig, Trajectory};
use crate::instance::histogram::{instance_arrays, task_name, InitialStates, TaskStrings};
use crate::models::histogram::{DfClosedForm, DfFlow, HistogramData};
use crate::plot::{Figure, LegendPosition, LinePanel, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::tf_common::{
    align_signs, default_d_thr, hessian_spectrum, limit_with_signs, require_tf_data,
    tf_flow_checked, trial_data, trial_init, SignAlignment, TaskName,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Task (spec 000 §1.2): eq, lt or thr.
    pub task: TaskName,
    /// Threshold D of the thr task.
    #[serde(default = "default_d_thr")]
    pub d_thr: usize,
    /// Alphabet size d.
    pub d: usize,
    /// String length N.
    pub seq_len: usize,
    /// Number of strings n (≥ d, so that every H_a is definite: spec R3).
    pub n: usize,
    /// Standard deviation of the Gaussian initialization of Q and v.
    pub sigma: Positive,
    /// Number of datasets (trial k: data stream 1000 + k, init stream 2000 + k).
    pub trials: AtLeast<1>,
    /// Horizon of the df flow.
    pub t_end_df: Positive,
    /// Horizon of the tf flow.
    pub t_end_tf: Positive,
    /// Output samples of each flow (linear grid).
    pub samples: AtLeast<10>,
    /// R(t) is evaluated on t ≥ ratio_from (the T of Assumption 3.1).
    pub ratio_from: Positive,
    /// … while both losses exceed this floor (below it the state error dominates).
    pub loss_floor: Positive,
    /// Late-slope fits use the samples with fit_low ≤ ℓ ≤ fit_high.
    pub fit_low: Positive,
    pub fit_high: f64,
    /// Step sizes that turn flow time into the paper's GD iterations k = t/η (panels a, b).
    pub eta_df: Positive,
    pub eta_tf: Positive,
    /// Hessian eigenvalues with |λ| ≤ zero_mode_tol·max|λ| are the rescaling zero modes.
    pub zero_mode_tol: Positive,
    /// The datasets (`M`, `strings` of shape (n, N) or (k, n, N)); replaces task, d_thr, d,
    /// seq_len, n and sets trials = k. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial states (`Q0`, `v0`, one per dataset); replaces sigma and the drawn inits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max R / min R on the last quarter of the R window (spec R4: "< a factor 2").
    pub ratio_variation_max: Positive,
    /// σ̂_fit/σ̂ must lie in [lo, hi] (spec R4: |σ̂_fit/σ̂ − 1| < 10%).
    pub sigma_ratio_lo: f64,
    pub sigma_ratio_hi: f64,
    /// max |z_tf(end) − s·z*| over Q and v, modulo per-column sign (spec R5: 1e-5).
    pub limit_mod_sign_tol: Positive,
    /// max_i ||v_tf,i| − √(μ_iρ̄_i)| (spec R5: 1e-6).
    pub v_limit_tol: Positive,
    /// max_i |β_i(t) − β_i(0)| / max(1, |β_i(0)|) for both flows (spec §2.7.1: 1e-7 at rtol 1e-10).
    pub beta_drift_tol: Positive,
    /// max |df ODE − closed form| on the grid (spec R9(a): 1e-7).
    pub df_closed_form_tol: Positive,
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let files = read_files(p, sc)?;
    match files.data() {
        Some(data) => {
            data.require_definite().map_err(|e| files.data_error(e))?;
            if data.d() < 2 {
                return Err(files.data_error(crate::instance::InstanceError::new(
                    "M",
                    "the alphabet needs d ≥ 2",
                )));
            }
        }
        None => require_tf_data(sc, p.d, p.seq_len, p.n)?,
    }
    files.trials(*p.trials, true)?;
    if p.fit_high <= *p.fit_low {
        return Err(sc.invalid("params.fit_high", "must exceed fit_low"));
    }
    if *p.ratio_from >= *p.t_end_tf {
        return Err(sc.invalid("params.ratio_from", "must be below t_end_tf"));
    }
    if !(c.sigma_ratio_lo < 1.0 && c.sigma_ratio_hi > 1.0) {
        return Err(sc.invalid("checks.sigma_ratio_lo", "the interval must contain 1"));
    }
    Ok(())
}

/// Everything measured on one dataset.
struct Trial {
    tf: Trajectory,
    df: Trajectory,
    closed: DfClosedForm,
    /// λ⁺_min of ∇²ℓ_tf and ∇²ℓ_df at the limit, their ratio σ̂ and λ_max of ∇²ℓ_tf.
    lambda_tf: f64,
    lambda_df: f64,
    sigma_hat: f64,
    lambda_max_tf: f64,
    /// Zero modes found in the tf spectrum (d expected).
    zero_modes_tf: usize,
    /// Late log-slopes of ℓ_tf and ℓ_df and σ̂_fit = their ratio.
    slope_tf: f64,
    slope_df: f64,
    sigma_fit: f64,
    /// R(t) on its window.
    ratio_t: Vec<f64>,
    ratio: Vec<f64>,
    /// sup R and max R / min R on the last quarter of the window.
    ratio_sup: f64,
    ratio_variation: f64,
    alignment: SignAlignment,
    /// max_i ||v_tf,i(end)| − √(μ_iρ̄_i)|.
    v_error: f64,
    beta_drift: f64,
    df_closed_error: f64,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), p.d)
}

/// The datasets and initial states of the run, from the files or drawn from the seed (trial k:
/// data stream 1000 + k, init stream 2000 + k), and what the outputs say about them.
struct Setup {
    data: Vec<HistogramData>,
    inits: Vec<Vec<f64>>,
    d: usize,
    seq_len: usize,
    n: usize,
    task: &'static str,
}

fn setup(p: &Params, ctx: &RunContext) -> Result<Setup, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let trials = files.trials(*p.trials, true)?;
    let data: Vec<HistogramData> = match files.data() {
        Some(file) => file
            .require_strings()
            .map_err(|e| files.data_error(e))?
            .iter()
            .map(|strings| HistogramData::from_strings(file.m.clone(), strings.clone()))
            .collect(),
        None => (0..trials)
            .map(|k| trial_data(ctx, &p.task.task(p.d_thr), p.d, p.seq_len, p.n, k))
            .collect(),
    };
    let d = data[0].d;
    let inits = match files.init() {
        Some(init) => init.states.clone(),
        None => (0..trials)
            .map(|k| trial_init(ctx, d, *p.sigma, k))
            .collect(),
    };
    Ok(Setup {
        d,
        seq_len: data[0].strings[0].len(),
        n: data[0].n(),
        task: task_name(&data[0].m),
        data,
        inits,
    })
}

impl Setup {
    /// Exactly the datasets and initial states used: `instance.npz`.
    fn instance(&self) -> crate::instance::Arrays {
        let data = TaskStrings {
            m: self.data[0].m.clone(),
            datasets: self.data.iter().map(|x| x.strings.clone()).collect(),
        };
        instance_arrays(
            &data,
            &InitialStates::from_states(self.d, self.inits.clone()),
        )
    }
}

fn run_trial(
    p: &Params,
    ctx: &RunContext,
    data: &HistogramData,
    z0: &[f64],
    trial: usize,
) -> Result<Trial, RunError> {
    let (tf_flow, _, _) = tf_flow_checked(data)?;
    let df_flow = DfFlow::new(data.m.clone());
    let d = data.d;
    let tf = integrate_flow(
        &tf_flow,
        z0,
        &linspace(0.0, *p.t_end_tf, *p.samples),
        &ctx.ode,
    )?;
    let df = integrate_flow(
        &df_flow,
        z0,
        &linspace(0.0, *p.t_end_df, *p.samples),
        &ctx.ode,
    )?;
    let closed = DfClosedForm::new(&data.m, z0);

    // the exact common limit (D2), signed like the tf run, and the Hessians there
    let z_star = limit_with_signs(&closed, tf.last_state(), d);
    let spec_tf = hessian_spectrum(&tf_flow, &z_star, *p.zero_mode_tol)?;
    let spec_df = hessian_spectrum(&df_flow, &closed.limit_state(), *p.zero_mode_tol)?;
    let lambda_tf = spec_tf.conditioning.smallest_nonzero;
    let lambda_df = spec_df.conditioning.smallest_nonzero;
    let sigma_hat = lambda_tf / lambda_df;

    let window = Window::Value {
        low: *p.fit_low,
        high: p.fit_high,
    };
    let fit = |tr: &Trajectory| {
        log_slope_fit(&tr.t, &tr.loss, window).map_err(|e| {
            RunError::Other(format!(
                "trial {trial}: late slope of the {} loss: {e} (lengthen the horizon or widen \
                 the fit window)",
                tr.stats.method
            ))
        })
    };
    let slope_tf = fit(&tf)?.slope;
    let slope_df = fit(&df)?.slope;

    let (ratio_t, ratio): (Vec<f64>, Vec<f64>) =
        tf.t.iter()
            .zip(&tf.loss)
            .filter(|(&t, _)| t >= *p.ratio_from)
            .map(|(&t, &l_tf)| (t, l_tf, closed.loss(sigma_hat * t)))
            .take_while(|&(_, l_tf, l_df)| l_tf > *p.loss_floor && l_df > *p.loss_floor)
            .map(|(t, l_tf, l_df)| (t, l_tf / l_df))
            .unzip();
    if ratio.len() < 8 {
        return Err(RunError::Other(format!(
            "trial {trial}: only {} samples of R(t) above the loss floor on t ≥ {}",
            ratio.len(),
            *p.ratio_from
        )));
    }
    let t_last = *ratio_t.last().expect("non-empty");
    let quarter_from = *p.ratio_from + 0.75 * (t_last - *p.ratio_from);
    let last_quarter = ratio_t
        .iter()
        .zip(&ratio)
        .filter(|(&t, _)| t >= quarter_from)
        .map(|(_, &r)| r);
    let (lo, hi) = stats::range(last_quarter);

    let sqrt_mu_rhob: Vec<f64> = closed
        .columns()
        .iter()
        .map(|c| (c.mu() * c.imbalance().rhob).sqrt())
        .collect();
    let (_, v_tf) = crate::models::histogram::state_to_qv(tf.last_state());
    let v_error = stats::max(
        v_tf.iter()
            .zip(&sqrt_mu_rhob)
            .map(|(v, s)| (v.abs() - s).abs()),
    );

    let mut exact = vec![0.0; z0.len()];
    let df_closed_error = stats::max((0..df.len()).map(|k| {
        closed.state(df.t[k], &mut exact);
        stats::max(df.state(k).iter().zip(&exact).map(|(a, b)| (a - b).abs()))
    }));

    Ok(Trial {
        alignment: align_signs(tf.last_state(), &closed.limit_state(), d),
        beta_drift: stats::larger(tf.max_invariant_drift(), df.max_invariant_drift()),
        lambda_tf,
        lambda_df,
        sigma_hat,
        lambda_max_tf: spec_tf.conditioning.largest,
        zero_modes_tf: spec_tf.conditioning.zero_modes,
        slope_tf,
        slope_df,
        sigma_fit: slope_tf / slope_df,
        ratio_sup: stats::max(ratio.iter()),
        ratio_variation: hi / lo,
        ratio_t,
        ratio,
        v_error,
        df_closed_error,
        tf,
        df,
        closed,
    })
}

/// The worst value of `f` over the trials and the trial it comes from.
fn worst(trials: &[Trial], f: impl Fn(&Trial) -> f64) -> (f64, usize) {
    stats::worst(trials.iter().map(f).zip(0..)).unwrap_or((f64::NAN, 0))
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let setup = setup(p, ctx)?;
    let trials = (0..setup.data.len())
        .map(|k| run_trial(p, ctx, &setup.data[k], &setup.inits[k], k))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rep = Report::default();
    rep.instance = Some(setup.instance());
    add_checks(&mut rep, p, setup.d, c, &trials);
    add_tables(&mut rep, p, &trials);
    for (k, t) in trials.iter().enumerate() {
        rep.stats(format!("trial {k} tf"), &t.tf.stats);
        rep.stats(format!("trial {k} df"), &t.df.stats);
    }
    let per_trial = |f: fn(&Trial) -> f64| trials.iter().map(f).collect::<Vec<_>>();
    rep.derive("sigma_hat", per_trial(|t| t.sigma_hat));
    rep.derive("sigma_fit", per_trial(|t| t.sigma_fit));
    rep.derive("C_sup_ratio", per_trial(|t| t.ratio_sup));
    rep.derive("lambda_min_nonzero_tf", per_trial(|t| t.lambda_tf));
    rep.derive("lambda_min_nonzero_df_alpha", per_trial(|t| t.lambda_df));
    rep.derive("lambda_max_tf", per_trial(|t| t.lambda_max_tf));
    rep.derive("late_slope_tf", per_trial(|t| t.slope_tf));
    rep.derive("late_slope_df", per_trial(|t| t.slope_df));
    rep.derive(
        "loss_ratio_at_init",
        per_trial(|t| t.tf.loss[0] / t.df.loss[0]),
    );
    rep.derive(
        "columns_flipped",
        trials
            .iter()
            .map(|t| t.alignment.flipped)
            .collect::<Vec<_>>(),
    );
    rep.figure = Some(figure(p, &setup, &trials));
    Ok(rep)
}

fn add_checks(rep: &mut Report, p: &Params, d: usize, c: &Checks, trials: &[Trial]) {
    let n_trials = trials.len();
    let (variation, k) = worst(trials, |t| t.ratio_variation);
    rep.at_most(
        "tf-df-sigma-last-quarter-worst",
        "R(t) = ℓ_tf(t)/ℓ_df(σ̂t): max/min on the last quarter (worst dataset)",
        variation,
        *c.ratio_variation_max,
    )
    .note(format!(
        "dataset {k}; R on t ∈ [{}, end] while both losses > {:e}; sup R = C is reported \
         (Assumption 3.1 with the predicted σ̂)",
        *p.ratio_from, *p.loss_floor
    ))
    .paper_claim("Assumption 3.1 gives no C, σ or T (E15): σ̂ here is predicted from spectra");
    let sigma_ratios: Vec<f64> = trials.iter().map(|t| t.sigma_fit / t.sigma_hat).collect();
    let (_, k) = worst(trials, |t| (t.sigma_fit / t.sigma_hat).ln().abs());
    let far = sigma_ratios[k];
    let (lo, hi) = stats::range(&sigma_ratios);
    rep.within(
        "sigma-fit-sigma-farthest-over-datasets",
        "σ̂_fit/σ̂ (farthest from 1 over the datasets)",
        far,
        c.sigma_ratio_lo,
        c.sigma_ratio_hi,
    )
    .note(format!(
        "dataset {}; σ̂ = λ⁺_min(∇²ℓ_tf)/λ⁺_min(∇²ℓ_df) at the exact limit, σ̂_fit = ratio \
         of the late log-slopes on ℓ ∈ [{:e}, {:e}]; range over datasets [{lo:.4}, \
         {hi:.4}]",
        k, *p.fit_low, p.fit_high
    ));
    let (diff, k) = worst(trials, |t| t.alignment.max_diff_mod_sign);
    let raw = worst(trials, |t| t.alignment.max_diff_raw).0;
    let flipped: usize = trials.iter().map(|t| t.alignment.flipped).sum();
    rep.at_most(
        "tf-end-df-modulo-per-column",
        "max |z_tf(end) − s·z*_df| modulo per-column sign (worst dataset)",
        diff,
        *c.limit_mod_sign_tol,
    )
    .note(format!(
        "dataset {k}; z*_df = the df limit (closed form, D2); {flipped} of {} columns \
         flipped over {n_trials} datasets",
        d * n_trials
    ))
    .paper_claim(format!(
        "§3.3: the limits coincide (E10): max |z_tf − z*_df| without sign alignment = \
         {raw:.3e}, {flipped} of {} columns have the opposite sign",
        d * n_trials
    ));
    let (v_err, k) = worst(trials, |t| t.v_error);
    rep.at_most(
        "tf-sqrt-mu-irho-worst-dataset",
        "max_i ||v_tf,i| − √(μ_iρ̄_i)| (worst dataset)",
        v_err,
        *c.v_limit_tol,
    )
    .note(format!("dataset {k}; ρ̄_i from the conserved β_i (spec R5)"));
    let (drift, k) = worst(trials, |t| t.beta_drift);
    rep.at_most(
        "beta-drift-beta-both-flows-worst",
        "β_i drift / max(1, |β_i|), both flows (worst dataset)",
        drift,
        *c.beta_drift_tol,
    )
    .note(format!("dataset {k} (Lemma A.1)"));
    let (err, k) = worst(trials, |t| t.df_closed_error);
    rep.at_most(
        "df-ode-closed-form-grid-worst",
        "max |df ODE − closed form| on the grid (worst dataset)",
        err,
        *c.df_closed_form_tol,
    )
    .note(format!("dataset {k} (spec §2.6, R9(a))"));
    let wrong_zero_modes = trials.iter().filter(|t| t.zero_modes_tf != d).count();
    rep.at_most(
        "datasets-whose-tf-hessian-limit-has",
        "datasets whose tf Hessian at the limit has ≠ d zero modes",
        wrong_zero_modes as f64,
        0.0,
    )
    .note(format!(
        "the d rescaling directions (spec R4); |λ| ≤ {:e}·max|λ| counts as zero",
        *p.zero_mode_tol
    ));
}

fn add_tables(rep: &mut Report, p: &Params, trials: &[Trial]) {
    rep.series = Table::new(&["trial", "flow", "t", "iteration", "loss", "grad_norm"]);
    let mut ratio = Table::new(&["trial", "t", "ratio", "loss_tf", "loss_df_at_sigma_t"]);
    let mut summary = Table::new(&[
        "trial",
        "sigma_hat",
        "sigma_fit",
        "lambda_min_nonzero_tf",
        "lambda_min_nonzero_df",
        "lambda_max_tf",
        "C_sup_ratio",
        "ratio_variation_last_quarter",
        "columns_flipped",
        "max_diff_mod_sign",
        "max_diff_raw",
        "v_error",
        "beta_drift",
    ]);
    for (k, t) in trials.iter().enumerate() {
        for (name, tr, eta) in [("tf", &t.tf, *p.eta_tf), ("df", &t.df, *p.eta_df)] {
            let iterations: Vec<f64> = tr.t.iter().map(|x| x / eta).collect();
            rep.series.push_columns(
                &[Cell::from(k), Cell::from(name)],
                &[&tr.t, &iterations, &tr.loss, &tr.grad_norm],
            );
        }
        let l_tf: Vec<f64> = t
            .ratio_t
            .iter()
            .zip(&t.ratio)
            .map(|(&s, &r)| r * t.closed.loss(t.sigma_hat * s))
            .collect();
        let l_df: Vec<f64> = t
            .ratio_t
            .iter()
            .map(|&s| t.closed.loss(t.sigma_hat * s))
            .collect();
        ratio.push_columns(&[Cell::from(k)], &[&t.ratio_t, &t.ratio, &l_tf, &l_df]);
        summary.push(vec![
            k.into(),
            t.sigma_hat.into(),
            t.sigma_fit.into(),
            t.lambda_tf.into(),
            t.lambda_df.into(),
            t.lambda_max_tf.into(),
            t.ratio_sup.into(),
            t.ratio_variation.into(),
            t.alignment.flipped.into(),
            t.alignment.max_diff_mod_sign.into(),
            t.alignment.max_diff_raw.into(),
            t.v_error.into(),
            t.beta_drift.into(),
        ]);
    }
    rep.tables.push(("ratio".into(), ratio));
    rep.tables.push(("trials".into(), summary));
}

/// Number of leading samples whose loss is above `floor`.
fn above_floor(tr: &Trajectory, floor: f64) -> usize {
    tr.loss.iter().take_while(|&&l| l > floor).count()
}

fn figure(p: &Params, s: &Setup, trials: &[Trial]) -> Figure {
    let label = |k: usize, s: &str| if k == 0 { s.to_string() } else { String::new() };
    let mut loss = LinePanel::new(
        "(a) loss vs GD iteration k = t/η",
        "iteration k",
        "ℓ(k)/ℓ(0)",
    )
    .log_y();
    let mut grad = LinePanel::new("(b) gradient norm", "iteration k", "‖∇ℓ‖").log_y();
    let mut ratio = LinePanel::new("(c) R(t) = ℓ_{tf}(t) / ℓ_{df}(σ̂t)", "t (tf time)", "R(t)")
        .log_y()
        .vline(RefLine::new(*p.ratio_from, "T₀"));
    for (k, t) in trials.iter().enumerate() {
        for (tr, eta, color, name) in [
            (&t.tf, *p.eta_tf, 0, "ℓ_{tf}"),
            (&t.df, *p.eta_df, 1, "ℓ_{df}"),
        ] {
            // drawn down to the loss floor: below it rounding in Δ = Q Diag(v) − M shows
            let shown = above_floor(tr, *p.loss_floor);
            let iterations: Vec<f64> = tr.t[..shown].iter().map(|x| x / eta).collect();
            let normalized: Vec<f64> = tr.loss[..shown].iter().map(|l| l / tr.loss[0]).collect();
            loss = loss.series(
                Series::numerics(label(k, name), iterations.clone(), normalized).color(color),
            );
            grad = grad.series(
                Series::numerics(
                    label(k, &format!("‖∇{name}‖")),
                    iterations,
                    tr.grad_norm[..shown].to_vec(),
                )
                .color(color),
            );
        }
        ratio = ratio.series(
            Series::numerics(format!("dataset {k}"), t.ratio_t.clone(), t.ratio.clone()).color(k),
        );
    }
    // (d) the overlay for dataset 0 on the df clock: ℓ_tf(t/σ̂)/C against ℓ_df(t)
    let t0 = &trials[0];
    let shown = above_floor(&t0.tf, *p.loss_floor);
    let scaled_t: Vec<f64> = t0.tf.t[..shown].iter().map(|s| s * t0.sigma_hat).collect();
    let scaled_loss: Vec<f64> = t0.tf.loss[..shown]
        .iter()
        .map(|l| l / t0.ratio_sup)
        .collect();
    let overlay = LinePanel::new(
        format!(
            "(d) dataset 0, df clock: σ̂ = {:.1}, C = sup R = {:.1}",
            t0.sigma_hat, t0.ratio_sup
        ),
        "t (df time)",
        "loss",
    )
    .log_y()
    .x_range(0.0, *p.t_end_df)
    .legend(LegendPosition::UpperRight)
    .series(Series::numerics("ℓ_{df}(t)", t0.df.t.clone(), t0.df.loss.clone()).color(1))
    .series(Series::theory("ℓ_{tf}(t/σ̂)/C", scaled_t, scaled_loss).color(0))
    .vline(RefLine::new(*p.ratio_from * t0.sigma_hat, "σ̂T₀"));
    Figure::new(2)
        .title(format!(
            "Fig. 2: ℓ_tf vs ℓ_df from one init ({}, d = {}, N = {}, n = {}, σ = {}, {} \
             datasets)",
            s.task,
            s.d,
            s.seq_len,
            s.n,
            *p.sigma,
            trials.len()
        ))
        .panel(loss)
        .panel(grad)
        .panel(ratio)
        .panel(overlay)
}

/// Per trial: its dataset and T3, an ℓ_tf and an ℓ_df solve with every sample kept (all trials
/// are kept for the figure) and two dense Hessian spectra.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    let (trials, samples, dim) = (n(*p.trials), n(*p.samples), sizes::dim(p.d));
    sizes::tf_data("n, seq_len", trials, p.d, p.seq_len, p.n)
        .and(sizes::tf_solves(
            sizes::Keys {
                solves: "trials, d",
                samples: "trials, samples, d",
            },
            trials,
            p.d,
            samples,
            ctx.ode.method,
        ))
        .and(sizes::df_solves(
            sizes::Keys {
                solves: "trials, d",
                samples: "trials, samples, d",
            },
            trials,
            p.d,
            samples,
            ctx.ode.method,
        ))
        .dense_hessians("trials, d", 2.0 * trials, dim, sizes::tf_grad(p.d))
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.tf-vs-df",
    paper: "000",
    summary: "Paper Fig. 2 / Assumption 3.1: ℓ_tf and ℓ_df from the same init on several \
              datasets; σ̂ predicted from Hessian spectra at the common limit vs the fitted rate \
              ratio; R(t) = ℓ_tf(t)/ℓ_df(σ̂t) bounded; limits equal only modulo column signs (E10).",
    solver: OdeConfig::new(Method::Bdf, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &[],
    run,
};

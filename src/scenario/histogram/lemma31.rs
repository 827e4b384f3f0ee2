//! `lemma31-identity` (spec 000 R2, R3, E16): the transformer loss in its three forms — raw
//! 1/(2n) Σ_k ‖X_k Q X_kᵀ X_k v − y_k‖², Lemma 3.1's 1/(2n) Σ_k ‖Diag(c_k)^{1/2}(Q Diag(v) − M)c_k‖²
//! and the third-moment form ½ Σ_a Δ_aᵀ H_a Δ_a — and the solution set: zero loss forces
//! Q Diag(v) = M only if every H_a = T3[a,·,·] is positive definite, which needs n ≥ d strings
//! (the paper's "almost surely" misses this, E16).

use std::path::PathBuf;

use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use super::instance_files::InstanceFiles;
use super::sizes;
use crate::analysis::linearize::symmetric_eigen;
use crate::flow::{Method, OdeConfig};
use crate::instance::histogram::{instance_arrays, task_name, InitialStates, TaskStrings};
use crate::instance::InstanceError;
use crate::models::histogram::data::sample_string;
use crate::models::histogram::{
    state_from_qv, state_to_qv, task_matrix, HistogramData, RowMoments,
};
use crate::plot::{Figure, HeatmapPanel, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::task_param::TaskName;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub task: TaskName,
    /// Threshold D (task "thr" only).
    #[serde(default)]
    pub d_thr: usize,
    /// Alphabet size d (spec 000 §6 row 2: 10).
    pub d: AtLeast<2>,
    /// String length N (spec: 100).
    pub seq_len: AtLeast<1>,
    /// Number of strings n of the main dataset (spec: 100).
    pub n: AtLeast<1>,
    /// Random (Q, v) with entries N(0, sigma²) at which the three forms are compared.
    pub trials: AtLeast<1>,
    pub sigma: Positive,
    /// Dataset sizes of the definiteness sweep (prefixes of one sample of strings).
    pub n_sweep: Vec<usize>,
    /// Row a of T3 drawn as a heatmap.
    pub heatmap_row: usize,
    /// The strings (`M`, `strings` of shape (n_all, N)); replaces task, d_thr, d and seq_len.
    /// n and n_sweep take prefixes of the file's strings. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The points (Q, v) where the three forms are compared (`Q0`, `v0`, one per trial);
    /// replaces trials and sigma.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Relative difference of the three loss forms (spec 000 R2: 1e-12).
    pub rel_tol: Positive,
    /// λ_min(H_a) counts as zero when ≤ singular_rel_tol·λ_max (spec 000 R3: "= 0" for n < d;
    /// rounding leaves ~1e-16·λ_max; definite ones measured ≥ 3e-7·λ_max at n = d = 10, where
    /// H_a is barely of full rank, and ≥ 2e-4·λ_max from n = d + 1).
    pub singular_rel_tol: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.n_sweep.contains(&0) {
        return Err(sc.invalid("params.n_sweep", "dataset sizes must be positive"));
    }
    let files = read_files(p, sc)?;
    let d = files.d(*p.d);
    if let Some(data) = files.data() {
        let strings = data.single_dataset().map_err(|e| files.data_error(e))?;
        if d < 2 {
            return Err(files.data_error(InstanceError::new("M", "the alphabet needs d ≥ 2")));
        }
        let largest = p.n_sweep.iter().copied().fold(*p.n, usize::max);
        if largest > strings.len() {
            let key = if *p.n > strings.len() {
                "params.n"
            } else {
                "params.n_sweep"
            };
            return Err(sc.invalid(
                key,
                format!(
                    "{largest} strings asked for, but data_file holds {} (n and n_sweep take \
                     prefixes of the file's strings)",
                    strings.len()
                ),
            ));
        }
    }
    if p.heatmap_row >= d {
        return Err(sc.invalid("params.heatmap_row", format!("must be < d = {d}")));
    }
    Ok(())
}

/// (min_a |λ_min(H_a)| / max_a λ_max(H_a), max_a λ_max): the relative definiteness of T3.
fn definiteness(t3: &RowMoments) -> (f64, f64) {
    let spectra = t3.row_spectra();
    let lambda_max = stats::max(spectra.iter().map(|s| s.lambda_max));
    let worst_min = stats::min(spectra.iter().map(|s| s.lambda_min.abs()));
    (worst_min / lambda_max, lambda_max)
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), *p.d)
}

/// The task matrix and all strings (the largest dataset): from data_file, or drawn from stream 1.
fn strings(
    p: &Params,
    files: &InstanceFiles,
    ctx: &RunContext,
) -> Result<(DMatrix<f64>, Vec<Vec<usize>>), RunError> {
    if let Some(data) = files.data() {
        let strings = data.single_dataset().map_err(|e| files.data_error(e))?;
        return Ok((data.m.clone(), strings.to_vec()));
    }
    let n_all = p.n_sweep.iter().copied().fold(*p.n, usize::max);
    let mut data_rng = ctx.rng(1);
    let strings = (0..n_all)
        .map(|_| sample_string(&mut data_rng, *p.d, *p.seq_len))
        .collect();
    Ok((task_matrix(&p.task.task(p.d_thr), *p.d), strings))
}

/// The points (Q, v) of R2 in the canonical layout: from init_file, or N(0, σ²) from stream 2.
fn points(p: &Params, files: &InstanceFiles, d: usize, ctx: &RunContext) -> Vec<Vec<f64>> {
    if let Some(init) = files.init() {
        return init.states.clone();
    }
    let mut init_rng = ctx.rng(2);
    let mut normal = |rows, cols| {
        DMatrix::from_fn(rows, cols, |_, _| {
            *p.sigma * init_rng.sample::<f64, _>(StandardNormal)
        })
    };
    (0..*p.trials)
        .map(|_| {
            let q = normal(d, d);
            let v = DVector::from_column_slice(normal(d, 1).as_slice());
            state_from_qv(&q, &v)
        })
        .collect()
}

fn run(p: &Params, chk: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let (m, strings) = strings(p, &files, ctx)?;
    let d = m.nrows();
    let seq_len = strings[0].len();
    let points = points(p, &files, d, ctx);
    let data = HistogramData::from_strings(m.clone(), strings[..*p.n].to_vec());
    let t3 = data.third_moment();
    let mut rep = Report {
        instance: Some(instance_arrays(
            &TaskStrings {
                m: m.clone(),
                datasets: vec![strings.clone()],
            },
            &InitialStates::from_states(d, points.clone()),
        )),
        ..Default::default()
    };

    // R2: the three forms at the points (Q, v)
    let mut forms = Table::new(&["trial", "raw", "lemma", "t3", "rel_lemma", "rel_t3"]);
    let mut worst_rel = 0.0f64;
    for (trial, z) in points.iter().enumerate() {
        let (q, v) = state_to_qv(z);
        let raw = data.loss_raw(&q, &v);
        let lemma = data.loss_lemma(&q, &v);
        let quad = t3.quadratic_loss(&(&q * DMatrix::from_diagonal(&v) - &m));
        let (rel_lemma, rel_t3) = ((lemma - raw).abs() / raw, (quad - raw).abs() / raw);
        worst_rel = stats::max([worst_rel, rel_lemma, rel_t3]);
        forms.push(vec![
            trial.into(),
            raw.into(),
            lemma.into(),
            quad.into(),
            rel_lemma.into(),
            rel_t3.into(),
        ]);
    }
    rep.tables.push(("loss_forms".into(), forms));
    rep.at_most(
        "raw-vs-lemma-vs-t3-form",
        "raw vs Lemma 3.1 vs T3 form: max relative difference",
        worst_rel,
        *chk.rel_tol,
    )
    .note(format!(
        "{} random (Q, v) ~ N(0, {}²) on n = {} strings (d = {d}, N = {seq_len})",
        points.len(),
        *p.sigma,
        *p.n
    ));

    // R3, E16: definiteness of the H_a against the number of strings
    rep.series = Table::new(&["n", "min_a_lambda_min_over_lambda_max", "lambda_max"]);
    let (mut definite_worst, mut singular_worst) = (f64::INFINITY, 0.0f64);
    let mut sweep = p.n_sweep.clone();
    sweep.sort_unstable();
    sweep.dedup();
    let mut ratios = Vec::new();
    let mut null_demo = None;
    for &n in &sweep {
        let prefix = HistogramData::from_strings(m.clone(), strings[..n].to_vec());
        let moments = prefix.third_moment();
        let (ratio, lambda_max) = definiteness(&moments);
        ratios.push(ratio.max(f64::MIN_POSITIVE));
        if n >= d {
            definite_worst = stats::smaller(definite_worst, ratio);
        } else {
            singular_worst = stats::larger(singular_worst, ratio);
            null_demo = Some((n, prefix, moments));
        }
        rep.series
            .push(vec![n.into(), ratio.into(), lambda_max.into()]);
    }
    if definite_worst.is_finite() {
        rep.at_least(
            "lambda-lambda",
            "n ≥ d: min_a λ_min(H_a) / max_a λ_max",
            definite_worst,
            *chk.singular_rel_tol,
        )
        .note(format!(
            "every H_a positive definite for n ∈ {:?}",
            sweep.iter().filter(|&&n| n >= d).collect::<Vec<_>>()
        ));
    }
    if sweep.iter().any(|&n| n < d) {
        rep.at_most(
            "over-lambda-lambda",
            "n < d: max over n of min_a |λ_min(H_a)| / max_a λ_max",
            singular_worst,
            *chk.singular_rel_tol,
        )
        .note("rank H_a ≤ n < d: every H_a is singular");
    }
    // E16 made concrete: for n < d a null vector u of H_a gives Q = M + e_a uᵀ with zero loss
    if let Some((n, prefix, moments)) = null_demo {
        let (ratio, row) = zero_loss_non_solution(&prefix, &moments)?;
        rep.at_most(
            "tf-ut-lambda-ker",
            "n < d: ℓ_tf(M + e_a uᵀ, 1) / (½ λ_max ‖u‖²), u ∈ ker H_a",
            ratio,
            *chk.singular_rel_tol,
        )
        .note(format!(
            "n = {n}, row a = {row}: a zero-loss point with Q Diag(v) ≠ M (raw loss form)"
        ))
        .paper_claim(
            "§3.3: zero loss gives Q Diag(v) = M almost surely, with no condition on n (E16)",
        );
    }
    let (lambda_min, cond) = t3.conditioning();
    rep.derive("lambda_min", lambda_min);
    rep.derive("cond", cond);
    rep.at_least(
        "main-dataset-lambda-lambda",
        "main dataset: min_a λ_min(H_a) / max_a λ_max",
        1.0 / cond,
        *chk.singular_rel_tol,
    )
    .note(format!(
        "n = {}: λ_min = {lambda_min:.4}, cond = max λ / min λ = {cond:.2} (spec prototype \
         for eq, d = 10, N = n = 100: spec(H_a) ⊂ [46, 1.03e4], cond ≈ 223)",
        *p.n
    ));
    rep.figure = Some(figure(p, &m, seq_len, &t3, &sweep, &ratios, chk));
    Ok(rep)
}

/// For singular moments: the row a with the smallest λ_min, its null vector u, and the raw loss
/// at (Q, v) = (M + e_a uᵀ, 1) relative to ½ λ_max ‖u‖² (what a definite H_a would give at least).
fn zero_loss_non_solution(
    data: &HistogramData,
    moments: &RowMoments,
) -> Result<(f64, usize), RunError> {
    let d = data.d;
    let spectra = moments.row_spectra();
    let row = (0..d)
        .min_by(|&a, &b| {
            spectra[a]
                .lambda_min
                .abs()
                .total_cmp(&spectra[b].lambda_min.abs())
        })
        .expect("d ≥ 2");
    let eig =
        symmetric_eigen(&moments.row_matrix(row)).map_err(|e| RunError::Other(e.to_string()))?;
    let u = eig.vectors.column(0);
    let mut q = data.m.clone();
    for b in 0..d {
        q[(row, b)] += u[b];
    }
    let loss = data.loss_raw(&q, &DVector::repeat(d, 1.0));
    let lambda_max = stats::max(spectra.iter().map(|s| s.lambda_max));
    Ok((loss / (0.5 * lambda_max * u.norm_squared()), row))
}

fn figure(
    p: &Params,
    m: &DMatrix<f64>,
    seq_len: usize,
    t3: &RowMoments,
    sweep: &[usize],
    ratios: &[f64],
    chk: &Checks,
) -> Figure {
    let d = m.nrows();
    let letters: Vec<String> = (0..d)
        .map(|a| char::from(b'a' + (a % 26) as u8).to_string())
        .collect();
    let spectra = t3.row_spectra();
    let rows: Vec<f64> = (0..d).map(|a| a as f64).collect();
    let lowest = stats::axis_min(f64::INFINITY, spectra.iter().map(|s| s.lambda_min));
    let highest = stats::axis_max(0.0, spectra.iter().map(|s| s.lambda_max));
    let spectrum_panel = LinePanel::new(
        format!("spectra of H_a = T3[a,·,·] (n = {})", *p.n),
        "row a (symbol index)",
        "eigenvalue",
    )
    .log_y()
    // λ_min ≤ 0 (only for n < d) is drawn at the bottom edge
    .y_range((0.5 * lowest).max(1e-4 * highest), 1.5 * highest)
    .series(
        Series::new(
            "λ_{max}(H_a)",
            rows.clone(),
            spectra.iter().map(|s| s.lambda_max).collect(),
            LineStyle::SolidMarkers,
        )
        .color(0),
    )
    .series(
        Series::new(
            "λ_{min}(H_a)",
            rows,
            spectra.iter().map(|s| s.lambda_min).collect(),
            LineStyle::SolidMarkers,
        )
        .color(1),
    );
    let sweep_panel = LinePanel::new(
        "definiteness against the number of strings",
        "n (strings)",
        "min_a |λ_{min}(H_a)| / max λ",
    )
    .log_x()
    .log_y()
    .legend(LegendPosition::LowerRight)
    .vline(RefLine::new(d as f64, "n = d"))
    .hline(RefLine::new(*chk.singular_rel_tol, "zero threshold").style(LineStyle::Dotted))
    .series(
        Series::new(
            "measured",
            sweep.iter().map(|&n| n as f64).collect(),
            ratios.to_vec(),
            LineStyle::SolidMarkers,
        )
        .color(0),
    );
    let a = p.heatmap_row;
    let heat = HeatmapPanel::new(
        format!(
            "T3[{}, b, b'] = H_{} (n = {})",
            letters[a], letters[a], *p.n
        ),
        (0..d)
            .flat_map(|b| (0..d).map(move |bp| (b, bp)))
            .map(|(b, bp)| t3.get(a, b, bp))
            .collect(),
        d,
        d,
    )
    .row_labels(letters.clone())
    .col_labels(letters)
    .axis_labels("b'", "b");
    Figure::new(3)
        .title(format!(
            "Lemma 3.1 and the solution set: {} task, d = {d}, N = {seq_len}",
            task_name(m)
        ))
        .panel(spectrum_panel)
        .panel(sweep_panel)
        .panel(heat)
}

/// The strings of the largest dataset, T3 of each swept prefix (with the spectra of its d rows
/// H_a), and the loss in three forms per trial (the raw form costs N·d² per string).
fn cost(p: &Params, _: &RunContext) -> Cost {
    let n_all = p.n_sweep.iter().copied().fold(*p.n, usize::max);
    let (d, seq_len) = (n(*p.d), n(*p.seq_len));
    let prefixes: f64 = p.n_sweep.iter().map(|&k| n(k)).sum();
    sizes::tf_data("n, n_sweep", 2.0, *p.d, *p.seq_len, n_all)
        .work(
            "n_sweep",
            "T3 of every prefix",
            prefixes,
            seq_len.min(d) * d * d,
        )
        .work(
            "n_sweep, d",
            "spectra of the H_a",
            n(p.n_sweep.len()) * d,
            10.0 * d.powi(3),
        )
        .work(
            "trials, n",
            "losses in three forms",
            n(*p.trials) * n(*p.n),
            seq_len * d * d,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.lemma31-identity",
    paper: "000",
    summary: "Lemma 3.1: raw, Lemma and third-moment forms of ℓ_tf agree; the per-row moment \
              matrices H_a are definite iff n ≥ d, so zero loss forces Q Diag(v) = M only then \
              (spec 000 R2, R3, E16).",
    // nothing is integrated
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &["cond", "lambda_min"],
    run,
};

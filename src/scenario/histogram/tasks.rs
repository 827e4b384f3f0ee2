//! `histogram-tasks` (spec 000 R1, §1.2): the three histogram tasks as y = X M c. The matrix
//! form equals brute-force counting y_j = Σ_{j'} R(s_j, s_{j'}) exactly on random strings, the
//! exact construction (Q, v) = (M, 1) reproduces every target (so ℓ_tf = 0), the rescaled
//! family (Q C⁻¹, C v) keeps the outputs, and the paper's "adbcba" example vectors come out.

use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::flow::{Method, OdeConfig};
use crate::models::histogram::data::{brute_force_targets, model_output, sample_string, targets};
use crate::models::histogram::{task_matrix, HistogramData, Task};
use crate::plot::{BarPanel, Figure, LineStyle};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Check, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Alphabet sizes d (spec 000 R1: {4, 10, 26}).
    pub ds: Vec<usize>,
    /// Thresholds D of the threshold task (spec 000 R1: {0, 1, 2, 5}).
    pub thresholds: Vec<usize>,
    /// String lengths N (spec 000 R1: {1, 6, 100}).
    pub seq_lens: Vec<usize>,
    /// Random strings per (d, N, task).
    pub strings: usize,
    /// Random diagonal rescalings C per (d, N, task) for the family (Q C⁻¹, C v).
    pub rescalings: usize,
    /// The paper's example input (letters a, b, … of an alphabet of size `example_d`).
    pub example: String,
    pub example_d: usize,
    /// Threshold D of the paper's threshold example.
    pub example_d_thr: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// The outputs printed in the paper (§3.1, items 1–3) for the example input, per task
    /// (spec 000 §1.2, E2).
    pub example_eq: Vec<f64>,
    pub example_lt: Vec<f64>,
    pub example_thr: Vec<f64>,
    /// max |ŷ(Q C⁻¹, C v) − y| / max|y| over the rescalings: exact up to the rounding of the
    /// products with C and C⁻¹ (a few ulps of the O(N²) outputs).
    pub family_rel_tol: f64,
}

fn symbols(example: &str, d: usize) -> Option<Vec<usize>> {
    example
        .bytes()
        .map(|b| {
            let s = b.wrapping_sub(b'a') as usize;
            (b.is_ascii_lowercase() && s < d).then_some(s)
        })
        .collect()
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    for (key, list) in [("params.ds", &p.ds), ("params.seq_lens", &p.seq_lens)] {
        if list.is_empty() || list.contains(&0) {
            return Err(sc.invalid(key, "need a non-empty list of positive sizes"));
        }
    }
    if p.strings == 0 {
        return Err(sc.invalid("params.strings", "need at least one string"));
    }
    if p.example.is_empty() || symbols(&p.example, p.example_d).is_none() {
        return Err(sc.invalid(
            "params.example",
            format!(
                "must be a non-empty word in the first example_d = {} letters a, b, …",
                p.example_d
            ),
        ));
    }
    let n = p.example.len();
    for (key, v) in [
        ("checks.example_eq", &c.example_eq),
        ("checks.example_lt", &c.example_lt),
        ("checks.example_thr", &c.example_thr),
    ] {
        if v.len() != n {
            return Err(sc.invalid(key, format!("needs one output per symbol ({n})")));
        }
    }
    if c.family_rel_tol <= 0.0 {
        return Err(sc.invalid("checks.family_rel_tol", "must be positive"));
    }
    Ok(())
}

/// max_k |a_k − b_k|.
fn max_diff(a: &DVector<f64>, b: &DVector<f64>) -> f64 {
    stats::max_abs_diff(a.as_slice(), b.as_slice())
}

/// The tasks of one alphabet size: eq, lt and thr for every threshold.
fn tasks(thresholds: &[usize]) -> Vec<Task> {
    let mut v = vec![Task::Eq, Task::Lt];
    v.extend(thresholds.iter().map(|&d_thr| Task::Thr { d_thr }));
    v
}

fn task_label(task: &Task) -> String {
    match task {
        Task::Thr { d_thr } => format!("thr (D = {d_thr})"),
        other => other.name().to_string(),
    }
}

fn run(p: &Params, chk: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rng = ctx.rng(1);
    let mut rep = Report {
        series: Table::new(&[
            "d",
            "N",
            "task",
            "strings",
            "max_err_XMc",
            "max_err_model_at_M_1",
            "loss_at_M_1",
            "max_rel_err_family",
        ]),
        ..Default::default()
    };
    let (mut err_xmc, mut err_model, mut loss_max, mut family) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let mut compared = 0usize;
    for &d in &p.ds {
        for &seq_len in &p.seq_lens {
            for task in tasks(&p.thresholds) {
                let m = task_matrix(&task, d);
                let ones = DVector::repeat(d, 1.0);
                let strings: Vec<Vec<usize>> = (0..p.strings)
                    .map(|_| sample_string(&mut rng, d, seq_len))
                    .collect();
                let (mut e_xmc, mut e_model, mut e_family) = (0.0f64, 0.0f64, 0.0f64);
                for s in &strings {
                    let brute = brute_force_targets(&task, s);
                    e_xmc = stats::larger(e_xmc, max_diff(&targets(&m, s), &brute));
                    e_model = stats::larger(e_model, max_diff(&model_output(&m, &ones, s), &brute));
                    for _ in 0..p.rescalings {
                        // C = Diag(e^{N(0,1)}): (Q C⁻¹, C v) has the same Q Diag(v)
                        let scale =
                            DVector::from_fn(d, |_, _| rng.sample::<f64, _>(StandardNormal).exp());
                        let q = DMatrix::from_fn(d, d, |a, b| m[(a, b)] / scale[b]);
                        let out = model_output(&q, &scale, s);
                        e_family = stats::larger(
                            e_family,
                            max_diff(&out, &brute) / stats::max_abs(brute.iter()),
                        );
                    }
                    compared += 1;
                }
                let data = HistogramData::from_strings(m.clone(), strings);
                let loss = stats::larger(data.loss_raw(&m, &ones), data.loss_lemma(&m, &ones));
                err_xmc = stats::larger(err_xmc, e_xmc);
                err_model = stats::larger(err_model, e_model);
                loss_max = stats::larger(loss_max, loss);
                family = stats::larger(family, e_family);
                rep.series.push(vec![
                    d.into(),
                    seq_len.into(),
                    task_label(&task).into(),
                    p.strings.into(),
                    e_xmc.into(),
                    e_model.into(),
                    loss.into(),
                    e_family.into(),
                ]);
            }
        }
    }
    let cases = format!(
        "{compared} random strings: d ∈ {:?}, N ∈ {:?}, D ∈ {:?}",
        p.ds, p.seq_lens, p.thresholds
    );
    rep.check(
        Check::at_most("max |X M c − brute-force count|", err_xmc, 0.0)
            .note(format!("exact equality (integers in f64); {cases}")),
    );
    rep.check(
        Check::at_most(
            "max |X Q Xᵀ X v − brute force| at (Q, v) = (M, 1)",
            err_model,
            0.0,
        )
        .note("the exact construction of paper §3.2, evaluated literally from one-hot X"),
    );
    rep.check(
        Check::at_most("ℓ_tf at (Q, v) = (M, 1)", loss_max, 0.0)
            .note("raw and Lemma 3.1 forms, one dataset per (d, N, task)"),
    );
    if p.rescalings > 0 {
        rep.check(
            Check::at_most(
                "family (Q C⁻¹, C v): max |ŷ − y| / max|y|",
                family,
                chk.family_rel_tol,
            )
            .note(format!(
                "{} random diagonal C = Diag(e^N(0,1)) per string",
                p.rescalings
            )),
        );
    }
    let fig = example(p, chk, &mut rep);
    rep.figure = Some(fig);
    Ok(rep)
}

/// The paper's example: outputs of the three tasks for `example`, as X M c, brute-force counts
/// and the literal model at (M, 1), against the printed vectors; the figure's bar panels.
fn example(p: &Params, chk: &Checks, rep: &mut Report) -> Figure {
    let s = symbols(&p.example, p.example_d).expect("validated");
    let d = p.example_d;
    let categories: Vec<String> = p
        .example
        .chars()
        .enumerate()
        .map(|(j, ch)| format!("{}:{ch}", j + 1))
        .collect();
    let bars = |v: &DVector<f64>| -> Vec<f64> { v.iter().copied().collect() };
    let cases = [
        (Task::Eq, &chk.example_eq),
        (Task::Lt, &chk.example_lt),
        (
            Task::Thr {
                d_thr: p.example_d_thr,
            },
            &chk.example_thr,
        ),
    ];
    let mut table = Table::new(&[
        "task",
        "position",
        "symbol",
        "XMc",
        "brute_force",
        "model_M_1",
        "paper",
    ]);
    let mut worst = 0.0f64;
    let mut fig = Figure::new(3).title(format!(
        "Histogram tasks on \"{}\" (d = {d}): y = X M c, brute-force counts and the paper's \
         printed outputs",
        p.example
    ));
    for (task, printed) in cases {
        let m = task_matrix(&task, d);
        let xmc = targets(&m, &s);
        let brute = brute_force_targets(&task, &s);
        let model = model_output(&m, &DVector::repeat(d, 1.0), &s);
        let printed = DVector::from_column_slice(printed);
        worst = stats::max([
            worst,
            max_diff(&xmc, &printed),
            max_diff(&brute, &printed),
            max_diff(&model, &printed),
        ]);
        for j in 0..s.len() {
            table.push(vec![
                task_label(&task).into(),
                (j + 1).into(),
                p.example[j..=j].to_string().into(),
                xmc[j].into(),
                brute[j].into(),
                model[j].into(),
                printed[j].into(),
            ]);
        }
        fig = fig.panel(
            BarPanel::new(
                task_label(&task),
                "position : symbol",
                "y_j",
                categories.clone(),
            )
            .group("X M c", bars(&xmc), LineStyle::Solid)
            .group("brute-force count", bars(&brute), LineStyle::Dashed)
            .group("paper (printed)", bars(&printed), LineStyle::Markers),
        );
    }
    rep.tables.push(("example".into(), table));
    rep.check(
        Check::at_most("example: max |computed − printed output|", worst, 0.0)
            .note(format!(
                "\"{}\", tasks eq, lt, thr (D = {}); X M c, brute force and (M, 1)",
                p.example, p.example_d_thr
            ))
            .paper_claim("§3.1 prints the input as \"adbcb\": 5 symbols for 6 outputs (E2)"),
    );
    fig
}

/// Per (d, N, task): `strings` strings with their counts and targets, each output computed in
/// O(N·d) per rescaling.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let d_max = p.ds.iter().copied().max().unwrap_or(0);
    let len_max = p.seq_lens.iter().copied().max().unwrap_or(0);
    let cases = n(p.ds.len()) * n(p.seq_lens.len()) * (n(p.thresholds.len()) + 2.0);
    let per_string = n(len_max) * n(d_max) * (n(p.rescalings) + 2.0);
    Cost::new()
        .doubles(
            "strings, seq_lens, ds",
            "one case's strings, counts and targets",
            n(p.strings) * (n(len_max) + 2.0 * n(d_max)),
        )
        .work(
            "strings, rescalings",
            "outputs of every string",
            cases * n(p.strings),
            per_string,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.histogram-tasks",
    paper: "000",
    summary: "Histogram tasks eq, lt, thr as y = X M c: brute-force counting, the exact \
              construction (M, 1) and its rescaled family, and the paper's \"adbcba\" example \
              (spec 000 §1.2, R1, E2).",
    // nothing is integrated
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &[],
    run,
};

//! `threshold-weights` (paper Fig. 1; spec 000 §4 Fig. 1, R3, R5): the weights a transformer
//! learns on the threshold histogram task by gradient flow on ℓ_tf.
//!
//! Zero loss forces Q Diag(v) = M once every row moment matrix H_a is definite (R3, E16), and
//! the conserved β_i then fix |v_i| = √(μ_iρ̄_i) and q_i = m_i/v_i (R5, D2): the learned Q is M
//! with column i scaled by 1/v_i. The figure shows Q, v, Q Diag(v) and M as in the paper.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::instance_files::{tf_instance, InstanceFiles};
use super::sizes;
use crate::flow::{integrate_flow, Method, OdeConfig, TimeGrid};
use crate::instance::histogram::task_label;
use crate::models::histogram::layout::column;
use crate::models::histogram::{state_to_qv, DfClosedForm};
use crate::plot::{Figure, HeatmapPanel};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::tf_common::{require_tf_data, tf_flow_checked, trial_data, trial_init, TaskName};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Task (spec 000 §1.2): the paper's Fig. 1 is thr with D = 2.
    pub task: TaskName,
    /// Threshold D of the thr task.
    pub d_thr: usize,
    /// Alphabet size d (26 = a..z in the paper).
    pub d: usize,
    /// String length N.
    pub seq_len: usize,
    /// Number of strings n (≥ d: spec R3).
    pub n: usize,
    /// Standard deviation of the Gaussian initialization of Q and v.
    pub sigma: Positive,
    /// Horizon of the gradient flow.
    pub t_end: Positive,
    /// Loss samples, log-spaced from `t_first` to `t_end` (plus t = 0).
    pub samples: AtLeast<2>,
    pub t_first: Positive,
    /// The dataset (`M` and one set of `strings`, H_a definite); replaces task, d_thr, d,
    /// seq_len and n. README "Your own data".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The initial state (`Q0`, `v0`); replaces sigma and the draw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max |Q Diag(v) − M| at t_end (spec R3, §6 row 17: < 1e-6).
    pub product_tol: Positive,
    /// max_i ||v_i| − √(μ_iρ̄_i)| at t_end (spec §6 row 17: 1e-6).
    pub v_tol: Positive,
    /// max_i ‖q_i − (q_i·m̂_i)m̂_i‖/‖q_i‖ at t_end: columns of Q ∝ m_i (same accuracy as R3).
    pub parallel_tol: Positive,
    /// min_a λ_min(H_a) / max_a λ_max(H_a) must exceed this (H_a definite; spec R3, E16: a
    /// singular H_a shows up as ≤ 1e-10 relative in f64).
    pub definite_rel_min: Positive,
    /// β_i drift relative to max(1, |β_i|) (spec §2.7.1).
    pub beta_drift_tol: Positive,
}

fn read_files(p: &Params, sc: &Scenario) -> Result<InstanceFiles, InputError> {
    InstanceFiles::read(sc, p.data_file.as_deref(), p.init_file.as_deref(), p.d)
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    let files = read_files(p, sc)?;
    files.require_tf_single()?;
    if files.data().is_none() {
        require_tf_data(sc, p.d, p.seq_len, p.n)?;
    }
    if *p.t_first >= *p.t_end {
        return Err(sc.invalid("params.t_first", "must be below t_end"));
    }
    Ok(())
}

/// Letters a, b, …, z for the symbols; s26, s27, … beyond the alphabet.
fn symbol_labels(d: usize) -> Vec<String> {
    (0..d)
        .map(|i| match u8::try_from(i).ok().filter(|&i| i < 26) {
            Some(i) => char::from(b'a' + i).to_string(),
            None => format!("s{i}"),
        })
        .collect()
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let task = p.task.task(p.d_thr);
    let data = files.single_dataset(|| trial_data(ctx, &task, p.d, p.seq_len, p.n, 0))?;
    let d = data.d;
    let (flow, lambda_min_h, cond_h) = tf_flow_checked(&data)?;
    let z0 = files.single_init(|| trial_init(ctx, d, *p.sigma, 0))?;
    let grid = TimeGrid::Log {
        t_first: *p.t_first,
        t1: *p.t_end,
        n: *p.samples,
    };
    let tr = integrate_flow(&flow, &z0, &grid.times(), &ctx.ode)?;
    let z = tr.last_state();
    let (q, v) = state_to_qv(z);
    let m = &data.m;
    let product = &q * nalgebra::DMatrix::from_diagonal(&v);
    let product_err = stats::max_abs((&product - m).iter());

    // |v_i| against √(μ_iρ̄_i) with ρ̄_i from the conserved β_i (the df theory of the same init)
    let closed = DfClosedForm::new(m, &z0);
    let v_err = stats::max(
        closed
            .columns()
            .iter()
            .zip(v.iter())
            .map(|(col, v_i)| (v_i.abs() - (col.mu() * col.imbalance().rhob).sqrt()).abs()),
    );
    let parallel_err = stats::max((0..d).map(|i| {
        let (q_i, _) = column(z, d, i);
        let m_i = m.column(i);
        let m_hat = m_i / m_i.norm();
        let along: f64 = q_i.iter().zip(m_hat.iter()).map(|(a, b)| a * b).sum();
        let perp_sq: f64 = q_i
            .iter()
            .zip(m_hat.iter())
            .map(|(a, b)| (a - along * b).powi(2))
            .sum();
        perp_sq.sqrt() / along.abs()
    }));
    let lambda_max_h = lambda_min_h * cond_h;

    let mut rep = Report::default();
    rep.instance = Some(tf_instance(&data, vec![z0.clone()]));
    rep.stats("tf", &tr.stats);
    rep.at_most(
        "diag-end",
        "max |Q Diag(v) − M| at t_end",
        product_err,
        *c.product_tol,
    )
    .note(format!(
        "ℓ_tf(t_end) = {:.3e} (R3: zero loss ⇔ Q Diag(v) = M)",
        tr.loss.last().copied().unwrap_or(f64::NAN)
    ));
    rep.at_most("sqrt-mu-irho", "max_i ||v_i| − √(μ_iρ̄_i)|", v_err, *c.v_tol)
        .note("ρ̄_i from the conserved β_i (spec R5, D2)");
    rep.at_most(
        "sin-columns",
        "max_i sin∠(q_i, m_i): columns of Q ∝ m_i",
        parallel_err,
        *c.parallel_tol,
    )
    .note("‖q_i − (q_i·m̂_i)m̂_i‖ / |q_i·m̂_i|; the limit is q_i = m_i/v_i");
    rep.at_least(
        "lambda-lambda",
        "min_a λ_min(H_a) / max_a λ_max(H_a)",
        lambda_min_h / lambda_max_h,
        *c.definite_rel_min,
    )
    .note(format!(
        "H_a definite (R3, E16): λ ∈ [{lambda_min_h:.4}, {lambda_max_h:.4}], cond {cond_h:.1}"
    ));
    rep.at_most(
        "beta-drift-beta",
        "β_i drift / max(1, |β_i|)",
        tr.max_invariant_drift(),
        *c.beta_drift_tol,
    );
    rep.derive("lambda_min_H", lambda_min_h);
    rep.derive("lambda_max_H", lambda_max_h);
    rep.derive("cond_H", cond_h);
    rep.derive("loss_initial", tr.loss[0]);
    rep.derive("loss_final", *tr.loss.last().expect("non-empty"));
    rep.derive("v_final", v.as_slice());
    rep.derive(
        "mu_squared",
        closed
            .columns()
            .iter()
            .map(|c| c.mu() * c.mu())
            .collect::<Vec<_>>(),
    );

    // series.csv: the four matrices in long form; loss.csv: the loss curve
    rep.series = Table::new(&["matrix", "row", "col", "value"]);
    let matrices: [(&str, &nalgebra::DMatrix<f64>); 3] =
        [("Q", &q), ("QDiag(v)", &product), ("M", m)];
    for (name, mat) in matrices {
        for a in 0..d {
            for b in 0..d {
                rep.series
                    .push(vec![name.into(), a.into(), b.into(), mat[(a, b)].into()]);
            }
        }
    }
    for (b, v_b) in v.iter().enumerate() {
        rep.series.push(vec![
            "v".into(),
            Cell::from(0usize),
            b.into(),
            (*v_b).into(),
        ]);
    }
    let mut loss = Table::new(&["t", "loss", "grad_norm"]);
    loss.push_columns(&[], &[&tr.t, &tr.loss, &tr.grad_norm]);
    rep.tables.push(("loss".into(), loss));

    let labels = symbol_labels(d);
    let row_major = |mat: &nalgebra::DMatrix<f64>| mat.transpose().as_slice().to_vec();
    let square = |title: &str, mat: &nalgebra::DMatrix<f64>| {
        HeatmapPanel::new(title, row_major(mat), d, d)
            .row_labels(labels.clone())
            .col_labels(labels.clone())
            .axis_labels("column (key symbol)", "row (query symbol)")
    };
    let one = m.amax().max(product.amax());
    let task_label = task_label(m);
    rep.figure = Some(
        Figure::new(2)
            .aspect(0.9)
            .title(format!(
                "Fig. 1: weights learned by gradient flow on ℓ_tf ({task_label}, d = {d}, N = {}, \
                 n = {}, {}, t = {})",
                data.strings[0].len(),
                data.n(),
                format!("σ = {}", *p.sigma),
                *p.t_end
            ))
            .panel(square("learned Q", &q))
            .panel(
                HeatmapPanel::new("learned v", v.as_slice().to_vec(), 1, d)
                    .row_labels(vec!["v".into()])
                    .col_labels(labels.clone())
                    .axis_labels("symbol", ""),
            )
            .panel(square("learned Q Diag(v)", &product).limit(one))
            .panel(square(&format!("task matrix M ({task_label})"), m).limit(one)),
    );
    Ok(rep)
}

/// The transformer data and T3, one ℓ_tf solve with every sample kept.
fn cost(p: &Params, ctx: &RunContext) -> Cost {
    sizes::tf_data("n, seq_len", 1.0, p.d, p.seq_len, p.n).and(sizes::tf_solves(
        sizes::Keys {
            solves: "d",
            samples: "samples, d",
        },
        1.0,
        p.d,
        n(*p.samples),
        ctx.ode.method,
    ))
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "histogram.threshold-weights",
    paper: "000",
    summary: "Paper Fig. 1: Q, v, Q Diag(v) and M learned by gradient flow on ℓ_tf for the \
              threshold histogram (D = 2, d = 26); Q Diag(v) = M (R3), |v_i| = √(μ_iρ̄_i) and \
              q_i ∝ m_i (R5).",
    solver: OdeConfig::new(Method::Bdf, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &[
        "cond_H",
        "lambda_max_H",
        "lambda_min_H",
        "loss_final",
        "loss_initial",
    ],
    run,
};

#[cfg(test)]
mod tests {
    #[test]
    fn symbols_are_letters_then_indices() {
        let labels = super::symbol_labels(28);
        assert_eq!(labels[0], "a");
        assert_eq!(labels[25], "z");
        assert_eq!(labels[26], "s26");
        assert_eq!(labels.len(), 28);
    }
}

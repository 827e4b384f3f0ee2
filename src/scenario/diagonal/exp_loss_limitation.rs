//! `exp-loss-limitation` (paper §6 "Limitations"; spec 004 §7 `exp-loss-limitation`): the theory
//! does not apply to losses with exponential-like tails, because the weights need not converge
//! to a finite value, so Assumption 4.4 (a strict local minimum θ^k at finite distance) fails.
//! Measured on the diagonal linear network β = u⊙v on linearly separable data: under the
//! logistic loss ‖β(t)‖ keeps growing by a non-vanishing amount per decade of t (≈ log t, no
//! finite limit), while under the square loss on the same data the flow converges.

use crate::scenario::param::Open01;
use crate::scenario::param::{AtLeast, Positive};
use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::flow::{integrate_log_time, Descent, Method, OdeConfig, Trajectory};
use crate::instance::{Array, Arrays};
use crate::models::diagonal::{BetaLoss, DiagLinear, DiagonalNet};
use crate::plot::{Figure, LegendPosition, LinePanel, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Dimension p of β and number of samples n (x_i ~ N(0, I)).
    pub p: AtLeast<1>,
    pub samples: AtLeast<1>,
    /// Labels y_i = sgn⟨β*, x_i⟩ of this sparse teacher (length p): separable by construction.
    pub teacher: Vec<f64>,
    /// θ(0) = (α·1, 0): β(0) = 0 and u² − v² = α² (conserved, Lemma 4.2), so every β_i can take
    /// either sign (a balanced u = v would keep β ≥ 0).
    pub alpha: Open01,
    /// The flow runs to t = 10^decades; ‖β‖ is recorded at every power of ten.
    pub decades: u32,
    /// The growth is checked over the last this many decades.
    pub checked_decades: u32,
    /// The loss of the main run: "logistic" (the exponential tail of the claim) or "square".
    pub loss: Tail,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tail {
    Logistic,
    Square,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Main run: every late decade's increment of ‖β‖ is ≥ this × the previous decade's (log
    /// growth gives 1; a convergent flow's increments shrink geometrically, toward 0).
    pub min_increment_ratio: Positive,
    /// Square loss: ‖β(t_end) − β(t_end/10)‖ / ‖β(t_end)‖ ≤ this (converged).
    pub max_square_change: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.teacher.len() != *p.p || p.teacher.iter().all(|b| *b == 0.0) {
        return Err(sc.invalid(
            "params.teacher",
            format!("needs p = {} entries, not all zero", p.p),
        ));
    }
    if p.checked_decades < 2 || p.checked_decades > p.decades || p.decades > 14 {
        return Err(sc.invalid(
            "params.checked_decades",
            "need 2 ≤ checked_decades ≤ decades ≤ 14",
        ));
    }
    Ok(())
}

/// L̃(β) = (1/n) Σ_i ln(1 + exp(−y_i⟨β, x_i⟩)): the exponentially tailed loss of the claim.
struct Logistic {
    p: usize,
    /// rows y_i x_i
    yx: Vec<f64>,
}

impl Logistic {
    fn margins(&self, beta: &[f64]) -> impl Iterator<Item = (f64, &[f64])> + '_ {
        let beta = beta.to_vec();
        self.yx.chunks(self.p).map(move |row| {
            let m: f64 = row.iter().zip(&beta).map(|(a, b)| a * b).sum();
            (m, row)
        })
    }
}

/// σ(z) = 1/(1 + e^{−z}), without overflow.
fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

impl BetaLoss for Logistic {
    fn p(&self) -> usize {
        self.p
    }
    fn loss(&self, beta: &[f64]) -> f64 {
        let n = (self.yx.len() / self.p) as f64;
        // ln(1 + e^{−m}) = max(−m, 0) + ln(1 + e^{−|m|})
        self.margins(beta)
            .map(|(m, _)| (-m).max(0.0) + (-m.abs()).exp().ln_1p())
            .sum::<f64>()
            / n
    }
    fn grad_beta(&self, beta: &[f64], out: &mut [f64]) {
        let n = (self.yx.len() / self.p) as f64;
        out.iter_mut().for_each(|o| *o = 0.0);
        for (m, row) in self.margins(beta) {
            let w = sigmoid(-m) / n;
            out.iter_mut().zip(row).for_each(|(o, a)| *o -= w * a);
        }
    }
    fn hvp_beta(&self, beta: &[f64], dir: &[f64], out: &mut [f64]) {
        let n = (self.yx.len() / self.p) as f64;
        out.iter_mut().for_each(|o| *o = 0.0);
        for (m, row) in self.margins(beta) {
            let along: f64 = row.iter().zip(dir).map(|(a, d)| a * d).sum();
            let w = sigmoid(m) * sigmoid(-m) * along / n;
            out.iter_mut().zip(row).for_each(|(o, a)| *o += w * a);
        }
    }
}

/// β = u⊙v at every sample of a raw-layout trajectory θ = (u, v).
fn betas(traj: &Trajectory, p: usize) -> Vec<Vec<f64>> {
    traj.states
        .chunks(2 * p)
        .map(|z| {
            let (u, v) = z.split_at(p);
            u.iter().zip(v).map(|(a, b)| a * b).collect()
        })
        .collect()
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

fn flow<L: BetaLoss>(
    loss: L,
    theta0: &[f64],
    times: &[f64],
    ode: &OdeConfig,
    what: &str,
) -> Result<Trajectory, RunError> {
    let net = DiagonalNet::new(loss);
    // τ = 1: the log clock follows decades of t in O(1) steps each
    integrate_log_time(&Descent(&net), theta0, times, 1.0, ode)
        .map_err(|e| RunError::Other(format!("{what} flow: {e}")))
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let (dim, ns) = (*p.p, *p.samples);
    let mut rng = ctx.rng(0);
    let x: Vec<f64> = (0..ns * dim).map(|_| rng.sample(StandardNormal)).collect();
    let y: Vec<f64> = x
        .chunks(dim)
        .map(|row| {
            let s: f64 = row.iter().zip(&p.teacher).map(|(a, b)| a * b).sum();
            if s >= 0.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let yx: Vec<f64> = x
        .chunks(dim)
        .zip(&y)
        .flat_map(|(row, yi)| row.iter().map(move |a| a * yi))
        .collect();
    let xm = DMatrix::from_row_slice(ns, dim, &x);
    let sigma = xm.transpose() * &xm / ns as f64;
    let r: Vec<f64> = (xm.transpose() * nalgebra::DVector::from_column_slice(&y) / ns as f64)
        .iter()
        .copied()
        .collect();
    let square = DiagLinear::from_moments(sigma, r)
        .map_err(|e| RunError::Other(format!("square loss: {e}")))?;
    let mut theta0 = vec![*p.alpha; dim];
    theta0.extend(vec![0.0; dim]);
    // a few samples per decade for the figure, the powers of ten among them
    let per_decade = 4;
    let mut times = vec![0.0];
    for k in 0..=(p.decades as usize * per_decade) {
        times.push(10f64.powf(k as f64 / per_decade as f64));
    }
    let decade_index = |j: u32| 1 + j as usize * per_decade;
    let logistic = Logistic { p: dim, yx };
    let logistic_traj = flow(&logistic, &theta0, &times, &ctx.ode, "logistic")?;
    let square_traj = flow(&square, &theta0, &times, &ctx.ode, "square")?;
    let (logistic_betas, square_betas) = (betas(&logistic_traj, dim), betas(&square_traj, dim));
    let logistic_norms: Vec<f64> = logistic_betas.iter().map(|b| norm(b)).collect();
    let square_norms: Vec<f64> = square_betas.iter().map(|b| norm(b)).collect();
    let logistic_losses: Vec<f64> = logistic_betas.iter().map(|b| logistic.loss(b)).collect();
    let main = match p.loss {
        Tail::Logistic => &logistic_norms,
        Tail::Square => &square_norms,
    };

    let mut rep = Report::default();
    let mut inst = Arrays::new();
    inst.insert("X", Array::matrix(ns, dim, x.clone()))
        .insert("y", Array::vector(&y))
        .insert("theta0", Array::vector(&theta0));
    rep.instance = Some(inst);

    // increments of ‖β‖ over the last checked decades
    let first = p.decades - p.checked_decades;
    let increments: Vec<f64> = (first..p.decades)
        .map(|j| main[decade_index(j + 1)] - main[decade_index(j)])
        .collect();
    let ratios: Vec<f64> = increments.windows(2).map(|w| w[1] / w[0]).collect();
    let worst_ratio = stats::min(ratios.iter().copied());
    let loss_name = match p.loss {
        Tail::Logistic => "logistic",
        Tail::Square => "square",
    };
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.4e}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    rep.at_least(
        "norm-keeps-growing",
        "min over late decades of Δ_{j+1}/Δ_j, Δ_j = ‖β(10^{j+1})‖ − ‖β(10^j)‖ (no finite limit)",
        if increments.iter().all(|d| *d > 0.0) {
            worst_ratio
        } else {
            stats::min(increments.iter().copied())
        },
        *c.min_increment_ratio,
    )
    .note(format!(
        "{loss_name} loss, decades 10^{first} … 10^{}: increments Δ_j = [{}], ratios [{}]; \
         log growth gives ratios → 1, a flow converging at a linear rate ratios → 0; a \
         non-positive increment is reported as the measured value; n = {ns}, p = {dim}, α = {}",
        p.decades,
        fmt(&increments),
        fmt(&ratios),
        p.alpha
    ))
    .paper_claim(
        "§6 Limitations: with exponential-like tails the weights may not converge to a \
         finite value, so Assumption 4.4 is not met",
    );
    let (end, before) = (decade_index(p.decades), decade_index(p.decades - 1));
    let (b_end, b_before) = (&square_betas[end], &square_betas[before]);
    let change = stats::max_abs_diff(b_end, b_before) / stats::max_abs(b_end.iter());
    rep.at_most(
        "square-loss-converges",
        "square loss on the same data: max|β(t_end) − β(t_end/10)| / max|β(t_end)|",
        change,
        *c.max_square_change,
    )
    .note(format!(
        "t_end = 1e{}; ‖β‖ at the last decades [{}]: the finite limit Assumption 4.4 needs",
        p.decades,
        fmt(&(first..=p.decades)
            .map(|j| square_norms[decade_index(j)])
            .collect::<Vec<_>>())
    ));
    rep.derive("worst_increment_ratio", worst_ratio);
    rep.derive("last_increment", increments[increments.len() - 1]);
    rep.derive("logistic_norm_end", logistic_norms[end]);
    rep.derive("square_norm_end", square_norms[end]);
    rep.derive("square_relative_change", change);
    rep.derive("logistic_loss_end", logistic_losses[end]);

    rep.series = Table::new(&[
        "t",
        "norm_beta_logistic",
        "norm_beta_square",
        "loss_logistic",
    ]);
    for (k, &t) in times.iter().enumerate().skip(1) {
        rep.series.push(vec![
            t.into(),
            logistic_norms[k].into(),
            square_norms[k].into(),
            logistic_losses[k].into(),
        ]);
    }
    let ts: Vec<f64> = times[1..].to_vec();
    rep.figure = Some(
        Figure::single(
            LinePanel::new("‖β(t)‖ on separable data", "t", "‖β(t)‖")
                .log_x()
                .legend(LegendPosition::UpperLeft)
                .series(
                    Series::numerics("logistic loss", ts.clone(), logistic_norms[1..].to_vec())
                        .color(0),
                )
                .series(Series::numerics("square loss", ts, square_norms[1..].to_vec()).color(1)),
        )
        .title("A limitation of the theory: under an exponential tail the weights do not converge"),
    );
    Ok(rep)
}

/// Two log-clock flows over `decades` decades (a few hundred steps each) of p-dimensional
/// gradients over the samples.
fn cost(p: &Params, _: &RunContext) -> Cost {
    Cost::new()
        .doubles("samples", "the data", n(*p.samples) * n(*p.p))
        .work(
            "decades",
            "two log-clock flows",
            2.0 * 200.0 * n(p.decades as usize),
            4.0 * n(*p.samples) * n(*p.p),
        )
        .table("decades", n(4 * p.decades as usize + 1), 4.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.exp-loss-limitation",
    paper: "004",
    summary:
        "§6 limitation: on separable data the diagonal network's ‖β(t)‖ grows like log t under \
         the logistic loss (no finite limit, Assumption 4.4 fails), but converges under the \
         square loss.",
    solver: OdeConfig::new(Method::Bdf, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &[
        "last_increment",
        "logistic_loss_end",
        "logistic_norm_end",
        "square_norm_end",
        "square_relative_change",
        "worst_increment_ratio",
    ],
    run,
};

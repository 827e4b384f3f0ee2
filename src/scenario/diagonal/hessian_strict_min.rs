//! `hessian-strict-min`: Assumption 4.4 (paper App. C.2; spec 004 §4 row A4.4, §2.5) at every
//! plateau point θ^k of Algorithm 1 — the restricted balanced loss F_k(ũ) = L(ũ, s^k ⊙ ũ) has a
//! strict local minimum at u^k: L(ũ, s^k⊙ũ) ≥ L(θ^k) + c_k‖u^k − ũ‖² near u^k, on supp u^k.
//!
//! Everything is exact (Hessian-vector products, no finite differences; the spec's central-FD
//! Hessian is only its fallback): H_SS = ∇²L̃(β^k) on S_k from the β-loss, ∇²F_k from the raw
//! (u, v) network by the chain rule, the identity ∇²F_k = D H_SS D (D = diag(2 s_i u_i), §2.5),
//! c_k = ½λ_min(∇²F_k), and the inequality sampled on random and extremal directions.

use crate::scenario::param::Open01;
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use std::cell::RefCell;
use std::path::PathBuf;

use nalgebra::{DMatrix, DVector};
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use super::algorithm1_common::{validate_instances, Algorithm1Params, Scheduled, STAGE_B_SOLVER};
use super::common::{schedule_cost, InstanceName, UserFiles, FIRST_FREE_STREAM};
use crate::analysis::linearize::{hessian, symmetric_eigen};
use crate::flow::GradientFlow;
use crate::instance::run_instance;
use crate::instance::InstanceFile;
use crate::models::diagonal::{hessian_block, BetaLoss, DiagonalNet, Stage};
use crate::plot::{BarPanel, Figure, LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Instances whose plateau points are examined (spec §7: mini; paper is heavy).
    pub instances: Vec<InstanceName>,
    /// Random directions per stage and radius (spec §4 A4.4(b): 200); the two directions
    /// ±(eigenvector of λ_min(∇²F_k)), where the bound is tight, are added to them.
    pub directions: AtLeast<1>,
    /// Radii of the sampled ũ, relative to ‖u^k‖ (spec §4: {1e−3, 1e−2}).
    pub radii: NonEmpty<Open01>,
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
    /// max_k κ(H_SS(β^k)) = λ_max/λ_min (spec §4 A4.4(a): < 1e8).
    pub max_kappa: Positive,
    /// max_k ‖∇²F_k − D H_SS D‖_max / ‖D H_SS D‖_max: the §2.5 identity, exact up to the
    /// stationarity residual and rounding.
    pub max_identity_error: Positive,
    /// min over samples of (L(ũ, s⊙ũ) − L(θ^k)) / (c_k‖u^k − ũ‖²): the inequality must hold
    /// with c = ½c_k (spec §4 A4.4(b)), i.e. this ratio ≥ ½.
    pub min_growth_ratio: Positive,
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

struct RestrictionScratch {
    theta: Vec<f64>,
    dir: Vec<f64>,
    full: Vec<f64>,
}

/// F(ũ) = L(ũ, s ⊙ ũ) on the coordinates `support` (all others 0), from the raw network, as a
/// [`GradientFlow`] of dimension |S|. The embedding ũ ↦ (ũ, s⊙ũ) is linear, so ∇²F = Pᵀ∇²L P.
struct BalancedRestriction<'a> {
    net: DiagonalNet<&'a dyn BetaLoss>,
    support: &'a [usize],
    signs: Vec<f64>,
    scratch: RefCell<RestrictionScratch>,
}

impl<'a> BalancedRestriction<'a> {
    fn new(loss: &'a dyn BetaLoss, stage: &'a Stage) -> Self {
        let p = loss.p();
        BalancedRestriction {
            net: DiagonalNet::new(loss),
            support: &stage.support,
            signs: stage
                .support
                .iter()
                .map(|&i| stage.beta[i].signum())
                .collect(),
            scratch: RefCell::new(RestrictionScratch {
                theta: vec![0.0; 2 * p],
                dir: vec![0.0; 2 * p],
                full: vec![0.0; 2 * p],
            }),
        }
    }

    /// P z = (z, s ⊙ z) on the support, written into the 2p-vector `out` (zero elsewhere).
    fn embed(&self, z: &[f64], out: &mut [f64]) {
        let p = out.len() / 2;
        for ((&i, &s), &x) in self.support.iter().zip(&self.signs).zip(z) {
            out[i] = x;
            out[p + i] = s * x;
        }
    }

    /// Pᵀ y for a 2p-vector y.
    fn project(&self, y: &[f64], out: &mut [f64]) {
        let p = y.len() / 2;
        for ((o, &i), &s) in out.iter_mut().zip(self.support).zip(&self.signs) {
            *o = y[i] + s * y[p + i];
        }
    }
}

impl GradientFlow for BalancedRestriction<'_> {
    fn dim(&self) -> usize {
        self.support.len()
    }
    fn loss(&self, z: &[f64]) -> f64 {
        let s = &mut *self.scratch.borrow_mut();
        self.embed(z, &mut s.theta);
        self.net.loss(&s.theta)
    }
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.embed(z, &mut s.theta);
        self.net.grad(&s.theta, &mut s.full);
        self.project(&s.full, g);
    }
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
        let s = &mut *self.scratch.borrow_mut();
        self.embed(z, &mut s.theta);
        self.embed(u, &mut s.dir);
        self.net.hvp(&s.theta, &s.dir, &mut s.full);
        self.project(&s.full, out);
    }
}

/// What one stage contributes to the tables and the figure.
struct StageResult {
    k: usize,
    h_eigenvalues: Vec<f64>,
    kappa: f64,
    c_k: f64,
    /// c_k of Algorithm 1's diagnostics (from H_SS alone).
    c_k_algorithm1: f64,
    identity_error: f64,
    asymmetry: f64,
    /// Per radius: min over directions of (F(ũ) − F(u^k)) / ‖δ‖².
    min_growth: Vec<f64>,
    /// Per radius: min over directions of F(ũ) / ‖δ‖² (the paper's form, without L(θ^k)).
    paper_form_growth: Vec<f64>,
    /// The last plateau of the schedule.
    terminal: bool,
}

fn examine_stage(
    loss: &dyn BetaLoss,
    stage: &Stage,
    terminal: bool,
    p: &Params,
    rng: &mut impl rand::Rng,
) -> Result<StageResult, RunError> {
    let m = stage.support.len();
    let analysis = |e: crate::analysis::AnalysisError| RunError::Other(e.to_string());
    let h_ss = DMatrix::from_row_slice(m, m, &hessian_block(&loss, &stage.beta, &stage.support));
    let h_eigenvalues = symmetric_eigen(&h_ss).map_err(analysis)?.values;
    let u: Vec<f64> = stage
        .support
        .iter()
        .map(|&i| stage.beta[i].abs().sqrt())
        .collect();
    let f = BalancedRestriction::new(loss, stage);
    let d = DMatrix::from_diagonal(&DVector::from_iterator(
        m,
        u.iter().zip(&f.signs).map(|(u, s)| 2.0 * s * u),
    ));
    let predicted = &d * &h_ss * &d;
    let exact = hessian(&f, &u).map_err(analysis)?;
    let identity_error =
        stats::max_abs((&exact.matrix - &predicted).iter()) / stats::max_abs(predicted.iter());
    let spectrum = symmetric_eigen(&exact.matrix).map_err(analysis)?;
    let c_k = 0.5 * spectrum.values[0];
    let softest: Vec<f64> = spectrum.vectors.column(0).iter().copied().collect();

    let u_norm = u.iter().map(|x| x * x).sum::<f64>().sqrt();
    let base = f.loss(&u);
    let mut directions: Vec<Vec<f64>> = vec![softest.clone(), softest.iter().map(|x| -x).collect()];
    for _ in 0..*p.directions {
        let v: Vec<f64> = (0..m).map(|_| StandardNormal.sample(rng)).collect();
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        directions.push(v.iter().map(|x| x / norm).collect());
    }
    let (mut min_growth, mut paper_form_growth) = (Vec::new(), Vec::new());
    for radius in p.radii.iter().map(|r| **r) {
        let r = radius * u_norm;
        let (mut growth, mut paper) = (f64::INFINITY, f64::INFINITY);
        for dir in &directions {
            let moved: Vec<f64> = u.iter().zip(dir).map(|(x, d)| x + r * d).collect();
            let value = f.loss(&moved);
            growth = stats::smaller(growth, (value - base) / (r * r));
            paper = stats::smaller(paper, value / (r * r));
        }
        min_growth.push(growth);
        paper_form_growth.push(paper);
    }
    Ok(StageResult {
        k: stage.k,
        kappa: h_eigenvalues[m - 1] / h_eigenvalues[0],
        h_eigenvalues,
        c_k,
        c_k_algorithm1: stage.diagnostics.c_k,
        identity_error,
        asymmetry: exact.relative_asymmetry(),
        min_growth,
        paper_form_growth,
        terminal,
    })
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut rep = Report {
        series: Table::new(&[
            "instance",
            "k",
            "support_size",
            "lambda_min",
            "lambda_max",
            "kappa",
            "c_k",
            "c_k_algorithm1",
            "identity_error",
            "relative_asymmetry",
            "radius",
            "min_growth_over_c_k",
            "paper_form_min_over_c_k",
        ]),
        ..Default::default()
    };
    let mut eig_table = Table::new(&["instance", "k", "j", "eig_H_SS"]);
    let mut rng = ctx.rng(FIRST_FREE_STREAM);
    let mut fig = Figure::new(2).title(
        "Assumption 4.4: H_SS(β^k) ≻ 0 and the strict-minimum constant c_k at every plateau",
    );
    let mut datasets = Vec::new();
    for &name in &p.instances {
        let opts = p.algorithm1.options(&STAGE_B_SOLVER);
        let sched = Scheduled::with_files(name, &files(p), &opts, ctx)?;
        let label = sched.label();
        datasets.push((label.clone(), sched.data.to_arrays()));
        let loss = sched.instance.loss();
        let last = sched.schedule.stages.len() - 1;
        let results = sched
            .schedule
            .stages
            .iter()
            .filter(|st| !st.support.is_empty())
            .map(|st| examine_stage(loss, st, st.k == last, p, &mut rng))
            .collect::<Result<Vec<_>, _>>()?;
        for r in &results {
            for (&radius, (&g, &pg)) in p
                .radii
                .iter()
                .zip(r.min_growth.iter().zip(&r.paper_form_growth))
            {
                rep.series.push(vec![
                    Cell::Text(label.clone()),
                    r.k.into(),
                    r.h_eigenvalues.len().into(),
                    r.h_eigenvalues[0].into(),
                    r.h_eigenvalues[r.h_eigenvalues.len() - 1].into(),
                    r.kappa.into(),
                    r.c_k.into(),
                    r.c_k_algorithm1.into(),
                    r.identity_error.into(),
                    r.asymmetry.into(),
                    (*radius).into(),
                    (g / r.c_k).into(),
                    (pg / r.c_k).into(),
                ]);
            }
            for (j, &l) in r.h_eigenvalues.iter().enumerate() {
                eig_table.push(vec![
                    Cell::Text(label.clone()),
                    r.k.into(),
                    j.into(),
                    l.into(),
                ]);
            }
        }
        instance_checks(&mut rep, &label, &results, c);
        fig = figure_row(fig, &label, &results, &p.radii);
    }
    rep.tables.push(("eigenvalues".into(), eig_table));
    rep.figure = Some(fig);
    rep.instance = Some(run_instance(datasets));
    Ok(rep)
}

fn instance_checks(rep: &mut Report, label: &str, results: &[StageResult], c: &Checks) {
    let over = |f: fn(&StageResult) -> f64| results.iter().map(f);
    let lambda_min = stats::min(over(|r| r.h_eigenvalues[0]));
    rep.at_least(
        &format!("lambda-ss-beta.{label}"),
        &format!("{label}: min_k λ_min(H_SS(β^k)) > 0"),
        lambda_min,
        f64::MIN_POSITIVE,
    )
    .note(format!(
        "exact H_SS from Hessian-vector products on {} plateaus (spec §4 A4.4(a))",
        results.len()
    ));
    rep.at_most(
        &format!("kappa-ss-beta.{label}"),
        &format!("{label}: max_k κ(H_SS(β^k))"),
        stats::max(over(|r| r.kappa)),
        *c.max_kappa,
    );
    rep.at_most(
        &format!("2f-ss-relative.{label}"),
        &format!("{label}: ∇²F_k = D H_SS D (relative)"),
        stats::max(over(|r| r.identity_error)),
        *c.max_identity_error,
    )
    .note("F_k(ũ) = L(ũ, s⊙ũ) from the raw network vs the β-Hessian, D = diag(2 s_i u_i) (§2.5)");
    let growth = stats::min(
        results
            .iter()
            .flat_map(|r| r.min_growth.iter().map(|g| g / r.c_k)),
    );
    // on the terminal plateau of a realizable task L(θ^K) = 0 and both forms coincide
    let paper = stats::min(
        results
            .iter()
            .filter(|r| !r.terminal)
            .flat_map(|r| r.paper_form_growth.iter().map(|g| g / r.c_k)),
    );
    rep.at_least(
        &format!("theta.{label}"),
        &format!("{label}: min (L(ũ,s⊙ũ) − L(θ^k)) / (c_k‖u^k − ũ‖²)"),
        growth,
        *c.min_growth_ratio,
    )
    .note(
        "sampled A4.4(b): random and ±softest directions, c_k = ½λ_min(∇²F_k); ≈ 1 means \
         c_k is the sharp constant",
    )
    .paper_claim(format!(
        "A4.4 as printed: L(ũ, s⊙ũ) ≥ c_k‖u^k − ũ‖², without L(θ^k) (spec §6 #5); on the \
         non-terminal plateaus (L(θ^k) > 0) it holds vacuously: min L(ũ)/(c_k‖δ‖²) = \
         {paper:.3e}"
    ));
    rep.derive(&format!("{label}.min_lambda_min"), lambda_min);
    rep.derive(&format!("{label}.paper_form_min_ratio"), paper);
}

/// Row of two panels: eigenvalues of H_SS per stage (bars, log y), and c_k with the sampled
/// growth and the bound ½c_k.
fn figure_row(fig: Figure, label: &str, results: &[StageResult], radii: &[Open01]) -> Figure {
    let categories: Vec<String> = results.iter().map(|r| r.k.to_string()).collect();
    let width = results
        .iter()
        .map(|r| r.h_eigenvalues.len())
        .max()
        .unwrap_or(0);
    // unlabelled groups (no legend hiding bars): the title says the order
    let mut bars = BarPanel::new(
        format!("{label}: eigenvalues λ_1 ≤ … ≤ λ_m of H_SS(β^k), left to right"),
        "stage k",
        "λ_j(H_SS)",
        categories,
    )
    .log_y();
    for j in 0..width {
        let values = results
            .iter()
            .map(|r| r.h_eigenvalues.get(j).copied().unwrap_or(f64::NAN))
            .collect();
        bars = bars.group("", values, LineStyle::Solid);
    }
    let x: Vec<f64> = results.iter().map(|r| r.k as f64).collect();
    let c_k: Vec<f64> = results.iter().map(|r| r.c_k).collect();
    let mut growth = LinePanel::new(
        format!("{label}: sampled growth of L(ũ, s⊙ũ) − L(θ^k)"),
        "stage k",
        "per ‖u^k − ũ‖²",
    )
    .log_y()
    .legend(LegendPosition::LowerLeft)
    .series(
        Series::new(
            "c_k = ½λ_min(∇²F_k)",
            x.clone(),
            c_k.clone(),
            LineStyle::Solid,
        )
        .color(0),
    )
    .series(
        Series::theory(
            "bound ½c_k",
            x.clone(),
            c_k.iter().map(|c| c / 2.0).collect(),
        )
        .color(0),
    );
    for (n, radius) in radii.iter().enumerate() {
        let y = results.iter().map(|r| r.min_growth[n]).collect();
        growth = growth.series(
            Series::new(
                format!("measured min, radius {radius:e}·‖u^k‖"),
                x.clone(),
                y,
                LineStyle::Markers,
            )
            .color(n + 1),
        );
    }
    fig.panel(bars).panel(growth)
}

/// Per instance, Algorithm 1 and per stage (at most p) the Hessian on the support and the loss
/// at every sampled direction and radius.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let samples = (n(*p.directions) + 2.0) * n(p.radii.len());
    p.instances.iter().fold(Cost::new(), |cost, &name| {
        let size = name.size();
        cost.and(schedule_cost("instances", name))
            .dense_hessians("instances", size.p, size.p, 2.0 * size.grad)
            .work(
                "directions, radii",
                "losses at sampled points",
                size.p * samples,
                size.grad,
            )
    })
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.hessian-strict-min",
    paper: "004",
    summary: "Assumption 4.4 at every plateau θ^k (spec 004 §4): exact H_SS ≻ 0 with κ < 1e8, \
              ∇²F_k = D H_SS D, and L(ũ, s⊙ũ) ≥ L(θ^k) + ½c_k‖u^k − ũ‖² on sampled directions \
              (the paper's form lacks L(θ^k)).",
    solver: STAGE_B_SOLVER,
    validate,
    cost,
    quantities: &["*.min_lambda_min", "*.paper_form_min_ratio"],
    run,
};

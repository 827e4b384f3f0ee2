//! `separability-rate` (paper 001 Sec. 3.1 remark: "the separability assumption holds for data
//! with gaussian noise when d is larger than L and n (Tarzanagh et al., 2023a, Theorem 1)";
//! spec 001 §6 item 16, §7 row `separability-rate`): a random batch of Gaussian datasets
//! (tokens, queries and decoder i.i.d. N(0, I_d), labels ±1) drawn from the run's seed, for
//! several d, each tested for Assumption 1 (some W ∈ ℝ^{d×d} with ⟨A_il, W⟩ ≥ 1 for every
//! l ≠ opt(i): LP feasibility in d² unknowns) and for A1-diag (a diagonal W, d unknowns).
//! Why it holds: with d ≥ n the queries z_i are generically independent and with d ≥ L − 1 each
//! sample's differences x_i,opt − x_il are too, so the n(L − 1) rank-one matrices A_il are
//! linearly independent and ⟨A_il, W⟩ = 1 is solvable — d > max(L, n) (the paper's reading) is
//! more than enough. The universal claim is checked on every dataset above the threshold; the
//! separable fraction below it is reported (no claim there).

use serde::{Deserialize, Serialize};

use crate::analysis::svm::{
    solve_l1, solve_l2, RankOneConstraints, SvmError, SvmMethod, VectorConstraints,
};
use crate::attention::Instance;
use crate::flow::{Method, OdeConfig};
use crate::instance::kq::KqData;
use crate::instance::{run_instance, InstanceFile};
use crate::models::kq::generators::gaussian_instance;
use crate::plot::{Figure, LinePanel, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, Fraction};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::DATA_STREAM;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Sequences per dataset n.
    pub n: AtLeast<1>,
    /// Tokens per sequence L (one optimal token and others).
    pub tokens: AtLeast<2>,
    /// Dimensions d drawn (above and below the threshold max(L, n)).
    pub d_values: Vec<usize>,
    /// Datasets per d (issue 20: universal claims on ≥ 20 instances).
    pub draws_per_d: AtLeast<20>,
    /// The claim is checked on d ≥ this (default max(L, n) + 1, the paper's "d larger than L and
    /// n"; a smaller value mimics a wrong threshold and must fail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_from_d: Option<AtLeast<1>>,
}

impl Params {
    /// The smallest d the claim covers.
    fn claim_from(&self) -> usize {
        self.claim_from_d
            .map_or(self.tokens.max(*self.n) + 1, |d| *d)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Fraction of the datasets above the threshold that must be separable (the claim: 1).
    pub above_fraction: Fraction,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if p.d_values.is_empty() || p.d_values.iter().any(|&d| d == 0 || d > 64) {
        return Err(sc.invalid("params.d_values", "a non-empty list of d in [1, 64]"));
    }
    if p.d_values.windows(2).any(|w| w[1] <= w[0]) {
        return Err(sc.invalid("params.d_values", "must be strictly increasing"));
    }
    let from = p.claim_from();
    if !p.d_values.iter().any(|&d| d >= from) {
        return Err(sc.invalid(
            "params.d_values",
            format!("needs some d ≥ {from} (the claim's range, d > max(L, n))"),
        ));
    }
    Ok(())
}

/// LP feasibility of ⟨w, f_k⟩ ≥ 1 (the ℓ1 LP is bounded whenever it is feasible).
fn feasible(c: &VectorConstraints) -> Result<bool, SvmError> {
    match solve_l1(c) {
        Ok(_) => Ok(true),
        Err(SvmError::Infeasible { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// One dataset of the batch.
struct Member {
    label: String,
    d: usize,
    inst: Instance,
    satisfying: bool,
    separable: bool,
    /// 1/‖W_F‖ of the Frobenius max-margin W (0 when not separable).
    margin: f64,
    /// Smallest singular value of the m × d² constraint matrix over its largest (> 0 ⇔ the
    /// A_il are linearly independent, the argument behind Tarzanagh et al.'s Thm 1).
    rank_margin: f64,
    separable_diag: bool,
}

fn examine(label: String, inst: Instance, claim_from: usize) -> Result<Member, SvmError> {
    let d = inst.data.d;
    let full = RankOneConstraints::w_svm(&inst.data.view(), &inst.opt)?;
    let dense = VectorConstraints {
        f: crate::analysis::svm::MarginConstraints::dense(&full),
        labels: full.labels.clone(),
    };
    let separable = feasible(&dense)?;
    let margin = if separable {
        1.0 / solve_l2(&full, SvmMethod::Dual)?.norm
    } else {
        0.0
    };
    let sv = dense.f.singular_values();
    let rank_margin = if dense.f.nrows() <= dense.f.ncols() {
        stats::min(sv.iter()) / stats::max(sv.iter())
    } else {
        0.0
    };
    let separable_diag = feasible(&full.diagonal()?)?;
    Ok(Member {
        label,
        d,
        inst,
        satisfying: d >= claim_from,
        separable,
        margin,
        rank_margin,
        separable_diag,
    })
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let (threshold, from) = (p.tokens.max(*p.n), p.claim_from());
    let mut rng = ctx.rng(DATA_STREAM);
    let mut members = Vec::new();
    for &d in &p.d_values {
        for k in 0..*p.draws_per_d {
            let label = format!("d{d}-{k}");
            let inst = gaussian_instance(*p.n, *p.tokens, d, &mut rng)
                .map_err(|e| RunError::Other(format!("{label}: {e}")))?;
            members.push(
                examine(label.clone(), inst, from)
                    .map_err(|e| RunError::Other(format!("{label}: {e}")))?,
            );
        }
    }
    let mut rep = Report::default();
    rep.series = Table::new(&[
        "label",
        "d",
        "satisfies_d_gt_max_l_n",
        "separable",
        "margin_1_over_norm_wf",
        "constraint_rank_margin",
        "separable_diag",
        "pass",
    ]);
    for m in &members {
        rep.series.push(vec![
            m.label.clone().into(),
            (m.d as f64).into(),
            usize::from(m.satisfying).into(),
            usize::from(m.separable).into(),
            m.margin.into(),
            m.rank_margin.into(),
            usize::from(m.separable_diag).into(),
            usize::from(!m.satisfying || m.separable).into(),
        ]);
    }
    let mut per_d = Table::new(&["d", "separable_fraction", "separable_diag_fraction"]);
    let (mut fractions, mut diag_fractions) = (Vec::new(), Vec::new());
    for &d in &p.d_values {
        let of_d: Vec<&Member> = members.iter().filter(|m| m.d == d).collect();
        let count = |f: fn(&Member) -> bool| of_d.iter().filter(|m| f(m)).count() as f64;
        let (frac, frac_diag) = (
            count(|m| m.separable) / of_d.len() as f64,
            count(|m| m.separable_diag) / of_d.len() as f64,
        );
        per_d.push(vec![(d as f64).into(), frac.into(), frac_diag.into()]);
        rep.derive(&format!("separable_fraction.d{d}"), frac);
        rep.derive(&format!("separable_diag_fraction.d{d}"), frac_diag);
        fractions.push(frac);
        diag_fractions.push(frac_diag);
    }
    rep.tables.push(("per_d".into(), per_d));
    let sat: Vec<&Member> = members.iter().filter(|m| m.satisfying).collect();
    let passing = sat.iter().filter(|m| m.separable).count();
    let below: Vec<&Member> = members.iter().filter(|m| !m.satisfying).collect();
    let below_separable = below.iter().filter(|m| m.separable).count();
    rep.derive("instances", members.len());
    rep.derive("satisfying", sat.len());
    rep.derive("passing", passing);
    rep.derive("violating", below.len());
    rep.derive("violating_separable", below_separable);
    let (worst, worst_label) = stats::worst(sat.iter().map(|m| (-m.margin, m.label.clone())))
        .map(|(v, l)| (-v, l))
        .unwrap_or((f64::NAN, String::new()));
    let setting = format!(
        "Gaussian data (x_il, z_i, v ~ N(0, I_d), y_i = ±1), n = {}, L = {}, d ∈ {:?}, {} draws per \
         d; claim checked on d ≥ {from} (max(L, n) = {threshold})",
        *p.n, *p.tokens, p.d_values, *p.draws_per_d
    );
    let claim =
        "Sec. 3.1: the separability assumption holds for data with Gaussian noise when d is \
         larger than L and n (Tarzanagh et al. 2023a, Thm 1)";
    rep.at_least(
        "separable-above-threshold-worst",
        &format!("A1 on every Gaussian dataset with d ≥ {from}: smallest max-margin 1/‖W_F‖"),
        worst,
        f64::MIN_POSITIVE,
    )
    .note(format!(
        "worst instance {worst_label}; A1 decided by LP feasibility in d² unknowns, the \
         margin from the Frobenius max-margin QP; {claim}; {setting}"
    ));
    let fraction = passing as f64 / sat.len() as f64;
    rep.at_least(
        "separable-above-threshold-fraction",
        &format!("fraction of the datasets with d ≥ {from} satisfying A1"),
        fraction,
        *c.above_fraction,
    )
    .note(format!(
        "{passing} of {} separable; below the threshold {below_separable} of {} are (no claim \
         there: with d ≥ max(L − 1, n) the A_il are generically independent, so separability \
         already holds at d = max(L − 1, n); fractions per d {:?}, diagonal W (A1-diag, not \
         claimed) {:?}); {setting}",
        sat.len(),
        below.len(),
        fractions
            .iter()
            .map(|f| format!("{f:.2}"))
            .collect::<Vec<_>>(),
        diag_fractions
            .iter()
            .map(|f| format!("{f:.2}"))
            .collect::<Vec<_>>()
    ));
    let ds: Vec<f64> = p.d_values.iter().map(|&d| d as f64).collect();
    rep.figure = Some(
        Figure::new(1)
            .title("Sec. 3.1 remark: Gaussian data are separable when d > max(L, n)")
            .panel(
                LinePanel::new(
                    format!("separable fraction (n = {}, L = {})", *p.n, *p.tokens),
                    "d",
                    "fraction of datasets",
                )
                .series(Series::numerics("A1 (full W)", ds.clone(), fractions))
                .series(Series::numerics("A1-diag (diagonal W)", ds, diag_fractions))
                .vline(RefLine::new(threshold as f64 + 0.5, "d > max(L, n)"))
                .vline(RefLine::new(
                    (*p.tokens - 1).max(*p.n) as f64 - 0.5,
                    "d ≥ max(L − 1, n)",
                )),
            ),
    );
    rep.instance = Some(run_instance(
        members
            .iter()
            .map(|m| {
                (
                    m.label.replace('-', "_"),
                    KqData::new(m.inst.clone()).to_arrays(),
                )
            })
            .collect(),
    ));
    Ok(rep)
}

fn cost(p: &Params, _: &RunContext) -> Cost {
    let datasets = n(p.d_values.len()) * n(*p.draws_per_d);
    let d = n(p.d_values.iter().copied().max().unwrap_or(1));
    let m = n(*p.n) * n(p.tokens.saturating_sub(1));
    Cost::new()
        .work(
            "d_values, draws_per_d",
            "LPs and QPs",
            datasets * 3.0,
            50.0 * m * d * d * (m + d * d),
        )
        .table("d_values, draws_per_d", datasets, 8.0)
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "kq.separability-rate",
    paper: "001",
    summary:
        "Sec. 3.1 remark (Tarzanagh et al. 2023a, Thm 1): a random batch of Gaussian datasets \
         per d; every dataset with d > max(L, n) satisfies A1 (LP feasibility); the separable \
         fractions below the threshold (full and diagonal W) are reported.",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "instances",
        "satisfying",
        "passing",
        "violating",
        "violating_separable",
        "separable_fraction.*",
        "separable_diag_fraction.*",
    ],
    run,
};

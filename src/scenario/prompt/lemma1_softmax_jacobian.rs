//! `lemma1-softmax-jacobian` (Lemma 1, eq. 7; spec 002 §2.8, §3.1): the softmax Jacobian
//! J(z) = diag(z) − zzᵀ on Gaussian-logit and Dirichlet(1) attention vectors — symmetric, PSD,
//! J𝟙 = 0, the chain 0 = λ₁ < z̃₁ ≤ λ₂ ≤ … ≤ λ_n ≤ z̃_n < 1 and its rank-one interlacing
//! extensions λ_{k+1} ∈ [z̃_k, z̃_{k+1}], λ_n ≤ ½, tr J = 1 − ‖z‖², λ₂ = 2z₁z₂ for n = 2 — with
//! the eigenvalues of eigvalsh and of the secular equation, whose relative accuracy is held
//! against closed forms at extreme sparsity; and eq. 7, Dφ(w) = J(φ(w)), by central differences.
//!
//! `data_file` (layout [`AttentionVectors`]: `logits` or `z`) replaces the drawn instances; every
//! Lemma 1 check runs on them (the n = 2 identity only if some instance has n = 2; the closed-form
//! accuracy check of the secular solver runs on its own constructed instances either way).
//! `export_spectra` writes both spectra of every instance to `spectra.csv`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::flow::{Method, OdeConfig};
use crate::instance::prompt::{AttentionFamily, AttentionVectors, LabelledAttention};
use crate::instance::InstanceFile;
use crate::models::prompt::attention_families::Attention;
use crate::models::prompt::jacobian_spectrum::{
    dense_eigenvalues, jacobian_matrix, secular_eigenvalues, Lemma1Facts,
};
use crate::models::prompt::softmax::softmax_into;
use crate::plot::{Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::NonNegative;
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Token counts n = n_min..=n_max (spec: 2..50).
    pub n_min: AtLeast<2>,
    pub n_max: usize,
    /// Logit scales s of z = φ(s·g), g ~ N(0, I) (spec: 0.1, 1, 3, 10).
    pub scales: NonEmpty<Positive>,
    /// Draws per (n, scale), and Dirichlet(1) draws per n.
    pub draws: AtLeast<1>,
    /// Central-difference step of the eq. 7 check.
    pub fd_step: Positive,
    /// Dominant-token tails ε (z = (1 − (n−1)ε, ε, …)) for the relative-accuracy check.
    pub tails: Vec<f64>,
    /// n of the dominant-token instances.
    pub tail_n: AtLeast<3>,
    /// Logit gaps u of the n = 2 instances of the relative-accuracy check.
    pub two_token_gaps: Vec<f64>,
    /// The instance drawn in the interlacing panel: n and logit scale (first draw).
    pub shown_n: AtLeast<2>,
    pub shown_scale: Positive,
    /// Attention vectors (layout `instance::prompt::AttentionVectors`) replacing the drawn ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// Write every instance's spectra (secular and eigvalsh) to `spectra.csv`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub export_spectra: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// max |J − Jᵀ| (claim 1; J is formed symmetric, so 0).
    pub symmetry_tol: NonNegative,
    /// ‖J𝟙‖_∞ (claim 2; spec 1e−14).
    pub kernel_tol: NonNegative,
    /// −λ_min of eigvalsh (claim 1, PSD; spec 1e−13 absolute).
    pub psd_tol: NonNegative,
    /// Distance of eigvalsh's λ_{k+1} outside [z̃_k, z̃_{k+1}] and of λ_n above ½ (spec 1e−13).
    pub interlacing_tol: NonNegative,
    /// |Σλ − (1 − ‖z‖²)| (spec 1e−13).
    pub trace_tol: NonNegative,
    /// |λ₂ − 2z₁z₂| of eigvalsh for n = 2 (absolute).
    pub two_token_tol: NonNegative,
    /// max |λ_secular − λ_eigvalsh| (both backward stable: ~ε·λ_max).
    pub secular_vs_dense_tol: NonNegative,
    /// Relative error of the secular eigenvalues against the closed forms (dominant token:
    /// ε with multiplicity n − 2 and nεz₁/((n−1)ε + z₁); n = 2: 2z₁z₂/(z₁ + z₂)).
    pub secular_rel_tol: NonNegative,
    /// max_ij |Dφ_fd − J|_ij / z_i for eq. 7 (spec: rel 1e−7; row i has scale z_i).
    pub eq7_rel_tol: NonNegative,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    if let Some(f) = &p.data_file {
        sc.read_instance::<AttentionVectors>("data_file", f)?;
    }
    if p.n_max < *p.n_min {
        return Err(sc.invalid("params.n_min", "need 2 ≤ n_min ≤ n_max"));
    }
    if p.tails
        .iter()
        .any(|&e| !(e > 0.0 && e < 1.0 / *p.tail_n as f64))
    {
        return Err(sc.invalid("params.tails", "each ε must lie in (0, 1/tail_n)"));
    }
    if p.two_token_gaps.iter().any(|&u| u.abs() >= 700.0) {
        return Err(sc.invalid(
            "params.two_token_gaps",
            "|u| < 700 (beyond, the smaller probability underflows)",
        ));
    }
    Ok(())
}

/// max_ij |Dφ_fd(w) − J(φ(w))|_ij / z_i with central differences of step h (eq. 7), for J as
/// implemented (diag(z) − zzᵀ with the cancellation-free diagonal z_iΣ_{j≠i}z_j) and for the
/// printed factorization diag(z)(I − 𝟙zᵀ) of eq. (6) evaluated literally, z_i(δ_ij − z_j). Row i
/// of Dφ has scale z_i, and central differences resolve φ_i only to ε·z_i/h, so each row is
/// held to its own scale (relative to max|J| no sparse z would pass).
fn eq7_error(att: &Attention, h: f64) -> (f64, f64) {
    let n = att.z.len();
    let j = jacobian_matrix(&att.z);
    let (mut plus, mut minus) = (vec![0.0; n], vec![0.0; n]);
    let mut w = att.logits.clone();
    let (mut err, mut err_printed) = (0.0, 0.0);
    for col in 0..n {
        w[col] = att.logits[col] + h;
        softmax_into(&w, &mut plus);
        w[col] = att.logits[col] - h;
        softmax_into(&w, &mut minus);
        w[col] = att.logits[col];
        for row in 0..n {
            let fd = (plus[row] - minus[row]) / (2.0 * h);
            err = stats::larger(err, (fd - j[(row, col)]).abs() / att.z[row]);
            let kronecker = if row == col { 1.0 } else { 0.0 };
            let printed = att.z[row] * (kronecker - att.z[col]);
            err_printed = stats::larger(err_printed, (fd - printed).abs() / att.z[row]);
        }
    }
    (err, err_printed)
}

/// One instance's measurements.
struct Measured {
    family: &'static str,
    n: usize,
    scale: f64,
    ln_r: f64,
    dense: Lemma1Facts,
    secular: Lemma1Facts,
    secular_vs_dense: f64,
    lambda_2: (f64, f64),
    lambda_n: f64,
    z_min: f64,
    /// eq. 7 errors of J as implemented and of the printed diag(z)(I − 𝟙zᵀ).
    eq7: f64,
    eq7_printed: f64,
    /// Both spectra (secular, eigvalsh), kept when they are exported.
    spectra: Option<(Vec<f64>, Vec<f64>)>,
}

fn measure(inst: &LabelledAttention, fd_step: f64, keep: bool) -> Result<Measured, RunError> {
    let family = inst.family.name();
    let att = Attention {
        logits: inst.logits.clone(),
        z: inst.z.clone(),
    };
    let att = &att;
    let err = |e: crate::analysis::AnalysisError| RunError::Other(format!("{family}: {e}"));
    let dense = dense_eigenvalues(&att.z).map_err(err)?;
    let sec = secular_eigenvalues(&att.z).map_err(err)?;
    let n = att.z.len();
    let (eq7, eq7_printed) = eq7_error(att, fd_step);
    Ok(Measured {
        family,
        n,
        scale: inst.scale,
        ln_r: att.ln_ratio(),
        dense: Lemma1Facts::measure(&att.z, &dense).map_err(err)?,
        secular: Lemma1Facts::measure(&att.z, &sec).map_err(err)?,
        secular_vs_dense: stats::max(dense.iter().zip(&sec).map(|(a, b)| (a - b).abs())),
        lambda_2: (sec[1], dense[1]),
        lambda_n: sec[n - 1],
        z_min: stats::min(att.z.iter()),
        eq7,
        eq7_printed,
        spectra: keep.then(|| (sec.clone(), dense.clone())),
    })
}

/// Worst relative error of the secular eigenvalues against the closed forms (Checks docs).
fn closed_form_error(p: &Params) -> Result<f64, RunError> {
    let rel = |a: f64, b: f64| (a - b).abs() / b;
    let mut err: f64 = 0.0;
    for &eps in &p.tails {
        let att = Attention::dominant_token(*p.tail_n, eps);
        let sec = secular_eigenvalues(&att.z).map_err(|e| RunError::Other(e.to_string()))?;
        let (n, z1, t) = (*p.tail_n, att.z[0], att.z[1]);
        let top = n as f64 * t * z1 / ((n - 1) as f64 * t + z1);
        // λ₁ = 0 exactly, then the tie value and the top root
        err = stats::larger(err, sec[0].abs() / t);
        err = stats::larger(err, stats::max(sec[1..n - 1].iter().map(|&l| rel(l, t))));
        err = stats::larger(err, rel(sec[n - 1], top));
    }
    for &u in &p.two_token_gaps {
        let att = Attention::scaled(&[0.5 * u, -0.5 * u], 1.0);
        let sec = secular_eigenvalues(&att.z).map_err(|e| RunError::Other(e.to_string()))?;
        let (a, b) = (att.z[0], att.z[1]);
        err = stats::larger(err, rel(sec[1], 2.0 * a * b / (a + b)));
    }
    Ok(err)
}

/// The built-in instances: per n, Gaussian logits at every scale, then Dirichlet(1) draws.
fn drawn_instances(p: &Params, ctx: &RunContext) -> AttentionVectors {
    let mut gauss_rng = ctx.rng(1);
    let mut dirichlet_rng = ctx.rng(2);
    let label = |att: Attention, family, scale| LabelledAttention {
        logits: att.logits,
        z: att.z,
        family,
        scale,
    };
    let mut instances = Vec::new();
    for n in *p.n_min..=p.n_max {
        for s in p.scales.iter().map(|s| **s) {
            for _ in 0..*p.draws {
                let att = Attention::gaussian_logits(n, s, &mut gauss_rng);
                instances.push(label(att, AttentionFamily::Gaussian, s));
            }
        }
        for _ in 0..*p.draws {
            let att = Attention::dirichlet(n, &mut dirichlet_rng);
            instances.push(label(att, AttentionFamily::Dirichlet, f64::NAN));
        }
    }
    AttentionVectors {
        instances,
        given_z: false,
    }
}

/// The instance of the interlacing panel and its caption: the first Gaussian one with n =
/// shown_n at scale shown_scale, else (a user's file) the first instance.
fn shown_instance<'a>(p: &Params, inst: &'a [LabelledAttention]) -> (&'a [f64], String) {
    let wanted = inst.iter().find(|i| {
        i.family == AttentionFamily::Gaussian
            && i.z.len() == *p.shown_n
            && i.scale == *p.shown_scale
    });
    match wanted {
        Some(i) => (
            &i.z,
            format!(
                "interlacing, n = {}, z = φ({}·g)",
                i.z.len(),
                *p.shown_scale
            ),
        ),
        None => (
            &inst[0].z,
            format!("interlacing, n = {}, the first instance", inst[0].z.len()),
        ),
    }
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let instances = match &p.data_file {
        Some(f) => ctx
            .scenario
            .read_instance::<AttentionVectors>("data_file", f)?,
        None => drawn_instances(p, ctx),
    };
    let all = instances
        .instances
        .iter()
        .map(|i| measure(i, *p.fd_step, p.export_spectra))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rep = Report::default();
    let count = all.len();
    let over = |f: &dyn Fn(&Measured) -> f64| stats::max(all.iter().map(f));
    let note = |what: &str| format!("{what}; worst of {count} instances (eigvalsh)");
    rep.at_most(
        "claim-jt",
        "claim 1: max |J − Jᵀ|",
        over(&|m| m.dense.asymmetry),
        *c.symmetry_tol,
    )
    .note(note("symmetry"));
    rep.at_most(
        "claim-psd-lambda",
        "claim 1: PSD, max(0, −λ_min)",
        over(&|m| m.dense.negativity),
        *c.psd_tol,
    )
    .note(note("J ⪰ 0"));
    rep.at_most(
        "claim-inf",
        "claim 2: ‖J𝟙‖_∞",
        over(&|m| m.dense.kernel_residual),
        *c.kernel_tol,
    )
    .note(note("𝟙 spans the kernel"));
    rep.at_most(
        "claim-interlacing-lambda-outside",
        "claim 3 + interlacing: λ_{k+1} outside [z̃_k, z̃_{k+1}]",
        over(&|m| m.dense.interlacing_violation),
        *c.interlacing_tol,
    )
    .note(note(
        "rank-one interlacing, which contains z̃₁ ≤ λ₂, λ_n ≤ z̃_n (eq. 8), λ₂ ≤ z̃₂ and \
         λ_n ≥ z̃_{n−1}",
    ));
    rep.at_most(
        "lambda",
        "λ_n ≤ ½",
        over(&|m| m.dense.lambda_max),
        0.5 + *c.interlacing_tol,
    )
    .note(note(
        "Gershgorin: row sums 2z_i(1 − z_i) ≤ ½; bound ½ + interlacing_tol",
    ))
    .paper_claim("Lemma 1 only states λ_n ≤ z̃_n < 1");
    rep.at_most(
        "tr-sigmalambda-tr",
        "tr J = 1 − ‖z‖²: |Σλ − tr|",
        over(&|m| m.dense.trace_error),
        *c.trace_tol,
    )
    .note(note("1 − ‖z‖² formed as Σ_i z_i Σ_{j≠i} z_j"));
    let two = all.iter().filter(|m| m.n == 2).count();
    if two > 0 {
        rep.at_most(
            "lambda2-2z1z2",
            "n = 2: |λ₂ − 2z₁z₂|",
            stats::max(all.iter().filter_map(|m| m.dense.two_token_error)),
            *c.two_token_tol,
        )
        .note(format!("eigvalsh, {two} two-token instances"));
    } else {
        rep.skip(
            "lambda2-2z1z2",
            "n = 2: |λ₂ − 2z₁z₂|",
            "no instance has n = 2 tokens (the identity is about n = 2)",
        );
    }
    let chain_failures = all.iter().filter(|m| !m.secular.strict_chain).count();
    rep.at_most(
        "eq-exactly-secular-eigenvalues-instances-violating",
        "eq. (8) exactly, secular eigenvalues: instances violating the chain",
        chain_failures as f64,
        0.0,
    )
    .note(format!(
        "0 = λ₁ < z̃₁ ≤ λ₂ ≤ … ≤ λ_n ≤ z̃_n < 1 in exact comparisons, {count} instances \
         (z̃₁ down to {:.1e}, where eigvalsh cannot resolve λ₂)",
        stats::min(all.iter().map(|m| m.z_min))
    ));
    rep.at_most(
        "secular-vs-eigvalsh-deltalambda",
        "secular vs eigvalsh: max |Δλ|",
        over(&|m| m.secular_vs_dense),
        *c.secular_vs_dense_tol,
    )
    .note(note(
        "absolute; both are accurate to ~ε·λ_max in absolute terms",
    ));
    let closed = closed_form_error(p)?;
    let eq7_printed = over(&|m| m.eq7_printed);
    rep.at_most(
        "secular-eigenvalues-vs-closed-forms-rel",
        "secular eigenvalues vs closed forms: max rel. error",
        closed,
        *c.secular_rel_tol,
    )
    .note(format!(
        "dominant token (n = {}, ε ∈ {:?}) and n = 2 (u ∈ {:?}): relative accuracy at any \
         sparsity (§2.8)",
        *p.tail_n, p.tails, p.two_token_gaps
    ));
    rep.at_most(
        "eq-ij-dphi-fd-phi-ij",
        "eq. 7: max_ij |Dφ_fd − J(φ(w))|_ij / z_i",
        over(&|m| m.eq7),
        *c.eq7_rel_tol,
    )
    .note(format!(
        "central differences, h = {:e}; row i held to its scale z_i (Dφ = diag(z)(I − 𝟙zᵀ): \
         the factor diag(z) scales row i by z_i); J = diag(z) − zzᵀ with the diagonal \
         z_iΣ_{{j≠i}}z_j; the printed factorization evaluated literally, z_i(δ_ij − z_j), \
         gives {eq7_printed:.2e}: the printed (6)–(7) are right",
        *p.fd_step
    ))
    .paper_claim(format!(
        "dφ(w)/dw = J(φ(w)) = diag(z)(I_n − 𝟙zᵀ) (eqs. 6–7), evaluated as printed: \
         {eq7_printed:.2e}"
    ));
    rep.derive("max_eq7_rel_error_printed", eq7_printed);
    rep.derive("instances", count);
    rep.derive("max_ln_ratio", stats::max(all.iter().map(|m| m.ln_r)));
    rep.derive("max_lambda_n", over(&|m| m.lambda_n));

    rep.series = Table::new(&[
        "family",
        "n",
        "scale",
        "ln_R",
        "z_min",
        "lambda_2_secular",
        "lambda_2_eigvalsh",
        "lambda_n",
        "interlacing_violation_eigvalsh",
        "trace_error_eigvalsh",
        "secular_vs_eigvalsh",
        "eq7_rel_error",
    ]);
    for m in &all {
        rep.series.push(vec![
            m.family.into(),
            m.n.into(),
            m.scale.into(),
            m.ln_r.into(),
            m.z_min.into(),
            m.lambda_2.0.into(),
            m.lambda_2.1.into(),
            m.lambda_n.into(),
            m.dense.interlacing_violation.into(),
            m.dense.trace_error.into(),
            m.secular_vs_dense.into(),
            m.eq7.into(),
        ]);
    }
    if p.export_spectra {
        rep.tables.push(("spectra".into(), spectra_table(&all)));
    }
    rep.figure = Some(figure(shown_instance(p, &instances.instances), &all)?);
    rep.instance = Some(instances.to_arrays());
    Ok(rep)
}

/// Every instance's spectrum in long format: (instance, family, n, k, λ_k secular, λ_k eigvalsh).
fn spectra_table(all: &[Measured]) -> Table {
    let mut t = Table::new(&[
        "instance",
        "family",
        "n",
        "k",
        "lambda_secular",
        "lambda_eigvalsh",
    ]);
    for (i, m) in all.iter().enumerate() {
        let Some((sec, dense)) = &m.spectra else {
            continue;
        };
        for (k, (a, b)) in sec.iter().zip(dense).enumerate() {
            t.push(vec![
                i.into(),
                m.family.into(),
                m.n.into(),
                (k + 1).into(),
                (*a).into(),
                (*b).into(),
            ]);
        }
    }
    t
}

fn figure((z, caption): (&[f64], String), all: &[Measured]) -> Result<Figure, RunError> {
    let mut fig = Figure::new(2).title(
        "Lemma 1: spectrum of J(z) = diag(z) − zzᵀ — interlacing, and a dense eigensolver vs the secular equation",
    );
    {
        let sec = secular_eigenvalues(z).map_err(|e| RunError::Other(e.to_string()))?;
        let mut sorted = z.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = z.len();
        let k: Vec<f64> = (1..=n).map(|k| k as f64).collect();
        let half: Vec<f64> = (1..n).map(|k| k as f64 + 0.5).collect();
        fig = fig.panel(
            LinePanel::new(caption, "index k (λₖ₊₁ drawn at k + ½)", "z̃ₖ, λₖ₊₁")
                .log_y()
                .series(Series::new("z̃ₖ (sorted z)", k, sorted, LineStyle::Markers).color(0))
                .series(
                    Series::new(
                        "λₖ₊₁ of J (secular)",
                        half,
                        sec[1..].to_vec(),
                        LineStyle::Markers,
                    )
                    .color(1),
                )
                .hline(RefLine::new(0.5, "½").style(LineStyle::Dotted))
                .legend(LegendPosition::LowerRight),
        );
    }
    let (mut x, mut y, mut bound) = (Vec::new(), Vec::new(), Vec::new());
    for m in all {
        let rel = (m.lambda_2.1 - m.lambda_2.0).abs() / m.lambda_2.0;
        if rel > 0.0 {
            x.push(m.lambda_2.0);
            y.push(rel);
        }
    }
    let mut grid: Vec<f64> = x.clone();
    grid.sort_by(f64::total_cmp);
    for &l in &grid {
        bound.push(0.5 * f64::EPSILON / l);
    }
    fig = fig.panel(
        LinePanel::new(
            "relative error of the dense eigensolver's λ₂ (secular as reference)",
            "λ₂ (secular)",
            "|λ₂^{dense} − λ₂| / λ₂",
        )
        .log_x()
        .log_y()
        .series(
            Series::new(
                "dense eigensolver, every instance",
                x,
                y,
                LineStyle::Markers,
            )
            .color(0),
        )
        .series(Series::theory("ε·½/λ₂ (absolute accuracy ε·‖J‖)", grid, bound).color(1))
        .legend(LegendPosition::UpperRight),
    );
    Ok(fig)
}

/// Per n in n_min..=n_max: (scales + 1) × draws dense n × n Jacobians with their spectra and
/// central differences (O(n³) each); every instance's measurements are kept.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let per_n = n(*p.draws) * (n(p.scales.len()) + 1.0);
    // Σ_{k=n_min}^{n_max} k³ in closed form: n_max may be absurd
    let cube_sum = |m: f64| (m * (m + 1.0) / 2.0).powi(2);
    let cubes = cube_sum(n(p.n_max)) - cube_sum(n(*p.n_min) - 1.0);
    Cost::new()
        .work(
            "n_max, draws, scales",
            "dense Jacobians and spectra",
            per_n * cubes,
            20.0,
        )
        .doubles(
            "n_max, draws, scales",
            "the kept measurements",
            16.0 * per_n * n(p.n_max.saturating_sub(*p.n_min) + 1),
        )
        .dense_hessians("tail_n", n(p.tails.len()), n(*p.tail_n), n(*p.tail_n))
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "prompt.lemma1-softmax-jacobian",
    paper: "002",
    summary: "Lemma 1 and eq. 7: J(z) symmetric PSD, J𝟙 = 0, 0 = λ₁ < z̃₁ ≤ λ₂ ≤ … ≤ λ_n ≤ z̃_n, \
              rank-one interlacing, λ_n ≤ ½, tr J = 1 − ‖z‖², with eigvalsh and with the \
              secular equation (relative accuracy at any sparsity).",
    solver: OdeConfig::new(Method::Tsit45, 1e-8, 1e-10),
    validate,
    cost,
    quantities: &[
        "instances",
        "max_eq7_rel_error_printed",
        "max_lambda_n",
        "max_ln_ratio",
    ],
    run,
};

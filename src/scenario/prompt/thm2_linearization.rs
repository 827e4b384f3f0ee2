//! `thm2-linearization` (Theorem 2 part 1, App. D (35)–(42); spec 002 §2.6, §3.6): at the
//! interior equilibrium z* of a (C-quad) loss, the simplex flow's Jacobian on T is
//! DV(z*)P = −(1/N)J²HP (central differences; off T it carries the extra term +(c/N)Jz*𝟙ᵀ, so
//! the projection P is needed when c ≠ 0), the logit flow's is −(1/N)JHJ on T (exact JVP), the
//! exact discrete map's Jacobian on T is I − (η/N)J²H with no O(η²) correction, and iterating
//! the map from z* + ζ₀ contracts ‖ζ_t‖ asymptotically by max|1 − (η/N)λ(J²H)| per step.
//!
//! `data_file` (`z_star`, `H`: layout `instance::prompt::StationaryPoint`) replaces the drawn
//! (z*, A) — and the list `sizes` by the file's n — and `init_file` (`zeta_dir`: layout
//! `instance::prompt::SimplexInit`) the drawn direction of ζ₀. Theorem 2 part 1 holds at any
//! interior z* of any (C-quad) loss, so every check runs on a user's instance.
//!
//! `[params.ripple]` adds a cosine ripple to the loss (`models::prompt::rippled`): ℓ̃ is then
//! non-convex, z* stays an exact interior equilibrium (a local, not global, minimum with
//! ∇²ℓ̃(z*) ≻ 0), and the same checks test Remark 5 ("convexity is not needed"), together with
//! the corrected condition-number bound of part 2 at z* and measured witnesses that ℓ̃ is not
//! convex (a negative Hessian eigenvalue) and that z* is not the global minimum.

use std::path::PathBuf;

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use crate::analysis::linearize::jacobian;
use crate::analysis::linearize::symmetric_eigenvalues;
use crate::flow::{norm, Method, OdeConfig, VectorField};
use crate::instance::prompt::SimplexInit;
use crate::instance::run_instance;
use crate::instance::InstanceError;
use crate::models::prompt::jacobian_spectrum::jacobian_matrix;
use crate::models::prompt::rippled::RippledLoss;
use crate::models::prompt::simplex::{LogitFlow, QuadLoss, SimplexFlow, SimplexLoss};
use crate::models::prompt::simplex_linearization::{
    tangent_basis, tangent_eigenvalues_svd, tangent_linearization, ConditionReport,
};
use crate::plot::{Figure, LegendPosition, LinePanel, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::param::{AtLeastOne, Open01};
use crate::scenario::registry::Kind;
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::common::file_error;
use super::simplex_common::{quad_instance, rel_matrix_error, simplex_instance, SimplexFiles};
use super::thm2_condition_bound::corrected_violation;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Token counts n (spec: 3, 6, 20).
    pub sizes: NonEmpty<AtLeast<2>>,
    /// Linear terms c of (C-quad) (spec: 0, 2.5).
    pub cs: NonEmpty<f64>,
    /// GD step sizes η (spec: 0.1, 0.7).
    pub etas: NonEmpty<Positive>,
    /// Samples N (spec: 3).
    pub samples: AtLeast<1>,
    /// Condition number of the random SPD A, and the logit scale of z* = φ(s·g).
    pub condition: AtLeastOne,
    pub zstar_scale: Positive,
    /// Central-difference step (spec: 1e−6).
    pub fd_step: Positive,
    /// ‖ζ₀‖ of the contraction runs (spec: 1e−6) and the decay factor at which a run stops.
    pub zeta0: Positive,
    pub decay: Open01,
    /// Iteration cap of a contraction run.
    pub max_steps: AtLeast<10>,
    /// z* and H of one (C-quad) loss (layout `instance::prompt::StationaryPoint`), replacing
    /// the draw and `sizes` (the file's n).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<PathBuf>,
    /// The direction of ζ₀ (`zeta_dir`, layout `instance::prompt::SimplexInit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_file: Option<PathBuf>,
    /// A cosine ripple on the loss, making it non-convex (Remark 5); absent: (C-quad).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ripple: Option<Ripple>,
}

/// ℓ̃ = (C-quad) − aΣ_i[cos(b(z_i − z*_i) + φ_i) + b sin(φ_i)(z_i − z*_i)], φ_i = (−1)^iφ
/// (`models::prompt::rippled`): ∇²ℓ̃(z*) = A + ab²cos φ·I, not convex once ab² > min A_kk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ripple {
    /// a, b, φ.
    pub amplitude: f64,
    pub frequency: Positive,
    pub phase: f64,
    /// The linear term that cancels the ripple's slope at z*; false mimics forgetting it (z*
    /// is then not stationary and the checks must fail).
    #[serde(default = "tilt_default")]
    pub tilt: bool,
}

fn tilt_default() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Central-difference Jacobians against the closed forms, max-entry relative (spec 1e−8).
    pub fd_rel_tol: Positive,
    /// Exact-JVP Jacobians against the closed forms (rounding only).
    pub exact_rel_tol: Positive,
    /// |measured asymptotic ratio / max|1 − (η/N)λ| − 1| (spec 1e−4).
    pub rate_rel_tol: Positive,
    /// max_t |‖Bᵀζ_t‖/‖ξ_t‖ − 1| against the linearized iteration from the same ζ₀ (the
    /// nonlinear terms are O(‖ζ‖) relative per step and accumulate over slow runs).
    pub linear_rel_tol: Positive,
    /// With a ripple: relative slack of the corrected bound (μ_T/L_T)ρ² ≤ κ ≤ (L_T/μ_T)ρ² at z*
    /// (as thm2-condition-bound's bound_rel_tol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_rel_tol: Option<Positive>,
}

/// The files; an init file alone (one ζ₀ direction of one length) needs one n in `sizes`.
fn read_files(p: &Params, sc: &Scenario) -> Result<SimplexFiles, InputError> {
    let (data, init) = (p.data_file.as_deref(), p.init_file.as_deref());
    let n = (p.sizes.len() == 1).then(|| *p.sizes[0]);
    let files = SimplexFiles::read(sc, data, init, n)?;
    if data.is_none() && init.is_some() && p.sizes.len() != 1 {
        return Err(sc.invalid(
            "params.sizes",
            "with params.init_file (one ζ₀ of one length) list one n (--set 'sizes=[6]')",
        ));
    }
    if let (Some(init), Some(f)) = (&files.init, init) {
        let start = init.require_zeta_dir().and_then(|dir| match &files.point {
            Some(pt) => start_inside(&pt.z_star, dir, *p.zeta0),
            None => Ok(()),
        });
        start.map_err(|e| file_error(&sc.input_path("init_file", f), "init_file", e))?;
    }
    Ok(files)
}

/// ζ₀ = zeta0·dir/‖dir‖ (the same operations for a drawn and a given direction).
fn scaled_start(dir: &[f64], zeta0: f64) -> nalgebra::DVector<f64> {
    let mut v = nalgebra::DVector::from_column_slice(dir);
    v *= zeta0 / v.norm();
    v
}

/// z* + ζ₀ must stay in the open simplex (the map takes log z).
fn start_inside(z_star: &[f64], dir: &[f64], zeta0: f64) -> Result<(), InstanceError> {
    let start = scaled_start(dir, zeta0);
    match (0..z_star.len()).find(|&i| z_star[i] + start[i] <= 0.0) {
        Some(i) => Err(InstanceError::new(
            format!("zeta_dir[{i}]"),
            format!(
                "z* + ζ₀ leaves the open simplex there (z*[{i}] = {}, ζ₀[{i}] = {} at ‖ζ₀‖ = \
                 params.zeta0 = {zeta0})",
                z_star[i], start[i]
            ),
        )),
        None => Ok(()),
    }
}

/// One size's (C-quad) point (z*, A) and the direction of ζ₀ in T, common to every c.
struct Instance {
    z_star: Vec<f64>,
    a: DMatrix<f64>,
    dir: Vec<f64>,
    /// Whether (z*, A) is the built-in draw (see [`SimplexFiles::quad_or`]).
    builtin: bool,
}

/// (z*, A) drawn from stream n, or the file's point, and then ξ drawn from the same stream and
/// mapped into T by the tangent basis, or the file's direction.
fn instance(n: usize, files: &SimplexFiles, p: &Params, ctx: &RunContext) -> Instance {
    let mut rng = ctx.rng(n as u64);
    let drawn = quad_instance(n, 0.0, *p.condition, *p.zstar_scale, &mut rng);
    let (loss, builtin) = files.quad_or(drawn);
    let xi = crate::models::prompt::attention_families::Attention::standard_normal(n - 1, &mut rng);
    let dir = match files.init.as_ref().and_then(|i| i.zeta_dir.as_ref()) {
        Some(d) => d.clone(),
        None => (tangent_basis(n) * nalgebra::DVector::from_column_slice(&xi))
            .as_slice()
            .to_vec(),
    };
    Instance {
        z_star: loss.z_star().to_vec(),
        a: loss.matrix().clone(),
        dir,
        builtin,
    }
}

fn validate(p: &Params, c: &Checks, sc: &Scenario) -> Result<(), InputError> {
    read_files(p, sc)?;
    if p.ripple.is_some() && c.bound_rel_tol.is_none() {
        return Err(sc.invalid(
            "checks.bound_rel_tol",
            "needed with params.ripple (the corrected bound is checked at z*)",
        ));
    }
    Ok(())
}

/// Central-difference Jacobian of `f` at x along the columns of `dirs`.
fn central_difference(
    f: impl Fn(&[f64], &mut [f64]),
    x: &[f64],
    dirs: &DMatrix<f64>,
    h: f64,
) -> DMatrix<f64> {
    let n = x.len();
    let mut out = DMatrix::zeros(n, dirs.ncols());
    let (mut plus, mut minus) = (vec![0.0; n], vec![0.0; n]);
    for k in 0..dirs.ncols() {
        let shifted = |s: f64| -> Vec<f64> { (0..n).map(|i| x[i] + s * dirs[(i, k)]).collect() };
        f(&shifted(h), &mut plus);
        f(&shifted(-h), &mut minus);
        for i in 0..n {
            out[(i, k)] = (plus[i] - minus[i]) / (2.0 * h);
        }
    }
    out
}

/// A contraction run: ‖Bᵀζ_t‖ sampled for the figure and the asymptotic ratio per step.
struct Contraction {
    t: Vec<f64>,
    norm: Vec<f64>,
    /// ‖ξ_t‖ of the linearized iteration at the same t.
    linear: Vec<f64>,
    ratio: f64,
    predicted: f64,
    steps: usize,
    /// max_t |‖Bᵀζ_t‖ / ‖ξ_t‖ − 1| against the linearized iteration ξ_t.
    linear_dev: f64,
}

#[allow(clippy::too_many_arguments)]
fn contraction(
    flow: &SimplexFlow<dyn SimplexLoss + '_>,
    z_star: &[f64],
    basis: &DMatrix<f64>,
    zeta0: &[f64],
    eta: f64,
    lambdas: &[f64],
    linear_map: &DMatrix<f64>,
    p: &Params,
) -> Contraction {
    let n = z_star.len();
    let mut z: Vec<f64> = (0..n).map(|i| z_star[i] + zeta0[i]).collect();
    let mut next = vec![0.0; n];
    let tangent_norm = |z: &[f64]| {
        let zeta = nalgebra::DVector::from_fn(n, |i, _| z[i] - z_star[i]);
        norm((basis.transpose() * zeta).as_slice())
    };
    let mut norms = vec![tangent_norm(&z)];
    let stop = norms[0] * *p.decay;
    // the linearized iteration ξ ↦ Bᵀ(I − (η/N)J²H)B ξ from the same start
    let m = linear_map;
    let mut xi = basis.transpose() * nalgebra::DVector::from_column_slice(zeta0);
    let mut linear = vec![xi.norm()];
    while norms.len() <= *p.max_steps && *norms.last().unwrap() > stop {
        flow.gd_map(&z, eta, &mut next);
        z.copy_from_slice(&next);
        norms.push(tangent_norm(&z));
        xi = m * xi;
        linear.push(xi.norm());
    }
    let linear_dev = stats::max(norms.iter().zip(&linear).map(|(a, b)| (a / b - 1.0).abs()));
    let steps = norms.len() - 1;
    // geometric mean over the last tenth of the run, which averages out rounding
    let window = (steps / 10).max(1);
    let ratio = (norms[steps] / norms[steps - window]).powf(1.0 / window as f64);
    let predicted = stats::max(
        lambdas
            .iter()
            .map(|&l| (1.0 - eta * flow.inv_samples() * l).abs()),
    );
    let stride = (steps / 300).max(1);
    let kept: Vec<usize> = (0..=steps).step_by(stride).collect();
    Contraction {
        t: kept.iter().map(|&k| k as f64).collect(),
        norm: kept.iter().map(|&k| norms[k]).collect(),
        linear: kept.iter().map(|&k| linear[k]).collect(),
        ratio,
        predicted,
        steps,
        linear_dev,
    }
}

/// One (n, c) instance's Jacobian errors.
struct Case {
    n: usize,
    c: f64,
    fd_flow: f64,
    exact_flow: f64,
    unprojected: f64,
    logit: f64,
    fd_map: Vec<f64>,
    runs: Vec<Contraction>,
    ripple: Option<RippleCase>,
}

/// What the non-convex (rippled) loss adds at one (n, c).
struct RippleCase {
    /// ‖P∇ℓ̃(z*)‖_∞/(‖∇ℓ̃(z*)‖_∞ + ab + max|A_ij|): 0 iff z* is an equilibrium (∇ℓ̃(z*) ∈ span 𝟙).
    stationarity: f64,
    /// λ_min(∇²ℓ̃(z*)) (Theorem 2's μ).
    mu: f64,
    /// κ of J²H on T at z* with the paper's and the corrected bounds.
    condition: ConditionReport,
    /// min λ_min(∇²ℓ̃(z)) over points where one ripple term is at its trough (< 0: not convex).
    witness_curvature: f64,
    /// min ℓ̃(z′) − ℓ̃(z*) over z′ = z* ± (2π/b)(e_k − e_j) in the simplex (< 0: not global).
    lower_value: f64,
}

/// The ripple's diagnostics at z* (the Hessian h there, and the loss's own value and Hessian
/// at nearby points of the open simplex).
fn ripple_case(
    loss: &RippledLoss,
    h: &DMatrix<f64>,
    err: &dyn Fn(crate::analysis::AnalysisError) -> RunError,
) -> Result<RippleCase, RunError> {
    let z_star = loss.quad().z_star();
    let n = z_star.len();
    let mut g = vec![0.0; n];
    loss.grad(z_star, &mut g);
    let mean = g.iter().sum::<f64>() / n as f64;
    let b = loss.frequency();
    // the scale of ∇ℓ̃ near z*: its value, the ripple's slope ab and A's entries
    let scale = stats::max_abs(g.iter()) + loss.curvature() / b + loss.quad().matrix().amax();
    let stationarity = stats::max_abs(g.iter().map(|x| x - mean)) / scale;
    let mu = symmetric_eigenvalues(h).map_err(err)?[0];
    let condition = ConditionReport::new(z_star, h).map_err(err)?;
    // z* + δ(e_k − e_j) inside the simplex (None outside)
    let shifted = |k: usize, j: usize, delta: f64| -> Option<Vec<f64>> {
        let mut z = z_star.to_vec();
        z[k] += delta;
        z[j] -= delta;
        (z[k] > 0.0 && z[j] > 0.0).then_some(z)
    };
    let period = 2.0 * std::f64::consts::PI / b;
    // the trough of term k: b d_k + φ_k ≡ π, mass taken from the largest coordinate
    let top = (0..n)
        .max_by(|&i, &j| z_star[i].total_cmp(&z_star[j]))
        .expect("n ≥ 2");
    let mut curvatures = Vec::new();
    for k in (0..n).filter(|&k| k != top) {
        let delta = ((std::f64::consts::PI - loss.phase_of(k)) / b).rem_euclid(period);
        if let Some(z) = shifted(k, top, delta) {
            curvatures.push(symmetric_eigenvalues(&loss.hessian(&z)).map_err(err)?[0]);
        }
    }
    // the neighbouring wells one period away along every e_k − e_j
    let base = loss.value(z_star);
    let mut drops = Vec::new();
    for k in 0..n {
        for j in (0..n).filter(|&j| j != k) {
            if let Some(z) = shifted(k, j, period) {
                drops.push(loss.value(&z) - base);
            }
        }
    }
    Ok(RippleCase {
        stationarity,
        mu,
        condition,
        witness_curvature: stats::min(curvatures),
        lower_value: stats::min(drops),
    })
}

fn run_case(inst: &Instance, c: f64, p: &Params) -> Result<Case, RunError> {
    let n = inst.z_star.len();
    let err = |e: crate::analysis::AnalysisError| RunError::Other(format!("n = {n}, c = {c}: {e}"));
    // (C-quad) with A = H and linear term c, rippled if asked
    let quad = QuadLoss::new(inst.a.clone(), inst.z_star.clone(), c).map_err(err)?;
    let rippled = p
        .ripple
        .as_ref()
        .map(|r| RippledLoss::new(quad.clone(), r.amplitude, *r.frequency, r.phase, r.tilt));
    let loss: &dyn SimplexLoss = match &rippled {
        Some(r) => r,
        None => &quad,
    };
    let z_star = inst.z_star.clone();
    let flow = SimplexFlow::new(loss, *p.samples);
    let inv_n = flow.inv_samples();
    let h = loss.hessian(&z_star);
    let j = jacobian_matrix(&z_star);
    let basis = tangent_basis(n);
    let projector = &basis * basis.transpose();
    let j2h = &j * &j * &h;
    let expected_p = -(&j2h * &projector) * inv_n;

    // DV(z*)P by central differences, and DV(z*) from the exact JVP against its closed form
    let fd = central_difference(
        |x, out| flow.rhs(0.0, x, out),
        &z_star,
        &DMatrix::identity(n, n),
        *p.fd_step,
    );
    let exact = jacobian(&flow, 0.0, &z_star).map_err(err)?;
    let jz = &j * nalgebra::DVector::from_column_slice(&z_star);
    let closed = -(&j2h - (jz * nalgebra::RowDVector::from_element(n, 1.0)) * c) * inv_n;

    // the logit flow at w* = ln z*: −(1/N)JHJ on T
    let logit_flow = LogitFlow::new(loss, *p.samples);
    let w_star: Vec<f64> = z_star.iter().map(|x| x.ln()).collect();
    let logit_jac = jacobian(&logit_flow, 0.0, &w_star).map_err(err)?;
    let logit_closed = -(basis.transpose() * &j * &h * &j * &basis) * inv_n;

    let lambdas = tangent_eigenvalues_svd(&z_star, &h).map_err(err)?;
    let flow_on_t = tangent_linearization(&z_star, &h, *p.samples);
    let zeta0 = scaled_start(&inst.dir, *p.zeta0);
    let mut fd_map = Vec::new();
    let mut runs = Vec::new();
    for eta in p.etas.iter().map(|e| **e) {
        let map_fd = central_difference(
            |x, out| flow.gd_map(x, eta, out),
            &z_star,
            &basis,
            *p.fd_step,
        );
        // I − (η/N)BᵀJ²HB = I + η·(the flow's linearization on T)
        let expected = DMatrix::identity(n - 1, n - 1) + &flow_on_t * eta;
        fd_map.push(rel_matrix_error(&(basis.transpose() * map_fd), &expected));
        runs.push(contraction(
            &flow,
            &z_star,
            &basis,
            zeta0.as_slice(),
            eta,
            &lambdas,
            &expected,
            p,
        ));
    }
    let ripple = match &rippled {
        Some(r) => Some(ripple_case(r, &h, &err)?),
        None => None,
    };
    Ok(Case {
        ripple,
        n,
        c,
        fd_flow: rel_matrix_error(&(fd * &projector), &expected_p),
        exact_flow: rel_matrix_error(&exact, &closed),
        unprojected: rel_matrix_error(&exact, &(-&j2h * inv_n)),
        logit: rel_matrix_error(&(basis.transpose() * logit_jac * &basis), &logit_closed),
        fd_map,
        runs,
    })
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let files = read_files(p, ctx.scenario)?;
    let sizes = match &files.point {
        Some(pt) => vec![pt.z_star.len()],
        None => p.sizes.iter().map(|n| **n).collect(),
    };
    let mut cases = Vec::new();
    let mut written = Vec::new();
    let mut builtin = true;
    for &n in &sizes {
        let inst = instance(n, &files, p, ctx);
        builtin &= inst.builtin;
        start_inside(&inst.z_star, &inst.dir, *p.zeta0)
            .map_err(|e| RunError::Other(format!("init_file: {}: {}", e.key, e.reason)))?;
        for &cc in p.cs.iter() {
            cases.push(run_case(&inst, cc, p)?);
        }
        let loss = QuadLoss::new(inst.a, inst.z_star, 0.0).expect("checked above");
        let start = SimplexInit {
            zeta_dir: Some(inst.dir),
            w0: None,
        };
        written.push((format!("n{n}"), simplex_instance(&loss, start)));
    }
    // one size's arrays as they are (the file feeds back), several under n<k>_
    let mut rep = Report {
        instance: Some(run_instance(written)),
        ..Report::default()
    };
    let count = cases.len();
    let over = |f: &dyn Fn(&Case) -> f64| stats::max(cases.iter().map(f));
    let setting = format!(
        "n ∈ {sizes:?}, c ∈ {:?}, N = {}, {}",
        p.cs,
        *p.samples,
        match builtin {
            true => format!("z* = φ({}·g), κ(A) = {}", *p.zstar_scale, *p.condition),
            false => "z*, A = H from data_file".to_string(),
        }
    );
    let unprojected = stats::min(cases.iter().filter(|k| k.c != 0.0).map(|k| k.unprojected));
    rep.at_most(
        "flow-dv-central-differences-vs-j2hp",
        "flow: DV(z*)P (central differences) vs −(1/N)J²HP",
        over(&|k| k.fd_flow),
        *c.fd_rel_tol,
    )
    .note(format!(
        "max-entry relative, h = {:e}; {setting}",
        *p.fd_step
    ));
    rep.at_most(
        "flow-dv-exact-jvp-vs-j2h",
        "flow: DV(z*) (exact JVP) vs −(1/N)(J²H − c·Jz*𝟙ᵀ)",
        over(&|k| k.exact_flow),
        *c.exact_rel_tol,
    )
    .note(format!(
        "the off-T term c·Jz*𝟙ᵀ/N is why P is needed: without it the mismatch is ≥ \
         {unprojected:.3} whenever c ≠ 0 (0 for c = 0); {count} cases"
    ));
    rep.at_most(
        "logit-flow-jacobian-exact-jvp-vs",
        "logit flow: Jacobian on T (exact JVP) vs −(1/N)BᵀJHJB",
        over(&|k| k.logit),
        *c.exact_rel_tol,
    )
    .note("symmetric on T: the z-space linearization −(1/N)J²H is J·(−(1/N)JHJ)·J⁻¹");
    rep.at_most(
        "gd-map-jacobian-central-differences-vs",
        "GD map: Jacobian on T (central differences) vs I − (η/N)J²H",
        stats::max(cases.iter().flat_map(|k| k.fd_map.iter().copied())),
        *c.fd_rel_tol,
    )
    .note(format!(
        "η ∈ {:?}: exact at the fixed point, no O(η²) term (Thm 2.1, eq. 42)",
        p.etas
    ));
    let rate_error = stats::max(
        cases
            .iter()
            .flat_map(|k| k.runs.iter().map(|r| (r.ratio / r.predicted - 1.0).abs())),
    );
    let runs = || cases.iter().flat_map(|k| k.runs.iter());
    let log_rate_error = stats::max(runs().map(|r| (r.ratio.ln() / r.predicted.ln() - 1.0).abs()));
    let capped = runs().filter(|r| r.steps >= *p.max_steps).count();
    rep.derive("log_rate_rel_error", log_rate_error);
    rep.at_most(
        "contraction-ratio-eta-lambda-j2h",
        "contraction: |ratio / max|1 − (η/N)λ(J²H)| − 1|",
        rate_error,
        *c.rate_rel_tol,
    )
    .note(format!(
        "‖Bᵀζ_t‖ from ‖ζ₀‖ = {:e} until it decays by {:e} (≤ {} steps; {capped} of {} runs \
         hit the cap, pre-asymptotic), geometric mean of the last tenth; as decay rates, \
         |ln ratio/ln prediction − 1| ≤ {log_rate_error:.2e}",
        *p.zeta0,
        *p.decay,
        *p.max_steps,
        runs().count()
    ));
    rep.at_most(
        "contraction-btzeta-xi-xi-bt-eta",
        "contraction: max_t |‖Bᵀζ_t‖/‖ξ_t‖ − 1|, ξ_t+1 = Bᵀ(I − (η/N)J²H)Bξ_t",
        stats::max(runs().map(|r| r.linear_dev)),
        *c.linear_rel_tol,
    )
    .note(
        "the GD map against its linearization along the whole run (every mode, also \
         before the asymptotic regime); the deviation is nonlinear, O(‖ζ‖) per step",
    );
    if let Some(r) = &p.ripple {
        ripple_checks(&mut rep, &cases, r, c);
    }

    rep.series = Table::new(&[
        "n",
        "c",
        "eta",
        "steps",
        "measured_ratio",
        "predicted_ratio",
        "linear_deviation",
        "fd_flow_rel_error",
        "exact_flow_rel_error",
        "unprojected_mismatch",
        "logit_rel_error",
        "fd_map_rel_error",
    ]);
    let mut curves = Table::new(&["n", "c", "eta", "t", "tangent_norm", "linearized_norm"]);
    for k in &cases {
        for (i, r) in k.runs.iter().enumerate() {
            rep.series.push(vec![
                k.n.into(),
                k.c.into(),
                (*p.etas[i]).into(),
                r.steps.into(),
                r.ratio.into(),
                r.predicted.into(),
                r.linear_dev.into(),
                k.fd_flow.into(),
                k.exact_flow.into(),
                k.unprojected.into(),
                k.logit.into(),
                k.fd_map[i].into(),
            ]);
            curves.push_columns(
                &[k.n.into(), k.c.into(), (*p.etas[i]).into()],
                &[&r.t, &r.norm, &r.linear],
            );
        }
    }
    rep.tables.push(("contraction".into(), curves));
    rep.figure = Some(figure(p, &sizes, &cases));
    Ok(rep)
}

/// Remark 5 on the rippled loss: z* is an equilibrium with ∇²ℓ̃(z*) ≻ 0 (Theorem 2's
/// hypotheses), the corrected bound of part 2 holds there, and the loss is really non-convex
/// with z* not its global minimum (else the run would say nothing about convexity).
fn ripple_checks(rep: &mut Report, cases: &[Case], r: &Ripple, c: &Checks) {
    let ripples: Vec<(usize, f64, &RippleCase)> = cases
        .iter()
        .filter_map(|k| k.ripple.as_ref().map(|q| (k.n, k.c, q)))
        .collect();
    let over = |f: &dyn Fn(&RippleCase) -> f64| stats::max(ripples.iter().map(|(_, _, q)| f(q)));
    let under = |f: &dyn Fn(&RippleCase) -> f64| stats::min(ripples.iter().map(|(_, _, q)| f(q)));
    let ripple = format!(
        "a = {}, b = {}, φ = {} (ab² = {}){}",
        r.amplitude,
        r.frequency,
        r.phase,
        r.amplitude * *r.frequency * *r.frequency,
        if r.tilt { "" } else { ", without the tilt" }
    );
    rep.at_most(
        "ripple-zstar-stationary",
        "rippled ℓ̃: ‖P∇ℓ̃(z*)‖_∞ / (‖∇ℓ̃(z*)‖_∞ + ab + max|A_ij|) (z* an interior equilibrium)",
        over(&|q| q.stationarity),
        *c.exact_rel_tol,
    )
    .note(format!(
        "V(z*) = 0 iff ∇ℓ̃(z*) ∈ span 𝟙 (§2.5); the tilt −ab sin(φ_i)d_i cancels the \
         ripple's slope; {ripple}"
    ));
    rep.at_least(
        "ripple-hessian-positive-at-zstar",
        "rippled ℓ̃: μ = λ_min(∇²ℓ̃(z*)) > 0 (Theorem 2's hypothesis)",
        under(&|q| q.mu),
        0.0,
    )
    .note("∇²ℓ̃(z*) = A + ab²cos φ·I; the smallest over every (n, c)");
    let corrected = over(&|q| corrected_violation(&q.condition));
    let paper_fails = ripples
        .iter()
        .filter(|(_, _, q)| q.condition.kappa < q.condition.paper_bound())
        .count();
    let tol = *c.bound_rel_tol.expect("validated: required with a ripple");
    rep.at_most(
        "ripple-corrected-condition-bound",
        "rippled ℓ̃: corrected bound (μ_T/L_T)ρ² ≤ κ ≤ (L_T/μ_T)ρ², z̃_{n−1}/z̃₂ ≤ ρ ≤ R at z*: \
         max rel. violation",
        corrected,
        tol,
    )
    .note(format!(
        "κ of J²∇²ℓ̃(z*) on T: {}",
        ripples
            .iter()
            .map(|(n, cc, q)| format!(
                "n = {n}, c = {cc}: κ = {:.4}, ρ = {:.4}, R = {:.4}",
                q.condition.kappa,
                q.condition.rho(),
                q.condition.r
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ))
    .paper_claim(format!(
        "(18) κ ≥ (μ/L)R²: violated at {paper_fails} of {} (n, c)",
        ripples.len()
    ));
    rep.at_most(
        "ripple-nonconvex-witness",
        "rippled ℓ̃ is not convex: max over n of min_z λ_min(∇²ℓ̃(z)) at ripple troughs",
        over(&|q| q.witness_curvature),
        0.0,
    )
    .note(format!(
        "z = z* + δ(e_k − e_j) with bδ + φ_k ≡ π (j the largest z*_j), where the diagonal \
         entry is A_kk − ab²; < 0 in every instance means Remark 5 is exercised; {ripple}"
    ));
    rep.at_most(
        "ripple-zstar-not-global-minimum",
        "rippled ℓ̃: z* is not the global minimum: max over n of min ℓ̃(z′) − ℓ̃(z*)",
        over(&|q| q.lower_value),
        0.0,
    )
    .note(
        "z′ = z* + (2π/b)(e_k − e_j) inside the simplex, every k ≠ j: the neighbouring \
         ripple well, lower by the tilt",
    );
    rep.derive("ripple_min_mu", under(&|q| q.mu));
    rep.derive("ripple_witness_curvature", over(&|q| q.witness_curvature));
    rep.derive("ripple_lower_value", over(&|q| q.lower_value));
}

fn figure(p: &Params, sizes: &[usize], cases: &[Case]) -> Figure {
    let mut fig = Figure::new(sizes.len().min(3)).title(
        "Theorem 2.1: GD map from z* + ζ₀ (solid) vs its linearization I − (η/N)J²H on T (dashed); \
         c = 0 and c = 2.5 coincide",
    );
    for &n in sizes {
        let mut panel = LinePanel::new(
            format!("n = {n}, N = {}", *p.samples),
            "iteration t",
            "‖Bᵀζ_t‖",
        )
        .log_y()
        .legend(LegendPosition::UpperRight);
        let mut color = 0;
        for k in cases.iter().filter(|k| k.n == n) {
            for (i, r) in k.runs.iter().enumerate() {
                let label = format!(
                    "c = {}, η = {}: 1 − ρ = {:.2e}",
                    k.c,
                    p.etas[i],
                    1.0 - r.predicted
                );
                panel = panel
                    .series(Series::numerics(label, r.t.clone(), r.norm.clone()).color(color))
                    .series(Series::theory("", r.t.clone(), r.linear.clone()).color(color));
                color += 1;
            }
        }
        fig = fig.panel(panel);
    }
    fig
}

/// Per (n, c): the Hessian and two dense Jacobians (n × n), and per η a contraction run of up
/// to `max_steps` steps of O(n²) keeping one norm per step.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let cases = n(p.cs.len()) * n(p.etas.len());
    p.sizes.iter().fold(Cost::new(), |cost, &size| {
        let size = *size;
        let step = 4.0 * n(size) * n(size) * n(*p.samples);
        cost.dense_hessians("sizes", 3.0 * n(p.cs.len()), n(size), step)
            .work(
                "max_steps, sizes",
                "contraction steps",
                cases * n(*p.max_steps),
                step,
            )
            .doubles("max_steps", "norms per step", cases * n(*p.max_steps))
    })
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "prompt.thm2-linearization",
    paper: "002",
    summary: "Theorem 2 part 1 on (C-quad): DV(z*)P = −(1/N)J²HP (and the off-T term without P), \
              the logit flow's −(1/N)JHJ, the GD map's exact Jacobian I − (η/N)J²H on T, and the \
              predicted contraction rate max|1 − (η/N)λ|.",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-12),
    validate,
    cost,
    quantities: &["log_rate_rel_error", "ripple_*"],
    run,
};

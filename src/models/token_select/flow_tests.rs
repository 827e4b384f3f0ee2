//! Tests of the normalized, log-time and Polyak flows: exact Jacobians, the two-token
//! reference values of spec 003 §4.2, and the path-equivalence fact of §2.3.

use super::generators::{self, Example1};
use super::*;
use crate::attention::testing::{gaussian_vec, rel_err, rng};
use crate::attention::{FixedDecoder, Loss};
use crate::flow::{integrate, GradientFlow, Method, OdeConfig, VectorField};

/// Central difference of the field's rhs, the check of its analytic Jacobian's algebra (the
/// HVP inside it is checked against forward-mode AD in `tests.rs`).
fn jvp_error(field: &dyn VectorField, t: f64, z: &[f64], v: &[f64]) -> f64 {
    let n = field.dim();
    let h = 1e-6;
    let shifted = |sign: f64| {
        let zs: Vec<f64> = z.iter().zip(v).map(|(a, b)| a + sign * h * b).collect();
        let mut out = vec![0.0; n];
        field.rhs(t, &zs, &mut out);
        out
    };
    let (plus, minus) = (shifted(1.0), shifted(-1.0));
    let fd: Vec<f64> = plus
        .iter()
        .zip(&minus)
        .map(|(p, m)| (p - m) / (2.0 * h))
        .collect();
    let mut jv = vec![0.0; n];
    field.jvp(t, z, v, &mut jv);
    rel_err(&jv, &fd)
}

fn small_ex1() -> FixedDecoder {
    let inst = Example1 {
        n: 3,
        t: 3,
        d: 4,
        ..Example1::ex1()
    }
    .generate(&mut rng(11))
    .unwrap();
    FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential).unwrap()
}

#[test]
fn flow_jacobians_match_differences_of_their_fields() {
    let model = small_ex1();
    let mut r = rng(12);
    let w = gaussian_vec(&mut r, model.dim(), 0.7);
    let ngf = NormalizedFlow::new(&model);
    let mut z = ngf.initial_state(&w);
    z[model.dim()] = 0.3;
    let v = gaussian_vec(&mut r, ngf.dim(), 1.0);
    assert!(jvp_error(&ngf, 0.0, &z, &v) < 1e-7);
    let gf = LogTimeGradientFlow::new(&model);
    let z = gf.initial_state(&w);
    assert!(jvp_error(&gf, 2.0, &z, &v[..gf.dim()]) < 1e-7);
    let pf = PolyakFlow::new(&model);
    assert!(jvp_error(&pf, 0.0, &z, &v[..pf.dim()]) < 1e-7);

    let inst = generators::GaussianJoint {
        n: 3,
        d: 4,
        ..generators::GaussianJoint::dm()
    }
    .generate(&mut r)
    .unwrap();
    let joint = JointModel::new(inst.data, Loss::Exponential);
    let z = gaussian_vec(&mut r, joint.dim(), 2.0);
    let v = gaussian_vec(&mut r, joint.dim(), 1.0);
    for norm in [
        JointNormalization::PerBlock {
            alpha: 1.0 / 3.0,
            s0: 0.1,
        },
        JointNormalization::Full,
    ] {
        let field = JointNormalizedFlow::new(&joint, norm);
        assert!(jvp_error(&field, 0.7, &z, &v) < 1e-7, "{norm:?}");
    }
}

#[test]
fn joint_normalized_field_has_the_prescribed_block_speeds() {
    let inst = generators::GaussianJoint::dm()
        .generate(&mut rng(13))
        .unwrap();
    let joint = JointModel::new(inst.data, Loss::Exponential);
    let d = joint.data().d;
    let z = gaussian_vec(&mut rng(14), joint.dim(), 1.0);
    let (alpha, s0, s) = (1.0 / 3.0, 0.1, 5.0);
    let field = JointNormalizedFlow::new(&joint, JointNormalization::PerBlock { alpha, s0 });
    let mut dz = vec![0.0; joint.dim()];
    field.rhs(s, &z, &mut dz);
    let speed = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((speed(&dz[..d]) - 1.0).abs() < 1e-14);
    assert!((speed(&dz[d..]) - (1.0 + s / s0).powf(-alpha)).abs() < 1e-14);
    let full = JointNormalizedFlow::new(&joint, JointNormalization::Full);
    full.rhs(s, &z, &mut dz);
    let mut g = vec![0.0; joint.dim()];
    joint.grad(&z, &mut g);
    let gn = speed(&g);
    let want: Vec<f64> = g.iter().map(|x| -x / gn).collect();
    assert!(rel_err(&dz, &want) < 1e-14);
    // W-gradient vanishes at u = 0: the W block stays put, u moves at unit speed
    let mut z0 = vec![0.0; joint.dim()];
    z0[d] = 0.5;
    field.rhs(0.0, &z0, &mut dz);
    assert!(dz[d..].iter().all(|&x| x == 0.0));
    assert!((speed(&dz[..d]) - 1.0).abs() < 1e-14);
}

/// Logit gap g = W₁₁ − W₂₁ of a two-token state (column-major).
fn gap(z: &[f64]) -> f64 {
    z[0] - z[1]
}

#[test]
fn two_token_gradient_flow_reproduces_the_reference_table() {
    let inst = generators::two_token();
    let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential).unwrap();
    let gf = LogTimeGradientFlow::new(&model);
    let identity = [1.0, 0.0, 0.0, 1.0];
    let times = [0.0, 1e2, 1e4, 1e6];
    let taus: Vec<f64> = times
        .iter()
        .map(|&t| LogTimeGradientFlow::tau_of(t))
        .collect();
    let cfg = OdeConfig::new(Method::Tsit45, 1e-11, 1e-13);
    let tr = integrate(&gf, &gf.initial_state(&identity), &taus, &cfg, None).unwrap();
    // spec 003 §4.2: GF g(t) at t = 1e2, 1e4, 1e6 and 1 − corr there
    let p = 1.5;
    for (k, (g_ref, gap_ref)) in [
        (4.288231, 7.2778e-2),
        (8.902759, 1.8404e-2),
        (13.508644, 8.1199e-3),
    ]
    .into_iter()
    .enumerate()
    {
        let z = tr.state(k + 1);
        assert!(
            (gap(z) - g_ref).abs() < 1e-6 * g_ref,
            "t = {}: g = {}",
            times[k + 1],
            gap(z)
        );
        // c = ⟨W, D̂⟩ = g/√2 + c₀ − g₀/√2 ... here W₀ = I gives c = g/√2
        let c = gap(z) / 2f64.sqrt();
        let one_minus_corr = (p / (c * c + p)) / (1.0 + c / (c * c + p).sqrt());
        assert!(
            (one_minus_corr - gap_ref).abs() < 1e-4 * gap_ref,
            "{one_minus_corr}"
        );
        // the arc length is the distance travelled along D̂: √2·(g − g₀)/2
        let s = z[4];
        assert!((s - (gap(z) - 1.0) / 2f64.sqrt()).abs() < 1e-8);
    }
}

#[test]
fn normalized_flow_clock_and_path_match_gradient_flow() {
    // two-token: the NGF moves along D̂ at unit speed, so g(s) = 1 + √2 s exactly, and its
    // GF clock must read t = 1e6 where g = 13.508644 (spec table)
    let inst = generators::two_token();
    let model = FixedDecoder::new(inst.data, inst.decoder, Loss::Exponential).unwrap();
    let ngf = NormalizedFlow::new(&model);
    let g_end: f64 = 13.508644;
    let s_end = (g_end - 1.0) / 2f64.sqrt();
    let cfg = OdeConfig::new(Method::Tsit45, 1e-10, 1e-12);
    let tr = integrate(
        &ngf,
        &ngf.initial_state(&[1.0, 0.0, 0.0, 1.0]),
        &[0.0, s_end],
        &cfg,
        None,
    )
    .unwrap();
    let z = tr.last_state();
    assert!((gap(z) - g_end).abs() < 1e-9);
    let log_t = ngf.log1p_gf_time(z);
    assert!((log_t - 1e6f64.ln_1p()).abs() < 1e-6, "ψ = {log_t}");
    assert!(ngf.pf_time(z) > 0.0);
}

#[test]
fn gradient_normalized_and_polyak_flows_share_one_path() {
    let model = small_ex1();
    let w0 = gaussian_vec(&mut rng(15), model.dim(), 0.1);
    let cfg = OdeConfig::new(Method::Tsit45, 1e-11, 1e-13);
    // GF to t = 1e4 in log time; its arc length s fixes where to compare
    let gf = LogTimeGradientFlow::new(&model);
    let tau_end = LogTimeGradientFlow::tau_of(1e4);
    let tr = integrate(&gf, &gf.initial_state(&w0), &[0.0, tau_end], &cfg, None).unwrap();
    let m = model.dim();
    let (w_gf, s_end) = (&tr.last_state()[..m], tr.last_state()[m]);
    assert!(s_end > 3.0, "arc length {s_end}");
    let ngf = NormalizedFlow::new(&model);
    let tr = integrate(&ngf, &ngf.initial_state(&w0), &[0.0, s_end], &cfg, None).unwrap();
    let z = tr.last_state();
    assert!(
        rel_err(&z[..m], w_gf) < 1e-7,
        "NGF vs GF {}",
        rel_err(&z[..m], w_gf)
    );
    assert!((ngf.log1p_gf_time(z) - tau_end).abs() < 1e-6);
    // PF to the time its own clock (carried by the NGF) assigns to arc length s_end
    let pf = PolyakFlow::new(&model);
    let t_pf = ngf.pf_time(z);
    let tr = integrate(&pf, &pf.initial_state(&w0), &[0.0, t_pf], &cfg, None).unwrap();
    let zp = tr.last_state();
    assert!(
        rel_err(&zp[..m], w_gf) < 1e-7,
        "PF vs GF {}",
        rel_err(&zp[..m], w_gf)
    );
    assert!((zp[m] - s_end).abs() < 1e-7 * s_end);
}

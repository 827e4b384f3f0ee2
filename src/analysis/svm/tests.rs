//! Max-margin programs against the closed forms of spec 003 §3.4 and spec 001 §5.1, primal vs
//! dual agreement, infeasibility detection, and the JSON round trip.

use super::*;
use crate::stats;

const KKT_TOL: f64 = 1e-8;

fn view<'a>(n: usize, t: usize, d: usize, x: &'a [f64], q: &'a [f64]) -> TokenView<'a> {
    TokenView {
        n,
        t,
        d,
        x,
        queries: q,
    }
}

/// First tokens of each sequence as queries.
fn first_tokens(n: usize, t: usize, d: usize, x: &[f64]) -> Vec<f64> {
    (0..n)
        .flat_map(|i| x[i * t * d..i * t * d + d].to_vec())
        .collect()
}

fn w_svm_both(c: &RankOneConstraints) -> (L2Solution, L2Solution) {
    let dual = solve_l2(c, SvmMethod::Dual).unwrap();
    let primal = solve_l2(c, SvmMethod::Primal).unwrap();
    for s in [&dual, &primal] {
        assert!(s.kkt.passes(KKT_TOL), "{:?}: {:?}", s.method, s.kkt);
    }
    (dual, primal)
}

#[test]
fn two_token_w_svm_is_d_over_two() {
    let x = [1.0, 0.0, 0.0, 1.0];
    let q = first_tokens(1, 2, 2, &x);
    let c = RankOneConstraints::w_svm(&view(1, 2, 2, &x, &q), &[0]).unwrap();
    let (dual, primal) = w_svm_both(&c);
    // D = (e₁ − e₂)e₁ᵀ: W_mm = D/2, column-major (W₁₁, W₂₁, W₁₂, W₂₂)
    let want = [0.5, -0.5, 0.0, 0.0];
    for s in [&dual, &primal] {
        assert!(s.polished);
        assert!(stats::max_abs_diff(&s.w, &want) < 1e-12, "{:?}", s.w);
        assert!((s.norm - 0.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.support, vec![0]);
    }
}

#[test]
fn bad_init_w_svm_closed_form() {
    #[rustfmt::skip]
    let x = [1.0, 0.0, 0.0,  0.0, 1.0, 0.0,  -1.0, 0.0, 0.0,  0.0, 0.0, 1.0];
    let q = first_tokens(2, 2, 3, &x);
    let c = RankOneConstraints::w_svm(&view(2, 2, 3, &x, &q), &[0, 0]).unwrap();
    let (dual, primal) = w_svm_both(&c);
    let mut want = vec![0.0; 9];
    want[..3].copy_from_slice(&[2.0 / 3.0, -1.0 / 3.0, 1.0 / 3.0]);
    for s in [&dual, &primal] {
        assert!(stats::max_abs_diff(&s.w, &want) < 1e-10, "{:?}", s.w);
        assert!((s.norm.powi(2) - 2.0 / 3.0).abs() < 1e-10);
        assert_eq!(s.tight, vec![0, 1]);
        // strong duality ‖W‖² = 1ᵀα
        assert!((s.alpha.iter().sum::<f64>() - 2.0 / 3.0).abs() < 1e-10);
    }
}

#[test]
fn orthogonal_constraints_give_the_sum_of_their_projections() {
    // D₁ = (e₁ + e₂)e₁ᵀ and D₂ = (e₃ − ½e₄)e₃ᵀ are orthogonal: W_mm = Σ D_k/‖D_k‖²
    #[rustfmt::skip]
    let x = [
        1.0, 0.0, 0.0, 0.0,   0.0, -1.0, 0.0, 0.0,
        0.0, 0.0, 1.0, 0.0,   0.0, 0.0, 0.0, 0.5,
    ];
    let q = first_tokens(2, 2, 4, &x);
    let c = RankOneConstraints::w_svm(&view(2, 2, 4, &x, &q), &[0, 0]).unwrap();
    let (dual, _) = w_svm_both(&c);
    let mut want = vec![0.0; 16];
    want[0] = 0.5; // (e₁+e₂)e₁ᵀ/2: column 0
    want[1] = 0.5;
    want[2 * 4 + 2] = 1.0 / 1.25; // (e₃ − ½e₄)e₃ᵀ/1.25: column 2
    want[2 * 4 + 3] = -0.5 / 1.25;
    assert!(stats::max_abs_diff(&dual.w, &want) < 1e-12);
}

/// A deterministic pseudo-random array in [−1, 1).
fn pseudo_random(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn dual_and_primal_agree_on_random_feasible_data() {
    for seed in 0..4 {
        let (n, t, d) = (5, 4, 6);
        let x = pseudo_random(n * t * d, seed);
        let q = first_tokens(n, t, d, &x);
        let opt: Vec<usize> = (0..n).map(|i| i % t).collect();
        let c = RankOneConstraints::w_svm(&view(n, t, d, &x, &q), &opt).unwrap();
        let (dual, primal) = w_svm_both(&c);
        let rel = stats::max_abs_diff(&dual.w, &primal.w) / dual.norm;
        assert!(rel < 1e-6, "seed {seed}: primal vs dual {rel}");
        assert!(
            (dual.norm.powi(2) - dual.alpha.iter().sum::<f64>()).abs() < 1e-10 * dual.norm.powi(2)
        );
        // the solution is feasible and no shorter feasible point exists along any support
        // constraint's direction: every support constraint is tight
        for &k in &dual.support {
            assert!((dual.margins[k] - 1.0).abs() < 1e-9);
        }
    }
}

#[test]
fn infeasible_and_malformed_inputs_are_errors() {
    // sequence 2 asks for the opposite of sequence 1: D₂ = −D₁
    #[rustfmt::skip]
    let x = [1.0, 0.0, 0.0, 1.0,   1.0, 0.0, 0.0, 1.0];
    let q = first_tokens(2, 2, 2, &x);
    let c = RankOneConstraints::w_svm(&view(2, 2, 2, &x, &q), &[0, 1]).unwrap();
    for method in [SvmMethod::Dual, SvmMethod::Primal] {
        match solve_l2(&c, method) {
            Err(SvmError::Infeasible { detail, .. }) => {
                assert!(
                    detail.contains("sequence 0") && detail.contains("sequence 1"),
                    "{detail}"
                )
            }
            other => panic!("{method:?}: expected infeasible, got {other:?}"),
        }
    }
    // equal tokens: a zero constraint
    let x = [1.0, 0.0, 1.0, 0.0];
    let q = first_tokens(1, 2, 2, &x);
    let c = RankOneConstraints::w_svm(&view(1, 2, 2, &x, &q), &[0]).unwrap();
    let err = solve_l2(&c, SvmMethod::Dual).unwrap_err();
    assert!(err.to_string().contains("identically zero"), "{err}");
    assert!(matches!(
        RankOneConstraints::w_svm(&view(1, 2, 2, &x, &q), &[2]),
        Err(SvmError::Invalid { field, .. }) if field == "opt[0]"
    ));
}

#[test]
fn u_svm_closed_form() {
    // y_i x_{i,opt} = (1, 0) and (0, 2): u_mm = (1, ½)
    #[rustfmt::skip]
    let x = [1.0, 0.0, 0.3, 0.3,   0.0, -2.0, 0.1, 0.0];
    let q = first_tokens(2, 2, 2, &x);
    let c = VectorConstraints::u_svm(&view(2, 2, 2, &x, &q), &[1.0, -1.0], &[0, 0]).unwrap();
    let s = solve_l2(&c, SvmMethod::Dual).unwrap();
    assert!(stats::max_abs_diff(&s.w, &[1.0, 0.5]) < 1e-12);
    assert!(s.kkt.passes(KKT_TOL));
    let m = margins(&c, &s.w);
    assert!((m.normalized - 1.0 / 1.25f64.sqrt()).abs() < 1e-12);
}

/// Spec 001 toy-2(c): B₁ = (2, c, 0, 0), B₂ = (0, c, 2, 0) from tokens and queries z.
fn toy2(c: f64) -> TokenProblem {
    TokenProblem::from_json(&format!(
        r#"{{"X": [[[0,0,0,2],[-2,-{c},0,0]], [[0,0,0,-2],[0,-{c},-2,0]]],
            "y": [1, -1], "u": [0,0,0,1], "z": [[1,1,1,0],[1,1,1,0]]}}"#
    ))
    .unwrap()
}

#[test]
fn l1_and_l2_diagonal_svms_on_spec_001_toy_2b() {
    let p = toy2(1.6);
    assert_eq!(p.opt, vec![0, 0]);
    let diag = p.w_svm_constraints().unwrap().diagonal().unwrap();
    assert!(
        stats::max_abs_diff(diag.f.row(0).transpose().as_slice(), &[2.0, 1.6, 0.0, 0.0]) < 1e-15
    );
    let l1 = solve_l1(&diag).unwrap();
    assert!(l1.kkt.passes(KKT_TOL), "{:?}", l1.kkt);
    assert!(
        stats::max_abs_diff(&l1.beta, &[0.0, 0.625, 0.0, 0.0]) < 1e-7,
        "{:?}",
        l1.beta
    );
    assert!((l1.norm_l1 - 0.625).abs() < 1e-8);
    assert!((l1.lambda.iter().sum::<f64>() - 0.625).abs() < 1e-8);
    let ranges = l1_solution_ranges(&diag, l1.norm_l1, 1e-9).unwrap();
    assert!(
        ranges.iter().all(|(lo, hi)| hi - lo < 1e-7),
        "unique: {ranges:?}"
    );
    let l2 = solve_l2(&diag, SvmMethod::Dual).unwrap();
    let want = [0.219298, 0.350877, 0.219298, 0.0];
    assert!(stats::max_abs_diff(&l2.w, &want) < 1e-6, "{:?}", l2.w);
    assert!((l2.norm - 0.468293).abs() < 1e-6);
    // ℓ2 ∝ B₁ + B₂ = (2, 3.2, 2, 0), so cos(ℓ1, ℓ2) = 3.2/√18.24 (spec 001 rounds it to 0.75)
    let cos = 3.2 / 18.24f64.sqrt();
    assert!((one_minus_cos(&l1.beta, &l2.w) - (1.0 - cos)).abs() < 1e-7);
}

#[test]
fn degenerate_l1_problem_reports_its_solution_segment() {
    // toy-2(1.0): the ℓ1 solutions form the segment [(0,1,0,0), (½,0,½,0)], OPT₁ = 1
    let diag = toy2(1.0).w_svm_constraints().unwrap().diagonal().unwrap();
    let l1 = solve_l1(&diag).unwrap();
    assert!((l1.norm_l1 - 1.0).abs() < 1e-8);
    let ranges = l1_solution_ranges(&diag, l1.norm_l1, 1e-9).unwrap();
    for (j, (lo, hi)) in [(0.0, 0.5), (0.0, 1.0), (0.0, 0.5), (0.0, 0.0)]
        .into_iter()
        .enumerate()
    {
        assert!(
            (ranges[j].0 - lo).abs() < 1e-6 && (ranges[j].1 - hi).abs() < 1e-6,
            "{ranges:?}"
        );
    }
}

/// Spec 001 toy-3: unit tokens at 0° and 60°, each its own query.
fn toy3() -> RankOneConstraints {
    TokenProblem::from_json(&format!(
        r#"{{"X": [[[1,0],[0,0]], [[0.5,{h}],[0,0]]], "y": [1, 1], "u": [2, 2],
            "z": [[1,0],[0.5,{h}]]}}"#,
        h = 3f64.sqrt() / 2.0
    ))
    .unwrap()
    .w_svm_constraints()
    .unwrap()
}

#[test]
fn frobenius_svm_with_separate_queries_on_spec_001_toy_3() {
    let s3 = 3f64.sqrt();
    let c = toy3();
    let (dual, primal) = w_svm_both(&c);
    // W_F = [[1, √3/5], [√3/5, 3/5]], ‖W_F‖² = 1.6
    let want = [1.0, s3 / 5.0, s3 / 5.0, 0.6];
    for s in [&dual, &primal] {
        assert!(stats::max_abs_diff(&s.w, &want) < 1e-10, "{:?}", s.w);
        assert!((s.norm.powi(2) - 1.6).abs() < 1e-10);
    }
}

#[test]
fn json_errors_name_the_field() {
    let cases = [
        (
            r#"{"X": [[[1,0],[0,1]], [[1,0]]], "y": [1,1], "u": [1,0]}"#,
            "X[1]",
        ),
        (
            r#"{"X": [[[1,0],[0,1]], [[1,0],[0]]], "y": [1,1], "u": [1,0]}"#,
            "X[1][1]",
        ),
        (r#"{"X": [[[1,0],[0,1]]], "y": [2], "u": [1,0]}"#, "y[0]"),
        (r#"{"X": [[[1,0],[0,1]]], "y": [1,1], "u": [1,0]}"#, "y"),
        (r#"{"X": [[[1,0],[0,1]]], "y": [1], "u": [1]}"#, "u"),
        (r#"{"X": [[[1,0],[0,1]]], "y": [1]}"#, "u"),
        (r#"{"X": [[[1,0],[0,1]]], "y": [1], "opt": [2]}"#, "opt[0]"),
        (r#"{"X": [[[1,0],[1,0]]], "y": [1], "u": [1,0]}"#, "opt[0]"),
        (
            r#"{"X": [[[1,0],[0,"a"]]], "y": [1], "u": [1,0]}"#,
            "X[0][1][1]",
        ),
        (
            r#"{"X": [[[1,0],[0,1]]], "y": [1], "u": [1,0], "extra": 1}"#,
            "extra",
        ),
        (
            r#"{"X": [[[1,0],[0,1]]], "y": [1], "u": [1,0], "z": [[1]]}"#,
            "z[0]",
        ),
    ];
    for (text, field) in cases {
        match TokenProblem::from_json(text) {
            Err(SvmError::Invalid { field: f, reason }) => {
                assert!(
                    f.contains(field),
                    "{text}: field {f} ({reason}), expected {field}"
                )
            }
            other => panic!("{text}: expected an error naming {field}, got {other:?}"),
        }
    }
    // opt given without u is enough
    let p = TokenProblem::from_json(r#"{"X": [[[1,0],[0,1]]], "y": [1], "opt": [1]}"#).unwrap();
    assert_eq!(p.opt, vec![1]);
}

#[test]
fn svm_json_round_trip() {
    let p = TokenProblem::from_json(r#"{"X": [[[1,0],[0,1]]], "y": [1], "u": [1,0]}"#).unwrap();
    let c = p.w_svm_constraints().unwrap();
    let s = solve_l2(&c, SvmMethod::Dual).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("svm.json");
    write_svm_json(&path, &c, &s).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // row i = output row i: W = [[½, 0], [−½, 0]]
    let rows: Vec<Vec<f64>> = serde_json::from_value(v["W"].clone()).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        stats::max_abs_diff(&rows[0], &[0.5, 0.0]) < 1e-15
            && stats::max_abs_diff(&rows[1], &[-0.5, 0.0]) < 1e-15
    );
    assert!((v["norm"].as_f64().unwrap() - 0.5f64.sqrt()).abs() < 1e-12);
    assert_eq!(v["active_constraints"][0]["token"], 1);
    assert!(v["kkt"]["duality_gap"].as_f64().unwrap() < KKT_TOL);
    let err = write_svm_json(&dir.path().join("no/such/dir/svm.json"), &c, &s).unwrap_err();
    assert!(matches!(err, SvmError::Io { .. }));
}

#[test]
fn direction_metrics_are_cancellation_free() {
    let eps = 1e-9;
    // 1 − cos∠((1, ε), (1, 0)) = ε²/2 + O(ε⁴); 1 − a·b/(|a||b|) rounds to 0 here
    let got = one_minus_cos(&[1.0, eps], &[3.0, 0.0]);
    assert!((got / (eps * eps / 2.0) - 1.0).abs() < 1e-6, "{got}");
    assert!((one_minus_cos(&[1.0, 0.0], &[-2.0, 0.0]) - 2.0).abs() < 1e-15);
    assert!((direction_distance(&[0.0, 5.0], &[1.0, 0.0]) - 2f64.sqrt()).abs() < 1e-15);
}

#[test]
fn nuclear_svm_on_spec_001_toy_3_is_rank_one() {
    let s3 = 3f64.sqrt();
    let c = toy3();
    let sol = solve_nuclear(&c, &NuclearSettings::default()).unwrap();
    // W_* = [[1, 1/√3], [1/√3, 1/3]], OPT_* = 4/3, λ* = (2/3, 2/3)
    assert!(
        (sol.nuclear_norm - 4.0 / 3.0).abs() < 1e-8,
        "{}",
        sol.nuclear_norm
    );
    assert!(sol.kkt.duality_gap <= 1e-9 && sol.kkt.duality_gap >= 0.0);
    assert!(sol.kkt.primal_infeasibility < 1e-12 && sol.kkt.dual_infeasibility < 1e-12);
    assert!(sol.kkt.subgradient < 1e-4 && sol.kkt.complementary_slackness < 1e-6);
    assert_eq!(sol.rank, 1);
    assert!(
        stats::max_abs_diff(&sol.w, &[1.0, 1.0 / s3, 1.0 / s3, 1.0 / 3.0]) < 1e-4,
        "{:?}",
        sol.w
    );
    assert!(stats::max_abs_diff(&sol.lambda, &[2.0 / 3.0, 2.0 / 3.0]) < 1e-4);
    // the Frobenius solution of the same data is different (‖W_F‖_* = 1.6)
    let frob = solve_l2(&c, SvmMethod::Dual).unwrap();
    let sv = nalgebra::DMatrix::from_column_slice(2, 2, &frob.w)
        .singular_values()
        .sum();
    assert!((sv - 1.6).abs() < 1e-10);
}

#[test]
fn nuclear_svm_on_spec_001_toy_4_reaches_the_optimal_value() {
    // A4 data: the nuclear solution set is a continuum, only OPT_* = 1/2.4 + 1/1.6 is unique
    let p = TokenProblem::from_json(
        r#"{"X": [[[2,0,0,0],[0.4,0,1,0],[0.4,0,-1,0]],
                  [[0,2,0,0],[0,0.4,0.3,0.5],[0,0.4,-0.3,-0.5]]],
            "y": [1, 1], "u": [2, 2, 0, 0], "z": [[1.5,0,0,0],[0,-1,0,0]]}"#,
    )
    .unwrap();
    let c = p.w_svm_constraints().unwrap();
    let sol = solve_nuclear(&c, &NuclearSettings::default()).unwrap();
    let opt = 1.0 / 2.4 + 1.0 / 1.6;
    assert!(
        (sol.nuclear_norm - opt).abs() < 1e-8,
        "{}",
        sol.nuclear_norm
    );
    assert!(sol.dual_value <= opt + 1e-12 && sol.dual_value >= opt * (1.0 - 1e-9));
    // the Frobenius solution is the diagonal W* = Diag(1/2.4, −1/1.6, 0, 0) (spec 001 §5.1)
    let frob = solve_l2(&c, SvmMethod::Dual).unwrap();
    let mut want = vec![0.0; 16];
    want[0] = 1.0 / 2.4;
    want[5] = -1.0 / 1.6;
    assert!(stats::max_abs_diff(&frob.w, &want) < 1e-10, "{:?}", frob.w);
}

#[test]
fn nuclear_svm_reports_infeasibility_and_non_convergence() {
    #[rustfmt::skip]
    let x = [1.0, 0.0, 0.0, 1.0,   1.0, 0.0, 0.0, 1.0];
    let q = first_tokens(2, 2, 2, &x);
    let c = RankOneConstraints::w_svm(&view(2, 2, 2, &x, &q), &[0, 1]).unwrap();
    let err = solve_nuclear(&c, &NuclearSettings::default()).unwrap_err();
    assert!(
        err.to_string().starts_with("nuclear-norm W-SVM infeasible"),
        "{err}"
    );
    let c = toy3();
    let few = NuclearSettings {
        tol: 1e-15,
        max_iterations: 10,
    };
    assert!(matches!(
        solve_nuclear(&c, &few),
        Err(SvmError::Solver { .. })
    ));
}

#[test]
fn column_generation_agrees_with_the_primal_dual_iteration() {
    // toy-3: OPT_* = 4/3 with a rank-one W_*; toy-4: OPT_* = 1/2.4 + 1/1.6 (a continuum)
    let toy4 = TokenProblem::from_json(
        r#"{"X": [[[2,0,0,0],[0.4,0,1,0],[0.4,0,-1,0]],
                  [[0,2,0,0],[0,0.4,0.3,0.5],[0,0.4,-0.3,-0.5]]],
            "y": [1, 1], "u": [2, 2, 0, 0], "z": [[1.5,0,0,0],[0,-1,0,0]]}"#,
    )
    .unwrap()
    .w_svm_constraints()
    .unwrap();
    for (c, opt) in [(toy3(), 4.0 / 3.0), (toy4, 1.0 / 2.4 + 1.0 / 1.6)] {
        let cuts = solve_nuclear_cuts(&c, &NuclearSettings::default()).unwrap();
        let pdhg = solve_nuclear(&c, &NuclearSettings::default()).unwrap();
        for s in [&cuts, &pdhg] {
            assert!(
                (s.nuclear_norm - opt).abs() < 1e-8 * opt,
                "{}",
                s.nuclear_norm
            );
            assert!(s.kkt.duality_gap <= 1e-9 && s.certificate_op_norm <= 1.0 + 1e-12);
        }
    }
    // toy-3's certificate M = (2/3)(u₁u₁ᵀ + u₂u₂ᵀ) has eigenvalues 1 and 1/3
    let pdhg = solve_nuclear(&toy3(), &NuclearSettings::default()).unwrap();
    assert!((pdhg.complementarity_margin - 2.0 / 3.0).abs() < 1e-4);
}

#[test]
fn diagonal_nuclear_iteration_matches_the_l1_lp() {
    for (c, opt, margin) in [(1.6, 0.625, 0.375), (1.2, 1.0 / 1.2, 1.0 / 6.0)] {
        let cons = toy2(c).w_svm_constraints().unwrap();
        let settings = NuclearSettings {
            tol: 1e-11,
            ..Default::default()
        };
        let pdhg = solve_nuclear_diagonal(&cons, &settings).unwrap();
        let diag = cons.diagonal().unwrap();
        let lp = solve_l1(&diag).unwrap();
        assert!((pdhg.norm_l1 - opt).abs() < 1e-9, "{}", pdhg.norm_l1);
        assert!((lp.norm_l1 - opt).abs() < 1e-9, "{}", lp.norm_l1);
        assert!(
            stats::max_abs_diff(&pdhg.beta, &lp.beta) < 1e-8,
            "{:?}",
            pdhg.beta
        );
        assert!(pdhg.kkt.passes(1e-8), "{:?}", pdhg.kkt);
        // the best (symmetric) dual has (Bλ)₁ = (Bλ)₃ = 1/c off the support: margin 1 − 1/c
        let got = l1_complementarity_margin(&diag, &lp).unwrap();
        assert!((got - margin).abs() < 1e-8, "c = {c}: {got}");
    }
}

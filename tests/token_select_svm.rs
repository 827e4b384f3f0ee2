//! Seed-003 max-margin, assumption and numerics scenarios (spec 003 §3, §4.1, §4.2, §8.2) in
//! their fast configurations, checks that can fail, and `wsvm-kkt` on user token files through
//! the command line.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use attnflow::scenario::Report;

/// The ids of the failing checks `base` and `base.<label>`.
fn failed<'a>(r: &'a Report, base: &str) -> Vec<&'a str> {
    r.checks
        .iter()
        .filter(|c| !c.pass && common::has_base(&c.id, base))
        .map(|c| c.id.as_str())
        .collect()
}

#[test]
fn wsvm_kkt_certificates_and_closed_forms() {
    let r = common::run_quick("wsvm-kkt", &[]);
    common::assert_all_pass("wsvm-kkt", &r);
    // two-token, bad-init and the orthogonal instance each have a closed-form check
    assert_eq!(
        r.checks
            .iter()
            .filter(|c| common::has_base(&c.id, "closed-form"))
            .count(),
        3
    );
    let stems: Vec<&str> = r.json.iter().map(|(s, _)| s.as_str()).collect();
    assert!(stems.contains(&"svm-two-token") && stems.contains(&"svm-orthogonal-d"));
}

#[test]
fn usvm_kkt_certificates() {
    let r = common::run_quick("usvm-kkt", &[]);
    common::assert_all_pass("usvm-kkt", &r);
}

#[test]
fn assumption_check_quick() {
    let r = common::run_quick("assumption-check", &[]);
    common::assert_all_pass("assumption-check", &r);
}

#[test]
fn assumption_check_fails_a_condition_the_data_do_not_meet() {
    // DM has σ_o²/σ² = 4: demanding ‖x_opt‖² ≥ 5‖x_t‖² must fail
    let r = common::run_quick("assumption-check", &["checks.cond1_c=5"]);
    assert_eq!(failed(&r, "cond-ii-opt-dm.256").len(), 1);
}

#[test]
fn init_scale_quick() {
    let r = common::run_quick("init-scale", &[]);
    common::assert_all_pass("init-scale", &r);
}

#[test]
fn init_scale_lemma3_fails_at_large_scales_with_obtuse_constraints() {
    // asserting Lemma 3 at every scale: ex1 with a random optimal-token position breaks it
    // at ‖W₀‖ ≥ 10
    let r = common::run_quick("init-scale", &["checks.lemma3_max_c=100"]);
    assert_eq!(failed(&r, "lemma-violating-runs-w0-b2").len(), 1);
    let random = &r.derived["ex1, random opt position"];
    assert!(random["lemma3_first_scale_failing"].as_f64().unwrap() > 1.0);
    assert!(r.derived["ex1"]["lemma3_first_scale_failing"].is_null());
}

#[test]
fn two_token_gd_vs_ngd_quick() {
    let r = common::run_quick("two-token-gd-vs-ngd", &[]);
    common::assert_all_pass("two-token-gd-vs-ngd", &r);
}

#[test]
fn two_token_ngd_rate_is_asymptotic_only() {
    // at k = 100, (1 − corr)k² = 64.8 is still 14% below p/(2η²) = 75
    let r = common::run_quick("two-token-gd-vs-ngd", &["checks.ngd_rate_at=100"]);
    assert_eq!(failed(&r, "ngd-corr-k2-2eta2.100").len(), 1);
    assert_eq!(r.checks.iter().filter(|c| !c.pass).count(), 1);
}

#[test]
fn stable_numerics_quick() {
    let r = common::run_quick("stable-numerics", &[]);
    common::assert_all_pass("stable-numerics", &r);
}

#[test]
fn stable_numerics_naive_break_is_located() {
    // the naive evaluation breaks at gap ≈ 37, not in [40, 45]
    let r = common::run_quick("stable-numerics", &["checks.naive_break_gap=[40.0, 45.0]"]);
    assert_eq!(r.checks.iter().filter(|c| !c.pass).count(), 2);
    assert_eq!(failed(&r, "naive-break-gap.two-token").len(), 1);
}

fn attnflow(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(args)
        .arg("--dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
        .current_dir(cwd)
        .output()
        .expect("binary runs")
}

fn run_on_file(file: &Path, cwd: &Path) -> Output {
    let set = format!("data_file={}", file.display());
    attnflow(&["run", "wsvm-kkt", "--out", "o", "--set", &set], cwd)
}

fn example_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/token_select/data/example-tokens.json")
}

#[test]
fn wsvm_kkt_solves_a_user_token_file() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run_on_file(&example_file(), tmp.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let dir = tmp.path().join("o/wsvm-kkt");
    let svm: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("svm.json")).unwrap()).unwrap();
    // W is d × d rows (d = 4), with its norm, the active constraints and the KKT residuals
    let w = svm["W"].as_array().unwrap();
    assert_eq!(w.len(), 4);
    assert!(w.iter().all(|row| row.as_array().unwrap().len() == 4));
    let norm = svm["norm"].as_f64().unwrap();
    let frobenius: f64 = w
        .iter()
        .flat_map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap().powi(2))
        })
        .sum::<f64>()
        .sqrt();
    assert!((norm - frobenius).abs() < 1e-12 * norm);
    let active = svm["active_constraints"].as_array().unwrap();
    assert!(!active.is_empty() && active.len() <= svm["constraints"].as_u64().unwrap() as usize);
    for a in active {
        assert!((a["margin"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    }
    assert!(svm["kkt"]["duality_gap"].as_f64().unwrap() < 1e-8);
    assert!(
        svm["primal_cross_check"]["independent_difference"]
            .as_f64()
            .unwrap()
            < 1e-6
    );
    // only the file's problem is solved: no named-model outputs
    assert!(!dir.join("svm-ex1.json").exists());
}

/// Bad user data: exit 2, a message naming the file and the key, nothing written.
fn refused(contents: &str, expect: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("tokens.json");
    std::fs::write(&file, contents).unwrap();
    let o = run_on_file(&file, tmp.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("tokens.json"), "no file in: {err}");
    for e in expect {
        assert!(err.contains(e), "`{e}` missing in: {err}");
    }
    assert!(
        !tmp.path().join("o").exists(),
        "output written on bad input"
    );
}

#[test]
fn wsvm_kkt_refuses_a_malformed_file() {
    refused(
        r#"{"X": [[[1, 0], [0, 1]], [[1, 0], [0, 1, 2]]], "y": [1, -1], "u": [1, -1]}"#,
        &["X[1][1]", "coordinates"],
    );
    refused(
        r#"{"X": [[[1, 0], [0, 1]]], "y": [2], "u": [1, 0]}"#,
        &["y[0]", "not ±1"],
    );
    refused(r#"{"X": [[[1, 0], [0, 1]]], "y": [1]}"#, &["u", "missing"]);
}

#[test]
fn wsvm_kkt_refuses_an_infeasible_file() {
    // same query and tokens, opposite optimal tokens: D₂ = −D₁, so ⟨W, D₁⟩ ≥ 1 and
    // ⟨W, D₂⟩ ≥ 1 cannot both hold
    refused(
        r#"{"X": [[[1, 0], [0, 1]], [[1, 0], [0, 1]]], "y": [1, -1], "u": [1, -1]}"#,
        &["W-SVM", "infeasible"],
    );
}

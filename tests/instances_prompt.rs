//! Instance files of the prompt (p-attention) family, paper 002: a z* and H written from scratch
//! and checked against an independent computation, round trips of `instance.npz`, and bad files
//! refused with exit code 2 and nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use attnflow::instance::{Array, Arrays};
use nalgebra::DMatrix;

fn attnflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(args)
        .arg("--dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
        .output()
        .expect("binary runs")
}

/// A fresh scratch folder for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "attnflow-instances-prompt-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `name --quick` into `out` with `set`, returning the run's folder; panics on failure.
fn run_quick(name: &str, out: &Path, set: &[String]) -> PathBuf {
    let mut args = vec!["run", name, "--quick", "--out", out.to_str().unwrap()];
    for s in set {
        args.push("--set");
        args.push(s);
    }
    let o = attnflow(&args);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.join(name)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn stationary_point(z: &[f64], h: DMatrix<f64>) -> Arrays {
    let n = z.len();
    let mut a = Arrays::new();
    a.insert("z_star", Array::vector(z))
        .insert("H", Array::from_column_major(n, n, h.as_slice()));
    a
}

/// κ of J²H on T for H = I, computed here from the dense J = diag(z) − zzᵀ: (λ_n/λ₂)².
fn kappa_identity(z: &[f64]) -> f64 {
    let n = z.len();
    let zv = nalgebra::DVector::from_column_slice(z);
    let j = DMatrix::from_diagonal(&zv) - &zv * zv.transpose();
    let mut ev: Vec<f64> = j.symmetric_eigen().eigenvalues.iter().copied().collect();
    ev.sort_by(f64::total_cmp);
    (ev[n - 1] / ev[1]).powi(2)
}

#[test]
fn thm2_on_a_point_written_from_scratch() {
    let dir = scratch("thm2-scratch");
    let z = [0.5, 0.3, 0.2];
    let file = dir.join("zstar.npz");
    std::fs::write(
        &file,
        stationary_point(&z, DMatrix::identity(3, 3)).to_npz_bytes(),
    )
    .unwrap();
    let run = run_quick(
        "thm2-condition-bound",
        &dir.join("out"),
        &[format!("data_file={}", file.display())],
    );
    let params = json(&run.join("params.json"));
    let kappa = params["derived"]["given_kappa"].as_f64().unwrap();
    let want = kappa_identity(&z);
    assert!(
        (kappa / want - 1.0).abs() < 1e-10,
        "κ = {kappa}, dense eigenvalues give {want}"
    );
    let checks = json(&run.join("checks.json"));
    let text = checks.to_string();
    // n = 3: the n = 2 identity κ = 1 does not apply and is skipped with its reason
    assert!(text.contains("κ = 1 only for n = 2"), "{text}");
    let corrected = checks["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["name"]
                .as_str()
                .unwrap()
                .starts_with("given point: corrected bound")
        })
        .expect("corrected-bound check at the given point");
    assert_eq!(corrected["pass"], true, "{corrected}");
    // the written instance is the file's
    let back = Arrays::read(&run.join("instance.npz")).unwrap();
    assert_eq!(back, stationary_point(&z, DMatrix::identity(3, 3)));
}

#[test]
fn thm2_instance_round_trip_is_byte_identical() {
    let dir = scratch("thm2-round");
    let first = run_quick("thm2-condition-bound", &dir.join("a"), &[]);
    let inst = first.join("instance.npz");
    let second = run_quick(
        "thm2-condition-bound",
        &dir.join("b"),
        &[format!("data_file={}", inst.display())],
    );
    for f in [
        "series.csv",
        "curves.csv",
        "checks.json",
        "figure.svg",
        "instance.npz",
    ] {
        assert!(
            std::fs::read(first.join(f)).unwrap() == std::fs::read(second.join(f)).unwrap(),
            "{f} differs after the round trip"
        );
    }
}

#[test]
fn thm2_refuses_bad_files() {
    let dir = scratch("thm2-bad");
    let n2 = |z: &[f64], h: &[f64]| stationary_point(z, DMatrix::from_row_slice(2, 2, h));
    let wrong_shape = {
        let mut a = Arrays::new();
        a.insert("z_star", Array::vector(&[0.5, 0.5]))
            .insert("H", Array::matrix(2, 3, vec![1.0; 6]));
        a
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "nan",
            n2(&[f64::NAN, 0.5], &[1.0, 0.0, 0.0, 1.0]).to_npz_bytes(),
            "z_star[0]",
        ),
        ("shape", wrong_shape.to_npz_bytes(), "H"),
        (
            "sum",
            n2(&[0.6, 0.6], &[1.0, 0.0, 0.0, 1.0]).to_npz_bytes(),
            "z_star",
        ),
        (
            "boundary",
            n2(&[1.0, 0.0], &[1.0, 0.0, 0.0, 1.0]).to_npz_bytes(),
            "z_star[1]",
        ),
        (
            "not-pd",
            n2(&[0.5, 0.5], &[1.0, 2.0, 2.0, 1.0]).to_npz_bytes(),
            "positive definite",
        ),
        (
            "asym",
            n2(&[0.5, 0.5], &[1.0, 0.1, 0.0, 1.0]).to_npz_bytes(),
            "H[1, 0]",
        ),
    ];
    for (tag, bytes, key) in cases {
        let file = dir.join(format!("{tag}.npz"));
        std::fs::write(&file, bytes).unwrap();
        let out = dir.join(format!("out-{tag}"));
        let o = attnflow(&[
            "run",
            "thm2-condition-bound",
            "--quick",
            "--out",
            out.to_str().unwrap(),
            "--set",
            &format!("data_file={}", file.display()),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{tag}: {err}");
        assert!(
            err.contains(&format!("{tag}.npz")) && err.contains(key),
            "{tag}: {err}"
        );
        assert!(
            !out.join("thm2-condition-bound").exists(),
            "{tag}: output written"
        );
    }
}

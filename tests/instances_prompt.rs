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

/// Samples for the generic flow: N = 2 samples of n = 3 tokens in ℝ⁴ (fixed numbers), labels y,
/// inside the range of each sample's values X_i v₀ (so some p interpolates), and the initial
/// state (p₀, v₀).
fn prompt_samples(x_first: f64) -> Arrays {
    let mut x: Vec<f64> = (0..24).map(|k| ((k * 7 % 11) as f64 - 5.0) / 4.0).collect();
    x[0] = x_first;
    let mut a = Arrays::new();
    a.insert("X", Array::new(&[2, 3, 4], x))
        .insert("y", Array::vector(&[0.7, 0.3]))
        .insert("p0", Array::vector(&[0.1, -0.2, 0.0, 0.3]))
        .insert("v0", Array::vector(&[1.0, 0.5, -0.5, 0.2]));
    a
}

/// L(p₀) = (1/N) Σ ½(φ(X_i p₀)ᵀX_i v₀ − y_i)², computed here from the arrays.
fn prompt_loss(a: &Arrays) -> f64 {
    let x = &a.get("X").unwrap().data;
    let y = &a.get("y").unwrap().data;
    let (p, v) = (&a.get("p0").unwrap().data, &a.get("v0").unwrap().data);
    let dot = |r: &[f64], w: &[f64]| r.iter().zip(w).map(|(a, b)| a * b).sum::<f64>();
    let mut total = 0.0;
    for (i, yi) in y.iter().enumerate() {
        let rows: Vec<&[f64]> = (0..3).map(|t| &x[(i * 3 + t) * 4..][..4]).collect();
        let e: Vec<f64> = rows.iter().map(|r| dot(r, p).exp()).collect();
        let f =
            rows.iter().zip(&e).map(|(r, e)| e * dot(r, v)).sum::<f64>() / e.iter().sum::<f64>();
        total += 0.5 * (f - yi).powi(2);
    }
    total / y.len() as f64
}

#[test]
fn flow_on_samples_written_from_scratch() {
    let dir = scratch("flow-scratch");
    let a = prompt_samples(0.9);
    let file = dir.join("mine.npz");
    std::fs::write(&file, a.to_npz_bytes()).unwrap();
    let run = run_quick(
        "flow-prompt",
        &dir.join("out"),
        &[format!("data_file={}", file.display()), "t_end=1000".into()],
    );
    let checks = json(&run.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");
    // the first recorded loss is L(p₀) of the arrays, computed independently
    let series = std::fs::read_to_string(run.join("series.csv")).unwrap();
    let first: f64 = series
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let want = prompt_loss(&a);
    assert!(
        (first - want).abs() <= 1e-14 * want,
        "L(p₀) = {first}, by hand {want}"
    );
    // N = 2 ≤ d = 4 with v frozen: the flow interpolates, and there the Hessian is N·FᵀF with F
    // of rank N — N positive eigenvalues and d − N zero modes (the manifold of minimizers)
    let derived = &json(&run.join("params.json"))["derived"];
    assert!(
        derived["final_loss"].as_f64().unwrap() < 1e-10 * want,
        "{derived}"
    );
    assert_eq!(derived["hessian.positive"], 2, "{derived}");
    assert_eq!(derived["hessian.zero"], 2, "{derived}");
    // the instance written is the file read
    assert_eq!(Arrays::read(&run.join("instance.npz")).unwrap(), a);
}

#[test]
fn flow_instance_round_trip_is_byte_identical() {
    let dir = scratch("flow-round");
    let first = run_quick("flow-prompt", &dir.join("a"), &["model.train=pv".into()]);
    let inst = first.join("instance.npz");
    let second = run_quick(
        "flow-prompt",
        &dir.join("b"),
        &[
            "model.train=pv".into(),
            format!("data_file={}", inst.display()),
        ],
    );
    for f in [
        "series.csv",
        "spectra.csv",
        "hessian_spectrum.csv",
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
fn flow_refuses_bad_files() {
    let dir = scratch("flow-bad");
    let with = |name: &str, array: Array| {
        let mut a = prompt_samples(0.9);
        a.insert(name, array);
        a
    };
    let cases = [
        ("nan", prompt_samples(f64::NAN), "X[0, 0, 0]"),
        ("labels", with("y", Array::vector(&[1.0, 2.0, 3.0])), "y"),
        (
            "one-token",
            with("X", Array::new(&[2, 1, 4], vec![1.0; 8])),
            "n ≥ 2 tokens",
        ),
        ("init-dim", with("p0", Array::vector(&[0.0; 3])), "p0"),
        (
            "key-matrix",
            with("W", Array::matrix(4, 3, vec![0.0; 12])),
            "W",
        ),
        ("misspelt", with("V0", Array::vector(&[0.0; 4])), "V0"),
    ];
    for (tag, arrays, key) in cases {
        let file = dir.join(format!("{tag}.npz"));
        std::fs::write(&file, arrays.to_npz_bytes()).unwrap();
        let out = dir.join(format!("out-{tag}"));
        let o = attnflow(&[
            "run",
            "flow-prompt",
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
        assert!(!out.join("flow-prompt").exists(), "{tag}: output written");
    }
}

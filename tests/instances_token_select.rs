//! Token-selection instances (paper 003) given as files: the generic flow `flow-token-select`
//! and the paper's `wsvm-kkt` on data written from scratch, held against computations on that
//! same data; round trips through `instance.npz`; bad files refused with exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use attnflow::instance::{Array, Arrays};

fn attnflow(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(args)
        .arg("--dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
        .current_dir(cwd)
        .output()
        .expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `scenario --quick` with `sets` into `cwd/out`, asserting success; returns the run folder.
fn run_ok(cwd: &Path, out: &str, scenario: &str, sets: &[&str]) -> PathBuf {
    let mut args = vec!["run", scenario, "--quick", "--out", out];
    for s in sets {
        args.extend(["--set", s]);
    }
    let o = attnflow(&args, cwd);
    assert!(o.status.success(), "{scenario} {sets:?}: {}", stderr(&o));
    cwd.join(out).join(scenario)
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Column `name` of a run's series.csv.
fn column(dir: &Path, name: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(dir.join("series.csv")).unwrap();
    let mut lines = text.lines();
    let k = lines
        .next()
        .unwrap()
        .split(',')
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    lines
        .map(|l| l.split(',').nth(k).unwrap().parse().unwrap())
        .collect()
}

fn write(dir: &Path, name: &str, a: &Arrays) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, a.to_npz_bytes()).unwrap();
    p
}

/// Three sequences of three tokens in ℝ⁵, decoder u = e₀ + e₁ + e₂: sequence i has tokens
/// s_i y_i e_i (optimal and query, score s_i), ½ s_i y_i e_i + e₃ (score ½ s_i) and
/// (1 + i) e₄ − ¼ s_i y_i e_i (score −¼ s_i).
fn tokens() -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (n, t, d) = (3, 3, 5);
    let y = vec![1.0, -1.0, 1.0];
    let s = [1.0, 2.0, 0.5];
    let mut x = vec![0.0; n * t * d];
    for i in 0..n {
        let at = |tok: usize, r: usize| (i * t + tok) * d + r;
        x[at(0, i)] = s[i] * y[i];
        x[at(1, i)] = 0.5 * s[i] * y[i];
        x[at(1, 3)] = 1.0;
        x[at(2, 4)] = 1.0 + i as f64;
        x[at(2, i)] = -0.25 * s[i] * y[i];
    }
    let u = vec![1.0, 1.0, 1.0, 0.0, 0.0];
    (x, y, u)
}

fn instance(w0: Option<Vec<f64>>) -> Arrays {
    let (x, y, u) = tokens();
    let mut a = Arrays::new();
    a.insert("X", Array::new(&[3, 3, 5], x))
        .insert("y", Array::vector(&y))
        .insert("u", Array::vector(&u));
    if let Some(w) = w0 {
        a.insert("W0", Array::matrix(5, 5, w));
    }
    a
}

#[test]
fn the_flow_on_data_written_from_scratch_starts_at_the_hand_computed_loss() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "mine.npz", &instance(Some(vec![0.0; 25])));
    let dir = run_ok(
        tmp.path(),
        "o",
        "flow-token-select",
        &[&format!("data_file={}", file.display())],
    );
    let checks = read_json(&dir.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");
    // at W = 0 the softmax is uniform: margin m_i = mean_t γ_it, γ_it = y_i uᵀx_it; the run
    // records the excess L − L* with L* = mean_i exp(−γ_i,opt)
    let (x, y, u) = tokens();
    let gamma = |i: usize, t: usize| -> f64 {
        y[i] * (0..5).map(|r| u[r] * x[(i * 3 + t) * 5 + r]).sum::<f64>()
    };
    let l0: f64 = (0..3)
        .map(|i| (-(0..3).map(|t| gamma(i, t)).sum::<f64>() / 3.0).exp())
        .sum::<f64>()
        / 3.0;
    let l_star: f64 = (0..3).map(|i| (-gamma(i, 0)).exp()).sum::<f64>() / 3.0;
    let loss = column(&dir, "loss");
    let want = l0 - l_star;
    assert!(
        (loss[0] - want).abs() <= 1e-12 * want,
        "{} vs {want}",
        loss[0]
    );
    assert!(
        loss.last().unwrap() < &(0.1 * want),
        "the loss falls: {loss:?}"
    );
    // the written instance is the file's arrays
    let written =
        Arrays::from_npz_bytes(&std::fs::read(dir.join("instance.npz")).unwrap()).unwrap();
    assert_eq!(written, instance(Some(vec![0.0; 25])));
    // the same file in the paper's wsvm-kkt: its W_mm, recomputed here, meets every constraint
    // with the smallest margin exactly 1 (a max-margin solution is tight somewhere)
    let dir = run_ok(
        tmp.path(),
        "o",
        "wsvm-kkt",
        &[&format!("data_file={}", file.display())],
    );
    assert_eq!(read_json(&dir.join("checks.json"))["all_pass"], true);
    let svm = read_json(&dir.join("svm.json"));
    let w: Vec<Vec<f64>> = serde_json::from_value(svm["W"].clone()).unwrap();
    let q = |i: usize| &x[i * 15..i * 15 + 5];
    let wq = |i: usize| -> Vec<f64> {
        (0..5)
            .map(|r| (0..5).map(|c| w[r][c] * q(i)[c]).sum())
            .collect()
    };
    let mut min_margin = f64::INFINITY;
    for i in 0..3 {
        let v = wq(i);
        for t in 1..3 {
            let m: f64 = (0..5)
                .map(|r| (x[i * 15 + r] - x[(i * 3 + t) * 5 + r]) * v[r])
                .sum();
            min_margin = min_margin.min(m);
        }
    }
    assert!(
        (min_margin - 1.0).abs() < 1e-8,
        "smallest margin {min_margin}"
    );
}

#[test]
fn gd_on_the_two_token_instance_follows_the_scalar_recursion() {
    // two-token data from W₀ = I: the gradient is along D̂ = (e₁ − e₂)e₁ᵀ/√2, so GD moves the
    // logit gap g = W₁₁ − W₂₁ by g ← g + 2η e^{−σ(g)}σ(g)σ(−g), and L − L* = e^{−σ(g)} − e^{−1}
    let tmp = tempfile::tempdir().unwrap();
    let mut a = Arrays::new();
    a.insert("X", Array::new(&[1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]))
        .insert("y", Array::vector(&[1.0]))
        .insert("u", Array::vector(&[1.0, 0.0]))
        .insert("W0", Array::matrix(2, 2, vec![1.0, 0.0, 0.0, 1.0]));
    let file = write(tmp.path(), "two.npz", &a);
    let (eta, steps) = (1.0, 40);
    let dir = run_ok(
        tmp.path(),
        "o",
        "flow-token-select",
        &[
            &format!("data_file={}", file.display()),
            "optimizer=gd",
            &format!("eta={eta}"),
            &format!("steps={steps}"),
            "clock=linear",
            "samples=41",
        ],
    );
    assert_eq!(read_json(&dir.join("checks.json"))["all_pass"], true);
    let sigma = |g: f64| 1.0 / (1.0 + (-g).exp());
    let mut g = 1.0f64;
    let mut want = Vec::new();
    for _ in 0..=steps {
        want.push((-sigma(g)).exp() - (-1f64).exp());
        g += 2.0 * eta * (-sigma(g)).exp() * sigma(g) * sigma(-g);
    }
    let loss = column(&dir, "loss");
    assert_eq!(loss.len(), want.len());
    for (k, (l, w)) in loss.iter().zip(&want).enumerate() {
        assert!((l - w).abs() <= 1e-9 * w, "step {k}: {l} vs {w}");
    }
}

#[test]
fn instance_npz_fed_back_reproduces_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w0 = vec![0.0; 25];
    w0[0] = 0.3;
    w0[7] = -0.2;
    let data = write(tmp.path(), "data.npz", &instance(None));
    let init = write(tmp.path(), "init.npz", &instance(Some(w0)));
    let first = run_ok(
        tmp.path(),
        "a",
        "flow-token-select",
        &[
            &format!("data_file={}", data.display()),
            &format!("init_file={}", init.display()),
        ],
    );
    let again = first.join("instance.npz");
    let second = run_ok(
        tmp.path(),
        "b",
        "flow-token-select",
        &[&format!("data_file={}", again.display())],
    );
    for f in [
        "series.csv",
        "checks.json",
        "figure.svg",
        "instance.npz",
        "spectra.csv",
    ] {
        assert_eq!(
            std::fs::read(first.join(f)).unwrap(),
            std::fs::read(second.join(f)).unwrap(),
            "{f} differs"
        );
    }
    // wsvm-kkt: a JSON file's instance.npz, under the same stem, gives the same outputs
    let (x, y, u) = tokens();
    let nested: Vec<Vec<Vec<f64>>> = (0..3)
        .map(|i| (0..3).map(|t| x[(i * 3 + t) * 5..][..5].to_vec()).collect())
        .collect();
    let json = serde_json::json!({"X": nested, "y": y, "u": u});
    std::fs::create_dir(tmp.path().join("j")).unwrap();
    let jfile = tmp.path().join("j/mine.json");
    std::fs::write(&jfile, json.to_string()).unwrap();
    let first = run_ok(
        tmp.path(),
        "c",
        "wsvm-kkt",
        &[&format!("data_file={}", jfile.display())],
    );
    std::fs::create_dir(tmp.path().join("n")).unwrap();
    let nfile = tmp.path().join("n/mine.npz");
    std::fs::copy(first.join("instance.npz"), &nfile).unwrap();
    let second = run_ok(
        tmp.path(),
        "d",
        "wsvm-kkt",
        &[&format!("data_file={}", nfile.display())],
    );
    for f in ["series.csv", "checks.json", "figure.svg", "instance.npz"] {
        assert_eq!(
            std::fs::read(first.join(f)).unwrap(),
            std::fs::read(second.join(f)).unwrap(),
            "wsvm-kkt {f} differs"
        );
    }
}

/// Runs with a bad file: exit 2, the message names the file and `key`, nothing is written.
fn refused(scenario: &str, a: &Arrays, key: &str, reason: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "bad.npz", a);
    let o = attnflow(
        &[
            "run",
            scenario,
            "--quick",
            "--out",
            "o",
            "--set",
            &format!("data_file={}", file.display()),
        ],
        tmp.path(),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{scenario} {key}: {err}");
    assert!(err.contains("bad.npz"), "file not named: {err}");
    assert!(err.contains(key), "key {key} not named: {err}");
    assert!(err.contains(reason), "reason '{reason}' not given: {err}");
    assert!(!tmp.path().join("o").exists(), "something was written");
}

#[test]
fn bad_files_are_refused_naming_file_and_array() {
    let flow = "flow-token-select";
    let mut a = instance(Some(vec![0.0; 25]));
    a.insert("u", Array::vector(&[1.0, 0.0]));
    refused(flow, &a, "u", "axis 0 should be 5");
    let mut a = instance(Some(vec![0.0; 25]));
    a.insert("W0", Array::matrix(2, 2, vec![0.0; 4]));
    refused(flow, &a, "W0", "d = 5");
    let mut a = instance(Some(vec![0.0; 25]));
    let mut x = a.get("X").unwrap().clone();
    x.data[5 * 3 + 5 + 2] = f64::NAN; // X[1, 1, 2]
    a.insert("X", x);
    refused(flow, &a, "X[1, 1, 2]", "not finite");
    // sequence 2: its optimal token repeated ties for the maximum score
    let mut a = instance(Some(vec![0.0; 25]));
    let mut x = a.get("X").unwrap().clone();
    let first: Vec<f64> = x.data[2 * 15..2 * 15 + 5].to_vec();
    x.data[2 * 15 + 10..2 * 15 + 15].copy_from_slice(&first);
    a.insert("X", x);
    refused(flow, &a, "X[2]", "no unique optimal token");
    // the same sequence with opposite labels: no W selects both optimal tokens
    let mut a = Arrays::new();
    a.insert(
        "X",
        Array::new(&[2, 2, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]),
    )
    .insert("y", Array::vector(&[1.0, -1.0]))
    .insert("u", Array::vector(&[1.0, 0.0]))
    .insert("W0", Array::matrix(2, 2, vec![0.0; 4]));
    refused(flow, &a, "X", "infeasible");
    refused("wsvm-kkt", &a, "W-SVM", "infeasible");
    let mut a = instance(None);
    a.insert("y", Array::vector(&[1.0, 0.5, 1.0]));
    refused("wsvm-kkt", &a, "y[1]", "not ±1");
}

#[test]
fn two_token_from_another_start_keeps_its_closed_forms() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = Arrays::new();
    a.insert("W0", Array::matrix(2, 2, vec![2.0, 0.5, 0.0, -1.0]));
    let file = write(tmp.path(), "w0.npz", &a);
    let first = run_ok(
        tmp.path(),
        "a",
        "two-token-gd-vs-ngd",
        &[&format!("init_file={}", file.display())],
    );
    let checks = read_json(&first.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");
    let ids: Vec<&str> = checks["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"table-4-2"), "{ids:?}");
    // by hand: g₀ = W₁₁ − W₂₁ = 2, c₀ = g₀/√2, p = ‖W₀‖² − c₀² = 5.25 − 2
    let derived = &read_json(&first.join("params.json"))["derived"];
    assert_eq!(derived["g0"], 2.0);
    assert!((derived["c0"].as_f64().unwrap() - 2f64.sqrt()).abs() < 1e-15);
    assert!((derived["p"].as_f64().unwrap() - 3.25).abs() < 1e-15);
    // instance.npz (two-token X, y, u and W0) fed back gives the same run
    let again = first.join("instance.npz");
    let second = run_ok(
        tmp.path(),
        "b",
        "two-token-gd-vs-ngd",
        &[&format!("init_file={}", again.display())],
    );
    for f in [
        "series.csv",
        "checks.json",
        "figure.svg",
        "instance.npz",
        "gradient_flow.csv",
    ] {
        assert_eq!(
            std::fs::read(first.join(f)).unwrap(),
            std::fs::read(second.join(f)).unwrap(),
            "two-token {f} differs"
        );
    }
    // other data, or a W0 along D̂, are refused
    let mut other = instance(Some(vec![0.0; 25]));
    other.insert("W0", Array::matrix(2, 2, vec![1.0, 0.0, 0.0, 1.0]));
    let bad = write(tmp.path(), "other.npz", &other);
    let o = attnflow(
        &[
            "run",
            "two-token-gd-vs-ngd",
            "--quick",
            "--out",
            "c",
            "--set",
            &format!("init_file={}", bad.display()),
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("other.npz") && stderr(&o).contains("X"),
        "{}",
        stderr(&o)
    );
    a.insert("W0", Array::matrix(2, 2, vec![1.0, 0.0, -1.0, 0.0]));
    let along = write(tmp.path(), "along.npz", &a);
    let o = attnflow(
        &[
            "run",
            "two-token-gd-vs-ngd",
            "--quick",
            "--out",
            "c",
            "--set",
            &format!("init_file={}", along.display()),
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("W0") && stderr(&o).contains("along D̂"),
        "{}",
        stderr(&o)
    );
    assert!(!tmp.path().join("c").exists());
}

/// Runs `scenario --quick` with `sets` into `cwd/out` (exit 0, or 1 when a check fails on
/// user data); returns the run folder.
fn run_any(cwd: &Path, out: &str, scenario: &str, sets: &[String]) -> PathBuf {
    let mut args = vec!["run", scenario, "--quick", "--out", out];
    for s in sets {
        args.extend(["--set", s]);
    }
    let o = attnflow(&args, cwd);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{scenario} {sets:?}: {}",
        stderr(&o)
    );
    cwd.join(out).join(scenario)
}

#[test]
fn fixed_decoder_scenarios_round_trip_through_instance_npz() {
    // the built-in run's instance.npz as user files, then that run's instance.npz again: the
    // two file runs write the same files (params.json, which names the files, aside)
    for scenario in [
        "fig2-fixed-decoder",
        "ngd-fixed-decoder",
        "polyak-step",
        "gd-asymptotic",
        "softmax-sparsification",
        "asymptotic-linearization",
        "flow-path-equivalence",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        round_trip(tmp.path(), scenario, &[], true);
    }
}

/// The built-in run (`built_in_sets`), its instance.npz as the user's files (`data_file`, and
/// `init_file` when `with_init`), then that run's instance.npz again: the two file runs write the
/// same files, and the built-in run's instance is what the file run wrote. Returns the built-in
/// and the first file run's folders.
fn round_trip(
    cwd: &Path,
    scenario: &str,
    built_in_sets: &[String],
    with_init: bool,
) -> (PathBuf, PathBuf) {
    let files = |dir: &Path| {
        let f = dir.join("instance.npz").display().to_string();
        let mut sets = vec![format!("data_file={f}")];
        if with_init {
            sets.push(format!("init_file={f}"));
        }
        sets
    };
    let built_in = run_any(cwd, "a", scenario, built_in_sets);
    let first = run_any(cwd, "b", scenario, &files(&built_in));
    let second = run_any(cwd, "c", scenario, &files(&first));
    for f in ["series.csv", "checks.json", "figure.svg", "instance.npz"] {
        assert_eq!(
            std::fs::read(first.join(f)).unwrap(),
            std::fs::read(second.join(f)).unwrap(),
            "{scenario}: {f} differs after the round trip"
        );
    }
    // the built-in tokens and start, read back, are the arrays the run wrote
    assert_eq!(
        std::fs::read(built_in.join("instance.npz")).unwrap(),
        std::fs::read(first.join("instance.npz")).unwrap(),
        "{scenario}: instance.npz"
    );
    (built_in, first)
}

#[test]
fn polyak_step_on_data_written_from_scratch_starts_at_the_hand_computed_loss() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "mine.npz", &instance(Some(vec![0.0; 25])));
    let f = file.display().to_string();
    let dir = run_any(
        tmp.path(),
        "o",
        "polyak-step",
        &[format!("data_file={f}"), format!("init_file={f}")],
    );
    // at W = 0 the softmax is uniform (as in the flow test above)
    let (x, y, u) = tokens();
    let gamma = |i: usize, t: usize| -> f64 {
        y[i] * (0..5).map(|r| u[r] * x[(i * 3 + t) * 5 + r]).sum::<f64>()
    };
    let l0: f64 = (0..3)
        .map(|i| (-(0..3).map(|t| gamma(i, t)).sum::<f64>() / 3.0).exp())
        .sum::<f64>()
        / 3.0;
    let l_star: f64 = (0..3).map(|i| (-gamma(i, 0)).exp()).sum::<f64>() / 3.0;
    let text = std::fs::read_to_string(dir.join("series.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(row[col("k")].parse::<f64>().unwrap(), 0.0);
    let measured: f64 = row[col("log10_excess_loss")].parse().unwrap();
    let want = (l0 - l_star).log10();
    assert!((measured - want).abs() < 1e-12, "{measured} vs {want}");
    let written =
        Arrays::from_npz_bytes(&std::fs::read(dir.join("instance.npz")).unwrap()).unwrap();
    assert_eq!(written, instance(Some(vec![0.0; 25])));
}

#[test]
fn bad_init_files_of_the_fixed_decoder_scenarios_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let data = write(tmp.path(), "mine.npz", &instance(None));
    let refuse = |scenario: &str, w0: Array, want: &str| {
        let mut a = Arrays::new();
        a.insert("W0", w0);
        let bad = write(tmp.path(), "bad.npz", &a);
        let o = attnflow(
            &[
                "run",
                scenario,
                "--quick",
                "--out",
                "o",
                "--set",
                &format!("data_file={}", data.display()),
                "--set",
                &format!("init_file={}", bad.display()),
            ],
            tmp.path(),
        );
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("bad.npz") && err.contains("W0"), "{err}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(!tmp.path().join("o").exists());
    };
    refuse("polyak-step", Array::matrix(2, 2, vec![0.0; 4]), "d = 5");
    // one run, two starts
    refuse(
        "fig2-fixed-decoder",
        Array::new(&[2, 5, 5], vec![0.0; 50]),
        "at most 1",
    );
    refuse("ngd-fixed-decoder", Array::vector(&[0.0; 5]), "(k, d, d)");
}

#[test]
fn ngd_stops_cleanly_once_the_gradient_underflows() {
    // NGD's excess loss on ex1 falls like e^{−Γ‖W‖} with ‖W‖ = ηk: it leaves the normal range
    // of f64 after ~1200 steps of 0.5; the run must stop there, finite, not reach NaN
    let tmp = tempfile::tempdir().unwrap();
    let o = attnflow(
        &[
            "flow",
            "token-select",
            "--optimizer",
            "ngd",
            "--eta",
            "0.5",
            "--steps",
            "20000",
            "--out",
            "o",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("o/flow-token-select");
    let loss = column(&dir, "loss");
    let t = column(&dir, "t");
    assert!(loss.iter().all(|l| l.is_finite()), "{loss:?}");
    assert!(*loss.last().unwrap() < 1e-290, "{loss:?}");
    // it stopped early: the last time is below ηK
    assert!(*t.last().unwrap() < 0.5 * 20000.0, "{t:?}");
}

/// Runs with `sets`, expecting exit 2 with a message naming `file` and every one of `want`,
/// and nothing written.
fn refused_with(scenario: &str, sets: &[String], file: &str, want: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec!["run", scenario, "--quick", "--out", "o"];
    for s in sets {
        args.extend(["--set", s]);
    }
    let o = attnflow(&args, tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{scenario}: {err}");
    assert!(
        err.contains(file),
        "{scenario}: file {file} not named: {err}"
    );
    for w in want {
        assert!(err.contains(w), "{scenario}: '{w}' not in: {err}");
    }
    assert!(!tmp.path().join("o").exists(), "something was written");
}

#[test]
fn scale_sweep_and_numerics_scenarios_round_trip_through_instance_npz() {
    // (scenario, sets of the built-in run): one instance, so that its instance.npz feeds back
    // as both files; the file runs b and c write the same files
    for (scenario, built_in_sets) in [
        ("init-scale", vec!["opt_positions=[\"first\"]".to_string()]),
        ("stable-numerics", vec!["data=[\"ex1\"]".to_string()]),
        ("tokens-bad-init", vec![]),
        // DM's optimal tokens are constructed, not argmax under u: instance.npz carries `opt`
        ("joint-training", vec![]),
        ("usvm-kkt", vec!["trials=1".to_string()]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        // usvm-kkt takes no init file
        let (built_in, first) =
            round_trip(tmp.path(), scenario, &built_in_sets, scenario != "usvm-kkt");
        // the file run measures what the built-in run measured: only the labels differ
        let numbers = |dir: &Path| -> Vec<String> {
            let text = std::fs::read_to_string(dir.join("series.csv")).unwrap();
            text.lines()
                .map(|l| {
                    l.split(',')
                        .filter(|c| c.parse::<f64>().is_ok())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect()
        };
        assert_eq!(numbers(&built_in), numbers(&first), "{scenario}: values");
    }
    // several sweeps / data models are written under their names
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_any(tmp.path(), "a", "stable-numerics", &[]);
    let written =
        Arrays::from_npz_bytes(&std::fs::read(dir.join("instance.npz")).unwrap()).unwrap();
    let names: Vec<&str> = written.names().collect();
    assert!(
        names.contains(&"two-token_W0") && names.contains(&"ex1_X"),
        "{names:?}"
    );
}

#[test]
fn init_scale_on_data_written_from_scratch_matches_the_hand_computed_logits() {
    // direction Ŵ = e₀e₀ᵀ: s_{i,t} = r·x_{i,t}[0]·q_i[0] with q_i = x_{i,0}, and
    // φ_{i,opt}(W₀) is the softmax of those logits at the optimal token 0
    let tmp = tempfile::tempdir().unwrap();
    let data = write(tmp.path(), "mine.npz", &instance(None));
    let mut w0 = vec![0.0; 25];
    w0[0] = 1.0;
    let mut a = Arrays::new();
    a.insert("W0", Array::matrix(5, 5, w0));
    let init = write(tmp.path(), "dir.npz", &a);
    let dir = run_any(
        tmp.path(),
        "o",
        "init-scale",
        &[
            format!("data_file={}", data.display()),
            format!("init_file={}", init.display()),
        ],
    );
    let checks = read_json(&dir.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");
    let (x, _, _) = tokens();
    let logit = |r: f64, i: usize, t: usize| r * x[(i * 3 + t) * 5] * x[i * 15];
    let scales = column(&dir, "scale");
    let max_logit = column(&dir, "max_abs_logit");
    let min_phi = column(&dir, "min_phi_opt_init");
    assert_eq!(scales.len(), 10, "one direction per scale");
    for (row, &r) in scales.iter().enumerate() {
        let mut want_logit = 0.0f64;
        let mut want_phi = f64::INFINITY;
        for i in 0..3 {
            let s: Vec<f64> = (0..3).map(|t| logit(r, i, t)).collect();
            want_logit = s.iter().fold(want_logit, |m, v| m.max(v.abs()));
            let z: f64 = s.iter().map(|v| v.exp()).sum();
            want_phi = want_phi.min(s[0].exp() / z);
        }
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1e-300);
        assert!(
            close(max_logit[row], want_logit),
            "r = {r}: {} vs {want_logit}",
            max_logit[row]
        );
        assert!(
            close(min_phi[row], want_phi),
            "r = {r}: {} vs {want_phi}",
            min_phi[row]
        );
    }
}

#[test]
fn directions_off_the_unit_sphere_and_other_bad_init_files_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let data = write(tmp.path(), "mine.npz", &instance(None));
    let data_set = format!("data_file={}", data.display());
    let mut a = Arrays::new();
    a.insert("W0", Array::new(&[2, 5, 5], vec![0.1; 50]));
    let bad = write(tmp.path(), "bad.npz", &a);
    let init_set = format!("init_file={}", bad.display());
    for scenario in ["init-scale", "tokens-bad-init"] {
        let want: &[&str] = match scenario {
            // one direction per run of tokens-bad-init
            "tokens-bad-init" => &["W0", "at most 1"],
            _ => &["W0[0]", "Frobenius norm 0.5", "must be 1"],
        };
        refused_with(
            scenario,
            &[data_set.clone(), init_set.clone()],
            "bad.npz",
            want,
        );
    }
    a.insert("W0", Array::matrix(5, 5, vec![0.4; 25]));
    let bad = write(tmp.path(), "bad.npz", &a);
    refused_with(
        "tokens-bad-init",
        &[data_set.clone(), format!("init_file={}", bad.display())],
        "bad.npz",
        &["W0[0]", "Frobenius norm 2", "must be 1"],
    );
    // stable-numerics: the init file's W₀ is the start of every data model
    a.insert("W0", Array::matrix(2, 2, vec![1.0, 0.0, 0.0, 1.0]));
    let bad = write(tmp.path(), "bad.npz", &a);
    refused_with(
        "stable-numerics",
        &[format!("init_file={}", bad.display())],
        "bad.npz",
        &["W0", "d = 32"],
    );
}

#[test]
fn joint_training_reads_u0_and_constructed_optimal_tokens_and_refuses_bad_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = instance(None);
    a.insert("opt", Array::vector(&[0.0, 7.0, 0.0]));
    let data = write(tmp.path(), "data.npz", &a);
    refused_with(
        "joint-training",
        &[format!("data_file={}", data.display())],
        "data.npz",
        &["opt[1]", "token index in 0..3"],
    );
    let data = write(tmp.path(), "data.npz", &instance(None));
    let mut init = Arrays::new();
    init.insert("W0", Array::matrix(5, 5, vec![0.0; 25]))
        .insert("u0", Array::vector(&[0.0; 3]));
    let bad = write(tmp.path(), "init.npz", &init);
    refused_with(
        "joint-training",
        &[
            format!("data_file={}", data.display()),
            format!("init_file={}", bad.display()),
        ],
        "init.npz",
        &["u0", "axis 0 should be 5"],
    );
    // a non-zero start: the checks that assume Cond. 1(i) are skipped, Lemma 10 runs from it
    let mut u0 = vec![0.0; 5];
    u0[0] = 0.3;
    init.insert("u0", Array::vector(&u0));
    let good = write(tmp.path(), "init.npz", &init);
    let dir = run_any(
        tmp.path(),
        "o",
        "joint-training",
        &[
            format!("data_file={}", data.display()),
            format!("init_file={}", good.display()),
        ],
    );
    let checks = read_json(&dir.join("checks.json"));
    let skipped: Vec<&str> = checks["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reason"].as_str().unwrap())
        .collect();
    assert!(skipped.iter().any(|r| r.contains("Cond. 1(i)")), "{checks}");
    assert!(skipped.iter().any(|r| r.contains("Fig. 3")), "{checks}");
    let lemma10: Vec<&serde_json::Value> = checks["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("lem-10-"))
        .collect();
    assert!(!lemma10.is_empty(), "{checks}");
    for c in lemma10 {
        assert_eq!(c["pass"], true, "{c}");
    }
    let written =
        Arrays::from_npz_bytes(&std::fs::read(dir.join("instance.npz")).unwrap()).unwrap();
    assert_eq!(written.get("u0").unwrap().data, u0);
}

#[test]
fn usvm_kkt_refuses_a_file_whose_optimal_tokens_no_decoder_separates() {
    // one optimal token e₀ under both labels: y uᵀe₀ ≥ 1 for y = ±1 is impossible, while the
    // W-SVM (the same constraint for both sequences) is feasible
    let tmp = tempfile::tempdir().unwrap();
    let mut a = Arrays::new();
    a.insert(
        "X",
        Array::new(&[2, 2, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]),
    )
    .insert("y", Array::vector(&[1.0, -1.0]))
    .insert("u", Array::vector(&[1.0, 0.0]))
    .insert("opt", Array::vector(&[0.0, 0.0]));
    let file = write(tmp.path(), "sep.npz", &a);
    refused_with(
        "usvm-kkt",
        &[format!("data_file={}", file.display())],
        "sep.npz",
        &["X", "u-SVM is infeasible"],
    );
    // joint training needs the same u-SVM (Thm 4 measures the decoder against it)
    refused_with(
        "joint-training",
        &[format!("data_file={}", file.display())],
        "sep.npz",
        &["X", "u-SVM is infeasible"],
    );
}

/// flow-path-equivalence on the tokens written here from W₀ = 0: the first recorded excess loss
/// is L(0) − L* computed here (uniform softmax), the three flows agree on the path (every theorem
/// check passes), and Example 1's GF-time threshold is skipped with the reason.
#[test]
fn flow_path_equivalence_on_data_written_from_scratch() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "mine.npz", &instance(Some(vec![0.0; 25])));
    let f = file.display().to_string();
    let dir = run_any(
        tmp.path(),
        "o",
        "flow-path-equivalence",
        &[format!("data_file={f}"), format!("init_file={f}")],
    );
    let checks = read_json(&dir.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");
    let skipped = checks["skipped"].to_string();
    assert!(skipped.contains("GF time t(s_end)"), "{skipped}");
    let (x, y, u) = tokens();
    let gamma = |i: usize, t: usize| -> f64 {
        y[i] * (0..5).map(|r| u[r] * x[(i * 3 + t) * 5 + r]).sum::<f64>()
    };
    let l0: f64 = (0..3)
        .map(|i| (-(0..3).map(|t| gamma(i, t)).sum::<f64>() / 3.0).exp())
        .sum::<f64>()
        / 3.0;
    let l_star: f64 = (0..3).map(|i| (-gamma(i, 0)).exp()).sum::<f64>() / 3.0;
    let first = column(&dir, "log10_excess_loss")[0];
    let want = (l0 - l_star).log10();
    assert!((first - want).abs() < 1e-12, "{first} vs {want}");
    assert_eq!(
        Arrays::from_npz_bytes(&std::fs::read(dir.join("instance.npz")).unwrap()).unwrap(),
        instance(Some(vec![0.0; 25]))
    );
}

/// assumption-check on the tokens written here: the sweep's checks (laws of the random data
/// models across d) are skipped, the file's Cond. 1(ii) ratio min_i ‖x_opt‖²/max_{t≠opt}‖x_t‖²
/// equals the one computed here, and the written instance fed back reproduces the run.
#[test]
fn assumption_check_reports_the_assumptions_of_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "mine.npz", &instance(None));
    let dir = run_any(
        tmp.path(),
        "o",
        "assumption-check",
        &[format!("data_file={}", file.display())],
    );
    let checks = read_json(&dir.join("checks.json"));
    // the d-sweep laws: Ass. 2, Lemmas 6 and 9, W-SVM feasibility, Cond. 1(ii) and Cond. 2
    assert_eq!(checks["skipped"].as_array().unwrap().len(), 11, "{checks}");
    let (x, _, _) = tokens();
    let sq = |i: usize, t: usize| (0..5).map(|r| x[(i * 3 + t) * 5 + r].powi(2)).sum::<f64>();
    let want = attnflow::stats::min((0..3).map(|i| sq(i, 0) / sq(i, 1).max(sq(i, 2))));
    let derived = &read_json(&dir.join("params.json"))["derived"];
    let got = derived["data_file.cond1_opt_norm_ratio"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-14 * want, "{got} vs {want}");
    assert_eq!(derived["data_file.ass2_holds"], false, "{derived}");
    let again = run_any(
        tmp.path(),
        "p",
        "assumption-check",
        &[format!("data_file={}", dir.join("instance.npz").display())],
    );
    for f in ["series.csv", "checks.json", "instance.npz"] {
        assert_eq!(
            std::fs::read(dir.join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f}"
        );
    }
}

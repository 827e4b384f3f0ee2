//! Seed 004 instance files: instances written from scratch run through the generic flow
//! (`flow-diagonal`) and the paper's scenarios (`stage-times`, `algorithm1-attn`), checked against
//! computations on the same data done here; a run's `instance.npz` fed back reproduces it byte
//! for byte; bad files are refused with exit code 2, the file and array named, nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use attnflow::instance::{Array, Arrays};

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/diagonal/{name}.toml"))
}

fn run(name: &str, out: &Path, set: &[String]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_attnflow"));
    cmd.arg("run")
        .arg(scenario(name))
        .arg("--quick")
        .arg("--out")
        .arg(out);
    for s in set {
        cmd.arg("--set").arg(s);
    }
    cmd.output().expect("runs the binary")
}

fn write(path: &Path, a: &Arrays) {
    std::fs::write(path, a.to_npz_bytes()).unwrap();
}

/// Column `col` of a CSV file, as numbers.
fn column(path: &Path, col: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let j = header
        .iter()
        .position(|h| *h == col)
        .unwrap_or_else(|| panic!("{col} in {header:?}"));
    lines
        .map(|l| l.split(',').nth(j).unwrap().parse().unwrap())
        .collect()
}

/// Σ = [[2, 0.5], [0.5, 1]], β* = (1, 0.8), u0 = (1, 0.5), v0 = (0.3, −1).
fn linear_instance() -> Arrays {
    let mut a = Arrays::new();
    a.insert("Sigma", Array::matrix(2, 2, vec![2.0, 0.5, 0.5, 1.0]))
        .insert("beta_star", Array::vector(&[1.0, 0.8]))
        .insert("u0", Array::vector(&[1.0, 0.5]))
        .insert("v0", Array::vector(&[0.3, -1.0]));
    a
}

#[test]
fn a_linear_instance_from_scratch_runs_the_flow_and_stage_times() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mine.npz");
    write(&file, &linear_instance());
    let data = format!("data_file={}", file.display());

    // the flow: ℓ(0) = ½ (β0 − β*)ᵀΣ(β0 − β*) with β0 = α² u0 ⊙ v0, α = 1e−3
    let out = tmp.path().join("flow");
    let o = run("flow-diagonal", &out, &[data.clone()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let alpha2 = 1e-6;
    let b0 = [alpha2 * 1.0 * 0.3, alpha2 * 0.5 * -1.0];
    let e = [b0[0] - 1.0, b0[1] - 0.8];
    let by_hand = 0.5 * (2.0 * e[0] * e[0] + 2.0 * 0.5 * e[0] * e[1] + 1.0 * e[1] * e[1]);
    let loss = column(&out.join("flow-diagonal/series.csv"), "loss");
    assert!(
        (loss[0] / by_hand - 1.0).abs() < 1e-12,
        "{} vs {by_hand}",
        loss[0]
    );
    // Σ ≻ 0 and a realizable teacher: the flow ends at β* (loss ≈ 0)
    assert!(*loss.last().unwrap() < 1e-8 * by_hand, "{loss:?}");

    // stage-times: T_1 = 1/max|g(0)| with g(0) = r = Σβ* = (2.4, 1.3)
    let out = tmp.path().join("st");
    let o = run(
        "stage-times",
        &out,
        &[data, "sweep.grid.instance=[\"r1\"]".into()],
    );
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t_k = column(&out.join("stage-times/series.csv"), "T_k");
    assert!((t_k[0] * 2.4 - 1.0).abs() < 1e-12, "T_1 = {}", t_k[0]);
    let runs = std::fs::read_dir(out.join("stage-times/runs")).unwrap();
    for r in runs {
        let npz = std::fs::read(r.unwrap().path().join("instance.npz")).unwrap();
        assert_eq!(Arrays::from_npz_bytes(&npz).unwrap(), linear_instance());
    }
}

/// N = 3 samples of n = 2 tokens in ℝ²; labels Y given (not a teacher).
fn attention_instance() -> (Arrays, Vec<f64>, Vec<f64>) {
    let x: Vec<f64> = (0..12).map(|k| ((k * 7 % 11) as f64 - 5.0) / 4.0).collect();
    let y: Vec<f64> = (0..12).map(|k| ((k * 5 % 7) as f64 - 3.0) / 3.0).collect();
    let mut a = Arrays::new();
    a.insert("X", Array::new(&[3, 2, 2], x.clone()))
        .insert("Y", Array::new(&[3, 2, 2], y.clone()));
    (a, x, y)
}

#[test]
fn an_attention_instance_from_scratch_runs_algorithm1_and_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let (arrays, x, y) = attention_instance();
    let file = tmp.path().join("head.npz");
    write(&file, &arrays);
    let out = tmp.path().join("a");
    let o = run(
        "algorithm1-attn",
        &out,
        &[format!("data_file={}", file.display())],
    );
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // at β = 0 the softmax is uniform: f(X) = x̄ ⊙ c per token, so
    // g_VO[r](0) = (2κ/N) Σ_s x̄_{s,r} Σ_j Y_{s,j,r}, κ = 1/(n d); T_1 = 1/max_r |g_VO[r]|
    let (n, d, count) = (2, 2, 3);
    let kappa = 1.0 / (n * d) as f64;
    let g: Vec<f64> = (0..d)
        .map(|r| {
            (0..count)
                .map(|s| {
                    let mean = (0..n).map(|j| x[s * n * d + j * d + r]).sum::<f64>() / n as f64;
                    mean * (0..n).map(|j| y[s * n * d + j * d + r]).sum::<f64>()
                })
                .sum::<f64>()
                * 2.0
                * kappa
                / count as f64
        })
        .collect();
    let t1 = 1.0 / g.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let t_k = column(&out.join("algorithm1-attn/series.csv"), "T_k");
    assert!(
        (t_k[1] / t1 - 1.0).abs() < 1e-10,
        "T_1 = {} vs {t1}",
        t_k[1]
    );
    let checks = std::fs::read_to_string(out.join("algorithm1-attn/checks.json")).unwrap();
    assert!(
        checks.contains("a zero loss need not be reachable"),
        "{checks}"
    );

    // round trip: the run's instance.npz reproduces it byte for byte
    let back = tmp.path().join("b");
    let written = out.join("algorithm1-attn/instance.npz");
    let o = run(
        "algorithm1-attn",
        &back,
        &[format!("data_file={}", written.display())],
    );
    assert!(matches!(o.status.code(), Some(0 | 1)));
    for f in ["series.csv", "checks.json", "figure.svg", "instance.npz"] {
        let a = std::fs::read(out.join("algorithm1-attn").join(f)).unwrap();
        let b = std::fs::read(back.join("algorithm1-attn").join(f)).unwrap();
        assert!(a == b, "{f} differs");
    }
}

#[test]
fn the_default_flow_round_trips_through_its_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first");
    assert!(run("flow-diagonal", &first, &[]).status.success());
    let written = first.join("flow-diagonal/instance.npz");
    let again = tmp.path().join("again");
    let o = run(
        "flow-diagonal",
        &again,
        &[format!("data_file={}", written.display())],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in [
        "series.csv",
        "checks.json",
        "figure.svg",
        "instance.npz",
        "spectra.csv",
    ] {
        let a = std::fs::read(first.join("flow-diagonal").join(f)).unwrap();
        let b = std::fs::read(again.join("flow-diagonal").join(f)).unwrap();
        assert!(a == b, "{f} differs");
    }
}

#[test]
fn bad_files_are_refused_with_the_file_and_array_named() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cases: Vec<(&str, Arrays, &str)> = Vec::new();
    let mut shape = linear_instance();
    shape.insert("beta_star", Array::vector(&[1.0, 0.8, 0.1]));
    cases.push(("shape", shape, "beta_star"));
    let mut nan = linear_instance();
    nan.insert("Sigma", Array::matrix(2, 2, vec![2.0, f64::NAN, 0.5, 1.0]));
    cases.push(("nan", nan, "Sigma[0, 1]"));
    let mut indefinite = linear_instance();
    indefinite.insert("Sigma", Array::matrix(2, 2, vec![1.0, 2.0, 2.0, 1.0]));
    cases.push(("indefinite", indefinite, "positive definite"));
    let mut balanced = linear_instance();
    balanced.insert("v0", Array::vector(&[0.3, 0.5]));
    cases.push(("balanced", balanced, "v0[1]"));
    for (name, arrays, key) in cases {
        let file = tmp.path().join(format!("{name}.npz"));
        write(&file, &arrays);
        for scenario in ["flow-diagonal", "stage-times"] {
            let out = tmp.path().join(format!("out-{name}-{scenario}"));
            let set = [
                format!("data_file={}", file.display()),
                "sweep.grid.instance=[\"r1\"]".into(),
            ];
            let o = run(
                scenario,
                &out,
                &set[..if scenario == "stage-times" { 2 } else { 1 }],
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{name}/{scenario}: {err}");
            assert!(
                err.contains(&format!("{name}.npz")) && err.contains(key),
                "{name}: {err}"
            );
            assert!(
                !out.join(scenario).exists(),
                "{name}/{scenario}: nothing written"
            );
        }
    }
}

/// Every file under `dir` (relative paths, sorted), without `params.json` and `sweep.json`
/// (they name the input files, which differ between the runs compared).
fn outputs(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path
                .file_name()
                .is_some_and(|n| n != "params.json" && n != "sweep.json")
            {
                out.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The (id, measured value) of the checks in `file`, in order, with the built-in instance's
/// label in the ids written as "data", the label of a user's file.
fn measured(dir: &Path, file: &str) -> Vec<(String, serde_json::Value)> {
    let path = dir.join(file);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let label = |id: &str| {
        ["r2-degenerate", "r2", "r1", "mini"]
            .iter()
            .fold(id.to_string(), |n, l| n.replace(l, "data"))
    };
    json["checks"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| (label(c["id"].as_str().unwrap_or("")), c["measured"].clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Where a run keeps `instance.npz` and `checks.json`: its folder, or a sweep's first run.
fn run_dir(out: &Path) -> PathBuf {
    let first = out.join("runs/0000");
    if first.is_dir() {
        first
    } else {
        out.to_path_buf()
    }
}

/// The converted seed-004 scenarios (quick configurations) with the settings that make a data
/// file acceptable: one instance where they loop over a list or sweep a grid of instances.
const CONVERTED: &[(&str, &[&str])] = &[
    ("conservation-law", &["instances=[\"mini\"]"]),
    ("diag-linear-greedy", &["instances=[\"r2\"]"]),
    ("diag-linear-riccati", &[]),
    ("gradient-check", &[]),
    ("stage1-linear-regime", &[]),
    ("nondegeneracy", &["instances=[\"r2\"]"]),
    ("hessian-strict-min", &["instances=[\"mini\"]"]),
    ("linearization-spectrum", &["instances=[\"mini\"]"]),
    ("noise-robustness", &[]),
    ("plateau-convergence", &[]),
    ("log-scale-tracking", &["sweep.grid.instance=[\"r2\"]"]),
    ("rank-staircase", &[]),
    ("transition-width", &[]),
    ("raw-vs-log", &[]),
    ("fig2-loss", &[]),
    ("fig8-kq-entries", &[]),
    ("fig9-vo-entries", &[]),
    ("diag-gd-vs-flow", &["alpha=1e-4"]), // quick is 10–20 s; α = 1e−4 takes 1.5 s
    ("fig10-perturb-plateau", &[]),
    ("fig11-perturb-stage-start", &[]),
];

/// For every converted scenario: the built-in run's `instance.npz` fed back as `data_file` gives
/// the same measured values (and writes the same `instance.npz`); fed back once more, the run
/// repeats byte for byte (every output file but `params.json`).
#[test]
fn converted_scenarios_round_trip_through_their_instance() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, sets) in CONVERTED {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let dir = |tag: &str| tmp.path().join(format!("{name}-{tag}"));
        let go = |tag: &str, file: Option<&Path>| {
            let mut all = sets.clone();
            if let Some(f) = file {
                all.push(format!("data_file={}", f.display()));
            }
            let o = run(name, &dir(tag), &all);
            assert!(
                matches!(o.status.code(), Some(0 | 1)),
                "{name} {tag}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            dir(tag).join(name)
        };
        let builtin = go("builtin", None);
        let written = run_dir(&builtin).join("instance.npz");
        let first = go("file", Some(&written));
        let again = go("again", Some(&run_dir(&first).join("instance.npz")));
        let read = |d: &Path, f: &str| {
            std::fs::read(d.join(f)).unwrap_or_else(|e| panic!("{d:?}/{f}: {e}"))
        };
        assert!(
            std::fs::read(&written).unwrap() == read(&run_dir(&first), "instance.npz"),
            "{name}: the fed-back run wrote another instance"
        );
        // a sweep's checks: each run's and the reduction's (top folder)
        let mut count = 0;
        for run_of in [run_dir, |d: &Path| d.to_path_buf()] {
            let values = measured(&run_of(&builtin), "checks.json");
            count += values.len();
            // every check of the fed-back run measures what the built-in run measured (checks
            // of the built-in instance only are skipped on a file)
            for check in measured(&run_of(&first), "checks.json") {
                assert!(
                    values.contains(&check),
                    "{name}: {check:?} of the fed-back run is not among the built-in run's"
                );
            }
            let (f, a) = (run_of(&first), run_of(&again));
            assert_eq!(
                measured(&f, "checks.json"),
                measured(&a, "checks.json"),
                "{name}"
            );
        }
        assert!(count > 0, "{name}: no checks");
        let files = outputs(&first);
        assert_eq!(files, outputs(&again), "{name}: other output files");
        for f in &files {
            let f = f.to_str().unwrap();
            assert!(read(&first, f) == read(&again, f), "{name}: {f} differs");
        }
    }
}

/// Rows of a CSV file as text fields.
fn rows(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn greedy_on_a_linear_instance_from_scratch_gives_the_stage_times_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mine.npz");
    write(&file, &linear_instance());
    let out = tmp.path().join("g");
    let o = run(
        "diag-linear-greedy",
        &out,
        &[
            format!("data_file={}", file.display()),
            "instances=[\"r1\"]".into(),
        ],
    );
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // g(0) = r = Σβ* = (2.4, 1.3): β_0 activates at T_1 = 1/2.4 and stage 1 ends at β¹ = (1.2, 0),
    // where g = r − Σβ¹ = (0, 0.7). The log scale of β_1 fell from 1 at rate 1.3 until T_1, then
    // at rate 0.7: it reaches 0 at T_2 = T_1 + (1 − 1.3 T_1)/0.7, and stage 2 ends at β*.
    let t1 = 1.0 / 2.4;
    let t2 = t1 + (1.0 - 1.3 * t1) / 0.7;
    let table = rows(&out.join("diag-linear-greedy/stages.csv"));
    let col = |h: &str| table[0].iter().position(|x| x == h).unwrap();
    let t_k: Vec<f64> = table[1..]
        .iter()
        .map(|r| r[col("T_k")].parse().unwrap())
        .collect();
    assert_eq!(t_k.len(), 3, "{table:?}");
    assert!((t_k[1] - t1).abs() < 1e-12, "T_1 = {}", t_k[1]);
    assert!((t_k[2] / t2 - 1.0).abs() < 1e-9, "T_2 = {} vs {t2}", t_k[2]);
    assert!(table[1..].iter().all(|r| r[col("instance")] == "data"));
    let checks = std::fs::read_to_string(out.join("diag-linear-greedy/checks.json")).unwrap();
    assert!(checks.contains("spec §3.6 reference stages"), "{checks}");
    // no θ_0 is used: instance.npz holds the data only
    let npz = std::fs::read(out.join("diag-linear-greedy/instance.npz")).unwrap();
    let mut data = Arrays::new();
    data.insert("Sigma", linear_instance().get("Sigma").unwrap().clone())
        .insert("beta_star", Array::vector(&[1.0, 0.8]));
    assert_eq!(Arrays::from_npz_bytes(&npz).unwrap(), data);
}

/// Data of the wrong model for a scenario, a Σ ≠ I for the Riccati closed form, and a list of
/// instances beside a data file are refused before anything runs.
#[test]
fn files_a_scenario_cannot_use_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let linear = tmp.path().join("linear.npz");
    write(&linear, &linear_instance());
    let head = tmp.path().join("head.npz");
    write(&head, &attention_instance().0);
    let cases: &[(&str, &Path, &[&str], &str)] = &[
        ("gradient-check", &linear, &[], "linear.npz|Sigma"),
        ("fig8-kq-entries", &linear, &[], "linear.npz|Sigma"),
        (
            "diag-linear-greedy",
            &head,
            &["instances=[\"r1\"]"],
            "head.npz|X",
        ),
        (
            "diag-linear-riccati",
            &linear,
            &[],
            "linear.npz|Sigma[0, 0]",
        ),
        ("diag-linear-riccati", &head, &[], "head.npz|X"),
        ("conservation-law", &linear, &[], "params.instances"),
        ("log-scale-tracking", &linear, &[], "sweep.grid.instance"),
        ("raw-vs-log", &linear, &[], "params.shown_coordinate"),
    ];
    for (i, (name, file, sets, message)) in cases.iter().enumerate() {
        let out = tmp.path().join(format!("out-{i}"));
        let mut all: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        all.push(format!("data_file={}", file.display()));
        let o = run(name, &out, &all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        for part in message.split('|') {
            assert!(err.contains(part), "{name}: {part} in {err}");
        }
        assert!(!out.join(name).exists(), "{name}: nothing written");
    }
}

/// The log clock past convergence (task B of issue 17's helper "diag"): the flow is integrated
/// in pieces, and at each restart diffsol's initial-step heuristic probes the field at
/// s₀ + 0.01‖z‖/‖ż‖ — once the flow is slow, decades of t beyond the run, where the clock's
/// factor dt/ds = τeˢ is ~1e73 (or infinite): h < 1e−13 and "step size too small". Fixed by
/// freezing the log-clock field past the run's last clock value in `src/flow/clock.rs`.
#[test]
fn the_log_clock_follows_the_flow_past_convergence() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mine.npz");
    write(&file, &linear_instance());
    let out = tmp.path().join("log");
    let o = run(
        "flow-diagonal",
        &out,
        &[format!("data_file={}", file.display()), "clock=log".into()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Σ ≻ 0, realizable: the loss ends at ≈ 0 (β = β*)
    let loss = column(&out.join("flow-diagonal/series.csv"), "loss");
    assert!(*loss.last().unwrap() < 1e-12 * loss[0], "{loss:?}");
}

/// A full-matrix head instance written here: d = 3, N = 8 inputs of n = 2 tokens (fixed
/// numbers), a rank-1 KQ teacher and a rank-1 VO teacher (thin SVDs), and θ₁ with d_h = 2.
fn full_matrix_instance() -> Arrays {
    let (count, n, d, d_h) = (8, 2, 3, 2);
    let x: Vec<f64> = (0..count * n * d)
        .map(|k| ((k * 37 % 23) as f64 - 11.0) / 8.0)
        .collect();
    let theta: Vec<f64> = (0..4 * d * d_h)
        .map(|k| ((k * 13 % 11) as f64 - 5.0) / 10.0)
        .collect();
    let s = 0.6_f64.sqrt();
    let mut a = Arrays::new();
    a.insert("X", Array::new(&[count, n, d], x))
        .insert(
            "kq_U",
            Array::matrix(d, 1, vec![s, 0.8_f64.sqrt() * 0.5, -(0.4 - 0.2_f64).sqrt()]),
        )
        .insert("kq_sigma", Array::vector(&[1.5]))
        .insert("kq_V", Array::matrix(d, 1, vec![0.0, 1.0, 0.0]))
        .insert("vo_U", Array::matrix(d, 1, vec![0.6, 0.0, 0.8]))
        .insert("vo_sigma", Array::vector(&[1.0]))
        .insert("vo_V", Array::matrix(d, 1, vec![0.0, 0.0, -1.0]));
    for (k, name) in ["W_K0", "W_Q0", "W_V0", "W_O0"].iter().enumerate() {
        let block = theta[k * d * d_h..(k + 1) * d * d_h].to_vec();
        a.insert(name, Array::matrix(d, d_h, block));
    }
    a
}

/// f(X) = smax(X A Xᵀ) X M row by row and L = (1/N) Σ ‖f(X_s) − Y_s‖²/(n d), Y_s = f(X_s; A*, M*),
/// written out here from the file's arrays, at θ(0) = s·θ₁.
fn full_matrix_loss_by_hand(a: &Arrays, scale: f64) -> f64 {
    let x = a.get("X").unwrap();
    let (count, n, d) = (x.shape[0], x.shape[1], x.shape[2]);
    let mat = |name: &str| a.get(name).unwrap().data.clone();
    let d_h = a.get("W_K0").unwrap().shape[1];
    // P = L Rᵀ (d×d) from row-major d×r factors, times c
    let product = |l: &[f64], r: &[f64], k: usize, c: f64| -> Vec<f64> {
        (0..d * d)
            .map(|ij| {
                c * (0..k)
                    .map(|m| l[(ij / d) * k + m] * r[(ij % d) * k + m])
                    .sum::<f64>()
            })
            .collect()
    };
    let teacher = |prefix: &str| {
        let s = a.get(&format!("{prefix}_sigma")).unwrap().data[0];
        product(
            &mat(&format!("{prefix}_U")),
            &mat(&format!("{prefix}_V")),
            1,
            s,
        )
    };
    let s2 = scale * scale;
    let student = [
        product(&mat("W_K0"), &mat("W_Q0"), d_h, s2),
        product(&mat("W_V0"), &mat("W_O0"), d_h, s2),
    ];
    let f = |xs: &[f64], am: &[f64], mm: &[f64]| -> Vec<f64> {
        let mut out = vec![0.0; n * d];
        for i in 0..n {
            let scores: Vec<f64> = (0..n)
                .map(|j| {
                    (0..d)
                        .flat_map(|p| (0..d).map(move |q| (p, q)))
                        .map(|(p, q)| xs[i * d + p] * am[p * d + q] * xs[j * d + q])
                        .sum()
                })
                .collect();
            let top = attnflow::stats::max(&scores);
            let w: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
            let total: f64 = w.iter().sum();
            for j in 0..n {
                for c in 0..d {
                    let xm: f64 = (0..d).map(|p| xs[j * d + p] * mm[p * d + c]).sum();
                    out[i * d + c] += w[j] / total * xm;
                }
            }
        }
        out
    };
    let (a_star, m_star) = (teacher("kq"), teacher("vo"));
    let total: f64 = x
        .data
        .chunks(n * d)
        .map(|xs| {
            let y = f(xs, &a_star, &m_star);
            let fx = f(xs, &student[0], &student[1]);
            fx.iter().zip(&y).map(|(p, q)| (p - q).powi(2)).sum::<f64>()
        })
        .sum();
    total / (count * n * d) as f64
}

/// full-matrix-rank on a file written here: L(0) at each scale against the hand computation,
/// the teacher reached; the run's instance.npz holds the file's arrays and feeds back byte for
/// byte; the built-in quick run round-trips through its own instance.npz byte for byte.
#[test]
fn full_matrix_rank_runs_on_a_file_and_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let mine = full_matrix_instance();
    let file = tmp.path().join("head.npz");
    write(&file, &mine);
    let sets = |f: &Path| {
        vec![
            format!("data_file={}", f.display()),
            format!("init_file={}", f.display()),
            "scales=[0.1, 0.01]".to_string(),
            "t_end=400".into(),
            "outputs=20".into(),
            "top=3".into(),
        ]
    };
    let out = tmp.path().join("a");
    let o = run("full-matrix-rank", &out, &sets(&file));
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = out.join("full-matrix-rank");
    let scales = column(&dir.join("final.csv"), "s");
    let loss0 = column(&dir.join("final.csv"), "loss_0");
    for (s, l) in scales.iter().zip(&loss0) {
        let want = full_matrix_loss_by_hand(&mine, *s);
        assert!(
            (l - want).abs() <= 1e-12 * want,
            "s = {s}: L(0) = {l} vs {want}"
        );
    }
    let written = std::fs::read(dir.join("instance.npz")).unwrap();
    assert_eq!(Arrays::from_npz_bytes(&written).unwrap(), mine);
    // fed back: the same outputs
    let again = tmp.path().join("b");
    let o = run("full-matrix-rank", &again, &sets(&dir.join("instance.npz")));
    assert!(matches!(o.status.code(), Some(0 | 1)));
    let files = outputs(&dir);
    assert!(files.len() >= 5, "{files:?}");
    for f in &files {
        let a = std::fs::read(dir.join(f)).unwrap();
        let b = std::fs::read(again.join("full-matrix-rank").join(f)).unwrap();
        assert!(a == b, "{f:?} differs");
    }

    // the built-in (quick) instance: its instance.npz reproduces the run byte for byte
    let builtin = tmp.path().join("c");
    let o = run("full-matrix-rank", &builtin, &[]);
    assert!(matches!(o.status.code(), Some(0 | 1)));
    let first = builtin.join("full-matrix-rank");
    let inst = first.join("instance.npz");
    let fed = tmp.path().join("d");
    let o = run(
        "full-matrix-rank",
        &fed,
        &[
            format!("data_file={}", inst.display()),
            format!("init_file={}", inst.display()),
        ],
    );
    assert!(matches!(o.status.code(), Some(0 | 1)));
    for f in &outputs(&first) {
        let a = std::fs::read(first.join(f)).unwrap();
        let b = std::fs::read(fed.join("full-matrix-rank").join(f)).unwrap();
        assert!(a == b, "built-in round trip: {f:?} differs");
    }
}

/// The full-matrix layout's refusals: frames that are not orthonormal, singular values out of
/// order, a teacher of higher rank than d_h, an init of another d.
#[test]
fn full_matrix_files_that_do_not_fit_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let with = |name: &str, array: Array| {
        let mut a = full_matrix_instance();
        a.insert(name, array);
        a
    };
    let cases = [
        (
            "frame",
            with("vo_U", Array::matrix(3, 1, vec![0.6, 0.1, 0.8])),
            "vo_U",
        ),
        (
            "order",
            {
                let mut a = with("kq_sigma", Array::vector(&[1.0, 1.5]));
                a.insert(
                    "kq_U",
                    Array::matrix(3, 2, vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0]),
                )
                .insert(
                    "kq_V",
                    Array::matrix(3, 2, vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0]),
                );
                a
            },
            "kq_sigma[1]",
        ),
        (
            "rank",
            {
                let mut a = with("kq_sigma", Array::vector(&[2.0, 1.5, 1.0]));
                let eye = vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
                a.insert("kq_U", Array::matrix(3, 3, eye.clone()))
                    .insert("kq_V", Array::matrix(3, 3, eye));
                a
            },
            "kq_sigma",
        ),
        (
            "init",
            with("W_K0", Array::matrix(2, 2, vec![0.1, 0.2, 0.3, 0.4])),
            "W_Q0",
        ),
    ];
    for (name, arrays, key) in cases {
        let file = tmp.path().join(format!("{name}.npz"));
        write(&file, &arrays);
        let out = tmp.path().join(format!("out-{name}"));
        let o = run(
            "full-matrix-rank",
            &out,
            &[
                format!("data_file={}", file.display()),
                format!("init_file={}", file.display()),
            ],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(&format!("{name}.npz")) && err.contains(key),
            "{name}: {key} in {err}"
        );
        assert!(
            !out.join("full-matrix-rank").exists(),
            "{name}: nothing written"
        );
    }
}

//! Histogram instances (seed 000) as a user gives them: a file written from scratch runs the
//! generic flow and a paper scenario, checked against computations on the same data done here;
//! a run's `instance.npz` fed back reproduces its outputs byte for byte; bad files are refused
//! with the file, the array and exit code 2, and nothing is written.

use std::path::Path;
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

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A column of a CSV file by header name.
fn csv_column(path: &Path, name: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let j = header.iter().position(|h| *h == name).unwrap();
    lines
        .map(|l| l.split(',').nth(j).unwrap().parse().unwrap())
        .collect()
}

const D: usize = 3;
/// A custom task (not eq/lt/thr): real weights, every column nonzero.
const M: [[f64; D]; D] = [[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.3, 0.0, 2.0]];
const Q0: [[f64; D]; D] = [[0.4, -0.2, 0.1], [0.3, 0.5, -0.3], [-0.1, 0.2, 0.6]];
const V0: [f64; D] = [0.5, -0.4, 0.7];

/// 9 strings of length 6 on 3 symbols: varied counts, so every H_a is definite.
fn strings() -> Vec<Vec<usize>> {
    let mut x: u64 = 7;
    (0..9)
        .map(|_| {
            (0..6)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) % D as u64) as usize
                })
                .collect()
        })
        .collect()
}

fn instance(strings: &[Vec<usize>]) -> Arrays {
    let flat = |rows: &[[f64; D]; D]| rows.iter().flatten().copied().collect::<Vec<_>>();
    let mut a = Arrays::new();
    let n = strings.len();
    let len = strings[0].len();
    a.insert("M", Array::matrix(D, D, flat(&M)))
        .insert("Q0", Array::matrix(D, D, flat(&Q0)))
        .insert("v0", Array::vector(&V0))
        .insert(
            "strings",
            Array::new(
                &[n, len],
                strings.iter().flatten().map(|&s| s as f64).collect(),
            ),
        );
    a
}

fn write(dir: &Path, name: &str, a: &Arrays) -> String {
    std::fs::write(dir.join(name), a.to_npz_bytes()).unwrap();
    name.to_string()
}

/// ℓ_tf at (Q0, v0), literally: 1/(2n) Σ_k Σ_j (ŷ_j − y_j)², ŷ_j = Σ_{j'} (Q0)[s_j, s_j'] v0[s_j'],
/// y_j = Σ_{j'} M[s_j, s_j'] (the one-hot products written out).
fn tf_loss_by_hand(strings: &[Vec<usize>]) -> f64 {
    let mut total = 0.0;
    for s in strings {
        for &sj in s {
            let yhat: f64 = s.iter().map(|&sk| Q0[sj][sk] * V0[sk]).sum();
            let y: f64 = s.iter().map(|&sk| M[sj][sk]).sum();
            total += (yhat - y).powi(2);
        }
    }
    total / (2.0 * strings.len() as f64)
}

/// |v_i(∞)| = √(μ_i ρ̄_i) with δ_i = β_i/μ_i, β_i = ‖q_i‖² − v_i² (spec 000 D2).
fn limit_v_by_hand() -> Vec<f64> {
    (0..D)
        .map(|i| {
            let mu = (0..D).map(|a| M[a][i] * M[a][i]).sum::<f64>().sqrt();
            let beta = (0..D).map(|a| Q0[a][i] * Q0[a][i]).sum::<f64>() - V0[i] * V0[i];
            let delta = beta / mu;
            let rhob = (1.0 + delta * delta / 4.0).sqrt() - delta / 2.0;
            (mu * rhob).sqrt()
        })
        .collect()
}

#[test]
fn a_file_written_from_scratch_runs_the_flow_and_lemma31() {
    let tmp = tempfile::tempdir().unwrap();
    let strings = strings();
    let file = write(tmp.path(), "mine.npz", &instance(&strings));

    // the generic flow, ℓ_tf: ℓ(0) by hand, the limit |v_i| from β by hand
    let data = format!("data_file={file}");
    let o = attnflow(
        &[
            "run",
            "flow-histogram",
            "--quick",
            "--set",
            &data,
            "--set",
            "t_end=40",
            "--out",
            "o",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("o/flow-histogram");
    let loss = csv_column(&dir.join("series.csv"), "loss");
    let by_hand = tf_loss_by_hand(&strings);
    assert!(
        (loss[0] - by_hand).abs() <= 1e-12 * by_hand,
        "{} vs {by_hand}",
        loss[0]
    );
    let params = read_json(&dir.join("params.json"));
    let v_end: Vec<f64> = serde_json::from_value(params["derived"]["v_end_abs"].clone()).unwrap();
    for (v, want) in v_end.iter().zip(limit_v_by_hand()) {
        assert!((v - want).abs() <= 1e-6, "|v_i(T)| = {v} vs √(μρ̄) = {want}");
    }
    let checks = read_json(&dir.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");

    // the df flow of the same file follows the closed form and reaches the same |v_i|
    let o = attnflow(
        &[
            "run",
            "flow-histogram",
            "--quick",
            "--set",
            &data,
            "--set",
            "model.loss=df",
            "--set",
            "t_end=60",
            "--out",
            "df",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("df/flow-histogram");
    let loss = csv_column(&dir.join("series.csv"), "loss");
    let df0: f64 = 0.5
        * (0..D)
            .flat_map(|a| (0..D).map(move |i| (Q0[a][i] * V0[i] - M[a][i]).powi(2)))
            .sum::<f64>();
    assert!((loss[0] - df0).abs() <= 1e-14, "{} vs {df0}", loss[0]);
    assert_eq!(read_json(&dir.join("checks.json"))["all_pass"], true);
    // the df instance holds what the run used: no strings
    let written =
        Arrays::from_npz_bytes(&std::fs::read(dir.join("instance.npz")).unwrap()).unwrap();
    assert_eq!(written.names().collect::<Vec<_>>(), ["M", "Q0", "v0"]);

    // lemma31-identity at (Q0, v0) on the same strings: its raw form is the hand computation
    let o = attnflow(
        &[
            "run",
            "lemma31-identity",
            "--quick",
            "--set",
            &data,
            "--set",
            &format!("init_file={file}"),
            "--set",
            "n=9",
            "--set",
            "n_sweep=[2, 9]",
            "--out",
            "l",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let forms = tmp.path().join("l/lemma31-identity/loss_forms.csv");
    let raw = csv_column(&forms, "raw");
    assert_eq!(raw.len(), 1, "one evaluation point: the file's (Q0, v0)");
    assert!(
        (raw[0] - by_hand).abs() <= 1e-12 * by_hand,
        "{} vs {by_hand}",
        raw[0]
    );
}

/// Runs `name` quick with `sets`, feeds its instance.npz back as data and init file, and
/// compares every output but params.json (which records the file parameters).
fn round_trip(name: &str, sets: &[&str]) {
    round_trip_as(name, sets, &["data_file", "init_file"]);
}

/// [`round_trip`] feeding instance.npz as each of `keys` (a scenario without an initial state
/// takes only data_file).
fn round_trip_as(name: &str, sets: &[&str], keys: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let run = |out: &str, extra: &[String]| {
        let mut args: Vec<String> = vec!["run".into(), name.into(), "--quick".into()];
        for s in sets
            .iter()
            .map(|s| s.to_string())
            .chain(extra.iter().cloned())
        {
            args.push("--set".into());
            args.push(s);
        }
        args.extend(["--out".into(), out.into()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = attnflow(&refs, tmp.path());
        assert!(o.status.code().unwrap_or(-1) <= 1, "{name}: {}", stderr(&o));
        tmp.path().join(out).join(name)
    };
    let first = run("a", &[]);
    let inst = first.join("instance.npz").display().to_string();
    let files: Vec<String> = keys.iter().map(|k| format!("{k}={inst}")).collect();
    let second = run("b", &files);
    let mut compared = 0;
    for entry in std::fs::read_dir(&first).unwrap() {
        let f = entry.unwrap().file_name();
        if f == "params.json" {
            continue;
        }
        let (a, b) = (
            std::fs::read(first.join(&f)).unwrap(),
            std::fs::read(second.join(&f)).unwrap(),
        );
        assert!(
            a == b,
            "{name}: {} differs after the round trip",
            f.to_string_lossy()
        );
        compared += 1;
    }
    assert!(compared >= 4, "{name}: only {compared} files");
}

#[test]
fn instance_npz_fed_back_reproduces_the_flow() {
    round_trip("flow-histogram", &[]);
}

#[test]
fn instance_npz_fed_back_reproduces_the_paper_scenarios() {
    round_trip("lemma31-identity", &["n_sweep=[5, 10, 20]", "n=20"]);
    round_trip("thm1-loss-decay", &["trials=2"]);
    round_trip("gd-vs-flow", &[]);
    round_trip("tf-vs-df", &["d=4", "seq_len=20", "n=20", "t_end_tf=8"]);
}

/// The scenarios converted in issue 17 part 2, each in its quick configuration (smaller where
/// that is still slow).
#[test]
fn instance_npz_fed_back_reproduces_the_remaining_scenarios() {
    round_trip("conservation", &[]);
    round_trip("small-init-staircase", &[]);
    round_trip("threshold-weights", &["d=6", "n=12", "seq_len=10"]);
    round_trip("bad-init", &[]);
    round_trip("near-saddle", &[]);
    round_trip("limit-kkt", &[]);
    round_trip("imbalance-sweep", &[]);
    round_trip_as("fixed-points", &[], &["data_file"]);
    round_trip_as("thm2-onset-time", &[], &["data_file"]);
}

/// limit-kkt on the custom M and (Q0, v0) written here: the flow's limit |v_i(∞)| against
/// √(μ_iρ̄_i) computed by hand from the file's β_i.
#[test]
fn limit_kkt_on_a_file_reaches_the_hand_computed_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "mine.npz", &instance(&strings()));
    let o = attnflow(
        &[
            "run",
            "limit-kkt",
            "--quick",
            "--set",
            &format!("data_file={file}"),
            "--set",
            &format!("init_file={file}"),
            "--set",
            "inits=[\"unbalanced\"]",
            "--out",
            "o",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("o/limit-kkt");
    let v_end = csv_column(&dir.join("series.csv"), "v_end");
    assert_eq!(v_end.len(), D, "one run of d columns");
    for (v, want) in v_end.iter().zip(limit_v_by_hand()) {
        assert!(
            (v.abs() - want).abs() <= 1e-7,
            "|v_i(∞)| = {v} vs √(μρ̄) = {want}"
        );
    }
    assert_eq!(read_json(&dir.join("checks.json"))["all_pass"], true);
    // the instance written is the file's, M unstacked (one matrix) and one state
    let written =
        Arrays::from_npz_bytes(&std::fs::read(dir.join("instance.npz")).unwrap()).unwrap();
    assert_eq!(written.get("M").unwrap().shape, [D, D]);
    assert_eq!(written.get("Q0").unwrap().shape, [D, D]);
}

/// Exit code 2, a message naming the file and the array, and no output folder.
fn refused(args: &[&str], file: &str, key: &str, tmp: &Path) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--out", "o"]);
    let o = attnflow(&all, tmp);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(file) && err.contains(key), "{args:?}: {err}");
    assert!(!tmp.join("o").exists(), "{args:?}: something was written");
}

#[test]
fn bad_files_are_refused_with_file_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let good = instance(&strings());
    let with = |name: &str, array: Array| {
        let mut a = good.clone();
        a.insert(name, array);
        a
    };
    let cases = [
        ("short-v0.npz", with("v0", Array::vector(&[1.0, 2.0])), "v0"),
        (
            "nan-m.npz",
            with(
                "M",
                Array::matrix(3, 3, vec![1.0, 0.0, 0.0, 0.0, f64::NAN, 0.0, 0.0, 0.0, 1.0]),
            ),
            "M[1, 1]",
        ),
        (
            "symbol.npz",
            with("strings", Array::new(&[2, 2], vec![0.0, 1.0, 3.0, 0.0])),
            "strings[1, 0]",
        ),
        (
            "zero-column.npz",
            with(
                "M",
                Array::matrix(3, 3, vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]),
            ),
            "M[:, 1]",
        ),
        // 2 strings on 3 symbols: the H_a are singular, ℓ_tf's theorems do not apply
        (
            "singular.npz",
            with(
                "strings",
                Array::new(&[2, 3], vec![0.0, 1.0, 2.0, 0.0, 0.0, 1.0]),
            ),
            "strings",
        ),
    ];
    for (file, arrays, key) in cases {
        write(tmp.path(), file, &arrays);
        let data = format!("data_file={file}");
        refused(
            &["run", "flow-histogram", "--set", &data],
            file,
            key,
            tmp.path(),
        );
    }
    // the same singular strings refused by a paper scenario of ℓ_tf
    refused(
        &[
            "run",
            "tf-vs-df",
            "--quick",
            "--set",
            "data_file=singular.npz",
        ],
        "singular.npz",
        "strings",
        tmp.path(),
    );
    // an init of another alphabet size than the data
    let mut small = Arrays::new();
    small
        .insert("Q0", Array::matrix(2, 2, vec![1.0, 0.0, 0.0, 1.0]))
        .insert("v0", Array::vector(&[1.0, 1.0]));
    write(tmp.path(), "init2.npz", &small);
    refused(
        &[
            "run",
            "thm1-loss-decay",
            "--quick",
            "--set",
            "init_file=init2.npz",
        ],
        "init2.npz",
        "Q0",
        tmp.path(),
    );
}

/// bad-init on a file written here: M = I and column 1 started on the ray q_1 = −v_1 m̂_1 (δ_1 = 0,
/// exactly on the corrected bad set): the file is accepted, ℓ(0) is the hand computation, the
/// column goes to the saddle and the checks pass.
#[test]
fn bad_init_accepts_a_column_on_the_bad_set_written_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    let mut q0 = Q0;
    let mut v0 = V0;
    (q0[0][0], q0[1][0], q0[2][0], v0[0]) = (-1.0, 0.0, 0.0, 1.0);
    let eye: Vec<f64> = (0..D * D)
        .map(|k| f64::from(u8::from(k % (D + 1) == 0)))
        .collect();
    let mut a = Arrays::new();
    a.insert("M", Array::matrix(D, D, eye))
        .insert(
            "Q0",
            Array::matrix(D, D, q0.iter().flatten().copied().collect()),
        )
        .insert("v0", Array::vector(&v0));
    let file = write(tmp.path(), "bad.npz", &a);
    let o = attnflow(
        &[
            "run",
            "bad-init",
            "--quick",
            "--set",
            &format!("data_file={file}"),
            "--set",
            &format!("init_file={file}"),
            "--set",
            "bad_columns=[1]",
            "--set",
            "bad_deltas=[0.0]",
            "--out",
            "o",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("o/bad-init");
    // ℓ_df(0) = ½‖Q0 Diag(v0) − I‖²_F
    let by_hand: f64 = 0.5
        * (0..D)
            .flat_map(|a| (0..D).map(move |i| (a, i)))
            .map(|(a, i)| (q0[a][i] * v0[i] - f64::from(u8::from(a == i))).powi(2))
            .sum::<f64>();
    let loss = csv_column(&dir.join("series.csv"), "loss");
    assert!(
        (loss[0] - by_hand).abs() <= 1e-14,
        "{} vs {by_hand}",
        loss[0]
    );
    let checks = read_json(&dir.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");
}

/// The checks the remaining scenarios add: inits that must lie on (or near) the bad set or at
/// the sweep's imbalances, one initial state per run, stacked task matrices.
#[test]
fn remaining_scenarios_refuse_files_that_do_not_fit() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "mine.npz", &instance(&strings()));
    let run = |name: &str, sets: &[&str], file: &str, key: &str| {
        let mut args = vec!["run", name, "--quick"];
        for s in sets {
            args.extend(["--set", s]);
        }
        refused(&args, file, key, tmp.path());
    };
    // a Gaussian-like init is not on the corrected bad set of column 1
    run(
        "bad-init",
        &[
            "data_file=mine.npz",
            "init_file=mine.npz",
            "bad_columns=[1]",
            "bad_deltas=[0.0]",
        ],
        "mine.npz",
        "Q0[:, 0]",
    );
    // one state for three ε
    run(
        "near-saddle",
        &["init_file=mine.npz", "d=3"],
        "mine.npz",
        "Q0",
    );
    // two tasks × two inits need four states
    run(
        "limit-kkt",
        &["init_file=mine.npz", "d=3", "tasks=[\"eq\", \"lt\"]"],
        "mine.npz",
        "Q0",
    );
    // stacked task matrices: the second has a zero column
    let mut stacked = Arrays::new();
    let mut ms = vec![0.0; 2 * D * D];
    for a in 0..D {
        ms[a * D + a] = 1.0;
        ms[D * D + a * D] = 1.0;
    }
    stacked.insert("M", Array::new(&[2, D, D], ms));
    write(tmp.path(), "stacked.npz", &stacked);
    run(
        "limit-kkt",
        &["data_file=stacked.npz"],
        "stacked.npz",
        "M[1, :, 1]",
    );
    // strings are needed by the ℓ_tf scenarios
    let mut no_strings = Arrays::new();
    no_strings.insert(
        "M",
        Array::matrix(D, D, vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
    );
    write(tmp.path(), "nostrings.npz", &no_strings);
    run(
        "conservation",
        &["data_file=nostrings.npz"],
        "nostrings.npz",
        "strings",
    );
    // Theorem 2 cases need c1 > 0
    let mut cases = Arrays::new();
    cases.insert(
        "cases",
        Array::new(&[2, 4], vec![0.5, 1.0, 1.0, -1.0, 0.5, 0.0, 1.0, 1.0]),
    );
    write(tmp.path(), "cases.npz", &cases);
    run(
        "thm2-onset-time",
        &["data_file=cases.npz", "ode_cases=1"],
        "cases.npz",
        "cases[1, 1]",
    );
}

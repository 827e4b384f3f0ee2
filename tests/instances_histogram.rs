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

/// A CSV file without its `wall_seconds` column (the solver studies time their runs); other
/// files as they are.
fn without_wall_clock(bytes: Vec<u8>) -> Vec<u8> {
    let Ok(text) = String::from_utf8(bytes.clone()) else {
        return bytes;
    };
    let Some(j) = text
        .lines()
        .next()
        .and_then(|h| h.split(',').position(|c| c == "wall_seconds"))
    else {
        return bytes;
    };
    text.lines()
        .map(|l| {
            let mut cells: Vec<&str> = l.split(',').collect();
            cells.remove(j);
            cells.join(",") + "\n"
        })
        .collect::<String>()
        .into_bytes()
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
    same_outputs(name, &first, &second);
}

/// Every output of `first` equals `second`'s byte for byte, but params.json (it records the
/// file parameters) and wall-clock measurements (the `wall_seconds` column of a CSV file, and
/// work-precision's figure with its wall-time panels).
fn same_outputs(name: &str, first: &Path, second: &Path) {
    let mut compared = 0;
    for entry in std::fs::read_dir(first).unwrap() {
        let f = entry.unwrap().file_name();
        if f == "params.json" || (name == "work-precision" && f == "figure.svg") {
            continue;
        }
        let (a, b) = (
            without_wall_clock(std::fs::read(first.join(&f)).unwrap()),
            without_wall_clock(std::fs::read(second.join(&f)).unwrap()),
        );
        assert!(
            a == b,
            "{name}: {} differs after the round trip",
            f.to_string_lossy()
        );
        compared += 1;
    }
    // work-precision: checks.json, series.csv, instance.npz (its figure is timed)
    let least = if name == "work-precision" { 3 } else { 4 };
    assert!(compared >= least, "{name}: only {compared} files");
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
/// [`refused`] for `run NAME --quick` with `--set` overrides `sets`.
fn refused_quick(name: &str, sets: &[&str], file: &str, key: &str, tmp: &Path) {
    let mut args = vec!["run", name, "--quick"];
    for s in sets {
        args.extend(["--set", s]);
    }
    refused(&args, file, key, tmp);
}

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
        refused_quick(name, sets, file, key, tmp.path())
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

/// Runs `name --quick` in `tmp` with `sets`, into `out`; a failing check (exit 1) is allowed.
fn run_quick(tmp: &Path, name: &str, sets: &[String], out: &str) -> std::path::PathBuf {
    let mut args: Vec<&str> = vec!["run", name, "--quick"];
    for s in sets {
        args.extend(["--set", s]);
    }
    args.extend(["--out", out]);
    let o = attnflow(&args, tmp);
    assert!(o.status.code().unwrap_or(-1) <= 1, "{name}: {}", stderr(&o));
    tmp.join(out).join(name)
}

/// A df and a tf problem of one d and σ: they share their draws, so the run's instance.npz is
/// one instance (M, strings, Q0, v0) that feeds back.
const STUDY_PROBLEMS: &str = "problems=[\
    {name = \"df\", flow = \"df\", task = \"lt\", d = 4, sigma = 0.5, t_end = 4.0, \
     etas = [0.04, 0.02], hvp_cost = 1.5}, \
    {name = \"tf\", flow = \"tf\", task = \"lt\", d = 4, sigma = 0.5, t_end = 0.5, \
     etas = [1e-3, 5e-4], hvp_cost = 2.0}]";

/// The solver studies: their instance.npz fed back reproduces them (wall-clock columns aside);
/// stiffness-report names its problems after the file's instance on a file, so there the
/// built-in run and the fed-back run agree in every number, and a second feed byte for byte.
#[test]
fn solver_studies_round_trip_through_their_instance() {
    round_trip("work-precision", &[STUDY_PROBLEMS]);
    // on files the stiff checks are skipped (stiff = true marks the built-in σ = 2 draw), so a
    // stiff problem's round trip differs in those two checks only
    let stiff = STUDY_PROBLEMS.replacen("hvp_cost = 1.5", "hvp_cost = 1.5, stiff = true", 1);
    let tmp = tempfile::tempdir().unwrap();
    let built_in = run_quick(
        tmp.path(),
        "work-precision",
        std::slice::from_ref(&stiff),
        "a",
    );
    let inst = built_in.join("instance.npz").display().to_string();
    let files = [
        stiff,
        format!("data_file={inst}"),
        format!("init_file={inst}"),
    ];
    let on_file = run_quick(tmp.path(), "work-precision", &files, "b");
    let checks = read_json(&on_file.join("checks.json"));
    let skipped = checks["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 2, "{checks}");
    assert_eq!(skipped[0]["id"], "bdf-loses.df-rhs-evals", "{checks}");
    let built_in_checks = read_json(&built_in.join("checks.json"));
    let kept: Vec<&serde_json::Value> = built_in_checks["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !skipped.iter().any(|k| k["id"] == c["id"]))
        .collect();
    let on_file_checks: Vec<&serde_json::Value> =
        checks["checks"].as_array().unwrap().iter().collect();
    assert_eq!(kept, on_file_checks);

    let problems = "problems=[{flow = \"df\", task = \"eq\", d = 4, sigma = 0.5}, \
                    {flow = \"tf\", task = \"eq\", d = 4, sigma = 0.5, t_end = 1.0}]";
    let built_in = run_quick(tmp.path(), "stiffness-report", &[problems.into()], "c");
    let inst = built_in.join("instance.npz").display().to_string();
    let feed = |inst: &str| {
        vec![
            problems.to_string(),
            format!("data_file={inst}"),
            format!("init_file={inst}"),
        ]
    };
    let on_file = run_quick(tmp.path(), "stiffness-report", &feed(&inst), "d");
    for (file, column) in [
        ("series.csv", "eigenvalue"),
        ("work.csv", "rhs_evals"),
        ("work.csv", "final_error_vs_closed_form"),
    ] {
        let (a, b) = (
            csv_column(&built_in.join(file), column),
            csv_column(&on_file.join(file), column),
        );
        // as text: the tf problem's closed-form error is NaN
        assert_eq!(
            format!("{a:?}"),
            format!("{b:?}"),
            "stiffness-report {file} {column}"
        );
    }
    let measured = |dir: &Path| -> Vec<serde_json::Value> {
        read_json(&dir.join("checks.json"))["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["measured"].clone())
            .collect()
    };
    assert_eq!(measured(&built_in), measured(&on_file));
    let inst = on_file.join("instance.npz").display().to_string();
    let again = run_quick(tmp.path(), "stiffness-report", &feed(&inst), "e");
    same_outputs("stiffness-report", &on_file, &again);
}

/// The file's arrays under `prefix` (one case of a run over several), without the prefix.
fn unprefixed(a: &Arrays, prefix: &str) -> Arrays {
    let mut out = Arrays::new();
    for (name, array) in a.iter() {
        if let Some(plain) = name.strip_prefix(prefix) {
            out.insert(plain, array.clone());
        }
    }
    out
}

/// histogram-tasks sweeps several d, so its instance.npz holds every case under
/// `d<d>_N<N>_<task>_`: that file is refused as data; one case's arrays, unprefixed, reproduce
/// that case's row exactly (strings and family points included), and a run on a file feeds
/// back byte for byte.
#[test]
fn histogram_tasks_cases_round_trip_through_their_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let built_in = run_quick(tmp.path(), "histogram-tasks", &[], "a");
    let all =
        Arrays::from_npz_bytes(&std::fs::read(built_in.join("instance.npz")).unwrap()).unwrap();
    // quick: 5 strings per case, 2 family points per string
    let case = unprefixed(&all, "d4_N6_lt_");
    assert_eq!(case.get("strings").unwrap().shape, [5, 6]);
    assert_eq!(case.get("Q0").unwrap().shape, [10, 4, 4]);
    write(tmp.path(), "case.npz", &case);
    let files = [
        "data_file=case.npz".to_string(),
        "init_file=case.npz".into(),
    ];
    let on_file = run_quick(tmp.path(), "histogram-tasks", &files, "b");
    let row = |dir: &Path, key: &str| -> String {
        let text = std::fs::read_to_string(dir.join("series.csv")).unwrap();
        text.lines()
            .find(|l| l.starts_with(key))
            .unwrap()
            .to_string()
    };
    assert_eq!(row(&built_in, "4.0,6.0,lt,"), row(&on_file, "4.0,6.0,lt,"));
    assert_eq!(
        read_json(&on_file.join("checks.json"))["all_pass"],
        true,
        "{}",
        std::fs::read_to_string(on_file.join("checks.json")).unwrap()
    );
    let inst = on_file.join("instance.npz").display().to_string();
    let again = run_quick(
        tmp.path(),
        "histogram-tasks",
        &[format!("data_file={inst}"), format!("init_file={inst}")],
        "c",
    );
    same_outputs("histogram-tasks", &on_file, &again);
    // the sweep's own instance.npz holds several cases: refused, with a hint
    let sweep = built_in.join("instance.npz").display().to_string();
    let o = attnflow(
        &[
            "run",
            "histogram-tasks",
            "--quick",
            "--set",
            &format!("data_file={sweep}"),
            "--out",
            "d",
        ],
        tmp.path(),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("instance.npz")
            && err.contains("d10_N100_eq_M")
            && err.contains("`d10_N100_eq_` + M"),
        "{err}"
    );
}

/// stiffness-report on the custom M and (Q0, v0) written here: at the df limit each column i
/// contributes v_i² = μ_iρ̄_i (d − 1 times) and v_i² + ‖q_i‖² = μ_i(ρ̄_i + 1/ρ̄_i) to the
/// nonzero spectrum (the Gram matrix v_i² I + q_i q_iᵀ of the column's Jacobian [v_i I, q_i],
/// with q_i = m_i/v_i), computed here from the file's β_i; d zero modes.
#[test]
fn stiffness_report_on_a_file_has_the_hand_computed_limit_spectrum() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "mine.npz", &instance(&strings()));
    let dir = run_quick(
        tmp.path(),
        "stiffness-report",
        &[
            "problems=[{flow = \"df\", task = \"eq\", d = 6, sigma = 1.0}]".into(),
            format!("data_file={file}"),
            format!("init_file={file}"),
        ],
        "o",
    );
    let mut by_hand: Vec<f64> = (0..D)
        .flat_map(|i| {
            let mu = (0..D).map(|a| M[a][i] * M[a][i]).sum::<f64>().sqrt();
            let beta = (0..D).map(|a| Q0[a][i] * Q0[a][i]).sum::<f64>() - V0[i] * V0[i];
            let delta = beta / mu;
            let rhob = (1.0 + delta * delta / 4.0).sqrt() - delta / 2.0;
            std::iter::repeat_n(mu * rhob, D - 1).chain([mu * (rhob + 1.0 / rhob)])
        })
        .collect();
    by_hand.sort_by(f64::total_cmp);
    let text = std::fs::read_to_string(dir.join("series.csv")).unwrap();
    let limit: Vec<f64> = text
        .lines()
        .filter(|l| l.contains(",limit,"))
        .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(limit.len(), D * (D + 1));
    let scale = by_hand[by_hand.len() - 1];
    let (zeros, nonzero) = limit.split_at(D);
    assert!(zeros.iter().all(|z| z.abs() <= 1e-12 * scale), "{zeros:?}");
    for (got, want) in nonzero.iter().zip(&by_hand) {
        assert!((got - want).abs() <= 1e-10 * scale, "{got} vs {want}");
    }
    let checks = read_json(&dir.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");
    assert_eq!(checks["checks"][0]["id"], "kappa-dense-kappa-d4-kappa-d4");
}

/// histogram-tasks on a task matrix with real weights and family points written here: the
/// exact-equality checks are skipped (rounding), the family check runs on the given points and
/// the series holds ℓ_tf(M, 1) = 0 up to rounding.
#[test]
fn histogram_tasks_on_a_custom_matrix_and_given_family_points() {
    let tmp = tempfile::tempdir().unwrap();
    let strings = strings();
    let mut a = instance(&strings);
    // r = 1 point per string: v = C = (1, 2, 0.5)·(1 + k/10), Q = M C⁻¹
    let (mut q, mut v) = (Vec::new(), Vec::new());
    for k in 0..strings.len() {
        let c: Vec<f64> = [1.0, 2.0, 0.5]
            .iter()
            .map(|x| x * (1.0 + k as f64 / 10.0))
            .collect();
        q.extend(
            (0..D)
                .flat_map(|r| (0..D).map(move |col| (r, col)))
                .map(|(r, col)| M[r][col] / c[col]),
        );
        v.extend(c);
    }
    a.insert("Q0", Array::new(&[strings.len(), D, D], q))
        .insert("v0", Array::new(&[strings.len(), D], v));
    let file = write(tmp.path(), "points.npz", &a);
    let dir = run_quick(
        tmp.path(),
        "histogram-tasks",
        &[format!("data_file={file}"), format!("init_file={file}")],
        "o",
    );
    let checks = read_json(&dir.join("checks.json"));
    assert_eq!(checks["all_pass"], true, "{checks}");
    assert_eq!(checks["skipped"].as_array().unwrap().len(), 3, "{checks}");
    assert_eq!(checks["checks"][0]["id"], "family", "{checks}");
    // targets y_j = Σ_j' M[s_j, s_j'] are O(N·max M); rounding only
    let loss = csv_column(&dir.join("series.csv"), "loss_at_M_1");
    assert!(loss[0] <= 1e-26, "{loss:?}");
}

/// The refusals the remaining solver studies and histogram-tasks add: family points off
/// Q Diag(v) = M or not one set per string, init points without data, the prefixed arrays of a
/// multi-problem run, a tf problem without strings.
#[test]
fn solver_studies_and_task_sweep_refuse_files_that_do_not_fit() {
    let tmp = tempfile::tempdir().unwrap();
    let strings = strings();
    let good = instance(&strings);
    write(tmp.path(), "mine.npz", &good);
    let run = |name: &str, sets: &[&str], file: &str, key: &str| {
        refused_quick(name, sets, file, key, tmp.path())
    };
    // one point (Q0, v0) for 9 strings
    run(
        "histogram-tasks",
        &["data_file=mine.npz", "init_file=mine.npz"],
        "mine.npz",
        "Q0",
    );
    // 9 points on the family Q = M/v but point 4 moved off it
    let (mut q, mut v) = (Vec::new(), Vec::new());
    for k in 0..strings.len() {
        q.extend(M.iter().flatten().map(|x| x / 2.0));
        v.extend([2.0; D]);
        if k == 4 {
            let last = q.len() - 1;
            q[last] += 1e-3;
        }
    }
    let mut off = good.clone();
    off.insert("Q0", Array::new(&[strings.len(), D, D], q))
        .insert("v0", Array::new(&[strings.len(), D], v));
    write(tmp.path(), "off.npz", &off);
    run(
        "histogram-tasks",
        &["data_file=mine.npz", "init_file=off.npz"],
        "off.npz",
        "Q0[4, 2, 2]",
    );
    run(
        "histogram-tasks",
        &["init_file=off.npz"],
        "histogram-tasks.toml",
        "params.init_file",
    );
    // a multi-problem run's instance: each problem's arrays under problem<k>_
    let mut prefixed = Arrays::new();
    prefixed.merge_prefixed("problem0_", good.clone());
    write(tmp.path(), "prefixed.npz", &prefixed);
    run(
        "stiffness-report",
        &["data_file=prefixed.npz"],
        "prefixed.npz",
        "problem0_M",
    );
    // the quick work-precision has a tf problem: it needs strings
    let mut no_strings = Arrays::new();
    for (name, a) in good.iter().filter(|(name, _)| *name != "strings") {
        no_strings.insert(name, a.clone());
    }
    write(tmp.path(), "nostrings.npz", &no_strings);
    run(
        "work-precision",
        &["data_file=nostrings.npz"],
        "nostrings.npz",
        "strings",
    );
}

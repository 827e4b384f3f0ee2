//! Sweeps from the command line: parallel runs, shards and merge, resume, determinism across
//! thread counts, and refusal of bad sweep tables.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn attnflow(args: &[&str], cwd: &Path, threads: usize) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(args)
        .env("RAYON_NUM_THREADS", threads.to_string())
        .current_dir(cwd)
        .output()
        .expect("binary runs")
}

fn run(args: &[&str], cwd: &Path, threads: usize) -> String {
    let o = attnflow(args, cwd, threads);
    assert!(
        o.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every file of an output folder, relative path → bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}

#[test]
fn a_sweep_writes_runs_aggregate_checks_and_band_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data("trajectory-grid.toml");
    let out = run(
        &["run", file.to_str().unwrap(), "--out", "o"],
        tmp.path(),
        2,
    );
    assert!(out.contains("4 of 4 runs on disk"), "{out}");
    let dir = tmp.path().join("o/trajectory-grid");
    for f in [
        "sweep.json",
        "sweep.csv",
        "aggregate.csv",
        "checks.json",
        "figure.svg",
    ] {
        assert!(dir.join(f).is_file(), "missing {f}");
    }
    for id in ["0000", "0001", "0002", "0003"] {
        assert!(dir.join("runs").join(id).join("series.csv").is_file());
    }
    let agg = std::fs::read_to_string(dir.join("aggregate.csv")).unwrap();
    assert!(agg.starts_with("group,c,x0,runs,"), "{agg}");
    assert_eq!(agg.lines().count(), 5);
    let checks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("checks.json")).unwrap()).unwrap();
    assert_eq!(checks["complete"], true);
    assert_eq!(checks["all_pass"], true);
    // the sweep check is real: the exact ratio is 0.6096, so a bound below it fails (exit 1)
    let o = attnflow(
        &[
            "run",
            file.to_str().unwrap(),
            "--out",
            "o",
            "--set",
            "sweep.checks=[{id=\"r\", name=\"r\", quantity=\"rhob\", statistic=\"mean\", where={c=0.5}, ratio_to={c=-0.5}, at_most=0.6}]",
        ],
        tmp.path(),
        2,
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A sweep written over a folder that holds something else (a single run's outputs, another
/// plan) replaces it: no stale file survives beside the sweep's.
#[test]
fn a_sweep_replaces_a_single_runs_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data("trajectory-grid.toml");
    let dir = tmp.path().join("o/trajectory-grid");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("params.json"), "{}").unwrap();
    run(
        &["run", file.to_str().unwrap(), "--out", "o"],
        tmp.path(),
        1,
    );
    assert!(dir.join("sweep.json").is_file());
    assert!(
        !dir.join("params.json").exists(),
        "stale single-run file kept"
    );
}

#[test]
fn shards_merge_to_the_single_run_and_thread_count_does_not_matter() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data("seeded-sweep.toml");
    let f = file.to_str().unwrap();
    run(&["run", f, "--out", "one"], tmp.path(), 1);
    run(&["run", f, "--out", "two"], tmp.path(), 2);
    for k in 1..=3 {
        let shard = format!("{k}/3");
        let out = format!("s{k}");
        run(&["run", f, "--shard", &shard, "--out", &out], tmp.path(), 2);
    }
    run(
        &["merge", "s1", "s2", "s3", "--out", "merged"],
        tmp.path(),
        2,
    );
    let one = snapshot(&tmp.path().join("one/seeded-sweep"));
    assert_eq!(
        one.len(),
        6 * 5 + 4,
        "6 runs of 5 files (with the instance.npz each used) + the sweep files"
    );
    assert_eq!(one, snapshot(&tmp.path().join("two/seeded-sweep")));
    assert_eq!(one, snapshot(&tmp.path().join("merged/seeded-sweep")));
    // the seeds differ: the runs are not copies of each other
    let a = std::fs::read(tmp.path().join("one/seeded-sweep/runs/0000/series.csv")).unwrap();
    let b = std::fs::read(tmp.path().join("one/seeded-sweep/runs/0001/series.csv")).unwrap();
    assert_ne!(a, b);
}

/// A reduction reads only the runs' files: stage-times (seed 004, one run per (instance, α)) as
/// two shards merged gives the single run's files byte for byte, its cross-α checks included.
#[test]
fn a_reduction_is_the_same_after_shards_and_merge() {
    let tmp = tempfile::tempdir().unwrap();
    run(
        &["run", "stage-times", "--quick", "--out", "one"],
        tmp.path(),
        2,
    );
    for k in 1..=2 {
        let shard = format!("{k}/2");
        let out = format!("s{k}");
        let o = run(
            &[
                "run",
                "stage-times",
                "--quick",
                "--shard",
                &shard,
                "--out",
                &out,
            ],
            tmp.path(),
            1,
        );
        assert!(o.contains("missing 3"), "{o}");
    }
    run(&["merge", "s1", "s2", "--out", "merged"], tmp.path(), 1);
    let one = snapshot(&tmp.path().join("one/stage-times"));
    assert_eq!(one, snapshot(&tmp.path().join("merged/stage-times")));
    let checks = std::fs::read_to_string(tmp.path().join("one/stage-times/checks.json")).unwrap();
    assert!(checks.contains("mini: max_k |slope_k/T_k − 1|"), "{checks}");
    assert!(one.iter().any(|(f, _)| f == "series.csv"));
}

#[test]
fn resume_finishes_only_the_missing_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data("seeded-sweep.toml");
    let f = file.to_str().unwrap();
    let out = run(&["run", f, "--shard", "2/3", "--out", "o"], tmp.path(), 2);
    assert!(out.contains("2 of 6 runs on disk, missing 4"), "{out}");
    let checks = std::fs::read_to_string(tmp.path().join("o/seeded-sweep/checks.json")).unwrap();
    assert!(
        checks.contains("\"0000\""),
        "missing runs are listed: {checks}"
    );
    let before = std::fs::metadata(tmp.path().join("o/seeded-sweep/runs/0001/series.csv"))
        .unwrap()
        .modified()
        .unwrap();
    run(&["run", f, "--resume", "--out", "o"], tmp.path(), 2);
    let after = std::fs::metadata(tmp.path().join("o/seeded-sweep/runs/0001/series.csv"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "a completed run is not redone");
    run(&["run", f, "--out", "fresh"], tmp.path(), 2);
    assert_eq!(
        snapshot(&tmp.path().join("o/seeded-sweep")),
        snapshot(&tmp.path().join("fresh/seeded-sweep"))
    );
    // --resume refuses a sweep planned differently
    let o = attnflow(
        &["run", f, "--resume", "--out", "o", "--set", "sweep.seeds=3"],
        tmp.path(),
        2,
    );
    assert_eq!(o.status.code(), Some(2), "bad input: nothing runs");
    assert!(String::from_utf8_lossy(&o.stderr).contains("planned differently"));
}

#[test]
fn bad_sweeps_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data("trajectory-grid.toml");
    let f = file.to_str().unwrap();
    for (set, expect) in [
        ("sweep.grid.c=[]", "sweep.grid.c: no values"),
        ("sweep.seeds=-2", "sweep.seeds"),
        ("sweep.grid.c1=[1.0, -1.0]", "c1"),
        ("sweep.grid.c=[\"a\"]", "params.c"),
        ("sweep.bogus=1", "bogus"),
    ] {
        let o = attnflow(&["run", f, "--out", "o", "--set", set], tmp.path(), 2);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{set}: {err}");
        assert!(
            err.contains("trajectory-grid.toml") && err.contains(expect),
            "{set}: {err}"
        );
        assert!(
            !tmp.path().join("o").exists(),
            "{set}: nothing may be written"
        );
    }
    let o = attnflow(&["run", f, "--shard", "4/3"], tmp.path(), 2);
    assert_eq!(o.status.code(), Some(2));
}

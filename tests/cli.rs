//! The command line as a user meets it: exit codes, messages naming file/key/reason, no partial
//! output on bad input, reproducible outputs.

use std::path::Path;
use std::process::{Command, Output};

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

#[test]
fn a_run_writes_all_outputs_with_provenance() {
    let tmp = tempfile::tempdir().unwrap();
    let o = attnflow(
        &["run", "thm2-trajectory", "--quick", "--out", "o"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("o/thm2-trajectory");
    for f in ["params.json", "series.csv", "checks.json", "figure.svg"] {
        assert!(dir.join(f).is_file(), "missing {f}");
    }
    let params: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("params.json")).unwrap()).unwrap();
    assert_eq!(params["crate_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(params["seed"], 0);
    assert_eq!(params["solver"]["method"], "tsit45");
    assert_eq!(params["solver"]["rtol"], 1e-10);
    assert_eq!(params["quick"], true);
    let csv = std::fs::read_to_string(dir.join("series.csv")).unwrap();
    assert!(csv.starts_with("t,x,y,x_closed,y_closed\n"));
    // no temporary folders left behind
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path().join("o"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn outputs_are_byte_identical_across_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let read = |d: &str| {
        ["params.json", "series.csv", "checks.json", "figure.svg"]
            .map(|f| std::fs::read(tmp.path().join(d).join("thm2-trajectory").join(f)).unwrap())
    };
    for d in ["a", "b"] {
        let o = attnflow(
            &["run", "thm2-trajectory", "--quick", "--out", d],
            tmp.path(),
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert!(read("a") == read("b"));
}

/// Bad input: exit code 2, a message naming the file, the key and the reason, and nothing written.
fn refused(args: &[&str], expect: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut full = vec!["run", "thm2-trajectory", "--out", "o"];
    full.extend_from_slice(args);
    let o = attnflow(&full, tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains("thm2-trajectory.toml"), "no file in: {err}");
    for e in expect {
        assert!(err.contains(e), "{args:?}: `{e}` missing in: {err}");
    }
    assert!(
        !tmp.path().join("o").exists(),
        "output written despite bad input"
    );
}

#[test]
fn bad_overrides_are_refused_with_file_key_and_reason() {
    refused(
        &["--set", "nonsense=1"],
        &["params", "unknown field `nonsense`"],
    );
    refused(&["--set", "c1=abc"], &["params.c1", "expected f64"]);
    refused(&["--set", "c1=-1"], &["params.c1", "positive"]);
    refused(&["--set", "x0=nan"], &["x0", "non-finite"]);
    refused(&["--set", "samples=-5"], &["params.samples"]);
    refused(&["--set", "solver.rtol=0"], &["solver", "rtol"]);
    refused(&["--set", "solver.method=euler"], &["solver.method"]);
    refused(
        &["--set", "checks.closed_form_tol=0"],
        &["checks.closed_form_tol"],
    );
    refused(&["--set", "c1"], &["key=value"]);
}

#[test]
fn malformed_files_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "typo.toml",
            "kind = \"histogram.thm2-trajectory\"\ntitle = \"t\"\nsede = 1\n",
            "sede",
        ),
        (
            "kind.toml",
            "kind = \"nope.nothing\"\ntitle = \"t\"\n",
            "unknown kind",
        ),
        (
            "syntax.toml",
            "kind = \"histogram.thm2-trajectory\"\ntitle = \n",
            "line",
        ),
        (
            "missing.toml",
            "kind = \"histogram.thm2-trajectory\"\ntitle = \"t\"\n[params]\nc = 1.0\n",
            "missing field",
        ),
    ];
    for (name, text, expect) in cases {
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        let o = attnflow(&["run", path.to_str().unwrap(), "--out", "o"], tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(name) && err.contains(expect), "{name}: {err}");
        assert!(!tmp.path().join("o").exists());
    }
}

#[test]
fn a_failing_check_exits_1_and_a_solver_failure_exits_3_with_the_time_reached() {
    let tmp = tempfile::tempdir().unwrap();
    let o = attnflow(
        &[
            "run",
            "thm2-trajectory",
            "--out",
            "o",
            "--set",
            "checks.closed_form_tol=1e-30",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAIL"));
    let o = attnflow(
        &[
            "run",
            "thm2-trajectory",
            "--out",
            "p",
            "--set",
            "solver.max_steps=3",
        ],
        tmp.path(),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("tsit45 failed at t =") && err.contains("maximum of 3 steps"),
        "{err}"
    );
    assert!(!tmp.path().join("p/thm2-trajectory").exists());
}

#[test]
fn list_and_describe_work() {
    let tmp = tempfile::tempdir().unwrap();
    let o = attnflow(&["list"], tmp.path());
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("thm2-trajectory"));
    let o = attnflow(&["describe", "thm2-trajectory", "--set", "c=2"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("histogram.thm2-trajectory") && out.contains("\"c\": 2.0"),
        "{out}"
    );
}

#[test]
fn the_flow_subcommand_lists_its_families_and_refuses_an_unknown_one() {
    let tmp = tempfile::tempdir().unwrap();
    let listed = attnflow(&["flow", "--list"], tmp.path());
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let families: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|l| *l != "no model families registered")
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .collect();
    let o = attnflow(&["flow", "no-such-family", "--out", "o"], tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown model family `no-such-family`"),
        "{err}"
    );
    for f in &families {
        assert!(err.contains(f.as_str()), "`{f}` not listed in: {err}");
    }
    // options that do not parse are refused before anything runs
    let o = attnflow(&["flow", "no-such-family", "--steps", "-3"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = attnflow(&["flow", "no-such-family", "--clock", "fast"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!tmp.path().join("o").exists() && !tmp.path().join("out").exists());
}

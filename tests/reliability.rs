//! Nothing lost, nothing half-written: the defects found by trying to break attnflow, each
//! reproduced as a user met it (through the binary) and checked fixed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The binary with `args`, run in `cwd` (no `--dir` added: some commands have none).
fn attnflow(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}{}", stdout(o), stderr(o));
}

/// Every entry of a folder whose name starts with a dot (temporary siblings).
fn hidden(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

fn copy_scenario(from: &str, to: &Path, edit: impl Fn(String) -> String) {
    let text = std::fs::read_to_string(scenarios().join(from)).unwrap();
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::write(to, edit(text)).unwrap();
}

// 1. Two runs of one invocation never share an output path.
#[test]
fn two_scenarios_with_one_name_are_refused_before_running() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = scenarios();
    let d = dir.to_str().unwrap();
    // the same scenario by name and by path
    let o = attnflow(
        &[
            "run",
            "thm2-trajectory",
            dir.join("histogram/thm2-trajectory.toml").to_str().unwrap(),
            "--quick",
            "--dir",
            d,
            "--out",
            "o",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("named twice"), "{}", stderr(&o));
    assert!(!tmp.path().join("o").exists());
    // two different files with one name
    let other = tmp.path().join("mine/thm2-trajectory.toml");
    copy_scenario("histogram/thm2-trajectory.toml", &other, |t| {
        t.replace("c = -0.5", "c = -2.0")
    });
    let o = attnflow(
        &[
            "run",
            "thm2-trajectory",
            other.to_str().unwrap(),
            "--quick",
            "--dir",
            d,
            "--out",
            "o",
        ],
        tmp.path(),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("mine/thm2-trajectory.toml") && err.contains("same name"),
        "{err}"
    );
    assert!(!tmp.path().join("o").exists());
    // run --all over a folder holding a/x.toml and b/x.toml
    let all = tmp.path().join("all");
    copy_scenario(
        "histogram/thm2-trajectory.toml",
        &all.join("a/x.toml"),
        |t| t,
    );
    copy_scenario(
        "histogram/thm2-trajectory.toml",
        &all.join("b/x.toml"),
        |t| t,
    );
    let o = attnflow(
        &["run", "--all", "--dir", all.to_str().unwrap(), "--out", "p"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!tmp.path().join("p").exists());
}

// 8. Stale temporary folders of killed processes are cleaned; a user's file is never hidden.
#[test]
fn stale_temporaries_are_cleaned_and_a_file_in_the_way_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = scenarios();
    let out = tmp.path().join("o");
    std::fs::create_dir_all(&out).unwrap();
    // a process id that cannot be running (above the kernel's pid_max of 4194304)
    let dead = 4_999_999;
    let stale = out.join(format!(".thm2-trajectory.partial-{dead}-0"));
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(out.join(format!(".x.json.tmp-{dead}-3")), "half").unwrap();
    // a folder being replaced when its writer died, with nothing in its place: put back
    let replaced = out.join(format!(".stage-times.old-{dead}-1"));
    std::fs::create_dir_all(&replaced).unwrap();
    let o = attnflow(
        &[
            "run",
            "thm2-trajectory",
            "--quick",
            "--dir",
            d.to_str().unwrap(),
            "--out",
            "o",
        ],
        tmp.path(),
    );
    ok(&o);
    assert!(hidden(&out).is_empty(), "left: {:?}", hidden(&out));
    assert!(
        out.join("stage-times").is_dir(),
        "the replaced folder is restored"
    );

    // a regular file where the outputs go: refused before running, the file untouched
    std::fs::write(out.join("thm2-rates"), "my notes").unwrap();
    let o = attnflow(
        &[
            "run",
            "thm2-rates",
            "--quick",
            "--dir",
            d.to_str().unwrap(),
            "--out",
            "o",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a file stands where"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(out.join("thm2-rates")).unwrap(),
        "my notes"
    );
    assert!(hidden(&out).is_empty(), "left: {:?}", hidden(&out));
}

// 3. merge: incomplete is not success; conflicts are bad input with nothing written.
#[test]
fn merge_exit_codes_follow_the_rules_and_conflicts_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data("trajectory-grid.toml");
    let f = file.to_str().unwrap();
    for k in 1..=3 {
        let shard = format!("{k}/3");
        ok(&attnflow(
            &["run", f, "--shard", &shard, "--out", &format!("s{k}")],
            tmp.path(),
        ));
    }
    // shards 1 and 2 of 3: incomplete, exit 1
    let o = attnflow(&["merge", "s1", "s2", "--out", "m12"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("incomplete"), "{}", stderr(&o));
    // all three: complete, exit 0
    ok(&attnflow(
        &["merge", "s1", "s2", "s3", "--out", "m"],
        tmp.path(),
    ));
    // quick shards with full shards: planned differently, refused, nothing written
    ok(&attnflow(
        &["run", f, "--quick", "--shard", "1/3", "--out", "q1"],
        tmp.path(),
    ));
    let o = attnflow(&["merge", "q1", "s2", "s3", "--out", "mq"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("planned differently"), "{}", stderr(&o));
    assert!(!tmp.path().join("mq").exists(), "written before refusing");

    // single runs: a failing run merges with exit 1; two different runs of one name: exit 2
    let d = scenarios();
    let d = d.to_str().unwrap();
    let run = |out: &str, set: &str| {
        attnflow(
            &[
                "run",
                "thm2-trajectory",
                "--quick",
                "--dir",
                d,
                "--out",
                out,
                "--set",
                set,
            ],
            tmp.path(),
        )
    };
    assert_eq!(
        run("fail", "checks.closed_form_tol=1e-30").status.code(),
        Some(1)
    );
    let o = attnflow(&["merge", "fail", "--out", "mf"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    ok(&run("a", "c=-0.5"));
    ok(&run("b", "c=-2.0"));
    let o = attnflow(&["merge", "a", "b", "--out", "mab"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("another run"), "{}", stderr(&o));
    assert!(!tmp.path().join("mab").exists());
    // the same run twice is fine
    ok(&run("a2", "c=-0.5"));
    ok(&attnflow(&["merge", "a", "a2", "--out", "maa"], tmp.path()));

    // a missing folder and an empty folder: bad input, --out not created
    let o = attnflow(&["merge", "nowhere", "--out", "mn"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no such folder"));
    assert!(!tmp.path().join("mn").exists());
    std::fs::create_dir_all(tmp.path().join("empty")).unwrap();
    let o = attnflow(&["merge", "empty", "--out", "me"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no scenario outputs"));
    assert!(!tmp.path().join("me").exists());
}

// 4. A closed pipe is not a crash, and `check` still writes its summary.
#[test]
fn a_closed_pipe_does_not_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let d = scenarios();
    // `check` over a folder of two scenarios, so the test stays fast
    let few = tmp.path().join("few");
    for f in ["thm2-trajectory.toml", "thm2-limits.toml"] {
        copy_scenario(&format!("histogram/{f}"), &few.join(f), |t| t);
    }
    for (args, dir) in [
        (vec!["list"], &d),
        (vec!["describe", "thm2-trajectory"], &d),
        (vec!["check", "--quick", "--out", "c"], &few),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_attnflow"))
            .args(&args)
            .arg("--dir")
            .arg(dir)
            .current_dir(tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away at once, as `| head -0` would
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(o.status.code(), Some(101), "{args:?}: {err}");
    }
    assert!(tmp.path().join("c/check-summary.json").is_file());
}

// 5. --resume on a single run with other parameters is refused, not skipped.
#[test]
fn resume_refuses_outputs_made_with_other_parameters() {
    let tmp = tempfile::tempdir().unwrap();
    let d = scenarios();
    let d = d.to_str().unwrap();
    let base = [
        "run",
        "thm2-trajectory",
        "--quick",
        "--dir",
        d,
        "--out",
        "o",
    ];
    ok(&attnflow(&base, tmp.path()));
    let o = attnflow(&[&base[..], &["--resume"]].concat(), tmp.path());
    ok(&o);
    assert!(stdout(&o).contains("skipped (--resume)"), "{}", stdout(&o));
    let o = attnflow(
        &[&base[..], &["--resume", "--set", "c=-2"]].concat(),
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("differs in params"), "{}", stderr(&o));
}

// 6. A --set of a swept key is refused (the grid would overwrite it).
#[test]
fn setting_a_swept_key_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data("trajectory-grid.toml");
    for set in ["c=2.0", "params.c=2.0"] {
        let o = attnflow(
            &["run", file.to_str().unwrap(), "--set", set, "--out", "o"],
            tmp.path(),
        );
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("sweep.grid.c"), "{}", stderr(&o));
        assert!(!tmp.path().join("o").exists());
    }
}

// 10. Messages name the right key and say what to do.
#[test]
fn messages_name_the_key_and_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let d = scenarios();
    let d = d.to_str().unwrap();
    let refused = |args: &[&str], expect: &[&str]| {
        let o = attnflow(args, tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for e in expect {
            assert!(err.contains(e), "{args:?}: `{e}` missing in {err}");
        }
    };
    let run = |set: &'static str| {
        vec![
            "run",
            "thm2-trajectory",
            "--dir",
            d,
            "--out",
            "o",
            "--set",
            set,
        ]
    };
    refused(&run("c=nan"), &["--set c", "non-finite"]);
    let o = attnflow(&run("c=nan"), tmp.path());
    assert!(!stderr(&o).contains("c.value"), "{}", stderr(&o));
    refused(&run("rtol=1e-6"), &["params", "solver.rtol"]);
    refused(&run("solver.rtol=1e-300"), &["solver.rtol", "f64"]);
    refused(&run("t_end=1e308"), &["params.t_end"]);
    let empty = tmp.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    refused(
        &["run", empty.to_str().unwrap(), "--out", "o"],
        &["empty.toml", "(top level)", "kind"],
    );
    // an --out that cannot be written: named, before anything runs
    let blocker = tmp.path().join("blocker");
    std::fs::write(&blocker, "").unwrap();
    refused(
        &["run", "thm2-trajectory", "--dir", d, "--out", "blocker/o"],
        &["blocker", "--out", "not a folder"],
    );
    assert!(!tmp.path().join("o").exists());
}

// 10. A finite but huge entry is not called "not finite".
#[test]
fn huge_data_entries_are_refused_for_what_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tmp.path().join("huge.json");
    std::fs::write(
        &tokens,
        r#"{"X": [[[1e308, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]], "y": [1, -1], "u": [1.0, -1.0]}"#,
    )
    .unwrap();
    let o = attnflow(
        &[
            "run",
            "wsvm-kkt",
            "--dir",
            scenarios().to_str().unwrap(),
            "--out",
            "o",
            "--set",
            &format!("data_file={}", tokens.display()),
        ],
        tmp.path(),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("overflow") && !err.contains("not finite"),
        "{err}"
    );
    assert!(!tmp.path().join("o").exists());
}

// 10. After Ctrl-C, scenarios that never started are reported as such, not as failures.
#[test]
fn interrupted_run_all_reports_never_started_scenarios() {
    let tmp = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(["run", "--all", "--quick", "--out", "o", "--dir"])
        .arg(scenarios())
        .env("RAYON_NUM_THREADS", "1")
        .current_dir(tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // long enough for the handler to be installed, far shorter than the 86 scenarios take
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(130), "{out}{}", stderr(&o));
    assert!(out.contains("NOT STARTED"), "{out}");
    assert!(!out.contains("RUN FAILED"), "{out}");
}

// 7. A sweep check or band label naming a quantity the kind does not record is refused before
// any point runs (it used to fail after all of them, exit 3, outputs written).
#[test]
fn a_sweep_naming_an_unknown_quantity_is_refused_before_running() {
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(data("trajectory-grid.toml")).unwrap();
    for (from, to, key) in [
        (
            "quantity = \"rhob\"",
            "quantity = \"rho_bar\"",
            "sweep.checks[0].quantity",
        ),
        ("{rhob:mean}", "{rho_bar:mean}", "sweep.band.label"),
    ] {
        let bad = tmp.path().join("bad.toml");
        std::fs::write(&bad, text.replace(from, to)).unwrap();
        let o = attnflow(&["run", bad.to_str().unwrap(), "--out", "o"], tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        for want in [key, "`rho_bar`", "rhob"] {
            assert!(err.contains(want), "`{want}` missing in {err}");
        }
        assert!(!tmp.path().join("o").exists(), "{err}");
    }
}

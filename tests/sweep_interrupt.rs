//! Ctrl-C during a sweep (its own test binary: it sets the process-wide interrupt flag).

use std::path::Path;
use std::sync::atomic::Ordering;

use attnflow::scenario::run::{execute, load_and_validate, ExecOptions, INTERRUPTED};
use attnflow::scenario::{Overrides, RunError};

#[test]
fn an_interrupted_sweep_keeps_completed_runs_and_lists_the_missing_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/seeded-sweep.toml");
    let ready = load_and_validate(&file, &Overrides::default()).unwrap();
    // as if Ctrl-C came after the first shard of three had finished
    let first = ExecOptions {
        shard: attnflow::scenario::sweep::Shard::parse("1/3").unwrap(),
        ..Default::default()
    };
    execute(ready, tmp.path(), first).unwrap();
    INTERRUPTED.store(true, Ordering::SeqCst);
    let ready = load_and_validate(&file, &Overrides::default()).unwrap();
    let opts = ExecOptions {
        resume: true,
        ..Default::default()
    };
    match execute(ready, tmp.path(), opts) {
        Err(RunError::Interrupted(msg)) => assert!(msg.contains("4 of 6 runs missing"), "{msg}"),
        other => panic!("expected an interruption, got {:?}", other.err()),
    }
    let dir = tmp.path().join("seeded-sweep");
    let checks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("checks.json")).unwrap()).unwrap();
    assert_eq!(checks["complete"], false);
    assert_eq!(checks["runs"], 2);
    assert_eq!(checks["missing"].as_array().unwrap().len(), 4);
    assert!(dir.join("runs/0003/checks.json").is_file());
    // the next session resumes
    INTERRUPTED.store(false, Ordering::SeqCst);
    let ready = load_and_validate(&file, &Overrides::default()).unwrap();
    let outcome = execute(ready, tmp.path(), opts).unwrap();
    assert_eq!(outcome.passed, outcome.checks);
    assert!(dir.join("runs/0005/checks.json").is_file());
}

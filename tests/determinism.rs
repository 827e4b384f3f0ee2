//! Reproducibility: every scenario's fast configuration, run with one and with two rayon threads,
//! writes byte-identical CSV, JSON and SVG. The only outputs exempt are the wall-clock columns of
//! the three benchmark scenarios, whose purpose is to measure time (`stiffness-report`'s work.csv,
//! `work-precision`'s series.csv and its wall-time panels, `scaling`'s timing.csv and
//! timing.svg); their other files are compared.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use attnflow::scenario::registry::Registry;
use attnflow::scenario::sweep::wildcard_match;

/// Files that hold wall-clock measurements by design.
const TIMED: [&str; 5] = [
    "stiffness-report/work.csv",
    "work-precision/series.csv",
    "work-precision/figure.svg",
    "scaling/timing.csv",
    "scaling/timing.svg",
];

fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                let name = rel.to_string_lossy().replace('\\', "/");
                if !TIMED.contains(&name.as_str()) && name != "check-summary.json" {
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
    }
    out
}

#[test]
fn all_quick_outputs_are_byte_identical_across_thread_counts() {
    let tmp = tempfile::tempdir().unwrap();
    for threads in ["1", "2"] {
        let o = Command::new(env!("CARGO_BIN_EXE_attnflow"))
            .args(["run", "--all", "--quick", "--out", threads])
            .env("RAYON_NUM_THREADS", threads)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        // exit 0 or 1 (a failing check is another test's business); 2 or 3 would be a bug here
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let one = files(&tmp.path().join("1"));
    let two = files(&tmp.path().join("2"));
    assert!(one.len() > 100, "only {} files", one.len());
    let names = |m: &BTreeMap<PathBuf, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&one), names(&two));
    let differ: Vec<_> = one
        .iter()
        .filter(|(k, v)| two[*k] != **v)
        .map(|(k, _)| k.display().to_string())
        .collect();
    assert!(
        differ.is_empty(),
        "outputs differ between 1 and 2 threads: {differ:?}"
    );
    // every scalar a run derives is one its kind declares (what a sweep check may name)
    let undeclared = undeclared_quantities(&one);
    assert!(undeclared.is_empty(), "{}", undeclared.join("\n"));
}

/// The full configurations (the committed main job's outputs) derive only declared quantities.
#[test]
fn committed_runs_derive_only_declared_quantities() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("figures");
    let undeclared = undeclared_quantities(&files(&root));
    assert!(undeclared.is_empty(), "{}", undeclared.join("\n"));
}

/// Scalar derived quantities of the runs among `outputs` (every `params.json`) that their kind's
/// `quantities` patterns do not match.
fn undeclared_quantities(outputs: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<String> {
    let mut found = Vec::new();
    for (path, bytes) in outputs {
        if !path.ends_with("params.json") {
            continue;
        }
        let doc: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        let kind = doc["kind"].as_str().unwrap_or_default();
        let Some(k) = Registry::builtin().find(kind) else {
            found.push(format!("{}: unknown kind `{kind}`", path.display()));
            continue;
        };
        let derived = doc["derived"].as_object().cloned().unwrap_or_default();
        for (name, value) in derived {
            let scalar = value.is_null() || value.is_number();
            if scalar && !k.quantities().iter().any(|p| wildcard_match(p, &name)) {
                found.push(format!("{}: {kind} records `{name}`", path.display()));
            }
        }
    }
    found
}

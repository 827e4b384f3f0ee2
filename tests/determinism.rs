//! Reproducibility: every scenario's fast configuration, run with one and with two rayon threads,
//! writes byte-identical CSV, JSON and SVG. The only outputs exempt are the wall-clock columns of
//! the two benchmark scenarios, whose purpose is to measure time (`stiffness-report`'s work.csv,
//! `work-precision`'s series.csv and its wall-time panels); their other files are compared.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Files that hold wall-clock measurements by design.
const TIMED: [&str; 3] = [
    "stiffness-report/work.csv",
    "work-precision/series.csv",
    "work-precision/figure.svg",
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
}

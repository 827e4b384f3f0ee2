//! Size limits: absurd sizes are refused before anything runs or is written (exit 2, naming the
//! key and the estimate), `--allow-large` lifts the limits, and every committed scenario's
//! default and quick configurations are within them.

use std::path::Path;
use std::process::{Command, Output};

use attnflow::scenario::cost::{FLOPS_PER_SECOND, MEMORY_LIMIT_BYTES, WORK_LIMIT_SECONDS};
use attnflow::scenario::run::{default_scenario_dir, load_and_validate, scenario_files};
use attnflow::scenario::Overrides;

fn attnflow(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(args)
        .arg("--dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
        .current_dir(cwd)
        .output()
        .expect("binary runs")
}

/// `run` with `args` is refused with exit 2, stderr names `key` and an estimate (`unit`), and
/// the out folder does not exist afterwards.
fn refused(args: &[&str], key: &str, unit: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let mut full = vec!["run", "--out", "o"];
    full.extend_from_slice(args);
    let o = attnflow(&full, tmp.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(key), "{args:?}: no `{key}` in: {err}");
    assert!(
        err.contains(unit),
        "{args:?}: no estimate in {unit} in: {err}"
    );
    assert!(err.contains("--allow-large"), "{args:?}: {err}");
    assert!(!tmp.path().join("o").exists(), "{args:?}: output written");
}

#[test]
fn absurd_sizes_are_refused_before_anything_is_written() {
    refused(
        &[
            "fig1-underparameterized",
            "--quick",
            "--set",
            "iterations=100000000000",
            "--set",
            "sweep.seeds=1",
        ],
        "params.iterations",
        "TB of memory",
    );
    refused(
        &["thm2-trajectory", "--set", "samples=1000000000"],
        "params.samples",
        "GB of memory",
    );
    refused(
        &["fig1-underparameterized", "--set", "sweep.seeds=100000000"],
        "sweep.seeds",
        "points",
    );
    refused(
        &[
            "conservation",
            "--set",
            "d=20000",
            "--set",
            "n_strings=20000",
        ],
        "params.d",
        "of memory",
    );
    refused(
        &["assumption-check", "--set", "dims=[16,1000000]"],
        "params.dims",
        "of memory",
    );
    refused(
        &["lemma1-softmax-jacobian", "--set", "n_max=1000000"],
        "params.n_max",
        "h on one core",
    );
    refused(
        &["thm1-linear-rate", "--set", "steps=100000000000"],
        "params.steps",
        "of memory",
    );
}

#[test]
fn a_sweep_whose_runs_together_take_too_long_is_refused() {
    // each run is within the limits (~1 min), 2 × 100 of them are not
    refused(
        &[
            "fig1-underparameterized",
            "--set",
            "iterations=200000",
            "--set",
            "sweep.seeds=100",
        ],
        "sweep.seeds",
        "h on one core",
    );
}

/// An `.npz` whose one array claims `shape` in its `.npy` header, with no data behind it: the
/// size limits read headers only, so the claim is what they see.
fn npz_claiming(shape: &str) -> Vec<u8> {
    use std::io::Write;
    let dict = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(&header);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file("X.npy", zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(&npy).unwrap();
    zip.finish().unwrap().into_inner()
}

#[test]
fn instance_files_beyond_the_limits_are_refused_before_they_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    // 20000 × 1000 × 1000 numbers: 160 GB as read, before any layout is checked
    std::fs::write(
        tmp.path().join("huge.npz"),
        npz_claiming("(20000, 1000, 1000)"),
    )
    .unwrap();
    let file = tmp.path().join("huge.npz");
    for scenario in [
        "flow-prompt",
        "hessian-conditioning-vs-r",
        "fig2-fixed-decoder",
    ] {
        refused(
            &[scenario, "--set", &format!("data_file={}", file.display())],
            "params.data_file",
            "of memory",
        );
    }
    // within the limits, the same header reaches the reader, which refuses the missing data
    std::fs::write(tmp.path().join("small.npz"), npz_claiming("(2, 3, 4)")).unwrap();
    let o = attnflow(
        &[
            "run",
            "flow-prompt",
            "--out",
            "o",
            "--set",
            "data_file=small.npz",
        ],
        tmp.path(),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("small.npz") && err.contains('X'), "{err}");
    assert!(!err.contains("--allow-large"), "{err}");
}

#[test]
fn allow_large_lifts_the_limits() {
    let tmp = tempfile::tempdir().unwrap();
    // 2·10⁸ samples need ~ 10–100 GB: refused, and accepted by describe with the flag (describe
    // validates and prints, it runs nothing)
    let args = ["describe", "thm2-trajectory", "--set", "samples=200000000"];
    let o = attnflow(&args, tmp.path());
    assert_eq!(o.status.code(), Some(2));
    let o = attnflow(&[&args[..], &["--allow-large"]].concat(), tmp.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // a sweep just over the point limit
    let ov = |allow_large| Overrides {
        set: vec!["sweep.seeds=5001".into()],
        quick: true,
        allow_large,
        ..Default::default()
    };
    let path = default_scenario_dir().join("prompt/fig1-underparameterized.toml");
    let e = load_and_validate(&path, &ov(false)).err().expect("refused");
    assert_eq!(e.key, "sweep.seeds");
    let ready = load_and_validate(&path, &ov(true)).unwrap_or_else(|e| panic!("{e}"));
    assert!(ready.sweep.is_some_and(|(_, points)| points.len() > 10_000));
}

#[test]
fn every_committed_scenario_is_within_the_limits() {
    let files = scenario_files(&default_scenario_dir());
    assert!(files.len() > 80);
    let mut largest: Vec<(f64, f64, String)> = Vec::new();
    for file in &files {
        for quick in [false, true] {
            let ov = Overrides {
                quick,
                ..Default::default()
            };
            let ready = load_and_validate(file, &ov).unwrap_or_else(|e| panic!("{e}"));
            let costs: Vec<_> = match &ready.sweep {
                Some((_, points)) => points.iter().map(|p| &p.prepared.cost).collect(),
                None => vec![&ready.prepared.cost],
            };
            let bytes = attnflow::stats::max(costs.iter().map(|c| c.bytes()));
            let seconds = costs.iter().map(|c| c.flops()).sum::<f64>() / FLOPS_PER_SECOND;
            assert!(bytes <= MEMORY_LIMIT_BYTES && seconds <= WORK_LIMIT_SECONDS);
            if !quick {
                largest.push((seconds, bytes, ready.scenario.name.clone()));
            }
        }
    }
    // the estimates of the default configurations, largest work first (cargo test -- --nocapture)
    largest.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (seconds, bytes, name) in &largest {
        eprintln!("{name:<30} {seconds:>10.1} s {:>10.1} MB", bytes / 1e6);
    }
}

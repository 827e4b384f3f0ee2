//! Finding scenario files, validating them, running them and writing their outputs.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::output::{verdict_text, write_run, RunMeta};
use super::registry::{self, Prepared, ScenarioKind};
use super::{InputError, Overrides, RunContext, RunError, Scenario};

/// The scenarios folder: `./scenarios` if present, else the one shipped with the crate.
pub fn default_scenario_dir() -> PathBuf {
    let local = PathBuf::from("scenarios");
    if local.is_dir() {
        local
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
    }
}

/// All `*.toml` files below `dir`, sorted by path.
pub fn scenario_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(d) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, &mut v);
    v.sort();
    v
}

/// A scenario argument: a path to a file, or the name (file stem) of a file under `dir`.
pub fn resolve(arg: &str, dir: &Path) -> Result<PathBuf, InputError> {
    let p = Path::new(arg);
    if p.is_file() {
        return Ok(p.to_path_buf());
    }
    let matches: Vec<PathBuf> = scenario_files(dir)
        .into_iter()
        .filter(|f| f.file_stem().is_some_and(|s| s == arg))
        .collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().unwrap()),
        0 => Err(InputError::new(
            p,
            "(scenario)",
            format!(
                "no such file, and no scenario named `{arg}` under {}",
                dir.display()
            ),
        )),
        _ => Err(InputError::new(
            p,
            "(scenario)",
            format!("ambiguous name: {matches:?}"),
        )),
    }
}

/// A loaded, validated scenario ready to run.
pub struct Ready {
    pub scenario: Scenario,
    pub kind: &'static dyn ScenarioKind,
    pub prepared: Prepared,
}

/// Loads a scenario file, applies the overrides and validates it against its kind.
pub fn load_and_validate(path: &Path, ov: &Overrides) -> Result<Ready, InputError> {
    let scenario = Scenario::load(path, ov)?;
    let kind = registry::find(&scenario.kind).ok_or_else(|| {
        let known: Vec<_> = registry::all().iter().map(|k| k.name()).collect();
        InputError::new(
            path,
            "kind",
            format!(
                "unknown kind `{}` (known: {})",
                scenario.kind,
                known.join(", ")
            ),
        )
    })?;
    let prepared = kind.prepare(&scenario)?;
    Ok(Ready {
        scenario,
        kind,
        prepared,
    })
}

/// What one run produced.
pub struct Outcome {
    pub name: String,
    pub dir: PathBuf,
    pub checks: usize,
    pub passed: usize,
    pub seconds: f64,
    /// The verdict table printed for the run.
    pub verdict: String,
}

/// Runs a validated scenario and writes its outputs under `out_root`.
pub fn execute(ready: Ready, out_root: &Path) -> Result<Outcome, RunError> {
    let Ready {
        scenario, prepared, ..
    } = ready;
    let ctx = RunContext {
        scenario: &scenario,
        ode: prepared.ode,
    };
    let meta_params = prepared.params.clone();
    let meta_checks = prepared.checks.clone();
    let ode = prepared.ode;
    let start = Instant::now();
    let report = prepared.run(&ctx)?;
    let seconds = start.elapsed().as_secs_f64();
    let meta = RunMeta {
        scenario: &scenario,
        params: &meta_params,
        checks: &meta_checks,
        ode: &ode,
    };
    let dir = write_run(out_root, &meta, &report).map_err(RunError::Other)?;
    Ok(Outcome {
        name: scenario.name.clone(),
        dir,
        checks: report.checks.len(),
        passed: report.checks.iter().filter(|c| c.pass).count(),
        seconds,
        verdict: verdict_text(&scenario, &report, seconds),
    })
}

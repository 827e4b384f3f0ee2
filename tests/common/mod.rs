//! Shared by the integration tests: run a shipped scenario in its fast configuration.
#![allow(dead_code)]

use std::path::PathBuf;

use attnflow::scenario::run::{
    default_scenario_dir, execute, load_and_validate, resolve, ExecOptions, Ready,
};
use attnflow::scenario::sweep::wildcard_match;
use attnflow::scenario::{Check, InputError, Overrides, Report, RunContext, RunError};

/// Loads and validates shipped scenario `name` with its `[quick]` overrides plus `set`.
pub fn load_quick(name: &str, set: &[&str]) -> Result<Ready, InputError> {
    let path: PathBuf = resolve(name, &default_scenario_dir()).expect("scenario exists");
    let ov = Overrides {
        set: set.iter().map(|s| s.to_string()).collect(),
        quick: true,
        ..Default::default()
    };
    load_and_validate(&path, &ov)
}

/// Runs scenario `name` with its `[quick]` overrides (plus `set`) and returns the report, with
/// the file's declared `[[check]]`s appended as `attnflow run` appends them, without writing
/// files.
pub fn run_quick(name: &str, set: &[&str]) -> Report {
    let ready = load_quick(name, set).unwrap_or_else(|e| panic!("{e}"));
    let ctx = RunContext {
        scenario: &ready.scenario,
        ode: ready.prepared.ode,
    };
    let mut report = ready
        .prepared
        .run(&ctx)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    attnflow::scenario::declared::apply(&ready.scenario, &mut report)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    report
}

/// Runs sweep `name` in quick mode (plus `set`) into a temporary folder and returns its checks:
/// the sweep's own (across runs, including the kind's reduction) first, then every run's, in
/// run order — or the run error.
pub fn sweep_quick(name: &str, set: &[&str]) -> Result<Report, RunError> {
    let ready = load_quick(name, set).unwrap_or_else(|e| panic!("{e}"));
    assert!(ready.sweep.is_some(), "{name} is a sweep");
    let tmp = tempfile::tempdir().unwrap();
    let out = execute(ready, tmp.path(), ExecOptions::default())?;
    let read = |p: PathBuf| -> serde_json::Value {
        let text = std::fs::read_to_string(&p).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let doc = read(out.dir.join("checks.json"));
    assert_eq!(doc["complete"], true, "{name}: {doc}");
    assert!(out.dir.join("figure.svg").is_file(), "{name}: sweep figure");
    let mut checks: Vec<Check> = serde_json::from_value(doc["checks"].clone()).unwrap();
    let mut runs: Vec<PathBuf> = std::fs::read_dir(out.dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runs.sort();
    for run in runs {
        let doc = read(run.join("checks.json"));
        checks.extend(serde_json::from_value::<Vec<Check>>(doc["checks"].clone()).unwrap());
    }
    Ok(Report {
        checks,
        ..Default::default()
    })
}

/// The input error of scenario `name` in quick mode with `set` (panics if it is accepted).
pub fn load_error(name: &str, set: &[&str]) -> InputError {
    match load_quick(name, set) {
        Ok(_) => panic!("{name} with {set:?} was accepted"),
        Err(e) => e,
    }
}

/// Asserts every check of the report passed, listing the failures.
pub fn assert_all_pass(name: &str, report: &Report) {
    let failed: Vec<String> = report
        .checks
        .iter()
        .filter(|c| !c.pass)
        .map(|c| {
            format!(
                "{} ({}): measured {} vs {}",
                c.id,
                c.name,
                c.measured,
                c.bound_text()
            )
        })
        .collect();
    assert!(!report.checks.is_empty(), "{name}: no checks ran");
    assert!(
        failed.is_empty(),
        "{name}: failed checks:\n{}",
        failed.join("\n")
    );
}

/// The check with id `id` (panics if there is none). Tests find checks by id, never by
/// title: titles may be reworded, ids are stable.
pub fn check<'a>(report: &'a Report, id: &str) -> &'a Check {
    report
        .checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check with id `{id}`"))
}

/// Whether check `id` passed (panics if there is none).
pub fn passes(report: &Report, id: &str) -> bool {
    check(report, id).pass
}

/// Whether `id` is `base` or `base.<label>` (the same check on one labelled instance).
pub fn has_base(id: &str, base: &str) -> bool {
    id.strip_prefix(base)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The verdicts of check `base` on every instance it ran on (ids `base` and `base.<label>`),
/// or, for a pattern with `*` (`transitions-not-found.mini-*`), of the ids it matches; panics
/// if there is none.
pub fn passes_each(report: &Report, base: &str) -> Vec<bool> {
    let found: Vec<bool> = report
        .checks
        .iter()
        .filter(|c| match base.contains('*') {
            true => wildcard_match(base, &c.id),
            false => has_base(&c.id, base),
        })
        .map(|c| c.pass)
        .collect();
    assert!(!found.is_empty(), "no check with id `{base}` or `{base}.…`");
    found
}

//! Finding scenario files, validating them, running them and writing their outputs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use super::output::{clean_stale, temp_sibling, verdict_text, write_run, RunMeta, TempKind};
use super::registry::{Prepared, Registry, ScenarioKind};
use super::sweep::{self, Plan, Point, Shard, SweepSpec};
use super::{InputError, Overrides, Report, RunContext, RunError, Scenario};

/// Set by the CLI's Ctrl-C handler: no new run starts once it is set; completed runs stay.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

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
    /// The sweep, when the file declares one: its spec and every point, each validated.
    pub sweep: Option<(SweepSpec, Vec<SweepPoint>)>,
}

/// One point of a sweep: the scenario with the point's values and seed, validated.
pub struct SweepPoint {
    pub point: Point,
    pub scenario: Scenario,
    pub prepared: Prepared,
}

/// Loads a scenario file, applies the overrides and validates it against its kind (one of the
/// built-in kinds, [`Registry::builtin`]).
pub fn load_and_validate(path: &Path, ov: &Overrides) -> Result<Ready, InputError> {
    load_and_validate_with(&Registry::builtin(), path, ov)
}

/// [`load_and_validate`] against the kinds of `registry` (a program's own kinds beside, or
/// instead of, the built-in ones).
pub fn load_and_validate_with(
    registry: &Registry,
    path: &Path,
    ov: &Overrides,
) -> Result<Ready, InputError> {
    let scenario = Scenario::load(path, ov)?;
    let kind = registry.find(&scenario.kind).ok_or_else(|| {
        let known = registry.names();
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
    for (i, d) in scenario.declared_checks.iter().enumerate() {
        d.validate(&scenario, i, kind.quantities())?;
    }
    let sweep = match &scenario.sweep {
        None => None,
        Some(table) => {
            let (spec, points) = SweepSpec::plan(&scenario, table)?;
            refuse_swept_overrides(&scenario, &spec)?;
            let mut prepared_points = Vec::with_capacity(points.len());
            for point in points {
                let mut sc = scenario.clone();
                sc.sweep = None;
                sc.name = point.id();
                sc.seed = point.seed;
                for (k, v) in &point.values {
                    sc.assign(k, v.clone(), "[sweep.grid]")?;
                    sc.overrides.push(format!("{k}={v}"));
                }
                let prepared = kind.prepare(&sc)?;
                prepared_points.push(SweepPoint {
                    point,
                    scenario: sc,
                    prepared,
                });
            }
            let costs = prepared_points.iter().map(|p| &p.prepared.cost);
            super::cost::check_sweep_work(&scenario, &spec.factors(), costs)?;
            spec.validate_checks(&scenario, kind.quantities())?;
            kind.validate_sweep(&scenario, &spec)?;
            Some((spec, prepared_points))
        }
    };
    Ok(Ready {
        scenario,
        kind,
        prepared,
        sweep,
    })
}

/// A `--set` of a key the grid sweeps would be overwritten at every point: refused, so that
/// what `sweep.json` records is what ran.
fn refuse_swept_overrides(sc: &Scenario, spec: &SweepSpec) -> Result<(), InputError> {
    let param_key = |k: &str| k.strip_prefix("params.").unwrap_or(k).to_string();
    for set in &sc.overrides {
        let key = param_key(set.split_once('=').map_or(set.as_str(), |(k, _)| k.trim()));
        if spec.grid.keys().any(|g| param_key(g) == key) {
            return Err(InputError::new(
                &sc.path,
                format!("--set {key}"),
                format!(
                    "`{key}` is swept by [sweep.grid], which sets it at every point; \
                     change the grid instead (--set 'sweep.grid.{key}=[…]')"
                ),
            ));
        }
    }
    Ok(())
}

/// Checks, before anything runs, that the scenarios of one invocation can write their outputs:
/// no two share an output name (they would share `<out>/<name>`), `out` is a folder this
/// process can write in, nothing but a folder stands at `<out>/<name>`, and with `--resume` the
/// outputs on disk were made with the same parameters. Returns, per scenario, whether its
/// complete outputs are already on disk (`--resume` then skips it).
pub fn check_outputs(
    ready: &[Ready],
    out: &Path,
    opts: ExecOptions,
) -> Result<Vec<bool>, InputError> {
    let mut seen: std::collections::BTreeMap<&str, &Path> = Default::default();
    for r in ready {
        if let Some(first) = seen.insert(&r.scenario.name, &r.scenario.path) {
            let reason = if same_file(first, &r.scenario.path) {
                "this scenario is named twice".to_string()
            } else {
                format!(
                    "{} has the same name; both would write {}: rename one, or run them \
                     with different --out",
                    first.display(),
                    out.join(&r.scenario.name).display()
                )
            };
            return Err(InputError::new(&r.scenario.path, "(scenario)", reason));
        }
    }
    check_writable(out)?;
    ready
        .iter()
        .map(|r| {
            let target = out.join(&r.scenario.name);
            if target.exists() && !target.is_dir() {
                return Err(InputError::new(
                    &target,
                    "--out",
                    format!(
                        "a file stands where the outputs of `{}` go; move it away first",
                        r.scenario.name
                    ),
                ));
            }
            if !opts.resume {
                return Ok(false);
            }
            match &r.sweep {
                Some(_) => {
                    let plan = sweep_plan(r);
                    match Plan::path(&target).is_file().then(|| Plan::read(&target)) {
                        Some(Ok(old)) if !old.same_sweep(&plan) => Err(resume_mismatch(
                            r,
                            &Plan::path(&target),
                            "the sweep on disk was planned differently (parameters, seeds, \
                             grid or version)",
                        )),
                        Some(Err(e)) => Err(InputError::new(&target, "sweep.json", e)),
                        _ => Ok(false),
                    }
                }
                None => single_run_on_disk(r, &target),
            }
        })
        .collect()
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// `out` must be a folder, or creatable in a folder where this process can create files.
fn check_writable(out: &Path) -> Result<(), InputError> {
    let bad = |reason: String| InputError::new(out, "--out", reason);
    if out.exists() && !out.is_dir() {
        return Err(bad("is a file, not a folder".into()));
    }
    let mut existing = out;
    while !existing.exists() {
        existing = match existing.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
    }
    if !existing.is_dir() {
        return Err(bad(format!(
            "{} is a file, not a folder",
            existing.display()
        )));
    }
    let probe = temp_sibling(&existing.join("write-probe"), TempKind::File);
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(bad(format!("cannot write in {}: {e}", existing.display()))),
    }
}

/// With `--resume`: whether a single run's complete outputs are on disk, made with the same
/// scenario (kind, version, seed, configuration, solver, parameters, thresholds).
fn single_run_on_disk(r: &Ready, target: &Path) -> Result<bool, InputError> {
    if !target.join("checks.json").is_file() {
        return Ok(false);
    }
    let path = target.join("params.json");
    let on_disk: serde_json::Value = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| InputError::new(&path, "(file)", e))?;
    let now = [
        ("kind", serde_json::json!(r.scenario.kind)),
        (
            "crate_version",
            serde_json::json!(env!("CARGO_PKG_VERSION")),
        ),
        ("seed", serde_json::json!(r.scenario.seed)),
        ("quick", serde_json::json!(r.scenario.quick)),
        ("solver", serde_json::json!(r.prepared.ode)),
        ("params", r.prepared.params.clone()),
        ("check_thresholds", r.prepared.checks.clone()),
    ];
    let differ: Vec<&str> = now
        .iter()
        .filter(|(k, v)| on_disk.get(*k) != Some(v))
        .map(|(k, _)| *k)
        .collect();
    if differ.is_empty() {
        Ok(true)
    } else {
        Err(resume_mismatch(
            r,
            &path,
            &format!("the run on disk differs in {}", differ.join(", ")),
        ))
    }
}

fn resume_mismatch(r: &Ready, on_disk: &Path, why: &str) -> InputError {
    InputError::new(
        &r.scenario.path,
        "--resume",
        format!(
            "{why} ({}); run without --resume to replace it, or use another --out",
            on_disk.display()
        ),
    )
}

/// How to execute: which slice of a sweep, whether to skip completed runs, progress display.
#[derive(Debug, Clone, Copy)]
pub struct ExecOptions {
    pub shard: Shard,
    /// Skip runs (and whole scenarios) whose outputs are already complete.
    pub resume: bool,
    /// Show a progress bar on stderr (drawn only when stderr is a terminal).
    pub progress: bool,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            shard: Shard::ALL,
            resume: false,
            progress: false,
        }
    }
}

/// What one run produced.
pub struct Outcome {
    pub name: String,
    pub dir: PathBuf,
    pub checks: usize,
    pub passed: usize,
    /// Runs of a sweep not on disk (another shard's, or interrupted).
    pub missing: usize,
    pub seconds: f64,
    /// The verdict table printed for the run.
    pub verdict: String,
}

/// Runs a validated scenario (every point of its sweep, if it has one) and writes its outputs
/// under `out_root`.
pub fn execute(ready: Ready, out_root: &Path, opts: ExecOptions) -> Result<Outcome, RunError> {
    if ready.sweep.is_some() {
        return execute_sweep(ready, out_root, opts);
    }
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
    let mut report = prepared.run(&ctx)?;
    super::declared::apply(&scenario, &mut report)?;
    let seconds = start.elapsed().as_secs_f64();
    clean_stale(out_root);
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
        missing: 0,
        seconds,
        verdict: verdict_text(&scenario, &report, seconds),
    })
}

/// `sweep.json` of a sweep scenario.
fn sweep_plan(r: &Ready) -> Plan {
    sweep_plan_of(
        &r.scenario,
        &r.prepared,
        r.sweep.as_ref().expect("a sweep scenario"),
    )
}

fn sweep_plan_of(
    scenario: &Scenario,
    prepared: &Prepared,
    (spec, points): &(SweepSpec, Vec<SweepPoint>),
) -> Plan {
    Plan {
        scenario: scenario.name.clone(),
        kind: scenario.kind.clone(),
        title: scenario.title.clone(),
        file: scenario.file.clone(),
        crate_version: env!("CARGO_PKG_VERSION").into(),
        seed: scenario.seed,
        quick: scenario.quick,
        overrides: scenario.overrides.clone(),
        solver: prepared.ode,
        params: prepared.params.clone(),
        checks: prepared.checks.clone(),
        spec: spec.clone(),
        points: points.iter().map(|p| p.point.clone()).collect(),
    }
}

/// Runs the points of a sweep in this shard that are not yet on disk, in parallel, then
/// aggregates everything present. Interrupted sweeps keep their completed runs.
fn execute_sweep(ready: Ready, out_root: &Path, opts: ExecOptions) -> Result<Outcome, RunError> {
    let Ready {
        scenario,
        kind,
        sweep,
        prepared,
    } = ready;
    let plan = sweep_plan_of(
        &scenario,
        &prepared,
        sweep.as_ref().expect("called for sweeps"),
    );
    let (_, points) = sweep.expect("called for sweeps");
    let dir = out_root.join(&scenario.name);
    let io = |e: String| RunError::Other(format!("{}: {e}", dir.display()));
    // the same sweep on disk is continued (shards share a folder); anything else there (another
    // plan, or a single run's outputs) is replaced, so no stale file survives
    let on_disk = Plan::path(&dir).is_file().then(|| Plan::read(&dir));
    match on_disk {
        Some(Ok(old)) if old.same_sweep(&plan) => {}
        Some(_) if opts.resume => {
            return Err(RunError::Input(InputError::new(
                &Plan::path(&dir),
                "--resume",
                "the sweep on disk was planned differently (parameters, seeds, grid or \
                 version); run without --resume to replace it, or use another --out",
            )))
        }
        _ if dir.exists() => std::fs::remove_dir_all(&dir).map_err(|e| io(e.to_string()))?,
        _ => {}
    }
    std::fs::create_dir_all(dir.join("runs")).map_err(|e| io(e.to_string()))?;
    clean_stale(out_root);
    clean_stale(&dir);
    clean_stale(&dir.join("runs"));
    plan.write(&dir).map_err(io)?;

    let todo: Vec<SweepPoint> = points
        .into_iter()
        .filter(|p| opts.shard.contains(&p.point))
        .filter(|p| !(opts.resume && Plan::is_done(&dir, &p.point)))
        .collect();
    let bar = if opts.progress {
        ProgressBar::with_draw_target(Some(todo.len() as u64), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} runs, {elapsed} (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(scenario.name.clone());
    let start = Instant::now();
    let runs_dir = dir.join("runs");
    let failures: Vec<(String, RunError)> = todo
        .into_par_iter()
        .filter_map(|p| {
            if interrupted() {
                return None;
            }
            let id = p.point.id();
            let result = run_point(p, &runs_dir);
            bar.inc(1);
            result.err().map(|e| (id, e))
        })
        .collect();
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let agg = sweep::aggregate(&dir, kind).map_err(io)?;
    let report = Report {
        checks: agg.checks,
        ..Default::default()
    };
    let mut verdict = verdict_text(&scenario, &report, seconds);
    verdict.push_str(&format!(
        "  sweep: {} of {} runs on disk",
        agg.runs,
        plan.points.len()
    ));
    if !agg.missing.is_empty() {
        verdict.push_str(&format!(
            ", missing {} (listed in {}/checks.json; the sweep's own checks wait for them)",
            agg.missing.len(),
            dir.display()
        ));
    }
    verdict.push('\n');
    if interrupted() {
        return Err(RunError::Interrupted(format!(
            "{}: {} of {} runs missing; finish them with --resume",
            scenario.name,
            agg.missing.len(),
            plan.points.len()
        )));
    }
    if let Some((id, e)) = failures.first() {
        return Err(RunError::Other(format!(
            "{} of the sweep's runs failed (first: run {id}: {e}); completed runs are in {}",
            failures.len(),
            dir.display()
        )));
    }
    Ok(Outcome {
        name: scenario.name.clone(),
        dir,
        checks: report.checks.len(),
        passed: report.checks.iter().filter(|c| c.pass).count(),
        missing: agg.missing.len(),
        seconds,
        verdict,
    })
}

/// One point of a sweep, written atomically into `runs/<id>`.
fn run_point(p: SweepPoint, runs_dir: &Path) -> Result<(), RunError> {
    let meta_params = p.prepared.params.clone();
    let meta_checks = p.prepared.checks.clone();
    let ode = p.prepared.ode;
    let ctx = RunContext {
        scenario: &p.scenario,
        ode,
    };
    let mut report = p.prepared.run(&ctx)?;
    super::declared::apply(&p.scenario, &mut report)?;
    let meta = RunMeta {
        scenario: &p.scenario,
        params: &meta_params,
        checks: &meta_checks,
        ode: &ode,
    };
    write_run(runs_dir, &meta, &report).map_err(RunError::Other)?;
    Ok(())
}

/// `attnflow merge`: joins the output folders of shards (or of separate runs) into `out`,
/// giving the same files a single run writes. Every input is read and checked first, and
/// nothing is written unless they all agree: a missing or empty folder, a sweep planned
/// differently in two places, or two different runs under one name are refused as bad input.
/// Sweeps are re-aggregated (by their kinds, looked up among the built-in ones); an incomplete
/// one is reported with its missing runs.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Vec<Outcome>, RunError> {
    merge_with(&Registry::builtin(), dirs, out)
}

/// [`merge`], re-aggregating sweeps by the kinds of `registry`.
pub fn merge_with(
    registry: &Registry,
    dirs: &[PathBuf],
    out: &Path,
) -> Result<Vec<Outcome>, RunError> {
    use std::collections::BTreeMap;
    let conflict = |here: &Path, there: &Path, what: &str| {
        RunError::Input(InputError::new(
            here,
            "(folder)",
            format!("{what} than {}", there.display()),
        ))
    };
    // (1) read and check everything
    type Sweep = (Plan, &'static dyn ScenarioKind, Vec<PathBuf>);
    let mut sweeps: BTreeMap<String, Sweep> = BTreeMap::new();
    let mut singles: BTreeMap<String, (serde_json::Value, PathBuf)> = BTreeMap::new();
    for dir in dirs {
        if !dir.is_dir() {
            let why = if dir.exists() {
                "not a folder"
            } else {
                "no such folder"
            };
            return Err(InputError::new(dir, "(folder)", why).into());
        }
        let entries = std::fs::read_dir(dir)
            .map_err(|e| InputError::new(dir, "(folder)", format!("cannot read: {e}")))?;
        let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        children.sort();
        let mut found = 0;
        for child in children.into_iter().filter(|c| c.is_dir()) {
            let Some(name) = child
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
            else {
                continue;
            };
            if Plan::path(&child).is_file() {
                let plan = Plan::read(&child)
                    .map_err(|e| InputError::new(&Plan::path(&child), "(file)", e))?;
                let kind = registry.find(&plan.kind).ok_or_else(|| {
                    InputError::new(
                        &Plan::path(&child),
                        "kind",
                        format!(
                            "unknown kind `{}` (known: {})",
                            plan.kind,
                            registry.names().join(", ")
                        ),
                    )
                })?;
                match sweeps.get_mut(&name) {
                    Some((first, _, _)) if !first.same_sweep(&plan) => {
                        let there = &sweeps[&name].2[0];
                        return Err(conflict(&child, there, "a sweep planned differently"));
                    }
                    Some((_, _, sources)) => sources.push(child),
                    None => {
                        sweeps.insert(name, (plan, kind, vec![child]));
                    }
                }
                found += 1;
            } else if child.join("checks.json").is_file() {
                let identity = run_identity(&child)?;
                match singles.get(&name) {
                    Some((first, there)) if *first != identity => {
                        return Err(conflict(
                            &child,
                            there,
                            "another run (other parameters, \
                             seed or results)",
                        ));
                    }
                    Some(_) => {}
                    None => {
                        singles.insert(name, (identity, child));
                    }
                }
                found += 1;
            }
        }
        if found == 0 {
            return Err(InputError::new(
                dir,
                "(folder)",
                "holds no scenario outputs (folders with sweep.json or checks.json)",
            )
            .into());
        }
    }
    // ... and against what `out` already holds
    for (name, (plan, _, sources)) in &sweeps {
        let target = out.join(name);
        if Plan::path(&target).is_file() {
            let have = Plan::read(&target)
                .map_err(|e| InputError::new(&Plan::path(&target), "(file)", e))?;
            if !have.same_sweep(plan) {
                return Err(conflict(
                    &target,
                    &sources[0],
                    "a sweep planned differently",
                ));
            }
        } else if target.exists() {
            return Err(conflict(&target, &sources[0], "other outputs"));
        }
    }
    for (name, (identity, source)) in &singles {
        let target = out.join(name);
        if target.exists()
            && (!target.join("checks.json").is_file() || run_identity(&target)? != *identity)
        {
            return Err(conflict(&target, source, "other outputs"));
        }
    }
    check_writable(out)?;

    // (2) write
    let io = |p: &Path, e: std::io::Error| RunError::Other(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let mut outcomes = Vec::new();
    for (name, (plan, kind, sources)) in &sweeps {
        let target = out.join(name);
        if !Plan::path(&target).is_file() {
            std::fs::create_dir_all(target.join("runs")).map_err(|e| io(&target, e))?;
            plan.write(&target).map_err(RunError::Other)?;
        }
        for source in sources {
            for p in &plan.points {
                if Plan::is_done(source, p) && !Plan::is_done(&target, p) {
                    let from = source.join("runs").join(p.id());
                    copy_atomic(&from, &target.join("runs").join(p.id()))?;
                }
            }
        }
        let agg = sweep::aggregate(&target, *kind).map_err(RunError::Other)?;
        let passed = agg.checks.iter().filter(|c| c.pass).count();
        let mut verdict = format!(
            "{} ({}): {}/{} checks passed, {} of {} runs",
            plan.scenario,
            plan.kind,
            passed,
            agg.checks.len(),
            agg.runs,
            plan.points.len()
        );
        if !agg.missing.is_empty() {
            verdict += &format!(", missing {}", agg.missing.join(" "));
        }
        verdict.push('\n');
        outcomes.push(Outcome {
            name: plan.scenario.clone(),
            dir: target,
            checks: agg.checks.len(),
            passed,
            missing: agg.missing.len(),
            seconds: 0.0,
            verdict,
        });
    }
    for (name, (_, source)) in &singles {
        let target = out.join(name);
        if !target.exists() {
            copy_atomic(source, &target)?;
        }
        let (checks, passed) = check_counts(&target)?;
        outcomes.push(Outcome {
            name: name.clone(),
            dir: target,
            checks,
            passed,
            missing: 0,
            seconds: 0.0,
            verdict: format!("{name}: {passed}/{checks} checks passed\n"),
        });
    }
    outcomes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(outcomes)
}

/// What makes two single-run folders the same run: their parameters (wherever the scenario
/// file was) and their checks.
fn run_identity(dir: &Path) -> Result<serde_json::Value, RunError> {
    let read = |f: &str| -> Result<serde_json::Value, RunError> {
        let path = dir.join(f);
        std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            .map_err(|e| InputError::new(&path, "(file)", e).into())
    };
    let mut params = read("params.json")?;
    if let Some(o) = params.as_object_mut() {
        o.remove("file");
    }
    Ok(serde_json::json!({ "params": params, "checks": read("checks.json")? }))
}

/// (checks, passed) of a run folder's checks.json.
fn check_counts(dir: &Path) -> Result<(usize, usize), RunError> {
    let path = dir.join("checks.json");
    let doc: serde_json::Value = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| RunError::Other(format!("{}: {e}", path.display())))?;
    let list = doc["checks"].as_array().cloned().unwrap_or_default();
    Ok((
        list.len(),
        list.iter().filter(|c| c["pass"] == true).count(),
    ))
}

/// Copies a folder (files and subfolders) into place through a temporary sibling.
fn copy_atomic(from: &Path, to: &Path) -> Result<(), RunError> {
    fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for e in std::fs::read_dir(from)?.flatten() {
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if src.is_dir() {
                copy(&src, &dst)?;
            } else {
                std::fs::copy(&src, &dst)?;
            }
        }
        Ok(())
    }
    let tmp = temp_sibling(to, TempKind::Partial);
    let result = copy(from, &tmp).and_then(|_| std::fs::rename(&tmp, to));
    result.map_err(|e| {
        let _ = std::fs::remove_dir_all(&tmp);
        RunError::Other(format!(
            "copying {} to {}: {e}",
            from.display(),
            to.display()
        ))
    })
}

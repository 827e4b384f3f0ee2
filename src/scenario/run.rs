//! Finding scenario files, validating them, running them and writing their outputs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use super::output::{verdict_text, write_run, RunMeta};
use super::registry::{self, Prepared, ScenarioKind};
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
    let sweep = match &scenario.sweep {
        None => None,
        Some(table) => {
            let (spec, points) = SweepSpec::plan(&scenario, table)?;
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
            spec.validate_checks(&scenario)?;
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

/// Runs the points of a sweep in this shard that are not yet on disk, in parallel, then
/// aggregates everything present. Interrupted sweeps keep their completed runs.
fn execute_sweep(ready: Ready, out_root: &Path, opts: ExecOptions) -> Result<Outcome, RunError> {
    let Ready {
        scenario,
        sweep,
        prepared,
        ..
    } = ready;
    let (spec, points) = sweep.expect("called for sweeps");
    let dir = out_root.join(&scenario.name);
    let plan = Plan {
        scenario: scenario.name.clone(),
        kind: scenario.kind.clone(),
        title: scenario.title.clone(),
        file: scenario.path.display().to_string(),
        crate_version: env!("CARGO_PKG_VERSION").into(),
        seed: scenario.seed,
        quick: scenario.quick,
        overrides: scenario.overrides.clone(),
        solver: prepared.ode,
        params: prepared.params,
        checks: prepared.checks,
        spec,
        points: points.iter().map(|p| p.point.clone()).collect(),
    };
    let io = |e: String| RunError::Other(format!("{}: {e}", dir.display()));
    // the same sweep on disk is continued (shards share a folder); anything else there (another
    // plan, or a single run's outputs) is replaced, so no stale file survives
    let on_disk = Plan::path(&dir).is_file().then(|| Plan::read(&dir));
    match on_disk {
        Some(Ok(old)) if old.same_sweep(&plan) => {}
        Some(_) if opts.resume => {
            return Err(RunError::Other(format!(
                "{}: --resume: the sweep on disk was planned differently (parameters, \
                 seeds or version); run without --resume or use another --out",
                dir.display()
            )))
        }
        _ if dir.exists() => std::fs::remove_dir_all(&dir).map_err(|e| io(e.to_string()))?,
        _ => {}
    }
    std::fs::create_dir_all(dir.join("runs")).map_err(|e| io(e.to_string()))?;
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
    let agg = sweep::aggregate(&dir).map_err(io)?;
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
    let report = p.prepared.run(&ctx)?;
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
/// giving the same files a single run writes. Sweeps are re-aggregated; a sweep planned
/// differently in two folders is refused.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Vec<Outcome>, RunError> {
    let io = |p: &Path, e: std::io::Error| RunError::Other(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let mut sweeps: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let entries = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
        let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        children.sort();
        for child in children.into_iter().filter(|c| c.is_dir()) {
            let Some(name) = child
                .file_name()
                .filter(|n| !n.to_string_lossy().starts_with('.'))
            else {
                continue;
            };
            let target = out.join(name);
            if Plan::path(&child).is_file() {
                let plan = Plan::read(&child).map_err(RunError::Other)?;
                if Plan::path(&target).is_file() {
                    let have = Plan::read(&target).map_err(RunError::Other)?;
                    if !have.same_sweep(&plan) {
                        return Err(RunError::Input(InputError::new(
                            &child,
                            "sweep.json",
                            format!("planned differently from {}", target.display()),
                        )));
                    }
                } else {
                    std::fs::create_dir_all(target.join("runs")).map_err(|e| io(&target, e))?;
                    plan.write(&target).map_err(RunError::Other)?;
                }
                for p in &plan.points {
                    if Plan::is_done(&child, p) && !Plan::is_done(&target, p) {
                        let from = child.join("runs").join(p.id());
                        copy_atomic(&from, &target.join("runs").join(p.id()))?;
                    }
                }
                if !sweeps.contains(&target) {
                    sweeps.push(target);
                }
            } else if child.join("checks.json").is_file() && !target.exists() {
                copy_atomic(&child, &target)?;
            }
        }
    }
    let mut outcomes = Vec::new();
    for dir in sweeps {
        let plan = Plan::read(&dir).map_err(RunError::Other)?;
        let agg = sweep::aggregate(&dir).map_err(RunError::Other)?;
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
            name: plan.scenario,
            dir,
            checks: agg.checks.len(),
            passed,
            seconds: 0.0,
            verdict,
        });
    }
    Ok(outcomes)
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
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = to.with_file_name(format!(".{name}.partial-{}", std::process::id()));
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

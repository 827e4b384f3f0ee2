//! The attnflow command line: list, describe, run and check scenarios, write the report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use rayon::prelude::*;

use attnflow::flow::Method;
use attnflow::scenario::run::{
    check_outputs, default_scenario_dir, execute, load_and_validate, merge, resolve,
    scenario_files, ExecOptions, Outcome, Ready, INTERRUPTED,
};
use attnflow::scenario::sweep::Shard;
use attnflow::scenario::{html, registry};
use attnflow::scenario::{InputError, Overrides, RunError};

/// Prints to stdout; a closed pipe (`attnflow list | head -1`) is not an error: the command
/// goes on quietly and still writes its files.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}
macro_rules! sayln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}
/// Prints to stderr, likewise.
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// Exit codes: 0 all checks passed, 1 some check failed, 2 bad input (nothing written),
/// 3 a run failed (solver failure, divergence, I/O), 130 interrupted (completed runs kept).
#[derive(Parser)]
#[command(
    name = "attnflow",
    version,
    about = "Exact gradient flows, theory checks and \
paper-style figures for the training dynamics of attention models."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the scenarios (name, kind, title).
    List {
        /// Folder of scenario files.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Show what a scenario verifies, its file (documented parameters) and resolved values.
    Describe {
        /// Scenario file or name.
        scenario: String,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Run scenarios: writes <out>/<name>/{params.json, series.csv, checks.json, figure.svg}.
    Run {
        /// Scenario files or names.
        scenarios: Vec<String>,
        /// Run every scenario under --dir.
        #[arg(long)]
        all: bool,
        /// Output folder.
        #[arg(long, default_value = "out", value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        opts: RunOpts,
        #[command(flatten)]
        exec: ExecArgs,
    },
    /// Run every scenario, print a summary table (checks passed/failed, wall time), write it to
    /// <out>/check-summary.json, and exit 1 if any theorem check fails.
    Check {
        /// Output folder.
        #[arg(long, default_value = "out", value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        opts: RunOpts,
        #[command(flatten)]
        exec: ExecArgs,
    },
    /// Join the output folders of shards (`run --shard K/N --out DIR_K`) into one.
    Merge {
        /// Output folders of the shards.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where the merged outputs go.
        #[arg(long, default_value = "out", value_name = "DIR")]
        out: PathBuf,
    },
    /// Write <out>/index.html: one page with every scenario's claim, verdicts, figures,
    /// parameters and data links, grouped by paper. Reads the output files; runs nothing.
    Report {
        /// Output folder of `run` or `check`.
        #[arg(long, default_value = "out", value_name = "DIR")]
        out: PathBuf,
    },
}

/// Sweep execution: slices for clusters, resuming interrupted runs.
#[derive(Args, Clone)]
struct ExecArgs {
    /// Run only the K-th of N deterministic slices of every sweep (scenarios without a sweep
    /// run in slice 1); join the slices with `attnflow merge`.
    #[arg(long, value_name = "K/N", value_parser = Shard::parse)]
    shard: Option<Shard>,
    /// Skip runs whose outputs are already complete (after Ctrl-C or a failed node).
    #[arg(long)]
    resume: bool,
}

impl ExecArgs {
    fn options(&self) -> ExecOptions {
        ExecOptions {
            shard: self.shard.unwrap_or(Shard::ALL),
            resume: self.resume,
            progress: true,
        }
    }
}

#[derive(Args, Clone)]
struct RunOpts {
    /// Override a parameter: key=value (keys under [params], or solver.x, checks.x, seed).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Seed of all randomness.
    #[arg(long)]
    seed: Option<u64>,
    /// Integrator: bdf, esdirk34, tr_bdf2 or tsit45.
    #[arg(long, value_parser = parse_method)]
    solver: Option<Method>,
    /// Apply each scenario's [quick] overrides (the fast configuration the tests use).
    #[arg(long)]
    quick: bool,
    /// Folder of scenario files.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Run configurations estimated to need more than 8 GB of memory or an hour of work on one
    /// core, and sweeps of more than 10000 points (refused by default).
    #[arg(long)]
    allow_large: bool,
}

impl RunOpts {
    fn overrides(&self) -> Overrides {
        Overrides {
            set: self.set.clone(),
            seed: self.seed,
            method: self.solver,
            quick: self.quick,
            dir: self.dir.clone(),
            allow_large: self.allow_large,
        }
    }
    fn dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(default_scenario_dir)
    }
}

fn parse_method(s: &str) -> Result<Method, String> {
    Method::parse(s).ok_or_else(|| format!("unknown solver `{s}` (bdf, esdirk34, tr_bdf2, tsit45)"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // first Ctrl-C: start no new run, keep what is complete; second: stop at once
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        warn!("\ninterrupted: finishing the runs under way (Ctrl-C again to stop now)");
    });
    match cli.command {
        Command::List { dir } => list(&dir.unwrap_or_else(default_scenario_dir)),
        Command::Describe { scenario, opts } => describe(&scenario, &opts),
        Command::Run {
            scenarios,
            all,
            out,
            opts,
            exec,
        } => {
            if all && !scenarios.is_empty() {
                warn!("error: give scenario names or --all, not both");
                return ExitCode::from(2);
            }
            if !all && scenarios.is_empty() {
                warn!("error: name at least one scenario, or pass --all");
                return ExitCode::from(2);
            }
            run(scenarios, all, &out, &opts, &exec, false)
        }
        Command::Check { out, opts, exec } => run(Vec::new(), true, &out, &opts, &exec, true),
        Command::Merge { dirs, out } => match merge(&dirs, &out) {
            Ok(outcomes) => {
                for o in &outcomes {
                    say!("{}", o.verdict);
                }
                sayln!("merged {} folders into {}", dirs.len(), out.display());
                let missing: usize = outcomes.iter().map(|o| o.missing).sum();
                if missing > 0 {
                    warn!(
                        "incomplete: {missing} runs are in none of the folders; their sweeps' \
                         own checks were not evaluated (exit 1)"
                    );
                    return ExitCode::from(1);
                }
                exit_code(&outcomes, &[])
            }
            Err(RunError::Input(e)) => input_error(&e),
            Err(e) => {
                warn!("error: {e}");
                ExitCode::from(3)
            }
        },
        Command::Report { out } => report(&out),
    }
}

fn input_error(e: &InputError) -> ExitCode {
    warn!("error: {e}");
    ExitCode::from(2)
}

fn list(dir: &Path) -> ExitCode {
    let files = scenario_files(dir);
    if files.is_empty() {
        warn!("no scenario files under {}", dir.display());
        return ExitCode::from(2);
    }
    for f in files {
        match attnflow::scenario::Scenario::load(&f, &Overrides::default()) {
            Ok(sc) => sayln!("{:<28} {:<40} {}", sc.name, sc.kind, sc.title),
            Err(e) => return input_error(&e),
        }
    }
    ExitCode::SUCCESS
}

fn describe(name: &str, opts: &RunOpts) -> ExitCode {
    let path = match resolve(name, &opts.dir()) {
        Ok(p) => p,
        Err(e) => return input_error(&e),
    };
    let ready = match load_and_validate(&path, &opts.overrides()) {
        Ok(r) => r,
        Err(e) => return input_error(&e),
    };
    sayln!("{} — {}", ready.scenario.name, ready.scenario.title);
    sayln!("kind: {} (paper {})", ready.kind.name(), ready.kind.paper());
    sayln!("{}\n", ready.kind.summary());
    sayln!("file {}:\n", path.display());
    sayln!("{}", std::fs::read_to_string(&path).unwrap_or_default());
    let resolved = serde_json::json!({
        "seed": ready.scenario.seed,
        "solver": ready.prepared.ode,
        "params": ready.prepared.params,
        "checks": ready.prepared.checks,
    });
    sayln!(
        "resolved (defaults and overrides applied):\n{}",
        serde_json::to_string_pretty(&resolved).unwrap_or_default()
    );
    sayln!(
        "estimated cost of one run: {}",
        ready.prepared.cost.summary()
    );
    let quantities = ready.kind.quantities();
    sayln!(
        "quantities a run records (what a sweep check may name): {}",
        if quantities.is_empty() {
            "none besides its checks' measured values".to_string()
        } else {
            quantities.join(", ")
        }
    );
    ExitCode::SUCCESS
}

/// Validates every named scenario (or all), runs them, prints verdicts; `summary` also writes
/// `<out>/check-summary.json` (the `check` command).
fn run(
    names: Vec<String>,
    all: bool,
    out: &Path,
    opts: &RunOpts,
    exec: &ExecArgs,
    summary: bool,
) -> ExitCode {
    let exec = exec.options();
    let dir = opts.dir();
    let paths: Vec<PathBuf> = if all {
        scenario_files(&dir)
    } else {
        let mut v = Vec::new();
        for n in &names {
            match resolve(n, &dir) {
                Ok(p) => v.push(p),
                Err(e) => return input_error(&e),
            }
        }
        v
    };
    // validate everything before running anything: bad input writes nothing
    let mut ready: Vec<Ready> = Vec::new();
    for p in &paths {
        match load_and_validate(p, &opts.overrides()) {
            Ok(r) => ready.push(r),
            Err(e) => return input_error(&e),
        }
    }
    if ready.is_empty() {
        warn!("error: no scenarios under {}", dir.display());
        return ExitCode::from(2);
    }
    let on_disk = match check_outputs(&ready, out, exec) {
        Ok(v) => v,
        Err(e) => return input_error(&e),
    };
    // Scenarios run in parallel (each sweep is parallel inside too); the ones that report
    // their solvers' wall time run afterwards, alone, so that their timings are not shared
    // with other work. Verdicts print as runs finish; the summary keeps the file order.
    type Indexed = Vec<(usize, Ready)>;
    let (timed, rest): (Indexed, Indexed) = ready
        .into_iter()
        .enumerate()
        .filter(|(i, r)| {
            if on_disk[*i] {
                sayln!("{}: complete on disk, skipped (--resume)", r.scenario.name);
            }
            !on_disk[*i] && (r.sweep.is_some() || exec.shard.index == 1)
        })
        .partition(|(_, r)| registry::reports_wall_time(r.kind.name()));
    let start = std::time::Instant::now();
    type Finished = (usize, String, Result<Outcome, RunError>);
    let execute_one = |(i, r): (usize, Ready)| -> Finished {
        let name = r.scenario.name.clone();
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            return (i, name, Err(RunError::NotStarted));
        }
        let result = execute(r, out, exec);
        // one write holds the stdout lock for the whole verdict: blocks never interleave
        match &result {
            Ok(o) => say!("{}", o.verdict),
            Err(e) => warn!("{name}: {e}"),
        }
        (i, name, result)
    };
    let mut results: Vec<Finished> = rest.into_par_iter().map(execute_one).collect();
    results.extend(timed.into_iter().map(execute_one));
    results.sort_by_key(|(i, _, _)| *i);
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut failures: Vec<(String, RunError)> = Vec::new();
    for (_, name, result) in results {
        match result {
            Ok(o) => outcomes.push(o),
            Err(e) => failures.push((name, e)),
        }
    }
    summarize(&outcomes, &failures, start.elapsed().as_secs_f64());
    if summary {
        match write_summary(out, &outcomes, &failures) {
            Ok(path) => sayln!("summary written to {}", path.display()),
            Err(e) => {
                warn!("error: {e}");
                return ExitCode::from(3);
            }
        }
    }
    let code = exit_code(&outcomes, &failures);
    // `run --all` (the main job writes figures/ this way) and `check` cover every scenario, so
    // they end by rewriting the report: the index.html committed with the figures always
    // describes the outputs beside it. A run of a few scenarios leaves the report alone (it is
    // exploration; `attnflow report` writes one on demand), and so does a shard, whose folder
    // holds a slice of each sweep: the report belongs to the merged folder.
    if all && exec.shard == Shard::ALL {
        let written = report(out);
        if code == ExitCode::SUCCESS {
            return written;
        }
    }
    code
}

/// Writes `<out>/index.html` and says so; exit 2 when the folder holds no scenario outputs.
fn report(out: &Path) -> ExitCode {
    match html::write_report(out) {
        Ok(s) => {
            sayln!(
                "report written to {} ({} scenarios, {} not run; {}/{} checks passed)",
                out.join(html::INDEX).display(),
                s.scenarios,
                s.not_run,
                s.passed,
                s.checks
            );
            ExitCode::SUCCESS
        }
        Err(html::ReportError::NoOutputs(e)) => {
            warn!("error: {e}");
            ExitCode::from(2)
        }
        Err(html::ReportError::Io(e)) => {
            warn!("error: writing the report: {e}");
            ExitCode::from(3)
        }
    }
}

fn exit_code(outcomes: &[Outcome], failures: &[(String, RunError)]) -> ExitCode {
    if failures
        .iter()
        .any(|(_, e)| matches!(e, RunError::Interrupted(_) | RunError::NotStarted))
    {
        ExitCode::from(130)
    } else if !failures.is_empty() {
        ExitCode::from(3)
    } else if outcomes.iter().any(|o| o.passed < o.checks) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The summary table printed after several runs: one line per scenario.
fn summarize(outcomes: &[Outcome], failures: &[(String, RunError)], elapsed: f64) {
    if outcomes.len() + failures.len() < 2 {
        return;
    }
    sayln!(
        "\n{:<28} {:>7} {:>7} {:>9}",
        "scenario",
        "passed",
        "failed",
        "seconds"
    );
    for o in outcomes {
        sayln!(
            "{:<28} {:>7} {:>7} {:>9.2}",
            o.name,
            o.passed,
            o.checks - o.passed,
            o.seconds
        );
    }
    for (n, e) in failures {
        let what = match e {
            RunError::NotStarted => "NOT STARTED",
            RunError::Interrupted(_) => "INTERRUPTED",
            _ => "RUN FAILED",
        };
        sayln!("{n:<28} {:>7} {:>7} {what:>11}", "-", "-");
    }
    let checks: usize = outcomes.iter().map(|o| o.checks).sum();
    let passed: usize = outcomes.iter().map(|o| o.passed).sum();
    let seconds: f64 = outcomes.iter().map(|o| o.seconds).sum();
    sayln!(
        "{} scenarios run, {} failed to run; {passed}/{checks} checks passed \
         [{elapsed:.1} s elapsed, {seconds:.1} s summed over scenarios]",
        outcomes.len(),
        failures.len()
    );
}

/// `<out>/check-summary.json`: per scenario, checks passed and failed, wall time, run errors.
fn write_summary(
    out: &Path,
    outcomes: &[Outcome],
    failures: &[(String, RunError)],
) -> Result<PathBuf, String> {
    let rows: Vec<_> = outcomes
        .iter()
        .map(|o| {
            serde_json::json!({
                "scenario": o.name, "checks": o.checks, "passed": o.passed,
                "failed": o.checks - o.passed, "seconds": o.seconds,
            })
        })
        .chain(
            failures
                .iter()
                .map(|(n, e)| serde_json::json!({ "scenario": n, "error": e.to_string() })),
        )
        .collect();
    let summary = serde_json::json!({
        "crate_version": env!("CARGO_PKG_VERSION"),
        "scenarios": rows,
        "all_pass": failures.is_empty() && outcomes.iter().all(|o| o.passed == o.checks),
    });
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let path = out.join("check-summary.json");
    let text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())? + "\n";
    let tmp = out.join(".check-summary.json.tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

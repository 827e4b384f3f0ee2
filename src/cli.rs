//! The attnflow command line as a library: `list`, `describe`, `run`, `check`, `flow`, `merge`
//! and `report` over any [`Registry`] of scenario kinds.
//!
//! The `attnflow` binary is [`main_with`] on [`Registry::builtin`]. A downstream crate that
//! defines its own kinds (a [`ScenarioKind`](crate::scenario::registry::ScenarioKind), or a
//! model family's generic flow, [`FlowKind`](crate::scenario::flow::FlowKind)) gets the same
//! command line for them, with its own scenario folder:
//!
//! ```no_run
//! use attnflow::scenario::registry::Registry;
//! # use attnflow::scenario::registry::{Kind, no_validation};
//! # use attnflow::scenario::{Report, Check};
//! # use attnflow::scenario::cost::Cost;
//! # use attnflow::flow::{Method, OdeConfig};
//! # static MY_KIND: Kind<toml::Table, toml::Table> = Kind {
//! #     name: "mine.demo", paper: "000", summary: "a demo", quantities: &[],
//! #     solver: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
//! #     validate: no_validation, cost: |_, _| Cost::new(),
//! #     run: |_, _, _| Ok(Report::default()),
//! # };
//! fn main() -> std::process::ExitCode {
//!     let registry = Registry::builtin().with(&MY_KIND);
//!     let code = attnflow::cli::main_with(registry, std::env::args_os());
//!     std::process::ExitCode::from(code as u8)
//! }
//! ```
//!
//! Exit codes: 0 all checks passed, 1 some check failed, 2 bad input (nothing written),
//! 3 a run failed (solver failure, divergence, I/O), 130 interrupted (completed runs kept).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use rayon::prelude::*;

use crate::flow::Method;
use crate::scenario::registry::{self, Registry};
use crate::scenario::run::{
    check_outputs, default_scenario_dir, execute, load_and_validate_with, merge_with, resolve,
    scenario_files, ExecOptions, Outcome, Ready, INTERRUPTED,
};
use crate::scenario::sweep::Shard;
use crate::scenario::{html, InputError, Overrides, RunError, Scenario};

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
    /// Run the generic flow of a model family on your data: the family's scenario file (kind
    /// flow.<family>, e.g. flow-<family>.toml) with these options as overrides, in this order:
    /// --data, --init, --t-end, --clock, --optimizer, --eta, --steps, then each --set. The same
    /// outputs as `attnflow run flow-<family> --set data_file=F ...`.
    Flow {
        /// The model family (`attnflow flow --list` shows them).
        #[arg(required_unless_present = "list")]
        family: Option<String>,
        /// List the model families and their scenario files.
        #[arg(long, conflicts_with = "family")]
        list: bool,
        /// The instance file (.npz or .json) with the family's data arrays (params.data_file).
        #[arg(long, value_name = "FILE")]
        data: Option<String>,
        /// The instance file with the initial state, if not in --data (params.init_file).
        #[arg(long, value_name = "FILE")]
        init: Option<String>,
        /// Horizon of the flow (params.t_end).
        #[arg(long, value_name = "T", value_parser = number::<f64>)]
        t_end: Option<String>,
        /// Clock of the flow (params.clock; default: the model's).
        #[arg(long, value_parser = ["linear", "log"])]
        clock: Option<String>,
        /// Integrator (the same as --solver): bdf, esdirk34, tr_bdf2, tsit45 or tr_bdf2_krylov.
        #[arg(long, value_parser = parse_method, conflicts_with = "solver")]
        method: Option<Method>,
        /// A discrete optimizer instead of the flow (params.optimizer).
        #[arg(long, value_parser = ["flow", "gd", "ngd", "polyak"])]
        optimizer: Option<String>,
        /// Step size of the discrete optimizer (params.eta).
        #[arg(long, value_name = "E", value_parser = number::<f64>)]
        eta: Option<String>,
        /// Iterations of the discrete optimizer (params.steps).
        #[arg(long, value_name = "N", value_parser = number::<usize>)]
        steps: Option<String>,
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
    /// Integrator: bdf, esdirk34, tr_bdf2, tsit45 or tr_bdf2_krylov.
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
    Method::parse(s).ok_or_else(|| {
        format!("unknown solver `{s}` (bdf, esdirk34, tr_bdf2, tsit45, tr_bdf2_krylov)")
    })
}

/// A value given as typed (so the recorded override is what the user wrote), once it parses.
fn number<T: std::str::FromStr>(s: &str) -> Result<String, String> {
    s.parse::<T>()
        .map(|_| s.to_string())
        .map_err(|_| format!("`{s}` is not a {}", std::any::type_name::<T>()))
}

/// Runs the command line `args` (as [`std::env::args_os`] gives them: the program name first)
/// over the kinds of `registry`, and returns the exit code: 0 all checks passed, 1 some check
/// failed, 2 bad input (nothing written), 3 a run failed (solver failure, divergence, I/O),
/// 130 interrupted (completed runs kept). `--help` and `--version` print and return 0.
///
/// The first call installs a Ctrl-C handler: a first Ctrl-C starts no new run and keeps what
/// is complete, a second one exits at once.
pub fn main_with(registry: Registry, args: impl IntoIterator<Item = OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    // first Ctrl-C: start no new run, keep what is complete; second: stop at once
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        warn!("\ninterrupted: finishing the runs under way (Ctrl-C again to stop now)");
    });
    match cli.command {
        Command::List { dir } => list(&dir.unwrap_or_else(default_scenario_dir)),
        Command::Describe { scenario, opts } => describe(&registry, &scenario, &opts),
        Command::Run {
            scenarios,
            all,
            out,
            opts,
            exec,
        } => {
            if all && !scenarios.is_empty() {
                warn!("error: give scenario names or --all, not both");
                return 2;
            }
            if !all && scenarios.is_empty() {
                warn!("error: name at least one scenario, or pass --all");
                return 2;
            }
            let paths = if all {
                Ok(scenario_files(&opts.dir()))
            } else {
                scenarios.iter().map(|n| resolve(n, &opts.dir())).collect()
            };
            match paths {
                Ok(paths) => run(&registry, paths, all, &out, &opts, &exec, false),
                Err(e) => input_error(&e),
            }
        }
        Command::Check { out, opts, exec } => {
            let paths = scenario_files(&opts.dir());
            run(&registry, paths, true, &out, &opts, &exec, true)
        }
        Command::Flow {
            family,
            list,
            data,
            init,
            t_end,
            clock,
            method,
            optimizer,
            eta,
            steps,
            out,
            mut opts,
            exec,
        } => {
            if list {
                return list_families(&registry, &opts.dir());
            }
            let family = family.expect("clap requires a family without --list");
            let path = match flow_scenario(&registry, &family, &opts.dir()) {
                Ok(p) => p,
                Err(e) => return input_error(&e),
            };
            let given = [
                ("data_file", data),
                ("init_file", init),
                ("t_end", t_end),
                ("clock", clock),
                ("optimizer", optimizer),
                ("eta", eta),
                ("steps", steps),
            ];
            let mut set: Vec<String> = given
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
                .collect();
            set.append(&mut opts.set);
            opts.set = set;
            opts.solver = opts.solver.or(method);
            run(&registry, vec![path], false, &out, &opts, &exec, false)
        }
        Command::Merge { dirs, out } => match merge_with(&registry, &dirs, &out) {
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
                    return 1;
                }
                exit_code(&outcomes, &[])
            }
            Err(RunError::Input(e)) => input_error(&e),
            Err(e) => {
                warn!("error: {e}");
                3
            }
        },
        Command::Report { out } => report(&registry, &out),
    }
}

fn input_error(e: &InputError) -> i32 {
    warn!("error: {e}");
    2
}

fn list(dir: &Path) -> i32 {
    let files = scenario_files(dir);
    if files.is_empty() {
        warn!("no scenario files under {}", dir.display());
        return 2;
    }
    for f in files {
        match Scenario::load(&f, &Overrides::default()) {
            Ok(sc) => sayln!("{:<28} {:<40} {}", sc.name, sc.kind, sc.title),
            Err(e) => return input_error(&e),
        }
    }
    0
}

/// The model families of `registry` (its kinds `flow.<family>`), each with its paper, its
/// scenario file under `dir` and its summary.
fn list_families(registry: &Registry, dir: &Path) -> i32 {
    let families: Vec<_> = registry
        .kinds()
        .iter()
        .filter_map(|k| k.name().strip_prefix("flow.").map(|f| (f, *k)))
        .collect();
    if families.is_empty() {
        sayln!("no model families registered");
    }
    for (family, kind) in families {
        let file = flow_scenario(registry, family, dir).map_or_else(
            |_| "(no scenario file)".to_string(),
            |p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            },
        );
        sayln!(
            "{family:<16} {:<4} {file:<28} {}",
            kind.paper(),
            kind.summary()
        );
    }
    0
}

/// The scenario file of family `family` under `dir`: the one whose kind is `flow.<family>`
/// (or, if several are, the one named `flow-<family>.toml`). An unregistered family is refused
/// with the list of known ones.
fn flow_scenario(registry: &Registry, family: &str, dir: &Path) -> Result<PathBuf, InputError> {
    let kind = format!("flow.{family}");
    let families: Vec<&str> = registry
        .kinds()
        .iter()
        .filter_map(|k| k.name().strip_prefix("flow."))
        .collect();
    if !families.contains(&family) {
        let known = if families.is_empty() {
            "none registered".to_string()
        } else {
            format!("known: {}", families.join(", "))
        };
        return Err(InputError::new(
            Path::new(family),
            "(family)",
            format!("unknown model family `{family}` ({known})"),
        ));
    }
    let stem = format!("flow-{family}");
    let kind_of = |p: &Path| -> Option<String> {
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
        table.get("kind")?.as_str().map(String::from)
    };
    let named = |p: &PathBuf| p.file_stem().is_some_and(|s| *s == *stem);
    let mut found: Vec<PathBuf> = scenario_files(dir)
        .into_iter()
        .filter(|p| named(p) || kind_of(p).as_deref() == Some(kind.as_str()))
        .collect();
    if found.len() > 1 && found.iter().any(named) {
        found.retain(named);
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(InputError::new(
            dir,
            "(family)",
            format!("no scenario file of kind `{kind}` (e.g. {stem}.toml) in this folder"),
        )),
        _ => Err(InputError::new(
            dir,
            "(family)",
            format!(
                "several scenario files of kind `{kind}`: {found:?}; run one with `attnflow run`"
            ),
        )),
    }
}

fn describe(registry: &Registry, name: &str, opts: &RunOpts) -> i32 {
    let path = match resolve(name, &opts.dir()) {
        Ok(p) => p,
        Err(e) => return input_error(&e),
    };
    let ready = match load_and_validate_with(registry, &path, &opts.overrides()) {
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
    0
}

/// Validates the scenario files `paths` (`all`: every file of the scenario folder), runs them,
/// prints verdicts; `summary` also writes `<out>/check-summary.json` (the `check` command).
fn run(
    registry: &Registry,
    paths: Vec<PathBuf>,
    all: bool,
    out: &Path,
    opts: &RunOpts,
    exec: &ExecArgs,
    summary: bool,
) -> i32 {
    let exec = exec.options();
    let dir = opts.dir();
    // validate everything before running anything: bad input writes nothing
    let mut ready: Vec<Ready> = Vec::new();
    for p in &paths {
        match load_and_validate_with(registry, p, &opts.overrides()) {
            Ok(r) => ready.push(r),
            Err(e) => return input_error(&e),
        }
    }
    if ready.is_empty() {
        warn!("error: no scenarios under {}", dir.display());
        return 2;
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
                return 3;
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
        let written = report(registry, out);
        if code == 0 {
            return written;
        }
    }
    code
}

/// Writes `<out>/index.html` and says so; exit 2 when the folder holds no scenario outputs.
fn report(registry: &Registry, out: &Path) -> i32 {
    match html::write_report(out, registry) {
        Ok(s) => {
            sayln!(
                "report written to {} ({} scenarios, {} not run; {}/{} checks passed)",
                out.join(html::INDEX).display(),
                s.scenarios,
                s.not_run,
                s.passed,
                s.checks
            );
            0
        }
        Err(html::ReportError::NoOutputs(e)) => {
            warn!("error: {e}");
            2
        }
        Err(html::ReportError::Io(e)) => {
            warn!("error: writing the report: {e}");
            3
        }
    }
}

fn exit_code(outcomes: &[Outcome], failures: &[(String, RunError)]) -> i32 {
    if failures
        .iter()
        .any(|(_, e)| matches!(e, RunError::Interrupted(_) | RunError::NotStarted))
    {
        130
    } else if !failures.is_empty() {
        // bad input found only once a run has made its tables (a declared check naming a
        // column the run did not write) is still bad input
        match failures
            .iter()
            .all(|(_, e)| matches!(e, RunError::Input(_)))
        {
            true => 2,
            false => 3,
        }
    } else if outcomes.iter().any(|o| o.passed < o.checks) {
        1
    } else {
        0
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

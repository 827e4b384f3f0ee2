//! Scenario files: a TOML file names a `kind` (a runner registered in [`registry`]) and gives
//! its documented parameters and check thresholds. This module loads and validates them, applies
//! `--set` overrides with the same validation, runs them, and writes the outputs atomically.
//!
//! A scenario file:
//! ```toml
//! kind = "histogram.thm2-trajectory"   # which runner
//! title = "Theorem 2 system, one trajectory"
//! seed = 0                              # drives all randomness (ChaCha)
//! [solver]                              # optional: default per kind
//! method = "tsit45"                     # bdf | esdirk34 | tr_bdf2 | tsit45
//! rtol = 1e-10
//! atol = 1e-12
//! [params]                              # kind-specific, all documented in the file
//! c = -2.0
//! [checks]                              # thresholds of the theorem checks
//! max_closed_form_error = 1e-7
//! [quick]                               # overrides for the fast configuration (tests, --quick)
//! t_end = 5.0
//! [sweep]                               # optional: a grid and/or seeds, run in parallel
//! seeds = 10                            # (see [`sweep`])
//! ```
//! The scenario's name is the file stem.

pub mod cost;
pub mod declared;
pub mod diagonal;
pub mod flow;
pub mod histogram;
pub mod html;
pub mod kq;
pub mod network;
pub mod output;
pub mod param;
pub mod prompt;
pub mod reduce;
pub mod registry;
pub mod report;
pub mod run;
pub mod sweep;
pub mod token_select;

use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::flow::{Method, OdeConfig};

pub use report::{Cell, Check, Report, Skipped, Table};

/// Bad input: which file, which key, and why. The CLI exits with code 2 on it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}: {key}: {reason}")]
pub struct InputError {
    pub file: String,
    pub key: String,
    pub reason: String,
}

impl InputError {
    pub fn new(file: &Path, key: impl Into<String>, reason: impl Into<String>) -> Self {
        InputError {
            file: file.display().to_string(),
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// Why a run did not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("numerical failure: {0}")]
    Flow(#[from] crate::flow::FlowError),
    #[error("{0}")]
    Other(String),
    /// Ctrl-C: what is missing, and how to finish.
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// Ctrl-C came before this scenario started.
    #[error("not started (interrupted before it began)")]
    NotStarted,
}

/// The top-level keys of a scenario file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    kind: String,
    title: String,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    solver: Option<toml::Table>,
    #[serde(default)]
    params: toml::Table,
    #[serde(default)]
    checks: toml::Table,
    #[serde(default)]
    quick: toml::Table,
    #[serde(default)]
    sweep: Option<toml::Table>,
    /// `[[check]]`: checks declared in the file ([`declared`]).
    #[serde(default)]
    check: Vec<declared::CheckSpec>,
}

/// A loaded scenario with its overrides applied (not yet validated against its kind).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file as the user named it (for messages).
    pub path: PathBuf,
    /// The file as recorded in the outputs: relative to the scenario folder when it lies inside
    /// it, so the same run started from another directory writes the same bytes.
    pub file: String,
    pub name: String,
    pub kind: String,
    pub title: String,
    pub seed: u64,
    /// `[solver]` table as given (validated when the run is prepared).
    pub solver: Option<toml::Table>,
    pub params: toml::Table,
    pub checks: toml::Table,
    pub quick_overrides: toml::Table,
    /// `[sweep]` table as given (planned by [`sweep::SweepSpec::plan`]).
    pub sweep: Option<toml::Table>,
    /// `[[check]]` entries: checks declared in the file, added to the runner's own.
    pub declared_checks: Vec<declared::CheckSpec>,
    /// Whether the `[quick]` overrides were applied.
    pub quick: bool,
    /// The `--set` overrides applied, as given.
    pub overrides: Vec<String>,
    /// `--allow-large`: run configurations beyond the size limits (see [`cost`]).
    pub allow_large: bool,
}

/// Options a user sets on the command line.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `key=value` pairs; keys are relative to `[params]` unless they start with `solver.`,
    /// `checks.`, `sweep.` or are `seed`.
    pub set: Vec<String>,
    pub seed: Option<u64>,
    pub method: Option<Method>,
    /// Apply the scenario's `[quick]` table.
    pub quick: bool,
    /// The scenario folder (`--dir`; default [`run::default_scenario_dir`]): recorded file paths
    /// are relative to it.
    pub dir: Option<PathBuf>,
    /// Lift the memory and work limits (see [`cost`]).
    pub allow_large: bool,
}

impl Scenario {
    /// Reads and parses a scenario file, then applies the overrides.
    pub fn load(path: &Path, ov: &Overrides) -> Result<Scenario, InputError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError::new(path, "(file)", format!("cannot read: {e}")))?;
        Self::parse(path, &text, ov)
    }

    /// Parses scenario text (`path` is used for messages and the name).
    pub fn parse(path: &Path, text: &str, ov: &Overrides) -> Result<Scenario, InputError> {
        let value: toml::Table = toml::from_str(text).map_err(|e| {
            let key = e.span().map_or_else(
                || "(syntax)".to_string(),
                |s| format!("(line {})", text[..s.start].lines().count().max(1)),
            );
            InputError::new(path, key, e.message().to_string())
        })?;
        for (key, v) in &value {
            reject_non_finite(path, key, v)?;
        }
        let file: ScenarioFile = deserialize_table(path, "", value)?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let root = ov.dir.clone().unwrap_or_else(run::default_scenario_dir);
        let mut sc = Scenario {
            path: path.to_path_buf(),
            file: recorded_path(path, &root),
            name,
            kind: file.kind,
            title: file.title,
            seed: file.seed,
            solver: file.solver,
            params: file.params,
            checks: file.checks,
            quick_overrides: file.quick,
            sweep: file.sweep,
            declared_checks: file.check,
            quick: false,
            overrides: Vec::new(),
            allow_large: ov.allow_large,
        };
        if ov.quick {
            sc.quick = true;
            let quick = sc.quick_overrides.clone();
            for (k, v) in quick {
                sc.assign(&k, v, "[quick]")?;
            }
        }
        for kv in &ov.set {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                InputError::new(path, kv.as_str(), "an override must look like key=value")
            })?;
            let value = parse_value(v.trim());
            reject_non_finite(path, &format!("--set {}", k.trim()), &value)?;
            sc.assign(k.trim(), value, "--set")?;
            sc.overrides.push(kv.clone());
        }
        if let Some(seed) = ov.seed {
            sc.seed = seed;
        }
        if let Some(m) = ov.method {
            sc.solver
                .get_or_insert_with(toml::Table::new)
                .insert("method".into(), toml::Value::String(m.name().into()));
        }
        Ok(sc)
    }

    /// Sets a dotted key: `seed`, `solver.x`, `checks.x`, `sweep.x`, or a key under `[params]`.
    fn assign(&mut self, key: &str, value: toml::Value, origin: &str) -> Result<(), InputError> {
        let err = |reason: String| InputError::new(&self.path, format!("{origin} {key}"), reason);
        if key.is_empty() || key.split('.').any(|p| p.trim().is_empty()) {
            return Err(err("empty key".into()));
        }
        if key == "seed" {
            self.seed = match value {
                toml::Value::Integer(i) if i >= 0 => i as u64,
                other => {
                    return Err(err(format!(
                        "seed must be a non-negative integer, got {other}"
                    )))
                }
            };
            return Ok(());
        }
        let (table, rest) = if let Some(rest) = key.strip_prefix("solver.") {
            (self.solver.get_or_insert_with(toml::Table::new), rest)
        } else if let Some(rest) = key.strip_prefix("checks.") {
            (&mut self.checks, rest)
        } else if let Some(rest) = key.strip_prefix("sweep.") {
            (self.sweep.get_or_insert_with(toml::Table::new), rest)
        } else {
            (&mut self.params, key.strip_prefix("params.").unwrap_or(key))
        };
        let mut parts: Vec<&str> = rest.split('.').collect();
        let last = parts.pop().unwrap();
        let mut t = table;
        for p in parts {
            let entry = t
                .entry(p.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            t = entry
                .as_table_mut()
                .ok_or_else(|| err(format!("`{p}` is not a table")))?;
        }
        t.insert(last.to_string(), value);
        Ok(())
    }

    /// The kind's typed parameters (unknown keys, wrong types are refused with the key path).
    pub fn typed_params<P: DeserializeOwned>(&self) -> Result<P, InputError> {
        deserialize_table(&self.path, "params", self.params.clone())
    }

    /// A table nested in `[params]` (e.g. `params.model`) as a typed struct; errors name the
    /// full key path (`params.model.tokens`).
    pub fn typed_subtable<P: DeserializeOwned>(
        &self,
        key: &str,
        table: toml::Table,
    ) -> Result<P, InputError> {
        deserialize_table(&self.path, key, table)
    }

    /// An independent random stream for one purpose (e.g. data vs init), all from the seed:
    /// the same (seed, stream) gives the same numbers on every platform. Usable before the run
    /// (a family drawing its default instance while preparing) and during it.
    pub fn rng(&self, stream: u64) -> ChaCha20Rng {
        let mut r = ChaCha20Rng::seed_from_u64(self.seed);
        r.set_stream(stream);
        r
    }

    /// The kind's typed check thresholds.
    pub fn typed_checks<C: DeserializeOwned>(&self) -> Result<C, InputError> {
        deserialize_table(&self.path, "checks", self.checks.clone())
    }

    /// The integrator configuration: the kind's default, then the file's `[solver]`.
    pub fn ode_config(&self, default: OdeConfig) -> Result<OdeConfig, InputError> {
        let mut t = toml::Table::try_from(default).expect("OdeConfig serializes");
        if let Some(s) = &self.solver {
            for (k, v) in s {
                t.insert(k.clone(), v.clone());
            }
        }
        let cfg: OdeConfig = deserialize_table(&self.path, "solver", t)?;
        match cfg.invalid_field() {
            Some((field, reason)) => Err(InputError::new(
                &self.path,
                format!("solver.{field}"),
                reason,
            )),
            None => Ok(cfg),
        }
    }

    /// Refuses any value of `(key, value)` that is not positive and finite.
    pub fn require_positive(&self, values: &[(&str, f64)]) -> Result<(), InputError> {
        match values.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            Some((key, v)) => Err(self.invalid(key, format!("must be positive, got {v}"))),
            None => Ok(()),
        }
    }

    /// The file named by parameter `key` (e.g. `data_file`): a relative path written in the
    /// scenario file is relative to that file's folder (so a scenario and its data move
    /// together); one given with `--set` is relative to the working directory.
    pub fn input_path(&self, key: &str, value: &Path) -> PathBuf {
        if value.is_absolute() {
            return value.to_path_buf();
        }
        let from_command_line = self.overrides.iter().any(|kv| {
            let k = kv.split_once('=').map_or(kv.as_str(), |(k, _)| k).trim();
            k == key || k.strip_prefix("params.") == Some(key)
        });
        match self.path.parent() {
            Some(folder) if !from_command_line => folder.join(value),
            _ => value.to_path_buf(),
        }
    }

    /// Reads the instance file named by parameter `key` as a family's layout; errors name the
    /// file, the array (or entry) and the reason, and say which parameter named the file.
    pub fn read_instance<T: crate::instance::InstanceFile>(
        &self,
        key: &str,
        value: &Path,
    ) -> Result<T, InputError> {
        let path = self.input_path(key, value);
        crate::instance::Arrays::read(&path)
            .and_then(|a| T::from_arrays(&a))
            .map_err(|e| {
                InputError::new(
                    &path,
                    e.key,
                    format!("{} (file given by params.{key})", e.reason),
                )
            })
    }

    /// An error about one parameter, for the kinds' own range checks.
    pub fn invalid(&self, key: &str, reason: impl Into<String>) -> InputError {
        InputError::new(&self.path, key, reason)
    }
}

/// `path` relative to `root` when it lies inside it, else as given.
fn recorded_path(path: &Path, root: &Path) -> String {
    let inside = match (path.canonicalize(), root.canonicalize()) {
        (Ok(p), Ok(r)) => p.strip_prefix(&r).map(Path::to_path_buf).ok(),
        _ => None,
    };
    inside
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

/// A `--set` value: a TOML literal (number, bool, array, inline table), else a bare string.
fn parse_value(s: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("value = {s}"))
        .ok()
        .and_then(|mut t| t.remove("value"))
        .unwrap_or_else(|| toml::Value::String(s.to_string()))
}

/// Refuses NaN and infinities anywhere in `v` (TOML allows `nan` and `inf`), naming the key.
fn reject_non_finite(path: &Path, key: &str, v: &toml::Value) -> Result<(), InputError> {
    match v {
        toml::Value::Float(x) if !x.is_finite() => Err(InputError::new(
            path,
            key,
            format!("non-finite number {x} is not allowed"),
        )),
        toml::Value::Array(a) => a
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| reject_non_finite(path, &format!("{key}[{i}]"), x)),
        toml::Value::Table(t) => t
            .iter()
            .try_for_each(|(k, x)| reject_non_finite(path, &format!("{key}.{k}"), x)),
        _ => Ok(()),
    }
}

/// Deserializes a table into a typed struct, naming the offending key on failure.
fn deserialize_table<T: DeserializeOwned>(
    path: &Path,
    section: &str,
    table: toml::Table,
) -> Result<T, InputError> {
    let de = toml::Value::Table(table);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.path().to_string();
        let key = match (section.is_empty(), inner == ".") {
            (true, true) => "(top level)".to_string(),
            (true, false) => inner,
            (false, true) => format!("[{section}]"),
            (false, false) => format!("{section}.{inner}"),
        };
        let mut reason = e.into_inner().to_string().trim_end().to_string();
        if let Some(hint) = misplaced_key_hint(section, &reason) {
            reason.push_str(&hint);
        }
        InputError::new(path, key, reason)
    })
}

/// For an unknown parameter that is a solver setting (`--set rtol=1e-6`): where it belongs.
fn misplaced_key_hint(section: &str, reason: &str) -> Option<String> {
    const SOLVER_KEYS: [&str; 4] = ["method", "rtol", "atol", "max_steps"];
    let field = reason.strip_prefix("unknown field `")?.split('`').next()?;
    (section == "params" && SOLVER_KEYS.contains(&field))
        .then(|| format!(" (the integrator's {field} is set with `solver.{field}`)"))
}

/// Everything a runner gets besides its typed parameters.
pub struct RunContext<'a> {
    pub scenario: &'a Scenario,
    /// The integrator configuration (kind default, file, `--solver`).
    pub ode: OdeConfig,
}

impl RunContext<'_> {
    /// An independent random stream for one purpose (e.g. data vs init), all from the seed:
    /// the same (seed, stream) gives the same numbers on every platform.
    pub fn rng(&self, stream: u64) -> ChaCha20Rng {
        self.scenario.rng(stream)
    }
    pub fn quick(&self) -> bool {
        self.scenario.quick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct P {
        d: usize,
        #[serde(default)]
        init: Init,
    }
    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Init {
        #[serde(default)]
        scale: f64,
    }

    const TEXT: &str = "kind = \"k\"\ntitle = \"t\"\nseed = 3\n[params]\nd = 4\n[quick]\nd = 2\n";

    fn load(set: &[&str], quick: bool) -> Result<Scenario, InputError> {
        let ov = Overrides {
            set: set.iter().map(|s| s.to_string()).collect(),
            quick,
            ..Default::default()
        };
        Scenario::parse(Path::new("x/demo.toml"), TEXT, &ov)
    }

    #[test]
    fn overrides_and_quick_apply_and_validate() {
        let sc = load(&["init.scale=1e-3", "seed=7"], true).unwrap();
        assert_eq!(sc.name, "demo");
        assert_eq!(sc.seed, 7);
        let p: P = sc.typed_params().unwrap();
        assert_eq!(p.d, 2);
        assert_eq!(p.init.scale, 1e-3);
    }

    #[test]
    fn bad_input_names_file_key_and_reason() {
        let e = load(&["d=-3"], false)
            .unwrap()
            .typed_params::<P>()
            .unwrap_err();
        assert_eq!(e.file, "x/demo.toml");
        assert_eq!(e.key, "params.d");
        let e = load(&["nope=1"], false)
            .unwrap()
            .typed_params::<P>()
            .unwrap_err();
        assert!(e.reason.contains("unknown field `nope`"), "{e}");
        let e = load(&["init.scale=abc"], false)
            .unwrap()
            .typed_params::<P>()
            .unwrap_err();
        assert_eq!(e.key, "params.init.scale");
        let e = load(&["init.scale=nan"], false).unwrap_err();
        assert!(e.reason.contains("non-finite"), "{e}");
        let e = load(&["d"], false).unwrap_err();
        assert!(e.reason.contains("key=value"));
        let e = Scenario::parse(
            Path::new("y.toml"),
            "kind = 1\ntitle = \"t\"",
            &Overrides::default(),
        )
        .unwrap_err();
        assert_eq!(e.key, "kind");
        let e = Scenario::parse(
            Path::new("y.toml"),
            "kind = \"k\"\ntitle = \"t\"\nbogus = 1",
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(e.reason.contains("bogus"), "{e}");
    }

    #[test]
    fn solver_config_merges_and_validates() {
        let default = OdeConfig::new(Method::Bdf, 1e-8, 1e-10);
        let sc = load(&["solver.rtol=1e-6", "solver.method=tsit45"], false).unwrap();
        let cfg = sc.ode_config(default).unwrap();
        assert_eq!(
            (cfg.method, cfg.rtol, cfg.atol),
            (Method::Tsit45, 1e-6, 1e-10)
        );
        let sc = load(&["solver.rtol=2"], false).unwrap();
        assert_eq!(sc.ode_config(default).unwrap_err().key, "solver.rtol");
        let sc = load(&["solver.method=euler"], false).unwrap();
        assert_eq!(sc.ode_config(default).unwrap_err().key, "solver.method");
    }

    #[test]
    fn rng_streams_are_reproducible_and_independent() {
        use rand::Rng;
        let sc = load(&[], false).unwrap();
        let ctx = RunContext {
            scenario: &sc,
            ode: OdeConfig::new(Method::Bdf, 1e-8, 1e-10),
        };
        let a: u64 = ctx.rng(1).random();
        let b: u64 = ctx.rng(1).random();
        let c: u64 = ctx.rng(2).random();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn input_paths_follow_the_file_or_the_command_line() {
        let sc = load(&[], false).unwrap();
        let p = Path::new("data/mine.npz");
        assert_eq!(sc.input_path("data_file", p), Path::new("x/data/mine.npz"));
        assert_eq!(
            sc.input_path("data_file", Path::new("/abs.npz")),
            Path::new("/abs.npz")
        );
        let sc = load(&["data_file=data/mine.npz"], false).unwrap();
        assert_eq!(sc.input_path("data_file", p), p);
        assert_eq!(sc.input_path("init_file", p), Path::new("x/data/mine.npz"));
        let sc = load(&["params.init_file=w.json"], false).unwrap();
        assert_eq!(sc.input_path("init_file", p), p);
    }
}

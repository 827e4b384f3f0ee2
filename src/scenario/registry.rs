//! The registry of scenario kinds: the map from a scenario file's `kind` to the runner that
//! validates its parameters and produces its [`Report`].

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::cost::Cost;
use super::reduce::SweepRuns;
use super::sweep::SweepSpec;
use super::{InputError, Report, RunContext, RunError, Scenario};
use crate::flow::OdeConfig;

pub type RunFn = Box<dyn FnOnce(&RunContext) -> Result<Report, RunError> + Send>;

/// A validated scenario, ready to run.
pub struct Prepared {
    /// The typed parameters and thresholds after defaults and overrides (for params.json).
    pub params: serde_json::Value,
    pub checks: serde_json::Value,
    pub ode: OdeConfig,
    /// The estimated memory and work (already held to the limits).
    pub cost: Cost,
    run: RunFn,
}

impl Prepared {
    /// A prepared run of a kind that implements [`ScenarioKind`] itself.
    pub fn new(
        params: serde_json::Value,
        checks: serde_json::Value,
        ode: OdeConfig,
        cost: Cost,
        run: RunFn,
    ) -> Self {
        Prepared {
            params,
            checks,
            ode,
            cost,
            run,
        }
    }
    pub fn run(self, ctx: &RunContext) -> Result<Report, RunError> {
        (self.run)(ctx)
    }
}

/// A scenario kind as the CLI sees it.
pub trait ScenarioKind: Sync {
    /// Registered name, e.g. `histogram.thm2-trajectory`.
    fn name(&self) -> &'static str;
    /// Paper (seed) number, e.g. `000`.
    fn paper(&self) -> &'static str;
    /// One line: what it reproduces or verifies.
    fn summary(&self) -> &'static str;
    /// Patterns of the scalar derived quantities a run records (see [`Kind::quantities`]).
    fn quantities(&self) -> &'static [&'static str];
    /// Parses and validates the scenario's parameters and thresholds.
    fn prepare(&self, sc: &Scenario) -> Result<Prepared, InputError>;
    /// Checks a `[sweep]` against what the kind's reduction needs (nothing by default).
    fn validate_sweep(&self, _sc: &Scenario, _spec: &SweepSpec) -> Result<(), InputError> {
        Ok(())
    }
    /// The cross-run analysis of a complete sweep (see [`super::reduce`]), from the base
    /// scenario's params and thresholds as recorded in `sweep.json`; `None` for kinds without.
    fn reduce(
        &self,
        _params: &serde_json::Value,
        _checks: &serde_json::Value,
        _runs: &SweepRuns,
    ) -> Option<Result<Report, String>> {
        None
    }
}

/// A kind defined by typed parameters `P`, thresholds `C`, a validator and a runner.
pub struct Kind<P, C> {
    pub name: &'static str,
    pub paper: &'static str,
    pub summary: &'static str,
    /// Default integrator when the file has no `[solver]`.
    pub solver: OdeConfig,
    /// Range and consistency checks beyond the types (negative sizes, impossible combinations).
    pub validate: fn(&P, &C, &Scenario) -> Result<(), InputError>,
    /// The memory and work of a validated configuration (see [`super::cost`]); it depends on the
    /// parameters and the integrator, never on the thresholds.
    pub cost: fn(&P, &RunContext) -> Cost,
    /// The scalar derived quantities a run records, as patterns (`*` matches any text, e.g.
    /// `stage_*.err`): what a sweep check's `quantity` or a band label's `{quantity:statistic}`
    /// may name, so a misspelt one is refused before anything runs. `tests/determinism.rs`
    /// holds every run of every kind to its list.
    pub quantities: &'static [&'static str],
    pub run: fn(&P, &C, &RunContext) -> Result<Report, RunError>,
}

impl<P, C> ScenarioKind for Kind<P, C>
where
    P: DeserializeOwned + Serialize + Send + 'static,
    C: DeserializeOwned + Serialize + Send + 'static,
{
    fn name(&self) -> &'static str {
        self.name
    }
    fn paper(&self) -> &'static str {
        self.paper
    }
    fn summary(&self) -> &'static str {
        self.summary
    }
    fn quantities(&self) -> &'static [&'static str] {
        self.quantities
    }
    fn prepare(&self, sc: &Scenario) -> Result<Prepared, InputError> {
        let p: P = sc.typed_params()?;
        let c: C = sc.typed_checks()?;
        let ode = sc.ode_config(self.solver)?;
        // files are sized from their headers before `validate` reads them
        let files = super::cost::instance_files(sc);
        files.check(sc)?;
        (self.validate)(&p, &c, sc)?;
        let cost = (self.cost)(&p, &RunContext { scenario: sc, ode }).and(files);
        cost.check(sc)?;
        let run = self.run;
        Ok(Prepared {
            params: serde_json::to_value(&p).unwrap_or_default(),
            checks: serde_json::to_value(&c).unwrap_or_default(),
            ode,
            cost,
            run: Box::new(move |ctx| run(&p, &c, ctx)),
        })
    }
}

/// The scenario kinds a command line (or a program) knows: the map from a scenario file's
/// `kind` to its runner. [`Registry::builtin`] holds the five papers' kinds and every model
/// family's generic flow; a downstream crate adds its own with [`Registry::with`] and hands the
/// registry to [`crate::cli::main_with`] (or to [`super::run::load_and_validate_with`]).
///
/// ```
/// use attnflow::scenario::registry::Registry;
///
/// let reg = Registry::builtin();
/// let kind = reg.find("histogram.thm2-trajectory").expect("a built-in kind");
/// assert_eq!(kind.paper(), "000");
/// assert!(reg.find("no.such-kind").is_none());
/// ```
#[derive(Clone)]
pub struct Registry {
    kinds: Vec<&'static dyn ScenarioKind>,
}

impl Registry {
    /// No kinds at all (a program that runs only its own).
    pub fn empty() -> Self {
        Registry { kinds: Vec::new() }
    }

    /// The crate's own kinds, in the order of the README's tables (which `list` and the report
    /// follow).
    pub fn builtin() -> Self {
        let mut kinds: Vec<&'static dyn ScenarioKind> = Vec::new();
        kinds.extend(crate::scenario::histogram::kinds());
        kinds.extend(crate::scenario::diagonal::kinds());
        kinds.extend(crate::scenario::token_select::kinds());
        kinds.extend(crate::scenario::prompt::kinds());
        kinds.extend(crate::scenario::kq::kinds());
        kinds.extend(crate::scenario::flow::kinds());
        kinds.extend(crate::scenario::network::kinds());
        Registry { kinds }
    }

    /// This registry and `kind`; a kind of the same name is replaced in place (so a program can
    /// swap a built-in runner for its own).
    pub fn with(mut self, kind: &'static dyn ScenarioKind) -> Self {
        match self.kinds.iter().position(|k| k.name() == kind.name()) {
            Some(i) => self.kinds[i] = kind,
            None => self.kinds.push(kind),
        }
        self
    }

    /// Every registered kind, in registration order.
    pub fn kinds(&self) -> &[&'static dyn ScenarioKind] {
        &self.kinds
    }

    /// The kind registered under `name`.
    pub fn find(&self, name: &str) -> Option<&'static dyn ScenarioKind> {
        self.kinds.iter().copied().find(|k| k.name() == name)
    }

    /// The registered names, for messages that list what is known.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|k| k.name()).collect()
    }
}

impl Default for Registry {
    /// [`Registry::builtin`].
    fn default() -> Self {
        Self::builtin()
    }
}

/// Kinds whose outputs include their solvers' wall times (work-precision diagrams, stiffness
/// reports): `run --all` runs them alone, after the others, so the timings are not shared with
/// concurrent work.
pub fn reports_wall_time(kind: &str) -> bool {
    matches!(
        kind,
        "histogram.work-precision" | "histogram.stiffness-report"
    )
}

/// A validator for kinds with nothing to check beyond the types.
pub fn no_validation<P, C>(_: &P, _: &C, _: &Scenario) -> Result<(), InputError> {
    Ok(())
}

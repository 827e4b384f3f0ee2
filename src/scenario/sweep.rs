//! Sweeps: a scenario file may declare a `[sweep]` — a grid over parameters and/or a list of
//! seeds. Every point of the sweep is an ordinary run of the scenario's kind with the grid values
//! assigned (as `--set` would) and its own seed; points are numbered in a fixed order (grid in
//! key order, seeds innermost), so a point's result depends only on its number, never on how many
//! threads, shards or restarts produced it.
//!
//! ```toml
//! [sweep]
//! seeds = 10                       # seeds seed, seed+1, …, seed+9 (or a list: [0, 4, 7])
//! grid = { sigma_p = [0.1, 1.0] }  # parameter key (as for --set) → values; Cartesian product
//! [sweep.band]                     # the figure: mean with min–max band per grid point
//! x = "iteration"                  # columns of the runs' series.csv (or of `table`)
//! y = "loss"
//! log_y = true
//! label = "σ_p = {sigma_p}, R̄ = {R_student:mean}"   # {grid key} or {quantity:statistic}
//! [[sweep.checks]]                 # checks across runs, on the runs' derived quantities
//!                                  # (and on each check's measured value, as "check: <id>")
//! id = "final-loss.sigma-p-0-1"
//! name = "median final loss at σ_p = 0.1"
//! quantity = "final_loss"
//! statistic = "median"             # mean | median | min | max | geomean
//! where = { sigma_p = 0.1 }        # restrict to one grid point (default: all runs)
//! at_most = 1e-4                   # and/or at_least
//! ```
//!
//! Output (`<out>/<name>/`): `sweep.json` (the plan: every point's values and seed),
//! `runs/<id>/` (each point's ordinary outputs, written atomically), `sweep.csv` (one row per
//! run), `aggregate.csv` (mean, median, min, max of every quantity per grid point), `checks.json`
//! (every run passes its own checks, plus the sweep's checks once all points are present, and
//! the list of missing points) and `figure.svg` (the bands). A kind with a reduction (see
//! [`super::reduce`]) adds its cross-run checks to `checks.json`, writes its tables
//! (`series.csv`, …) and `derived.json`, and its figure becomes `figure.svg` (the bands, if any,
//! move to `bands.svg`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::declared::CheckSpec;
use super::output::{csv_text, write_atomic};
use super::reduce::{SweepRun, SweepRuns};
use super::registry::ScenarioKind;
use super::report::{Cell, Check, Report, Table};
use super::{InputError, Scenario};
use crate::plot::{Band, Figure, LegendPosition, LinePanel, Series};

/// The `[sweep]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// A number of seeds counted up from the scenario's seed, or an explicit list.
    #[serde(default)]
    pub seeds: Option<Seeds>,
    /// Parameter key (as for `--set`) → the values it takes.
    #[serde(default)]
    pub grid: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    pub band: Option<BandSpec>,
    #[serde(default)]
    pub checks: Vec<CheckSpec>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Seeds {
    Count(i64),
    List(Vec<i64>),
}

/// The band figure drawn from the runs' tables.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BandSpec {
    /// File stem of the runs' table (default `series`).
    #[serde(default = "series_stem")]
    pub table: String,
    pub x: String,
    pub y: String,
    #[serde(default)]
    pub log_x: bool,
    #[serde(default)]
    pub log_y: bool,
    #[serde(default)]
    pub x_label: Option<String>,
    #[serde(default)]
    pub y_label: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// Legend of each grid point; `{key}` is a grid value, `{quantity:statistic}` an aggregate.
    #[serde(default)]
    pub label: Option<String>,
    /// Where the legend goes, so it can sit where the curves are not.
    #[serde(default)]
    pub legend: LegendCorner,
}

/// `[sweep.band] legend`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LegendCorner {
    #[default]
    UpperRight,
    UpperLeft,
    LowerRight,
    LowerLeft,
}

impl From<LegendCorner> for LegendPosition {
    fn from(c: LegendCorner) -> Self {
        match c {
            LegendCorner::UpperRight => LegendPosition::UpperRight,
            LegendCorner::UpperLeft => LegendPosition::UpperLeft,
            LegendCorner::LowerRight => LegendPosition::LowerRight,
            LegendCorner::LowerLeft => LegendPosition::LowerLeft,
        }
    }
}

fn series_stem() -> String {
    "series".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Statistic {
    Mean,
    Median,
    Min,
    Max,
    Geomean,
}

impl Statistic {
    pub(super) fn name(self) -> &'static str {
        match self {
            Statistic::Mean => "mean",
            Statistic::Median => "median",
            Statistic::Min => "min",
            Statistic::Max => "max",
            Statistic::Geomean => "geomean",
        }
    }

    fn parse(s: &str) -> Option<Statistic> {
        [
            Statistic::Mean,
            Statistic::Median,
            Statistic::Min,
            Statistic::Max,
            Statistic::Geomean,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }

    /// The statistic of `v` over the runs: NaN if empty or if any run's value is NaN (see
    /// [`crate::stats`]), and the geomean of negative values is NaN, so a check on it fails
    /// rather than passing on garbage.
    pub(super) fn of(self, v: &[f64]) -> f64 {
        match self {
            Statistic::Mean => crate::stats::mean(v),
            Statistic::Min => crate::stats::min(v),
            Statistic::Max => crate::stats::max(v),
            Statistic::Geomean => crate::stats::geomean(v),
            Statistic::Median => crate::stats::median(v),
        }
    }
}

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Position in the fixed order; names the folder `runs/<id>`.
    pub index: usize,
    /// Which grid point (runs of one group differ only in the seed).
    pub group: usize,
    pub values: BTreeMap<String, toml::Value>,
    pub seed: u64,
}

impl Point {
    pub fn id(&self) -> String {
        format!("{:04}", self.index)
    }
}

impl SweepSpec {
    /// Parses and checks the `[sweep]` table of `sc`, returning the spec and its points.
    pub fn plan(sc: &Scenario, table: &toml::Table) -> Result<(SweepSpec, Vec<Point>), InputError> {
        let spec: SweepSpec = super::deserialize_table(&sc.path, "sweep", table.clone())?;
        super::cost::check_sweep_points(sc, &spec.factors())?;
        let seeds: Vec<u64> = match &spec.seeds {
            None => vec![sc.seed],
            Some(Seeds::Count(n)) if *n >= 1 => (0..*n as u64).map(|k| sc.seed + k).collect(),
            Some(Seeds::Count(n)) => {
                return Err(sc.invalid("sweep.seeds", format!("must be ≥ 1, got {n}")))
            }
            Some(Seeds::List(v)) if v.is_empty() => {
                return Err(sc.invalid("sweep.seeds", "the seed list is empty"))
            }
            Some(Seeds::List(v)) => v
                .iter()
                .map(|&s| {
                    u64::try_from(s).map_err(|_| {
                        sc.invalid("sweep.seeds", format!("seeds must be ≥ 0, got {s}"))
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        for (k, vals) in &spec.grid {
            if vals.is_empty() {
                return Err(sc.invalid(&format!("sweep.grid.{k}"), "no values"));
            }
            if k == "seed" {
                return Err(sc.invalid("sweep.grid.seed", "sweep seeds with `sweep.seeds`"));
            }
        }
        if spec.grid.is_empty() && seeds.len() < 2 {
            return Err(sc.invalid("sweep", "a sweep needs a grid or at least two seeds"));
        }
        let mut points = Vec::new();
        let groups = cartesian(&spec.grid);
        for (g, values) in groups.into_iter().enumerate() {
            for &seed in &seeds {
                points.push(Point {
                    index: points.len(),
                    group: g,
                    values: values.clone(),
                    seed,
                });
            }
        }
        Ok((spec, points))
    }

    /// The sweep's keys and how many values each takes (`sweep.seeds`, `sweep.grid.KEY`): the
    /// number of points is their product.
    pub fn factors(&self) -> Vec<(String, f64)> {
        let seeds = match &self.seeds {
            None => 1.0,
            Some(Seeds::Count(n)) => *n as f64,
            Some(Seeds::List(v)) => v.len() as f64,
        };
        std::iter::once(("sweep.seeds".to_string(), seeds))
            .chain(
                self.grid
                    .iter()
                    .map(|(k, v)| (format!("sweep.grid.{k}"), v.len() as f64)),
            )
            .collect()
    }

    /// Checks that each `[[sweep.checks]]` entry names a quantity the kind records and selects
    /// grid points that exist, and that the band label names only grid keys and recorded
    /// quantities, so that a misspelt name is refused before anything runs. `quantities` are the
    /// kind's patterns ([`super::registry::Kind::quantities`]). A check's measured value
    /// (`check: <id>`) is accepted by its prefix: check ids are known only once a run has
    /// made them. Called after every point has been validated by its kind, so that a bad grid
    /// value is reported as such first.
    pub fn validate_checks(&self, sc: &Scenario, quantities: &[&str]) -> Result<(), InputError> {
        let spec = self;
        for (i, c) in spec.checks.iter().enumerate() {
            let key = format!("sweep.checks[{i}]");
            if c.at_most.is_none() && c.at_least.is_none() {
                return Err(sc.invalid(&key, "give at_most and/or at_least"));
            }
            if c.statistic.is_none() {
                return Err(sc.invalid(
                    &format!("{key}.statistic"),
                    "a check across runs needs a statistic (mean, median, min, max, geomean)",
                ));
            }
            known_quantity(sc, &format!("{key}.quantity"), &c.quantity, quantities)?;
            for at in std::iter::once(&c.at).chain(c.ratio_to.iter()) {
                for (k, v) in at {
                    match spec.grid.get(k) {
                        Some(vals) if vals.contains(v) => {}
                        Some(_) => {
                            return Err(sc.invalid(&key, format!("{k} = {v} is not a grid value")))
                        }
                        None => return Err(sc.invalid(&key, format!("`{k}` is not a grid key"))),
                    }
                }
            }
        }
        if let Some(label) = spec.band.as_ref().and_then(|b| b.label.as_deref()) {
            const KEY: &str = "sweep.band.label";
            for field in label_fields(label) {
                match field.split_once(':') {
                    Some((q, stat)) => {
                        if Statistic::parse(stat).is_none() {
                            return Err(sc.invalid(
                                KEY,
                                format!(
                                    "`{{{field}}}`: `{stat}` is not a statistic (mean, median, \
                                     min, max, geomean)"
                                ),
                            ));
                        }
                        known_quantity(sc, KEY, q, quantities)?;
                    }
                    None if spec.grid.contains_key(field) => {}
                    None => {
                        return Err(sc.invalid(
                            KEY,
                            format!(
                                "`{{{field}}}` is not a grid key (give {{key}} for a grid \
                                 value or {{quantity:statistic}} for an aggregate)"
                            ),
                        ))
                    }
                }
            }
        }
        Ok(())
    }
}

/// Refuses `quantity` unless one of the kind's `patterns` (`*` = any text) matches it or it is
/// a check's measured value (`check: <id>`).
pub(super) fn known_quantity(
    sc: &Scenario,
    key: &str,
    quantity: &str,
    patterns: &[&str],
) -> Result<(), InputError> {
    if quantity.starts_with("check: ") || patterns.iter().any(|p| wildcard_match(p, quantity)) {
        return Ok(());
    }
    let recorded = if patterns.is_empty() {
        "none".to_string()
    } else {
        patterns.join(", ")
    };
    Err(sc.invalid(
        key,
        format!(
            "`{quantity}` is not a quantity this kind records (its runs record: {recorded}; \
             `*` stands for a data set, method or index; a check's measured value is \
             `check: <check id>`)"
        ),
    ))
}

/// Whether `text` matches `pattern`, where `*` matches any (possibly empty) text.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The `{…}` fields of a band label, in order.
fn label_fields(template: &str) -> Vec<&str> {
    let mut fields = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        fields.push(&rest[open + 1..open + close]);
        rest = &rest[open + close + 1..];
    }
    fields
}

/// Every combination of the grid's values, keys in order, the last key varying fastest.
fn cartesian(grid: &BTreeMap<String, Vec<toml::Value>>) -> Vec<BTreeMap<String, toml::Value>> {
    let mut out = vec![BTreeMap::new()];
    for (k, vals) in grid {
        out = out
            .into_iter()
            .flat_map(|m| {
                vals.iter().map(move |v| {
                    let mut m = m.clone();
                    m.insert(k.clone(), v.clone());
                    m
                })
            })
            .collect();
    }
    out
}

/// `--shard K/N`: the K-th (1-based) of N interleaved slices of the points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    pub fn parse(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("--shard must look like K/N, got `{s}`"))?;
        let k: usize = k
            .trim()
            .parse()
            .map_err(|_| format!("bad shard index `{k}`"))?;
        let n: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("bad shard count `{n}`"))?;
        if n == 0 || k == 0 || k > n {
            return Err(format!("--shard K/N needs 1 ≤ K ≤ N, got {k}/{n}"));
        }
        Ok(Shard { index: k, count: n })
    }

    pub fn contains(&self, p: &Point) -> bool {
        p.index % self.count == self.index - 1
    }
}

/// `sweep.json`: what a sweep is, so that shards can be merged and resumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub scenario: String,
    pub kind: String,
    pub title: String,
    pub file: String,
    pub crate_version: String,
    pub seed: u64,
    pub quick: bool,
    pub overrides: Vec<String>,
    /// The integrator and tolerances of every run (a grid over `solver.*` changes them per run;
    /// each run's params.json has its own).
    pub solver: crate::flow::OdeConfig,
    /// The base scenario's parameters and check thresholds (what a reduction reads).
    pub params: serde_json::Value,
    pub checks: serde_json::Value,
    pub spec: SweepSpec,
    pub points: Vec<Point>,
}

impl Plan {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("sweep.json")
    }

    pub fn read(dir: &Path) -> Result<Plan, String> {
        let p = Self::path(dir);
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    }

    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())? + "\n";
        write_atomic(&Self::path(dir), text.as_bytes())
    }

    /// Whether two plans describe the same sweep (the scenario file may sit at another path).
    pub fn same_sweep(&self, other: &Plan) -> bool {
        let strip = |p: &Plan| Plan {
            file: String::new(),
            ..p.clone()
        };
        strip(self) == strip(other)
    }

    /// Whether run `p` is on disk (a run folder appears only when complete).
    pub fn is_done(dir: &Path, p: &Point) -> bool {
        dir.join("runs").join(p.id()).join("checks.json").is_file()
    }
}

/// One completed run as read back from disk.
struct RunRecord {
    point: Point,
    checks: usize,
    passed: usize,
    quantities: BTreeMap<String, f64>,
}

fn read_run(dir: &Path, p: &Point) -> Result<Option<RunRecord>, String> {
    if !Plan::is_done(dir, p) {
        return Ok(None);
    }
    let run = dir.join("runs").join(p.id());
    let read = |f: &str| -> Result<serde_json::Value, String> {
        let path = run.join(f);
        let t = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&t).map_err(|e| format!("{}: {e}", path.display()))
    };
    let checks = read("checks.json")?;
    let list = checks["checks"].as_array().cloned().unwrap_or_default();
    let passed = list.iter().filter(|c| c["pass"] == true).count();
    let params = read("params.json")?;
    // NaN is written as null: read it back as NaN, so that the run's value reaches the sweep
    // statistic (skipping it would let a sweep check pass on the other runs)
    let number = |v: &serde_json::Value| {
        if v.is_null() {
            Some(f64::NAN)
        } else {
            v.as_f64()
        }
    };
    // the run's scalar derived quantities, and every check's measured value
    let mut quantities: BTreeMap<String, f64> = params["derived"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| number(v).map(|x| (k.clone(), x)))
                .collect()
        })
        .unwrap_or_default();
    for c in &list {
        if let (Some(id), Some(x)) = (c["id"].as_str(), number(&c["measured"])) {
            quantities.insert(format!("check: {id}"), x);
        }
    }
    Ok(Some(RunRecord {
        point: p.clone(),
        checks: list.len(),
        passed,
        quantities,
    }))
}

/// What aggregation found.
pub struct Aggregate {
    pub checks: Vec<Check>,
    pub missing: Vec<String>,
    pub runs: usize,
}

/// Reads every completed run under `dir` and writes `sweep.csv`, `aggregate.csv`,
/// `checks.json` and `figure.svg`; `kind` (the plan's) reduces a complete sweep.
pub fn aggregate(dir: &Path, kind: &dyn ScenarioKind) -> Result<Aggregate, String> {
    let plan = Plan::read(dir)?;
    let mut records = Vec::new();
    let mut missing = Vec::new();
    for p in &plan.points {
        match read_run(dir, p)? {
            Some(r) => records.push(r),
            None => missing.push(p.id()),
        }
    }
    let keys: Vec<String> = plan.spec.grid.keys().cloned().collect();
    let quantities: Vec<String> = {
        let mut q: Vec<String> = records
            .iter()
            .flat_map(|r| r.quantities.keys().cloned())
            .collect();
        q.sort();
        q.dedup();
        q
    };
    write_atomic(
        &dir.join("sweep.csv"),
        csv_text(&runs_table(&records, &keys, &quantities))?.as_bytes(),
    )?;
    let groups = group_indices(&plan);
    write_atomic(
        &dir.join("aggregate.csv"),
        csv_text(&aggregate_table(&groups, &records, &keys, &quantities))?.as_bytes(),
    )?;

    let failing = records.iter().filter(|r| r.passed < r.checks).count();
    let mut checks = vec![Check::at_most(
        "runs-failing-their-own-checks",
        "runs failing their own checks",
        failing as f64,
        0.0,
    )
    .note(format!("{} runs present", records.len()))];
    let mut reduction = None;
    if missing.is_empty() {
        for c in &plan.spec.checks {
            checks.push(sweep_check(c, &records)?);
        }
        reduction = reduce(dir, kind, &plan, &records)?;
    }
    if let Some(rep) = &reduction {
        checks.extend(rep.checks.iter().cloned());
    }
    let all_pass = checks.iter().all(|c| c.pass);
    let doc = json!({
        "scenario": plan.scenario,
        "all_pass": all_pass && missing.is_empty(),
        "complete": missing.is_empty(),
        "runs": records.len(),
        "missing": missing,
        "checks": checks,
    });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n";
    write_atomic(&dir.join("checks.json"), text.as_bytes())?;
    let mut figures: Vec<(String, Figure)> = Vec::new();
    if let Some(rep) = reduction {
        write_reduction_tables(dir, &rep)?;
        figures.extend(rep.figure.map(|f| ("figure".to_string(), f)));
        figures.extend(rep.figures);
    }
    if let Some(band) = &plan.spec.band {
        // the reduction's figure, if any, is the sweep's figure; the bands then go beside it
        let stem = if figures.is_empty() {
            "figure"
        } else {
            "bands"
        };
        figures.push((
            stem.into(),
            band_figure(dir, &plan, band, &groups, &records)?,
        ));
    }
    for (stem, fig) in &figures {
        let svg = crate::plot::render_svg(fig).map_err(|e| format!("drawing {stem}.svg: {e}"))?;
        write_atomic(&dir.join(format!("{stem}.svg")), svg.as_bytes())?;
    }
    Ok(Aggregate {
        checks,
        missing,
        runs: records.len(),
    })
}

/// The kind's reduction of a complete sweep, if the kind has one.
fn reduce(
    dir: &Path,
    kind: &dyn ScenarioKind,
    plan: &Plan,
    records: &[RunRecord],
) -> Result<Option<Report>, String> {
    let runs = SweepRuns {
        grid: plan.spec.grid.clone(),
        runs: records
            .iter()
            .map(|r| SweepRun {
                point: r.point.clone(),
                dir: dir.join("runs").join(r.point.id()),
                quantities: r.quantities.clone(),
            })
            .collect(),
    };
    kind.reduce(&plan.params, &plan.checks, &runs)
        .transpose()
        .map_err(|e| format!("{}: reduction of the sweep: {e}", dir.display()))
}

/// The reduction's tables (`series.csv` unless empty, and its named tables) and derived values
/// (`derived.json`).
fn write_reduction_tables(dir: &Path, rep: &Report) -> Result<(), String> {
    let series = (!rep.series.is_empty()).then(|| ("series".to_string(), rep.series.clone()));
    for (stem, table) in series.iter().chain(rep.tables.iter()) {
        write_atomic(
            &dir.join(format!("{stem}.csv")),
            csv_text(table)?.as_bytes(),
        )?;
    }
    if !rep.derived.is_empty() {
        let text = serde_json::to_string_pretty(&rep.derived).map_err(|e| e.to_string())? + "\n";
        write_atomic(&dir.join("derived.json"), text.as_bytes())?;
    }
    Ok(())
}

/// The grid values of each group, in group order.
fn group_indices(plan: &Plan) -> Vec<BTreeMap<String, toml::Value>> {
    let mut groups: Vec<BTreeMap<String, toml::Value>> = Vec::new();
    for p in &plan.points {
        if p.group == groups.len() {
            groups.push(p.values.clone());
        }
    }
    groups
}

fn value_cell(v: &toml::Value) -> Cell {
    match v {
        toml::Value::Float(x) => Cell::Num(*x),
        toml::Value::Integer(i) => Cell::Num(*i as f64),
        toml::Value::String(s) => Cell::Text(s.clone()),
        other => Cell::Text(other.to_string()),
    }
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn runs_table(records: &[RunRecord], keys: &[String], quantities: &[String]) -> Table {
    let mut headers: Vec<&str> = vec!["id", "seed"];
    headers.extend(keys.iter().map(String::as_str));
    headers.extend(["checks", "passed"]);
    headers.extend(quantities.iter().map(String::as_str));
    let mut t = Table::new(&headers);
    for r in records {
        let mut row: Vec<Cell> = vec![r.point.id().into(), r.point.seed.to_string().into()];
        row.extend(keys.iter().map(|k| value_cell(&r.point.values[k])));
        row.extend([r.checks.to_string().into(), r.passed.to_string().into()]);
        row.extend(
            quantities
                .iter()
                .map(|q| Cell::Num(r.quantities.get(q).copied().unwrap_or(f64::NAN))),
        );
        t.push(row);
    }
    t
}

const TABLE_STATS: [Statistic; 4] = [
    Statistic::Mean,
    Statistic::Median,
    Statistic::Min,
    Statistic::Max,
];

fn aggregate_table(
    groups: &[BTreeMap<String, toml::Value>],
    records: &[RunRecord],
    keys: &[String],
    quantities: &[String],
) -> Table {
    let mut headers: Vec<String> = vec!["group".into()];
    headers.extend(keys.iter().cloned());
    headers.push("runs".into());
    for q in quantities {
        headers.extend(TABLE_STATS.iter().map(|s| format!("{q}_{}", s.name())));
    }
    let mut t = Table {
        headers,
        rows: Vec::new(),
    };
    for (g, values) in groups.iter().enumerate() {
        let members: Vec<&RunRecord> = records.iter().filter(|r| r.point.group == g).collect();
        let mut row: Vec<Cell> = vec![g.to_string().into()];
        row.extend(keys.iter().map(|k| value_cell(&values[k])));
        row.push(members.len().to_string().into());
        for q in quantities {
            let v: Vec<f64> = members
                .iter()
                .filter_map(|r| r.quantities.get(q).copied())
                .collect();
            row.extend(TABLE_STATS.iter().map(|s| Cell::Num(s.of(&v))));
        }
        t.push(row);
    }
    t
}

/// The values of `quantity` over the runs matching `at`.
fn selected(records: &[RunRecord], quantity: &str, at: &BTreeMap<String, toml::Value>) -> Vec<f64> {
    records
        .iter()
        .filter(|r| at.iter().all(|(k, v)| r.point.values.get(k) == Some(v)))
        .filter_map(|r| r.quantities.get(quantity).copied())
        .collect()
}

fn describe_at(at: &BTreeMap<String, toml::Value>) -> String {
    at.iter()
        .map(|(k, v)| format!("{k} = {}", value_text(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn sweep_check(c: &CheckSpec, records: &[RunRecord]) -> Result<Check, String> {
    let statistic = c.statistic.expect("required when the sweep is planned");
    if !records
        .iter()
        .any(|r| r.quantities.contains_key(&c.quantity))
    {
        return Err(format!(
            "sweep check `{}`: no run reports the quantity `{}`",
            c.name, c.quantity
        ));
    }
    let mut measured = statistic.of(&selected(records, &c.quantity, &c.at));
    let mut what = format!("{} of {}", statistic.name(), c.quantity);
    if !c.at.is_empty() {
        what += &format!(" at {}", describe_at(&c.at));
    }
    if let Some(base) = &c.ratio_to {
        measured /= statistic.of(&selected(records, &c.quantity, base));
        what += &format!(", divided by its value at {}", describe_at(base));
    }
    Ok(c.check_on(measured, &what))
}

/// Fills a legend template: `{key}` → grid value, `{quantity:statistic}` → aggregate.
fn fill_label(
    template: &str,
    values: &BTreeMap<String, toml::Value>,
    members: &[&RunRecord],
) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let field = &rest[open + 1..open + close];
        let text = match field.split_once(':') {
            Some((q, s)) => Statistic::parse(s).map(|stat| {
                let v: Vec<f64> = members
                    .iter()
                    .filter_map(|r| r.quantities.get(q).copied())
                    .collect();
                legend_number(stat.of(&v))
            }),
            None => values.get(field).map(value_text),
        };
        out.push_str(&text.unwrap_or_else(|| format!("{{{field}}}")));
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// Reads columns `x`, `y` of a run's table.
fn read_columns(path: &Path, x: &str, y: &str) -> Result<(Vec<f64>, Vec<f64>), String> {
    let mut r = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let headers = r.headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("{}: no column `{name}`", path.display()))
    };
    let (ix, iy) = (col(x)?, col(y)?);
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for rec in r.records() {
        let rec = rec.map_err(|e| e.to_string())?;
        let num = |i: usize| {
            rec.get(i)
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        xs.push(num(ix));
        ys.push(num(iy));
    }
    Ok((xs, ys))
}

/// Three significant digits: legends are read, not parsed (the CSVs keep full precision).
fn legend_number(x: f64) -> String {
    if x != 0.0 && x.is_finite() && (x.abs() >= 1e4 || x.abs() < 1e-2) {
        format!("{x:.2e}")
    } else {
        let digits = if x == 0.0 {
            0
        } else {
            (2 - x.abs().log10().floor() as i32).max(0)
        };
        let text = format!("{x:.*}", digits as usize);
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    }
}

fn band_figure(
    dir: &Path,
    plan: &Plan,
    band: &BandSpec,
    groups: &[BTreeMap<String, toml::Value>],
    records: &[RunRecord],
) -> Result<Figure, String> {
    let title = band.title.clone().unwrap_or_else(|| plan.title.clone());
    let mut panel = LinePanel::new(
        "",
        band.x_label.clone().unwrap_or_else(|| band.x.clone()),
        band.y_label.clone().unwrap_or_else(|| band.y.clone()),
    )
    .legend(band.legend.into());
    if band.log_x {
        panel = panel.log_x();
    }
    if band.log_y {
        panel = panel.log_y();
    }
    let mut banded = false;
    for (g, values) in groups.iter().enumerate() {
        let members: Vec<&RunRecord> = records.iter().filter(|r| r.point.group == g).collect();
        let mut curves: Vec<Vec<f64>> = Vec::new();
        let mut grid: Option<Vec<f64>> = None;
        for r in &members {
            let path = dir
                .join("runs")
                .join(r.point.id())
                .join(format!("{}.csv", band.table));
            let (x, y) = read_columns(&path, &band.x, &band.y)?;
            match &grid {
                Some(g0) if g0 != &x => {
                    return Err(format!(
                        "{}: column `{}` differs between runs of one grid point, no band",
                        path.display(),
                        band.x
                    ))
                }
                Some(_) => {}
                None => grid = Some(x),
            }
            curves.push(y);
        }
        let Some(x) = grid else { continue };
        let at = |k: usize, s: Statistic| s.of(&curves.iter().map(|c| c[k]).collect::<Vec<_>>());
        let mean: Vec<f64> = (0..x.len()).map(|k| at(k, Statistic::Mean)).collect();
        let lo: Vec<f64> = (0..x.len()).map(|k| at(k, Statistic::Min)).collect();
        let hi: Vec<f64> = (0..x.len()).map(|k| at(k, Statistic::Max)).collect();
        let label = match &band.label {
            Some(t) => fill_label(t, values, &members),
            None => describe_at(values),
        };
        if members.len() > 1 {
            // one legend entry for all bands: they mean the same thing
            let band_label = if banded {
                String::new()
            } else {
                format!("lines: mean of {} seeds; bands: min–max", members.len())
            };
            banded = true;
            panel = panel.band(Band::new(band_label, x.clone(), lo, hi).color(g));
        }
        panel = panel.series(Series::numerics(label, x, mean).color(g));
    }
    Ok(Figure::single(panel).title(title))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Overrides;

    fn scenario(sweep: &str) -> Result<(SweepSpec, Vec<Point>), InputError> {
        let text = format!("kind = \"k\"\ntitle = \"t\"\nseed = 5\n[params]\na = 1\n{sweep}");
        let sc = Scenario::parse(Path::new("x/s.toml"), &text, &Overrides::default())?;
        let (spec, points) = SweepSpec::plan(&sc, sc.sweep.as_ref().expect("has a sweep"))?;
        spec.validate_checks(&sc, &["q", "stage_*.err"])?;
        Ok((spec, points))
    }

    #[test]
    fn points_are_ordered_grid_then_seeds() {
        let (_, pts) =
            scenario("[sweep]\nseeds = 2\ngrid = { a = [1, 2], b = [\"x\", \"y\"] }").unwrap();
        assert_eq!(pts.len(), 8);
        assert_eq!(pts[0].seed, 5);
        assert_eq!(pts[1].seed, 6);
        assert_eq!(pts[1].group, 0);
        assert_eq!(pts[2].values["b"], toml::Value::String("y".into()));
        assert_eq!(pts[4].values["a"], toml::Value::Integer(2));
        assert_eq!(pts[7].id(), "0007");
    }

    #[test]
    fn shards_partition_the_points() {
        let (_, pts) = scenario("[sweep]\nseeds = [3, 1, 4, 1, 5, 9, 2]").unwrap();
        for n in 1..5 {
            let mut count = 0;
            for k in 1..=n {
                let s = Shard::parse(&format!("{k}/{n}")).unwrap();
                count += pts.iter().filter(|p| s.contains(p)).count();
            }
            assert_eq!(count, pts.len());
        }
        assert!(Shard::parse("0/3").is_err());
        assert!(Shard::parse("4/3").is_err());
        assert!(Shard::parse("2").is_err());
    }

    #[test]
    fn bad_sweeps_are_refused_with_the_key() {
        let e = scenario("[sweep]\nseeds = 0").unwrap_err();
        assert_eq!(e.key, "sweep.seeds");
        let e = scenario("[sweep]\ngrid = { a = [] }").unwrap_err();
        assert_eq!(e.key, "sweep.grid.a");
        let e = scenario("[sweep]\nseeds = 3\nbogus = 1").unwrap_err();
        assert!(e.reason.contains("bogus"), "{e}");
        let e = scenario(
            "[sweep]\ngrid = { a = [1, 2] }\n[[sweep.checks]]\nid = \"c\"\nname = \"n\"\nquantity = \"q\"\nstatistic = \"mean\"\nwhere = { a = 3 }\nat_most = 1.0",
        )
        .unwrap_err();
        assert!(e.reason.contains("not a grid value"), "{e}");
        let e = scenario(
            "[sweep]\ngrid = { a = [1, 2] }\n[[sweep.checks]]\nid = \"c\"\nname = \"n\"\nquantity = \"q\"\nstatistic = \"mean\"",
        )
        .unwrap_err();
        assert!(e.reason.contains("at_most"), "{e}");
        let e = scenario(
            "[sweep]\ngrid = { a = [1, 2] }\n[[sweep.checks]]\nid = \"c\"\nname = \"n\"\nquantity = \"q\"\nat_most = 1.0",
        )
        .unwrap_err();
        assert_eq!(e.key, "sweep.checks[0].statistic", "{e}");
        let e = scenario("[sweep]\nseeds = 1").unwrap_err();
        assert_eq!(e.key, "sweep");
    }

    #[test]
    fn names_the_kind_does_not_record_are_refused_before_running() {
        let check = |quantity: &str| {
            scenario(&format!(
                "[sweep]\ngrid = {{ a = [1, 2] }}\n[[sweep.checks]]\nid = \"c\"\nname = \"n\"\n\
                 quantity = \"{quantity}\"\nstatistic = \"mean\"\nat_most = 1.0"
            ))
        };
        assert!(check("q").is_ok());
        assert!(check("stage_3.err").is_ok());
        assert!(check("check: whatever the run names it").is_ok());
        for bad in ["final_los", "stage_3.tau", "err"] {
            let e = check(bad).unwrap_err();
            assert_eq!(e.key, "sweep.checks[0].quantity", "{e}");
            assert!(e.reason.contains(&format!("`{bad}`")), "{e}");
            assert!(e.reason.contains("q, stage_*.err"), "{e}");
        }
        let band = |label: &str| {
            scenario(&format!(
                "[sweep]\ngrid = {{ a = [1, 2] }}\n[sweep.band]\nx = \"t\"\ny = \"l\"\n\
                 label = \"{label}\""
            ))
        };
        assert!(band("a = {a}: {q:mean}, {stage_1.err:max}").is_ok());
        for (bad, says) in [
            ("{b}", "not a grid key"),
            ("{q:average}", "not a statistic"),
            ("{qq:mean}", "`qq` is not a quantity"),
        ] {
            let e = band(bad).unwrap_err();
            assert_eq!(e.key, "sweep.band.label", "{e}");
            assert!(e.reason.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn wildcards_match_any_text() {
        for (p, t) in [
            ("q", "q"),
            ("*", ""),
            ("stage_*.err", "stage_12.err"),
            ("[*] k_switch", "[NGD cap 1e6] k_switch"),
            ("*_t_gap", "toy_w_t_gap"),
            ("a*b*c", "abXbc"),
        ] {
            assert!(wildcard_match(p, t), "{p} ~ {t}");
        }
        for (p, t) in [
            ("q", "qq"),
            ("stage_*.err", "stage_1.er"),
            ("a*b*c", "acb"),
            ("ab*ba", "aba"),
        ] {
            assert!(!wildcard_match(p, t), "{p} !~ {t}");
        }
    }

    #[test]
    fn statistics_and_labels() {
        let v = [4.0, 1.0, 2.0, 8.0];
        assert_eq!(Statistic::Median.of(&v), 3.0);
        assert!((Statistic::Geomean.of(&v) - 64f64.powf(0.25)).abs() < 1e-14);
        assert!(Statistic::Mean.of(&[]).is_nan());
        assert!(Statistic::Geomean.of(&[-1.0, 1.0]).is_nan());
        let values: BTreeMap<_, _> = [("s".to_string(), toml::Value::Float(0.1))].into();
        let r = RunRecord {
            point: Point {
                index: 0,
                group: 0,
                values: values.clone(),
                seed: 0,
            },
            checks: 1,
            passed: 1,
            quantities: [("q".to_string(), 2.5)].into(),
        };
        assert_eq!(
            fill_label("σ = {s}, q̄ = {q:mean} {zz}", &values, &[&r]),
            "σ = 0.1, q̄ = 2.5 {zz}"
        );
    }

    /// A run whose quantity is NaN (null on disk) makes every statistic NaN, so the sweep check
    /// fails whichever side it bounds, instead of being skipped in favour of the other runs.
    #[test]
    fn a_nan_run_fails_every_sweep_statistic() {
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<RunRecord> = [0.5, f64::NAN, 0.75]
            .iter()
            .enumerate()
            .map(|(index, &q)| {
                let point = Point {
                    index,
                    group: 0,
                    values: BTreeMap::new(),
                    seed: index as u64,
                };
                let run = dir.path().join("runs").join(point.id());
                std::fs::create_dir_all(&run).unwrap();
                let measured =
                    json!({ "checks": [{ "id": "c", "name": "c", "measured": q, "pass": q <= 1.0 }] });
                std::fs::write(run.join("checks.json"), measured.to_string()).unwrap();
                std::fs::write(
                    run.join("params.json"),
                    json!({ "derived": { "q": q } }).to_string(),
                )
                .unwrap();
                read_run(dir.path(), &point)
                    .unwrap()
                    .expect("the run is on disk")
            })
            .collect();
        assert!(records[1].quantities["q"].is_nan());
        assert!(records[1].quantities["check: c"].is_nan());
        for statistic in [
            Statistic::Mean,
            Statistic::Median,
            Statistic::Min,
            Statistic::Max,
            Statistic::Geomean,
        ] {
            for quantity in ["q", "check: c"] {
                for (at_least, at_most) in [(None, Some(1.0)), (Some(0.0), None)] {
                    let c = CheckSpec {
                        id: "c".into(),
                        name: format!("{} of {quantity}", statistic.name()),
                        quantity: quantity.into(),
                        statistic: Some(statistic),
                        at: BTreeMap::new(),
                        ratio_to: None,
                        at_most,
                        at_least,
                        note: None,
                        paper_claim: None,
                    };
                    let check = sweep_check(&c, &records).unwrap();
                    assert!(!check.pass, "{} ({at_least:?}, {at_most:?}) passed", c.name);
                }
            }
        }
    }
}

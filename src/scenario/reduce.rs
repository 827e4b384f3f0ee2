//! Sweep reductions: the cross-run analysis a kind performs once every point of its sweep is on
//! disk (the `reduction` of an ensemble). A kind that sweeps a parameter whose effect is a law
//! across the grid — transition times linear in Λ = ln(1/α), errors decreasing in α — runs one
//! grid point per run (in parallel, shardable, resumable like every sweep) and states the law in
//! its reduction: checks across runs, the combined tables, and the paper's figure.
//!
//! A reduction reads only what the runs wrote (their CSV tables and the scalars of
//! `params.json`'s `derived`), never re-runs anything, so `attnflow merge` of shards gives the
//! same result as a single run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::registry::{Kind, Prepared, ScenarioKind};
use super::report::{Cell, Report, Table};
use super::sweep::{Point, SweepSpec};
use super::{InputError, RunError, Scenario};

/// One completed run of a sweep, as read back from its folder.
pub struct SweepRun {
    pub point: Point,
    pub dir: PathBuf,
    /// Scalar derived quantities of the run (params.json `derived`; NaN was written as null and
    /// is absent here).
    pub quantities: BTreeMap<String, f64>,
}

impl SweepRun {
    /// The run's value of grid key `key` as a number (NaN if absent or not numeric).
    pub fn grid_value(&self, key: &str) -> f64 {
        match self.point.values.get(key) {
            Some(toml::Value::Float(x)) => *x,
            Some(toml::Value::Integer(i)) => *i as f64,
            _ => f64::NAN,
        }
    }

    /// The run's value of grid key `key` as text (strings without quotes).
    pub fn grid_text(&self, key: &str) -> String {
        match self.point.values.get(key) {
            Some(toml::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }

    /// A derived scalar of the run; NaN if the run did not report it (or reported NaN).
    pub fn quantity(&self, name: &str) -> f64 {
        self.quantities.get(name).copied().unwrap_or(f64::NAN)
    }

    /// The run's table `<stem>.csv`.
    pub fn table(&self, stem: &str) -> Result<CsvTable, String> {
        CsvTable::read(&self.dir.join(format!("{stem}.csv")))
    }
}

/// A CSV table read back from a run: text cells, numeric columns on demand.
#[derive(Debug, Clone)]
pub struct CsvTable {
    pub path: PathBuf,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl CsvTable {
    pub fn read(path: &Path) -> Result<CsvTable, String> {
        let mut r = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let headers = r
            .headers()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .iter()
            .map(String::from)
            .collect();
        let rows = r
            .records()
            .map(|rec| {
                rec.map(|r| r.iter().map(String::from).collect())
                    .map_err(|e| format!("{}: {e}", path.display()))
            })
            .collect::<Result<_, _>>()?;
        Ok(CsvTable {
            path: path.to_path_buf(),
            headers,
            rows,
        })
    }

    fn position(&self, name: &str) -> Result<usize, String> {
        self.headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("{}: no column `{name}`", self.path.display()))
    }

    /// Column `name` as numbers ("NaN" and unparsable cells are NaN).
    pub fn column(&self, name: &str) -> Result<Vec<f64>, String> {
        let i = self.position(name)?;
        Ok(self
            .rows
            .iter()
            .map(|r| r[i].parse::<f64>().unwrap_or(f64::NAN))
            .collect())
    }

    /// Column `name` as text.
    pub fn text_column(&self, name: &str) -> Result<Vec<String>, String> {
        let i = self.position(name)?;
        Ok(self.rows.iter().map(|r| r[i].clone()).collect())
    }
}

/// Every run of a complete sweep, in point order, with the grid they span.
pub struct SweepRuns {
    pub grid: BTreeMap<String, Vec<toml::Value>>,
    pub runs: Vec<SweepRun>,
}

impl SweepRuns {
    /// The runs' tables `<stem>.csv` stacked into one, each row prefixed with the run's id, seed
    /// and grid values — the combined data file of the sweep. A column named like a grid key
    /// repeats the grid value and is left out.
    pub fn stacked(&self, stem: &str) -> Result<Table, String> {
        let keys: Vec<&String> = self.grid.keys().collect();
        let mut out: Option<(Table, Vec<String>)> = None;
        for run in &self.runs {
            let t = run.table(stem)?;
            let kept: Vec<usize> = (0..t.headers.len())
                .filter(|&i| !self.grid.contains_key(&t.headers[i]))
                .collect();
            let columns: Vec<String> = kept.iter().map(|&i| t.headers[i].clone()).collect();
            let (table, first) = out.get_or_insert_with(|| {
                let mut h: Vec<String> = vec!["run".into(), "seed".into()];
                h.extend(keys.iter().map(|k| k.to_string()));
                h.extend(columns.iter().cloned());
                let table = Table {
                    headers: h,
                    rows: Vec::new(),
                };
                (table, columns.clone())
            });
            if *first != columns {
                return Err(format!(
                    "{}: columns differ from the other runs' {stem}.csv",
                    t.path.display()
                ));
            }
            for row in &t.rows {
                let mut cells: Vec<Cell> =
                    vec![run.point.id().into(), run.point.seed.to_string().into()];
                cells.extend(keys.iter().map(|k| Cell::Text(run.grid_text(k))));
                cells.extend(kept.iter().map(|&i| match row[i].parse::<f64>() {
                    Ok(x) => Cell::Num(x),
                    Err(_) => Cell::Text(row[i].clone()),
                }));
                table.push(cells);
            }
        }
        Ok(out.map(|(t, _)| t).unwrap_or_default())
    }
}

/// Checks the grid a reduction needs (which keys, how many values, in which order).
pub type ValidateSweepFn<P, C> = fn(&P, &C, &SweepSpec, &Scenario) -> Result<(), InputError>;
/// The reduction itself: checks across the runs, the combined tables and the figure.
pub type ReduceFn<P, C> = fn(&P, &C, &SweepRuns) -> Result<Report, RunError>;

/// A kind whose sweeps end with a reduction. A single run (no `[sweep]`) is an ordinary run of
/// one grid point; with a `[sweep]`, the reduction's checks join the sweep's `checks.json`, its
/// tables and figures are written next to `sweep.csv`, and its `figure` is the sweep's
/// `figure.svg`.
pub struct SweptKind<P, C> {
    pub kind: Kind<P, C>,
    pub validate_sweep: ValidateSweepFn<P, C>,
    pub reduce: ReduceFn<P, C>,
}

impl<P, C> ScenarioKind for SweptKind<P, C>
where
    P: DeserializeOwned + Serialize + Send + 'static,
    C: DeserializeOwned + Serialize + Send + 'static,
{
    fn name(&self) -> &'static str {
        self.kind.name
    }
    fn paper(&self) -> &'static str {
        self.kind.paper
    }
    fn summary(&self) -> &'static str {
        self.kind.summary
    }
    fn quantities(&self) -> &'static [&'static str] {
        self.kind.quantities
    }
    fn prepare(&self, sc: &Scenario) -> Result<Prepared, InputError> {
        self.kind.prepare(sc)
    }
    fn validate_sweep(&self, sc: &Scenario, spec: &SweepSpec) -> Result<(), InputError> {
        let p: P = sc.typed_params()?;
        let c: C = sc.typed_checks()?;
        (self.validate_sweep)(&p, &c, spec, sc)
    }
    fn reduce(
        &self,
        params: &serde_json::Value,
        checks: &serde_json::Value,
        runs: &SweepRuns,
    ) -> Option<Result<Report, String>> {
        let typed = || -> Result<(P, C), String> {
            let p = serde_json::from_value(params.clone())
                .map_err(|e| format!("sweep.json params: {e}"))?;
            let c = serde_json::from_value(checks.clone())
                .map_err(|e| format!("sweep.json checks: {e}"))?;
            Ok((p, c))
        };
        Some(typed().and_then(|(p, c)| (self.reduce)(&p, &c, runs).map_err(|e| e.to_string())))
    }
}

/// The values of grid key `key` as numbers, refusing a sweep that does not vary it at least
/// `min_len` times or gives a non-number.
pub fn numeric_grid(
    sc: &Scenario,
    spec: &SweepSpec,
    key: &str,
    min_len: usize,
) -> Result<Vec<f64>, InputError> {
    let Some(values) = spec.grid.get(key) else {
        return Err(sc.invalid(
            "sweep.grid",
            format!("this kind sweeps `{key}`: give sweep.grid.{key}"),
        ));
    };
    if values.len() < min_len {
        return Err(sc.invalid(
            &format!("sweep.grid.{key}"),
            format!("need at least {min_len} values"),
        ));
    }
    values
        .iter()
        .map(|v| match v {
            toml::Value::Float(x) => Ok(*x),
            toml::Value::Integer(i) => Ok(*i as f64),
            other => Err(sc.invalid(
                &format!("sweep.grid.{key}"),
                format!("expected numbers, got {other}"),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::output::write_atomic;
    use crate::scenario::Overrides;

    fn run(dir: &Path, index: usize, alpha: f64, csv: &str) -> SweepRun {
        let point = Point {
            index,
            group: index,
            values: [("log10_alpha".to_string(), toml::Value::Float(alpha))].into(),
            seed: 7,
        };
        let run_dir = dir.join(point.id());
        std::fs::create_dir_all(&run_dir).unwrap();
        write_atomic(&run_dir.join("series.csv"), csv.as_bytes()).unwrap();
        SweepRun {
            point,
            dir: run_dir,
            quantities: [("q".to_string(), alpha * 2.0)].into(),
        }
    }

    #[test]
    fn runs_stack_into_one_table_with_their_grid_values() {
        let dir = std::env::temp_dir().join(format!("attnflow-reduce-{}", std::process::id()));
        let runs = SweepRuns {
            grid: [(
                "log10_alpha".to_string(),
                vec![toml::Value::Float(-2.0), toml::Value::Float(-4.0)],
            )]
            .into(),
            runs: vec![
                run(&dir, 0, -2.0, "k,log10_alpha,t\n1,-2,0.5\n2,-2,NaN\n"),
                run(&dir, 1, -4.0, "k,log10_alpha,t\n1,-4,0.25\n"),
            ],
        };
        let t = runs.stacked("series").unwrap();
        assert_eq!(t.headers, ["run", "seed", "log10_alpha", "k", "t"]);
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[2][2], Cell::Text("-4.0".into()));
        assert_eq!(t.rows[2][4], Cell::Num(0.25));
        let col = runs.runs[0].table("series").unwrap().column("t").unwrap();
        assert_eq!(col[0], 0.5);
        assert!(col[1].is_nan());
        assert!(runs.runs[0].table("series").unwrap().column("x").is_err());
        assert_eq!(runs.runs[1].quantity("q"), -8.0);
        assert!(runs.runs[1].quantity("absent").is_nan());
        assert_eq!(runs.runs[1].grid_text("log10_alpha"), "-4.0");
        // a run whose table has other columns is refused, not silently misaligned
        let odd = run(&dir, 2, -8.0, "k,s\n1,2\n");
        let runs = SweepRuns {
            runs: vec![runs.runs.into_iter().next().unwrap(), odd],
            ..runs
        };
        assert!(runs
            .stacked("series")
            .unwrap_err()
            .contains("columns differ"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn numeric_grid_names_the_key() {
        let sc = Scenario::parse(
            Path::new("x/s.toml"),
            "kind = \"k\"\ntitle = \"t\"\nseed = 0\n[sweep]\ngrid = { a = [1, 2.5], b = [\"x\"] }",
            &Overrides::default(),
        )
        .unwrap();
        let (spec, _) = SweepSpec::plan(&sc, sc.sweep.as_ref().unwrap()).unwrap();
        assert_eq!(numeric_grid(&sc, &spec, "a", 2).unwrap(), [1.0, 2.5]);
        assert_eq!(
            numeric_grid(&sc, &spec, "a", 3).unwrap_err().key,
            "sweep.grid.a"
        );
        assert!(numeric_grid(&sc, &spec, "b", 1)
            .unwrap_err()
            .reason
            .contains("numbers"));
        assert_eq!(
            numeric_grid(&sc, &spec, "c", 1).unwrap_err().key,
            "sweep.grid"
        );
    }
}

//! What a scenario run produces: data tables, theorem checks, a figure, extra JSON files.

use serde::{Deserialize, Serialize};

use crate::flow::SolverStats;
use crate::plot::Figure;

/// One cell of a CSV table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Num(f64),
    Text(String),
}

impl From<f64> for Cell {
    fn from(x: f64) -> Self {
        Cell::Num(x)
    }
}
impl From<usize> for Cell {
    fn from(x: usize) -> Self {
        Cell::Num(x as f64)
    }
}
impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::Text(s.to_string())
    }
}
impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::Text(s)
    }
}

/// A CSV table in long or wide format.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; panics if its length differs from the header (a programming error).
    pub fn push(&mut self, row: Vec<Cell>) {
        assert_eq!(
            row.len(),
            self.headers.len(),
            "row length must match the header"
        );
        self.rows.push(row);
    }

    /// Appends one row per sample of equally long numeric columns, each prefixed by `labels`.
    pub fn push_columns(&mut self, labels: &[Cell], columns: &[&[f64]]) {
        let n = columns.first().map_or(0, |c| c.len());
        assert!(
            columns.iter().all(|c| c.len() == n),
            "columns must be equally long"
        );
        for k in 0..n {
            let mut row = labels.to_vec();
            row.extend(columns.iter().map(|c| Cell::Num(c[k])));
            self.push(row);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// How a measured value is compared with its bound.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Relation {
    #[serde(rename = "<=")]
    AtMost,
    #[serde(rename = ">=")]
    AtLeast,
    #[serde(rename = "in")]
    Within,
}

/// A theorem check: a measured value against a bound from the theory. It can fail.
/// (Deserialize: tests and tools read checks.json back.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Stable identifier (lowercase `a-z`, `0-9`, `-`, with `.` before a per-instance label):
    /// tests and tools find a check by its id, so the title may be reworded freely.
    pub id: String,
    /// Title, for people.
    pub name: String,
    /// (A NaN measurement is written as null and read back as NaN.)
    #[serde(deserialize_with = "nan_from_null")]
    pub measured: f64,
    pub relation: Relation,
    /// The bound (for `Within`, the lower end).
    pub bound: f64,
    /// The upper end for `Within`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper: Option<f64>,
    pub pass: bool,
    /// What the paper states where it differs from the corrected statement checked here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_claim: Option<String>,
    /// What the check measures, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Check {
    fn make(
        id: &str,
        name: &str,
        measured: f64,
        relation: Relation,
        bound: f64,
        upper: Option<f64>,
    ) -> Self {
        // NaN compares false everywhere, so a NaN measurement fails every check
        let pass = match relation {
            Relation::AtMost => measured <= bound,
            Relation::AtLeast => measured >= bound,
            Relation::Within => measured >= bound && measured <= upper.unwrap_or(f64::NAN),
        };
        Check {
            id: normalize_id(id),
            name: name.to_string(),
            measured,
            relation,
            bound,
            upper,
            pass,
            paper_claim: None,
            note: None,
        }
    }
    /// Passes if `measured ≤ bound`.
    pub fn at_most(id: &str, name: &str, measured: f64, bound: f64) -> Self {
        Self::make(id, name, measured, Relation::AtMost, bound, None)
    }
    /// Passes if `measured ≥ bound`.
    pub fn at_least(id: &str, name: &str, measured: f64, bound: f64) -> Self {
        Self::make(id, name, measured, Relation::AtLeast, bound, None)
    }
    /// Passes if `lo ≤ measured ≤ hi`.
    pub fn within(id: &str, name: &str, measured: f64, lo: f64, hi: f64) -> Self {
        Self::make(id, name, measured, Relation::Within, lo, Some(hi))
    }
    /// Passes if |measured − target| ≤ tol.
    pub fn close(id: &str, name: &str, measured: f64, target: f64, tol: f64) -> Self {
        Self::within(id, name, measured, target - tol, target + tol)
    }
    /// A yes/no fact (1 = holds): passes if it holds.
    pub fn holds(id: &str, name: &str, holds: bool) -> Self {
        Self::at_least(id, name, if holds { 1.0 } else { 0.0 }, 1.0)
    }
    /// Records what the paper claims where it differs from the checked statement.
    pub fn paper_claim(mut self, claim: impl Into<String>) -> Self {
        self.paper_claim = Some(claim.into());
        self
    }
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
    /// The bound as text, e.g. "<= 1e-7" or "in [0.9, 1.1]".
    pub fn bound_text(&self) -> String {
        match self.relation {
            Relation::AtMost => format!("<= {}", fmt_num(self.bound)),
            Relation::AtLeast => format!(">= {}", fmt_num(self.bound)),
            Relation::Within => format!(
                "in [{}, {}]",
                fmt_num(self.bound),
                fmt_num(self.upper.unwrap_or(f64::NAN))
            ),
        }
    }
}

/// Greek letters and sub/superscript digits in ids, spelled out.
const SPELLED: &[(char, &str)] = &[
    ('α', "alpha"),
    ('β', "beta"),
    ('γ', "gamma"),
    ('δ', "delta"),
    ('ε', "eps"),
    ('η', "eta"),
    ('θ', "theta"),
    ('κ', "kappa"),
    ('λ', "lambda"),
    ('μ', "mu"),
    ('ν', "nu"),
    ('ξ', "xi"),
    ('π', "pi"),
    ('ρ', "rho"),
    ('σ', "sigma"),
    ('τ', "tau"),
    ('φ', "phi"),
    ('ψ', "psi"),
    ('ω', "omega"),
    ('Σ', "sigma"),
    ('Δ', "delta"),
    ('Λ', "lambda"),
    ('₀', "0"),
    ('₁', "1"),
    ('₂', "2"),
    ('₃', "3"),
    ('⁰', "0"),
    ('¹', "1"),
    ('²', "2"),
    ('³', "3"),
    ('ℓ', "l"),
    ('∞', "inf"),
];

/// An id in canonical form: lowercase ASCII letters and digits in `-`-separated words, `.`
/// between an id and its per-instance label (labels are often parameter values: "0.9" → "0-9"
/// after the first `.`).
pub fn normalize_id(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut dotted = false;
    for ch in raw.chars().flat_map(char::to_lowercase) {
        let spelled = SPELLED.iter().find(|(c, _)| *c == ch).map(|(_, s)| *s);
        let piece = match spelled {
            Some(s) => s.to_string(),
            None if ch.is_ascii_alphanumeric() => ch.to_string(),
            None if ch == '.' && !dotted => {
                dotted = true;
                ".".to_string()
            }
            None => "-".to_string(),
        };
        for c in piece.chars() {
            let last = out.chars().last();
            match c {
                '-' if matches!(last, None | Some('-') | Some('.')) => {}
                '.' if last == Some('-') => {
                    out.pop();
                    out.push('.');
                }
                _ => out.push(c),
            }
        }
    }
    out.trim_end_matches(['-', '.']).to_string()
}

/// JSON has no NaN: serde_json writes it as null; read null back as NaN.
fn nan_from_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Compact number formatting for verdict tables.
pub fn fmt_num(x: f64) -> String {
    if x == 0.0 || (x.abs() >= 1e-3 && x.abs() < 1e5) {
        let s = format!("{x:.6}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    } else {
        format!("{x:.4e}")
    }
}

/// Everything one scenario run produced, written by [`super::output`].
#[derive(Debug, Default)]
pub struct Report {
    /// `series.csv`.
    pub series: Table,
    /// Further CSV files: (file stem, table).
    pub tables: Vec<(String, Table)>,
    pub checks: Vec<Check>,
    /// `figure.svg`.
    pub figure: Option<Figure>,
    /// Further figures: (file stem, figure).
    pub figures: Vec<(String, Figure)>,
    /// Further JSON files: (file stem, value).
    pub json: Vec<(String, serde_json::Value)>,
    /// Quantities derived from the parameters (rates, onset times, ...) for params.json.
    pub derived: serde_json::Map<String, serde_json::Value>,
    /// Work of every integration or optimizer run: (label, stats).
    pub solver_stats: Vec<(String, SolverStats)>,
    /// Checks that do not apply to this run's instance (e.g. a closed form of the built-in
    /// data on a user's data file), with the reason; listed in checks.json, never counted.
    pub skipped: Vec<Skipped>,
    /// The data and initial state the run used, written as `instance.npz`: feeding it back as
    /// `data_file`/`init_file` reproduces the run.
    pub instance: Option<crate::instance::Arrays>,
}

/// A check just added to a report, for adding its note and the paper's claim.
pub struct Added<'a>(&'a mut Check);

impl Added<'_> {
    pub fn note(self, note: impl Into<String>) -> Self {
        self.0.note = Some(note.into());
        self
    }
    /// What the paper claims where it differs from the checked statement.
    pub fn paper_claim(self, claim: impl Into<String>) -> Self {
        self.0.paper_claim = Some(claim.into());
        self
    }
}

/// A check left out of a run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The id the check has where it runs, so a run on other data lists the same id as skipped.
    pub id: String,
    pub name: String,
    pub reason: String,
}

impl Report {
    /// Adds a check; its id must be new to this report (a duplicate is a bug in the runner).
    pub fn check(&mut self, c: Check) {
        assert!(
            !self.checks.iter().any(|d| d.id == c.id),
            "check id `{}` used twice in one report (\"{}\")",
            c.id,
            c.name
        );
        self.checks.push(c);
    }
    /// Adds the check `measured ≤ bound` (see [`Check::at_most`]); chain `.note(…)` and
    /// `.paper_claim(…)` on the result.
    pub fn at_most(&mut self, id: &str, name: &str, measured: f64, bound: f64) -> Added<'_> {
        self.added(Check::at_most(id, name, measured, bound))
    }
    /// Adds the check `measured ≥ bound`.
    pub fn at_least(&mut self, id: &str, name: &str, measured: f64, bound: f64) -> Added<'_> {
        self.added(Check::at_least(id, name, measured, bound))
    }
    /// Adds the check `lo ≤ measured ≤ hi`.
    pub fn within(&mut self, id: &str, name: &str, measured: f64, lo: f64, hi: f64) -> Added<'_> {
        self.added(Check::within(id, name, measured, lo, hi))
    }
    /// Adds the check |measured − target| ≤ tol.
    pub fn close(
        &mut self,
        id: &str,
        name: &str,
        measured: f64,
        target: f64,
        tol: f64,
    ) -> Added<'_> {
        self.added(Check::close(id, name, measured, target, tol))
    }
    /// Adds a yes/no fact as a check (1 = holds).
    pub fn holds(&mut self, id: &str, name: &str, holds: bool) -> Added<'_> {
        self.added(Check::holds(id, name, holds))
    }
    fn added(&mut self, c: Check) -> Added<'_> {
        self.check(c);
        Added(self.checks.last_mut().expect("just added"))
    }
    pub fn derive(&mut self, key: &str, value: impl Serialize) {
        self.derived.insert(
            key.to_string(),
            serde_json::to_value(value).unwrap_or(serde_json::Value::Null),
        );
    }
    pub fn stats(&mut self, label: impl Into<String>, stats: &SolverStats) {
        self.solver_stats.push((label.into(), stats.clone()));
    }
    /// Leaves check `id` (titled `name`) out of this run because `reason` (it does not apply
    /// here); `id` is the one the check has where it runs.
    pub fn skip(&mut self, id: &str, name: impl Into<String>, reason: impl Into<String>) {
        self.skipped.push(Skipped {
            id: normalize_id(id),
            name: name.into(),
            reason: reason.into(),
        });
    }
    pub fn all_pass(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_can_fail_and_nan_always_fails() {
        assert!(Check::at_most("check", "a", 1.0, 2.0).pass);
        assert!(!Check::at_most("check", "a", 3.0, 2.0).pass);
        assert!(!Check::at_most("check", "a", f64::NAN, 2.0).pass);
        assert!(!Check::at_least("check", "a", f64::NAN, 2.0).pass);
        assert!(!Check::within("check", "a", f64::NAN, 0.0, 1.0).pass);
        assert!(Check::close("check", "a", 1.05, 1.0, 0.1).pass);
        assert!(!Check::holds("check", "a", false).pass);
        assert_eq!(
            Check::within("check", "a", 0.5, 0.0, 1.0).bound_text(),
            "in [0, 1]"
        );
        // a NaN measurement survives a round trip through checks.json (as null)
        let c = Check::at_most("check", "a", f64::NAN, 1.0);
        let back: Check = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert!(back.measured.is_nan() && !back.pass && back.id == "check");
    }

    #[test]
    fn ids_are_canonical() {
        assert_eq!(normalize_id("κ at z*"), "kappa-at-z");
        assert_eq!(
            normalize_id("closed-form.(0.9, 0.1)"),
            "closed-form.0-9-0-1"
        );
        assert_eq!(normalize_id("a4-iii.R2-degenerate"), "a4-iii.r2-degenerate");
        assert_eq!(normalize_id("rate.1e-6"), "rate.1e-6");
        assert_eq!(normalize_id("  σ₀ --x. "), "sigma0-x");
    }

    #[test]
    #[should_panic(expected = "used twice")]
    fn a_duplicate_id_is_a_bug() {
        let mut rep = Report::default();
        rep.check(Check::at_most("same", "a", 1.0, 2.0));
        rep.check(Check::at_most("same", "b", 1.0, 2.0));
    }
}

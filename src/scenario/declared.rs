//! Checks declared in a scenario file: `[[check]]` entries compare a quantity one run measured
//! with a bound, without a line of Rust; `[[sweep.checks]]` entries do the same across a
//! sweep's runs. Both are a [`CheckSpec`] (id, title, quantity, statistic, bound, note, paper
//! claim; a sweep's may also select grid points). On one run:
//!
//! ```toml
//! [[check]]
//! id = "final-loss"                   # stable; unique among the run's checks
//! name = "loss at t_end"              # the title
//! quantity = "final_loss"             # a derived quantity of the run (`attnflow describe`)
//! at_most = 1e-6                      # and/or at_least
//!
//! [[check]]
//! id = "loss-never-above-start"
//! name = "largest loss along the run"
//! quantity = "series.loss"            # a column of series.csv (or `<table>.<column>`)
//! statistic = "max"                   # mean | median | min | max | geomean
//! at_most = 1.0
//! ```
//!
//! A declared check is counted like any other: a NaN measurement fails it. A derived quantity
//! is checked against the kind's list when the scenario is loaded; a column is known only once
//! the run has made its tables, and a missing one is refused then (nothing is written).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::sweep::{known_quantity, Statistic};
use super::{Cell, Check, InputError, Report, Scenario};

/// A declared check: a `[[check]]` of one run or a `[[sweep.checks]]` across runs.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// Stable identifier (see [`Check::id`]).
    pub id: String,
    pub name: String,
    /// A derived quantity (`final_loss`), or in one run a table column (`series.loss`).
    pub quantity: String,
    /// Across runs, and for a column: required; for one run's scalar: refused.
    #[serde(default)]
    pub statistic: Option<Statistic>,
    /// Across runs: only the runs at this grid point (keys of `grid`).
    #[serde(default, rename = "where")]
    pub at: BTreeMap<String, toml::Value>,
    /// Across runs: divide by the same statistic at this grid point (e.g. a loss ratio
    /// between two σ).
    #[serde(default)]
    pub ratio_to: Option<BTreeMap<String, toml::Value>>,
    #[serde(default)]
    pub at_most: Option<f64>,
    #[serde(default)]
    pub at_least: Option<f64>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub paper_claim: Option<String>,
}

impl CheckSpec {
    /// The check with this entry's id, title and bounds on `measured`, its note saying `what`
    /// was measured.
    pub(super) fn check_on(&self, measured: f64, what: &str) -> Check {
        let check = match (self.at_least, self.at_most) {
            (Some(lo), Some(hi)) => Check::within(&self.id, &self.name, measured, lo, hi),
            (Some(lo), None) => Check::at_least(&self.id, &self.name, measured, lo),
            (None, Some(hi)) => Check::at_most(&self.id, &self.name, measured, hi),
            (None, None) => unreachable!("a bound is required when the check is loaded"),
        };
        let check = check.note(
            self.note
                .clone()
                .map_or(what.to_string(), |n| format!("{n} ({what})")),
        );
        match &self.paper_claim {
            Some(p) => check.paper_claim(p.clone()),
            None => check,
        }
    }

    /// The table stem and column a quantity `<stem>.<column>` names, if it names one.
    fn column(&self) -> Option<(&str, &str)> {
        self.quantity.split_once('.')
    }

    /// Refuses an entry that cannot be evaluated: no bound, a statistic on a scalar or none on
    /// a column, or a derived quantity the kind does not record (`quantities`, `*` = any text).
    pub fn validate(&self, sc: &Scenario, i: usize, quantities: &[&str]) -> Result<(), InputError> {
        let key = format!("check[{i}]");
        if self.at_most.is_none() && self.at_least.is_none() {
            return Err(sc.invalid(&key, "give at_most and/or at_least"));
        }
        if !self.at.is_empty() || self.ratio_to.is_some() {
            return Err(sc.invalid(
                &key,
                "`where` and `ratio_to` select sweep points: give them in [[sweep.checks]]",
            ));
        }
        match (self.column(), self.statistic) {
            (Some(_), None) => Err(sc.invalid(
                &format!("{key}.statistic"),
                "a column needs a statistic (mean, median, min, max, geomean)",
            )),
            (None, Some(_)) => Err(sc.invalid(
                &format!("{key}.statistic"),
                format!("`{}` is one number: give no statistic", self.quantity),
            )),
            (Some(_), Some(_)) => Ok(()),
            (None, None) => {
                known_quantity(sc, &format!("{key}.quantity"), &self.quantity, quantities)
            }
        }
    }

    /// The check on `rep`; a column the run did not write is refused with its key.
    fn evaluate(&self, sc: &Scenario, i: usize, rep: &Report) -> Result<Check, InputError> {
        let measured = match (self.column(), self.statistic) {
            (Some((stem, column)), Some(statistic)) => {
                statistic.of(&column_values(sc, i, rep, stem, column)?)
            }
            _ => rep
                .derived
                .get(&self.quantity)
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NAN),
        };
        let what = match self.statistic {
            Some(s) => format!("{} of {}", s.name(), self.quantity),
            None => self.quantity.clone(),
        };
        Ok(self.check_on(measured, &what))
    }
}

/// The numeric cells of `column` in table `stem` (`series` is series.csv).
fn column_values(
    sc: &Scenario,
    i: usize,
    rep: &Report,
    stem: &str,
    column: &str,
) -> Result<Vec<f64>, InputError> {
    let key = format!("check[{i}].quantity");
    let table = match stem {
        "series" => Some(&rep.series),
        _ => rep.tables.iter().find(|(s, _)| s == stem).map(|(_, t)| t),
    };
    let Some(table) = table else {
        let stems: Vec<&str> = std::iter::once("series")
            .chain(rep.tables.iter().map(|(s, _)| s.as_str()))
            .collect();
        return Err(sc.invalid(
            &key,
            format!(
                "the run wrote no table `{stem}` (it wrote: {})",
                stems.join(", ")
            ),
        ));
    };
    let Some(j) = table.headers.iter().position(|h| h == column) else {
        return Err(sc.invalid(
            &key,
            format!(
                "{stem}.csv has no column `{column}` (its columns: {})",
                table.headers.join(", ")
            ),
        ));
    };
    Ok(table
        .rows
        .iter()
        .map(|row| match &row[j] {
            Cell::Num(x) => *x,
            Cell::Text(_) => f64::NAN,
        })
        .collect())
}

/// Adds the scenario's declared checks to `rep` (after the runner's own checks).
pub fn apply(sc: &Scenario, rep: &mut Report) -> Result<(), InputError> {
    for (i, d) in sc.declared_checks.iter().enumerate() {
        if rep.checks.iter().any(|c| c.id == d.id) {
            return Err(sc.invalid(
                &format!("check[{i}].id"),
                format!("the run already has a check `{}`: choose another id", d.id),
            ));
        }
        let check = d.evaluate(sc, i, rep)?;
        rep.check(check);
    }
    Ok(())
}

//! Checks declared in a scenario file: `[[check]]` entries compare a quantity the run measured
//! with a bound, without a line of Rust. They use the schema of a sweep's `[[sweep.checks]]`
//! (id, title, quantity, statistic, bound, note, paper claim), on one run:
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

use super::sweep::{Statistic, SweepCheck};
use super::{Cell, Check, InputError, Report, Scenario};

/// One `[[check]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredCheck {
    pub id: String,
    pub name: String,
    /// A derived quantity (`final_loss`) or a table column (`series.loss`).
    pub quantity: String,
    /// Required for a column, refused for a scalar.
    #[serde(default)]
    pub statistic: Option<Statistic>,
    #[serde(default)]
    pub at_most: Option<f64>,
    #[serde(default)]
    pub at_least: Option<f64>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub paper_claim: Option<String>,
}

impl DeclaredCheck {
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
            (None, None) => super::sweep::known_quantity(
                sc,
                &format!("{key}.quantity"),
                &self.quantity,
                quantities,
            ),
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
        let as_sweep = SweepCheck {
            id: self.id.clone(),
            name: self.name.clone(),
            quantity: self.quantity.clone(),
            statistic: self.statistic.unwrap_or(Statistic::Max),
            at: BTreeMap::new(),
            ratio_to: None,
            at_most: self.at_most,
            at_least: self.at_least,
            note: self.note.clone(),
            paper_claim: self.paper_claim.clone(),
        };
        let what = match self.statistic {
            Some(s) => format!("{} of {}", s.name(), self.quantity),
            None => self.quantity.clone(),
        };
        Ok(as_sweep.check_on(measured, &what))
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

//! Size limits: before anything runs or is written, every kind estimates the memory and the work
//! of its configuration ([`Cost`]), and a configuration beyond [`MEMORY_LIMIT_BYTES`] or
//! [`WORK_LIMIT_SECONDS`] is refused as bad input (exit 2) naming the parameter responsible,
//! unless the user passes `--allow-large`. Sweeps are counted before their points are planned
//! ([`check_sweep_points`]) and their summed work is held to the same limit ([`check_sweep_work`]).
//!
//! The estimates are deliberately coarse — orders of magnitude from the dominant terms (arrays
//! of samples, stored trajectories, d × d matrices, data tensors; steps × per-step cost), each
//! attributed to the parameter key it grows with — so that a typo like `iterations=1e11` is
//! stopped before it exhausts the machine, not so that a run's time can be predicted.

use super::{InputError, Scenario};
use crate::flow::Method;

/// Memory one run may need: 8 GB. A fixed number rather than a fraction of the machine's memory,
/// so that the same command is accepted or refused on every machine (tests, laptops, clusters).
/// A sweep runs up to one point per core at once; the limit holds for each point.
pub const MEMORY_LIMIT_BYTES: f64 = 8e9;

/// Work one run (or all points of a sweep together) may need: one hour on one core.
pub const WORK_LIMIT_SECONDS: f64 = 3600.0;

/// Assumed throughput of one core in floating-point operations per second. Against measured CPU
/// times of committed scenarios (release build, the 2-core development machine under load) the
/// estimates come out 2–20 times above the truth, on the safe side. A loop that stops at a
/// tolerance is counted at its cap (what the configuration allows), which can be far more.
pub const FLOPS_PER_SECOND: f64 = 1e9;

/// Most points a sweep may have: each point is prepared in memory before the first one runs and
/// writes its own folder.
pub const MAX_SWEEP_POINTS: f64 = 10_000.0;

/// Bytes of one f64.
pub const F64: f64 = 8.0;

/// Bytes per cell of an output table: the cell itself, its CSV text and its share of the figure.
pub const TABLE_CELL_BYTES: f64 = 64.0;

/// Floating-point-operation equivalent of the fixed cost of one evaluation (a call, small
/// allocations, bookkeeping): even a two-parameter model costs ~0.1 µs per gradient step.
pub const EVAL_OVERHEAD_FLOPS: f64 = 100.0;

/// Steps assumed for one adaptive ODE solve. The true count is known only after the run; the
/// committed scenarios take 10²–10³ accepted steps per solve (median ≈ 500; stiff outliers 10⁴).
pub const ODE_STEPS: f64 = 500.0;

/// `x` as a float, for size arithmetic that must not overflow.
pub fn n(x: usize) -> f64 {
    x as f64
}

/// One contribution to a configuration's cost.
#[derive(Debug, Clone, PartialEq)]
struct Term {
    /// The parameter keys it grows with, relative to `[params]`, comma-separated.
    key: &'static str,
    /// What is allocated or computed, in words ("samples × 5 doubles").
    what: String,
    bytes: f64,
    flops: f64,
}

/// The estimated memory and work of one run, as named contributions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cost {
    terms: Vec<Term>,
}

impl Cost {
    pub fn new() -> Self {
        Cost::default()
    }

    /// Memory of `bytes` growing with `key`.
    pub fn memory(mut self, key: &'static str, what: impl Into<String>, bytes: f64) -> Self {
        self.terms.push(Term {
            key,
            what: what.into(),
            bytes,
            flops: 0.0,
        });
        self
    }

    /// `doubles` f64 values held at once.
    pub fn doubles(self, key: &'static str, what: impl Into<String>, doubles: f64) -> Self {
        self.memory(key, what, F64 * doubles)
    }

    /// An output table (series.csv and the like) of `rows` × `cols`, with its figure.
    pub fn table(self, key: &'static str, rows: f64, cols: f64) -> Self {
        let what = format!("an output table of {rows:.3e} rows × {cols} columns");
        self.memory(key, what, rows * cols * TABLE_CELL_BYTES)
    }

    /// Work of `evals` evaluations of `flops_each` floating-point operations each (plus the fixed
    /// cost of an evaluation).
    pub fn work(
        mut self,
        key: &'static str,
        what: impl Into<String>,
        evals: f64,
        flops_each: f64,
    ) -> Self {
        self.terms.push(Term {
            key,
            what: what.into(),
            bytes: 0.0,
            flops: evals * (flops_each + EVAL_OVERHEAD_FLOPS),
        });
        self
    }

    /// `solves` adaptive ODE solves of a `dim`-dimensional field whose right-hand side costs
    /// `rhs_flops`, with `method`: [`ODE_STEPS`] steps each; an implicit method also holds the
    /// dense `dim × dim` Newton matrix and its LU factors, refreshed about every tenth step from
    /// `dim` Jacobian-vector products — except the matrix-free `tr_bdf2_krylov`, which holds a
    /// few dozen vectors and spends tens of Jacobian-vector products per step.
    pub fn ode(
        self,
        key: &'static str,
        solves: f64,
        dim: f64,
        rhs_flops: f64,
        method: Method,
    ) -> Self {
        self.ode_steps(key, solves, ODE_STEPS, dim, rhs_flops, method)
    }

    /// As [`Cost::ode`] with `steps` steps per solve, for a kind that knows more (e.g. an
    /// explicit method held by stability to a step per fixed time unit over a long horizon).
    pub fn ode_steps(
        self,
        key: &'static str,
        solves: f64,
        steps: f64,
        dim: f64,
        rhs_flops: f64,
        method: Method,
    ) -> Self {
        let what = format!(
            "{solves} ODE solves of dimension {dim} (~{} steps each)",
            format_count(steps.round())
        );
        if method == Method::TrBdf2Krylov {
            // no matrix: two Newton stages and the error filter per step, each a GMRES solve of
            // ~10 Jacobian-vector products (≈ 2 right-hand sides each), on ~40 stored vectors
            let per_step = 6.0 * rhs_flops + 60.0 * 2.0 * rhs_flops;
            self.work(key, what, solves * steps, per_step).doubles(
                key,
                "the Krylov basis and stage vectors",
                40.0 * dim,
            )
        } else if method.is_implicit() && solves > 0.0 {
            let setup = dim * (rhs_flops + EVAL_OVERHEAD_FLOPS) + dim.powi(3) / 3.0;
            let per_step = 3.0 * rhs_flops + 4.0 * dim * dim + setup / 10.0;
            self.work(key, what, solves * steps, per_step).doubles(
                key,
                "the Newton matrix and its LU factors",
                3.0 * dim * dim,
            )
        } else {
            self.work(key, what, solves * steps * 6.0, rhs_flops)
        }
    }

    /// `count` dense Hessians (or Jacobians) of dimension `dim` assembled from `dim` products of
    /// `product_flops` each, with their symmetric eigendecompositions (~10 dim³).
    pub fn dense_hessians(
        self,
        key: &'static str,
        count: f64,
        dim: f64,
        product_flops: f64,
    ) -> Self {
        let what = format!("{count} dense {dim} × {dim} Hessians and their spectra");
        self.work(key, what, count * dim, product_flops + 10.0 * dim * dim)
            .doubles(
                key,
                "a dense Hessian, its transpose and eigenvectors",
                4.0 * dim * dim,
            )
    }

    /// `trajectories` recorded trajectories of `samples` states of dimension `dim` each, with
    /// the loss, gradient norm and time per sample.
    pub fn records(self, key: &'static str, trajectories: f64, samples: f64, dim: f64) -> Self {
        let what = format!("{trajectories} trajectories × {samples:.3e} recorded states of {dim}");
        self.doubles(key, what, trajectories * samples * (dim + 3.0))
    }

    /// Adds every term of `other`.
    pub fn and(mut self, other: Cost) -> Self {
        self.terms.extend(other.terms);
        self
    }

    /// Estimated bytes held at once (the sum of the memory terms: a coarse upper bound).
    pub fn bytes(&self) -> f64 {
        self.terms.iter().map(|t| t.bytes).sum()
    }

    /// Estimated floating-point operations.
    pub fn flops(&self) -> f64 {
        self.terms.iter().map(|t| t.flops).sum()
    }

    /// One line for `describe`: the estimated memory and work.
    pub fn summary(&self) -> String {
        format!(
            "about {} of memory and {}",
            format_bytes(self.bytes()),
            format_work(
                self.flops(),
                self.largest(|t| t.flops).map_or("nothing", |t| &t.what)
            )
        )
    }

    /// The term with the largest `of`.
    fn largest(&self, of: fn(&Term) -> f64) -> Option<&Term> {
        self.terms.iter().max_by(|a, b| of(a).total_cmp(&of(b)))
    }

    /// Refuses the configuration of `sc` if it is beyond a limit (unless `--allow-large`): the
    /// error names the key of the largest contribution, the estimate and the limit.
    pub fn check(&self, sc: &Scenario) -> Result<(), InputError> {
        if sc.allow_large {
            return Ok(());
        }
        let largest = |of| self.largest(of).expect("a cost over a limit has a term");
        let key = |t: &Term| {
            t.key
                .split(',')
                .map(|k| format!("params.{}", k.trim()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let bytes = self.bytes();
        if bytes > MEMORY_LIMIT_BYTES {
            let t = largest(|t| t.bytes);
            return Err(sc.invalid(
                &key(t),
                format!(
                    "this configuration needs about {} of memory (mostly {}: {}); the limit is \
                     {} (--allow-large lifts it)",
                    format_bytes(bytes),
                    t.what,
                    format_bytes(t.bytes),
                    format_bytes(MEMORY_LIMIT_BYTES)
                ),
            ));
        }
        let flops = self.flops();
        if flops > WORK_LIMIT_SECONDS * FLOPS_PER_SECOND {
            let t = largest(|t| t.flops);
            return Err(sc.invalid(
                &key(t),
                format!(
                    "this configuration needs about {}; the limit is {} (--allow-large lifts \
                     it)",
                    format_work(flops, &t.what),
                    format_seconds(WORK_LIMIT_SECONDS)
                ),
            ));
        }
        Ok(())
    }
}

/// The instance files a run reads (`params.data_file`, `params.init_file`), counted from their
/// headers before they are read: every number held three times (as read, as validated, in the
/// model) and, since a gradient passes over the data, one adaptive solve's worth of passes at
/// ~10 operations per number. The kinds' own estimates use their size parameters, which a file
/// replaces; this term keeps a file far larger than those within the same limits. A file that
/// cannot be opened counts nothing here: its reader reports it.
pub fn instance_files(sc: &Scenario) -> Cost {
    let mut cost = Cost::new();
    for key in ["data_file", "init_file"] {
        let Some(toml::Value::String(value)) = sc.params.get(key) else {
            continue;
        };
        let path = sc.input_path(key, std::path::Path::new(value));
        let Ok(numbers) = crate::instance::Arrays::count_numbers(&path) else {
            continue;
        };
        let what = format!(
            "the {} numbers of {}",
            format_count(numbers),
            path.display()
        );
        cost = cost.doubles(key, what.clone(), 3.0 * numbers).work(
            key,
            format!("passes over {what}"),
            6.0 * ODE_STEPS,
            10.0 * numbers,
        );
    }
    cost
}

/// Refuses a sweep of more than [`MAX_SWEEP_POINTS`] points (unless `--allow-large`), before its
/// points are built. `factors` are the sweep's keys (`sweep.seeds`, `sweep.grid.KEY`) and how
/// many values each takes.
pub fn check_sweep_points(sc: &Scenario, factors: &[(String, f64)]) -> Result<(), InputError> {
    let points: f64 = factors.iter().map(|(_, k)| k).product();
    if sc.allow_large || points <= MAX_SWEEP_POINTS {
        return Ok(());
    }
    Err(sc.invalid(
        &sweep_key(factors),
        format!(
            "this sweep has {} points ({}); the limit is {MAX_SWEEP_POINTS} points \
             (--allow-large lifts it)",
            format_count(points),
            sweep_product(factors)
        ),
    ))
}

/// Refuses a sweep whose points together need more than [`WORK_LIMIT_SECONDS`] on one core
/// (unless `--allow-large`); each point's memory was checked when it was prepared.
pub fn check_sweep_work<'a>(
    sc: &Scenario,
    factors: &[(String, f64)],
    points: impl Iterator<Item = &'a Cost>,
) -> Result<(), InputError> {
    let flops: f64 = points.map(Cost::flops).sum();
    if sc.allow_large || flops <= WORK_LIMIT_SECONDS * FLOPS_PER_SECOND {
        return Ok(());
    }
    Err(sc.invalid(
        &sweep_key(factors),
        format!(
            "the sweep's {} runs need about {}; the limit is {} (--allow-large lifts it)",
            sweep_product(factors),
            format_work(flops, "all points together"),
            format_seconds(WORK_LIMIT_SECONDS)
        ),
    ))
}

/// The key of the factor with the most values (the one to change).
fn sweep_key(factors: &[(String, f64)]) -> String {
    factors
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or_else(|| "sweep".into(), |(key, _)| key.clone())
}

fn sweep_product(factors: &[(String, f64)]) -> String {
    factors
        .iter()
        .map(|(key, k)| format!("{key}: {}", format_count(*k)))
        .collect::<Vec<_>>()
        .join(" × ")
}

fn format_count(x: f64) -> String {
    if x < 1e6 {
        format!("{x}")
    } else {
        format!("{x:.1e}")
    }
}

/// `24.0 GB`, `512.0 MB`, … (`3.8e6 TB` for the absurd).
pub fn format_bytes(b: f64) -> String {
    let units = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    match units.iter().find(|(_, u)| b >= *u) {
        Some((name, u)) if b / u >= 1e4 => format!("{:.1e} {name}", b / u),
        Some((name, u)) => format!("{:.1} {name}", b / u),
        None => format!("{b:.0} bytes"),
    }
}

fn format_seconds(s: f64) -> String {
    if s >= 3600.0 * 1e4 {
        format!("{:.1e} h", s / 3600.0)
    } else if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

fn format_work(flops: f64, what: &str) -> String {
    format!(
        "{flops:.1e} floating-point operations, {} on one core at an assumed {FLOPS_PER_SECOND:.0e} \
         per second (mostly {what})",
        format_seconds(flops / FLOPS_PER_SECOND)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Overrides;
    use std::path::Path;

    fn scenario(allow_large: bool) -> Scenario {
        let ov = Overrides {
            allow_large,
            ..Default::default()
        };
        Scenario::parse(
            Path::new("x/demo.toml"),
            "kind = \"k\"\ntitle = \"t\"\n",
            &ov,
        )
        .unwrap()
    }

    #[test]
    fn over_a_limit_names_the_largest_term_and_the_flag_lifts_it() {
        let cost = Cost::new().doubles("d", "a d × d matrix", 1e6).doubles(
            "samples",
            "samples × 3 doubles",
            3e9,
        );
        let e = cost.check(&scenario(false)).unwrap_err();
        assert_eq!(e.key, "params.samples");
        assert!(e.reason.contains("24.0 GB"), "{e}");
        assert!(e.reason.contains("8.0 GB"), "{e}");
        assert!(e.reason.contains("--allow-large"), "{e}");
        assert!(cost.check(&scenario(true)).is_ok());

        let work = Cost::new().work("steps, d", "GD steps", 1e13, 1e3);
        let e = work.check(&scenario(false)).unwrap_err();
        assert_eq!(e.key, "params.steps, params.d");
        assert!(e.reason.contains("h on one core"), "{e}");
        assert!(Cost::new().check(&scenario(false)).is_ok());
    }

    #[test]
    fn sweeps_are_counted_and_their_work_summed() {
        let sc = scenario(false);
        let factors = vec![
            ("sweep.seeds".to_string(), 1e8),
            ("sweep.grid.d".into(), 1.0),
        ];
        let e = check_sweep_points(&sc, &factors).unwrap_err();
        assert_eq!(e.key, "sweep.seeds");
        assert!(e.reason.contains("1.0e8 points"), "{e}");
        assert!(check_sweep_points(&scenario(true), &factors).is_ok());
        let one = Cost::new().work("steps", "GD steps", 1e9, 1e3);
        let few = vec![("sweep.seeds".to_string(), 3.0)];
        assert!(check_sweep_work(&sc, &few, std::iter::repeat_n(&one, 3)).is_ok());
        let many = vec![("sweep.seeds".to_string(), 5000.0)];
        let e = check_sweep_work(&sc, &many, std::iter::repeat_n(&one, 5000)).unwrap_err();
        assert_eq!(e.key, "sweep.seeds");
    }
}

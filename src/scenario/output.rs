//! Writing a run's outputs: `params.json`, `series.csv`, `checks.json`, `figure.svg` and any
//! extra tables, figures and JSON files, into `<out>/<name>/`. Everything is first written into
//! a hidden sibling folder and then renamed into place, so an interrupted or failed run never
//! leaves a half-written output folder.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::registry::Prepared;
use super::report::{fmt_num, Cell, Report, Table};
use super::Scenario;

/// Metadata recorded in params.json besides the report.
pub struct RunMeta<'a> {
    pub scenario: &'a Scenario,
    pub params: &'a serde_json::Value,
    pub checks: &'a serde_json::Value,
    pub ode: &'a crate::flow::OdeConfig,
}

impl<'a> RunMeta<'a> {
    pub fn new(scenario: &'a Scenario, prepared: &'a Prepared) -> Self {
        RunMeta {
            scenario,
            params: &prepared.params,
            checks: &prepared.checks,
            ode: &prepared.ode,
        }
    }
}

/// Writes all outputs of one run atomically; returns the output folder.
pub fn write_run(out_root: &Path, meta: &RunMeta, report: &Report) -> Result<PathBuf, String> {
    let sc = meta.scenario;
    let at = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    std::fs::create_dir_all(out_root).map_err(|e| at(out_root, e))?;
    let final_dir = out_root.join(&sc.name);
    let tmp = temp_sibling(&final_dir, TempKind::Partial);
    std::fs::create_dir_all(&tmp).map_err(|e| at(&tmp, e))?;
    if let Err(e) = write_files(&tmp, meta, report) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    replace_dir(&tmp, &final_dir)?;
    Ok(final_dir)
}

/// Moves the complete folder `tmp` to `target`, replacing a previous folder there: the old one is
/// first renamed aside (so `target` is never half old, half new) and removed afterwards.
pub fn replace_dir(tmp: &Path, target: &Path) -> Result<(), String> {
    let at = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let old = temp_sibling(target, TempKind::Old);
    let had_old = target.is_dir();
    if had_old {
        std::fs::rename(target, &old).map_err(|e| at(target, e))?;
    }
    if let Err(e) = std::fs::rename(tmp, target) {
        let _ = std::fs::remove_dir_all(tmp);
        if had_old {
            let _ = std::fs::rename(&old, target);
        }
        return Err(at(target, e));
    }
    if had_old {
        std::fs::remove_dir_all(&old).map_err(|e| at(&old, e))?;
    }
    Ok(())
}

/// What a hidden temporary sibling holds: a folder being written, a folder being replaced, or
/// a file being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TempKind {
    Partial,
    Old,
    File,
}

impl TempKind {
    fn tag(self) -> &'static str {
        match self {
            TempKind::Partial => "partial",
            TempKind::Old => "old",
            TempKind::File => "tmp",
        }
    }
}

/// A hidden sibling of `path` that no other writer uses: `.NAME.TAG-PID-N`, with N counted per
/// process, so two runs (threads of one process, or two processes) never share a path.
pub fn temp_sibling(path: &Path, kind: TempKind) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}-{}-{n}", kind.tag(), std::process::id()))
}

/// Removes what writers killed without a chance to clean up (SIGKILL, power loss) left in `dir`:
/// temporary siblings whose process no longer runs. A folder that was being replaced is put
/// back if nothing took its place. Only where process ids can be checked (`/proc`).
pub fn clean_stale(dir: &Path) {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some((target, kind, pid)) = parse_temp_name(&file_name) else {
            continue;
        };
        if proc.join(pid.to_string()).exists() {
            continue; // a live writer (possibly another attnflow) owns it
        }
        let path = entry.path();
        let original = dir.join(target);
        if kind == TempKind::Old && !original.exists() {
            let _ = std::fs::rename(&path, &original);
        } else if path.is_dir() {
            let _ = std::fs::remove_dir_all(&path);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// `.NAME.TAG-PID-N` (or the older `.NAME.TAG-PID`) → (NAME, kind, PID).
fn parse_temp_name(file_name: &str) -> Option<(&str, TempKind, u32)> {
    let rest = file_name.strip_prefix('.')?;
    [TempKind::Partial, TempKind::Old, TempKind::File]
        .into_iter()
        .find_map(|kind| {
            let marker = format!(".{}-", kind.tag());
            let at = rest.rfind(&marker)?;
            let tail = &rest[at + marker.len()..];
            let pid = tail.split('-').next()?.parse().ok()?;
            let counted = tail.split('-').skip(1).all(|n| n.parse::<u64>().is_ok());
            (counted && at > 0).then_some((&rest[..at], kind, pid))
        })
}

fn write_files(dir: &Path, meta: &RunMeta, report: &Report) -> Result<(), String> {
    let sc = meta.scenario;
    let stats: Vec<_> = report
        .solver_stats
        .iter()
        .map(|(label, s)| {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            // wall time varies between runs; it is printed, not stored, so outputs are reproducible
            if let Some(o) = v.as_object_mut() {
                o.remove("wall_seconds");
            }
            json!({ "run": label, "stats": v })
        })
        .collect();
    let params = json!({
        "scenario": sc.name,
        "title": sc.title,
        "kind": sc.kind,
        "file": sc.file,
        "crate_version": env!("CARGO_PKG_VERSION"),
        "seed": sc.seed,
        "quick": sc.quick,
        "overrides": sc.overrides,
        "solver": meta.ode,
        "params": meta.params,
        "check_thresholds": meta.checks,
        "derived": report.derived,
        "solver_stats": stats,
    });
    write_json(&dir.join("params.json"), &params)?;
    write_csv(&dir.join("series.csv"), &report.series)?;
    for (stem, table) in &report.tables {
        write_csv(&dir.join(format!("{stem}.csv")), table)?;
    }
    let mut checks = json!({
        "scenario": sc.name,
        "all_pass": report.all_pass(),
        "checks": report.checks,
    });
    if !report.skipped.is_empty() {
        checks["skipped"] = json!(report.skipped);
    }
    write_json(&dir.join("checks.json"), &checks)?;
    if let Some(instance) = &report.instance {
        write_bytes(&dir.join("instance.npz"), &instance.to_npz_bytes())?;
    }
    for (stem, value) in &report.json {
        write_json(&dir.join(format!("{stem}.json")), value)?;
    }
    let figures = report
        .figure
        .iter()
        .map(|f| ("figure".to_string(), f))
        .chain(report.figures.iter().map(|(s, f)| (s.clone(), f)));
    for (stem, fig) in figures {
        let svg = crate::plot::render_svg(fig).map_err(|e| format!("drawing {stem}.svg: {e}"))?;
        write_bytes(&dir.join(format!("{stem}.svg")), svg.as_bytes())?;
    }
    Ok(())
}

/// Writes a file through a temporary sibling and a rename, so readers never see it half-written.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = temp_sibling(path, TempKind::File);
    write_bytes(&tmp, bytes)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}

fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn write_json(path: &Path, v: &serde_json::Value) -> Result<(), String> {
    let mut s = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    s.push('\n');
    write_bytes(path, s.as_bytes())
}

/// CSV text of a table; numbers in Rust's shortest round-trip form.
pub fn csv_text(table: &Table) -> Result<String, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&table.headers).map_err(|e| e.to_string())?;
    for row in &table.rows {
        let cells: Vec<String> = row
            .iter()
            .map(|c| match c {
                Cell::Num(x) => format!("{x:?}"),
                Cell::Text(s) => s.clone(),
            })
            .collect();
        w.write_record(&cells).map_err(|e| e.to_string())?;
    }
    String::from_utf8(w.into_inner().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

fn write_csv(path: &Path, table: &Table) -> Result<(), String> {
    write_bytes(path, csv_text(table)?.as_bytes())
}

/// The verdict table of one run, as printed on stdout.
pub fn verdict_text(sc: &Scenario, report: &Report, seconds: f64) -> String {
    let passed = report.checks.iter().filter(|c| c.pass).count();
    let mut s = format!(
        "{} ({}): {}/{} checks passed  [{:.2} s]\n",
        sc.name,
        sc.kind,
        passed,
        report.checks.len(),
        seconds
    );
    let width = report
        .checks
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    for c in &report.checks {
        s.push_str(&format!(
            "  {}  {:<width$}  {:>12}  {}\n",
            if c.pass { "PASS" } else { "FAIL" },
            c.name,
            fmt_num(c.measured),
            c.bound_text(),
        ));
        if let Some(claim) = &c.paper_claim {
            s.push_str(&format!("        paper: {claim}\n"));
        }
    }
    for k in &report.skipped {
        s.push_str(&format!("  SKIP  {}: {}\n", k.name, k.reason));
    }
    s
}

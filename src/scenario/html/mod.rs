//! The report: `<out>/index.html`, one static page over an output folder that a reader opens in
//! any browser. Per paper (cited from [`crate::papers`]) and per scenario: its title, the claim
//! its kind verifies, its verdicts (measured value, bound, PASS/FAIL, the paper's claim beside the
//! corrected one), its figures, its parameters, seed and solver, and links to its data.
//!
//! It reads only files (params.json or sweep.json, checks.json, the SVG, CSV and JSON files) and
//! never re-runs anything, so it describes exactly what is on disk — including what is missing: a
//! folder without checks.json shows as "not run", an incomplete sweep lists its missing points.
//! The page is plain HTML with a small inline style sheet: no script, no network, every link
//! relative, so the folder can be moved, zipped or served as it is. The same folder gives the
//! same bytes (files are read in name order, nothing depends on the clock).

use std::path::Path;

use serde_json::Value;

mod page;

use super::output::write_atomic;
use super::registry::{Registry, ScenarioKind};
use super::report::{Check, Skipped};
use crate::papers::{Paper, PAPERS};

/// The report's file name inside the output folder.
pub const INDEX: &str = "index.html";

/// Why no report was written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The folder is missing or holds no scenario outputs (bad input: exit 2).
    #[error("{0}")]
    NoOutputs(String),
    /// Reading or writing failed.
    #[error("{0}")]
    Io(String),
}

/// What a written report covers (for the CLI's one-line message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSummary {
    pub scenarios: usize,
    pub not_run: usize,
    pub checks: usize,
    pub passed: usize,
}

/// Reads the scenario outputs under `dir` and writes `dir/index.html` atomically; `registry`
/// gives each folder's kind its paper, claim and place on the page.
pub fn write_report(dir: &Path, registry: &Registry) -> Result<ReportSummary, ReportError> {
    let folders = read_outputs(dir, registry)?;
    let html = page::render(&folders);
    write_atomic(&dir.join(INDEX), html.as_bytes()).map_err(ReportError::Io)?;
    Ok(summarize(&folders))
}

/// One scenario's output folder as read from disk.
struct Folder {
    name: String,
    /// params.json of a single run, or sweep.json of a sweep (same provenance keys).
    meta: Option<Value>,
    is_sweep: bool,
    verdicts: Verdicts,
    /// SVG files, figure.svg first.
    figures: Vec<String>,
    /// CSV and JSON files.
    data: Vec<String>,
    /// The folder's kind as registered, with its place in the registry (the page's order).
    registered: Option<(usize, &'static dyn ScenarioKind)>,
}

enum Verdicts {
    /// No checks.json: the scenario did not run to completion here.
    NotRun,
    /// checks.json exists but cannot be read.
    Unreadable(String),
    Checks {
        checks: Vec<Check>,
        /// Checks that did not apply to the run's instance, with the reason.
        skipped: Vec<Skipped>,
        /// Sweeps: runs on disk, runs planned, missing point ids.
        sweep: Option<(usize, usize, Vec<String>)>,
    },
}

impl Folder {
    fn text(&self, key: &str) -> Option<&str> {
        self.meta.as_ref()?.get(key)?.as_str()
    }
    fn kind(&self) -> Option<&str> {
        self.text("kind")
    }
    fn paper(&self) -> Option<&'static Paper> {
        crate::papers::paper(self.registered?.1.paper())
    }
    /// (passed, total), `None` when there is nothing to count.
    fn tally(&self) -> Option<(usize, usize)> {
        match &self.verdicts {
            Verdicts::Checks { checks, .. } => {
                Some((checks.iter().filter(|c| c.pass).count(), checks.len()))
            }
            _ => None,
        }
    }
    /// Everything ran, every check passed, nothing is missing.
    fn all_pass(&self) -> bool {
        match &self.verdicts {
            Verdicts::Checks { checks, sweep, .. } => {
                checks.iter().all(|c| c.pass)
                    && sweep
                        .as_ref()
                        .is_none_or(|(_, _, missing)| missing.is_empty())
            }
            _ => false,
        }
    }
}

fn read_outputs(dir: &Path, registry: &Registry) -> Result<Vec<Folder>, ReportError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        ReportError::NoOutputs(format!(
            "{}: cannot read the output folder ({e}); write it with `attnflow run ... --out {}`",
            dir.display(),
            dir.display()
        ))
    })?;
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    let mut folders = Vec::new();
    for path in paths.iter().filter(|p| p.is_dir()) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // hidden folders are runs being written (see output::write_run)
        if name.starts_with('.') {
            continue;
        }
        if let Some(mut folder) = read_folder(path, name)? {
            folder.registered = folder.kind().and_then(|k| {
                let kinds = registry.kinds();
                kinds
                    .iter()
                    .position(|r| r.name() == k)
                    .map(|i| (i, kinds[i]))
            });
            folders.push(folder);
        }
    }
    if folders.is_empty() {
        return Err(ReportError::NoOutputs(format!(
            "{}: no scenario outputs (folders with params.json, sweep.json or checks.json); \
             run `attnflow run ... --out {}` first",
            dir.display(),
            dir.display()
        )));
    }
    Ok(folders)
}

/// A folder's outputs, or `None` if it holds no scenario output at all.
fn read_folder(path: &Path, name: String) -> Result<Option<Folder>, ReportError> {
    let read = |file: &str| -> Option<Result<Value, String>> {
        let p = path.join(file);
        let text = std::fs::read_to_string(&p).ok()?;
        Some(serde_json::from_str(&text).map_err(|e| format!("{name}/{file}: {e}")))
    };
    let sweep = read("sweep.json");
    let is_sweep = sweep.is_some();
    let meta = sweep.or_else(|| read("params.json"));
    let checks = read("checks.json");
    if meta.is_none() && checks.is_none() {
        return Ok(None);
    }
    let meta = meta.and_then(Result::ok);
    let verdicts = match checks {
        None => Verdicts::NotRun,
        Some(Err(e)) => Verdicts::Unreadable(e),
        Some(Ok(doc)) => match serde_json::from_value::<Vec<Check>>(doc["checks"].clone()) {
            Err(e) => Verdicts::Unreadable(format!("{name}/checks.json: checks: {e}")),
            Ok(checks) => {
                let planned = meta
                    .as_ref()
                    .and_then(|m| m["points"].as_array())
                    .map(Vec::len);
                let sweep = is_sweep.then(|| {
                    let runs = doc["runs"].as_u64().unwrap_or(0) as usize;
                    let missing: Vec<String> = doc["missing"]
                        .as_array()
                        .map(|m| {
                            m.iter()
                                .filter_map(|v| v.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default();
                    (runs, planned.unwrap_or(runs + missing.len()), missing)
                });
                let skipped = serde_json::from_value::<Vec<Skipped>>(doc["skipped"].clone())
                    .unwrap_or_default();
                Verdicts::Checks {
                    checks,
                    skipped,
                    sweep,
                }
            }
        },
    };
    let mut figures = Vec::new();
    let mut data = Vec::new();
    let entries =
        std::fs::read_dir(path).map_err(|e| ReportError::Io(format!("{}: {e}", path.display())))?;
    let mut files: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| !f.starts_with('.'))
        .collect();
    files.sort();
    for f in files {
        if f == "figure.svg" {
            figures.insert(0, f);
        } else if f.ends_with(".svg") {
            figures.push(f);
        } else if f.ends_with(".csv") || f.ends_with(".json") || f.ends_with(".npz") {
            data.push(f);
        }
    }
    Ok(Some(Folder {
        name,
        meta,
        is_sweep,
        verdicts,
        figures,
        data,
        registered: None,
    }))
}

fn summarize(folders: &[Folder]) -> ReportSummary {
    let tallies: Vec<_> = folders.iter().filter_map(Folder::tally).collect();
    ReportSummary {
        scenarios: folders.len(),
        not_run: folders.len() - tallies.len(),
        checks: tallies.iter().map(|t| t.1).sum(),
        passed: tallies.iter().map(|t| t.0).sum(),
    }
}

/// The folders grouped by paper (in seed order, then those of unknown kinds), each group in the
/// registry's order of kinds (the order of the README's tables), then by name.
fn by_paper(folders: &[Folder]) -> Vec<(Option<&'static Paper>, Vec<&Folder>)> {
    let rank = |f: &Folder| (f.registered.map_or(usize::MAX, |(i, _)| i), f.name.clone());
    let papers = PAPERS.iter().map(Some).chain(std::iter::once(None));
    papers
        .filter_map(|paper| {
            let mut group: Vec<&Folder> = folders.iter().filter(|f| f.paper() == paper).collect();
            group.sort_by_key(|f| rank(f));
            (!group.is_empty()).then_some((paper, group))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write_json(path: &Path, v: &Value) {
        std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    }

    /// A fake output folder: `alpha` ran (one check passes with a paper claim, one fails),
    /// `beta` has params.json but no checks.json, `gamma` a corrupt checks.json, and a hidden
    /// half-written folder that the report must ignore.
    fn fake_outputs(root: &Path) {
        let alpha = root.join("alpha");
        std::fs::create_dir_all(&alpha).unwrap();
        write_json(
            &alpha.join("params.json"),
            &json!({
                "scenario": "alpha", "kind": "histogram.thm2-trajectory",
                "title": "Trajectory <b>&</b> \"closed form\"",
                "file": "scenarios/histogram/alpha.toml", "seed": 7, "quick": false,
                "overrides": ["c=-0.5"], "solver": {"method": "tsit45", "rtol": 1e-10},
                "params": {"c": -0.5, "init": {"scale": 1e-3}},
            }),
        );
        write_json(
            &alpha.join("checks.json"),
            &json!({ "scenario": "alpha", "all_pass": false, "checks": [
                Check::at_most("error-tol", "error < tol", 3e-10, 1e-7).paper_claim("T = <script>1</script>"),
                Check::at_least("rate", "rate", f64::NAN, 2.0).note("slope of ln ℓ"),
            ]}),
        );
        let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>"#;
        std::fs::write(alpha.join("figure.svg"), svg).unwrap();
        std::fs::write(alpha.join("series.csv"), "t,x\n0,1\n").unwrap();
        std::fs::write(alpha.join("my data.csv"), "t\n0\n").unwrap();
        std::fs::write(alpha.join("instance.npz"), b"PK").unwrap();
        let beta = root.join("beta");
        std::fs::create_dir_all(&beta).unwrap();
        write_json(
            &beta.join("params.json"),
            &json!({"scenario": "beta", "kind": "diagonal.stage-times", "title": "Beta", "seed": 0}),
        );
        let gamma = root.join("gamma");
        std::fs::create_dir_all(&gamma).unwrap();
        std::fs::write(gamma.join("checks.json"), "{ not json").unwrap();
        std::fs::create_dir_all(root.join(".delta.partial-1")).unwrap();
        write_json(
            &root.join(".delta.partial-1/checks.json"),
            &json!({"checks": []}),
        );
    }

    #[test]
    fn report_of_a_fake_folder_shows_failures_claims_and_missing_runs() {
        let tmp = tempfile::tempdir().unwrap();
        fake_outputs(tmp.path());
        let summary = write_report(tmp.path(), &Registry::builtin()).unwrap();
        assert_eq!(
            summary,
            ReportSummary {
                scenarios: 3,
                not_run: 2,
                checks: 2,
                passed: 1
            }
        );
        let html = std::fs::read_to_string(tmp.path().join(INDEX)).unwrap();
        // text is escaped, never markup
        assert!(html.contains("Trajectory &lt;b&gt;&amp;&lt;/b&gt; &quot;closed form&quot;"));
        assert!(html.contains("T = &lt;script&gt;1&lt;/script&gt;"));
        assert!(!html.contains("<script"), "the page has no script");
        // verdicts: the failing NaN check, the paper's claim beside the passing one, the note
        assert!(html.contains("<tr class=\"fail\"><td class=\"verdict\">FAIL</td><td>rate"));
        assert!(html.contains(">NaN</td>"));
        assert!(html.contains("<th>the paper states</th>"));
        assert!(html.contains("<span class=\"note\">slope of ln ℓ</span>"));
        assert!(html.contains("<b>1/2 checks passed</b>"));
        // the paper, cited by title and authors, and the kind's claim
        assert!(html.contains("Towards analyzing self-attention via linear neural networks"));
        let claim = Registry::builtin()
            .find("histogram.thm2-trajectory")
            .unwrap()
            .summary();
        assert!(html.contains(&format!("<p class=\"claim\">{}</p>", page::esc(claim))));
        // missing outputs are visible; the hidden folder is not listed
        assert!(html.contains("Not run: this folder has no checks.json"));
        assert!(html.contains("Unreadable checks: gamma/checks.json"));
        assert!(!html.contains("delta"));
        // links are relative (and percent-encoded); parameters, seed and solver are there
        assert!(html.contains("<img src=\"alpha/figure.svg\""));
        assert!(html.contains("href=\"alpha/my%20data.csv\""));
        assert!(html.contains("href=\"alpha/series.csv\""));
        // the instance is named, not linked (binary, possibly huge, not kept with figures)
        assert!(html.contains(">instance.npz</span>"));
        assert!(!html.contains("href=\"alpha/instance.npz\""));
        assert!(!html.contains(&tmp.path().display().to_string()));
        assert!(html.contains("<summary>Parameters, seed 7, solver tsit45</summary>"));
        assert!(html.contains("<td>init.scale</td><td class=\"num\">0.001</td>"));
        // the same folder gives the same bytes
        write_report(tmp.path(), &Registry::builtin()).unwrap();
        assert_eq!(
            html,
            std::fs::read_to_string(tmp.path().join(INDEX)).unwrap()
        );
    }

    #[test]
    fn a_missing_or_empty_folder_is_refused_and_nothing_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = write_report(&tmp.path().join("nope"), &Registry::builtin());
        assert!(matches!(missing, Err(ReportError::NoOutputs(_))));
        std::fs::create_dir_all(tmp.path().join("unrelated")).unwrap();
        let empty = write_report(tmp.path(), &Registry::builtin());
        assert!(
            matches!(empty, Err(ReportError::NoOutputs(e)) if e.contains("no scenario outputs"))
        );
        assert!(!tmp.path().join(INDEX).exists());
    }
}

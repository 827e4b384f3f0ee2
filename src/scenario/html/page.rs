//! The page itself: HTML text from the folders read by [`super`], with a small inline style
//! sheet. Every text is escaped, every link relative and percent-encoded.

use std::fmt::Write as _;

use serde_json::Value;

use super::{by_paper, summarize, Folder, Verdicts};
use crate::papers::Paper;
use crate::scenario::report::{fmt_num, Check, Relation};

const STYLE: &str = "
body { font: 15px/1.45 system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif;
  color: #1d1d1f; max-width: 1100px; margin: 0 auto; padding: 1em 1.5em 4em; }
h1 { font-size: 1.7em; margin-bottom: .2em; }
h2 { border-bottom: 2px solid #444; padding-bottom: .2em; margin-top: 2.5em; }
h3 { margin: 0 0 .2em; font-size: 1.15em; }
a { color: #0b57a4; }
.paper-ref { color: #444; margin-top: -.4em; }
section.scenario { border: 1px solid #ccc; border-radius: 6px; padding: .8em 1em; margin: 1.4em 0; }
section.scenario.failing { border-color: #b3261e; border-width: 2px; }
.meta { color: #555; font-size: .9em; }
.claim { margin: .4em 0 .6em; }
.badge { display: inline-block; border-radius: 4px; padding: 0 .45em; font-size: .85em;
  font-weight: 600; white-space: nowrap; }
.badge.pass { background: #dff3e2; color: #17622a; }
.badge.fail { background: #fbe0de; color: #8c1d18; }
.badge.none { background: #eee; color: #555; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #d4d4d4; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
table.verdicts { width: 100%; }
td.num { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: nowrap; }
td.verdict { font-weight: 700; text-align: center; width: 3.5em; }
tr.pass td.verdict { color: #17622a; background: #eef8f0; }
tr.fail td { background: #fdf0ef; }
tr.fail td.verdict { color: #fff; background: #b3261e; }
.note { display: block; color: #666; font-size: .85em; }
td.claim-cell { color: #6b4e00; background: #fff8e1; }
.missing { color: #8c1d18; font-weight: 600; }
figure { margin: .8em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #666; font-size: .85em; }
details { margin: .5em 0; }
summary { cursor: pointer; color: #333; }
.files a, .files span { margin-right: .8em; }
ul.contents { columns: 20em; font-size: .9em; }
.summary-box { background: #f6f6f6; border-radius: 6px; padding: .6em 1em; }
";

pub(super) fn render(folders: &[Folder]) -> String {
    let groups = by_paper(folders);
    let s = summarize(folders);
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<title>attnflow report</title>\n<style>");
    h.push_str(STYLE);
    h.push_str("</style>\n</head>\n<body>\n<h1>attnflow report</h1>\n");
    let failing: Vec<&Folder> = folders.iter().filter(|f| !f.all_pass()).collect();
    let _ = writeln!(
        h,
        "<div class=\"summary-box\"><p><b>{}</b> ({}), {} not run; \
         <b>{}/{} checks passed</b>. Report written by attnflow {} from the files in this \
         folder: every check compares a measured value with a bound from the theory; where a \
         paper states something else, its claim is shown beside the corrected statement. \
         \u{201c}spec NNN \u{a7}x\u{201d} in a note refers to attnflow's implementation note \
         on paper NNN (<code>docs/papers/</code> in the repository).</p>",
        counted(s.scenarios, "scenario"),
        counted(folders.iter().filter(|f| f.is_sweep).count(), "sweep"),
        s.not_run,
        s.passed,
        s.checks,
        env!("CARGO_PKG_VERSION"),
    );
    if !failing.is_empty() {
        h.push_str("<p class=\"missing\">Failing, incomplete or not run: ");
        let links: Vec<String> = failing.iter().map(|f| scenario_link(f)).collect();
        h.push_str(&links.join(", "));
        h.push_str("</p>\n");
    }
    h.push_str("</div>\n<h2 id=\"contents\">Contents</h2>\n");
    for (paper, group) in &groups {
        let _ = writeln!(
            h,
            "<h4><a href=\"#{}\">{}</a></h4>\n<ul class=\"contents\">",
            paper_anchor(*paper),
            esc(&paper_heading(*paper))
        );
        for f in group {
            let _ = writeln!(h, "<li>{} {}</li>", scenario_link(f), badge(f));
        }
        h.push_str("</ul>\n");
    }
    for (paper, group) in &groups {
        render_paper(&mut h, *paper, group);
    }
    h.push_str("</body>\n</html>\n");
    h
}

fn paper_anchor(paper: Option<&Paper>) -> String {
    paper.map_or("paper-other".to_string(), |p| format!("paper-{}", p.number))
}

fn paper_heading(paper: Option<&Paper>) -> String {
    match paper {
        Some(p) => format!("Seed {} — {}", p.number, p.topic),
        None => "Other outputs (kind unknown to this version)".to_string(),
    }
}

fn scenario_link(f: &Folder) -> String {
    format!(
        "<a href=\"#{}\">{}</a>",
        href(&format!("s-{}", f.name)),
        esc(&f.name)
    )
}

fn badge(f: &Folder) -> String {
    match (&f.verdicts, f.tally()) {
        (_, Some((passed, total))) => {
            let class = if f.all_pass() { "pass" } else { "fail" };
            format!("<span class=\"badge {class}\">{passed}/{total}</span>")
        }
        (Verdicts::Unreadable(_), _) => "<span class=\"badge fail\">unreadable</span>".into(),
        _ => "<span class=\"badge none\">not run</span>".into(),
    }
}

fn render_paper(h: &mut String, paper: Option<&Paper>, group: &[&Folder]) {
    let tallies: Vec<_> = group.iter().filter_map(|f| f.tally()).collect();
    let _ = writeln!(
        h,
        "<h2 id=\"{}\">{}</h2>",
        paper_anchor(paper),
        esc(&paper_heading(paper))
    );
    if let Some(p) = paper {
        let link = p
            .url
            .map(|u| format!(" <a href=\"{0}\">{0}</a>", esc(u)))
            .unwrap_or_default();
        let _ = writeln!(
            h,
            "<p class=\"paper-ref\"><i>{}</i>. {}. {}.{link}</p>",
            esc(p.title),
            esc(p.authors),
            esc(p.venue),
        );
    }
    let _ = writeln!(
        h,
        "<p>{}, {}/{} checks passed.</p>",
        counted(group.len(), "scenario"),
        tallies.iter().map(|t| t.0).sum::<usize>(),
        tallies.iter().map(|t| t.1).sum::<usize>()
    );
    for f in group {
        render_scenario(h, f);
    }
}

fn render_scenario(h: &mut String, f: &Folder) {
    let class = if f.all_pass() {
        "scenario"
    } else {
        "scenario failing"
    };
    let _ = writeln!(
        h,
        "<section class=\"{class}\" id=\"{}\">",
        esc(&format!("s-{}", f.name))
    );
    let title = f.text("title").unwrap_or(&f.name);
    let _ = writeln!(h, "<h3>{} {}</h3>", esc(title), badge(f));
    let kind = f.kind().unwrap_or("unknown kind");
    let mut meta = format!("{} · {}", esc(&f.name), esc(kind));
    if f.meta.as_ref().and_then(|m| m["quick"].as_bool()) == Some(true) {
        meta.push_str(
            " · <b>quick configuration</b> (the tests' fast settings, not the full reproduction)",
        );
    }
    let _ = writeln!(h, "<div class=\"meta\">{meta}</div>");
    if let Some((_, k)) = f.registered {
        let _ = writeln!(h, "<p class=\"claim\">{}</p>", esc(k.summary()));
    }
    match &f.verdicts {
        Verdicts::NotRun => h.push_str(
            "<p class=\"missing\">Not run: this folder has no checks.json (the run did not \
             finish, or failed).</p>\n",
        ),
        Verdicts::Unreadable(e) => {
            let _ = writeln!(h, "<p class=\"missing\">Unreadable checks: {}</p>", esc(e));
        }
        Verdicts::Checks {
            checks,
            skipped,
            sweep,
        } => {
            if let Some((runs, planned, missing)) = sweep {
                let _ = write!(
                    h,
                    "<p>Sweep: {runs} of {planned} runs on disk (in <code>runs/</code>)."
                );
                if !missing.is_empty() {
                    let _ = write!(
                        h,
                        " <span class=\"missing\">Missing runs: {}.</span>",
                        esc(&missing.join(", "))
                    );
                }
                h.push_str("</p>\n");
            }
            render_checks(h, checks);
            if !skipped.is_empty() {
                h.push_str("<p class=\"note\">Not checked on this instance:</p>\n<ul>\n");
                for k in skipped {
                    let _ = writeln!(h, "<li>{}: {}</li>", esc(&k.name), esc(&k.reason));
                }
                h.push_str("</ul>\n");
            }
        }
    }
    if f.figures.is_empty() {
        h.push_str("<p class=\"missing\">No figure in this folder.</p>\n");
    }
    for fig in &f.figures {
        let src = href(&format!("{}/{fig}", f.name));
        let _ = writeln!(
            h,
            "<figure><a href=\"{src}\"><img src=\"{src}\" alt=\"{}: {}\"></a>\
             <figcaption>{}</figcaption></figure>",
            esc(title),
            esc(fig),
            esc(fig)
        );
    }
    if !f.data.is_empty() {
        h.push_str("<p class=\"files\">Data: ");
        for d in &f.data {
            if d.ends_with(".npz") {
                // the run's instance: binary, up to hundreds of MB (Fig. 1 at d = 400), and not
                // kept beside committed figures, so it is named, not linked
                let _ = write!(
                    h,
                    "<span title=\"the data and initial state of the run, in its folder                      (attnflow --set data_file=… reads it)\">{}</span>",
                    esc(d)
                );
                continue;
            }
            let _ = write!(
                h,
                "<a href=\"{}\">{}</a>",
                href(&format!("{}/{d}", f.name)),
                esc(d)
            );
        }
        h.push_str("</p>\n");
    }
    if let Some(meta) = &f.meta {
        render_parameters(h, meta);
    }
    h.push_str("</section>\n");
}

fn render_checks(h: &mut String, checks: &[Check]) {
    if checks.is_empty() {
        h.push_str("<p class=\"missing\">checks.json lists no checks.</p>\n");
        return;
    }
    let claims = checks.iter().any(|c| c.paper_claim.is_some());
    h.push_str("<table class=\"verdicts\">\n<tr><th>verdict</th><th>check</th><th>measured</th><th>bound</th>");
    if claims {
        h.push_str("<th>the paper states</th>");
    }
    h.push_str("</tr>\n");
    for c in checks {
        let (class, verdict) = if c.pass {
            ("pass", "PASS")
        } else {
            ("fail", "FAIL")
        };
        let _ = write!(
            h,
            "<tr class=\"{class}\"><td class=\"verdict\">{verdict}</td><td>{}",
            esc(&c.name)
        );
        if let Some(note) = &c.note {
            let _ = write!(h, "<span class=\"note\">{}</span>", esc(note));
        }
        let _ = write!(
            h,
            "</td><td class=\"num\" title=\"{:?}\">{}</td><td class=\"num\">{}</td>",
            c.measured,
            esc(&fmt_num(c.measured)),
            esc(&bound_text(c))
        );
        if claims {
            let claim = c.paper_claim.as_deref().unwrap_or("");
            let cell = if claim.is_empty() {
                ""
            } else {
                " class=\"claim-cell\""
            };
            let _ = write!(h, "<td{cell}>{}</td>", esc(claim));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

/// The bound with mathematical relation signs, e.g. "≤ 1.0000e-7" or "∈ [0.5, 2]".
fn bound_text(c: &Check) -> String {
    match c.relation {
        Relation::AtMost => format!("≤ {}", fmt_num(c.bound)),
        Relation::AtLeast => format!("≥ {}", fmt_num(c.bound)),
        Relation::Within => format!(
            "∈ [{}, {}]",
            fmt_num(c.bound),
            fmt_num(c.upper.unwrap_or(f64::NAN))
        ),
    }
}

/// The provenance of a run (or sweep), collapsed: file, seed, overrides, solver, parameters,
/// check thresholds, derived quantities and, for sweeps, the grid.
fn render_parameters(h: &mut String, meta: &Value) {
    let seed = meta["seed"]
        .as_u64()
        .map_or("?".to_string(), |s| s.to_string());
    let method = meta["solver"]["method"].as_str().unwrap_or("?");
    let _ = writeln!(
        h,
        "<details><summary>Parameters, seed {}, solver {}</summary>",
        esc(&seed),
        esc(method)
    );
    let run: Vec<(String, String)> = ["file", "seed", "quick", "overrides", "crate_version"]
        .iter()
        .filter(|k| !meta[**k].is_null())
        .map(|k| (k.to_string(), value_text(&meta[*k])))
        .collect();
    kv_table(h, "run", run);
    for (key, heading) in [
        ("solver", "solver"),
        ("params", "parameters"),
        ("check_thresholds", "check thresholds"),
        ("checks", "check thresholds"),
        ("spec", "sweep"),
        ("derived", "derived quantities"),
    ] {
        let mut rows = Vec::new();
        flatten("", &meta[key], &mut rows);
        kv_table(h, heading, rows);
    }
    h.push_str("</details>\n");
}

fn kv_table(h: &mut String, heading: &str, rows: Vec<(String, String)>) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(h, "<table><tr><th colspan=\"2\">{}</th></tr>", esc(heading));
    for (k, v) in rows {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td></tr>",
            esc(&k),
            esc(&v)
        );
    }
    h.push_str("</table>\n");
}

/// Nested objects as dotted keys (`init.scale`); other values as compact text.
fn flatten(prefix: &str, v: &Value, rows: &mut Vec<(String, String)>) {
    match v {
        Value::Null => {}
        Value::Object(map) => {
            for (k, child) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, child, rows);
            }
        }
        _ => rows.push((prefix.to_string(), value_text(v))),
    }
}

/// A value as one short line: strings without quotes, long arrays cut (the JSON file has all).
fn value_text(v: &Value) -> String {
    const MAX_CHARS: usize = 160;
    let text = match v {
        Value::String(s) => s.clone(),
        _ => v.to_string(),
    };
    if text.chars().count() > MAX_CHARS {
        let cut: String = text.chars().take(MAX_CHARS).collect();
        format!("{cut} … (see the JSON file)")
    } else {
        text
    }
}

/// "1 scenario", "2 scenarios".
fn counted(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// HTML-escapes text for element content and quoted attribute values.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

/// A relative path as a URL: every byte outside the unreserved set (and `/`) percent-encoded,
/// so names with spaces, `#` or `?` still link to their file.
fn href(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

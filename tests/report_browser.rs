//! The report opens in a real browser with every figure visible: a few fast scenarios (one per
//! paper, one of them a sweep) run into a temporary folder, `attnflow report` writes its
//! index.html, and headless Chromium loads it.
//!
//! Chromium is driven by its command-line flags alone (no DevTools client crate):
//! - `--dump-dom` on a test-only copy of the page with a probe script inserted first in <head>:
//!   on window load it writes into <body> how many <img> loaded (naturalWidth > 0) out of how
//!   many, and every console error and error event (script errors, failed resource loads) seen
//!   since the page started. The report itself has no script: the probe is the test's, so the
//!   copy sits beside index.html (same relative links) and the real page stays script-free.
//! - `--enable-logging=stderr` prints every console message of the page as a `CONSOLE` line; the
//!   report has no script, so any such line from it is a browser complaint and fails the test.
//! - `--screenshot` renders the real page into report.png (the test checks it is a non-empty
//!   PNG; set ATTNFLOW_KEEP_REPORT=1 to keep the folder and look at it).
//!
//! Chromium is Debian's `chromium` package: installed with apt-get when missing (the tests run as
//! root in CI); if it cannot be installed the test prints why and passes without checking.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Fast configurations, one per paper; stage-times is a sweep (with a reduction).
const SCENARIOS: [&str; 5] = [
    "thm2-trajectory",
    "nuclear-svm",
    "lemma1-softmax-jacobian",
    "wsvm-kkt",
    "stage-times",
];

/// Flags that let Chromium run headless as root in a container without touching the network.
const CHROMIUM_FLAGS: [&str; 10] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
];

/// Inserted first in the test copy's <head>; reports through the DOM that --dump-dom prints.
const PROBE: &str = r#"<script>
(() => {
  const errors = [];
  const consoleError = console.error;
  console.error = (...args) => { errors.push(args.map(String).join(" ")); consoleError.apply(console, args); };
  window.addEventListener("error", (e) => {
    const t = e.target;
    errors.push(e.message || "failed to load " + (t && (t.src || t.href || t.tagName)));
  }, true);
  window.addEventListener("load", () => {
    const images = Array.from(document.images);
    const loaded = images.filter((i) => i.complete && i.naturalWidth > 0).length;
    document.body.setAttribute("data-probe-images", loaded + "/" + images.length);
    document.body.setAttribute("data-probe-errors", JSON.stringify(errors));
  });
})();
</script>"#;

#[test]
fn the_report_opens_in_chromium_with_every_figure_loaded_and_no_console_error() {
    let Some(chromium) = chromium() else {
        return;
    };
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut run = vec!["run", "--quick", "--out", out.to_str().unwrap()];
    run.extend(SCENARIOS);
    attnflow(&run);
    attnflow(&["report", "--out", out.to_str().unwrap()]);
    let index = out.join("index.html");
    let page = std::fs::read_to_string(&index).unwrap();
    let figures = page.matches("<img ").count();
    assert!(figures >= SCENARIOS.len(), "{figures} figures in the page");

    let probe_page = out.join("index.probe.html");
    let probed = page.replacen("<head>", &format!("<head>\n{PROBE}"), 1);
    std::fs::write(&probe_page, probed).unwrap();
    let dump = browse(&chromium, tmp.path(), &probe_page, "--dump-dom", "dom");
    let images = attribute(&dump.stdout, "data-probe-images")
        .unwrap_or_else(|| panic!("the probe did not run; stderr:\n{}", dump.stderr));
    assert_eq!(
        images,
        format!("{figures}/{figures}"),
        "images loaded / in the page"
    );
    let errors = attribute(&dump.stdout, "data-probe-errors").unwrap();
    assert_eq!(errors, "[]", "errors seen by the page");

    let png = tmp.path().join("report.png");
    let shot = format!("--screenshot={}", png.display());
    let screenshot = browse(&chromium, tmp.path(), &index, &shot, "shot");
    let bytes = std::fs::read(&png).unwrap_or_default();
    assert!(
        bytes.len() > 10_000 && bytes.starts_with(b"\x89PNG"),
        "screenshot {}: {} bytes",
        png.display(),
        bytes.len()
    );
    for log in [&dump.stderr, &screenshot.stderr] {
        let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "console messages: {console:#?}");
    }
    println!(
        "report: {figures}/{figures} figures loaded, no console error; screenshot {} ({} bytes); \
         {:.1} s",
        png.display(),
        bytes.len(),
        started.elapsed().as_secs_f64()
    );
    if std::env::var_os("ATTNFLOW_KEEP_REPORT").is_some() {
        println!("kept {}", tmp.keep().display());
    }
}

#[test]
fn a_report_of_a_missing_or_empty_folder_exits_2_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    for (dir, reason) in [
        ("missing", "cannot read the output folder"),
        ("", "no scenario outputs"),
    ] {
        let dir = tmp.path().join(dir);
        let o = cli(&["report", "--out", dir.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&dir.display().to_string()) && stderr.contains(reason),
            "{stderr}"
        );
        assert!(!dir.join("index.html").exists());
    }
}

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// Runs the CLI from the crate's scenario folder; panics with its stderr if it fails.
fn attnflow(args: &[&str]) {
    let o = cli(args);
    assert!(
        o.status.success(),
        "attnflow {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// What one Chromium run printed.
struct Browsed {
    stdout: String,
    stderr: String,
}

/// Opens `page` in headless Chromium with one action flag (`--dump-dom`, `--screenshot=…`);
/// a fresh profile per run, output into files (a dumped DOM can exceed a pipe's buffer), and a
/// time limit so a hung browser fails the test instead of blocking it.
fn browse(chromium: &Path, tmp: &Path, page: &Path, action: &str, label: &str) -> Browsed {
    const LIMIT: Duration = Duration::from_secs(120);
    let profile = tmp.join(format!("profile-{label}"));
    let (stdout, stderr) = (
        tmp.join(format!("{label}.out")),
        tmp.join(format!("{label}.err")),
    );
    let mut child = Command::new(chromium)
        .args(CHROMIUM_FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--window-size=1280,2400")
        .arg(action)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap())
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    let status: ExitStatus = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("chromium {action} did not finish in {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
    let browsed = Browsed {
        stdout: read(&stdout),
        stderr: read(&stderr),
    };
    assert!(
        status.success(),
        "chromium {action}: {status}\n{}",
        browsed.stderr
    );
    browsed
}

/// The value of `name="…"` in the dumped DOM (the probe writes plain text without quotes).
fn attribute(dom: &str, name: &str) -> Option<String> {
    let start = dom.find(&format!("{name}=\""))? + name.len() + 2;
    let len = dom[start..].find('"')?;
    Some(dom[start..start + len].replace("&quot;", "\""))
}

/// Chromium's executable: on the PATH, or installed now with apt-get; `None` (with the reason
/// printed) when it cannot be installed, and the test then checks nothing.
fn chromium() -> Option<PathBuf> {
    if let Some(found) = on_path() {
        return Some(found);
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    let install = ["install", "-y", "chromium"];
    let mut result = apt(&install);
    if !matches!(&result, Ok(o) if o.status.success()) {
        // a fresh container has no package lists yet
        let _ = apt(&["update"]);
        result = apt(&install);
    }
    let found = on_path();
    if found.is_none() {
        let why = match result {
            Err(e) => format!("apt-get cannot run: {e}"),
            Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        println!("SKIPPED: Chromium is not installed and could not be installed: {why}");
    }
    found
}

fn on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|p| p.is_file())
}

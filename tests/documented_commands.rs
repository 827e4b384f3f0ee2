//! Every command line the documentation shows runs and ends as documented.
//!
//! Sources:
//! - README.md: every line inside a ``` fence that starts with `attnflow ` or `$ attnflow `
//!   (`\` continuations joined, trailing `# comments` dropped; a `$ ` line followed by `error:`
//!   lines documents a refusal: exit 2 and that message on stderr); the cluster recipes (a Slurm
//!   array over `${SLURM_ARRAY_TASK_ID}`, GNU parallel over `{}`), each task in order, then the
//!   merge (a `# after …: attnflow …` comment of the recipe) with its glob expanded, all in one
//!   folder; and every inline `` `attnflow …` `` span that is a complete command. Synopses (a
//!   placeholder such as DIR, PATH, K/N or `<name>`, or a subcommand named alone) are listed and
//!   counted, not run; every subcommand has a concrete example that is run.
//! - every scenario file: each `# Explore: attnflow …` line (one complete command; a long one
//!   continues on the next comment line after a trailing `\`; values with `[`, `{`, `*` quoted,
//!   as a shell needs). A note before the colon, `# Explore (note): …`, says what happens when it
//!   is not "every check passes": its tags before the first colon, `checks fail` (exit 1), `run
//!   fails` (3) or `refused` (2), and `heavy` (minutes even in the fast configuration); any
//!   other note is commentary.
//!
//! Each command runs with the crate's binary in a temporary folder where `scenarios/` links to
//! the shipped scenario folder (the commands name scenarios by name or by `scenarios/…` path, as
//! a user in the repository does), unchanged except that `run` and `check` get `--quick`: the
//! fast configurations keep the whole test to a few minutes on 2 cores. The full configurations
//! of the shipped scenarios are what the main job (`attnflow run --all`) runs; here a `run` of
//! named scenarios is also validated in its full configuration (`describe` with the same
//! options: a refusal there is what a user would meet), and a heavy one only validated.
//! `documented_commands_full` (ignored: tens of minutes) runs every command exactly as written,
//! heavy ones included.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// How a documented command should end.
#[derive(Clone, Debug, PartialEq)]
struct Expect {
    code: i32,
    /// Text that stderr must contain (a documented error message).
    message: Option<String>,
}

impl Expect {
    const SUCCESS: Expect = Expect {
        code: 0,
        message: None,
    };
}

/// One command line as documented, and where.
#[derive(Clone, Debug)]
struct Step {
    source: String,
    line: String,
    expect: Expect,
    /// Documented as taking minutes even in its fast configuration: the quick test only
    /// validates its input (`describe` with the same options), the full test runs it.
    heavy: bool,
}

/// Steps that share one temporary folder, in order: a single command, or a recipe's tasks
/// followed by its merge.
#[derive(Debug)]
struct Job {
    steps: Vec<Step>,
    /// Other places that document the same single command.
    also: Vec<String>,
}

impl Job {
    fn single(step: Step) -> Job {
        Job {
            steps: vec![step],
            also: Vec::new(),
        }
    }
    /// Commands that run every scenario go first, recipes next: the longest jobs start early.
    fn weight(&self) -> usize {
        let runs_all = |s: &Step| {
            let w = words_of(&s.line);
            w.get(1).is_some_and(|c| c == "check") || w.iter().any(|x| x == "--all")
        };
        if self.steps.iter().any(runs_all) {
            2
        } else {
            usize::from(self.steps.len() > 1)
        }
    }
}

/// A documented span that is not a complete command.
struct Skipped {
    source: String,
    span: String,
    reason: String,
}

// ---------------------------------------------------------------------------------------------
// shell words

/// A word of a command line; `glob` when it holds an unquoted `*`, `?`, `[` or `{` (a pattern
/// or brace expansion of the shell).
#[derive(Clone, Debug, PartialEq)]
struct Word {
    text: String,
    glob: bool,
}

/// Splits a command line like a POSIX shell: whitespace separates words, '…' is literal, "…"
/// honours \" \\ \$ \`, a backslash outside quotes escapes the next character, an unquoted
/// `#` at the start of a word begins a comment, an unquoted `|` is a word of its own.
fn shell_words(line: &str) -> Result<Vec<Word>, String> {
    let mut words = Vec::new();
    let mut current: Option<Word> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(current.take()),
            '#' if current.is_none() => break,
            '|' => {
                words.extend(current.take());
                words.push(Word {
                    text: "|".into(),
                    glob: false,
                });
            }
            _ => {
                let word = current.get_or_insert(Word {
                    text: String::new(),
                    glob: false,
                });
                match c {
                    '\'' => loop {
                        match chars.next() {
                            Some('\'') => break,
                            Some(q) => word.text.push(q),
                            None => return Err(format!("unclosed ' in {line}")),
                        }
                    },
                    '"' => loop {
                        match chars.next() {
                            Some('"') => break,
                            Some('\\') if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                                word.text.push(chars.next().unwrap())
                            }
                            Some(q) => word.text.push(q),
                            None => return Err(format!("unclosed \" in {line}")),
                        }
                    },
                    '\\' => word.text.extend(chars.next()),
                    '*' | '?' | '[' | '{' => {
                        word.glob = true;
                        word.text.push(c);
                    }
                    _ => word.text.push(c),
                }
            }
        }
    }
    words.extend(current);
    Ok(words)
}

/// The words of a line, for classification only (malformed lines give none).
fn words_of(line: &str) -> Vec<String> {
    shell_words(line)
        .map(|w| w.into_iter().map(|w| w.text).collect())
        .unwrap_or_default()
}

/// Expands a `dir/*` glob in `cwd` (the only form the documentation uses), sorted as a shell
/// sorts in the C locale.
fn expand_glob(word: &Word, cwd: &Path) -> Result<Vec<String>, String> {
    let Some(dir) = word.text.strip_suffix("/*").filter(|d| !d.contains('*')) else {
        return Err(format!("unsupported glob `{}`", word.text));
    };
    let mut names: Vec<String> = std::fs::read_dir(cwd.join(dir))
        .map_err(|e| format!("glob `{}`: {e}", word.text))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    names.sort();
    Ok(names)
}

// ---------------------------------------------------------------------------------------------
// README.md

/// Placeholders of a synopsis: `<…>` or a word in capitals (DIR, PATH, FILE, K/N).
fn placeholder(span: &str) -> Option<String> {
    if let Some(start) = span.find('<') {
        let end = span[start..]
            .find('>')
            .map_or(span.len(), |e| start + e + 1);
        return Some(span[start..end].to_string());
    }
    span.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .find(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase()))
        .map(str::to_string)
}

/// Subcommands that need operands: named alone in prose they refer to the subcommand.
const NEED_OPERANDS: [&str; 4] = ["run", "merge", "describe", "flow"];

/// The values of a recipe's task variable, when the block is a recipe: (variable, first, last).
fn recipe_variable(block: &[(usize, String)]) -> Option<(&'static str, u32, u32)> {
    let range = |s: &str| -> Option<(u32, u32)> {
        let (a, b) = s.split_once(['-', ' '])?;
        Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
    };
    for (_, line) in block {
        if let Some(rest) = line
            .strip_prefix("#SBATCH")
            .and_then(|l| l.split("--array=").nth(1))
        {
            let (a, b) = range(rest.split_whitespace().next()?)?;
            return Some(("${SLURM_ARRAY_TASK_ID}", a, b));
        }
        if line.starts_with("parallel ") {
            let seq = line.split("::: $(seq ").nth(1)?.trim_end_matches(')');
            let (a, b) = range(seq)?;
            return Some(("{}", a, b));
        }
    }
    None
}

/// The command of a fence line: `attnflow …`, `$ attnflow …`, the quoted command of a
/// `parallel` line, or a `# when: attnflow …` comment (a step that follows the others).
fn fence_command(line: &str) -> Option<String> {
    let line = line.strip_prefix("$ ").unwrap_or(line);
    if line.starts_with("attnflow ") {
        return Some(line.to_string());
    }
    if line.starts_with("parallel ") {
        let start = line.find("'attnflow ")? + 1;
        let end = start + line[start..].find('\'')?;
        return Some(line[start..end].to_string());
    }
    if line.starts_with('#') {
        let (_, cmd) = line.split_once(": attnflow ")?;
        return Some(format!("attnflow {cmd}"));
    }
    None
}

/// Drops a trailing shell comment (`  # …`), keeping quoted text.
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double, mut prev_space) = (false, false, true);
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev_space && i > 0 => return line[..i].trim_end(),
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// The jobs of one fenced block of logical lines (continuations joined).
fn fence_jobs(block: &[(usize, String)]) -> Vec<Job> {
    let mut steps: Vec<(usize, String, Expect)> = Vec::new();
    for (k, (n, line)) in block.iter().enumerate() {
        let Some(cmd) = fence_command(line) else {
            continue;
        };
        let cmd = strip_comment(&cmd).to_string();
        // `$ command` then `error: …` lines: a documented refusal
        let errors: Vec<&str> = block[k + 1..]
            .iter()
            .map_while(|(_, l)| l.strip_prefix("error: ").map(|_| l.as_str()))
            .collect();
        let expect = if line.starts_with("$ ") && !errors.is_empty() {
            Expect {
                code: 2,
                message: Some(errors.join("\n")),
            }
        } else {
            Expect::SUCCESS
        };
        steps.push((*n, cmd, expect));
    }
    let step = |n: usize, line: String, expect: Expect| Step {
        source: format!("README.md:{n}"),
        line,
        expect,
        heavy: false,
    };
    // `a && b`: b runs after a succeeded, in a's folder; the documented outcome is b's
    let chain = |n: usize, line: &str, expect: &Expect| -> Vec<Step> {
        let parts: Vec<&str> = line.split(" && ").map(str::trim).collect();
        let last = parts.len() - 1;
        parts
            .into_iter()
            .enumerate()
            .map(|(k, part)| {
                let e = if k == last {
                    expect.clone()
                } else {
                    Expect::SUCCESS
                };
                step(n, part.to_string(), e)
            })
            .collect()
    };
    match recipe_variable(block) {
        None => steps
            .into_iter()
            .map(|(n, line, expect)| {
                let steps = chain(n, &line, &expect);
                if steps.len() == 1 {
                    Job::single(steps.into_iter().next().expect("one step"))
                } else {
                    Job {
                        steps,
                        also: Vec::new(),
                    }
                }
            })
            .collect(),
        Some((var, first, last)) => {
            // the tasks for every value in order, then what follows them, in one folder
            let (tasks, after): (Vec<_>, Vec<_>) =
                steps.into_iter().partition(|(_, l, _)| l.contains(var));
            let mut recipe = Vec::new();
            for v in first..=last {
                for (n, line, expect) in &tasks {
                    let line = line.replace(var, &v.to_string());
                    recipe.push(step(*n, line, expect.clone()));
                }
            }
            recipe.extend(after.iter().flat_map(|(n, l, e)| chain(*n, l, e)));
            vec![Job {
                steps: recipe,
                also: Vec::new(),
            }]
        }
    }
}

/// The commands README.md documents, and the spans it shows that are not complete commands.
fn readme_jobs() -> (Vec<Job>, Vec<Skipped>) {
    let text = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let mut jobs = Vec::new();
    let mut skipped = Vec::new();
    let mut block: Option<Vec<(usize, String)>> = None;
    // prose outside fences, one paragraph at a time: (first line number, text)
    let mut paragraphs: Vec<(usize, String)> = Vec::new();
    let mut new_paragraph = true;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if raw.starts_with("```") {
            match block.take() {
                Some(b) => jobs.extend(fence_jobs(&b)),
                None => block = Some(Vec::new()),
            }
            new_paragraph = true;
            continue;
        }
        if let Some(b) = block.as_mut() {
            // a continuation joins the previous logical line
            match b.last_mut() {
                Some((_, prev)) if prev.ends_with('\\') => {
                    prev.pop();
                    prev.push(' ');
                    prev.push_str(raw.trim());
                }
                _ => b.push((n, raw.trim_end().to_string())),
            }
            continue;
        }
        if raw.trim().is_empty() {
            new_paragraph = true;
        } else if new_paragraph {
            paragraphs.push((n, raw.to_string()));
            new_paragraph = false;
        } else if let Some((_, p)) = paragraphs.last_mut() {
            p.push('\n');
            p.push_str(raw);
        }
    }
    for (first, p) in paragraphs {
        for (k, span) in p.split('`').enumerate().filter(|(k, _)| k % 2 == 1) {
            let offset: usize = p.split('`').take(k).map(|s| s.len() + 1).sum();
            let n = first + p[..offset].matches('\n').count();
            let span = span.split_whitespace().collect::<Vec<_>>().join(" ");
            if !span.starts_with("attnflow ") {
                continue;
            }
            let source = format!("README.md:{n}");
            let words = words_of(&span);
            if let Some(p) = placeholder(&span) {
                let reason = format!("synopsis (placeholder {p})");
                skipped.push(Skipped {
                    source,
                    span,
                    reason,
                });
            } else if words.len() == 2 && NEED_OPERANDS.contains(&words[1].as_str()) {
                let reason = "names the subcommand".to_string();
                skipped.push(Skipped {
                    source,
                    span,
                    reason,
                });
            } else {
                jobs.push(Job::single(Step {
                    source,
                    line: span,
                    expect: Expect::SUCCESS,
                    heavy: false,
                }));
            }
        }
    }
    (jobs, skipped)
}

// ---------------------------------------------------------------------------------------------
// scenario files

/// What a note announces before its first colon, as comma-separated tags: the exit code
/// (`checks fail` 1, `refused` 2, `run fails` 3, else 0) and whether the command is `heavy`.
fn expected_by_note(note: &str) -> (i32, bool) {
    let head = note.split(':').next().unwrap_or("");
    let tags: Vec<&str> = head.split(',').map(str::trim).collect();
    let code = [("checks fail", 1), ("refused", 2), ("run fails", 3)]
        .into_iter()
        .find(|(tag, _)| tags.contains(tag))
        .map_or(0, |(_, code)| code);
    (code, tags.contains(&"heavy"))
}

/// Parses `# Explore: cmd` / `# Explore (note): cmd` (with `\` continuations) at `lines[i]`.
fn explore_step(lines: &[&str], i: usize, source: String) -> Result<Step, String> {
    let bad = |why: &str| format!("{source}: {why}: {}", lines[i]);
    let rest = lines[i]
        .strip_prefix("# Explore")
        .ok_or_else(|| bad("a comment that mentions Explore must start `# Explore`"))?;
    let (note, rest) = match rest.strip_prefix(" (") {
        Some(inner) => {
            // the note may hold parentheses of its own
            let mut depth = 1;
            let end = inner
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map(|(k, _)| k)
                .ok_or_else(|| bad("unclosed note"))?;
            (Some(&inner[..end]), &inner[end + 1..])
        }
        None => (None, rest),
    };
    let mut line = rest
        .strip_prefix(": ")
        .ok_or_else(|| bad("expected `: ` after Explore or its note"))?
        .trim_end()
        .to_string();
    let mut k = i;
    while line.ends_with('\\') {
        k += 1;
        let next = lines
            .get(k)
            .and_then(|l| l.strip_prefix('#'))
            .ok_or_else(|| bad("a `\\` continuation needs a comment line after it"))?;
        line.pop();
        line = format!("{} {}", line.trim_end(), next.trim());
    }
    if !line.starts_with("attnflow ") {
        return Err(bad("the command must start `attnflow `"));
    }
    match shell_words(&line) {
        Err(e) => return Err(bad(&e)),
        Ok(w) if w.iter().any(|w| w.glob) => {
            return Err(bad(
                "quote values with * ? [ {: a shell expands them (zsh refuses)",
            ))
        }
        Ok(_) => {}
    }
    let (code, heavy) = note.map_or((0, false), expected_by_note);
    Ok(Step {
        source,
        line,
        expect: Expect {
            code,
            message: None,
        },
        heavy,
    })
}

/// Every `Explore` command of every scenario file, or the malformed lines.
fn explore_jobs() -> Result<Vec<Job>, Vec<String>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "toml") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&Path::new(ROOT).join("scenarios"), &mut files);
    let (mut jobs, mut errors) = (Vec::new(), Vec::new());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let name = f.strip_prefix(ROOT).unwrap().to_string_lossy();
        let name = name.trim_start_matches('/');
        for (i, l) in lines.iter().enumerate() {
            if l.contains("Explore") {
                match explore_step(&lines, i, format!("{name}:{}", i + 1)) {
                    Ok(step) => jobs.push(Job::single(step)),
                    Err(e) => errors.push(e),
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(jobs)
    } else {
        Err(errors)
    }
}

// ---------------------------------------------------------------------------------------------
// running

/// A documented command split into the binary's arguments (globs expanded in `cwd`) and the
/// `head -N` that reads its output, if piped.
fn arguments(line: &str, cwd: &Path) -> Result<(Vec<String>, Option<usize>), String> {
    let words = shell_words(line)?;
    let (command, pipe) = match words.iter().position(|w| w.text == "|") {
        Some(k) => (&words[..k], Some(&words[k + 1..])),
        None => (&words[..], None),
    };
    let head = match pipe.map(|p| p.iter().map(|w| w.text.as_str()).collect::<Vec<_>>()) {
        None => None,
        Some(p) => match p.as_slice() {
            ["head", n] => Some(
                n.trim_start_matches('-')
                    .parse()
                    .map_err(|_| format!("`head {n}`"))?,
            ),
            other => return Err(format!("unsupported pipe into {other:?}")),
        },
    };
    let mut args = Vec::new();
    for w in &command[1..] {
        if w.glob {
            args.extend(expand_glob(w, cwd)?);
        } else {
            args.push(w.text.clone());
        }
    }
    Ok((args, head))
}

/// Options of `run` that take a value.
const VALUED: [&str; 6] = ["--set", "--seed", "--solver", "--dir", "--out", "--shard"];

/// For a `run` of named scenarios: one `describe` per scenario with the same overrides, which
/// loads and validates its full configuration (exit 2 on bad input) without running it.
fn validations(args: &[String]) -> Vec<Vec<String>> {
    if args.first().map(String::as_str) != Some("run") || args.iter().any(|a| a == "--all") {
        return Vec::new();
    }
    let (mut names, mut options) = (Vec::new(), Vec::new());
    let mut rest = args[1..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--out" | "--shard" => {
                rest.next();
            }
            "--resume" => {}
            o if VALUED.contains(&o) => {
                options.push(a.clone());
                options.extend(rest.next().cloned());
            }
            o if o.starts_with("--") => options.push(a.clone()),
            _ => names.push(a.clone()),
        }
    }
    names
        .into_iter()
        .map(|n| [vec!["describe".to_string(), n], options.clone()].concat())
        .collect()
}

/// Runs the binary with `args` in `cwd`, reading only `head` lines of its output if piped;
/// Err describes how it did not end with `code` (and `message` on stderr).
fn invoke(
    step: &Step,
    args: &[String],
    head: Option<usize>,
    cwd: &Path,
    code: i32,
) -> Result<(), String> {
    let ran = format!("attnflow {}", args.join(" "));
    let mut command = Command::new(env!("CARGO_BIN_EXE_attnflow"));
    command.args(args).current_dir(cwd).stdin(Stdio::null());
    let out = match head {
        None => command.output(),
        Some(n) => {
            // read n lines, then close the pipe as `head` does
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
            command.spawn().and_then(|mut child| {
                let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
                lines.by_ref().take(n).for_each(drop);
                drop(lines);
                child.wait_with_output()
            })
        }
    }
    .map_err(|e| format!("{}: `{ran}`: {e}", step.source))?;
    // messages name scenario files as given; strip an absolute prefix, if any
    let stderr = String::from_utf8_lossy(&out.stderr)
        .replace(&format!("{}/", cwd.display()), "")
        .replace(&format!("{ROOT}/"), "");
    let got = out.status.code().unwrap_or(-1);
    let message = step.expect.message.as_deref().filter(|_| code == 2);
    let message_ok = message.is_none_or(|m| stderr.contains(m));
    if got == code && message_ok {
        return Ok(());
    }
    let mut why = format!(
        "{}: `{}`\n    ran `{ran}`: exit {got}, expected {code}",
        step.source, step.line
    );
    if let Some(m) = message.filter(|_| !message_ok) {
        why += &format!("\n    documented message not printed: {m}");
    }
    let lines: Vec<&str> = stderr.lines().collect();
    for l in &lines[lines.len().saturating_sub(6)..] {
        why += &format!("\n    | {l}");
    }
    Err(why)
}

/// Runs one step in `cwd`. In quick mode a `run` of named scenarios is first validated in its
/// full configuration (a refusal there is what a user would meet), then run with `--quick`
/// unless it is heavy; `run` and `check` of everything get `--quick` too.
fn run_step(step: &Step, cwd: &Path, quick: bool) -> Result<(), String> {
    let (mut args, head) = arguments(&step.line, cwd)?;
    if quick {
        let accepted = if step.expect.code == 2 { 2 } else { 0 };
        for describe in validations(&args) {
            invoke(step, &describe, None, cwd, accepted)?;
        }
        if step.heavy {
            return match validations(&args).is_empty() {
                true => Err(format!(
                    "{}: a heavy command must run named scenarios",
                    step.source
                )),
                false => Ok(()),
            };
        }
        let runs = matches!(args.first().map(String::as_str), Some("run" | "check"));
        if runs && !args.iter().any(|a| a == "--quick") {
            args.push("--quick".into());
        }
    }
    invoke(step, &args, head, cwd, step.expect.code)
}

/// Runs a job's steps in a fresh folder where `scenarios` links to the shipped scenarios.
fn run_job(job: &Job, quick: bool) -> Result<(), String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::os::unix::fs::symlink(
        Path::new(ROOT).join("scenarios"),
        tmp.path().join("scenarios"),
    )
    .map_err(|e| e.to_string())?;
    job.steps
        .iter()
        .try_for_each(|s| run_step(s, tmp.path(), quick))
}

/// Every documented job, identical single commands merged (README shows some twice).
fn all_jobs() -> (Vec<Job>, Vec<Skipped>) {
    let (readme, skipped) = readme_jobs();
    let explore = explore_jobs().unwrap_or_else(|errors| {
        panic!(
            "malformed Explore lines (expected `# Explore: attnflow …` or `# Explore (note): \
             attnflow …`):\n{}",
            errors.join("\n")
        )
    });
    let mut jobs: Vec<Job> = Vec::new();
    for job in readme.into_iter().chain(explore) {
        let same = |j: &&mut Job| {
            j.steps.len() == 1
                && job.steps.len() == 1
                && j.steps[0].line == job.steps[0].line
                && j.steps[0].expect == job.steps[0].expect
        };
        match jobs.iter_mut().find(same) {
            Some(j) => j.also.push(job.steps[0].source.clone()),
            None => jobs.push(job),
        }
    }
    jobs.sort_by_key(|j| std::cmp::Reverse(j.weight()));
    (jobs, skipped)
}

/// Runs every job on as many threads as there are cores and fails with the list of every
/// command that did not behave as documented.
fn run_all(quick: bool) {
    let start = Instant::now();
    let (jobs, skipped) = all_jobs();
    let steps: usize = jobs.iter().map(|j| j.steps.len()).sum();
    println!(
        "{} documented commands ({} jobs); {} spans skipped:",
        steps,
        jobs.len(),
        skipped.len()
    );
    for s in &skipped {
        println!("  {}: `{}`: {}", s.source, s.span, s.reason);
    }
    if quick {
        let heavy: Vec<&Step> = jobs
            .iter()
            .flat_map(|j| &j.steps)
            .filter(|s| s.heavy)
            .collect();
        println!("{} heavy commands, validated only:", heavy.len());
        for s in heavy {
            println!("  {}: `{}`", s.source, s.line);
        }
    }
    // a concrete, tested example of every subcommand
    for sub in [
        "list", "describe", "run", "check", "merge", "report", "flow",
    ] {
        let tested = jobs
            .iter()
            .flat_map(|j| &j.steps)
            .any(|s| words_of(&s.line).get(1).is_some_and(|w| w == sub));
        assert!(tested, "no documented example of `attnflow {sub}` is run");
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = AtomicUsize::new(0);
    // (job index, its time, its verdict)
    type Outcome = (usize, Duration, Result<(), String>);
    let results: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let t = Instant::now();
                let result = run_job(job, quick);
                results.lock().unwrap().push((i, t.elapsed(), result));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(_, d, _)| std::cmp::Reverse(*d));
    println!("slowest jobs:");
    for (i, d, _) in results.iter().take(8) {
        let job = &jobs[*i];
        let what = match job.steps.len() {
            1 => format!("`{}`", job.steps[0].line),
            n => format!("recipe of {n} steps"),
        };
        println!(
            "  {:>6.1} s  {}: {what}",
            d.as_secs_f64(),
            job.steps[0].source
        );
    }
    let failures: Vec<String> = results
        .iter()
        .filter_map(|(i, _, r)| {
            r.as_ref().err().map(|e| match jobs[*i].also.as_slice() {
                [] => e.clone(),
                also => format!("{e}\n    (also documented at {})", also.join(", ")),
            })
        })
        .collect();
    println!(
        "{} of {} jobs behaved as documented in {:.1} s",
        jobs.len() - failures.len(),
        jobs.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} documented commands did not behave as documented:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn documented_commands_behave_as_documented() {
    run_all(true);
}

/// The same commands exactly as written (full configurations, including the ones that take
/// minutes): `cargo test --release --test documented_commands -- --ignored`.
#[test]
#[ignore]
fn documented_commands_full() {
    run_all(false);
}

#[test]
fn shell_words_split_like_a_shell() {
    let w = words_of(r#"attnflow run x --set 'a=[1, 2]' --set b="c d" --set e='"f"' e\ g  # note"#);
    assert_eq!(
        w,
        [
            "attnflow", "run", "x", "--set", "a=[1, 2]", "--set", "b=c d", "--set", "e=\"f\"",
            "e g"
        ]
    );
    let w = shell_words("attnflow merge shards/* --out o | head -1").unwrap();
    assert!(w[2].glob && !w[3].glob);
    assert!(shell_words("attnflow run x --set a=[1]").unwrap()[4].glob);
    assert!(!shell_words("attnflow run x --set 'a=[1]'").unwrap()[4].glob);
    assert_eq!(w[5].text, "|");
}

#[test]
fn explore_lines_parse_with_notes_and_continuations() {
    let lines = [
        "# Explore (checks fail: c_k (the constant) is best): attnflow run a --set x=1 \\",
        "#          --set y=2",
    ];
    let s = explore_step(&lines, 0, "f:1".into()).unwrap();
    assert_eq!(s.line, "attnflow run a --set x=1 --set y=2");
    assert_eq!(s.expect.code, 1);
    assert!(explore_step(&["# Explore: --set x=1"], 0, "f:1".into()).is_err());
    assert!(explore_step(&["# see Explore: attnflow run a"], 0, "f:1".into()).is_err());
    assert!(explore_step(&["# Explore: attnflow run a --set b=[1]"], 0, "f:1".into()).is_err());
    assert_eq!(expected_by_note("heavy: minutes"), (0, true));
    assert_eq!(expected_by_note("heavy, checks fail: slow"), (1, true));
    assert_eq!(expected_by_note("run fails: diverges"), (3, false));
    assert_eq!(expected_by_note("stiff: κ ≈ δ²"), (0, false));
}

//! Property tests of the scenario parser and the `--set` overrides: whatever a scenario file or
//! an override holds, loading and validating it never panics, and every rejection names the file,
//! a key and a reason. The inputs are the shipped scenarios, mutated (values replaced by
//! arbitrary TOML of any type, unknown keys added, lines dropped or garbled), and arbitrary
//! `key=value` overrides; validation runs no scenario, so each case costs microseconds.
//! The CLI half checks the exit code 2 and that nothing is written.

use std::path::{Path, PathBuf};
use std::process::Command;

use attnflow::scenario::run::{load_and_validate, scenario_files};
use attnflow::scenario::{InputError, Overrides};
use proptest::prelude::*;

/// A fixed RNG seed keeps CI reproducible (set `PROPTEST_CASES` higher locally to search more;
/// 20 000 cases per property found nothing when this was written).
fn fixed(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(2002),
        ..ProptestConfig::default()
    }
}

fn shipped() -> Vec<PathBuf> {
    scenario_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
}

/// Any TOML value, including the awkward ones: NaN, infinities, negative and huge integers,
/// empty and nested arrays, inline tables, strings that look like numbers.
fn toml_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        (-3i64..40).prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|x| format!("{x:?}")),
        Just("nan".to_string()),
        Just("-inf".to_string()),
        Just("0.0".to_string()),
        Just("1e308".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        "[a-z0-9_]{0,8}".prop_map(|s| format!("\"{s}\"")),
        Just("\"1.5\"".to_string()),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec(("[a-z]{1,6}", inner), 0..3).prop_map(|kv| {
                let body: Vec<String> = kv.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", body.join(", "))
            }),
        ]
    })
}

/// A line-level mutation of a scenario file.
#[derive(Debug, Clone)]
enum Mutation {
    /// Replace the value of the k-th `key = value` line.
    Replace(usize, String),
    /// Insert a `key = value` line after the k-th line.
    Insert(usize, String, String),
    /// Drop the k-th line.
    Drop(usize),
    /// Overwrite the k-th line with arbitrary text.
    Garble(usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), toml_value()).prop_map(|(k, v)| Mutation::Replace(k, v)),
        2 => (any::<usize>(), "[a-z_.]{1,12}", toml_value())
            .prop_map(|(k, key, v)| Mutation::Insert(k, key, v)),
        1 => any::<usize>().prop_map(Mutation::Drop),
        1 => (any::<usize>(), "\\PC{0,20}").prop_map(|(k, s)| Mutation::Garble(k, s)),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for m in mutations {
        if lines.is_empty() {
            break;
        }
        match m {
            Mutation::Replace(k, v) => {
                let assignments: Vec<usize> = (0..lines.len())
                    .filter(|&i| {
                        !lines[i].trim_start().starts_with('#') && lines[i].contains(" = ")
                    })
                    .collect();
                if let Some(&i) = assignments.get(k % assignments.len().max(1)) {
                    let key = lines[i].split(" = ").next().unwrap().to_string();
                    lines[i] = format!("{key} = {v}");
                }
            }
            Mutation::Insert(k, key, v) => {
                let i = k % (lines.len() + 1);
                lines.insert(i, format!("{key} = {v}"));
            }
            Mutation::Drop(k) => {
                let i = k % lines.len();
                lines.remove(i);
            }
            Mutation::Garble(k, s) => {
                let i = k % lines.len();
                lines[i] = s.clone();
            }
        }
    }
    lines.join("\n") + "\n"
}

/// A rejection must say where (the file), what (a key) and why (a reason).
fn assert_names_file_key_reason(e: &InputError, path: &Path) -> Result<(), TestCaseError> {
    prop_assert_eq!(&e.file, &path.display().to_string());
    prop_assert!(!e.key.trim().is_empty(), "no key in {}", e);
    prop_assert!(!e.reason.trim().is_empty(), "no reason in {}", e);
    Ok(())
}

proptest! {
    #![proptest_config(fixed(3000))]

    /// Mutated shipped scenario files: validation returns Ok or a named rejection, never panics.
    #[test]
    fn mutated_files_are_accepted_or_refused_by_name(
        pick in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 1..4),
        quick in any::<bool>(),
    ) {
        let files = shipped();
        let original = &files[pick % files.len()];
        let text = apply(&std::fs::read_to_string(original).unwrap(), &mutations);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(original.file_name().unwrap());
        std::fs::write(&path, &text).unwrap();
        let ov = Overrides { quick, ..Overrides::default() };
        if let Err(e) = load_and_validate(&path, &ov) {
            assert_names_file_key_reason(&e, &path)?;
        }
    }

    /// Arbitrary `--set key=value` on shipped scenarios: keys from the file's own parameters (so
    /// the value's type and range are exercised) or arbitrary dotted keys.
    #[test]
    fn arbitrary_overrides_are_accepted_or_refused_by_name(
        pick in any::<usize>(),
        key_pick in any::<usize>(),
        own_key in any::<bool>(),
        random_key in "[a-z_.]{0,14}",
        value in prop_oneof![4 => toml_value(), 1 => "\\PC{0,12}"],
    ) {
        let files = shipped();
        let path = &files[pick % files.len()];
        let key = if own_key {
            let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let params: Vec<String> = table
                .get("params")
                .and_then(|p| p.as_table())
                .map(|t| t.keys().cloned().collect())
                .unwrap_or_default();
            let mut keys: Vec<String> = params;
            keys.extend(["seed", "solver.rtol", "solver.method", "checks.x"].map(String::from));
            keys[key_pick % keys.len()].clone()
        } else {
            random_key
        };
        let ov = Overrides { set: vec![format!("{key}={value}")], ..Overrides::default() };
        if let Err(e) = load_and_validate(path, &ov) {
            assert_names_file_key_reason(&e, path)?;
        }
    }

    /// Arbitrary text as a whole scenario file.
    #[test]
    fn arbitrary_text_is_refused_by_name(text in "\\PC{0,200}") {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk.toml");
        std::fs::write(&path, &text).unwrap();
        if let Err(e) = load_and_validate(&path, &Overrides::default()) {
            assert_names_file_key_reason(&e, &path)?;
        }
    }
}

proptest! {
    // Each case starts a process: a few dozen are enough to tie the library's rejection to the
    // CLI's exit code 2, its message and the untouched output folder.
    #![proptest_config(fixed(24))]

    #[test]
    fn the_cli_refuses_bad_values_with_exit_2_and_writes_nothing(
        pick in any::<usize>(),
        value in prop_oneof![
            Just("nan".to_string()),
            Just("-1".to_string()),
            Just("\"text\"".to_string()),
            Just("[[]]".to_string()),
            Just("{ a = 1 }".to_string()),
        ],
    ) {
        let files = shipped();
        let path = &files[pick % files.len()];
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let Some(key) = table
            .get("params")
            .and_then(|p| p.as_table())
            .and_then(|t| t.keys().next().cloned())
        else {
            return Ok(());
        };
        // Only values the library refuses are CLI cases here (a −1 may be legal for some keys).
        let ov = Overrides { set: vec![format!("{key}={value}")], ..Overrides::default() };
        prop_assume!(load_and_validate(path, &ov).is_err());
        let tmp = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_attnflow"))
            .args(["run", path.to_str().unwrap(), "--out", "o", "--set"])
            .arg(format!("{key}={value}"))
            .current_dir(tmp.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        prop_assert_eq!(out.status.code(), Some(2), "{}", err);
        prop_assert!(err.contains(&path.display().to_string()) && err.contains(&key), "{}", err);
        prop_assert!(!tmp.path().join("o").exists());
    }
}

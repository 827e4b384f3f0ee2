//! The two assertions every `*_params` test makes about typed parameters: a value out of range
//! is refused while the scenario loads, naming the file, the key and the reason; and on the
//! command line with exit code 2 and nothing written.

use std::process::Command;

/// Each (scenario, override, key named, reason given) is refused on load as stated.
pub fn assert_refused_on_load(bad: &[(&str, &str, &str, &str)]) {
    for &(name, set, key, reason) in bad {
        let e = crate::common::load_error(name, &[set]);
        assert_eq!(e.key, key, "{name} --set {set}: {e}");
        assert!(e.reason.contains(reason), "{name} --set {set}: {e}");
        assert!(e.file.ends_with(&format!("{name}.toml")), "{e}");
    }
}

/// `attnflow run <name> --set <set>` exits 2, prints every `want` on stderr, writes nothing.
pub fn assert_cli_refuses(name: &str, set: &str, wants: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let o = Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(["run", name, "--set", set])
        .arg("--out")
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for want in wants {
        assert!(err.contains(want), "`{want}` missing in: {err}");
    }
    assert!(!out.exists(), "output written on bad input");
}

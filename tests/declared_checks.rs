//! Checks declared in a scenario file (`[[check]]`): on a derived quantity and on a column of
//! series.csv, compared with values computed here from the run's own files and the closed form;
//! a failing bound fails; bad entries are refused with their key, exit 2 and nothing written.

use std::path::Path;
use std::process::Output;

fn attnflow(args: &[&str], cwd: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// thm2-trajectory (c = −0.5, x₀ = 1.2) with `checks` appended, run into `dir/out`.
fn run_with(dir: &Path, checks: &str) -> Output {
    let base =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/histogram/thm2-trajectory.toml");
    let text = std::fs::read_to_string(base).unwrap();
    std::fs::write(dir.join("mine.toml"), format!("{text}\n{checks}")).unwrap();
    attnflow(&["run", "mine.toml", "--quick", "--out", "out"], dir)
}

fn declared(checks: &serde_json::Value, id: &str) -> serde_json::Value {
    checks["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check `{id}` in {checks}"))
        .clone()
}

#[test]
fn declared_checks_measure_what_they_name() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_with(
        tmp.path(),
        r#"
[[check]]
id = "rho"
name = "ρ of the invariant line y = ρx"
quantity = "rho"
at_least = 0.78
at_most = 0.781

[[check]]
id = "x-stays-below-start"
name = "largest x along the run"
quantity = "series.x"
statistic = "max"
at_most = 1.0
"#,
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tmp.path().join("out/mine");
    let checks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("checks.json")).unwrap()).unwrap();
    // ρ = (√(c² + 4) + c)/2 at c = −0.5
    let rho = declared(&checks, "rho");
    let closed = ((0.25f64 + 4.0).sqrt() - 0.5) / 2.0;
    assert!(
        (rho["measured"].as_f64().unwrap() - closed).abs() < 1e-12,
        "{rho}"
    );
    assert_eq!(rho["pass"], true);
    // the largest x in series.csv, read here: the start x₀ = 1.2 > 1, so the check fails
    let csv = std::fs::read_to_string(dir.join("series.csv")).unwrap();
    let column = csv
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|h| h == "x")
        .unwrap();
    let largest = attnflow::stats::max(
        csv.lines()
            .skip(1)
            .map(|l| l.split(',').nth(column).unwrap().parse::<f64>().unwrap()),
    );
    let x = declared(&checks, "x-stays-below-start");
    assert_eq!(x["measured"].as_f64().unwrap(), largest);
    assert_eq!(largest, 1.2);
    assert_eq!(x["pass"], false);
    assert_eq!(checks["all_pass"], false);
}

#[test]
fn bad_declared_checks_are_refused_with_their_key() {
    let cases = [
        (
            "quantity = \"rhoo\"\nat_most = 1.0",
            "check[0].quantity",
            "not a quantity",
        ),
        (
            "quantity = \"rho\"\nstatistic = \"max\"\nat_most = 1.0",
            "check[0].statistic",
            "one number",
        ),
        (
            "quantity = \"series.x\"\nat_most = 1.0",
            "check[0].statistic",
            "needs a statistic",
        ),
        ("quantity = \"rho\"", "check[0]", "at_most and/or at_least"),
        (
            "quantity = \"series.z\"\nstatistic = \"max\"\nat_most = 1.0",
            "check[0].quantity",
            "no column `z`",
        ),
        (
            "quantity = \"rho\"\nat_most = 1.0\nwhere = { c = 1 }",
            "check[0]",
            "select sweep points",
        ),
        (
            "quantity = \"rho\"\nat_most = 1.0\nwithin = 3",
            "check[0]",
            "unknown field",
        ),
    ];
    for (entry, key, reason) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let out = run_with(
            tmp.path(),
            &format!("[[check]]\nid = \"mine\"\nname = \"n\"\n{entry}\n"),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{entry}: {err}");
        assert!(err.contains(key) && err.contains(reason), "{entry}: {err}");
        assert!(
            !tmp.path().join("out/mine").exists(),
            "{entry}: wrote output"
        );
    }
    // an id the runner already uses
    let tmp = tempfile::tempdir().unwrap();
    let builtin = attnflow(
        &["run", "thm2-trajectory", "--quick", "--out", "b"],
        tmp.path(),
    );
    assert_eq!(builtin.status.code(), Some(0));
    let checks: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("b/thm2-trajectory/checks.json")).unwrap(),
    )
    .unwrap();
    let taken = checks["checks"][0]["id"].as_str().unwrap();
    let out = run_with(
        tmp.path(),
        &format!("[[check]]\nid = \"{taken}\"\nname = \"n\"\nquantity = \"rho\"\nat_most = 1.0\n"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("check[0].id") && err.contains("already has"),
        "{err}"
    );
    assert!(!tmp.path().join("out/mine").exists());
}

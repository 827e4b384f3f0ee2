//! A downstream crate's view: its own model family (a quadratic whose flow is known in closed
//! form), registered beside the built-in kinds and run through the library's command line
//! (`attnflow::cli::main_with`), including the `flow` subcommand and its refusals.
//!
//! The test binary itself plays the downstream program: [`downstream_cli`] is an ordinary test
//! that does nothing, except when the parent test starts this binary again with the command line
//! in `OWN_KIND_ARGS` — then it is `main_with(Registry::builtin().with(&QUAD), args)` and exits
//! with its code, so stdout, stderr and the exit code are the program's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use attnflow::flow::GradientFlow;
use attnflow::instance::{Array, Arrays, InstanceError};
use attnflow::scenario::flow::{Family, FlowKind, FlowModel, MaxMargin};
use attnflow::scenario::registry::Registry;
use attnflow::scenario::{InputError, Scenario};
use nalgebra::DMatrix;

/// ℓ(w) = ½ Σᵢ λᵢ (wᵢ − cᵢ)²: w(t) = c + e^{−λt}(w₀ − c), Hessian diag(λ).
struct Quadratic {
    lambda: Vec<f64>,
    c: Vec<f64>,
    w0: Vec<f64>,
}

impl GradientFlow for Quadratic {
    fn dim(&self) -> usize {
        self.c.len()
    }
    fn loss(&self, w: &[f64]) -> f64 {
        0.5 * (0..w.len())
            .map(|i| self.lambda[i] * (w[i] - self.c[i]).powi(2))
            .sum::<f64>()
    }
    fn grad(&self, w: &[f64], g: &mut [f64]) {
        for i in 0..w.len() {
            g[i] = self.lambda[i] * (w[i] - self.c[i]);
        }
    }
    fn hvp(&self, _w: &[f64], u: &[f64], out: &mut [f64]) {
        for i in 0..u.len() {
            out[i] = self.lambda[i] * u[i];
        }
    }
}

impl FlowModel for Quadratic {
    fn initial_state(&self) -> Vec<f64> {
        self.w0.clone()
    }
    fn instance(&self) -> Arrays {
        let mut a = Arrays::new();
        a.insert("lambda", Array::vector(&self.lambda))
            .insert("c", Array::vector(&self.c))
            .insert("w0", Array::vector(&self.w0));
        a
    }
    fn matrices(&self, z: &[f64]) -> Vec<(String, DMatrix<f64>)> {
        vec![("w".into(), DMatrix::from_row_slice(1, z.len(), z))]
    }
    fn max_margin(&self) -> Result<Vec<MaxMargin>, String> {
        Ok(vec![MaxMargin {
            name: "minimizer".into(),
            matrix: "w".into(),
            solution: DMatrix::from_row_slice(1, self.c.len(), &self.c),
            certificate: vec![("residual".into(), 0.0)],
            tolerance: 1e-9,
        }])
    }
}

/// The family: arrays `lambda` (positive curvatures), `c` (the minimizer), `w0` (the start).
struct Quad;

impl Family for Quad {
    fn name(&self) -> &'static str {
        "quad"
    }
    fn kind(&self) -> &'static str {
        "flow.quad"
    }
    fn paper(&self) -> &'static str {
        "000"
    }
    fn summary(&self) -> &'static str {
        "a separable quadratic (a downstream crate's family)"
    }
    fn default_instance(
        &self,
        _sc: &Scenario,
        _options: &toml::Table,
    ) -> Result<Arrays, InputError> {
        Ok(Quadratic {
            lambda: vec![1.0, 0.1, 3.0],
            c: vec![1.0, -2.0, 0.5],
            w0: vec![0.0; 3],
        }
        .instance())
    }
    fn model(
        &self,
        data: &Arrays,
        init: &Arrays,
        _options: &toml::Table,
    ) -> Result<Box<dyn FlowModel>, InstanceError> {
        let lambda = data.vector("lambda", None)?.to_vec();
        let d = lambda.len();
        if let Some(i) = lambda.iter().position(|&l| l <= 0.0) {
            return Err(InstanceError::new(
                format!("lambda[{i}]"),
                format!("curvatures must be positive, got {}", lambda[i]),
            ));
        }
        let c = data.vector("c", Some(d))?.to_vec();
        let w0 = init.vector("w0", Some(d))?.to_vec();
        Ok(Box::new(Quadratic { lambda, c, w0 }))
    }
}

static QUAD: FlowKind<Quad> = FlowKind(Quad);

const SCENARIO: &str = r#"kind = "flow.quad"
title = "A quadratic, flowed to its minimizer"
seed = 0
[params]
t_end = 20.0
samples = 40
[checks]
loss_rise = 1e-8
invariant_drift = 1e-8
"#;

/// The downstream program (see the module's comment).
#[test]
fn downstream_cli() {
    let Ok(args) = std::env::var("OWN_KIND_ARGS") else {
        return;
    };
    let argv = std::iter::once("mine".into()).chain(args.split('\u{1f}').map(Into::into));
    let code = attnflow::cli::main_with(Registry::builtin().with(&QUAD), argv);
    std::process::exit(code);
}

/// Runs the downstream program with `args` in `cwd`, its scenario folder `<cwd>/scenarios`.
fn mine(args: &[&str], cwd: &Path) -> Output {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.push("--dir".into());
    all.push(cwd.join("scenarios").display().to_string());
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "downstream_cli",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("OWN_KIND_ARGS", all.join("\u{1f}"))
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A folder with the family's scenario file and an instance written from scratch (not by a
/// run): λ = (2, 0.5), c = (1, −1), w₀ = (0, 0).
fn setup() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("scenarios")).unwrap();
    std::fs::write(tmp.path().join("scenarios/flow-quad.toml"), SCENARIO).unwrap();
    let data = tmp.path().join("mine.json");
    std::fs::write(&data, r#"{"lambda": [2, 0.5], "c": [1, -1], "w0": [0, 0]}"#).unwrap();
    (tmp, data)
}

/// Every file under `dir`, by relative path.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                PathBuf::from(e.file_name()),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_downstream_family_runs_through_the_flow_subcommand_like_run_with_overrides() {
    let (tmp, data) = setup();
    let data = data.display().to_string();
    let cwd = tmp.path();
    // the built-in kinds are still there, the family is listed beside them
    let o = mine(&["list"], cwd);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("flow-quad"));
    let o = mine(&["flow", "--list"], cwd);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let listed = text(&o.stdout);
    assert!(
        listed.contains("quad") && listed.contains("flow-quad.toml"),
        "{listed}"
    );

    let o = mine(
        &[
            "flow", "quad", "--data", &data, "--t-end", "8", "--method", "tsit45", "--out", "a",
        ],
        cwd,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let o = mine(
        &[
            "run",
            "flow-quad",
            "--set",
            &format!("data_file={data}"),
            "--set",
            "t_end=8",
            "--solver",
            "tsit45",
            "--out",
            "b",
        ],
        cwd,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let (a, b) = (cwd.join("a/flow-quad"), cwd.join("b/flow-quad"));
    assert_eq!(
        files(&a),
        files(&b),
        "`flow` and `run --set` wrote different bytes"
    );

    // the run used the file's instance: w − c = −c e^{−λt}, so ℓ(T) = ½ Σ λᵢ cᵢ² e^{−2λᵢT}
    let params: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("params.json")).unwrap()).unwrap();
    assert_eq!(params["solver"]["method"], "tsit45");
    assert_eq!(params["params"]["t_end"], 8.0);
    let final_loss = params["derived"]["final_loss"].as_f64().unwrap();
    let exact = 0.5 * (2.0 * (-2.0 * 2.0 * 8.0f64).exp() + 0.5 * (-2.0 * 0.5 * 8.0f64).exp());
    assert!(
        (final_loss - exact).abs() <= 1e-5 * exact,
        "{final_loss} vs {exact}"
    );
    let instance = attnflow::instance::Arrays::read(&a.join("instance.npz")).unwrap();
    assert_eq!(instance.get("lambda").unwrap().data, vec![2.0, 0.5]);

    // a discrete optimizer through the same options
    let o = mine(
        &[
            "flow",
            "quad",
            "--data",
            &data,
            "--optimizer",
            "gd",
            "--eta",
            "0.1",
            "--steps",
            "50",
            "--out",
            "c",
        ],
        cwd,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let params: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cwd.join("c/flow-quad/params.json")).unwrap())
            .unwrap();
    assert_eq!(params["params"]["optimizer"], "gd");
    assert_eq!(params["params"]["steps"], 50);
}

/// Bad input: exit 2, a message naming what is wrong, nothing written.
#[test]
fn the_flow_subcommand_refuses_bad_input() {
    let (tmp, data) = setup();
    let cwd = tmp.path();
    let refused = |args: &[&str], expect: &[&str]| {
        let o = mine(args, cwd);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for e in expect {
            assert!(err.contains(e), "{args:?}: `{e}` missing in: {err}");
        }
        assert!(!cwd.join("out").exists(), "{args:?} wrote outputs");
    };
    refused(
        &["flow", "nosuch"],
        &["unknown model family `nosuch`", "quad)"],
    );
    refused(&["flow"], &["<FAMILY>"]);
    refused(&["flow", "quad", "--clock", "sideways"], &["sideways"]);
    refused(&["flow", "quad", "--t-end", "soon"], &["soon"]);
    refused(
        &["flow", "quad", "--data", "missing.npz"],
        &["missing.npz", "params.data_file"],
    );
    let bad = cwd.join("bad.json");
    std::fs::write(&bad, r#"{"lambda": [2, -1], "c": [1, -1], "w0": [0, 0]}"#).unwrap();
    refused(
        &["flow", "quad", "--data", bad.to_str().unwrap()],
        &["bad.json", "lambda[1]", "curvatures must be positive"],
    );
    let short = cwd.join("short.json");
    std::fs::write(&short, r#"{"lambda": [2, 1], "c": [1], "w0": [0, 0]}"#).unwrap();
    refused(
        &["flow", "quad", "--data", short.to_str().unwrap()],
        &["short.json", "c", "expected shape"],
    );
    refused(
        &[
            "flow",
            "quad",
            "--data",
            data.to_str().unwrap(),
            "--optimizer",
            "gd",
        ],
        &["params.eta"],
    );
    // a family without its scenario file
    std::fs::remove_file(cwd.join("scenarios/flow-quad.toml")).unwrap();
    refused(&["flow", "quad"], &["no scenario file of kind `flow.quad`"]);
}

#[test]
fn the_builtin_registry_knows_no_downstream_kind() {
    let o = Command::new(env!("CARGO_BIN_EXE_attnflow"))
        .args(["flow", "quad"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("unknown model family `quad`"));
    let reg = Registry::builtin();
    assert!(reg.find("flow.quad").is_none());
    let mine = reg.clone().with(&QUAD);
    assert_eq!(mine.kinds().len(), reg.kinds().len() + 1);
    assert!(mine.find("flow.quad").is_some());
}

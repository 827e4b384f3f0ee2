//! User data in, `svm.json` out.
//!
//! Input: `{"X": n×T×d, "y": n labels ±1, "u": d, "opt": n indices (optional), "z": n×d
//! (optional)}`. The optimal tokens default to argmax_t y_i uᵀx_{i,t}; the queries default to
//! the first tokens. Every validation error names the offending field (`X[2][1]`, `y[0]`, …).

use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Value};

use super::constraints::{MarginConstraints, RankOneConstraints, VectorConstraints};
use super::nuclear::NuclearSolution;
use super::qp::L2Solution;
use super::{SvmError, TokenView};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProblem {
    #[serde(rename = "X")]
    x: Vec<Vec<Vec<f64>>>,
    y: Vec<f64>,
    #[serde(default)]
    u: Option<Vec<f64>>,
    #[serde(default)]
    opt: Option<Vec<usize>>,
    #[serde(default)]
    z: Option<Vec<Vec<f64>>>,
}

/// Validated token data for the max-margin programs.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenProblem {
    pub n: usize,
    pub t: usize,
    pub d: usize,
    /// Tokens, flat n × T × d.
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub u: Option<Vec<f64>>,
    pub opt: Vec<usize>,
    /// Queries, flat n × d.
    pub queries: Vec<f64>,
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> SvmError {
    SvmError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

fn check_finite(field: &str, values: &[f64]) -> Result<(), SvmError> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(k) => Err(invalid(format!("{field}[{k}]"), "not a finite number")),
        None => Ok(()),
    }
}

impl TokenProblem {
    /// Parses and validates the JSON text.
    pub fn from_json(text: &str) -> Result<Self, SvmError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let raw: RawProblem = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            invalid(
                if path == "." {
                    "(document)".into()
                } else {
                    path
                },
                e.inner().to_string(),
            )
        })?;
        Self::validate(raw)
    }

    fn validate(raw: RawProblem) -> Result<Self, SvmError> {
        let n = raw.x.len();
        if n == 0 {
            return Err(invalid("X", "must hold at least one sequence"));
        }
        let t = raw.x[0].len();
        if t < 2 {
            return Err(invalid("X[0]", format!("needs at least 2 tokens, has {t}")));
        }
        let d = raw.x[0][0].len();
        if d == 0 {
            return Err(invalid(
                "X[0][0]",
                "tokens must have at least one coordinate",
            ));
        }
        let mut x = Vec::with_capacity(n * t * d);
        for (i, seq) in raw.x.iter().enumerate() {
            if seq.len() != t {
                return Err(invalid(
                    format!("X[{i}]"),
                    format!("has {} tokens, X[0] has T = {t}", seq.len()),
                ));
            }
            for (k, tok) in seq.iter().enumerate() {
                let field = format!("X[{i}][{k}]");
                if tok.len() != d {
                    return Err(invalid(
                        field,
                        format!("has {} coordinates, X[0][0] has d = {d}", tok.len()),
                    ));
                }
                check_finite(&field, tok)?;
                x.extend_from_slice(tok);
            }
        }
        if raw.y.len() != n {
            return Err(invalid(
                "y",
                format!("has {} labels for n = {n} sequences", raw.y.len()),
            ));
        }
        if let Some(i) = raw.y.iter().position(|&v| v != 1.0 && v != -1.0) {
            return Err(invalid(
                format!("y[{i}]"),
                format!("{} is not ±1", raw.y[i]),
            ));
        }
        if let Some(u) = &raw.u {
            if u.len() != d {
                return Err(invalid(
                    "u",
                    format!("has {} entries, tokens have d = {d}", u.len()),
                ));
            }
            check_finite("u", u)?;
        }
        let queries = match &raw.z {
            None => (0..n).flat_map(|i| raw.x[i][0].clone()).collect(),
            Some(z) => {
                if z.len() != n {
                    return Err(invalid(
                        "z",
                        format!("has {} queries for n = {n} sequences", z.len()),
                    ));
                }
                let mut q = Vec::with_capacity(n * d);
                for (i, zi) in z.iter().enumerate() {
                    if zi.len() != d {
                        return Err(invalid(
                            format!("z[{i}]"),
                            format!("has {} entries, expected d = {d}", zi.len()),
                        ));
                    }
                    check_finite(&format!("z[{i}]"), zi)?;
                    q.extend_from_slice(zi);
                }
                q
            }
        };
        let mut problem = TokenProblem {
            n,
            t,
            d,
            x,
            y: raw.y,
            u: raw.u,
            opt: vec![],
            queries,
        };
        problem.opt = match raw.opt {
            Some(opt) => {
                if opt.len() != n {
                    return Err(invalid(
                        "opt",
                        format!("has {} indices for n = {n} sequences", opt.len()),
                    ));
                }
                if let Some(i) = opt.iter().position(|&o| o >= t) {
                    return Err(invalid(
                        format!("opt[{i}]"),
                        format!("{} is not a token index < T = {t}", opt[i]),
                    ));
                }
                opt
            }
            None => match &problem.u {
                Some(u) => problem.view().optimal_tokens(&problem.y, u)?,
                None => {
                    return Err(invalid(
                        "u",
                        "missing: needed to choose the optimal tokens when opt is absent",
                    ))
                }
            },
        };
        Ok(problem)
    }

    pub fn view(&self) -> TokenView<'_> {
        TokenView {
            n: self.n,
            t: self.t,
            d: self.d,
            x: &self.x,
            queries: &self.queries,
        }
    }

    /// The W-SVM constraints of the data.
    pub fn w_svm_constraints(&self) -> Result<RankOneConstraints, SvmError> {
        RankOneConstraints::w_svm(&self.view(), &self.opt)
    }

    /// The u-SVM constraints of the data.
    pub fn u_svm_constraints(&self) -> Result<VectorConstraints, SvmError> {
        VectorConstraints::u_svm(&self.view(), &self.y, &self.opt)
    }
}

/// Reads and validates a JSON file.
pub fn read_token_problem(path: &Path) -> Result<TokenProblem, SvmError> {
    let text = std::fs::read_to_string(path).map_err(|e| SvmError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    TokenProblem::from_json(&text)
}

/// The `svm.json` document of a W-SVM solution: W as nested rows (row i = output row i), its
/// norm and margin 1/‖W‖, the active constraints with their multipliers and margins, and the
/// KKT residuals.
pub fn svm_report(c: &RankOneConstraints, sol: &L2Solution) -> Value {
    let rows = nested_rows(c, &sol.w);
    let mut active: Vec<usize> = sol.support.iter().chain(&sol.tight).copied().collect();
    active.sort_unstable();
    active.dedup();
    let active: Vec<Value> = active
        .into_iter()
        .map(|k| {
            let l = c.labels()[k];
            json!({
                "sequence": l.sequence,
                "token": l.token,
                "alpha": sol.alpha[k],
                "margin": sol.margins[k],
            })
        })
        .collect();
    json!({
        "program": "W-SVM: min ||W||_F s.t. (x_opt - x_t)^T W q >= 1",
        "W": rows,
        "norm": sol.norm,
        "margin": 1.0 / sol.norm,
        "constraints": c.count(),
        "active_constraints": active,
        "kkt": sol.kkt,
        "method": sol.method,
        "polished": sol.polished,
        "iterations": sol.iterations,
    })
}

/// vec(W) (column-major) as nested rows (row i = output row i).
fn nested_rows(c: &RankOneConstraints, w: &[f64]) -> Vec<Vec<f64>> {
    let w = c.matrix(w);
    (0..w.nrows())
        .map(|r| w.row(r).iter().copied().collect())
        .collect()
}

/// The nuclear-norm and Frobenius W-SVMs of one constraint set (spec 001 §3.1–3.2) for
/// `svm.json`: `W_nuclear` and `W_frobenius` as nested rows, both norms of each, their singular
/// values and numerical ranks (σ > 1e−6·σ_max), and their certificates: for W_* the dual
/// multipliers λ ≥ 0 with ‖Σ λ_k A_k‖_op ≤ 1 and the certified gap ‖W_*‖_* − 1ᵀλ; for W_F the
/// multipliers α with W_F = Σ α_k A_k.
pub fn nuclear_svm_report(
    c: &RankOneConstraints,
    nuclear: &NuclearSolution,
    frobenius: &L2Solution,
) -> Value {
    let mut s_f: Vec<f64> = c
        .matrix(&frobenius.w)
        .singular_values()
        .iter()
        .copied()
        .collect();
    s_f.sort_by(|a, b| b.total_cmp(a));
    let rank_f = s_f.iter().filter(|&&s| s > 1e-6 * s_f[0]).count();
    let labels: Vec<Value> = c
        .labels()
        .iter()
        .map(|l| json!({"sequence": l.sequence, "token": l.token}))
        .collect();
    json!({
        "program": "min ||W||_* and min ||W||_F s.t. (x_opt - x_l)^T W z >= 1",
        "constraints": labels,
        "W_nuclear": nested_rows(c, &nuclear.w),
        "W_frobenius": nested_rows(c, &frobenius.w),
        "nuclear": {
            "nuclear_norm": nuclear.nuclear_norm,
            "frobenius_norm": crate::flow::norm(&nuclear.w),
            "singular_values": nuclear.singular_values,
            "rank": nuclear.rank,
            "margins": nuclear.margins,
            "certificate": {
                "lambda": nuclear.lambda,
                "dual_value": nuclear.dual_value,
                "operator_norm": nuclear.certificate_op_norm,
                "duality_gap": nuclear.nuclear_norm - nuclear.dual_value,
                "relative_duality_gap": nuclear.kkt.duality_gap,
                "complementarity_margin": nuclear.complementarity_margin,
                "kkt": nuclear.kkt,
            },
            "iterations": nuclear.iterations,
        },
        "frobenius": {
            "frobenius_norm": frobenius.norm,
            "nuclear_norm": s_f.iter().sum::<f64>(),
            "singular_values": s_f,
            "rank": rank_f,
            "margins": frobenius.margins,
            "certificate": {
                "alpha": frobenius.alpha,
                "kkt": frobenius.kkt,
            },
        },
    })
}

/// Writes [`svm_report`] to `path` (pretty-printed).
pub fn write_svm_json(
    path: &Path,
    c: &RankOneConstraints,
    sol: &L2Solution,
) -> Result<(), SvmError> {
    write_json(path, &svm_report(c, sol))
}

/// Writes a JSON document to `path` (pretty-printed).
pub fn write_json(path: &Path, doc: &Value) -> Result<(), SvmError> {
    let text = serde_json::to_string_pretty(doc).expect("JSON values serialize");
    std::fs::write(path, text + "\n").map_err(|e| SvmError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

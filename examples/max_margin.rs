//! A max-margin problem on your data: the attention W-SVM
//! min ‖W‖_F s.t. (x_{i,opt} − x_{i,t})ᵀ W qᵢ ≥ 1 for every token t ≠ opt of every sequence i
//! (the direction gradient descent on the attention weights converges to), solved with its
//! optimality (KKT) certificate, which is printed and asserted.
//!
//! Run: `cargo run --release --example max_margin -- [--data DATA.json]` (`cargo test` runs it
//! too). The file holds
//! `{"X": n×T×d tokens, "y": n labels ±1, "u": d decoder}` (optional: `"opt"`, the optimal
//! token of each sequence, and `"z"`, the queries; by default opt = argmax_t yᵢ uᵀx_{i,t} and
//! the queries are the first tokens). Without a file, the small instance below is used.

use attnflow::analysis::svm::{margins, read_token_problem, solve_l2, SvmMethod, TokenProblem};

/// Three sequences of three tokens in ℝ².
const INLINE: &str = r#"{
    "X": [[[1.0, 0.5], [0.2, 1.0], [-0.5, 0.3]],
          [[0.3, -0.4], [-1.0, 0.2], [0.6, 0.9]],
          [[0.8, 0.8], [1.5, -0.2], [0.1, -1.0]]],
    "y": [1, -1, 1],
    "u": [1.0, 0.0]
}"#;

/// Every KKT residual (primal and dual feasibility, complementary slackness, stationarity
/// W = Σ αₖ Dₖ, and the duality gap) must be below this.
const CERTIFICATE_TOL: f64 = 1e-8;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `--data FILE`; other arguments (a test harness's) are ignored
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let file = args
        .iter()
        .position(|a| a == "--data")
        .and_then(|i| args.get(i + 1));
    let problem = match file {
        Some(path) => read_token_problem(path.as_ref())?,
        None => TokenProblem::from_json(INLINE)?,
    };
    println!(
        "{} sequences of {} tokens in ℝ^{}; optimal tokens {:?}",
        problem.n, problem.t, problem.d, problem.opt
    );
    let constraints = problem.w_svm_constraints()?;
    let dual = solve_l2(&constraints, SvmMethod::Dual)?;
    let w = constraints.matrix(&dual.w);
    println!("W_mm = {w:.6}");
    println!(
        "‖W_mm‖_F = {:.9}, margin 1/‖W_mm‖_F = {:.9}",
        dual.norm,
        1.0 / dual.norm
    );
    println!(
        "support (αₖ > 0): {:?} of {} constraints",
        dual.support,
        dual.alpha.len()
    );
    let k = &dual.kkt;
    println!(
        "certificate: primal infeasibility {:.1e}, dual infeasibility {:.1e}, complementary \
         slackness {:.1e}, stationarity {:.1e}, duality gap {:.1e}",
        k.primal_infeasibility,
        k.dual_infeasibility,
        k.complementary_slackness,
        k.stationarity,
        k.duality_gap
    );
    assert!(
        k.passes(CERTIFICATE_TOL),
        "the certificate fails: largest residual {:.1e}",
        k.max()
    );
    // independent checks: every margin is at least 1, and the primal program gives the same W
    let m = margins(&constraints, &dual.w);
    assert!(m.min >= 1.0 - CERTIFICATE_TOL, "smallest margin {}", m.min);
    let primal = solve_l2(&constraints, SvmMethod::Primal)?;
    // NaN-propagating, unlike fold(0.0, f64::max), which would drop a NaN
    let gap = attnflow::stats::max_abs_diff(&dual.w, &primal.w);
    println!(
        "smallest margin {:.9}; dual and primal solutions differ by {gap:.1e}",
        m.min
    );
    assert!(
        gap <= 1e-6 * dual.norm,
        "dual and primal solutions differ by {gap}"
    );
    Ok(())
}

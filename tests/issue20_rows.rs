//! Issue 20's partial rows of seeds 000 and 002: the end of Case 1 in App. A.2 (y∞ = ±√ρ, printed
//! ±√ρ̄; passes on the shipped run, fails with the printed limit), eq. (7)'s printed form (right:
//! recorded beside the check), and §5.1's "R ≪ R_teacher" at d = 400 (reported, full run only).

mod common;
use common::{check, passes, run_quick};

fn derived(r: &attnflow::scenario::Report, key: &str) -> f64 {
    r.derived[key]
        .as_f64()
        .unwrap_or_else(|| panic!("derived {key}"))
}

#[test]
fn case1_ends_at_sqrt_rho_not_the_printed_sqrt_rhob() {
    let r = run_quick("lemma-a2-invariants", &[]);
    let c = check(&r, "case1-limit-y");
    assert!(c.pass, "{c:?}");
    assert!(c.paper_claim.is_some());
    // the solver's tolerance, not the tail e^{−80}, sets the bound
    assert!(c.bound < 1e-8 && c.measured <= c.bound, "{c:?}");
    // c = −0.5: √ρ = 0.8836, √ρ̄ = 1.1317
    let printed = derived(&r, "case1_limit_y_error_paper");
    assert!((printed - 0.248).abs() < 1e-3, "{printed}");
}

#[test]
fn case1_limit_fails_with_the_printed_limit() {
    // the printed ±√ρ̄ (ρ and ρ̄ swapped) misses the limit by |√ρ − √ρ̄| ...
    let r = run_quick("lemma-a2-invariants", &["paper_cases=true"]);
    assert!(!passes(&r, "case1-limit-y"));
    // ... which vanishes only in the balanced case c = 0 (ρ = ρ̄ = 1)
    let balanced = run_quick("lemma-a2-invariants", &["paper_cases=true", "c=0"]);
    assert!(passes(&balanced, "case1-limit-y"));
}

#[test]
fn eq7_printed_factorization_matches_central_differences() {
    let r = run_quick("lemma1-softmax-jacobian", &[]);
    let c = check(&r, "eq-ij-dphi-fd-phi-ij");
    assert!(c.pass && c.paper_claim.is_some(), "{c:?}");
    // diag(z)(I − 𝟙zᵀ) evaluated as printed is as close to the differences as J itself
    let printed = derived(&r, "max_eq7_rel_error_printed");
    assert!(printed <= c.bound, "{printed}");
    assert!(
        (printed - c.measured).abs() <= 1e-3 * c.measured,
        "{printed} vs {c:?}"
    );
}

/// §5.1's "R ≪ R_teacher" at d = 400 (spec E16), reported rather than checked: in the full
/// sweep (d = 400, N = 100, two seeds, ~30 s) one run ends far above its teacher.
#[test]
#[ignore = "the full d = 400 sweep takes ~30 s"]
fn overparameterized_student_r_exceeds_the_teachers_at_d_400() {
    use attnflow::scenario::run::ExecOptions;
    use attnflow::scenario::run::{default_scenario_dir, execute, load_and_validate, resolve};
    let path = resolve("fig1-overparameterized-d400", &default_scenario_dir()).unwrap();
    let ready = load_and_validate(&path, &Default::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = execute(ready, tmp.path(), ExecOptions::default()).unwrap();
    let text = std::fs::read_to_string(out.dir.join("aggregate.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| -> f64 {
        let j = header.iter().position(|h| *h == name).unwrap();
        row[j].parse().unwrap()
    };
    // the paper's claim needs ≤ −1 in every run (as at d = 150); seed 1 ends ~18.5 decades above
    assert!(col("log10_R_student_over_teacher_max") > 0.0);
    assert!(col("log10_R_student_over_teacher_min") < 0.0);
}

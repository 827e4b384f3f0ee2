//! Seed-001 parameters and thresholds are typed (`scenario::param`): a value out of range is
//! refused while the scenario loads, with the key path and the reason, before anything runs —
//! and on the command line with exit code 2 and nothing written.

mod common;
mod refusals;

/// (scenario, override, key named, reason given)
const BAD: [(&str, &str, &str, &str); 12] = [
    (
        "aligned-closed-form",
        "checks.off_diagonal_tol=0",
        "checks.off_diagonal_tol",
        "must be positive, got 0",
    ),
    (
        "aligned-closed-form",
        "des=[]",
        "params.des",
        "must not be empty",
    ),
    (
        "aligned-closed-form",
        "tau_max=1",
        "params.tau_max",
        "must lie in (1, 1e10]",
    ),
    (
        "diag-kkt-certificate",
        "tau_max=5",
        "params.tau_max",
        "must lie in (10, 1e10]",
    ),
    (
        "diag-kkt-certificate",
        "omega0=[1.0, 0.0, 1.0, 1.0]",
        "params.omega0",
        "entry [1] is 0",
    ),
    (
        "sinh-representation",
        "per_decade=0",
        "params.per_decade",
        "must be ≥ 1, got 0",
    ),
    (
        "diag-random-batch",
        "checks.pass_fraction=1.5",
        "checks.pass_fraction",
        "must lie in (0, 1], got 1.5",
    ),
    // the old hand-written check blamed params.d for a bad n or token count
    ("diag-random-batch", "n=0", "params.n", "must be ≥ 1, got 0"),
    (
        "full-random-batch",
        "tokens=1",
        "params.tokens",
        "must be ≥ 2, got 1",
    ),
    (
        "assumption-validators",
        "threshold_n=[3, 1]",
        "params.threshold_n[1]",
        "must be ≥ 2, got 1",
    ),
    (
        "early-linearization",
        "scales=[1e-4, -5e-5]",
        "params.scales[1]",
        "must be positive, got -0.00005",
    ),
    (
        "separability-rate",
        "draws_per_d=3",
        "params.draws_per_d",
        "must be ≥ 20, got 3",
    ),
];

#[test]
fn out_of_range_values_name_their_key_and_reason() {
    refusals::assert_refused_on_load(&BAD);
}

#[test]
fn cross_field_rules_stay_in_validate() {
    // fit_decades > 0 is its type; below log10 τ_max is a rule across two fields
    let e = common::load_error("diag-l1-vs-l2", &["fit_decades=9", "tau_max=1e8"]);
    assert_eq!(e.key, "params.fit_decades", "{e}");
    let e = common::load_error(
        "param-equivalence",
        &["control_from_t=10", "control_to_t=5"],
    );
    assert_eq!(e.key, "params.control_to_t", "{e}");
    assert!(e.reason.contains("must exceed control_from_t"), "{e}");
}

#[test]
fn the_command_line_exits_2_and_writes_nothing() {
    refusals::assert_cli_refuses(
        "aligned-closed-form",
        "checks.frozen_tol=-1",
        &[
            "aligned-closed-form.toml",
            "checks.frozen_tol",
            "must be positive, got -1",
        ],
    );
}

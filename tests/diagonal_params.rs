//! Seed-004 parameters and thresholds are typed (`scenario::param` and
//! `scenario::diagonal::params`): a value out of range is refused while the scenario loads,
//! with the key path and the reason, before anything runs — and on the command line with exit
//! code 2 and nothing written.

mod common;
mod refusals;

/// (scenario, override, key named, reason given)
const BAD: [(&str, &str, &str, &str); 12] = [
    (
        "conservation-law",
        "checks.drift_tol=0",
        "checks.drift_tol",
        "must be positive, got 0",
    ),
    (
        "conservation-law",
        "alphas=[]",
        "params.alphas",
        "must not be empty",
    ),
    (
        "diag-linear-riccati",
        "alphas=[1e-2, 1.5]",
        "params.alphas[1]",
        "must lie in (0, 1), got 1.5",
    ),
    (
        "diag-linear-riccati",
        "samples=5",
        "params.samples",
        "must be ≥ 10, got 5",
    ),
    (
        "hessian-strict-min",
        "directions=0",
        "params.directions",
        "must be ≥ 1, got 0",
    ),
    (
        "hessian-strict-min",
        "algorithm1.eps_list=[]",
        "params.algorithm1.eps_list",
        "must not be empty",
    ),
    (
        "algorithm1-attn",
        "horizon_factor=1",
        "params.horizon_factor",
        "must exceed 1, got 1",
    ),
    (
        "algorithm1-attn",
        "algorithm1.max_stages=0",
        "params.algorithm1.max_stages",
        "must be ≥ 1, got 0",
    ),
    (
        "stage-times",
        "log10_alpha=0",
        "params.log10_alpha",
        "must be negative, got 0",
    ),
    (
        "fig10-perturb-plateau",
        "plateau_margin=0.5",
        "params.plateau_margin",
        "must lie in (0, 0.5), got 0.5",
    ),
    (
        "raw-vs-log",
        "horizon_extra=-1",
        "params.horizon_extra",
        "must be ≥ 0, got -1",
    ),
    (
        "full-matrix-rank",
        "checks.max_leak=-1e-3",
        "checks.max_leak",
        "must be positive, got -0.001",
    ),
];

#[test]
fn out_of_range_values_name_their_key_and_reason() {
    refusals::assert_refused_on_load(&BAD);
}

#[test]
fn cross_field_rules_stay_in_validate() {
    // each δ in (0, 1) is not enough: it must exceed min_new, a rule across two fields
    let e = common::load_error("noise-robustness", &["min_new=0.5", "deltas=[0.4]"]);
    assert_eq!(e.key, "params.deltas", "{e}");
    assert!(e.reason.contains("(min_new, 1)"), "{e}");
    // raw f64 cannot resolve c = α²c̄ below 1e-6: a rule of the scenario, not of the type
    let e = common::load_error("conservation-law", &["alphas=[1e-8]"]);
    assert_eq!(e.key, "params.alphas", "{e}");
}

#[test]
fn the_command_line_exits_2_and_writes_nothing() {
    refusals::assert_cli_refuses(
        "gradient-check",
        "checks.fd_tol=0",
        &[
            "gradient-check.toml",
            "checks.fd_tol",
            "must be positive, got 0",
        ],
    );
}

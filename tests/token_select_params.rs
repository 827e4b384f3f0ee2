//! Seed-003 parameters and thresholds are typed (`scenario::param` and the folder's own
//! `token_select::params`): a value out of range is refused while the scenario loads, with
//! the key path and the reason, before anything runs — and on the command line with exit
//! code 2 and nothing written.

mod common;
mod refusals;

/// (scenario, override, key named, reason given)
const BAD: [(&str, &str, &str, &str); 14] = [
    (
        "wsvm-kkt",
        "checks.closed_form_tol=-1e-10",
        "checks.closed_form_tol",
        "must be ≥ 0, got -0.0000000001",
    ),
    (
        "usvm-kkt",
        "checks.kkt.max_duality_gap=-1",
        "checks.kkt.max_duality_gap",
        "must be ≥ 0, got -1",
    ),
    (
        "usvm-kkt",
        "trials=0",
        "params.trials",
        "must be ≥ 1, got 0",
    ),
    (
        "gd-asymptotic",
        "checks.limit_tol=0",
        "checks.limit_tol",
        "must be positive, got 0",
    ),
    (
        "gd-asymptotic",
        "offset_window_fraction=1",
        "params.offset_window_fraction",
        "must lie in (0, 1), got 1",
    ),
    (
        "stable-numerics",
        "data=[]",
        "params.data",
        "must not be empty",
    ),
    (
        "fig2-fixed-decoder",
        "loss_axis_floor=0",
        "params.loss_axis_floor",
        "must be negative, got 0",
    ),
    (
        "softmax-sparsification",
        "steps=9",
        "params.steps",
        "must be ≥ 10, got 9",
    ),
    (
        "init-scale",
        "scales=[0.1, 1, 0.5]",
        "params.scales",
        "entry [2] does not exceed entry [1]",
    ),
    (
        "two-token-gd-vs-ngd",
        "checks.gd_rate_range=[2, 1]",
        "checks.gd_rate_range",
        "must be [low, high] with low < high",
    ),
    (
        "joint-training",
        "alphas=[0, 1]",
        "params.alphas[1]",
        "must lie in [0, 1), got 1",
    ),
    // the old hand-written check blamed params.d for a bad n or T
    ("joint-training", "t=1", "params.t", "must be ≥ 2, got 1"),
    (
        "assumption-check",
        "dims=[16]",
        "params.dims",
        "needs at least 2 entries, got 1",
    ),
    (
        "flow-path-equivalence",
        "ngd_etas=[0.05, 0]",
        "params.ngd_etas[1]",
        "must be positive, got 0",
    ),
];

#[test]
fn out_of_range_values_name_their_key_and_reason() {
    refusals::assert_refused_on_load(&BAD);
}

#[test]
fn cross_field_rules_stay_in_validate() {
    // each value is in range; together they are not
    let e = common::load_error("stable-numerics", &["target_norm=1", "eta=0.1"]);
    assert_eq!(e.key, "params.target_norm", "{e}");
    let e = common::load_error("two-token-gd-vs-ngd", &["checks.ngd_rate_at=1000000000"]);
    assert_eq!(e.key, "checks.ngd_rate_at", "{e}");
    assert!(e.reason.contains("must be at most steps"), "{e}");
    let e = common::load_error("joint-training", &["sigma_scale=10", "sigma_opt_scale=1"]);
    assert_eq!(e.key, "params.sigma_scale", "{e}");
}

#[test]
fn the_command_line_exits_2_and_writes_nothing() {
    refusals::assert_cli_refuses(
        "polyak-step",
        "caps=[]",
        &["polyak-step.toml", "params.caps", "must not be empty"],
    );
}

//! The network stand-ins' parameters and thresholds are typed (`scenario::param`): a value out of
//! range is refused while the scenario loads, with the key path and the reason, before anything
//! runs — and on the command line with exit code 2 and nothing written. What the types cannot say
//! (the teacher's rank against d and width, large init above small init, d ≤ 16 for the dense
//! Hessian) stays in each kind's `validate`.

mod common;
mod refusals;

/// (scenario, override, key named, reason given)
const BAD: [(&str, &str, &str, &str); 8] = [
    (
        "teacher-sparsity",
        "tokens=1",
        "params.tokens",
        "must be ≥ 2, got 1",
    ),
    (
        "teacher-sparsity",
        "zero_rel_tol=1.0",
        "params.zero_rel_tol",
        "must lie in (0, 1), got 1",
    ),
    (
        "teacher-sparsity",
        "checks.min_kappa_ratio=0",
        "checks.min_kappa_ratio",
        "must be positive, got 0",
    ),
    ("teacher-sparsity", "d=17", "params.d", "at most 16"),
    (
        "delta-w-rank",
        "instances=0",
        "params.instances",
        "must be ≥ 1, got 0",
    ),
    (
        "delta-w-rank",
        "emergence_fraction=1.5",
        "params.emergence_fraction",
        "must lie in (0, 1], got 1.5",
    ),
    (
        "delta-w-rank",
        "checks.max_rank_drop=-0.1",
        "checks.max_rank_drop",
        "must be positive, got -0.1",
    ),
    (
        "delta-w-rank",
        "record_every=100000",
        "params.record_every",
        "must be at most params.steps",
    ),
];

#[test]
fn out_of_range_values_are_refused_with_their_key() {
    refusals::assert_refused_on_load(&BAD);
}

#[test]
fn the_command_line_refuses_with_exit_2_and_writes_nothing() {
    refusals::assert_cli_refuses(
        "delta-w-rank",
        "lr=-1",
        &["delta-w-rank.toml", "params.lr", "must be positive, got -1"],
    );
}

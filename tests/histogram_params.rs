//! Seed-000 parameters and thresholds are typed (`scenario::param` and the folder's own
//! `histogram::params`): a value out of range is refused while the scenario loads, with the key
//! path and the reason, before anything runs — and on the command line with exit code 2 and
//! nothing written.

mod common;
mod refusals;

/// (scenario, override, key named, reason given)
const BAD: [(&str, &str, &str, &str); 9] = [
    (
        "thm2-trajectory",
        "checks.closed_form_tol=0",
        "checks.closed_form_tol",
        "must be positive, got 0",
    ),
    ("thm2-rates", "c=[]", "params.c", "must not be empty"),
    (
        "thm2-closed-form",
        "grid.c1=[1.0, -1.0]",
        "params.grid.c1[1]",
        "must be positive, got -1",
    ),
    (
        "conservation",
        "samples=5",
        "params.samples",
        "must be ≥ 10, got 5",
    ),
    (
        "limit-kkt",
        "rescalings=0",
        "params.rescalings",
        "must be ≥ 1, got 0",
    ),
    (
        "thm1-loss-decay",
        "fit_window=[1e-3, 1e-9]",
        "params.fit_window",
        "need 0 < low < high",
    ),
    (
        "lemma-a2-invariants",
        "s0_shift=0",
        "params.s0_shift",
        "must be nonzero",
    ),
    (
        "work-precision",
        "methods=[]",
        "params.methods",
        "must not be empty",
    ),
    (
        "stiffness-report",
        "problems=[{flow = \"df\", task = \"eq\", d = 1, sigma = 0.5}]",
        "params.problems[0].d",
        "must be ≥ 2, got 1",
    ),
];

#[test]
fn out_of_range_values_name_their_key_and_reason() {
    refusals::assert_refused_on_load(&BAD);
}

#[test]
fn cross_field_rules_stay_in_validate() {
    // fit_window is its type; deep_level below its low end is a rule across two fields
    let e = common::load_error("thm1-loss-decay", &["deep_level=1"]);
    assert_eq!(e.key, "params.deep_level", "{e}");
    let e = common::load_error("conservation", &["t_first=100", "t_end=10"]);
    assert_eq!(e.key, "params.t_first", "{e}");
    assert!(e.reason.contains("must be below t_end"), "{e}");
}

#[test]
fn the_command_line_exits_2_and_writes_nothing() {
    refusals::assert_cli_refuses(
        "near-saddle",
        "checks.decade_tol=-1",
        &[
            "near-saddle.toml",
            "checks.decade_tol",
            "must be positive, got -1",
        ],
    );
}

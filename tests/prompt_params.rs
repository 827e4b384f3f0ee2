//! Seed-002 parameters and thresholds are typed (`scenario::param`, `scenario::prompt::params`):
//! a value out of range is refused while the scenario loads, with the key path and the reason,
//! before anything runs — and on the command line with exit code 2 and nothing written.

mod common;
mod refusals;

/// (scenario, override, key named, reason given)
const BAD: [(&str, &str, &str, &str); 12] = [
    (
        "thm1-linear-rate",
        "checks.bound_rel_tol=0",
        "checks.bound_rel_tol",
        "must be positive, got 0",
    ),
    (
        "thm1-linear-rate",
        "epsilons=[]",
        "params.epsilons",
        "must not be empty",
    ),
    (
        "thm1-linear-rate",
        "c1s=[1e-4, 1.5]",
        "params.c1s[1]",
        "must lie in (0, 1), got 1.5",
    ),
    (
        "thm1-linear-rate",
        "steps=5",
        "params.steps",
        "must be ≥ 10, got 5",
    ),
    (
        "lemma2-pl-inequality",
        "points=0",
        "params.points",
        "must be ≥ 1, got 0",
    ),
    (
        "eq16-simplex-map",
        "condition=0.5",
        "params.condition",
        "must be ≥ 1, got 0.5",
    ),
    (
        "lemma1-softmax-jacobian",
        "checks.psd_tol=-1",
        "checks.psd_tol",
        "must be ≥ 0, got -1",
    ),
    (
        "stiffness-two-token",
        "r1=1",
        "params.r1",
        "must exceed 1, got 1",
    ),
    (
        "stiffness-attention-flow",
        "rtol=1",
        "params.rtol",
        "must lie in (0, 1), got 1",
    ),
    (
        "two-token-closed-form",
        "cases=[]",
        "params.cases",
        "must not be empty",
    ),
    (
        "thm2-linearization",
        "sizes=[3, 1]",
        "params.sizes[1]",
        "must be ≥ 2, got 1",
    ),
    (
        "fig1-overparameterized",
        "d=1",
        "params.d",
        "must be ≥ 2, got 1",
    ),
];

#[test]
fn out_of_range_values_name_their_key_and_reason() {
    refusals::assert_refused_on_load(&BAD);
}

#[test]
fn cross_field_rules_stay_in_validate() {
    // c₁ ∈ (0, 1) is its type; c₂ < min(2, 1/c₁) is a rule across two fields
    let e = common::load_error("thm1-linear-rate", &["c2=3"]);
    assert_eq!(e.key, "params.c2", "{e}");
    assert!(e.reason.contains("min(2, 1/c₁)"), "{e}");
    let e = common::load_error("hessian-conditioning-vs-r", &["growth_sigma_lo=0.4"]);
    assert_eq!(e.key, "params.growth_sigma_lo", "{e}");
    assert!(e.reason.contains("must be one of params.sigma_ps"), "{e}");
}

#[test]
fn the_command_line_exits_2_and_writes_nothing() {
    refusals::assert_cli_refuses(
        "lemma2-pl-inequality",
        "radius=-1",
        &[
            "lemma2-pl-inequality.toml",
            "params.radius",
            "must be positive, got -1",
        ],
    );
}

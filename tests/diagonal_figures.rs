//! Seed-004 toy-task figures (Figs. 2, 3, 8–11, A4.5, footnote 3) in their fast configurations,
//! each with a setting that makes a check fail for a reason the theory explains.

mod common;

use common::passes;

#[test]
fn fig2_loss() {
    let r = common::sweep_quick("fig2-loss", &[]).unwrap();
    common::assert_all_pass("fig2-loss", &r);
}

/// Spec §7 expects ≤ 1e−3·L̃(0) at α = 1e−64 on mini; there the transition lags a_k/Λ still
/// exceed the plateau margins, so the sup error is 7e−2·L̃(0) and no α qualifies for the
/// decrease check.
#[test]
fn fig2_loss_mini_needs_alpha_below_1e_64() {
    let r = common::sweep_quick("fig2-loss", &["sweep.grid.alpha=[1e-4, 1e-16, 1e-64]"]).unwrap();
    assert!(!passes(&r, "sup-plateau-interior-alpha-beta-alpha.1e-64"));
    assert!(!passes(&r, "sup-plateau-interior-alpha-beta-largest"));
}

/// The reduction needs the α strictly decreasing (colours, consecutive ratios).
#[test]
fn fig2_loss_refuses_an_unordered_grid() {
    use attnflow::scenario::run::{default_scenario_dir, load_and_validate, resolve};
    let path = resolve("fig2-loss", &default_scenario_dir()).unwrap();
    let ov = attnflow::scenario::Overrides {
        set: vec!["sweep.grid.alpha=[1e-64, 1e-4]".into()],
        quick: true,
        ..Default::default()
    };
    let err = load_and_validate(&path, &ov).err().expect("refused");
    assert!(err.key.starts_with("sweep.grid"), "{err}");
}

#[test]
fn fig8_kq_entries() {
    let r = common::run_quick("fig8-kq-entries", &[]);
    common::assert_all_pass("fig8-kq-entries", &r);
}

#[test]
fn fig9_vo_entries() {
    let r = common::run_quick("fig9-vo-entries", &[]);
    common::assert_all_pass("fig9-vo-entries", &r);
}

/// The spec's clock: relaxation counted from T_k. On mini the VO transition into plateau 2
/// lags by a_2 = Λ(τ̂_2 − T_2), and the error exceeds 10·α^e_min by e^(λ_act a_2)/10 ≈ 9 at
/// α = 1e−32, whatever α.
#[test]
fn fig9_vo_entries_fail_with_the_spec_relaxation_clock() {
    let r = common::run_quick("fig9-vo-entries", &["relaxation_clock=\"theory\""]);
    assert!(!passes(
        &r,
        "entries-alpha-over-plateaus-sup-error.vo-1e-16"
    ));
    assert!(!passes(
        &r,
        "entries-alpha-over-plateaus-sup-error.vo-1e-32"
    ));
}

#[test]
fn fig10_perturb_plateau() {
    let r = common::run_quick("fig10-perturb-plateau", &[]);
    common::assert_all_pass("fig10-perturb-plateau", &r);
}

/// The spec's protocol on every plateau: on mini at α = 1e−32 the horizon 0.45·ΔT_k·Λ of the
/// short plateaus spans ~3 relaxation times, and the perturbation (5e−2) is still 1e−2.
#[test]
fn fig10_perturb_plateau_short_plateaus_fail() {
    let r = common::run_quick("fig10-perturb-plateau", &["min_relaxations=1e-9"]);
    assert!(!passes(
        &r,
        "over-perturbations-beta-pert-beta-orig.1e-32-0-05"
    ));
}

#[test]
fn fig11_perturb_stage_start() {
    let r = common::run_quick("fig11-perturb-stage-start", &[]);
    common::assert_all_pass("fig11-perturb-stage-start", &r);
}

/// At α = 1e−8 the stages are not separated (lags a_k/Λ of several τ): checked regardless of
/// resolution, the flow is nowhere near β^{k+1} at τ*_{k+1}.
#[test]
fn fig11_perturb_stage_start_unresolved_alpha_fails() {
    let r = common::run_quick(
        "fig11-perturb-stage-start",
        &["alpha=1e-8", "resolution_factor=1e-9"],
    );
    assert!(!passes(
        &r,
        "over-resolved-stage-starts-beta-pert.1e-8-0-01"
    ));
    assert!(passes(
        &r,
        "upward-threshold-crossings-matched-activation-algorithm"
    ));
}

#[test]
fn noise_robustness() {
    let r = common::run_quick("noise-robustness", &[]);
    common::assert_all_pass("noise-robustness", &r);
}

/// Starts with the new coordinate as large as 0.2 are outside the linear escape regime: the
/// hitting time is no longer ln(1/ũ)/|g| + C (slope off by 13%).
#[test]
fn noise_robustness_large_starts_leave_the_linear_regime() {
    let r = common::run_quick("noise-robustness", &["deltas=[0.2]", "min_new=1e-2"]);
    assert!(passes(
        &r,
        "fraction-perturbed-starts-reaching-beta-beta.1e-6"
    ));
    assert!(!passes(&r, "over-stages-delta-slope-theta-hitting"));
}

#[test]
fn diag_gd_vs_flow() {
    let r = common::run_quick("diag-gd-vs-flow", &[]);
    common::assert_all_pass("diag-gd-vs-flow", &r);
}

/// R2 at α = 1e−16: coordinate 2 is active, drops, and re-enters with the opposite sign. While
/// it is active, u − v = c/(u + v) ≈ 1e−32 is below the rounding of u ≈ 1, so raw f64 GD holds
/// u = v exactly and the pair never re-enters (spec §8.2); log-domain GD re-enters.
#[test]
fn diag_gd_vs_flow_raw_gd_fails_on_a_re_entry() {
    let r = common::run_quick("diag-gd-vs-flow", &["instance=\"r2\""]);
    assert!(passes(&r, "transition-tau-gd-tau-flow-eta.3-4-16"));
    assert!(!passes(&r, "transition-tau-gd-tau-flow-eta.4-4-16"));
    assert!(!passes(&r, "tau-raw-f64-gd-tau-log.4"));
}

//! Shared by the Algorithm-1 scenarios (`algorithm1-attn`, `nondegeneracy`,
//! `hessian-strict-min`, `linearization-spectrum`): the Algorithm-1 settings a scenario file may
//! change (spec 004 §3.2 defaults), Algorithm 1 on a named instance, and stage labels.

use serde::{Deserialize, Serialize};

use super::common::{Instance, InstanceName, UserFiles};
use crate::flow::{Method, OdeConfig};
use crate::instance::diagonal::DiagonalData;
use crate::models::diagonal::{
    algorithm1, time_until_active, Algorithm1Options, Flag, Schedule, Termination,
};
use crate::scenario::param::Open01;
use crate::scenario::param::{AtLeast, NonEmpty, Positive};
use crate::scenario::{InputError, Report, RunContext, RunError, Scenario};
use crate::stats;

/// The Algorithm-1 tolerances a scenario exposes (`[params.algorithm1]`); the rest keep the
/// spec §3.2 defaults of [`Algorithm1Options`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Algorithm1Params {
    /// Stop after this many activations (a converged schedule stops by itself).
    pub max_stages: AtLeast<1>,
    /// A4.3(ii) tie tolerance: a runner-up with Δ − Δ* ≤ tol_tie·max(1, Δ*) is a tie.
    pub tol_tie: Positive,
    /// STAGE_B initial sizes ε (eq. 13); the limit must not depend on them.
    pub eps_list: NonEmpty<Open01>,
    /// STAGE_B condition (b): the reduced flow stops at max|G_A| ≤ this × max|G(0)|.
    pub stationarity_rel: Positive,
    /// STAGE_B polish: Newton stops at ‖G_F‖ ≤ this × max|G(0)|.
    pub polish_rel: Positive,
}

impl Default for Algorithm1Params {
    fn default() -> Self {
        let opts = Algorithm1Options::default();
        let eps: Result<Vec<Open01>, _> = opts
            .stage_b
            .eps_list
            .into_iter()
            .map(Open01::try_from)
            .collect();
        let spec = "the spec §3.2 defaults are in range";
        Algorithm1Params {
            max_stages: opts.max_stages.try_into().expect(spec),
            tol_tie: opts.tol_tie.try_into().expect(spec),
            eps_list: eps.expect(spec).try_into().expect(spec),
            stationarity_rel: opts.stage_b.stationarity_rel.try_into().expect(spec),
            polish_rel: opts.stage_b.polish_rel.try_into().expect(spec),
        }
    }
}

impl Algorithm1Params {
    /// The full options: these settings on top of the spec defaults, with `ode` (the
    /// scenario's `[solver]`) integrating the STAGE_B reduced flow.
    pub fn options(&self, ode: &OdeConfig) -> Algorithm1Options {
        let mut opts = Algorithm1Options {
            max_stages: *self.max_stages,
            tol_tie: *self.tol_tie,
            ..Default::default()
        };
        opts.stage_b.method = ode.method;
        opts.stage_b.rtol = ode.rtol;
        opts.stage_b.atol = ode.atol;
        opts.stage_b.eps_list = self.eps_list.iter().map(|e| **e).collect();
        opts.stage_b.stationarity_rel = *self.stationarity_rel;
        opts.stage_b.polish_rel = *self.polish_rel;
        opts
    }
}

/// The STAGE_B reduced-flow integrator of spec §3.3/§8.3 (Bdf, rtol = atol = 1e−11), the
/// default `[solver]` of every Algorithm-1 scenario.
pub const STAGE_B_SOLVER: OdeConfig = OdeConfig::new(Method::Bdf, 1e-11, 1e-11);

/// An instance with its Algorithm-1 schedule.
pub struct Scheduled {
    /// The instance's name in tables and checks ("mini", or "data" for a user's file).
    label: String,
    /// The data the instance was built from (written to `instance.npz`).
    pub data: DiagonalData,
    pub instance: Instance,
    pub schedule: Schedule,
}

impl Scheduled {
    /// Builds `name` and runs Algorithm 1 with explicit options.
    pub fn with_options(
        name: InstanceName,
        opts: &Algorithm1Options,
        ctx: &RunContext,
    ) -> Result<Self, RunError> {
        Self::with_files(name, &UserFiles::default(), opts, ctx)
    }

    /// The user's data file where given (else the built-in `name`), with Algorithm 1.
    pub fn with_files(
        name: InstanceName,
        files: &UserFiles,
        opts: &Algorithm1Options,
        ctx: &RunContext,
    ) -> Result<Self, RunError> {
        let (label, data, instance) = files.instance(name, ctx)?;
        let label = match files.data_file {
            Some(_) => label,
            None => self::label(name),
        };
        let schedule = algorithm1(&instance.loss(), opts)
            .map_err(|e| RunError::Other(format!("Algorithm 1 on {label}: {e}")))?;
        Ok(Scheduled {
            label,
            data,
            instance,
            schedule,
        })
    }

    /// The instance's name as written in scenario files ("mini", "r2", …), or "data".
    pub fn label(&self) -> String {
        self.label.clone()
    }

    /// Display name of coordinate i (KQ\[r\]/VO\[r\] for attention, β\[i\] otherwise).
    pub fn coordinate(&self, i: usize) -> String {
        self.instance.loss().coordinate_name(i)
    }
}

/// An instance's name as written in scenario files.
pub fn label(name: InstanceName) -> String {
    serde_json::to_value(name)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{name:?}"))
}

/// Refuses an empty or repeated instance list.
pub fn validate_instances(
    names: &[InstanceName],
    key: &str,
    sc: &Scenario,
) -> Result<(), InputError> {
    if names.is_empty() {
        return Err(sc.invalid(key, "needs at least one instance"));
    }
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(sc.invalid(key, format!("{} is listed twice", label(*n))));
        }
    }
    Ok(())
}

/// Why Algorithm 1 stopped, in words.
pub fn termination_text(t: &Termination) -> String {
    match t {
        Termination::Converged => "converged (T_{K+1} = ∞)".into(),
        Termination::StageLimit => "stage limit reached".into(),
        Termination::Tie { stage } => format!("A4.3(ii) tie at the end of stage {stage}"),
        Termination::Failed { stage, reason } => format!("failed at stage {stage}: {reason}"),
    }
}

/// A flag of a stage, in words.
pub fn flag_text(f: &Flag) -> String {
    match f {
        Flag::Tie { gap } => format!("tie (gap {gap:e})"),
        Flag::DegenerateDrop { index, signed_g } => {
            format!("degenerate drop of {index} (s·G = {signed_g:e})")
        }
        Flag::NotStrictMinimum { lambda_min, kappa } => {
            format!("not a strict minimum (λ_min = {lambda_min:e}, κ = {kappa:e})")
        }
        Flag::EpsDependence { difference } => format!("ε-dependence {difference:e}"),
        Flag::SlowLimit => "slow stage-B limit".into(),
    }
}

/// Lemma D.4: at every stage k, Δ_k(i) > 0 for every i ∉ S_k; the non-trivial case is a
/// coordinate dropped earlier (b_i ∈ {0, 2}), whose g_i has the sign that sends b_i back across
/// (0, 2), so it can only return with the opposite sign. Algorithm 1 asserts this internally
/// (and stops at a violation); here the minimum over the stages is measured and reported.
///
/// `suffix` labels the instance in ids and names ("" or ".r2").
pub fn lemma_d4_check(rep: &mut Report, s: &Schedule, suffix: &str, paper_initial_b: bool) {
    let (mut all, mut dropped) = (vec![], vec![]);
    for st in &s.stages {
        for (i, (&b, &g)) in st.b.iter().zip(&st.drift).enumerate() {
            if st.support.contains(&i) {
                continue;
            }
            let b = if paper_initial_b && st.k == 0 { 0.0 } else { b };
            let delta = time_until_active(b, g, s.tol_g);
            all.push(delta);
            if st.k > 0 && (b == 0.0 || b == 2.0) {
                dropped.push(delta);
            }
        }
    }
    let min_all = stats::min(all.iter().copied());
    let min_dropped = stats::min(dropped.iter().copied());
    rep.derive(&format!("lemma_d4_min_delta{suffix}"), min_all);
    rep.derive(&format!("lemma_d4_min_delta_dropped{suffix}"), min_dropped);
    rep.derive(
        &format!("lemma_d4_dropped_count{suffix}"),
        dropped.len() as f64,
    );
    rep.at_least(
        &format!("lemma-d4-delta-positive{suffix}"),
        "min_k min_{i ∉ S_k} Δ_k(i) > 0 (Lemma D.4: no immediate re-activation)",
        min_all,
        f64::MIN_POSITIVE,
    )
    .note(format!(
        "{} stages; {} (stage, coordinate) pairs with b ∈ {{0, 2}} (dropped earlier), min Δ \
         over them {min_dropped:.4e}{}",
        s.stages.len(),
        dropped.len(),
        if paper_initial_b {
            "; stage 0 evaluated with the paper's b⁰ = 0"
        } else {
            ""
        }
    ));
}

/// Algorithm 1 converged (T_{K+1} = ∞), raised no assumption flag, and each stage point is
/// stationary on its support (≤ `max_stationarity`): three checks with the caller's ids.
pub fn schedule_checks(rep: &mut Report, s: &Schedule, ids: [&str; 3], max_stationarity: f64) {
    let [converged, flags_id, stationary] = ids;
    rep.holds(
        converged,
        "Algorithm 1 converges (T_{K+1} = ∞)",
        s.termination == Termination::Converged,
    )
    .note(termination_text(&s.termination));
    let flags: usize = s.stages.iter().map(|st| st.flags.len()).sum();
    rep.at_most(
        flags_id,
        "assumption flags raised (A4.3, A4.4, eq. 13)",
        flags as f64,
        0.0,
    )
    .note("ties, degenerate drops, non-strict minima, ε-dependence, slow limits");
    rep.at_most(
        stationary,
        "max_k max_{S_k} |G(β^k)| (stationarity)",
        stats::max(s.stages.iter().map(|st| st.diagnostics.stationarity)),
        max_stationarity,
    )
    .note("θ^k is a stationary point of L̃ on its support");
}

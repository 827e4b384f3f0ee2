//! What every seed-001 scenario shares: the named datasets (spec 001 §5.1) and the
//! max-margin solutions the trajectories are measured against (spec §3: ℓ1 and diagonal ℓ2,
//! Frobenius and nuclear W-SVMs, each with its certificate).

use serde::{Deserialize, Serialize};

use crate::analysis::svm::{
    solve_l1, solve_l2, solve_nuclear, L1Solution, L2Solution, NuclearSettings, NuclearSolution,
    RankOneConstraints, SvmError, SvmMethod, VectorConstraints,
};
use crate::attention::Instance;
use std::path::Path;

use crate::instance::kq::KqData;
use crate::models::kq::assumptions::a4_report;
use crate::models::kq::generators::{first_valid, RandomA2, RandomA4};
use crate::models::kq::toys;
use crate::scenario::param::Decades;
use crate::scenario::{InputError, RunContext, RunError, Scenario};

/// Random stream of the data (random datasets).
pub const DATA_STREAM: u64 = 0;
/// First stream free for a scenario's own randomness (initializations, trials, …).
pub const FIRST_FREE_STREAM: u64 = 1;
/// Draws of a random dataset before giving up on A1, A1-diag and A3 (spec §5.1 resampling).
const MAX_DRAWS: usize = 100;

/// The datasets of spec 001 §5.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataName {
    /// One constraint (d = 3): ℓ1 β* = (1, 0, 0), ℓ2 (0.8, 0.4, 0).
    Toy1,
    /// The diagonal discriminator toy-2(1.6): ℓ1 β* = (0, 0.625, 0, 0).
    Toy2b,
    /// toy-2(1.2): unique ℓ1 solution with a slow off-support exponent 1/6.
    Toy2Slow,
    /// toy-2(1.0): a degenerate LP (the ℓ1 solution set is a segment).
    Toy2Degenerate,
    /// The full-model discriminator (d = 2): W_* rank one, W_F rank two.
    Toy3,
    /// Assumption-4 data (d = 4, L = 3): aligned limit W* = Diag(1/2.4, −1/1.6, 0, 0).
    Toy4,
    /// random-A2 with the spec defaults (d = 5, n = 2, L = 3, Δ = 3, γ_nopt = 0), redrawn
    /// until A1, A1-diag and A3 hold.
    RandomA2,
    /// random-A4 with toy-4's shape and scores (n = 2, L = 3, d = 4, γ_opt = 4, c = 0.2).
    RandomA4,
}

/// The name a dataset has in scenario files (`toy2b`, `random-a2`, …).
pub fn data_label(name: DataName) -> String {
    serde_json::to_value(name)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{name:?}"))
}

/// [`named_instance`] as bad input naming `params.data`.
pub fn named_input(name: DataName, sc: &Scenario) -> Result<Instance, InputError> {
    named_instance(name, sc).map_err(|e| sc.invalid("params.data", e.to_string()))
}

/// The data of a full-model scenario and its label: the user's `data_file` (refused unless A1
/// holds), else the named dataset.
pub fn chosen_data(
    sc: &Scenario,
    data: DataName,
    data_file: Option<&Path>,
) -> Result<(String, Instance), InputError> {
    match data_file {
        Some(path) => Ok((USER_LABEL.to_string(), user_data(sc, path, false)?)),
        None => Ok((data_label(data), named_input(data, sc)?)),
    }
}

/// Builds the named dataset (the scenario seed's data stream feeds the random ones).
pub fn build_instance(name: DataName, ctx: &RunContext) -> Result<Instance, RunError> {
    named_instance(name, ctx.scenario)
}

/// [`build_instance`] while a scenario is prepared (before any run context exists).
pub fn named_instance(name: DataName, sc: &Scenario) -> Result<Instance, RunError> {
    let mut rng = sc.rng(DATA_STREAM);
    let drawn = match name {
        DataName::Toy1 => return Ok(toys::toy1()),
        DataName::Toy2b => return Ok(toys::toy2b()),
        DataName::Toy2Slow => return Ok(toys::toy2(1.2)),
        DataName::Toy2Degenerate => return Ok(toys::toy2(1.0)),
        DataName::Toy3 => return Ok(toys::toy3()),
        DataName::Toy4 => return Ok(toys::toy4()),
        DataName::RandomA2 => first_valid(MAX_DRAWS, || RandomA2::default().generate(&mut rng)),
        DataName::RandomA4 => first_valid(MAX_DRAWS, || RandomA4::default().generate(&mut rng)),
    };
    drawn
        .map(|(inst, _, _)| inst)
        .map_err(|e| RunError::Other(format!("generating {}: {e}", data_label(name))))
}

/// The label of user data in check names and tables (fixed, so a run's `instance.npz` fed back
/// reproduces it byte for byte).
pub const USER_LABEL: &str = "data_file";

/// The user's data (`params.data_file`, the seed-001 layout of [`crate::instance::kq`]),
/// refused unless a W separates its optimal tokens — A1, or A1-diag (a diagonal W) when
/// `diagonal`: the max-margin solutions the theorems name exist only then.
pub fn user_data(sc: &Scenario, path: &Path, diagonal: bool) -> Result<Instance, InputError> {
    let data: KqData = sc.read_instance("data_file", path)?;
    let inst = data.instance;
    let feasible = RankOneConstraints::w_svm(&inst.data.view(), &inst.opt).and_then(|c| {
        if diagonal {
            solve_l1(&c.diagonal()?).map(|_| ())
        } else {
            solve_l2(&c, SvmMethod::Dual).map(|_| ())
        }
    });
    let (assumption, what) = if diagonal {
        ("A1-diag", "diagonal W")
    } else {
        ("A1", "W")
    };
    match feasible {
        Ok(()) => Ok(inst),
        Err(e) => Err(InputError::new(
            &sc.input_path("data_file", path),
            "X",
            format!(
                "{assumption} fails: no {what} separates the optimal tokens ({e}) (file given by \
                 params.data_file)"
            ),
        )),
    }
}

/// Residual tolerance of A4 on a user's data (exact alignment is rare in floating point).
const A4_TOL: f64 = 1e-9;

/// Refuses a user's data (`params.data_file` = `path`) on which A4 fails: the aligned
/// scenarios' theory (Lemma 5.1, Thm 5.1, spec §6 items 10–11) is about aligned data.
pub fn require_a4(sc: &Scenario, path: &Path, inst: &Instance) -> Result<(), InputError> {
    let a4 = a4_report(inst);
    if a4.holds(A4_TOL) && inst.data.d >= 2 {
        return Ok(());
    }
    Err(InputError::new(
        &sc.input_path("data_file", path),
        "X",
        format!(
            "A4 fails (odd token count {}, orthogonality residual {:.3e}, alignment residual \
             {:.3e}, pairing residual {:.3e}, tolerance {A4_TOL:e}; d ≥ 2 needed): this scenario's \
             closed forms need aligned data (file given by params.data_file)",
            a4.odd_tokens, a4.orthogonality, a4.alignment, a4.pairing
        ),
    ))
}

/// The max-margin programs of spec §3 on one constraint set, each certified.
#[derive(Debug, Clone)]
pub struct SvmSuite {
    /// A_il = (x_i,opt − x_il) z_iᵀ.
    pub constraints: RankOneConstraints,
    /// B_il = diag A_il.
    pub diagonal: VectorConstraints,
    /// ℓ1-SVM = nuclear SVM on diagonal W (clarabel LP); `None` when A1-diag fails.
    pub l1: Option<L1Solution>,
    /// ℓ2-SVM on the diagonal (the Wdiag limit); `None` when A1-diag fails.
    pub l2_diag: Option<L2Solution>,
    /// W_F-SVM (QP, dual and polished).
    pub frobenius: L2Solution,
    /// W_*-SVM (primal–dual iteration with certified bracket).
    pub nuclear: NuclearSolution,
}

/// Solves every program of §3; infeasible full constraints (A1 fails) are an error, infeasible
/// diagonal ones (A1-diag fails) leave `l1` and `l2_diag` empty.
pub fn solve_svms(
    constraints: RankOneConstraints,
    settings: &NuclearSettings,
) -> Result<SvmSuite, SvmError> {
    let frobenius = solve_l2(&constraints, SvmMethod::Dual)?;
    let nuclear = solve_nuclear(&constraints, settings)?;
    let diagonal = constraints.diagonal()?;
    let (l1, l2_diag) = match solve_l1(&diagonal) {
        Ok(l1) => (Some(l1), Some(solve_l2(&diagonal, SvmMethod::Dual)?)),
        Err(SvmError::Infeasible { .. }) => (None, None),
        Err(e) => return Err(e),
    };
    Ok(SvmSuite {
        constraints,
        diagonal,
        l1,
        l2_diag,
        frobenius,
        nuclear,
    })
}

/// [`solve_svms`] on an instance's constraints, errors labelled for a run.
pub fn instance_svms(
    inst: &Instance,
    label: &str,
    settings: &NuclearSettings,
) -> Result<SvmSuite, RunError> {
    let fail = |e: SvmError| RunError::Other(format!("{label}: {e}"));
    let c = RankOneConstraints::w_svm(&inst.data.view(), &inst.opt).map_err(fail)?;
    solve_svms(c, settings).map_err(fail)
}

/// Singular values of vec(W) (column-major, rows × cols), largest first.
pub fn singular_values(c: &RankOneConstraints, w: &[f64]) -> Vec<f64> {
    let mut s: Vec<f64> = c.matrix(w).singular_values().iter().copied().collect();
    s.sort_by(|a, b| b.total_cmp(a));
    s
}

/// Numerical rank: singular values above 1e−6·σ_max (the nuclear solver's convention).
pub fn numerical_rank(singular_values: &[f64]) -> usize {
    let top = singular_values.first().copied().unwrap_or(0.0);
    singular_values.iter().filter(|&&s| s > 1e-6 * top).count()
}

/// A diagonal flow's initial scales ω₀ (nonzero by type): one per coordinate of the named
/// data set.
pub fn require_omega0(sc: &Scenario, data: DataName, omega0: &[f64]) -> Result<(), InputError> {
    let d = named_input(data, sc)?.data.d;
    if omega0.len() != d {
        return Err(sc.invalid(
            "params.omega0",
            format!("needs d = {d} entries (the data's dimension)"),
        ));
    }
    Ok(())
}

/// The cost of one diagonal flow solved to τ_max in the log clock with `dim` states, recording
/// `columns` numbers at each of `per_decade` samples per decade from τ = 1e-3.
pub fn log_horizon_cost(
    tau_max: f64,
    per_decade: usize,
    method: crate::flow::Method,
    dim: f64,
    columns: f64,
) -> crate::scenario::cost::Cost {
    use crate::scenario::cost::{n, Cost};
    let samples = (tau_max.log10() + 3.0) * n(per_decade) + 2.0;
    Cost::new().ode("tau_max", 1.0, dim, 100.0, method).records(
        "tau_max, per_decade",
        1.0,
        samples,
        columns,
    )
}

/// The log-time horizon of a diagonal flow: τ_max in (10, 1e10] (spec §8: beyond µ ≈ 1e12 the
/// margins drown in rounding).
pub type DiagonalHorizon = Decades<1, 10>;

/// A gap that is ≥ 0 up to rounding, floored at 1e-16 for a log axis (NaN stays NaN).
pub fn log_axis_floor(v: f64) -> f64 {
    if v.is_finite() {
        v.max(1e-16)
    } else {
        f64::NAN
    }
}

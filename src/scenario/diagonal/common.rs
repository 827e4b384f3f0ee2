//! What every seed-004 scenario shares: the instance it runs on (spec 004 §3.6, §5.1), the
//! initial direction θ_0 shared by every α (§1.4), Algorithm 1 on the instance, and one
//! log-layout run at a given ln α with the spec §4 transition events (§8.2, §8.4).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::flow::{integrate, Method, OdeConfig, Trajectory};
use crate::instance::diagonal::{DiagonalData, DiagonalInit, Labels};
use crate::models::diagonal::{
    algorithm1, transition_times, Algorithm1Options, AttentionSamples, BetaLoss, DiagLinear,
    DiagonalAttention, DiagonalError, DiagonalScores, Layout, LogCoordinates, LogFlow, LossScale,
    Schedule, TransitionEvents,
};
use crate::scenario::cost::{Cost, FLOPS_PER_SECOND};
use crate::scenario::sweep::SweepSpec;
use crate::scenario::{InputError, RunContext, RunError, Scenario};

/// Random stream of the attention inputs X (the teacher is fixed, spec §5.1).
pub const DATA_STREAM: u64 = 0;
/// Random stream of the initial direction θ_0 = (u0, v0).
pub const INIT_STREAM: u64 = 1;
/// First stream free for a scenario's own randomness (perturbations, samples, …).
pub const FIRST_FREE_STREAM: u64 = 2;

/// The instances of spec 004: the diagonal linear references R1, R2, R2-degenerate (§3.6) and
/// the diagonal attention student–teacher task at three sizes (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceName {
    R1,
    R2,
    R2Degenerate,
    /// M1: n = 4, d = 6, N = 64, a* = (1.5, −1, 0, …), c* = (0, 0, 1, −0.7, 0.5, 0).
    Mini,
    /// n = 6, d = 12, N = 256, sparse teacher on KQ {0, 1, 2} and VO {3, 4, 5}.
    Small,
    /// The paper's toy task: n = 10, d = 50, N = 1000, the same sparse teacher (heavy).
    Paper,
}

impl InstanceName {
    /// The instance's size for cost estimates (see [`crate::scenario::cost`]): the coordinates
    /// p of β (a flow's state has 2p), the floating-point operations of one gradient of L̃ (for
    /// attention ~6·N·n²·d over the N samples of n tokens in ℝ^d) and the CPU time of
    /// Algorithm 1, measured (release build, seed 0, on the loaded 2-core development machine):
    /// its work is a sequence of adaptive reduced flows and Newton polishes whose count no
    /// formula gives. The instances are fixed, so every cost that depends only on the instance
    /// is a constant.
    pub fn size(self) -> InstanceSize {
        let attention = |tokens: f64, samples: f64, d: f64, schedule_seconds| InstanceSize {
            p: 2.0 * d,
            grad: 6.0 * samples * tokens * tokens * d,
            schedule_seconds,
        };
        match self {
            InstanceName::R1 | InstanceName::R2 | InstanceName::R2Degenerate => InstanceSize {
                p: 5.0,
                grad: 100.0,
                schedule_seconds: 0.01,
            },
            InstanceName::Mini => attention(4.0, 64.0, 6.0, 0.4),
            InstanceName::Small => attention(6.0, 256.0, 12.0, 7.0),
            InstanceName::Paper => attention(10.0, 1000.0, 50.0, PAPER_SCHEDULE_SECONDS),
        }
    }

    /// T_last/η_max (seed 0): gradient descent at η = η_max takes this many steps per unit of
    /// horizon·Λ (the paper instance, not measured, is taken as `small`'s).
    pub fn gd_steps_per_unit(self) -> f64 {
        match self {
            InstanceName::R1 => 80.0,
            InstanceName::R2 | InstanceName::R2Degenerate => 878.0,
            InstanceName::Mini => 46.2,
            InstanceName::Small | InstanceName::Paper => 61.4,
        }
    }
}

impl InstanceName {
    /// Whether this is a diagonal attention head (mini, small, paper) rather than a linear network.
    pub fn is_attention(self) -> bool {
        matches!(
            self,
            InstanceName::Mini | InstanceName::Small | InstanceName::Paper
        )
    }

    /// The number p of product coordinates β (2d for attention).
    pub fn p(self) -> usize {
        match self {
            InstanceName::R1 => 5,
            InstanceName::R2 | InstanceName::R2Degenerate => 3,
            InstanceName::Mini => 12,
            InstanceName::Small => 24,
            InstanceName::Paper => 100,
        }
    }
}

/// See [`InstanceName::size`].
#[derive(Debug, Clone, Copy)]
pub struct InstanceSize {
    pub p: f64,
    pub grad: f64,
    pub schedule_seconds: f64,
}

/// Algorithm 1 on `name` (computed once per process and instance, see [`shared_schedule`]).
pub fn schedule_cost(key: &'static str, name: InstanceName) -> Cost {
    let seconds = name.size().schedule_seconds;
    let what = format!("Algorithm 1 on {name:?} (measured: {seconds} s)");
    Cost::new().work(key, what, 1.0, seconds * FLOPS_PER_SECOND)
}

/// Algorithm 1 and one log-layout run of `name`, every one of `samples` states kept and tabled
/// with every coordinate (the shape of the α-sweep runners).
pub fn sampled_run_cost(name: InstanceName, samples: usize, method: Method) -> Cost {
    let coords = name.size().p;
    schedule_cost("instance", name)
        .and(flow_cost("samples", name, 1.0, samples as f64, method))
        .table("samples", samples as f64, 2.0 * coords)
}

/// `solves` log-layout flows of `name` (dimension 2p), keeping `samples` states each.
pub fn flow_cost(
    key: &'static str,
    name: InstanceName,
    solves: f64,
    samples: f64,
    method: Method,
) -> Cost {
    let InstanceSize { p, grad, .. } = name.size();
    Cost::new()
        .ode(key, solves, 2.0 * p, grad, method)
        .records(key, solves, samples, 2.0 * p)
}

/// Algorithm 1 on the paper instance, measured.
const PAPER_SCHEDULE_SECONDS: f64 = 155.0;

/// A built instance: its β-loss and, for attention, the head (for KQ/VO names and ranks).
pub enum Instance {
    Linear(DiagLinear),
    Attention(DiagonalAttention),
}

/// Sparse teacher of the `small` and `paper` configurations (spec §5.1): KQ entries on {0, 1, 2}
/// and VO entries on {3, 4, 5}, both (1, −0.8, 0.6).
fn sparse_teacher(d: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut a, mut c) = (vec![0.0; d], vec![0.0; d]);
    a[..3].copy_from_slice(&[1.0, -0.8, 0.6]);
    c[3..6].copy_from_slice(&[1.0, -0.8, 0.6]);
    (a, c)
}

/// The data of a built-in instance: R1, R2, R2-degenerate (spec §3.6), or N Gaussian attention
/// inputs from the scenario seed's data stream labelled by the fixed teacher (spec §5.1).
pub fn builtin_data(name: InstanceName, sc: &Scenario) -> DiagonalData {
    let attention = |n: usize, count: usize, a: &[f64], c: &[f64]| {
        let x = AttentionSamples::gaussian_inputs(count, n, a.len(), &mut sc.rng(DATA_STREAM));
        DiagonalData::Attention {
            count,
            n,
            d: a.len(),
            x,
            labels: Labels::Teacher {
                a_star: a.to_vec(),
                c_star: c.to_vec(),
            },
        }
    };
    let linear = |m: DiagLinear| DiagonalData::Linear {
        sigma: m.sigma().clone(),
        beta_star: m.teacher().expect("the references are realizable").to_vec(),
    };
    match name {
        InstanceName::R1 => linear(DiagLinear::r1()),
        InstanceName::R2 => linear(DiagLinear::r2()),
        InstanceName::R2Degenerate => linear(DiagLinear::r2_degenerate()),
        InstanceName::Mini => attention(
            4,
            64,
            &DiagonalAttention::MINI_KQ,
            &DiagonalAttention::MINI_VO,
        ),
        InstanceName::Small => {
            let (a, c) = sparse_teacher(12);
            attention(6, 256, &a, &c)
        }
        InstanceName::Paper => {
            let (a, c) = sparse_teacher(50);
            attention(10, 1000, &a, &c)
        }
    }
}

impl Instance {
    /// Builds the instance; attention inputs come from the scenario seed's data stream.
    pub fn build(name: InstanceName, ctx: &RunContext) -> Result<Self, RunError> {
        Self::from_data(&builtin_data(name, ctx.scenario))
            .map_err(|e| RunError::Other(format!("building the {name:?} instance: {e}")))
    }

    /// The model on an instance's data (a built-in one or the user's file): the realizable
    /// linear loss, or the attention head with the mean squared error of spec §5.1.
    pub fn from_data(data: &DiagonalData) -> Result<Self, DiagonalError> {
        match data {
            DiagonalData::Linear { sigma, beta_star } => {
                DiagLinear::realizable(sigma.clone(), beta_star.clone()).map(Instance::Linear)
            }
            DiagonalData::Attention {
                n, d, x, labels, ..
            } => {
                let map = DiagonalScores { d: *d };
                let samples = match labels {
                    Labels::Teacher { a_star, c_star } => {
                        let teacher: Vec<f64> = a_star.iter().chain(c_star).copied().collect();
                        AttentionSamples::from_teacher(&map, &teacher, *n, x.clone())?
                    }
                    Labels::Given(y) => AttentionSamples::new(*n, *d, x.clone(), y.clone())?,
                };
                DiagonalAttention::new(map, samples, LossScale::Mean.kappa(*n, *d))
                    .map(Instance::Attention)
            }
        }
    }

    /// The β-loss L̃ of the instance.
    pub fn loss(&self) -> &dyn BetaLoss {
        match self {
            Instance::Linear(m) => m,
            Instance::Attention(m) => m,
        }
    }

    /// The attention head, if this is an attention instance.
    pub fn attention(&self) -> Option<&DiagonalAttention> {
        match self {
            Instance::Linear(_) => None,
            Instance::Attention(m) => Some(m),
        }
    }

    /// Algorithm 1 with its default tolerances (spec §3.2).
    pub fn schedule(&self) -> Result<Schedule, RunError> {
        algorithm1(&self.loss(), &Algorithm1Options::default())
            .map_err(|e| RunError::Other(format!("Algorithm 1: {e}")))
    }
}

/// `β ↦ L̃(β)` of whichever model the instance is (for [`crate::models::diagonal::DiagonalNet`]).
impl BetaLoss for Instance {
    fn p(&self) -> usize {
        self.loss().p()
    }
    fn loss(&self, beta: &[f64]) -> f64 {
        self.loss().loss(beta)
    }
    fn grad_beta(&self, beta: &[f64], out: &mut [f64]) {
        self.loss().grad_beta(beta, out)
    }
    fn hvp_beta(&self, beta: &[f64], dir: &[f64], out: &mut [f64]) {
        self.loss().hvp_beta(beta, dir, out)
    }
    fn coordinate_name(&self, i: usize) -> String {
        self.loss().coordinate_name(i)
    }
}

/// How a user's data is named in tables and check names.
pub const USER_LABEL: &str = "data";

/// The user's instance files of a seed-004 scenario (`params.data_file`, `params.init_file`):
/// they replace the built-in instance and the seed's θ_0. Read once in `validate` (bad files
/// are bad input: exit 2, nothing written) and again by the run.
#[derive(Debug, Clone, Default)]
pub struct UserFiles {
    pub data_file: Option<PathBuf>,
    pub init_file: Option<PathBuf>,
}

impl UserFiles {
    pub fn new(data_file: &Option<PathBuf>, init_file: &Option<PathBuf>) -> Self {
        UserFiles {
            data_file: data_file.clone(),
            init_file: init_file.clone(),
        }
    }

    /// The instance's name in tables and check names: [`USER_LABEL`] for a user's data file,
    /// else the built-in `name`'s.
    pub fn label(&self, name: InstanceName) -> &'static str {
        match self.data_file {
            Some(_) => USER_LABEL,
            None => super::sweeps_common::instance_label(name),
        }
    }

    /// As [`UserFiles::label`] for a scenario with its own spelling `builtin` of the built-in
    /// name (kept, so that default outputs do not change).
    pub fn label_or(&self, builtin: String) -> String {
        match self.data_file {
            Some(_) => USER_LABEL.to_string(),
            None => builtin,
        }
    }

    /// With a data file every run of a sweep uses the file, so a grid over several built-in
    /// instances would repeat the same run under different names: refused.
    pub fn refuse_instance_grid(&self, spec: &SweepSpec, sc: &Scenario) -> Result<(), InputError> {
        if self.data_file.is_some() && spec.grid.get("instance").is_some_and(|v| v.len() > 1) {
            return Err(sc.invalid(
                "sweep.grid.instance",
                "with params.data_file every run uses the file: sweep one instance \
                 (--set 'sweep.grid.instance=[\"mini\"]')",
            ));
        }
        Ok(())
    }

    /// As [`UserFiles::refuse_instance_grid`] for a scenario that loops over a list of
    /// instances (`params.<key>`): with a data file the list must name one instance, which the
    /// file replaces; an init file (one θ_0 of one length) needs one instance too.
    pub fn refuse_instance_list(
        &self,
        key: &str,
        names: &[InstanceName],
        sc: &Scenario,
    ) -> Result<(), InputError> {
        let given = match (&self.data_file, &self.init_file) {
            (Some(_), _) => "data_file",
            (None, Some(_)) => "init_file",
            (None, None) => return Ok(()),
        };
        if names.len() > 1 {
            return Err(sc.invalid(
                &format!("params.{key}"),
                format!(
                    "with params.{given} the run is on one instance: list one \
                     (--set '{key}=[\"mini\"]')"
                ),
            ));
        }
        Ok(())
    }

    /// [`UserFiles::validate`] for a scenario about the attention head (`kind`, in messages):
    /// the file, else the built-in `name`, must be an attention instance (mini, small, paper).
    pub fn validate_attention(
        &self,
        name: InstanceName,
        kind: &str,
        sc: &Scenario,
    ) -> Result<Option<DiagonalData>, InputError> {
        let data = self.validate(name, sc)?;
        match (&self.data_file, &data) {
            (Some(file), Some(DiagonalData::Linear { .. })) => Err(InputError::new(
                &sc.input_path("data_file", file),
                "Sigma",
                format!(
                    "{kind} needs an attention instance (X with a_star, c_star or Y), the file \
                     holds a linear network (file given by params.data_file)"
                ),
            )),
            (None, _) if !name.is_attention() => Err(sc.invalid(
                "params.instance",
                format!("{kind} needs an attention instance (mini, small or paper)"),
            )),
            _ => Ok(data),
        }
    }

    /// Reads and validates the files against each other and the built-in `name` they replace;
    /// returns the data when a data file is given.
    pub fn validate(
        &self,
        name: InstanceName,
        sc: &Scenario,
    ) -> Result<Option<DiagonalData>, InputError> {
        let data = self
            .data_file
            .as_ref()
            .map(|f| sc.read_instance::<DiagonalData>("data_file", f))
            .transpose()?;
        if let Some((key, f)) = self.init_source(sc) {
            read_init(sc, key, f, data.as_ref().map_or(name.p(), DiagonalData::p))?;
        }
        Ok(data)
    }

    /// Where θ_0 is read: the init file, else the data file when it holds `u0` (a run's
    /// `instance.npz` holds both), else nowhere (the seed's direction).
    fn init_source(&self, sc: &Scenario) -> Option<(&'static str, &PathBuf)> {
        match (&self.init_file, &self.data_file) {
            (Some(f), _) => Some(("init_file", f)),
            (None, Some(f)) => crate::instance::Arrays::read(&sc.input_path("data_file", f))
                .is_ok_and(|a| a.get("u0").is_some())
                .then_some(("data_file", f)),
            (None, None) => None,
        }
    }

    /// The label, the data and the model: the user's data file, or the built-in `name`.
    pub fn instance(
        &self,
        name: InstanceName,
        ctx: &RunContext,
    ) -> Result<(String, DiagonalData, Instance), RunError> {
        let (label, data) = match &self.data_file {
            Some(f) => (
                USER_LABEL.to_string(),
                ctx.scenario.read_instance::<DiagonalData>("data_file", f)?,
            ),
            None => (
                super::sweeps_common::instance_label(name).to_string(),
                builtin_data(name, ctx.scenario),
            ),
        };
        let instance = Instance::from_data(&data)
            .map_err(|e| RunError::Other(format!("building the {label} instance: {e}")))?;
        Ok((label, data, instance))
    }

    /// θ_0: the user's init file, or the seed's direction ([`initial_direction`]).
    pub fn init(
        &self,
        p: usize,
        min_margin: f64,
        ctx: &RunContext,
    ) -> Result<DiagonalInit, RunError> {
        Ok(match self.init_source(ctx.scenario) {
            Some((key, f)) => read_init(ctx.scenario, key, f, p)?,
            None => {
                let (u0, v0) = initial_direction(p, min_margin, ctx);
                DiagonalInit { u0, v0 }
            }
        })
    }
}

/// The init file for `p` coordinates; errors name the file, the array and the reason.
fn read_init(
    sc: &Scenario,
    key: &str,
    file: &std::path::Path,
    p: usize,
) -> Result<DiagonalInit, InputError> {
    let init: DiagonalInit = sc.read_instance(key, file)?;
    init.check_dim(p).map_err(|e| {
        InputError::new(
            &sc.input_path(key, file),
            e.key,
            format!("{} (file given by params.{key})", e.reason),
        )
    })?;
    Ok(init)
}

/// Algorithm 1 on instance `name` built from the scenario's seed, computed once
/// per process: the runs of an α sweep (parallel threads, same instance and seed) share it
/// instead of each recomputing it (about 4 s on `small`). The schedule is a function of
/// (name, seed) alone, so sharing it changes no number.
pub fn shared_schedule(name: InstanceName, ctx: &RunContext) -> Result<Schedule, RunError> {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Slot = Arc<OnceLock<Result<Schedule, String>>>;
    static SCHEDULES: Mutex<BTreeMap<(String, u64), Slot>> = Mutex::new(BTreeMap::new());
    let slot: Slot = {
        let mut map = SCHEDULES.lock().unwrap_or_else(|e| e.into_inner());
        map.entry((format!("{name:?}"), ctx.scenario.seed))
            .or_default()
            .clone()
    };
    // other threads asking for the same schedule wait here while the first computes it
    slot.get_or_init(|| {
        Instance::build(name, ctx)
            .and_then(|instance| instance.schedule())
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(RunError::Other)
}

/// The initial direction θ_0 = (u0, v0), i.i.d. N(0, 1) from the init stream, redrawn
/// coordinate-wise until ||u0_i| − |v0_i|| ≥ `min_margin` (A4.3(i), spec §4). The same θ_0 is
/// used for every α, so runs at different α differ only by the scale.
pub fn initial_direction(p: usize, min_margin: f64, ctx: &RunContext) -> (Vec<f64>, Vec<f64>) {
    draw_direction(p, min_margin, ctx.scenario)
}

/// [`initial_direction`] while preparing a run (from the scenario alone).
pub fn draw_direction(p: usize, min_margin: f64, sc: &Scenario) -> (Vec<f64>, Vec<f64>) {
    use rand_distr::{Distribution, StandardNormal};
    let mut rng = sc.rng(INIT_STREAM);
    let (mut u0, mut v0) = (Vec::with_capacity(p), Vec::with_capacity(p));
    for _ in 0..p {
        loop {
            let u: f64 = StandardNormal.sample(&mut rng);
            let v: f64 = StandardNormal.sample(&mut rng);
            if (u.abs() - v.abs()).abs() >= min_margin {
                u0.push(u);
                v0.push(v);
                break;
            }
        }
    }
    (u0, v0)
}

/// One log-layout run at α = e^{ln_alpha} from α θ_0.
pub struct AlphaRun {
    /// Λ = ln(1/α).
    pub lambda: f64,
    pub coords: LogCoordinates,
    /// The trajectory in unrescaled time t = τΛ (states are ζ = ln w).
    pub traj: Trajectory,
    /// Measured transition times t̂_k (unrescaled), k = 1..K, from root events (spec §4).
    pub transitions: Vec<Option<f64>>,
}

impl AlphaRun {
    /// β(t) at output sample j.
    pub fn beta(&self, j: usize) -> Vec<f64> {
        let mut beta = vec![0.0; self.coords.p()];
        self.coords.beta(
            &self.traj.states[j * self.traj.dim..(j + 1) * self.traj.dim],
            &mut beta,
        );
        beta
    }

    /// Rescaled output times τ = t/Λ.
    pub fn taus(&self) -> Vec<f64> {
        self.traj.t.iter().map(|t| t / self.lambda).collect()
    }
}

/// Integrates the log-layout flow of `loss` from α θ_0 (α = e^{ln_alpha}, any value, e.g.
/// −2000) and samples it at rescaled times `taus`, with the transition events of `schedule`
/// (β_{i_{k−1}} reaching ½β^k_{i_{k−1}}).
pub fn alpha_run(
    loss: &dyn BetaLoss,
    init: &(Vec<f64>, Vec<f64>),
    ln_alpha: f64,
    schedule: &Schedule,
    taus: &[f64],
    cfg: &OdeConfig,
) -> Result<AlphaRun, RunError> {
    let lambda = -ln_alpha;
    let (coords, zeta0) = LogCoordinates::from_init(&init.0, &init.1, ln_alpha)
        .map_err(|e| RunError::Other(format!("initial state: {e}")))?;
    let flow = LogFlow::new(loss, coords.clone());
    let events = TransitionEvents::for_schedule(&loss, Layout::Log(&coords), schedule, 0.5);
    let times: Vec<f64> = taus.iter().map(|tau| tau * lambda).collect();
    let traj = events.with_events(false, |e| integrate(&flow, &zeta0, &times, cfg, Some(e)))?;
    let transitions = transition_times(&traj.events, events.len());
    Ok(AlphaRun {
        lambda,
        coords,
        traj,
        transitions,
    })
}

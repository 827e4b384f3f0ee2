//! Algorithm 1 on the reference instances of spec 004 §3.6 (R1, R2, R2-degenerate, M1), its
//! theory curves, the linearization at the plateau points (§2.5), and ties.

use nalgebra::DMatrix;

use super::algorithm1::{algorithm1, Algorithm1Options, Flag, Schedule, Termination};
use super::attention::DiagonalAttention;
use super::linear::DiagLinear;
use super::network::{BetaLoss, DiagonalNet};
use super::testing::max_diff;
use crate::analysis::linearize::{eigenvalues, jacobian};
use crate::flow::Descent;
use crate::stats;

fn run<L: BetaLoss>(loss: &L) -> Schedule {
    algorithm1(loss, &Algorithm1Options::default()).unwrap()
}

fn activations(s: &Schedule) -> Vec<(usize, f64)> {
    s.stages
        .iter()
        .filter_map(|st| st.entered_by.as_ref().map(|a| (a.index, a.sign)))
        .collect()
}

#[test]
fn r1_orthogonal_stage_times_are_reciprocal_teacher_magnitudes() {
    let model = DiagLinear::r1();
    let s = run(&model);
    assert_eq!(s.termination, Termination::Converged);
    let times = s.stage_times();
    for (t, exact) in times.iter().zip([0.0, 1.0, 2.0, 4.0, 8.0]) {
        assert!((t - exact).abs() < 1e-12, "{times:?}");
    }
    assert_eq!(times.len(), 5);
    assert_eq!(
        activations(&s),
        vec![(0, 1.0), (1, -1.0), (2, 1.0), (4, -1.0)]
    );
    let last = s.stages.last().unwrap();
    assert!(max_diff(&last.beta, model.teacher().unwrap()) < 1e-12);
    assert_eq!(last.support, vec![0, 1, 2, 4]);
    for stage in &s.stages {
        assert!(stage.flags.is_empty(), "{:?}", stage.flags);
        assert!(stage.diagnostics.eps_difference <= 1e-8);
        // Σ = I: every Hessian eigenvalue is 1 and c_k = 2 min|β_S|
        assert!(stage
            .diagnostics
            .hessian_eigenvalues
            .iter()
            .all(|l| (l - 1.0).abs() < 1e-14));
        if !stage.support.is_empty() {
            let min_beta = crate::stats::min(stage.support.iter().map(|&i| stage.beta[i].abs()));
            assert!((stage.diagnostics.c_k - 2.0 * min_beta).abs() < 1e-12);
        }
        // b is 0 (s = +1) or 2 (s = −1) on the support
        for &i in &stage.support {
            let expected = if stage.beta[i] > 0.0 { 0.0 } else { 2.0 };
            assert_eq!(stage.b[i], expected);
        }
    }
    // coordinate 3 has g ≡ 0: it never moves on the log scale
    assert!(s.stages.iter().all(|st| st.b[3] == 1.0));
}

#[test]
fn r2_reproduces_the_drop_and_the_opposite_sign_reentry() {
    let model = DiagLinear::r2();
    let s = run(&model);
    assert_eq!(s.termination, Termination::Converged);
    let t = s.stage_times();
    let expected_t = [0.0, 1.099925, 1.748328, 4.208315, 72.584383];
    assert_eq!(t.len(), 5);
    for (a, b) in t.iter().zip(expected_t) {
        assert!((a - b).abs() <= 1e-6 * b.max(1.0), "{t:?}");
    }
    assert_eq!(
        activations(&s),
        vec![(2, 1.0), (0, 1.0), (1, 1.0), (2, -1.0)]
    );
    let expected_beta = [
        [0.0, 0.0, 0.909153],
        [0.342141, 0.0, 0.679319],
        [0.798475, 0.598475, 0.0],
        [1.0, 0.8, -0.3],
    ];
    let constant = model.constant();
    let plateau_losses = [-0.41328, -0.44540, -0.49787, -0.50225];
    for k in 1..5 {
        let stage = &s.stages[k];
        assert!(
            max_diff(&stage.beta, &expected_beta[k - 1]) < 1e-6,
            "{k}: {:?}",
            stage.beta
        );
        assert!((stage.loss - constant - plateau_losses[k - 1]).abs() < 1e-5);
        assert!(
            stage.diagnostics.stationarity < 1e-12,
            "{:e}",
            stage.diagnostics.stationarity
        );
        assert!(stage.flags.is_empty(), "{k}: {:?}", stage.flags);
    }
    // stage 3: coordinate 2 drops with s·G = −0.029250 (A4.3(iii) holds strictly) and keeps
    // b = 0, so it re-enters after 2/|g| with the opposite sign
    let drop = &s.stages[3].dropped;
    assert_eq!(drop.len(), 1);
    assert_eq!(drop[0].index, 2);
    assert!((drop[0].signed_g + 0.029250).abs() < 1e-6, "{:?}", drop[0]);
    assert_eq!(s.stages[3].b[2], 0.0);
    assert!((t[4] - t[3] - 2.0 / drop[0].signed_g.abs()).abs() < 1e-9);
    // STAGE_B equals the exact sign-constrained minimizer (spec §7 `diag-linear-greedy`)
    for k in 1..5 {
        let prev = &s.stages[k - 1];
        let act = s.stages[k].entered_by.as_ref().unwrap();
        let mut active = prev.support.clone();
        let mut signs: Vec<f64> = active.iter().map(|&i| prev.beta[i].signum()).collect();
        active.push(act.index);
        signs.push(act.sign);
        let exact = model.sign_constrained_minimizer(&active, &signs).unwrap();
        assert!(max_diff(&s.stages[k].beta, &exact) <= 1e-10, "stage {k}");
    }
}

#[test]
fn r2_degenerate_drop_is_flagged() {
    // β* = (1, 0.8, 0): coordinate 2 leaves the support with G_2 = 0 (spec §3.3, §6 #21)
    let model = DiagLinear::r2_degenerate();
    let s = run(&model);
    let flagged: Vec<&Flag> = s.stages.iter().flat_map(|st| &st.flags).collect();
    assert!(
        flagged.iter().any(
            |f| matches!(f, Flag::DegenerateDrop { index: 2, signed_g } if signed_g.abs() < 1e-12)
        ),
        "{flagged:?}"
    );
    let last = s.stages.last().unwrap();
    assert!(
        max_diff(&last.beta, &[1.0, 0.8, 0.0]) < 1e-10,
        "{:?}",
        last.beta
    );
    assert_eq!(s.termination, Termination::Converged);
}

#[test]
fn exact_ties_stop_the_recursion_unless_allowed() {
    // β* = (1, −1): w_0 reaches b = 0 exactly when w_1 reaches b = 2 (A4.3(ii) fails)
    let model = DiagLinear::orthogonal(vec![1.0, -1.0]);
    let s = run(&model);
    assert_eq!(s.termination, Termination::Tie { stage: 0 });
    assert_eq!(s.stages.len(), 1);
    let opts = Algorithm1Options {
        allow_ties: true,
        ..Default::default()
    };
    let s = algorithm1(&model, &opts).unwrap();
    assert!(matches!(s.stages[1].flags[0], Flag::Tie { gap } if gap == 0.0));
}

#[test]
fn theory_curves_follow_the_schedule() {
    let model = DiagLinear::r2();
    let s = run(&model);
    // b_th is continuous at every T_k (the snap of the activated coordinate to 0 or 2 only
    // removes rounding)
    for k in 1..s.stages.len() {
        let t_k = s.stages[k].t_start;
        let before = s.stages[k - 1].log_scale(t_k);
        assert!(max_diff(&before, &s.log_scale_at(t_k)) < 1e-13, "k = {k}");
    }
    // mid stage 4 (the long plateau): only coordinate 2 is off the support, with b growing
    // from 0 towards 2 at rate 0.02925; m_4 = 2 min(b, 2 − b) peaks mid-way at 2
    let (tau_star, m_star) = s.best_separated_time(3, f64::INFINITY);
    let mid = 0.5 * (s.stages[3].t_start + s.stages[4].t_start);
    assert!((tau_star - mid).abs() < 1e-9 && (m_star - 2.0).abs() < 1e-9);
    let magnitudes = s.predicted_log_magnitudes(mid + 1.0);
    assert!(magnitudes[2].1 < 0.0 && magnitudes[0] == (0.0, 1.0));
    assert_eq!(s.beta_at(mid), &s.stages[3].beta[..]);
    assert_eq!(s.loss_at(100.0), s.stages[4].loss);
    assert_eq!(s.neglect_exponent(100.0), f64::INFINITY);
}

#[test]
fn plateau_points_are_saddles_with_the_predicted_raw_spectrum() {
    // spec §2.5: at θ^k the raw Jacobian has eigenvalues ±g_j (j ∉ S), |S| zeros and the active
    // rates −eig(2 H_SS diag|β_S|) from the stage diagnostics.
    let model = DiagLinear::r2();
    let net = DiagonalNet::new(&model);
    let s = run(&model);
    for stage in &s.stages[1..] {
        let p = 3;
        let theta = stage.plateau_state();
        let jac: DMatrix<f64> = jacobian(&Descent(&net), 0.0, &theta).unwrap();
        let mut computed: Vec<f64> = eigenvalues(&jac).unwrap().iter().map(|z| z.re).collect();
        let mut predicted: Vec<f64> = stage.diagnostics.active_rates.iter().map(|r| -r).collect();
        predicted.extend(std::iter::repeat_n(0.0, stage.support.len()));
        for j in (0..p).filter(|j| !stage.support.contains(j)) {
            predicted.extend([stage.drift[j], -stage.drift[j]]);
        }
        computed.sort_by(f64::total_cmp);
        predicted.sort_by(f64::total_cmp);
        assert!(
            max_diff(&computed, &predicted) < 1e-12,
            "{computed:?} vs {predicted:?}"
        );
    }
}

#[test]
fn mini_attention_learns_vo_then_kq_one_rank_at_a_time() {
    // spec §3.6 M1: VO[2]+, VO[3]−, VO[4]+, then KQ[0]+, KQ[1]−; final loss 0; no drops.
    let head = DiagonalAttention::mini(0);
    let s = run(&head);
    assert_eq!(s.termination, Termination::Converged, "{:?}", s.termination);
    let names: Vec<(String, f64)> = s
        .stages
        .iter()
        .filter_map(|st| st.entered_by.as_ref().map(|a| (a.name.clone(), a.sign)))
        .collect();
    let expected = [
        ("VO[2]", 1.0),
        ("VO[3]", -1.0),
        ("VO[4]", 1.0),
        ("KQ[0]", 1.0),
        ("KQ[1]", -1.0),
    ];
    assert_eq!(names.len(), expected.len(), "{names:?}");
    for ((name, sign), (e_name, e_sign)) in names.iter().zip(expected) {
        assert_eq!((name.as_str(), *sign), (e_name, e_sign), "{names:?}");
    }
    // T_1 = 1/max|g(0)| (CF3/CF4)
    let g0 = head.g_at_zero();
    let t1 = 1.0 / stats::max_abs(g0.iter());
    assert!((s.stages[1].t_start / t1 - 1.0).abs() < 1e-12);
    let mut ranks = (0, 0);
    for stage in &s.stages[1..] {
        assert!(
            stage.dropped.is_empty() && stage.flags.is_empty(),
            "{:?}",
            stage.flags
        );
        assert!(stage.diagnostics.stationarity <= 1e-10 * s.scale);
        assert!(stage.diagnostics.eps_difference <= 1e-8);
        assert!(stage.diagnostics.lambda_min > 0.0);
        let next = head.ranks(&stage.beta, 0.0);
        // exactly one of rank KQ, rank VO grows, by one
        assert_eq!(
            (next.0 - ranks.0) + (next.1 - ranks.1),
            1,
            "{ranks:?} → {next:?}"
        );
        ranks = next;
    }
    let last = s.stages.last().unwrap();
    assert!(last.loss <= 1e-10, "final loss {:e}", last.loss);
    let teacher: Vec<f64> = DiagonalAttention::MINI_KQ
        .iter()
        .chain(&DiagonalAttention::MINI_VO)
        .copied()
        .collect();
    assert!(max_diff(&last.beta, &teacher) < 1e-6, "{:?}", last.beta);
}

//! Validators of spec 001 §1.4 and §4 ("Def./Assumption recipes"): unique optimal tokens
//! (Def. 3.1), A1 and the implicit A1-diag (LP feasibility), A2 (equal non-optimal scores),
//! A3 (small initial loss) with the threshold gap Δ*(n, L), A4 (i)–(iii) with the closed-form
//! aligned solution of §3.3, the alignment property of Def. 5.1, and the strict-complementarity
//! margins of §2.8 that predict the KQ flow's convergence exponent.

use nalgebra::DMatrix;
use serde::Serialize;

use crate::analysis::svm::{
    l1_complementarity_margin, l1_solution_ranges, solve_l1, solve_nuclear, MarginConstraints,
    NuclearSettings, RankOneConstraints, SvmError, VectorConstraints,
};
use crate::attention::{FixedDecoder, Instance, Loss};
use crate::stats;

/// A3: L(W(0)) ≤ min_j [e^{−γ_j,nopt} + Σ_{i≠j} e^{−γ_i,opt}]/n.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct A3Report {
    /// L(W(0)) (exponential loss).
    pub loss: f64,
    /// The right-hand side (γ_j,nopt = the largest non-optimal score when A2 fails).
    pub bound: f64,
    /// bound − loss (A3 holds iff ≥ 0).
    pub slack: f64,
}

/// A4 (i)–(iii) residuals; each is 0 when the condition holds exactly.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct A4Report {
    /// L is odd (the non-optimal tokens can be paired).
    pub odd_tokens: bool,
    /// (i): max over i ≠ j of |cos∠(x_i,opt, x_j,opt)| and |cos∠(z_i, z_j)|.
    pub orthogonality: f64,
    /// (ii): max_i |sin∠(x_i,opt, z_i)| (query parallel to the optimal token).
    pub alignment: f64,
    /// (iii): max over the pairs (l, l') of (‖x_l + x_l' − 2c x_opt‖ + |c_l − c_l'|‖x_opt‖)/‖x_opt‖
    /// with c_l = x_optᵀx_l/‖x_opt‖²; ∞ when a token finds no partner.
    pub pairing: f64,
    /// The pair constants c of each sample (A4 needs c ∈ [−1, 1)).
    pub pair_constants: Vec<Vec<f64>>,
}

impl A4Report {
    /// Whether A4 holds with every residual ≤ `tol` (spec §4 uses 1e−12).
    pub fn holds(&self, tol: f64) -> bool {
        self.odd_tokens
            && self.orthogonality <= tol
            && self.alignment <= tol
            && self.pairing <= tol
            && self
                .pair_constants
                .iter()
                .flatten()
                .all(|&c| (-1.0 - tol..1.0).contains(&c))
    }
}

/// Every assumption of the paper on one instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AssumptionReport {
    /// Def. 3.1: min_i (γ_i,opt − max_{l≠opt} γ_il); unique optimal tokens need ≥ 1e−12.
    pub opt_gap: f64,
    /// The instance's optimal tokens are the argmax of the scores.
    pub opt_consistent: bool,
    /// A1: some W has ⟨A_il, W⟩ ≥ 1 for all (i, l) (LP in d² unknowns).
    pub a1: bool,
    /// A1-diag: some β has βᵀB_il ≥ 1 for all (i, l) (LP in d unknowns).
    pub a1_diag: bool,
    /// A2: max_i (max − min of the non-optimal scores).
    pub a2_spread: f64,
    pub a3: A3Report,
    pub a4: A4Report,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// ‖a − (aᵀb̂)b̂‖/‖a‖ = |sin∠(a, b)|, free of the cancellation in 1 − cos².
fn sine(a: &[f64], b: &[f64]) -> f64 {
    let along = dot(a, b) / dot(b, b);
    let rejection: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - along * y).collect();
    norm(&rejection) / norm(a)
}

/// The constraints A_il = (x_i,opt − x_il) z_iᵀ of the instance.
pub fn constraints(inst: &Instance) -> Result<RankOneConstraints, SvmError> {
    RankOneConstraints::w_svm(&inst.data.view(), &inst.opt)
}

/// LP feasibility of ⟨β, f_k⟩ ≥ 1 (the ℓ1 LP is bounded whenever it is feasible).
fn feasible(c: &VectorConstraints) -> Result<bool, SvmError> {
    match solve_l1(c) {
        Ok(_) => Ok(true),
        Err(SvmError::Infeasible { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Per sample (γ_opt, largest and smallest non-optimal score).
fn score_summary(inst: &Instance) -> Vec<(f64, f64, f64)> {
    let g = inst.data.scores(&inst.decoder);
    let t = inst.data.t;
    (0..inst.data.n)
        .map(|i| {
            let row = &g[i * t..(i + 1) * t];
            let others = (0..t).filter(|&l| l != inst.opt[i]).map(|l| row[l]);
            let hi = stats::max(others.clone());
            let lo = stats::min(others);
            (row[inst.opt[i]], hi, lo)
        })
        .collect()
}

/// A3 at W(0) (`w0` = vec(W(0)) column-major, `None` for W(0) = 0 as under init (5)).
pub fn a3_report(inst: &Instance, w0: Option<&[f64]>) -> Result<A3Report, SvmError> {
    let d = inst.data.d;
    let zero = vec![0.0; d * d];
    let model = FixedDecoder::new(inst.data.clone(), inst.decoder.clone(), Loss::Exponential)
        .map_err(|e| SvmError::Invalid {
            field: "instance".into(),
            reason: e.to_string(),
        })?;
    let loss = model.log_loss(w0.unwrap_or(&zero)).exp();
    let scores = score_summary(inst);
    let n = scores.len();
    let bound = stats::min((0..n).map(|j| {
        let rest: f64 = (0..n)
            .filter(|&i| i != j)
            .map(|i| (-scores[i].0).exp())
            .sum();
        ((-scores[j].1).exp() + rest) / n as f64
    }));
    Ok(A3Report {
        loss,
        bound,
        slack: bound - loss,
    })
}

/// Δ*(n, L): with equal γ_nopt = 0 and equal gaps Δ, A3 at W(0) = 0 reads
/// n(e^{−Δ/L} − e^{−Δ}) ≤ 1 − e^{−Δ} and fails exactly for Δ < Δ*(n, L) (0 when it never
/// fails: n = 1, or n = L = 2). Found by a grid scan and bisection to machine precision.
/// For L = 2 the closed form is Δ* = 2 ln(n − 1) (n ≥ 3); asymptotically Δ* ≈ L ln n.
pub fn a3_threshold_gap(n: usize, tokens: usize) -> f64 {
    let (nf, lf) = (n as f64, tokens as f64);
    // slack(Δ) = 1 − e^{−Δ} − n(e^{−Δ/L} − e^{−Δ}), both differences via expm1
    let slack = |delta: f64| {
        -(-delta).exp_m1() - nf * (-delta / lf).exp() * (-(delta - delta / lf)).exp_m1().abs()
    };
    let top = 2.0 * lf * nf.ln().max(1.0) + 10.0;
    let steps = 4000;
    let grid = |k: usize| top * k as f64 / steps as f64;
    let Some(last_bad) = (1..=steps).rev().find(|&k| slack(grid(k)) < 0.0) else {
        return 0.0;
    };
    let (mut lo, mut hi) = (grid(last_bad), grid(last_bad + 1));
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if slack(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// A4 (i)–(iii) residuals (the optimal tokens are the instance's).
pub fn a4_report(inst: &Instance) -> A4Report {
    let data = &inst.data;
    let (n, t) = (data.n, data.t);
    let x_opt = |i: usize| data.token(i, inst.opt[i]);
    let cos = |a: &[f64], b: &[f64]| (dot(a, b) / (norm(a) * norm(b))).abs();
    let mut orthogonality = 0.0f64;
    for i in 0..n {
        for j in 0..i {
            orthogonality = stats::max([
                orthogonality,
                cos(x_opt(i), x_opt(j)),
                cos(data.query(i), data.query(j)),
            ]);
        }
    }
    let alignment = stats::max((0..n).map(|i| sine(x_opt(i), data.query(i))));
    let mut pairing = 0.0f64;
    let mut pair_constants = Vec::with_capacity(n);
    for i in 0..n {
        let xo = x_opt(i);
        let scale = norm(xo);
        let c_of = |l: usize| dot(xo, data.token(i, l)) / (scale * scale);
        // partner of l: x_l' = 2c x_opt − x_l; pair greedily by the smallest residual
        let residual = |l: usize, k: usize| {
            let (xl, xk) = (data.token(i, l), data.token(i, k));
            let (cl, ck) = (c_of(l), c_of(k));
            let off: Vec<f64> = (0..data.d)
                .map(|r| xl[r] + xk[r] - (cl + ck) * xo[r])
                .collect();
            (norm(&off) + (cl - ck).abs() * scale) / scale
        };
        let mut open: Vec<usize> = (0..t).filter(|&l| l != inst.opt[i]).collect();
        let mut constants = Vec::new();
        while let Some(l) = open.pop() {
            let best = open
                .iter()
                .enumerate()
                .map(|(p, &k)| (p, residual(l, k)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            match best {
                Some((p, r)) => {
                    let k = open.swap_remove(p);
                    pairing = stats::larger(pairing, r);
                    constants.push(0.5 * (c_of(l) + c_of(k)));
                }
                None => pairing = f64::INFINITY,
            }
        }
        pair_constants.push(constants);
    }
    A4Report {
        odd_tokens: t % 2 == 1,
        orthogonality,
        alignment,
        pairing,
        pair_constants,
    }
}

/// Runs every validator (A3 at `w0`, default W(0) = 0).
pub fn validate(inst: &Instance, w0: Option<&[f64]>) -> Result<AssumptionReport, SvmError> {
    let scores = score_summary(inst);
    let opt_gap = stats::min(scores.iter().map(|&(opt, hi, _)| opt - hi));
    let opt_consistent =
        inst.data.optimal_tokens(&inst.decoder, 1e-12).ok() == Some(inst.opt.clone());
    let full = constraints(inst)?;
    let diag = full.diagonal()?;
    let dense = VectorConstraints {
        f: full.dense(),
        labels: full.labels.clone(),
    };
    Ok(AssumptionReport {
        opt_gap,
        opt_consistent,
        a1: feasible(&dense)?,
        a1_diag: feasible(&diag)?,
        a2_spread: stats::max(scores.iter().map(|&(_, hi, lo)| hi - lo)),
        a3: a3_report(inst, w0)?,
        a4: a4_report(inst),
    })
}

/// The aligned solution of §3.3 under A4: W* = Σ_i x_i,opt z_iᵀ/((1 − c_i)‖x_i,opt‖²‖z_i‖²)
/// (vec, column-major) and OPT_* = ‖W*‖_* = Σ_i 1/((1 − c_i)‖x_i,opt‖‖z_i‖), with c_i the mean
/// of sample i's pair constants. Meaningful only when `a4.holds(…)`.
pub fn a4_solution(inst: &Instance, a4: &A4Report) -> (Vec<f64>, f64) {
    let d = inst.data.d;
    let mut w = DMatrix::zeros(d, d);
    let mut opt = 0.0;
    for (i, cs) in a4.pair_constants.iter().enumerate() {
        let c = cs.iter().sum::<f64>() / cs.len() as f64;
        let x = nalgebra::DVector::from_column_slice(inst.data.token(i, inst.opt[i]));
        let z = nalgebra::DVector::from_column_slice(inst.data.query(i));
        let scale = (1.0 - c) * x.norm_squared() * z.norm_squared();
        w += &x * z.transpose() / scale;
        opt += 1.0 / ((1.0 - c) * x.norm() * z.norm());
    }
    (w.as_slice().to_vec(), opt)
}

/// Def. 5.1 frames of (7): U_K with column i = x_i,opt/‖x_i,opt‖ and U_Q with column
/// i = z_i/‖z_i‖ (π(i) = i), completed to orthonormal bases by Gram–Schmidt on e_1, …, e_d.
/// Needs A4 (i) (else the columns are not orthonormal: check with [`a4_report`]).
pub fn alignment_frames(inst: &Instance) -> (DMatrix<f64>, DMatrix<f64>) {
    let d = inst.data.d;
    let frame = |first: Vec<&[f64]>| {
        let mut cols: Vec<nalgebra::DVector<f64>> = Vec::with_capacity(d);
        let candidates = first
            .into_iter()
            .map(nalgebra::DVector::from_column_slice)
            .chain((0..d).map(|k| nalgebra::DVector::from_fn(d, |r, _| f64::from(r == k))));
        for mut v in candidates {
            if cols.len() == d {
                break;
            }
            for c in &cols {
                v -= c * c.dot(&v);
            }
            if v.norm() > 1e-8 {
                cols.push(v.normalize());
            }
        }
        DMatrix::from_columns(&cols)
    };
    let n = inst.data.n;
    (
        frame((0..n).map(|i| inst.data.token(i, inst.opt[i])).collect()),
        frame((0..n).map(|i| inst.data.query(i)).collect()),
    )
}

/// K = U_K Λ_K Vᵀ, Q = U_Q Λ_Q Vᵀ with Λ = [Diag ξ, 0] ∈ ℝ^{d×d_e} (Def. 5.1; d_e = V's size).
pub fn aligned_factors(
    u_k: &DMatrix<f64>,
    u_q: &DMatrix<f64>,
    v: &DMatrix<f64>,
    xi_k: &[f64],
    xi_q: &[f64],
) -> (DMatrix<f64>, DMatrix<f64>) {
    let (d, de) = (u_k.nrows(), v.nrows());
    let lambda = |xi: &[f64]| DMatrix::from_fn(d, de, |r, c| if r == c { xi[r] } else { 0.0 });
    (
        u_k * lambda(xi_k) * v.transpose(),
        u_q * lambda(xi_q) * v.transpose(),
    )
}

/// Def. 5.1 residual: the largest off-diagonal |entry| of U_KᵀKV and U_QᵀQV (0 when aligned).
pub fn alignment_residual(
    k: &DMatrix<f64>,
    q: &DMatrix<f64>,
    u_k: &DMatrix<f64>,
    u_q: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> f64 {
    let off = |m: DMatrix<f64>| {
        stats::max_abs(
            m.iter()
                .enumerate()
                .filter(|(idx, _)| idx % m.nrows() != idx / m.nrows())
                .map(|(_, x)| x),
        )
    };
    stats::larger(off(u_k.transpose() * k * v), off(u_q.transpose() * q * v))
}

/// Strict complementarity of the SVM solutions (spec §2.8), which predicts how fast the KQ
/// flows leave the off-support directions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Complementarity {
    /// max over dual-optimal λ of 1 − max_{j∉J} |(Bλ)_j| (ℓ1-SVM).
    pub l1_margin: f64,
    /// The ℓ1 solution is unique: every coordinate range of the optimal face < 1e−7.
    pub l1_unique: bool,
    /// 1 − ‖P_U⊥ M P_V⊥‖_op of the computed nuclear certificate (a lower bound on the best).
    pub nuclear_margin: f64,
}

pub fn complementarity(
    inst: &Instance,
    settings: &NuclearSettings,
) -> Result<Complementarity, SvmError> {
    let full = constraints(inst)?;
    let diag = full.diagonal()?;
    let l1 = solve_l1(&diag)?;
    let ranges = l1_solution_ranges(&diag, l1.norm_l1, 1e-9)?;
    Ok(Complementarity {
        l1_margin: l1_complementarity_margin(&diag, &l1)?,
        l1_unique: ranges.iter().all(|(lo, hi)| hi - lo < 1e-7),
        nuclear_margin: solve_nuclear(&full, settings)?.complementarity_margin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::kq::toys;

    #[test]
    fn threshold_gap_matches_the_spec_table_and_the_l2_closed_form() {
        // spec §1.4 truncates Δ* to three decimals: Δ* − table ∈ [0, 1e−3)
        let table = [
            ((2, 3), 1.4430),
            ((2, 4), 2.4370),
            ((2, 8), 5.5120),
            ((3, 3), 3.0150),
            ((10, 3), 6.8800),
            ((10, 8), 18.4200),
        ];
        for ((n, l), want) in table {
            let got = a3_threshold_gap(n, l);
            assert!((0.0..1e-3).contains(&(got - want)), "({n}, {l}): {got}");
        }
        for n in [3, 4, 7] {
            let got = a3_threshold_gap(n, 2);
            assert!((got - 2.0 * ((n - 1) as f64).ln()).abs() < 1e-12, "{got}");
        }
        assert_eq!(a3_threshold_gap(1, 5), 0.0);
        assert_eq!(a3_threshold_gap(2, 2), 0.0);
    }

    #[test]
    fn toy_verdicts() {
        // A3 slacks of spec §7: toy-2b 0.1998, toy-3 0.2211, toy-4 0.0792
        for (inst, slack) in [
            (toys::toy2b(), 0.5 * (1.0 + (-2f64).exp()) - (-1f64).exp()),
            (toys::toy3(), 0.53254 - 0.31148),
            (toys::toy4(), 0.23382 - 0.15464),
        ] {
            let r = validate(&inst, None).unwrap();
            assert!(r.a1 && r.a1_diag && r.opt_consistent && r.opt_gap > 1.0);
            assert!(r.a2_spread < 1e-15);
            assert!((r.a3.slack - slack).abs() < 2e-5, "{:?}", r.a3);
        }
        let toy4 = toys::toy4();
        let a4 = a4_report(&toy4);
        assert!(a4.holds(1e-12), "{a4:?}");
        let (w, opt) = a4_solution(&toy4, &a4);
        assert!((w[0] - 1.0 / 2.4).abs() < 1e-15 && (w[5] + 1.0 / 1.6).abs() < 1e-15);
        assert!((opt - (1.0 / 2.4 + 1.0 / 1.6)).abs() < 1e-15);
        // toy-3 has L = 2 and non-orthogonal queries
        let a4 = a4_report(&toys::toy3());
        assert!(!a4.holds(1e-12) && (a4.orthogonality - 0.5).abs() < 1e-15);
        // spec §4's negative control: 0.1·e₄ added to token 1 of sample 1 breaks A4(iii)
        let mut broken = toys::toy4();
        broken.data.x[4 + 3] += 0.1;
        let a4 = a4_report(&broken);
        assert!((a4.pairing - 0.05).abs() < 1e-12, "{a4:?}");
    }

    #[test]
    fn a3_fails_at_a_large_initialization() {
        // W(0) = −5 Diag(1, 1): toy-2b's samples attend to the wrong tokens
        let inst = toys::toy2b();
        let mut w0 = vec![0.0; 16];
        w0[0] = -5.0;
        w0[5] = -5.0;
        let r = a3_report(&inst, Some(&w0)).unwrap();
        assert!(r.slack < 0.0, "{r:?}");
    }

    #[test]
    fn aligned_factors_pass_and_rotated_ones_fail_the_alignment_validator() {
        let inst = toys::toy4();
        let (u_k, u_q) = alignment_frames(&inst);
        let eye = DMatrix::<f64>::identity(4, 4);
        assert!((u_k.transpose() * &u_k - &eye).norm() < 1e-14);
        assert!((u_q.transpose() * &u_q - &eye).norm() < 1e-14);
        // V: a rotation of ℝ⁶ (d_e = 6)
        let v = DMatrix::from_fn(6, 6, |r, c| ((r * 7 + c * 3) as f64).sin())
            .qr()
            .q();
        let (k, q) = aligned_factors(&u_k, &u_q, &v, &[0.3, 0.5, 0.7, 0.2], &[0.0; 4]);
        assert!(alignment_residual(&k, &q, &u_k, &u_q, &v) < 1e-15);
        let mut k2 = k.clone();
        k2[(0, 1)] += 1e-3;
        assert!(alignment_residual(&k2, &q, &u_k, &u_q, &v) > 1e-4);
    }

    #[test]
    fn complementarity_margins_of_the_toys() {
        let s = NuclearSettings::default();
        let c = complementarity(&toys::toy2b(), &s).unwrap();
        assert!((c.l1_margin - 0.375).abs() < 1e-8 && c.l1_unique, "{c:?}");
        let c = complementarity(&toys::toy2(1.0), &s).unwrap();
        assert!(!c.l1_unique);
        let c = complementarity(&toys::toy3(), &s).unwrap();
        assert!((c.nuclear_margin - 2.0 / 3.0).abs() < 1e-4, "{c:?}");
    }
}

//! Tests of the attention heads against forward-mode AD of losses written from their
//! definitions, the structural facts and closed forms of spec 004 §2.2, and the chunked
//! parallel evaluation.

use nalgebra::DMatrix;
use num_dual::DualNum;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::flow::GradientFlow;
use crate::models::diagonal::testing::{autodiff_grad_hvp, rel_err, Reference};
use crate::stats;

/// L̃ = (1/N) Σ_s κ ‖smax(X A Xᵀ) X M − Y‖² with A, M given entrywise, written directly.
fn reference_loss<T: DualNum<f64> + Copy>(
    samples: &AttentionSamples,
    kappa: f64,
    a: impl Fn(usize, usize) -> T,
    m: impl Fn(usize, usize) -> T,
) -> T {
    let (n, d, count) = (samples.n, samples.d, samples.count());
    let mut total = T::from(0.0);
    for s in 0..count {
        let (x, y) = (samples.x_of(s), samples.y_of(s));
        let xa: Vec<T> = (0..n * d)
            .map(|k| {
                let (row, col) = (k / d, k % d);
                (0..d).fold(T::from(0.0), |acc, l| acc + a(l, col) * x[row * d + l])
            })
            .collect();
        for row in 0..n {
            let scores: Vec<T> = (0..n)
                .map(|j| (0..d).fold(T::from(0.0), |acc, l| acc + xa[row * d + l] * x[j * d + l]))
                .collect();
            let shift = stats::max(scores.iter().map(|s| s.re()));
            let weights: Vec<T> = scores.iter().map(|s| (*s - shift).exp()).collect();
            let norm = weights.iter().fold(T::from(0.0), |acc, w| acc + *w);
            for col in 0..d {
                let mut f = T::from(0.0);
                for (j, w) in weights.iter().enumerate() {
                    let xm = (0..d).fold(T::from(0.0), |acc, l| acc + m(l, col) * x[j * d + l]);
                    f += *w / norm * xm;
                }
                let r = f - y[row * d + col];
                total += r * r * kappa;
            }
        }
    }
    total / count as f64
}

struct DiagRef<'a>(&'a DiagonalAttention);
impl Reference for DiagRef<'_> {
    fn dim(&self) -> usize {
        self.0.p()
    }
    fn eval<T: DualNum<f64> + Copy>(&self, z: &[T]) -> T {
        let d = self.0.d();
        let diag = |v: &[T], r: usize, c: usize| if r == c { v[r] } else { T::from(0.0) };
        reference_loss(
            self.0.samples(),
            self.0.kappa(),
            |r, c| diag(&z[..d], r, c),
            |r, c| diag(&z[d..], r, c),
        )
    }
}

struct FactorRef<'a>(&'a FactorizedAttention, usize);
impl Reference for FactorRef<'_> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn eval<T: DualNum<f64> + Copy>(&self, z: &[T]) -> T {
        let head = self.0.head();
        let (d, dh) = (head.samples().d, self.1);
        let w = |k: usize, r: usize, c: usize| z[k * d * dh + r * dh + c];
        let prod = |l: usize, rt: usize, r: usize, c: usize| {
            (0..dh).fold(T::from(0.0), |acc, h| acc + w(l, r, h) * w(rt, c, h))
        };
        reference_loss(
            head.samples(),
            head.kappa(),
            |r, c| prod(0, 1, r, c),
            |r, c| prod(2, 3, r, c),
        )
    }
}

fn gaussian(rng: &mut ChaCha8Rng, len: usize, scale: f64) -> Vec<f64> {
    AttentionSamples::gaussian_inputs(len, 1, 1, rng)
        .into_iter()
        .map(|x| scale * x)
        .collect()
}

#[test]
fn diagonal_head_gradient_and_hvp_match_forward_mode_ad() {
    let head = DiagonalAttention::mini(0);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..3 {
        let beta = gaussian(&mut rng, 12, 0.8);
        let dir = gaussian(&mut rng, 12, 1.0);
        let (grad_ad, hvp_ad) = autodiff_grad_hvp(&DiagRef(&head), &beta, &dir);
        let (mut grad, mut hvp) = (vec![0.0; 12], vec![0.0; 12]);
        head.grad_beta(&beta, &mut grad);
        head.hvp_beta(&beta, &dir, &mut hvp);
        assert!(
            rel_err(&grad, &grad_ad) <= 1e-12,
            "{:e}",
            rel_err(&grad, &grad_ad)
        );
        assert!(
            rel_err(&hvp, &hvp_ad) <= 1e-12,
            "{:e}",
            rel_err(&hvp, &hvp_ad)
        );
        let loss_ad = DiagRef(&head).eval(&beta);
        assert!((head.loss(&beta) - loss_ad).abs() <= 1e-13 * loss_ad);
    }
}

#[test]
fn factorized_head_gradient_and_hvp_match_forward_mode_ad() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (d, dh) = (3, 2);
    let a_star = DMatrix::from_fn(d, d, |r, c| {
        if r == c {
            1.0
        } else {
            0.3 * (r as f64 - c as f64)
        }
    });
    let m_star = DMatrix::from_fn(d, d, |r, c| 0.5 + 0.2 * (r * c) as f64);
    let head = MatrixAttention::student_teacher(3, 5, &a_star, &m_star, LossScale::Mean, &mut rng)
        .unwrap();
    let flow = FactorizedAttention::new(head, dh);
    let theta = gaussian(&mut rng, flow.dim(), 0.7);
    let dir = gaussian(&mut rng, flow.dim(), 1.0);
    let (grad_ad, hvp_ad) = autodiff_grad_hvp(&FactorRef(&flow, dh), &theta, &dir);
    let (mut grad, mut hvp) = (vec![0.0; flow.dim()], vec![0.0; flow.dim()]);
    flow.grad(&theta, &mut grad);
    flow.hvp(&theta, &dir, &mut hvp);
    assert!(
        rel_err(&grad, &grad_ad) <= 1e-12,
        "{:e}",
        rel_err(&grad, &grad_ad)
    );
    assert!(
        rel_err(&hvp, &hvp_ad) <= 1e-12,
        "{:e}",
        rel_err(&hvp, &hvp_ad)
    );
    // the teacher is a global minimum of the product loss
    let teacher: Vec<f64> = a_star
        .transpose()
        .iter()
        .chain(m_star.transpose().iter())
        .copied()
        .collect();
    assert!(flow.head().loss(&teacher) < 1e-30);
    // products and invariants are what they say
    let kq = flow.kq_product(&theta);
    let k = |r: usize, h: usize| theta[r * dh + h];
    let q = |r: usize, h: usize| theta[d * dh + r * dh + h];
    assert!((kq[(1, 2)] - (k(1, 0) * q(2, 0) + k(1, 1) * q(2, 1))).abs() < 1e-15);
    let mut inv = vec![0.0; flow.invariant_names().len()];
    flow.invariants(&theta, &mut inv);
    let balance01: f64 = (0..d).map(|i| k(i, 0) * k(i, 1) - q(i, 0) * q(i, 1)).sum();
    assert_eq!(inv.len(), 6);
    assert!((inv[1] - balance01).abs() < 1e-15);
}

#[test]
fn default_init_has_fan_in_variance() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let (d, dh) = (16, 8);
    let head = MatrixAttention::student_teacher(
        2,
        1,
        &DMatrix::zeros(d, d),
        &DMatrix::zeros(d, d),
        LossScale::Mean,
        &mut rng,
    )
    .unwrap();
    let flow = FactorizedAttention::new(head, dh);
    let theta = flow.default_init(&mut rng);
    assert_eq!((theta.len(), flow.d_h()), (4 * d * dh, dh));
    // mean of 512 squares of N(0, 1/d): relative standard deviation √(2/512) ≈ 0.0625
    let mean_sq = theta.iter().map(|x| x * x).sum::<f64>() / theta.len() as f64;
    assert!((mean_sq * d as f64 - 1.0).abs() < 4.0 * 0.0625, "{mean_sq}");
}

#[test]
fn structural_zeros_and_the_closed_form_at_zero() {
    // spec §2.2: G_a = 0 whenever c = 0; G_{c_r} = 0 when c_r = 0 and c*_r = 0 (r = 0, 1, 5);
    // G_c(0) = 2κ n mean_s(x̄ ȳ).
    let head = DiagonalAttention::mini(3);
    let d = head.d();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut beta = gaussian(&mut rng, 2 * d, 1.0);
    beta[d..].iter_mut().for_each(|c| *c = 0.0);
    let g = crate::models::diagonal::g_vec(&head, &beta);
    assert!(g[..d].iter().all(|x| *x == 0.0), "{g:?}");
    for r in [0, 1, 5] {
        assert_eq!(g[d + r], 0.0, "VO[{r}]");
    }
    assert!(g[d + 2].abs() > 1e-3);
    let g0 = crate::models::diagonal::g_vec(&head, &vec![0.0; 2 * d]);
    let closed = head.g_at_zero();
    assert!(rel_err(&g0, &closed) <= 1e-14, "{g0:?} vs {closed:?}");
    assert!(g0[..d].iter().all(|x| *x == 0.0));
    // stage 1 activates the VO coordinate with the largest |c*| (§3.6 M1)
    let best = (0..2 * d)
        .max_by(|&i, &j| g0[i].abs().total_cmp(&g0[j].abs()))
        .unwrap();
    assert_eq!(head.coordinate_name(best), "VO[2]");
    assert_eq!(head.ranks(&beta, 1e-12), (6, 0));
}

#[test]
fn chunked_parallel_evaluation_equals_the_serial_sum() {
    // n = 10, d = 50 as in the paper config; 80 samples exceed the parallel threshold, each
    // half of 40 does not. The full loss is the sample-weighted mean of the halves.
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let (n, d) = (10, 50);
    let a_star: Vec<f64> = (0..d).map(|r| if r < 3 { 0.5 } else { 0.0 }).collect();
    let c_star: Vec<f64> = (0..d)
        .map(|r| if (3..6).contains(&r) { 1.0 } else { 0.0 })
        .collect();
    let full =
        DiagonalAttention::student_teacher(n, 80, &a_star, &c_star, LossScale::Mean, &mut rng)
            .unwrap();
    assert!(full.chunks.len() > 1);
    let half = |range: std::ops::Range<usize>| {
        let size = n * d;
        let s = full.samples();
        let samples = AttentionSamples::new(
            n,
            d,
            s.x[range.start * size..range.end * size].to_vec(),
            s.y[range.start * size..range.end * size].to_vec(),
        )
        .unwrap();
        DiagonalAttention::new(DiagonalScores { d }, samples, full.kappa()).unwrap()
    };
    let (first, second) = (half(0..40), half(40..80));
    assert_eq!(first.chunks.len(), 1);
    let beta = gaussian(&mut rng, 2 * d, 0.3);
    let dir = gaussian(&mut rng, 2 * d, 1.0);
    let combine = |f: &dyn Fn(&DiagonalAttention) -> Vec<f64>| -> Vec<f64> {
        f(&first)
            .iter()
            .zip(f(&second))
            .map(|(a, b)| 0.5 * (a + b))
            .collect()
    };
    let grad = |h: &DiagonalAttention| crate::models::diagonal::grad_beta_vec(h, &beta);
    let hvp = |h: &DiagonalAttention| {
        let mut out = vec![0.0; 2 * d];
        h.hvp_beta(&beta, &dir, &mut out);
        out
    };
    assert!(rel_err(&grad(&full), &combine(&grad)) < 1e-13);
    assert!(rel_err(&hvp(&full), &combine(&hvp)) < 1e-13);
    let loss = 0.5 * (first.loss(&beta) + second.loss(&beta));
    assert!((full.loss(&beta) - loss).abs() < 1e-14 * loss);
    // and a second evaluation gives bit-identical results (fixed chunking)
    assert_eq!(grad(&full), grad(&full));
}

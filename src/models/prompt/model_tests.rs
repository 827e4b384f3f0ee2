use num_dual::DualNum;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::super::data::{labelled, orthogonal_blocks, PromptData, Synthetic};
use super::*;
use crate::autodiff::{ad_grad_hvp, rel_err};

/// L(p, v) written from its definition, generic over num-dual numbers; W row-major d × d.
fn reference_loss<T: DualNum<f64> + Copy>(
    data: &PromptData,
    w: &[f64],
    attention: Attention,
    p: &[T],
    v: &[T],
) -> T {
    let (n, d) = (data.n_tokens, data.d);
    let mut total = T::from(0.0);
    for i in 0..data.samples {
        let x = data.tokens(i);
        let token = |j: usize| &x[j * d..(j + 1) * d];
        // logits_j = x_jᵀ W p, values a_j = x_jᵀ v
        let logits: Vec<T> = (0..n)
            .map(|j| {
                (0..d).fold(T::from(0.0), |acc, r| {
                    let wp = (0..d).fold(T::from(0.0), |a, c| a + p[c] * w[r * d + c]);
                    acc + wp * token(j)[r]
                })
            })
            .collect();
        let a: Vec<T> = (0..n)
            .map(|j| (0..d).fold(T::from(0.0), |acc, r| acc + v[r] * token(j)[r]))
            .collect();
        let f = match attention {
            Attention::Softmax => {
                let e: Vec<T> = logits.iter().map(|l| l.exp()).collect();
                let s = e.iter().fold(T::from(0.0), |acc, &x| acc + x);
                (0..n).fold(T::from(0.0), |acc, j| acc + e[j] * a[j]) / s
            }
            Attention::Linear => (0..n).fold(T::from(0.0), |acc, j| acc + logits[j] * a[j]),
        };
        let r = f - data.y[i];
        total += r * r * 0.5;
    }
    total / data.samples as f64
}

fn small_data(rng: &mut ChaCha8Rng) -> (PromptData, Vec<f64>) {
    let (n, d, samples) = (3, 4, 5);
    let gauss = |rng: &mut ChaCha8Rng, len: usize| -> Vec<f64> {
        (0..len)
            .map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal))
            .collect()
    };
    let x = gauss(rng, samples * n * d);
    let w = gauss(rng, d * d);
    let y = gauss(rng, samples);
    (PromptData::with_w(n, d, samples, x, &w, y), w)
}

use rand::Rng;

/// (p, v) of a state in any number type (a frozen v enters as constants).
fn split<T: DualNum<f64> + Copy>(trained: &Trained, d: usize, t: &[T]) -> (Vec<T>, Vec<T>) {
    match trained {
        Trained::PV => (t[..d].to_vec(), t[d..].to_vec()),
        Trained::P { v } => (t.to_vec(), v.iter().map(|&x| T::from(x)).collect()),
    }
}

#[test]
fn gradient_and_hvp_match_forward_mode_ad_for_every_variant() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let (general, w_general) = small_data(&mut rng);
    let d = general.d;
    // W = I takes the fused one-pass kernels; a general W the separate K_i and X_i passes.
    let identity = PromptData::new(
        general.n_tokens,
        d,
        general.samples,
        general.x.clone(),
        general.y.clone(),
    );
    let w_identity: Vec<f64> = (0..d * d)
        .map(|k| if k % (d + 1) == 0 { 1.0 } else { 0.0 })
        .collect();
    for (data, w) in [(general, w_general), (identity, w_identity)] {
        let v_frozen: Vec<f64> = (0..d).map(|k| 0.3 - 0.2 * k as f64).collect();
        for attention in [Attention::Softmax, Attention::Linear] {
            for trained in [
                Trained::PV,
                Trained::P {
                    v: v_frozen.clone(),
                },
            ] {
                let model = PromptModel::new(data.clone(), attention, trained.clone());
                let dim = model.dim();
                let theta: Vec<f64> = (0..dim).map(|k| 0.7 * ((k as f64) * 1.3).sin()).collect();
                let u: Vec<f64> = (0..dim).map(|k| ((k as f64) * 0.7).cos()).collect();
                let (grad_ad, hvp_ad) = ad_grad_hvp(
                    |t| {
                        let (p, v) = split(&trained, d, t);
                        reference_loss(&data, &w, attention, &p, &v)
                    },
                    |t| {
                        let (p, v) = split(&trained, d, t);
                        reference_loss(&data, &w, attention, &p, &v)
                    },
                    &theta,
                    &u,
                );
                let (mut g, mut h) = (vec![0.0; dim], vec![0.0; dim]);
                model.grad(&theta, &mut g);
                model.hvp(&theta, &u, &mut h);
                let label = format!("{attention:?} {trained:?}");
                assert!(
                    rel_err(&g, &grad_ad) < 1e-12,
                    "{label}: grad {}",
                    rel_err(&g, &grad_ad)
                );
                assert!(
                    rel_err(&h, &hvp_ad) < 1e-11,
                    "{label}: hvp {}",
                    rel_err(&h, &hvp_ad)
                );
                let (p, v) = split(&trained, d, &theta);
                let loss_ad: f64 = reference_loss(&data, &w, attention, &p, &v);
                assert!((model.loss(&theta) - loss_ad).abs() < 1e-13 * loss_ad.max(1.0));
                // the fused pass gives the same loss and gradient
                let mut g2 = vec![0.0; dim];
                let fused = model.loss_and_grad(&theta, &mut g2);
                assert!(
                    (fused - loss_ad).abs() < 1e-13 * loss_ad.max(1.0),
                    "{label}"
                );
                assert!(rel_err(&g2, &grad_ad) < 1e-12, "{label}: fused grad");
            }
        }
    }
}

#[test]
fn orthogonal_blocks_satisfy_a2_and_f_has_the_closed_form_singular_values() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (n, samples) = (2, 5);
    let data = orthogonal_blocks(n, samples, &mut rng);
    let d = data.d;
    assert_eq!(d, n * samples);
    for i in 0..samples {
        for j in 0..samples {
            for r in 0..n {
                for c in 0..n {
                    let kr = &data.keys(i)[r * d..(r + 1) * d];
                    let kc = &data.keys(j)[c * d..(c + 1) * d];
                    let want = if i == j && r == c { 1.0 } else { 0.0 };
                    let got: f64 = kr.iter().zip(kc).map(|(a, b)| a * b).sum();
                    assert!((got - want).abs() < 1e-13, "K_{i} K_{j}ᵀ[{r},{c}] = {got}");
                }
            }
        }
    }
    let v: Vec<f64> = (0..d).map(|k| 1.0 + 0.1 * k as f64).collect();
    let p: Vec<f64> = (0..d).map(|k| (k as f64).sin()).collect();
    let data = labelled(data, Attention::Softmax, &p, &v);
    let model = PromptModel::new(data, Attention::Softmax, Trained::P { v: v.clone() });
    let p_eval: Vec<f64> = p.iter().map(|x| 0.5 * x - 0.2).collect();
    let f = model.f_matrix(&p_eval);
    // ∇_p L = Fᵀ g with g_i = ℓ'_i = f_i − y_i.
    let outputs = model.outputs(&p_eval, &v);
    let g = nalgebra::DVector::from_iterator(
        samples,
        outputs.iter().zip(&model.data().y).map(|(o, y)| o - y),
    );
    let mut grad = vec![0.0; d];
    model.grad(&p_eval, &mut grad);
    let ftg = f.transpose() * g;
    assert!(rel_err(ftg.as_slice(), &grad) < 1e-13);
    // Under A2 the rows of F are orthogonal, σ_i(F) = (1/N)‖J(z_i)a_i‖ (spec §2.2).
    let mut sv: Vec<f64> = f.singular_values().iter().copied().collect();
    sv.sort_by(f64::total_cmp);
    let mut want: Vec<f64> = (0..samples).map(|i| f.row(i).norm()).collect();
    want.sort_by(f64::total_cmp);
    assert!(rel_err(&sv, &want) < 1e-12, "{sv:?} vs {want:?}");
}

#[test]
fn synthetic_draws_share_everything_but_sigma_p_and_label_from_the_teacher() {
    let draw = |sigma_p: f64| {
        let spec = Synthetic {
            d: 6,
            samples: 8,
            sigma_p,
            sigma_v: 1.0,
            teacher: Attention::Softmax,
        };
        spec.draw(&mut ChaCha8Rng::seed_from_u64(11))
    };
    let (a, b) = (draw(0.1), draw(1.0));
    assert_eq!(a.data.x, b.data.x);
    assert_eq!(a.v_teacher, b.v_teacher);
    assert_eq!((a.p0.clone(), a.v0.clone()), (b.p0.clone(), b.v0.clone()));
    for (pa, pb) in a.p_teacher.iter().zip(&b.p_teacher) {
        assert!((pb - 10.0 * pa).abs() < 1e-15 * pb.abs().max(1.0));
    }
    // The teacher interpolates its own labels (L* = 0).
    let model = PromptModel::new(b.data.clone(), Attention::Softmax, Trained::PV);
    let theta: Vec<f64> = b.p_teacher.iter().chain(&b.v_teacher).copied().collect();
    assert!(model.loss(&theta) < 1e-30);
    let stats = model.attention_stats(&b.p_teacher);
    assert!(stats.log10_geometric_mean <= stats.log10_arithmetic_mean);
}

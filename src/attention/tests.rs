//! The fixed-decoder model's derivatives against forward-mode AD, and the refusal of ties and
//! bad shapes.

use num_dual::DualNum;

use super::testing::{ad_grad_hvp, gaussian_vec, random_data, reference_loss, rel_err, rng};
use super::*;
use crate::flow::GradientFlow;

fn constants<T: DualNum<f64> + Copy>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from(x)).collect()
}

#[test]
fn fixed_decoder_derivatives_match_forward_mode_ad() {
    let mut r = rng(1);
    for loss in [Loss::Exponential, Loss::Logistic] {
        for scale in [0.3, 1.5] {
            let data = random_data(&mut r);
            let u = gaussian_vec(&mut r, data.d, 1.0);
            let model = FixedDecoder::new(data.clone(), u.clone(), loss).unwrap();
            let w = gaussian_vec(&mut r, model.dim(), scale);
            let v = gaussian_vec(&mut r, model.dim(), 1.0);
            let (g_ad, h_ad) = ad_grad_hvp(
                |z| reference_loss(&data, &constants(&u), z, loss),
                |z| reference_loss(&data, &constants(&u), z, loss),
                &w,
                &v,
            );
            let mut g = vec![0.0; model.dim()];
            let mut h = vec![0.0; model.dim()];
            model.grad(&w, &mut g);
            model.hvp(&w, &v, &mut h);
            let l_ref = reference_loss(&data, &u, &w, loss);
            let l = model.log_loss(&w).exp();
            let l_star = model.log_loss_star().exp();
            let excess = model.loss(&w);
            assert!(
                (l - l_ref).abs() < 1e-13 * l_ref,
                "{loss:?} loss {l} vs {l_ref}"
            );
            // the excess is L − L*; here L − L* is O(1), so the difference is exact enough
            assert!(
                (excess - (l_ref - l_star)).abs() < 1e-12 * l_ref,
                "{loss:?} excess"
            );
            assert!(
                rel_err(&g, &g_ad) < 1e-10,
                "{loss:?} grad {}",
                rel_err(&g, &g_ad)
            );
            assert!(
                rel_err(&h, &h_ad) < 1e-10,
                "{loss:?} hvp {}",
                rel_err(&h, &h_ad)
            );
        }
    }
}

#[test]
fn ties_and_bad_shapes_are_rejected() {
    let data = TokenData::new(1, 2, 2, vec![1.0, 0.0, 1.0, 0.0], vec![1.0]).unwrap();
    assert!(matches!(
        FixedDecoder::new(data.clone(), vec![1.0, 0.0], Loss::Exponential),
        Err(TokenError::Degenerate(_))
    ));
    assert!(FixedDecoder::new(data, vec![1.0], Loss::Exponential).is_err());
    assert!(TokenData::new(1, 2, 2, vec![0.0; 4], vec![0.5]).is_err());
    assert!(TokenData::new(1, 2, 2, vec![0.0; 3], vec![1.0]).is_err());
    assert!(TokenData::new(2, 2, 2, vec![0.0; 1], vec![1.0, 1.0]).is_err());
    // user data from JSON reaches the model with its own queries
    let p = crate::analysis::svm::TokenProblem::from_json(
        r#"{"X": [[[1,0],[0,1]]], "y": [-1], "u": [-1,0], "z": [[0.5,0.5]]}"#,
    )
    .unwrap();
    let data = TokenData::from_problem(&p).unwrap();
    assert_eq!(data.query(0), &[0.5, 0.5]);
    let model = FixedDecoder::new(data, p.u.clone().unwrap(), Loss::Exponential).unwrap();
    assert_eq!(model.optimal_tokens(), p.opt.as_slice());
}

/// The model keeps its evaluation at the last W: a call at another W must refresh it, and a
/// call back at the first W must give the same bits as a fresh model there.
#[test]
fn the_cached_evaluation_follows_w() {
    let mut r = rng(7);
    let data = random_data(&mut r);
    let u = gaussian_vec(&mut r, data.d, 1.0);
    let model = FixedDecoder::new(data.clone(), u.clone(), Loss::Logistic).unwrap();
    let w1 = gaussian_vec(&mut r, model.dim(), 1.0);
    let w2 = gaussian_vec(&mut r, model.dim(), 1.0);
    let v = gaussian_vec(&mut r, model.dim(), 1.0);
    let at = |m: &FixedDecoder, w: &[f64]| {
        let (mut g, mut h) = (vec![0.0; m.dim()], vec![0.0; m.dim()]);
        m.grad(w, &mut g);
        m.hvp(w, &v, &mut h);
        (m.loss(w), g, h)
    };
    let first = at(&model, &w1);
    let second = at(&model, &w2);
    assert_ne!(first.0, second.0);
    assert_eq!(at(&model, &w1), first);
    let fresh = FixedDecoder::new(data, u, Loss::Logistic).unwrap();
    assert_eq!(at(&fresh, &w2), second);
}

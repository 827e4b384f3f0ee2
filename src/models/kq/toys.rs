//! The canonical datasets of spec 001 §5.1. Each is a token-selection [`Instance`] (tokens,
//! labels, queries z_i, decoder v, optimal tokens) whose max-margin solutions are known in
//! closed form, so they serve as hard-threshold tests.

use crate::attention::{Instance, TokenData};

fn instance(
    n: usize,
    t: usize,
    d: usize,
    x: Vec<f64>,
    y: Vec<f64>,
    z: Vec<f64>,
    v: Vec<f64>,
) -> Instance {
    let data = TokenData::with_queries(n, t, d, x, y, z).expect("the toy datasets are well formed");
    Instance {
        data,
        decoder: v,
        opt: vec![0; n],
    }
}

/// toy-1 (n = 1, L = 2, d = 3): one constraint B = (1, 0.5, 0); ℓ1-SVM β* = (1, 0, 0),
/// ℓ2-SVM (0.8, 0.4, 0). Its full-W constraint is rank one, so W_F = W_* there.
pub fn toy1() -> Instance {
    #[rustfmt::skip]
    let x = vec![
        0.0, 0.0, 1.0,
        -1.0, -0.5, 0.0,
    ];
    instance(
        1,
        2,
        3,
        x,
        vec![1.0],
        vec![1.0, 1.0, 0.0],
        vec![0.0, 0.0, 1.0],
    )
}

/// toy-2(c) (n = 2, L = 2, d = 4): B₁ = (2, c, 0, 0), B₂ = (0, c, 2, 0). At c = 1.6 (toy-2b,
/// the diagonal discriminator) the ℓ1-SVM is β* = (0, 0.625, 0, 0) and the ℓ2-SVM
/// (0.219298, 0.350877, 0.219298, 0); at c = 1 the ℓ1 solution set is a segment.
pub fn toy2(c: f64) -> Instance {
    #[rustfmt::skip]
    let x = vec![
        0.0, 0.0, 0.0, 2.0,
        -2.0, -c, 0.0, 0.0,
        0.0, 0.0, 0.0, -2.0,
        0.0, -c, -2.0, 0.0,
    ];
    let z = vec![1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0];
    instance(2, 2, 4, x, vec![1.0, -1.0], z, vec![0.0, 0.0, 0.0, 1.0])
}

/// toy-2b = toy-2(1.6).
pub fn toy2b() -> Instance {
    toy2(1.6)
}

/// toy-3 (n = 2, L = 2, d = 2; the full-model discriminator): A_k = u_k u_kᵀ with
/// u₁ = (1, 0), u₂ = (½, √3/2). W_* = (4/3) wwᵀ with w = (√3/2, ½) (rank one, OPT_* = 4/3);
/// W_F = [[1, √3/5], [√3/5, 3/5]] with singular values (1.2, 0.4).
pub fn toy3() -> Instance {
    let (c, s) = (0.5, 3f64.sqrt() / 2.0);
    #[rustfmt::skip]
    let x = vec![
        1.0, 0.0,
        0.0, 0.0,
        c, s,
        0.0, 0.0,
    ];
    instance(
        2,
        2,
        2,
        x,
        vec![1.0, 1.0],
        vec![1.0, 0.0, c, s],
        vec![2.0, 2.0],
    )
}

/// toy-4 (Assumption-4 data, n = 2, L = 3, d = 4, c₁ = c₂ = 0.2): the aligned flow's limit is
/// W* = Diag(1/2.4, −1/1.6, 0, 0), which is also the W_F-SVM solution; the nuclear-norm
/// solution set is a continuum (spec §5.1).
pub fn toy4() -> Instance {
    #[rustfmt::skip]
    let x = vec![
        2.0, 0.0, 0.0, 0.0,
        0.4, 0.0, 1.0, 0.0,
        0.4, 0.0, -1.0, 0.0,
        0.0, 2.0, 0.0, 0.0,
        0.0, 0.4, 0.3, 0.5,
        0.0, 0.4, -0.3, -0.5,
    ];
    let z = vec![1.5, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0];
    instance(2, 3, 4, x, vec![1.0, 1.0], z, vec![2.0, 2.0, 0.0, 0.0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::svm::{solve_l1, solve_l2, RankOneConstraints, SvmMethod};

    fn constraints(inst: &Instance) -> RankOneConstraints {
        RankOneConstraints::w_svm(&inst.data.view(), &inst.opt).unwrap()
    }

    #[test]
    fn optimal_tokens_are_the_first_and_unique() {
        for inst in [toy1(), toy2b(), toy3(), toy4()] {
            let opt = inst.data.optimal_tokens(&inst.decoder, 1e-12).unwrap();
            assert_eq!(opt, inst.opt);
        }
    }

    #[test]
    fn diagonal_svms_of_toy2b_match_the_spec() {
        let diag = constraints(&toy2b()).diagonal().unwrap();
        let l1 = solve_l1(&diag).unwrap();
        let want = [0.0, 0.625, 0.0, 0.0];
        assert!(
            l1.beta.iter().zip(want).all(|(b, w)| (b - w).abs() < 1e-9),
            "{:?}",
            l1.beta
        );
        let l2 = solve_l2(&diag, SvmMethod::Dual).unwrap();
        let want = [0.219298, 0.350877, 0.219298, 0.0];
        assert!(
            l2.w.iter().zip(want).all(|(b, w)| (b - w).abs() < 1e-6),
            "{:?}",
            l2.w
        );
    }

    #[test]
    fn frobenius_svm_of_toy3_has_singular_values_1_2_and_0_4() {
        let sol = solve_l2(&constraints(&toy3()), SvmMethod::Dual).unwrap();
        let w = nalgebra::DMatrix::from_column_slice(2, 2, &sol.w);
        let s = w.singular_values();
        assert!(
            (s[0] - 1.2).abs() < 1e-9 && (s[1] - 0.4).abs() < 1e-9,
            "{s}"
        );
    }
}

//! Small pieces shared by `tokens-bad-init`, `flow-path-equivalence` and `joint-training`:
//! the checkpoint schedule of spec 003 §7 and the validation of an optimizer run's length.

use crate::scenario::{InputError, Scenario};

/// Iterations to record: every k ≤ `dense_until`, then about `per_decade` log-spaced k per
/// decade up to `k_max` (spec 003 §7: "log-spaced, about 60 per decade, plus every step for
/// K ≤ 1000"); always contains 0 and `k_max`.
pub fn checkpoints(k_max: usize, dense_until: usize, per_decade: usize) -> Vec<usize> {
    let dense = dense_until.min(k_max);
    let mut ks: Vec<usize> = (0..=dense).collect();
    if k_max > dense {
        let start = (dense.max(1) as f64).log10();
        let stop = (k_max as f64).log10();
        let count = ((stop - start) * per_decade as f64).ceil().max(1.0) as usize;
        for j in 1..=count {
            let k = 10f64
                .powf(start + (stop - start) * j as f64 / count as f64)
                .round() as usize;
            if k > *ks.last().expect("non-empty") && k <= k_max {
                ks.push(k);
            }
        }
        if *ks.last().expect("non-empty") != k_max {
            ks.push(k_max);
        }
    }
    ks
}

/// Refuses a run length shorter than the iterations its checks are judged at.
pub fn require_iterations(
    sc: &Scenario,
    iterations: usize,
    judged_at: &[(&str, usize)],
) -> Result<(), InputError> {
    match judged_at.iter().find(|(_, k)| *k > iterations) {
        Some((key, k)) => Err(sc.invalid(
            key,
            format!("is judged at k = {k}, beyond params.iterations = {iterations}"),
        )),
        None => Ok(()),
    }
}

/// log₁₀ of a quantity given by its natural logarithm (losses far below f64's range).
pub fn log10_from_ln(ln: f64) -> f64 {
    ln / std::f64::consts::LN_10
}

/// About `count` points of a curve at log-spaced x > 0 (so that markers stay readable).
pub fn thin_log(x: &[f64], y: &[f64], count: usize) -> (Vec<f64>, Vec<f64>) {
    let (lo, hi) = (x[0].ln(), x[x.len() - 1].ln());
    let mut idx: Vec<usize> = (0..count)
        .filter_map(|j| {
            let target = lo + (hi - lo) * j as f64 / (count - 1).max(1) as f64;
            x.iter().position(|&v| v.ln() >= target - 1e-12)
        })
        .collect();
    idx.dedup();
    (
        idx.iter().map(|&k| x[k]).collect(),
        idx.iter().map(|&k| y[k]).collect(),
    )
}

/// `n` in Unicode subscript digits (figure labels such as q₁₂ have no markup).
pub fn subscript(n: usize) -> String {
    n.to_string()
        .chars()
        .map(|c| char::from_u32(0x2080 + c.to_digit(10).expect("a digit")).expect("subscript"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_are_dense_then_log_spaced_and_end_at_k_max() {
        let ks = checkpoints(20_000, 1000, 60);
        assert_eq!(&ks[..1001], &(0..=1000).collect::<Vec<_>>()[..]);
        assert_eq!(*ks.last().unwrap(), 20_000);
        assert!(ks.windows(2).all(|w| w[1] > w[0]));
        // log10(20) ≈ 1.3 decades at 60 per decade
        let tail = ks.len() - 1001;
        assert!((70..=80).contains(&tail), "{tail}");
        assert_eq!(checkpoints(5, 1000, 60), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(*checkpoints(300, 0, 10).last().unwrap(), 300);
    }

    #[test]
    fn thinning_keeps_log_spaced_points_and_subscripts_render() {
        let x: Vec<f64> = (1..=1000).map(f64::from).collect();
        let (tx, ty) = thin_log(&x, &x, 4);
        assert_eq!(tx, vec![1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(tx, ty);
        assert_eq!(subscript(12), "₁₂");
    }
}

//! NaN-propagating statistics over measured values.
//!
//! A check compares a measured value with a bound, and a NaN measurement must fail it. `f64::max`
//! and `f64::min` (and nalgebra's `max`/`amax`, and sorting with `total_cmp`) drop or misplace
//! NaN: folding `[1.0, NaN]` with `f64::max` gives 1, and an all-NaN fold from −∞ gives −∞, so an
//! `at_most` check would pass on a failed computation. Every reduction of measured values goes
//! through this module instead:
//!
//! - **NaN in, NaN out**: if any input is NaN, the result is NaN (and [`worst`]/[`best`] report
//!   the first NaN with its label).
//! - **Empty input**: [`max`], [`min`], [`range`], [`mean`], [`median`] and [`geomean`] are NaN
//!   over an empty set — nothing measured fails its check rather than passing vacuously;
//!   [`worst`]/[`best`] return `None` and the caller states the value (NaN) and label. [`max_with`]/[`min_with`] return their stated floor/ceiling, and the
//!   norms [`max_abs`]/[`max_abs_diff`] return 0 (the sup-norm of an empty vector); use them only
//!   where that value is the right answer for "no entries".
//! - **NaN-free input gives bit for bit what the plain fold gave**: the same `f64::max`/`f64::min`
//!   in the same left-to-right order, so replacing a fold changes no measured value.
//!
//! The reductions take anything iterable over `f64` or `&f64`: `stats::max(&errors)`,
//! `stats::max(runs.iter().map(|r| r.error))`.

use std::borrow::Borrow;

/// `max(a, b)`, NaN if either is NaN.
pub fn larger(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `min(a, b)`, NaN if either is NaN.
pub fn smaller(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// Folds `values` from `start` with `pick`, stopping at the first NaN (which is the result).
fn fold_nan<T: Borrow<f64>>(
    start: f64,
    values: impl IntoIterator<Item = T>,
    pick: fn(f64, f64) -> f64,
) -> f64 {
    let mut acc = start;
    for v in values {
        let v = *v.borrow();
        if v.is_nan() {
            return f64::NAN;
        }
        acc = pick(acc, v);
    }
    acc
}

/// The largest value; NaN if any is NaN or if there are none.
pub fn max<T: Borrow<f64>>(values: impl IntoIterator<Item = T>) -> f64 {
    let mut it = values.into_iter();
    match it.next() {
        Some(first) => fold_nan(*first.borrow(), it, larger),
        None => f64::NAN,
    }
}

/// The smallest value; NaN if any is NaN or if there are none.
pub fn min<T: Borrow<f64>>(values: impl IntoIterator<Item = T>) -> f64 {
    let mut it = values.into_iter();
    match it.next() {
        Some(first) => fold_nan(*first.borrow(), it, smaller),
        None => f64::NAN,
    }
}

/// The largest of `floor` and `values`; NaN if any is NaN; `floor` if there are none.
///
/// For quantities with a natural lower end: a constraint violation max(0, …) is 0 when nothing
/// is violated, a norm is at least 0.
pub fn max_with<T: Borrow<f64>>(floor: f64, values: impl IntoIterator<Item = T>) -> f64 {
    fold_nan(floor, values, larger)
}

/// The smallest of `ceiling` and `values`; NaN if any is NaN; `ceiling` if there are none.
pub fn min_with<T: Borrow<f64>>(ceiling: f64, values: impl IntoIterator<Item = T>) -> f64 {
    fold_nan(ceiling, values, smaller)
}

/// max |x| (the sup-norm); NaN if any is NaN; 0 if there are none.
pub fn max_abs<T: Borrow<f64>>(values: impl IntoIterator<Item = T>) -> f64 {
    max_with(0.0, values.into_iter().map(|v| v.borrow().abs()))
}

/// ‖a − b‖_∞ = max_k |a_k − b_k|; NaN if any difference is NaN; 0 for empty vectors.
///
/// Panics if the lengths differ (comparing vectors of different sizes is a programming error).
pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "max_abs_diff: lengths differ");
    max_abs(a.iter().zip(b).map(|(x, y)| x - y))
}

/// (smallest, largest); both NaN if any value is NaN or if there are none.
pub fn range<T: Borrow<f64>>(values: impl IntoIterator<Item = T>) -> (f64, f64) {
    let mut it = values.into_iter().map(|v| *v.borrow());
    let (mut lo, mut hi) = match it.next() {
        Some(first) if !first.is_nan() => (first, first),
        _ => return (f64::NAN, f64::NAN),
    };
    for v in it {
        if v.is_nan() {
            return (f64::NAN, f64::NAN);
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    (lo, hi)
}

/// For axis limits and layout, never for a measured value: the smallest of `start` and the
/// values, skipping NaN (a NaN sample must not blank an axis; its check fails elsewhere).
pub fn axis_min<T: Borrow<f64>>(start: f64, values: impl IntoIterator<Item = T>) -> f64 {
    values
        .into_iter()
        .map(|v| *v.borrow())
        .fold(start, f64::min)
}

/// The largest of `start` and the values, skipping NaN; as [`axis_min`], for axes only.
pub fn axis_max<T: Borrow<f64>>(start: f64, values: impl IntoIterator<Item = T>) -> f64 {
    values
        .into_iter()
        .map(|v| *v.borrow())
        .fold(start, f64::max)
}

/// The largest value with its label (the first on ties), `None` if there are none. A NaN value
/// wins: the first NaN is returned with its label, so the report names where the computation
/// failed. Callers state the empty case, e.g. `.unwrap_or((f64::NAN, "-"))`.
pub fn worst<T>(items: impl IntoIterator<Item = (f64, T)>) -> Option<(f64, T)> {
    extreme(items, |candidate, current| candidate > current)
}

/// The smallest value with its label (the first on ties), `None` if there are none; NaN wins
/// as in [`worst`].
pub fn best<T>(items: impl IntoIterator<Item = (f64, T)>) -> Option<(f64, T)> {
    extreme(items, |candidate, current| candidate < current)
}

fn extreme<T>(
    items: impl IntoIterator<Item = (f64, T)>,
    beats: fn(f64, f64) -> bool,
) -> Option<(f64, T)> {
    let mut it = items.into_iter();
    let mut current = it.next()?;
    if current.0.is_nan() {
        return Some(current);
    }
    for item in it {
        if item.0.is_nan() {
            return Some(item);
        }
        if beats(item.0, current.0) {
            current = item;
        }
    }
    Some(current)
}

/// The arithmetic mean (summed left to right); NaN if any value is NaN or if there are none.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

/// The geometric mean exp(mean ln x); NaN if any value is NaN or negative, or if there are none;
/// 0 if a value is 0.
pub fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|x| x.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// The median (the mean of the two middle values for an even count); NaN if any value is NaN
/// or if there are none.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[m]
    } else {
        0.5 * (sorted[m - 1] + sorted[m])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAN: f64 = f64::NAN;
    const INF: f64 = f64::INFINITY;

    /// Every NaN-propagating reduction of one list, so each case is run through all of them.
    fn all_reductions(v: &[f64]) -> [f64; 11] {
        let it = || v.iter().copied();
        [
            max(it()),
            min(it()),
            max_with(0.0, it()),
            min_with(1.0, it()),
            max_abs(it()),
            max_abs_diff(v, &vec![0.0; v.len()]),
            range(it()).0,
            range(it()).1,
            mean(v),
            median(v),
            worst(it().zip(0..)).map_or(0.0, |w| w.0),
        ]
    }

    #[test]
    fn a_nan_anywhere_makes_every_reduction_nan() {
        for v in [
            vec![NAN],
            vec![NAN, NAN, NAN],
            vec![NAN, 1.0, 2.0],
            vec![1.0, NAN, 2.0],
            vec![1.0, 2.0, NAN],
            vec![-INF, NAN, INF],
            vec![-NAN, 3.0],
        ] {
            for (k, r) in all_reductions(&v).into_iter().enumerate() {
                assert!(r.is_nan(), "reduction {k} of {v:?} gave {r}");
            }
            assert!(geomean(&v).is_nan());
            assert!(best(v.iter().copied().zip(0..)).unwrap().0.is_nan());
        }
    }

    #[test]
    fn worst_and_best_name_the_first_nan() {
        let items = [(1.0, "a"), (NAN, "b"), (5.0, "c"), (NAN, "d")];
        let (v, at) = worst(items).unwrap();
        assert!(v.is_nan());
        assert_eq!(at, "b");
        let (v, at) = best(items).unwrap();
        assert!(v.is_nan());
        assert_eq!(at, "b");
    }

    #[test]
    fn nan_free_values_give_what_the_plain_folds_give() {
        let v = [0.5, -3.0, 2.5, 2.5, 1e-300, -0.0, 7.25, -7.0];
        assert_eq!(max(v), v.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        assert_eq!(min(v), v.iter().copied().fold(f64::INFINITY, f64::min));
        assert_eq!(max_with(0.0, v), v.iter().copied().fold(0.0, f64::max));
        assert_eq!(min_with(0.0, v), v.iter().copied().fold(0.0, f64::min));
        assert_eq!(max_abs(v), 7.25);
        assert_eq!(range(v), (-7.0, 7.25));
        assert_eq!(max_abs_diff(&[1.0, 2.0, 3.0], &[1.5, 2.0, -1.0]), 4.0);
        assert_eq!(worst(v.iter().copied().zip(0..)), Some((7.25, 6)));
        assert_eq!(best(v.iter().copied().zip(0..)), Some((-7.0, 7)));
        // ties keep the first
        assert_eq!(worst([(2.0, 'x'), (2.0, 'y')]), Some((2.0, 'x')));
        assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 10.0]), 3.5);
        assert!((geomean(&[1.0, 4.0, 16.0]) - 4.0).abs() < 1e-15);
    }

    #[test]
    fn infinities_are_values_not_missing() {
        let v = [1.0, INF, -INF];
        assert_eq!(max(v), INF);
        assert_eq!(min(v), -INF);
        assert_eq!(max_abs(v), INF);
        assert_eq!(range(v), (-INF, INF));
        assert_eq!(worst(v.iter().copied().zip(0..)), Some((INF, 1)));
        assert_eq!(best(v.iter().copied().zip(0..)), Some((-INF, 2)));
        assert_eq!(median(&v), 1.0);
        assert!(mean(&v).is_nan(), "∞ − ∞ is undefined");
        assert_eq!(max([-INF]), -INF);
        assert_eq!(geomean(&[0.0, 2.0]), 0.0);
        assert!(geomean(&[-1.0, 2.0]).is_nan());
    }

    #[test]
    fn empty_input_is_nan_except_where_a_value_is_stated() {
        let none: [f64; 0] = [];
        for r in [
            max(none),
            min(none),
            mean(&none),
            median(&none),
            geomean(&none),
        ] {
            assert!(r.is_nan());
        }
        assert!(range(none).0.is_nan() && range(none).1.is_nan());
        assert_eq!(worst(none.iter().map(|&x| (x, ()))), None);
        assert_eq!(max_with(0.25, none), 0.25);
        assert_eq!(min_with(4.0, none), 4.0);
        assert_eq!(max_abs(none), 0.0);
        assert_eq!(max_abs_diff(&[], &[]), 0.0);
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn max_abs_diff_rejects_different_lengths() {
        max_abs_diff(&[1.0], &[1.0, 2.0]);
    }
}

//! Parameter types that check their range while they are deserialized ("parse, don't
//! validate"): a field typed [`Positive`] cannot hold 0, so the kind's `validate` keeps only
//! the rules across fields. A value out of range is refused by serde, and scenario loading
//! names its key path (`checks.direction_tol`, `params.omega0`) with the reason, exit code 2.
//!
//! Each type serializes as the plain value (params.json is unchanged) and dereferences to it
//! (`*c.direction_tol` is the `f64`). Non-finite numbers never get this far: the loader refuses
//! `nan` and `inf` anywhere in a file or override.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A number in (10^`LO`, 10^`HI`] (e.g. a horizon of log time, whose margins lose f64
/// resolution beyond a bound).
#[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Decades<const LO: i32, const HI: i32>(f64);

impl<const LO: i32, const HI: i32> TryFrom<f64> for Decades<LO, HI> {
    type Error = String;
    fn try_from(v: f64) -> Result<Self, String> {
        let (lo, hi) = (10f64.powi(LO), 10f64.powi(HI));
        if v > lo && v <= hi {
            Ok(Decades(v))
        } else {
            Err(format!("must lie in ({lo}, {hi:e}], got {v}"))
        }
    }
}

/// A count ≥ `N` (a size, a number of samples).
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "usize", into = "usize")]
pub struct AtLeast<const N: usize>(usize);

impl<const N: usize> TryFrom<usize> for AtLeast<N> {
    type Error = String;
    fn try_from(v: usize) -> Result<Self, String> {
        if v >= N {
            Ok(AtLeast(v))
        } else {
            Err(format!("must be ≥ {N}, got {v}"))
        }
    }
}

/// A list with at least one entry.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<T>", into = "Vec<T>")]
#[serde(bound(
    serialize = "T: Serialize + Clone",
    deserialize = "T: Deserialize<'de>"
))]
pub struct NonEmpty<T>(Vec<T>);

impl<T> TryFrom<Vec<T>> for NonEmpty<T> {
    type Error = &'static str;
    fn try_from(v: Vec<T>) -> Result<Self, &'static str> {
        if v.is_empty() {
            Err("must not be empty")
        } else {
            Ok(NonEmpty(v))
        }
    }
}

/// A non-empty list of nonzero numbers (e.g. initial scales, where 0 is a fixed point).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<f64>", into = "Vec<f64>")]
pub struct Nonzeros(Vec<f64>);

impl TryFrom<Vec<f64>> for Nonzeros {
    type Error = String;
    fn try_from(v: Vec<f64>) -> Result<Self, String> {
        match v.iter().position(|&x| x == 0.0) {
            _ if v.is_empty() => Err("must not be empty".into()),
            Some(i) => Err(format!("entry [{i}] is 0; every entry must be nonzero")),
            None => Ok(Nonzeros(v)),
        }
    }
}

/// The plain value, dereference, and a `Debug` that prints only the value (as notes quote
/// parameters with `{:?}`), for each wrapper.
/// The plain value (`From`), dereference and `Debug` of wrappers `$ty` of `$inner` (also
/// used by the folders' own list types).
macro_rules! plain {
    ($([$($gen:tt)*] $ty:ty => $inner:ty),* $(,)?) => {$(
        impl<$($gen)*> From<$ty> for $inner {
            fn from(v: $ty) -> $inner {
                v.0
            }
        }
        impl<$($gen)*> ::std::ops::Deref for $ty {
            type Target = $inner;
            fn deref(&self) -> &$inner {
                &self.0
            }
        }
        impl<$($gen)*> ::std::fmt::Debug for $ty where $inner: ::std::fmt::Debug {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                self.0.fmt(f)
            }
        }
    )*};
}
pub(crate) use plain;

plain! {
    [] PositiveRange => [f64; 2],
    [const LO: i32, const HI: i32] Decades<LO, HI> => f64,
    [const N: usize] AtLeast<N> => usize,
    [T] NonEmpty<T> => Vec<T>,
    [] Nonzeros => Vec<f64>,
}

/// A number prints as its value (`{}`, `{:e}`) in notes and messages.
macro_rules! number {
    ($([$($gen:tt)*] $ty:ty),* $(,)?) => {$(
        impl<$($gen)*> fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
        impl<$($gen)*> fmt::LowerExp for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerExp::fmt(&self.0, f)
            }
        }
    )*};
}

number! {
    [const LO: i32, const HI: i32] Decades<LO, HI>,
    [const N: usize] AtLeast<N>,
}

/// Declares a wrapper of `f64` accepted when `$ok(v)` holds and refused with "must $what, got v";
/// like every type here it serializes as the plain value and dereferences to it.
macro_rules! bounded {
    ($($(#[$doc:meta])* $name:ident: |$v:ident| $ok:expr, $what:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
        #[serde(try_from = "f64", into = "f64")]
        pub struct $name(f64);

        impl TryFrom<f64> for $name {
            type Error = String;
            fn try_from($v: f64) -> Result<Self, String> {
                if $ok {
                    Ok($name($v))
                } else {
                    Err(format!(concat!("must ", $what, ", got {}"), $v))
                }
            }
        }
    )*
    plain! { $([] $name => f64),* }
    number! { $([] $name),* }
    };
}

bounded! {
    /// A number > 0: a threshold, a scale, a rate.
    Positive: |v| v > 0.0, "be positive";
    /// A fraction of a whole in (0, 1] (e.g. of the runs that must pass).
    Fraction: |v| v > 0.0 && v <= 1.0, "lie in (0, 1]";
    /// A number in the open interval (0, 1) (a constant c₁ of Theorem 1, a decay, a tolerance).
    Open01: |v| v > 0.0 && v < 1.0, "lie in (0, 1)";
    /// A number ≥ 1 (a condition number).
    AtLeastOne: |v| v >= 1.0, "be ≥ 1";
    /// A number > 1 (a ratio of scales R₁, a horizon past t = 1).
    AboveOne: |v| v > 1.0, "exceed 1";
    /// A number ≥ 0 (a tolerance that may be 0).
    NonNegative: |v| v >= 0.0, "be ≥ 0";
    /// A nonzero number (an initial coordinate or shift where 0 is a degenerate start).
    Nonzero: |v| v != 0.0, "be nonzero";
    /// A number < 0 (a log₁₀ of a scale below 1, such as log₁₀ α).
    Negative: |v| v < 0.0, "be negative";
    /// A number in [0, 1) (an exponent that may vanish but must stay below 1).
    HalfOpenUnit: |v| (0.0..1.0).contains(&v), "lie in [0, 1)";
    /// A number in (0, ½) (a margin of a plateau on either side of its centre).
    OpenHalf: |v| v > 0.0 && v < 0.5, "lie in (0, 0.5)";
}

/// A window [low, high] with 0 < low < high (of loss levels, of fit ratios).
#[derive(Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "[f64; 2]", into = "[f64; 2]")]
pub struct PositiveRange([f64; 2]);

impl TryFrom<[f64; 2]> for PositiveRange {
    type Error = String;
    fn try_from([low, high]: [f64; 2]) -> Result<Self, String> {
        if low > 0.0 && low < high {
            Ok(PositiveRange([low, high]))
        } else {
            Err(format!("need 0 < low < high, got [{low}, {high}]"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct P {
        tol: Positive,
        share: Fraction,
        n: AtLeast<2>,
        horizon: Decades<1, 10>,
        list: NonEmpty<usize>,
        scales: Nonzeros,
    }

    fn parse(text: &str) -> Result<P, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn in_range_values_parse_and_serialize_as_plain_values() {
        let p =
            parse("tol = 1e-8\nshare = 1\nn = 2\nhorizon = 1e10\nlist = [3]\nscales = [-0.5, 2]")
                .unwrap();
        assert_eq!((*p.tol, *p.share, *p.n, *p.horizon), (1e-8, 1.0, 2, 1e10));
        assert_eq!((&p.list[..], &p.scales[..]), (&[3][..], &[-0.5, 2.0][..]));
        assert_eq!(format!("{:?}", p.scales), "[-0.5, 2.0]");
        // serialized as the plain values (params.json is unchanged)
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"tol": 1e-8, "share": 1.0, "n": 2, "horizon": 1e10,
                               "list": [3], "scales": [-0.5, 2.0]})
        );
    }

    #[test]
    fn out_of_range_values_are_refused_with_the_reason() {
        let ok = "share = 1\nn = 2\nhorizon = 100\nlist = [3]\nscales = [1]";
        for (bad, reason) in [
            ("tol = 0", "must be positive, got 0"),
            ("tol = -1e-3", "must be positive, got -0.001"),
            ("share = 1.5", "must lie in (0, 1], got 1.5"),
            ("n = 1", "must be ≥ 2, got 1"),
            ("horizon = 10", "must lie in (10, 1e10], got 10"),
            ("horizon = 2e10", "must lie in (10, 1e10], got 20000000000"),
            ("list = []", "must not be empty"),
            ("scales = [1, 0]", "entry [1] is 0"),
            ("scales = []", "must not be empty"),
        ] {
            let key = bad.split(' ').next().unwrap();
            let text: String = format!("tol = 1\n{ok}")
                .lines()
                .filter(|l| !l.starts_with(&format!("{key} ")))
                .chain([bad])
                .collect::<Vec<_>>()
                .join("\n");
            let e = parse(&text).unwrap_err();
            assert!(e.contains(reason), "{bad}: {e}");
        }
    }

    #[derive(Debug, Deserialize, Serialize)]
    struct Q {
        c1: Open01,
        kappa: AtLeastOne,
        r1: AboveOne,
        tol: NonNegative,
        x: Nonzero,
        window: PositiveRange,
    }

    #[test]
    fn bounded_numbers_and_windows_parse_plainly_and_refuse_with_the_reason() {
        let good = [
            "c1 = 0.5",
            "kappa = 1",
            "r1 = 2",
            "tol = 0",
            "x = -0.5",
            "window = [1e-9, 1e-3]",
        ];
        let q: Q = toml::from_str(&good.join("\n")).unwrap();
        assert_eq!(
            (*q.c1, *q.kappa, *q.r1, *q.tol, *q.x),
            (0.5, 1.0, 2.0, 0.0, -0.5)
        );
        assert_eq!(
            serde_json::to_value(&q).unwrap(),
            serde_json::json!({"c1": 0.5, "kappa": 1.0, "r1": 2.0, "tol": 0.0, "x": -0.5,
                               "window": [1e-9, 1e-3]})
        );
        for (bad, reason) in [
            ("c1 = 1", "must lie in (0, 1), got 1"),
            ("kappa = 0.5", "must be ≥ 1, got 0.5"),
            ("r1 = 1", "must exceed 1, got 1"),
            ("tol = -1", "must be ≥ 0, got -1"),
            ("x = 0", "must be nonzero, got 0"),
            ("window = [2, 1]", "need 0 < low < high"),
            ("window = [0, 1]", "need 0 < low < high"),
        ] {
            let key = bad.split(' ').next().unwrap();
            let text: String = good
                .into_iter()
                .filter(|l| !l.starts_with(&format!("{key} ")))
                .chain([bad])
                .collect::<Vec<_>>()
                .join("\n");
            let e = toml::from_str::<Q>(&text).unwrap_err().to_string();
            assert!(e.contains(reason), "{bad}: {e}");
        }
    }
}

//! Parameter types of seed 003 beyond [`crate::scenario::param`], checked while they are
//! deserialized: a threshold that may be 0, a number in (0, 1) or [0, 1), a negative
//! logarithm, a band [low, high], and strictly increasing lists (of sizes, norms or
//! exponents). Each serializes as the plain value and dereferences to it, as the shared types
//! do.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// A number ≥ 0 (a tolerance that may demand exactness).
#[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct NonNegative(f64);

impl TryFrom<f64> for NonNegative {
    type Error = String;
    fn try_from(v: f64) -> Result<Self, String> {
        match v >= 0.0 {
            true => Ok(NonNegative(v)),
            false => Err(format!("must be ≥ 0, got {v}")),
        }
    }
}

/// A number in the open interval (0, 1) (a probability that is neither sure nor void, a
/// fraction of a run that leaves a part on either side).
#[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct OpenUnit(f64);

impl TryFrom<f64> for OpenUnit {
    type Error = String;
    fn try_from(v: f64) -> Result<Self, String> {
        match v > 0.0 && v < 1.0 {
            true => Ok(OpenUnit(v)),
            false => Err(format!("must lie in (0, 1), got {v}")),
        }
    }
}

/// A number in [0, 1) (an exponent that may vanish but must stay below 1).
#[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct HalfOpenUnit(f64);

impl TryFrom<f64> for HalfOpenUnit {
    type Error = String;
    fn try_from(v: f64) -> Result<Self, String> {
        match (0.0..1.0).contains(&v) {
            true => Ok(HalfOpenUnit(v)),
            false => Err(format!("must lie in [0, 1), got {v}")),
        }
    }
}

/// A number < 0 (a log₁₀ below 1).
#[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Negative(f64);

impl TryFrom<f64> for Negative {
    type Error = String;
    fn try_from(v: f64) -> Result<Self, String> {
        match v < 0.0 {
            true => Ok(Negative(v)),
            false => Err(format!("must be negative, got {v}")),
        }
    }
}

/// A strictly increasing list of at least `N` entries (a trend or an exponent needs `N`
/// points).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<T>", into = "Vec<T>")]
#[serde(bound(
    serialize = "T: Serialize + Clone",
    deserialize = "T: Deserialize<'de> + PartialOrd"
))]
pub struct Increasing<T, const N: usize = 1>(Vec<T>);

impl<T: PartialOrd, const N: usize> TryFrom<Vec<T>> for Increasing<T, N> {
    type Error = String;
    fn try_from(v: Vec<T>) -> Result<Self, String> {
        if v.len() < N {
            Err(format!("needs at least {N} entries, got {}", v.len()))
        } else if let Some(i) = v.windows(2).position(|w| w[1] <= w[0]) {
            Err(format!(
                "must be strictly increasing; entry [{}] does not exceed entry [{i}]",
                i + 1
            ))
        } else {
            Ok(Increasing(v))
        }
    }
}

/// A non-empty, strictly increasing list of positive numbers (initial norms, times, arc
/// lengths).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<f64>", into = "Vec<f64>")]
pub struct Grid(Vec<f64>);

impl TryFrom<Vec<f64>> for Grid {
    type Error = String;
    fn try_from(v: Vec<f64>) -> Result<Self, String> {
        match v.iter().position(|&x| x <= 0.0) {
            _ if v.is_empty() => Err("must not be empty".into()),
            Some(i) => Err(format!("entry [{i}] must be positive, got {}", v[i])),
            None => Increasing::<f64>::try_from(v).map(|v| Grid(v.0)),
        }
    }
}

/// A strictly increasing list of at least `N` sizes, each ≥ `MIN` (the dimensions a trend or
/// an exponent is fitted over).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<usize>", into = "Vec<usize>")]
pub struct Sizes<const MIN: usize, const N: usize>(Vec<usize>);

impl<const MIN: usize, const N: usize> TryFrom<Vec<usize>> for Sizes<MIN, N> {
    type Error = String;
    fn try_from(v: Vec<usize>) -> Result<Self, String> {
        match v.iter().position(|&x| x < MIN) {
            Some(i) => Err(format!("entry [{i}] must be ≥ {MIN}, got {}", v[i])),
            None => Increasing::<usize, N>::try_from(v).map(|v| Sizes(v.0)),
        }
    }
}

/// A range [low, high] with low < high (the band a measured value must fall in).
#[derive(Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "[f64; 2]", into = "[f64; 2]")]
pub struct Band([f64; 2]);

impl TryFrom<[f64; 2]> for Band {
    type Error = String;
    fn try_from([lo, hi]: [f64; 2]) -> Result<Self, String> {
        match lo < hi {
            true => Ok(Band([lo, hi])),
            false => Err(format!(
                "must be [low, high] with low < high, got [{lo}, {hi}]"
            )),
        }
    }
}

macro_rules! plain {
    ($([$($gen:tt)*] $ty:ty => $inner:ty),* $(,)?) => {$(
        impl<$($gen)*> From<$ty> for $inner {
            fn from(v: $ty) -> $inner {
                v.0
            }
        }
        impl<$($gen)*> Deref for $ty {
            type Target = $inner;
            fn deref(&self) -> &$inner {
                &self.0
            }
        }
        impl<$($gen)*> fmt::Debug for $ty where $inner: fmt::Debug {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    )*};
}

plain! {
    [] NonNegative => f64,
    [] OpenUnit => f64,
    [] Negative => f64,
    [] HalfOpenUnit => f64,
    [T, const N: usize] Increasing<T, N> => Vec<T>,
    [] Grid => Vec<f64>,
    [const MIN: usize, const N: usize] Sizes<MIN, N> => Vec<usize>,
    [] Band => [f64; 2],
}

macro_rules! number {
    ($($ty:ty),*) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
        impl fmt::LowerExp for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerExp::fmt(&self.0, f)
            }
        }
    )*};
}

number!(NonNegative, OpenUnit, HalfOpenUnit, Negative);

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct P {
        tol: NonNegative,
        p: OpenUnit,
        alphas: Increasing<HalfOpenUnit>,
        dims: Sizes<2, 2>,
        grid: Grid,
        band: Band,
    }

    fn parse(text: &str) -> Result<P, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn in_range_values_parse_and_serialize_as_plain_values() {
        let p = parse(
            "tol = 0\np = 0.5\nalphas = [0, 0.5]\ndims = [2, 3]\ngrid = [1, 2]\nband = [-1, 1]",
        )
        .unwrap();
        assert_eq!((*p.tol, *p.p, p.alphas.len(), p.dims[1]), (0.0, 0.5, 2, 3));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"tol": 0.0, "p": 0.5, "alphas": [0.0, 0.5], "dims": [2, 3],
                               "grid": [1.0, 2.0], "band": [-1.0, 1.0]})
        );
    }

    #[test]
    fn out_of_range_values_are_refused_with_the_reason() {
        for (bad, reason) in [
            ("tol = -1", "must be ≥ 0, got -1"),
            ("p = 1", "must lie in (0, 1), got 1"),
            ("alphas = [0.5, 1]", "must lie in [0, 1), got 1"),
            ("alphas = []", "needs at least 1 entries, got 0"),
            ("alphas = [0.5, 0.5]", "entry [1] does not exceed entry [0]"),
            ("alphas = [0.5, -1]", "must lie in [0, 1), got -1"),
            ("dims = [4]", "needs at least 2 entries, got 1"),
            ("dims = [1, 4]", "entry [0] must be ≥ 2, got 1"),
            ("dims = [3, 3]", "entry [1] does not exceed entry [0]"),
            ("grid = []", "must not be empty"),
            ("grid = [1, 0]", "entry [1] must be positive, got 0"),
            ("grid = [1, 3, 2]", "entry [2] does not exceed entry [1]"),
            (
                "band = [1, 1]",
                "must be [low, high] with low < high, got [1, 1]",
            ),
            ("band = [1]", "expected an array of length 2"),
        ] {
            let key = bad.split(' ').next().unwrap();
            let text: String =
                "tol = 0\np = 0.5\nalphas = [0]\ndims = [2, 3]\ngrid = [1]\nband = [0, 1]"
                    .lines()
                    .filter(|l| !l.starts_with(&format!("{key} ")))
                    .chain([bad])
                    .collect::<Vec<_>>()
                    .join("\n");
            let e = parse(&text).unwrap_err();
            assert!(e.contains(reason), "{bad}: {e}");
        }
    }
}

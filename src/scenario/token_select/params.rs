//! Parameter types of seed 003 beyond [`crate::scenario::param`], checked while they are
//! deserialized: a band [low, high] and strictly increasing lists (of sizes, norms or
//! exponents). Each serializes as the plain value and dereferences to it, as the shared types
//! do.

use serde::{Deserialize, Serialize};

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

crate::scenario::param::plain! {
    [T, const N: usize] Increasing<T, N> => Vec<T>,
    [] Grid => Vec<f64>,
    [const MIN: usize, const N: usize] Sizes<MIN, N> => Vec<usize>,
    [] Band => [f64; 2],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::param::{HalfOpenUnit, NonNegative, Open01 as OpenUnit};

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

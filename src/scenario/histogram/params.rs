//! Parameter types of the seed-000 kinds beyond [`crate::scenario::param`], checked while the
//! scenario loads in the same way (serde `try_from`, serialized as the plain value, `Deref` to
//! it): a value out of range is refused with its key path before anything runs.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// A nonzero number (an initial coordinate or shift where 0 is a degenerate start).
#[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Nonzero(f64);

impl TryFrom<f64> for Nonzero {
    type Error = String;
    fn try_from(v: f64) -> Result<Self, String> {
        if v != 0.0 {
            Ok(Nonzero(v))
        } else {
            Err("must be nonzero, got 0".into())
        }
    }
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

/// The plain value, dereference, `Debug` and `Display` of each wrapper (as in
/// [`crate::scenario::param`]).
macro_rules! plain {
    ($($ty:ty => $inner:ty),* $(,)?) => {$(
        impl From<$ty> for $inner {
            fn from(v: $ty) -> $inner {
                v.0
            }
        }
        impl Deref for $ty {
            type Target = $inner;
            fn deref(&self) -> &$inner {
                &self.0
            }
        }
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    )*};
}

plain! {
    Nonzero => f64,
    PositiveRange => [f64; 2],
}

impl fmt::Display for Nonzero {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct P {
        x: Nonzero,
        window: PositiveRange,
    }

    fn parse(text: &str) -> Result<P, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn values_parse_serialize_plain_and_are_refused_out_of_range() {
        let p = parse("x = -0.5\nwindow = [1e-9, 1e-3]").unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"x": -0.5, "window": [1e-9, 1e-3]})
        );
        for (text, reason) in [
            ("x = 0\nwindow = [1, 2]", "must be nonzero"),
            ("x = 1\nwindow = [2, 1]", "need 0 < low < high"),
            ("x = 1\nwindow = [0, 1]", "need 0 < low < high"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(reason), "{text}: {e}");
        }
    }
}

//! Range types of the seed-004 parameters beside those of [`crate::scenario::param`]: an
//! initialization scale α in (0, 1) (Λ = ln 1/α must be positive), a margin in (0, ½), log10 α < 0, a factor > 1
//! (a horizon beyond the last stage) and a number ≥ 0. Like those, each is refused while the
//! scenario loads (key path and reason, exit code 2), serializes as the plain value and
//! dereferences to it.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// Declares a wrapper of `f64` accepted when `$ok` holds, else refused with `$why`.
macro_rules! ranged {
    ($($(#[$doc:meta])* $ty:ident: |$v:ident| $ok:expr, $why:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
        #[serde(try_from = "f64", into = "f64")]
        pub struct $ty(f64);

        impl TryFrom<f64> for $ty {
            type Error = String;
            fn try_from($v: f64) -> Result<Self, String> {
                if $ok {
                    Ok($ty($v))
                } else {
                    Err(format!(concat!($why, ", got {}"), $v))
                }
            }
        }
        impl From<$ty> for f64 {
            fn from(v: $ty) -> f64 {
                v.0
            }
        }
        impl Deref for $ty {
            type Target = f64;
            fn deref(&self) -> &f64 {
                &self.0
            }
        }
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
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

ranged! {
    /// A number in the open interval (0, 1): an initialization scale α, a ratio ρ, an ε.
    Unit: |v| v > 0.0 && v < 1.0, "must lie in (0, 1)";
    /// A margin in (0, ½), cut from each end of an interval (a plateau's interior).
    Margin: |v| v > 0.0 && v < 0.5, "must lie in (0, 0.5)";
    /// log10 α of an initialization scale α in (0, 1).
    NegativeLog: |v| v < 0.0, "must be < 0 (α in (0, 1))";
    /// A factor > 1 (e.g. a horizon as a multiple of the last stage time).
    AboveOne: |v| v > 1.0, "must exceed 1";
    /// A number ≥ 0 (e.g. an extra margin that may be absent).
    NonNegative: |v| v >= 0.0, "must be ≥ 0";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct P {
        alpha: Unit,
        log10_alpha: NegativeLog,
        factor: AboveOne,
        extra: NonNegative,
    }

    fn parse(text: &str) -> Result<P, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn in_range_values_parse_and_serialize_as_plain_values() {
        let p = parse("alpha = 1e-4\nlog10_alpha = -32\nfactor = 1.2\nextra = 0").unwrap();
        assert_eq!(
            (*p.alpha, *p.log10_alpha, *p.factor, *p.extra),
            (1e-4, -32.0, 1.2, 0.0)
        );
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"alpha": 1e-4, "log10_alpha": -32.0, "factor": 1.2, "extra": 0.0})
        );
    }

    #[test]
    fn out_of_range_values_are_refused_with_the_reason() {
        for (bad, reason) in [
            ("alpha = 1", "must lie in (0, 1), got 1"),
            ("alpha = 0", "must lie in (0, 1), got 0"),
            ("log10_alpha = 0", "must be < 0 (α in (0, 1)), got 0"),
            ("factor = 1", "must exceed 1, got 1"),
            ("extra = -1", "must be ≥ 0, got -1"),
        ] {
            let key = bad.split(' ').next().unwrap();
            let text: String = ["alpha = 0.5", "log10_alpha = -1", "factor = 2", "extra = 1"]
                .into_iter()
                .filter(|l| !l.starts_with(&format!("{key} ")))
                .chain([bad])
                .collect::<Vec<_>>()
                .join("\n");
            let e = parse(&text).unwrap_err();
            assert!(e.contains(reason), "{bad}: {e}");
        }
    }
}

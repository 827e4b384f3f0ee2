//! Seed-002 parameter types beyond `scenario::param`: real numbers with a bound other than 0
//! (a condition number ≥ 1, a ratio > 1, a rate in (0, 1), a tolerance ≥ 0), refused while the
//! scenario loads with the key path and the reason. Like `scenario::param`, each serializes as
//! the plain value (params.json is unchanged) and dereferences to it.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// Declares a wrapper of `f64` accepted when `$ok(v)` holds, refused with "must $what, got v".
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
        impl From<$name> for f64 {
            fn from(v: $name) -> f64 {
                v.0
            }
        }
        impl Deref for $name {
            type Target = f64;
            fn deref(&self) -> &f64 {
                &self.0
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
        impl fmt::LowerExp for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerExp::fmt(&self.0, f)
            }
        }
    )*};
}

bounded! {
    /// A number in the open interval (0, 1) (a constant c₁ of Theorem 1, a decay, a tolerance).
    Open01: |v| v > 0.0 && v < 1.0, "lie in (0, 1)";
    /// A number ≥ 1 (a condition number).
    AtLeastOne: |v| v >= 1.0, "be ≥ 1";
    /// A number > 1 (a ratio of scales R₁, a horizon past t = 1).
    AboveOne: |v| v > 1.0, "exceed 1";
    /// A number ≥ 0 (a tolerance that may be 0).
    NonNegative: |v| v >= 0.0, "be ≥ 0";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct P {
        c1: Open01,
        kappa: AtLeastOne,
        r1: AboveOne,
        tol: NonNegative,
    }

    #[test]
    fn bounds_parse_serialize_plainly_and_refuse_with_the_reason() {
        let p: P = toml::from_str("c1 = 0.5\nkappa = 1\nr1 = 2\ntol = 0").unwrap();
        assert_eq!((*p.c1, *p.kappa, *p.r1, *p.tol), (0.5, 1.0, 2.0, 0.0));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"c1": 0.5, "kappa": 1.0, "r1": 2.0, "tol": 0.0})
        );
        for (bad, reason) in [
            ("c1 = 1", "must lie in (0, 1), got 1"),
            ("kappa = 0.5", "must be ≥ 1, got 0.5"),
            ("r1 = 1", "must exceed 1, got 1"),
            ("tol = -1", "must be ≥ 0, got -1"),
        ] {
            let key = bad.split(' ').next().unwrap();
            let text: String = ["c1 = 0.5", "kappa = 1", "r1 = 2", "tol = 0"]
                .into_iter()
                .filter(|l| !l.starts_with(key))
                .chain([bad])
                .collect::<Vec<_>>()
                .join("\n");
            let e = toml::from_str::<P>(&text).unwrap_err().to_string();
            assert!(e.contains(reason), "{bad}: {e}");
        }
    }
}

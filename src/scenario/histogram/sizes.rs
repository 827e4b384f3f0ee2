//! Cost estimates shared by the seed-000 kinds (see [`crate::scenario::cost`]): the df and
//! transformer flows live on the canonical state (Q, v) of dimension d(d + 1); ℓ_df costs O(d²)
//! per gradient, ℓ_tf O(d³) and holds the third-moment tensor T3 (d³ doubles).

use super::tf_common::FlowKind;
use crate::flow::Method;
use crate::scenario::cost::{n, Cost};

/// The state dimension d(d + 1).
pub fn dim(d: usize) -> f64 {
    n(d) * (n(d) + 1.0)
}

/// Floating-point operations of one gradient (or hvp) of ℓ_df.
pub fn df_grad(d: usize) -> f64 {
    4.0 * n(d) * n(d)
}

/// Floating-point operations of one gradient (or hvp) of ℓ_tf: the contraction with T3.
pub fn tf_grad(d: usize) -> f64 {
    4.0 * n(d).powi(3)
}

/// The keys a flow's cost grows with: the solves' (their number and d) and the samples kept.
pub struct Keys {
    pub solves: &'static str,
    pub samples: &'static str,
}

/// `solves` integrations of ℓ_df (`d` the alphabet size) keeping `samples` states each.
pub fn df_solves(keys: Keys, solves: f64, d: usize, samples: f64, method: Method) -> Cost {
    Cost::new()
        .ode(keys.solves, solves, dim(d), df_grad(d), method)
        .records(keys.samples, solves, samples, dim(d))
}

/// `solves` integrations of ℓ_tf keeping `samples` states each.
pub fn tf_solves(keys: Keys, solves: f64, d: usize, samples: f64, method: Method) -> Cost {
    Cost::new()
        .ode(keys.solves, solves, dim(d), tf_grad(d), method)
        .records(keys.samples, solves, samples, dim(d))
}

/// `datasets` transformer datasets of `strings` strings of length `seq_len` held at once: the
/// strings, counts and targets, and T3 (d³ doubles) with the work of forming it.
pub fn tf_data(key: &'static str, datasets: f64, d: usize, seq_len: usize, strings: usize) -> Cost {
    let (d, seq_len, strings) = (n(d), n(seq_len), n(strings));
    Cost::new()
        .doubles(
            key,
            "the strings, their counts and targets",
            datasets * strings * (seq_len + 2.0 * d),
        )
        .doubles(
            "d",
            "the third-moment tensor T3 (d³ doubles)",
            datasets * d.powi(3),
        )
        .work(
            key,
            "forming T3 from the strings",
            datasets * strings,
            seq_len.min(d) * d * d,
        )
}

/// Floating-point operations of one gradient of the loss `kind`.
pub fn grad(kind: FlowKind, d: usize) -> f64 {
    match kind {
        FlowKind::Df => df_grad(d),
        FlowKind::Tf => tf_grad(d),
    }
}

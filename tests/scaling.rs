//! `scaling`'s memory checks, with the counting allocator installed as the attnflow binary does
//! (a separate test binary: the allocator replaces the global one for every test in it). The
//! peak heap of a solve grows like P for Tsit45 and the matrix-free TR-BDF2–Krylov and like P²
//! for Bdf with its dense Newton matrix; a solver that assembled a dense matrix where it claims
//! to be matrix-free would fail the linear band, which Bdf's measured exponent shows.

mod common;

use common::{check, passes};

#[global_allocator]
static HEAP: attnflow::memory::PeakHeap = attnflow::memory::PeakHeap;

#[test]
fn memory_grows_as_the_solvers_store_it() {
    let r = common::run_quick("scaling", &[]);
    for method in ["tsit45", "bdf", "tr-bdf2-krylov"] {
        let id = format!("memory-exponent.{method}");
        assert!(passes(&r, &id), "{:?}", check(&r, &id));
    }
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    // a dense P × P store (Bdf's) measured against the matrix-free methods' linear model fails
    let dense = check(&r, "memory-exponent.bdf").measured;
    let linear_upper = check(&r, "memory-exponent.tr-bdf2-krylov").upper.unwrap();
    assert!(dense > linear_upper, "{dense} vs {linear_upper}");
}

//! `full-matrix-rank` in its fast configuration, settings that make its checks fail, and the hot
//! path of the full-matrix head it integrates (gradient and Hessian-vector product), which must
//! not allocate. The allocation count uses a counting global allocator for this test binary;
//! the count is per thread, so the concurrently running scenario tests do not disturb it.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use attnflow::flow::{Descent, GradientFlow, VectorField};
use attnflow::models::diagonal::{FactorizedAttention, LossScale, MatrixAttention};
use nalgebra::DMatrix;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

struct CountingAllocator;

thread_local! {
    /// Allocations made by this thread (const-initialized: reading it allocates nothing).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

#[test]
fn full_matrix_rank() {
    let r = common::run_quick("full-matrix-rank", &[]);
    common::assert_all_pass("full-matrix-rank", &r);
}

/// At s ≥ 0.03 the two KQ modes of this teacher are still learned together (spec §7 expects
/// sequential emergence already for s ≤ 0.1): their rates differ too little for ln(1/s) ≈ 3.5
/// to separate them, while the VO modes, with rates about 2 apart, do separate.
#[test]
fn kq_modes_are_learned_together_at_moderate_scales() {
    let r = common::run_quick("full-matrix-rank", &["scales=[0.1, 0.03]"]);
    assert!(!common::check(&r, "sequential-emergence-sigma-delta-tau.kq-0-03").pass);
    assert!(common::check(&r, "sequential-emergence-sigma-delta-tau.vo-0-03").pass);
}

/// A horizon that ends inside the KQ stage: the loss has not fallen 3 orders and the products
/// are not yet the teacher's.
#[test]
fn a_short_horizon_does_not_reach_the_teacher() {
    let r = common::run_quick("full-matrix-rank", &["t_end=500.0"]);
    assert!(!common::check(&r, "over-log10").pass);
    assert!(!common::check(&r, "over-kq-vo").pass);
}

fn uniform(rng: &mut ChaCha20Rng, len: usize, scale: f64) -> Vec<f64> {
    (0..len)
        .map(|_| scale * rng.random_range(-1.0..1.0))
        .collect()
}

/// The scenario's full size (d = 16, d_h = 8, n = 8, N = 256): grad, hvp and the descent field
/// allocate nothing after the first call; prints the time per call.
#[test]
fn factorized_head_hot_path_does_not_allocate() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let (d, dh, n, count) = (16, 8, 8, 256);
    let a_star = DMatrix::from_fn(d, d, |_, _| 0.2 * rng.random_range(-1.0..1.0));
    let m_star = DMatrix::from_fn(d, d, |_, _| 0.3 * rng.random_range(-1.0..1.0));
    let head =
        MatrixAttention::student_teacher(n, count, &a_star, &m_star, LossScale::Mean, &mut rng)
            .unwrap();
    let flow = FactorizedAttention::new(head, dh);
    let theta = uniform(&mut rng, flow.dim(), 0.3);
    let dir = uniform(&mut rng, flow.dim(), 1.0);
    let mut out = vec![0.0; flow.dim()];
    let field = Descent(&flow);
    let mut exercise = |reps: usize| {
        let mut acc = 0.0;
        for _ in 0..reps {
            acc += flow.loss(&theta);
            flow.grad(&theta, &mut out);
            acc += out[0];
            flow.hvp(&theta, &dir, &mut out);
            field.rhs(0.0, &theta, &mut out);
            field.jvp(0.0, &theta, &dir, &mut out);
            acc += out[0];
        }
        acc
    };
    exercise(1);
    let before = ALLOCATIONS.with(Cell::get);
    let start = std::time::Instant::now();
    let acc = exercise(5);
    let seconds = start.elapsed().as_secs_f64();
    let allocations = ALLOCATIONS.with(Cell::get) - before;
    assert!(acc.is_finite());
    assert_eq!(allocations, 0, "the hot path allocated {allocations} times");
    eprintln!(
        "loss + 2 grad + 2 hvp at d = {d}, d_h = {dh}, n = {n}, N = {count}: {:.2} ms",
        seconds * 1e3 / 5.0
    );
}

//! The hot path does not allocate: ℓ_tf and ℓ_df loss, gradient and Hessian-vector product, and
//! the descent field the integrators call, counted by a global allocator. A separate test binary,
//! because the counting allocator replaces the global one for every test in it; the count is
//! per thread, so concurrently running tests do not disturb it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use attnflow::flow::{Descent, GradientFlow, VectorField};
use attnflow::models::histogram::{task_matrix, DfFlow, HistogramData, Task, TfFlow};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

struct CountingAllocator;

thread_local! {
    /// Allocations made by this thread (const-initialized, no destructor: reading it from
    /// inside the allocator does not allocate).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    // try_with: the thread-local may already be gone while a thread shuts down
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

/// Allocations made by `f` on this thread.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn random_vec(rng: &mut ChaCha20Rng, len: usize) -> Vec<f64> {
    (0..len).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// Calls every hot-path method of `flow` `reps` times on preallocated buffers.
fn exercise(flow: &dyn GradientFlow, z: &[f64], u: &[f64], out: &mut [f64], reps: usize) -> f64 {
    let field = Descent(flow);
    let mut acc = 0.0;
    for _ in 0..reps {
        acc += flow.loss(z);
        flow.grad(z, out);
        acc += out[0];
        flow.hvp(z, u, out);
        acc += out[0];
        field.rhs(0.0, z, out);
        field.jvp(0.0, z, u, out);
        acc += out[0];
    }
    acc
}

#[test]
fn loss_grad_hvp_and_descent_field_do_not_allocate() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    for d in [4, 10, 26] {
        let data =
            HistogramData::sample(task_matrix(&Task::Thr { d_thr: 2 }, d), 50, 2 * d, &mut rng);
        let flows: [(&str, Box<dyn GradientFlow>); 2] = [
            ("tf", Box::new(TfFlow::from_data(&data))),
            ("df", Box::new(DfFlow::new(data.m.clone()))),
        ];
        let n = d * (d + 1);
        let (z, u) = (random_vec(&mut rng, n), random_vec(&mut rng, n));
        let mut out = vec![0.0; n];
        for (name, flow) in &flows {
            let mut acc = 0.0;
            let count = allocations_in(|| acc = exercise(flow.as_ref(), &z, &u, &mut out, 20));
            assert!(acc.is_finite());
            assert_eq!(count, 0, "{name} d = {d}: {count} allocations in 20 rounds");
        }
    }
}

/// The counter works: a Vec allocates.
#[test]
fn the_counter_sees_allocations() {
    let count = allocations_in(|| {
        let v: Vec<f64> = std::hint::black_box(vec![1.0; 100]);
        assert_eq!(v.len(), 100);
    });
    assert!(count >= 1, "{count}");
}

//! Peak heap memory of a computation, counted per thread by a global allocator.
//!
//! The `attnflow` binary installs [`PeakHeap`] as its global allocator; a program of your own
//! can too:
//!
//! ```ignore
//! #[global_allocator]
//! static HEAP: attnflow::memory::PeakHeap = attnflow::memory::PeakHeap;
//! ```
//!
//! [`peak_heap`] then reports how far the heap of the calling thread grew while a closure ran
//! (without it installed, it reports `None`). Counting per thread keeps the measurement of one
//! solve free of what other threads allocate meanwhile (`run --all` runs scenarios in
//! parallel); memory freed on another thread than the one that allocated it is not attributed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting the bytes each thread has live and their peak.
pub struct PeakHeap;

thread_local! {
    // const-initialized and without destructors: reading them inside the allocator neither
    // allocates nor fails while the thread shuts down
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn grew(bytes: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes as isize;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn shrank(bytes: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get() - bytes as isize));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters only observe.
unsafe impl GlobalAlloc for PeakHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        shrank(layout.size());
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Runs `f` and returns its result with the peak number of heap bytes the calling thread held
/// beyond what it held before — `None` if [`PeakHeap`] is not the global allocator. Not
/// reentrant: a measurement inside `f` restarts the outer one's peak.
pub fn peak_heap<R>(f: impl FnOnce() -> R) -> (R, Option<usize>) {
    let before = LIVE.with(Cell::get);
    let probe = std::hint::black_box(vec![0u8; 64]);
    let installed = LIVE.with(Cell::get) != before;
    drop(probe);
    let base = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(base));
    let result = f();
    let peak = PEAK.with(Cell::get);
    (result, installed.then(|| (peak - base).max(0) as usize))
}

#[cfg(test)]
mod tests {
    /// The library's unit tests run on the default allocator: nothing is measured.
    #[test]
    fn reports_nothing_without_the_allocator() {
        let (len, peak) = super::peak_heap(|| vec![1.0f64; 1000].len());
        assert_eq!(len, 1000);
        assert_eq!(peak, None);
    }
}

//! The attnflow command line: list, describe, run and check scenarios, run a model family's
//! flow on your data, merge shards, write the report. All of it lives in [`attnflow::cli`], so a
//! crate with its own scenario kinds gets the same command line.

use std::process::ExitCode;

use attnflow::scenario::registry::Registry;

// counts heap bytes per thread, so `scaling` can report each solve's peak memory
#[global_allocator]
static HEAP: attnflow::memory::PeakHeap = attnflow::memory::PeakHeap;

fn main() -> ExitCode {
    let code = attnflow::cli::main_with(Registry::builtin(), std::env::args_os());
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

//! attnflow: exact gradient flows, theory checks and paper-style figures for the training
//! dynamics of attention models.
//!
//! - [`flow`]: the engine — vector fields, gradient flows, diffsol integration, discrete optimizers.
//! - [`analysis`]: model-agnostic mathematics (linearization, stationary points, fits, spectra).
//! - [`attention`]: softmax attention over token sequences (data, log-domain losses, the
//!   fixed-decoder model), shared by the models of two papers.
//! - [`instance`]: instance files (`.npz` as `np.savez` writes them, or JSON): a run's data and
//!   initial state, read with key-path errors and written by every run as `instance.npz`.
//! - [`models`]: one module per paper.
//! - [`scenario`]: scenario files, the registry of runners, checks, output writing and the HTML
//!   report (`index.html`).
//! - [`plot`]: paper-style SVG figures.
//! - [`stats`]: NaN-propagating statistics (max, min, median, …) for every measured value.
//! - [`papers`]: the five papers, cited by title, authors and venue.
//! - [`cli`]: the command line as a library ([`cli::main_with`]), for crates that register their
//!   own scenario kinds.
//! - [`memory`]: peak heap memory of a computation (the allocator the binary installs).
pub mod analysis;
pub mod attention;
pub mod cli;
pub mod dual;
pub mod flow;
pub mod instance;
pub mod memory;
pub mod models;
pub mod papers;
pub mod plot;
pub mod scenario;
pub mod stats;

#[cfg(test)]
mod autodiff;

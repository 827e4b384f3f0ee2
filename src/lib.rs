//! attnflow: exact gradient flows, theory checks and paper-style figures for the training
//! dynamics of attention models.
//!
//! - [`flow`]: the engine — vector fields, gradient flows, diffsol integration, discrete optimizers.
//! - [`analysis`]: model-agnostic mathematics (linearization, stationary points, fits, spectra).
//! - [`models`]: one module per paper.
//! - [`scenario`]: scenario files, the registry of runners, checks and output writing.
//! - [`plot`]: paper-style SVG figures.
//! - [`stats`]: NaN-propagating statistics (max, min, median, …) for every measured value.
pub mod analysis;
pub mod flow;
pub mod models;
pub mod plot;
pub mod scenario;
pub mod stats;

#[cfg(test)]
mod autodiff;

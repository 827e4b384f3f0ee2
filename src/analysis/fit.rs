//! Rates of sampled curves y(t): log-slope fits on windows, local slopes, level crossings.
//! Plateaus and stages of staircase curves are in [`super::stages`].
//!
//! Curves are two slices, times `t` (finite, strictly increasing) and values `y` (finite). The
//! papers' rate statements are about ln y, so fits and interpolation work on ln y: a
//! least-squares line in ln y is exact on an exponential, and log-linear interpolation is exact
//! between samples of one. Where a value needed on the log scale is not positive, the routine
//! says so instead of guessing.

use super::AnalysisError;
use crate::stats;

/// Least-squares line y ≈ slope·x + intercept, for data that are already logarithms (and may be
/// far below the f64 range once exponentiated).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineFit {
    pub slope: f64,
    pub intercept: f64,
    /// max |y − line| (NaN if any residual is NaN, so a missing value fails checks).
    pub max_residual: f64,
    pub points: usize,
}

/// The least-squares line through (x_i, y_i) (no logarithms taken: see [`log_slope_fit`] for
/// rates of positive curves).
pub fn line_fit(x: &[f64], y: &[f64]) -> LineFit {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let max_residual = stats::max_abs(x.iter().zip(y).map(|(a, b)| b - slope * a - intercept));
    LineFit {
        slope,
        intercept,
        max_residual,
        points: x.len(),
    }
}

/// Which samples a fit uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Window {
    /// Samples with `from ≤ t ≤ to` (use infinities for open ends).
    Time { from: f64, to: f64 },
    /// Samples with `low ≤ y ≤ high`, e.g. the tail window 1e-12 ≤ ℓ ≤ 1e-4 (`low > 0`). Every
    /// such sample counts, also if the curve enters the band more than once.
    Value { low: f64, high: f64 },
}

/// A least-squares line through (x_i, ln y_i), with x = t or x = ln t.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogSlopeFit {
    /// d ln y / dx of the line: the exponential rate (x = t) or the power (x = ln t).
    pub slope: f64,
    /// ln y of the line at x = 0.
    pub intercept: f64,
    /// Root-mean-square residual of ln y about the line.
    pub rms_residual: f64,
    /// Largest |residual| of ln y.
    pub max_residual: f64,
    /// Coefficient of determination R² (1 for points exactly on a line).
    pub r_squared: f64,
    /// Number of samples used.
    pub points: usize,
    /// Time of the first sample used.
    pub t_first: f64,
    /// Time of the last sample used.
    pub t_last: f64,
}

/// Which way a level crossing goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From above the level to at or below it.
    Down,
    /// From below the level to at or above it.
    Up,
    /// Either way.
    Either,
}

/// The abscissa of a rate: −d ln y/dt (exponential decay) or −d ln y/d ln t (power-law decay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeAxis {
    Linear,
    Log,
}

/// Least-squares slope of ln y against t on a window.
pub fn log_slope_fit(t: &[f64], y: &[f64], window: Window) -> Result<LogSlopeFit, AnalysisError> {
    fit_in_window(t, y, window, TimeAxis::Linear)
}

/// Least-squares slope of ln y against ln t on a window (the exponent of a power law); the
/// window must hold only t > 0.
pub fn log_log_slope_fit(
    t: &[f64],
    y: &[f64],
    window: Window,
) -> Result<LogSlopeFit, AnalysisError> {
    fit_in_window(t, y, window, TimeAxis::Log)
}

/// Secant slope (ln y(t2) − ln y(t1)) / (t2 − t1), with both values interpolated log-linearly
/// (so it is exact on an exponential).
pub fn local_log_slope(t: &[f64], y: &[f64], t1: f64, t2: f64) -> Result<f64, AnalysisError> {
    check_curve(t, y)?;
    if t1 == t2 {
        return Err(AnalysisError::Invalid(format!(
            "local slope needs two distinct times (got {t1:e}, {t2:e})"
        )));
    }
    Ok((ln_value_at(t, y, t2)? - ln_value_at(t, y, t1)?) / (t2 - t1))
}

/// The first time the sampled curve crosses `level` in `direction`, interpolated log-linearly
/// inside the crossing segment (linearly if a sample or the level is not positive). `None` if
/// it never does; a curve that starts beyond the level has not crossed it.
pub fn first_crossing(
    t: &[f64],
    y: &[f64],
    level: f64,
    direction: Direction,
) -> Result<Option<f64>, AnalysisError> {
    check_curve(t, y)?;
    let down = |a: f64, b: f64| a > level && b <= level;
    let up = |a: f64, b: f64| a < level && b >= level;
    let crosses = |a, b| match direction {
        Direction::Down => down(a, b),
        Direction::Up => up(a, b),
        Direction::Either => down(a, b) || up(a, b),
    };
    Ok((0..t.len().saturating_sub(1))
        .find(|&i| crosses(y[i], y[i + 1]))
        .map(|i| crossing_time(t[i], y[i], t[i + 1], y[i + 1], level)))
}

pub(super) fn abscissa(t: f64, axis: TimeAxis) -> f64 {
    match axis {
        TimeAxis::Linear => t,
        TimeAxis::Log => t.ln(),
    }
}

fn fit_in_window(
    t: &[f64],
    y: &[f64],
    window: Window,
    axis: TimeAxis,
) -> Result<LogSlopeFit, AnalysisError> {
    check_curve(t, y)?;
    let selected: Vec<usize> = match window {
        Window::Time { from, to } => (0..t.len())
            .filter(|&i| from <= t[i] && t[i] <= to)
            .collect(),
        Window::Value { low, high } => {
            if !(low > 0.0 && low <= high) {
                return Err(AnalysisError::Invalid(format!(
                    "value window needs 0 < low ≤ high (got [{low:e}, {high:e}])"
                )));
            }
            (0..t.len())
                .filter(|&i| low <= y[i] && y[i] <= high)
                .collect()
        }
    };
    if let Some(&i) = selected.iter().find(|&&i| y[i] <= 0.0) {
        return Err(AnalysisError::Invalid(format!(
            "log-slope fit on {window:?} meets y[{i}] = {:e} ≤ 0 at t = {:e}",
            y[i], t[i]
        )));
    }
    if axis == TimeAxis::Log {
        if let Some(&i) = selected.iter().find(|&&i| t[i] <= 0.0) {
            return Err(AnalysisError::Invalid(format!(
                "log-log fit on {window:?} meets t[{i}] = {:e} ≤ 0",
                t[i]
            )));
        }
    }
    if selected.len() < 2 {
        return Err(AnalysisError::Invalid(format!(
            "log-slope fit on {window:?} needs at least 2 samples, found {}",
            selected.len()
        )));
    }
    let xs: Vec<f64> = selected.iter().map(|&i| abscissa(t[i], axis)).collect();
    let ls: Vec<f64> = selected.iter().map(|&i| y[i].ln()).collect();
    let m = xs.len() as f64;
    let x_mean = xs.iter().sum::<f64>() / m;
    let l_mean = ls.iter().sum::<f64>() / m;
    // Centered sums: no cancellation from large t or large |ln y|.
    let (mut sxx, mut sxl, mut sll) = (0.0, 0.0, 0.0);
    for (&x, &l) in xs.iter().zip(&ls) {
        let (dx, dl) = (x - x_mean, l - l_mean);
        sxx += dx * dx;
        sxl += dx * dl;
        sll += dl * dl;
    }
    let slope = sxl / sxx;
    let residuals = xs
        .iter()
        .zip(&ls)
        .map(|(&x, &l)| (l - l_mean) - slope * (x - x_mean));
    let ss_res: f64 = residuals.clone().map(|r| r * r).sum();
    let max_residual = stats::max_abs(residuals);
    Ok(LogSlopeFit {
        slope,
        intercept: l_mean - slope * x_mean,
        rms_residual: (ss_res / m).sqrt(),
        max_residual,
        r_squared: if sll > 0.0 { 1.0 - ss_res / sll } else { 1.0 },
        points: selected.len(),
        t_first: t[selected[0]],
        t_last: t[*selected.last().expect("at least 2 samples")],
    })
}

/// ln y at time `at` by linear interpolation of ln y between the bracketing samples.
fn ln_value_at(t: &[f64], y: &[f64], at: f64) -> Result<f64, AnalysisError> {
    let n = t.len();
    if at.is_nan() || at < t[0] || at > t[n - 1] {
        return Err(AnalysisError::Invalid(format!(
            "time {at:e} lies outside the sampled range [{:e}, {:e}]",
            t[0],
            t[n - 1]
        )));
    }
    // The segment [t_i, t_i+1] holding `at` (the last sample maps onto the last segment).
    let i = t
        .partition_point(|&s| s <= at)
        .saturating_sub(1)
        .min(n.saturating_sub(2));
    let j = (i + 1).min(n - 1);
    for k in [i, j] {
        if y[k] <= 0.0 {
            return Err(AnalysisError::Invalid(format!(
                "log interpolation at t = {at:e} needs y > 0 but y[{k}] = {:e}",
                y[k]
            )));
        }
    }
    if i == j {
        return Ok(y[i].ln());
    }
    let w = (at - t[i]) / (t[j] - t[i]);
    Ok(y[i].ln() + w * (y[j].ln() - y[i].ln()))
}

/// The time in [t0, t1] where the segment reaches `level`: log-linear if y0, y1 and the level
/// are positive, linear otherwise.
pub(super) fn crossing_time(t0: f64, y0: f64, t1: f64, y1: f64, level: f64) -> f64 {
    if y1 == level {
        return t1;
    }
    let w = if y0 > 0.0 && y1 > 0.0 && level > 0.0 {
        (level / y0).ln() / (y1 / y0).ln()
    } else {
        (level - y0) / (y1 - y0)
    };
    t0 + w * (t1 - t0)
}

pub(super) fn check_curve(t: &[f64], y: &[f64]) -> Result<(), AnalysisError> {
    if t.len() != y.len() {
        return Err(AnalysisError::Invalid(format!(
            "curve has {} times but {} values",
            t.len(),
            y.len()
        )));
    }
    if t.is_empty() {
        return Err(AnalysisError::Invalid("empty curve".into()));
    }
    if let Some(i) = (0..t.len()).find(|&i| !t[i].is_finite() || !y[i].is_finite()) {
        return Err(AnalysisError::NonFinite {
            what: format!("sample {i} of the curve: (t, y) = ({:e}, {:e})", t[i], y[i]),
        });
    }
    if let Some(i) = (1..t.len()).find(|&i| t[i] <= t[i - 1]) {
        return Err(AnalysisError::Invalid(format!(
            "times must increase strictly, but t[{}] = {:e} ≥ t[{i}] = {:e}",
            i - 1,
            t[i - 1],
            t[i]
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::grid;

    /// y = 3 e^{−0.7 t} on t ∈ [0, 50], step 0.1.
    fn exponential() -> (Vec<f64>, Vec<f64>) {
        let t = grid(0.0, 50.0, 501);
        let y = t.iter().map(|s| 3.0 * (-0.7 * s).exp()).collect();
        (t, y)
    }

    #[test]
    fn exact_exponential_fits_on_value_and_time_windows() {
        let (t, y) = exponential();
        let tail = Window::Value {
            low: 1e-12,
            high: 1e-4,
        };
        let fit = log_slope_fit(&t, &y, tail).unwrap();
        assert!((fit.slope + 0.7).abs() < 1e-13, "slope {}", fit.slope);
        assert!((fit.intercept - 3.0_f64.ln()).abs() < 1e-11);
        assert!(fit.rms_residual < 1e-13 && fit.max_residual < 1e-13);
        assert!((fit.r_squared - 1.0).abs() < 1e-14);
        // The window is t ∈ [ln(3e4), ln(3e12)]/0.7 = [14.73, 41.04].
        let (t_in, t_out) = ((3e4_f64).ln() / 0.7, (3e12_f64).ln() / 0.7);
        assert!(fit.t_first >= t_in && fit.t_first < t_in + 0.1 + 1e-9);
        assert!(fit.t_last <= t_out && fit.t_last > t_out - 0.1 - 1e-9);
        let expected_points = t.iter().filter(|&&s| s >= t_in && s <= t_out).count();
        assert_eq!(fit.points, expected_points);

        let by_time = log_slope_fit(&t, &y, Window::Time { from: 5.0, to: 7.0 }).unwrap();
        assert!((by_time.slope + 0.7).abs() < 1e-12);
        assert_eq!(by_time.points, 21);
    }

    #[test]
    fn residual_measures_scatter_about_the_line() {
        // ln y = −2t + ε(−1)^i on n = 200 points: the fitted slope moves by
        // 6ε/(n² h) ≈ 3e-3 ε only (h = 10/199), so every residual is ε up to ±1.5%.
        let eps = 1e-3;
        let t = grid(0.0, 10.0, 200);
        let y: Vec<f64> = t
            .iter()
            .enumerate()
            .map(|(i, s)| (-2.0 * s + if i % 2 == 0 { eps } else { -eps }).exp())
            .collect();
        let fit = log_slope_fit(
            &t,
            &y,
            Window::Time {
                from: 0.0,
                to: 10.0,
            },
        )
        .unwrap();
        assert!((fit.slope + 2.0).abs() < 1e-5, "slope {}", fit.slope);
        assert!(
            (fit.rms_residual / eps - 1.0).abs() < 0.01,
            "rms {}",
            fit.rms_residual
        );
        assert!(fit.max_residual > eps && fit.max_residual < 1.02 * eps);
        assert!(fit.r_squared > 0.999_999 && fit.r_squared < 1.0);
    }

    #[test]
    fn power_law_exponent_from_log_log_fit() {
        let t = grid(1.0, 1e4, 1000);
        let y: Vec<f64> = t.iter().map(|s| 2.0 * s.powf(-1.5)).collect();
        let fit = log_log_slope_fit(
            &t,
            &y,
            Window::Time {
                from: 10.0,
                to: 1e4,
            },
        )
        .unwrap();
        assert!((fit.slope + 1.5).abs() < 1e-12 && (fit.intercept - 2.0_f64.ln()).abs() < 1e-11);
        let from_zero = grid(0.0, 1.0, 11);
        assert!(
            log_log_slope_fit(&from_zero, &from_zero, Window::Time { from: 0.0, to: 1.0 }).is_err()
        );
    }

    #[test]
    fn fits_reject_bad_input() {
        let (t, y) = exponential();
        let empty = Window::Value {
            low: 1e-40,
            high: 1e-30,
        };
        assert!(log_slope_fit(&t, &y, empty).is_err());
        assert!(log_slope_fit(&t[..3], &y, Window::Time { from: 0.0, to: 1.0 }).is_err());
        let mut unsorted = t.clone();
        unsorted.swap(3, 4);
        assert!(log_slope_fit(&unsorted, &y, Window::Time { from: 0.0, to: 1.0 }).is_err());
        let mut with_zero = y.clone();
        with_zero[5] = 0.0;
        assert!(log_slope_fit(&t, &with_zero, Window::Time { from: 0.0, to: 1.0 }).is_err());
    }

    #[test]
    fn local_slope_and_first_crossing_are_exact_on_an_exponential() {
        let (t, y) = exponential();
        let slope = local_log_slope(&t, &y, 3.33, 7.77).unwrap();
        assert!((slope + 0.7).abs() < 1e-13, "{slope}");
        assert!((local_log_slope(&t, &y, 49.95, 50.0).unwrap() + 0.7).abs() < 1e-10);
        assert!(local_log_slope(&t, &y, 1.0, 60.0).is_err());

        let level: f64 = 1e-3;
        let exact = (3.0 / level).ln() / 0.7;
        let down = first_crossing(&t, &y, level, Direction::Down)
            .unwrap()
            .unwrap();
        assert!((down - exact).abs() < 1e-12, "{down} vs {exact}");
        let either = first_crossing(&t, &y, level, Direction::Either).unwrap();
        assert_eq!(either, Some(down));
        assert_eq!(first_crossing(&t, &y, level, Direction::Up).unwrap(), None);
        // The curve starts below 5: it never crosses 5 downwards.
        assert_eq!(first_crossing(&t, &y, 5.0, Direction::Down).unwrap(), None);
    }
}

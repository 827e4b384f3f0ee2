//! Axis ranges and ticks. Everything is computed in *axis space*: the value itself on a linear
//! axis, its log10 on a log axis, so that a log axis is a linear axis of exponents (1e-300..1 is
//! just -300..0) and all drawing code is scale-agnostic.

use super::text::Label;
use super::PlotError;

/// A labelled tick at an axis-space position.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tick {
    pub at: f64,
    pub label: String,
}

/// A fitted axis: its range in axis space, labelled ticks and unlabelled minor ticks.
#[derive(Debug, Clone)]
pub(super) struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<Tick>,
    pub minor: Vec<f64>,
}

/// The axis-space coordinate of a data value; `None` for what the axis cannot show
/// (non-finite values, and non-positive values on a log axis).
pub(super) fn to_axis(value: f64, log: bool) -> Option<f64> {
    if !value.is_finite() || (log && value <= 0.0) {
        return None;
    }
    Some(if log { value.log10() } else { value })
}

/// An axis-space interval `(lo, hi)`.
pub(super) type Interval = (f64, f64);

/// Margin added on each side of an auto-fitted range, as a fraction of the span.
const AUTO_MARGIN: f64 = 0.04;

/// The axis-space range: the explicit one (validated), else the data's extent with a small
/// margin. A degenerate extent is padded (half a decade on log axes); no data gives a unit range.
pub(super) fn fit_range(
    values: impl IntoIterator<Item = f64>,
    explicit: Option<(f64, f64)>,
    log: bool,
    axis_name: &str,
) -> Result<Interval, PlotError> {
    if let Some((lo, hi)) = explicit {
        return match (to_axis(lo, log), to_axis(hi, log)) {
            (Some(a), Some(b)) if a < b && (b - a).is_finite() => Ok((a, b)),
            _ => Err(PlotError::InvalidRange {
                axis: axis_name.to_string(),
                lo,
                hi,
                log,
            }),
        };
    }
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        return Ok((0.0, 1.0));
    }
    // Keep the span finite even for data spanning ±f64::MAX.
    let (lo, hi) = (lo.max(-f64::MAX / 4.0), hi.min(f64::MAX / 4.0));
    let span = hi - lo;
    let magnitude = lo.abs().max(hi.abs());
    // Spans too small to tick (relative to the values, or near the subnormals) count as a point.
    if span <= 1e-12 * magnitude || span < TINY {
        let pad = if log {
            0.5
        } else if magnitude < TINY {
            1.0
        } else {
            0.1 * magnitude
        };
        return Ok((lo - pad, hi + pad));
    }
    Ok((lo - AUTO_MARGIN * span, hi + AUTO_MARGIN * span))
}

/// Below this, values are treated as zero when fitting a range (steps of 10⁻³⁰⁰ still have
/// normal, printable multiples).
const TINY: f64 = 1e-280;

impl Axis {
    /// Ticks for `lo < hi` (axis space), at most about `max_ticks` labelled ones.
    pub fn new(lo: f64, hi: f64, log: bool, max_ticks: usize) -> Axis {
        let max_ticks = max_ticks.max(2);
        let (ticks, minor) = if log {
            log_ticks(lo, hi, max_ticks)
        } else {
            (linear_ticks(lo, hi, max_ticks, |v| v), Vec::new())
        };
        Axis {
            lo,
            hi,
            ticks,
            minor,
        }
    }

    /// A categorical axis over `0..n`: category `i` is centred at `i + 0.5`; labels are thinned
    /// to every k-th when there are more than `max_labels`.
    pub fn categorical(labels: &[String], max_labels: usize) -> Axis {
        let stride = labels.len().div_ceil(max_labels.max(1)).max(1);
        let ticks = labels
            .iter()
            .enumerate()
            .step_by(stride)
            .map(|(i, label)| Tick {
                at: i as f64 + 0.5,
                label: label.clone(),
            })
            .collect();
        Axis {
            lo: 0.0,
            hi: labels.len().max(1) as f64,
            ticks,
            minor: Vec::new(),
        }
    }

    /// Width of the widest tick label at `size`.
    pub fn widest_label(&self, size: f64) -> f64 {
        self.ticks
            .iter()
            .map(|t| Label::parse(&t.label).width(size))
            .fold(0.0, f64::max)
    }

    /// Position of axis-space `v` as a fraction of the axis, 0 at `lo` and 1 at `hi`.
    pub fn fraction(&self, v: f64) -> f64 {
        (v - self.lo) / (self.hi - self.lo)
    }
}

/// Smallest "nice" step (1, 2, 2.5, 5 × 10^k) that is at least `raw` (> 0).
fn nice_step(raw: f64) -> f64 {
    let exponent = raw.log10().floor();
    let scale = 10f64.powf(exponent);
    let mantissa = raw / scale;
    let nice = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|&m| m >= mantissa * (1.0 - 1e-12))
        .unwrap_or(10.0);
    nice * scale
}

/// Ticks at multiples of the smallest nice step that puts at most `max_ticks` of them in
/// `[lo, hi]` (value space), placed at `to_axis_space(value)`.
fn linear_ticks(
    lo: f64,
    hi: f64,
    max_ticks: usize,
    to_axis_space: impl Fn(f64) -> f64,
) -> Vec<Tick> {
    // Ends that are multiples of the step up to rounding (-0.3 / 0.1 = -2.9999999999999996) count.
    let first_of = |step: f64| (lo / step - 1e-9).ceil();
    let count = |step: f64| (hi / step + 1e-9).floor() - first_of(step) + 1.0;
    let mut step = nice_step((hi - lo) / (max_ticks + 1) as f64);
    while count(step) > max_ticks as f64 {
        step = nice_step(step * 1.001);
    }
    let first = first_of(step);
    let values: Vec<f64> = (0..count(step).max(0.0) as i64)
        .map(|i| {
            let v = (first + i as f64) * step;
            // Ticks that should be 0 come out as ±1e-17 from rounding.
            if v.abs() < step * 1e-9 {
                0.0
            } else {
                v
            }
        })
        .collect();
    let magnitude = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scientific = !(1e-3..1e5).contains(&magnitude) && magnitude > 0.0;
    let labels = format_values(&values, step, scientific);
    values
        .into_iter()
        .zip(labels)
        .map(|(v, label)| Tick {
            at: to_axis_space(v),
            label,
        })
        .collect()
}

/// Decade ticks labelled 10ᵏ (every k-th decade on wide ranges, with the others as minor ticks,
/// or 2..9 × 10ᵏ minor ticks on narrow ones). Under two decades, 1-2-5 ticks, then plain ones.
fn log_ticks(lo: f64, hi: f64, max_ticks: usize) -> (Vec<Tick>, Vec<f64>) {
    let first = lo.ceil() as i64;
    let last = hi.floor() as i64;
    let decades = last - first + 1;
    if decades >= 2 {
        let stride = [1, 2, 3, 4, 5, 10, 20, 25, 50, 100, 200, 250, 500]
            .into_iter()
            .find(|&s| (decades + s - 1) / s <= max_ticks as i64)
            .unwrap_or(1000);
        let major = |k: i64| k.rem_euclid(stride) == 0;
        let ticks = (first..=last)
            .filter(|&k| major(k))
            .map(|k| Tick {
                at: k as f64,
                label: power_of_ten(k),
            })
            .collect();
        let minor = if stride == 1 {
            if decades <= 12 {
                (first - 1..=last)
                    .flat_map(|k| (2..10).map(move |m| k as f64 + (m as f64).log10()))
                    .filter(|&t| lo <= t && t <= hi)
                    .collect()
            } else {
                Vec::new()
            }
        } else {
            // At most five minor intervals per labelled one, on round decades.
            let minor_stride = [1, 2, 5, 10, 20, 25, 50, 100]
                .into_iter()
                .find(|&d| stride % d == 0 && stride / d <= 5)
                .unwrap_or(stride);
            (first..=last)
                .filter(|&k| k % minor_stride == 0 && !major(k))
                .map(|k| k as f64)
                .collect()
        };
        return (ticks, minor);
    }
    let one_two_five: Vec<f64> = (first - 1..=last)
        .flat_map(|k| [1.0, 2.0, 5.0].map(|m| (m, k)))
        .map(|(m, k)| m * 10f64.powi(k as i32))
        .filter(|&v| (lo..=hi).contains(&v.log10()))
        .collect();
    if (2..=max_ticks).contains(&one_two_five.len()) {
        // Plain numbers only where they stay short.
        let scientific = one_two_five.iter().any(|&v| !(1e-2..1e4).contains(&v));
        let labels = format_values(&one_two_five, one_two_five[0], scientific);
        let ticks = one_two_five
            .iter()
            .zip(labels)
            .map(|(v, label)| Tick {
                at: v.log10(),
                label,
            })
            .collect();
        return (ticks, Vec::new());
    }
    let (lo_value, hi_value) = (10f64.powf(lo), 10f64.powf(hi));
    if lo_value > 0.0 && hi_value.is_finite() {
        return (
            linear_ticks(lo_value, hi_value, max_ticks, f64::log10),
            Vec::new(),
        );
    }
    // At the ends of the f64 range: whatever decade lies inside.
    let ticks = (first..=last)
        .map(|k| Tick {
            at: k as f64,
            label: power_of_ten(k),
        })
        .collect();
    (ticks, Vec::new())
}

/// 10ᵏ as markup (a real superscript, with a typographic minus).
pub fn power_of_ten(k: i64) -> String {
    format!("10^{{{}}}", k.to_string().replace('-', "−"))
}

/// Labels for tick values that are multiples of `step`: m×10ᵏ, or fixed decimals (as many as
/// the step needs, the same for all).
fn format_values(values: &[f64], step: f64, scientific: bool) -> Vec<String> {
    values
        .iter()
        .map(|&v| {
            let label = if scientific {
                scientific_label(v)
            } else {
                format!("{:.*}", decimals_for(step), v)
            };
            // A typographic minus, as in a typeset paper (exponents have theirs already).
            label.replace('-', "−")
        })
        .collect()
}

/// Decimals that show every multiple of `step` exactly (2.5×10ᵏ needs one more than 10ᵏ).
fn decimals_for(step: f64) -> usize {
    let mut decimals = (-step.log10().floor()).max(0.0) as usize;
    let scaled = step * 10f64.powi(decimals as i32);
    if (scaled - scaled.round()).abs() > 1e-6 * scaled {
        decimals += 1;
    }
    decimals
}

/// m×10ᵏ with at most three significant digits, and 10ᵏ alone when m = 1.
fn scientific_label(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let exponent = v.abs().log10().floor() as i64;
    let mantissa = v / 10f64.powi(exponent as i32);
    let mantissa = format!("{mantissa:.2}");
    let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
    match mantissa {
        "1" => power_of_ten(exponent),
        "-1" => format!("−{}", power_of_ten(exponent)),
        m => format!("{m}×{}", power_of_ten(exponent)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(axis: &Axis) -> Vec<&str> {
        axis.ticks.iter().map(|t| t.label.as_str()).collect()
    }

    #[test]
    fn linear_ticks_are_nice_and_consistently_formatted() {
        let axis = Axis::new(-0.03, 1.03, false, 6);
        assert_eq!(labels(&axis), ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        let axis = Axis::new(-0.03, 1.03, false, 5);
        assert_eq!(labels(&axis), ["0.00", "0.25", "0.50", "0.75", "1.00"]);
        let axis = Axis::new(0.0, 10.0, false, 6);
        assert_eq!(labels(&axis), ["0", "2", "4", "6", "8", "10"]);
        let axis = Axis::new(-1.0, 3.0e6, false, 4);
        assert_eq!(labels(&axis), ["0", "10^{6}", "2×10^{6}", "3×10^{6}"]);
        // The -0 that rounding would give is printed as 0; minus signs are typographic.
        let axis = Axis::new(-0.3, 0.3, false, 7);
        assert_eq!(
            labels(&axis),
            ["−0.3", "−0.2", "−0.1", "0.0", "0.1", "0.2", "0.3"]
        );
        for max_ticks in 2..12 {
            let axis = Axis::new(0.37, 123.0, false, max_ticks);
            assert!(
                (1..=max_ticks).contains(&axis.ticks.len()),
                "{max_ticks}: {:?}",
                labels(&axis)
            );
        }
    }

    #[test]
    fn log_axes_get_decade_ticks_thinned_on_huge_ranges() {
        let axis = Axis::new(-8.2, 0.1, true, 6);
        assert_eq!(
            labels(&axis),
            ["10^{−8}", "10^{−6}", "10^{−4}", "10^{−2}", "10^{0}"]
        );
        assert!(axis.minor.contains(&-7.0));
        let axis = Axis::new(-300.0, 0.0, true, 7);
        assert!(
            axis.ticks.len() <= 7 && axis.ticks.len() >= 3,
            "{:?}",
            labels(&axis)
        );
        assert_eq!(axis.ticks.first().map(|t| t.at), Some(-300.0));
        // Minor ticks stay countable: at most five intervals per labelled one.
        assert!(
            axis.minor.len() <= 5 * axis.ticks.len(),
            "{} minor ticks",
            axis.minor.len()
        );
        let axis = Axis::new(0.0, 2.0, true, 6);
        assert_eq!(labels(&axis), ["10^{0}", "10^{1}", "10^{2}"]);
        assert_eq!(axis.minor.len(), 16);
    }

    #[test]
    fn narrow_log_ranges_fall_back_to_125_then_linear_ticks() {
        let axis = Axis::new(-3.5, -2.5, true, 6);
        assert_eq!(labels(&axis), ["5×10^{−4}", "10^{−3}", "2×10^{−3}"]);
        let axis = Axis::new(0.1, 0.2, true, 5);
        assert!(axis.ticks.len() >= 2, "{:?}", labels(&axis));
        assert!(axis.ticks.iter().all(|t| (0.1..=0.2).contains(&t.at)));
    }

    #[test]
    fn ranges_fit_data_pad_degenerate_cases_and_reject_impossible_ones() {
        let (lo, hi) = fit_range([1.0, 3.0], None, false, "x").unwrap();
        assert!(lo < 1.0 && lo > 0.9 && hi > 3.0 && hi < 3.1);
        assert_eq!(fit_range([2.0, 2.0], None, false, "x").unwrap(), (1.8, 2.2));
        assert_eq!(fit_range([0.0], None, false, "x").unwrap(), (-1.0, 1.0));
        assert_eq!(fit_range([-3.0], None, true, "y").unwrap(), (-3.5, -2.5));
        assert_eq!(fit_range([], None, true, "y").unwrap(), (0.0, 1.0));
        let (lo, hi) = fit_range([-f64::MAX, f64::MAX], None, false, "x").unwrap();
        assert!(lo.is_finite() && hi.is_finite() && (hi - lo).is_finite());
        assert_eq!(
            fit_range([], Some((1e-3, 1.0)), true, "y").unwrap(),
            (-3.0, 0.0)
        );
        assert!(fit_range([], Some((0.0, 1.0)), true, "y").is_err());
        assert!(fit_range([], Some((2.0, 1.0)), false, "x").is_err());
        assert!(fit_range([], Some((f64::NAN, 1.0)), false, "x").is_err());
        assert!(fit_range([], Some((-f64::MAX, f64::MAX)), false, "x").is_err());
        // Subnormal spans are a point, not a range to tick.
        assert_eq!(
            fit_range([0.0, 5e-324], None, false, "x").unwrap(),
            (-1.0, 1.0 + 5e-324)
        );
    }

    #[test]
    fn to_axis_drops_what_a_log_axis_cannot_show() {
        assert_eq!(to_axis(100.0, true), Some(2.0));
        assert_eq!(to_axis(0.0, true), None);
        assert_eq!(to_axis(-1.0, false), Some(-1.0));
        assert_eq!(to_axis(f64::NAN, false), None);
        assert_eq!(to_axis(1e-300, true), Some(-300.0));
    }
}

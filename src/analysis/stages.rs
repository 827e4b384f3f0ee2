//! Segmenting sampled curves y(t): plateaus (maximal intervals inside a band) and the stages
//! of staircase losses (sharp drops of ln y and the plateaus between them), as in the
//! saddle-to-saddle dynamics of small initializations (spec 000 D3, spec 004).
//!
//! Curves follow the conventions of [`super::fit`]: strictly increasing finite times, finite
//! values, rates measured on ln y.

use super::fit::{abscissa, check_curve, crossing_time, TimeAxis};
use super::AnalysisError;

/// A maximal time interval of a curve, with the samples inside it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub start: f64,
    pub end: f64,
    /// Index of the first sample inside the interval.
    pub first: usize,
    /// Index of the last sample inside the interval.
    pub last: usize,
}

impl Interval {
    pub fn length(&self) -> f64 {
        self.end - self.start
    }
}

/// Settings of [`detect_stages`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageOptions {
    pub axis: TimeAxis,
    /// A drop is a maximal run of segments where the smoothed rate −d ln y/dx exceeds this.
    pub rate_threshold: f64,
    /// Runs whose total decrease of ln y is below this are noise and stay in the plateau.
    pub min_log_drop: f64,
    /// The rate of segment [j, j+1] is the secant from sample j − k to j + 1 + k (clipped at
    /// the ends); k = 0 is the raw segment slope, larger k smooths noise.
    pub half_window: usize,
}

/// A sharp drop of a staircase curve: the transition from one plateau to the next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transition {
    /// From the start of the first to the end of the last consecutive segment whose rate
    /// exceeds the threshold.
    pub span: Interval,
    /// Middle of the steepest segment (geometric middle on the log axis).
    pub steepest: f64,
    /// The largest smoothed rate in the drop.
    pub peak_rate: f64,
    /// ln y(start) − ln y(end).
    pub log_drop: f64,
}

/// A plateau between drops, with its typical value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plateau {
    pub span: Interval,
    /// Median of y over the plateau's samples.
    pub level: f64,
}

/// The stages of a staircase curve: drops and plateaus, each list in time order. Consecutive
/// plateaus are separated by exactly one drop and share its end samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Stages {
    pub drops: Vec<Transition>,
    pub plateaus: Vec<Plateau>,
}

/// Maximal time intervals on which the curve stays in [low, high]. Ends between samples are
/// interpolated at the bound crossed there (as in [`super::fit::first_crossing`]); an end at
/// the first or last sample stays there.
pub fn plateaus(t: &[f64], y: &[f64], low: f64, high: f64) -> Result<Vec<Interval>, AnalysisError> {
    check_curve(t, y)?;
    if low.is_nan() || high.is_nan() || low > high {
        return Err(AnalysisError::Invalid(format!(
            "plateau band needs low ≤ high (got [{low:e}, {high:e}])"
        )));
    }
    let inside = |v: f64| (low..=high).contains(&v);
    let bound_crossed = |outside: f64| if outside < low { low } else { high };
    let n = t.len();
    let mut found = Vec::new();
    let mut i = 0;
    while i < n {
        if !inside(y[i]) {
            i += 1;
            continue;
        }
        let first = i;
        while i + 1 < n && inside(y[i + 1]) {
            i += 1;
        }
        let last = i;
        let start = if first == 0 {
            t[0]
        } else {
            let k = first - 1;
            crossing_time(t[k], y[k], t[first], y[first], bound_crossed(y[k]))
        };
        let end = if last == n - 1 {
            t[last]
        } else {
            let k = last + 1;
            crossing_time(t[last], y[last], t[k], y[k], bound_crossed(y[k]))
        };
        found.push(Interval {
            start,
            end,
            first,
            last,
        });
        i += 1;
    }
    Ok(found)
}

/// Splits a staircase curve into sharp drops (where the smoothed rate −d ln y/dx exceeds the
/// threshold and ln y falls by at least `min_log_drop`) and the plateaus between them. Needs
/// y > 0; on the log axis, segments that start at t ≤ 0 never belong to a drop.
pub fn detect_stages(
    t: &[f64],
    y: &[f64],
    options: &StageOptions,
) -> Result<Stages, AnalysisError> {
    check_curve(t, y)?;
    if let Some(i) = y.iter().position(|&v| v <= 0.0) {
        return Err(AnalysisError::Invalid(format!(
            "stage detection works on ln y but y[{i}] = {:e} at t = {:e}",
            y[i], t[i]
        )));
    }
    let n = t.len();
    let ln_y: Vec<f64> = y.iter().map(|v| v.ln()).collect();
    let first_valid = match options.axis {
        TimeAxis::Linear => 0,
        TimeAxis::Log => t.iter().position(|&s| s > 0.0).unwrap_or(n),
    };
    let x: Vec<f64> = t.iter().map(|&s| abscissa(s, options.axis)).collect();
    let k = options.half_window;
    let rate = |j: usize| {
        let lo = j.saturating_sub(k).max(first_valid);
        let hi = (j + 1 + k).min(n - 1);
        -(ln_y[hi] - ln_y[lo]) / (x[hi] - x[lo])
    };
    let rates: Vec<f64> = (0..n.saturating_sub(1))
        .map(|j| if j >= first_valid { rate(j) } else { f64::NAN })
        .collect();

    // NaN rates (segments before t > 0 on the log axis) are never in a drop.
    let in_drop = |j: usize| rates[j] > options.rate_threshold;
    let mut drops = Vec::new();
    let mut j = 0;
    while j < rates.len() {
        if !in_drop(j) {
            j += 1;
            continue;
        }
        let first_segment = j;
        while j + 1 < rates.len() && in_drop(j + 1) {
            j += 1;
        }
        let (a, b) = (first_segment, j + 1);
        let log_drop = ln_y[a] - ln_y[b];
        if log_drop >= options.min_log_drop {
            let steep = (a..b)
                .max_by(|&p, &q| rates[p].total_cmp(&rates[q]))
                .expect("a run has a segment");
            let steepest = match options.axis {
                TimeAxis::Linear => 0.5 * (t[steep] + t[steep + 1]),
                TimeAxis::Log => (t[steep] * t[steep + 1]).sqrt(),
            };
            drops.push(Transition {
                span: Interval {
                    start: t[a],
                    end: t[b],
                    first: a,
                    last: b,
                },
                steepest,
                peak_rate: rates[steep],
                log_drop,
            });
        }
        j += 1;
    }

    // Plateaus fill the gaps between drops, sharing their end samples.
    let mut plateaus = Vec::new();
    let mut from = 0;
    for edge in drops
        .iter()
        .map(|d| (d.span.first, d.span.last))
        .chain(std::iter::once((n - 1, n - 1)))
    {
        if edge.0 > from {
            plateaus.push(plateau(t, y, from, edge.0));
        }
        from = edge.1;
    }
    Ok(Stages { drops, plateaus })
}

fn plateau(t: &[f64], y: &[f64], first: usize, last: usize) -> Plateau {
    let mut values = y[first..=last].to_vec();
    values.sort_by(f64::total_cmp);
    let m = values.len();
    let level = if m % 2 == 1 {
        values[m / 2]
    } else {
        0.5 * (values[m / 2 - 1] + values[m / 2])
    };
    Plateau {
        span: Interval {
            start: t[first],
            end: t[last],
            first,
            last,
        },
        level,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::grid;

    #[test]
    fn plateaus_of_exp_sin_are_the_arcs_where_sin_exceeds_a_half() {
        // ln y = sin t ∈ [0.5, 1.5] ⇔ t ∈ [π/6, 5π/6] + 2πk; the run ends at t = 20.
        let t = grid(0.0, 20.0, 2001);
        let y: Vec<f64> = t.iter().map(|s| s.sin().exp()).collect();
        let found = plateaus(&t, &y, 0.5_f64.exp(), 1.5_f64.exp()).unwrap();
        assert_eq!(found.len(), 4);
        let pi = std::f64::consts::PI;
        for (k, interval) in found.iter().take(3).enumerate() {
            let start = pi / 6.0 + 2.0 * pi * k as f64;
            // Linear interpolation of sin between samples 0.01 apart: error ≤ h²/8 ≈ 1.3e-5.
            assert!((interval.start - start).abs() < 3e-5, "{interval:?}");
            assert!(
                (interval.length() - 2.0 * pi / 3.0).abs() < 6e-5,
                "{interval:?}"
            );
            assert!(t[interval.first] >= interval.start && t[interval.last] <= interval.end);
        }
        assert_eq!(found[3].end, 20.0);
        assert_eq!(found[3].last, 2000);
        assert!(plateaus(&t, &y, 2.0, 1.0).is_err());
    }

    /// ln y = −Σ_k D_k σ((x − X_k)/w) + wiggle: logistic steps of depth D_k centred at X_k.
    fn staircase(x: &[f64], centres: &[f64], depths: &[f64], width: f64) -> Vec<f64> {
        x.iter()
            .map(|&s| {
                let steps: f64 = centres
                    .iter()
                    .zip(depths)
                    .map(|(c, d)| d / (1.0 + (-(s - c) / width).exp()))
                    .sum();
                (-steps + 1e-4 * (7.0 * s).sin()).exp()
            })
            .collect()
    }

    #[test]
    fn stages_of_a_logistic_staircase() {
        let t = grid(0.0, 50.0, 1001);
        // Three real drops and a shallow dip of depth 0.05 that must be ignored.
        let centres = [10.0, 25.0, 33.0, 40.0];
        let depths = [2.0, 1.5, 0.05, 3.0];
        let y = staircase(&t, &centres, &depths, 0.3);
        let options = StageOptions {
            axis: TimeAxis::Linear,
            rate_threshold: 0.05,
            min_log_drop: 0.5,
            half_window: 2,
        };
        let stages = detect_stages(&t, &y, &options).unwrap();
        assert_eq!(stages.drops.len(), 3, "{stages:?}");
        assert_eq!(stages.plateaus.len(), 4);
        let kept = [(10.0, 2.0), (25.0, 1.5), (40.0, 3.0)];
        for (drop, &(centre, depth)) in stages.drops.iter().zip(&kept) {
            assert!((drop.steepest - centre).abs() <= 0.05, "{drop:?}");
            // Peak rate D/(4w); the threshold cuts the tails where D σ'/w < 0.05.
            assert!(
                (drop.peak_rate / (depth / 1.2) - 1.0).abs() < 0.02,
                "{drop:?}"
            );
            assert!((drop.log_drop / depth - 1.0).abs() < 0.03, "{drop:?}");
        }
        // Plateau levels: e^{−cumulative depth} (the dip sits inside the third plateau).
        let levels = [1.0, (-2.0_f64).exp(), (-3.5_f64).exp(), (-6.55_f64).exp()];
        for (plateau, level) in stages.plateaus.iter().zip(levels) {
            assert!(
                (plateau.level / level - 1.0).abs() < 0.03,
                "{plateau:?} vs {level}"
            );
        }
        for (k, drop) in stages.drops.iter().enumerate() {
            assert_eq!(stages.plateaus[k].span.last, drop.span.first);
            assert_eq!(stages.plateaus[k + 1].span.first, drop.span.last);
        }
    }

    #[test]
    fn stages_on_the_log_time_axis() {
        // Drops centred at t = 1, 100 in ln t (width 0.2 in ln t), sampled log-uniformly from
        // 1e-3 with a leading t = 0 sample that the log axis must skip.
        let mut t = vec![0.0];
        t.extend(grid(-3.0, 4.0, 701).iter().map(|e| 10f64.powf(*e)));
        let ln_t: Vec<f64> = t
            .iter()
            .map(|s| if *s > 0.0 { s.ln() } else { -1e3 })
            .collect();
        let y = staircase(&ln_t, &[0.0, 100f64.ln()], &[1.0, 2.0], 0.2);
        let options = StageOptions {
            axis: TimeAxis::Log,
            rate_threshold: 0.1,
            min_log_drop: 0.5,
            half_window: 1,
        };
        let stages = detect_stages(&t, &y, &options).unwrap();
        assert_eq!(stages.drops.len(), 2, "{stages:?}");
        assert!((stages.drops[0].steepest.ln()).abs() < 0.03);
        assert!((stages.drops[1].steepest / 100.0).ln().abs() < 0.03);
        assert_eq!(stages.plateaus[0].span.first, 0);
    }
}

//! Shared by the paper-style perturbation experiments (Figs. 10 and 11; spec 004 §5.2, §8.4):
//! stop the log-layout flow, add Gaussian noise to the non-negligible raw weights, rebuild the
//! log coordinates of the perturbed pairs only, and continue both the perturbed and the
//! unperturbed flow over the same window; and the figure panel that compares them.

use rand::Rng;
use rand_distr::{Distribution, Normal};

use crate::flow::{integrate, OdeConfig, Trajectory};
use crate::models::diagonal::{BetaLoss, LogCoordinates, LogFlow, Schedule};
use crate::plot::{LegendPosition, LinePanel, LineStyle, Series};
use crate::scenario::RunError;

use super::figures_common::support_order;

/// A log state (side data and ζ).
#[derive(Debug, Clone)]
pub struct LogState {
    pub coords: LogCoordinates,
    pub zeta: Vec<f64>,
}

/// β of a log state.
pub fn beta_of(coords: &LogCoordinates, zeta: &[f64]) -> Vec<f64> {
    let mut beta = vec![0.0; coords.p()];
    coords.beta(zeta, &mut beta);
    beta
}

/// A perturbed state, how many raw scalars were perturbed and which pairs they belong to.
pub struct Perturbed {
    pub state: LogState,
    pub scalars: usize,
    pub pairs: Vec<usize>,
}

/// Adds N(0, σ²) to every raw weight u_i, v_i with |·| > `threshold`, and to both weights of
/// the pairs in `also` (a pair that has just reached the threshold, Fig. 11). Only the touched
/// pairs pass through raw form ([`LogCoordinates::set_pair`]); the others keep their exact log
/// state. The conserved c_i of a touched pair changes (spec §6 #16).
pub fn perturb(
    state: &LogState,
    sigma: f64,
    threshold: f64,
    also: &[usize],
    rng: &mut impl Rng,
) -> Result<Perturbed, RunError> {
    let noise = Normal::new(0.0, sigma)
        .map_err(|e| RunError::Other(format!("noise N(0, {sigma}²): {e}")))?;
    let p = state.coords.p();
    let raw = state.coords.raw_state(&state.zeta);
    let mut out = state.clone();
    let mut scalars = 0;
    let mut pairs = Vec::new();
    for i in 0..p {
        let forced = also.contains(&i);
        let (mut u, mut v) = (raw[i], raw[p + i]);
        let mut touched = false;
        for x in [&mut u, &mut v] {
            if forced || x.abs() > threshold {
                *x += noise.sample(rng);
                scalars += 1;
                touched = true;
            }
        }
        if touched {
            pairs.push(i);
            out.coords
                .set_pair(&mut out.zeta, i, u, v)
                .map_err(|e| RunError::Other(format!("perturbed pair {i}: {e}")))?;
        }
    }
    Ok(Perturbed {
        state: out,
        scalars,
        pairs,
    })
}

/// The log flow of `loss` from `state` at times[0], sampled at `times`; returns β at each.
pub fn continue_flow(
    loss: &dyn BetaLoss,
    state: &LogState,
    times: &[f64],
    cfg: &OdeConfig,
) -> Result<(Trajectory, Vec<Vec<f64>>), RunError> {
    let flow = LogFlow::new(loss, state.coords.clone());
    let traj = integrate(&flow, &state.zeta, times, cfg, None)?;
    let betas = (0..traj.len())
        .map(|j| beta_of(&state.coords, traj.state(j)))
        .collect();
    Ok((traj, betas))
}

/// One perturbation window for the figure: the selected entries of the perturbed (solid) and
/// unperturbed (light) runs against t − t_j, one colour per entry (`colors` by index), and
/// optional theory levels.
pub struct Window<'a> {
    pub title: String,
    /// t − t_j of the samples.
    pub dt: Vec<f64>,
    pub perturbed: &'a [Vec<f64>],
    pub original: &'a [Vec<f64>],
    /// (β index, palette colour) of the drawn entries.
    pub entries: Vec<(usize, usize)>,
    /// Levels β^{k+1}_i drawn over the window, if any.
    pub levels: Option<&'a [f64]>,
}

impl Window<'_> {
    /// The panel; with `legend` (the first panel) its legend names every entry of `all` (the
    /// colours are shared by all panels) and the two line styles.
    pub fn panel(&self, loss: &dyn BetaLoss, legend: Option<&[(usize, usize)]>) -> LinePanel {
        let mut panel = LinePanel::new(self.title.clone(), "t − t_j (unrescaled)", "entries β_i")
            .legend(if legend.is_some() {
                LegendPosition::Best
            } else {
                LegendPosition::None
            });
        let column = |rows: &[Vec<f64>], i: usize| rows.iter().map(|b| b[i]).collect::<Vec<_>>();
        for &(i, color) in &self.entries {
            panel = panel.series(
                Series::numerics(
                    if legend.is_some() {
                        loss.coordinate_name(i)
                    } else {
                        String::new()
                    },
                    self.dt.clone(),
                    column(self.perturbed, i),
                )
                .color(color),
            );
        }
        // legend entries for the colours of the other panels (no data)
        for &(i, color) in legend.unwrap_or(&[]) {
            if !self.entries.iter().any(|&(j, _)| j == i) {
                panel = panel
                    .series(Series::numerics(loss.coordinate_name(i), vec![], vec![]).color(color));
            }
        }
        for (n, &(i, color)) in self.entries.iter().enumerate() {
            let label = if n == 0 {
                "perturbed (solid), unperturbed (light)"
            } else {
                ""
            };
            panel = panel.series(
                Series::new(
                    label,
                    self.dt.clone(),
                    column(self.original, i),
                    LineStyle::Faint,
                )
                .color(color),
            );
        }
        if let Some(levels) = self.levels {
            let ends = vec![self.dt[0], *self.dt.last().unwrap()];
            for (n, &(i, _)) in self.entries.iter().enumerate() {
                let label = if n == 0 {
                    "β^{(k+1)} (Algorithm 1)"
                } else {
                    ""
                };
                panel = panel.series(Series::theory(label, ends.clone(), vec![levels[i]; 2]));
            }
        }
        panel
    }
}

/// Palette colour of each index of `schedule`'s supports, by order of activation.
pub fn entry_colors(schedule: &Schedule, p: usize) -> Vec<(usize, usize)> {
    support_order(schedule, 0..p)
        .into_iter()
        .enumerate()
        .map(|(rank, i)| (i, rank % 6))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// At α = 1e−32 pair 0 is active (b = 0, weights ≈ 0.5) and pair 1 inactive at b = 1.5
    /// (weights ≈ 5e−9 < 1e−5): only pair 0 is perturbed, pair 1 keeps its exact log state
    /// (its u + v ≈ 1e−48 would not survive a raw round trip), unless it is named in `also`.
    #[test]
    fn only_non_negligible_pairs_are_perturbed() {
        let ln_alpha = -32.0 * 10f64.ln();
        let (coords, mut zeta) =
            LogCoordinates::from_init(&[0.8, 1.1], &[-0.3, 0.4], ln_alpha).unwrap();
        zeta[0] = 0.0;
        zeta[1] = 1.5 * ln_alpha;
        let state = LogState { coords, zeta };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let out = perturb(&state, 0.05, 1e-5, &[], &mut rng).unwrap();
        assert_eq!((out.scalars, out.pairs.as_slice()), (2, &[0][..]));
        assert_eq!(out.state.zeta[1], state.zeta[1]);
        assert_eq!(out.state.coords.ln_c()[1], state.coords.ln_c()[1]);
        let moved = (beta_of(&out.state.coords, &out.state.zeta)[0]
            - beta_of(&state.coords, &state.zeta)[0])
            .abs();
        assert!(moved > 1e-4 && moved < 0.5, "{moved}");
        let forced = perturb(&state, 0.05, 1e-5, &[1], &mut rng).unwrap();
        assert_eq!(forced.scalars, 4);
        assert!(
            forced.state.zeta[1] > -20.0,
            "pair 1 now has weights of size σ"
        );
    }
}

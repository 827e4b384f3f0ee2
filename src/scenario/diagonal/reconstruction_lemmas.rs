//! `reconstruction-lemmas` (spec 004 §7; eq. 7, Lemmas D.1–D.3, §2.3 WLOG orientation): the map
//! (w, ln c) → (u, v) of the log layout on the grid of spec §4 — α ∈ {1e−16, 1e−32, 1e−64},
//! c̄ ∈ [0.1, 10], margins c ∈ {0.2, 0.5}, b = log_α w on 200 points of [−0.5, 2.5] — checked
//! against eq. (7) written out in plain f64 and against the three lemmas; and the raw ↔ log
//! round trip (orientation, ζ = ln w, ln c and back) on random pairs.

use crate::scenario::param::Open01;
use crate::scenario::param::{AtLeast, Positive};
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::flow::{linspace, Method, OdeConfig};
use crate::models::diagonal::{LogCoordinates, Orientation};
use crate::plot::{Band, Figure, LegendPosition, LinePanel, LineStyle, RefLine, Series};
use crate::scenario::cost::{n, Cost};
use crate::scenario::registry::Kind;
use crate::scenario::{Cell, InputError, Report, RunContext, RunError, Scenario, Table};
use crate::stats;

use super::basics_common::{alpha_label, validate_alphas};
use super::common::FIRST_FREE_STREAM;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Initialization scales α of the grid (spec §4: 1e−16, 1e−32, 1e−64).
    pub alphas: Vec<f64>,
    /// Values of c̄ = (u0² − v0²) of the normalized direction, c = α² c̄ (spec §4: [0.1, 10]).
    pub c_bars: Vec<f64>,
    /// The lemmas' constants c (spec §4: 0.2 and 0.5).
    pub margins: Vec<f64>,
    /// b = log_α w on `b_points` equally spaced points of [b_min, b_max].
    pub b_min: f64,
    pub b_max: f64,
    pub b_points: usize,
    /// Random raw pairs (u, v) = 10^{−e}(a, b), a, b ~ N(0, 1), e uniform in [0, max_exponent].
    pub round_trip_pairs: AtLeast<1>,
    pub max_exponent: f64,
    /// The figure's α and c̄.
    pub plot_alpha: Open01,
    pub plot_c_bar: Positive,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Spec §7: raw → log → raw round trip ≤ 1e−14 relative to max(|u|, |v|), for pairs whose
    /// logarithms are O(1) (|ζ| + |ln c − ζ| ≤ `round_trip_small_logs`).
    pub round_trip_tol: Positive,
    pub round_trip_small_logs: Positive,
    /// For all pairs: e^x has relative condition |x|, so the round trip can only be accurate to
    /// ≈ ε(1 + |ζ| + |ln c − ζ|); the error in these units must stay ≤ this.
    pub round_trip_units: Positive,
    /// Eq. (7) in plain f64, u = ½(w + c/w), v = ½(w − c/w), vs the log-domain conversion,
    /// relative to max(|u|, |v|), in the same units ε(1 + |ln w| + |ln c|).
    pub eq7_units: Positive,
}

fn validate(p: &Params, _: &Checks, sc: &Scenario) -> Result<(), InputError> {
    validate_alphas(sc, "params.alphas", &p.alphas)?;
    if p.c_bars.is_empty() || p.c_bars.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
        return Err(sc.invalid("params.c_bars", "need positive values of c̄"));
    }
    if p.margins.is_empty() || p.margins.iter().any(|x| !(*x > 0.0 && *x < 1.0)) {
        return Err(sc.invalid("params.margins", "the lemmas' constants lie in (0, 1)"));
    }
    if p.b_min.partial_cmp(&p.b_max) != Some(std::cmp::Ordering::Less) || p.b_points < 2 {
        return Err(sc.invalid("params.b_points", "need b_min < b_max and ≥ 2 points"));
    }
    if !(p.max_exponent >= 0.0 && p.max_exponent <= 150.0) {
        return Err(sc.invalid(
            "params.max_exponent",
            "must lie in [0, 150] (u v must stay in the f64 range)",
        ));
    }
    Ok(())
}

/// One grid point's (u, v) in the normalized orientation (u > |v|) from the log layout.
struct GridPoint {
    b: f64,
    u: f64,
    v: f64,
    /// ln u = ln max(|u|, |v|) in the log domain (exact also where u would underflow).
    ln_u: f64,
}

/// The log-layout coordinate with ln c = 2 ln α + ln c̄ (direction (√c̄, 0): u0² − v0² = c̄).
fn coordinate(ln_alpha: f64, c_bar: f64) -> Result<LogCoordinates, RunError> {
    LogCoordinates::from_init(&[c_bar.sqrt()], &[0.0], ln_alpha)
        .map(|(coords, _)| coords)
        .map_err(|e| RunError::Other(format!("log coordinate of c̄ = {c_bar}: {e}")))
}

fn grid_point(coords: &LogCoordinates, lambda: f64, b: f64) -> GridPoint {
    let zeta = -b * lambda;
    let (u, v) = coords.normalized_pair(0, zeta);
    GridPoint {
        b,
        u,
        v,
        ln_u: coords.ln_weight(0, zeta),
    }
}

/// The lemma verdicts at one point for margin c: D.1 margin log_α max(|u|,|v|) − c/2 (≥ 0),
/// D.2 ln|u| (> 0), D.3 sgn v (−1 above 1 + c, +1 below 1 − c); None where a lemma is silent.
struct Verdicts {
    d1: Option<f64>,
    d2: Option<f64>,
    d3: Option<f64>,
}

fn verdicts(pt: &GridPoint, lambda: f64, c: f64) -> Verdicts {
    let b = pt.b;
    Verdicts {
        d1: (b > c && b < 2.0 - c).then(|| -pt.ln_u / lambda - 0.5 * c),
        d2: (b <= -c || b >= 2.0 + c).then_some(pt.ln_u),
        d3: if b > 1.0 + c {
            Some(-pt.v.signum())
        } else if b < 1.0 - c {
            Some(pt.v.signum())
        } else {
            None
        },
    }
}

/// Relative error of eq. (7) in plain f64 at one point, in units ε(1 + |ln w| + |ln c|).
fn eq7_error_units(pt: &GridPoint, ln_alpha: f64, c_bar: f64) -> f64 {
    let lambda = -ln_alpha;
    let w = (-pt.b * lambda).exp();
    let c = (2.0 * ln_alpha).exp() * c_bar;
    let (u, v) = (0.5 * (w + c / w), 0.5 * (w - c / w));
    let err = stats::larger((u - pt.u).abs(), (v - pt.v).abs()) / pt.u;
    let units = f64::EPSILON * (1.0 + (pt.b * lambda).abs() + (2.0 * ln_alpha + c_bar.ln()).abs());
    err / units
}

fn run(p: &Params, c: &Checks, ctx: &RunContext) -> Result<Report, RunError> {
    let mut headers = vec!["alpha", "c_bar", "b", "u", "v", "ln_abs_u", "ln_abs_v"];
    let margin_headers: Vec<String> = p
        .margins
        .iter()
        .flat_map(|m| ["d1", "d2", "d3"].map(|l| format!("{l}_c{m}")))
        .collect();
    headers.extend(margin_headers.iter().map(String::as_str));
    let mut rep = Report {
        series: Table::new(&headers),
        ..Default::default()
    };
    let bs = linspace(p.b_min, p.b_max, p.b_points);
    let (mut d1_min, mut d2_min, mut d3_min) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let mut counts = [0usize; 3];
    let mut eq7_worst = 0.0_f64;
    for &alpha in &p.alphas {
        let (ln_alpha, lambda) = (alpha.ln(), -alpha.ln());
        for &c_bar in &p.c_bars {
            let coords = coordinate(ln_alpha, c_bar)?;
            for &b in &bs {
                let pt = grid_point(&coords, lambda, b);
                eq7_worst = eq7_worst.max(eq7_error_units(&pt, ln_alpha, c_bar));
                let ln_v = (pt.v.abs()).ln();
                let mut row: Vec<Cell> = vec![
                    alpha.into(),
                    c_bar.into(),
                    b.into(),
                    pt.u.into(),
                    pt.v.into(),
                    pt.ln_u.into(),
                    ln_v.into(),
                ];
                for &m in &p.margins {
                    let ver = verdicts(&pt, lambda, m);
                    for (slot, (value, best)) in [
                        (ver.d1, &mut d1_min),
                        (ver.d2, &mut d2_min),
                        (ver.d3, &mut d3_min),
                    ]
                    .into_iter()
                    .enumerate()
                    {
                        if let Some(x) = value {
                            *best = stats::smaller(*best, x);
                            counts[slot] += 1;
                        }
                        row.push(value.map_or(Cell::Text(String::new()), Cell::Num));
                    }
                }
                rep.series.push(row);
            }
        }
    }
    rep.at_least(
        "lemma-over-log-alpha",
        "Lemma D.1: min over b ∈ (c, 2−c) of log_α max(|u|,|v|) − c/2",
        d1_min,
        0.0,
    )
    .note(format!(
        "{} grid points; ≥ 0 ⇔ max(|u|, |v|) ≤ α^(c/2)",
        counts[0]
    ));
    rep.at_least(
        "lemma-over-ln",
        "Lemma D.2: min over b ∉ (−c, 2+c) of ln|u|",
        d2_min,
        f64::MIN_POSITIVE,
    )
    .note(format!("{} grid points; > 0 ⇔ |u| > 1", counts[1]));
    rep.at_least(
        "lemma-over-predicted-sign-sgn",
        "Lemma D.3: min over |b − 1| > c of the predicted sign × sgn v",
        d3_min,
        1.0,
    )
    .note(format!(
        "{} grid points; v < 0 for b > 1 + c, v > 0 for b < 1 − c",
        counts[2]
    ));
    rep.at_most(
        "eq-plain-f64-vs-log-domain",
        "eq. (7) in plain f64 vs the log-domain (u, v), units ε(1+|ln w|+|ln c|)",
        eq7_worst,
        *c.eq7_units,
    )
    .note("relative to max(|u|, |v|); e^x has relative condition |x|");
    round_trip_checks(p, c, ctx, &mut rep);
    rep.figure = Some(figure(p)?);
    Ok(rep)
}

/// Raw → log → raw on random pairs, and the orientation erratum (§6 item 9).
fn round_trip_checks(p: &Params, c: &Checks, ctx: &RunContext, rep: &mut Report) {
    let mut rng = ctx.rng(FIRST_FREE_STREAM);
    let mut table = Table::new(&["u", "v", "ln_scale", "rel_error", "error_units"]);
    let (mut small_worst, mut units_worst) = (0.0_f64, 0.0_f64);
    let (mut small_count, mut product_kept, mut paper_flips) = (0usize, 0usize, 0usize);
    for _ in 0..*p.round_trip_pairs {
        let scale = 10f64.powf(-rng.random_range(0.0..=p.max_exponent));
        let u = scale * rng.sample::<f64, _>(StandardNormal);
        let v = scale * rng.sample::<f64, _>(StandardNormal);
        let Ok(orientation) = Orientation::of(u, v) else {
            continue; // |u| = |v| has no log layout (A4.3(i)); probability 0
        };
        let (nu, nv) = orientation.normalize(u, v);
        product_kept += usize::from(nu * nv == u * v && nu > nv.abs());
        // the paper's §C.3 map (ũ, ṽ) = (sgn(u) u, sgn(v) v) flips u v when the signs differ
        paper_flips += usize::from(u.abs() * v.abs() != u * v);
        let (coords, zeta) =
            LogCoordinates::from_raw(&[u], &[v]).expect("|u| ≠ |v| was checked above");
        let back = coords.raw_state(&zeta);
        let size = u.abs().max(v.abs());
        let rel = stats::larger((back[0] - u).abs(), (back[1] - v).abs()) / size;
        let logs = zeta[0].abs() + (coords.ln_c()[0] - zeta[0]).abs();
        let units = rel / (f64::EPSILON * (1.0 + logs));
        units_worst = stats::larger(units_worst, units);
        if logs <= *c.round_trip_small_logs {
            small_worst = stats::larger(small_worst, rel);
            small_count += 1;
        }
        table.push(vec![
            u.into(),
            v.into(),
            size.ln().into(),
            rel.into(),
            units.into(),
        ]);
    }
    let tested = table.rows.len();
    rep.tables.push(("round_trip".into(), table));
    rep.at_most(
        "raw-log-raw-round-trip-logarithms",
        "raw → log → raw round trip (O(1) logarithms), relative",
        small_worst,
        *c.round_trip_tol,
    )
    .note(format!(
        "{small_count} of {tested} pairs with |ζ| + |ln c − ζ| ≤ {}",
        c.round_trip_small_logs
    ));
    rep.at_most(
        "raw-log-raw-round-trip-scales",
        "raw → log → raw round trip (all scales), units ε(1+|ζ|+|ln c−ζ|)",
        units_worst,
        *c.round_trip_units,
    )
    .note(format!(
        "{tested} pairs of scale 10^-e, e ≤ {}",
        p.max_exponent
    ));
    rep.at_least(
        "wlog-orientation-keeps-exactly-gives-fraction",
        "WLOG orientation keeps u v exactly and gives ũ > |ṽ| (fraction of pairs)",
        product_kept as f64 / tested.max(1) as f64,
        1.0,
    )
    .paper_claim(format!(
        "§C.3: ũ = sgn(u)u, ṽ = sgn(v)v — flips the sign of u v on {paper_flips} of \
         {tested} pairs (spec §6 item 9)"
    ));
    rep.derive("round_trip_pairs", tested);
    rep.derive("round_trip_small_log_pairs", small_count);
    rep.derive("paper_orientation_sign_flips", paper_flips);
}

/// |u|, |v| vs b at the plot's α and c̄ with the lemma bands, and the exponents
/// log_α max(|u|, |v|) vs their α → 0 limit min(b, 2 − b) for every α of the grid.
fn figure(p: &Params) -> Result<Figure, RunError> {
    let (ln_alpha, lambda) = (p.plot_alpha.ln(), -p.plot_alpha.ln());
    let coords = coordinate(ln_alpha, *p.plot_c_bar)?;
    let bs = linspace(p.b_min, p.b_max, 4 * p.b_points);
    let points: Vec<GridPoint> = bs.iter().map(|&b| grid_point(&coords, lambda, b)).collect();
    let abs_u: Vec<f64> = points.iter().map(|q| q.u).collect();
    let v_part = |positive: bool| -> Vec<f64> {
        points
            .iter()
            .map(|q| {
                if (q.v > 0.0) == positive {
                    q.v.abs()
                } else {
                    f64::NAN
                }
            })
            .collect()
    };
    let v = v_part(true);
    let (lo, hi) = (
        stats::axis_min(f64::INFINITY, abs_u.iter().chain(&v).map(|x| x.abs())) * 1e-3,
        stats::axis_max(0.0, &abs_u) * 1e3,
    );
    let lo = lo.max(1e-300);
    let mut magnitudes = LinePanel::new(
        format!(
            "|u|, |v| at {}, c̄ = {} (|u| ≈ |v| away from b = 1)",
            alpha_label(*p.plot_alpha),
            p.plot_c_bar
        ),
        "b = log_α w",
        "magnitude",
    )
    .log_y()
    .y_range(lo, hi)
    .legend(LegendPosition::LowerLeft)
    // |u| ≈ |v| except near b = 1, so |u| shows only where v changes sign
    .series(Series::numerics("|u|", bs.clone(), abs_u).color(6))
    .series(Series::numerics("|v|, v > 0", bs.clone(), v_part(true)).color(1))
    .series(Series::numerics("|v|, v < 0", bs.clone(), v_part(false)).color(3))
    .hline(RefLine::new(1.0, "D.2: |u| = 1"))
    .vline(RefLine::new(1.0, "D.3: sgn v flips").style(LineStyle::Dotted));
    for (j, &m) in p.margins.iter().enumerate() {
        magnitudes = magnitudes
            .band(
                Band::new(
                    format!("D.1 band, c = {m}"),
                    vec![m, 2.0 - m],
                    vec![lo, lo],
                    vec![hi, hi],
                )
                .color(4 + j),
            )
            .hline(RefLine::new(
                (0.5 * m * ln_alpha).exp(),
                format!("D.1 bound α^{{c/2}}, c = {m}"),
            ));
    }
    let mut exponents = LinePanel::new(
        format!("exponent of max(|u|, |v|), c̄ = {}", p.plot_c_bar),
        "b = log_α w",
        "log_α max(|u|, |v|)",
    )
    .legend(LegendPosition::LowerLeft);
    for (a, &alpha) in p.alphas.iter().enumerate() {
        let lam = -alpha.ln();
        let coords = coordinate(alpha.ln(), *p.plot_c_bar)?;
        let e: Vec<f64> = bs
            .iter()
            .map(|&b| -grid_point(&coords, lam, b).ln_u / lam)
            .collect();
        exponents = exponents.series(Series::numerics(alpha_label(alpha), bs.clone(), e).color(a));
    }
    let limit: Vec<f64> = bs.iter().map(|b| b.min(2.0 - b)).collect();
    exponents = exponents.series(Series::theory("min(b, 2 − b) (α → 0)", bs, limit).color(6));
    Ok(Figure::new(2)
        .title("Eq. (7) and Lemmas D.1–D.3: the weights (u, v) from w = u + v and c = u² − v²")
        .panel(magnitudes)
        .panel(exponents))
}

/// Closed-form evaluations on the (α, c̄, b, margin) grid and the round trips, O(1) each; the
/// grid's table is held.
fn cost(p: &Params, _: &RunContext) -> Cost {
    let grid = n(p.alphas.len()) * n(p.c_bars.len()) * n(p.b_points);
    Cost::new()
        .work(
            "b_points, alphas, c_bars",
            "grid evaluations",
            grid * n(p.margins.len() + 1),
            100.0,
        )
        .table("b_points, alphas, c_bars", grid, 8.0)
        .work(
            "round_trip_pairs",
            "round trips",
            n(*p.round_trip_pairs),
            100.0,
        )
}

pub static KIND: Kind<Params, Checks> = Kind {
    name: "diagonal.reconstruction-lemmas",
    paper: "004",
    summary: "Eq. (7) and Lemmas D.1–D.3 on the spec §4 grid (α down to 1e-64, c̄ ∈ [0.1, 10], \
              c ∈ {0.2, 0.5}, 200 values of b); raw ↔ log round trip; the corrected WLOG \
              orientation (the paper's §C.3 map flips u v).",
    solver: OdeConfig::new(Method::Tsit45, 1e-10, 1e-10),
    validate,
    cost,
    quantities: &[
        "paper_orientation_sign_flips",
        "round_trip_pairs",
        "round_trip_small_log_pairs",
    ],
    run,
};

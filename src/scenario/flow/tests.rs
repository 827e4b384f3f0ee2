//! The generic runner on a model whose answers are known: ℓ(w) = ½ Σᵢ λᵢ (wᵢ − cᵢ)², so
//! w(t) = c + e^{−λt}(w₀ − c), the Hessian is diag(λ), and W(t) − W(0) (w as a 1 × d matrix) has
//! rank one.

use std::path::Path;

use super::*;
use crate::flow::{Method, OdeConfig};
use crate::instance::Array;
use crate::scenario::Overrides;

struct Quadratic {
    lambda: Vec<f64>,
    c: Vec<f64>,
    w0: Vec<f64>,
}

impl GradientFlow for Quadratic {
    fn dim(&self) -> usize {
        self.c.len()
    }
    fn loss(&self, w: &[f64]) -> f64 {
        0.5 * (0..w.len())
            .map(|i| self.lambda[i] * (w[i] - self.c[i]).powi(2))
            .sum::<f64>()
    }
    fn grad(&self, w: &[f64], g: &mut [f64]) {
        for i in 0..w.len() {
            g[i] = self.lambda[i] * (w[i] - self.c[i]);
        }
    }
    fn hvp(&self, _w: &[f64], u: &[f64], out: &mut [f64]) {
        for i in 0..u.len() {
            out[i] = self.lambda[i] * u[i];
        }
    }
}

impl FlowModel for Quadratic {
    fn initial_state(&self) -> Vec<f64> {
        self.w0.clone()
    }
    fn instance(&self) -> Arrays {
        let mut a = Arrays::new();
        a.insert("lambda", Array::vector(&self.lambda))
            .insert("c", Array::vector(&self.c))
            .insert("w0", Array::vector(&self.w0));
        a
    }
    fn matrices(&self, z: &[f64]) -> Vec<(String, DMatrix<f64>)> {
        vec![("w".into(), DMatrix::from_row_slice(1, z.len(), z))]
    }
    fn max_margin(&self) -> Result<Vec<MaxMargin>, String> {
        Ok(vec![MaxMargin {
            name: "target".into(),
            matrix: "w".into(),
            solution: DMatrix::from_row_slice(1, self.c.len(), &self.c),
            certificate: vec![("residual".into(), 0.0)],
            tolerance: 1e-9,
        }])
    }
}

fn params(extra: &str) -> (Params, Checks) {
    let p: Params = toml::from_str(&format!("t_end = 20.0\nsamples = 60\n{extra}")).unwrap();
    let c: Checks = toml::from_str("loss_rise = 1e-8\ninvariant_drift = 1e-8").unwrap();
    (p, c)
}

fn run_on(model: &Quadratic, p: &Params, c: &Checks) -> Report {
    let text = "kind = \"flow.test\"\ntitle = \"t\"\n";
    let sc = Scenario::parse(Path::new("flow-test.toml"), text, &Overrides::default()).unwrap();
    let ctx = RunContext {
        scenario: &sc,
        ode: OdeConfig::new(Method::Bdf, 1e-10, 1e-12),
    };
    run(model, p, c, &ctx).unwrap()
}

fn model() -> Quadratic {
    Quadratic {
        lambda: vec![1.0, 0.1, 3.0],
        c: vec![1.0, -2.0, 0.5],
        w0: vec![0.0, 0.0, 0.0],
    }
}

#[test]
fn the_flow_its_checks_and_the_end_point_spectrum() {
    let (p, c) = params("");
    let rep = run_on(&model(), &p, &c);
    assert!(rep.all_pass(), "{:?}", rep.checks);
    assert_eq!(rep.checks.len(), 2); // loss rise, certificate
                                     // ℓ(T) = ½ Σ λᵢ cᵢ² e^{−2λᵢT}
    let m = model();
    let exact: f64 = 0.5
        * (0..3)
            .map(|i| m.lambda[i] * m.c[i].powi(2) * (-2.0 * m.lambda[i] * 20.0).exp())
            .sum::<f64>();
    let final_loss = rep.derived["final_loss"].as_f64().unwrap();
    assert!(
        (final_loss - exact).abs() <= 1e-6 * exact,
        "{final_loss} vs {exact}"
    );
    // Hessian diag(λ): λmin = 0.1, λmax = 3, no negative direction
    assert!((rep.derived["hessian.lambda_min"].as_f64().unwrap() - 0.1).abs() < 1e-12);
    assert!((rep.derived["hessian.lambda_max"].as_f64().unwrap() - 3.0).abs() < 1e-12);
    assert_eq!(rep.derived["hessian.negative"], 0);
    // w(t) − w(0) is one row: stable and effective rank 1
    assert!((rep.derived["stable_rank.w"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    // 1 − cos between w(T) = c ⊙ (1 − e^{−λT}) and c
    let w: Vec<f64> = (0..3)
        .map(|i| m.c[i] * -(-m.lambda[i] * 20.0).exp_m1())
        .collect();
    let cos = w.iter().zip(&m.c).map(|(a, b)| a * b).sum::<f64>()
        / (crate::flow::norm(&w) * crate::flow::norm(&m.c));
    let measured = rep.derived["one_minus_cos.target"].as_f64().unwrap();
    assert!(
        (measured - (1.0 - cos)).abs() <= 1e-7 * (1.0 - cos),
        "{measured} vs {}",
        1.0 - cos
    );
    assert_eq!(rep.instance.as_ref().unwrap().get("c").unwrap().data, m.c);
    assert_eq!(rep.series.rows.len(), 60);
    assert!(rep.figure.is_some());
}

#[test]
fn a_rising_loss_fails_and_discrete_steps_skip_the_flow_checks() {
    // GD with η above 2/λmax oscillates with growing amplitude in the stiff coordinate
    let (p, c) = params("optimizer = \"gd\"\neta = 0.7\nsteps = 20");
    let rep = run_on(&model(), &p, &c);
    assert_eq!(rep.skipped.len(), 1);
    assert!(rep.derived["loss_rise"].as_f64().unwrap() > 0.0);
    // the same loss rise along "the flow" would fail its check: a crude integration shows it
    let (p, c) = params("");
    let mut sloppy = model();
    sloppy.lambda[2] = 3.0;
    let text = "kind = \"flow.test\"\ntitle = \"t\"\n";
    let sc = Scenario::parse(Path::new("flow-test.toml"), text, &Overrides::default()).unwrap();
    let ctx = RunContext {
        scenario: &sc,
        ode: OdeConfig::new(Method::Tsit45, 1e-1, 1e-1),
    };
    let c_strict = Checks {
        loss_rise: 0.0,
        ..c
    };
    let rep = run(&sloppy, &p, &c_strict, &ctx).unwrap();
    let rise = rep.derived["loss_rise"].as_f64().unwrap();
    assert_eq!(rep.checks[0].pass, rise <= 0.0);
}

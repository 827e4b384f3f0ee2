//! The model families Python can construct, by name.
//!
//! The library's families (`attnflow::scenario::flow::families()`), plus a test-only family.

use attnflow::scenario::flow::Family;
use pyo3::prelude::*;

/// Every family `attnflow.Model` accepts.
pub(crate) fn families() -> Vec<&'static dyn Family> {
    #[allow(unused_mut)]
    let mut all = attnflow::scenario::flow::families();
    #[cfg(feature = "testing")]
    all.push(&quadratic::QUADRATIC);
    all
}

/// The family called `name`; an InputError lists the known names otherwise.
pub(crate) fn find(name: &str) -> PyResult<&'static dyn Family> {
    let all = families();
    all.iter()
        .copied()
        .find(|f| f.name() == name)
        .ok_or_else(|| {
            let known: Vec<&str> = all.iter().map(|f| f.name()).collect();
            crate::input_error(format!(
                "family: unknown family `{name}` (known: {})",
                if known.is_empty() {
                    "none built in".to_string()
                } else {
                    known.join(", ")
                }
            ))
        })
}

/// Names of the model families `attnflow.Model` accepts.
#[pyfunction]
pub(crate) fn family_names() -> Vec<&'static str> {
    families().iter().map(|f| f.name()).collect()
}

/// A test-only family whose flow has a closed form, so the Python layer can be tested before
/// (and independently of) the papers' families.
#[cfg(feature = "testing")]
mod quadratic {
    use attnflow::flow::GradientFlow;
    use attnflow::instance::{Array, Arrays, InstanceError};
    use attnflow::scenario::flow::{Family, FlowModel};
    use attnflow::scenario::{InputError, Scenario};
    use nalgebra::{DMatrix, DVector};

    /// ℓ(z) = ½ zᵀAz − bᵀz with A symmetric positive definite: z(t) = z* + e^{−At}(z(0) − z*),
    /// z* = A⁻¹b. Arrays: `A` (d × d), `b` (d), `z0` (d).
    pub struct Quadratic;
    pub static QUADRATIC: Quadratic = Quadratic;

    struct Model {
        a: DMatrix<f64>,
        b: DVector<f64>,
        z0: Vec<f64>,
    }

    impl Family for Quadratic {
        fn name(&self) -> &'static str {
            "quadratic"
        }
        fn kind(&self) -> &'static str {
            "flow.quadratic"
        }
        fn paper(&self) -> &'static str {
            "test"
        }
        fn summary(&self) -> &'static str {
            "test family: ℓ(z) = ½ zᵀAz − bᵀz (arrays A, b, z0)"
        }
        /// A = diag(1, …, d), b = 1, z0 = 0 with d = `options.d` (default 3).
        fn default_instance(
            &self,
            sc: &Scenario,
            options: &toml::Table,
        ) -> Result<Arrays, InputError> {
            let d = match options.get("d") {
                None => 3,
                Some(v) => v
                    .as_integer()
                    .filter(|&d| d >= 1)
                    .ok_or_else(|| sc.invalid("params.model.d", "must be an integer ≥ 1"))?
                    as usize,
            };
            let mut a = vec![0.0; d * d];
            (0..d).for_each(|i| a[i * d + i] = (i + 1) as f64);
            let mut arrays = Arrays::new();
            arrays
                .insert("A", Array::matrix(d, d, a))
                .insert("b", Array::vector(&vec![1.0; d]))
                .insert("z0", Array::vector(&vec![0.0; d]));
            Ok(arrays)
        }
        fn model(
            &self,
            data: &Arrays,
            init: &Arrays,
            _options: &toml::Table,
        ) -> Result<Box<dyn FlowModel>, InstanceError> {
            let a = data.shaped("A", &[None, None])?;
            let d = a.shape[0];
            if a.shape[1] != d {
                return Err(InstanceError::new(
                    "A",
                    format!("must be square, got {:?}", a.shape),
                ));
            }
            let a = DMatrix::from_row_slice(d, d, &a.data);
            if (&a - a.transpose()).amax() > 1e-12 * a.amax().max(1.0) {
                return Err(InstanceError::new("A", "must be symmetric"));
            }
            if a.clone().cholesky().is_none() {
                return Err(InstanceError::new("A", "must be positive definite"));
            }
            let b = DVector::from_column_slice(data.vector("b", Some(d))?);
            let z0 = init.vector("z0", Some(d))?.to_vec();
            Ok(Box::new(Model { a, b, z0 }))
        }
    }

    impl GradientFlow for Model {
        fn dim(&self) -> usize {
            self.b.len()
        }
        fn loss(&self, z: &[f64]) -> f64 {
            let z = DVector::from_column_slice(z);
            0.5 * z.dot(&(&self.a * &z)) - self.b.dot(&z)
        }
        fn grad(&self, z: &[f64], g: &mut [f64]) {
            let az = &self.a * DVector::from_column_slice(z);
            g.iter_mut()
                .zip(az.iter().zip(self.b.iter()))
                .for_each(|(g, (az, b))| *g = az - b);
        }
        fn hvp(&self, _z: &[f64], u: &[f64], out: &mut [f64]) {
            out.copy_from_slice((&self.a * DVector::from_column_slice(u)).as_slice());
        }
    }

    impl FlowModel for Model {
        fn initial_state(&self) -> Vec<f64> {
            self.z0.clone()
        }
        fn instance(&self) -> Arrays {
            let d = self.dim();
            let mut arrays = Arrays::new();
            arrays
                .insert("A", Array::from_column_major(d, d, self.a.as_slice()))
                .insert("b", Array::vector(self.b.as_slice()))
                .insert("z0", Array::vector(&self.z0));
            arrays
        }
        fn matrices(&self, z: &[f64]) -> Vec<(String, DMatrix<f64>)> {
            vec![("z".into(), DMatrix::from_row_slice(1, z.len(), z))]
        }
    }
}

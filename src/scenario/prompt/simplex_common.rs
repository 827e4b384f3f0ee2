//! Shared by the simplex scenarios of seed 002 (lemma1-softmax-jacobian, eq16-simplex-map,
//! thm2-linearization, thm2-condition-bound): the (C-quad) instances, their instance files, and
//! the relative matrix error.

use std::path::Path;

use nalgebra::DMatrix;
use rand::Rng;

use super::common::file_error;
use crate::instance::prompt::{SimplexInit, StationaryPoint};
use crate::instance::{Arrays, InstanceFile};
use crate::models::prompt::attention_families::Attention;
use crate::models::prompt::simplex::QuadLoss;
use crate::scenario::{InputError, Scenario};
use crate::stats;

/// max|a − b| / max|b|.
pub fn rel_matrix_error(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    stats::max_abs((a - b).iter()) / stats::max_abs(b.iter())
}

/// A (C-quad) instance (spec §1.5): z* = φ(s·g) with Gaussian g, A random SPD with condition
/// number `condition`, linear term c𝟙ᵀz.
pub fn quad_instance<R: Rng + ?Sized>(
    n: usize,
    c: f64,
    condition: f64,
    zstar_scale: f64,
    rng: &mut R,
) -> QuadLoss {
    let z_star = Attention::gaussian_logits(n, zstar_scale, rng).z;
    QuadLoss::random(z_star, c, condition, rng)
}

/// The instance files of the simplex scenarios: `data_file` (z*, H: [`StationaryPoint`], read
/// as the (C-quad) loss ½(z − z*)ᵀH(z − z*) + c𝟙ᵀz) and `init_file` (the starts:
/// [`SimplexInit`]), read and checked against each other; either may be absent.
pub struct SimplexFiles {
    pub point: Option<StationaryPoint>,
    pub init: Option<SimplexInit>,
}

impl SimplexFiles {
    /// Reads the files; `n` is the scenario's n, which a data file replaces (`None`: several).
    pub fn read(
        sc: &Scenario,
        data_file: Option<&Path>,
        init_file: Option<&Path>,
        n: Option<usize>,
    ) -> Result<Self, InputError> {
        let point = data_file
            .map(|f| sc.read_instance::<StationaryPoint>("data_file", f))
            .transpose()?;
        let init = match init_file {
            None => None,
            Some(f) => {
                let init: SimplexInit = sc.read_instance("init_file", f)?;
                let n = point.as_ref().map(|pt| pt.z_star.len()).or(n);
                if let Some(n) = n {
                    init.require_fits(n)
                        .map_err(|e| file_error(&sc.input_path("init_file", f), "init_file", e))?;
                }
                Some(init)
            }
        };
        Ok(SimplexFiles { point, init })
    }

    /// The file's (z*, H) as the (C-quad) loss with `drawn`'s c, else `drawn` (the built-in draw),
    /// and whether the loss is the built-in one: a file equal to the draw bit for bit is (a
    /// run's instance.npz fed back), so notes describe it as the run did.
    pub fn quad_or(&self, drawn: QuadLoss) -> (QuadLoss, bool) {
        match &self.point {
            Some(pt) => {
                let builtin = pt.z_star == drawn.z_star() && pt.h == *drawn.matrix();
                let loss = QuadLoss::new(pt.h.clone(), pt.z_star.clone(), drawn.c())
                    .expect("a checked stationary point: z* > 0, H symmetric of z*'s size");
                (loss, builtin)
            }
            None => (drawn, true),
        }
    }
}

/// The instance of a (C-quad) loss and its starts, as `instance.npz` writes it (the layouts
/// [`StationaryPoint`] and [`SimplexInit`] in one file).
pub fn simplex_instance(loss: &QuadLoss, init: SimplexInit) -> Arrays {
    let point = StationaryPoint {
        z_star: loss.z_star().to_vec(),
        h: loss.matrix().clone(),
    };
    let mut a = point.to_arrays();
    a.merge_prefixed("", init.to_arrays());
    a
}

//! The df-linear flow ℓ_df(Q, v) = ½‖Q Diag(v) − M‖_F² = ½ Σ_i ‖v_i q_i − m_i‖² (spec 000 §2.2).
//!
//! The loss is a sum over columns, so gradient and Hessian are block-diagonal in the canonical
//! layout; everything is computed per column from the residual r_i = v_i q_i − m_i, never as a
//! difference of large norms.

use nalgebra::DMatrix;

use super::layout;
use crate::flow::GradientFlow;

/// Gradient flow of ℓ_df on the state z = \[q_1; v_1; …; q_d; v_d\] (spec 000 §2.1–2.2).
#[derive(Debug, Clone)]
pub struct DfFlow {
    d: usize,
    /// M stored column-major (column i contiguous, as in z).
    m: DMatrix<f64>,
}

impl DfFlow {
    /// The df flow for the task matrix M (d × d). Panics unless M is square.
    pub fn new(m: DMatrix<f64>) -> Self {
        assert_eq!(m.nrows(), m.ncols(), "M must be square");
        Self { d: m.nrows(), m }
    }

    /// The task matrix M.
    pub fn m(&self) -> &DMatrix<f64> {
        &self.m
    }

    /// The alphabet size d.
    pub fn d(&self) -> usize {
        self.d
    }

    fn m_column(&self, i: usize) -> &[f64] {
        &self.m.as_slice()[i * self.d..(i + 1) * self.d]
    }

    /// ℓ_i = ½‖v_i q_i − m_i‖², the loss of column i (spec 000 §2.2).
    pub fn column_loss(&self, z: &[f64], i: usize) -> f64 {
        let (q, v) = layout::column(z, self.d, i);
        0.5 * q
            .iter()
            .zip(self.m_column(i))
            .map(|(qa, ma)| {
                let r = v * qa - ma;
                r * r
            })
            .sum::<f64>()
    }
}

impl GradientFlow for DfFlow {
    fn dim(&self) -> usize {
        self.d * (self.d + 1)
    }

    fn loss(&self, z: &[f64]) -> f64 {
        (0..self.d).map(|i| self.column_loss(z, i)).sum()
    }

    /// ∇_{q_i} = v_i r_i, ∂_{v_i} = q_iᵀ r_i (spec 000 §2.2).
    fn grad(&self, z: &[f64], g: &mut [f64]) {
        let d = self.d;
        for i in 0..d {
            let (q, v) = layout::column(z, d, i);
            let g_block = &mut g[i * (d + 1)..(i + 1) * (d + 1)];
            let mut g_v = 0.0;
            for ((g_a, qa), ma) in g_block[..d].iter_mut().zip(q).zip(self.m_column(i)) {
                let r = v * qa - ma;
                *g_a = v * r;
                g_v += qa * r;
            }
            g_block[d] = g_v;
        }
    }

    /// Block i of ∇²ℓ is \[[v_i² I, 2v_iq_i − m_i\], \[(2v_iq_i − m_i)ᵀ, ‖q_i‖²\]] (= −J_i of spec
    /// 000 §2.2); 2v_iq_i − m_i is evaluated as v_iq_i + r_i.
    fn hvp(&self, z: &[f64], u: &[f64], out: &mut [f64]) {
        let d = self.d;
        for i in 0..d {
            let (q, v) = layout::column(z, d, i);
            let (u_q, u_v) = layout::column(u, d, i);
            let out_block = &mut out[i * (d + 1)..(i + 1) * (d + 1)];
            let mut out_v = 0.0;
            let mut q_norm_sq = 0.0;
            for (((o_a, qa), ma), ua) in out_block[..d]
                .iter_mut()
                .zip(q)
                .zip(self.m_column(i))
                .zip(u_q)
            {
                let cross = v * qa + (v * qa - ma);
                *o_a = v * v * ua + cross * u_v;
                out_v += cross * ua;
                q_norm_sq += qa * qa;
            }
            out_block[d] = out_v + q_norm_sq * u_v;
        }
    }

    fn invariant_names(&self) -> Vec<String> {
        layout::beta_names(self.d)
    }

    fn invariants(&self, z: &[f64], out: &mut [f64]) {
        layout::betas(z, out);
    }
}

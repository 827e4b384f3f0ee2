//! Forward-mode dual numbers for exact Hessian-vector products, shared by the models whose
//! gradient is a hand-written backpropagation generic over the [`Scalar`]: run on f64 it is the
//! gradient; run on [`Dual`] numbers β + ε·v it is the gradient and, in the ε parts, ∇²L·v —
//! one pass, exactly (no finite differences). Each model tests both against num-dual.

use std::ops::{Add, AddAssign, Div, DivAssign, Mul, Sub};

/// The arithmetic a generic backpropagation needs: f64, the forward-mode [`Dual`], and (in the
/// tests) num-dual's dual numbers.
pub trait Scalar:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + AddAssign
    + DivAssign
    + Mul<f64, Output = Self>
    + Sub<f64, Output = Self>
    + Div<f64, Output = Self>
{
    fn cst(x: f64) -> Self;
    /// The real part.
    fn re(&self) -> f64;
    fn exp(self) -> Self;
}

impl Scalar for f64 {
    fn cst(x: f64) -> Self {
        x
    }
    fn re(&self) -> f64 {
        *self
    }
    fn exp(self) -> Self {
        f64::exp(self)
    }
}

/// A forward-mode dual number x + ε·dx (ε² = 0): one directional derivative, exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dual {
    pub x: f64,
    pub dx: f64,
}

impl Add for Dual {
    type Output = Dual;
    fn add(self, o: Dual) -> Dual {
        Dual {
            x: self.x + o.x,
            dx: self.dx + o.dx,
        }
    }
}
impl Sub for Dual {
    type Output = Dual;
    fn sub(self, o: Dual) -> Dual {
        Dual {
            x: self.x - o.x,
            dx: self.dx - o.dx,
        }
    }
}
impl Mul for Dual {
    type Output = Dual;
    fn mul(self, o: Dual) -> Dual {
        Dual {
            x: self.x * o.x,
            dx: self.dx * o.x + self.x * o.dx,
        }
    }
}
impl Div for Dual {
    type Output = Dual;
    fn div(self, o: Dual) -> Dual {
        let q = self.x / o.x;
        Dual {
            x: q,
            dx: (self.dx - q * o.dx) / o.x,
        }
    }
}
impl AddAssign for Dual {
    fn add_assign(&mut self, o: Dual) {
        *self = *self + o;
    }
}
impl DivAssign for Dual {
    fn div_assign(&mut self, o: Dual) {
        *self = *self / o;
    }
}
impl Mul<f64> for Dual {
    type Output = Dual;
    fn mul(self, c: f64) -> Dual {
        Dual {
            x: self.x * c,
            dx: self.dx * c,
        }
    }
}
impl Sub<f64> for Dual {
    type Output = Dual;
    fn sub(self, c: f64) -> Dual {
        Dual {
            x: self.x - c,
            dx: self.dx,
        }
    }
}
impl Div<f64> for Dual {
    type Output = Dual;
    fn div(self, c: f64) -> Dual {
        Dual {
            x: self.x / c,
            dx: self.dx / c,
        }
    }
}
impl Scalar for Dual {
    fn cst(x: f64) -> Self {
        Dual { x, dx: 0.0 }
    }
    fn re(&self) -> f64 {
        self.x
    }
    fn exp(self) -> Self {
        let e = self.x.exp();
        Dual {
            x: e,
            dx: e * self.dx,
        }
    }
}

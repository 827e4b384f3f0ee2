//! The histogram task as scenario files name it (spec 000 §1.2): `task = "eq" | "lt" | "thr"`,
//! with the threshold D of `thr` given separately.

use serde::{Deserialize, Serialize};

use crate::models::histogram::Task;

/// A task name in a scenario file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskName {
    /// Equality histogram, M = I.
    Eq,
    /// Less-than histogram, M(a, b) = 1 if a ≥ b.
    Lt,
    /// Threshold histogram, M(a, b) = 1 if |a − b| ≤ D.
    Thr,
}

impl TaskName {
    /// The model's task; `d_thr` is the threshold D (used by `thr` only).
    pub fn task(self, d_thr: usize) -> Task {
        match self {
            TaskName::Eq => Task::Eq,
            TaskName::Lt => Task::Lt,
            TaskName::Thr => Task::Thr { d_thr },
        }
    }

    /// The task matrix M (d × d).
    pub fn matrix(self, d: usize, d_thr: usize) -> nalgebra::DMatrix<f64> {
        crate::models::histogram::task_matrix(&self.task(d_thr), d)
    }
}

/// Default threshold D of the thr task (the paper's Fig. 1).
pub fn default_d_thr() -> usize {
    2
}

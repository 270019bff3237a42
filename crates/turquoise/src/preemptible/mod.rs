//! Preemptible futures (`future.rs`) and a task's future with its join cell
//! (`task.rs`).

pub(crate) mod future;
pub(crate) mod task;

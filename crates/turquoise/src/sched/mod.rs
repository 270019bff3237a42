//! Scheduling: the workers' loops and queues (`scheduler.rs`), join handles,
//! and the runtime (`runtime.rs`).

pub(crate) mod join;
pub(crate) mod runtime;
pub(crate) mod scheduler;

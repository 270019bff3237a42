//! The machine: stacks, the switch, the per-thread timer and the monitor, the
//! clock, the signals linger owns, the per-flow library state. Imports the
//! state and the base.

pub mod stack;
pub(crate) mod clock;
pub(crate) mod exit;
pub(crate) mod flow;
pub(crate) mod monitor;
pub(crate) mod sigmask;
pub(crate) mod signal;
pub(crate) mod switch;
pub(crate) mod timer;

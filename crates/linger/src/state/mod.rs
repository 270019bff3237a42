//! The per-thread state (`thread`: what the handler and the runtime share
//! on one thread, and each function's frame), its counters (`stats`), the
//! no-preemption guard (`guard`), and the types the state holds whose
//! behaviour lives higher up (the walk memo, the table reader's mark, a
//! flow's saved library state, the monitor's slot, a coroutine's outcome,
//! the park seam's trait): defined here so that the state imports nothing
//! above it. Imports only the base.

pub(crate) mod guard;
pub(crate) mod memo;
pub(crate) mod outcome;
pub(crate) mod park;
pub(crate) mod reader;
pub(crate) mod saved;
pub(crate) mod slot;
pub(crate) mod stats;
pub(crate) mod thread;

//! Types of the per-thread state (`crate::thread`) whose behaviour lives
//! higher up: defined here, below the state, so that the state does not
//! import the modules that act on it (issue 29).

pub(crate) mod memo;
pub(crate) mod outcome;
pub(crate) mod park;
pub(crate) mod reader;
pub(crate) mod saved;
pub(crate) mod slot;

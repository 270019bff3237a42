//! The base: the x86-64 specifics (`arch.rs`), clocks, ids, the path
//! rules, per-thread mailboxes, the pace of a run, poll counters, and the
//! worker the calling thread is (`context.rs`, the bottom of scheduling).

pub(crate) mod arch;
pub(crate) mod clock;
pub(crate) mod context;
pub(crate) mod counters;
pub(crate) mod home;
pub(crate) mod id_map;
pub(crate) mod pace;
pub(crate) mod rules;
pub(crate) mod thread_stats;

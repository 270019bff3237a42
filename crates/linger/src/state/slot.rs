//! A thread's deadline slot with the monitor (its behaviour is
//! `monitor`'s): a type of the per-thread state, defined below it.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64};

/// One thread's published deadline. Slots are never freed: a thread that
/// exits hands its slot to the next thread that registers.
#[repr(align(64))]
pub(crate) struct Slot {
    /// Deadline of the function the thread runs (absolute CLOCK_MONOTONIC
    /// ns), or NEVER.
    pub(crate) deadline: AtomicU64,
    /// The thread's kernel id, or 0 while the slot is free.
    pub(crate) tid: AtomicI32,
    /// `BUSY` and `SHUT` bits.
    pub(crate) state: AtomicU32,
    /// The monitor has signalled the thread and its handler has not run
    /// yet (read by the SIGSEGV paths, like a timer that has expired).
    pub(crate) kicked: AtomicBool,
    /// Monitor only: the deadline it last signalled the thread for.
    pub(crate) signalled_for: AtomicU64,
    /// Monitor only: when to try again after a full signal queue, or 0.
    pub(crate) retry_at: AtomicU64,
    /// Next slot in the list (set before the slot is published).
    pub(crate) next: AtomicPtr<Slot>,
}

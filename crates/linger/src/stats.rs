//! Per-thread counters. Plain cells: the only writers are the owning thread
//! and its own signal handler.

use std::cell::Cell;

use crate::thread::ts;

macro_rules! stats {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Snapshot of this thread's counters (see [`stats`]).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[repr(C)]
        pub struct Stats {
            $($(#[$doc])* pub $name: u64,)*
        }

        pub(crate) struct StatCells {
            $(pub $name: Cell<u64>,)*
        }

        impl StatCells {
            pub(crate) const fn new() -> Self {
                StatCells { $($name: Cell::new(0),)* }
            }
            fn snapshot(&self) -> Stats {
                Stats { $($name: self.$name.get(),)* }
            }
            fn reset(&self) {
                $(self.$name.set(0);)*
            }
        }
    };
}

stats! {
    /// Functions launched.
    launches,
    /// Functions that returned (including after resumes).
    completions,
    /// Voluntary `pause()` calls that handed back control.
    pauses,
    /// Times a function was preempted because its deadline passed.
    preemptions,
    /// Of those, preemptions taken late at the end of a no-preempt scope
    /// (critical section, runtime code).
    deferred_preemptions,
    /// Deadline signals that found the function in code that must not be
    /// interrupted (libc, loader, std, a critical scope) and were deferred.
    deferrals,
    /// Timer signals that arrived early or when nothing was running.
    spurious_signals,
    /// Cancellations that unwound the function's stack, running destructors.
    cancels_unwound,
    /// Cancellations that reclaimed the stack without unwinding (function was
    /// preempted at an arbitrary instruction, or never started).
    cancels_reclaimed,
    /// Functions abandoned after overflowing their stack.
    stack_overflows,
    /// Panics propagated out of preemptible functions.
    panics,
    /// Largest delay between a deadline and the preemption, in nanoseconds.
    worst_overrun_ns,
}

/// Counters of the calling thread.
pub fn stats() -> Stats {
    ts().stats.snapshot()
}

/// Resets the calling thread's counters to zero.
pub fn reset_stats() {
    ts().stats.reset()
}

#[inline]
pub(crate) fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

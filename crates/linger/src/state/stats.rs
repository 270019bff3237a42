//! Per-thread counters. Plain cells: the only writers are the owning thread
//! and its own signal handler.

use std::cell::Cell;


/// Counters of the calling thread, from `linger::stats()` in Rust or
/// `linger_stats()` in C (where this is `linger_stats_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Stats {
    /// Functions launched.
    pub launches: u64,
    /// Functions that returned (including after resumes).
    pub completions: u64,
    /// Voluntary `pause()` calls that handed back control.
    pub pauses: u64,
    /// Times a function was preempted because its deadline passed.
    pub preemptions: u64,
    /// Of those, preemptions taken late at the end of a no-preempt scope
    /// (critical section, runtime code).
    pub deferred_preemptions: u64,
    /// Deadline signals that found the function in code that must not be
    /// interrupted (libc, loader, std, a critical scope) and were deferred.
    pub deferrals: u64,
    /// Timer signals that arrived early or when nothing was running.
    pub spurious_signals: u64,
    /// Cancellations that unwound the function's stack, running destructors.
    pub cancels_unwound: u64,
    /// Cancellations that reclaimed the stack without unwinding (function was
    /// preempted at an arbitrary instruction, or stopped in C code).
    pub cancels_reclaimed: u64,
    /// Functions abandoned after overflowing their stack.
    pub stack_overflows: u64,
    /// Panics propagated out of preemptible functions (Rust only).
    pub panics: u64,
    /// Largest delay between a deadline and the preemption, in nanoseconds.
    pub worst_overrun_ns: u64,
    /// Deadlines that found a function blocked in a system call and left it
    /// waiting until the call returned (`Builder::preempt_blocked(false)`).
    pub blocked_deadlines: u64,
    /// Deferred deadlines taken exactly when the deferred call returned to
    /// the function's own code (a return trap), not by a timer retry.
    pub return_traps: u64,
    /// Stack overflows inside library code that finished on the emergency
    /// reserve before the function was abandoned (also counted in
    /// `stack_overflows` when the caller receives them).
    pub library_overflows: u64,
    /// Libsets reset after their isolated function was cancelled or
    /// abandoned (see `Builder::isolated`).
    pub libset_resets: u64,
    /// Heap blocks those resets freed (what the isolated libraries had
    /// allocated for the cancelled calls).
    pub libset_blocks_freed: u64,
    /// Preemptions taken in a futex wait inside libc's synchronisation
    /// functions (`Builder::stop_in_futex_waits`; also counted in
    /// `preemptions`).
    pub futex_stops: u64,
    /// Where the deadline of the worst overrun first found the function in
    /// code that must not be stopped (the address of the instruction it
    /// interrupted: `dladdr` names the library), 0 if that deadline was
    /// not deferred. What to make preemptible, or isolate, to shorten it.
    pub worst_overrun_at: u64,
}

/// The live counters: one cell per field of [`Stats`].
macro_rules! cells {
    ($($name:ident),* $(,)?) => {
        pub(crate) struct StatCells {
            $(pub $name: Cell<u64>,)*
        }

        impl StatCells {
            pub(crate) const fn new() -> Self {
                StatCells { $($name: Cell::new(0),)* }
            }
            pub(crate) fn snapshot(&self) -> Stats {
                Stats { $($name: self.$name.get(),)* }
            }
            pub(crate) fn reset(&self) {
                $(self.$name.set(0);)*
            }
        }
    };
}

cells! {
    launches, completions, pauses, preemptions, deferred_preemptions, deferrals, spurious_signals,
    cancels_unwound, cancels_reclaimed, stack_overflows, panics, worst_overrun_ns, blocked_deadlines,
    return_traps, library_overflows, libset_resets, libset_blocks_freed, futex_stops, worst_overrun_at,
}

/// How one preemption went (see `last_preemption`); in C,
/// `linger_preemption_t`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Preemption {
    /// Time from the deadline to the stop, in nanoseconds.
    pub overrun_ns: u64,
    /// The deadline first found the function in code that must not be
    /// interrupted, and the stop waited for it to leave.
    pub deferred: bool,
    /// It was stopped in a futex wait (of libc's synchronisation functions,
    /// `Builder::stop_in_futex_waits`, or of std's, `stop_in_std_waits`):
    /// it is still waiting, and waits again when resumed.
    pub in_wait: bool,
}

#[inline]
pub(crate) fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

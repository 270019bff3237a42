//! The park seam's interface (documented and re-exported by `crate::park`):
//! a function's frame holds its hook, so the trait is defined below the
//! per-thread state.

use std::os::fd::RawFd;
use std::time::Duration;

/// Readiness a parked call waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interest {
    /// Data to read, a connection to accept, end of file or an error
    /// (`POLLIN`, `POLLPRI`, `POLLRDHUP` and `select`'s read and exception sets).
    Read,
    /// Room to write (`POLLOUT`, `POLLWRBAND`, `select`'s write set).
    Write,
}

/// Implemented by a green-thread runtime; called on the green thread's own
/// stack, inside the preemptible function, from linger's wrappers when a call
/// would block.
///
/// # Contract
///
/// - To wait, the hook switches back to its scheduler with [`crate::pause`]
///   (the function then reports [`yielded`](crate::Linger::yielded)) and
///   returns once the scheduler resumed it. It may return early or
///   spuriously: the wrapper tries its call again and parks again if it still
///   would block. A hook that returns at once without waiting makes the
///   wrapper spin; one that cannot wait returns `false`, and the wrapper then
///   makes the real blocking call, as without a hook.
/// - The wrapper calls the hook only where `pause()` switches: never inside
///   a [`critical`](crate::critical) scope, while the thread unwinds a panic,
///   in one of the program's signal handlers, or with code that must not be
///   preempted on the call chain (a `write` under `println!`'s lock); those calls block the thread as before and
///   are counted ([`counters`](crate::park::counters)). The hook's own code is preemptible like
///   the program's: state it shares with the scheduler on this thread needs
///   a `critical` scope (or [`defer_paths`](crate::defer_paths)), closed
///   before it pauses.
/// - A function cancelled while parked is reclaimed, not unwound (its stack
///   holds the wrappers' `extern "C"` frames): nothing the hook keeps on the
///   stack is dropped. Keep registrations elsewhere (a per-worker table).
/// - Program signals that arrive while the function is parked run on
///   whatever the thread runs meanwhile, as if sent to another thread; they
///   do not end the parked call. (With
///   [`hold_signals`](crate::Builder::hold_signals) they are held and run
///   when it resumes, and then end it with `EINTR` where the blocking call
///   would have.)
/// - Calls the hook itself makes through linger's wrappers (it runs inside
///   the function) do not park again: they block, or fail as they would.
/// - Blocking calls made by the program's own signal handlers never park
///   (they block, as before): the handler's frame sits on the interrupted
///   code, which may hold anything.
pub trait Park: Send + Sync + 'static {
    /// Returns once `fd` may be ready for `interest` (spurious returns are
    /// fine: the wrapper retries), or once the absolute `CLOCK_MONOTONIC`
    /// `deadline` has passed. Returns false if it cannot wait (then the
    /// wrapper makes the real blocking call, as today).
    fn wait_fd(&self, fd: RawFd, interest: Interest, deadline: Option<Duration>) -> bool;

    /// Several descriptors at once (`poll`, `select`): returns when any may be
    /// ready, or at the deadline. A descriptor may appear twice, once per
    /// interest. The set may be empty (`poll(NULL, 0, ms)`, a common way to
    /// sleep): then only the deadline ends the wait (with none, nothing
    /// does).
    fn wait_fds(&self, fds: &[(RawFd, Interest)], deadline: Option<Duration>) -> bool;

    /// Returns at the absolute `CLOCK_MONOTONIC` `deadline` (or later), or
    /// false if it cannot.
    fn sleep_until(&self, deadline: Duration) -> bool;

    /// Runs `work` on another thread (a blocking pool) and returns true once
    /// it has run; false if it cannot (then `work` must not run, and the
    /// wrapper makes its call itself, blocking). For calls readiness cannot
    /// help with: reads and writes of regular files whose data is not in the
    /// page cache. `work` owns everything it touches (a copy of the data,
    /// never the function's memory), so a function cancelled while it waits
    /// leaves nothing dangling. The default cannot.
    fn offload(&self, work: Box<dyn FnOnce() + Send>) -> bool {
        drop(work);
        false
    }
}

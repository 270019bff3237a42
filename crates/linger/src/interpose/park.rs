//! The park seam: how a green-thread runtime built on linger makes the
//! program's blocking calls wait without blocking its worker thread.
//!
//! A green thread is a preemptible function that a scheduler runs among many
//! on one OS thread. When its code calls `read` on an empty pipe, the
//! blocking call would stop every other green thread of that worker. linger
//! already owns the program's `read`, `poll`, `nanosleep`, ... (its wrappers,
//! `docs/safety.md`); this module lets a runtime it does not know about
//! (linger depends on no scheduler) take over the *waiting* part of those
//! calls: launch the function with [`Builder::park_with`](crate::Builder::park_with)
//! and a [`Park`] implementation, and inside it the wrappers call the hook
//! where the call would block. The hook registers interest with its reactor
//! or timer and switches back to the scheduler with [`crate::pause`]; the
//! scheduler resumes the function when the descriptor may be ready or the
//! deadline passed, the hook returns, and the wrapper makes its call again.
//!
//! # What the wrappers guarantee
//!
//! Blocking semantics stay as they were: a parked `read` returns what the
//! blocking call would have (data, 0 at end of file, an error), a `write`
//! returns once everything is written, a socket timeout (`SO_RCVTIMEO`,
//! `SO_SNDTIMEO`) still ends the call with `EAGAIN` at its expiry, `poll`,
//! `select` and `epoll_wait` report the kernel's own answer or time out,
//! sleeps last at least as long as asked. Parking never causes `EINTR`. The
//! descriptor's flags are never changed: a descriptor the program made
//! non-blocking (`O_NONBLOCK`) gets `EAGAIN` as before, without a park.
//! Which calls park, and which stay blocking (regular files, ttys, calls
//! with a signal mask, calls in a [`critical`](crate::critical) scope or
//! under code that must not be preempted, such as `println!`'s lock), is
//! listed in `docs/safety.md` ("The park seam").
//!
//! Outside functions launched with a hook nothing changes: the wrappers'
//! path outside preemptible functions is the same single thread-local load,
//! and inside a function without a hook they add one load and a branch.
//!
//! # Deadlines
//!
//! Deadlines are absolute times on `CLOCK_MONOTONIC`, given as the
//! [`Duration`] since that clock's epoch (what `clock_gettime(CLOCK_MONOTONIC)`
//! returns, as seconds and nanoseconds; [`monotonic_now`] reads it). A sleep
//! on `CLOCK_REALTIME` is converted once per park, and checked against its
//! own clock when the hook returns.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::state::park::{Interest, Park};

/// [`crate::pause`] for a hook's wait, without walking the hook's own
/// frames again. The wrapper that called the hook walked the call chain
/// above its call just before (a `pause()` must not switch out code that
/// may not be stopped: a library's, one holding a lock); a `pause()` inside
/// the hook walks again from its own frame up to the wrapper's, which costs
/// 0.4 us per park here. This one trusts the caller for those frames. Where
/// the shortcut does not hold (not inside a wrapper's call of the hook, the
/// table of code ranges rebuilt meanwhile, a `critical` scope), it is
/// [`crate::pause`].
///
/// # Safety
///
/// Call only from a [`Park`] method's own code (or code it calls), with no
/// frame between the wrapper's call of the method and this call running
/// code that must not be stopped: no library code, no lock held.
#[inline]
pub unsafe fn pause_in_hook() {
    // SAFETY: the caller's promise is the function's contract.
    unsafe { crate::handlers::preempt::pause_in_hook() }
}

/// The hook of the function running on this thread, if it was launched with
/// one (see [`Builder::park_with`](crate::Builder::park_with)). None outside
/// preemptible functions and inside functions launched without one (a
/// function nested in a green thread has none unless given one).
pub fn current() -> Option<Arc<dyn Park>> {
    let f = crate::state::thread::ts().current.get();
    if f.is_null() {
        return None;
    }
    // SAFETY: `current` is the live running function; its hook is only
    // taken when its stack is given back, after it stopped running.
    unsafe { (*(*f).park.as_ptr()).clone() }
}

/// What `CLOCK_MONOTONIC` reads now, as a deadline is given to [`Park`].
pub fn monotonic_now() -> Duration {
    let t = crate::base::sys::now(libc::CLOCK_MONOTONIC);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// A close observer: told the first and last number of a range of
/// descriptors the program just closed or replaced.
pub type CloseObserver = fn(first: RawFd, last: RawFd);

/// The installed observer (a `CloseObserver` as an address; 0: none).
static OBSERVER: AtomicUsize = AtomicUsize::new(0);

/// Installs `observer`, called after every `close`, `dup2`, `dup3`,
/// `close_range` and `fclose` the program makes through libc (not libc's
/// own closes, as in `closedir`), on the calling thread, with the numbers that no longer
/// name the file they named. A runtime whose hook keeps registrations by
/// descriptor number (the kernel drops an epoll registration silently when
/// the file goes) uses it to wake the threads parked there.
///
/// It runs wherever the program closes a descriptor, in signal handlers and
/// forked children too: it must be async-signal-safe, and fast (one load and
/// a branch when none of the numbers has a waiter). The program's errno is
/// kept around it.
///
/// One observer per process: false if another one is installed already
/// (installing the same one again is true).
pub fn on_close(observer: CloseObserver) -> bool {
    let f = observer as usize;
    match OBSERVER.compare_exchange(0, f, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => true,
        Err(old) => old == f,
    }
}

/// From the close wrappers (`interpose::fds`).
pub(crate) fn closed(first: RawFd, last: RawFd) {
    let f = OBSERVER.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: only `on_close` stores here, and only `CloseObserver`s.
        let observer = unsafe { std::mem::transmute::<usize, CloseObserver>(f) };
        observer(first, last);
    }
}

/// The calling thread's park counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Waits handed to a hook (`wait_fd`, `wait_fds`, `sleep_until` calls
    /// that returned true).
    pub parks: u64,
    /// Calls that would have parked but blocked the thread instead: in a
    /// `critical` scope, under code that must not be preempted, while
    /// unwinding, or because the hook returned false.
    pub blocked: u64,
}

/// The park counters of the calling thread (counted where the function ran
/// at the time). [`reset_stats`](crate::reset_stats) resets them too.
pub fn counters() -> Counters {
    let t = crate::state::thread::ts();
    Counters { parks: t.parks.get(), blocked: t.parks_blocked.get() }
}

/// A hook as [`crate::Builder`] keeps it.
#[derive(Clone)]
pub(crate) struct Hook(pub Arc<dyn Park>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Park")
    }
}

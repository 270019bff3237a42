//! Green threads: blocking-style code, many threads per worker, preempted.
//!
//! ```
//! use std::time::Duration;
//!
//! let h = turquoise::thread::spawn(|| {
//!     turquoise::thread::sleep(Duration::from_millis(1)); // parks, the worker goes on
//!     6 * 7
//! });
//! assert_eq!(h.join().unwrap(), 42);
//! ```
//!
//! A green thread is a `linger` preemptible function run as a task of a
//! [`crate::Runtime`]: it runs for at most its slice (the runtime's, 2 ms by
//! default) and is then stopped wherever it is and put behind the other
//! runnable work; when it waits ([`sleep`], [`block_on`], [`JoinHandle::join`])
//! it parks and its worker runs something else. Called outside any
//! runtime, [`spawn`] starts a default one, with one worker per CPU.
//!
//! Each green thread has its own values of the program's thread-locals
//! (`thread_local!`, C `__thread` in the executable), swapped in and out
//! with it; it runs on the worker that started it from its first
//! instruction to its last (see `green.rs` and `docs/safety.md`, "Green
//! threads").

mod activity;
mod builder;
mod join_set;

use std::time::Duration;

pub use activity::{checkpoint, no_yield, spawn_local, LocalJoinHandle};
pub use crate::green::block::block_on;
pub(crate) use builder::start_default_runtime;
pub use builder::{spawn, Builder, JoinHandle, MAX_STACK_SIZE};
pub use join_set::JoinSet;
pub(crate) use crate::green::block::{block_on_as, block_on_until_as};
pub use crate::green::types::{Exited, StackOverflow, Thread, ThreadId};
pub(crate) use crate::green::records::{kill_live, GreenJob, GreenShared, Queues, Ran, Spawned};
pub use crate::green::dump::{dump, dump_text};
pub use crate::base::thread_stats::{Cause, State, ThreadInfo, ThreadStats};
pub use crate::green::tls::image_bytes;
pub(crate) use crate::base::thread_stats::Counters as GreenCounters;

/// The green thread calling, or `None` on an ordinary thread (or in an
/// async task).
pub fn current() -> Option<Thread> {
    crate::green::records::current().map(|g| g.thread.clone())
}

/// Sleeps for `d`: a green thread parks on its worker's timer; an ordinary
/// thread sleeps.
pub fn sleep(d: Duration) {
    if crate::green::records::current().is_some() && !linger::in_critical() && crate::base::context::drivers().is_some_and(|d| d.time) {
        let until = crate::base::thread_stats::monotonic().saturating_add(d).as_nanos() as u64;
        block_on_as(Cause::Timer, until, tokio::time::sleep(d));
    } else {
        std::thread::sleep(d);
    }
}

/// Blocks until the calling thread's park token is available, then takes
/// it, as `std::thread::park`: a green thread parks (its worker runs other
/// work) until [`Thread::unpark`]; an ordinary thread is
/// `std::thread::park`'s. May return without an unpark (as std's): call
/// it in a loop that checks a condition.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use turquoise::thread;
///
/// let ready = Arc::new(AtomicBool::new(false));
/// let r = ready.clone();
/// let waiter = thread::spawn(move || {
///     while !r.load(Ordering::Acquire) {
///         thread::park();
///     }
/// });
/// ready.store(true, Ordering::Release);
/// waiter.thread().unpark();
/// waiter.join().unwrap();
/// ```
pub fn park() {
    match crate::green::records::current() {
        Some(g) => {
            crate::green::block::park_token(g, None);
        }
        None => std::thread::park(),
    }
}

/// [`park`] for at most `timeout` (`std::thread::park_timeout`'s).
pub fn park_timeout(timeout: Duration) {
    match crate::green::records::current() {
        Some(g) => {
            // A timeout too long to add to now: no deadline.
            crate::green::block::park_token(g, std::time::Instant::now().checked_add(timeout));
        }
        None => std::thread::park_timeout(timeout),
    }
}

/// Gives the worker to the other runnable work: a green thread goes behind
/// it; an ordinary thread yields to the OS.
pub fn yield_now() {
    if crate::green::records::current().is_some() {
        // A `critical` scope (an activity's no-yield scope) holds every
        // switch back.
        if linger::in_critical() {
            return;
        }
        crate::green::records::yield_now();
    } else {
        std::thread::yield_now();
    }
}

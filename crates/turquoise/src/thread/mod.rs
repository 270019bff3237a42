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

use std::time::Duration;

pub use activity::{checkpoint, no_yield, spawn_local, LocalJoinHandle};
pub use crate::green::block::block_on;
pub(crate) use builder::start_default_runtime;
pub use builder::{spawn, Builder, JoinHandle, MAX_STACK_SIZE};
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

//! Poll counters, kept per task (for its `JoinHandle`) and per worker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counts of polls and how their preemptions went. Relaxed: each is written
/// by the polls of one task or one worker at a time, and readers want a
/// recent value, not an ordering.
#[derive(Default)]
pub(crate) struct PollCounters {
    polls: AtomicU64,
    preemptions: AtomicU64,
    deferred_preemptions: AtomicU64,
    worst_overrun_ns: AtomicU64,
}

impl PollCounters {
    /// One poll: stopped by its slice or not, and how the stop went.
    pub(crate) fn add(&self, preempted: bool, p: Option<linger::Preemption>) {
        self.polls.fetch_add(1, Ordering::Relaxed);
        if preempted {
            self.preemptions.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(p) = p {
            self.deferred_preemptions.fetch_add(p.deferred as u64, Ordering::Relaxed);
            self.worst_overrun_ns.fetch_max(p.overrun_ns, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> PollStats {
        PollStats {
            polls: self.polls.load(Ordering::Relaxed),
            preemptions: self.preemptions.load(Ordering::Relaxed),
            deferred_preemptions: self.deferred_preemptions.load(Ordering::Relaxed),
            worst_overrun: Duration::from_nanos(self.worst_overrun_ns.load(Ordering::Relaxed)),
            misplaced: 0,
        }
    }
}

/// Counters of one preemptible future (or runtime task).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Outer polls.
    pub polls: u64,
    /// Outer polls whose slice ran out in the middle of an inner poll.
    pub preemptions: u64,
    /// Of those, preemptions whose deadline found the poll in code that
    /// must not be interrupted (tokio's, libc's, a critical scope) and
    /// waited for it to return.
    pub deferred_preemptions: u64,
    /// The latest stop after a deadline: time from the deadline to the
    /// stop, worst over the preemptions so far.
    pub worst_overrun: Duration,
    /// Outer polls on another thread than the one the stopped inner poll
    /// ran on: not resumed (see the module's doc).
    pub misplaced: u64,
}

/// One worker's counters (see `Runtime::worker_metrics`).
#[derive(Default)]
pub(crate) struct WorkerCounters {
    pub(crate) polls: PollCounters,
    pub(crate) steals: AtomicU64,
    pub(crate) parks: AtomicU64,
    /// Its green threads' switches, preemptions, parks and waits.
    pub(crate) green: crate::thread::GreenCounters,
}

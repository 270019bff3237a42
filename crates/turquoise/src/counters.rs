//! Poll counters, kept per task (for its `JoinHandle`) and per worker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::future::PollStats;

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

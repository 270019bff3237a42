//! What a spawner holds: a task's or a green thread's `JoinHandle`, and
//! its `AbortHandle`. Above the tasks and the green threads' records, which
//! it names both.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::base::counters::PollStats;
use crate::preemptible::task::{JoinError, Shared, Wait};

/// Owned permission to wait for a task (like tokio's): awaiting it gives
/// the task's value, or why there is none. Dropping it detaches the task,
/// which goes on running; [`abort`](JoinHandle::abort) cancels it.
pub struct JoinHandle<T> {
    /// What it waits on; `None` once it has given the value.
    pub(crate) wait: Option<Wait<T>>,
    pub(crate) owner: Owner,
}

/// What a handle aborts and reads counters from: a task's shared part, or
/// a green thread's record itself (a green thread is not a task: no task
/// part is allocated for it).
#[derive(Clone)]
pub(crate) enum Owner {
    Task(Arc<Shared>),
    Green(Arc<crate::thread::GreenShared>),
}

impl Owner {
    fn abort(&self) {
        match self {
            Owner::Task(s) => s.abort(),
            Owner::Green(g) => g.abort(),
        }
    }
}

impl<T> JoinHandle<T> {
    /// The handle of a green thread just spawned.
    #[inline]
    pub(crate) fn green(s: crate::thread::Spawned<T>) -> JoinHandle<T> {
        JoinHandle { wait: Some(s.wait), owner: Owner::Green(s.record) }
    }

    /// Cancels the task: its future is dropped at its next turn, on its
    /// worker. A task that waits is unwound (its destructors run); one
    /// whose poll was stopped by its slice is reclaimed without unwinding
    /// (`docs/safety.md`, "turquoise"). Awaiting the handle then gives
    /// `JoinError::Cancelled`, unless the task had finished already.
    pub fn abort(&self) {
        if self.wait.is_some() {
            self.owner.abort();
        }
    }

    /// A handle that can abort the task without owning the right to await
    /// it (shareable, as tokio's).
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle { owner: self.owner.clone() }
    }

    /// The task's counters so far: polls, preemptions, deferred
    /// preemptions and the worst overrun (all zero but polls for a
    /// cooperative task).
    pub fn stats(&self) -> PollStats {
        match &self.owner {
            Owner::Green(g) => g.polls.get(),
            Owner::Task(s) => s.counters.get(),
        }
    }

    /// A green thread's counters (None for other tasks).
    pub(crate) fn green_stats(&self) -> Option<crate::thread::ThreadStats> {
        match &self.owner {
            Owner::Green(g) => Some(g.status.counters.get()),
            Owner::Task(_) => None,
        }
    }

    /// Has the task finished (returned, panicked or been cancelled)?
    pub fn is_finished(&self) -> bool {
        match &self.wait {
            None => true,
            Some(Wait::Task(t)) => t.is_finished(),
            Some(Wait::Cell(c)) => c.cell().is_done(),
        }
    }
}

/// Aborts a task, or cancels a green thread, from anywhere (see
/// [`JoinHandle::abort_handle`] and `thread::JoinHandle::abort_handle`).
#[derive(Clone)]
pub struct AbortHandle {
    owner: Owner,
}

impl AbortHandle {
    /// See [`JoinHandle::abort`] (for a green thread,
    /// `thread::JoinHandle::cancel`); nothing if it has finished.
    pub fn abort(&self) {
        self.owner.abort();
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle").finish_non_exhaustive()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = match self.wait.as_mut() {
            None => panic!("turquoise: JoinHandle polled after completion"),
            Some(Wait::Task(task)) => Pin::new(task).poll(cx).map(|r| r.unwrap_or(Err(JoinError::Cancelled))),
            Some(Wait::Cell(c)) => c.cell().poll(cx),
        };
        if r.is_ready() {
            self.wait = None;
        }
        r
    }
}

impl<T> Drop for JoinHandle<T> {
    #[inline]
    fn drop(&mut self) {
        if let Some(Wait::Task(t)) = self.wait.take() {
            t.detach();
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("finished", &self.is_finished()).finish()
    }
}

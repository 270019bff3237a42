//! A runtime task: the future it runs (preemptible or not), what the
//! scheduler and its `JoinHandle` share, and the handle itself.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::counters::PollCounters;
use crate::future::{PollStats, Preemptible};

/// What a task's scheduler entry, its future and its handle share.
pub(crate) struct Shared {
    /// `abort()` was called: the next poll drops the future.
    pub(crate) aborted: AtomicBool,
    /// The task's own waker, for `abort()`: set at spawn, taken when the
    /// future is dropped (it holds the task's cell, which holds this).
    pub(crate) waker: Mutex<Option<Waker>>,
    /// 1 + the worker whose thread the task's last poll was stopped on
    /// (0: not stopped, it may run anywhere). Written by the polling
    /// worker before async-task can schedule the task again.
    pub(crate) pinned: AtomicUsize,
    /// 1 + the worker a started green thread lives on (0: none): woken at
    /// rest, it goes to that worker's ready queue. Written like `pinned`.
    pub(crate) home: AtomicUsize,
    /// The task's counters, for its handle.
    counters: PollCounters,
    /// A green thread's own record (its counters), set at spawn.
    pub(crate) green: std::sync::OnceLock<Arc<crate::thread::GreenShared>>,
}

impl Shared {
    pub(crate) fn new() -> Arc<Shared> {
        Arc::new(Shared {
            aborted: AtomicBool::new(false),
            waker: Mutex::new(None),
            pinned: AtomicUsize::new(0),
            home: AtomicUsize::new(0),
            green: std::sync::OnceLock::new(),
            counters: PollCounters::default(),
        })
    }

    /// Cancels the task at its next turn (see `JoinHandle::abort`); nothing
    /// once it has finished.
    fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        // A finished task's future is gone, and its waker with it.
        let w = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// After a poll: the task's counters, and its worker's.
    fn count(&self, preempted: bool, p: Option<linger::Preemption>) {
        self.counters.add(preempted, p);
        crate::scheduler::count_poll(preempted, p);
    }
}

/// Why a task did not return a value.
pub enum JoinError {
    /// Aborted (`JoinHandle::abort`) or dropped with its runtime.
    Cancelled,
    /// It panicked; the payload.
    Panic(Box<dyn Any + Send + 'static>),
    /// A green thread tried to join itself (it would wait forever).
    SelfJoin,
    /// Cancelled where unwinding is not defined (a poll stopped by its slice
    /// in the middle of the task's code; a green thread stopped there, or
    /// parked inside a libc call): reclaimed, its destructors did not run
    /// and what it owned stays allocated (`docs/safety.md`, "Cancellation").
    Reclaimed,
}

impl JoinError {
    /// Was the task cancelled (unwound or reclaimed)?
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled | JoinError::Reclaimed)
    }

    /// Was it cancelled where unwinding is not defined, so that its
    /// destructors did not run?
    pub fn is_reclaimed(&self) -> bool {
        matches!(self, JoinError::Reclaimed)
    }

    /// Did the task panic?
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panic(_))
    }

    /// Did a green thread try to join itself?
    pub fn is_self_join(&self) -> bool {
        matches!(self, JoinError::SelfJoin)
    }

    /// The panic's payload. Panics if the task did not panic.
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self {
            JoinError::Panic(p) => p,
            e => panic!("turquoise: `into_panic` on a JoinError that is not a panic: {e}"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("JoinError::Cancelled"),
            JoinError::Panic(_) => f.write_str("JoinError::Panic(..)"),
            JoinError::SelfJoin => f.write_str("JoinError::SelfJoin"),
            JoinError::Reclaimed => f.write_str("JoinError::Reclaimed"),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("task was cancelled"),
            JoinError::Panic(_) => f.write_str("task panicked"),
            JoinError::SelfJoin => f.write_str("a green thread cannot join itself"),
            JoinError::Reclaimed => f.write_str("task was cancelled where it could not be unwound (reclaimed: its destructors did not run)"),
        }
    }
}

impl std::error::Error for JoinError {}

/// The future a task runs.
pub(crate) enum Body<F: Future>
where
    F::Output: Send + 'static,
{
    Preemptible(Preemptible<F::Output>),
    Cooperative(Pin<Box<F>>),
    /// A green thread (`F` is only a marker of the output type).
    Green(crate::thread::Green<F::Output>),
}

/// The whole task: its body, aborts, and panics caught for the handle.
pub(crate) struct TaskFuture<F: Future>
where
    F::Output: Send + 'static,
{
    pub(crate) body: Option<Body<F>>,
    pub(crate) shared: Arc<Shared>,
}

impl<F> Future for TaskFuture<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = Result<F::Output, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.shared.aborted.load(Ordering::Acquire) {
            // Dropped here: unwound if it waits, reclaimed if a poll of it
            // is stopped (see `Preemptible`); always on this thread, its
            // home when it is stopped (the scheduler saw to that). The
            // handle learns which.
            let reclaimed = match this.body.as_mut() {
                Some(Body::Preemptible(p)) => p.is_stopped(),
                Some(Body::Green(g)) => g.cancel() == linger::Cancelled::Reclaimed,
                _ => false,
            };
            this.body = None;
            this.shared.pinned.store(0, Ordering::Relaxed);
            return Poll::Ready(Err(if reclaimed { JoinError::Reclaimed } else { JoinError::Cancelled }));
        }
        let Some(body) = this.body.as_mut() else { return Poll::Ready(Err(JoinError::Cancelled)) };
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| match body {
            Body::Preemptible(p) => Pin::new(p).poll(cx),
            Body::Cooperative(f) => f.as_mut().poll(cx),
            Body::Green(g) => Pin::new(g).poll(cx),
        }));
        let (preempted, how) = match this.body {
            Some(Body::Preemptible(ref p)) => (p.is_stopped(), p.last_preemption()),
            Some(Body::Green(ref g)) => (g.is_stopped(), g.last_preemption()),
            _ => (false, None),
        };
        this.shared.count(preempted, how);
        match r {
            Ok(Poll::Ready(v)) => {
                this.body = None;
                this.shared.pinned.store(0, Ordering::Relaxed);
                Poll::Ready(Ok(v))
            }
            Ok(Poll::Pending) => {
                let (stopped, started) = match this.body {
                    Some(Body::Preemptible(ref p)) => (p.is_stopped(), false),
                    Some(Body::Green(ref g)) => (g.is_stopped(), g.is_started()),
                    _ => (false, false),
                };
                let here = crate::scheduler::current_worker().map_or(0, |w| w + 1);
                this.shared.pinned.store(if stopped { here } else { 0 }, Ordering::Relaxed);
                // A started green thread never leaves its worker.
                if started && this.shared.home.load(Ordering::Relaxed) == 0 {
                    this.shared.home.store(here, Ordering::Relaxed);
                }
                Poll::Pending
            }
            Err(panic) => {
                this.body = None;
                this.shared.pinned.store(0, Ordering::Relaxed);
                Poll::Ready(Err(JoinError::Panic(panic)))
            }
        }
    }
}

impl<F: Future> Drop for TaskFuture<F>
where
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        // The task's cell holds `shared`, which would hold the cell.
        self.shared.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Owned permission to wait for a task (like tokio's): awaiting it gives
/// the task's value, or why there is none. Dropping it detaches the task,
/// which goes on running; [`abort`](JoinHandle::abort) cancels it.
pub struct JoinHandle<T> {
    /// Fallible: a task dropped unrun (with its runtime) gives `None`.
    pub(crate) task: Option<async_task::FallibleTask<Result<T, JoinError>, Arc<Shared>>>,
    pub(crate) shared: Arc<Shared>,
}

impl<T> JoinHandle<T> {
    /// Cancels the task: its future is dropped at its next turn, on its
    /// worker. A task that waits is unwound (its destructors run); one
    /// whose poll was stopped by its slice is reclaimed without unwinding
    /// (`docs/safety.md`, "turquoise"). Awaiting the handle then gives
    /// `JoinError::Cancelled`, unless the task had finished already.
    pub fn abort(&self) {
        if self.task.is_some() {
            self.shared.abort();
        }
    }

    /// A handle that can abort the task without owning the right to await
    /// it (shareable, as tokio's).
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle { shared: self.shared.clone() }
    }

    /// The task's counters so far: polls, preemptions, deferred
    /// preemptions and the worst overrun (all zero but polls for a
    /// cooperative task).
    pub fn stats(&self) -> PollStats {
        self.shared.counters.get()
    }

    /// A green thread's counters (None for other tasks).
    pub(crate) fn green_stats(&self) -> Option<crate::thread::ThreadStats> {
        self.shared.green.get().map(|s| s.status.counters.get())
    }

    /// Has the task finished (returned, panicked or been cancelled)?
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }
}

/// Aborts a task from anywhere (see [`JoinHandle::abort_handle`]).
#[derive(Clone)]
pub struct AbortHandle {
    shared: Arc<Shared>,
}

impl AbortHandle {
    /// See [`JoinHandle::abort`]; nothing if the task has finished.
    pub fn abort(&self) {
        self.shared.abort();
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle").finish_non_exhaustive()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(task) = self.task.as_mut() else { panic!("turquoise: JoinHandle polled after completion") };
        match Pin::new(task).poll(cx) {
            Poll::Ready(r) => {
                self.task = None;
                Poll::Ready(r.unwrap_or(Err(JoinError::Cancelled)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.detach();
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("finished", &self.is_finished()).finish()
    }
}

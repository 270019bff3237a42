//! A runtime task: the future it runs (preemptible or not), what the
//! scheduler and its `JoinHandle` share (the handle itself is in
//! `join.rs`), and where a green thread leaves its value.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures_util::task::AtomicWaker;

use crate::base::counters::PollCounters;
use crate::preemptible::future::Preemptible;

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
    /// The task's counters, for its handle.
    pub(crate) counters: PollCounters,
}

impl Shared {
    pub(crate) fn new() -> Arc<Shared> {
        Arc::new(Shared {
            aborted: AtomicBool::new(false),
            waker: Mutex::new(None),
            pinned: AtomicUsize::new(0),
            counters: PollCounters::default(),
        })
    }

    /// Cancels the task at its next turn (see `JoinHandle::abort`); nothing
    /// once it has finished.
    pub(crate) fn abort(&self) {
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
        crate::base::context::count_poll(preempted, p);
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
                _ => false,
            };
            this.body = None;
            this.shared.pinned.store(0, Ordering::Relaxed);
            return Poll::Ready(Err(if reclaimed { JoinError::Reclaimed } else { JoinError::Cancelled }));
        }
        let Some(body) = this.body.as_mut() else { return Poll::Ready(Err(JoinError::Cancelled)) };
        // Whatever the task's poll traces is inside its span (a no-op unless
        // a subscriber wants TRACE of `turquoise`); the id is the task's
        // address, unique while it lives.
        #[cfg(feature = "tracing")]
        let _span = tracing::trace_span!(target: "turquoise", "task", id = Arc::as_ptr(&this.shared) as usize).entered();
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| match body {
            Body::Preemptible(p) => Pin::new(p).poll(cx),
            Body::Cooperative(f) => f.as_mut().poll(cx),
        }));
        let (preempted, how) = match this.body {
            Some(Body::Preemptible(ref p)) => (p.is_stopped(), p.last_preemption()),
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
                let stopped = matches!(this.body, Some(Body::Preemptible(ref p)) if p.is_stopped());
                let here = crate::base::context::current_worker().map_or(0, |w| w + 1);
                this.shared.pinned.store(if stopped { here } else { 0 }, Ordering::Relaxed);
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

/// Where a handle's value comes from.
pub(crate) enum Wait<T> {
    /// A task's: fallible, a task dropped unrun (with its runtime) gives
    /// `None`.
    Task(async_task::FallibleTask<Result<T, JoinError>, Arc<Shared>>),
    /// A green thread's, which is not a task (`thread/green.rs`).
    Cell(Arc<dyn HasCell<T>>),
}

/// What holds a green thread's join cell (its typed part, which the
/// handle shares rather than owning a cell of its own).
pub(crate) trait HasCell<T>: Send + Sync {
    fn cell(&self) -> &JoinCell<T>;
}

/// Where a green thread leaves its value, or why there is none, for its
/// handle: written once, by the worker that ran (or ended) it.
pub(crate) struct JoinCell<T> {
    value: Mutex<Option<Result<T, JoinError>>>,
    done: AtomicBool,
    waker: AtomicWaker,
}

impl<T> JoinCell<T> {
    pub(crate) fn new() -> JoinCell<T> {
        JoinCell { value: Mutex::new(None), done: AtomicBool::new(false), waker: AtomicWaker::new() }
    }

    /// Leaves the outcome, if none was left before (a thread ended twice,
    /// by its worker and at shutdown, keeps the first).
    pub(crate) fn complete(&self, r: Result<T, JoinError>) {
        {
            let mut v = self.value.lock().unwrap_or_else(|e| e.into_inner());
            if self.done.load(Ordering::Relaxed) {
                return;
            }
            *v = Some(r);
            self.done.store(true, Ordering::Release);
        }
        self.waker.wake();
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        if !self.is_done() {
            self.waker.register(cx.waker());
            // Registered first, looked second: a completion after the look
            // finds the waker.
            if !self.is_done() {
                return Poll::Pending;
            }
        }
        let v = self.value.lock().unwrap_or_else(|e| e.into_inner()).take();
        Poll::Ready(v.unwrap_or(Err(JoinError::Cancelled)))
    }
}

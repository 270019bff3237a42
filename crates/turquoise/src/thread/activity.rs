//! Activities (seed 004): green threads of one worker that switch only
//! where their code lets them, so that they may share `!Send` data.
//!
//! An activity is a green thread that is never preempted and never leaves
//! the worker that spawned it, unstarted included. It switches at its
//! blocking calls (which park it), at explicit yields, and at yield checks
//! ([`checkpoint`]): the worker's timer only raises a flag each slice (linger's
//! cooperative resume), and a check is one thread-local load and a branch
//! when nothing is due. Between two switch points an activity runs alone on
//! its worker, and the worker runs one thing at a time: activities of one
//! worker are concurrent, never parallel, so `Rc` and `RefCell` shared
//! between them are sound (`spawn_local` takes closures that are not
//! `Send`). [`no_yield`] scopes suppress every switch inside them.
//!
//! ```
//! use std::cell::RefCell;
//! use std::rc::Rc;
//! use turquoise::thread;
//!
//! // An activity (a green thread that is not preemptive) starts the others.
//! let root = thread::Builder::new().preemptive(false).spawn(|| {
//!     let shared = Rc::new(RefCell::new(0u64));
//!     let all: Vec<_> = (0..10)
//!         .map(|_| {
//!             let s = shared.clone();
//!             thread::spawn_local(move || {
//!                 for _ in 0..100 {
//!                     *s.borrow_mut() += 1; // never interrupted half-way
//!                     thread::checkpoint(); // may switch here, and nowhere else
//!                 }
//!             })
//!         })
//!         .collect();
//!     for a in all {
//!         a.join().unwrap();
//!     }
//!     let n = *shared.borrow();
//!     n
//! });
//! assert_eq!(root.unwrap().join().unwrap(), 1000);
//! ```
//!
//! A closure that is not `Send` cannot go to a parallel green thread:
//!
//! ```compile_fail
//! let shared = std::rc::Rc::new(0);
//! turquoise::thread::spawn(move || *shared + 1); // Rc is not Send
//! ```
//!
//! nor can an activity's handle (its result need not be `Send`) leave the
//! worker's code:
//!
//! ```compile_fail
//! fn send<T: Send>(_: T) {}
//! let h = turquoise::thread::spawn_local(|| std::rc::Rc::new(1));
//! send(h);
//! ```
//!
//! Why sharing is sound, and what stays the user's job: `docs/safety.md`,
//! "Activities".

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use crate::green::records;
use super::{Builder, JoinHandle, Thread};
use crate::sched::runtime::Handle;
use crate::preemptible::task::JoinError;

std::thread_local! {
    /// This OS thread's number, never reused (see [`HomeBound`]).
    static THREAD_NO: Cell<u64> = const { Cell::new(0) };
}

/// A yield check: inside an activity whose slice has ended, yields to the
/// other runnable work of its worker (unless inside a [`no_yield`] scope);
/// otherwise returns at once. With nothing due it costs one thread-local
/// load and a branch. Anywhere else (a preemptive green thread, an ordinary
/// thread) it does nothing.
#[inline]
pub fn checkpoint() {
    if records::DUE.with(|d| d.load(Ordering::Relaxed)) != 0 {
        checkpoint_due();
    }
}

#[cold]
#[inline(never)]
fn checkpoint_due() {
    if linger::is_cooperative() && records::current().is_some() && !linger::in_critical() {
        records::yield_now();
    }
}

/// Runs `f` with every switch of the calling activity held back: no yield
/// check or explicit yield switches inside it, and its blocking calls block
/// the worker instead of parking. It is linger's `critical` scope, which
/// also keeps a preemptive green thread from being stopped inside.
#[inline]
pub fn no_yield<R>(f: impl FnOnce() -> R) -> R {
    linger::critical(f)
}

/// Starts `f` as an activity on the calling worker (see the module doc).
///
/// # Panics
/// Outside a worker of a turquoise runtime (a task's, a green thread's or an
/// activity's code), or when no stack can be had: [`Builder::spawn_local`]
/// returns these as errors.
pub fn spawn_local<F, T>(f: F) -> LocalJoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    match Builder::new().spawn_local(f) {
        Ok(h) => h,
        Err(e) => panic!("turquoise::thread::spawn_local: {e}"),
    }
}

impl Builder {
    /// Starts `f` as an activity on the calling worker. Its slice (the
    /// builder's, else the runtime's) is the period of its yield checks'
    /// flag; `preemptive` does not apply (an activity never is).
    ///
    /// Errors: `Other` outside a worker of a turquoise runtime or once it
    /// shut down, `InvalidInput` for a stack larger than
    /// [`super::MAX_STACK_SIZE`], and the errors of getting a stack.
    pub fn spawn_local<F, T>(self, f: F) -> io::Result<LocalJoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let not_here = || io::Error::other("turquoise: spawn_local outside a worker of a turquoise runtime");
        let handle = Handle::try_current().ok_or_else(not_here)?;
        handle.current_worker().ok_or_else(not_here)?;
        // The caller shares `f`'s data: it must not be stopped half-way
        // through it either (a preemptive green thread or poll would be).
        // (Inside an activity, a preemptible function it launched counts as
        // preemptible code: it could be stopped in the middle of an `Rc`
        // it shared.)
        if linger::is_preemptible() && !linger::is_cooperative() {
            return Err(io::Error::other(
                "turquoise: spawn_local from preemptible code (its data, shared with the activity, could be left half updated by a stop); call it from an activity or a cooperative task",
            ));
        }
        self.check(&handle)?;
        let slice = self.slice.unwrap_or_else(|| handle.slice());
        let body = HomeBound::new(f);
        let run = move || {
            let f = body.into_inner();
            HomeBound::new(f())
        };
        let spec = records::Spec { thread: Thread::new(self.name.map(std::sync::Arc::from)), stack_size: self.stack_size, slice, own_tls: !self.shared_thread_locals, cooperative: true, park: crate::green::park::HOOK.clone() };
        // SAFETY: we are on a worker of `handle` (checked above), where the
        // activity stays (`records::spawn_local`); `run` and its result cross
        // no thread: see `HomeBound`.
        let spawned = unsafe { records::spawn_local(handle.scheduler(), run, spec) }.map_err(io::Error::from)?;
        let thread = spawned.record.thread.clone();
        let task = crate::sched::join::JoinHandle::green(spawned);
        Ok(LocalJoinHandle { inner: JoinHandle { task, thread }, _not_send: PhantomData })
    }
}

/// Owned permission to join an activity. Not `Send`: it stays with the
/// code of the worker that spawned the activity, where the result (which
/// need not be `Send`) is made. Dropping it detaches the activity; it is
/// also a `Future`, for the worker's async tasks.
pub struct LocalJoinHandle<T> {
    inner: JoinHandle<HomeBound<T>>,
    _not_send: PhantomData<*const ()>,
}

impl<T> LocalJoinHandle<T> {
    /// Waits for the activity to end: parks the calling green thread or
    /// activity (an async task awaits the handle instead).
    pub fn join(self) -> Result<T, JoinError> {
        self.inner.join().map(HomeBound::into_inner)
    }

    /// The activity's id and name.
    pub fn thread(&self) -> &Thread {
        self.inner.thread()
    }

    /// Has it ended?
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// Its counters, `overruns` among them.
    pub fn thread_stats(&self) -> super::ThreadStats {
        self.inner.thread_stats()
    }

    /// Cancels it at its next turn (see [`JoinHandle::cancel`]).
    pub fn cancel(&self) {
        self.inner.cancel();
    }
}

impl<T> Future for LocalJoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.inner).poll(cx).map(|r| r.map(HomeBound::into_inner))
    }
}

impl<T> fmt::Debug for LocalJoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalJoinHandle").field("thread", self.thread()).field("finished", &self.is_finished()).finish()
    }
}

/// A value that is used on the OS thread that made it only: an activity's
/// closure and its result, which need not be `Send`, inside the runtime's
/// task machinery, which is written for values that move between threads.
/// Touched elsewhere, it is not touched: [`HomeBound::into_inner`] there
/// panics, and a drop there leaks the value instead of running its
/// destructor on the wrong thread.
pub(crate) struct HomeBound<T> {
    value: ManuallyDrop<T>,
    home: u64,
}

// SAFETY: the value is reached (taken or dropped) only on the thread whose
// number `home` is, which is the thread that made it; on any other thread
// it is left alone (leaked). So the value is used as if it never moved.
unsafe impl<T> Send for HomeBound<T> {}

impl<T> HomeBound<T> {
    pub(crate) fn new(value: T) -> HomeBound<T> {
        HomeBound { value: ManuallyDrop::new(value), home: thread_no() }
    }

    /// The value, on its own thread.
    ///
    /// # Panics
    /// On any other thread (the value is then leaked).
    pub(crate) fn into_inner(self) -> T {
        assert_eq!(self.home, thread_no(), "turquoise: an activity's value reached another thread");
        let mut me = ManuallyDrop::new(self);
        // SAFETY: taken once: `me` is never dropped, so `value` is not
        // dropped again.
        unsafe { ManuallyDrop::take(&mut me.value) }
    }
}

impl<T> Drop for HomeBound<T> {
    fn drop(&mut self) {
        if self.home == thread_no() {
            // SAFETY: dropped once, here, on its own thread.
            unsafe { ManuallyDrop::drop(&mut self.value) };
        }
    }
}

/// The calling OS thread's number, unique for the life of the process
/// (thread-local addresses are reused by later threads).
fn thread_no() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    THREAD_NO.with(|n| {
        if n.get() == 0 {
            n.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        n.get()
    })
}

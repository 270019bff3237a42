//! `turquoise::Runtime`: a tokio runtime whose tasks are preemptible.
//!
//! Tasks run on turquoise's own workers (`scheduler.rs`), each poll in a
//! slice of at most `slice` (2 ms by default, libturquoise's). Each worker
//! thread runs a stock tokio current-thread runtime whose drivers (I/O,
//! time) it turns itself between batches of tasks, so that `tokio::time`,
//! `tokio::net`, channels, `Handle::current()`, `tokio::spawn` and
//! `spawn_blocking` work inside tasks, and an event registered by a task
//! wakes it on its own worker with no other thread in the way.
//! (`tokio::spawn` gives a cooperative tokio task on the calling worker;
//! `turquoise::spawn` a preemptible one that any worker may run.)
//! `block_on` runs on one more current-thread runtime, on the calling
//! thread.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_task::WithInfo;

use crate::preemptible::future::preemptible;
use crate::sched::scheduler::Scheduler;
use crate::sched::join::{JoinHandle, Owner};
use crate::preemptible::task::{Body, Shared, TaskFuture};

/// The default slice: the paper's 2 ms.
pub const DEFAULT_SLICE: Duration = Duration::from_millis(2);

/// Builds a [`Runtime`] (shaped like tokio's builder).
///
/// ```
/// use std::time::Duration;
///
/// let rt = turquoise::Builder::new()
///     .worker_threads(2)
///     .slice(Duration::from_micros(500))
///     .enable_all()
///     .build()?;
/// assert_eq!(rt.block_on(async { turquoise::spawn(async { 6 * 7 }).await.unwrap() }), 42);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    workers: usize,
    slice: Duration,
    granularity: Duration,
    name: String,
    io: bool,
    time: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// One worker per CPU, a 2 ms slice.
    pub fn new() -> Builder {
        Builder {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            slice: DEFAULT_SLICE,
            granularity: crate::base::pace::DEFAULT_GRANULARITY,
            name: "turquoise-worker".into(),
            io: false,
            time: false,
        }
    }

    /// How many worker threads run the tasks (at least 1).
    pub fn worker_threads(&mut self, n: usize) -> &mut Self {
        self.workers = n.max(1);
        self
    }

    /// Each poll of a preemptible task runs for at most `slice` (rounded up
    /// to linger's minimum, tens of microseconds).
    pub fn slice(&mut self, slice: Duration) -> &mut Self {
        self.slice = slice;
        self
    }

    /// A green thread that has run this long is stopped when other work
    /// waits for its worker, though its slice is not over (0.2 ms by
    /// default; zero, or at least the slice: each run gets its whole
    /// slice). Its worker looks for waiting work at intervals from this up
    /// to the slice: short ones after it was idle or found work waiting,
    /// growing while it keeps busy with short runs, so that a busy worker
    /// pays for its looks about as for 2 ms slices and a short request
    /// waits about this long behind a long one (`pace.rs`).
    pub fn granularity(&mut self, granularity: Duration) -> &mut Self {
        self.granularity = granularity;
        self
    }

    /// The workers' thread name.
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = name.into();
        self
    }

    /// tokio's I/O and time drivers.
    pub fn enable_all(&mut self) -> &mut Self {
        self.io = true;
        self.time = true;
        self
    }

    /// tokio's I/O driver.
    pub fn enable_io(&mut self) -> &mut Self {
        self.io = true;
        self
    }

    /// tokio's time driver.
    pub fn enable_time(&mut self) -> &mut Self {
        self.time = true;
        self
    }

    /// A tokio current-thread runtime with the drivers asked for.
    fn tokio(&self) -> io::Result<tokio::runtime::Runtime> {
        let mut tb = tokio::runtime::Builder::new_current_thread();
        if self.io {
            tb.enable_io();
        }
        if self.time {
            tb.enable_time();
        }
        tb.build()
    }

    /// Starts the runtime's threads.
    pub fn build(&mut self) -> io::Result<Runtime> {
        let tokio = self.tokio()?;
        // The deferral rules and linger's table now, not at the first
        // request (reading the executable's symbols and inline records
        // takes tens of milliseconds).
        crate::base::rules::install();
        linger::init().map_err(io::Error::other)?;
        let (sched, locals) = Scheduler::new(self.workers, self.slice, self.granularity);
        let handle = Handle { inner: Arc::new(Inner { sched: sched.clone(), slice: self.slice, time: self.time, io: self.io, tokio: tokio.handle().clone() }) };
        let stop = |threads: Vec<std::thread::JoinHandle<()>>| {
            sched.shutdown.store(true, Ordering::Release);
            sched.wake_all();
            for t in threads {
                let _ = t.join();
            }
        };
        let mut threads = Vec::new();
        for (i, local) in locals.into_iter().enumerate() {
            let own = match self.tokio() {
                Ok(rt) => rt,
                Err(e) => {
                    stop(threads);
                    return Err(e);
                }
            };
            let h = handle.clone();
            let t = std::thread::Builder::new().name(format!("{}-{i}", self.name)).spawn(move || {
                // This thread's timer and signal state, before any task.
                let _ = linger::init();
                set_current(Some(h.clone()));
                let sched = h.inner.sched.clone();
                // Unconstrained: tokio's cooperative budget is per tokio
                // task, and this loop is one for all of ours (preemptible
                // tasks need none; `spawn_cooperative` ones go without, as
                // on turquoise's earlier shared-driver design).
                // A task of that runtime, not the future `block_on` polls
                // itself: a wake of the latter costs tokio a driver turn
                // (an `epoll_wait` with a zero timeout) before it is polled,
                // one more system call at each green thread woken from I/O.
                let worker = own.spawn(tokio::task::coop::unconstrained(sched.worker(i, local)));
                if let Err(e) = own.block_on(worker) {
                    if e.is_panic() {
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
                set_current(None);
                // Blocking tasks still running are left to finish on their
                // own, as at the runtime's drop.
                own.shutdown_background();
            });
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    stop(threads);
                    return Err(e);
                }
            }
        }
        Ok(Runtime { handle, threads, tokio: Some(tokio) })
    }
}

struct Inner {
    sched: Arc<Scheduler>,
    slice: Duration,
    /// Timers are enabled (green threads' `sleep` parks on them).
    time: bool,
    /// The reactor is enabled (green threads' blocking calls park on it).
    io: bool,
    tokio: tokio::runtime::Handle,
}

/// A handle to a runtime: spawns onto it from anywhere.
#[derive(Clone)]
pub struct Handle {
    inner: Arc<Inner>,
}

thread_local! {
    static CURRENT: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

/// Makes `h` the calling thread's current runtime (and its drivers the
/// context's, `context::drivers`); returns the previous one.
fn set_current(h: Option<Handle>) -> Option<Handle> {
    crate::base::context::set_drivers(h.as_ref().map(|h| crate::base::context::Drivers { io: h.inner.io, time: h.inner.time }));
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), h))
}

impl Handle {
    /// The runtime of the calling task or `block_on`. Panics outside one.
    pub fn current() -> Handle {
        Handle::try_current().expect("turquoise: not inside a turquoise runtime (call from a task or Runtime::block_on)")
    }

    /// The runtime of the calling task or `block_on`, if any.
    pub fn try_current() -> Option<Handle> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// Spawns a preemptible task: each of its polls runs for at most the
    /// runtime's slice, then the task goes behind the other runnable ones.
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_body::<F>(Body::Preemptible(preemptible(fut, self.inner.slice)))
    }

    /// Spawns a task that is never preempted (it yields only at its awaits).
    pub fn spawn_cooperative<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_body(Body::Cooperative(Box::pin(fut)))
    }

    /// Runs blocking code on a tokio blocking pool (untouched by turquoise):
    /// that of the calling worker, or of `block_on`'s runtime elsewhere.
    pub fn spawn_blocking<F, R>(&self, f: F) -> tokio::task::JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        match tokio::runtime::Handle::try_current() {
            Ok(h) if crate::base::context::current_worker().is_some() => h.spawn_blocking(f),
            _ => self.inner.tokio.spawn_blocking(f),
        }
    }

    /// The tokio runtime `block_on` runs on (each worker has its own).
    pub fn tokio(&self) -> &tokio::runtime::Handle {
        &self.inner.tokio
    }

    /// Has the runtime shut down (no task will run any more)?
    pub fn is_shut_down(&self) -> bool {
        self.inner.sched.shutdown.load(Ordering::Acquire)
    }

    /// The slice of the runtime's preemptible tasks and green threads.
    pub fn slice(&self) -> Duration {
        self.inner.slice
    }

    /// The workers (green threads are queued there directly).
    pub(crate) fn scheduler(&self) -> &Arc<Scheduler> {
        &self.inner.sched
    }

    /// The index of the calling thread among this runtime's workers.
    pub(crate) fn current_worker(&self) -> Option<usize> {
        crate::base::context::worker_of(Arc::as_ptr(&self.inner.sched) as *const ())
    }

    fn spawn_body<F>(&self, body: Body<F>) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let shared = Shared::new();
        let fut = TaskFuture { body: Some(body), shared: shared.clone() };
        // Weak: queued tasks hold their schedule function, and the
        // scheduler holds queued tasks.
        let sched: Weak<Scheduler> = Arc::downgrade(&self.inner.sched);
        let schedule = WithInfo(move |task, info| match sched.upgrade() {
            Some(s) => s.schedule(task, info),
            None => drop(task), // the runtime is gone: cancelled
        });
        let (runnable, task) = async_task::Builder::new().metadata(shared.clone()).spawn(move |_| fut, schedule);
        *shared.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(runnable.waker());
        self.inner.sched.spawn(runnable);
        JoinHandle { wait: Some(crate::preemptible::task::Wait::Task(task.fallible())), owner: Owner::Task(shared) }
    }
}

/// Spawns a preemptible task on the current runtime (see
/// [`Handle::spawn`]). Panics outside a turquoise runtime.
///
/// ```
/// let rt = turquoise::Runtime::new()?;
/// rt.block_on(async {
///     // Never awaits, yet cannot hold its worker: its polls are cut at
///     // the slice, and the task below runs meanwhile.
///     let spinner = turquoise::spawn(async { loop { std::hint::spin_loop() } });
///     assert_eq!(turquoise::spawn(async { "ran" }).await.unwrap(), "ran");
///     spinner.abort();
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Handle::current().spawn(fut)
}

/// Spawns a task that is never preempted on the current runtime.
pub fn spawn_cooperative<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Handle::current().spawn_cooperative(fut)
}

/// A worker's counters (see [`Runtime::worker_metrics`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerMetrics {
    /// Task polls run.
    pub polls: u64,
    /// Polls stopped by their slice (the task then resumed on this worker).
    pub preemptions: u64,
    /// Of those, stops whose deadline found the poll in code that must not
    /// be interrupted and waited for it to return.
    pub deferred_preemptions: u64,
    /// The latest stop after a deadline on this worker.
    pub worst_overrun: Duration,
    /// Batches of tasks taken from other workers.
    pub steals: u64,
    /// Times the worker went to sleep for lack of work.
    pub parks: u64,
    /// Its green threads' switches, preemptions, yields, parks by cause and
    /// time spent runnable but waiting, summed.
    pub green: crate::thread::ThreadStats,
}

/// A runtime: worker threads for tasks, and tokio beside them.
///
/// `tokio::time`, `tokio::net` and `tokio::spawn` work inside its tasks:
///
/// ```
/// use std::time::Duration;
///
/// let rt = turquoise::Runtime::new()?;
/// let n = rt.block_on(async {
///     tokio::time::sleep(Duration::from_millis(1)).await;
///     turquoise::spawn(async { 1 }).await.unwrap() + tokio::spawn(async { 2 }).await.unwrap()
/// });
/// assert_eq!(n, 3);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Runtime {
    handle: Handle,
    threads: Vec<std::thread::JoinHandle<()>>,
    tokio: Option<tokio::runtime::Runtime>,
}

impl Runtime {
    /// A runtime with every driver, one worker per CPU and 2 ms slices.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().enable_all().build()
    }

    /// Its handle.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// See [`Handle::spawn`].
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(fut)
    }

    /// See [`Handle::spawn_cooperative`].
    pub fn spawn_cooperative<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn_cooperative(fut)
    }

    /// See [`Handle::spawn_blocking`].
    pub fn spawn_blocking<F, R>(&self, f: F) -> tokio::task::JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.spawn_blocking(f)
    }

    /// Runs `fut` to completion on the calling thread (not preempted, like
    /// tokio's `block_on`), inside this runtime: tasks it spawns run on the
    /// workers.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let prev = set_current(Some(self.handle.clone()));
        struct Restore(Option<Handle>);
        impl Drop for Restore {
            fn drop(&mut self) {
                set_current(self.0.take());
            }
        }
        let _restore = Restore(prev);
        self.tokio.as_ref().expect("runtime alive").block_on(fut)
    }

    /// Each worker's counters so far.
    pub fn worker_metrics(&self) -> Vec<WorkerMetrics> {
        self.handle
            .inner
            .sched
            .slots
            .iter()
            .map(|s| (s.counters.polls.get(), s))
            .map(|(p, s)| WorkerMetrics {
                polls: p.polls,
                preemptions: p.preemptions,
                deferred_preemptions: p.deferred_preemptions,
                worst_overrun: p.worst_overrun,
                steals: s.counters.steals.load(Ordering::Relaxed),
                parks: s.counters.parks.load(Ordering::Relaxed),
                green: s.counters.green.get(),
            })
            .collect()
    }
}

impl Drop for Runtime {
    /// Stops the workers (tasks left are dropped: cancelled) and tokio.
    fn drop(&mut self) {
        let sched = &self.handle.inner.sched;
        sched.shutdown.store(true, Ordering::Release);
        sched.wake_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        sched.drain_after_stop();
        if let Some(t) = self.tokio.take() {
            t.shutdown_background();
        }
    }
}

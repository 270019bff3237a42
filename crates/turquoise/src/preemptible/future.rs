//! [`Preemptible`]: a future polled inside a preemptible function.
//!
//! The whole polling loop of the inner future runs in one `linger` function:
//! poll the inner future; if it is pending, `pause()` back to the outer
//! poll. Each outer poll resumes that loop for at most the slice:
//!
//! - the loop paused (the inner future is pending, with our waker
//!   registered): the outer poll returns `Pending`;
//! - the slice ran out in the middle of an inner poll: the outer poll wakes
//!   its own task and returns `Pending`, so that the executor runs the other
//!   runnable tasks before this one again (libturquoise's requeue); on
//!   tokio, after its drivers' next turn too (`requeue_stopped`);
//! - the loop returned: `Ready`.
//!
//! **Wakers.** The inner future never sees an outer `Context`: a poll
//! stopped by its slice would keep it across outer polls, and the executor
//! builds it anew for each (tokio on its stack). The inner future gets a
//! waker of our own, fixed for its whole life, that wakes whatever task last
//! polled us (an `AtomicWaker`, registered at every outer poll).
//! A wake-up that comes while an inner poll is under way must lead to
//! another inner poll, as an executor re-polls a task woken while it runs.
//! Here the inner poll may span outer polls (stopped by its slice), and the
//! outer poll that finishes it ends at the loop's `pause()`: so the waker
//! also sets a flag, cleared before each inner poll, and an outer poll that
//! ends at rest with the flag set wakes its task again.
//!
//! **Threads.** A poll stopped at an arbitrary instruction may hold the
//! address of a thread-local of the thread it ran on (compilers compute such
//! addresses once per function), so it resumes only on that thread. At a
//! pause the inner poll has returned: only the loop's own frames (which use
//! no thread-local) and linger's pause (which takes the thread afresh) are
//! live, so the loop may resume on any thread (a migratable function,
//! resumed elsewhere only when at rest). An executor that polls a stopped
//! poll from another thread (work stealing) gets `Pending`, and the task
//! waits for its thread (see `home.rs`): counted as `misplaced`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use linger::{Builder, Linger};

use crate::base::counters::PollStats;
use crate::base::home::{self, Home};

/// What the outer future and the loop inside the function share.
struct Shared {
    /// The task that polled us last.
    outer: AtomicWaker,
    /// The loop is about to `pause()` or just back from it (not inside an
    /// inner poll).
    at_rest: AtomicBool,
    /// A wake-up came since the last inner poll began. Cleared by the loop
    /// before each inner poll, set before the outer task is woken.
    woken: AtomicBool,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        // Before the outer wake: an outer poll that reads `false` is
        // followed by this wake, hence by another outer poll (the
        // `AtomicWaker` orders its register and wake).
        self.woken.store(true, Ordering::Release);
        self.outer.wake();
    }
}

/// A future polled in slices of at most `slice` per outer poll (see
/// [`preemptible`]).
#[must_use = "futures do nothing unless polled"]
pub struct Preemptible<T: Send + 'static> {
    /// `None` until the first poll, and after completion.
    body: Option<Linger<T>>,
    /// The inner future until the first poll.
    start: Option<Box<dyn FnOnce(Arc<Shared>) -> Result<Linger<T>, linger::Error> + Send>>,
    shared: Arc<Shared>,
    slice: Duration,
    /// The thread the inner poll was stopped on.
    home: Option<Arc<Home>>,
    /// Outer polls misplaced in a row.
    misses: u32,
    /// The last stop's wake-up was deferred by tokio's scheduler: the next
    /// poll only goes to the back of the queue (see [`requeue_stopped`]).
    bounce: bool,
    /// The loop is stopped at its own `pause()` (or has not started): the
    /// inner future is waiting, and the loop may resume on any thread.
    rest: bool,
    stats: PollStats,
    /// The last poll's preemption.
    last: Option<linger::Preemption>,
}

/// Runs `fut` in time slices: each poll of the returned future polls `fut`
/// for at most `slice` (rounded up to linger's minimum, tens of
/// microseconds), then returns `Pending` after waking its own task, so that
/// the executor runs its other tasks before resuming this one where it
/// stopped (on a tokio runtime, after tokio's timers and I/O too). Works on
/// any executor; but, as any tokio future that yields (`yield_now`, tokio's
/// cooperative budget), not under another executor's `block_on` called from
/// inside a task of a tokio runtime: its wake-up waits for that tokio
/// worker's next turn of its drivers, which waits for the `block_on`.
///
/// `fut` must be `Send + 'static`, as for `tokio::spawn`: a future that
/// is dropped while stopped in the middle of a poll is reclaimed without
/// running its destructors (see `linger`'s `docs/safety.md`), so it must
/// own what it uses. Dropped while waiting (pending between polls), it is
/// unwound and its destructors run.
///
/// A panic in `fut` propagates out of the poll that runs into it.
///
/// A poll stopped by its slice resumes only on the thread it was stopped
/// on. On a work-stealing executor whose idle workers sleep until it picks
/// them (tokio's multi-thread runtime), a stopped task can wait as long as
/// its thread sleeps: there, prefer [`crate::Runtime`], or a current-thread
/// runtime per thread (`docs/safety.md`, "turquoise").
///
/// ```
/// use std::time::Duration;
///
/// // On tokio's current-thread runtime: the long computation is cut every
/// // 100 us, so the other task is not held up behind it.
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// rt.block_on(async {
///     let long = tokio::spawn(turquoise::preemptible(async { (0..50_000_000u64).fold(0, |a, i| a ^ i) }, Duration::from_micros(100)));
///     let quick = tokio::spawn(async { "quick" });
///     assert_eq!(quick.await.unwrap(), "quick");
///     long.await.unwrap();
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn preemptible<F>(fut: F, slice: Duration) -> Preemptible<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    crate::base::rules::install();
    let shared = Arc::new(Shared {
        outer: AtomicWaker::new(),
        at_rest: AtomicBool::new(false),
        woken: AtomicBool::new(false),
    });
    let start = move |shared: Arc<Shared>| {
        let body = move || {
            let mut fut = std::pin::pin!(fut);
            let waker = Waker::from(shared.clone());
            let mut cx = Context::from_waker(&waker);
            loop {
                // Cleared only when set (a plain load on the way): a wake
                // that this load misses leaves the flag up, and costs one
                // spare poll at most. Acquire: the inner poll sees what the
                // waker's side did before it woke us.
                if shared.woken.load(Ordering::Relaxed) {
                    shared.woken.swap(false, Ordering::Acquire);
                }
                if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                    return v;
                }
                shared.at_rest.store(true, Ordering::Relaxed);
                linger::pause();
                shared.at_rest.store(false, Ordering::Relaxed);
            }
        };
        // SAFETY (migratable): the function is resumed on another thread
        // than the one it stopped on only while at rest, that is at the
        // `pause()` above. Then the frames of the inner poll have returned;
        // the loop's own frame holds no thread-local address (it reads
        // none), and `pause` takes the thread it is resumed on afresh.
        unsafe { Builder::new().migratable(true) }.launch(body, Duration::ZERO)
    };
    Preemptible {
        body: None,
        start: Some(Box::new(start)),
        shared,
        slice,
        home: None,
        misses: 0,
        bounce: false,
        rest: true,
        stats: PollStats::default(),
        last: None,
    }
}

/// `fut.preemptible(slice)` for [`preemptible`]`(fut, slice)`.
pub trait PreemptibleExt: Future + Send + Sized + 'static
where
    Self::Output: Send + 'static,
{
    /// See [`preemptible`].
    fn preemptible(self, slice: Duration) -> Preemptible<Self::Output> {
        preemptible(self, slice)
    }
}

impl<F> PreemptibleExt for F
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
}

impl<T: Send + 'static> Preemptible<T> {
    /// This future's counters so far.
    pub fn stats(&self) -> PollStats {
        self.stats
    }

    /// How the last poll's preemption went, if it was preempted.
    pub(crate) fn last_preemption(&self) -> Option<linger::Preemption> {
        self.last
    }

    fn note(&mut self, p: linger::Preemption) {
        let overrun = Duration::from_nanos(p.overrun_ns);
        self.stats.deferred_preemptions += p.deferred as u64;
        self.stats.worst_overrun = self.stats.worst_overrun.max(overrun);
        self.last = Some(p);
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "turquoise",
            overrun_us = p.overrun_ns / 1000,
            deferred = p.deferred,
            polls = self.stats.polls,
            preemptions = self.stats.preemptions,
            "poll preempted"
        );
    }

    /// Was the last poll stopped by its slice in the middle of an inner
    /// poll? Then the next one must run on the same thread.
    pub fn is_stopped(&self) -> bool {
        !self.rest
    }
}

/// The wake-up of a stopped poll as handed to tokio's scheduler: records
/// whether it came at once (not deferred).
struct Later {
    fired: AtomicBool,
    task: Waker,
}

impl Wake for Later {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Relaxed);
        self.task.wake_by_ref();
    }
}

/// Puts a task whose poll its slice stopped behind the other runnable tasks
/// and, on tokio, behind the next turn of tokio's drivers (timers, I/O);
/// true if the wake-up was deferred for that.
///
/// tokio turns its drivers only every `event_interval` (61) polls while
/// tasks are runnable; each poll of a stopped task lasts a whole slice, so a
/// plain wake-up left eight tasks spinning in 2 ms slices starving a 10 ms
/// timer for 140-290 ms. `tokio::task::yield_now` puts the waker on the
/// scheduler's defer list instead, which tokio wakes only after a driver
/// turn, and turns the driver as soon as no other task is runnable: a timer
/// or socket then waits about one round of the stopped tasks. Outside a
/// tokio worker (another executor, `Handle::block_on`, `block_in_place`) its
/// first poll wakes at once (executor-agnostic). turquoise's own workers
/// keep the plain wake-up: their loop turns the drivers itself, and requeues
/// stopped tasks on its own queues.
///
/// A deferred wake-up is not a yield to tokio's multi-thread scheduler: it
/// comes from outside any poll, so the task goes to the worker's LIFO slot,
/// ahead of the queued tasks. The poll after a deferred wake-up therefore
/// only wakes its task again (a wake-up during its own poll is a yield:
/// the back of the queue) and returns: without that, drivers turned at
/// every poll (`event_interval(1)`) gave the worker to the same stopped
/// task forever.
fn requeue_stopped(cx: &mut Context<'_>) -> bool {
    if crate::base::context::current_worker().is_some() {
        cx.waker().wake_by_ref();
        return false;
    }
    let later = Arc::new(Later { fired: AtomicBool::new(false), task: cx.waker().clone() });
    let waker = Waker::from(later.clone());
    // Its first poll defers (or makes) the wake-up and returns `Pending`;
    // the rest of the future (the second poll) is not needed. A deferred
    // wake-up comes from this thread's scheduler, after this poll.
    let mut y = std::pin::pin!(tokio::task::yield_now());
    let _ = y.as_mut().poll(&mut Context::from_waker(&waker));
    !later.fired.load(Ordering::Relaxed)
}

// The inner future lives on the function's own stack, never moved: the
// outer future holds only handles to it.
impl<T: Send + 'static> Unpin for Preemptible<T> {}

impl<T: Send + 'static> Future for Preemptible<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        this.stats.polls += 1;
        this.last = None;
        this.shared.outer.register(cx.waker());
        if let Some(start) = this.start.take() {
            match start(this.shared.clone()) {
                Ok(l) => this.body = Some(l),
                Err(e) => panic!("turquoise: cannot start a preemptible future: {e}"),
            }
        }
        let Some(body) = this.body.as_mut() else {
            panic!("turquoise: `Preemptible` polled after completion");
        };
        // Tasks of this thread that were polled elsewhere come back.
        home::drain_here();
        if let Some(home) = this.home.as_ref().filter(|h| !home::is_here(h)) {
            if !this.rest {
                // Stopped in the middle of an inner poll on another thread:
                // wait for that thread (see `home.rs`).
                this.stats.misplaced += 1;
                home.leave(cx.waker(), this.misses);
                this.misses = this.misses.saturating_add(1);
                return Poll::Pending;
            }
        }
        this.misses = 0;
        if std::mem::take(&mut this.bounce) {
            // Woken from tokio's deferred wake-ups, perhaps ahead of the
            // queued tasks: behind them first (see `requeue_stopped`).
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Err(e) = linger::resume(body, this.slice) {
            panic!("turquoise: cannot resume a preemptible future: {e}");
        }
        match this.body.take() {
            Some(Linger::Completion(v)) => {
                this.rest = true;
                Poll::Ready(v)
            }
            Some(Linger::Continuation(c)) => {
                // Stopped by the deadline (not a `pause()`): how late.
                let stop = if c.yielded() { None } else { linger::last_preemption() };
                // At rest: stopped by the loop's own `pause()`. Not if the
                // slice ran out anywhere else, even after the inner poll
                // returned (the loop would then pause at its next resume,
                // and swallow the wake-up that resume came from), nor if
                // the inner future itself called `linger::pause()`.
                this.rest = c.yielded() && this.shared.at_rest.load(Ordering::Relaxed);
                this.body = Some(Linger::Continuation(c));
                if !this.rest {
                    // The slice ran out inside an inner poll: go behind the
                    // other runnable tasks, and come back to this thread.
                    this.stats.preemptions += 1;
                    if let Some(p) = stop {
                        this.note(p);
                    }
                    if !this.home.as_ref().is_some_and(home::is_here) {
                        this.home = Some(home::here());
                    }
                    this.bounce = requeue_stopped(cx);
                } else if this.shared.woken.load(Ordering::Acquire) {
                    // A wake-up came while the last inner poll was under
                    // way, and it was stopped by the slice before it could
                    // return (or before the loop could pause): this poll
                    // only finished it, and the inner future has not seen
                    // that wake-up. Poll again, as an executor re-polls a
                    // task woken while it runs.
                    cx.waker().wake_by_ref();
                }
                Poll::Pending
            }
            // A panic propagates out of `resume`; overflows are errors.
            Some(Linger::Poison) | None => unreachable!("resume reported no error"),
        }
    }
}

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
mod atexit;
mod dump_signal;
mod green;
mod park;
mod poller;
mod dump;
mod stats;
mod tls;

use std::fmt;
use std::future::Future;
use std::io;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::runtime::{Handle, Runtime};
use crate::task::JoinError;

pub use activity::{checkpoint, no_yield, spawn_local, LocalJoinHandle};
pub(crate) use green::{kill_live, GreenShared};
pub use dump::{dump, dump_text};
pub use stats::{Cause, State, ThreadInfo, ThreadStats};
pub use tls::image_bytes;
pub(crate) use stats::Counters as GreenCounters;

/// Largest stack a green thread may ask for (beyond it: `InvalidInput`).
pub const MAX_STACK_SIZE: usize = 1 << 30;

/// A green thread's identity: never reused within the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(pub(crate) u64);

impl ThreadId {
    fn next() -> ThreadId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ThreadId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// As a number (non-zero).
    pub fn as_u64(&self) -> NonZeroU64 {
        NonZeroU64::new(self.0).expect("ids start at 1")
    }
}

/// A handle to a green thread: its id and name.
#[derive(Clone, Debug)]
pub struct Thread {
    id: ThreadId,
    name: Option<Arc<str>>,
}

impl Thread {
    /// The thread's id.
    pub fn id(&self) -> ThreadId {
        self.id
    }

    /// The name given with [`Builder::name`].
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// The green thread calling, or `None` on an ordinary thread (or in an
/// async task).
pub fn current() -> Option<Thread> {
    green::current().map(|g| g.thread.clone())
}

/// Options for a green thread, as `std::thread::Builder`'s.
#[derive(Clone, Debug, Default)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    slice: Option<Duration>,
    preemptive: Option<bool>,
    shared_thread_locals: bool,
}

impl Builder {
    /// The defaults: the runtime's slice, linger's stack size, preemptive.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (for [`current`], dumps and tracing).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// Usable stack, in bytes (rounded up to linger's minimum, 64 KiB);
    /// more than [`MAX_STACK_SIZE`] is refused by [`Builder::spawn`].
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// How long the thread runs before it is stopped and put behind the
    /// other runnable work (the runtime's slice by default).
    pub fn slice(mut self, slice: Duration) -> Builder {
        self.slice = Some(slice);
        self
    }

    /// `false`: an *activity*: the thread is never stopped by its slice; it
    /// gives its worker up only when it waits, yields, or finds its slice
    /// over at a yield check ([`checkpoint`]). It may start activities that
    /// share its `!Send` data ([`spawn_local`]).
    pub fn preemptive(mut self, yes: bool) -> Builder {
        self.preemptive = Some(yes);
        self
    }

    /// For tests of the thread-local images (the negative control): the
    /// thread shares its worker's thread-locals with the worker's other
    /// green threads.
    ///
    /// # Safety
    /// Two green threads of one worker then see each other's writes to
    /// thread-locals at any instruction, which compiled code does not expect
    /// (a data race, to the compiler): the caller promises that the thread
    /// uses no thread-local another green thread uses.
    #[doc(hidden)]
    pub unsafe fn share_thread_locals(mut self) -> Builder {
        self.shared_thread_locals = true;
        self
    }

    /// Starts `f` on a green thread of the current runtime (inside one:
    /// a task's or a green thread's), or of the default runtime.
    ///
    /// Errors: `InvalidInput` for a stack larger than [`MAX_STACK_SIZE`],
    /// `Other` when the runtime has shut down, and linger's errors when no
    /// stack can be had (`OutOfMemory` and the like).
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let handle = match Handle::try_current() {
            Some(h) => h,
            // Started under a `OnceLock` (and with threads spawned): not
            // stopped half-way when spawned from a green thread.
            None => linger::critical(default_runtime)?.handle().clone(),
        };
        self.spawn_on(&handle, f)
    }

    /// [`Builder::spawn`] on a given runtime.
    pub fn spawn_on<F, T>(self, handle: &Handle, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.check(handle)?;
        let thread = Thread { id: ThreadId::next(), name: self.name.map(Arc::from) };
        // Not preemptive: an activity, whose slice is its yield checks' period.
        let slice = self.slice.unwrap_or_else(|| handle.slice());
        let cooperative = self.preemptive == Some(false);
        let spec = green::Spec { thread: thread.clone(), stack_size: self.stack_size, slice, own_tls: !self.shared_thread_locals, cooperative };
        let task = green::spawn(handle, f, spec).map_err(linger_error)?;
        Ok(JoinHandle { task, thread })
    }
}

impl Builder {
    /// The errors a spawn on `handle` gives before it starts anything.
    fn check(&self, handle: &Handle) -> io::Result<()> {
        if self.stack_size.is_some_and(|s| s > MAX_STACK_SIZE) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "turquoise: green thread stack larger than MAX_STACK_SIZE"));
        }
        if handle.is_shut_down() {
            return Err(io::Error::other("turquoise: the runtime has shut down"));
        }
        Ok(())
    }
}

fn linger_error(e: linger::Error) -> io::Error {
    match e {
        linger::Error::Config(_) => io::Error::new(io::ErrorKind::InvalidInput, e),
        linger::Error::StackAllocation(e) => io::Error::new(e.kind(), format!("turquoise: no stack for a green thread: {e}")),
        linger::Error::OutOfMemory => io::Error::new(io::ErrorKind::OutOfMemory, e),
        e => io::Error::other(e),
    }
}

/// The runtime [`spawn`] uses outside any: all drivers on, one worker per
/// CPU (or `TURQ_WORKERS`), the default slice (or `TURQ_SLICE_US`) and
/// granularity (or `TURQ_GRANULARITY_US`, 0 for none),
/// started at the first use and never shut down (as Go's).
static DEFAULT: OnceLock<Runtime> = OnceLock::new();

fn default_runtime() -> io::Result<&'static Runtime> {
    if let Some(rt) = DEFAULT.get() {
        return Ok(rt);
    }
    start_default_runtime(None, None)?;
    Ok(DEFAULT.get().expect("started"))
}

/// Starts the default runtime with these settings (`None`: the
/// environment's, else the defaults); false if it was running already.
pub(crate) fn start_default_runtime(workers: Option<usize>, slice: Option<Duration>) -> io::Result<bool> {
    if DEFAULT.get().is_some() {
        return Ok(false);
    }
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok()).filter(|&v| v > 0);
    let mut b = crate::runtime::Builder::new();
    b.enable_all().thread_name("turquoise-green");
    if let Some(w) = workers.or_else(|| env("TURQ_WORKERS").map(|w| w as usize)) {
        b.worker_threads(w);
    }
    if let Some(s) = slice.or_else(|| env("TURQ_SLICE_US").map(Duration::from_micros)) {
        b.slice(s);
    }
    // Zero is a setting here (no looks), so not filtered like the others.
    if let Some(g) = std::env::var("TURQ_GRANULARITY_US").ok().and_then(|v| v.trim().parse::<u64>().ok()) {
        b.granularity(Duration::from_micros(g));
    }
    let rt = b.build()?;
    dump_signal::install_from_env();
    // Two first spawns may race: the loser's runtime is shut down here.
    let mut won = false;
    DEFAULT.get_or_init(|| {
        won = true;
        rt
    });
    Ok(won)
}

/// The payload of a green thread's `JoinError::Panic` when it ended by
/// `pthread_exit` (C code in it, or `turq_exit`), with the value given.
#[derive(Debug, Clone, Copy)]
pub struct Exited {
    /// The value passed to `pthread_exit` (`PTHREAD_CANCELED`, all ones, if
    /// it was cancelled with `pthread_cancel`).
    pub value: usize,
}

/// The payload of a green thread's `JoinError::Panic` when it overflowed
/// its stack (it was abandoned: its destructors did not run).
#[derive(Debug, Clone, Copy)]
pub struct StackOverflow {
    /// The usable stack it had, in bytes.
    pub stack_size: usize,
}

/// Spawns a green thread running `f` (see [`Builder::spawn`]); panics if it
/// cannot, as `std::thread::spawn` does.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new().spawn(f).expect("turquoise: cannot spawn a green thread")
}

/// Owned permission to join a green thread. Dropping it detaches the
/// thread; it is also a `Future`, for async code.
pub struct JoinHandle<T> {
    task: crate::task::JoinHandle<T>,
    thread: Thread,
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to end: parks a green thread, blocks an ordinary
    /// one. Its value, or why there is none (it panicked: the payload; it was
    /// cancelled; it is the caller itself: [`JoinError::is_self_join`]).
    pub fn join(self) -> Result<T, JoinError> {
        if current().is_some_and(|me| me.id == self.thread.id) {
            return Err(JoinError::SelfJoin);
        }
        let id = self.thread.id.0;
        block_on_as(Cause::Join, id, self)
    }

    /// The thread's id and name.
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Has it ended?
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Its task's counters so far: resumes (polls), preemptions, deferred
    /// preemptions, the worst overrun.
    pub fn stats(&self) -> crate::PollStats {
        self.task.stats()
    }

    /// Its counters as a thread: switches, preemptions, yields, parks by
    /// cause, time spent runnable but waiting.
    pub fn thread_stats(&self) -> ThreadStats {
        self.task.green_stats().unwrap_or_default()
    }

    /// Cancels the thread at its next turn, on its worker: a thread that
    /// waits (parked or yielded) is unwound, its destructors run; one
    /// stopped by its slice in the middle of its code is reclaimed without
    /// unwinding, as linger cancels (its stack and what it owned stay
    /// allocated: `docs/safety.md`). `join` then gives
    /// [`JoinError::Cancelled`], unless it had ended.
    pub fn cancel(&self) {
        self.task.abort();
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.task).poll(cx)
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("thread", &self.thread).field("finished", &self.is_finished()).finish()
    }
}

/// Runs `fut` to completion: inside a green thread, parking the thread
/// (not its worker) while `fut` is pending; elsewhere, blocking the calling
/// thread. Inside a green thread, `fut` may use the runtime's I/O and
/// timers (tokio's, of the worker it runs on).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    block_on_as(Cause::Future, 0, fut)
}

/// [`block_on`], parking for `cause` (for counters, tracing and dumps).
///
/// Inside a `critical` scope (an activity's [`no_yield`]) a green thread
/// does not park, which would switch: it blocks its worker as an OS thread
/// would (a wait that only its own worker could end never does).
pub(crate) fn block_on_as<F: Future>(cause: Cause, detail: u64, fut: F) -> F::Output {
    block_on_parking(cause, detail, fut, false)
}

/// [`block_on_as`] for the park hook's own waits (`park.rs`): the park
/// skips walking the hook's frames again (see `green::park`). `fut` must
/// be the hook's own future, which runs no code of the program's.
pub(crate) fn block_on_in_hook<F: Future>(cause: Cause, detail: u64, fut: F) -> F::Output {
    block_on_parking(cause, detail, fut, true)
}

fn block_on_parking<F: Future>(cause: Cause, detail: u64, fut: F, in_hook: bool) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    if green::current().is_some() && !linger::in_critical() {
        loop {
            let waker = green::begin_look().expect("inside a green thread");
            if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
                return v;
            }
            green::park(cause, detail, in_hook);
        }
    }
    block_os(fut, None).expect("no deadline")
}

/// [`block_on_as`] until `deadline`: `None` if `fut` was still pending then
/// (it is dropped). A green thread parks on its worker's timer (without
/// one, it yields between looks); an OS thread parks with a timeout.
pub(crate) fn block_on_until_as<F: Future>(cause: Cause, detail: u64, deadline: std::time::Instant, fut: F) -> Option<F::Output> {
    if green::current().is_some() && !linger::in_critical() {
        if Handle::try_current().is_some_and(|h| h.has_time()) {
            return block_on_as(cause, detail, tokio::time::timeout_at(deadline.into(), fut)).ok();
        }
        let mut fut = std::pin::pin!(fut);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                return Some(v);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            green::yield_now();
        }
    }
    block_os(std::pin::pin!(fut), Some(deadline))
}

/// Polls `fut` on the calling OS thread, parking the thread between looks,
/// until it is ready or `deadline` passes (`None`).
fn block_os<F: Future>(mut fut: Pin<&mut F>, deadline: Option<std::time::Instant>) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(OsThread(std::thread::current())));
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            return Some(v);
        }
        match deadline {
            None => std::thread::park(),
            Some(d) => {
                let now = std::time::Instant::now();
                if now >= d {
                    return None;
                }
                std::thread::park_timeout(d - now);
            }
        }
    }
}

struct OsThread(std::thread::Thread);

impl Wake for OsThread {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Sleeps for `d`: a green thread parks on its worker's timer; an ordinary
/// thread sleeps.
pub fn sleep(d: Duration) {
    if green::current().is_some() && !linger::in_critical() && Handle::try_current().is_some_and(|h| h.has_time()) {
        let until = stats::monotonic().saturating_add(d).as_nanos() as u64;
        block_on_as(Cause::Timer, until, tokio::time::sleep(d));
    } else {
        std::thread::sleep(d);
    }
}

/// Gives the worker to the other runnable work: a green thread goes behind
/// it; an ordinary thread yields to the OS.
pub fn yield_now() {
    if green::current().is_some() {
        // A `critical` scope (an activity's no-yield scope) holds every
        // switch back.
        if linger::in_critical() {
            return;
        }
        green::yield_now();
    } else {
        std::thread::yield_now();
    }
}

//! Spawning a green thread: `Builder`, `spawn`, the `JoinHandle`, and the
//! default runtime a spawn outside any runtime uses.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::green::block::block_on_as;
use crate::base::thread_stats::Cause;
use crate::green::{dump_signal, park, records};
use super::{Thread, ThreadStats};
use crate::sched::runtime::{Handle, Runtime};
use crate::preemptible::task::JoinError;

/// Largest stack a green thread may ask for (beyond it: `InvalidInput`).
pub const MAX_STACK_SIZE: usize = 1 << 30;

/// Options for a green thread, as `std::thread::Builder`'s.
#[derive(Clone, Debug, Default)]///
/// ```
/// use std::time::Duration;
/// use turquoise::thread;
///
/// let h = thread::Builder::new()
///     .name("worker")
///     .stack_size(128 * 1024)
///     .slice(Duration::from_micros(500))
///     .spawn(|| thread::current().map(|t| t.name().map(String::from)))?;
/// assert_eq!(h.join().unwrap(), Some(Some("worker".to_string())));
/// # Ok::<(), std::io::Error>(())
/// ```

pub struct Builder {
    pub(super) name: Option<String>,
    pub(super) stack_size: Option<usize>,
    pub(super) slice: Option<Duration>,
    preemptive: Option<bool>,
    pub(super) shared_thread_locals: bool,
}

impl Builder {
    /// The defaults: the runtime's slice, linger's stack size, preemptive.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (for [`current`](super::current), dumps and tracing).
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
    /// over at a yield check ([`checkpoint`](super::checkpoint)). It may start activities that
    /// share its `!Send` data ([`spawn_local`](super::spawn_local)).
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
        // Not preemptive: an activity, whose slice is its yield checks' period.
        let slice = self.slice.unwrap_or_else(|| handle.slice());
        let cooperative = self.preemptive == Some(false);
        let spec = records::Spec { thread: Thread::new(self.name.map(Arc::from)), stack_size: self.stack_size, slice, own_tls: !self.shared_thread_locals, cooperative, park: park::HOOK.clone() };
        let spawned = records::spawn(handle.scheduler(), f, spec).map_err(io::Error::from)?;
        // The record's copy: its park token reaches the record.
        let thread = spawned.record.thread.clone();
        let task = crate::sched::join::JoinHandle::green(spawned);
        Ok(JoinHandle { task, thread })
    }
}

impl Builder {
    /// The errors a spawn on `handle` gives before it starts anything.
    pub(super) fn check(&self, handle: &Handle) -> io::Result<()> {
        if self.stack_size.is_some_and(|s| s > MAX_STACK_SIZE) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "turquoise: green thread stack larger than MAX_STACK_SIZE"));
        }
        if handle.is_shut_down() {
            return Err(io::Error::other("turquoise: the runtime has shut down"));
        }
        Ok(())
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
    // Each variable read as `docs/configuration.md` says; a bad value is
    // refused, naming it (the spawn that started the runtime gets it).
    let bad = |name: &str, e: String| io::Error::new(io::ErrorKind::InvalidInput, format!("{name}: {e}"));
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let us = Some(Duration::from_micros(1));
    let mut b = crate::sched::runtime::Builder::new();
    b.enable_all().thread_name("turquoise-green");
    let workers = match (workers, var("TURQ_WORKERS")) {
        (None, Some(v)) => Some(linger::parse_count(&v).map_err(|e| bad("TURQ_WORKERS", e))?),
        (w, _) => w,
    };
    if let Some(w) = workers {
        b.worker_threads(w);
    }
    let slice = match (slice, var("TURQ_SLICE_US")) {
        (None, Some(v)) => Some(linger::parse_duration_in(&v, us, false).map_err(|e| bad("TURQ_SLICE_US", e))?),
        (s, _) => s,
    };
    if let Some(s) = slice {
        b.slice(s);
    }
    // Zero is a setting here (no looks).
    if let Some(v) = var("TURQ_GRANULARITY_US") {
        b.granularity(linger::parse_duration_in(&v, us, true).map_err(|e| bad("TURQ_GRANULARITY_US", e))?);
    }
    dump_signal::install_from_env().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let rt = b.build()?;
    // Two first spawns may race: the loser's runtime is shut down here.
    let mut won = false;
    DEFAULT.get_or_init(|| {
        won = true;
        rt
    });
    Ok(won)
}

/// Spawns a green thread running `f` (see [`Builder::spawn`]); panics if it
/// cannot, as `std::thread::spawn` does.
///
/// ```
/// use std::io::{Read, Write};
/// use std::os::unix::net::UnixStream;
/// use turquoise::thread;
///
/// let (mut a, mut b) = UnixStream::pair().unwrap();
/// // Blocking std code: the read parks this green thread, not its worker.
/// let reader = thread::spawn(move || {
///     let mut buf = [0u8; 5];
///     b.read_exact(&mut buf).unwrap();
///     buf
/// });
/// a.write_all(b"hello").unwrap();
/// assert_eq!(&reader.join().unwrap(), b"hello");
/// ```
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
    pub(super) task: crate::sched::join::JoinHandle<T>,
    pub(super) thread: Thread,
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to end: parks a green thread, blocks an ordinary
    /// one. Its value, or why there is none (it panicked: the payload; it was
    /// cancelled; it is the caller itself: [`JoinError::is_self_join`]).
    pub fn join(self) -> Result<T, JoinError> {
        if records::current().is_some_and(|me| me.thread.id == self.thread.id) {
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

    /// A handle that cancels the thread as [`cancel`](JoinHandle::cancel)
    /// does, from anywhere, without owning the right to join it (shareable,
    /// as tokio's).
    ///
    /// ```
    /// use std::time::Duration;
    /// use turquoise::thread;
    ///
    /// let h = thread::spawn(|| thread::sleep(Duration::from_secs(3600)));
    /// let abort = h.abort_handle();
    /// std::thread::spawn(move || abort.abort()).join().unwrap();
    /// assert!(h.join().unwrap_err().is_cancelled());
    /// ```
    pub fn abort_handle(&self) -> crate::AbortHandle {
        self.task.abort_handle()
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


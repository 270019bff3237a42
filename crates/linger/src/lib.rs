//! # linger: lightweight preemptible functions
//!
//! Call any function with a timeout. If it returns in time you get its value;
//! if not, it is preempted and handed back as a [`Continuation`] that you can
//! resume later (on this thread, or on another if it was launched
//! [migratable](Builder::migratable)) or drop to cancel it.
//!
//! ```
//! use std::time::Duration;
//! use linger::{launch, resume, Linger};
//!
//! let mut l = launch(|| (0..50_000_000u64).fold(0, |a, x| a ^ x.wrapping_mul(x)), Duration::from_micros(100)).unwrap();
//! while !l.is_completion() {
//!     // do other work here, then give it another slice
//!     resume(&mut l, Duration::from_micros(100)).unwrap();
//! }
//! let Linger::Completion(v) = l else { unreachable!() };
//! # let _ = v;
//! ```
//!
//! Layers, bottom up: [`stack`] (pooled guard-paged stacks), `clock` (cheap deadline clock),
//! `switch` (corosensei context switch plus FP control state), `timer`
//! (per-thread one-shot POSIX timer), `ranges` (code that must not be
//! interrupted), `preempt` (the signal handler: **where preemption happens**),
//! `runtime` (launch/resume/cancel bookkeeping), `interpose` (blocking calls
//! that stay preemptible), `overflow` (stack overflow reporting), `ffi` (C ABI).
//! The safety model is described in `docs/safety.md`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

// The one architecture: a clear error elsewhere, not a build that fails
// deep inside an `asm!` block.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("linger runs on x86-64 Linux only: its context switch, signal-frame layout, trap stubs and code tables are x86-64 code");

// The layers, bottom to top; each imports only from those below it
// (`crates/layout-check` holds it so, `docs/layers.md` draws it). The API is
// this file, `ffi.rs`, `scope.rs` and `isolation.rs`.
mod base;
mod state;
mod machine;
mod judgement;
mod handlers;
mod interpose;
mod runtime;

pub mod ffi;
mod isolation;
mod scope;

pub use interpose::park;
pub use runtime::deferral;
pub use machine::stack;
#[doc(hidden)]
pub use base::glibc;

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

pub use base::config::{Config, Timekeeping, DEFAULT_STACK_SIZE, MIN_STACK_SIZE};
pub use base::parse::{parse_count, parse_duration, parse_duration_in, parse_flag, parse_signal, parse_size};
pub use base::error::Error;
pub use gotcha::{Exhausted, Selection};
pub use isolation::{isolate, prepare_libsets};
pub use scope::{scope, Scope, ScopedLinger};
pub use state::stats::{Preemption, Stats};
pub use state::thread::{last_preemption, reset_stats, stats};

use state::guard::Scope as NoPreempt;
use runtime::launch::{Inner, Status};
use state::thread::Suspend;

/// Result of running a preemptible function for a while.
pub enum Linger<T> {
    /// It returned this value.
    Completion(T),
    /// It ran out of time (or paused itself) and can be resumed.
    Continuation(Continuation<T>),
    /// It panicked or overflowed its stack; it can never run again.
    Poison,
}

/// The paused state of a preemptible function. Dropping it cancels the
/// function (see [`Linger::cancel`]).
///
/// Only functions that own everything they touch (`'static` closures) are
/// handed out this way: such a function can be abandoned at any instruction
/// without leaving the caller a half-updated value it can still reach (see
/// "Soundness of the Rust API" in `docs/safety.md`). Borrowing functions run
/// inside a [`scope`] instead.
pub struct Continuation<T> {
    inner: Inner<T>,
}

// SAFETY: the function and its result are `Send` (required by `launch`), the
// stack belongs to the continuation alone, and the runtime refuses to resume
// a non-migratable function on another thread, so its thread-local storage
// is never reached from a different thread.
unsafe impl<T: Send> Send for Continuation<T> {}

/// How a cancellation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// Nothing to cancel: the function had already completed.
    NotNeeded,
    /// The function's stack was unwound: its destructors ran.
    Unwound,
    /// The function was stopped at an arbitrary instruction (or is owned by
    /// another thread), where unwinding is undefined: it was abandoned without
    /// running its destructors. What it owned leaks, locks it held stay held,
    /// and the live part of its stack stays mapped and is never reused (a
    /// value pinned there, or a pointer another thread keeps into it, stays
    /// valid).
    Reclaimed,
    /// A [`scope`]d function stopped where it could not be unwound was run to
    /// its end instead, since its borrows must not end half-way through an
    /// update. Its result (or panic) was dropped.
    Finished,
}

impl<T> fmt::Debug for Linger<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Linger::Completion(_) => f.write_str("Linger::Completion(..)"),
            Linger::Continuation(c) => write!(f, "Linger::Continuation(yielded: {})", c.yielded()),
            Linger::Poison => f.write_str("Linger::Poison"),
        }
    }
}

impl<T> Continuation<T> {
    /// Did the function hand back control by calling [`pause`]?
    pub fn yielded(&self) -> bool {
        self.inner.is_live() && self.inner.frame().reason.get() == Suspend::Paused
    }

    /// Has the function started running (launched with a non-zero timeout or resumed)?
    pub fn started(&self) -> bool {
        self.inner.co().is_some_and(|c| c.started())
    }
}

impl<T> Linger<T> {
    /// Did the function return?
    pub fn is_completion(&self) -> bool {
        matches!(self, Linger::Completion(_))
    }

    /// Is the function paused, waiting to be resumed?
    pub fn is_continuation(&self) -> bool {
        matches!(self, Linger::Continuation(_))
    }

    /// Did the function panic or overflow its stack?
    pub fn is_poison(&self) -> bool {
        matches!(self, Linger::Poison)
    }

    /// True if the function paused itself with [`pause`] (rather than timing out).
    pub fn yielded(&self) -> bool {
        matches!(self, Linger::Continuation(c) if c.yielded())
    }

    /// The return value, if it completed.
    pub fn completion(self) -> Option<T> {
        match self {
            Linger::Completion(v) => Some(v),
            _ => None,
        }
    }

    /// Cancels the function if it has not completed, and says how. The
    /// `Linger` becomes `Poison` unless it had completed.
    pub fn cancel(&mut self) -> Cancelled {
        if !self.is_continuation() {
            return Cancelled::NotNeeded;
        }
        // Poisoned first: the cancellation may panic (a captured value's `Drop`).
        let Linger::Continuation(mut c) = std::mem::replace(self, Linger::Poison) else { unreachable!() };
        c.inner.cancel().unwrap_or(Cancelled::NotNeeded)
    }
}

/// Options for a single launch.
///
/// ```
/// use std::time::Duration;
///
/// // SAFETY: the function uses no thread-local storage.
/// let b = unsafe { linger::Builder::new().stack_size(1 << 20).migratable(true) };
/// let mut job = b.launch(|| { linger::pause(); "moved" }, Duration::MAX)?;
/// // Migratable: it may be resumed on another thread.
/// let out = std::thread::spawn(move || {
///     linger::resume(&mut job, Duration::from_millis(10)).unwrap();
///     job.completion()
/// })
/// .join()
/// .unwrap();
/// assert_eq!(out, Some("moved"));
/// # Ok::<(), linger::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Builder {
    stack_size: Option<usize>,
    migratable: bool,
    hold_signals: bool,
    /// `Some(false)`: leave blocked calls alone (see `preempt_blocked`).
    preempt_blocked: Option<bool>,
    futex_stops: bool,
    std_waits: bool,
    isolated: bool,
    no_libset: Exhausted,
    reuse_stack: bool,
    park: Option<interpose::park::Hook>,
}

impl Builder {
    /// A builder with the process defaults.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Usable stack size for this function (rounded up to pages, at least 64 KiB).
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Allows resuming the function on a thread other than the one that
    /// launched it. Non-migratable functions resumed elsewhere get
    /// [`Error::WrongThread`] (and are left intact).
    ///
    /// # Safety
    /// Compiled code computes the address of a thread-local variable once and
    /// may keep it in a register across a preemption point (Rust
    /// `thread_local!` and C `__thread` variables used in a loop are hoisted
    /// this way). Resumed on another thread, such code keeps using the first
    /// thread's variable, which is a data race and may outlive that thread.
    /// The caller promises that the function (and everything it calls outside
    /// libc and Rust's `std`, which are never preempted) does not use
    /// thread-local storage.
    pub unsafe fn migratable(mut self, yes: bool) -> Builder {
        self.migratable = yes;
        self
    }

    /// Keeps the program's asynchronous signals blocked on the calling
    /// thread from the moment the function stops until it is resumed or
    /// cancelled. A signal that arrives in between is then handled on the
    /// function's own stack when it resumes, as if the function had never
    /// stopped, and can still interrupt the blocking call it was stopped in
    /// (a handler without `SA_RESTART` makes that call fail with `EINTR`).
    ///
    /// Meant for callers that resume the function at once, as `linger-run`
    /// does with a program's `main`: such a caller never runs code of its
    /// own while the signals are held. The synchronous faults (`SIGSEGV`,
    /// `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGTRAP`, `SIGSYS`) are never held.
    /// Such a function cannot be [migratable](Builder::migratable): launching
    /// one fails with [`Error::Config`]. Cancel it on its own thread, which
    /// gets its mask back then.
    pub fn hold_signals(mut self, yes: bool) -> Builder {
        self.hold_signals = yes;
        self
    }

    /// Whether a deadline that passes while the function is blocked in a
    /// system call through one of linger's wrappers (`read`, `poll`,
    /// `nanosleep`, ...; see `docs/safety.md`) stops it there. Yes by
    /// default: the caller gets control back on time even from a function
    /// that waits. With `false` the call goes on undisturbed, with no timer
    /// signals while it blocks, and the function is stopped shortly after
    /// the call returns. Meant for callers that would only resume it at once
    /// (`linger-run`): a program that sleeps then costs no CPU time.
    pub fn preempt_blocked(mut self, yes: bool) -> Builder {
        self.preempt_blocked = Some(yes);
        self
    }

    /// Whether a deadline that finds the function waiting on a futex inside
    /// libc's synchronisation functions (`pthread_mutex_lock`,
    /// `pthread_cond_wait`, `pthread_rwlock_*lock`, `pthread_barrier_wait`,
    /// `sem_wait`, `pthread_join`, their timed variants and C11's) stops it
    /// there. No by default: linger never stops a function inside libc, so
    /// such a wait lasts until the call returns, even when what it waits
    /// for can only happen once the caller runs something else (a mutex
    /// held by another function stopped on the same thread: a deadlock).
    /// With `true` the function is stopped in the wait like anywhere in its
    /// own code, and waits again when resumed. Meant for green threads
    /// (turquoise turns it on for its own). Only waits reached directly
    /// from the function's code through those entry points count: a wait
    /// inside `malloc`, stdio or a comparator called back by `qsort` stays
    /// deferred. See `docs/safety.md` ("Futex waits in libc") for the
    /// argument, what glibc state a stopped wait leaves, and what stays
    /// unsupported (recursive, error-checking, robust and priority mutexes
    /// shared with other functions of the same thread; `pthread_cancel` of
    /// the thread; cancelling a function stopped in a wait leaves the
    /// object's waiter counts as they were).
    pub fn stop_in_futex_waits(mut self, yes: bool) -> Builder {
        self.futex_stops = yes;
        self
    }

    /// Lets a deadline stop the function in the waits of Rust's std that
    /// hold nothing while they wait, although std's code is deferred: a
    /// `thread::park` or `park_timeout`, a blocked channel operation
    /// (`std::sync::mpsc`), and (with [`stop_in_futex_waits`]) the
    /// `pthread_join` under `std::thread::JoinHandle::join`. Resumed, the
    /// function waits again.
    ///
    /// Only for a function that has its own `std::thread::current()`: std's
    /// parker is a state word of the current `Thread`, which a function
    /// sharing its thread's would share with its caller (a caller that parks
    /// too would then see the function's half of the protocol). turquoise's
    /// green threads have their own (their thread-local images hold std's
    /// current-thread slots). Not memory-unsafe otherwise, but parks may
    /// hang. See `docs/safety.md` ("Waits in Rust's std").
    ///
    /// [`stop_in_futex_waits`]: Builder::stop_in_futex_waits
    pub fn stop_in_std_waits(mut self, yes: bool) -> Builder {
        self.std_waits = yes;
        self
    }

    /// Gives the function its own copy of the isolated libraries (a
    /// *libset*, see [`isolate`]), so that deadlines inside them are taken
    /// like anywhere in its own code instead of waiting for the library
    /// call to return. Cancelling the function resets its libset (and frees
    /// what the libraries allocated for it); a function that completes
    /// hands it back as it is. If nothing was isolated yet, the first
    /// isolated launch isolates `LINGER_ISOLATE` (default: `all`). See
    /// "gotcha" in `docs/safety.md` for what becomes preemptible.
    ///
    /// # Safety
    /// What the isolated libraries make inside the function belongs to its
    /// libset, which a cancel resets and frees, and which other functions
    /// use after this one. The caller promises that nothing the libraries
    /// made or allocated inside the function (a `png_struct`, an sqlite
    /// connection, a buffer from the library's allocator, or a value of a
    /// wrapper crate holding one) is used outside the function: not handed
    /// out through a channel, a shared structure or a borrow while the
    /// function may still be cancelled, and not returned to be used after
    /// it completes. Plain data the function computes and copies out (the
    /// decoded pixels in a caller's buffer, a query's numbers) is the
    /// caller's as usual.
    pub unsafe fn isolated(mut self, yes: bool) -> Builder {
        self.isolated = yes;
        self
    }

    /// What an isolated launch does when every libset is in use (at most
    /// 11, or 15 with `GLIBC_TUNABLES=glibc.rtld.nns=16`): fail with
    /// [`Error::Isolation`] (the default), run with the shared libraries
    /// (deferred inside them, as without isolation), or wait for one.
    pub fn when_no_libset(mut self, policy: Exhausted) -> Builder {
        self.no_libset = policy;
        self
    }

    /// Lets a cancel that stops the function at an arbitrary instruction
    /// ([`Cancelled::Reclaimed`]) give its whole stack back for reuse. By
    /// default the live part of such a stack stays mapped for the life of
    /// the process (a few KiB per cancel), since something outside the
    /// function may still point into it. A server that cancels thousands
    /// of decodes needs it back.
    ///
    /// # Safety
    /// The caller promises that once the function is cancelled nothing
    /// reads or writes its stack: it pinned no value there that something
    /// else keeps a pointer to (a future polled with a waker registered
    /// elsewhere, an intrusive waiter, a scoped thread, a channel packet),
    /// and the C code it calls registered no stack address with
    /// process-wide state (`pthread_cleanup_push` with the thread's
    /// cancellation, a `sigaltstack` on it). Libraries in its libset
    /// (see [`Builder::isolated`]) are reset with it, so their own state
    /// does not count.
    pub unsafe fn reuse_stack_on_cancel(mut self, yes: bool) -> Builder {
        self.reuse_stack = yes;
        self
    }

    /// Makes the function a green thread of the runtime that implements
    /// `hook`: inside it, linger's wrappers of blocking calls (`read`,
    /// `write`, `recv`, `accept`, `poll`, `select`, `epoll_wait`,
    /// `nanosleep`, ...) park it through the hook, which switches back to its
    /// scheduler, instead of blocking the thread. See [`park`] for the
    /// contract and `docs/safety.md` ("The park seam") for what parks. A
    /// function launched without a hook (the default) behaves as before.
    pub fn park_with(mut self, hook: std::sync::Arc<dyn interpose::park::Park>) -> Builder {
        self.park = Some(interpose::park::Hook(hook));
        self
    }

    /// Runs `f` on its own stack for at most `timeout` (see [`launch`]).
    #[inline]
    pub fn launch<T, F>(&self, f: F, timeout: Duration) -> Result<Linger<T>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.launch_ending(f, timeout, Ending::Here)
    }

    /// [`Builder::launch`], with the choice of where the thread ends if
    /// the function calls `pthread_exit` (see `exit.rs`).
    #[inline(always)]
    pub(crate) fn launch_ending<T, F>(&self, f: F, timeout: Duration, ending: Ending) -> Result<Linger<T>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let mut l = Linger::Continuation(Continuation { inner: self.create(f)? });
        if !timeout.is_zero() {
            drive(&mut l, timeout, ending)?;
        }
        Ok(l)
    }

    /// Sets a function up without running it. The caller keeps the lifetime
    /// promise: a non-`'static` function is only ever held by a [`Scope`].
    #[inline]
    pub(crate) fn create<'a, T, F>(&self, f: F) -> Result<Inner<T>, Error>
    where
        F: FnOnce() -> T + Send + 'a,
        T: Send + 'a,
    {
        refuse_in_signal_handler()?;
        let cfg = runtime::launch::init()?;
        let size = match self.stack_size {
            Some(s) => base::config::checked_stack_size(s)?,
            None => cfg.stack_size,
        };
        if self.hold_signals && self.migratable {
            return Err(Error::Config("a function that holds signals cannot be migratable".into()));
        }
        let lease = if self.isolated { isolation::lease(self.no_libset, cfg)? } else { None };
        let opts = runtime::launch::LaunchOptions {
            migratable: self.migratable,
            hold_signals: self.hold_signals,
            preempt_blocked: self.preempt_blocked.unwrap_or(true),
            futex_stops: self.futex_stops,
            std_waits: self.std_waits,
            lease,
            reuse_stack: self.reuse_stack,
            park: self.park.clone(),
        };
        let scope = NoPreempt::enter();
        Inner::new(f, size, opts, scope.thread())
    }
}

/// Runs `f` on the calling thread, on a stack of its own, for at most
/// `timeout`.
///
/// Returns [`Linger::Completion`] if it returned in time, otherwise a
/// [`Linger::Continuation`]. `Duration::ZERO` only sets the function up (it
/// has not run when this returns); `Duration::MAX` means no limit. Timeouts
/// shorter than the cost of arming the timer plus `LINGER_RETRY_US` (tens of
/// microseconds in VMs, see `docs/safety.md`) are rounded up to it. Inside
/// another preemptible function, the inner deadline never extends past the
/// outer one. A panic in `f` propagates to the caller and leaves nothing
/// behind. A `pthread_exit` inside `f` (from C code it calls) unwinds `f`
/// and then ends the thread from this call or from [`resume`], unwinding
/// the caller in turn: on a `std::thread` that aborts, as `pthread_exit`
/// does there without linger.
///
/// ```
/// use std::time::Duration;
/// use linger::Linger;
///
/// // A function that takes longer than its first slice.
/// let mut job = linger::launch(|| (0..20_000_000u64).fold(0, |a, i| a ^ i), Duration::from_micros(100))?;
/// while let Linger::Continuation(_) = job {
///     // ... the caller serves other work here ...
///     linger::resume(&mut job, Duration::from_micros(100))?;
/// }
/// assert!(job.completion().is_some());
/// # Ok::<(), linger::Error>(())
/// ```
///
/// `f` must own what it uses (`'static`): a function that runs out of time
/// may be cancelled at any instruction, and data it borrowed could then be
/// left half-updated. To borrow, launch inside a [`scope`].
///
/// ```compile_fail
/// # use std::time::Duration;
/// let mut v = vec![3, 1, 2];
/// let l = linger::launch(|| v.sort(), Duration::from_micros(100)).unwrap();
/// drop(l); // would leave `v` half-sorted
/// ```
#[inline]
pub fn launch<T, F>(f: F, timeout: Duration) -> Result<Linger<T>, Error>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new().launch(f, timeout)
}

/// Continues a paused function for at most `timeout`. A completed function is
/// left as it is; a poisoned one gives [`Error::Poisoned`]. A panic inside the
/// function propagates to the caller and leaves [`Linger::Poison`].
///
/// ```
/// use std::time::Duration;
///
/// // A function that yields once, then returns.
/// let mut job = linger::launch(|| { linger::pause(); 7 }, Duration::MAX)?;
/// assert!(job.yielded());
/// linger::resume(&mut job, Duration::from_millis(10))?;
/// assert_eq!(job.completion(), Some(7));
/// # Ok::<(), linger::Error>(())
/// ```
#[inline]
pub fn resume<T>(l: &mut Linger<T>, timeout: Duration) -> Result<&mut Linger<T>, Error> {
    resume_ending(l, timeout, Ending::Here)
}

/// [`resume`], with the choice of where the thread ends if the function
/// calls `pthread_exit` (see `exit.rs`).
#[inline(always)]
pub(crate) fn resume_ending<T>(l: &mut Linger<T>, timeout: Duration, ending: Ending) -> Result<&mut Linger<T>, Error> {
    match l {
        Linger::Completion(_) => Ok(l),
        Linger::Poison => Err(Error::Poisoned),
        Linger::Continuation(_) => {
            refuse_in_signal_handler()?;
            runtime::launch::init_thread()?;
            drive(l, timeout, ending)?;
            Ok(l)
        }
    }
}

/// Launching, resuming and cancelling are not async-signal-safe: called
/// from a signal handler of the program's, they could interrupt the runtime
/// itself (or its first initialisation) on this thread.
#[inline]
pub(crate) fn refuse_in_signal_handler() -> Result<(), Error> {
    if handlers::program_signals::in_program_handler() {
        return Err(Error::NotHere("inside a signal handler"));
    }
    Ok(())
}

/// Inlined, like `launch` and `resume`: every frame between the caller's
/// code and the switch inside `Inner::resume` costs a mispredicted return
/// after each switch (see `preempt::pause`).
#[inline(always)]
fn drive<T>(l: &mut Linger<T>, timeout: Duration, ending: Ending) -> Result<Option<Ended>, Error> {
    let Linger::Continuation(c) = l else { return Ok(None) };
    let status = c.inner.resume(timeout);
    settle(l, status, ending)
}

/// What a resume's status makes of `l`.
#[inline(always)]
fn settle<T>(l: &mut Linger<T>, status: Result<Option<Status<T>>, Error>, ending: Ending) -> Result<Option<Ended>, Error> {
    match status? {
        None | Some(Status::Suspended) => Ok(None),
        Some(Status::Completed(v)) => {
            *l = Linger::Completion(v);
            Ok(None)
        }
        Some(Status::Panicked(p)) => {
            *l = Linger::Poison;
            if ending == Ending::Contained {
                return Ok(Some(Ended::Panicked(p)));
            }
            std::panic::resume_unwind(p)
        }
        Some(Status::Overflowed { stack_size }) => {
            *l = Linger::Poison;
            Err(Error::StackOverflow { stack_size })
        }
        Some(Status::Exited) => {
            // The function called `pthread_exit` (or its thread was
            // cancelled in it): the thread ends here, as it would have
            // without the function between (see `exit.rs`).
            *l = Linger::Poison;
            match ending {
                Ending::Here => machine::exit::end_thread_if_due(),
                Ending::ByCaller => {}
                Ending::Contained => return Ok(state::thread::ts().exit_pending.take().map(Ended::Exited)),
            }
            Ok(None)
        }
    }
}

/// Where a thread ends whose function ended by `pthread_exit`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// In the Rust API call that saw it.
    Here,
    /// In the C API call, once out of its Rust frames (the forced unwind
    /// must not meet `ffi::guarded`'s `catch_unwind`, which would abort).
    ByCaller,
    /// Nowhere: the function alone ends, and [`resume_contained`] says so
    /// (a panic likewise comes back as a value).
    Contained,
}

/// How a function ended other than by returning, as [`resume_contained`]
/// reports it. The [`Linger`] is then [`Linger::Poison`].
pub enum Ended {
    /// It panicked; the payload (the function's own unwinding is over).
    Panicked(Box<dyn std::any::Any + Send + 'static>),
    /// It called `pthread_exit` (or its thread was cancelled inside it) with
    /// this value (`PTHREAD_CANCELED` for a cancellation).
    Exited(usize),
}

impl std::fmt::Debug for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Panicked(_) => f.write_str("Ended::Panicked(..)"),
            Ended::Exited(v) => write!(f, "Ended::Exited({v:#x})"),
        }
    }
}

/// [`resume`] for runtimes that run many functions on one thread (green
/// threads): a panic in the function comes back as [`Ended::Panicked`]
/// instead of propagating through the caller, and a function that calls
/// `pthread_exit` ends alone ([`Ended::Exited`]) instead of taking the
/// calling thread with it. `Ok(None)`: it completed or stopped, as with
/// [`resume`].
///
/// The panic is not raised again on the caller's side, so nothing of it
/// touches the caller's thread-local state (the caller may run with other
/// thread-local values installed than the function's, as turquoise's green
/// threads do).
#[inline]
pub fn resume_contained<T>(l: &mut Linger<T>, timeout: Duration) -> Result<Option<Ended>, Error> {
    match l {
        Linger::Completion(_) => Ok(None),
        Linger::Poison => Err(Error::Poisoned),
        Linger::Continuation(_) => {
            refuse_in_signal_handler()?;
            runtime::launch::init_thread()?;
            drive(l, timeout, Ending::Contained)
        }
    }
}

/// [`resume_contained`], cooperatively: the function is never stopped by
/// its deadline. Instead, each `every` that passes while it runs adds one
/// to `flag`, which the function's own code checks at points of its
/// choosing and answers by calling [`pause`] (a *yield check*: one load and
/// one branch when nothing is due). The resume returns when the function
/// pauses, parks or ends. For schedulers of cooperative threads
/// (turquoise's activities) that still want to know when one runs long: the
/// count keeps growing while a function never checks.
///
/// A function launched inside it keeps its own deadline (not bounded by
/// this one's, which stops nothing).
#[inline]
pub fn resume_contained_cooperative<T>(l: &mut Linger<T>, every: Duration, flag: &std::sync::atomic::AtomicU32) -> Result<Option<Ended>, Error> {
    match l {
        Linger::Completion(_) => Ok(None),
        Linger::Poison => Err(Error::Poisoned),
        Linger::Continuation(c) => {
            refuse_in_signal_handler()?;
            runtime::launch::init_thread()?;
            let status = c.inner.resume_cooperative(every, flag);
            settle(l, status, Ending::Contained)
        }
    }
}

/// Starts the runtime now instead of at the first launch: installs the signal
/// handlers, creates this thread's timer and builds the table of code that
/// must not be preempted (which reads the executable's symbol table: a few
/// milliseconds, once per process). Optional; every launch does it if needed.
pub fn init() -> Result<(), Error> {
    runtime::launch::init().map(|_| ())
}

/// With [`Timekeeping::Monitor`]: how many times the process's monitor
/// thread woke up, and how many preemption signals it sent, so far (both 0
/// with per-thread timers). For benchmarks and tests.
#[doc(hidden)]
pub fn monitor_counters() -> (u64, u64) {
    machine::monitor::counters()
}

/// Names code of the program that must not be preempted, for libraries
/// built on linger: an async runtime names its scheduler, whose per-thread
/// state (a run queue behind a `RefCell`, a driver behind a `Mutex`) the
/// caller of a function stopped there would find half-changed. Each rule is
/// a Rust path prefix and whether code under it is deferred (`true`) or
/// preemptible (`false`, for exceptions inside a deferred path that run the
/// program's code); among the rules matching a function's own path (for
/// `<T as Trait>::f`, `T`'s), the longest decides. As with `std`'s deferred
/// parts, a deadline that finds such a frame anywhere on the function's call
/// chain waits for it to return. Rules apply to the executable's symbols;
/// they take effect at the next launch or resume, which reads the symbol
/// table again (milliseconds, once per change). See `docs/safety.md`.
pub fn defer_paths(rules: &[(&str, bool)]) {
    judgement::ranges::add_path_rules(rules);
}

/// For linger-run's `--children`: from now on every image the program starts
/// (`exec` family, `posix_spawn`, `system`, `popen`) gets `preload` in front
/// of its `LD_PRELOAD` and the `(name, value)` variables, which the program's
/// own environment no longer has. Call once, before the program runs.
#[doc(hidden)]
pub fn set_child_env(preload: &str, vars: &[(String, String)]) {
    interpose::child_env::set(preload, vars);
}

/// For linger-run: `f` is called before each exec the process makes (see
/// `interpose/exec.rs`, `on_exec`), with the path asked for.
#[doc(hidden)]
pub fn on_exec(f: fn(Option<&std::ffi::CStr>)) {
    interpose::exec::on_exec(f);
}

/// Inside a preemptible function: hands control back to the caller at once,
/// as if the time had run out ([`Linger::yielded`] then reports it). Outside
/// one it does nothing.
///
/// Inlined into the caller, so that the switch happens in the function's own
/// frame (see `preempt::pause`).
#[inline]
pub fn pause() {
    handlers::preempt::pause(true);
}

/// Is the calling code running inside a preemptible function?
pub fn is_preemptible() -> bool {
    !state::thread::ts().current.get().is_null()
}

/// Is the calling code running in a function resumed cooperatively
/// ([`resume_contained_cooperative`]), itself and not a preemptible function
/// it launched? Such code is never stopped by a deadline.
pub fn is_cooperative() -> bool {
    let f = state::thread::ts().current.get();
    // SAFETY: `current` is null or this thread's innermost running function.
    !f.is_null() && !unsafe { (*f).yield_flag.get() }.is_null()
}

/// Is the calling code inside a [`critical`] scope (or linger's own code)?
/// Cooperative schedulers use it to hold their yields there too (a no-yield
/// scope is a `critical` one).
#[inline]
pub fn in_critical() -> bool {
    state::thread::ts().defer.get() > 0
}

/// A scope in which the calling preemptible function is not preempted. A
/// deadline that passes inside it is taken as soon as the outermost scope
/// ends. Costs a thread-local increment and decrement.
pub struct Critical {
    _not_send: PhantomData<*const ()>,
}

impl Critical {
    /// Opens a no-preemption scope, closed when the guard drops.
    #[inline]
    pub fn enter() -> Critical {
        std::mem::forget(NoPreempt::enter());
        Critical { _not_send: PhantomData }
    }
}

impl Drop for Critical {
    #[inline]
    fn drop(&mut self) {
        state::guard::exit(true);
    }
}

/// Runs `f` without being preempted (see [`Critical`]).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let l = log.clone();
/// let job = linger::launch(move || {
///     for i in 0..1000 {
///         // Never stopped with the lock held: a deadline inside waits
///         // for the scope's end.
///         linger::critical(|| l.lock().unwrap().push(i));
///     }
/// }, Duration::from_micros(50))?;
/// drop(job); // cancelled wherever it was, never inside the lock
/// assert!(log.lock().is_ok());
/// # Ok::<(), linger::Error>(())
/// ```
#[inline]
pub fn critical<R>(f: impl FnOnce() -> R) -> R {
    let _g = Critical::enter();
    f()
}

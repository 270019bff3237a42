//! Per-thread runtime state, shared between ordinary code and the preemption
//! signal handler of the same thread.
//!
//! Everything here is `const`-initialised and has no destructor, so Rust
//! accesses it without lazy registration: that makes it safe to touch from a
//! signal handler. Code that may be resumed on another thread must not keep a
//! reference to this state across a switch: use [`ts`], which the compiler
//! cannot cache.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use corosensei::trap::CoroutineTrapHandler;

use crate::state::stats::StatCells;
use crate::state::outcome::Outcome;

/// No FP control state recorded (`switch::FpControl::NONE`).
pub(crate) const FP_NONE: u64 = u64::MAX;

/// Deadline meaning "no limit" / "timer not armed".
pub(crate) const NEVER: u64 = u64::MAX;

/// Why a function handed control back to its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// It called `pause()`.
    Paused,
    /// Its deadline passed (taken in the signal handler or at a deferral exit).
    Preempted,
    /// It overflowed its stack inside library code, which finished on the
    /// emergency reserve (see `overflow.rs`): never resumed, abandoned.
    Overflowed,
}

/// Signal handler runs, counted so that an interposed call can tell an
/// EINTR caused by preemption from one the program's own handler caused.
/// Kept per function (they move with it between threads, and ignore what its
/// caller handled while it was stopped) and per thread (outside functions).
pub(crate) struct SignalCounts {
    /// Entries into the preemption handler.
    pub ours: Cell<u64>,
    /// Runs of the program's handlers.
    pub theirs: Cell<u64>,
    /// Runs of the program's handlers installed without `SA_RESTART`.
    pub interrupting: Cell<u64>,
    /// Stack pointer at the entry of the program's innermost running signal
    /// handler, or 0 (see `interpose::signals::in_program_handler`).
    pub handler_sp: Cell<usize>,
}

impl SignalCounts {
    pub(crate) const fn new() -> SignalCounts {
        SignalCounts { ours: Cell::new(0), theirs: Cell::new(0), interrupting: Cell::new(0), handler_sp: Cell::new(0) }
    }

    pub(crate) fn bump_theirs(&self, restart: bool) {
        self.theirs.set(self.theirs.get() + 1);
        if !restart {
            self.interrupting.set(self.interrupting.get() + 1);
        }
    }
}

/// The counts of the running function, or of the thread outside functions.
/// Async-signal-safe.
pub(crate) fn signal_counts(t: &ThreadState) -> &SignalCounts {
    let f = t.current.get();
    if f.is_null() {
        &t.counts
    } else {
        // SAFETY: `current` is live while it runs; the reference is used
        // before any switch.
        unsafe { &(*f).counts }
    }
}

/// The type-independent part of a running or paused preemptible function.
/// Lives inside the boxed continuation, so its address is stable.
pub(crate) struct Frame {
    /// The last clear walk of a chain on this function's stack from a
    /// `pause()` or the end of a scope (`unwind::Memo`), in the stack's
    /// header (`stack::MEMO_AT`); see [`Frame::memo`].
    pub memo: *const std::cell::RefCell<crate::state::memo::Memo>,
    /// Absolute CLOCK_MONOTONIC deadline (ns) of the current slice.
    pub deadline: Cell<u64>,
    /// `&Yielder` of the coroutine, set when it first runs.
    pub yielder: Cell<*const ()>,
    /// Stack address just below the runtime's entry frames: the stack scan stops here.
    pub entry_sp: Cell<usize>,
    /// Usable stack bounds, and the guarded range below (hard guard page
    /// and emergency reserve, see `stack.rs`).
    pub stack_lo: usize,
    pub stack_hi: usize,
    pub guard: (usize, usize),
    /// The emergency reserve, and whether an overflow in library code
    /// opened it (the stack then reaches down to `reserve.0`).
    pub reserve: (usize, usize),
    pub reserve_open: Cell<bool>,
    /// It overflowed inside library code, which is finishing on the
    /// reserve: it is abandoned as overflowed when that call returns to its
    /// own code (its return trap), or at its next stop.
    pub overflow_due: Cell<bool>,
    /// Enclosing running function on this thread (nesting).
    pub parent: Cell<*mut Frame>,
    /// The function's own critical depth while it is switched out.
    pub fn_defer: Cell<u32>,
    /// The caller's critical depth and pending flag while the function runs.
    pub caller_defer: Cell<u32>,
    /// The caller's stack pointer when it switched the function in: a caller
    /// found above it while the function is current left the function by
    /// `longjmp` (see `runtime::left_by_longjmp`).
    pub caller_sp: Cell<usize>,
    pub caller_pending: Cell<bool>,
    /// Set while an interposed blocking call runs: stack address of its frame.
    pub blocking_sp: Cell<usize>,
    /// The function is parked inside the signal handler.
    pub in_handler: Cell<bool>,
    /// It stopped where unwinding is defined (a Rust call to `pause()` or the
    /// end of a Rust no-preemption scope), so cancellation may unwind it.
    pub unwindable: Cell<bool>,
    /// Its signal context while parked in the handler.
    pub ucontext: Cell<*mut libc::ucontext_t>,
    /// Running right now (guards against a function resuming itself).
    pub running: Cell<bool>,
    /// Cancellation by unwinding is in progress.
    pub cancelling: Cell<bool>,
    /// Last reason for handing back control.
    pub reason: Cell<Suspend>,
    /// Consecutive deferrals by the stack/PC check, for retry back-off.
    pub retries: Cell<u32>,
    /// Thread the function belongs to (address of that thread's state).
    pub home: Cell<u64>,
    pub migratable: bool,
    /// Keep the program's signals blocked on the caller's side while the
    /// function is stopped (see `Builder::hold_signals`).
    pub hold_signals: bool,
    /// While stopped with `hold_signals`: the mask to give back to the thread
    /// (the function's own, from when it stopped).
    pub held: Cell<Option<u64>>,
    /// Stop the function at the system call of a blocked interposed call
    /// when its deadline passes (see `Builder::preempt_blocked`).
    pub preempt_blocked: bool,
    /// Its deadline passed while it was blocked and was left for when the
    /// call returns.
    pub overdue: Cell<bool>,
    /// Where the current deadline first found it in code that must not be
    /// stopped (the interrupted instruction's address), 0 if it has not:
    /// what `Stats::worst_overrun_at` reports.
    pub deferred_at: Cell<usize>,
    /// A deadline may stop it in a futex wait inside libc's synchronisation
    /// functions (see `Builder::stop_in_futex_waits`, `futex.rs`).
    pub futex_stops: bool,
    /// A deadline may stop it in a futex wait under std's parking and
    /// channel code, and in `pthread_join` under std's `JoinHandle::join`
    /// (see `Builder::stop_in_std_waits`).
    pub std_waits: bool,
    /// While resumed cooperatively ([`crate::resume_contained_cooperative`]):
    /// the counter its deadlines bump instead of stopping it (null
    /// otherwise), and the period they come at, in ns.
    pub yield_flag: Cell<*const std::sync::atomic::AtomicU32>,
    pub yield_every: Cell<u64>,
    /// The function's own FP control state at its last pause
    /// (`FpControl::bits`), loaded by the next switch in where the
    /// resumer's differs; `FpControl::NONE` where that is not needed (not
    /// started: it takes its caller's, as a call does; stopped in the
    /// handler: `rt_sigreturn` restores all of it).
    pub fp_own: Cell<u64>,
    /// The trap address (`return_trap`) it holds, plus one; 0 for none.
    pub trap_slot: Cell<u32>,
    /// A `pause()` found deferred code on its call chain and armed a return
    /// trap: the trap stops the function as a pause (see `preempt::pause`).
    pub pause_due: Cell<bool>,
    /// Stack pointer where it last switched out: nothing of it below this
    /// is live while it is stopped.
    pub stopped_sp: Cell<usize>,
    /// Signal handler runs while this function ran.
    pub counts: SignalCounts,
    /// Its C++ exception globals, errno and locale while it is stopped, and
    /// its caller's while it runs (see `flow`).
    pub flow: crate::state::saved::Saved,
    /// The value this function passed to `pthread_exit` (see `exit.rs`);
    /// `PTHREAD_CANCELED` (all ones) until it does, the value a
    /// cancellation, which does not pass through our `pthread_exit`, ends
    /// with (a word, not an `Option`: the frame fills the stack's header).
    pub exit_value: Cell<usize>,
    /// Its park hook (`Builder::park_with`), taken when its stack is given
    /// back; read in place while it runs (see `interpose::parking`).
    pub park: Cell<Option<std::sync::Arc<dyn crate::state::park::Park>>>,
    /// It is inside a park hook, called from a wrapper: a `pause()` there
    /// has the wrapper's `extern "C"` frames above it, which a cancel must
    /// not unwind (see `runtime::unwinds_here`).
    pub parked: Cell<bool>,
    /// While a park hook runs: the wrapper found the call chain clear above
    /// this stack address just before it called the hook (which runs
    /// deeper), so a `pause()` in the hook walks only its own frames up to
    /// it (see `preempt::judge_here`); 0 otherwise.
    pub judged_above: Cell<usize>,
    /// The table generation read before that walk: the shortcut holds only
    /// while the table is still that one.
    pub judged_gen: Cell<u64>,
    pub caller_flow: crate::state::saved::Saved,
    /// The libset the function's library calls go to (0: the program's
    /// own libraries, where deadlines are deferred), and the caller's,
    /// put back when the function stops.
    pub libset: usize,
    /// A cancel at an arbitrary point recycles the whole stack instead of
    /// keeping its live part (`Builder::reuse_stack_on_cancel`).
    pub reuse_stack: bool,
    pub caller_libset: Cell<usize>,
    /// The preemption handler running on this function's stack, if any: its
    /// signal context, and the scope depth and errno it found, so the SIGSEGV
    /// handler can abandon it (`preempt::handler_out_of_stack`).
    pub handler_uc: Cell<usize>,
    pub handler_defer: Cell<u32>,
    pub handler_errno: Cell<i32>,
    /// The thread was in a reading section of the table when that handler
    /// began (see `ranges::abandon_reading`).
    pub handler_reading: Cell<bool>,
    /// Lets the SIGSEGV handler abandon the coroutine after a stack overflow.
    pub trap: Cell<Option<CoroutineTrapHandler<Outcome>>>,
    /// Where the coroutine stores its return value (`*mut Option<T>`).
    pub result: Cell<*mut ()>,
    /// A panic raised by dropping the function before it started (see
    /// `runtime::Unstarted`), for the canceller to raise again.
    pub drop_panic: Cell<Option<Box<dyn std::any::Any + Send>>>,
}

impl Frame {
    /// This function's `pause()` memo.
    pub(crate) fn memo(&self) -> &std::cell::RefCell<crate::state::memo::Memo> {
        // SAFETY: set at launch to the memo `PooledStack::map` initialised
        // in the header of the stack that holds this Frame; it lives as long
        // as that mapping, which outlives the Frame.
        unsafe { &*self.memo }
    }

    /// The lowest address of the stack the function may use now.
    #[inline]
    pub(crate) fn floor(&self) -> usize {
        if self.reserve_open.get() {
            self.reserve.0
        } else {
            self.stack_lo
        }
    }
}

/// Thread-wide state.
pub(crate) struct ThreadState {
    /// Innermost running preemptible function, or null.
    pub current: Cell<*mut Frame>,
    /// Depth of no-preemption scopes (critical sections and runtime transit).
    pub defer: Cell<u32>,
    /// A deadline passed during a no-preemption scope.
    pub pending: Cell<bool>,
    /// Deadline the timer is armed for, or NEVER.
    pub armed: Cell<u64>,
    /// TSC reading and CLOCK_MONOTONIC time of this thread's clock anchor.
    pub tsc_anchor: Cell<u64>,
    pub ns_anchor: Cell<u64>,
    /// When the last timer_settime returned (CLOCK_MONOTONIC ns).
    pub armed_at: Cell<u64>,
    /// The FP control state of the running function's resumer
    /// (`FpControl::bits`), read as it switched in and given back by the
    /// switch out (see `switch::FpControl`); a nested resume keeps the
    /// outer one's on its stack meanwhile.
    pub fp_caller: Cell<u64>,
    /// Moving average of what arming the timer costs, in ns.
    pub arm_cost: Cell<u64>,
    /// Kernel timer id, or -1 before the thread's first launch.
    pub timer: Cell<i32>,
    /// The thread can launch and resume without `runtime::init_slow`: it
    /// has its timer and, with the monitor, its slot in this process.
    pub ready: Cell<bool>,
    /// This thread's deadline slot with the monitor (`monitor.rs`), or null.
    pub slot: Cell<*const crate::state::slot::Slot>,
    /// Unique id of this thread (0 until first needed); never reused, unlike
    /// the address of this state, which glibc recycles with thread stacks.
    pub id: Cell<u64>,
    /// Signal handler runs on this thread outside preemptible functions.
    pub counts: SignalCounts,
    /// The program blocked the preemption signal on this thread (as far as
    /// it knows: the real mask never does).
    pub shadow_blocked: Cell<bool>,
    /// This thread's unwind context (`unwind::Ctx`), or null.
    pub unwind_ctx: Cell<*mut ()>,
    /// This thread's mark for reading the code table (`ranges::read`), or
    /// None: the handler then reads nothing and defers.
    pub reader: Cell<Option<&'static crate::state::reader::Reader>>,
    pub stats: StatCells,
    /// This thread's most recent preemption (`crate::last_preemption`).
    pub last_preemption: Cell<Option<crate::state::stats::Preemption>>,
    /// Addresses of this thread's C++ exception globals and errno, or 0
    /// until first needed (see `flow`).
    pub cxa_globals: Cell<usize>,
    pub errno_at: Cell<usize>,
    /// A function on this thread ended by `pthread_exit` or cancellation:
    /// the value to end the thread with from the caller's side (`exit.rs`).
    pub exit_pending: Cell<Option<usize>>,
    /// Park counters (`park::counters`): waits handed to a hook, and calls
    /// that would have parked but blocked the thread.
    pub parks: Cell<u64>,
    pub parks_blocked: Cell<u64>,
}

thread_local! {
    static TS: ThreadState = const {
        ThreadState {
            current: Cell::new(ptr::null_mut()),
            defer: Cell::new(0),
            pending: Cell::new(false),
            armed: Cell::new(NEVER),
            arm_cost: Cell::new(0),
            armed_at: Cell::new(0),
            fp_caller: Cell::new(FP_NONE),
            tsc_anchor: Cell::new(0),
            ns_anchor: Cell::new(0),
            timer: Cell::new(-1),
            ready: Cell::new(false),
            slot: Cell::new(ptr::null()),
            id: Cell::new(0),
            counts: SignalCounts::new(),
            unwind_ctx: Cell::new(ptr::null_mut()),
            reader: Cell::new(None),
            shadow_blocked: Cell::new(false),
            stats: StatCells::new(),
            last_preemption: Cell::new(None),
            cxa_globals: Cell::new(0),
            errno_at: Cell::new(0),
            exit_pending: Cell::new(None),
            parks: Cell::new(0),
            parks_blocked: Cell::new(0),
        }
    };
}

/// This thread's state. Never inlined and opaque to the optimiser, so a call
/// after a context switch really reads the *current* thread's pointer.
#[inline(never)]
pub(crate) fn ts() -> &'static ThreadState {
    // SAFETY: an empty asm block with default options acts as a compiler
    // barrier that may read memory, so calls to this function are not merged.
    unsafe { std::arch::asm!("", options(nostack, preserves_flags)) };
    // SAFETY: the state is const-initialised without destructor, so it lives
    // as long as the thread; callers never keep the reference across a switch
    // to another thread or past thread exit.
    TS.with(|t| unsafe { &*(t as *const ThreadState) })
}

/// This thread's state, for the caller's side of the runtime only: code that
/// runs on the caller's own stack and never across a switch out of a
/// preemptible function (the optimiser may reuse this address within a
/// function, which is exactly what must not happen after a migration).
#[inline(always)]
pub(crate) fn ts_caller() -> &'static ThreadState {
    // SAFETY: as in `ts`.
    TS.with(|t| unsafe { &*(t as *const ThreadState) })
}

/// Identifier used for the "home thread" check.
pub(crate) fn thread_key() -> u64 {
    key_of(ts())
}

/// `thread_key` of the thread whose state is `t`.
#[inline]
pub(crate) fn key_of(t: &ThreadState) -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    if t.id.get() == 0 {
        t.id.set(NEXT.fetch_add(1, Ordering::Relaxed));
    }
    t.id.get()
}

/// CLOCK_MONOTONIC in nanoseconds (vDSO; async-signal-safe).
#[inline]
pub(crate) fn now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The calling thread's most recent preemption, if any: after a `resume`
/// that came back preempted, how late and whether deferred (what a
/// scheduler reports per task; the counters here are per thread).
pub fn last_preemption() -> Option<crate::state::stats::Preemption> {
    ts().last_preemption.get()
}

/// Counters of the calling thread.
pub fn stats() -> crate::state::stats::Stats {
    ts().stats.snapshot()
}

/// Resets the calling thread's counters to zero (and its
/// [park counters](crate::park::counters)).
pub fn reset_stats() {
    let t = ts();
    t.stats.reset();
    t.parks.set(0);
    t.parks_blocked.set(0);
}

/// Counts a libset reset on the calling thread.
pub(crate) fn record_libset_reset(_ns: u64, blocks: u64) {
    let s = &ts().stats;
    crate::state::stats::bump(&s.libset_resets);
    s.libset_blocks_freed.set(s.libset_blocks_freed.get() + blocks);
}

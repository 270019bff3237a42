//! The caller's side: creating, resuming and cancelling preemptible functions.
//!
//! Every entry point runs as a no-preemption scope (`defer += 1`), so a
//! preemptible function that launches or resumes another one is never stopped
//! half-way through this bookkeeping.

use std::cell::{Cell, UnsafeCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr::{self, NonNull};
use std::sync::atomic::{compiler_fence, AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use corosensei::CoroutineResult;

use crate::base::config::{self, Config};
use crate::state::guard::Scope;
use crate::handlers::preempt::{self, landed};
use crate::machine::stack::PooledStack;
use crate::state::stats::bump;
use crate::base::arch::stack_pointer;
use crate::machine::switch::{Co, FpControl, Outcome, Yield};
use crate::state::thread::{key_of, now_ns, thread_key, ts, ts_caller, Frame, Suspend, ThreadState, NEVER};
use crate::{handlers::overflow, judgement::ranges, machine::timer, Error};

static GLOBAL: OnceLock<Result<(), String>> = OnceLock::new();
static READY: AtomicBool = AtomicBool::new(false);

/// Starts the runtime (once per process and once per thread).
/// Makes sure this thread can run a function that already exists (its timer
/// and signal state); cheaper than `init`, for resumes.
/// Also rebuilds the table of code that must not be preempted when the
/// handler has seen code loaded since it was built, as `init` does for
/// launches: a function that `dlopen`s a library and is only resumed
/// afterwards would otherwise never be stopped in it.
#[inline]
pub(crate) fn init_thread() -> Result<(), Error> {
    if ts_caller().ready.get() {
        if ranges::stale() {
            refresh_table()?;
        }
        return Ok(());
    }
    init().map(|_| ())
}

#[cold]
fn refresh_table() -> Result<(), Error> {
    // Inside an enclosing function, the rebuild (which takes a lock and
    // allocates) must not be stopped half-way.
    let _scope = Scope::enter();
    ranges::ensure(config::current()?);
    Ok(())
}

pub(crate) fn init() -> Result<&'static Config, Error> {
    let cfg = config::current()?;
    if READY.load(Ordering::Acquire) && ts_caller().ready.get() {
        ranges::ensure(cfg); // cheap unless new code was loaded
        return Ok(cfg);
    }
    init_slow(cfg)?;
    Ok(cfg)
}

/// Waits for the runtime's initialisation, if another thread is running it
/// (before a fork, see `crate::runtime::fork`: the fork handlers are registered in
/// the middle of it).
pub(crate) fn wait_initialised() {
    let _ = GLOBAL.wait();
}

#[cold]
fn init_slow(cfg: &'static Config) -> Result<(), Error> {
    GLOBAL
        .get_or_init(|| {
            preempt::RETRY_NS.store(cfg.retry.as_nanos() as u64, Ordering::Relaxed);
            crate::machine::clock::start();
            crate::machine::flow::look_up();
            crate::interpose::prepare();
            crate::base::glibc::prepare();
            ranges::ensure(cfg);
            crate::judgement::return_trap::init(cfg);
            preempt::install(cfg.signal).map_err(|e| e.to_string())?;
            overflow::install(cfg.signal).map_err(|e| e.to_string())?;
            crate::machine::signal::set(cfg.signal);
            crate::runtime::fork::install(wait_initialised);
            crate::interpose::signals::hand_over_shadow();
            Ok(())
        })
        .clone()
        .map_err(Error::Config)?;
    READY.store(true, Ordering::Release);
    let t = ts();
    thread_key(); // assigns this thread's id, which resumes read directly
    // Before the timer: a thread counts as started once it has one.
    crate::judgement::unwind::prepare_thread()?;
    ranges::prepare_thread()?;
    crate::judgement::futex::prepare(); // once per process, with the table readable
    timer::ensure(t, cfg.signal).map_err(Error::Timer)?;
    if cfg.timekeeping == config::Timekeeping::Monitor {
        // Spawning the monitor allocates and takes std's locks: not to be
        // stopped half-way (a forked child may start it from a function).
        let _scope = Scope::enter();
        crate::machine::monitor::start(t, cfg.signal).map_err(Error::Timer)?;
    }
    overflow::ensure_altstack();
    preempt::unblock_on_this_thread(cfg.signal);
    t.ready.set(true);
    Ok(())
}

/// Is the calling code on `f`'s stack?
#[inline]
fn on_own_stack(f: *const Frame) -> bool {
    let sp = stack_pointer();
    // SAFETY: `current` is a live frame while set.
    let f = unsafe { &*f };
    sp >= f.floor() && sp < f.stack_hi
}

/// A launch or resume while the thread's current function is not the code
/// running: if the code runs on the stack of the function's caller (the
/// enclosing function's, or the thread's own), the function (and maybe
/// functions around it) was left by a `longjmp` to a `setjmp` of its
/// caller, which skipped the runtime's way back; on any other stack it is
/// a stack of the function's own (`makecontext`), and nothing is wrong. Each such function is taken off the thread as its return would
/// have done: the caller gets its scope depth, pending flag, errno, C++
/// exception state and locale back. The function itself is lost: it never
/// runs again and its stack and handle leak (its handle is left running,
/// so resuming or cancelling it fails with `EBUSY`/`Error::Busy`); nothing
/// of it is touched again. Returns the thread's current function after the
/// repair (the caller's own, or null).
#[cold]
#[inline(never)]
fn left_by_longjmp(t: &ThreadState) -> *mut Frame {
    loop {
        let cur = t.current.get();
        if cur.is_null() || on_own_stack(cur) {
            return cur;
        }
        // SAFETY: `current` is a live frame while set (its stack is never
        // freed while it is marked running).
        let f = unsafe { &*cur };
        let sp = stack_pointer();
        let parent = f.parent.get();
        let in_caller = if parent.is_null() {
            // The caller is the thread itself: on its own stack, above the
            // frames the caller had when it switched the function in.
            crate::base::sys::thread_stack().is_some_and(|(lo, hi)| {
                let c = f.caller_sp.get();
                c >= lo && c < hi && sp >= lo && sp < hi
            })
        } else {
            // SAFETY: the parent is live while it runs `f`.
            let p = unsafe { &*parent };
            sp >= p.floor() && sp < p.stack_hi
        };
        if !in_caller {
            return cur; // a foreign stack: nothing to repair
        }
        crate::machine::flow::leave(t, &f.flow, &f.caller_flow);
        crate::judgement::return_trap::release(f);
        t.current.set(parent);
        // Still inside the scope of the launch or resume that found it.
        t.defer.set(f.caller_defer.get() + 1);
        t.pending.set(f.caller_pending.get());
        t.armed.set(NEVER); // its deadline's signal, if any, is spurious now
    }
}

/// Is the innermost running function of this thread migratable?
pub(crate) fn inside_migratable() -> bool {
    let f = ts_caller().current.get();
    // SAFETY: `current` is a live frame while set.
    !f.is_null() && unsafe { (*f).migratable }
}

/// Absolute deadline `timeout` from now (NEVER for "no limit"). Slices
/// shorter than the minimum (base retry plus what arming the timer costs on
/// this machine) are rounded up to it: a shorter one would end before the
/// function ran at all.
#[inline]
pub(crate) fn deadline_after(t: &ThreadState, timeout: Duration) -> u64 {
    if timeout == Duration::MAX {
        return NEVER;
    }
    let ns = u64::try_from(timeout.as_nanos()).unwrap_or(NEVER).max(preempt::min_delay(t));
    crate::machine::clock::now(t).checked_add(ns).unwrap_or(NEVER)
}

/// Per-launch choices (see [`crate::Builder`]).
#[derive(Debug)]
pub(crate) struct LaunchOptions {
    pub migratable: bool,
    pub hold_signals: bool,
    pub preempt_blocked: bool,
    pub futex_stops: bool,
    pub std_waits: bool,
    /// Its own libset, leased for its life (see `gotcha`).
    pub lease: Option<gotcha::Lease>,
    pub reuse_stack: bool,
    /// Its park hook (see `crate::park`).
    pub park: Option<crate::interpose::park::Hook>,
}

/// A preemptible function: one pointer to the header of its own stack,
/// where its `Frame` and its coroutine live (stable addresses, no heap
/// allocation per launch). One pointer because a continuation is moved by
/// value through `Result`, `Linger` and the caller's variables on every
/// launch: an 80-byte one was copied with 16-byte moves of data just
/// written with 8-byte stores, each a store-forwarding stall (a fifth of a
/// launch, `docs/benchmarks.md` 9.5).
pub(crate) struct Inner<T> {
    /// None once the function has finished (its stack, header included,
    /// went back to the pool or was abandoned).
    head: Option<NonNull<Header>>,
    _result: PhantomData<T>,
}

/// What a function keeps in its stack's header, the frame first.
#[repr(C)]
struct Header {
    frame: Frame,
    /// Its coroutine, which owns the stack this header is in: moved out
    /// ([`Inner::take_header`]) before the stack is given back.
    co: UnsafeCell<MaybeUninit<Co>>,
    /// The isolated function's libset: handed back as it is when the
    /// function completes, reset when it is cancelled. Moved out with the
    /// coroutine, once.
    lease: ManuallyDrop<Option<gotcha::Lease>>,
    stack_size: usize,
}

/// How a run ended.
pub(crate) enum Status<T> {
    Suspended,
    Completed(T),
    Panicked(Box<dyn std::any::Any + Send>),
    /// It overflowed its stack of this size.
    Overflowed { stack_size: usize },
    /// Ended by `pthread_exit` or cancellation; the thread is to end too
    /// (`ThreadState::exit_pending`, see `exit.rs`).
    Exited,
}

/// The user's function while it has not started. Cancelling it then drops
/// it inside corosensei's non-unwinding drop hook, where a panic from a
/// captured value's `Drop` would abort the process: it is caught here and
/// kept in the frame, and the canceller raises it again on its own side, as
/// dropping the closure in plain Rust would.
struct Unstarted<F> {
    f: ManuallyDrop<F>,
    frame: *const Frame,
}

impl<F> Unstarted<F> {
    fn start(self) -> F {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so `f` is moved out exactly once.
        unsafe { ManuallyDrop::take(&mut me.f) }
    }
}

impl<F> Drop for Unstarted<F> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here (`start` forgets `self`).
        let r = catch_unwind(AssertUnwindSafe(|| unsafe { ManuallyDrop::drop(&mut self.f) }));
        if let Err(p) = r {
            // SAFETY: the frame lives in the stack header as long as the
            // coroutine, which is being dropped by its canceller right now.
            unsafe { (*self.frame).drop_panic.set(Some(p)) };
        }
    }
}

/// Runs on the coroutine: the whole life of the user's function.
fn body<T, F: FnOnce() -> T>(y: &Yield, t: &'static ThreadState, f: Unstarted<F>) -> Outcome {
    let f = f.start();
    let frame = t.current.get();
    // SAFETY: the runtime set `current` to this function's frame before the
    // first switch; the frame lives as long as the coroutine.
    let fr = unsafe { &*frame };
    fr.yielder.set(y as *const Yield as *const ());
    landed(t);
    // The base of the function for glibc's thread exits (see `exit.rs`).
    let r = catch_unwind(AssertUnwindSafe(|| crate::machine::exit::with_base(|| enter_user(fr, f))));
    let t = ts();
    t.defer.set(t.defer.get() + 1); // transit back to the caller
    match r {
        Ok(None) => Outcome::Exited(crate::machine::exit::exit_value(fr)),
        Ok(Some(v)) => {
            // SAFETY: `result` points at the continuation's `Option<T>` slot.
            unsafe { *(fr.result.get() as *mut Option<T>) = Some(v) };
            Outcome::Value
        }
        // A cancellation unwinds through here: let corosensei finish it.
        Err(p) if fr.cancelling.get() => std::panic::resume_unwind(p),
        Err(p) => Outcome::Panicked(p),
    }
}

/// Records where the runtime's frames end (the stack scan stops there) and
/// calls the user's function one frame further down. Inlined into
/// `exit::run`, the frame that `exit::with_base`'s assembly calls: every
/// frame on a function's stack costs its switches back (the return-address
/// predictor holds only so many calls across the stack switch).
#[inline(always)]
fn enter_user<T, F: FnOnce() -> T>(fr: &Frame, f: F) -> T {
    fr.entry_sp.set(stack_pointer());
    let v = call_user(f);
    // Keeps this from being a tail call, so user frames stay below entry_sp.
    std::hint::black_box(&v);
    v
}

#[inline(never)]
fn call_user<T, F: FnOnce() -> T>(f: F) -> T {
    f()
}

impl<T> Inner<T> {
    /// Creates a preemptible function without running it.
    #[inline]
    pub(crate) fn new<'a, F>(f: F, stack_size: usize, opts: LaunchOptions, t: &ThreadState) -> Result<Inner<T>, Error>
    where
        F: FnOnce() -> T + 'a,
    {
        const { assert!(std::mem::size_of::<Header>() <= crate::machine::stack::MEMO_AT) };
        let stack = PooledStack::get(stack_size).map_err(Error::StackAllocation)?;
        let (lo, hi) = stack.bounds();
        let guard = stack.guard();
        let head = stack.header() as *mut Header;
        // `Header` is `repr(C)` with the frame first.
        let frame = head as *mut Frame;
        // SAFETY: the header is reserved, writable, suitably aligned memory of
        // this stack that nothing else uses; it lives as long as the coroutine.
        unsafe {
            frame.write(Frame {
                memo: stack.memo(),
                deadline: Cell::new(NEVER),
                yielder: Cell::new(ptr::null()),
                entry_sp: Cell::new(0),
                stack_lo: lo,
                stack_hi: hi,
                guard,
                reserve: stack.reserve(),
                reserve_open: Cell::new(false),
                overflow_due: Cell::new(false),
                parent: Cell::new(ptr::null_mut()),
                fn_defer: Cell::new(0),
                caller_defer: Cell::new(0),
                caller_sp: Cell::new(0),
                caller_pending: Cell::new(false),
                blocking_sp: Cell::new(0),
                in_handler: Cell::new(false),
                unwindable: Cell::new(false),
                ucontext: Cell::new(ptr::null_mut()),
                running: Cell::new(false),
                cancelling: Cell::new(false),
                reason: Cell::new(Suspend::Preempted),
                retries: Cell::new(0),
                home: Cell::new(key_of(t)),
                migratable: opts.migratable,
                hold_signals: opts.hold_signals,
                held: Cell::new(None),
                preempt_blocked: opts.preempt_blocked,
                overdue: Cell::new(false),
                deferred_at: Cell::new(0),
                futex_stops: opts.futex_stops,
                std_waits: opts.std_waits,
                yield_flag: Cell::new(ptr::null()),
                yield_every: Cell::new(0),
                fp_own: Cell::new(FpControl::NONE),
                stopped_sp: Cell::new(0),
                trap_slot: Cell::new(0),
                pause_due: Cell::new(false),
                counts: crate::state::thread::SignalCounts::new(),
                handler_uc: Cell::new(0),
                handler_defer: Cell::new(0),
                handler_reading: Cell::new(false),
                handler_errno: Cell::new(0),
                trap: Cell::new(None),
                result: Cell::new(ptr::null_mut()),
                drop_panic: Cell::new(None),
                flow: crate::state::saved::Saved::with_cleanup(opts.futex_stops),
                exit_value: Cell::new(crate::machine::exit::PTHREAD_CANCELED),
                park: Cell::new(opts.park.map(|h| h.0)),
                parked: Cell::new(false),
                judged_above: Cell::new(0),
                judged_gen: Cell::new(0),
                caller_flow: crate::state::saved::Saved::with_cleanup(opts.futex_stops),
                libset: opts.lease.as_ref().map_or(0, |l| l.libset()),
                reuse_stack: opts.reuse_stack,
                caller_libset: Cell::new(0),
            })
        };
        let f = Unstarted { f: ManuallyDrop::new(f), frame };
        // SAFETY: the closure may borrow data of lifetime 'a; the returned
        // continuation carries that lifetime, and the coroutine only runs
        // while it is alive (a forgotten continuation never runs again).
        let co = unsafe { Co::with_stack_unchecked(stack, move |y: &Yield, t| body(y, t, f)) };
        let trap = co.trap_handler();
        // SAFETY: the rest of the header, as above; the frame was just
        // initialised. The coroutine is moved out before its stack goes back.
        unsafe {
            (*frame).trap.set(Some(trap));
            ptr::addr_of_mut!((*head).co).write(UnsafeCell::new(MaybeUninit::new(co)));
            ptr::addr_of_mut!((*head).lease).write(ManuallyDrop::new(opts.lease));
            ptr::addr_of_mut!((*head).stack_size).write(stack_size);
        }
        bump(&t.stats.launches);
        // SAFETY: the header address is never null.
        Ok(Inner { head: Some(unsafe { NonNull::new_unchecked(head) }), _result: PhantomData })
    }

    /// Has the function not finished (its stack still ours)?
    #[inline]
    pub(crate) fn is_live(&self) -> bool {
        self.head.is_some()
    }

    /// The function's frame, with a lifetime of the caller's choosing: for
    /// code that switches the function in (a `&mut self` borrow) while it
    /// reads the frame. Only while the function is live, and not past the
    /// [`Inner::take_header`] that ends that.
    #[inline(always)]
    unsafe fn frame_unbound<'a>(&self) -> &'a Frame {
        let h = self.head.expect("a live function");
        // SAFETY: per the contract, the header (frame first) is ours.
        unsafe { &*(h.as_ptr() as *const Frame) }
    }

    /// The function's frame. Only while it has not finished.
    pub(crate) fn frame(&self) -> &Frame {
        // SAFETY: borrowed no longer than `self`, which `take_header` needs mutably.
        unsafe { self.frame_unbound() }
    }

    /// Its coroutine, while the function is live.
    #[inline(always)]
    pub(crate) fn co(&self) -> Option<&Co> {
        // SAFETY: a live header's coroutine is initialised; only the owner
        // of the continuation touches it (the function's own code never does).
        self.head.map(|h| unsafe { (*(*h.as_ptr()).co.get()).assume_init_ref() })
    }

    #[inline(always)]
    fn co_mut(&mut self) -> Option<&mut Co> {
        // SAFETY: as in `co`, and `&mut self` makes this the only reference.
        self.head.map(|h| unsafe { (*(*h.as_ptr()).co.get()).assume_init_mut() })
    }

    /// The stack size it was launched with (while live).
    fn stack_size(&self) -> usize {
        // SAFETY: a live header, initialised at launch.
        self.head.map_or(0, |h| unsafe { (*h.as_ptr()).stack_size })
    }

    /// Ends the function's hold on its stack: moves the coroutine (which
    /// owns the stack) and the lease out of the header, which is not read
    /// again. (Only here: a lease taken earlier and the header's tag
    /// rewritten would make this read wait for that store.)
    fn take_header(&mut self) -> Option<(Co, Option<gotcha::Lease>)> {
        let h = self.head.take()?.as_ptr();
        // SAFETY: a live header's coroutine and lease, moved out once:
        // `head` is None from now on, so nothing reads the header again.
        unsafe { Some(((*h).co.get().read().assume_init(), ManuallyDrop::into_inner(ptr::addr_of!((*h).lease).read()))) }
    }

    /// Runs the function for at most `timeout`.
    pub(crate) fn resume(&mut self, timeout: Duration) -> Result<Option<Status<T>>, Error> {
        if !self.is_live() {
            return Ok(None);
        }
        let f = self.frame();
        if f.running.get() {
            return Err(Error::Busy);
        }
        let scope = Scope::enter();
        let t = scope.thread();
        let me = t.id.get();
        if !f.migratable && f.home.get() != me {
            return Err(Error::WrongThread);
        }
        if timeout.is_zero() {
            return Ok(Some(Status::Suspended));
        }
        if std::thread::panicking() {
            // The function would share the caller's panic count and could
            // never be stopped (see `preempt::unwinding`).
            return Err(Error::NotHere("while the thread unwinds a panic"));
        }
        let mut parent = t.current.get();
        if !parent.is_null() && !on_own_stack(parent) {
            parent = left_by_longjmp(t);
        }
        // The caller's FP control state, read beside the clock: `stmxcsr`
        // and `rdtsc` are both slow microcode here (5.6 and 9.6 ns alone)
        // but overlap when adjacent (9.6 ns together). Nothing between here
        // and the switch changes it.
        let fp = FpControl::save();
        let mut deadline = deadline_after(t, timeout);
        // SAFETY: `current` is a live frame.
        if !parent.is_null() && unsafe { (*parent).yield_flag.get() }.is_null() {
            // SAFETY: as above.
            deadline = deadline.min(unsafe { (*parent).deadline.get() });
        }
        if self.frame().home.get() != me {
            self.migrate_to_this_thread(me);
        }
        if self.frame().libset != 0 {
            // Objects the program loaded since the last run must call into
            // the function's libset too (one look at a loader counter when
            // there are none). A failure leaves them calling the program's
            // own libraries, deferred as without isolation.
            let _ = gotcha::refresh();
        }
        let mut result: Option<T> = None;
        let r = self.switch_in(t, deadline, fp, &mut result, |co| co.resume(t))?;
        Ok(Some(self.finish(t, r, result)))
    }

    /// [`Inner::resume`], cooperatively: each `every` that passes bumps
    /// `flag` instead of stopping the function (see
    /// [`crate::resume_contained_cooperative`]).
    pub(crate) fn resume_cooperative(&mut self, every: Duration, flag: &std::sync::atomic::AtomicU32) -> Result<Option<Status<T>>, Error> {
        if !self.is_live() {
            return Ok(None);
        }
        let f = self.frame();
        if f.running.get() {
            return Err(Error::Busy);
        }
        f.yield_every.set(u64::try_from(every.as_nanos()).unwrap_or(NEVER).max(1));
        // The handler reads the address on this thread only, while the
        // function runs inside this call; `flag` outlives the call.
        f.yield_flag.set(flag);
        let r = self.resume(every);
        // A function that ended has given its stack (and frame) back.
        if self.is_live() {
            self.frame().yield_flag.set(ptr::null());
        }
        r
    }

    /// A function parked in the signal handler will `rt_sigreturn` on this
    /// thread: make that restore *this* thread's alternate signal stack.
    fn migrate_to_this_thread(&mut self, me: u64) {
        let f = self.frame();
        let uc = f.ucontext.get();
        if f.in_handler.get() && !uc.is_null() {
            // SAFETY: the parked signal frame is alive on the function's stack;
            // querying our sigaltstack into it.
            unsafe { libc::sigaltstack(ptr::null(), &mut (*uc).uc_stack) };
        }
        f.home.set(me);
    }

    /// Switches into the coroutine with the caller/function bookkeeping around
    /// it. `go` either resumes it or force-unwinds it.
    fn switch_in(
        &mut self,
        t: &'static ThreadState,
        deadline: u64,
        fp: FpControl,
        result: &mut Option<T>,
        go: impl FnOnce(&mut Co) -> CoroutineResult<Suspend, Outcome>,
    ) -> Result<CoroutineResult<Suspend, Outcome>, Error> {
        // SAFETY: the coroutine is unfinished (checked by the callers); `f`
        // is not used past the switch (read again below).
        let f = unsafe { self.frame_unbound() };
        // Where the function stores its return value if it finishes now.
        f.result.set(result as *mut Option<T> as *mut ());
        f.caller_defer.set(t.defer.get() - 1);
        f.caller_sp.set(stack_pointer());
        f.caller_pending.set(t.pending.get());
        f.parent.set(t.current.get());
        f.deadline.set(deadline);
        f.deferred_at.set(0);
        f.retries.set(0);
        f.running.set(true);
        t.current.set(f as *const Frame as *mut Frame);
        t.defer.set(f.fn_defer.get() + 1);
        t.pending.set(false);
        compiler_fence(Ordering::SeqCst);
        // Armed only now: a deadline that passes during the (1-20 us) timer
        // system call then finds the function current and in transit, and is
        // postponed when it lands (see `landed`) instead of being lost.
        if let Err(e) = preempt::publish(t, deadline) {
            f.running.set(false);
            t.current.set(f.parent.get());
            t.defer.set(f.caller_defer.get() + 1);
            t.pending.set(f.caller_pending.get());
            return Err(e);
        }
        // If arming took us past the deadline, its signal may reach this
        // thread only after the function has started: treat the deadline as
        // passed in transit, so that landing postpones it.
        if t.armed.get() == deadline && t.armed_at.get() >= deadline {
            t.pending.set(true);
        }
        compiler_fence(Ordering::SeqCst);
        // One read of the FP control state per switch (`switch::FpControl`,
        // `fp`: the caller's): ours, kept for the switch out to give back;
        // the function's own loaded where it differs.
        let outer_fp = t.fp_caller.replace(fp.bits());
        if let Some(own) = FpControl::from_bits(f.fp_own.get()) {
            own.load_over(fp);
        }
        crate::machine::flow::enter(t, &f.flow, &f.caller_flow);
        f.caller_libset.set(gotcha::set_current_libset(f.libset));
        let r = go(self.co_mut().expect("checked by caller"));
        if matches!(r, CoroutineResult::Return(_)) {
            // It ended (returned, panicked, unwound) without a switch out:
            // its FP control state may be its own.
            fp.restore_if_changed();
        }
        // (The coroutine returns to the thread that resumed it: see below.)
        t.fp_caller.set(outer_fp);
        compiler_fence(Ordering::SeqCst);
        // The coroutine returns to the thread that resumed it: `t` is still ours.
        // SAFETY: the frame is still in the stack header: `go` only resumed
        // or unwound the coroutine and the stack has not been recycled yet.
        let f = unsafe { self.frame_unbound() };
        gotcha::set_current_libset(f.caller_libset.get());
        crate::machine::flow::leave(t, &f.flow, &f.caller_flow);
        f.running.set(false);
        let parent = f.parent.get();
        t.current.set(parent);
        t.defer.set(f.caller_defer.get() + 1);
        t.pending.set(f.caller_pending.get());
        if !parent.is_null() {
            // Back in an enclosing preemptible function: its own deadline
            // may have passed meanwhile (taken when our scope closes).
            // SAFETY: the parent frame is live while it runs us.
            let pd = unsafe { (*parent).deadline.get() };
            // SAFETY: as above.
            let flag = unsafe { (*parent).yield_flag.get() };
            let now = now_ns();
            if now >= pd && !flag.is_null() {
                // A cooperative parent is not stopped: its deadline counts.
                // SAFETY: the flag outlives the parent's resume, inside which we run.
                unsafe { &*flag }.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // SAFETY: as above.
                let next = now.saturating_add(unsafe { (*parent).yield_every.get() });
                // SAFETY: as above.
                unsafe { (*parent).deadline.set(next) };
                let _ = preempt::publish(t, next);
            } else if now >= pd {
                t.pending.set(true);
                preempt::publish_taken(t, pd);
            } else {
                let _ = preempt::publish(t, pd);
            }
        } else {
            preempt::publish_taken(t, NEVER);
        }
        Ok(r)
    }

    fn finish(&mut self, t: &ThreadState, r: CoroutineResult<Suspend, Outcome>, result: Option<T>) -> Status<T> {
        let stats = &t.stats;
        match r {
            CoroutineResult::Yield(Suspend::Overflowed) => {
                // Stopped right after the library call it overflowed in
                // returned (see `overflow.rs`): abandoned like an overflow
                // in its own code, all of its stack possibly live.
                let stack_size = self.stack_size();
                // SAFETY: stopped at an arbitrary point of its own code, and
                // never resumed: abandoning it leaks its heap objects, and
                // its library call, having returned, holds no lock.
                unsafe { self.co_mut().expect("unfinished").force_reset() };
                end_lease(self.abandon_stack(0), true);
                bump(&stats.stack_overflows);
                Status::Overflowed { stack_size }
            }
            CoroutineResult::Yield(_) => Status::Suspended,
            CoroutineResult::Return(out) => {
                let stack_size = self.stack_size();
                if matches!(out, Outcome::Overflowed) {
                    // Abandoned in the middle of its deepest frames: all of
                    // its stack may be live.
                    end_lease(self.abandon_stack(0), true);
                } else {
                    end_lease(self.recycle_stack(), false);
                }
                match out {
                    Outcome::Value => {
                        bump(&stats.completions);
                        Status::Completed(result.expect("value stored on return"))
                    }
                    Outcome::Panicked(p) => {
                        bump(&stats.panics);
                        Status::Panicked(p)
                    }
                    Outcome::Overflowed => {
                        bump(&stats.stack_overflows);
                        Status::Overflowed { stack_size }
                    }
                    Outcome::Exited(v) => {
                        t.exit_pending.set(Some(v));
                        Status::Exited
                    }
                }
            }
        }
    }

    /// Gives the stack of a function that ended back for reuse; returns its
    /// lease, for the caller to end.
    fn recycle_stack(&mut self) -> Option<gotcha::Lease> {
        self.release_frame();
        let reserve_open = self.is_live() && self.frame().reserve_open.get();
        let foreign = self.is_live() && self.frame().home.get() != thread_key();
        let (co, lease) = self.take_header()?;
        debug_assert!(co.done());
        let stack = co.into_stack();
        // It overflowed into its reserve and then finished all the same
        // (left its library call by `longjmp`, say): guard the reserve
        // again before the stack is reused, or give it up.
        if reserve_open && !stack.close_reserve() {
            stack.abandon(0);
        } else {
            stack.recycle(foreign);
        }
        lease
    }

    /// Gives up the stack of a function that was abandoned without running
    /// its destructors (reclaimed, or overflowed). Its live frames, from
    /// `live_from` up, stay mapped and are never reused: a value pinned there
    /// (an intrusive waiter node, a future in `block_on`) or a pointer that
    /// another thread keeps into it (a scoped thread's, a channel packet's)
    /// must stay valid, since nothing ran its destructor (`Pin`'s drop
    /// guarantee). Only the dead part below is released. Returns its
    /// lease, for the caller to end.
    fn abandon_stack(&mut self, live_from: usize) -> Option<gotcha::Lease> {
        self.release_frame();
        let (co, lease) = self.take_header()?;
        debug_assert!(co.done());
        co.into_stack().abandon(live_from);
        lease
    }

    /// The function can no longer return into a trap address it holds;
    /// and its park hook, which it can no longer call, is dropped.
    fn release_frame(&self) {
        if self.is_live() {
            // Unfinished or just finished: the frame is still in the stack
            // header, which has not been recycled yet.
            let f = self.frame();
            crate::judgement::return_trap::release(f);
            drop(f.park.take());
        }
    }

    /// Would cancelling the function now unwind it (run its destructors)?
    /// True if it never started, or stopped where unwinding is defined on
    /// the thread it belongs to.
    pub(crate) fn can_unwind(&self) -> bool {
        let Some(co) = self.co() else { return true };
        if !co.started() {
            return true;
        }
        let f = self.frame();
        !f.running.get() && unwinds_here(f)
    }

    /// Cancels an unfinished function. Unwinds its stack (running destructors)
    /// when it stopped at a call site on this thread; otherwise reclaims the
    /// stack without unwinding.
    pub(crate) fn cancel(&mut self) -> Result<crate::Cancelled, Error> {
        if !self.is_live() {
            return Ok(crate::Cancelled::NotNeeded);
        }
        // SAFETY: unfinished, so the frame is live in the stack header; `f`
        // is read only before the header is given back below.
        let f = unsafe { self.frame_unbound() };
        if f.running.get() {
            return Err(Error::Busy);
        }
        // A function that held the program's signals on our side while it
        // was stopped: they are ours again once it is gone (only its own
        // thread holds them; another thread's mask is left as it is).
        let held = f.held.take().filter(|_| f.home.get() == thread_key());
        // The lease comes back with the stack, in whichever branch gives it up.
        let mut lease = None;
        let co = self.co_mut().expect("checked above");
        let _scope = Scope::enter();
        let stats = &ts_caller().stats;
        // A panic for the canceller: from dropping the closure, or a new one
        // raised by a function that caught the cancellation's unwind.
        let mut raised = None;
        let started = co.started();
        let kind = if !co.started() {
            // Drops the closure (and what it captured) without running it.
            co.force_unwind();
            raised = f.drop_panic.take();
            bump(&stats.cancels_unwound);
            crate::Cancelled::Unwound
        } else if !unwinds_here(f) {
            // SAFETY: stopped at an arbitrary instruction (or on a foreign
            // thread): unwinding is not defined there. Abandoning the stack
            // leaks the function's own heap objects but no runtime resource,
            // and no libc/std lock can be held (those points are never preempted).
            unsafe { co.force_reset() };
            bump(&stats.cancels_reclaimed);
            if f.reuse_stack {
                // The caller promised that nothing outside the function
                // points into its stack (`Builder::reuse_stack_on_cancel`).
                lease = self.recycle_stack();
            } else {
                let live_from = f.stopped_sp.get();
                lease = self.abandon_stack(live_from);
            }
            crate::Cancelled::Reclaimed
        } else {
            f.cancelling.set(true);
            // Destructors run with preemption deferred (no deadline).
            f.fn_defer.set(f.fn_defer.get() + 1);
            let me = thread_key();
            if f.home.get() != me {
                self.migrate_to_this_thread(me);
            }
            // A function that catches the unwind may still return a value.
            let mut result: Option<T> = None;
            // A function may catch the unwind (`catch_unwind` around a
            // `pause()`) and panic anew: that panic leaves the coroutine
            // finished and comes out of `force_unwind`. Caught here, so that
            // the bookkeeping around the switch completes, and raised again
            // in the canceller once the cancel is done, as a panic in a
            // destructor would be in plain Rust.
            let r = self.switch_in(ts_caller(), NEVER, FpControl::save(), &mut result, |co| {
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| co.force_unwind())) {
                    raised = Some(p);
                }
                CoroutineResult::Return(Outcome::Value)
            });
            if r.is_err() {
                // Could not even arm (cannot happen with NEVER); fall back.
                // SAFETY: as in the reclaim branch above.
                unsafe { self.co_mut().expect("present").force_reset() };
                let live_from = f.stopped_sp.get();
                lease = self.abandon_stack(live_from);
            }
            bump(&stats.cancels_unwound);
            crate::Cancelled::Unwound
        };
        let lease = lease.or_else(|| self.recycle_stack());
        end_lease(lease, started);
        if let Some(m) = held {
            crate::machine::sigmask::set(m);
        }
        drop(_scope);
        if let Some(p) = raised {
            std::panic::resume_unwind(p);
        }
        Ok(kind)
    }
}

/// Gives a function's libset back: reset (its copies' state restored, what
/// they allocated freed) if the function was abandoned or cancelled after
/// it started, as it is if the function ended by itself (what it allocated
/// may be the caller's now).
fn end_lease(lease: Option<gotcha::Lease>, abandoned: bool) {
    if let Some(l) = lease {
        if abandoned {
            let r = l.reset();
            crate::state::thread::record_libset_reset(r.duration.as_nanos() as u64, r.blocks as u64);
        }
    }
}

/// Did the stopped function `f` stop where unwinding is defined (not in a
/// park, see `crate::park`), and may it be unwound from this thread (its
/// destructors could touch another thread's TLS otherwise)?
fn unwinds_here(f: &Frame) -> bool {
    // Parked: stopped in a `pause()` under a wrapper's `extern "C"` frame.
    f.unwindable.get() && !f.parked.get() && (f.migratable || f.home.get() == thread_key())
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        if self.is_live() && !self.frame().running.get() {
            let _ = self.cancel();
        }
        if let Some(co) = self.co_mut() {
            // Still unfinished (running: cannot happen through the safe API).
            // SAFETY: see the reclaim branch of `cancel`.
            unsafe { co.force_reset() };
            drop(self.abandon_stack(0));
        }
    }
}

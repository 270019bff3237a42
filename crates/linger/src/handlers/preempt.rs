//! Where preemption happens.
//!
//! A preemptible function is stopped in exactly three ways:
//!
//! 1. **In the timer signal handler** ([`on_timer`]): the per-thread one-shot
//!    timer fires at the deadline; the handler runs on the function's own
//!    stack and, if the interrupted point is safe, switches straight back to
//!    the caller, leaving the signal frame parked on that stack. Resuming
//!    switches back into the handler, which returns and lets `rt_sigreturn`
//!    restore every register (including FP/SIMD state).
//! 2. **At the end of a no-preemption scope** (`guard::exit`): if the
//!    deadline passed while the thread was in a `critical` scope or in the
//!    runtime itself, the handler only records it as pending and the scope's
//!    exit hands control back through an ordinary function call. (A deadline
//!    that passes while the runtime switches *into* the function is postponed
//!    instead, in [`landed`], so that every resume makes progress.)
//! 3. **At the return of a deferred call** ([`at_return`]): a deadline that
//!    found the function inside library code is taken when that code returns
//!    to the function's own, through a return trap.
//!
//! Only the second kind (and `pause()`) stops the function at a call
//! instruction, where unwinding is defined; that is why cancellation can run
//! destructors only for those (see `docs/safety.md`).
//!
//! The second kind and `pause()` ask what the handler asks first: whether
//! deferred code is on the call chain (a scope ending in a `dl_iterate_phdr`
//! callback, a `pause()` under `println!`). If so the stop waits for a
//! return trap ([`stop_here`]).
//!
//! The handler decides whether the interrupted point is safe like this:
//! - inside a `critical` scope or runtime transit (counter > 0): defer, take it
//!   at scope exit;
//! - stack pointer outside the function's stack or above its entry frame:
//!   defer (the thread is in runtime code or on a foreign stack);
//! - program counter in code that must not be interrupted ([`crate::judgement::ranges`])
//!   and not at the system call of an interposed blocking call, nor (for
//!   functions with `stop_in_futex_waits`) in a futex wait of libc's
//!   synchronisation functions ([`crate::judgement::futex`]): defer;
//! - a return address into such code anywhere on the function's live stack
//!   (e.g. user code called back from `qsort` or from `println!`'s formatting
//!   while the stdout lock is held): defer.
//!
//! Deferrals of the last three kinds set a return trap on the outermost
//! deferred call (see [`crate::judgement::return_trap`]): the function is stopped by
//! [`at_return`] the moment that call returns to its own code. The timer is
//! re-armed as a backstop, or, where no trap can be set, for retries: 32
//! times at the base interval (10 us, or the cost of arming if that is more),
//! then with exponential back-off up to 250 us, like Go's retried async
//! preemption. The handler itself counts as a no-preemption scope (see
//! [`on_timer`]).

use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};

use crate::machine::monitor;
use crate::judgement::ranges;
use crate::machine::sigmask;
use crate::state::stats::bump;
use crate::machine::switch::{self, FpControl};
use crate::state::thread::{now_ns, ts, Frame, Suspend, ThreadState, NEVER};
use crate::machine::timer;
use crate::Error;

/// First retry delay after a deferral by the PC/stack check, in ns.
pub(crate) static RETRY_NS: AtomicU64 = AtomicU64::new(10_000);
const MAX_RETRY_NS: u64 = 250_000;
const RETRIES_BEFORE_BACKOFF: u32 = 32;
/// Doublings of the backstop while a deferred call waits in the kernel
/// (250 us << 7 = 32 ms).
const WAIT_BACKOFF_STEPS: u32 = 7;
/// Stack the handler needs below its decision to stop a function: the call
/// chain walk and the switch (measured at 8-11 KiB, kernel signal frame
/// included, on an AVX-512 machine). With less room left, a deadline is
/// deferred until the function climbs back up its stack, as Go's stack guard
/// keeps its preemption checks from overflowing.
const HANDLER_STACK: usize = 16 * 1024;

/// libas-safe's hold mode at the end of the handler
/// (`hold::after_timer`): held signals run if the thread is out of
/// deferred code. Registered as the mode is turned on, before it can hold
/// anything.
static AFTER_TIMER: crate::base::hook::Hook<fn(&mut libc::ucontext_t)> = crate::base::hook::Hook::new();

/// Registers what the handler does last for held signals.
pub(crate) fn on_after_timer(f: fn(&mut libc::ucontext_t)) {
    AFTER_TIMER.set(f);
}

/// Installs the preemption signal handler (process-wide, once).
pub(crate) fn install(signo: i32) -> Result<(), Error> {
    crate::state::guard::on_pending(take_pending_at_exit);
    crate::judgement::return_trap::on_return_stop(at_return);
    // Through libc's own sigaction: ours keeps the program off this signal.
    let Some(sigaction) = crate::machine::signal::real_sigaction() else {
        return Err(Error::Signal(std::io::Error::from_raw_os_error(libc::ENOSYS)));
    };
    // SAFETY: querying a sigaction with valid pointers.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if sigaction(signo, std::ptr::null(), &mut old) != 0 {
            return Err(Error::Signal(std::io::Error::last_os_error()));
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != on_timer as *const () as usize {
            return Err(Error::Config(format!(
                "signal {signo} already has a handler; pick another with LINGER_SIGNAL"
            )));
        }
    }
    set_handler(signo)?;
    // SAFETY: plain sigset manipulation on a local.
    unsafe {
        // The thread that launches may have inherited a mask blocking it.
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    Ok(())
}

/// Points the signal at our handler (again, after a failed exec reset it).
pub(crate) fn set_handler(signo: i32) -> Result<(), Error> {
    let Some(sigaction) = crate::machine::signal::real_sigaction() else {
        return Err(Error::Signal(std::io::Error::from_raw_os_error(libc::ENOSYS)));
    };
    // SAFETY: installing a sigaction with valid pointers; the handler is
    // async-signal-safe by construction (see on_timer).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_timer as *const () as usize;
        // SA_RESTART: blocking calls continue transparently after a resume.
        // SA_NODEFER: we leave the handler by switching stacks, so the signal
        // must not stay blocked in the caller. Re-entry is harmless: the timer
        // is one-shot and disarmed while the handler runs.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_NODEFER;
        // The program's own signals wait until the handler is done (see
        // `sigmask`); `switch_out` decides what the caller gets.
        sa.sa_mask = sigmask::as_sigset(sigmask::compute(signo));
        if sigaction(signo, &sa, std::ptr::null_mut()) != 0 {
            return Err(Error::Signal(std::io::Error::last_os_error()));
        }
        // Where every handler returns to: libc's `rt_sigreturn` stub, which
        // libc installed as the restorer (the walk must not go past it).
        let mut got: libc::sigaction = std::mem::zeroed();
        if sigaction(signo, std::ptr::null(), &mut got) == 0 {
            if let Some(r) = got.sa_restorer {
                crate::judgement::unwind::note_sigreturn(r as usize);
            }
        }
    }
    Ok(())
}

/// Makes sure this thread does not block the preemption signal.
pub(crate) fn unblock_on_this_thread(signo: i32) {
    // SAFETY: plain sigset manipulation on a local.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

fn record_preemption(ts: &ThreadState, frame: &Frame, now: u64, deferred: bool, in_wait: bool) {
    bump(&ts.stats.preemptions);
    frame.overdue.set(false);
    let over = now.saturating_sub(frame.deadline.get());
    if over > ts.stats.worst_overrun_ns.get() {
        ts.stats.worst_overrun_ns.set(over);
        let at = if deferred { frame.deferred_at.get() } else { 0 };
        ts.stats.worst_overrun_at.set(at as u64);
    }
    frame.deferred_at.set(0);
    ts.last_preemption.set(Some(crate::state::stats::Preemption { overrun_ns: over, deferred, in_wait }));
}

/// Hands control from the running function back to its caller; returns when
/// the function is resumed (possibly on another thread). Does not leave the
/// transit state: callers finish with [`landed`].
///
/// Inlined into its callers to keep the switch near the function's own
/// frames (see `pause`).
///
/// # Safety
/// `ts` is this thread's state, `frame` must be its innermost running
/// function, and the code must be executing on that function's stack. `ts`
/// is not used after the switch (it may return on another thread): the
/// state of the thread that resumed it is returned instead.
#[inline(always)]
unsafe fn switch_out(
    ts: &ThreadState,
    frame: *mut Frame,
    why: Suspend,
    uc: *mut libc::ucontext_t,
    unwindable: bool,
) -> &'static ThreadState {
    // SAFETY: per the contract the frame is live (it is `ts.current`).
    let f = unsafe { &*frame };
    f.fn_defer.set(ts.defer.get());
    ts.defer.set(f.fn_defer.get() + 1); // runtime transit: no preemption
    ts.pending.set(false);
    f.pause_due.set(false);
    // An overflow in library code waits for the function's next stop, which
    // hands it to its caller as an overflow instead (see `overflow.rs`).
    let why = if f.overflow_due.get() { Suspend::Overflowed } else { why };
    f.in_handler.set(!uc.is_null());
    f.unwindable.set(unwindable);
    f.ucontext.set(uc);
    f.reason.set(why);
    f.stopped_sp.set(crate::base::arch::stack_pointer());
    // The caller gets the function's signal mask, as before the switch; with
    // `hold_signals` plus the program's signals, until it resumes us.
    // SAFETY: a non-null `uc` is the live signal context of this handler.
    let mask = if uc.is_null() { None } else { Some(sigmask::word(unsafe { &(*uc).uc_sigmask })) };
    // Stopped again on its way back from a stop, before `release_held` gave
    // it its mask (the thread's mask is still the held one): its own mask is
    // the one still recorded, and stays recorded for that `release_held`.
    let prior = f.held.get();
    if f.hold_signals {
        // In the handler they are blocked already (its sa_mask).
        let own = prior.or(mask).unwrap_or_else(sigmask::hold);
        f.held.set(Some(own));
    } else if let Some(m) = mask {
        sigmask::set(m);
    }
    // One read of the FP control state (`switch::FpControl`): the
    // function's own (in the handler: the kernel's default, and its own is
    // in the signal frame, restored by `rt_sigreturn`), kept for the next
    // switch in; the resumer's given back where it differs.
    let fp = FpControl::save();
    f.fp_own.set(if uc.is_null() { fp.bits() } else { FpControl::NONE });
    if let Some(caller) = FpControl::from_bits(ts.fp_caller.get()) {
        caller.load_over(fp);
    }
    compiler_fence(Ordering::SeqCst);
    // SAFETY: the yielder belongs to the coroutine we are running on.
    let resumer = unsafe { switch::suspend(f.yielder.get(), why) };
    compiler_fence(Ordering::SeqCst);
    if !uc.is_null() {
        // Back in the handler: hold the program's signals again until it
        // returns, when `rt_sigreturn` restores the function's mask.
        if f.held.take().is_none() {
            sigmask::hold();
        }
        f.held.set(prior);
    }
    f.in_handler.set(false);
    f.ucontext.set(std::ptr::null_mut());
    resumer
}

/// After a resume outside the handler (a `pause()` or a deferred
/// preemption): gives the function its own mask back if the caller held the
/// program's signals. Called once the transit is over, so that a handler
/// that runs now (and may `siglongjmp`) finds the runtime consistent.
#[inline]
fn release_held(ts: &ThreadState) {
    let frame = ts.current.get();
    if frame.is_null() {
        return;
    }
    // SAFETY: `current` is the live function that was just resumed.
    if let Some(m) = unsafe { (*frame).held.take() } {
        sigmask::set(m);
    }
}

/// Called on the function's side right after control arrives (first start or
/// resume): leaves the runtime transit. A deadline that passed during the
/// transit (arming a near timer can take longer than a short slice) is
/// postponed by the minimum delay instead of being taken here, so every
/// resume lets the function make progress.
///
/// `ts` is the state of the thread that resumed the function.
#[inline]
pub(crate) fn landed(ts: &ThreadState) {
    let d = ts.defer.get();
    debug_assert!(d > 0, "landed outside a transit");
    ts.defer.set(d - 1);
    compiler_fence(Ordering::SeqCst);
    if d == 1 && ts.pending.get() {
        postpone_pending(ts);
    }
}

/// A deadline passed in transit: move it (see `landed`).
#[cold]
#[inline(never)]
fn postpone_pending(ts: &ThreadState) {
    ts.pending.set(false);
    let frame = ts.current.get();
    if frame.is_null() {
        return;
    }
    // SAFETY: `current` is the live function we just switched into.
    let f = unsafe { &*frame };
    let now = now_ns();
    if now >= f.deadline.get() {
        // Move the deadline itself, not just the timer: a signal
        // generated during the transit can still be delivered after this
        // point (a timer interrupt on another CPU reaches this thread a
        // little later), and must then count as early.
        f.deadline.set(now + min_delay(ts));
    }
    rearm_for(ts, f.deadline.get());
}

/// Takes a pending preemption at the end of a no-preemption scope (or a
/// pause a return trap was holding, see [`pause`]). Returns the resuming
/// thread's state if the function was switched out (it has been resumed
/// since, and the counter is at transit level again: finish with
/// [`landed`]).
///
/// `check`: walk the call chain first, and leave the stop to a return trap
/// if deferred code is on it (see [`stop_here`]). A return trap that fired
/// needs no walk: the outermost deferred call has just returned.
fn take_pending(ts: &ThreadState, unwindable: bool, check: bool) -> Option<&'static ThreadState> {
    ts.pending.set(false);
    let frame = ts.current.get();
    if frame.is_null() {
        return None;
    }
    // SAFETY: `current` is the live innermost function, and since the counter
    // is zero we are running its own code on its stack.
    let f = unsafe { &*frame };
    let pause = f.pause_due.get();
    let overflow = f.overflow_due.get();
    let now = now_ns();
    if !pause && !overflow && now < f.deadline.get() {
        return None;
    }
    if std::thread::panicking() {
        // Unwinding (a `Drop` run by a panic): not here (see `unwinding`).
        unwinding(ts);
        return None;
    }
    if check && stop_here(ts, f, true) != Here::Stop {
        return None;
    }
    let why = if overflow {
        Suspend::Overflowed // counted by the caller
    } else if pause {
        bump(&ts.stats.pauses);
        Suspend::Paused
    } else {
        record_preemption(ts, f, now, true, false);
        bump(&ts.stats.deferred_preemptions);
        Suspend::Preempted
    };
    // SAFETY: see above.
    Some(unsafe { switch_out(ts, frame, why, std::ptr::null_mut(), unwindable) })
}

/// What [`stop_here`] found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Here {
    /// No deferred code on the call chain: stop.
    Stop,
    /// Deferred code is on it, and a return trap is armed on its outermost
    /// call: the stop is taken when that call returns.
    Trapped,
    /// Deferred code may be on it and no trap could be armed.
    NotNow,
}

/// May the running function `f` be stopped at this point, outside the
/// handler (the end of a scope, `pause()`)? The same question the handler
/// asks of an interrupted point (`judge`), asked of the current call chain:
/// a scope that ends inside a program signal handler or a `dl_iterate_phdr`
/// callback, or a `pause()` from a `Display` impl under `println!`, has
/// library code below it that holds locks. If so, arms a return trap on the
/// outermost deferred call when it can, and, for a deadline (`due`), arms
/// the timer as the backstop (or to retry).
///
/// Runs as a no-preemption scope: the handler shares the unwinder and the
/// trap with it.
#[inline(never)]
fn stop_here(ts: &ThreadState, f: &Frame, due: bool) -> Here {
    let d = ts.defer.get();
    ts.defer.set(d + 1);
    compiler_fence(Ordering::SeqCst);
    let verdict = if stack_room(f) { judge_here(f) } else { NOT_NOW };
    let here = match verdict {
        Verdict::Stop { release } => {
            if release {
                crate::judgement::return_trap::release(f);
            }
            Here::Stop
        }
        Verdict::Defer { patch, trapped } => {
            // SAFETY: the slot was found on `f`'s live call chain just now,
            // outside the frames this code runs in, and the handler cannot
            // run its own decision meanwhile (the scope is open).
            let trapped = trapped || patch.is_some_and(|(slot, code)| unsafe { set_return_trap(f, slot, code) });
            if due {
                bump(&ts.stats.deferrals);
                let delay = if trapped { MAX_RETRY_NS } else { min_delay(ts) };
                let _ = timer::arm(ts, now_ns() + delay);
            }
            if trapped {
                Here::Trapped
            } else {
                Here::NotNow
            }
        }
    };
    compiler_fence(Ordering::SeqCst);
    ts.defer.set(d);
    compiler_fence(Ordering::SeqCst);
    // A timer that fired during the walk only recorded its deadline (the
    // scope was open), and has expired: unless we stop now, arm it again.
    if d == 0 && here != Here::Stop && ts.pending.replace(false) {
        retry_soon(ts);
    }
    here
}

/// Would a `pause()` made here switch the running function out at once?
/// For the park seam (`interpose::parking`), before it hands a wait to a
/// hook whose `pause()` must really switch: not in a no-preemption scope,
/// not while unwinding a panic, and no deferred code on the call chain
/// ([`stop_here`]'s question, asked without arming a return trap).
#[inline(never)]
pub(crate) fn can_pause_here() -> bool {
    let ts = ts();
    let frame = ts.current.get();
    if frame.is_null() || ts.defer.get() > 0 || std::thread::panicking() {
        return false;
    }
    // SAFETY: `current` is this thread's innermost running function, whose
    // code (a wrapper) runs on its stack.
    let f = unsafe { &*frame };
    ts.defer.set(1);
    compiler_fence(Ordering::SeqCst);
    let stop = stack_room(f) && matches!(judge_here(f), Verdict::Stop { .. });
    compiler_fence(Ordering::SeqCst);
    ts.defer.set(0);
    compiler_fence(Ordering::SeqCst);
    // As in `stop_here`: a timer that fired during the walk only recorded
    // its deadline; arm it again.
    if ts.pending.replace(false) {
        retry_soon(ts);
    }
    stop
}

/// `judge` for the current point of the running function `f`: its call
/// chain is walked from this function's own registers.
#[inline(never)]
fn judge_here(f: &Frame) -> Verdict {
    use crate::judgement::unwind::{memo_clear, walk_here};
    // Inlined: the registers are this function's own, its program counter
    // and stack pointer read together (see `arch::registers_here`).
    let regs = crate::base::arch::registers_here();
    let sp = regs[1] as usize;
    let entry = f.entry_sp.get();
    let lo = f.floor(); // below `stack_lo` once an overflow opened the reserve
    if entry == 0 || sp < lo || sp >= entry {
        return NOT_NOW; // on another stack (a program handler's alternate one)
    }
    // The walks run on the stack of the thread that resumed the function
    // (they take several KiB, which would stay resident in every parked
    // green thread); the register capture above and the memo check stay
    // here.
    let y = f.yielder.get();
    let on_resumer = |walk: &mut dyn FnMut() -> Verdict| {
        if y.is_null() {
            walk()
        } else {
            // SAFETY: `yielder` is the running function's own, and this code
            // runs on its stack.
            unsafe { crate::machine::switch::on_resumer_stack(y, walk) }
        }
    };
    // Inside a park hook: the wrapper that called it found the chain clear
    // above `judged_above` (`can_pause_here`), and those frames have not
    // changed since (the hook runs below them), nor has the table: only the
    // hook's own frames are walked. Without the memo, which keeps the
    // wrapper's walk (the same chain at every park of a loop).
    let above = f.judged_above.get();
    let shortcut = above != 0 && sp < above && above <= entry && f.judged_gen.get() == ranges::generation();
    let (top, mut memo) = if shortcut {
        (above, None)
    } else {
        // A `pause()` in a loop: the same chain as last time (no table
        // read). (Only this function's own thread, here in a no-preemption
        // scope, touches its memo: never borrowed twice.)
        let Ok(memo) = f.memo().try_borrow_mut() else { return NOT_NOW };
        if memo_clear(&memo, &regs, lo, f.stack_hi, entry) {
            return Verdict::Stop { release: false };
        }
        (entry, Some(memo))
    };
    on_resumer(&mut || {
        let Some(table) = ranges::read() else { return NOT_NOW };
        if shortcut && table.generation() != f.judged_gen.get() {
            return NOT_NOW; // rebuilt just now: the next pause walks it all
        }
        match Verdict::of(walk_here(&table, memo.as_deref_mut(), regs, lo, f.stack_hi, top)) {
            Some(v) => v,
            None if scan_clear(&table, sp, top) => Verdict::Stop { release: false },
            None => NOT_NOW,
        }
    })
}

/// The function is unwinding a panic: it must not stop before the unwind is
/// over. Rust's panic count is per thread and private to `std`, so it
/// cannot be swapped at the switch as `flow` swaps other per-thread state:
/// a function stopped in a `Drop` during unwinding would make
/// `std::thread::panicking()` true in its caller, whose mutexes then poison.
/// The deadline is retried by the timer, as for a deferral.
#[cold]
#[inline(never)]
fn unwinding(ts: &ThreadState) {
    bump(&ts.stats.deferrals);
    retry_soon(ts);
}

/// A return trap fired (see `return_trap`): the outermost deferred call of
/// the running function has just returned to its own code. Takes the
/// deadline that was deferred, if it is still due, as the end of a scope
/// would; it cannot be unwound from here (the trampoline is `extern "C"`).
pub(crate) fn at_return() {
    let ts = ts();
    let frame = ts.current.get();
    if frame.is_null() {
        return;
    }
    // SAFETY: `current` is the live function whose call just returned.
    let f = unsafe { &*frame };
    crate::judgement::return_trap::release(f);
    if f.overdue.replace(false) {
        // The deadline found the call waiting in the kernel: the slice
        // ended when the wait did, not at the deadline.
        f.deadline.set(now_ns());
    }
    if !f.pause_due.get() && !f.overflow_due.get() && now_ns() < f.deadline.get() {
        return; // stopped meanwhile (a `pause()` in a callback) and resumed
    }
    if ts.defer.get() > 0 {
        ts.pending.set(true); // inside a scope: taken at its end
    } else if f.held.get().is_some() {
        // The call returned into the runtime's own way back from a stop
        // (`landed`, before `release_held` gave the function its mask): a
        // stop here would take the held mask for the function's own. Let
        // the timer take it a moment later, as before traps.
        retry_soon(ts);
    } else {
        bump(&ts.stats.return_traps);
        // Resumed, possibly on another thread.
        if let Some(ts) = take_pending(ts, false, false) {
            landed(ts);
            release_held(ts);
        }
    }
}

#[cold]
#[inline(never)]
pub(crate) fn take_pending_at_exit(ts: &ThreadState, unwindable: bool) {
    // Resumed, possibly on another thread.
    if let Some(ts) = take_pending(ts, unwindable, true) {
        landed(ts);
        release_held(ts);
    }
}

/// `pause()`: yield voluntarily, at a call site (unwinding is defined there
/// when the caller is Rust code).
///
/// Inlined, with `switch_out`, into `linger_pause` and into the public
/// `pause`, itself inlined into the function's code: every frame between the
/// function's code and the switch is a return the CPU mispredicts after each
/// switch (its return-address predictor still holds the other stack's
/// calls). Rust's pause has none (resume until pause: 44 to 23 ns here); C's
/// `linger_pause` is one call deep.
#[inline(always)]
pub(crate) fn pause(unwindable: bool) {
    let ts = ts();
    let frame = ts.current.get();
    if frame.is_null() || std::thread::panicking() {
        return; // not while unwinding (see `unwinding`)
    }
    // SAFETY: `current` is this thread's innermost running function.
    let here = stop_here(ts, unsafe { &*frame }, false);
    if here != Here::Stop {
        // Library code holds locks below this call (a `Display` impl under
        // `println!`): the pause is taken when the outermost such call
        // returns, by its return trap, or, with no trap, not at all.
        // SAFETY: as above.
        let f = unsafe { &*frame };
        f.pause_due.set(here == Here::Trapped);
        return;
    }
    // SAFETY: `current` is this thread's innermost running function; a call
    // to pause() from its code runs on its stack.
    unsafe { switch_paused(ts, frame, unwindable) };
}

/// The switch of a `pause()` that was judged to stop: counted, out to the
/// resumer, and back (possibly on another thread).
///
/// # Safety
///
/// `frame` is `ts.current`, and this code runs on its stack.
#[inline(always)]
unsafe fn switch_paused(ts: &ThreadState, frame: *mut Frame, unwindable: bool) {
    bump(&ts.stats.pauses);
    // SAFETY: per the contract.
    let ts = unsafe { switch_out(ts, frame, Suspend::Paused, std::ptr::null_mut(), unwindable) };
    // Resumed, possibly on another thread.
    landed(ts);
    release_held(ts);
}

/// `pause` from a park hook's own frames (see `crate::park::pause_in_hook`):
/// while the wrapper that called the hook has found the chain clear above
/// `judged_above` and the table is the one it walked, the hook's frames
/// below are the hook's word, not walked again. Anything else takes the
/// whole `pause`.
///
/// # Safety
///
/// Every frame between the wrapper's call of the hook and this call runs
/// code that may be stopped (not a library's, none holding a lock).
#[inline(always)]
pub(crate) unsafe fn pause_in_hook() {
    let ts = ts();
    let frame = ts.current.get();
    // SAFETY: `current` is null or this thread's innermost running function.
    let Some(f) = (unsafe { frame.as_ref() }) else { return };
    let probe = 0u8;
    let sp = std::hint::black_box(&probe) as *const u8 as usize;
    let above = f.judged_above.get();
    if above == 0
        || sp >= above
        || sp < f.floor()
        || ts.defer.get() > 0
        || std::thread::panicking()
        || f.judged_gen.get() != ranges::generation()
        || !stack_room(f)
    {
        return pause(true);
    }
    // SAFETY: `current` is this thread's innermost running function, and
    // this code runs on its stack (between `floor` and `judged_above`).
    unsafe { switch_paused(ts, frame, true) };
}

/// Does the handler, running on `frame`'s stack, have room to decide and
/// switch? Without it, the walk would fault in the guard page and a function
/// that was merely deep in its stack would be reported as overflowed.
fn stack_room(frame: &Frame) -> bool {
    let probe = 0u8;
    let here = std::hint::black_box(&probe) as *const u8 as usize;
    // On another stack (a program handler's alternate stack): `judge`
    // refuses that on its own.
    here < frame.guard.0 || here >= frame.stack_hi || here >= frame.floor() + HANDLER_STACK
}

/// The kernel's report that our timer's signal found no room for its frame
/// on the function's stack: a SIGSEGV of its own (`SI_KERNEL`), while the
/// timer has expired without its handler running. The deadline is tried
/// again a little later, when the function may have climbed back up; a real
/// overflow faults in the guard page and is reported as one. Called from the
/// SIGSEGV handlers (ours and the program's trampoline); true if handled.
pub(crate) fn lost_timer_signal(info: *const libc::siginfo_t, uc: *const libc::c_void) -> bool {
    // SAFETY: the kernel passes a valid siginfo to SA_SIGINFO handlers.
    if info.is_null() || uc.is_null() || unsafe { (*info).si_code } != libc::SI_KERNEL {
        return false;
    }
    let ts = ts();
    let frame = ts.current.get();
    if frame.is_null() {
        return false;
    }
    // SAFETY: `current` is a live frame while set; valid ucontext from the kernel.
    let (f, sp) = unsafe { (&*frame, (*(uc as *const libc::ucontext_t)).uc_mcontext.gregs[crate::base::arch::REG_SP] as usize) };
    let now = now_ns();
    // Only near the bottom of the function's stack, and only once the timer
    // is due (or the monitor signalled): a general protection fault (also
    // `SI_KERNEL`) re-executes at once and, with the timer re-armed for
    // later, goes to the program.
    if sp < f.guard.0 || sp >= f.stack_lo + 2 * HANDLER_STACK || !signal_due(ts, now) {
        return false;
    }
    bump(&ts.stats.deferrals);
    // With another of our signals queued, the timer is left as it is: that
    // signal may be its expiry, which the kernel would drop if re-armed now
    // (Linux 6.13 and later) and with it the mark `restore_kick` relies on.
    if !forget_lost_signal(ts) {
        ts.armed.set(NEVER);
        let _ = timer::arm(ts, now + min_delay(ts));
    }
    true
}

/// One of our signals reached no handler: the kernel found no room for its
/// frame (`lost_timer_signal`), or its handler was abandoned
/// (`handler_out_of_stack`). Forgets the monitor's mark for it; the caller
/// resets the timer's. True if another of our signals is queued behind it
/// (its mark then stays set). Async-signal-safe.
///
/// In timer mode that one signal was all there was: the timer is one-shot
/// and has just expired. With the monitor, its signal and an expiry of the
/// thread's timer can both be on their way at once (a retry armed in the
/// previous slice, left armed as timers are, and the monitor's first signal
/// of this one): the kernel tries the second right after this SIGSEGV
/// handler returns, at the same stack pointer, where it finds no room
/// either (or enters the handler at the same depth). Clearing both marks
/// for the first made the second one's SIGSEGV look like the function's own:
/// a false stack overflow (`tests/overflow.rs`, 1 run in 2). So the marks
/// stay set while one of ours is still queued, and the loss of the last one
/// clears them. The monitor's signals go through `monitor::kicked`; while
/// the monitor is signalling this thread we wait for it to finish, so that
/// its signal is either queued (seen by `sigpending`) or not sent before it
/// sets the mark again.
fn forget_lost_signal(ts: &ThreadState) -> bool {
    let kicked = monitor::take_kick_and_settle(ts);
    let queued = kicked && our_signal_pending();
    if queued {
        monitor::restore_kick(ts);
    }
    queued
}

/// Is the preemption signal pending on this thread (blocked, as in our
/// SIGSEGV handler)? Async-signal-safe.
fn our_signal_pending() -> bool {
    // SAFETY: a local sigset filled by the kernel.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut set) == 0 && libc::sigismember(&set, crate::machine::signal::number()) == 1
    }
}

/// `handler_errno` before the handler has read errno (it is then intact).
const ERRNO_UNREAD: i32 = i32::MIN;

/// A fault in the guard page while the preemption handler runs on the
/// function's stack: the signal frame fitted, but the handler's own calls
/// did not (a narrow band above the frame's size; `stack_room` keeps the
/// walk out of it). The function did not overflow, so the handler is
/// abandoned instead: the SIGSEGV handler returns straight into the timer
/// frame's `rt_sigreturn`, which resumes the function where the timer
/// interrupted it, and the deadline is tried again later. Before that the
/// handler has changed nothing that is not put back here: the scope depth,
/// errno, `pending` and the timer. True if handled.
pub(crate) fn handler_out_of_stack(info: *const libc::siginfo_t, uc: *mut libc::c_void) -> bool {
    if info.is_null() || uc.is_null() {
        return false;
    }
    let ts = ts();
    let frame = ts.current.get();
    if frame.is_null() {
        return false;
    }
    // SAFETY: `current` is a live frame while set; valid siginfo and
    // ucontext from the kernel.
    let (f, addr, uc) = unsafe { (&*frame, (*info).si_addr() as usize, &mut *(uc as *mut libc::ucontext_t)) };
    let sp = uc.uc_mcontext.gregs[crate::base::arch::REG_SP] as usize;
    let in_guard = addr < f.guard.1 && addr + 64 * 1024 >= f.guard.0;
    if !in_guard || sp < f.guard.0 || sp >= f.stack_hi {
        return false;
    }
    let (huc, d, errno, huc_recorded) = match f.handler_uc.get() {
        0 => match entering_handler(ts, f, sp) {
            Some(huc) => (huc, ts.defer.get(), ERRNO_UNREAD, false),
            None => return false,
        },
        huc => (huc, f.handler_defer.get(), f.handler_errno.get(), true),
    };
    // The faulting code runs below the handler's signal frame, on this
    // stack: the handler itself (or what it called).
    if sp >= huc || huc >= f.stack_hi {
        return false;
    }
    // SAFETY: `huc` is the handler's `ucontext`, inside the kernel's
    // `rt_sigframe` on this stack; the word just below it is the frame's
    // return address, libc's restorer (`pretcode`, x86-64 layout). The
    // restorer expects the stack pointer at the `ucontext`, as after the
    // handler's `ret`.
    let restorer = unsafe { *((huc - 8) as *const usize) };
    let g = &mut uc.uc_mcontext.gregs;
    g[crate::base::arch::REG_PC] = restorer as i64;
    g[crate::base::arch::REG_SP] = huc as i64;
    f.handler_uc.set(0);
    ts.defer.set(d);
    if huc_recorded && !f.handler_reading.get() {
        // It may have been abandoned inside its reading of the table.
        ranges::abandon_reading();
    }
    bump(&ts.stats.deferrals);
    let now = now_ns();
    let deadline = f.deadline.get();
    if d > 0 && now >= deadline {
        ts.pending.set(true); // as the handler would have done
    } else {
        // It may have recorded a deadline as armed and faulted on its way to
        // the system call: arm for real.
        forget_lost_signal(ts);
        ts.armed.set(NEVER);
        let _ = timer::arm(ts, deadline.max(now + min_delay(ts)));
    }
    if errno != ERRNO_UNREAD {
        // SAFETY: errno location is valid for the thread.
        unsafe { *libc::__errno_location() = errno };
    }
    true
}

/// Size of the kernel's `struct ucontext` on x86-64: the `siginfo` of a
/// signal frame follows it (`rt_sigframe`: return address, ucontext, siginfo).
const KERNEL_UCONTEXT: usize = 304;

/// The handler's entry, before it could say it runs (its first call needs
/// stack): finds its signal frame just above the faulting `sp`. Only while
/// our timer has expired (for a frame of the timer's, `SI_TIMER`) or the
/// monitor has signalled (for one of the monitor's, `SI_QUEUE` with its
/// cookie), the handler has not yet run for it (it resets `armed` or the
/// monitor's mark first of all) and our signal is not pending: otherwise
/// the fault is the function's own, and an old frame left above it must
/// not be mistaken for a live one. Returns the handler's `ucontext` address.
fn entering_handler(ts: &ThreadState, f: &Frame, sp: usize) -> Option<usize> {
    let armed = ts.armed.get();
    let timer_due = armed != NEVER && now_ns() >= armed;
    let kicked = monitor::kicked(ts);
    if (!timer_due && !kicked) || our_signal_pending() {
        return None;
    }
    let signo = crate::machine::signal::number();
    // The handler's entry code pushes a few registers and its locals (a few
    // hundred bytes) below the 16-byte aligned frame. Its stack pointer may
    // already be in the guard page (a `sub` moved it there): start reading
    // above the guard, which would fault again.
    let mut cand = (sp.max(f.floor()) + 8 + 15) & !15;
    while cand < sp + 1024 && cand + KERNEL_UCONTEXT + 128 <= f.stack_hi {
        // SAFETY: `cand` and the siginfo after it lie between the faulting
        // stack pointer and the top of this function's stack (checked
        // above), mapped memory that we only read.
        let (info, isp, fp) = unsafe {
            let info = &*((cand + KERNEL_UCONTEXT) as *const libc::siginfo_t);
            let u = &*(cand as *const libc::ucontext_t);
            (info, u.uc_mcontext.gregs[crate::base::arch::REG_SP] as usize, u.uc_mcontext.fpregs as usize)
        };
        let due = (timer_due && info.si_code == libc::SI_TIMER) || (kicked && monitor::from_monitor(info));
        if info.si_signo == signo && due && isp > cand && isp <= f.stack_hi && fp > cand && fp < isp {
            return Some(cand);
        }
        cand += 16;
    }
    None
}

/// The handler's verdict on an interrupted point.
enum Verdict {
    /// Safe to stop here. `release`: the walk saw the whole chain and no
    /// return trap on it, so one the function holds is dead.
    Stop { release: bool },
    /// Not now. `patch`: the return-address slot of the outermost deferred
    /// call and that call's code address, where a return trap could be set;
    /// `trapped`: a trap is set there already.
    Defer { patch: Option<(usize, usize)>, trapped: bool },
}

/// Not now, and no trap to set.
const NOT_NOW: Verdict = Verdict::Defer { patch: None, trapped: false };

impl Verdict {
    /// The verdict a walk of the call chain gives, or None when it could
    /// not tell (the caller falls back to scanning the stack).
    fn of(chain: crate::judgement::unwind::Chain) -> Option<Verdict> {
        use crate::judgement::unwind::Chain;
        match chain {
            Chain::Clear { trapped } => Some(Verdict::Stop { release: !trapped }),
            Chain::Deferred { patch, trapped } => Some(Verdict::Defer { patch, trapped }),
            Chain::Unknown => None,
        }
    }
}

/// Is the interrupted point of `frame` (registers in `uc`) safe to stop at?
fn judge(frame: &Frame, uc: &libc::ucontext_t) -> Verdict {
    use crate::judgement::unwind::{walk, Chain};
    let Some(table) = ranges::read() else { return NOT_NOW };
    let g = &uc.uc_mcontext.gregs;
    let (pc, sp) = (g[crate::base::arch::REG_PC] as usize, g[crate::base::arch::REG_SP] as usize);
    let entry = frame.entry_sp.get();
    // `floor`: with its reserve opened by an overflow in library code, the
    // function runs below its usable stack until that code returns.
    if entry == 0 || sp < frame.floor() || sp >= entry {
        return NOT_NOW;
    }
    let (lo, hi) = (frame.floor(), frame.stack_hi);
    let from = if table.must_defer(pc) {
        // Exception: a futex wait inside libc's synchronisation functions,
        // for functions that asked (`Builder::stop_in_futex_waits`): stopped
        // there (`futex.rs`).
        if frame.futex_stops {
            if let Some(release) = crate::judgement::futex::judge(&table, uc, lo, hi, entry, frame.std_waits) {
                // Counted here: every Stop verdict is taken.
                bump(&ts().stats.futex_stops);
                return Verdict::Stop { release };
            }
        }
        // Exception: the system call instruction of an interposed blocking
        // call (read, nanosleep, ...): the libc wrapper below the interposer
        // holds no lock there, so only the frames above the interposer count.
        let b = frame.blocking_sp.get();
        if b == 0 || b < sp || b >= entry || !table.is_known(pc) || !ranges::at_syscall(pc) {
            // Deferred here: where does the deferred code return to the
            // function's own?
            return match walk(&table, uc, lo, hi, entry, true) {
                Chain::Deferred { patch, trapped } => Verdict::Defer { patch, trapped },
                _ => NOT_NOW,
            };
        }
        // The call chain from libc's system call wrapper up: every frame but
        // that first one must be clear (a scan would also read stale words
        // that the wrapper's own earlier calls left in its frame).
        let chain = walk(&table, uc, lo, hi, entry, false);
        // Exception: a futex wait under std's parking or channel code, for
        // functions with a std thread of their own
        // (`Builder::stop_in_std_waits`, `ranges::STD_WAITS`).
        if frame.std_waits && matches!(chain, Chain::Deferred { .. }) {
            if let Some(trapped) = crate::judgement::unwind::std_wait(&table, uc, lo, hi, entry) {
                bump(&ts().stats.futex_stops);
                return Verdict::Stop { release: !trapped };
            }
        }
        match Verdict::of(chain) {
            Some(v) => return v,
            None => b,
        }
    } else {
        // Walk the real call chain when the unwind tables allow it: a scan
        // of every stack word would also see stale return addresses.
        match Verdict::of(walk(&table, uc, lo, hi, entry, false)) {
            Some(v) => return v,
            None => sp,
        }
    };
    // (The scan reads return addresses only: the interrupted point itself
    // may be a deferred function's code inlined into the function's own.)
    if !table.in_inlined(pc) && scan_clear(&table, from, entry) {
        Verdict::Stop { release: false }
    } else {
        NOT_NOW
    }
}

/// Sets a return trap on the outermost deferred call found by `judge` (or
/// `judge_here`, or the SIGSEGV handler), unless that call reads its own
/// return address. True if set.
///
/// # Safety
/// `f` is the function interrupted in this handler (or the SIGSEGV
/// handler, which holds the preemption signal), or the running function
/// asking from a frame below `slot` with a no-preemption scope open; `slot`
/// a live return-address slot of its call chain.
pub(crate) unsafe fn set_return_trap(f: &Frame, slot: usize, code: usize) -> bool {
    // SAFETY: per the contract.
    may_trap(code) && unsafe { crate::judgement::return_trap::arm(f, slot) }
}

/// May the return of the deferred call whose code is at `code` be trapped?
/// Async-signal-safe.
pub(crate) fn may_trap(code: usize) -> bool {
    // Not while an exception or a panic is being unwound: unwinders tell
    // frames apart by their CFA, and a trap set between the search phase
    // and the unwind phase (or before an `_Unwind_Resume`) would change the
    // CFA of the frames above it; libgcc then aborts.
    if std::thread::panicking() || crate::machine::flow::cxx_exception_in_flight(ts()) {
        return false;
    }
    let Some(table) = ranges::read() else { return false };
    if table.in_loader(code) {
        return false;
    }
    crate::judgement::unwind::function_start(&table, code).is_some_and(|start| !crate::judgement::return_trap::reads_return_address(start))
}

/// The function is about to return from this handler to the `syscall`
/// instruction of an interposed blocking call: the kernel rewound it to
/// restart the call (our handler has `SA_RESTART`), or the signal came just
/// before the call. Make the call fail with EINTR instead (skip the
/// instruction with `-EINTR` as its result), so that the interposer decides:
/// it retries unless a program handler ran since the program's call began.
///
/// Restarting in the kernel would lose that handler's EINTR whenever the
/// program signal runs in a window the kernel cannot see: while this handler
/// runs (its mask holds the program's signals, which are delivered when it
/// returns, just before the restarted call), and while the function is stopped
/// with its signals held. Costs one more system call per preemption of a
/// blocked call.
/// Is the function at (or just after) the system call of an interposed
/// blocking call? (Same test as `interrupt_blocked_call`.)
fn blocked_in_call(f: &Frame, uc: &libc::ucontext_t) -> bool {
    let g = &uc.uc_mcontext.gregs;
    let pc = g[crate::base::arch::REG_PC] as usize;
    let sp = g[crate::base::arch::REG_SP] as usize;
    let b = f.blocking_sp.get();
    if b == 0 || sp >= b || b - sp > MAX_SYSCALL_DEPTH || sp < f.stack_lo {
        return false;
    }
    ranges::read().is_some_and(|t| t.is_known(pc) && ranges::at_syscall(pc))
}

/// Is the interrupted thread waiting in the kernel? The signal found it at
/// a `syscall` instruction of known code: rewound there so that the kernel
/// restarts the interrupted call (as after any `SA_RESTART` handler; also
/// `restart_syscall` for timed waits), or just past one that failed with
/// `EINTR` (the waits the kernel never restarts). Either way a system call
/// was in progress when the deadline came, and system calls that take long
/// are waits: this is what makes every blocking call a wait, whether linger
/// wraps it or it runs inside libc (`pthread_join`, `flock`, `sem_wait`,
/// `mq_send`, `sigwait`, `system`, stdio reads). A deadline that merely
/// lands next to a quick call sees it as a wait too, which costs nothing:
/// the return trap stops the function when the call returns.
fn waiting_in_kernel(uc: &libc::ucontext_t) -> bool {
    let g = &uc.uc_mcontext.gregs;
    let pc = g[crate::base::arch::REG_PC] as usize;
    // Code bytes are read inside a reading section (see `ranges.rs`).
    let Some(t) = ranges::read() else { return false };
    if !t.is_known(pc) {
        return false;
    }
    ranges::at_syscall_instruction(pc)
        || (g[crate::base::arch::REG_RET] == -(libc::EINTR as i64) && ranges::at_syscall(pc))
}

/// An interposed blocking call returns to the program: if its function's
/// deadline passed while it blocked and was left for now, stop it shortly
/// (one minimum delay from now, at the handler's next decision).
pub(crate) fn blocked_call_returns() {
    let ts = ts();
    let frame = ts.current.get();
    if frame.is_null() {
        return;
    }
    // SAFETY: `current` is the live function that is running this call.
    let f = unsafe { &*frame };
    if f.overdue.replace(false) {
        // The slice ended when the wait did (the wait is not the function's
        // overrun): stop it one minimum delay from now.
        let now = now_ns();
        f.deadline.set(now);
        let _ = timer::arm(ts, now + min_delay(ts));
    }
}

/// How far below an interposer's frame libc's system call may run (see
/// `interrupt_blocked_call`); a signal frame is at least ~1.1 KiB.
const MAX_SYSCALL_DEPTH: usize = 768;

fn interrupt_blocked_call(f: &Frame, uc: &mut libc::ucontext_t) {
    let g = &mut uc.uc_mcontext.gregs;
    let pc = g[crate::base::arch::REG_PC] as usize;
    let sp = g[crate::base::arch::REG_SP] as usize;
    let b = f.blocking_sp.get();
    // The system call must be the one the interposer made: libc's wrapper
    // runs a few dozen bytes below it (48 for `read`). A program handler
    // that interrupted the call and makes system calls of its own (or
    // returns through `__restore_rt`'s) runs below a kernel signal frame,
    // which alone takes more than this.
    if b == 0 || sp >= b || b - sp > MAX_SYSCALL_DEPTH || sp < f.stack_lo {
        return;
    }
    let Some(table) = ranges::read() else { return };
    if !table.is_known(pc) || !ranges::at_syscall_instruction(pc) {
        return;
    }
    g[crate::base::arch::REG_RET] = -(libc::EINTR as i64);
    g[crate::base::arch::REG_PC] = (pc + crate::base::arch::SYSCALL_LEN) as i64;
}


/// The word at `a`, read as the machine reads it: the scan looks at every
/// word of a live stack, padding and a sanitizer's redzones between locals
/// included, which AddressSanitizer would report if the load were the
/// compiler's (this load is not instrumented).
///
/// # Safety
/// `a` is an 8-byte aligned address of mapped, readable memory.
#[inline(always)]
unsafe fn stack_word(a: usize) -> usize {
    // SAFETY: by the caller.
    unsafe { crate::base::arch::load_word(a) }
}

/// The conservative check: no word of the live stack in `[from, entry)` looks
/// like a return address into code that must not be interrupted.
pub(crate) fn scan_clear(table: &ranges::Table, from: usize, entry: usize) -> bool {
    let sigreturn = crate::judgement::unwind::sigreturn();
    let mut a = (from + 7) & !7;
    while a < entry {
        // SAFETY: [from, entry) is the live part of the function's own stack,
        // mapped and readable, and `a` is 8-byte aligned.
        let w = unsafe { stack_word(a) };
        // A trap address stands for a deferred call's return address; the
        // `rt_sigreturn` stub (no call precedes it) for a signal handler's
        // frame, maybe the program's, whose mask the caller would get.
        if table.deferred_return_address(w) || crate::judgement::return_trap::original(w).is_some() || (w == sigreturn && w != 0) {
            return false;
        }
        a += 8;
    }
    true
}

/// Was this signal sent by this thread's own preemption timer? A program
/// may aim a POSIX timer of its own at the same signal: the kernel's timer
/// id in the siginfo (`si_timerid`, the id our raw `timer_create` returned)
/// tells them apart. Async-signal-safe.
fn from_our_timer(info: &libc::siginfo_t) -> bool {
    if info.si_code != libc::SI_TIMER {
        return false;
    }
    // The kernel's `_sigtimer` layout: after signo, errno, code and padding
    // (16 bytes on x86-64) come the timer id and the overrun count; the libc
    // crate has no accessor for the id.
    // SAFETY: an SI_TIMER siginfo holds the `_timer` member of the union,
    // whose first field is the `int` timer id at that offset.
    let id = unsafe { *((info as *const libc::siginfo_t as *const u8).add(16) as *const i32) };
    id == ts().timer.get()
}

/// The preemption handler's address, for the SIGSEGV handler to tell a
/// fault at its entry (see `overflow::finish_on_reserve`).
pub(crate) fn handler_entry() -> usize {
    on_timer as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize
}

/// The preemption signal handler.
///
/// Async-signal-safe: touches only const-initialised thread-local cells, the
/// immutable range table, clock_gettime and timer_settime.
///
/// The handler marks itself as a no-preemption scope while it runs: with
/// SA_NODEFER a timer it re-arms can fire again before it returns (arming a
/// near deadline takes up to ~10 us in VMs). Such a nested signal only sets
/// `pending`, and the outer instance decides again. Without this, the nested
/// instance would see the handler's own (preemptible-looking) code and stop
/// the function while the outer instance had interrupted, say, malloc.
extern "C" fn on_timer(sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to SA_SIGINFO handlers.
    // SAFETY: as above.
    let by_monitor = !info.is_null() && monitor::from_monitor(unsafe { &*info });
    // SAFETY: as above.
    if !info.is_null() && !by_monitor && !from_our_timer(unsafe { &*info }) {
        // Sent by someone (kill, raise, sigqueue) or by a timer of the
        // program's own, not by this thread's timer or the monitor: it is
        // the program's, and goes where the program believes it goes.
        crate::handlers::program_signals::deliver_to_program(sig, info, uc);
        return;
    }
    debug_assert!(info.is_null() || info as usize == uc as usize + KERNEL_UCONTEXT, "rt_sigframe layout");
    let ts = ts();
    let frame = ts.current.get();
    // Say first of all that this handler runs on the function's stack (the
    // outermost instance does): if the stack runs out under it, the SIGSEGV
    // handler abandons it and the deadline is tried again later.
    // SAFETY: `current` always points to a live frame.
    let recorded = !frame.is_null() && unsafe { (*frame).handler_uc.get() } == 0;
    if recorded {
        // SAFETY: as above.
        let f = unsafe { &*frame };
        f.handler_errno.set(ERRNO_UNREAD);
        f.handler_defer.set(ts.defer.get());
        f.handler_reading.set(ranges::reading());
        compiler_fence(Ordering::SeqCst);
        f.handler_uc.set(uc as usize);
    }
    // SAFETY: errno location is valid for the thread.
    let saved_errno = unsafe { *libc::__errno_location() };
    if recorded {
        // SAFETY: as above.
        unsafe { (*frame).handler_errno.set(saved_errno) };
    }
    let counts = crate::state::thread::signal_counts(ts);
    counts.ours.set(counts.ours.get() + 1);
    if by_monitor {
        monitor::clear_kick(ts);
    } else {
        ts.armed.set(NEVER); // one-shot: it just expired
    }
    // SAFETY: `current` always points to a live frame.
    let flag = if frame.is_null() { std::ptr::null() } else { unsafe { (*frame).yield_flag.get() } };
    if frame.is_null() {
        bump(&ts.stats.spurious_signals);
    } else if !flag.is_null() {
        // Resumed cooperatively: the deadline only counts, on the flag the
        // function's own code checks; it is never stopped here.
        // SAFETY: `current` is live; the flag outlives the resume that set
        // it (`Inner::resume_cooperative`), inside which this runs.
        let f = unsafe { &*frame };
        let now = now_ns();
        if now >= f.deadline.get() {
            // SAFETY: as above.
            unsafe { &*flag }.fetch_add(1, Ordering::Relaxed);
            f.deadline.set(now.saturating_add(f.yield_every.get()));
        } else {
            bump(&ts.stats.spurious_signals);
        }
        rearm_for(ts, f.deadline.get());
    } else if ts.defer.get() > 0 {
        // SAFETY: `current` always points to a live frame.
        let deadline = unsafe { (*frame).deadline.get() };
        if now_ns() < deadline {
            // Early (the timer was armed for an earlier deadline): re-arm.
            bump(&ts.stats.spurious_signals);
            rearm_for(ts, deadline);
        } else if !ts.pending.get() {
            ts.pending.set(true);
            bump(&ts.stats.deferrals);
        }
    } else {
        ts.defer.set(1);
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `current` always points to a live frame (the runtime clears
        // it before a frame is freed); the kernel passes a valid ucontext.
        unsafe { decide(ts, &*frame, uc as *mut libc::ucontext_t) };
    }
    if !frame.is_null() && flag.is_null() {
        // Whether it was stopped and resumed or not, the function returns to
        // its interrupted instruction now.
        // SAFETY: the frame is live (its function is the one interrupted,
        // and it is running again); the kernel's ucontext is ours to edit.
        unsafe { interrupt_blocked_call(&*frame, &mut *(uc as *mut libc::ucontext_t)) };
    }
    if recorded {
        // SAFETY: as above.
        unsafe { (*frame).handler_uc.set(0) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved_errno };
    // Last, with nothing of this handler's left to strand: the program's
    // signals held on this thread may run if it is out of library code now.
    if let Some(after) = AFTER_TIMER.get() {
        // SAFETY: the kernel's ucontext of this handler, ours to edit.
        after(unsafe { &mut *(uc as *mut libc::ucontext_t) });
    }
}

/// The handler's decision loop; called with the handler's scope open
/// (`defer == 1`) and returns with it closed.
///
/// # Safety
/// `f` is the running function interrupted at `ucp`, on this thread.
unsafe fn decide(ts: &ThreadState, f: &Frame, ucp: *mut libc::ucontext_t) {
    loop {
        ts.pending.set(false);
        let now = now_ns();
        let deadline = f.deadline.get();
        if now < deadline {
            bump(&ts.stats.spurious_signals);
            rearm_for(ts, deadline);
        } else if !f.preempt_blocked
            // SAFETY: valid ucontext (caller's contract).
            && blocked_in_call(f, unsafe { &*ucp })
        {
            // Leave it waiting, with no timer, until the call returns to the
            // program (`blocked_call_returns`). The call itself goes on: the
            // handler's return makes it fail with EINTR into its wrapper,
            // which calls again.
            f.overdue.set(true);
            bump(&ts.stats.blocked_deadlines);
        } else {
            // SAFETY: valid ucontext (caller's contract).
            // A stop in a futex wait (libc's or std's) is counted by `judge`.
            let waits = ts.stats.futex_stops.get();
            let verdict = if stack_room(f) && !std::thread::panicking() { judge(f, unsafe { &*ucp }) } else { NOT_NOW };
            let in_wait = ts.stats.futex_stops.get() != waits;
            if let Verdict::Stop { release } = verdict {
                if release {
                    crate::judgement::return_trap::release(f);
                }
                // Deferred before: this is a timer retry (a return trap
                // stops the function elsewhere, in `pause`).
                let deferred = f.retries.get() > 0;
                f.retries.set(0);
                record_preemption(ts, f, now, deferred, in_wait);
                // Parked from here on, and with room to spare once resumed.
                f.handler_uc.set(0);
                ts.defer.set(0);
                compiler_fence(Ordering::SeqCst);
                // SAFETY: judge checked that we interrupted the function's
                // own code on its own stack, and this handler frame is on it too.
                let ts = unsafe { switch_out(ts, f as *const Frame as *mut Frame, Suspend::Preempted, ucp, false) };
                // Resumed, possibly on another thread.
                landed(ts);
                return;
            }
            // A wait inside deferred code (`pthread_join`, `flock`, a
            // `system` waiting for its child, a `fgets` on a pipe): left
            // alone as the wrapped waits above are, see `waiting_in_kernel`.
            // SAFETY: valid ucontext (caller's contract).
            let waiting = !f.preempt_blocked && waiting_in_kernel(unsafe { &*ucp });
            if waiting && !f.overdue.replace(true) {
                bump(&ts.stats.blocked_deadlines);
            } else {
                bump(&ts.stats.deferrals);
                if f.deferred_at.get() == 0 {
                    // SAFETY: valid ucontext (caller's contract).
                    f.deferred_at.set(unsafe { (*ucp).uc_mcontext.gregs[crate::base::arch::REG_PC] } as usize);
                }
            }
            // The deferred call's return will stop the function (see
            // `return_trap`); the timer only backs that up.
            // SAFETY: the slot was found on `f`'s live call chain just now,
            // and `f` is stopped in this handler.
            let trapped = match verdict {
                Verdict::Defer { trapped: true, .. } => true,
                Verdict::Defer { patch: Some((slot, code)), .. } => unsafe { set_return_trap(f, slot, code) },
                _ => false,
            };
            let n = f.retries.get();
            f.retries.set(n.saturating_add(1));
            // Retry at the base interval a few times (most deferrals are
            // short library calls), then back off for long ones.
            let shift = n.saturating_sub(RETRIES_BEFORE_BACKOFF).min(16);
            // With a trap set, the timer is only a backstop, unless the
            // function is inside a wrapped blocking call: the trap fires when
            // the call returns, but a retry stops it at its system call.
            let backstop = trapped && f.blocking_sp.get() == 0;
            let delay = if waiting {
                // Checks that back off to one every 32 ms: they cost nothing
                // to speak of while the call waits, and bound the overrun
                // should its trap never fire (a `longjmp` out of the call).
                MAX_RETRY_NS << n.min(WAIT_BACKOFF_STEPS)
            } else if backstop {
                MAX_RETRY_NS
            } else {
                (RETRY_NS.load(Ordering::Relaxed) << shift).min(MAX_RETRY_NS)
            };
            // Never retry sooner than twice what this decision cost: walking
            // a call chain thousands of frames deep takes milliseconds, and
            // retrying every 10 us would leave the function no time to run.
            let after = now_ns();
            let cost = after.saturating_sub(now);
            let _ = timer::arm(ts, after + delay.max(min_delay(ts)).max(2 * cost));
        }
        compiler_fence(Ordering::SeqCst);
        if !ts.pending.get() {
            // Close the handler's scope, then look again: a timer armed just
            // above can fire between the check and the close, and its
            // handler, seeing the scope open, only sets `pending` (once the
            // scope is closed a signal decides for itself). Left unnoticed,
            // that deadline would be lost: the timer has expired and no
            // scope exit remains to take it.
            ts.defer.set(0);
            compiler_fence(Ordering::SeqCst);
            if !ts.pending.get() {
                return;
            }
            ts.defer.set(1);
            compiler_fence(Ordering::SeqCst);
        }
        // The timer fired again while we were arming it: decide afresh.
    }
}

/// Arms the timer for the soonest worthwhile retry of a deadline that could
/// not be taken now.
pub(crate) fn retry_soon(ts: &ThreadState) {
    let _ = timer::arm(ts, now_ns() + min_delay(ts));
}

/// The shortest delay worth arming: what arming itself costs on this machine
/// plus the base retry, so the function runs some of its own code before the
/// next signal.
#[inline]
pub(crate) fn min_delay(ts: &ThreadState) -> u64 {
    RETRY_NS.load(Ordering::Relaxed) + ts.arm_cost.get()
}

/// Makes `deadline` the deadline of the function this thread runs now, at
/// a launch or resume: arms the thread's timer for it (lazily: never later
/// than a pending expiry), or publishes it to the monitor.
#[inline]
pub(crate) fn publish(ts: &ThreadState, deadline: u64) -> Result<(), Error> {
    if monitor::enabled() {
        monitor::publish(ts, deadline);
        Ok(())
    } else {
        timer::arm(ts, deadline).map_err(Error::Timer)
    }
}

/// Back in the caller, whose deadline (NEVER outside functions) is taken
/// at the end of the runtime's scope if it has passed: the monitor must
/// not signal for the function that just left. Timers are disarmed lazily.
#[inline]
pub(crate) fn publish_taken(ts: &ThreadState, deadline: u64) {
    if monitor::enabled() {
        monitor::publish(ts, deadline);
    }
}

/// A signal came before the running function's `deadline`: make sure that
/// deadline is still delivered. The timer is re-armed for it, unless the
/// monitor is watching that very deadline (then the signal was a stale one,
/// meant for an earlier function).
pub(crate) fn rearm_for(ts: &ThreadState, deadline: u64) {
    if !monitor::enabled() || monitor::published(ts) != deadline {
        let _ = timer::arm(ts, deadline);
    }
}

/// Is a preemption signal due on this thread that no handler has taken:
/// its timer has expired, or the monitor has signalled it? Async-signal-safe.
fn signal_due(ts: &ThreadState, now: u64) -> bool {
    let armed = ts.armed.get();
    (armed != NEVER && now >= armed) || monitor::kicked(ts)
}

/// Depth of no-preemption scopes of the running context.
pub(crate) fn critical_depth() -> u32 {
    ts().defer.get()
}

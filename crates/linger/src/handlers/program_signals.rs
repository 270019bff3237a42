//! The program's own signal dispositions as linger keeps them, and running
//! the program's handlers: the table the `sigaction` wrappers fill
//! (`interpose::signals`), the shadow disposition of the preemption signal,
//! and the calls that run a handler of the program's counted as its own.
//! Below the handlers that deliver to them (`preempt`, libas-safe's hold
//! mode) and the wrappers that install them.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, sighandler_t, sigset_t};

use crate::machine::signal::{preemption_signal, real_sigaction};
use crate::state::thread::ts;

/// libas-safe's hold mode is on in this process (set by
/// `deferral::hold_program_signals`): the program's handlers run with the
/// program's own libraries.
static HOLDING: AtomicBool = AtomicBool::new(false);

/// Is libas-safe's mode on (handlers held while in deferred code)?
#[inline]
pub(crate) fn holding() -> bool {
    HOLDING.load(Ordering::Acquire)
}

/// Turns libas-safe's mode on, for good.
pub(crate) fn set_holding() {
    HOLDING.store(true, Ordering::Release);
}

/// Signal numbers 1..NSIG (glibc's _NSIG is 65 on Linux).
pub(crate) const NSIG: usize = 65;

/// The program's handler and flags for each signal whose kernel handler is
/// our trampoline.
pub(crate) static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
pub(crate) static FLAGS: [AtomicI32; NSIG] = [const { AtomicI32::new(0) }; NSIG];
/// Their `sa_mask` (signals 1 to 64, the kernel's word), for handlers run
/// later than their signal came (`crate::deferral`).
pub(crate) static MASKS: [AtomicU64; NSIG] = [const { AtomicU64::new(0) }; NSIG];
/// The disposition the program believes the preemption signal has. Atomics,
/// not a lock: `sigaction` is async-signal-safe and may be called from a
/// handler that interrupted another `sigaction`.
pub(crate) static SHADOW_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
pub(crate) static SHADOW_FLAGS: AtomicI32 = AtomicI32::new(0);
pub(crate) static SHADOW_MASK: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
/// The signal the shadow was set for (0: never set). Before the runtime
/// starts that is the signal it expects to use, which a configuration
/// installed later may change (see `hand_over_shadow`).
pub(crate) static SHADOW_SIGNO: AtomicI32 = AtomicI32::new(0);

pub(crate) fn is_function(h: sighandler_t) -> bool {
    h != libc::SIG_DFL && h != libc::SIG_IGN && h != libc::SIG_ERR
}

pub(crate) fn shadow_get() -> libc::sigaction {
    // SAFETY: an all-zero sigaction is a valid value of this plain C struct.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = SHADOW_HANDLER.load(Ordering::Relaxed);
    sa.sa_flags = SHADOW_FLAGS.load(Ordering::Relaxed);
    // SAFETY: sigset_t is 16 u64 words on x86_64 Linux.
    let words: &mut [u64; 16] = unsafe { &mut *(&mut sa.sa_mask as *mut sigset_t as *mut [u64; 16]) };
    for (w, s) in words.iter_mut().zip(&SHADOW_MASK) {
        *w = s.load(Ordering::Relaxed);
    }
    sa
}

pub(crate) fn shadow_set(sa: &libc::sigaction) {
    SHADOW_SIGNO.store(preemption_signal(), Ordering::Relaxed);
    SHADOW_HANDLER.store(sa.sa_sigaction, Ordering::Relaxed);
    SHADOW_FLAGS.store(sa.sa_flags, Ordering::Relaxed);
    // SAFETY: as in shadow_get.
    let words: &[u64; 16] = unsafe { &*(&sa.sa_mask as *const sigset_t as *const [u64; 16]) };
    for (w, s) in words.iter().zip(&SHADOW_MASK) {
        s.store(*w, Ordering::Relaxed);
    }
}

/// The disposition an exec'd image should inherit for the preemption signal:
/// ignored if the program asked for that, default otherwise.
pub(crate) fn shadow_ignored() -> bool {
    SHADOW_HANDLER.load(Ordering::Relaxed) == libc::SIG_IGN
}

/// A preemption signal that the program (or another process) sent rather
/// than our timer: act as its shadow disposition says, as the kernel would.
pub(crate) fn deliver_to_program(sig: c_int, info: *mut libc::siginfo_t, uc: *mut c_void) {
    let h = SHADOW_HANDLER.load(Ordering::Relaxed);
    if h == libc::SIG_IGN {
        return;
    }
    if h == libc::SIG_DFL {
        // The default action of a real-time signal: terminate by it.
        if let Some(real) = real_sigaction() {
            // SAFETY: an all-zero sigaction with SIG_DFL is valid; raising
            // with the default action terminates the process.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                real(sig, &sa, std::ptr::null_mut());
                libc::raise(sig);
            }
        }
        return;
    }
    crate::state::thread::signal_counts(ts()).bump_theirs(SHADOW_FLAGS.load(Ordering::Relaxed) & libc::SA_RESTART != 0);
    if !uc.is_null() {
        // The mask the kernel would have set for this handler: the
        // interrupted code's plus the handler's `sa_mask` (the preemption
        // handler's own holds every program signal).
        let mut m = SHADOW_MASK[0].load(Ordering::Relaxed) & !crate::machine::sigmask::bit(sig);
        // SAFETY: the kernel passes a valid ucontext to SA_SIGINFO handlers.
        m |= crate::machine::sigmask::word(unsafe { &(*(uc as *const libc::ucontext_t)).uc_sigmask });
        crate::machine::sigmask::set(m);
    }
    if SHADOW_FLAGS.load(Ordering::Relaxed) & libc::SA_SIGINFO != 0 {
        // SAFETY: the program installed this as an SA_SIGINFO handler.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = unsafe { std::mem::transmute(h) };
        as_program_handler(|| f(sig, info, uc));
    } else {
        // SAFETY: the program installed this as a plain handler.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(h) };
        as_program_handler(|| f(sig));
    }
}

/// Runs a handler of the program's, marked as such for
/// [`in_program_handler`]. The mark belongs to the flow of control it
/// interrupted (the running function's, or the thread's outside functions),
/// as the signal counts do.
///
/// With libas-safe, the handler runs with the program's own libraries
/// (libset 0), as the original did: interrupting a function isolated with
/// libc copied, inside that copy's `printf`, it must not call the same
/// copy's `printf` (the program's libc is where handlers are held).
#[inline(always)]
fn as_program_handler(run: impl FnOnce()) {
    let c = crate::state::thread::signal_counts(ts());
    let prev = c.handler_sp.replace(crate::base::arch::stack_pointer());
    if holding() {
        let libset = gotcha::set_current_libset(0);
        run();
        gotcha::set_current_libset(libset);
    } else {
        run();
    }
    // The counts of the same flow (`ts()` again: the function may have been
    // stopped inside the handler and resumed on another thread).
    crate::state::thread::signal_counts(ts()).handler_sp.set(prev);
}

/// Deepest a handler's call to the runtime may be below its entry: an
/// alternate signal stack mapped just above this thread's stack must not
/// make every later call look like one from a handler (after a handler left
/// by `siglongjmp`, which skips the reset in `as_program_handler`).
const MAX_HANDLER_DEPTH: usize = 1 << 20;

/// Is the calling code running inside a signal handler of the program's
/// (one installed through `sigaction`/`signal`), on this flow of control?
/// The runtime's entry points are not async-signal-safe (they allocate, take
/// locks, and may be interrupting themselves), so they refuse such calls.
/// A mark left behind by a handler that `siglongjmp`ed out is cleared here:
/// the caller's stack pointer is then above it.
#[inline]
pub(crate) fn in_program_handler() -> bool {
    // The caller's side of an entry point, before any switch.
    let c = crate::state::thread::signal_counts(crate::state::thread::ts_caller());
    let h = c.handler_sp.get();
    if h == 0 {
        return false;
    }
    below_handler_mark(c, h)
}

#[cold]
#[inline(never)]
fn below_handler_mark(c: &crate::state::thread::SignalCounts, h: usize) -> bool {
    let sp = crate::base::arch::stack_pointer();
    if sp < h && h - sp < MAX_HANDLER_DEPTH {
        return true;
    }
    c.handler_sp.set(0);
    false
}

/// A handler of the program's as installed: what the kernel would run for
/// its signal.
#[derive(Clone, Copy)]
pub(crate) struct Action {
    pub handler: sighandler_t,
    pub flags: c_int,
    /// `sa_mask`, signals 1 to 64.
    pub mask: u64,
}

/// The program's handler for `sig`, if it installed one (a function).
/// Async-signal-safe.
pub(crate) fn program_action(sig: c_int) -> Option<Action> {
    let idx = usize::try_from(sig).ok().filter(|&i| i > 0 && i < NSIG)?;
    let handler = HANDLERS[idx].load(Ordering::Relaxed);
    is_function(handler).then(|| Action {
        handler,
        flags: FLAGS[idx].load(Ordering::Relaxed),
        mask: MASKS[idx].load(Ordering::Relaxed),
    })
}

/// Runs the program's handler `a` for `sig`, counted as the program's.
pub(crate) fn run_program_handler(sig: c_int, a: &Action, info: *mut libc::siginfo_t, uc: *mut c_void) {
    crate::state::thread::signal_counts(ts()).bump_theirs(a.flags & libc::SA_RESTART != 0);
    if a.flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program installed this as an SA_SIGINFO handler.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = unsafe { std::mem::transmute(a.handler) };
        as_program_handler(|| f(sig, info, uc));
    } else {
        // SAFETY: the program installed this as a plain handler.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(a.handler) };
        as_program_handler(|| f(sig));
    }
}

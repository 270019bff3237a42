//! The signal API, hardened so that a program cannot break its own
//! preemption, and so that its own signals stay visible.
//!
//! - The preemption signal is ours. `sigaction`, `signal` and friends on it
//!   succeed but only change a *shadow* disposition that later queries
//!   report back; masks (`sigprocmask`, `pthread_sigmask`, the `sa_mask` of
//!   other handlers, `sigsuspend`/`pselect`/`ppoll`/`epoll_pwait` masks) and
//!   sets (`sigwait*`, `signalfd`) silently lose it. A program that blocks
//!   everything before a long computation therefore stays preemptible, and one
//!   that resets every signal to SIG_DFL in a loop (shells, test harnesses)
//!   does not kill itself at the next deadline.
//! - Every handler the program installs runs through a trampoline that
//!   counts it (so wrappers can tell the program's EINTRs from ours).
//!   `sigaction` queries report the program's own handler. A handler is not
//!   preempted while it runs: the handler walks the call chain through the
//!   kernel's signal frame and finds glibc's `__restore_rt` below it (deferred
//!   code), so a handler that interrupted libc never leaves libc's locks held
//!   while the caller runs; and since that needs no scope to be closed, a
//!   handler may leave with `siglongjmp`.
//!
//! Calls that bypass libc (raw `syscall(SYS_rt_sigaction, ...)`) are out of
//! reach; `docs/safety.md` lists them.

use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, sighandler_t, sigset_t};

use crate::sys::{real, set_errno};
use crate::thread::ts;

use crate::signal::{preemption_signal, real_pthread_sigmask, real_sigaction, standing_aside, SigmaskFn};
type SignalfdFn = unsafe extern "C" fn(c_int, *const sigset_t, c_int) -> c_int;
type SigsetFn = unsafe extern "C" fn(c_int, sighandler_t) -> sighandler_t;
type SigOneFn = unsafe extern "C" fn(c_int) -> c_int;

fn real_sigprocmask() -> Option<SigmaskFn> {
    real!("sigprocmask", SigmaskFn)
}
fn real_signalfd() -> Option<SignalfdFn> {
    real!("signalfd", SignalfdFn)
}
fn real_sigset() -> Option<SigsetFn> {
    real!("sigset", SigsetFn)
}
fn real_sighold() -> Option<SigOneFn> {
    real!("sighold", SigOneFn)
}
fn real_sigrelse() -> Option<SigOneFn> {
    real!("sigrelse", SigOneFn)
}
fn real_sigignore() -> Option<SigOneFn> {
    real!("sigignore", SigOneFn)
}

pub(crate) fn prepare() {
    let _ = (real_sigaction(), real_pthread_sigmask(), real_sigprocmask(), real_signalfd());
    let _ = (real_sigset(), real_sighold(), real_sigrelse(), real_sigignore());
}

/// Signal numbers 1..NSIG (glibc's _NSIG is 65 on Linux).
const NSIG: usize = 65;

/// The program's handler and flags for each signal whose kernel handler is
/// our trampoline.
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
static FLAGS: [AtomicI32; NSIG] = [const { AtomicI32::new(0) }; NSIG];
/// Their `sa_mask` (signals 1 to 64, the kernel's word), for handlers run
/// later than their signal came (`crate::deferral`).
static MASKS: [AtomicU64; NSIG] = [const { AtomicU64::new(0) }; NSIG];
/// Signals marked with `siginterrupt(sig, 1)`: `signal()` installs them
/// without SA_RESTART, as glibc does.
static INTERRUPT: AtomicU64 = AtomicU64::new(0);
/// Signals whose trampoline got SA_SIGINFO only because we needed it: if the
/// kernel resets the handler (SA_RESETHAND), the flag stays and must not be
/// reported.
static FORCED_SIGINFO: AtomicU64 = AtomicU64::new(0);

/// The disposition the program believes the preemption signal has. Atomics,
/// not a lock: `sigaction` is async-signal-safe and may be called from a
/// handler that interrupted another `sigaction`.
static SHADOW_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static SHADOW_FLAGS: AtomicI32 = AtomicI32::new(0);
static SHADOW_MASK: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
/// The signal the shadow was set for (0: never set). Before the runtime
/// starts that is the signal it expects to use, which a configuration
/// installed later may change (see `hand_over_shadow`).
static SHADOW_SIGNO: AtomicI32 = AtomicI32::new(0);

/// Another copy of linger in this process is in charge (two preloaded
/// libraries that hold linger, see `deferral::others_stand_aside`): this
/// copy's wrappers, which that one's reach as the next definition, pass the
/// signal API through untouched. Its runtime never starts.
fn is_function(h: sighandler_t) -> bool {
    h != libc::SIG_DFL && h != libc::SIG_IGN && h != libc::SIG_ERR
}

/// `set` without the preemption signal, if it contained it.
pub(crate) fn strip(set: *const sigset_t) -> Option<sigset_t> {
    let signo = preemption_signal();
    if signo == 0 || set.is_null() {
        return None;
    }
    // SAFETY: non-null and, per the caller's contract, a valid sigset.
    let mut copy = unsafe { *set };
    // SAFETY: valid set and signal number.
    (unsafe { libc::sigismember(&copy, signo) } == 1).then(|| {
        // SAFETY: as above.
        unsafe { libc::sigdelset(&mut copy, signo) };
        copy
    })
}

/// Calls `f` with `set` or, if it holds the preemption signal, a copy without.
pub(crate) fn with_stripped<R>(set: *const sigset_t, f: impl FnOnce(*const sigset_t) -> R) -> R {
    match strip(set) {
        Some(copy) => f(&copy),
        None => f(set),
    }
}

fn shadow_get() -> libc::sigaction {
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

fn shadow_set(sa: &libc::sigaction) {
    SHADOW_SIGNO.store(preemption_signal(), Ordering::Relaxed);
    SHADOW_HANDLER.store(sa.sa_sigaction, Ordering::Relaxed);
    SHADOW_FLAGS.store(sa.sa_flags, Ordering::Relaxed);
    // SAFETY: as in shadow_get.
    let words: &[u64; 16] = unsafe { &*(&sa.sa_mask as *const sigset_t as *const [u64; 16]) };
    for (w, s) in words.iter().zip(&SHADOW_MASK) {
        s.store(*w, Ordering::Relaxed);
    }
}

/// At start, once the signal is fixed: a disposition the program set while
/// another signal was expected (the default one, before a configuration
/// with another signal was installed) becomes that signal's real one. Only
/// the signal linger uses stays shadowed.
pub(crate) fn hand_over_shadow() {
    let old = SHADOW_SIGNO.load(Ordering::Relaxed);
    if old == 0 || old == preemption_signal() {
        return;
    }
    let sa = shadow_get();
    SHADOW_SIGNO.store(0, Ordering::Relaxed);
    SHADOW_HANDLER.store(libc::SIG_DFL, Ordering::Relaxed);
    SHADOW_FLAGS.store(0, Ordering::Relaxed);
    for w in &SHADOW_MASK {
        w.store(0, Ordering::Relaxed);
    }
    // SAFETY: a valid sigaction for a signal that is no longer ours.
    unsafe { sigaction(old, &sa, std::ptr::null_mut()) };
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
    crate::thread::signal_counts(ts()).bump_theirs(SHADOW_FLAGS.load(Ordering::Relaxed) & libc::SA_RESTART != 0);
    if !uc.is_null() {
        // The mask the kernel would have set for this handler: the
        // interrupted code's plus the handler's `sa_mask` (the preemption
        // handler's own holds every program signal).
        let mut m = SHADOW_MASK[0].load(Ordering::Relaxed) & !crate::sigmask::bit(sig);
        // SAFETY: the kernel passes a valid ucontext to SA_SIGINFO handlers.
        m |= crate::sigmask::word(unsafe { &(*(uc as *const libc::ucontext_t)).uc_sigmask });
        crate::sigmask::set(m);
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
    let c = crate::thread::signal_counts(ts());
    let prev = c.handler_sp.replace(crate::switch::stack_pointer());
    if crate::deferral::holding() {
        let libset = gotcha::set_current_libset(0);
        run();
        gotcha::set_current_libset(libset);
    } else {
        run();
    }
    // The counts of the same flow (`ts()` again: the function may have been
    // stopped inside the handler and resumed on another thread).
    crate::thread::signal_counts(ts()).handler_sp.set(prev);
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
    let c = crate::thread::signal_counts(crate::thread::ts_caller());
    let h = c.handler_sp.get();
    if h == 0 {
        return false;
    }
    below_handler_mark(c, h)
}

#[cold]
#[inline(never)]
fn below_handler_mark(c: &crate::thread::SignalCounts, h: usize) -> bool {
    let sp = crate::switch::stack_pointer();
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
    crate::thread::signal_counts(ts()).bump_theirs(a.flags & libc::SA_RESTART != 0);
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

/// Runs the program's handler for `sig`.
extern "C" fn trampoline(sig: c_int, info: *mut libc::siginfo_t, uc: *mut c_void) {
    if sig == libc::SIGSEGV
        && (crate::preempt::handler_out_of_stack(info, uc) || crate::preempt::lost_timer_signal(info, uc))
    {
        return; // the stack had no room for our timer's handler: not the program's
    }
    // SAFETY: the kernel's siginfo/ucontext for this SA_SIGINFO handler.
    if sig == libc::SIGSEGV && unsafe { gotcha::trap_redirect(info, uc) } {
        return; // an access to a trapped variable (isolation): not the program's
    }
    let Some(a) = program_action(sig) else {
        // Changed under us; nothing to run.
        let restart = (sig as usize) < NSIG && FLAGS[sig as usize].load(Ordering::Relaxed) & libc::SA_RESTART != 0;
        crate::thread::signal_counts(ts()).bump_theirs(restart);
        return;
    };
    // With libas-safe, held while the thread is in library code, or run
    // there (see `crate::deferral`).
    // SAFETY: the kernel passes a valid siginfo and ucontext to SA_SIGINFO
    // handlers.
    if !unsafe { crate::deferral::arrived(sig, &a, info, uc as *mut libc::ucontext_t) } {
        run_program_handler(sig, &a, info, uc);
    }
}

/// # Safety
/// Same contract as POSIX `sigaction`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let Some(real) = real_sigaction() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    if standing_aside() {
        // SAFETY: forwarded verbatim.
        return unsafe { real(sig, act, old) };
    }
    if sig == preemption_signal() && sig != 0 {
        // SAFETY: non-null pointers are valid per the caller's contract.
        unsafe {
            if let Some(o) = old.as_mut() {
                *o = shadow_get();
            }
            if let Some(a) = act.as_ref() {
                shadow_set(a);
            }
        }
        return 0;
    }
    if sig <= 0 || sig as usize >= NSIG {
        // SAFETY: forwarded verbatim; libc reports EINVAL.
        return unsafe { real(sig, act, old) };
    }
    let idx = sig as usize;
    let (prev_h, prev_f) = (HANDLERS[idx].load(Ordering::Relaxed), FLAGS[idx].load(Ordering::Relaxed));
    let prev_m = MASKS[idx].load(Ordering::Relaxed);
    let bit = 1u64 << (idx % 64);
    let prev_forced = FORCED_SIGINFO.load(Ordering::Relaxed) & bit != 0;
    // SAFETY: non-null `act` is valid per the caller's contract.
    let mut mine = unsafe { act.as_ref() }.copied();
    if let Some(m) = mine.as_mut() {
        if let Some(stripped) = strip(&m.sa_mask) {
            m.sa_mask = stripped;
        }
        if is_function(m.sa_sigaction) {
            HANDLERS[idx].store(m.sa_sigaction, Ordering::Relaxed);
            FLAGS[idx].store(m.sa_flags, Ordering::Relaxed);
            MASKS[idx].store(crate::sigmask::word(&m.sa_mask), Ordering::Relaxed);
            if m.sa_flags & libc::SA_SIGINFO == 0 {
                FORCED_SIGINFO.fetch_or(bit, Ordering::Relaxed);
            } else {
                FORCED_SIGINFO.fetch_and(!bit, Ordering::Relaxed);
            }
            m.sa_sigaction = trampoline as *const () as usize;
            m.sa_flags |= libc::SA_SIGINFO;
            if let Some(mask) = crate::deferral::trampoline_mask() {
                m.sa_mask = mask;
            }
        } else {
            FORCED_SIGINFO.fetch_and(!bit, Ordering::Relaxed);
        }
    }
    let act2 = mine.as_ref().map_or(std::ptr::null(), |m| m as *const libc::sigaction);
    // SAFETY: forwarded with our (valid) copy of the action.
    let r = unsafe { real(sig, act2, old) };
    if r != 0 {
        HANDLERS[idx].store(prev_h, Ordering::Relaxed);
        FLAGS[idx].store(prev_f, Ordering::Relaxed);
        MASKS[idx].store(prev_m, Ordering::Relaxed);
        if prev_forced {
            FORCED_SIGINFO.fetch_or(bit, Ordering::Relaxed);
        } else {
            FORCED_SIGINFO.fetch_and(!bit, Ordering::Relaxed);
        }
        return r;
    }
    // SAFETY: non-null `old` was just filled in by libc.
    if let Some(o) = unsafe { old.as_mut() } {
        if let Some((h, f)) = crate::overflow::replaced_disposition(o.sa_sigaction) {
            // linger's stack-overflow reporter: show what it replaced.
            o.sa_sigaction = h;
            o.sa_flags = f;
            // SAFETY: a local sigset.
            unsafe { libc::sigemptyset(&mut o.sa_mask) };
        } else if o.sa_sigaction == trampoline as *const () as usize {
            o.sa_sigaction = prev_h;
            o.sa_flags = (o.sa_flags & !libc::SA_SIGINFO) | (prev_f & libc::SA_SIGINFO);
            o.sa_mask = crate::sigmask::as_sigset(prev_m);
        } else if prev_forced {
            // Reset to SIG_DFL by the kernel (SA_RESETHAND), our flag left over.
            o.sa_flags &= !libc::SA_SIGINFO;
        }
    }
    0
}

/// Gives the trampolines installed so far the `sa_mask` of libas-safe's
/// mode (`deferral::trampoline_mask`), when it is turned on.
pub(crate) fn remask_trampolines() {
    let (Some(real), Some(mask)) = (real_sigaction(), crate::deferral::trampoline_mask()) else { return };
    for sig in 1..NSIG as c_int {
        // SAFETY: an all-zero sigaction is a valid value; valid pointers.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            if real(sig, std::ptr::null(), &mut cur) == 0 && cur.sa_sigaction == trampoline as *const () as usize {
                cur.sa_mask = mask;
                real(sig, &cur, std::ptr::null_mut());
            }
        }
    }
}

/// `signal()` with glibc's BSD semantics (handler stays installed, calls are
/// restarted unless `siginterrupt` said otherwise, the signal is blocked in
/// its own handler).
fn bsd_signal_impl(sig: c_int, h: sighandler_t, flags: c_int, self_mask: bool) -> sighandler_t {
    // SAFETY: an all-zero sigaction is a valid value of this plain C struct.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = h;
    sa.sa_flags = flags;
    // SAFETY: local sigset manipulation.
    unsafe {
        libc::sigemptyset(&mut sa.sa_mask);
        if self_mask && sig > 0 && (sig as usize) < NSIG {
            libc::sigaddset(&mut sa.sa_mask, sig);
        }
    }
    // SAFETY: an all-zero sigaction is a valid out value.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    if unsafe { sigaction(sig, &sa, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

fn restart_flag(sig: c_int) -> c_int {
    let interrupt = (1..64).contains(&sig) && INTERRUPT.load(Ordering::Relaxed) & (1u64 << sig) != 0;
    if interrupt {
        0
    } else {
        libc::SA_RESTART
    }
}

/// # Safety
/// Same contract as C `signal`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, h: sighandler_t) -> sighandler_t {
    bsd_signal_impl(sig, h, restart_flag(sig), true)
}

/// # Safety
/// Same contract as `bsd_signal`.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, h: sighandler_t) -> sighandler_t {
    bsd_signal_impl(sig, h, restart_flag(sig), true)
}

/// # Safety
/// Same contract as glibc `sysv_signal` (what `signal` means under strict
/// ISO C compilation): one-shot handler, not blocked in itself, no restart.
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(sig: c_int, h: sighandler_t) -> sighandler_t {
    bsd_signal_impl(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER, false)
}

/// # Safety
/// As `sysv_signal` (the name `signal` binds to with `-std=c99`).
#[no_mangle]
pub unsafe extern "C" fn __sysv_signal(sig: c_int, h: sighandler_t) -> sighandler_t {
    bsd_signal_impl(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER, false)
}

/// # Safety
/// Same contract as POSIX `siginterrupt`.
#[no_mangle]
pub unsafe extern "C" fn siginterrupt(sig: c_int, flag: c_int) -> c_int {
    if sig <= 0 || sig as usize >= NSIG {
        set_errno(libc::EINVAL);
        return -1;
    }
    if sig < 64 {
        if flag != 0 {
            INTERRUPT.fetch_or(1u64 << sig, Ordering::Relaxed);
        } else {
            INTERRUPT.fetch_and(!(1u64 << sig), Ordering::Relaxed);
        }
    }
    // SAFETY: all-zero sigactions are valid values; valid pointers.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        if sigaction(sig, std::ptr::null(), &mut sa) != 0 {
            return -1;
        }
        if flag != 0 {
            sa.sa_flags &= !libc::SA_RESTART;
        } else {
            sa.sa_flags |= libc::SA_RESTART;
        }
        sigaction(sig, &sa, std::ptr::null_mut())
    }
}

/// # Safety
/// Same contract as System V `sigset`.
#[no_mangle]
pub unsafe extern "C" fn sigset(sig: c_int, h: sighandler_t) -> sighandler_t {
    const SIG_HOLD: sighandler_t = 2;
    if sig == preemption_signal() && sig != 0 {
        let prev = SHADOW_HANDLER.load(Ordering::Relaxed);
        if h != SIG_HOLD {
            SHADOW_SIGNO.store(sig, Ordering::Relaxed);
            SHADOW_HANDLER.store(h, Ordering::Relaxed);
        }
        return prev;
    }
    let Some(real) = real_sigset() else { return libc::SIG_ERR };
    // SAFETY: forwarded verbatim (its handler is not counted: sigset is
    // obsolete and installs it from inside libc).
    unsafe { real(sig, h) }
}

macro_rules! obsolete_one {
    ($name:ident, $real:ident, $on_ours:block) => {
        /// # Safety
        /// Same contract as the System V function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(sig: c_int) -> c_int {
            if sig == preemption_signal() && sig != 0 {
                $on_ours;
                return 0;
            }
            let Some(real) = $real() else {
                set_errno(libc::ENOSYS);
                return -1;
            };
            // SAFETY: forwarded verbatim.
            unsafe { real(sig) }
        }
    };
}

obsolete_one!(sighold, real_sighold, {});
obsolete_one!(sigrelse, real_sigrelse, {});
obsolete_one!(sigignore, real_sigignore, {
    SHADOW_SIGNO.store(preemption_signal(), Ordering::Relaxed);
    SHADOW_HANDLER.store(libc::SIG_IGN, Ordering::Relaxed)
});

/// The set the program asked to block, minus the preemption signal: a thread
/// that blocks every signal (common before spawning helper threads) would
/// otherwise never be preempted again, and a launch with a timeout would not
/// return.
///
/// The program still sees what it asked for: queries report the signal as
/// blocked while it believes so (a per-thread shadow bit).
fn mask_call(real: SigmaskFn, how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    let signo = preemption_signal();
    let t = ts();
    let before = t.shadow_blocked.get();
    let mut after = before;
    if !set.is_null() && signo > 0 {
        // SAFETY: non-null and, per the caller's contract, a valid sigset.
        let member = unsafe { libc::sigismember(set, signo) } == 1;
        match how {
            libc::SIG_BLOCK if member => after = true,
            libc::SIG_UNBLOCK if member => after = false,
            libc::SIG_SETMASK => after = member,
            _ => {}
        }
    }
    let r = if how == libc::SIG_BLOCK || how == libc::SIG_SETMASK {
        // SAFETY: forwarded with the caller's set or a valid local copy.
        with_stripped(set, |s| unsafe { real(how, s, old) })
    } else {
        // SAFETY: forwarded verbatim.
        unsafe { real(how, set, old) }
    };
    if r == 0 {
        // A signal of the program's held may have just been unblocked.
        crate::deferral::mask_changed();
        t.shadow_blocked.set(after);
        if before && !old.is_null() && signo > 0 {
            // SAFETY: `old` was just filled in by libc.
            unsafe { libc::sigaddset(old, signo) };
        }
    }
    r
}

/// # Safety
/// Same contract as POSIX `pthread_sigmask`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    let Some(real) = real_pthread_sigmask() else { return libc::ENOSYS };
    mask_call(real, how, set, old)
}

/// # Safety
/// Same contract as POSIX `sigprocmask`.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) -> c_int {
    let Some(real) = real_sigprocmask() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    mask_call(real, how, set, old)
}

/// # Safety
/// Same contract as Linux `signalfd`.
#[no_mangle]
pub unsafe extern "C" fn signalfd(fd: c_int, mask: *const sigset_t, flags: c_int) -> c_int {
    let Some(real) = real_signalfd() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: forwarded with the caller's set or a valid local copy.
    with_stripped(mask, |m| unsafe { real(fd, m, flags) })
}

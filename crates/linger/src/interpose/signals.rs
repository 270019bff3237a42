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

use std::sync::atomic::{AtomicU64, Ordering};

use libc::{c_int, c_void, sighandler_t, sigset_t};

use crate::base::sys::{real, set_errno};
use crate::handlers::program_signals::{
    is_function, program_action, run_program_handler, shadow_get, shadow_set, FLAGS, HANDLERS, MASKS, NSIG,
    SHADOW_FLAGS, SHADOW_HANDLER, SHADOW_MASK, SHADOW_SIGNO,
};
use crate::state::thread::ts;

use crate::machine::signal::{preemption_signal, real_pthread_sigmask, real_sigaction, standing_aside, SigmaskFn};
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

/// Signals marked with `siginterrupt(sig, 1)`: `signal()` installs them
/// without SA_RESTART, as glibc does.
static INTERRUPT: AtomicU64 = AtomicU64::new(0);
/// Signals whose trampoline got SA_SIGINFO only because we needed it: if the
/// kernel resets the handler (SA_RESETHAND), the flag stays and must not be
/// reported.
static FORCED_SIGINFO: AtomicU64 = AtomicU64::new(0);

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

/// Runs the program's handler for `sig`.
extern "C" fn trampoline(sig: c_int, info: *mut libc::siginfo_t, uc: *mut c_void) {
    if sig == libc::SIGSEGV
        && (crate::handlers::preempt::handler_out_of_stack(info, uc) || crate::handlers::preempt::lost_timer_signal(info, uc))
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
        crate::state::thread::signal_counts(ts()).bump_theirs(restart);
        return;
    };
    // With libas-safe, held while the thread is in library code, or run
    // there (see `crate::runtime::deferral`).
    // SAFETY: the kernel passes a valid siginfo and ucontext to SA_SIGINFO
    // handlers.
    if !unsafe { crate::handlers::hold::arrived(sig, &a, info, uc as *mut libc::ucontext_t) } {
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
            MASKS[idx].store(crate::machine::sigmask::word(&m.sa_mask), Ordering::Relaxed);
            if m.sa_flags & libc::SA_SIGINFO == 0 {
                FORCED_SIGINFO.fetch_or(bit, Ordering::Relaxed);
            } else {
                FORCED_SIGINFO.fetch_and(!bit, Ordering::Relaxed);
            }
            m.sa_sigaction = trampoline as *const () as usize;
            m.sa_flags |= libc::SA_SIGINFO;
            if let Some(mask) = crate::handlers::hold::trampoline_mask() {
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
        if let Some((h, f)) = crate::handlers::overflow::replaced_disposition(o.sa_sigaction) {
            // linger's stack-overflow reporter: show what it replaced.
            o.sa_sigaction = h;
            o.sa_flags = f;
            // SAFETY: a local sigset.
            unsafe { libc::sigemptyset(&mut o.sa_mask) };
        } else if o.sa_sigaction == trampoline as *const () as usize {
            o.sa_sigaction = prev_h;
            o.sa_flags = (o.sa_flags & !libc::SA_SIGINFO) | (prev_f & libc::SA_SIGINFO);
            o.sa_mask = crate::machine::sigmask::as_sigset(prev_m);
        } else if prev_forced {
            // Reset to SIG_DFL by the kernel (SA_RESETHAND), our flag left over.
            o.sa_flags &= !libc::SA_SIGINFO;
        }
    }
    0
}

/// Gives the trampolines installed so far the `sa_mask` of libas-safe's
/// mode (`hold::trampoline_mask`), when it is turned on.
pub(crate) fn remask_trampolines() {
    let (Some(real), Some(mask)) = (real_sigaction(), crate::handlers::hold::trampoline_mask()) else { return };
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
        crate::handlers::hold::mask_changed();
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

//! The signals linger owns: the preemption signal's number, the process
//! whose threads own the timers, and the real `sigaction` and
//! `pthread_sigmask` (past our own wrappers of them, in
//! `interpose::signals`), which the handlers, the monitor and the
//! interposer use to install and unblock it. State and plain calls only:
//! what a handler does is higher up.

use std::sync::atomic::{AtomicBool, Ordering};

use libc::{c_int, sigset_t};

use crate::base::sys::real;

type SigactionFn = unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
pub(crate) type SigmaskFn = unsafe extern "C" fn(c_int, *const sigset_t, *mut sigset_t) -> c_int;

/// The real `sigaction`, past our wrapper.
pub(crate) fn real_sigaction() -> Option<SigactionFn> {
    real!("sigaction", SigactionFn)
}

/// The real `pthread_sigmask`, past our wrapper.
pub(crate) fn real_pthread_sigmask() -> Option<SigmaskFn> {
    real!("pthread_sigmask", SigmaskFn)
}

/// Signal number the timers use (set when the runtime starts).
static SIGNO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The preemption signal, or 0 before the runtime started.
pub(crate) fn number() -> i32 {
    SIGNO.load(Ordering::Relaxed)
}

/// Sets the preemption signal, and this process as the timers' owner
/// (once per process, as the runtime starts).
pub(crate) fn set(signo: i32) {
    SIGNO.store(signo, Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    OWNER_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
}

/// In the child of a fork: the child owns its timers (called first by
/// `fork`'s child handler).
pub(crate) fn after_fork_in_child() {
    // SAFETY: getpid has no preconditions.
    OWNER_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
}

/// The process whose threads own the timers: a `vfork` child shares our
/// memory (and this thread's state) but is another process, with no timers.
static OWNER_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Is `pid` the process whose threads own the timers? Async-signal-safe.
pub(crate) fn is_owner_pid(pid: i32) -> bool {
    OWNER_PID.load(Ordering::Relaxed) == pid
}

/// False in a `vfork` child (or any process sharing our memory without
/// having forked through `fork`): it must not change this thread's state,
/// which belongs to the suspended parent. Async-signal-safe.
pub(crate) fn in_owner_process() -> bool {
    // SAFETY: getpid has no preconditions.
    OWNER_PID.load(Ordering::Relaxed) == unsafe { libc::getpid() }
}

/// Another copy of linger in the process is in charge of the signals
/// (`linger_stand_aside`): this copy's signal wrappers pass everything
/// through.
static STANDING_ASIDE: AtomicBool = AtomicBool::new(false);

/// Makes this copy stand aside for good.
pub(crate) fn stand_aside() {
    STANDING_ASIDE.store(true, Ordering::Release);
}

/// Does this copy of linger leave the signals to another (`stand_aside`)?
pub(crate) fn standing_aside() -> bool {
    STANDING_ASIDE.load(Ordering::Acquire)
}

/// The preemption signal, reserved even before the runtime starts (so that a
/// program cannot take it first): until the configuration is frozen, the
/// default one. None (0) in a copy standing aside.
pub(crate) fn preemption_signal() -> c_int {
    if STANDING_ASIDE.load(Ordering::Acquire) {
        return 0;
    }
    let s = number();
    if s != 0 {
        return s;
    }
    crate::base::config::signal_if_known()
}

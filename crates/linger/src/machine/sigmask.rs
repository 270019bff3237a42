//! The program's asynchronous signals, held back while linger works.
//!
//! The preemption handler runs with these signals blocked (its `sa_mask`), so
//! a program handler never runs nested inside it: such a handler could leave
//! with `siglongjmp` and strand the handler's no-preemption scope, and it
//! would run on whichever stack the handler happens to be switching to. A
//! function launched with [`crate::Builder::hold_signals`] keeps them blocked
//! on its caller's side too, from the moment it stops until it is resumed, so
//! that they are handled on the function's own stack, as in a plain run.
//!
//! Masks here are the kernel's 64-bit ones, changed with raw
//! `rt_sigprocmask`: async-signal-safe, one system call, and out of reach of
//! our own `pthread_sigmask` interposer (which would strip and shadow).

use std::sync::atomic::{AtomicU64, Ordering};

use libc::c_int;

/// The held set, fixed when the runtime starts (it depends on the preemption
/// signal).
static PROGRAM: AtomicU64 = AtomicU64::new(0);

pub(crate) const fn bit(sig: c_int) -> u64 {
    1u64 << (sig - 1)
}

/// Every signal but the preemption signal, those that cannot be blocked, the
/// synchronous faults (blocking them turns a fault into a kill) and glibc's
/// two internal ones (thread cancellation and set*id broadcasts).
pub(crate) fn compute(preemption: c_int) -> u64 {
    let mut keep = bit(libc::SIGKILL) | bit(libc::SIGSTOP) | bit(preemption);
    for s in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP, libc::SIGSYS, 32, 33] {
        keep |= bit(s);
    }
    let set = !keep;
    PROGRAM.store(set, Ordering::Relaxed);
    set
}

/// The held set (0 before the runtime starts).
pub(crate) fn program() -> u64 {
    PROGRAM.load(Ordering::Relaxed)
}

/// The held set as a libc `sigset_t` (for a `sigaction`'s `sa_mask`).
pub(crate) fn as_sigset(set: u64) -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is the empty set.
    let mut s: libc::sigset_t = unsafe { std::mem::zeroed() };
    for sig in 1..=64 {
        if set & bit(sig) != 0 {
            // SAFETY: a valid set and signal number.
            unsafe { libc::sigaddset(&mut s, sig) };
        }
    }
    s
}

/// The first 64 signals of a libc set, as the kernel's mask.
pub(crate) fn word(set: &libc::sigset_t) -> u64 {
    // SAFETY: glibc's sigset_t starts with the kernel's 64-bit mask on x86_64.
    unsafe { *(set as *const libc::sigset_t as *const u64) }
}

fn sigprocmask(how: c_int, set: Option<u64>) -> u64 {
    let mut old = 0u64;
    let new = set.unwrap_or(0);
    let p = if set.is_some() { &new as *const u64 } else { std::ptr::null() };
    // The system call itself, not libc's (see `arch::rt_sigprocmask`).
    // SAFETY: `p` is null or points at `new`, `old` is ours; both 8 bytes.
    unsafe { crate::base::arch::rt_sigprocmask(how, p, &mut old) };
    old
}

/// Blocks the program's signals on this thread; returns the previous mask.
pub(crate) fn hold() -> u64 {
    sigprocmask(libc::SIG_BLOCK, Some(PROGRAM.load(Ordering::Relaxed)))
}

/// Sets this thread's mask.
pub(crate) fn set(mask: u64) {
    sigprocmask(libc::SIG_SETMASK, Some(mask));
}

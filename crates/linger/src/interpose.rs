//! Blocking calls that stay preemptible.
//!
//! A function blocked in `read()` is inside libc, which the safety rules treat
//! as non-interruptible. These wrappers (exported under the libc names, so they
//! interpose the program's calls; libc's own internal calls are unaffected)
//! mark the call as "blocking": the handler may then stop the function at the
//! system call instruction itself, where the libc wrapper holds no lock.
//! Resuming restarts the call (SA_RESTART) for reads and writes. The sleep
//! family cannot be restarted by the kernel once a handler ran, so the wrappers
//! re-issue it with an absolute deadline: the full duration is slept across
//! preemptions, and only the program's own signals surface as EINTR.
//!
//! Outside a preemptible function the wrappers cost one thread-local load.
//!
//! `pthread_sigmask` and `sigprocmask` are wrapped too, so that a program
//! cannot block the preemption signal by accident (the rest of the signal
//! hardening is issue 3's).

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_uint, c_void, size_t, ssize_t, timespec};

use crate::switch::stack_pointer;
use crate::thread::ts;

macro_rules! real {
    ($slot:ident, $name:literal, $ty:ty) => {{
        static $slot: AtomicUsize = AtomicUsize::new(0);
        let mut p = $slot.load(Ordering::Relaxed);
        if p == 0 {
            // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the
            // definition after ours (libc's).
            p = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr() as *const libc::c_char) } as usize;
            $slot.store(p, Ordering::Relaxed);
        }
        // SAFETY: the symbol has this C signature in every glibc.
        if p == 0 { None } else { Some(unsafe { std::mem::transmute::<usize, $ty>(p) }) }
    }};
}

type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type ClockNanosleepFn = unsafe extern "C" fn(libc::clockid_t, c_int, *const timespec, *mut timespec) -> c_int;
type SigmaskFn = unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;

/// Resolves the real functions ahead of time, outside any preemptible function.
pub(crate) fn prepare() {
    let _ = real_read();
    let _ = real_write();
    let _ = real_clock_nanosleep();
    let _ = real_pthread_sigmask();
    let _ = real_sigprocmask();
}

fn real_read() -> Option<ReadFn> {
    real!(READ, "read", ReadFn)
}
fn real_write() -> Option<WriteFn> {
    real!(WRITE, "write", WriteFn)
}
fn real_clock_nanosleep() -> Option<ClockNanosleepFn> {
    real!(CLOCK_NANOSLEEP, "clock_nanosleep", ClockNanosleepFn)
}
fn real_pthread_sigmask() -> Option<SigmaskFn> {
    real!(PTHREAD_SIGMASK, "pthread_sigmask", SigmaskFn)
}
fn real_sigprocmask() -> Option<SigmaskFn> {
    real!(SIGPROCMASK, "sigprocmask", SigmaskFn)
}

fn set_errno(e: c_int) {
    // SAFETY: errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f` (a libc blocking call) marked as preemptible at its system call.
#[inline(always)]
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let frame = ts().current.get();
    if frame.is_null() {
        return f();
    }
    // SAFETY: `current` is our running function; its frame outlives this call
    // (even if we are preempted and resumed elsewhere, the frame moves with us).
    let fr = unsafe { &*frame };
    let prev = fr.blocking_sp.get();
    fr.blocking_sp.set(stack_pointer());
    let r = f();
    fr.blocking_sp.set(prev);
    r
}

/// Identifies "our signal ran on this thread" between two points.
fn signal_mark() -> (u64, u64) {
    (crate::thread::thread_key(), ts().signals.get())
}

/// # Safety
/// Same contract as POSIX `read`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let Some(real) = real_read() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: forwarded verbatim to libc.
    blocking(|| unsafe { real(fd, buf, count) })
}

/// # Safety
/// Same contract as POSIX `write`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let Some(real) = real_write() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: forwarded verbatim to libc.
    blocking(|| unsafe { real(fd, buf, count) })
}

fn add(a: timespec, b: &timespec) -> timespec {
    let mut s = a.tv_sec.saturating_add(b.tv_sec);
    let mut ns = a.tv_nsec + b.tv_nsec;
    if ns >= 1_000_000_000 {
        ns -= 1_000_000_000;
        s = s.saturating_add(1);
    }
    timespec { tv_sec: s, tv_nsec: ns }
}

fn remaining(clock: libc::clockid_t, deadline: &timespec) -> timespec {
    let mut now = timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut now) };
    let mut s = deadline.tv_sec - now.tv_sec;
    let mut ns = deadline.tv_nsec - now.tv_nsec;
    if ns < 0 {
        ns += 1_000_000_000;
        s -= 1;
    }
    if s < 0 {
        timespec { tv_sec: 0, tv_nsec: 0 }
    } else {
        timespec { tv_sec: s, tv_nsec: ns }
    }
}

/// The sleep family's core: sleeps until `req` has elapsed on `clock`
/// (relative) or until the absolute time `req`, retrying after our own
/// signals. Returns 0 or an errno value (clock_nanosleep's convention).
unsafe fn sleep_core(clock: libc::clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int {
    let Some(real) = real_clock_nanosleep() else { return libc::ENOSYS };
    if req.is_null() {
        return libc::EFAULT;
    }
    // SAFETY: non-null and, per the caller's contract, readable.
    let r = unsafe { *req };
    if r.tv_nsec < 0 || r.tv_nsec >= 1_000_000_000 || (flags & libc::TIMER_ABSTIME == 0 && r.tv_sec < 0) {
        return libc::EINVAL;
    }
    let deadline = if flags & libc::TIMER_ABSTIME != 0 {
        r
    } else {
        let mut now = timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: valid out pointer.
        if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
            // Unknown clock: let libc report it.
            // SAFETY: forwarded verbatim.
            return unsafe { real(clock, flags, req, rem) };
        }
        add(now, &r)
    };
    loop {
        let mark = signal_mark();
        // SAFETY: valid deadline pointer; no remainder needed for ABSTIME.
        let e = blocking(|| unsafe { real(clock, libc::TIMER_ABSTIME, &deadline, std::ptr::null_mut()) });
        if e != libc::EINTR {
            return e;
        }
        if signal_mark() != mark {
            continue; // interrupted by preemption: keep sleeping
        }
        if flags & libc::TIMER_ABSTIME == 0 && !rem.is_null() {
            // SAFETY: caller-provided writable remainder.
            unsafe { *rem = remaining(clock, &deadline) };
        }
        return libc::EINTR;
    }
}

/// # Safety
/// Same contract as POSIX `clock_nanosleep`.
#[no_mangle]
pub unsafe extern "C" fn clock_nanosleep(clock: libc::clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int {
    // SAFETY: same contract.
    unsafe { sleep_core(clock, flags, req, rem) }
}

/// # Safety
/// Same contract as POSIX `nanosleep`.
#[no_mangle]
pub unsafe extern "C" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    // SAFETY: same contract.
    let e = unsafe { sleep_core(libc::CLOCK_MONOTONIC, 0, req, rem) };
    if e == 0 {
        0
    } else {
        set_errno(e);
        -1
    }
}

/// # Safety
/// Same contract as POSIX `usleep`.
#[no_mangle]
pub unsafe extern "C" fn usleep(usec: libc::useconds_t) -> c_int {
    let req = timespec { tv_sec: (usec / 1_000_000) as i64, tv_nsec: (usec % 1_000_000) as i64 * 1000 };
    // SAFETY: valid request pointer.
    unsafe { nanosleep(&req, std::ptr::null_mut()) }
}

/// # Safety
/// Same contract as POSIX `sleep`.
#[no_mangle]
pub unsafe extern "C" fn sleep(seconds: c_uint) -> c_uint {
    let req = timespec { tv_sec: seconds as i64, tv_nsec: 0 };
    let mut rem = timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointers.
    let e = unsafe { sleep_core(libc::CLOCK_MONOTONIC, 0, &req, &mut rem) };
    if e == libc::EINTR {
        // Whole seconds left, rounded down like glibc's sleep().
        rem.tv_sec as c_uint
    } else {
        0
    }
}

/// The set the program asked to block, minus the preemption signal: a thread
/// that blocks every signal (common before spawning helper threads) would
/// otherwise never be preempted again, and a launch with a timeout would not
/// return.
fn without_preemption_signal(how: c_int, set: *const libc::sigset_t) -> Option<libc::sigset_t> {
    let signo = crate::timer::signal();
    if signo == 0 || set.is_null() || (how != libc::SIG_BLOCK && how != libc::SIG_SETMASK) {
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

/// # Safety
/// Same contract as POSIX `pthread_sigmask`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int {
    let Some(real) = real_pthread_sigmask() else { return libc::ENOSYS };
    match without_preemption_signal(how, set) {
        // SAFETY: forwarded with a valid local copy of the set.
        Some(copy) => unsafe { real(how, &copy, old) },
        // SAFETY: forwarded verbatim.
        None => unsafe { real(how, set, old) },
    }
}

/// # Safety
/// Same contract as POSIX `sigprocmask`.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int {
    let Some(real) = real_sigprocmask() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    match without_preemption_signal(how, set) {
        // SAFETY: forwarded with a valid local copy of the set.
        Some(copy) => unsafe { real(how, &copy, old) },
        // SAFETY: forwarded verbatim.
        None => unsafe { real(how, set, old) },
    }
}

//! Calls that wait: I/O multiplexing (`poll`, `ppoll`, `select`, `pselect`,
//! `epoll_wait`, `epoll_pwait`, `epoll_pwait2`) and waiting for signals
//! (`pause`, `sigsuspend`, `sigwait`, `sigwaitinfo`, `sigtimedwait`).
//!
//! The kernel never restarts any of them after a handler, whatever
//! SA_RESTART says. After a preemption we call again with what is left of the
//! timeout (so the total wait is the one asked for); the program's own
//! signals still end the wait with EINTR. Signal masks passed to them and
//! signal sets waited for lose the preemption signal (see [`super::signals`]).

use libc::{c_int, sigset_t, timespec};

use super::signals::with_stripped;
use super::parking::{self, until_ready};
use super::call::{Mark, blocking, in_function};
use crate::base::sys::{Deadline, errno, or_enosys, real, set_errno, valid_timeout};
use crate::interpose::park::Interest;

type PollFn = unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, c_int) -> c_int;
type PpollFn = unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, *const timespec, *const sigset_t) -> c_int;
type SelectFn =
    unsafe extern "C" fn(c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *mut libc::timeval) -> c_int;
type PselectFn = unsafe extern "C" fn(
    c_int,
    *mut libc::fd_set,
    *mut libc::fd_set,
    *mut libc::fd_set,
    *const timespec,
    *const sigset_t,
) -> c_int;
type EpollWaitFn = unsafe extern "C" fn(c_int, *mut libc::epoll_event, c_int, c_int) -> c_int;
type EpollPwaitFn = unsafe extern "C" fn(c_int, *mut libc::epoll_event, c_int, c_int, *const sigset_t) -> c_int;
type EpollPwait2Fn =
    unsafe extern "C" fn(c_int, *mut libc::epoll_event, c_int, *const timespec, *const sigset_t) -> c_int;
type PauseFn = unsafe extern "C" fn() -> c_int;
type SemTimedwaitFn = unsafe extern "C" fn(*mut libc::sem_t, *const timespec) -> c_int;
type SemClockwaitFn = unsafe extern "C" fn(*mut libc::sem_t, libc::clockid_t, *const timespec) -> c_int;
type SyscallFn = unsafe extern "C" fn(libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long) -> libc::c_long;
type SigsuspendFn = unsafe extern "C" fn(*const sigset_t) -> c_int;
type SigwaitFn = unsafe extern "C" fn(*const sigset_t, *mut c_int) -> c_int;
type SigwaitinfoFn = unsafe extern "C" fn(*const sigset_t, *mut libc::siginfo_t) -> c_int;
type SigtimedwaitFn = unsafe extern "C" fn(*const sigset_t, *mut libc::siginfo_t, *const timespec) -> c_int;

pub(crate) fn real_poll() -> Option<PollFn> {
    real!("poll", PollFn)
}
fn real_ppoll() -> Option<PpollFn> {
    real!("ppoll", PpollFn)
}
fn real_select() -> Option<SelectFn> {
    real!("select", SelectFn)
}
fn real_pselect() -> Option<PselectFn> {
    real!("pselect", PselectFn)
}
fn real_epoll_wait() -> Option<EpollWaitFn> {
    real!("epoll_wait", EpollWaitFn)
}
fn real_epoll_pwait() -> Option<EpollPwaitFn> {
    real!("epoll_pwait", EpollPwaitFn)
}
fn real_epoll_pwait2() -> Option<EpollPwait2Fn> {
    real!("epoll_pwait2", EpollPwait2Fn)
}
fn real_sem_timedwait() -> Option<SemTimedwaitFn> {
    real!("sem_timedwait", SemTimedwaitFn)
}
fn real_sem_clockwait() -> Option<SemClockwaitFn> {
    real!("sem_clockwait", SemClockwaitFn)
}
fn real_syscall() -> Option<SyscallFn> {
    real!("syscall", SyscallFn)
}
fn real_pause() -> Option<PauseFn> {
    real!("pause", PauseFn)
}
fn real_sigsuspend() -> Option<SigsuspendFn> {
    real!("sigsuspend", SigsuspendFn)
}
fn real_sigwait() -> Option<SigwaitFn> {
    real!("sigwait", SigwaitFn)
}
fn real_sigwaitinfo() -> Option<SigwaitinfoFn> {
    real!("sigwaitinfo", SigwaitinfoFn)
}
fn real_sigtimedwait() -> Option<SigtimedwaitFn> {
    real!("sigtimedwait", SigtimedwaitFn)
}

pub(crate) fn prepare() {
    let _ = (real_poll(), real_ppoll(), real_select(), real_pselect(), real_epoll_wait(), real_epoll_pwait());
    let _ = (real_epoll_pwait2(), real_pause(), real_sigsuspend(), real_sigwait(), real_sigwaitinfo());
    let _ = (real_sigtimedwait(), real_sem_timedwait(), real_sem_clockwait(), real_syscall());
}

/// Calls `f` (given what is left of the timeout, if any) until it ends for
/// any reason but an EINTR caused by preemption alone.
fn until(deadline: Option<Deadline>, mut f: impl FnMut(Option<&Deadline>) -> c_int) -> c_int {
    let m = Mark::now();
    loop {
        let r = blocking(|| f(deadline.as_ref()));
        if r == -1 && errno() == libc::EINTR && m.preempted_only() {
            continue;
        }
        return r;
    }
}

/// The deadline of a relative timespec timeout, if there is a valid one.
fn timespec_deadline(t: *const timespec) -> Option<Deadline> {
    // SAFETY: non-null timeouts are readable per the caller's contract.
    let t = unsafe { t.as_ref() }?;
    valid_timeout(t).then(|| Deadline::after(t))
}

/// The timeout to pass on this attempt: what is left, or the caller's own
/// (null, or invalid so that libc reports it).
fn left_or(d: Option<&Deadline>, orig: *const timespec, buf: &mut timespec) -> *const timespec {
    match d {
        Some(d) => {
            *buf = d.remaining();
            buf
        }
        None => orig,
    }
}

/// What a `poll` set waits for, as a park hook takes it: reading for
/// `POLLIN`, `POLLPRI`, `POLLRDHUP` (and for no events at all, which waits
/// for hang-ups and errors), writing for `POLLOUT`, `POLLWRBAND`. Negative
/// descriptors are ignored, as `poll` does.
fn poll_interests(fds: *const libc::pollfd, n: libc::nfds_t) -> Vec<(c_int, Interest)> {
    if fds.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's `n` pollfds (their contract with `poll`).
    let v = unsafe { std::slice::from_raw_parts(fds, n as usize) };
    let mut out = Vec::with_capacity(v.len());
    for p in v.iter().filter(|p| p.fd >= 0) {
        let read = p.events & (libc::POLLIN | libc::POLLPRI | libc::POLLRDHUP) != 0;
        let write = p.events & (libc::POLLOUT | libc::POLLWRBAND) != 0;
        if read || !write {
            out.push((p.fd, Interest::Read));
        }
        if write {
            out.push((p.fd, Interest::Write));
        }
    }
    out
}

/// `poll` and `ppoll` (without a mask) with a park hook; None: the caller's
/// blocking way.
fn parked_poll(h: parking::Hook, fds: *mut libc::pollfd, n: libc::nfds_t, deadline: Option<&Deadline>) -> Option<c_int> {
    let real = real_poll()?;
    let mut interests = None;
    // SAFETY: the caller's descriptors, no wait.
    until_ready(deadline, || unsafe { real(fds, n, 0) }, || {
        parking::wait_fds(h, interests.get_or_insert_with(|| poll_interests(fds, n)), deadline)
    })
}

/// `epoll_wait` and its variants (without a mask) with a park hook: the
/// epoll descriptor is readable while events are ready.
fn parked_epoll(h: parking::Hook, ep: c_int, ev: *mut libc::epoll_event, max: c_int, deadline: Option<&Deadline>) -> Option<c_int> {
    let real = real_epoll_wait()?;
    // SAFETY: the caller's buffer, no wait.
    until_ready(deadline, || unsafe { real(ep, ev, max, 0) }, || parking::wait_fd(h, ep, Interest::Read, deadline))
}

/// `select` and `pselect` (without a mask) with a park hook. The sets are
/// put back before each zero-timeout attempt (one that finds nothing
/// clears them, as the kernel does at a timeout).
fn parked_select(
    h: parking::Hook,
    n: c_int,
    sets: [*mut libc::fd_set; 3],
    deadline: Option<&Deadline>,
) -> Option<c_int> {
    let real = real_select()?;
    if !(0..=libc::FD_SETSIZE as c_int).contains(&n) {
        return None; // the blocking call reports it (or handles bigger sets)
    }
    // SAFETY: non-null sets are the caller's readable fd_sets.
    let saved = sets.map(|p| unsafe { p.as_ref() }.copied());
    let interests = || {
        let mut v = Vec::new();
        for fd in 0..n {
            for (k, s) in saved.iter().enumerate() {
                // SAFETY: `fd` is below FD_SETSIZE.
                if s.as_ref().is_some_and(|s| unsafe { libc::FD_ISSET(fd, s) }) {
                    v.push((fd, if k == 1 { Interest::Write } else { Interest::Read }));
                }
            }
        }
        v
    };
    let mut wanted = None;
    let attempt = || {
        for (p, s) in sets.iter().zip(&saved) {
            if let Some(s) = s {
                // SAFETY: the caller's writable set (non-null: it was read).
                unsafe { **p = *s };
            }
        }
        let mut zero = libc::timeval { tv_sec: 0, tv_usec: 0 };
        // SAFETY: the caller's sets, no wait.
        unsafe { real(n, sets[0], sets[1], sets[2], &mut zero) }
    };
    until_ready(deadline, attempt, || parking::wait_fds(h, wanted.get_or_insert_with(interests), deadline))
}

/// Does a call with this timespec timeout wait (no timeout, or a valid
/// non-zero one, whose deadline is `deadline`)? Zero and invalid timeouts
/// go to the kernel directly.
fn waits(timeout: *const timespec, deadline: Option<&Deadline>) -> bool {
    // SAFETY: non-null timeouts are readable per the caller's contract.
    match unsafe { timeout.as_ref() } {
        None => true,
        Some(t) => deadline.is_some() && (t.tv_sec > 0 || t.tv_nsec > 0),
    }
}

/// # Safety
/// Same contract as POSIX `poll`.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int {
    let real = or_enosys!(real_poll());
    let Some(hook) = parking::inside() else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fds, n, timeout) };
    };
    let deadline = (timeout > 0).then(|| Deadline::after_ms(timeout));
    if timeout != 0 {
        if let Some(r) = hook.and_then(|h| parked_poll(h, fds, n, deadline.as_ref())) {
            return r;
        }
    }
    // SAFETY: the caller's descriptors, with what is left of the timeout.
    until(deadline, |d| unsafe { real(fds, n, d.map_or(timeout, Deadline::remaining_ms)) })
}

/// # Safety
/// Same contract as Linux `ppoll`.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    let real = or_enosys!(real_ppoll());
    let deadline = if in_function() { timespec_deadline(timeout) } else { None };
    if mask.is_null() && waits(timeout, deadline.as_ref()) {
        if let Some(r) = parking::hook().and_then(|h| parked_poll(h, fds, n, deadline.as_ref())) {
            return r;
        }
    }
    with_stripped(mask, |mask| {
        let mut buf = timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: the caller's descriptors, with what is left of the timeout.
        until(deadline, |d| unsafe { real(fds, n, left_or(d, timeout, &mut buf), mask) })
    })
}

/// # Safety
/// Same contract as POSIX `select`. Like Linux, leaves the time not slept
/// in `*timeout`.
#[no_mangle]
pub unsafe extern "C" fn select(
    n: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    let real = or_enosys!(real_select());
    // SAFETY: non-null timeouts are readable per the caller's contract.
    let deadline = match unsafe { timeout.as_ref() } {
        Some(t) if in_function() && t.tv_sec >= 0 && (0..1_000_000).contains(&t.tv_usec) => {
            Some(Deadline::after(&timespec { tv_sec: t.tv_sec, tv_nsec: t.tv_usec * 1000 }))
        }
        _ => None,
    };
    // SAFETY: as above.
    let tv = unsafe { timeout.as_ref() };
    if tv.is_none() || (deadline.is_some() && tv.is_some_and(|t| t.tv_sec > 0 || t.tv_usec > 0)) {
        if let Some(r) = parking::hook().and_then(|h| parked_select(h, n, [r, w, e], deadline.as_ref())) {
            if let Some(d) = &deadline {
                // What was not slept, as Linux leaves it.
                let left = d.remaining();
                // SAFETY: the caller's writable timeout (non-null: we have a deadline).
                unsafe { *timeout = libc::timeval { tv_sec: left.tv_sec, tv_usec: left.tv_nsec / 1000 } };
            }
            return r;
        }
    }
    // Linux leaves the descriptor sets alone when it fails with EINTR, so
    // they can be passed again as they are.
    until(deadline, |d| {
        if let Some(d) = d {
            let left = d.remaining();
            // Rounded up to whole microseconds, so a retry never ends early.
            let us = (left.tv_nsec + 999) / 1000;
            let tv = if us >= 1_000_000 {
                libc::timeval { tv_sec: left.tv_sec + 1, tv_usec: 0 }
            } else {
                libc::timeval { tv_sec: left.tv_sec, tv_usec: us }
            };
            // SAFETY: the caller's writable timeout (non-null: we have a deadline).
            unsafe { *timeout = tv };
        }
        // SAFETY: the caller's sets and timeout.
        unsafe { real(n, r, w, e, timeout) }
    })
}

/// # Safety
/// Same contract as POSIX `pselect`.
#[no_mangle]
pub unsafe extern "C" fn pselect(
    n: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    let real = or_enosys!(real_pselect());
    let deadline = if in_function() { timespec_deadline(timeout) } else { None };
    if mask.is_null() && waits(timeout, deadline.as_ref()) {
        if let Some(r) = parking::hook().and_then(|h| parked_select(h, n, [r, w, e], deadline.as_ref())) {
            return r;
        }
    }
    with_stripped(mask, |mask| {
        let mut buf = timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: the caller's sets, with what is left of the timeout.
        until(deadline, |d| unsafe { real(n, r, w, e, left_or(d, timeout, &mut buf), mask) })
    })
}

/// # Safety
/// Same contract as Linux `epoll_wait`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(ep: c_int, ev: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int {
    let real = or_enosys!(real_epoll_wait());
    let Some(hook) = parking::inside() else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(ep, ev, max, timeout) };
    };
    let deadline = (timeout > 0).then(|| Deadline::after_ms(timeout));
    if timeout != 0 {
        if let Some(r) = hook.and_then(|h| parked_epoll(h, ep, ev, max, deadline.as_ref())) {
            return r;
        }
    }
    // SAFETY: the caller's buffer, with what is left of the timeout.
    until(deadline, |d| unsafe { real(ep, ev, max, d.map_or(timeout, Deadline::remaining_ms)) })
}

/// # Safety
/// Same contract as Linux `epoll_pwait`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    ep: c_int,
    ev: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    let real = or_enosys!(real_epoll_pwait());
    let deadline = (timeout > 0 && in_function()).then(|| Deadline::after_ms(timeout));
    if mask.is_null() && timeout != 0 {
        if let Some(r) = parking::hook().and_then(|h| parked_epoll(h, ep, ev, max, deadline.as_ref())) {
            return r;
        }
    }
    with_stripped(mask, |mask| {
        // SAFETY: the caller's buffer, with what is left of the timeout.
        until(deadline, |d| unsafe { real(ep, ev, max, d.map_or(timeout, Deadline::remaining_ms), mask) })
    })
}

/// # Safety
/// Same contract as Linux `epoll_pwait2`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    ep: c_int,
    ev: *mut libc::epoll_event,
    max: c_int,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    let real = or_enosys!(real_epoll_pwait2());
    let deadline = if in_function() { timespec_deadline(timeout) } else { None };
    if mask.is_null() && waits(timeout, deadline.as_ref()) {
        if let Some(r) = parking::hook().and_then(|h| parked_epoll(h, ep, ev, max, deadline.as_ref())) {
            return r;
        }
    }
    with_stripped(mask, |mask| {
        let mut buf = timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: the caller's buffer, with what is left of the timeout.
        until(deadline, |d| unsafe { real(ep, ev, max, left_or(d, timeout, &mut buf), mask) })
    })
}

/// # Safety
/// Same contract as POSIX `pause`: returns only after one of the program's
/// own handlers ran.
#[no_mangle]
pub unsafe extern "C" fn pause() -> c_int {
    let real = or_enosys!(real_pause());
    // SAFETY: no arguments.
    until(None, |_| unsafe { real() })
}

/// # Safety
/// Same contract as POSIX `sigsuspend`. The preemption signal is never
/// blocked during the wait; a preemption re-enters the wait (with the
/// program's signals blocked again in between, so none is lost).
#[no_mangle]
pub unsafe extern "C" fn sigsuspend(mask: *const sigset_t) -> c_int {
    let real = or_enosys!(real_sigsuspend());
    // SAFETY: forwarded with the caller's set or a valid local copy.
    with_stripped(mask, |mask| until(None, |_| unsafe { real(mask) }))
}

/// # Safety
/// Same contract as POSIX `sigwait` (which waits through EINTR itself).
#[no_mangle]
pub unsafe extern "C" fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int {
    let Some(real) = real_sigwait() else { return libc::ENOSYS };
    // SAFETY: forwarded with the caller's set or a valid local copy.
    with_stripped(set, |set| unsafe { real(set, sig) })
}

/// # Safety
/// Same contract as POSIX `sigwaitinfo`.
#[no_mangle]
pub unsafe extern "C" fn sigwaitinfo(set: *const sigset_t, info: *mut libc::siginfo_t) -> c_int {
    let real = or_enosys!(real_sigwaitinfo());
    // SAFETY: forwarded with the caller's set or a valid local copy.
    with_stripped(set, |set| until(None, |_| unsafe { real(set, info) }))
}

/// # Safety
/// Same contract as POSIX `sigtimedwait`.
#[no_mangle]
pub unsafe extern "C" fn sigtimedwait(set: *const sigset_t, info: *mut libc::siginfo_t, timeout: *const timespec) -> c_int {
    let real = or_enosys!(real_sigtimedwait());
    let deadline = if in_function() { timespec_deadline(timeout) } else { None };
    with_stripped(set, |set| {
        let mut buf = timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: the caller's set and buffer, with what is left of the timeout.
        until(deadline, |d| unsafe { real(set, info, left_or(d, timeout, &mut buf)) })
    })
}

/// # Safety
/// Same contract as POSIX `sem_timedwait`. glibc waits on a futex with the
/// absolute deadline and returns EINTR after any handler; the deadline stays
/// valid, so after a preemption we simply wait again.
#[no_mangle]
pub unsafe extern "C" fn sem_timedwait(sem: *mut libc::sem_t, abstime: *const timespec) -> c_int {
    let real = or_enosys!(real_sem_timedwait());
    // SAFETY: forwarded verbatim.
    until(None, |_| unsafe { real(sem, abstime) })
}

/// # Safety
/// Same contract as glibc `sem_clockwait` (absolute deadline, as above).
#[no_mangle]
pub unsafe extern "C" fn sem_clockwait(sem: *mut libc::sem_t, clock: libc::clockid_t, abstime: *const timespec) -> c_int {
    let real = or_enosys!(real_sem_clockwait());
    // SAFETY: forwarded verbatim.
    until(None, |_| unsafe { real(sem, clock, abstime) })
}

/// A descriptor call made through `syscall()` rather than its libc
/// function: what the table of descriptor modes knows of the numbers it
/// names is forgotten (`fd_modes`; they are asked of the kernel from now
/// on). Cheap: a few compares for every other call.
fn descriptor_call(n: libc::c_long, a: libc::c_long, b: libc::c_long, r: libc::c_long) {
    match n {
        libc::SYS_close | libc::SYS_fcntl | libc::SYS_ioctl | libc::SYS_setsockopt | libc::SYS_dup => {
            super::fd_modes::forget(a as c_int, a as c_int);
            let dup = n == libc::SYS_dup || (n == libc::SYS_fcntl && matches!(b as c_int, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC));
            if r >= 0 && dup {
                super::fd_modes::forget(r as c_int, r as c_int);
            }
        }
        libc::SYS_dup2 | libc::SYS_dup3 => {
            super::fd_modes::forget(a as c_int, a as c_int);
            super::fd_modes::forget(b as c_int, b as c_int);
        }
        libc::SYS_close_range => super::fd_modes::forget(a as c_int, b.min(c_int::MAX as libc::c_long) as c_int),
        _ => {}
    }
}

/// # Safety
/// Same contract as `syscall(2)` (declared with its six possible arguments;
/// callers that pass fewer leave the rest unused, as the kernel does).
///
/// Only futex waits are treated: programs and runtimes call them directly,
/// and with a timeout the kernel returns EINTR after a handler instead of
/// restarting. We wait again: with the same absolute deadline
/// (FUTEX_WAIT_BITSET, FUTEX_LOCK_PI), or with what is left of a relative
/// one (FUTEX_WAIT). Every other call passes through.
#[no_mangle]
pub unsafe extern "C" fn syscall(
    n: libc::c_long,
    a: libc::c_long,
    b: libc::c_long,
    c: libc::c_long,
    d: libc::c_long,
    e: libc::c_long,
    f: libc::c_long,
) -> libc::c_long {
    let Some(real) = real_syscall() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    const FUTEX_CMD_MASK: libc::c_long = !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME) as libc::c_long;
    let cmd = if n == libc::SYS_futex { (b & FUTEX_CMD_MASK) as c_int } else { -1 };
    let absolute_wait = matches!(cmd, libc::FUTEX_WAIT_BITSET | libc::FUTEX_LOCK_PI | libc::FUTEX_WAIT_REQUEUE_PI);
    if !(absolute_wait || cmd == libc::FUTEX_WAIT) || !in_function() {
        // SAFETY: forwarded verbatim.
        let r = unsafe { real(n, a, b, c, d, e, f) };
        descriptor_call(n, a, b, r);
        return r;
    }
    // FUTEX_WAIT's timeout is relative: retries wait for what is left.
    let relative = if cmd == libc::FUTEX_WAIT { timespec_deadline(d as *const timespec) } else { None };
    let mut left: timespec;
    let m = Mark::now();
    loop {
        let timeout = match &relative {
            Some(dl) => {
                left = dl.remaining();
                &left as *const timespec as libc::c_long
            }
            None => d,
        };
        // SAFETY: forwarded verbatim, or with our remaining timeout.
        let r = blocking(|| unsafe { real(n, a, b, c, timeout, e, f) });
        if r == -1 && errno() == libc::EINTR && m.preempted_only() {
            continue;
        }
        return r;
    }
}

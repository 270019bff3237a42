//! The park hook: a green thread's blocking calls wait on its worker's
//! reactor and timers, not in the kernel.
//!
//! linger's wrappers of `read`, `write`, `accept`, `poll`, `nanosleep`...
//! try the call without blocking and, where it would block, call this hook
//! (`linger::park`); it parks the green thread until the descriptor may be
//! ready or the deadline has passed, and the wrapper tries again. The waits
//! go to the tokio runtime of the worker the thread runs on (every worker
//! turns its own drivers, `scheduler.rs`): a readiness event wakes the
//! thread on its own worker, with no other thread in the way.
//!
//! **Registrations.** Each wait registers its own duplicate of the
//! descriptor (`F_DUPFD_CLOEXEC`) with the worker's reactor and drops it
//! after. Owning the duplicate keeps the registration sound whatever the
//! program does with its descriptor meanwhile: closed by another thread, the
//! open file stays alive until the wait ends, as Linux keeps it for a pthread
//! blocked in `read` on it, and the wrapper's next attempt then fails with
//! `EBADF`; reused for another file, the number is not ours, so readiness of
//! the new file never wakes this waiter. Two waiters of one descriptor hold
//! two registrations of the same file, both woken. (Four system calls per
//! park: kept registrations need `close` and `dup2` wrappers, a later step.)
//!
//! **No lost readiness.** tokio's readiness is edge-triggered: set by an
//! event, cleared by us. At entry the wrapper's attempt has just failed, so
//! any readiness recorded is stale: we clear it, then ask the kernel with a
//! zero-timeout `poll` whether the descriptor is ready after all (an event
//! between the attempt and the clear would otherwise be lost), and only
//! then wait. An event after the `poll` sets readiness again, seen by the
//! wait.
//!
//! **Time.** tokio's timers have a millisecond's granularity; deadlines
//! nearer than 2 ms wait on a `timerfd` of their own instead, so that a
//! `usleep(100)` sleeps about 100 us, not a millisecond.

use std::future::{poll_fn, Future};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Duration;

use linger::park::{Interest, Park};
use tokio::io::unix::AsyncFd;

use super::block_on_as;
use super::green;
use super::stats::Cause;

/// The hook every green thread is launched with.
pub(crate) static HOOK: LazyLock<Arc<dyn Park>> = LazyLock::new(|| Arc::new(GreenPark));

struct GreenPark;

type Registration = AsyncFd<OwnedFd>;

/// Registers `fd` (a duplicate of it, which the registration owns) with the
/// worker's reactor; None if it cannot (out of descriptors, or a file the
/// reactor refuses: a regular file).
fn register(fd: RawFd) -> Option<Registration> {
    // SAFETY: F_DUPFD_CLOEXEC on any number is harmless; a new descriptor
    // (>= 0) is ours alone.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return None;
    }
    // SAFETY: `dup` was just made and nothing else knows it.
    let owned = unsafe { OwnedFd::from_raw_fd(dup) };
    own(owned, tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE)
}

/// Registers a descriptor we own (closed with the registration).
fn own(fd: OwnedFd, interest: tokio::io::Interest) -> Option<Registration> {
    // In `critical`: tokio's registration takes the driver's locks.
    // SAFETY: `fd` is owned by the registration: open, and the same file,
    // until the registration is dropped (which deregisters, then closes it).
    linger::critical(|| unsafe { AsyncFd::register_with_interest(fd, interest) }).ok()
}

/// Deregisters and closes.
fn release(reg: Registration) {
    linger::critical(|| drop(reg));
}

/// Clears readiness recorded before the caller's failed attempt.
fn clear_stale(reg: &Registration, interest: Interest) {
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    let _ = match interest {
        Interest::Read => reg.poll_read_ready(&mut cx).map(|g| g.map(|mut g| g.clear_ready())),
        Interest::Write => reg.poll_write_ready(&mut cx).map(|g| g.map(|mut g| g.clear_ready())),
    };
}

/// Is any of `fds` ready now (a zero-timeout `poll`)?
fn ready_now(fds: &[(RawFd, Interest)]) -> bool {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, i)| libc::pollfd { fd, events: if i == Interest::Read { libc::POLLIN | libc::POLLPRI } else { libc::POLLOUT }, revents: 0 })
        .collect();
    // SAFETY: a valid array of `p.len()` pollfds. linger's `poll` wrapper,
    // called from inside the hook, does not park again.
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, 0) > 0 }
}

/// Completes at the CLOCK_MONOTONIC `deadline` (never, for `None`).
fn deadline(deadline: Option<Duration>) -> Pin<Box<dyn Future<Output = ()>>> {
    let Some(d) = deadline else { return Box::pin(std::future::pending()) };
    let left = d.saturating_sub(linger::park::monotonic_now());
    if left.is_zero() {
        return Box::pin(std::future::ready(()));
    }
    let timers = crate::runtime::Handle::try_current().is_some_and(|h| h.has_time());
    if left >= Duration::from_millis(2) && timers {
        return Box::pin(tokio::time::sleep(left));
    }
    match timer_at(d) {
        Some(t) => Box::pin(async move {
            let _ = t.readable().await;
            release(t);
        }),
        // No timerfd (out of descriptors): the millisecond timer.
        None if timers => Box::pin(tokio::time::sleep(left)),
        // Neither: returns at once; the wrapper, seeing the deadline
        // still ahead, parks again (a busy wait, only in that corner).
        None => Box::pin(std::future::ready(())),
    }
}

/// A one-shot timerfd for `deadline`, registered with the worker's reactor.
fn timer_at(deadline: Duration) -> Option<Registration> {
    // SAFETY: plain system calls; a new descriptor (>= 0) is ours alone.
    let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: just made, known to nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: deadline.as_secs() as i64, tv_nsec: deadline.subsec_nanos() as i64 },
    };
    // SAFETY: `fd` is our timerfd; `spec` is valid.
    if unsafe { libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) } != 0 {
        return None;
    }
    own(owned, tokio::io::Interest::READABLE)
}

/// Waits for any of `fds` or the deadline; false if it cannot.
fn wait(fds: &[(RawFd, Interest)], until: Option<Duration>) -> bool {
    // A runtime built without I/O has no reactor: the call blocks.
    if green::current().is_none() || !crate::runtime::Handle::try_current().is_some_and(|h| h.has_io()) {
        return false;
    }
    let mut regs = Vec::with_capacity(fds.len());
    for &(fd, interest) in fds {
        match register(fd) {
            Some(r) => {
                clear_stale(&r, interest);
                regs.push((r, interest));
            }
            None => {
                regs.into_iter().for_each(|(r, _)| release(r));
                return false;
            }
        }
    }
    if !ready_now(fds) {
        let mut timeout = deadline(until);
        let detail = fds.first().map_or(u64::MAX, |f| f.0 as u64);
        let cause = if fds.is_empty() { Cause::Timer } else { Cause::Io };
        block_on_as(
            cause,
            detail,
            poll_fn(|cx| {
                for (r, i) in &regs {
                    let ready = match i {
                        Interest::Read => r.poll_read_ready(cx).is_ready(),
                        Interest::Write => r.poll_write_ready(cx).is_ready(),
                    };
                    if ready {
                        return Poll::Ready(());
                    }
                }
                timeout.as_mut().poll(cx)
            }),
        );
    }
    regs.into_iter().for_each(|(r, _)| release(r));
    true
}

impl Park for GreenPark {
    fn wait_fd(&self, fd: RawFd, interest: Interest, deadline: Option<Duration>) -> bool {
        wait(&[(fd, interest)], deadline)
    }

    fn wait_fds(&self, fds: &[(RawFd, Interest)], deadline: Option<Duration>) -> bool {
        wait(fds, deadline)
    }

    fn sleep_until(&self, until: Duration) -> bool {
        if green::current().is_none() {
            return false;
        }
        let mut timeout = deadline(Some(until));
        block_on_as(Cause::Timer, until.as_nanos() as u64, poll_fn(|cx| timeout.as_mut().poll(cx)));
        true
    }
}

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
//! **Registrations** are kept in each worker's own epoll set, one-shot,
//! and re-armed with one system call per park (`poller.rs`, which also says
//! how closed and reused numbers are handled). Arming checks readiness, so
//! readiness that came between the wrapper's failed attempt and the park is
//! not lost.
//!
//! **Time.** tokio's timers have a millisecond's granularity; deadlines
//! nearer than 2 ms wait on a `timerfd` of their own instead, so that a
//! `usleep(100)` sleeps about 100 us, not a millisecond.

use std::future::{poll_fn, Future};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};
use std::task::Poll;
use std::time::Duration;

use linger::park::{Interest, Park};
use tokio::io::unix::AsyncFd;

use super::block::block_on_in_hook;
use super::records;
use super::poller::{self, WaitCell};
use crate::base::thread_stats::Cause;

/// The hook every green thread is launched with.
pub(crate) static HOOK: LazyLock<Arc<dyn Park>> = LazyLock::new(|| Arc::new(GreenPark));

struct GreenPark;

type Registration = AsyncFd<OwnedFd>;

/// Deregisters and closes.
fn release(reg: Registration) {
    linger::critical(|| drop(reg));
}

/// Completes at the CLOCK_MONOTONIC `deadline` (never, for `None`).
fn deadline(deadline: Option<Duration>) -> Pin<Box<dyn Future<Output = ()>>> {
    let Some(d) = deadline else { return Box::pin(std::future::pending()) };
    let left = d.saturating_sub(linger::park::monotonic_now());
    if left.is_zero() {
        return Box::pin(std::future::ready(()));
    }
    let timers = crate::base::context::drivers().is_some_and(|d| d.time);
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
    // In `critical`: tokio's registration takes the driver's locks.
    // SAFETY: `fd` is owned by the registration: open, and the same file,
    // until the registration is dropped (which deregisters, then closes it).
    linger::critical(|| unsafe { AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE) }).ok()
}

/// Waits for any of `fds` or the deadline; false if it cannot.
fn wait(fds: &[(RawFd, Interest)], until: Option<Duration>) -> bool {
    // Outside green threads, and in a runtime built without I/O (no
    // reactor: `poller::add` declines), the call blocks.
    if records::current().is_none() {
        return false;
    }
    /// Takes the entries off the worker's table, and drops the cell, in a
    /// `critical` scope (the drain task shares both).
    struct Entries<'a>(&'a [(RawFd, Interest)], Option<Rc<WaitCell>>);
    impl Drop for Entries<'_> {
        fn drop(&mut self) {
            linger::critical(|| {
                if let Some(cell) = self.1.take() {
                    poller::remove(self.0, &cell);
                }
            });
        }
    }
    let cell = linger::critical(|| {
        let cell = Rc::new(WaitCell::default());
        poller::add(fds, &cell).then_some(cell)
    });
    let Some(cell) = cell else { return false };
    let entries = Entries(fds, Some(cell));
    let cell = entries.1.as_deref().expect("cell");
    if !linger::critical(|| cell.is_ready()) {
        let mut timeout = deadline(until);
        let detail = fds.first().map_or(u64::MAX, |f| f.0 as u64);
        let cause = if fds.is_empty() { Cause::Timer } else { Cause::Io };
        block_on_in_hook(
            cause,
            detail,
            poll_fn(|cx| {
                if linger::critical(|| cell.poll(cx)) {
                    return Poll::Ready(());
                }
                timeout.as_mut().poll(cx)
            }),
        );
    }
    drop(entries);
    true
}

impl Park for GreenPark {
    fn wait_fd(&self, fd: RawFd, interest: Interest, deadline: Option<Duration>) -> bool {
        wait(&[(fd, interest)], deadline)
    }

    fn wait_fds(&self, fds: &[(RawFd, Interest)], deadline: Option<Duration>) -> bool {
        wait(fds, deadline)
    }

    /// On the worker's tokio blocking pool; the thread parks as for I/O
    /// (its dump shows no descriptor: the call runs elsewhere).
    fn offload(&self, work: Box<dyn FnOnce() + Send>) -> bool {
        if records::current().is_none() || crate::base::context::drivers().is_none() {
            return false;
        }
        // In `critical`: spawning takes the blocking pool's lock.
        let done = linger::critical(|| tokio::task::spawn_blocking(work));
        // An error: the runtime shut down before `work` ran (or it panicked,
        // which the wrapper's copy of the call never does).
        block_on_in_hook(Cause::Io, crate::base::thread_stats::OFFLOADED, done).is_ok()
    }

    fn sleep_until(&self, until: Duration) -> bool {
        if records::current().is_none() {
            return false;
        }
        let mut timeout = deadline(Some(until));
        block_on_in_hook(Cause::Timer, until.as_nanos() as u64, poll_fn(|cx| timeout.as_mut().poll(cx)));
        true
    }
}

//! One-shot per-thread deadline timer.
//!
//! Each thread that runs preemptible functions owns one POSIX timer on
//! CLOCK_MONOTONIC whose signal is aimed at that thread (SIGEV_THREAD_ID), so
//! any number of threads can preempt at once. The timer is armed for an
//! absolute deadline and never ticks periodically. It is disarmed lazily:
//! arming only happens when the new deadline is *earlier* than the pending one,
//! and an early or stray expiry is handled (re-armed or ignored) by the
//! handler. This keeps the timer system call (1-2 us in these VMs) off the
//! launch fast path.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{compiler_fence, Ordering};

use crate::state::thread::{ThreadState, NEVER};

struct TimerOwner(Cell<i32>);

impl Drop for TimerOwner {
    fn drop(&mut self) {
        let id = self.0.get();
        if id < 0 {
            return;
        }
        // The main thread's thread-local destructors run inside `exit()`,
        // before the atexit handlers, and those may still run inside a
        // preemptible function (a program that calls exit() from main under
        // linger-run): its timer stays until the process ends.
        // SAFETY: getpid/gettid have no preconditions.
        if unsafe { libc::gettid() == libc::getpid() } {
            return;
        }
        // SAFETY: deleting our own kernel timer id; no memory involved.
        unsafe { libc::syscall(libc::SYS_timer_delete, id as libc::c_long) };
        LIVE.fetch_sub(1, Ordering::Relaxed);
        // The id may be reused by the next timer anyone creates: forget it.
        let ts = crate::state::thread::ts();
        ts.timer.set(-1);
        ts.ready.set(false);
        ts.armed.set(NEVER);
    }
}

/// Threads of this process that own a timer (so may receive the preemption
/// signal at any moment).
static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Number of threads that own a preemption timer.
pub(crate) fn live_timers() -> usize {
    LIVE.load(Ordering::Relaxed)
}

thread_local! {
    static OWNER: TimerOwner = const { TimerOwner(Cell::new(-1)) };
}

/// In the child of a fork: give the (only) thread a timer of its own again,
/// and re-arm it if the fork happened inside a preemptible function.
/// Called by `fork`'s child handler, after `signal::after_fork_in_child`.
pub(crate) fn after_fork_in_child() {
    let ts = crate::state::thread::ts();
    crate::machine::monitor::after_fork_in_child(ts);
    if ts.timer.get() < 0 {
        return; // this thread never used linger
    }
    // The next launch or resume finishes the set-up (with the monitor: one
    // of this process).
    ts.ready.set(false);
    ts.timer.set(-1);
    ts.armed.set(NEVER);
    LIVE.store(0, Ordering::Relaxed); // only this thread exists in the child
    let _ = OWNER.try_with(|o| o.0.set(-1));
    if ensure(ts, crate::machine::signal::number()).is_err() {
        return; // later launches report the error
    }
    ts.ready.set(!crate::machine::monitor::enabled());
    let current = ts.current.get();
    if !current.is_null() {
        // SAFETY: `current` is a live frame: the child runs the same code.
        let _ = arm(ts, unsafe { (*current).deadline.get() });
    }
}

/// Creates this thread's timer if it has none yet.
pub(crate) fn ensure(ts: &ThreadState, signo: i32) -> io::Result<()> {
    if ts.timer.get() >= 0 {
        return Ok(());
    }
    // SAFETY: an all-zero sigevent is a valid value of this plain C struct.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = signo;
    // SAFETY: gettid has no preconditions.
    sev.sigev_notify_thread_id = unsafe { libc::gettid() };
    let mut id: libc::c_int = -1;
    // SAFETY: valid pointers to a sigevent and an int for the kernel to fill.
    let r = unsafe {
        libc::syscall(
            libc::SYS_timer_create,
            libc::CLOCK_MONOTONIC as libc::c_long,
            &mut sev as *mut libc::sigevent,
            &mut id as *mut libc::c_int,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // A thread whose destructors already ran (a timer created during exit)
    // keeps its timer until the process ends.
    let _ = OWNER.try_with(|o| o.0.set(id));
    LIVE.fetch_add(1, Ordering::Relaxed);
    ts.timer.set(id);
    Ok(())
}

/// Stops this thread's timer (before an exec). Async-signal-safe.
pub(crate) fn disarm(ts: &ThreadState) {
    ts.armed.set(NEVER);
    if ts.timer.get() < 0 {
        return;
    }
    let zero = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: 0, tv_nsec: 0 },
    };
    // SAFETY: our own timer id; a zero value disarms it.
    unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            ts.timer.get() as libc::c_long,
            0 as libc::c_long,
            &zero as *const libc::itimerspec,
            std::ptr::null_mut::<libc::itimerspec>(),
        )
    };
}

/// Makes sure the timer fires no later than `deadline` (absolute monotonic
/// ns). Does nothing if it is already armed for that time or earlier.
/// Async-signal-safe.
#[inline]
pub(crate) fn arm(ts: &ThreadState, deadline: u64) -> io::Result<()> {
    if deadline == NEVER || deadline >= ts.armed.get() {
        return Ok(());
    }
    arm_slow(ts, deadline)
}

#[cold]
fn arm_slow(ts: &ThreadState, deadline: u64) -> io::Result<()> {
    // Record first: if the signal fires before the syscall returns, the handler
    // resets `armed` to NEVER and that must win.
    ts.armed.set(deadline);
    compiler_fence(Ordering::SeqCst);
    let d = deadline.max(1);
    let its = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: (d / 1_000_000_000) as i64, tv_nsec: (d % 1_000_000_000) as i64 },
    };
    let t0 = crate::state::thread::now_ns();
    // SAFETY: timer id owned by this thread; valid itimerspec; old value not requested.
    let r = unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            ts.timer.get() as libc::c_long,
            libc::TIMER_ABSTIME as libc::c_long,
            &its as *const libc::itimerspec,
            std::ptr::null_mut::<libc::itimerspec>(),
        )
    };
    if r != 0 {
        ts.armed.set(NEVER);
        return Err(io::Error::last_os_error());
    }
    // Track what arming costs here (a near deadline can need a VM exit): the
    // handler never re-arms closer than the base retry plus this.
    let t1 = crate::machine::clock::read_anchored(ts);
    ts.armed_at.set(t1);
    let cost = t1.saturating_sub(t0).min(1_000_000);
    let old = ts.arm_cost.get();
    ts.arm_cost.set(if old == 0 { cost } else { old - old / 4 + cost / 4 });
    Ok(())
}

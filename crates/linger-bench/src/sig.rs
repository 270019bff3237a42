//! Raw signal and timer baselines, independent of linger: an empty handler hit
//! by `tgkill` to ourselves, and a per-thread POSIX timer (one-shot or
//! periodic) whose handler only counts.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// CLOCK_MONOTONIC in nanoseconds (the clock linger's deadlines use).
#[inline]
pub fn now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer; clock_gettime(CLOCK_MONOTONIC) cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Timer-signal deliveries seen by [`on_timer`].
pub static TIMER_HITS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_empty(_sig: libc::c_int, _info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {}

extern "C" fn on_timer(_sig: libc::c_int, _info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
    TIMER_HITS.fetch_add(1, Ordering::Relaxed);
}

fn install(signo: i32, handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)) -> io::Result<()> {
    // SAFETY: a zeroed sigaction is a valid value; we fill in an
    // async-signal-safe handler (it touches only an atomic) and pass valid
    // pointers to sigaction.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        // Same flags as linger's preemption handler, so the baselines pay for
        // the same kind of signal frame.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(signo, &sa, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The two signals used by the baselines, chosen away from linger's.
#[derive(Clone, Copy, Debug)]
pub struct Signals {
    pub empty: i32,
    pub timer: i32,
    pid: libc::pid_t,
    tid: libc::pid_t,
}

impl Signals {
    pub fn install(linger_signal: i32) -> io::Result<Signals> {
        let mut free = (libc::SIGRTMIN()..=libc::SIGRTMAX()).rev().filter(|&s| s != linger_signal).skip(4);
        // SAFETY: getpid/gettid have no preconditions.
        let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
        let s = Signals {
            empty: free.next().expect("real-time signal"),
            timer: free.next().expect("real-time signal"),
            pid,
            tid,
        };
        install(s.empty, on_empty)?;
        install(s.timer, on_timer)?;
        Ok(s)
    }

    /// One signal round trip: `tgkill` to this thread, the kernel delivers it
    /// on the way out of the system call, the empty handler runs, `rt_sigreturn`.
    /// Must be called on the thread that called [`Signals::install`].
    #[inline]
    pub fn tgkill_self(&self) {
        // SAFETY: tgkill to our own thread with a signal that has an
        // installed (empty) handler.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                self.pid as libc::c_long,
                self.tid as libc::c_long,
                self.empty as libc::c_long,
            );
        }
    }
}

/// A POSIX timer on CLOCK_MONOTONIC whose signal goes to the creating thread.
pub struct ThreadTimer {
    id: libc::timer_t,
}

impl ThreadTimer {
    pub fn new(sigs: &Signals) -> io::Result<ThreadTimer> {
        // SAFETY: an all-zero sigevent is a valid value of this plain C struct.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = sigs.timer;
        // SAFETY: gettid has no preconditions.
        sev.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut id: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid pointers to a sigevent and a timer_t for glibc to fill.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ThreadTimer { id })
    }

    fn set(&self, flags: i32, value_ns: u64, interval_ns: u64) {
        let ts = |ns: u64| libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 };
        let its = libc::itimerspec { it_interval: ts(interval_ns), it_value: ts(value_ns) };
        // SAFETY: our own timer id and a valid itimerspec; old value not requested.
        let r = unsafe { libc::timer_settime(self.id, flags, &its, std::ptr::null_mut()) };
        assert_eq!(r, 0, "timer_settime: {}", io::Error::last_os_error());
    }

    /// Fires once at absolute CLOCK_MONOTONIC time `deadline_ns`.
    pub fn arm_at(&self, deadline_ns: u64) {
        self.set(libc::TIMER_ABSTIME, deadline_ns.max(1), 0);
    }

    /// Fires every `period_ns`, starting one period from now.
    pub fn periodic(&self, period_ns: u64) {
        self.set(0, period_ns, period_ns);
    }

    pub fn disarm(&self) {
        self.set(0, 0, 0);
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: deleting our own timer exactly once.
        unsafe { libc::timer_delete(self.id) };
    }
}

/// Spins until the timer handler has run `n` more times than `since`.
#[inline(never)]
pub fn spin_until_hits(since: u64) {
    while TIMER_HITS.load(Ordering::Relaxed) == since {
        std::hint::spin_loop();
    }
}

//! libc functions that would notice preemption, and their wrappers.
//!
//! The preemption signal interrupts whatever the function is doing, system
//! calls included. Most calls restart transparently (our handler uses
//! SA_RESTART), but some never do (signal(7), "Interruption of system calls
//! and library functions by signal handlers"), some return short counts, and
//! a program can switch preemption off by accident through the signal API.
//! These wrappers, exported under the libc names so that they interpose the
//! program's calls (libc's internal calls are unaffected), keep all of that
//! invisible:
//!
//! - [`sleep`]: the sleep family sleeps its full duration;
//! - [`io`]: reads, writes, socket calls and SysV IPC: no EINTR and no short
//!   transfer caused by preemption;
//! - [`wait`]: `poll`, `select`, `epoll_wait` and friends, and the calls that
//!   wait for signals: retried with the remaining timeout;
//! - [`signals`]: `sigaction`, `signal`, masks and signal sets: the
//!   preemption signal cannot be replaced, ignored or blocked, and the
//!   program's own handlers are counted so that the retries above never hide
//!   an EINTR the program caused itself;
//! - [`exec`]: the `exec` family: the new image starts with no preemption
//!   signal pending, no timer and default disposition;
//! - [`stack`]: `pthread_getattr_np` describes the stack the caller is
//!   really on.
//!
//! Every blocking wrapper marks its call with [`blocking`], so the handler may
//! stop the function at the system call instruction itself, where the libc
//! wrapper below holds no lock. Outside a preemptible function the wrappers
//! cost one thread-local load and then call libc as is.

pub(crate) mod exec;
pub(crate) mod io;
pub(crate) mod signals;
pub(crate) mod sleep;
pub(crate) mod stack;
pub(crate) mod wait;

use libc::c_int;

use crate::switch::stack_pointer;
use crate::thread::ts;

/// Looks up (once) the next definition of a libc function after ours.
macro_rules! real {
    ($name:literal, $ty:ty) => {{
        static SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let mut p = SLOT.load(std::sync::atomic::Ordering::Relaxed);
        if p == 0 {
            // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the
            // definition after ours (libc's).
            p = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr() as *const libc::c_char) } as usize;
            SLOT.store(p, std::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY: the symbol has this C signature in every glibc that has it.
        if p == 0 { None } else { Some(unsafe { std::mem::transmute::<usize, $ty>(p) }) }
    }};
}
pub(crate) use real;

/// Resolves a real function or fails the call with ENOSYS.
macro_rules! or_enosys {
    ($e:expr) => {
        match $e {
            Some(f) => f,
            None => {
                set_errno(libc::ENOSYS);
                return -1;
            }
        }
    };
}
pub(crate) use or_enosys;

/// Resolves the real functions ahead of time, outside any preemptible
/// function (dlsym takes the loader's lock).
pub(crate) fn prepare() {
    sleep::prepare();
    stack::prepare();
    io::prepare();
    wait::prepare();
    signals::prepare();
    exec::prepare();
}

pub(crate) fn set_errno(e: c_int) {
    // SAFETY: errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

pub(crate) fn errno() -> c_int {
    // SAFETY: errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() }
}

/// Is the caller inside a preemptible function? (The wrappers' fast path.)
#[inline(always)]
pub(crate) fn in_function() -> bool {
    !ts().current.get().is_null()
}

/// Runs `f` (a libc blocking call) marked as preemptible at its system call.
#[inline(always)]
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
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

/// Which signals ran on this thread between two points: lets a wrapper tell
/// an interruption by preemption (retry it) from one by the program's own
/// signal handler (report it, as libc would).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    thread: u64,
    ours: u64,
    theirs: u64,
}

impl Mark {
    pub(crate) fn now() -> Mark {
        let key = crate::thread::thread_key();
        let t = ts();
        Mark { thread: key, ours: t.signals.get(), theirs: t.user_signals.get() }
    }

    /// Did only the preemption signal interrupt us since `self`? (A function
    /// resumed on another thread was certainly preempted; that thread's
    /// counters are not comparable.)
    pub(crate) fn preempted_only(self) -> bool {
        let now = Mark::now();
        if now.thread != self.thread {
            return true;
        }
        now.ours != self.ours && now.theirs == self.theirs
    }
}

/// Calls `f` until it fails with anything but an EINTR caused by preemption
/// alone, for calls that return -1 and set errno and have no timeout.
#[inline]
pub(crate) fn retry<R: PartialEq + From<i8>>(mut f: impl FnMut() -> R) -> R {
    loop {
        let m = Mark::now();
        let r = blocking(&mut f);
        if r == R::from(-1) && errno() == libc::EINTR && m.preempted_only() {
            continue;
        }
        return r;
    }
}

/// A deadline on CLOCK_MONOTONIC for calls with a relative timeout, so that
/// retries wait only for what is left.
#[derive(Clone, Copy)]
pub(crate) struct Deadline(libc::timespec);

impl Deadline {
    pub(crate) fn after(t: &libc::timespec) -> Deadline {
        Deadline(add(now(libc::CLOCK_MONOTONIC), t))
    }

    pub(crate) fn at(t: libc::timespec) -> Deadline {
        Deadline(t)
    }

    pub(crate) fn after_ms(ms: c_int) -> Deadline {
        let t = libc::timespec { tv_sec: (ms / 1000) as i64, tv_nsec: (ms % 1000) as i64 * 1_000_000 };
        Deadline::after(&t)
    }

    pub(crate) fn remaining(&self) -> libc::timespec {
        remaining(libc::CLOCK_MONOTONIC, &self.0)
    }

    /// What is left in milliseconds, rounded up (a retry never returns early).
    pub(crate) fn remaining_ms(&self) -> c_int {
        let r = self.remaining();
        let ms = r.tv_sec.saturating_mul(1000).saturating_add((r.tv_nsec + 999_999) / 1_000_000);
        ms.min(c_int::MAX as i64) as c_int
    }
}

pub(crate) fn now(clock: libc::clockid_t) -> libc::timespec {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t
}

pub(crate) fn add(a: libc::timespec, b: &libc::timespec) -> libc::timespec {
    let mut s = a.tv_sec.saturating_add(b.tv_sec);
    let mut ns = a.tv_nsec + b.tv_nsec;
    if ns >= 1_000_000_000 {
        ns -= 1_000_000_000;
        s = s.saturating_add(1);
    }
    libc::timespec { tv_sec: s, tv_nsec: ns }
}

pub(crate) fn remaining(clock: libc::clockid_t, deadline: &libc::timespec) -> libc::timespec {
    let n = now(clock);
    let mut s = deadline.tv_sec - n.tv_sec;
    let mut ns = deadline.tv_nsec - n.tv_nsec;
    if ns < 0 {
        ns += 1_000_000_000;
        s -= 1;
    }
    if s < 0 {
        libc::timespec { tv_sec: 0, tv_nsec: 0 }
    } else {
        libc::timespec { tv_sec: s, tv_nsec: ns }
    }
}

/// Is `t` a valid relative timeout (non-negative, nanoseconds in range)?
pub(crate) fn valid_timeout(t: &libc::timespec) -> bool {
    t.tv_sec >= 0 && (0..1_000_000_000).contains(&t.tv_nsec)
}

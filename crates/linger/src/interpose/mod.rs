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
//! - [`child`]: `waitpid` and the rest of the `wait` family: no EINTR;
//! - [`exec`]: the `exec` family: the new image starts with no preemption
//!   signal pending, no timer and default disposition;
//! - [`child_env`]: with `linger-run --children`, every image the program
//!   starts (`exec`, `posix_spawn`, `system`, `popen`) gets linger-run's
//!   variables, which the program itself does not see;
//! - [`loader`]: `dlclose`: the code table stops describing the code before
//!   it is unmapped;
//! - [`context`]: `setcontext`, `swapcontext` and the `longjmp` family:
//!   a mask they restore never blocks the preemption signal;
//! - [`stack`]: `pthread_getattr_np` describes the stack the caller is
//!   really on;
//! - [`fds`]: `close`, `dup2`, `dup3`, `close_range`: tell the park seam's
//!   close observer which numbers were closed or replaced; with `socket`,
//!   `pipe`, `dup`, `fcntl`, `ioctl` and `setsockopt`, keep [`fd_modes`]'
//!   table of what parked calls must honour (`O_NONBLOCK`, socket
//!   timeouts) without asking the kernel at each park;
//! - [`exit`]: `pthread_exit` inside a function tells the function's base
//!   its value (`crate::exit`).
//!
//! Every blocking wrapper marks its call with [`blocking`], so the handler may
//! stop the function at the system call instruction itself, where the libc
//! wrapper below holds no lock. Outside a preemptible function the wrappers
//! cost one thread-local load and then call libc as is.

pub(crate) mod child;
pub(crate) mod child_env;
pub(crate) mod context;
pub(crate) mod exec;
pub(crate) mod exit;
pub(crate) mod fd_modes;
pub(crate) mod fds;
pub(crate) mod files;
pub(crate) mod io;
pub(crate) mod loader;
pub(crate) mod parking;
pub(crate) mod paths;
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
    child::prepare();
    child_env::prepare();
    io::prepare();
    files::prepare();
    paths::prepare();
    fds::prepare();
    wait::prepare();
    signals::prepare();
    exec::prepare();
    loader::prepare();
    context::prepare();
    crate::exit::prepare();
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

/// Which signal handlers ran between two points: lets a wrapper tell an
/// interruption by preemption (retry it) from one by the program's own
/// signal handler (report it, as libc would).
///
/// Wrappers take their mark once, when the program's call begins, not before
/// each retry: a handler that runs between two attempts (the retry itself is
/// not atomic) then still makes the call fail with EINTR, at the latest when
/// the next preemption interrupts the attempt that followed. The mark lives
/// as long as the program's call: when it ends, a deadline that was left
/// while the call blocked is taken (see `preempt::blocked_call_returns`).
pub(crate) struct Mark {
    at: Counts,
    /// The program's errno when its call began: a retried attempt's EINTR
    /// must not show after a call that then succeeds.
    errno: c_int,
}

/// The signal counts of the running function (or of the thread).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// The running function (its counts), or null and the thread's id.
    frame: *mut crate::thread::Frame,
    thread: u64,
    ours: u64,
    theirs: u64,
    interrupting: u64,
}

impl Counts {
    fn now() -> Counts {
        let t = ts();
        let frame = t.current.get();
        let thread = if frame.is_null() { crate::thread::thread_key() } else { 0 };
        let c = crate::thread::signal_counts(t);
        Counts { frame, thread, ours: c.ours.get(), theirs: c.theirs.get(), interrupting: c.interrupting.get() }
    }
}

impl Mark {
    pub(crate) fn now() -> Mark {
        Mark { at: Counts::now(), errno: errno() }
    }

    /// Did only the preemption signal interrupt us since `self`? For calls
    /// that fail with EINTR after any handler.
    pub(crate) fn preempted_only(&self) -> bool {
        self.judge(|now| now.theirs == self.at.theirs)
    }

    /// The same for calls the kernel restarts after handlers installed with
    /// `SA_RESTART`: only the program's other handlers count.
    pub(crate) fn preempted_only_restartable(&self) -> bool {
        self.judge(|now| now.interrupting == self.at.interrupting)
    }

    /// Did one of the program's own handlers run since `self` on this
    /// flow of control: any (`restartable` false), or one installed without
    /// `SA_RESTART`? For parked calls, which no signal interrupts: a
    /// handler that ran meanwhile (a held signal, when the function resumed)
    /// ends the call with EINTR where the blocking call would have ended.
    pub(crate) fn program_handler_ran(&self, restartable: bool) -> bool {
        let now = Counts::now();
        let then = &self.at;
        if now.frame != then.frame || now.thread != then.thread {
            return false;
        }
        if restartable {
            now.interrupting != then.interrupting
        } else {
            now.theirs != then.theirs
        }
    }

    /// Gives the program back its errno from when the call began (after
    /// attempts that failed on the way to a result).
    pub(crate) fn restore_errno(&self) {
        set_errno(self.errno);
    }

    /// True means "retry": errno is then reset to the program's.
    fn judge(&self, quiet: impl FnOnce(&Counts) -> bool) -> bool {
        let now = Counts::now();
        let then = &self.at;
        // Counts of another frame or thread are not comparable (cannot
        // happen within one call of a function, whose counts move with it):
        // assume preemption.
        let ours = now.frame != then.frame || now.thread != then.thread || (now.ours != then.ours && quiet(&now));
        if ours {
            set_errno(self.errno);
        }
        ours
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        if !self.at.frame.is_null() {
            let e = errno();
            crate::preempt::blocked_call_returns();
            set_errno(e);
        }
    }
}

/// Calls `f` until it fails with anything but an EINTR caused by preemption
/// alone, for calls that return -1 and set errno, have no timeout and are
/// never restarted after a handler (System V IPC).
#[inline]
pub(crate) fn retry<R: PartialEq + From<i8>>(f: impl FnMut() -> R) -> R {
    retry_unless(Mark::preempted_only, f)
}

/// The same for calls the kernel restarts after `SA_RESTART` handlers (the
/// `wait` family): only the program's handlers without it end them.
#[inline]
pub(crate) fn retry_restartable<R: PartialEq + From<i8>>(f: impl FnMut() -> R) -> R {
    retry_unless(Mark::preempted_only_restartable, f)
}

#[inline]
fn retry_unless<R: PartialEq + From<i8>>(ours: fn(&Mark) -> bool, mut f: impl FnMut() -> R) -> R {
    let m = Mark::now();
    loop {
        let r = blocking(&mut f);
        if r == R::from(-1) && errno() == libc::EINTR && ours(&m) {
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

    /// Has it passed?
    pub(crate) fn passed(&self) -> bool {
        let r = self.remaining();
        r.tv_sec == 0 && r.tv_nsec == 0
    }

    /// As a park hook takes it: the time since CLOCK_MONOTONIC's epoch.
    pub(crate) fn since_epoch(&self) -> std::time::Duration {
        std::time::Duration::new(self.0.tv_sec.max(0) as u64, self.0.tv_nsec as u32)
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

//! Plain libc helpers every layer may use: the next definition of a libc
//! function after ours (for wrappers that interpose it), errno, and
//! timespec arithmetic on a clock. Nothing here knows about preemptible
//! functions; it sits at the bottom of the crate beside `config` and
//! `error`.

use libc::c_int;

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
                $crate::base::sys::set_errno(libc::ENOSYS);
                return -1;
            }
        }
    };
}
pub(crate) use or_enosys;

#[inline]
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

#[inline]
pub(crate) fn errno() -> c_int {
    // SAFETY: errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() }
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

#[inline]
pub(crate) fn now(clock: libc::clockid_t) -> libc::timespec {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t
}

#[inline]
pub(crate) fn add(a: libc::timespec, b: &libc::timespec) -> libc::timespec {
    let mut s = a.tv_sec.saturating_add(b.tv_sec);
    let mut ns = a.tv_nsec + b.tv_nsec;
    if ns >= 1_000_000_000 {
        ns -= 1_000_000_000;
        s = s.saturating_add(1);
    }
    libc::timespec { tv_sec: s, tv_nsec: ns }
}

#[inline]
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

type GetattrFn = unsafe extern "C" fn(libc::pthread_t, *mut libc::pthread_attr_t) -> c_int;

pub(crate) fn real_getattr() -> Option<GetattrFn> {
    real!("pthread_getattr_np", GetattrFn)
}

/// Bounds `[lo, hi)` of the calling thread's own stack, as glibc knows it
/// (whatever the thread runs on right now). Not async-signal-safe: for the
/// main thread glibc reads `/proc/self/maps`.
pub(crate) fn thread_stack() -> Option<(usize, usize)> {
    let real = real_getattr()?;
    // SAFETY: a zeroed attr filled by libc, read back and destroyed here.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if real(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut lo: *mut libc::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let r = libc::pthread_attr_getstack(&attr, &mut lo, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (r == 0).then_some((lo as usize, lo as usize + size))
    }
}

//! The sleep family: `sleep`, `usleep`, `nanosleep`, `clock_nanosleep`.
//!
//! The kernel cannot restart a sleep once a handler ran, even with
//! SA_RESTART. The wrappers re-issue it with an absolute deadline: the full
//! duration is slept across preemptions, and only the program's own signals
//! surface as EINTR (with the remaining time, as libc reports it).

use libc::{c_int, c_uint, timespec};

use super::parking::{self, Hook};
use super::call::{Mark, blocking};
use crate::base::sys::{add, now, real, remaining, set_errno};

type ClockNanosleepFn = unsafe extern "C" fn(libc::clockid_t, c_int, *const timespec, *mut timespec) -> c_int;

fn real_clock_nanosleep() -> Option<ClockNanosleepFn> {
    real!("clock_nanosleep", ClockNanosleepFn)
}

pub(crate) fn prepare() {
    let _ = real_clock_nanosleep();
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
    if let Some(h) = parking::hook() {
        let relative_rem = if flags & libc::TIMER_ABSTIME == 0 { rem } else { std::ptr::null_mut() };
        if let Some(e) = parked_sleep(h, clock, &deadline, relative_rem) {
            return e;
        }
    }
    let mark = Mark::now();
    loop {
        // SAFETY: valid deadline pointer; no remainder needed for ABSTIME.
        let e = blocking(|| unsafe { real(clock, libc::TIMER_ABSTIME, &deadline, std::ptr::null_mut()) });
        if e != libc::EINTR {
            return e;
        }
        if mark.preempted_only() {
            continue; // interrupted by preemption only: keep sleeping
        }
        if flags & libc::TIMER_ABSTIME == 0 && !rem.is_null() {
            // SAFETY: caller-provided writable remainder.
            unsafe { *rem = remaining(clock, &deadline) };
        }
        return libc::EINTR;
    }
}

/// A sleep until `deadline` on `clock` with a park hook: parks until then,
/// converting a `CLOCK_REALTIME` or `CLOCK_BOOTTIME` deadline to
/// `CLOCK_MONOTONIC` at each park and checking it on its own clock when the
/// hook returns (so a clock change makes it park again, or end). Returns
/// the sleep's result (0, or EINTR with what is left in `rem` when the
/// program's handler ran on the function's side meanwhile), or None when it
/// cannot park: sleep the blocking way.
fn parked_sleep(h: Hook, clock: libc::clockid_t, deadline: &timespec, rem: *mut timespec) -> Option<c_int> {
    if !matches!(clock, libc::CLOCK_MONOTONIC | libc::CLOCK_REALTIME | libc::CLOCK_BOOTTIME) {
        return None;
    }
    let mark = Mark::now();
    loop {
        let left = remaining(clock, deadline);
        if left.tv_sec == 0 && left.tv_nsec == 0 {
            mark.restore_errno();
            return Some(0);
        }
        let at = add(now(libc::CLOCK_MONOTONIC), &left);
        if !parking::sleep_until(h, std::time::Duration::new(at.tv_sec as u64, at.tv_nsec as u32)) {
            return None;
        }
        if mark.program_handler_ran(false) {
            if !rem.is_null() {
                // SAFETY: caller-provided writable remainder.
                unsafe { *rem = remaining(clock, deadline) };
            }
            return Some(libc::EINTR);
        }
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

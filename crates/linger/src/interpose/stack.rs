//! `pthread_getattr_np`: which stack is the caller on?
//!
//! Garbage collectors and language runtimes ask it for the bounds of the
//! current thread's stack, to scan it or to check for overflow. Inside a
//! preemptible function the thread runs on the function's own stack, not the
//! one glibc knows, so we report that one (for the calling thread only).

use libc::c_int;

use crate::sys::real;
use crate::thread::ts;

type GetattrFn = unsafe extern "C" fn(libc::pthread_t, *mut libc::pthread_attr_t) -> c_int;

fn real_getattr() -> Option<GetattrFn> {
    real!("pthread_getattr_np", GetattrFn)
}

pub(crate) fn prepare() {
    let _ = real_getattr();
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

/// # Safety
/// Same contract as GNU `pthread_getattr_np`.
#[no_mangle]
pub unsafe extern "C" fn pthread_getattr_np(thread: libc::pthread_t, attr: *mut libc::pthread_attr_t) -> c_int {
    let Some(real) = real_getattr() else { return libc::ENOSYS };
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(thread, attr) };
    let frame = ts().current.get();
    // SAFETY: pthread_self has no preconditions.
    if r != 0 || frame.is_null() || unsafe { libc::pthread_equal(thread, libc::pthread_self()) } == 0 {
        return r;
    }
    // SAFETY: `current` is the live running function; `attr` was just
    // initialised by libc.
    unsafe {
        let f = &*frame;
        libc::pthread_attr_setstack(attr, f.stack_lo as *mut libc::c_void, f.stack_hi - f.stack_lo);
        libc::pthread_attr_setguardsize(attr, f.guard.1 - f.guard.0);
    }
    r
}

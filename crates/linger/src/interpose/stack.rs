//! `pthread_getattr_np`: which stack is the caller on?
//!
//! Garbage collectors and language runtimes ask it for the bounds of the
//! current thread's stack, to scan it or to check for overflow. Inside a
//! preemptible function the thread runs on the function's own stack, not the
//! one glibc knows, so we report that one (for the calling thread only).

use libc::c_int;

use crate::base::sys::real_getattr;
use crate::state::thread::ts;

pub(crate) fn prepare() {
    let _ = real_getattr();
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

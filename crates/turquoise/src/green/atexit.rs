//! Thread-local destructors registered inside a green thread belong to it.
//!
//! std registers the destructor of each `thread_local!` value with glibc's
//! `__cxa_thread_atexit_impl` (C++ does the same for `thread_local`
//! objects). glibc would run them when the worker's OS thread ends, on the
//! worker's values; a green thread's values live in its image
//! (`tls.rs`), and die with it. So the executable's definition of that
//! function (this one: std's weak reference binds to it) keeps the
//! registrations made inside a green thread on the thread's own list, run
//! at its end with its image installed, and passes the others to glibc.

use libc::{c_int, c_void};

use super::records;

type Dtor = unsafe extern "C" fn(*mut c_void);
type Real = unsafe extern "C" fn(Dtor, *mut c_void, *mut c_void) -> c_int;

/// # Safety
/// Same contract as glibc's `__cxa_thread_atexit_impl`: `dtor(obj)` must be
/// sound to call once when the calling thread ends.
#[no_mangle]
pub unsafe extern "C" fn __cxa_thread_atexit_impl(dtor: Dtor, obj: *mut c_void, dso: *mut c_void) -> c_int {
    if records::register_dtor(dtor, obj) {
        return 0;
    }
    static REAL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let real = *REAL.get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the
        // definition after the executable's (glibc's).
        unsafe { libc::dlsym(libc::RTLD_NEXT, c"__cxa_thread_atexit_impl".as_ptr()) as usize }
    });
    if real == 0 {
        // No glibc support (older than 2.18): the value is never destroyed,
        // which std accepts of platforms without it.
        return 0;
    }
    // SAFETY: glibc's function has this signature; arguments forwarded.
    unsafe { std::mem::transmute::<usize, Real>(real)(dtor, obj, dso) }
}

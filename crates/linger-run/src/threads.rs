//! With `--isolate`, every thread of the program uses main's libset.
//!
//! Only `main` is a preemptible function, but the program is one program:
//! an object a library made on main's thread (in main's copies) may be used
//! by any of its threads. A thread that called the program's own copies
//! instead would split the library's state in two. So threads the program
//! starts begin in main's libset; they are never preempted, and use the
//! copies as any multithreaded program uses a library, under its own locks.

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_void, pthread_attr_t, pthread_t};

static PROGRAM_LIBSET: AtomicUsize = AtomicUsize::new(0);

/// Records main's libset (0: not isolated).
pub(crate) fn program_libset(libset: usize) {
    PROGRAM_LIBSET.store(libset, Ordering::Relaxed);
}

type Start = extern "C" fn(*mut c_void) -> *mut c_void;
type CreateFn = unsafe extern "C" fn(*mut pthread_t, *const pthread_attr_t, Start, *mut c_void) -> c_int;

struct Boxed {
    start: Start,
    arg: *mut c_void,
    libset: usize,
}

extern "C" fn begin(p: *mut c_void) -> *mut c_void {
    // SAFETY: boxed by `pthread_create` below for this thread alone.
    let b = unsafe { Box::from_raw(p as *mut Boxed) };
    gotcha::set_current_libset(b.libset);
    (b.start)(b.arg)
}

fn real() -> Option<CreateFn> {
    static SLOT: AtomicUsize = AtomicUsize::new(0);
    let mut p = SLOT.load(Ordering::Relaxed);
    if p == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds libc's definition.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) } as usize;
        SLOT.store(p, Ordering::Relaxed);
    }
    // SAFETY: glibc's pthread_create has this signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, CreateFn>(p) })
}

/// # Safety
/// Same contract as POSIX `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(t: *mut pthread_t, attr: *const pthread_attr_t, start: Start, arg: *mut c_void) -> c_int {
    let Some(create) = real() else { return libc::ENOSYS };
    let libset = PROGRAM_LIBSET.load(Ordering::Relaxed);
    if libset == 0 {
        // SAFETY: forwarded verbatim.
        return unsafe { create(t, attr, start, arg) };
    }
    let b = Box::into_raw(Box::new(Boxed { start, arg, libset }));
    // SAFETY: `begin` takes the box back on the new thread.
    let r = unsafe { create(t, attr, begin, b as *mut c_void) };
    if r != 0 {
        // SAFETY: no thread was made: the box is still ours.
        drop(unsafe { Box::from_raw(b) });
    }
    r
}

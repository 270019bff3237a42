//! The C ABI of green threads: `include/turquoise.h`, `libturquoise.so`,
//! `libturquoise.a` (which contain linger too, with its C API: one copy of
//! linger's interposed functions and signal handlers per process).
//!
//! pthread-shaped: a program written for one pthread per connection moves to
//! green threads by renaming `pthread_create` to `turq_create_attr`,
//! `pthread_t` to `turq_t`, `pthread_join` to `turq_join` and so on. Errors
//! are return values (0 or an errno code), as with pthreads; `errno` is left
//! alone and nothing aborts or unwinds into C.
//!
//! A `turq_t` is the thread's id: never reused, so a stale or made-up one is
//! refused (`ESRCH`) instead of reaching another thread.

#![allow(non_camel_case_types)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::thread::{self, Builder, Exited, JoinHandle, StackOverflow};

/// A green thread, as C sees it (0 is none).
pub type turq_t = u64;

/// Attributes of a new green thread (`turq_attr_init` first, then the
/// setters; the fields are not part of the API).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct turq_attr_t {
    /// `ATTR_MAGIC` once initialised.
    magic: u32,
    detached: c_int,
    preemptive: c_int,
    stack_size: usize,
    slice_us: u64,
    name: [c_char; 32],
}

const ATTR_MAGIC: u32 = 0x7475_7271; // "turq"

/// `turq_join`'s value for a thread that was cancelled (as `PTHREAD_CANCELED`).
pub const TURQ_CANCELED: isize = -1;
/// `turq_attr_setdetachstate`: the thread can be joined (the default).
pub const TURQ_CREATE_JOINABLE: c_int = 0;
/// `turq_attr_setdetachstate`: nobody joins the thread; it is forgotten at its end.
pub const TURQ_CREATE_DETACHED: c_int = 1;

/// A green thread's start routine.
pub type turq_fn = Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>;

/// Runs `f` on the table of joinable threads, by id. In `critical`: from a
/// green thread, a stop while the lock is held would block every other
/// taker on its worker.
fn with_table<R>(f: impl FnOnce(&mut HashMap<u64, JoinHandle<usize>>) -> R) -> R {
    static T: OnceLock<Mutex<HashMap<u64, JoinHandle<usize>>>> = OnceLock::new();
    linger::critical(|| f(&mut T.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|e| e.into_inner())))
}

/// Runs `f`, turning a panic of ours into `EIO` (none should reach C).
fn guarded(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(libc::EIO)
}

fn attr_ok(a: &turq_attr_t) -> bool {
    a.magic == ATTR_MAGIC
}

/// Starts `start(arg)` on a green thread with default attributes; its id
/// goes to `*thread`. 0, or `EINVAL` (NULL pointers), `EAGAIN` (no stack or
/// memory for it), `ESHUTDOWN` (the runtime has shut down).
///
/// # Safety
/// `thread` is NULL or writable; `start` is safe to call with `arg` on
/// another thread.
#[no_mangle]
pub unsafe extern "C" fn turq_create(thread: *mut turq_t, start: turq_fn, arg: *mut c_void) -> c_int {
    // SAFETY: same contract, no attributes.
    unsafe { turq_create_attr(thread, std::ptr::null(), start, arg) }
}

/// `pthread_create`'s parameters: `attr` may be NULL for the defaults.
///
/// # Safety
/// As `turq_create`; `attr` is NULL or points to a `turq_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn turq_create_attr(thread: *mut turq_t, attr: *const turq_attr_t, start: turq_fn, arg: *mut c_void) -> c_int {
    guarded(|| {
        let Some(start) = start else { return libc::EINVAL };
        if thread.is_null() {
            return libc::EINVAL;
        }
        let mut b = Builder::new();
        let mut detached = false;
        if !attr.is_null() {
            // SAFETY: non-null, and per the contract a `turq_attr_t`.
            let a = unsafe { &*attr };
            if !attr_ok(a) {
                return libc::EINVAL;
            }
            detached = a.detached == TURQ_CREATE_DETACHED;
            if a.stack_size != 0 {
                b = b.stack_size(a.stack_size);
            }
            if a.preemptive == 0 {
                b = b.preemptive(false);
            } else if a.slice_us != 0 {
                b = b.slice(Duration::from_micros(a.slice_us));
            }
            if a.name[0] != 0 {
                // SAFETY: the setter keeps the array NUL-terminated.
                let n = unsafe { CStr::from_ptr(a.name.as_ptr()) };
                b = b.name(n.to_string_lossy());
            }
        }
        // The pointer crosses to the green thread as a number: what it
        // points to is the caller's business, as with pthread_create.
        let arg = arg as usize;
        // SAFETY: the caller promises `start(arg)` may run on another thread.
        let h = match b.spawn(move || unsafe { start(arg as *mut c_void) } as usize) {
            Ok(h) => h,
            Err(e) => return spawn_errno(&e),
        };
        let id = h.thread().id().as_u64().get();
        if detached {
            drop(h);
        } else {
            with_table(|t| t.insert(id, h));
        }
        // SAFETY: non-null, writable per the contract.
        unsafe { *thread = id };
        0
    })
}

fn spawn_errno(e: &std::io::Error) -> c_int {
    match e.kind() {
        std::io::ErrorKind::InvalidInput => libc::EINVAL,
        std::io::ErrorKind::OutOfMemory => libc::EAGAIN,
        _ if e.to_string().contains("shut down") => libc::ESHUTDOWN,
        _ => libc::EAGAIN,
    }
}

/// Waits for `thread` to end (parks a green thread, blocks an OS thread)
/// and stores its value in `*ret` if `ret` is not NULL: what its function
/// returned or passed to `pthread_exit`, or `TURQ_CANCELED` if it was
/// cancelled. 0, or `ESRCH` (no such joinable thread: already joined
/// or detached, or never created), `EDEADLK` (the caller itself), `EFAULT`
/// (it overflowed its stack), `EIO` (it ended by a Rust panic).
///
/// # Safety
/// `ret` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn turq_join(thread: turq_t, ret: *mut *mut c_void) -> c_int {
    guarded(|| {
        if thread != 0 && thread == turq_self() {
            return libc::EDEADLK;
        }
        let Some(h) = with_table(|t| t.remove(&thread)) else { return libc::ESRCH };
        let v = match h.join() {
            Ok(v) => v as *mut c_void,
            Err(e) if e.is_cancelled() => TURQ_CANCELED as *mut c_void,
            Err(e) if e.is_panic() => {
                let p = e.into_panic();
                match p.downcast_ref::<Exited>() {
                    // Ended by pthread_exit: its value, as pthread_join gives.
                    Some(x) => x.value as *mut c_void,
                    None => return if p.is::<StackOverflow>() { libc::EFAULT } else { libc::EIO },
                }
            }
            Err(_) => return libc::EDEADLK,
        };
        if !ret.is_null() {
            // SAFETY: non-null, writable per the contract.
            unsafe { *ret = v };
        }
        0
    })
}

/// Nobody will join `thread`: it is forgotten when it ends. 0 or `ESRCH`.
#[no_mangle]
pub extern "C" fn turq_detach(thread: turq_t) -> c_int {
    guarded(|| match with_table(|t| t.remove(&thread)) {
        Some(h) => {
            drop(h);
            0
        }
        None => libc::ESRCH,
    })
}

/// Cancels `thread` at its next turn (deferred, like
/// `PTHREAD_CANCEL_DEFERRED` with every switch a cancellation point): a
/// thread that waits is unwound; one stopped in the middle of its code is
/// reclaimed (see `docs/safety.md`). `turq_join` then gives `TURQ_CANCELED`.
/// 0 or `ESRCH` (not joinable).
#[no_mangle]
pub extern "C" fn turq_cancel(thread: turq_t) -> c_int {
    guarded(|| {
        if with_table(|t| t.get(&thread).map(|h| h.cancel()).is_some()) {
            0
        } else {
            libc::ESRCH
        }
    })
}

/// Ends the calling green thread with `value` (what `turq_join` gets), as
/// `pthread_exit` ends a pthread: its cleanup handlers and destructors run,
/// its worker goes on. On an ordinary thread it is `pthread_exit`.
///
/// # Safety
/// As `pthread_exit`: nothing below the caller's frames may be needed again.
#[no_mangle]
pub unsafe extern "C-unwind" fn turq_exit(value: *mut c_void) -> ! {
    // SAFETY: the caller's promise; linger's `pthread_exit` ends only the
    // green thread (the function's base catches the unwind, turquoise hands
    // the value to the joiner).
    unsafe { libc::pthread_exit(value) }
}

/// Gives the worker to the other runnable work (an OS thread yields to
/// the OS). Always 0.
#[no_mangle]
pub extern "C" fn turq_yield() -> c_int {
    guarded(|| {
        thread::yield_now();
        0
    })
}

/// The calling green thread, or 0 on an ordinary thread.
#[no_mangle]
pub extern "C" fn turq_self() -> turq_t {
    thread::current().map_or(0, |t| t.id().as_u64().get())
}

/// Non-zero if `a` and `b` are the same thread.
#[no_mangle]
pub extern "C" fn turq_equal(a: turq_t, b: turq_t) -> c_int {
    (a == b) as c_int
}

/// Sets `attr` to the defaults: joinable, preemptive with the runtime's
/// slice, linger's stack size, no name. 0 or `EINVAL` (NULL).
///
/// # Safety
/// `attr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn turq_attr_init(attr: *mut turq_attr_t) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    let a = turq_attr_t { magic: ATTR_MAGIC, detached: TURQ_CREATE_JOINABLE, preemptive: 1, stack_size: 0, slice_us: 0, name: [0; 32] };
    // SAFETY: non-null and writable per the contract.
    unsafe { attr.write(a) };
    0
}

/// Makes `attr` unusable until initialised again. 0 or `EINVAL`.
///
/// # Safety
/// `attr` is NULL or points to a `turq_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn turq_attr_destroy(attr: *mut turq_attr_t) -> c_int {
    // SAFETY: per the contract.
    with_attr(attr, |a| {
        a.magic = 0;
        0
    })
}

/// # Safety
/// `attr` is NULL or points to a `turq_attr_t`.
unsafe fn with_attr(attr: *mut turq_attr_t, f: impl FnOnce(&mut turq_attr_t) -> c_int) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: non-null, and per the contract a `turq_attr_t`.
    let a = unsafe { &mut *attr };
    if !attr_ok(a) {
        return libc::EINVAL;
    }
    f(a)
}

/// Usable stack size in bytes (0: the default; rounded up to 64 KiB at
/// least). `EINVAL` above 1 GiB.
///
/// # Safety
/// `attr` is NULL or points to a `turq_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn turq_attr_setstacksize(attr: *mut turq_attr_t, bytes: usize) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_attr(attr, |a| {
            if bytes > thread::MAX_STACK_SIZE {
                return libc::EINVAL;
            }
            a.stack_size = bytes;
            0
        })
    }
}

/// # Safety
/// `attr` is NULL or points to a `turq_attr_t`; `bytes` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn turq_attr_getstacksize(attr: *const turq_attr_t, bytes: *mut usize) -> c_int {
    if bytes.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: per the contract (read only).
    unsafe {
        with_attr(attr as *mut _, |a| {
            *bytes = a.stack_size;
            0
        })
    }
}

/// The thread's slice in microseconds: how long it runs before it is
/// stopped and put behind the other runnable work. 0: cooperative (stopped
/// never; it switches only when it waits or yields).
///
/// # Safety
/// `attr` is NULL or points to a `turq_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn turq_attr_setslice(attr: *mut turq_attr_t, us: u64) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_attr(attr, |a| {
            a.preemptive = (us != 0) as c_int;
            a.slice_us = us;
            0
        })
    }
}

/// `TURQ_CREATE_JOINABLE` or `TURQ_CREATE_DETACHED`; else `EINVAL`.
///
/// # Safety
/// `attr` is NULL or points to a `turq_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn turq_attr_setdetachstate(attr: *mut turq_attr_t, state: c_int) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_attr(attr, |a| {
            if state != TURQ_CREATE_JOINABLE && state != TURQ_CREATE_DETACHED {
                return libc::EINVAL;
            }
            a.detached = state;
            0
        })
    }
}

/// A name for dumps and tracing (at most 31 bytes are kept).
///
/// # Safety
/// `attr` is NULL or points to a `turq_attr_t`; `name` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn turq_attr_setname(attr: *mut turq_attr_t, name: *const c_char) -> c_int {
    if name.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: per the contract.
    let bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
    // SAFETY: per the contract.
    unsafe {
        with_attr(attr, |a| {
            let n = bytes.len().min(a.name.len() - 1);
            a.name = [0; 32];
            for (d, s) in a.name.iter_mut().zip(&bytes[..n]) {
                *d = *s as c_char;
            }
            0
        })
    }
}

/// Writes the live green threads to `fd`, one line each: id, name, state,
/// what it waits on, worker and counters (as `TURQ_DUMP_SIGNAL` does).
/// 0, or the errno of a failed `write`.
#[no_mangle]
pub extern "C" fn turq_dump(fd: c_int) -> c_int {
    guarded(|| {
        let text = thread::dump_text();
        let mut left = text.as_bytes();
        while !left.is_empty() {
            // SAFETY: writes from our buffer to the caller's descriptor.
            let n = unsafe { libc::write(fd, left.as_ptr().cast(), left.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
                if e == libc::EINTR {
                    continue;
                }
                return e;
            }
            left = &left[n as usize..];
        }
        0
    })
}

/// Starts the runtime green threads run on, with `workers` OS threads (0:
/// one per CPU) and a default slice of `slice_us` (0: 2 ms). Optional: the
/// first `turq_create` starts it otherwise (with `TURQ_WORKERS` and
/// `TURQ_SLICE_US` if set). With `TURQ_DUMP_SIGNAL` set (`SIGQUIT`, `USR1`,
/// a number...), that signal makes the process write its live green threads
/// to stderr (or append them to `TURQ_DUMP_FILE`) and go on. 0, `EBUSY`
/// (already started), `EAGAIN`.
#[no_mangle]
pub extern "C" fn turq_runtime_init(workers: u32, slice_us: u64) -> c_int {
    guarded(|| {
        let slice = (slice_us != 0).then(|| Duration::from_micros(slice_us));
        let workers = (workers != 0).then_some(workers as usize);
        match thread::start_default_runtime(workers, slice) {
            Ok(true) => 0,
            Ok(false) => libc::EBUSY,
            Err(_) => libc::EAGAIN,
        }
    })
}

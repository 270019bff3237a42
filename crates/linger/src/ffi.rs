//! The C ABI: `include/linger.h`, `liblinger.so`, `liblinger.a`.
//!
//! C callers hold a `linger_t` by value. Its `continuation` is an opaque
//! handle (index and generation into a table), never a raw pointer, so a
//! stale, copied or made-up `linger_t` is detected and refused with `EINVAL`
//! instead of being dereferenced. No function here unwinds into C or aborts.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::runtime::handles;
use crate::state::guard::Scope;
use crate::{Builder, Cancelled, Ending, Error, Linger, Stats};

/// A preemptible function as seen from C.
///
/// - Completed: `is_complete` is true and the function owns nothing.
/// - Paused: `is_complete` is false and `continuation` is non-NULL.
/// - Cancelled (by `linger_cancel`, or abandoned after a stack overflow):
///   `is_cancelled` is true and `continuation` is NULL.
/// - Failed launch: all three are false/NULL and `errno` says why.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct linger_t {
    /// The function returned.
    pub is_complete: bool,
    /// The function was cancelled and can never run again.
    pub is_cancelled: bool,
    /// Opaque handle of the paused function, or NULL.
    pub continuation: *mut c_void,
}

/// Per-launch options for `linger_launch_opts` (zero-initialise for defaults).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct linger_opts_t {
    /// Usable stack size in bytes; 0 for the default (`LINGER_STACK_SIZE`, 256 KiB).
    pub stack_size: usize,
    /// May be resumed on a thread other than the launching one. Only for
    /// functions that use no thread-local storage (`__thread`, `errno` kept
    /// across a resume, ...): compiled code caches TLS addresses.
    pub migratable: bool,
    /// Keep the program's signals blocked on the calling thread while the
    /// function is stopped, so that they are handled on its stack when it
    /// resumes (for callers that resume at once; see `Builder::hold_signals`).
    /// Not together with `migratable` (the launch fails with `EINVAL`).
    pub hold_signals: bool,
    /// Leave a function blocked in a system call alone when its deadline
    /// passes, and stop it shortly after the call returns (for callers that
    /// would only resume it at once; see `Builder::preempt_blocked`).
    pub leave_blocked: bool,
    /// Run the function in a libset of its own, so that deadlines inside
    /// the isolated libraries are taken there (see `linger_isolate` and
    /// `Builder::isolated`). Cancelling it resets the libset: nothing the
    /// isolated libraries made or allocated inside the function may be used
    /// outside it.
    pub isolated: bool,
    /// With `isolated`, when every libset is in use: `LINGER_NO_LIBSET_FAIL`
    /// (0, the launch fails with `EAGAIN`), `LINGER_NO_LIBSET_SHARE` (run with
    /// the shared libraries, deferred inside them), or `LINGER_NO_LIBSET_WAIT`
    /// (wait up to `libset_wait_us`, then fail with `EAGAIN`). Other values:
    /// `EINVAL`.
    pub no_libset: c_int,
    /// See `no_libset`.
    pub libset_wait_us: u64,
    /// When the function is cancelled where it stopped at an arbitrary
    /// instruction, give its whole stack back for reuse instead of keeping
    /// the live part mapped for good. Only if nothing outside the function
    /// keeps a pointer into its stack (see `Builder::reuse_stack_on_cancel`).
    pub reuse_stack: bool,
    /// A deadline may stop the function in a futex wait inside libc's
    /// synchronisation functions (`pthread_mutex_lock`, `pthread_cond_wait`,
    /// `sem_wait`...; see `Builder::stop_in_futex_waits`).
    pub stop_in_futex_waits: bool,
}

/// `linger_opts_t::no_libset`: fail the launch with `EAGAIN`.
pub const LINGER_NO_LIBSET_FAIL: c_int = 0;
/// `linger_opts_t::no_libset`: run with the shared libraries.
pub const LINGER_NO_LIBSET_SHARE: c_int = 1;
/// `linger_opts_t::no_libset`: wait up to `libset_wait_us` for a libset.
pub const LINGER_NO_LIBSET_WAIT: c_int = 2;

/// Isolates libraries for functions launched with `isolated` set: `libs`
/// is `"all"` (every library that can be copied) or names separated by
/// commas (`"libpng,libz"`); NULL means `LINGER_ISOLATE`, or `"all"`. Once
/// per process (the same selection again succeeds). Returns 0, or -1 with
/// `errno`: `EINVAL` (a bad selection, or a different selection
/// than the first), `ENOENT` (a library is not loaded), `ENOTSUP` (a
/// library named cannot be copied: the executable, the loader, glibc's
/// other libraries and the C++ runtime (`libm`, `libpthread`, `libstdc++`,
/// `libgcc_s`...), one loaded by `LD_PRELOAD`, or one whose variables the
/// program uses directly). libc is accepted when named (`"libc"`, or
/// `"libc,libpng16"`), and left shared by `"all"`. Optional: the first
/// isolated launch does it.
///
/// # Safety
/// `libs` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn linger_isolate(libs: *const c_char) -> c_int {
    let sel = if libs.is_null() {
        gotcha::Selection::from_env().unwrap_or(Ok(gotcha::Selection::All))
    } else {
        // SAFETY: a C string by the contract.
        match unsafe { std::ffi::CStr::from_ptr(libs) }.to_str() {
            Ok(s) => gotcha::Selection::parse(s),
            Err(_) => {
                set_errno(libc::EINVAL);
                return -1;
            }
        }
    };
    let r = sel.map_err(Error::from).and_then(|s| crate::isolate(&s));
    match r {
        Ok(_) => 0,
        Err(e) => {
            set_errno(match &e {
                Error::Isolation(gotcha::Error::NotLoaded(_)) => libc::ENOENT,
                Error::Isolation(gotcha::Error::Uncopyable { .. }) => libc::ENOTSUP,
                Error::Isolation(_) => libc::EINVAL,
                e => e.errno(),
            });
            -1
        }
    }
}

/// The C function type run by `linger_launch`.
pub type linger_fn = extern "C" fn(*mut c_void);

struct SendPtr(*mut c_void);
// SAFETY: the pointer is only handed back to the C function, which the C
// caller promises may run wherever it resumes the continuation.
unsafe impl Send for SendPtr {}

const NONE: linger_t = linger_t { is_complete: false, is_cancelled: false, continuation: std::ptr::null_mut() };

fn set_errno(e: i32) {
    // SAFETY: errno location is valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

fn refused(r: handles::Refused) -> i32 {
    set_errno(match r {
        handles::Refused::Invalid => libc::EINVAL,
        handles::Refused::Busy => libc::EBUSY,
    });
    -1
}

/// Runs `f` with preemption deferred and panics turned into `EIO`.
fn guarded<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    let _scope = Scope::enter_from_c();
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        set_errno(libc::EIO);
        on_panic
    })
}

/// A launch from C ended: if its function ended by `pthread_exit` (which
/// leaves it cancelled), the thread ends here, out of the Rust frames.
#[inline(always)]
fn ended(l: linger_t) -> linger_t {
    if l.is_cancelled {
        crate::machine::exit::end_thread_if_due();
    }
    l
}

/// False, with `errno` `EDEADLK`, inside a signal handler of the program's
/// (see `crate::refuse_in_signal_handler`).
fn allowed_here() -> bool {
    match crate::refuse_in_signal_handler() {
        Ok(()) => true,
        Err(e) => {
            set_errno(e.errno());
            false
        }
    }
}

fn timeout(us: u64) -> Duration {
    if us == u64::MAX {
        Duration::MAX
    } else {
        Duration::from_micros(us)
    }
}

/// Stores the outcome of a launch or resume in `l`. Returns false (errno
/// `ENOMEM`, `l` untouched) when there is no memory to record a paused
/// function: it is cancelled then, as if never launched.
fn publish(l: &mut linger_t, r: Linger<()>) -> bool {
    match r {
        Linger::Completion(()) => *l = linger_t { is_complete: true, ..NONE },
        Linger::Continuation(c) => {
            match handles::insert(c) {
                Ok(h) => *l = linger_t { continuation: h, ..NONE },
                Err(c) => {
                    drop(c); // cancels it, outside the table's lock
                    set_errno(libc::ENOMEM);
                    return false;
                }
            }
        }
        Linger::Poison => *l = linger_t { is_cancelled: true, ..NONE },
    }
    true
}

fn launch_with(func: Option<extern "C" fn(*mut c_void)>, timeout_us: u64, arg: *mut c_void, b: Builder) -> linger_t {
    let Some(func) = func else {
        set_errno(libc::EINVAL);
        return NONE;
    };
    // Before `guarded`: the end of its scope could stop an interrupted
    // function inside the handler.
    if !allowed_here() {
        return NONE;
    }
    guarded(NONE, || {
        let arg = SendPtr(arg);
        // Called as "C-unwind": a `pthread_exit` inside unwinds the C
        // function's frames and this one on its way to the function's base
        // (`crate::machine::exit`); as "C" the call would abort the process there.
        // SAFETY: same calling convention; only the unwinding contract
        // differs, and C code raises no Rust panics.
        let func = unsafe { std::mem::transmute::<extern "C" fn(*mut c_void), unsafe extern "C-unwind" fn(*mut c_void)>(func) };
        let f = move || {
            let arg = arg;
            // SAFETY: the C caller's function, called with its argument.
            unsafe { func(arg.0) }
        };
        match b.launch_ending(f, timeout(timeout_us), Ending::ByCaller) {
            Ok(r) => {
                let mut l = NONE;
                publish(&mut l, r);
                l
            }
            Err(e) => {
                set_errno(e.errno());
                if matches!(e, Error::StackOverflow { .. }) {
                    linger_t { is_cancelled: true, ..NONE }
                } else {
                    NONE
                }
            }
        }
    })
}

/// Runs `func(arg)` on its own stack for at most `timeout_us` microseconds
/// (slices shorter than the cost of arming the timer plus `LINGER_RETRY_US`
/// are rounded up to it). `0` only sets the function up; `UINT64_MAX` means
/// no limit. On failure the
/// result has `is_complete == false` and `continuation == NULL`, and `errno`
/// is set: `EINVAL` (NULL `func`), `ENOMEM` (no memory for the stack or for
/// the handle; a function that had started is then cancelled), `EAGAIN` (no timer),
/// `EFAULT` (stack overflow: the function was abandoned, `is_cancelled` set),
/// `EDEADLK` (called from a signal handler, or from a Rust `Drop` run by a
/// panic: not allowed there, nothing was done).
///
/// `pthread_exit` inside the function (or a cancellation of the thread
/// acted on there) unwinds the function, running its cleanup handlers, and
/// then ends the calling thread from this call (or from `linger_resume`)
/// with the same value, running the caller's handlers: as if the function
/// had been an ordinary call.
///
/// Async-signal-safety: `linger_launch`, `linger_launch_opts`,
/// `linger_resume` and `linger_cancel` are not async-signal-safe and refuse
/// calls from a signal handler the program installed (`EDEADLK`).
/// `linger_yielded`, `linger_is_preemptible` and `linger_stats` are safe
/// there. `linger_pause` and `linger_critical_begin`/`_end` belong to the
/// function's own flow: don't call them from a handler.
#[no_mangle]
pub extern "C-unwind" fn linger_launch(func: Option<extern "C" fn(*mut c_void)>, timeout_us: u64, arg: *mut c_void) -> linger_t {
    ended(launch_with(func, timeout_us, arg, Builder::new()))
}

/// Like `linger_launch`, with options (`opts` may be NULL).
///
/// # Safety
/// `opts` must be NULL or point to a readable `linger_opts_t`.
#[no_mangle]
pub unsafe extern "C-unwind" fn linger_launch_opts(
    func: Option<extern "C" fn(*mut c_void)>,
    timeout_us: u64,
    arg: *mut c_void,
    opts: *const linger_opts_t,
) -> linger_t {
    // SAFETY: NULL or readable per the contract.
    let o = unsafe { opts.as_ref() }.copied().unwrap_or_default();
    // SAFETY: the C caller asserts with `migratable` that the function uses no
    // thread-local storage (documented on linger_opts_t).
    let no_libset = match o.no_libset {
        LINGER_NO_LIBSET_FAIL => gotcha::Exhausted::Fail,
        LINGER_NO_LIBSET_SHARE => gotcha::Exhausted::Share,
        LINGER_NO_LIBSET_WAIT => gotcha::Exhausted::Wait(std::time::Duration::from_micros(o.libset_wait_us)),
        _ => {
            set_errno(libc::EINVAL);
            return NONE;
        }
    };
    let mut b = unsafe { Builder::new().migratable(o.migratable) }
        .hold_signals(o.hold_signals)
        .preempt_blocked(!o.leave_blocked)
        .stop_in_futex_waits(o.stop_in_futex_waits)
        .when_no_libset(no_libset);
    // SAFETY: the C caller promises with `isolated` that nothing the
    // isolated libraries made inside the function is used outside it
    // (documented on the field).
    b = unsafe { b.isolated(o.isolated) };
    // SAFETY: the C caller asserts with `reuse_stack` that nothing points
    // into the function's stack once it is cancelled (documented on the field).
    b = unsafe { b.reuse_stack_on_cancel(o.reuse_stack) };
    if o.stack_size != 0 {
        b = b.stack_size(o.stack_size);
    }
    ended(launch_with(func, timeout_us, arg, b))
}

/// Continues a paused function for at most `timeout_us` microseconds (`0`
/// does nothing, `UINT64_MAX` means no limit). Returns 0 (check
/// `is_complete`), or -1 with `errno`: `EINVAL` (NULL, failed launch, or not a
/// live continuation), `ECANCELED` (cancelled), `EBUSY` (already running),
/// `EXDEV` (launched on another thread, not migratable), `EFAULT` (stack
/// overflow: now cancelled), `EAGAIN` (timer), `EDEADLK` (from a signal
/// handler, or while unwinding; see `linger_launch`). Resuming a completed function
/// returns 0 and does nothing.
///
/// # Safety
/// `l` must be NULL or point to a writable `linger_t`.
#[no_mangle]
pub unsafe extern "C-unwind" fn linger_resume(l: *mut linger_t, timeout_us: u64) -> i32 {
    // SAFETY: NULL or valid per the contract.
    let Some(l) = (unsafe { l.as_mut() }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if l.is_complete {
        return 0;
    }
    if l.is_cancelled {
        set_errno(libc::ECANCELED);
        return -1;
    }
    if !allowed_here() {
        return -1;
    }
    let r = guarded(-1, || {
        let mut lease = match handles::lease(l.continuation) {
            Ok(x) => x,
            Err(r) => return refused(r),
        };
        let res = crate::resume_ending(lease.linger(), timeout(timeout_us), Ending::ByCaller).map(|_| ());
        if let Some(ended) = lease.end() {
            publish(l, ended);
        }
        match res {
            Ok(()) => 0,
            Err(e) => {
                set_errno(e.errno());
                -1
            }
        }
    });
    if l.is_cancelled {
        crate::machine::exit::end_thread_if_due();
    }
    r
}

/// Cancels a paused function and frees everything the runtime holds for it.
/// A C function is never unwound (that is not defined through C frames): it
/// simply never runs again, as if its thread had been killed at the
/// instruction where it stopped. Whatever it allocated stays allocated, locks
/// it held stay held, and memory it was writing, including the caller's
/// (`arg` and anything reachable from it), is left exactly as far as the
/// write had got: a structure half-way through an update stays that way, so
/// let functions write caller memory only inside `linger_critical_begin`/
/// `linger_critical_end`, or discard that memory after a cancel. The live part
/// of its stack stays mapped and is never reused (pointers to its locals that
/// it handed out stay valid); the rest is released. Returns 0; on a completed or never-launched `linger_t`, 0 and
/// nothing happens. Returns -1 with `errno` for NULL (`EINVAL`), an already
/// cancelled function (`EALREADY`), a stale or made-up handle (`EINVAL`),
/// one that is running (`EBUSY`), or a call from a signal handler (`EDEADLK`).
///
/// # Safety
/// `l` must be NULL or point to a writable `linger_t`.
#[no_mangle]
pub unsafe extern "C" fn linger_cancel(l: *mut linger_t) -> i32 {
    // SAFETY: NULL or valid per the contract.
    let Some(l) = (unsafe { l.as_mut() }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if l.is_cancelled {
        set_errno(libc::EALREADY);
        return -1;
    }
    if l.is_complete || l.continuation.is_null() {
        return 0;
    }
    if !allowed_here() {
        return -1;
    }
    guarded(-1, || {
        let mut r = match handles::lease(l.continuation) {
            Ok(lease) => lease.remove(), // the handle is stale from now on
            Err(r) => return refused(r),
        };
        let _: Cancelled = r.cancel();
        *l = linger_t { is_cancelled: true, ..NONE };
        0
    })
}

/// Inside a preemptible function: return to the caller now. Elsewhere: nothing.
#[no_mangle]
pub extern "C" fn linger_pause() {
    // Stopped inside an `extern "C"` frame: cancellation must not unwind it.
    crate::handlers::preempt::pause(false);
}

/// True if the function paused itself with `linger_pause` (false for NULL).
///
/// # Safety
/// `l` must be NULL or point to a readable `linger_t`.
#[no_mangle]
pub unsafe extern "C" fn linger_yielded(l: *const linger_t) -> bool {
    // SAFETY: NULL or valid per the contract.
    let Some(l) = (unsafe { l.as_ref() }) else { return false };
    if l.is_complete || l.is_cancelled {
        return false;
    }
    // One atomic load of the handle's slot: nothing to hold, nothing to wait
    // for, safe inside a preemptible function and in a signal handler.
    handles::yielded(l.continuation)
}

/// True when called from inside a preemptible function.
#[no_mangle]
pub extern "C" fn linger_is_preemptible() -> bool {
    crate::is_preemptible()
}

/// Opens a no-preemption scope (nestable); a deadline that passes inside it is
/// taken at the matching outermost `linger_critical_end`.
#[no_mangle]
pub extern "C" fn linger_critical_begin() {
    std::mem::forget(Scope::enter_from_c());
}

/// Closes a scope opened by `linger_critical_begin`. Returns 0, or -1 with
/// `EINVAL` if no scope is open.
#[no_mangle]
pub extern "C" fn linger_critical_end() -> i32 {
    if crate::handlers::preempt::critical_depth() == 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    crate::state::guard::exit(false);
    0
}

/// Copies the calling thread's most recent preemption into `out`. Returns 1,
/// 0 if this thread has seen none (`out` untouched), or -1 with `EINVAL` for
/// NULL.
///
/// # Safety
/// `out` must be NULL or point to a writable `linger_preemption_t`.
#[no_mangle]
pub unsafe extern "C" fn linger_last_preemption(out: *mut crate::Preemption) -> i32 {
    // SAFETY: NULL or valid per the contract.
    match unsafe { out.as_mut() } {
        Some(o) => match crate::last_preemption() {
            Some(p) => {
                *o = p;
                1
            }
            None => 0,
        },
        None => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

/// Copies the calling thread's counters into `out`. Returns 0, or -1 with
/// `EINVAL` for NULL.
///
/// # Safety
/// `out` must be NULL or point to a writable `linger_stats_t`.
#[no_mangle]
pub unsafe extern "C" fn linger_stats(out: *mut Stats) -> i32 {
    // SAFETY: NULL or valid per the contract.
    match unsafe { out.as_mut() } {
        Some(o) => {
            *o = crate::stats();
            0
        }
        None => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

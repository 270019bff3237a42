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
//!
//! `turq_mutex_t`, `turq_cond_t`, `turq_sem_t` and `turq_ec_t` are
//! `turquoise::sync`'s `Mutex`, `Condvar`, `Semaphore` and `EventCount`
//! behind pthread-shaped functions: waiting parks a green thread and blocks
//! an OS thread. NULL, uninitialised (where the magic number says so) and
//! destroyed objects get `EINVAL`; an object is never freed under a call in
//! progress on it (`destroy` answers `EBUSY`).

#![allow(non_camel_case_types)]

use crate::base::id_map::IdMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::sync::{Condvar, EventCount, Semaphore, Versions};
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
fn with_table<R>(f: impl FnOnce(&mut IdMap<u64, JoinHandle<usize>>) -> R) -> R {
    static T: OnceLock<Mutex<IdMap<u64, JoinHandle<usize>>>> = OnceLock::new();
    linger::critical(|| f(&mut T.get_or_init(|| Mutex::new(IdMap::default())).lock().unwrap_or_else(|e| e.into_inner())))
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

/// A yield check, for a green thread made cooperative
/// (`turq_attr_setslice(attr, 0)`: it switches only when it waits or
/// yields): yields if its slice has passed since it last ran, else returns
/// at once (a call and one thread-local load). Call it in long loops, so
/// that the worker's other threads get their turn. Does nothing in a
/// preemptive green thread, an ordinary thread, or a no-yield scope.
/// Always 0.
#[no_mangle]
pub extern "C" fn turq_checkpoint() -> c_int {
    guarded(|| {
        thread::checkpoint();
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
/// first `turq_create` starts it otherwise (with `TURQ_WORKERS`,
/// `TURQ_SLICE_US` and `TURQ_GRANULARITY_US` if set). With `TURQ_DUMP_SIGNAL` set (`SIGQUIT`, `USR1`,
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

// Synchronisation: turquoise::sync's Mutex, Condvar, Semaphore and
// EventCount from C. Each C object is caller-allocated storage holding the
// Rust object's address (allocated by `init`, or at first use after a
// static initialiser) and a count of the calls in progress on it, which
// `destroy` checks: an object in use is refused (`EBUSY`), never freed
// under a waiter.

/// The storage of a `turq_mutex_t`, `turq_cond_t`, `turq_sem_t` or
/// `turq_ec_t` (the fields are not part of the API; all are accessed
/// atomically once initialised).
#[repr(C)]
pub struct turq_sync_object_t {
    /// The kind's magic number while initialised (`DYING` during a destroy,
    /// `DEAD` after it).
    state: u32,
    /// Calls in progress on the object.
    users: u32,
    /// The Rust object's `Box`, or 0 until the first use after a static initialiser.
    obj: usize,
}

/// A mutex (`TURQ_MUTEX_INITIALIZER`, or `turq_mutex_init`): waiting parks
/// a green thread and blocks an OS thread. Error-checking: it records its
/// holder (the green thread, else the OS thread).
#[repr(C)]
pub struct turq_mutex_t {
    o: turq_sync_object_t,
}

/// A condition variable (`TURQ_COND_INITIALIZER`, or `turq_cond_init`).
#[repr(C)]
pub struct turq_cond_t {
    o: turq_sync_object_t,
}

/// A counting semaphore (`turq_sem_init`).
#[repr(C)]
pub struct turq_sem_t {
    o: turq_sync_object_t,
}

/// An event count (`TURQ_EC_INITIALIZER`, or `turq_ec_init`): a version
/// number (modulo 2^31) that waiters sleep on until it changes.
#[repr(C)]
pub struct turq_ec_t {
    o: turq_sync_object_t,
}

/// Mutex attributes: none yet (pass NULL).
pub struct turq_mutexattr_t {
    _none: [u8; 0],
}

/// Condition variable attributes: none yet (pass NULL).
pub struct turq_condattr_t {
    _none: [u8; 0],
}

/// The largest value of a `turq_sem_t` (as `SEM_VALUE_MAX`).
pub const TURQ_SEM_VALUE_MAX: c_uint = i32::MAX as c_uint;

/// `state` after a destroy, and during one.
const DEAD: u32 = 0x6465_6164; // "dead"
const DYING: u32 = 0x6479_6e67; // "dyng"

/// A Rust object behind a C one. The magic numbers are spelt again in
/// cbindgen.toml's static initialisers.
trait Kind: Send + Sync + Sized {
    const MAGIC: u32;
    /// The object of a static initialiser.
    fn fresh() -> Self;
    /// Whether `destroy` must refuse it (besides calls in progress).
    fn busy(&self) -> bool {
        false
    }
}

/// The C mutex: the lock and its holder (`owner_id`; 0 when free).
struct CMutex {
    lock: crate::sync::Mutex<()>,
    owner: AtomicU64,
}

impl Kind for CMutex {
    const MAGIC: u32 = 0x746d_7478; // "tmtx"
    fn fresh() -> CMutex {
        CMutex { lock: crate::sync::Mutex::new(()), owner: AtomicU64::new(0) }
    }
    fn busy(&self) -> bool {
        self.owner.load(Ordering::Acquire) != 0 || self.lock.is_locked()
    }
}

impl Kind for Condvar {
    const MAGIC: u32 = 0x7463_6e64; // "tcnd"
    fn fresh() -> Condvar {
        Condvar::new()
    }
}

impl Kind for Semaphore {
    const MAGIC: u32 = 0x7473_656d; // "tsem"
    fn fresh() -> Semaphore {
        Semaphore::new(0).expect("0 permits")
    }
}

impl Kind for EventCount {
    const MAGIC: u32 = 0x7465_7663; // "tevc"
    fn fresh() -> EventCount {
        EventCount::new()
    }
}

/// A single-producer event count (`turq_ec_init_single`).
impl Kind for Versions {
    const MAGIC: u32 = 0x7465_7370; // "tesp"
    fn fresh() -> Versions {
        Versions::single_producer_raw()
    }
}

/// The fields of a C object, as atomics.
struct Slot<'a> {
    state: &'a AtomicU32,
    users: &'a AtomicU32,
    obj: &'a AtomicUsize,
}

/// # Safety
/// `o` is NULL or points to a `turq_sync_object_t` (initialised or not)
/// that stays allocated for `'a` and is accessed only atomically meanwhile.
unsafe fn slot<'a>(o: *mut turq_sync_object_t) -> Option<Slot<'a>> {
    if o.is_null() {
        return None;
    }
    // SAFETY: per the contract: valid, aligned (the C type's alignment is
    // the atomics'), and only accessed atomically while we use it.
    unsafe {
        Some(Slot {
            state: AtomicU32::from_ptr(std::ptr::addr_of_mut!((*o).state)),
            users: AtomicU32::from_ptr(std::ptr::addr_of_mut!((*o).users)),
            obj: AtomicUsize::from_ptr(std::ptr::addr_of_mut!((*o).obj)),
        })
    }
}

/// A call in progress on a C object: its Rust object stays alive (destroy
/// refuses) until this is dropped.
struct Held<'a, T> {
    users: &'a AtomicU32,
    obj: &'a T,
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        self.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts a call on the C object at `o`: `EINVAL` if it is NULL, not
/// initialised as a `T`, or destroyed.
///
/// # Safety
/// As [`slot`].
unsafe fn enter<'a, T: Kind>(o: *mut turq_sync_object_t) -> Result<Held<'a, T>, c_int> {
    // SAFETY: per the contract.
    let s = unsafe { slot(o) }.ok_or(libc::EINVAL)?;
    // Counted before the state is read, as `destroy` marks the state before
    // it reads the count (both SeqCst): one of the two sees the other.
    s.users.fetch_add(1, Ordering::SeqCst);
    let counted = Held { users: s.users, obj: &() };
    if s.state.load(Ordering::SeqCst) != T::MAGIC {
        return Err(libc::EINVAL);
    }
    let mut p = s.obj.load(Ordering::Acquire);
    if p == 0 {
        let new = Box::into_raw(Box::new(T::fresh())) as usize;
        match s.obj.compare_exchange(0, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => p = new,
            Err(now) => {
                // SAFETY: ours, just made, never shared.
                drop(unsafe { Box::from_raw(new as *mut T) });
                p = now;
            }
        }
    }
    std::mem::forget(counted);
    // SAFETY: a `Box<T>` (the magic says which kind) that `destroy` does not
    // free while this call is counted.
    Ok(Held { users: s.users, obj: unsafe { &*(p as *const T) } })
}

/// Runs `f` on the C object at `o` (see [`enter`]), guarded.
///
/// # Safety
/// As [`slot`].
unsafe fn with_obj<T: Kind>(o: *mut turq_sync_object_t, f: impl FnOnce(&T) -> c_int) -> c_int {
    // SAFETY: per the contract.
    guarded(|| match unsafe { enter::<T>(o) } {
        Ok(h) => f(h.obj),
        Err(e) => e,
    })
}

/// Makes `o` a `T` holding `value` (over whatever it held: an object still
/// in use is leaked, not freed).
///
/// # Safety
/// As [`slot`].
unsafe fn init_obj<T: Kind>(o: *mut turq_sync_object_t, value: impl FnOnce() -> Result<T, c_int>) -> c_int {
    guarded(|| {
        // SAFETY: per the contract.
        let Some(s) = (unsafe { slot(o) }) else { return libc::EINVAL };
        let value = match value() {
            Ok(v) => v,
            Err(e) => return e,
        };
        s.users.store(0, Ordering::SeqCst);
        s.obj.store(Box::into_raw(Box::new(value)) as usize, Ordering::Release);
        s.state.store(T::MAGIC, Ordering::SeqCst);
        0
    })
}

/// A new `T`, for an `init` whose attributes must be NULL (none exist yet).
fn without_attr<T: Kind, A>(attr: *const A) -> Result<T, c_int> {
    if attr.is_null() {
        Ok(T::fresh())
    } else {
        Err(libc::EINVAL)
    }
}

/// Frees the `T` at `o`: `EINVAL` if it is not one, `EBUSY` while a call is
/// in progress on it or it is [`Kind::busy`].
///
/// # Safety
/// As [`slot`].
unsafe fn destroy_obj<T: Kind>(o: *mut turq_sync_object_t) -> c_int {
    guarded(|| {
        // SAFETY: per the contract.
        let Some(s) = (unsafe { slot(o) }) else { return libc::EINVAL };
        if s.state.compare_exchange(T::MAGIC, DYING, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return libc::EINVAL;
        }
        let p = s.obj.load(Ordering::Acquire);
        // SAFETY: a `Box<T>`: no call can start now (the state is `DYING`).
        let busy = s.users.load(Ordering::SeqCst) != 0 || (p != 0 && unsafe { &*(p as *const T) }.busy());
        if busy {
            s.state.store(T::MAGIC, Ordering::SeqCst);
            return libc::EBUSY;
        }
        s.obj.store(0, Ordering::Relaxed);
        s.state.store(DEAD, Ordering::SeqCst);
        if p != 0 {
            // SAFETY: the `Box` `init_obj` or `enter` made; nobody uses it
            // (no call counted) and nobody can find it any more.
            drop(unsafe { Box::from_raw(p as *mut T) });
        }
        0
    })
}

/// The caller, as a mutex records its holder: the green thread's id, or
/// the OS thread's id with the top bit set.
fn owner_id() -> u64 {
    match turq_self() {
        0 => (1 << 63) | gettid(),
        g => g,
    }
}

fn gettid() -> u64 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::gettid() as u64 }
}

/// The `Instant` of the `CLOCK_REALTIME` time `abstime` (the realtime clock
/// is read once: a later step of it does not move the deadline). `EINVAL`
/// for NULL or a `tv_nsec` outside [0, 10^9).
///
/// # Safety
/// `abstime` is NULL or readable.
unsafe fn deadline(abstime: *const libc::timespec) -> Result<Instant, c_int> {
    // SAFETY: per the contract.
    let t = unsafe { abstime.as_ref() }.ok_or(libc::EINVAL)?;
    if !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(libc::EINVAL);
    }
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes the clock's time into `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    let left = (t.tv_sec as i128 - now.tv_sec as i128) * 1_000_000_000 + (t.tv_nsec as i128 - now.tv_nsec as i128);
    let left = Duration::from_nanos(left.clamp(0, u64::MAX as i128) as u64);
    Ok(crate::sync::deadline(left))
}

/// Makes `m` an unlocked mutex. `attr` must be NULL (no attributes yet).
/// 0 or `EINVAL`. Initialising a mutex in use is the caller's error (the
/// old one is leaked).
///
/// # Safety
/// `m` is NULL or points to writable `turq_mutex_t` storage, not accessed
/// by others meanwhile.
#[no_mangle]
pub unsafe extern "C" fn turq_mutex_init(m: *mut turq_mutex_t, attr: *const turq_mutexattr_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { init_obj(obj_of(m), || without_attr::<CMutex, _>(attr)) }
}

/// Locks `m`: parks a green thread, blocks an OS thread, until it is free.
/// A green thread stopped by its slice while it holds it keeps it, and the
/// others of its worker that want it park (no worker is blocked). 0,
/// `EINVAL` (NULL, not initialised, destroyed), `EDEADLK` (the caller holds
/// it), `EIO` (the calling green thread was cancelled meanwhile: not held).
///
/// # Safety
/// `m` is NULL or points to a `turq_mutex_t` (initialised or not).
#[no_mangle]
pub unsafe extern "C" fn turq_mutex_lock(m: *mut turq_mutex_t) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_mutex(m, |x, me| {
            x.lock.lock_raw();
            x.held_by(me)
        })
    }
}

/// Locks `m` if it is free now: 0, `EBUSY` (held, by the caller too), `EINVAL`.
///
/// # Safety
/// As `turq_mutex_lock`.
#[no_mangle]
pub unsafe extern "C" fn turq_mutex_trylock(m: *mut turq_mutex_t) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(m), |x: &CMutex| match x.lock.try_lock_raw() {
            true => x.held_by(owner_id()),
            false => libc::EBUSY,
        })
    }
}

/// Locks `m`, waiting until the `CLOCK_REALTIME` time `abstime` at most
/// (as `pthread_mutex_timedlock`): 0, `ETIMEDOUT`, `EINVAL` (also for a
/// NULL or malformed `abstime`), `EDEADLK`, `EIO`.
///
/// # Safety
/// As `turq_mutex_lock`; `abstime` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn turq_mutex_timedlock(m: *mut turq_mutex_t, abstime: *const libc::timespec) -> c_int {
    // SAFETY: per the contract.
    let at = match unsafe { deadline(abstime) } {
        Ok(at) => at,
        Err(e) => return e,
    };
    // SAFETY: per the contract.
    unsafe {
        with_mutex(m, |x, me| match x.lock.lock_raw_until(at) {
            true => x.held_by(me),
            false => libc::ETIMEDOUT,
        })
    }
}

/// Unlocks `m`: 0, `EPERM` (the caller does not hold it), `EINVAL`.
///
/// # Safety
/// As `turq_mutex_lock`.
#[no_mangle]
pub unsafe extern "C" fn turq_mutex_unlock(m: *mut turq_mutex_t) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(m), |x: &CMutex| {
            if x.owner.compare_exchange(owner_id(), 0, Ordering::Relaxed, Ordering::Relaxed).is_err() {
                return libc::EPERM;
            }
            x.lock.unlock_raw();
            0
        })
    }
}

/// Frees `m`'s resources: 0, `EBUSY` (locked, or a call on it is in
/// progress), `EINVAL` (not initialised, or already destroyed).
///
/// # Safety
/// As `turq_mutex_lock`.
#[no_mangle]
pub unsafe extern "C" fn turq_mutex_destroy(m: *mut turq_mutex_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { destroy_obj::<CMutex>(obj_of(m)) }
}

impl CMutex {
    /// Records `me` as the holder of the lock it just took.
    fn held_by(&self, me: u64) -> c_int {
        self.owner.store(me, Ordering::Relaxed);
        0
    }
}

/// Runs `f` on the mutex at `m` with the caller's id, after refusing a
/// holder that would wait for itself (`EDEADLK`).
///
/// # Safety
/// As `turq_mutex_lock`.
unsafe fn with_mutex(m: *mut turq_mutex_t, f: impl FnOnce(&CMutex, u64) -> c_int) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(m), |x: &CMutex| {
            let me = owner_id();
            if x.owner.load(Ordering::Relaxed) == me {
                return libc::EDEADLK;
            }
            f(x, me)
        })
    }
}

/// The object storage of a C object (NULL for NULL).
fn obj_of<T>(p: *mut T) -> *mut turq_sync_object_t {
    // Every C object is a `repr(C)` struct whose only field is the storage.
    p.cast()
}

/// Makes `c` a condition variable. `attr` must be NULL (no attributes yet:
/// timed waits take `CLOCK_REALTIME` times). 0 or `EINVAL`.
///
/// # Safety
/// `c` is NULL or points to writable `turq_cond_t` storage, not accessed by
/// others meanwhile.
#[no_mangle]
pub unsafe extern "C" fn turq_cond_init(c: *mut turq_cond_t, attr: *const turq_condattr_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { init_obj(obj_of(c), || without_attr::<Condvar, _>(attr)) }
}

/// Unlocks `m` (which the caller holds), waits for a signal or broadcast
/// on `c` (parks a green thread, blocks an OS thread), and locks `m` again.
/// Wake-ups may be spurious: wait in a loop. 0, `EPERM` (the caller does
/// not hold `m`), `EINVAL`, `EIO` (the calling green thread was cancelled
/// meanwhile: `m` may not be held).
///
/// # Safety
/// `c` and `m` are NULL or point to a `turq_cond_t` and a `turq_mutex_t`
/// (initialised or not).
#[no_mangle]
pub unsafe extern "C" fn turq_cond_wait(c: *mut turq_cond_t, m: *mut turq_mutex_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { cond_wait(c, m, None) }
}

/// `turq_cond_wait` until the `CLOCK_REALTIME` time `abstime` at most:
/// `ETIMEDOUT` then (with `m` locked again), else as `turq_cond_wait`.
///
/// # Safety
/// As `turq_cond_wait`; `abstime` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn turq_cond_timedwait(c: *mut turq_cond_t, m: *mut turq_mutex_t, abstime: *const libc::timespec) -> c_int {
    // SAFETY: per the contract.
    match unsafe { deadline(abstime) } {
        // SAFETY: per the contract.
        Ok(at) => unsafe { cond_wait(c, m, Some(at)) },
        Err(e) => e,
    }
}

/// # Safety
/// As `turq_cond_wait`.
unsafe fn cond_wait(c: *mut turq_cond_t, m: *mut turq_mutex_t, at: Option<Instant>) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(c), |cv: &Condvar| {
            with_obj(obj_of(m), |x: &CMutex| {
                let me = owner_id();
                if x.owner.compare_exchange(me, 0, Ordering::Relaxed, Ordering::Relaxed).is_err() {
                    return libc::EPERM;
                }
                let timed_out = cv.wait_raw(&x.lock, at);
                x.held_by(me);
                if timed_out {
                    libc::ETIMEDOUT
                } else {
                    0
                }
            })
        })
    }
}

/// Wakes one waiter of `c`, if any. 0 or `EINVAL`.
///
/// # Safety
/// `c` is NULL or points to a `turq_cond_t` (initialised or not).
#[no_mangle]
pub unsafe extern "C" fn turq_cond_signal(c: *mut turq_cond_t) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(c), |cv: &Condvar| {
            cv.notify_one();
            0
        })
    }
}

/// Wakes every waiter of `c`. 0 or `EINVAL`.
///
/// # Safety
/// As `turq_cond_signal`.
#[no_mangle]
pub unsafe extern "C" fn turq_cond_broadcast(c: *mut turq_cond_t) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(c), |cv: &Condvar| {
            cv.notify_all();
            0
        })
    }
}

/// Frees `c`'s resources: 0, `EBUSY` (a thread waits on it), `EINVAL`.
///
/// # Safety
/// As `turq_cond_signal`.
#[no_mangle]
pub unsafe extern "C" fn turq_cond_destroy(c: *mut turq_cond_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { destroy_obj::<Condvar>(obj_of(c)) }
}

/// Makes `s` a semaphore of value `value`. 0, or `EINVAL` (NULL, or
/// `value` above `TURQ_SEM_VALUE_MAX`). Unlike `sem_init`, the `turq_sem_*`
/// functions return the error number (0 on success), as pthread's do, and
/// leave `errno` alone.
///
/// # Safety
/// `s` is NULL or points to writable `turq_sem_t` storage, not accessed by
/// others meanwhile.
#[no_mangle]
pub unsafe extern "C" fn turq_sem_init(s: *mut turq_sem_t, value: c_uint) -> c_int {
    if value > TURQ_SEM_VALUE_MAX {
        return libc::EINVAL;
    }
    // SAFETY: per the contract.
    unsafe { init_obj(obj_of(s), || Semaphore::new(value as usize).map_err(|_| libc::EINVAL)) }
}

/// Decrements `s`, waiting while it is 0 (parks a green thread, blocks an
/// OS thread; waiters are served in order). 0, `EINVAL`, `EIO` (the calling
/// green thread was cancelled meanwhile: not decremented).
///
/// # Safety
/// `s` is NULL or points to a `turq_sem_t` (initialised or not).
#[no_mangle]
pub unsafe extern "C" fn turq_sem_wait(s: *mut turq_sem_t) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(s), |x: &Semaphore| {
            x.acquire(1).forget();
            0
        })
    }
}

/// Decrements `s` if it is above 0 now: 0, `EAGAIN`, `EINVAL`.
///
/// # Safety
/// As `turq_sem_wait`.
#[no_mangle]
pub unsafe extern "C" fn turq_sem_trywait(s: *mut turq_sem_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { with_obj(obj_of(s), |x: &Semaphore| x.try_acquire(1).map_or(libc::EAGAIN, taken)) }
}

/// `turq_sem_wait` until the `CLOCK_REALTIME` time `abstime` at most:
/// `ETIMEDOUT` then, else as `turq_sem_wait` (`EINVAL` for a NULL or
/// malformed `abstime` too).
///
/// # Safety
/// As `turq_sem_wait`; `abstime` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn turq_sem_timedwait(s: *mut turq_sem_t, abstime: *const libc::timespec) -> c_int {
    // SAFETY: per the contract.
    let at = match unsafe { deadline(abstime) } {
        Ok(at) => at,
        Err(e) => return e,
    };
    // SAFETY: per the contract.
    unsafe { with_obj(obj_of(s), |x: &Semaphore| x.acquire_until(1, at).map_or(libc::ETIMEDOUT, taken)) }
}

/// A permit taken by a wait: kept (the semaphore's value went down by one).
fn taken(p: crate::sync::SemaphorePermit<'_>) -> c_int {
    p.forget();
    0
}

/// Increments `s`, waking its first waiter if any: 0, `EOVERFLOW` (at
/// `TURQ_SEM_VALUE_MAX`; concurrent posts may pass it by as many as there
/// are posters), `EINVAL`.
///
/// # Safety
/// As `turq_sem_wait`.
#[no_mangle]
pub unsafe extern "C" fn turq_sem_post(s: *mut turq_sem_t) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(s), |x: &Semaphore| {
            if x.available_permits() >= TURQ_SEM_VALUE_MAX as usize {
                return libc::EOVERFLOW;
            }
            x.add_permits(1).map_or(libc::EOVERFLOW, |()| 0)
        })
    }
}

/// Stores `s`'s value in `*value` (0 while threads wait). 0 or `EINVAL`.
///
/// # Safety
/// As `turq_sem_wait`; `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn turq_sem_getvalue(s: *mut turq_sem_t, value: *mut c_int) -> c_int {
    if value.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: per the contract.
    unsafe {
        with_obj(obj_of(s), |x: &Semaphore| {
            // SAFETY: non-null, writable per the contract.
            *value = x.available_permits().min(i32::MAX as usize) as c_int;
            0
        })
    }
}

/// Frees `s`'s resources: 0, `EBUSY` (a thread waits on it), `EINVAL`.
///
/// # Safety
/// As `turq_sem_wait`.
#[no_mangle]
pub unsafe extern "C" fn turq_sem_destroy(s: *mut turq_sem_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { destroy_obj::<Semaphore>(obj_of(s)) }
}

/// Makes `ec` an event count at version 0, for any number of producers.
/// 0 or `EINVAL`.
///
/// An event count replaces a condition variable where the condition is
/// data written without a lock: a waiter reads the version
/// (`turq_ec_value`), looks at the data, and if it must wait calls
/// `turq_ec_wait` with the version it read; a producer changes the data,
/// then increments. A change in between is never missed: the wait returns
/// at once when the version is no longer the one given. An increment
/// nobody waits for is one atomic add.
///
/// # Safety
/// `ec` is NULL or points to writable `turq_ec_t` storage, not accessed by
/// others meanwhile.
#[no_mangle]
pub unsafe extern "C" fn turq_ec_init(ec: *mut turq_ec_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { init_obj(obj_of(ec), || Ok(EventCount::fresh())) }
}

/// Makes `ec` an event count at version 0 for one producer: an increment
/// nobody waits for is one plain (not `lock`ed) `add` on x86-64 and a
/// branch on the CPU flags it set, and waiters pay for it with an
/// asymmetric fence before they sleep. 0 or `EINVAL`.
///
/// The contract: one thread at a time calls `turq_ec_inc` and `turq_ec_add`
/// on it (the producer may change threads, with the hand-over ordered by
/// some other synchronisation). Concurrent increments are not memory-unsafe
/// but may be lost, and with them the wake-ups they owed: a waiter may then
/// sleep until a later increment. The other functions may be called from
/// any thread.
///
/// # Safety
/// As `turq_ec_init`.
#[no_mangle]
pub unsafe extern "C" fn turq_ec_init_single(ec: *mut turq_ec_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { init_obj(obj_of(ec), || Ok(Versions::single_producer_raw())) }
}

/// Stores `ec`'s version in `*value` (it acquires what the increment that
/// made it released). 0 or `EINVAL`.
///
/// # Safety
/// `ec` is NULL or points to a `turq_ec_t` (initialised or not); `value`
/// is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn turq_ec_value(ec: *mut turq_ec_t, value: *mut u32) -> c_int {
    // SAFETY: per the contract.
    unsafe { ec_out(ec, value, |x| x.value()) }
}

/// Adds one to `ec`'s version and wakes its waiters. 0 or `EINVAL`.
///
/// # Safety
/// As `turq_ec_value`.
#[no_mangle]
pub unsafe extern "C" fn turq_ec_inc(ec: *mut turq_ec_t) -> c_int {
    // SAFETY: per the contract.
    unsafe { turq_ec_add(ec, 1) }
}

/// Adds `n` (modulo 2^31) to `ec`'s version and wakes its waiters. 0 or
/// `EINVAL`.
///
/// # Safety
/// As `turq_ec_value`.
#[no_mangle]
pub unsafe extern "C" fn turq_ec_add(ec: *mut turq_ec_t, n: u32) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        match is_single(ec) {
            true => with_obj(obj_of(ec), |x: &Versions| ok(x.add_single(n))),
            false => with_obj(obj_of(ec), |x: &EventCount| ok(x.add(n))),
        }
    }
}

/// Waits until `ec`'s version is not `old` (parks a green thread, blocks
/// an OS thread; returns at once if it already differs) and stores the new
/// version in `*now` if `now` is not NULL. 0, `EINVAL`, `EIO` (the calling
/// green thread was cancelled meanwhile).
///
/// # Safety
/// As `turq_ec_value`, with `now` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn turq_ec_wait(ec: *mut turq_ec_t, old: u32, now: *mut u32) -> c_int {
    // SAFETY: per the contract (NULL `now` allowed: stored nowhere).
    unsafe { ec_out(ec, now, |x| x.wait(old)) }
}

/// `turq_ec_wait` until the `CLOCK_REALTIME` time `abstime` at most:
/// `ETIMEDOUT` then (`*now` untouched), else as `turq_ec_wait` (`EINVAL`
/// for a NULL or malformed `abstime` too).
///
/// # Safety
/// As `turq_ec_wait`; `abstime` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn turq_ec_timedwait(ec: *mut turq_ec_t, old: u32, abstime: *const libc::timespec, now: *mut u32) -> c_int {
    // SAFETY: per the contract.
    let at = match unsafe { deadline(abstime) } {
        Ok(at) => at,
        Err(e) => return e,
    };
    // SAFETY: per the contract.
    unsafe {
        with_versions(ec, |x| match x.wait_timeout(old, at.saturating_duration_since(Instant::now())) {
            Some(v) => store(now, v),
            None => libc::ETIMEDOUT,
        })
    }
}

/// Frees `ec`'s resources: 0, `EBUSY` (a thread waits on it), `EINVAL`.
///
/// # Safety
/// As `turq_ec_value`.
#[no_mangle]
pub unsafe extern "C" fn turq_ec_destroy(ec: *mut turq_ec_t) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        match is_single(ec) {
            true => destroy_obj::<Versions>(obj_of(ec)),
            false => destroy_obj::<EventCount>(obj_of(ec)),
        }
    }
}

/// Runs `f` on the event count at `ec` and stores its result in `*out`
/// (if not NULL).
///
/// # Safety
/// As `turq_ec_wait`, `out` for `now`.
unsafe fn ec_out(ec: *mut turq_ec_t, out: *mut u32, f: impl FnOnce(&Versions) -> u32) -> c_int {
    // SAFETY: per the contract.
    unsafe { with_versions(ec, |x| store(out, f(x))) }
}

/// 0, whatever `_v` was (an add's old version, which C does not get).
fn ok(_v: u32) -> c_int {
    0
}

/// Whether `ec` looks like a single-producer event count now (a call then
/// checks it again as it starts).
///
/// # Safety
/// As `turq_ec_value`.
unsafe fn is_single(ec: *mut turq_ec_t) -> bool {
    // SAFETY: per the contract.
    unsafe { slot(obj_of(ec)) }.is_some_and(|s| s.state.load(Ordering::Relaxed) == Versions::MAGIC)
}

/// Runs `f` on the waiting side of the event count at `ec`, of either flavour.
///
/// # Safety
/// As `turq_ec_value`.
unsafe fn with_versions(ec: *mut turq_ec_t, f: impl FnOnce(&Versions) -> c_int) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        match is_single(ec) {
            true => with_obj(obj_of(ec), f),
            false => with_obj(obj_of(ec), |x: &EventCount| f(x)),
        }
    }
}

/// Stores `v` in `*out` unless it is NULL; 0.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn store(out: *mut u32, v: u32) -> c_int {
    if !out.is_null() {
        // SAFETY: non-null, writable per the contract.
        unsafe { *out = v };
    }
    0
}

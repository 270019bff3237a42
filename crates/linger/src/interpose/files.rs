//! Regular files (anything that seeks), where readiness means nothing:
//! reads and writes at the file position or at an offset, the syncs, and
//! the calls that look a path up (`open`, the `stat` family).
//!
//! Inside a function launched with a park hook (turquoise's green threads):
//!
//! - A read or write first moves what it can with `preadv2`/`pwritev2` and
//!   `RWF_NOWAIT` (page-cache hits), again until done, end of file or
//!   `EAGAIN`. The rest goes to the hook's blocking pool (`Park::offload`)
//!   as one blocking call on a heap copy of the data while the function
//!   parks, so a hit costs one system call and a miss does not stall the
//!   worker.
//! - `fsync`, `fdatasync` and `syncfs`, which wait for the disk by nature
//!   (tens of milliseconds with dirty pages), go to the pool whole.
//!
//! - `open` and `openat` first look the path up in the kernel's caches
//!   alone (`openat2` with `RESOLVE_CACHED`, of an `O_PATH` descriptor,
//!   and its type): a regular file or a directory found there is opened
//!   here, the same way; a lookup that would wait for the disk, and FIFOs
//!   and devices (whose opens may wait for the other end, or have effects),
//!   are opened on the pool. Opens that create or truncate always go to the
//!   pool (the cache cannot answer for them).
//! - The `stat` family (`stat`, `lstat`, `fstatat`, `statx`, and their
//!   `*64` names) looks the path up in the caches alone first, as `open`
//!   does: answered there (found, or not), the call is made here; a lookup
//!   that would wait goes to the pool.
//!
//! The pool works on memory it owns (its copies of the data, the path and
//! the result buffer; see `on_pool`): a function cancelled while its call is on
//! the pool (stopped, its stack reused) leaves the pool writing into nothing
//! of the function's (an open finished there for a cancelled function leaves
//! its descriptor open, as a thread killed after its `open` returned would).
//! Where the hook cannot offload (no hook, a place where the function may
//! not park, no memory for the copy) the call blocks, as it did before.
//!
//! `access`, `readlink`, `opendir`, `mkdir`, `unlink`, `rename` and the
//! like are in `paths.rs`.

use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::sync::mpsc;

use libc::{c_char, c_int, c_void, iovec, mode_t, off_t, size_t, ssize_t};

use super::parking::{self, Hook};
use super::call::retry;
use crate::base::sys::{errno, or_enosys, real, set_errno};

type PreadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, off_t) -> ssize_t;
type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
type PvecFn = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
type SyncFn = unsafe extern "C" fn(c_int) -> c_int;
type OpenAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, mode_t) -> c_int;
type StatxFn = unsafe extern "C" fn(c_int, *const c_char, c_int, libc::c_uint, *mut libc::statx) -> c_int;

// On 64-bit Linux each `*64` name is the same function as the plain one.
fn real_pread() -> Option<PreadFn> {
    real!("pread64", PreadFn)
}
fn real_pwrite() -> Option<PwriteFn> {
    real!("pwrite64", PwriteFn)
}
fn real_preadv() -> Option<PvecFn> {
    real!("preadv64", PvecFn)
}
fn real_pwritev() -> Option<PvecFn> {
    real!("pwritev64", PvecFn)
}
fn real_fsync() -> Option<SyncFn> {
    real!("fsync", SyncFn)
}
fn real_fdatasync() -> Option<SyncFn> {
    real!("fdatasync", SyncFn)
}
fn real_syncfs() -> Option<SyncFn> {
    real!("syncfs", SyncFn)
}
// Declared with the mode, which the variadic function reads only with
// `O_CREAT` or `O_TMPFILE` (and which the x86-64 ABI passes in the same
// register either way).
fn real_openat() -> Option<OpenAtFn> {
    real!("openat64", OpenAtFn)
}
fn real_statx() -> Option<StatxFn> {
    real!("statx", StatxFn)
}

pub(crate) fn prepare() {
    let _ = (real_pread(), real_pwrite(), real_preadv(), real_pwritev());
    let _ = (real_fsync(), real_fdatasync(), real_syncfs(), real_openat(), real_statx());
}

/// Where a transfer reads or writes.
#[derive(Clone, Copy)]
pub(crate) enum At {
    /// At the file position, which it advances (`read`, `write`).
    Position,
    /// At an offset; the file position is left alone (`pread`, `pwrite`).
    Offset(off_t),
}

impl At {
    /// The offset argument of `preadv2`/`pwritev2` for the part of the
    /// transfer from byte `done` on (-1: the file position).
    fn after(self, done: usize) -> off_t {
        match self {
            At::Position => -1,
            At::Offset(o) => o.saturating_add(done as off_t),
        }
    }
}

/// A read (`write` false) or write of `v` on a regular file, in a function
/// with a park hook (see the module's documentation). A file system without
/// `RWF_NOWAIT` (`EOPNOTSUPP`) offloads whole reads and makes writes here
/// (buffered writes reach the page cache and rarely wait). `blocking` is
/// the program's own call, made when nothing has moved yet and the attempt
/// cannot say what is wrong, or when nothing can be offloaded.
pub(crate) fn transfer(h: Hook, fd: c_int, v: &[iovec], write: bool, at: At, blocking: impl FnOnce() -> ssize_t) -> ssize_t {
    let total = v.iter().fold(0usize, |a, e| a.saturating_add(e.iov_len));
    // Nothing to move, or a place where the function may not park and
    // nothing may be allocated (the attempts below build iovec lists):
    // the call as it was (`read`/`write` come here with the plain hook).
    if total == 0 || parking::offload_hook().is_none() {
        return blocking();
    }
    let e0 = errno();
    let mut done = 0usize;
    let offload = loop {
        let rest = tail(v, done);
        // SAFETY: the caller's iovecs, or what is left of them.
        let r = unsafe {
            if write {
                libc::pwritev2(fd, rest.as_ptr(), rest.len() as c_int, at.after(done), libc::RWF_NOWAIT)
            } else {
                libc::preadv2(fd, rest.as_ptr(), rest.len() as c_int, at.after(done), libc::RWF_NOWAIT)
            }
        };
        if r > 0 {
            done += r as usize;
            if done >= total {
                break false;
            }
            continue;
        }
        if r == 0 {
            break false; // end of file (or a device that takes nothing)
        }
        match errno() {
            libc::EAGAIN => break true,
            libc::EOPNOTSUPP if !write => break true,
            // The blocking call says what is wrong (or does it without
            // the flag), unless something moved already.
            _ if done == 0 => {
                set_errno(e0);
                return blocking();
            }
            _ => break false,
        }
    };
    if !offload {
        set_errno(e0);
        return done as ssize_t;
    }
    let rest = total - done;
    let mut buf: Vec<u8> = Vec::new();
    if buf.try_reserve_exact(rest).is_ok() {
        if write {
            for e in tail(v, done) {
                // SAFETY: a piece of the caller's buffers.
                buf.extend_from_slice(unsafe { std::slice::from_raw_parts(e.iov_base as *const u8, e.iov_len) });
            }
        }
        let offset = at.after(done);
        let moved = on_pool(h, move || {
            let mut buf = buf;
            // `preadv2`/`pwritev2` without flags: `read`/`write` at offset
            // -1, `pread`/`pwrite` otherwise (not our wrappers).
            let one = iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: if write { buf.len() } else { rest } };
            // SAFETY: `one` covers `buf`: `rest` bytes of capacity to read
            // into, or the copy to write. The pool thread is outside any
            // function: the plain blocking call.
            let r = unsafe { if write { libc::pwritev2(fd, &one, 1, offset, 0) } else { libc::preadv2(fd, &one, 1, offset, 0) } };
            if !write && r > 0 {
                // SAFETY: the kernel wrote `r <= rest` bytes into the capacity.
                unsafe { buf.set_len(r as usize) };
            }
            (r, buf)
        });
        if let Some(((r, buf), e)) = moved {
            if r < 0 {
                if done > 0 {
                    set_errno(e0);
                    return done as ssize_t;
                }
                set_errno(e);
                return -1;
            }
            if !write {
                scatter(v, done, &buf);
            }
            set_errno(e0);
            return (done + r as usize) as ssize_t;
        }
    }
    // No pool (or no memory for the copy): the rest, blocking.
    set_errno(e0);
    if done == 0 {
        return blocking();
    }
    let rest = tail(v, done);
    // SAFETY: what is left of the caller's iovecs.
    let r = retry(|| unsafe {
        if write {
            libc::pwritev2(fd, rest.as_ptr(), rest.len() as c_int, at.after(done), 0)
        } else {
            libc::preadv2(fd, rest.as_ptr(), rest.len() as c_int, at.after(done), 0)
        }
    });
    set_errno(e0);
    (done + r.max(0) as usize) as ssize_t
}

/// The iovecs of `v` from byte `done` on.
fn tail(v: &[iovec], done: usize) -> Vec<iovec> {
    let (i, off) = parking::locate(v, done);
    let mut out = v[i..].to_vec();
    if let Some(first) = out.first_mut() {
        // SAFETY: `off` lies inside this iovec of the caller's.
        first.iov_base = unsafe { (first.iov_base as *mut u8).add(off) }.cast();
        first.iov_len -= off;
    }
    out
}

/// Copies `data` into `v` from byte `at` on.
fn scatter(v: &[iovec], at: usize, mut data: &[u8]) {
    for e in tail(v, at) {
        if data.is_empty() {
            break;
        }
        let n = e.iov_len.min(data.len());
        // SAFETY: `n` bytes fit in this piece of the caller's buffers, and
        // `data` (our copy) does not overlap them.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), e.iov_base as *mut u8, n) };
        data = &data[n..];
    }
}

/// `v` as a slice, for the positional vector calls with a hook; None
/// (make the call as it is: the kernel judges it) when it is not one.
///
/// # Safety
/// The caller of the wrapper passes `n` valid iovecs at `iov` when `n > 0`.
unsafe fn iovecs<'a>(iov: *const iovec, n: c_int) -> Option<&'a [iovec]> {
    if iov.is_null() || n <= 0 || n > libc::UIO_MAXIOV {
        return None;
    }
    // SAFETY: per the contract.
    Some(unsafe { std::slice::from_raw_parts(iov, n as usize) })
}

/// # Safety
/// Same contract as POSIX `pread`.
#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, count: size_t, offset: off_t) -> ssize_t {
    let real = or_enosys!(real_pread());
    // SAFETY: forwarded verbatim.
    let call = || unsafe { real(fd, buf, count, offset) };
    match parking::hook() {
        Some(h) => transfer(h, fd, &[iovec { iov_base: buf, iov_len: count }], false, At::Offset(offset), call),
        None => call(),
    }
}

/// # Safety
/// Same contract as `pread`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, count: size_t, offset: off_t) -> ssize_t {
    // SAFETY: the same contract.
    unsafe { pread(fd, buf, count, offset) }
}

/// # Safety
/// Same contract as POSIX `pwrite`.
#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: size_t, offset: off_t) -> ssize_t {
    let real = or_enosys!(real_pwrite());
    // SAFETY: forwarded verbatim.
    let call = || unsafe { real(fd, buf, count, offset) };
    match parking::hook() {
        Some(h) => transfer(h, fd, &[iovec { iov_base: buf as *mut c_void, iov_len: count }], true, At::Offset(offset), call),
        None => call(),
    }
}

/// # Safety
/// Same contract as `pwrite`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: size_t, offset: off_t) -> ssize_t {
    // SAFETY: the same contract.
    unsafe { pwrite(fd, buf, count, offset) }
}

/// # Safety
/// Same contract as `preadv`.
#[no_mangle]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, n: c_int, offset: off_t) -> ssize_t {
    let real = or_enosys!(real_preadv());
    // SAFETY: forwarded verbatim.
    let call = || unsafe { real(fd, iov, n, offset) };
    // SAFETY: the caller's iovecs.
    match (parking::hook(), unsafe { iovecs(iov, n) }) {
        (Some(h), Some(v)) => transfer(h, fd, v, false, At::Offset(offset), call),
        _ => call(),
    }
}

/// # Safety
/// Same contract as `preadv`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn preadv64(fd: c_int, iov: *const iovec, n: c_int, offset: off_t) -> ssize_t {
    // SAFETY: the same contract.
    unsafe { preadv(fd, iov, n, offset) }
}

/// # Safety
/// Same contract as `pwritev`.
#[no_mangle]
pub unsafe extern "C" fn pwritev(fd: c_int, iov: *const iovec, n: c_int, offset: off_t) -> ssize_t {
    let real = or_enosys!(real_pwritev());
    // SAFETY: forwarded verbatim.
    let call = || unsafe { real(fd, iov, n, offset) };
    // SAFETY: the caller's iovecs.
    match (parking::hook(), unsafe { iovecs(iov, n) }) {
        (Some(h), Some(v)) => transfer(h, fd, v, true, At::Offset(offset), call),
        _ => call(),
    }
}

/// # Safety
/// Same contract as `pwritev`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn pwritev64(fd: c_int, iov: *const iovec, n: c_int, offset: off_t) -> ssize_t {
    // SAFETY: the same contract.
    unsafe { pwritev(fd, iov, n, offset) }
}

/// Runs `call` on the hook's blocking pool while the function parks: what
/// it returned, and the pool thread's `errno` after it; None if it could not
/// go there (then nothing ran). Everything `call` touches must be its own
/// (moved in) or the process's (descriptors): a function cancelled while
/// it waits gives its stack back, and the pool goes on.
pub(crate) fn on_pool<R: Send + 'static>(h: Hook, call: impl FnOnce() -> R + Send + 'static) -> Option<(R, c_int)> {
    let (tx, rx) = mpsc::sync_channel(1);
    let work = Box::new(move || {
        let r = call();
        let _ = tx.send((r, errno()));
    });
    if !parking::offload(h, work) {
        return None;
    }
    rx.try_recv().ok()
}

/// [`on_pool`] for a call that returns -1 and sets `errno` when it fails:
/// its result, with the pool's `errno` when it failed.
pub(crate) fn on_pool_c(h: Hook, call: impl FnOnce() -> c_int + Send + 'static) -> Option<c_int> {
    let (r, e) = on_pool(h, call)?;
    if r == -1 {
        set_errno(e);
    }
    Some(r)
}

/// A sync of `fd` (its file, or its file system): on the hook's pool while
/// the function parks, if it has one and may park here; here otherwise.
fn sync(fd: c_int, real: SyncFn) -> c_int {
    // SAFETY: forwarded verbatim; on the pool's thread too, where the
    // number names the same file (descriptors are the process's).
    let call = move || unsafe { real(fd) };
    parking::offload_hook().and_then(|h| on_pool_c(h, call)).unwrap_or_else(call)
}

/// # Safety
/// Same contract as POSIX `fsync`.
#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    sync(fd, or_enosys!(real_fsync()))
}

/// # Safety
/// Same contract as POSIX `fdatasync`.
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    sync(fd, or_enosys!(real_fdatasync()))
}

/// # Safety
/// Same contract as `syncfs`.
#[no_mangle]
pub unsafe extern "C" fn syncfs(fd: c_int) -> c_int {
    sync(fd, or_enosys!(real_syncfs()))
}

/// `struct open_how` of `openat2(2)` (ours: the libc crate's cannot be
/// built outside it).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `RESOLVE_CACHED` (Linux 5.12): fail with `EAGAIN` rather than wait for
/// any lookup that the dentry cache cannot answer.
const RESOLVE_CACHED: u64 = 0x20;

/// `openat2` of `path` from `dirfd` with `flags`, from the caches alone.
fn open_cached(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let how = OpenHow { flags: flags as u32 as u64, mode: 0, resolve: RESOLVE_CACHED };
    // SAFETY: a valid `open_how` of the size passed; `path` is the
    // caller's NUL-terminated string (checked non-null).
    unsafe { libc::syscall(libc::SYS_openat2, dirfd, path, &how as *const OpenHow, std::mem::size_of::<OpenHow>()) as c_int }
}

/// How an open can be made without waiting.
enum Cached {
    /// Opened here from the caches: the descriptor.
    Opened(c_int),
    /// Make the call here: it will not wait (the caches had the answer, an
    /// error, or `openat2` refuses what the call asks, or is missing).
    Here,
    /// It may wait: make it on the pool.
    Pool,
}

fn try_cached(dirfd: c_int, path: *const c_char, flags: c_int) -> Cached {
    // (`O_TMPFILE` holds the bit of `O_DIRECTORY`: only all of it counts.)
    if flags & (libc::O_CREAT | libc::O_TRUNC) != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return Cached::Pool;
    }
    // What the path names, without opening it (no device's open runs, no
    // FIFO waits), found in the caches or not at all.
    let probe = open_cached(dirfd, path, libc::O_PATH | libc::O_CLOEXEC | (flags & (libc::O_NOFOLLOW | libc::O_DIRECTORY)));
    if probe < 0 {
        return match errno() {
            libc::EAGAIN => Cached::Pool,
            _ => Cached::Here,
        };
    }
    // SAFETY: an all-zero `stat` is a valid out buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our own new descriptor and a valid out pointer.
    let stat = unsafe { libc::fstat(probe, &mut st) };
    // SAFETY: our own descriptor, known to nobody else: closed directly
    // (the close observers have nothing to learn about it).
    unsafe { libc::syscall(libc::SYS_close, probe) };
    let kind = st.st_mode & libc::S_IFMT;
    if stat != 0 || (kind != libc::S_IFREG && kind != libc::S_IFDIR) {
        return Cached::Pool;
    }
    let fd = open_cached(dirfd, path, flags);
    if fd >= 0 {
        return Cached::Opened(fd);
    }
    match errno() {
        // Evicted since the probe: wait on the pool.
        libc::EAGAIN => Cached::Pool,
        // `openat2` refuses flags that `openat` ignores (EINVAL); other
        // errors are the open's own, which the call gives as they are.
        _ => Cached::Here,
    }
}

/// An open in a function with a hook (see the module's documentation).
fn open_with_hook(h: Hook, dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t, real: OpenAtFn) -> c_int {
    // SAFETY: forwarded verbatim.
    let call = move || unsafe { real(dirfd, path, flags, mode) };
    if path.is_null() {
        return call();
    }
    let e0 = errno();
    let cached = try_cached(dirfd, path, flags);
    set_errno(e0);
    match cached {
        Cached::Opened(fd) => fd,
        Cached::Here => call(),
        Cached::Pool => {
            // The pool opens a copy of the path: a function cancelled while
            // it waits gives its stack back, and the caller's string may
            // be on it.
            let Some(owned) = copy_path(path) else { return call() };
            // SAFETY: as `call`, on the pool's own copy of the path.
            let on = move || unsafe { real(dirfd, owned.as_ptr(), flags, mode) };
            on_pool_c(h, on).unwrap_or_else(call)
        }
    }
}

/// `openat` with the real function resolved.
fn openat_impl(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    let real = or_enosys!(real_openat());
    let fd = match parking::offload_hook() {
        Some(h) => open_with_hook(h, dirfd, path, flags, mode, real),
        // SAFETY: forwarded verbatim.
        None => unsafe { real(dirfd, path, flags, mode) },
    };
    if fd >= 0 {
        // A new description of its own (a FIFO's mode matters to parks).
        super::fd_modes::made(fd, flags & libc::O_NONBLOCK != 0);
    }
    fd
}

/// # Safety
/// Same contract as POSIX `open` (variadic there: see `real_openat`).
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    openat_impl(libc::AT_FDCWD, path, flags, mode)
}

/// # Safety
/// Same contract as `open`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    openat_impl(libc::AT_FDCWD, path, flags, mode)
}

/// # Safety
/// Same contract as POSIX `openat` (variadic there: see `real_openat`).
#[no_mangle]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    openat_impl(dirfd, path, flags, mode)
}

/// # Safety
/// Same contract as `openat`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    openat_impl(dirfd, path, flags, mode)
}

/// Would a lookup of `path` (from `dirfd`) wait, that is, can the caches
/// not answer it? False too when they answer that it fails.
fn lookup_waits(dirfd: c_int, path: *const c_char, nofollow: bool) -> bool {
    let probe = open_cached(dirfd, path, libc::O_PATH | libc::O_CLOEXEC | if nofollow { libc::O_NOFOLLOW } else { 0 });
    if probe >= 0 {
        // SAFETY: our own descriptor, known to nobody else (see `try_cached`).
        unsafe { libc::syscall(libc::SYS_close, probe) };
        return false;
    }
    errno() == libc::EAGAIN
}

/// For a call that looks `path` up (from `dirfd`): the hook, if the
/// function has one, may copy for the pool here, and the caches cannot
/// answer the lookup; then the call goes to the pool. None: make it here
/// (an empty path names `dirfd` itself, or fails: no lookup). The
/// caller's `errno` is left as it was.
pub(crate) fn pool_for_lookup(dirfd: c_int, path: *const c_char, nofollow: bool) -> Option<Hook> {
    let h = parking::offload_hook()?;
    // SAFETY: a non-null path is the caller's NUL-terminated string.
    if path.is_null() || unsafe { *path } == 0 {
        return None;
    }
    let e0 = errno();
    let waits = lookup_waits(dirfd, path, nofollow);
    set_errno(e0);
    waits.then_some(h)
}

/// A copy of the caller's string for the pool, which may outlive the
/// caller's stack (None for a null pointer, which the call itself reports).
pub(crate) fn copy_path(path: *const c_char) -> Option<CString> {
    // SAFETY: a non-null path is the caller's NUL-terminated string.
    (!path.is_null()).then(|| unsafe { CStr::from_ptr(path) }.to_owned())
}

/// A call that looks `path` up and fills `*out` (the `stat` family), in a
/// function with a hook: here when the caches can answer the lookup, else
/// on the pool with a copy of the path and a result buffer of its own,
/// copied to `out` once it succeeded.
fn stat_like<T: Send + 'static>(
    dirfd: c_int,
    path: *const c_char,
    nofollow: bool,
    out: *mut T,
    call: impl Fn(*const c_char, *mut T) -> c_int + Copy + Send + 'static,
) -> c_int {
    let here = || call(path, out);
    if out.is_null() {
        return here();
    }
    let (Some(h), Some(owned)) = (pool_for_lookup(dirfd, path, nofollow), copy_path(path)) else { return here() };
    let pooled = on_pool(h, move || {
        let mut buf = Box::new(MaybeUninit::<T>::uninit());
        let r = call(owned.as_ptr(), buf.as_mut_ptr());
        (r, buf)
    });
    let Some(((r, buf), e)) = pooled else { return here() };
    if r == 0 {
        // SAFETY: the call succeeded, so it filled the buffer; `out` is the
        // caller's, of the same type, and not the pool's.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), out, 1) };
    } else {
        set_errno(e);
    }
    r
}

/// `fstatat` as the kernel's `newfstatat`, which is what glibc's `stat`,
/// `lstat` and `fstatat` are on x86-64 (and present in every glibc, where
/// the functions are exported only since 2.33).
///
/// # Safety
/// As `fstatat`: `path` a NUL-terminated string, `buf` writable.
unsafe fn newfstatat(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
    // SAFETY: per the contract.
    unsafe { libc::syscall(libc::SYS_newfstatat, dirfd, path, buf, flags) as c_int }
}

fn fstatat_impl(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments (or the pool's copies of them).
    stat_like(dirfd, path, flags & libc::AT_SYMLINK_NOFOLLOW != 0, buf, move |p, b| unsafe { newfstatat(dirfd, p, b, flags) })
}

/// # Safety
/// Same contract as POSIX `stat`.
#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    fstatat_impl(libc::AT_FDCWD, path, buf, 0)
}

/// # Safety
/// Same contract as `stat`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat) -> c_int {
    fstatat_impl(libc::AT_FDCWD, path, buf, 0)
}

/// # Safety
/// Same contract as POSIX `lstat`.
#[no_mangle]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    fstatat_impl(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW)
}

/// # Safety
/// Same contract as `lstat`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut libc::stat) -> c_int {
    fstatat_impl(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW)
}

/// # Safety
/// Same contract as POSIX `fstatat`.
#[no_mangle]
pub unsafe extern "C" fn fstatat(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
    fstatat_impl(dirfd, path, buf, flags)
}

/// # Safety
/// Same contract as `fstatat`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn fstatat64(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
    fstatat_impl(dirfd, path, buf, flags)
}

/// # Safety
/// Same contract as `statx` (Rust's `std::fs::metadata` calls it).
#[no_mangle]
pub unsafe extern "C" fn statx(dirfd: c_int, path: *const c_char, flags: c_int, mask: libc::c_uint, buf: *mut libc::statx) -> c_int {
    let real = or_enosys!(real_statx());
    // SAFETY: the caller's arguments, forwarded.
    stat_like(dirfd, path, flags & libc::AT_SYMLINK_NOFOLLOW != 0, buf, move |p, b| unsafe { real(dirfd, p, flags, mask, b) })
}

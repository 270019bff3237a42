//! Calls that look a path up or change a directory, which block in the
//! kernel with no non-blocking form: `access`, `readlink`, `opendir` (std's
//! `read_dir`), and `mkdir`, `rmdir`, `unlink`, `rename`, `link`,
//! `symlink` with their `*at` forms.
//!
//! Inside a function launched with a park hook (turquoise's green threads):
//!
//! - A call that only looks its path up is made here when the kernel's
//!   caches can answer the lookup (`files::pool_for_lookup`, as for `stat`),
//!   else on the hook's blocking pool with a copy of the path (and, for
//!   `readlink`, a buffer of the pool's own).
//! - A call that changes a directory always goes to the pool, as an open
//!   that creates does: the caches cannot say whether it will wait (for the
//!   file system's journal, a network file system's server, or another
//!   thread that holds the directory's lock while it waits for the disk).
//!   The round trip through the pool costs about 14 us more per call here
//!   (`docs/safety.md`).
//!
//! Where the hook cannot offload (none, a place where the function may not
//! park, no memory) the call is made here, blocking, as before.

use libc::{c_char, c_int, mode_t, size_t, ssize_t};

use super::files::{copy_path, on_pool, on_pool_c, pool_for_lookup};
use super::parking;
use crate::base::sys::{or_enosys, real, set_errno};

type FaccessatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_int) -> c_int;
type ReadlinkatFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t;
type OpendirFn = unsafe extern "C" fn(*const c_char) -> *mut libc::DIR;
type MkdiratFn = unsafe extern "C" fn(c_int, *const c_char, mode_t) -> c_int;
type UnlinkatFn = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
type Renameat2Fn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, libc::c_uint) -> c_int;
type RenameatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
type LinkatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int;
type SymlinkatFn = unsafe extern "C" fn(*const c_char, c_int, *const c_char) -> c_int;

fn real_faccessat() -> Option<FaccessatFn> {
    real!("faccessat", FaccessatFn)
}
fn real_readlinkat() -> Option<ReadlinkatFn> {
    real!("readlinkat", ReadlinkatFn)
}
fn real_opendir() -> Option<OpendirFn> {
    real!("opendir", OpendirFn)
}
fn real_mkdirat() -> Option<MkdiratFn> {
    real!("mkdirat", MkdiratFn)
}
fn real_unlinkat() -> Option<UnlinkatFn> {
    real!("unlinkat", UnlinkatFn)
}
fn real_renameat() -> Option<RenameatFn> {
    real!("renameat", RenameatFn)
}
fn real_renameat2() -> Option<Renameat2Fn> {
    real!("renameat2", Renameat2Fn)
}
fn real_linkat() -> Option<LinkatFn> {
    real!("linkat", LinkatFn)
}
fn real_symlinkat() -> Option<SymlinkatFn> {
    real!("symlinkat", SymlinkatFn)
}

pub(crate) fn prepare() {
    let _ = (real_faccessat(), real_readlinkat(), real_opendir(), real_mkdirat(), real_unlinkat());
    let _ = (real_renameat(), real_renameat2(), real_linkat(), real_symlinkat());
}

/// A call that only looks `path` up: see the module's documentation.
fn lookup(dirfd: c_int, path: *const c_char, nofollow: bool, call: impl Fn(*const c_char) -> c_int + Copy + Send + 'static) -> c_int {
    let here = || call(path);
    let (Some(h), Some(p)) = (pool_for_lookup(dirfd, path, nofollow), copy_path(path)) else { return here() };
    on_pool_c(h, move || call(p.as_ptr())).unwrap_or_else(here)
}

/// A call that changes the directories its paths name: on the pool with
/// copies of the paths, where the function has a hook and may park.
fn change<const N: usize>(paths: [*const c_char; N], call: impl Fn([*const c_char; N]) -> c_int + Copy + Send + 'static) -> c_int {
    let here = || call(paths);
    let Some(h) = parking::offload_hook() else { return here() };
    if paths.iter().any(|p| p.is_null()) {
        return here(); // EFAULT, from the call itself
    }
    let copies = paths.map(copy_path);
    on_pool_c(h, move || call(copies.each_ref().map(|c| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())))).unwrap_or_else(here)
}

/// # Safety
/// Same contract as POSIX `faccessat`.
#[no_mangle]
pub unsafe extern "C" fn faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int {
    let real = or_enosys!(real_faccessat());
    // SAFETY: the caller's arguments, or the pool's copy of the path.
    lookup(dirfd, path, flags & libc::AT_SYMLINK_NOFOLLOW != 0, move |p| unsafe { real(dirfd, p, mode, flags) })
}

/// # Safety
/// Same contract as POSIX `access`.
#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: the same contract.
    unsafe { faccessat(libc::AT_FDCWD, path, mode, 0) }
}

/// # Safety
/// Same contract as POSIX `readlinkat`.
#[no_mangle]
pub unsafe extern "C" fn readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    let Some(real) = real_readlinkat() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: the caller's arguments, forwarded.
    let here = || unsafe { real(dirfd, path, buf, size) };
    let (Some(h), Some(p)) = (pool_for_lookup(dirfd, path, true), copy_path(path)) else { return here() };
    if buf.is_null() {
        return here();
    }
    // A link's target is at most a page long (`PATH_MAX`): a buffer of
    // that size gives the pool's call the caller's answer, truncated to
    // `size` as the call truncates it.
    let cap = size.min(libc::PATH_MAX as usize);
    let pooled = on_pool(h, move || {
        let mut mine = vec![0u8; cap];
        // SAFETY: the pool's own path and buffer, of `cap` bytes.
        let r = unsafe { real(dirfd, p.as_ptr(), mine.as_mut_ptr().cast(), cap) };
        (r, mine)
    });
    let Some(((r, mine), e)) = pooled else { return here() };
    if r < 0 {
        set_errno(e);
    } else {
        // SAFETY: `r <= cap <= size` bytes into the caller's buffer, which
        // is not the pool's.
        unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), buf.cast(), r as usize) };
    }
    r
}

/// # Safety
/// Same contract as POSIX `readlink`.
#[no_mangle]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    // SAFETY: the same contract.
    unsafe { readlinkat(libc::AT_FDCWD, path, buf, size) }
}

/// # Safety
/// Same contract as POSIX `opendir`.
#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    let Some(real) = real_opendir() else {
        set_errno(libc::ENOSYS);
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's argument, forwarded.
    let here = || unsafe { real(path) };
    let (Some(h), Some(p)) = (pool_for_lookup(libc::AT_FDCWD, path, false), copy_path(path)) else { return here() };
    // The stream is the process's (heap memory and a descriptor): handed
    // back as an address.
    let pooled = on_pool(h, move || {
        // SAFETY: the pool's own copy of the path.
        let d = unsafe { real(p.as_ptr()) };
        d as usize
    });
    let Some((d, e)) = pooled else { return here() };
    if d == 0 {
        set_errno(e);
    }
    d as *mut libc::DIR
}

/// # Safety
/// Same contract as POSIX `mkdirat`.
#[no_mangle]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    let real = or_enosys!(real_mkdirat());
    // SAFETY: the caller's arguments, or the pool's copy of the path.
    change([path], move |[p]| unsafe { real(dirfd, p, mode) })
}

/// # Safety
/// Same contract as POSIX `mkdir`.
#[no_mangle]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: the same contract.
    unsafe { mkdirat(libc::AT_FDCWD, path, mode) }
}

/// # Safety
/// Same contract as POSIX `unlinkat`.
#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let real = or_enosys!(real_unlinkat());
    // SAFETY: the caller's arguments, or the pool's copy of the path.
    change([path], move |[p]| unsafe { real(dirfd, p, flags) })
}

/// # Safety
/// Same contract as POSIX `unlink`.
#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    // SAFETY: the same contract.
    unsafe { unlinkat(libc::AT_FDCWD, path, 0) }
}

/// # Safety
/// Same contract as POSIX `rmdir`.
#[no_mangle]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    // SAFETY: the same contract (`unlinkat` with `AT_REMOVEDIR` is `rmdir`).
    unsafe { unlinkat(libc::AT_FDCWD, path, libc::AT_REMOVEDIR) }
}

/// # Safety
/// Same contract as `renameat2`.
#[no_mangle]
pub unsafe extern "C" fn renameat2(olddirfd: c_int, old: *const c_char, newdirfd: c_int, new: *const c_char, flags: libc::c_uint) -> c_int {
    let real = or_enosys!(real_renameat2());
    // SAFETY: the caller's arguments, or the pool's copies of the paths.
    change([old, new], move |[o, n]| unsafe { real(olddirfd, o, newdirfd, n, flags) })
}

/// # Safety
/// Same contract as POSIX `renameat`.
#[no_mangle]
pub unsafe extern "C" fn renameat(olddirfd: c_int, old: *const c_char, newdirfd: c_int, new: *const c_char) -> c_int {
    let real = or_enosys!(real_renameat());
    // SAFETY: the caller's arguments, or the pool's copies of the paths.
    change([old, new], move |[o, n]| unsafe { real(olddirfd, o, newdirfd, n) })
}

/// # Safety
/// Same contract as POSIX `rename`.
#[no_mangle]
pub unsafe extern "C" fn rename(old: *const c_char, new: *const c_char) -> c_int {
    // SAFETY: the same contract.
    unsafe { renameat(libc::AT_FDCWD, old, libc::AT_FDCWD, new) }
}

/// # Safety
/// Same contract as POSIX `linkat`.
#[no_mangle]
pub unsafe extern "C" fn linkat(olddirfd: c_int, old: *const c_char, newdirfd: c_int, new: *const c_char, flags: c_int) -> c_int {
    let real = or_enosys!(real_linkat());
    // SAFETY: the caller's arguments, or the pool's copies of the paths.
    change([old, new], move |[o, n]| unsafe { real(olddirfd, o, newdirfd, n, flags) })
}

/// # Safety
/// Same contract as POSIX `link`.
#[no_mangle]
pub unsafe extern "C" fn link(old: *const c_char, new: *const c_char) -> c_int {
    // SAFETY: the same contract (`link` does not follow a symlink `old`).
    unsafe { linkat(libc::AT_FDCWD, old, libc::AT_FDCWD, new, 0) }
}

/// # Safety
/// Same contract as POSIX `symlinkat`.
#[no_mangle]
pub unsafe extern "C" fn symlinkat(target: *const c_char, newdirfd: c_int, new: *const c_char) -> c_int {
    let real = or_enosys!(real_symlinkat());
    // SAFETY: the caller's arguments, or the pool's copies of the strings.
    change([target, new], move |[t, n]| unsafe { real(t, newdirfd, n) })
}

/// # Safety
/// Same contract as POSIX `symlink`.
#[no_mangle]
pub unsafe extern "C" fn symlink(target: *const c_char, new: *const c_char) -> c_int {
    // SAFETY: the same contract.
    unsafe { symlinkat(target, libc::AT_FDCWD, new) }
}

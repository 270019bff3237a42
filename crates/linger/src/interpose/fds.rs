//! `close`, `dup2`, `dup3` and `close_range`: after the call, the park
//! seam's close observer (`crate::park::on_close`) learns which numbers no
//! longer name the file they named, so that a runtime can wake threads
//! parked on them (their retry then fails with `EBADF`, or finds the new
//! file), instead of leaving them waiting on a registration the kernel
//! dropped with the file.
//!
//! `fclose` too: libc closes the stream's descriptor with a direct system
//! call, so the wrapper reads the number first and reports it after.
//!
//! The calls themselves are made as the program asked; the wrappers add one
//! atomic load when no observer is installed. libc's other closes
//! (`closedir`, a stream closed inside libc) do not come through here;
//! nobody parks on a directory.

use libc::{c_int, c_uint};

use super::{errno, or_enosys, real, set_errno};

type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type Dup2Fn = unsafe extern "C" fn(c_int, c_int) -> c_int;
type Dup3Fn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type CloseRangeFn = unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int;
type FcloseFn = unsafe extern "C" fn(*mut libc::FILE) -> c_int;

fn real_close() -> Option<CloseFn> {
    real!("close", CloseFn)
}
fn real_dup2() -> Option<Dup2Fn> {
    real!("dup2", Dup2Fn)
}
fn real_dup3() -> Option<Dup3Fn> {
    real!("dup3", Dup3Fn)
}
fn real_close_range() -> Option<CloseRangeFn> {
    real!("close_range", CloseRangeFn)
}
fn real_fclose() -> Option<FcloseFn> {
    real!("fclose", FcloseFn)
}

pub(crate) fn prepare() {
    let _ = (real_close(), real_dup2(), real_dup3(), real_close_range(), real_fclose());
}

/// Tells the observer, keeping the program's errno.
fn closed(first: c_int, last: c_int) {
    if first < 0 || last < first {
        return;
    }
    let e = errno();
    crate::park::closed(first, last);
    set_errno(e);
}

/// Linux frees the number even when `close` reports `EINTR` or `EIO`; only
/// `EBADF` says nothing was open there.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let real = or_enosys!(real_close());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(fd) };
    if r == 0 || errno() != libc::EBADF {
        closed(fd, fd);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    let real = or_enosys!(real_dup2());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(old, new) };
    if r >= 0 && old != new {
        closed(new, new);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let real = or_enosys!(real_dup3());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(old, new, flags) };
    if r >= 0 {
        closed(new, new);
    }
    r
}

/// With `CLOSE_RANGE_CLOEXEC` nothing is closed now.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let real = or_enosys!(real_close_range());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(first, last, flags) };
    if r == 0 && flags as c_uint & libc::CLOSE_RANGE_CLOEXEC == 0 {
        closed(first.min(c_int::MAX as c_uint) as c_int, last.min(c_int::MAX as c_uint) as c_int);
    }
    r
}

/// The descriptor goes with the stream whatever `fclose` returns (POSIX:
/// the stream is disassociated even when flushing fails). A stream with no
/// descriptor (`fmemopen`, `fopencookie`) has number -1: nothing to report.
#[no_mangle]
pub unsafe extern "C" fn fclose(f: *mut libc::FILE) -> c_int {
    let real = or_enosys!(real_fclose());
    let fd = if f.is_null() {
        -1
    } else {
        let e = errno();
        // SAFETY: the program's open stream, as fclose itself requires.
        let fd = unsafe { libc::fileno(f) };
        set_errno(e); // fileno of a stream without one sets EBADF
        fd
    };
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(f) };
    closed(fd, fd);
    r
}

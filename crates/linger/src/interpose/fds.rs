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
//!
//! The calls that make descriptors or change their blocking mode and socket
//! timeouts (`socket`, `socketpair`, `pipe`, `pipe2`, `dup`, `fcntl`,
//! `ioctl(FIONBIO)`, `setsockopt`) are wrapped here too, to keep
//! `fd_modes`' table: what a parked call must honour, without asking the
//! kernel at each park. They make the call as asked, then record.

use libc::{c_int, c_uint};

use super::fd_modes;
use crate::base::sys::{errno, or_enosys, real, set_errno};

type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type Dup2Fn = unsafe extern "C" fn(c_int, c_int) -> c_int;
type Dup3Fn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type CloseRangeFn = unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int;
type FcloseFn = unsafe extern "C" fn(*mut libc::FILE) -> c_int;
type SocketFn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type SocketpairFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut c_int) -> c_int;
type PipeFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type Pipe2Fn = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type DupFn = unsafe extern "C" fn(c_int) -> c_int;
/// `fcntl` and `ioctl` are variadic in C; their third argument, when there
/// is one, is an `int` or a pointer, which the x86-64 calling convention
/// passes in the same register as a fixed `usize` argument (and a caller
/// that passes none leaves a value we read only for the commands that
/// take one).
type FcntlFn = unsafe extern "C" fn(c_int, c_int, usize) -> c_int;
type IoctlFn = unsafe extern "C" fn(c_int, libc::c_ulong, usize) -> c_int;
type SetsockoptFn = unsafe extern "C" fn(c_int, c_int, c_int, *const libc::c_void, libc::socklen_t) -> c_int;

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
fn real_socket() -> Option<SocketFn> {
    real!("socket", SocketFn)
}
fn real_socketpair() -> Option<SocketpairFn> {
    real!("socketpair", SocketpairFn)
}
fn real_pipe() -> Option<PipeFn> {
    real!("pipe", PipeFn)
}
fn real_pipe2() -> Option<Pipe2Fn> {
    real!("pipe2", Pipe2Fn)
}
fn real_dup() -> Option<DupFn> {
    real!("dup", DupFn)
}
fn real_fcntl() -> Option<FcntlFn> {
    real!("fcntl", FcntlFn)
}
fn real_fcntl64() -> Option<FcntlFn> {
    real!("fcntl64", FcntlFn)
}
fn real_ioctl() -> Option<IoctlFn> {
    real!("ioctl", IoctlFn)
}
fn real_setsockopt() -> Option<SetsockoptFn> {
    real!("setsockopt", SetsockoptFn)
}

pub(crate) fn prepare() {
    let _ = (real_close(), real_dup2(), real_dup3(), real_close_range(), real_fclose());
    let _ = (real_socket(), real_socketpair(), real_pipe(), real_pipe2(), real_dup());
    let _ = (real_fcntl(), real_fcntl64(), real_ioctl(), real_setsockopt());
}

/// `first..=last` no longer name what they named: `fd_modes` forgets them,
/// and the observer is told, keeping the program's errno.
fn closed(first: c_int, last: c_int) {
    if first < 0 || last < first {
        return;
    }
    fd_modes::forget(first, last);
    let e = errno();
    crate::interpose::park::closed(first, last);
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
        // Two numbers of one description now.
        fd_modes::forget(old, old);
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
        fd_modes::forget(old, old);
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

/// Records a new descriptor made by this process (`r`, a call's result).
fn made(r: c_int, nonblock: bool) {
    if r >= 0 {
        fd_modes::made(r, nonblock);
    }
}

/// Records both ends of a new pair (`fds`, filled when `r` is 0).
fn made_pair(r: c_int, fds: *const c_int, nonblock: bool) {
    if r == 0 && !fds.is_null() {
        // SAFETY: the call succeeded, so it filled the caller's two ints.
        let (a, b) = unsafe { (*fds, *fds.add(1)) };
        made(a, nonblock);
        made(b, nonblock);
    }
}

/// # Safety
/// Same contract as POSIX `socket`.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let real = or_enosys!(real_socket());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(domain, ty, protocol) };
    made(r, ty & libc::SOCK_NONBLOCK != 0);
    r
}

/// # Safety
/// Same contract as POSIX `socketpair`.
#[no_mangle]
pub unsafe extern "C" fn socketpair(domain: c_int, ty: c_int, protocol: c_int, fds: *mut c_int) -> c_int {
    let real = or_enosys!(real_socketpair());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(domain, ty, protocol, fds) };
    made_pair(r, fds, ty & libc::SOCK_NONBLOCK != 0);
    r
}

/// # Safety
/// Same contract as POSIX `pipe`.
#[no_mangle]
pub unsafe extern "C" fn pipe(fds: *mut c_int) -> c_int {
    let real = or_enosys!(real_pipe());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(fds) };
    made_pair(r, fds, false);
    r
}

/// # Safety
/// Same contract as Linux `pipe2`.
#[no_mangle]
pub unsafe extern "C" fn pipe2(fds: *mut c_int, flags: c_int) -> c_int {
    let real = or_enosys!(real_pipe2());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(fds, flags) };
    made_pair(r, fds, flags & libc::O_NONBLOCK != 0);
    r
}

/// # Safety
/// Same contract as POSIX `dup`.
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let real = or_enosys!(real_dup());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(fd) };
    if r >= 0 {
        fd_modes::forget(fd, fd);
        fd_modes::forget(r, r);
    }
    r
}

/// What `fcntl` changed, recorded after a successful call.
fn fcntl_done(fd: c_int, cmd: c_int, arg: usize, r: c_int) {
    if r < 0 {
        return;
    }
    match cmd {
        libc::F_SETFL => fd_modes::set_nonblock(fd, arg as c_int & libc::O_NONBLOCK != 0),
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            fd_modes::forget(fd, fd);
            fd_modes::forget(r, r);
        }
        _ => {}
    }
}

/// # Safety
/// Same contract as POSIX `fcntl` (see `FcntlFn` for the third argument).
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let real = or_enosys!(real_fcntl());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(fd, cmd, arg) };
    fcntl_done(fd, cmd, arg, r);
    r
}

/// # Safety
/// Same contract as `fcntl`, which it is on 64-bit Linux.
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let real = or_enosys!(real_fcntl64().or_else(real_fcntl));
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(fd, cmd, arg) };
    fcntl_done(fd, cmd, arg, r);
    r
}

/// # Safety
/// Same contract as `ioctl` (see `IoctlFn` for the third argument).
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: libc::c_ulong, arg: usize) -> c_int {
    let real = or_enosys!(real_ioctl());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(fd, request, arg) };
    // The low 32 bits: the kernel reads an `unsigned int`, and a caller
    // declared with an `int` request may leave the upper half undefined.
    if r >= 0 && request as u32 == libc::FIONBIO as u32 && arg != 0 {
        // SAFETY: FIONBIO takes a pointer to an int, which the kernel just
        // read successfully.
        let on = unsafe { *(arg as *const c_int) } != 0;
        fd_modes::set_nonblock(fd, on);
    }
    r
}

/// `SO_RCVTIMEO`/`SO_SNDTIMEO` in both their old and 64-bit-time forms
/// (the same layout on x86-64): true for receive.
fn timeout_option(level: c_int, name: c_int) -> Option<bool> {
    const SO_RCVTIMEO_NEW: c_int = 66;
    const SO_SNDTIMEO_NEW: c_int = 67;
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO | SO_RCVTIMEO_NEW) => Some(true),
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO | SO_SNDTIMEO_NEW) => Some(false),
        _ => None,
    }
}

/// # Safety
/// Same contract as POSIX `setsockopt`.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(fd: c_int, level: c_int, name: c_int, value: *const libc::c_void, len: libc::socklen_t) -> c_int {
    let real = or_enosys!(real_setsockopt());
    // SAFETY: forwarded verbatim.
    let r = unsafe { real(fd, level, name, value, len) };
    if let (0, Some(input)) = (r, timeout_option(level, name)) {
        if fd_modes::get(fd).is_some() {
            // The value as the kernel keeps it (rounded to its clock's
            // ticks; zero or negative: none), asked once here rather than
            // at every park.
            let e = errno();
            let t = super::parking::asked_socket_timeout(fd, input);
            set_errno(e);
            let ns = t.map_or(0, |t| (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64));
            fd_modes::set_timeout(fd, input, ns);
        }
    }
    r
}

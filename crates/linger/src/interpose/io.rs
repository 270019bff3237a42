//! Reads, writes, socket calls and System V IPC.
//!
//! With SA_RESTART the kernel restarts these after our handler, except where
//! signal(7) says it never does (sockets with SO_RCVTIMEO/SO_SNDTIMEO,
//! `msgrcv`, `msgsnd`, `semop`, `semtimedop`): there we retry, with the
//! remaining timeout where the call has one. A blocking write or send that
//! had already moved some bytes when the signal came returns a short count;
//! code that assumes full transfers on blocking pipes and sockets would break,
//! so when preemption alone cut the transfer short we finish it. Receives
//! with MSG_WAITALL likewise. (Plain reads are never cut short by a signal on
//! pipes, sockets or regular files: the kernel returns as soon as it has any
//! data, so they only need the EINTR retry.) A socket timeout restarts from
//! its full length after a preemption, as it does after SA_RESTART.

use libc::{c_int, c_void, iovec, size_t, sockaddr, socklen_t, ssize_t};

use super::{or_enosys, blocking, errno, in_function, real, retry, set_errno, valid_timeout, Deadline, Mark};

type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type VecFn = unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
type RecvFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
type RecvFromFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t;
type SendFn = unsafe extern "C" fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
type SendToFn = unsafe extern "C" fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t;
type MsgFn = unsafe extern "C" fn(c_int, *mut libc::msghdr, c_int) -> ssize_t;
type SendMsgFn = unsafe extern "C" fn(c_int, *const libc::msghdr, c_int) -> ssize_t;
type AcceptFn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
type Accept4Fn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
type ConnectFn = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
type MsgSndFn = unsafe extern "C" fn(c_int, *const c_void, size_t, c_int) -> c_int;
type MsgRcvFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, libc::c_long, c_int) -> ssize_t;
type SemOpFn = unsafe extern "C" fn(c_int, *mut libc::sembuf, size_t) -> c_int;
type SemTimedOpFn = unsafe extern "C" fn(c_int, *mut libc::sembuf, size_t, *const libc::timespec) -> c_int;

fn real_read() -> Option<ReadFn> {
    real!("read", ReadFn)
}
fn real_write() -> Option<WriteFn> {
    real!("write", WriteFn)
}
fn real_readv() -> Option<VecFn> {
    real!("readv", VecFn)
}
fn real_writev() -> Option<VecFn> {
    real!("writev", VecFn)
}
fn real_recv() -> Option<RecvFn> {
    real!("recv", RecvFn)
}
fn real_recvfrom() -> Option<RecvFromFn> {
    real!("recvfrom", RecvFromFn)
}
fn real_recvmsg() -> Option<MsgFn> {
    real!("recvmsg", MsgFn)
}
fn real_send() -> Option<SendFn> {
    real!("send", SendFn)
}
fn real_sendto() -> Option<SendToFn> {
    real!("sendto", SendToFn)
}
fn real_sendmsg() -> Option<SendMsgFn> {
    real!("sendmsg", SendMsgFn)
}
fn real_accept() -> Option<AcceptFn> {
    real!("accept", AcceptFn)
}
fn real_accept4() -> Option<Accept4Fn> {
    real!("accept4", Accept4Fn)
}
fn real_connect() -> Option<ConnectFn> {
    real!("connect", ConnectFn)
}
fn real_msgsnd() -> Option<MsgSndFn> {
    real!("msgsnd", MsgSndFn)
}
fn real_msgrcv() -> Option<MsgRcvFn> {
    real!("msgrcv", MsgRcvFn)
}
fn real_semop() -> Option<SemOpFn> {
    real!("semop", SemOpFn)
}
fn real_semtimedop() -> Option<SemTimedOpFn> {
    real!("semtimedop", SemTimedOpFn)
}

pub(crate) fn prepare() {
    let _ = (real_read(), real_write(), real_readv(), real_writev(), real_recv(), real_recvfrom(), real_recvmsg());
    let _ = (real_send(), real_sendto(), real_sendmsg(), real_accept(), real_accept4(), real_connect());
    let _ = (real_msgsnd(), real_msgrcv(), real_semop(), real_semtimedop());
}

/// Moves `count` bytes with `once(done)` (which transfers from offset
/// `done`), continuing after a short count only when preemption caused it.
fn transfer_all(count: usize, mut once: impl FnMut(usize) -> ssize_t) -> ssize_t {
    let mut done = 0usize;
    loop {
        let m = Mark::now();
        let r = blocking(|| once(done));
        if r < 0 {
            if errno() == libc::EINTR && m.preempted_only() {
                continue;
            }
            return if done > 0 { done as ssize_t } else { -1 };
        }
        done += r as usize;
        if done >= count || r == 0 || !m.preempted_only() {
            return done as ssize_t;
        }
    }
}

/// # Safety
/// Same contract as POSIX `read`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let real = or_enosys!(real_read());
    if !in_function() {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, count) };
    }
    // SAFETY: forwarded verbatim to libc.
    retry(|| unsafe { real(fd, buf, count) })
}

/// # Safety
/// Same contract as POSIX `write`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let real = or_enosys!(real_write());
    if !in_function() {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, count) };
    }
    // SAFETY: the caller's buffer holds `count` bytes; we pass its tail.
    transfer_all(count, |done| unsafe { real(fd, (buf as *const u8).add(done) as *const c_void, count - done) })
}

/// # Safety
/// Same contract as POSIX `readv`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    let real = or_enosys!(real_readv());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(fd, iov, n) })
}

/// # Safety
/// Same contract as POSIX `writev`.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    let real = or_enosys!(real_writev());
    if !in_function() || iov.is_null() || n <= 0 {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, iov, n) };
    }
    // SAFETY: the caller passes `n` valid iovecs.
    let v = unsafe { std::slice::from_raw_parts(iov, n as usize) };
    let total = v.iter().fold(0usize, |a, e| a.saturating_add(e.iov_len));
    let m = Mark::now();
    // SAFETY: forwarded verbatim.
    let r = retry(|| unsafe { real(fd, iov, n) });
    if r < 0 || r as usize >= total || r == 0 || !m.preempted_only() {
        return r;
    }
    // Preemption cut the gathered write short: write the rest piece by piece
    // (the atomicity of writev is already gone once it returned short).
    let Some(w) = real_write() else { return r };
    let mut done = r as usize;
    let mut skip = done;
    for e in v {
        if skip >= e.iov_len {
            skip -= e.iov_len;
            continue;
        }
        let (base, len) = (e.iov_base as *const u8, e.iov_len - skip);
        // SAFETY: a tail of one of the caller's buffers.
        let w2 = transfer_all(len, |d| unsafe { w(fd, base.add(skip + d) as *const c_void, len - d) });
        skip = 0;
        if w2 <= 0 {
            break;
        }
        done += w2 as usize;
        if (w2 as usize) < len {
            break;
        }
    }
    done as ssize_t
}

/// # Safety
/// Same contract as POSIX `recv`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_recv());
    if !in_function() {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, len, flags) };
    }
    if flags & libc::MSG_WAITALL != 0 && flags & libc::MSG_DONTWAIT == 0 {
        // SAFETY: a tail of the caller's buffer.
        return transfer_all(len, |d| unsafe { real(fd, (buf as *mut u8).add(d) as *mut c_void, len - d, flags) });
    }
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(fd, buf, len, flags) })
}

/// # Safety
/// Same contract as POSIX `recvfrom`.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
) -> ssize_t {
    let real = or_enosys!(real_recvfrom());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(fd, buf, len, flags, addr, alen) })
}

/// # Safety
/// Same contract as POSIX `recvmsg`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_recvmsg());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(fd, msg, flags) })
}

/// # Safety
/// Same contract as POSIX `send`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_send());
    if !in_function() || flags & libc::MSG_DONTWAIT != 0 {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, len, flags) };
    }
    // SAFETY: a tail of the caller's buffer.
    transfer_all(len, |d| unsafe { real(fd, (buf as *const u8).add(d) as *const c_void, len - d, flags) })
}

/// # Safety
/// Same contract as POSIX `sendto`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    alen: socklen_t,
) -> ssize_t {
    let real = or_enosys!(real_sendto());
    if !in_function() || flags & libc::MSG_DONTWAIT != 0 {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, len, flags, addr, alen) };
    }
    // SAFETY: a tail of the caller's buffer (a datagram is never split: it
    // goes out whole or not at all, so only stream sockets continue).
    transfer_all(len, |d| unsafe { real(fd, (buf as *const u8).add(d) as *const c_void, len - d, flags, addr, alen) })
}

/// # Safety
/// Same contract as POSIX `sendmsg`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_sendmsg());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(fd, msg, flags) })
}

/// # Safety
/// Same contract as POSIX `accept`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> c_int {
    let real = or_enosys!(real_accept());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(fd, addr, alen) })
}

/// # Safety
/// Same contract as Linux `accept4`.
#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, alen: *mut socklen_t, flags: c_int) -> c_int {
    let real = or_enosys!(real_accept4());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(fd, addr, alen, flags) })
}

/// # Safety
/// Same contract as POSIX `connect`.
///
/// An interrupted connect is not undone: the connection goes on in the
/// background and a second `connect` would fail with EALREADY. After a
/// preemption we therefore wait for the outcome instead, as the call would
/// have.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, alen: socklen_t) -> c_int {
    let real = or_enosys!(real_connect());
    let m = Mark::now();
    // SAFETY: forwarded verbatim.
    let r = blocking(|| unsafe { real(fd, addr, alen) });
    if r == 0 || errno() != libc::EINTR || !in_function() || !m.preempted_only() {
        return r;
    }
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    // SAFETY: one valid pollfd (the wrapper retries after preemption).
    if unsafe { super::wait::poll(&mut p, 1, -1) } < 0 {
        return -1;
    }
    let mut err: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: valid out pointers of the right size.
    if unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut c_int as *mut c_void, &mut len) } != 0 {
        return -1;
    }
    if err != 0 {
        set_errno(err);
        return -1;
    }
    0
}

/// # Safety
/// Same contract as System V `msgsnd`.
#[no_mangle]
pub unsafe extern "C" fn msgsnd(id: c_int, msg: *const c_void, size: size_t, flags: c_int) -> c_int {
    let real = or_enosys!(real_msgsnd());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(id, msg, size, flags) })
}

/// # Safety
/// Same contract as System V `msgrcv`.
#[no_mangle]
pub unsafe extern "C" fn msgrcv(id: c_int, msg: *mut c_void, size: size_t, typ: libc::c_long, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_msgrcv());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(id, msg, size, typ, flags) })
}

/// # Safety
/// Same contract as System V `semop`.
#[no_mangle]
pub unsafe extern "C" fn semop(id: c_int, ops: *mut libc::sembuf, n: size_t) -> c_int {
    let real = or_enosys!(real_semop());
    // SAFETY: forwarded verbatim.
    retry(|| unsafe { real(id, ops, n) })
}

/// # Safety
/// Same contract as Linux `semtimedop`.
#[no_mangle]
pub unsafe extern "C" fn semtimedop(id: c_int, ops: *mut libc::sembuf, n: size_t, timeout: *const libc::timespec) -> c_int {
    let real = or_enosys!(real_semtimedop());
    // SAFETY: non-null timeouts are readable per the caller's contract.
    let deadline = match unsafe { timeout.as_ref() } {
        Some(t) if in_function() && valid_timeout(t) => Deadline::after(t),
        // SAFETY: forwarded verbatim (no timeout, or libc reports EINVAL).
        _ => return retry(|| unsafe { real(id, ops, n, timeout) }),
    };
    let mut left = deadline.remaining();
    loop {
        let m = Mark::now();
        // SAFETY: the caller's operations and our remaining timeout.
        let r = blocking(|| unsafe { real(id, ops, n, &left) });
        if r == -1 && errno() == libc::EINTR && m.preempted_only() {
            left = deadline.remaining();
            continue;
        }
        return r;
    }
}

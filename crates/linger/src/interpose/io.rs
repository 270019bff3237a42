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
//! data, so they only need the EINTR retry.) A socket timeout keeps its
//! original expiry across preemptions (see [`retry_fd`]).

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
type RecvMmsgFn = unsafe extern "C" fn(c_int, *mut libc::mmsghdr, libc::c_uint, c_int, *mut libc::timespec) -> c_int;
type SendMmsgFn = unsafe extern "C" fn(c_int, *mut libc::mmsghdr, libc::c_uint, c_int) -> c_int;
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
fn real_recvmmsg() -> Option<RecvMmsgFn> {
    real!("recvmmsg", RecvMmsgFn)
}
fn real_sendmmsg() -> Option<SendMmsgFn> {
    real!("sendmmsg", SendMmsgFn)
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
    let _ = (real_msgsnd(), real_msgrcv(), real_semop(), real_semtimedop(), real_recvmmsg(), real_sendmmsg());
}

/// The socket timeout (SO_RCVTIMEO for input, SO_SNDTIMEO for output) of
/// `fd`, if it is a socket with one.
fn socket_timeout(fd: c_int, input: bool) -> Option<libc::timespec> {
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    let mut len = std::mem::size_of::<libc::timeval>() as socklen_t;
    let opt = if input { libc::SO_RCVTIMEO } else { libc::SO_SNDTIMEO };
    // SAFETY: valid out pointers of the right size.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, opt, &mut tv as *mut libc::timeval as *mut c_void, &mut len) };
    (r == 0 && (tv.tv_sec > 0 || tv.tv_usec > 0))
        .then(|| libc::timespec { tv_sec: tv.tv_sec, tv_nsec: tv.tv_usec * 1000 })
}

/// Retries `f` on `fd` after interruptions by preemption alone. A socket
/// with a timeout fails with EINTR instead of restarting, and restarting it
/// would start its timeout afresh at every preemption (so it would never
/// expire under short slices): before each retry we wait for readiness for
/// what is left of the timeout, and report EAGAIN when it runs out, as the
/// kernel does.
fn retry_fd<R: PartialEq + From<i8>>(fd: c_int, input: bool, mut f: impl FnMut() -> R) -> R {
    let start = super::now(libc::CLOCK_MONOTONIC);
    let m = Mark::now();
    let mut deadline: Option<Option<Deadline>> = None;
    loop {
        let r = blocking(&mut f);
        if r != R::from(-1) || errno() != libc::EINTR {
            return r;
        }
        let d = *deadline.get_or_insert_with(|| {
            socket_timeout(fd, input).map(|t| Deadline::at(super::add(start, &t)))
        });
        // Without a socket timeout the kernel restarts these calls after a
        // handler with SA_RESTART: only the program's other handlers count.
        let ours = if d.is_some() { m.preempted_only() } else { m.preempted_only_restartable() };
        if !ours {
            set_errno(libc::EINTR); // the socket query may have changed it
            return r;
        }
        if let Some(d) = d {
            let events = if input { libc::POLLIN } else { libc::POLLOUT };
            let mut p = libc::pollfd { fd, events, revents: 0 };
            // SAFETY: one valid pollfd; our poll retries after preemption.
            if unsafe { super::wait::poll(&mut p, 1, d.remaining_ms()) } == 0 {
                set_errno(libc::EAGAIN);
                return R::from(-1);
            }
        }
    }
}

/// Moves `count` bytes with `once(done)` (which transfers from offset
/// `done`), continuing after a short count only when preemption caused it.
fn transfer_all(fd: c_int, input: bool, count: usize, mut once: impl FnMut(usize) -> ssize_t) -> ssize_t {
    let mut done = 0usize;
    loop {
        let m = Mark::now();
        let r = retry_fd(fd, input, || once(done));
        if r < 0 {
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
    retry_fd(fd, true, || unsafe { real(fd, buf, count) })
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
    transfer_all(fd, false, count, |done| unsafe { real(fd, (buf as *const u8).add(done) as *const c_void, count - done) })
}

/// # Safety
/// Same contract as POSIX `readv`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    let real = or_enosys!(real_readv());
    // SAFETY: forwarded verbatim.
    retry_fd(fd, true, || unsafe { real(fd, iov, n) })
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
    let r = retry_fd(fd, false, || unsafe { real(fd, iov, n) });
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
        let w2 = transfer_all(fd, false, len, |d| unsafe { w(fd, base.add(skip + d) as *const c_void, len - d) });
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
        return transfer_all(fd, true, len, |d| unsafe { real(fd, (buf as *mut u8).add(d) as *mut c_void, len - d, flags) });
    }
    // SAFETY: forwarded verbatim.
    retry_fd(fd, true, || unsafe { real(fd, buf, len, flags) })
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
    retry_fd(fd, true, || unsafe { real(fd, buf, len, flags, addr, alen) })
}

/// # Safety
/// Same contract as POSIX `recvmsg`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_recvmsg());
    // SAFETY: forwarded verbatim.
    retry_fd(fd, true, || unsafe { real(fd, msg, flags) })
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
    transfer_all(fd, false, len, |d| unsafe { real(fd, (buf as *const u8).add(d) as *const c_void, len - d, flags) })
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
    transfer_all(fd, false, len, |d| unsafe { real(fd, (buf as *const u8).add(d) as *const c_void, len - d, flags, addr, alen) })
}

/// # Safety
/// Same contract as POSIX `sendmsg`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_sendmsg());
    // SAFETY: forwarded verbatim.
    retry_fd(fd, false, || unsafe { real(fd, msg, flags) })
}

/// # Safety
/// Same contract as Linux `recvmmsg`.
#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    v: *mut libc::mmsghdr,
    n: libc::c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    let real = or_enosys!(real_recvmmsg());
    // SAFETY: forwarded verbatim.
    retry_fd(fd, true, || unsafe { real(fd, v, n, flags, timeout) })
}

/// # Safety
/// Same contract as Linux `sendmmsg`.
#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, v: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int) -> c_int {
    let real = or_enosys!(real_sendmmsg());
    // SAFETY: forwarded verbatim.
    retry_fd(fd, false, || unsafe { real(fd, v, n, flags) })
}

/// # Safety
/// Same contract as POSIX `accept`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> c_int {
    let real = or_enosys!(real_accept());
    // SAFETY: forwarded verbatim.
    retry_fd(fd, true, || unsafe { real(fd, addr, alen) })
}

/// # Safety
/// Same contract as Linux `accept4`.
#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, alen: *mut socklen_t, flags: c_int) -> c_int {
    let real = or_enosys!(real_accept4());
    // SAFETY: forwarded verbatim.
    retry_fd(fd, true, || unsafe { real(fd, addr, alen, flags) })
}

/// # Safety
/// Same contract as POSIX `connect`.
///
/// An interrupted TCP connect is not undone: it goes on in the background,
/// and calling again reports EALREADY, then EISCONN. An interrupted AF_UNIX
/// connect is simply not done. So after a preemption we call again and read
/// those answers as "still in progress" (wait for the outcome) and
/// "connected"; a socket send timeout keeps its original expiry.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, alen: socklen_t) -> c_int {
    let real = or_enosys!(real_connect());
    if !in_function() {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, addr, alen) };
    }
    let start = super::now(libc::CLOCK_MONOTONIC);
    let deadline = std::cell::OnceCell::new();
    let mut retried = false;
    let m = Mark::now();
    loop {
        // SAFETY: forwarded verbatim.
        let r = blocking(|| unsafe { real(fd, addr, alen) });
        if r == 0 {
            return 0;
        }
        let e = errno();
        let d: Option<&Option<Deadline>> = (e == libc::EINTR)
            .then(|| deadline.get_or_init(|| socket_timeout(fd, false).map(|t| Deadline::at(super::add(start, &t)))));
        // As in `retry_fd`: restarted after SA_RESTART handlers unless the
        // socket has a timeout.
        set_errno(e); // the socket query may have changed it
        if let Some(d) = d.filter(|d| if d.is_some() { m.preempted_only() } else { m.preempted_only_restartable() }) {
            if d.is_some_and(|d| d.remaining_ms() == 0) {
                set_errno(libc::EAGAIN);
                return -1;
            }
            retried = true;
            continue;
        }
        if retried && e == libc::EISCONN {
            return 0;
        }
        if !(retried && e == libc::EALREADY) {
            set_errno(e);
            return r;
        }
        let left = deadline.get().copied().flatten().map_or(-1, |d| d.remaining_ms());
        let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
        // SAFETY: one valid pollfd (the wrapper retries after preemption).
        match unsafe { super::wait::poll(&mut p, 1, left) } {
            -1 => return -1,
            0 => {
                set_errno(libc::EINPROGRESS); // what a timed-out TCP connect reports
                return -1;
            }
            _ => {}
        }
        let mut err: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as socklen_t;
        // SAFETY: valid out pointers of the right size.
        let g = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut c_int as *mut c_void, &mut len) };
        if g != 0 {
            return -1;
        }
        if err != 0 {
            set_errno(err);
            return -1;
        }
        return 0;
    }
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
    let m = Mark::now();
    loop {
        // SAFETY: the caller's operations and our remaining timeout.
        let r = blocking(|| unsafe { real(id, ops, n, &left) });
        if r == -1 && errno() == libc::EINTR && m.preempted_only() {
            left = deadline.remaining();
            continue;
        }
        return r;
    }
}

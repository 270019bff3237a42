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

use super::files::{self, At};
use super::parking::{self, socket_timeout, streams, Hook, Next, Transfer, Waiter};
use super::call::{Mark, blocking, in_function, retry};
use crate::base::sys::{Deadline, errno, or_enosys, real, set_errno, valid_timeout};
use crate::interpose::park::Interest;

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

/// Retries `f` on `fd` after interruptions by preemption alone. A socket
/// with a timeout fails with EINTR instead of restarting, and restarting it
/// would start its timeout afresh at every preemption (so it would never
/// expire under short slices): before each retry we wait for readiness for
/// what is left of the timeout, and report EAGAIN when it runs out, as the
/// kernel does.
///
/// Always inlined: each wrapper's blocking path is its own instance, as it
/// was before the park seam gave some of them a second call site.
#[inline(always)]
fn retry_fd<R: PartialEq + From<i8>>(fd: c_int, input: bool, mut f: impl FnMut() -> R) -> R {
    let start = crate::base::sys::now(libc::CLOCK_MONOTONIC);
    let m = Mark::now();
    let mut deadline: Option<Option<Deadline>> = None;
    loop {
        let r = blocking(&mut f);
        if r != R::from(-1) || errno() != libc::EINTR {
            return r;
        }
        let d = *deadline.get_or_insert_with(|| {
            socket_timeout(fd, input).map(|t| Deadline::at(crate::base::sys::add(start, &t)))
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
#[inline(always)]
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
    let Some(hook) = parking::inside() else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, count) };
    };
    // SAFETY: forwarded verbatim to libc.
    let blocking = || retry_fd(fd, true, || unsafe { real(fd, buf, count) });
    if let Some(h) = hook {
        return parked_read(h, fd, &[iovec { iov_base: buf, iov_len: count }], blocking);
    }
    blocking()
}

/// # Safety
/// Same contract as POSIX `write`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let real = or_enosys!(real_write());
    let Some(hook) = parking::inside() else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, count) };
    };
    // SAFETY: the caller's buffer holds `count` bytes; we pass its tail.
    let blocking = || transfer_all(fd, false, count, |done| unsafe { real(fd, (buf as *const u8).add(done) as *const c_void, count - done) });
    if let Some(h) = hook {
        let v = [iovec { iov_base: buf as *mut c_void, iov_len: count }];
        return parked_write(h, fd, &v, blocking);
    }
    blocking()
}

/// # Safety
/// Same contract as POSIX `readv`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    let real = or_enosys!(real_readv());
    // SAFETY: forwarded verbatim.
    let blocking = || retry_fd(fd, true, || unsafe { real(fd, iov, n) });
    match parking::hook() {
        // SAFETY: the caller passes `n` valid iovecs.
        Some(h) if !iov.is_null() && n > 0 => parked_read(h, fd, unsafe { std::slice::from_raw_parts(iov, n as usize) }, blocking),
        _ => blocking(),
    }
}

/// # Safety
/// Same contract as POSIX `writev`.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    let real = or_enosys!(real_writev());
    let Some(hook) = parking::inside().filter(|_| !iov.is_null() && n > 0) else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, iov, n) };
    };
    // SAFETY: the caller passes `n` valid iovecs.
    let v = unsafe { std::slice::from_raw_parts(iov, n as usize) };
    if let Some(h) = hook {
        return parked_write(h, fd, v, || writev_blocking(fd, iov, v, real));
    }
    writev_blocking(fd, iov, v, real)
}

/// `writev` inside a function, the blocking way: the whole of `v` (which
/// is `iov`) unless the program's handler cut it short.
fn writev_blocking(fd: c_int, iov: *const iovec, v: &[iovec], real: VecFn) -> ssize_t {
    let total = v.iter().fold(0usize, |a, e| a.saturating_add(e.iov_len));
    let m = Mark::now();
    // SAFETY: forwarded verbatim.
    let r = retry_fd(fd, false, || unsafe { real(fd, iov, v.len() as c_int) });
    if r < 0 || r as usize >= total || r == 0 || !m.preempted_only() {
        return r;
    }
    // Preemption cut the gathered write short: write the rest piece by piece
    // (the atomicity of writev is already gone once it returned short).
    let mut done = r as usize;
    let mut skip = done;
    for e in v {
        if skip >= e.iov_len {
            skip -= e.iov_len;
            continue;
        }
        // SAFETY: a tail of one of the caller's buffers.
        let w2 = write_piece(fd, unsafe { (e.iov_base as *const u8).add(skip) }, e.iov_len - skip);
        let len = e.iov_len - skip;
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

/// Writes `len` bytes at `base` the blocking way, finishing what
/// preemption alone cut short.
fn write_piece(fd: c_int, base: *const u8, len: usize) -> ssize_t {
    let Some(w) = real_write() else { return -1 };
    // SAFETY: the caller's buffer holds `len` bytes at `base`; we pass its tail.
    transfer_all(fd, false, len, |d| unsafe { w(fd, base.add(d) as *const c_void, len - d) })
}

/// `read` and `readv` in a function with a park hook: pipes, FIFOs and
/// sockets (`streams`) are read with `preadv2(RWF_NOWAIT)` (offset -1: the
/// file position, as `read`; the descriptor's flags untouched), parking
/// while there is nothing; anything else the blocking way.
fn parked_read(h: Hook, fd: c_int, v: &[iovec], blocking: impl FnOnce() -> ssize_t) -> ssize_t {
    if !streams(fd) {
        return files::transfer(h, fd, v, false, At::Position, blocking);
    }
    let t = Transfer { waiter: Waiter::new(h, fd, Interest::Read, true), v, all: false };
    // SAFETY: the caller's iovecs.
    t.run(|p, n, _| unsafe { libc::preadv2(fd, p, n, -1, libc::RWF_NOWAIT) }, blocking, |_, _| 0)
}

/// `write` and `writev` with a hook: `pwritev2(RWF_NOWAIT)` on pipes, FIFOs
/// and sockets, parking while there is no room, until all is written.
fn parked_write(h: Hook, fd: c_int, v: &[iovec], blocking: impl FnOnce() -> ssize_t) -> ssize_t {
    if !streams(fd) {
        return files::transfer(h, fd, v, true, At::Position, blocking);
    }
    let t = Transfer { waiter: Waiter::new(h, fd, Interest::Write, true), v, all: true };
    // SAFETY: the caller's iovecs, or what is left of them.
    t.run(|p, n, _| unsafe { libc::pwritev2(fd, p, n, -1, libc::RWF_NOWAIT) }, blocking, |b, len| write_piece(fd, b, len))
}

/// `accept` and `accept4` with a hook: no call accepts without blocking
/// and without the descriptor's flags, so wait until `poll` says a
/// connection is there, then make the call. Another thread (or green thread)
/// may take the connection first: the call then blocks until the next one.
fn parked_accept(h: Hook, fd: c_int, call: impl FnOnce() -> c_int) -> c_int {
    let Some(poll) = super::wait::real_poll() else { return call() };
    let mut w = Waiter::new(h, fd, Interest::Read, true);
    loop {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        if unsafe { poll(&mut p, 1, 0) } != 0 {
            drop(w);
            return call();
        }
        match w.would_block() {
            Next::Retry => continue,
            Next::Fail(e) => {
                set_errno(e);
                return -1;
            }
            Next::Block => {
                drop(w);
                return call();
            }
        }
    }
}

/// # Safety
/// Same contract as POSIX `recv`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_recv());
    let Some(hook) = parking::inside() else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, len, flags) };
    };
    let waitall = flags & libc::MSG_WAITALL != 0 && flags & libc::MSG_DONTWAIT == 0;
    let blocking = || {
        if waitall {
            // SAFETY: a tail of the caller's buffer.
            transfer_all(fd, true, len, |d| unsafe { real(fd, (buf as *mut u8).add(d) as *mut c_void, len - d, flags) })
        } else {
            // SAFETY: forwarded verbatim.
            retry_fd(fd, true, || unsafe { real(fd, buf, len, flags) })
        }
    };
    // MSG_WAITALL with MSG_PEEK waits for the whole length to peek at: kept blocking.
    let parks = flags & libc::MSG_DONTWAIT == 0 && !(waitall && flags & libc::MSG_PEEK != 0);
    match hook {
        Some(h) if parks => {
            let t = Transfer { waiter: Waiter::new(h, fd, Interest::Read, true), v: &[iovec { iov_base: buf, iov_len: len }], all: waitall };
            t.run(
                // SAFETY: (what is left of) the caller's buffer, as one iovec.
                |p, _, _| unsafe { real(fd, (*p).iov_base, (*p).iov_len, flags | libc::MSG_DONTWAIT) },
                blocking,
                // SAFETY: a tail of the caller's buffer.
                |b, n| transfer_all(fd, true, n, |d| unsafe { real(fd, b.add(d) as *mut c_void, n - d, flags) }),
            )
        }
        _ => blocking(),
    }
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
    let blocking = || retry_fd(fd, true, || unsafe { real(fd, buf, len, flags, addr, alen) });
    match parking::hook() {
        // MSG_WAITALL stays blocking (a stream socket's `recv` parks).
        Some(h) if flags & (libc::MSG_DONTWAIT | libc::MSG_WAITALL) == 0 => {
            let t = Transfer { waiter: Waiter::new(h, fd, Interest::Read, true), v: &[], all: false };
            // SAFETY: forwarded with MSG_DONTWAIT added.
            t.run(|_, _, _| unsafe { real(fd, buf, len, flags | libc::MSG_DONTWAIT, addr, alen) }, blocking, |_, _| 0)
        }
        _ => blocking(),
    }
}

/// # Safety
/// Same contract as POSIX `recvmsg`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_recvmsg());
    // SAFETY: forwarded verbatim.
    let blocking = || retry_fd(fd, true, || unsafe { real(fd, msg, flags) });
    match parking::hook() {
        // MSG_WAITALL stays blocking.
        Some(h) if flags & (libc::MSG_DONTWAIT | libc::MSG_WAITALL) == 0 => {
            let t = Transfer { waiter: Waiter::new(h, fd, Interest::Read, true), v: &[], all: false };
            // SAFETY: forwarded with MSG_DONTWAIT added.
            t.run(|_, _, _| unsafe { real(fd, msg, flags | libc::MSG_DONTWAIT) }, blocking, |_, _| 0)
        }
        _ => blocking(),
    }
}

/// # Safety
/// Same contract as POSIX `send`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_send());
    let Some(hook) = parking::inside().filter(|_| flags & libc::MSG_DONTWAIT == 0) else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, len, flags) };
    };
    // SAFETY: a tail of the caller's buffer.
    let piece = |b: *const u8, n: usize| transfer_all(fd, false, n, |d| unsafe { real(fd, b.add(d) as *const c_void, n - d, flags) });
    if let Some(h) = hook {
        let t = Transfer { waiter: Waiter::new(h, fd, Interest::Write, true), v: &[iovec { iov_base: buf as *mut c_void, iov_len: len }], all: true };
        return t.run(
            // SAFETY: (what is left of) the caller's buffer, as one iovec.
            |p, _, _| unsafe { real(fd, (*p).iov_base, (*p).iov_len, flags | libc::MSG_DONTWAIT) },
            || piece(buf as *const u8, len),
            |b, n| piece(b, n),
        );
    }
    piece(buf as *const u8, len)
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
    let Some(hook) = parking::inside().filter(|_| flags & libc::MSG_DONTWAIT == 0) else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, buf, len, flags, addr, alen) };
    };
    // SAFETY: a tail of the caller's buffer (a datagram is never split: it
    // goes out whole or not at all, so only stream sockets continue).
    let piece = |b: *const u8, n: usize| transfer_all(fd, false, n, |d| unsafe { real(fd, b.add(d) as *const c_void, n - d, flags, addr, alen) });
    if let Some(h) = hook {
        let t = Transfer { waiter: Waiter::new(h, fd, Interest::Write, true), v: &[iovec { iov_base: buf as *mut c_void, iov_len: len }], all: true };
        return t.run(
            // SAFETY: (what is left of) the caller's buffer, as one iovec.
            |p, _, _| unsafe { real(fd, (*p).iov_base, (*p).iov_len, flags | libc::MSG_DONTWAIT, addr, alen) },
            || piece(buf as *const u8, len),
            |b, n| piece(b, n),
        );
    }
    piece(buf as *const u8, len)
}

/// The descriptors `msg` passes (`SCM_RIGHTS`) will share their
/// descriptions with the receiver: `fd_modes` forgets them (before the
/// call: whether or not it succeeds, they may have gone).
///
/// # Safety
/// `msg` is null or a valid message, as `sendmsg` requires.
unsafe fn sends_descriptors(msg: *const libc::msghdr) {
    if msg.is_null() {
        return;
    }
    // SAFETY: a valid message per the contract; the CMSG macros walk its
    // control buffer within `msg_controllen`.
    unsafe {
        if (*msg).msg_control.is_null() {
            return;
        }
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const c_int;
                let bytes = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                for i in 0..bytes / std::mem::size_of::<c_int>() {
                    let fd = data.add(i).read_unaligned();
                    super::fd_modes::forget(fd, fd);
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
}

/// # Safety
/// Same contract as POSIX `sendmsg`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    let real = or_enosys!(real_sendmsg());
    // SAFETY: the caller's message (or null).
    unsafe { sends_descriptors(msg) };
    // SAFETY: forwarded verbatim.
    let blocking = || retry_fd(fd, false, || unsafe { real(fd, msg, flags) });
    if flags & libc::MSG_DONTWAIT != 0 || msg.is_null() {
        return blocking();
    }
    let Some(h) = parking::hook() else { return blocking() };
    // SAFETY: non-null, and a valid message per the caller's contract.
    let m = unsafe { &*msg };
    let v: &[iovec] = if m.msg_iov.is_null() || m.msg_iovlen == 0 {
        &[]
    } else {
        // SAFETY: as above: `msg_iovlen` valid iovecs.
        unsafe { std::slice::from_raw_parts(m.msg_iov, m.msg_iovlen) }
    };
    let t = Transfer { waiter: Waiter::new(h, fd, Interest::Write, true), v, all: true };
    t.run(
        |p, n, first| {
            if first {
                // SAFETY: the caller's message, with MSG_DONTWAIT added.
                return unsafe { real(fd, msg, flags | libc::MSG_DONTWAIT) };
            }
            // The rest of a stream, after a partial send: data only (the
            // address and control messages went with the first part).
            // SAFETY: all-zero is a valid (empty) msghdr.
            let mut rest: libc::msghdr = unsafe { std::mem::zeroed() };
            rest.msg_iov = p as *mut iovec;
            rest.msg_iovlen = n as usize;
            // SAFETY: what is left of the caller's iovecs.
            unsafe { real(fd, &rest, flags | libc::MSG_DONTWAIT) }
        },
        blocking,
        |b, n| {
            let Some(send) = real_send() else { return -1 };
            // SAFETY: a tail of one of the caller's buffers.
            transfer_all(fd, false, n, |d| unsafe { send(fd, b.add(d) as *const c_void, n - d, flags) })
        },
    )
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
    if !v.is_null() {
        for i in 0..n as usize {
            // SAFETY: the caller's `n` messages.
            unsafe { sends_descriptors(&(*v.add(i)).msg_hdr) };
        }
    }
    // SAFETY: forwarded verbatim.
    retry_fd(fd, false, || unsafe { real(fd, v, n, flags) })
}

/// # Safety
/// Same contract as POSIX `accept`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> c_int {
    let real = or_enosys!(real_accept());
    // SAFETY: forwarded verbatim.
    let call = || retry_fd(fd, true, || unsafe { real(fd, addr, alen) });
    let r = match parking::hook() {
        Some(h) => parked_accept(h, fd, call),
        None => call(),
    };
    accepted(r, fd, 0);
    r
}

/// # Safety
/// Same contract as Linux `accept4`.
#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, alen: *mut socklen_t, flags: c_int) -> c_int {
    let real = or_enosys!(real_accept4());
    // SAFETY: forwarded verbatim.
    let call = || retry_fd(fd, true, || unsafe { real(fd, addr, alen, flags) });
    let r = match parking::hook() {
        Some(h) => parked_accept(h, fd, call),
        None => call(),
    };
    accepted(r, fd, flags);
    r
}

/// Records a socket accepted from `listener` (`r`: the call's result).
fn accepted(r: c_int, listener: c_int, flags: c_int) {
    if r >= 0 {
        super::fd_modes::accepted(r, listener, flags & libc::SOCK_NONBLOCK != 0);
    }
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
    let Some(hook) = parking::inside() else {
        // SAFETY: forwarded verbatim.
        return unsafe { real(fd, addr, alen) };
    };
    if let Some(h) = hook {
        // SAFETY: forwarded verbatim.
        if let Some(r) = parked_connect(h, fd, || unsafe { real(fd, addr, alen) }) {
            return r;
        }
    }
    let start = crate::base::sys::now(libc::CLOCK_MONOTONIC);
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
            .then(|| deadline.get_or_init(|| socket_timeout(fd, false).map(|t| Deadline::at(crate::base::sys::add(start, &t)))));
        // As in `retry_fd`: restarted after SA_RESTART handlers unless the
        // socket has a timeout.
        set_errno(e); // the socket query may have changed it
        if let Some(d) = d.filter(|d| if d.is_some() { m.preempted_only() } else { m.preempted_only_restartable() }) {
            if d.is_some_and(|d| d.remaining_ms() == 0) {
                // What a blocking connect whose send timeout ran out
                // reports: `EAGAIN` for a Unix socket (its listener's
                // backlog stayed full), `EINPROGRESS` for TCP (the
                // connection goes on in the background).
                // SAFETY: the caller's address, of `alen` bytes.
                let unix = !addr.is_null() && alen >= 2 && unsafe { (*addr).sa_family } == libc::AF_UNIX as libc::sa_family_t;
                set_errno(if unix { libc::EAGAIN } else { libc::EINPROGRESS });
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
        return connect_outcome(fd);
    }
}

/// How a connection that was in progress on `fd` (now writable) ended: 0,
/// or -1 with its error (`SO_ERROR`) in errno.
fn connect_outcome(fd: c_int) -> c_int {
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

/// `connect` with a hook, on a socket the program left blocking: the
/// connection is started with the descriptor made non-blocking for that
/// one call (there is no per-call flag for `connect`), its flags put back
/// at once, and the thread parks until the socket is writable, then reads
/// the outcome (`SO_ERROR`). As the blocking call: 0 once connected, the
/// error the connection failed with, `EINPROGRESS` when `SO_SNDTIMEO` runs
/// out first, `EINTR` after the program's handler (the connection goes on
/// in the background in both cases, as the kernel's does). While the flag
/// is set, another thread's blocking call on the same open file would get
/// `EAGAIN`; nothing uses a socket that is not connected yet. None: make
/// the blocking call (a non-blocking socket, whose `EINPROGRESS` is the
/// program's; a Unix socket whose listener's backlog is full, which no
/// readiness announces; flags that cannot be read or set).
fn parked_connect(h: Hook, fd: c_int, call: impl Fn() -> c_int) -> Option<c_int> {
    let e0 = errno();
    // SAFETY: F_GETFL takes no argument.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: sets the status flags of the caller's descriptor (changed
    // back right after the one call below).
    if fl == -1 || fl & libc::O_NONBLOCK != 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) } == -1 {
        set_errno(e0);
        return None;
    }
    let r = call();
    let e = errno();
    // SAFETY: the flags as they were.
    unsafe { libc::fcntl(fd, libc::F_SETFL, fl) };
    if r == 0 {
        set_errno(e0);
        return Some(0);
    }
    match e {
        libc::EINPROGRESS => {}
        // Nothing started (a full Unix backlog): the blocking call waits.
        libc::EAGAIN => {
            set_errno(e0);
            return None;
        }
        _ => {
            set_errno(e);
            return Some(-1);
        }
    }
    let poll = super::wait::real_poll()?;
    // The waiter's mark keeps the program's errno, for success.
    set_errno(e0);
    let mut w = Waiter::new(h, fd, Interest::Write, true);
    loop {
        let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        if unsafe { poll(&mut p, 1, 0) } != 0 {
            break;
        }
        match w.would_block() {
            Next::Retry => {}
            // The send timeout ran out (what a timed-out connect reports),
            // or the program's handler ran.
            Next::Fail(e) => {
                set_errno(if e == libc::EAGAIN { libc::EINPROGRESS } else { e });
                return Some(-1);
            }
            // May not park here: wait in the kernel, for as long as the
            // blocking call would have.
            Next::Block => {
                let t = socket_timeout(fd, false).map_or(-1, |t| (t.tv_sec.saturating_mul(1000) + t.tv_nsec / 1_000_000).clamp(1, c_int::MAX as i64) as c_int);
                // SAFETY: one valid pollfd (our own wrapper: it retries
                // after preemption, and cannot park here either).
                if unsafe { super::wait::poll(&mut p, 1, t) } == 0 {
                    set_errno(libc::EINPROGRESS);
                    return Some(-1);
                }
                break;
            }
        }
    }
    let r = connect_outcome(fd);
    if r == 0 {
        w.done(());
    }
    Some(r)
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

//! A parked call honours the program's own descriptor modes (`O_NONBLOCK`,
//! `SO_RCVTIMEO`) without asking the kernel at each park: linger keeps them
//! from the calls that set them (`fd_modes.rs`), and forgets them wherever
//! another descriptor of the same description may change them. One test
//! for each case `docs/safety.md` ("What a park knows of a descriptor")
//! names. In every test a peer writes a byte some time later: a read that
//! should fail at once with `WouldBlock` but parks instead returns the byte.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use turquoise::thread::Builder;

mod common;
use common::{runtime, within};

const ROUNDS: usize = 20;

/// How a read ended.
#[derive(Debug, PartialEq)]
enum Got {
    Byte(u8),
    /// `WouldBlock` at once (expected only: a read reports `TimedOut`).
    WouldBlock,
    /// A socket timeout: `WouldBlock` after this long (expected: at least).
    TimedOut(Duration),
}

/// Reads one byte from `fd` on a green thread (one worker, 2 ms slices),
/// after `setup`, while another OS thread writes one byte into `peer` later:
/// 30 ms later where the read is expected to wait for it (`Got::Byte`), 2 s
/// later where it is expected to end without it (then the write is skipped
/// once the read ended): a stall of the VM before the read must not let
/// the byte come first.
fn read_on_green(fd: i32, peer: UnixStream, expect: &Got, setup: impl FnOnce() + Send + 'static) -> Got {
    let rt = runtime(1, Duration::from_millis(2));
    let delay = if matches!(expect, Got::Byte(_)) { Duration::from_millis(30) } else { Duration::from_secs(2) };
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        if ended.recv_timeout(delay).is_err() {
            let _ = (&peer).write_all(&[42]);
        }
        peer
    });
    let h = Builder::new()
        .spawn_on(rt.handle(), move || {
            setup();
            // SAFETY: the test's own descriptor, borrowed for the read.
            let mut f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
            let start = Instant::now();
            let mut b = [0u8; 1];
            match f.read(&mut b) {
                Ok(1) => Got::Byte(b[0]),
                Ok(n) => panic!("read {n} bytes"),
                // At once, or at a socket timeout: told apart by what the
                // test expects (a stall may make "at once" take long).
                Err(e) if e.kind() == ErrorKind::WouldBlock => Got::TimedOut(start.elapsed()),
                Err(e) => panic!("read: {e}"),
            }
        })
        .unwrap();
    let got = within(Duration::from_secs(30), "read", move || h.join().unwrap());
    let _ = done.send(());
    drop(writer.join().unwrap());
    got
}

/// `read_on_green`, checked against `expect`.
fn expect_read(fd: i32, peer: UnixStream, expect: Got, setup: impl FnOnce() + Send + 'static) {
    let got = read_on_green(fd, peer, &expect, setup);
    match (&expect, &got) {
        (Got::TimedOut(at_least), Got::TimedOut(t)) => assert!(t >= at_least, "timed out after {t:?}, before {at_least:?}"),
        (Got::WouldBlock, Got::TimedOut(_)) => {}
        (e, g) if e == g => {}
        _ => panic!("expected {expect:?}, got {got:?}"),
    }
}

fn set_nonblock_fcntl(fd: i32, on: bool) {
    // SAFETY: F_GETFL/F_SETFL on the test's own descriptor.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        assert!(fl >= 0);
        let fl = if on { fl | libc::O_NONBLOCK } else { fl & !libc::O_NONBLOCK };
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, fl), 0);
    }
}

fn rcvtimeo(fd: i32, t: Duration) {
    let tv = libc::timeval { tv_sec: t.as_secs() as _, tv_usec: t.subsec_micros() as _ };
    // SAFETY: a valid timeval for SO_RCVTIMEO.
    let r = unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv as *const _ as *const libc::c_void, std::mem::size_of_val(&tv) as _) };
    assert_eq!(r, 0);
}

#[test]
fn blocking_by_default_parks_until_data() {
    for _ in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        expect_read(a.as_raw_fd(), b, Got::Byte(42), || {});
    }
}

/// std's `set_nonblocking` is `ioctl(FIONBIO)`.
#[test]
fn nonblocking_set_by_ioctl_fails_at_once_and_cleared_parks() {
    for _ in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        a.set_nonblocking(true).unwrap();
        let (a2, b2) = UnixStream::pair().unwrap();
        expect_read(fd, b, Got::WouldBlock, || {});
        a2.set_nonblocking(true).unwrap();
        a2.set_nonblocking(false).unwrap();
        expect_read(a2.as_raw_fd(), b2, Got::Byte(42), || {});
        drop(a);
    }
}

#[test]
fn nonblocking_set_by_fcntl_fails_at_once() {
    for _ in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        // Set inside the green thread, just before the read.
        expect_read(fd, b, Got::WouldBlock, move || set_nonblock_fcntl(fd, true));
        drop(a);
    }
}

#[test]
fn nonblocking_pipe_from_pipe2_fails_at_once() {
    for _ in 0..ROUNDS {
        let mut fds = [0; 2];
        // SAFETY: a valid array of two ints.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) }, 0);
        // SAFETY: both ends are ours.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (_x, y) = UnixStream::pair().unwrap();
        expect_read(r.as_raw_fd(), y, Got::WouldBlock, || {});
        drop(w);
    }
}

#[test]
fn socket_timeout_set_and_cleared() {
    for _ in 0..ROUNDS / 4 {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        // 10 ms, long before the peer's byte.
        expect_read(fd, b, Got::TimedOut(Duration::from_millis(9)), move || rcvtimeo(fd, Duration::from_millis(10)));
        let (c, d) = UnixStream::pair().unwrap();
        let fd = c.as_raw_fd();
        rcvtimeo(fd, Duration::from_millis(10));
        // Zero: no timeout.
        expect_read(fd, d, Got::Byte(42), move || rcvtimeo(fd, Duration::ZERO));
        drop(c);
    }
}

/// The mode is the description's: set through a duplicate (`try_clone`:
/// `fcntl(F_DUPFD_CLOEXEC)`; `dup`), it holds for the original.
#[test]
fn a_duplicate_shares_the_mode() {
    for round in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        let dup: OwnedFd = if round % 2 == 0 {
            a.try_clone().unwrap().into()
        } else {
            // SAFETY: dup of our own descriptor.
            unsafe { OwnedFd::from_raw_fd(libc::dup(fd)) }
        };
        let d = dup.as_raw_fd();
        expect_read(fd, b, Got::WouldBlock, move || set_nonblock_fcntl(d, true));
        drop(dup);
    }
}

/// `dup2` onto a number: the number's mode is the new file's.
#[test]
fn dup2_over_a_number_takes_its_mode() {
    for _ in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        let (n, _m) = UnixStream::pair().unwrap();
        n.set_nonblocking(true).unwrap();
        let fd = a.as_raw_fd();
        // SAFETY: both descriptors are ours; `fd` now names `n`'s socket.
        assert_eq!(unsafe { libc::dup2(n.as_raw_fd(), fd) }, fd);
        expect_read(fd, b, Got::WouldBlock, || {});
    }
}

/// A number closed and made again names the new file, with its own mode.
#[test]
fn a_reused_number_takes_the_new_files_mode() {
    for _ in 0..ROUNDS {
        let (a, _b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let old = a.as_raw_fd();
        drop(a);
        let (c, d) = UnixStream::pair().unwrap();
        if c.as_raw_fd() != old {
            continue; // another test took the number meanwhile
        }
        expect_read(c.as_raw_fd(), d, Got::Byte(42), || {});
    }
}

/// Linux copies a listener's socket timeouts to the sockets it accepts.
#[test]
fn an_accepted_socket_has_its_listeners_timeout() {
    for _ in 0..ROUNDS / 4 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        rcvtimeo(l.as_raw_fd(), Duration::from_millis(10));
        let peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        // The kernel's own answer, so that the test checks what it claims.
        assert!(s.read_timeout().unwrap().is_some(), "the kernel did not copy the timeout");
        let (_x, y) = UnixStream::pair().unwrap();
        expect_read(s.as_raw_fd(), y, Got::TimedOut(Duration::from_millis(9)), || {});
        drop(peer);
    }
}

/// A forked child shares every description: its change holds here.
#[test]
fn a_forked_childs_change_holds() {
    for _ in 0..ROUNDS / 4 {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        // SAFETY: the child only calls fcntl and _exit (async-signal-safe).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                let fl = libc::fcntl(fd, libc::F_GETFL);
                libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        expect_read(fd, b, Got::WouldBlock, || {});
    }
}

/// A descriptor passed with `SCM_RIGHTS` (here to this process itself):
/// the receiver's change holds for the sender's number.
#[test]
fn a_descriptor_sent_with_scm_rights_shares_the_mode() {
    for _ in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        let (tx, rx) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        send_fd(&tx, fd);
        let got = recv_fd(&rx);
        set_nonblock_fcntl(got.as_raw_fd(), true);
        expect_read(fd, b, Got::WouldBlock, || {});
    }
}

/// `syscall(SYS_fcntl, ...)` goes through libc's `syscall`, which linger
/// wraps: seen too.
#[test]
fn a_change_made_through_syscall_holds() {
    for _ in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        let set = move || {
            // SAFETY: F_GETFL/F_SETFL on our descriptor.
            unsafe {
                let fl = libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL);
                libc::syscall(libc::SYS_fcntl, fd, libc::F_SETFL, fl | libc::O_NONBLOCK as libc::c_long);
            }
        };
        expect_read(fd, b, Got::WouldBlock, set);
    }
}

/// A one-byte message over `byte` with room for one descriptor in `buf`.
fn message(byte: &mut [u8; 1], iov: &mut libc::iovec, buf: &mut Vec<u64>) -> libc::msghdr {
    *iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: CMSG_SPACE is a size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) } as usize;
    *buf = vec![0u64; space.div_ceil(8)];
    // SAFETY: all-zero is a valid (empty) msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = buf.as_mut_ptr().cast();
    msg.msg_controllen = space;
    msg
}

fn send_fd(s: &UnixStream, fd: i32) {
    let (mut byte, mut iov, mut buf) = ([0u8; 1], libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }, Vec::new());
    let msg = message(&mut byte, &mut iov, &mut buf);
    // SAFETY: the message has room for one SCM_RIGHTS header and
    // descriptor, which we fill.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as usize;
        (libc::CMSG_DATA(c) as *mut i32).write_unaligned(fd);
        assert_eq!(libc::sendmsg(s.as_raw_fd(), &msg, 0), 1);
    }
}

fn recv_fd(s: &UnixStream) -> OwnedFd {
    let (mut byte, mut iov, mut buf) = ([0u8; 1], libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }, Vec::new());
    let mut msg = message(&mut byte, &mut iov, &mut buf);
    // SAFETY: as in `send_fd`; the received descriptor is ours.
    unsafe {
        assert_eq!(libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC), 1);
        let c = libc::CMSG_FIRSTHDR(&msg);
        assert!(!c.is_null() && (*c).cmsg_type == libc::SCM_RIGHTS);
        OwnedFd::from_raw_fd((libc::CMSG_DATA(c) as *const i32).read_unaligned())
    }
}

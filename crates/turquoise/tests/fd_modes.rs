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
    WouldBlock,
    /// A socket timeout: `WouldBlock` after at least this long.
    TimedOut(Duration),
}

/// Reads one byte from `fd` on a green thread (one worker, 2 ms slices),
/// after `setup`, while another OS thread writes one byte into `peer` 30 ms
/// later.
fn read_on_green(fd: i32, peer: UnixStream, setup: impl FnOnce() + Send + 'static) -> Got {
    let rt = runtime(1, Duration::from_millis(2));
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        let _ = (&peer).write_all(&[42]);
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
                Err(e) if e.kind() == ErrorKind::WouldBlock && start.elapsed() >= Duration::from_millis(5) => Got::TimedOut(start.elapsed()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => Got::WouldBlock,
                Err(e) => panic!("read: {e}"),
            }
        })
        .unwrap();
    let got = within(Duration::from_secs(30), "read", move || h.join().unwrap());
    drop(writer.join().unwrap());
    got
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
        assert_eq!(read_on_green(a.as_raw_fd(), b, || {}), Got::Byte(42));
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
        assert_eq!(read_on_green(fd, b, || {}), Got::WouldBlock);
        a2.set_nonblocking(true).unwrap();
        a2.set_nonblocking(false).unwrap();
        assert_eq!(read_on_green(a2.as_raw_fd(), b2, || {}), Got::Byte(42));
        drop(a);
    }
}

#[test]
fn nonblocking_set_by_fcntl_fails_at_once() {
    for _ in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        // Set inside the green thread, just before the read.
        assert_eq!(read_on_green(fd, b, move || set_nonblock_fcntl(fd, true)), Got::WouldBlock);
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
        assert_eq!(read_on_green(r.as_raw_fd(), y, || {}), Got::WouldBlock);
        drop(w);
    }
}

#[test]
fn socket_timeout_set_and_cleared() {
    for _ in 0..ROUNDS / 4 {
        let (a, b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        // 10 ms, before the peer's byte at 30 ms.
        match read_on_green(fd, b, move || rcvtimeo(fd, Duration::from_millis(10))) {
            Got::TimedOut(t) => assert!(t >= Duration::from_millis(9), "timed out after {t:?}"),
            g => panic!("expected the socket timeout, got {g:?}"),
        }
        let (c, d) = UnixStream::pair().unwrap();
        let fd = c.as_raw_fd();
        rcvtimeo(fd, Duration::from_millis(10));
        // Zero: no timeout.
        assert_eq!(read_on_green(fd, d, move || rcvtimeo(fd, Duration::ZERO)), Got::Byte(42));
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
        assert_eq!(read_on_green(fd, b, move || set_nonblock_fcntl(d, true)), Got::WouldBlock);
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
        assert_eq!(read_on_green(fd, b, || {}), Got::WouldBlock);
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
        assert_eq!(read_on_green(c.as_raw_fd(), d, || {}), Got::Byte(42));
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
        match read_on_green(s.as_raw_fd(), y, || {}) {
            Got::TimedOut(_) => {}
            g => panic!("expected the inherited socket timeout, got {g:?}"),
        }
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
        assert_eq!(read_on_green(fd, b, || {}), Got::WouldBlock);
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
        assert_eq!(read_on_green(fd, b, || {}), Got::WouldBlock);
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
        assert_eq!(read_on_green(fd, b, set), Got::WouldBlock);
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

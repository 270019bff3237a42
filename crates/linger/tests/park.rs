//! The park seam (`linger::park`): blocking calls inside a function launched
//! with a hook park it through the hook instead of blocking the thread.
//!
//! The hook here records each wait and switches out with `linger::pause()`;
//! each test's loop plays the scheduler: it resumes the function once the
//! awaited descriptor is ready (a real `poll` on the caller's side) or the
//! sleep's deadline passed, and in between acts as the function's peer.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linger::park::{Interest, Park};
use linger::{Builder, Linger};

/// A wait the hook was asked for.
#[derive(Clone, Debug, PartialEq)]
enum Wait {
    Fd(RawFd, Interest, Option<Duration>),
    Fds(Vec<(RawFd, Interest)>, Option<Duration>),
    Sleep(Duration),
}

#[derive(Default)]
struct TestPark {
    /// Every wait, in order.
    log: Mutex<Vec<Wait>>,
    /// The wait the function is parked in, for the scheduler.
    pending: Mutex<Option<Wait>>,
    /// A descriptor the hook itself polls (1 ms) before it parks, if any.
    probe: std::sync::atomic::AtomicI32,
    /// Switch out with `pause_in_hook` rather than `pause`.
    in_hook: std::sync::atomic::AtomicBool,
}

impl TestPark {
    fn new() -> Arc<TestPark> {
        Arc::new(TestPark { probe: (-1).into(), ..TestPark::default() })
    }

    fn wait(&self, w: Wait) -> bool {
        let probe = self.probe.load(std::sync::atomic::Ordering::Relaxed);
        if probe >= 0 {
            // Through the wrapper, inside the function: must not park again.
            let mut p = libc::pollfd { fd: probe, events: libc::POLLIN, revents: 0 };
            // SAFETY: a valid pollfd.
            assert_eq!(unsafe { libc::poll(&mut p, 1, 1) }, 0);
        }
        self.log.lock().unwrap().push(w.clone());
        *self.pending.lock().unwrap() = Some(w);
        if self.in_hook.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: called from the hook's own methods; the locks above
            // are released, and no library code is on the way here.
            unsafe { linger::park::pause_in_hook() };
        } else {
            linger::pause();
        }
        true
    }

    fn log(&self) -> Vec<Wait> {
        self.log.lock().unwrap().clone()
    }
}

impl Park for TestPark {
    fn wait_fd(&self, fd: RawFd, interest: Interest, deadline: Option<Duration>) -> bool {
        self.wait(Wait::Fd(fd, interest, deadline))
    }
    fn wait_fds(&self, fds: &[(RawFd, Interest)], deadline: Option<Duration>) -> bool {
        self.wait(Wait::Fds(fds.to_vec(), deadline))
    }
    fn sleep_until(&self, deadline: Duration) -> bool {
        self.wait(Wait::Sleep(deadline))
    }
}

/// Milliseconds until `d` (CLOCK_MONOTONIC), rounded up; -1 for none.
fn ms_until(d: Option<Duration>) -> i32 {
    match d {
        None => -1,
        Some(d) => {
            let left = d.saturating_sub(linger::park::monotonic_now());
            left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
        }
    }
}

/// The scheduler's wait: until the parked wait can go on.
fn ready(w: &Wait) {
    let events = |i: Interest| if i == Interest::Read { libc::POLLIN } else { libc::POLLOUT };
    let (mut fds, deadline) = match w {
        Wait::Fd(fd, i, d) => (vec![libc::pollfd { fd: *fd, events: events(*i), revents: 0 }], *d),
        Wait::Fds(v, d) => (v.iter().map(|&(fd, i)| libc::pollfd { fd, events: events(i), revents: 0 }).collect(), *d),
        Wait::Sleep(d) => (Vec::new(), Some(*d)),
    };
    loop {
        // SAFETY: valid pollfds (outside any function: the real poll).
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms_until(deadline)) };
        if r != 0 || ms_until(deadline) == 0 {
            return;
        }
    }
}

/// Launches `f` with `hook` and plays its scheduler: after each park, calls
/// `between(n)` (n: parks so far), waits until the function can go on and
/// resumes it. Returns its value and the number of parks.
fn drive<T: Send + 'static>(hook: &Arc<TestPark>, f: impl FnOnce() -> T + Send + 'static, mut between: impl FnMut(usize)) -> (T, usize) {
    let mut l = Builder::new().park_with(hook.clone()).launch(f, Duration::ZERO).unwrap();
    let mut parks = 0;
    loop {
        linger::resume(&mut l, Duration::MAX).unwrap();
        match l {
            Linger::Completion(v) => return (v, parks),
            Linger::Continuation(_) => {
                let w = hook.pending.lock().unwrap().take().expect("stopped only in the hook");
                parks += 1;
                between(parks);
                ready(&w);
            }
            Linger::Poison => unreachable!(),
        }
    }
}

fn pipe() -> (RawFd, RawFd) {
    let mut p = [0; 2];
    // SAFETY: valid out array.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (p[0], p[1])
}

fn socketpair() -> (RawFd, RawFd) {
    let mut p = [0; 2];
    // SAFETY: valid out array.
    assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, p.as_mut_ptr()) }, 0);
    (p[0], p[1])
}

fn close(fd: RawFd) {
    // SAFETY: the test's own descriptor.
    unsafe { libc::close(fd) };
}

fn close_all(fds: &[RawFd]) {
    fds.iter().copied().for_each(close);
}

fn put(fd: RawFd, b: &[u8]) {
    // SAFETY: a valid buffer.
    assert_eq!(unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) }, b.len() as isize);
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

/// Reads up to 8 bytes from `fd` (inside a function: through the wrapper).
fn read8(fd: RawFd) -> isize {
    let mut buf = [0u8; 8];
    // SAFETY: a valid buffer.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), 8) }
}

/// Launches `read8(r)` with `b` and a new test hook; it parks at once.
fn parked_reader(b: Builder, r: RawFd) -> (Linger<isize>, Arc<TestPark>) {
    let hook = TestPark::new();
    let l = b.park_with(hook.clone()).launch(move || read8(r), Duration::MAX).unwrap();
    assert!(l.yielded());
    (l, hook)
}

fn flags(fd: RawFd) -> i32 {
    // SAFETY: F_GETFL takes no argument.
    unsafe { libc::fcntl(fd, libc::F_GETFL) }
}

/// 300 rounds of a `read` on an empty pipe that parks once and gets what
/// the scheduler wrote meanwhile; `in_hook`: the hook switches out with
/// `pause_in_hook`.
fn pipe_reads_park(in_hook: bool) {
    for i in 0..300 {
        linger::reset_stats();
        let (r, w) = pipe();
        let hook = TestPark::new();
        hook.in_hook.store(in_hook, std::sync::atomic::Ordering::Relaxed);
        let ((n, buf), parks) = drive(
            &hook,
            move || {
                let mut buf = [0u8; 16];
                // SAFETY: a valid buffer.
                let n = unsafe { libc::read(r, buf.as_mut_ptr().cast(), buf.len()) };
                (n, buf)
            },
            |_| put(w, format!("hello {i}").as_bytes()),
        );
        let msg = format!("hello {i}");
        assert_eq!(n, msg.len() as isize);
        assert_eq!(&buf[..msg.len()], msg.as_bytes());
        assert_eq!(parks, 1);
        assert_eq!(hook.log(), vec![Wait::Fd(r, Interest::Read, None)]);
        assert_eq!(flags(r) & libc::O_NONBLOCK, 0, "the pipe's flags are left alone");
        assert_eq!(linger::park::counters().parks, 1);
        close_all(&[r, w]);
    }
}

#[test]
fn read_on_an_empty_pipe_parks_then_gets_the_data() {
    pipe_reads_park(false);
}

/// The hook's shortcut switch parks and resumes as `pause()` does, and is
/// `pause()` where the shortcut does not hold: in the function's own code
/// (no wrapper called a hook) and outside any function.
#[test]
fn pause_in_hook_parks_and_falls_back_to_pause_elsewhere() {
    pipe_reads_park(true);
    // SAFETY: no hook runs: the fallback, which outside a function does nothing.
    unsafe { linger::park::pause_in_hook() };
    let mut l = Builder::new()
        .launch(
            || {
                // SAFETY: not in a hook: the fallback, a plain `pause()`.
                unsafe { linger::park::pause_in_hook() };
                7
            },
            Duration::ZERO,
        )
        .unwrap();
    linger::resume(&mut l, Duration::MAX).unwrap();
    assert!(matches!(l, Linger::Continuation(_)), "switched out, as by pause()");
    linger::resume(&mut l, Duration::MAX).unwrap();
    assert!(matches!(l, Linger::Completion(7)));
}

#[test]
fn readv_and_end_of_file() {
    for _ in 0..100 {
        let (r, w) = pipe();
        let hook = TestPark::new();
        let ((a, b, eof), parks) = drive(
            &hook,
            move || {
                let (mut x, mut y) = ([0u8; 3], [0u8; 3]);
                let iov = [
                    libc::iovec { iov_base: x.as_mut_ptr().cast(), iov_len: 3 },
                    libc::iovec { iov_base: y.as_mut_ptr().cast(), iov_len: 3 },
                ];
                // SAFETY: valid iovecs.
                let n = unsafe { libc::readv(r, iov.as_ptr(), 2) };
                assert_eq!(n, 6);
                let mut z = [0u8; 1];
                // SAFETY: a valid buffer.
                let eof = unsafe { libc::read(r, z.as_mut_ptr().cast(), 1) };
                (x, y, eof)
            },
            |n| {
                if n == 1 {
                    put(w, b"abcdef");
                } else {
                    close(w);
                }
            },
        );
        assert_eq!((&a, &b, eof), (b"abc", b"def", 0));
        assert_eq!(parks, 2);
        close(r);
    }
}

#[test]
fn a_big_write_to_a_full_socket_completes_across_parks() {
    const LEN: usize = 6 << 20;
    for round in 0..8 {
        let (a, b) = socketpair();
        let hook = TestPark::new();
        let data: Vec<u8> = (0..LEN).map(|i| (i * 7 + round) as u8).collect();
        let expect = data.clone();
        let got = Arc::new(Mutex::new(Vec::with_capacity(LEN)));
        let sink = got.clone();
        let (n, parks) = drive(
            &hook,
            move || {
                // Through `write` (a socket: `pwritev2(RWF_NOWAIT)`) and `send`.
                let half = LEN / 2;
                // SAFETY: valid buffers.
                let w1 = unsafe { libc::write(a, data.as_ptr().cast(), half) };
                // SAFETY: as above.
                let w2 = unsafe { libc::send(a, data[half..].as_ptr().cast(), LEN - half, libc::MSG_NOSIGNAL) };
                w1 + w2
            },
            |_| {
                // Drain some of it, as a slow reader would.
                let mut buf = vec![0u8; 300_000];
                // SAFETY: a valid buffer; MSG_DONTWAIT, outside any function.
                let n = unsafe { libc::recv(b, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
                if n > 0 {
                    sink.lock().unwrap().extend_from_slice(&buf[..n as usize]);
                }
            },
        );
        assert_eq!(n, LEN as isize, "every byte written, no short count");
        assert!(parks >= 2, "a full socket parks the writer ({parks} parks)");
        assert!(hook.log().iter().all(|w| *w == Wait::Fd(a, Interest::Write, None)));
        let mut rest = Vec::new();
        close(a);
        // SAFETY: the test's own descriptor, handed to a File that closes it.
        let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(b) };
        f.read_to_end(&mut rest).unwrap();
        let mut all = got.lock().unwrap().clone();
        all.extend_from_slice(&rest);
        assert!(all == expect, "the reader got every byte in order");
    }
}

#[test]
fn writev_to_a_full_pipe_writes_everything() {
    for _ in 0..20 {
        let (r, w) = pipe();
        let hook = TestPark::new();
        let (n, parks) = drive(
            &hook,
            move || {
                let (x, y) = (vec![1u8; 100_000], vec![2u8; 150_000]);
                let iov = [
                    libc::iovec { iov_base: x.as_ptr() as *mut _, iov_len: x.len() },
                    libc::iovec { iov_base: y.as_ptr() as *mut _, iov_len: y.len() },
                ];
                // SAFETY: valid iovecs.
                unsafe { libc::writev(w, iov.as_ptr(), 2) }
            },
            |_| {
                let mut buf = vec![0u8; 70_000];
                // SAFETY: a valid buffer.
                unsafe { libc::read(r, buf.as_mut_ptr().cast(), buf.len()) };
            },
        );
        assert_eq!(n, 250_000);
        assert!(parks >= 2);
        close_all(&[r, w]);
    }
}

#[test]
fn a_socket_timeout_expires_with_eagain() {
    for _ in 0..5 {
        let (a, b) = socketpair();
        let tv = libc::timeval { tv_sec: 0, tv_usec: 30_000 };
        // SAFETY: a valid option value.
        unsafe { libc::setsockopt(a, libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of::<libc::timeval>() as u32) };
        let hook = TestPark::new();
        let ((r, e, took), parks) = drive(
            &hook,
            move || {
                let t = Instant::now();
                let mut buf = [0u8; 8];
                // SAFETY: a valid buffer.
                let r = unsafe { libc::recv(a, buf.as_mut_ptr().cast(), buf.len(), 0) };
                (r, errno(), t.elapsed())
            },
            |_| {},
        );
        assert_eq!((r, e), (-1, libc::EAGAIN));
        assert!(took >= Duration::from_millis(29), "waited {took:?}");
        assert!(parks >= 1);
        assert!(matches!(hook.log()[0], Wait::Fd(fd, Interest::Read, Some(_)) if fd == a));
        close_all(&[a, b]);
    }
}

#[test]
fn a_nonblocking_descriptor_of_the_program_gets_eagain_without_parking() {
    for _ in 0..100 {
        let (r, w) = pipe();
        // SAFETY: setting the program's own flag.
        unsafe { libc::fcntl(r, libc::F_SETFL, flags(r) | libc::O_NONBLOCK) };
        let (a, b) = socketpair();
        // SAFETY: as above.
        unsafe { libc::fcntl(a, libc::F_SETFL, flags(a) | libc::O_NONBLOCK) };
        let hook = TestPark::new();
        let (res, parks) = drive(
            &hook,
            move || {
                let mut buf = [0u8; 8];
                // SAFETY: valid buffers.
                let r1 = unsafe { libc::read(r, buf.as_mut_ptr().cast(), 8) };
                let e1 = errno();
                // SAFETY: as above.
                let r2 = unsafe { libc::recv(a, buf.as_mut_ptr().cast(), 8, 0) };
                let e2 = errno();
                let mut p = libc::pollfd { fd: r, events: libc::POLLIN, revents: 0 };
                // SAFETY: a zero timeout goes to the kernel directly.
                let r3 = unsafe { libc::poll(&mut p, 1, 0) };
                (r1, e1, r2, e2, r3)
            },
            |_| {},
        );
        assert_eq!(res, (-1, libc::EAGAIN, -1, libc::EAGAIN, 0));
        assert_eq!(parks, 0);
        assert!(hook.log().is_empty());
        close_all(&[r, w, a, b]);
    }
}

#[test]
fn poll_fires_and_expires() {
    for i in 0..40 {
        let (r, w) = pipe();
        let (r2, w2) = pipe();
        let hook = TestPark::new();
        // Fires: the caller writes while it is parked.
        let ((n, revents), parks) = drive(
            &hook,
            move || {
                let mut p = [
                    libc::pollfd { fd: r, events: libc::POLLIN, revents: 0 },
                    libc::pollfd { fd: r2, events: libc::POLLIN, revents: 0 },
                ];
                // SAFETY: valid pollfds.
                let n = unsafe { libc::poll(p.as_mut_ptr(), 2, 10_000) };
                (n, [p[0].revents, p[1].revents])
            },
            |_| put(if i % 2 == 0 { w } else { w2 }, b"x"),
        );
        assert_eq!(n, 1);
        assert_eq!(revents, if i % 2 == 0 { [libc::POLLIN, 0] } else { [0, libc::POLLIN] });
        assert_eq!(parks, 1);
        assert!(matches!(&hook.log()[0], Wait::Fds(v, Some(_)) if *v == vec![(r, Interest::Read), (r2, Interest::Read)]));
        if i % 10 == 0 {
            // Expires: nothing is written.
            let (r3, w3) = pipe();
            let hook = TestPark::new();
            let ((n, took), parks) = drive(
                &hook,
                move || {
                    let t = Instant::now();
                    let mut p = libc::pollfd { fd: r3, events: libc::POLLIN, revents: 0 };
                    // SAFETY: a valid pollfd.
                    let n = unsafe { libc::poll(&mut p, 1, 25) };
                    (n, t.elapsed())
                },
                |_| {},
            );
            assert_eq!(n, 0);
            assert!(took >= Duration::from_millis(24), "{took:?}");
            assert!(parks >= 1);
            close_all(&[r3, w3]);
        }
        close_all(&[r, w, r2, w2]);
    }
}

#[test]
fn select_fires_and_expires_and_updates_its_timeout() {
    for i in 0..20 {
        let (r, w) = pipe();
        let hook = TestPark::new();
        let fire = i % 4 != 3;
        let ((n, set, left, took), _) = drive(
            &hook,
            move || {
                // SAFETY: fd_set manipulation on a local.
                let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
                // SAFETY: as above; `r` is below FD_SETSIZE.
                unsafe { libc::FD_SET(r, &mut set) };
                let mut tv = libc::timeval { tv_sec: 0, tv_usec: 40_000 };
                let t = Instant::now();
                // SAFETY: valid sets and timeout.
                let n = unsafe { libc::select(r + 1, &mut set, std::ptr::null_mut(), std::ptr::null_mut(), &mut tv) };
                // SAFETY: reading our own set.
                (n, unsafe { libc::FD_ISSET(r, &set) }, tv, t.elapsed())
            },
            |_| {
                if fire {
                    put(w, b"x");
                }
            },
        );
        assert_eq!(hook.log()[0], Wait::Fds(vec![(r, Interest::Read)], match hook.log()[0] {
            Wait::Fds(_, d) => d,
            _ => unreachable!(),
        }));
        if fire {
            assert_eq!((n, set), (1, true));
            assert!(left.tv_sec == 0 && left.tv_usec <= 40_000, "{left:?}");
        } else {
            assert_eq!((n, set), (0, false));
            assert_eq!((left.tv_sec, left.tv_usec), (0, 0));
            assert!(took >= Duration::from_millis(39), "{took:?}");
        }
        close_all(&[r, w]);
    }
}

#[test]
fn epoll_wait_fires_and_expires() {
    for i in 0..20 {
        let (r, w) = pipe();
        // SAFETY: plain system calls on the test's own descriptors.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 42 };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, r, &mut ev) }, 0);
        let hook = TestPark::new();
        let fire = i % 2 == 0;
        let ((n, data, took), parks) = drive(
            &hook,
            move || {
                let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
                let t = Instant::now();
                // SAFETY: a valid buffer of 4 events.
                let n = unsafe { libc::epoll_wait(ep, out.as_mut_ptr(), 4, 30) };
                (n, out[0].u64, t.elapsed())
            },
            |_| {
                if fire {
                    put(w, b"x");
                }
            },
        );
        assert!(parks >= 1);
        assert!(matches!(hook.log()[0], Wait::Fd(fd, Interest::Read, Some(_)) if fd == ep));
        if fire {
            assert_eq!((n, data), (1, 42));
        } else {
            assert_eq!(n, 0);
            assert!(took >= Duration::from_millis(29), "{took:?}");
        }
        close_all(&[r, w, ep]);
    }
}

#[test]
fn sleeps_park_and_last_their_whole_length() {
    for round in 0..4 {
        let hook = TestPark::new();
        let (took, parks) = drive(
            &hook,
            move || {
                let mut took = Vec::new();
                let t = Instant::now();
                let req = libc::timespec { tv_sec: 0, tv_nsec: 15_000_000 };
                // SAFETY: valid request.
                assert_eq!(unsafe { libc::nanosleep(&req, std::ptr::null_mut()) }, 0);
                took.push((t.elapsed(), 15));
                let t = Instant::now();
                // SAFETY: plain call.
                assert_eq!(unsafe { libc::usleep(10_000) }, 0);
                took.push((t.elapsed(), 10));
                for clock in [libc::CLOCK_MONOTONIC, libc::CLOCK_REALTIME] {
                    let t = Instant::now();
                    let mut at = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                    // SAFETY: valid out pointer.
                    unsafe { libc::clock_gettime(clock, &mut at) };
                    at.tv_nsec += 12_000_000;
                    if at.tv_nsec >= 1_000_000_000 {
                        at.tv_nsec -= 1_000_000_000;
                        at.tv_sec += 1;
                    }
                    // SAFETY: valid request.
                    assert_eq!(unsafe { libc::clock_nanosleep(clock, libc::TIMER_ABSTIME, &at, std::ptr::null_mut()) }, 0);
                    took.push((t.elapsed(), 12));
                }
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(8 + round));
                took.push((t.elapsed(), 8 + round as u64));
                took
            },
            |_| {},
        );
        for (t, ms) in took {
            assert!(t >= Duration::from_millis(ms), "slept {t:?} for {ms} ms");
            assert!(t < Duration::from_secs(5));
        }
        assert!(parks >= 5, "{parks} parks");
        assert!(hook.log().iter().all(|w| matches!(w, Wait::Sleep(_))));
    }
}

/// Another OS thread writes `what` into `w` 10 ms from now, and hands `w` back.
fn late_writer(w: RawFd, what: &'static [u8]) -> std::thread::JoinHandle<RawFd> {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        put(w, what);
        w
    })
}

/// The same function without a hook, or with one inside a critical scope:
/// the read blocks the thread until another thread writes.
fn blocked_read(hook: Option<Arc<TestPark>>, critical: bool) -> (isize, u64) {
    let (r, w) = pipe();
    let writer = late_writer(w, b"late");
    linger::reset_stats();
    let b = match &hook {
        Some(h) => Builder::new().park_with(h.clone()),
        None => Builder::new(),
    };
    let l = b
        .launch(
            move || {
                let read = move || read8(r);
                if critical {
                    linger::critical(read)
                } else {
                    read()
                }
            },
            Duration::MAX,
        )
        .unwrap();
    let n = l.completion().expect("ran to its end without parking");
    let blocked = linger::park::counters().blocked;
    close(writer.join().unwrap());
    close(r);
    (n, blocked)
}

#[test]
fn no_park_in_a_critical_scope() {
    for _ in 0..5 {
        let hook = TestPark::new();
        assert_eq!(blocked_read(Some(hook.clone()), true), (4, 1));
        assert!(hook.log().is_empty());
    }
}

#[test]
fn a_function_without_a_hook_blocks_as_before() {
    for _ in 0..5 {
        assert_eq!(blocked_read(None, false), (4, 0));
    }
    assert!(linger::park::current().is_none());
    let l = linger::launch(|| linger::park::current().is_none(), Duration::MAX).unwrap();
    assert_eq!(l.completion(), Some(true));
    let hook = TestPark::new();
    let (has, _) = drive(&hook, || linger::park::current().is_some(), |_| {});
    assert!(has);
}

#[test]
fn std_tcp_and_accept_park() {
    for _ in 0..10 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let hook = TestPark::new();
        let mut client = None;
        // The function accepts and reads; the caller connects and writes.
        let (got, parks) = drive(
            &hook,
            move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = String::new();
                s.read_to_string(&mut buf).unwrap();
                buf
            },
            |n| {
                if n == 1 {
                    client = Some(std::net::TcpStream::connect(addr).unwrap());
                } else if let Some(mut c) = client.take() {
                    c.write_all(b"over tcp").unwrap();
                }
            },
        );
        assert_eq!(got, "over tcp");
        assert!(parks >= 2, "accept, then read: {parks}");
        assert!(matches!(hook.log()[0], Wait::Fd(_, Interest::Read, None)));
    }
}

#[test]
fn std_unix_stream_child_stdout_and_sleep_park() {
    for _ in 0..5 {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 0.02; echo from child"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let out_fd = out.as_raw_fd();
        let a_fd = a.as_raw_fd();
        let hook = TestPark::new();
        let ((x, y, slept), _) = drive(
            &hook,
            move || {
                let (mut a, mut out) = (a, out);
                let mut buf = [0u8; 5];
                a.read_exact(&mut buf).unwrap();
                let mut s = String::new();
                out.read_to_string(&mut s).unwrap();
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(5));
                (buf, s, t.elapsed())
            },
            |n| {
                if n == 1 {
                    b.write_all(b"unix!").unwrap();
                }
            },
        );
        assert_eq!(&x, b"unix!");
        assert_eq!(y, "from child\n");
        assert!(slept >= Duration::from_millis(5));
        let log = hook.log();
        assert_eq!(log[0], Wait::Fd(a_fd, Interest::Read, None));
        assert!(log.contains(&Wait::Fd(out_fd, Interest::Read, None)), "{log:?}");
        assert!(matches!(log.last(), Some(Wait::Sleep(_))));
        child.wait().unwrap();
    }
}

#[test]
fn two_functions_on_one_thread_alternate() {
    const N: usize = 50;
    for _ in 0..10 {
        let order = Arc::new(Mutex::new(Vec::new()));
        let (ra, wa) = pipe();
        let (rb, wb) = pipe();
        let hook = TestPark::new();
        let hook_b = TestPark::new();
        let reader = |r: RawFd, tag: char, order: Arc<Mutex<Vec<String>>>| {
            move || {
                for _ in 0..N {
                    let mut buf = [0u8; 16];
                    // SAFETY: a valid buffer.
                    let n = unsafe { libc::read(r, buf.as_mut_ptr().cast(), buf.len()) };
                    assert!(n > 0);
                    order.lock().unwrap().push(format!("{tag}{}", String::from_utf8_lossy(&buf[..n as usize])));
                }
            }
        };
        let mut fa = Builder::new().park_with(hook.clone()).launch(reader(ra, 'a', order.clone()), Duration::ZERO).unwrap();
        let mut fb = Builder::new().park_with(hook_b.clone()).launch(reader(rb, 'b', order.clone()), Duration::ZERO).unwrap();
        // Both run until they park on their empty pipes.
        linger::resume(&mut fa, Duration::MAX).unwrap();
        linger::resume(&mut fb, Duration::MAX).unwrap();
        for i in 0..N {
            for (l, h, w) in [(&mut fa, &hook, wa), (&mut fb, &hook_b, wb)] {
                let wait = h.pending.lock().unwrap().take().expect("parked on its pipe");
                assert!(matches!(wait, Wait::Fd(_, Interest::Read, None)));
                put(w, i.to_string().as_bytes());
                ready(&wait);
                linger::resume(l, Duration::MAX).unwrap();
            }
        }
        assert!(fa.is_completion() && fb.is_completion());
        let expect: Vec<String> = (0..N).flat_map(|i| [format!("a{i}"), format!("b{i}")]).collect();
        assert_eq!(*order.lock().unwrap(), expect);
        close_all(&[ra, wa, rb, wb]);
    }
}

#[test]
fn a_parked_function_is_cancelled_by_reclaiming() {
    for _ in 0..50 {
        let (r, w) = pipe();
        let (mut l, hook) = parked_reader(Builder::new(), r);
        // Unwinding it would cross the wrapper's `extern "C"` frame.
        assert_eq!(l.cancel(), linger::Cancelled::Reclaimed);
        assert_eq!(Arc::strong_count(&hook), 1, "the frame let go of the hook");
        close_all(&[r, w]);
    }
}

#[test]
fn a_held_signal_ends_a_parked_read_with_eintr() {
    static RAN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    extern "C" fn on_usr1(_: libc::c_int) {
        RAN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    // SAFETY: a valid handler without SA_RESTART (a blocking read would fail
    // with EINTR after it), installed once for this test's signal.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    for i in 0..20 {
        let (r, w) = pipe();
        let hook = TestPark::new();
        let b = Builder::new().hold_signals(true).park_with(hook);
        let mut l = b.launch(move || (read8(r), errno()), Duration::MAX).unwrap();
        assert!(l.yielded());
        // Held on this side while the function is parked; it runs when the
        // function resumes, on its side, and ends the read as it would
        // have ended a blocking one.
        // SAFETY: a signal to this thread, whose handler is installed above.
        assert_eq!(unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGUSR1) }, 0);
        assert_eq!(RAN.load(std::sync::atomic::Ordering::Relaxed), i);
        linger::resume(&mut l, Duration::MAX).unwrap();
        assert_eq!(RAN.load(std::sync::atomic::Ordering::Relaxed), i + 1);
        assert_eq!(l.completion(), Some((-1, libc::EINTR)));
        close_all(&[r, w]);
    }
}

#[test]
fn held_signals_still_park() {
    for _ in 0..20 {
        let (r, w) = pipe();
        let (mut l, _hook) = parked_reader(Builder::new().hold_signals(true), r);
        put(w, b"held");
        linger::resume(&mut l, Duration::MAX).unwrap();
        assert_eq!(l.completion(), Some(4));
        close_all(&[r, w]);
    }
}

#[test]
fn no_park_under_code_that_must_not_be_preempted() {
    // A `qsort` comparator runs under libc's frames: a `pause()` there would
    // not switch, so its read blocks the thread as before.
    static FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
    extern "C" fn cmp(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
        let fd = FD.swap(-1, std::sync::atomic::Ordering::Relaxed);
        if fd >= 0 {
            assert_eq!(read8(fd), 4);
        }
        // SAFETY: qsort passes pointers to two of our u32s.
        unsafe { (*(a as *const u32)).cmp(&*(b as *const u32)) as libc::c_int }
    }
    for _ in 0..5 {
        let (r, w) = pipe();
        let writer = late_writer(w, b"late");
        linger::reset_stats();
        FD.store(r, std::sync::atomic::Ordering::Relaxed);
        let hook = TestPark::new();
        let l = Builder::new()
            .park_with(hook.clone())
            .launch(
                || {
                    let mut v = [3u32, 1, 2];
                    // SAFETY: a valid array of three u32s and a matching comparator.
                    unsafe { libc::qsort(v.as_mut_ptr().cast(), 3, 4, Some(cmp)) };
                    v
                },
                Duration::MAX,
            )
            .unwrap();
        assert_eq!(l.completion(), Some([1, 2, 3]));
        assert!(hook.log().is_empty());
        assert_eq!(linger::park::counters().blocked, 1);
        close(writer.join().unwrap());
        close(r);
    }
}

#[test]
fn the_hooks_own_calls_do_not_park() {
    for _ in 0..20 {
        let (r, w) = pipe();
        let (probe, probe_w) = pipe();
        linger::reset_stats();
        let hook = TestPark::new();
        hook.probe.store(probe, std::sync::atomic::Ordering::Relaxed);
        let (n, parks) = drive(&hook, move || read8(r), |_| put(w, b"data"));
        assert_eq!((n, parks), (4, 1));
        assert_eq!(hook.log(), vec![Wait::Fd(r, Interest::Read, None)]);
        assert_eq!(linger::park::counters(), linger::park::Counters { parks: 1, blocked: 1 });
        close_all(&[r, w, probe, probe_w]);
    }
}

#[test]
fn regular_files_and_ttys_keep_their_blocking_call() {
    let path = std::env::temp_dir().join(format!("linger-park-{}", std::process::id()));
    std::fs::write(&path, b"file contents").unwrap();
    for _ in 0..5 {
        let file = std::fs::File::open(&path).unwrap();
        let (mut master, mut slave) = (0, 0);
        // SAFETY: valid out pointers; no name, settings or size wanted.
        let r = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(r, 0);
        let writer = late_writer(master, b"line\n");
        linger::reset_stats();
        let hook = TestPark::new();
        let l = Builder::new()
            .park_with(hook.clone())
            .launch(
                move || {
                    let mut s = String::new();
                    (&file).read_to_string(&mut s).unwrap();
                    // A tty refuses RWF_NOWAIT: its read blocks the
                    // thread until the other one writes a line.
                    (s, read8(slave))
                },
                Duration::MAX,
            )
            .unwrap();
        assert!(hook.log().is_empty(), "{:?}", hook.log());
        let (s, n) = l.completion().expect("completed without parking");
        assert_eq!(s, "file contents");
        assert_eq!(n, 5);
        assert_eq!(linger::park::counters(), linger::park::Counters::default());
        close_all(&[writer.join().unwrap(), slave]);
    }
    std::fs::remove_file(&path).unwrap();
}

//! Green threads doing blocking I/O with std's blocking types: each call
//! parks its green thread, never its worker.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::thread::{self, Builder};

mod common;
use common::runtime;

fn os_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
}

fn spin(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    acc
}

/// One green thread per connection, serving with blocking `std::net` calls.
fn echo_server(rt: &turquoise::Runtime) -> (std::net::SocketAddr, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    Builder::new()
        .name("acceptor")
        .spawn_on(rt.handle(), move || {
            for c in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let mut c = c.unwrap();
                thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    loop {
                        match c.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if c.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                });
            }
        })
        .unwrap();
    (addr, stop)
}

fn stop_server(addr: std::net::SocketAddr, stop: &AtomicBool) {
    stop.store(true, Ordering::Relaxed);
    let _ = TcpStream::connect(addr); // wakes the acceptor
}

/// The test: 2,000 green threads, each a client with blocking
/// `std::net` calls, against a server with a green thread per connection;
/// every byte comes back, and the process has no more OS threads than its
/// workers and a few of its own.
#[test]
fn echo_with_2000_green_threads_over_std_net() {
    let before = os_threads();
    let workers = 2;
    let rt = runtime(workers, Duration::from_millis(2));
    let (addr, stop) = echo_server(&rt);
    let peak = Arc::new(AtomicUsize::new(0));
    for round in 0..3 {
        let clients: Vec<_> = (0..2000u64)
            .map(|i| {
                let peak = peak.clone();
                Builder::new()
                    .spawn_on(rt.handle(), move || {
                        let mut s = TcpStream::connect(addr).unwrap();
                        let msg: Vec<u8> = (0..1000 + (i % 7) * 3000).map(|k| (k * 31 + i) as u8).collect();
                        s.write_all(&msg).unwrap();
                        let mut back = vec![0u8; msg.len()];
                        s.read_exact(&mut back).unwrap();
                        peak.fetch_max(os_threads(), Ordering::Relaxed);
                        assert!(back == msg, "client {i}: bytes differ");
                        msg.len() as u64
                    })
                    .unwrap()
            })
            .collect();
        let bytes: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(bytes, (0..2000u64).map(|i| 1000 + (i % 7) * 3000).sum::<u64>(), "round {round}");
    }
    stop_server(addr, &stop);
    // Workers, plus a few of the runtime's own (tokio's outer runtime, linger's
    // helpers); other tests of this binary run beside this one, so the bound
    // counts what was there before.
    let extra = peak.load(Ordering::Relaxed).saturating_sub(before);
    assert!(extra <= workers + 8, "{extra} OS threads more than before for {workers} workers");
    let parks: u64 = rt.worker_metrics().iter().map(|m| m.green.parks_io).sum();
    assert!(parks > 0, "the clients and servers parked on I/O");
}

/// Spinning green threads on the same workers do not keep the echo threads
/// from being served: each round trip waits at most about a slice.
#[test]
fn spinners_do_not_starve_echo_threads() {
    let rt = runtime(1, Duration::from_millis(1));
    let (addr, stop) = echo_server(&rt);
    let spinning = Arc::new(AtomicBool::new(true));
    let spinners: Vec<_> = (0..3)
        .map(|_| {
            let go = spinning.clone();
            Builder::new()
                .spawn_on(rt.handle(), move || {
                    while go.load(Ordering::Relaxed) {
                        spin(10_000);
                    }
                })
                .unwrap()
        })
        .collect();
    let worst = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..20)
        .map(|_| {
            let worst = worst.clone();
            Builder::new()
                .spawn_on(rt.handle(), move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let mut b = [0u8; 8];
                    for k in 0..50u64 {
                        let t = Instant::now();
                        s.write_all(&k.to_le_bytes()).unwrap();
                        s.read_exact(&mut b).unwrap();
                        assert_eq!(u64::from_le_bytes(b), k);
                        worst.fetch_max(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                    }
                })
                .unwrap()
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    spinning.store(false, Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    stop_server(addr, &stop);
    // Behind 3 spinners and 40 echo threads, a round trip takes a few
    // slices; the bound is generous for stalls of these VMs (not a speed
    // measurement: without parking and preemption it would never end).
    let w = Duration::from_micros(worst.load(Ordering::Relaxed));
    assert!(w < Duration::from_secs(2), "worst round trip {w:?}");
}

/// Sleeps and child pipes park: one worker keeps serving others meanwhile.
#[test]
fn sleeps_and_child_pipes_park() {
    let rt = runtime(1, Duration::from_millis(2));
    let ticks = Arc::new(AtomicU64::new(0));
    let t2 = ticks.clone();
    let ticker = Builder::new()
        .spawn_on(rt.handle(), move || {
            for _ in 0..50 {
                std::thread::sleep(Duration::from_millis(1)); // std's sleep: nanosleep, parked
                t2.fetch_add(1, Ordering::Relaxed);
            }
        })
        .unwrap();
    let t3 = ticks.clone();
    let reader = Builder::new()
        .spawn_on(rt.handle(), move || {
            let at_start = t3.load(Ordering::Relaxed);
            let out = std::process::Command::new("sh").arg("-c").arg("sleep 0.05; echo green").output().unwrap();
            (String::from_utf8(out.stdout).unwrap(), t3.load(Ordering::Relaxed) - at_start)
        })
        .unwrap();
    let (out, ticked) = reader.join().unwrap();
    assert_eq!(out, "green\n");
    // The ticker went on while the reader waited 50 ms for its child's pipe
    // (it would have stood still had the read blocked the one worker).
    assert!(ticked >= 10, "{ticked} ticks during the child's 50 ms");
    ticker.join().unwrap();
    assert_eq!(ticks.load(Ordering::Relaxed), 50);
    let short = Builder::new()
        .spawn_on(rt.handle(), || {
            let t = Instant::now();
            for _ in 0..20 {
                // SAFETY: plain call.
                unsafe { libc::usleep(100) };
            }
            t.elapsed()
        })
        .unwrap();
    let took = short.join().unwrap();
    assert!(took >= Duration::from_millis(2), "20 x 100 us took {took:?}");
}

/// A listening socket on loopback with a backlog of 0, whose one queued
/// connection is never accepted: further connects' SYNs are dropped, so
/// they wait (for retransmissions, seconds apart). With what fills it.
fn full_listener() -> (std::net::SocketAddr, Vec<std::os::fd::OwnedFd>) {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain system calls on descriptors we create and own; the
    // sockaddr_in is fully initialised and its size passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let l = OwnedFd::from_raw_fd(fd);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&a as *const libc::sockaddr_in).cast(), size), 0);
        assert_eq!(libc::listen(fd, 0), 0);
        let mut len = size;
        assert_eq!(libc::getsockname(fd, (&mut a as *mut libc::sockaddr_in).cast(), &mut len), 0);
        let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, u16::from_be(a.sin_port)));
        // Two fillers, without waiting (the second stays in SYN_SENT).
        let mut held = vec![l];
        for _ in 0..2 {
            let c = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0);
            assert!(c >= 0);
            libc::connect(c, (&a as *const libc::sockaddr_in).cast(), size);
            held.push(OwnedFd::from_raw_fd(c));
        }
        std::thread::sleep(Duration::from_millis(20));
        (addr, held)
    }
}

/// `connect(2)` on a blocking socket, from a green thread, through libc.
fn connect_c(addr: std::net::SocketAddr, send_timeout: Option<Duration>) -> (i32, i32, i32, Duration) {
    let std::net::SocketAddr::V4(v4) = addr else { unreachable!() };
    // SAFETY: plain system calls on a descriptor we create and close.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        if let Some(t) = send_timeout {
            let tv = libc::timeval { tv_sec: t.as_secs() as i64, tv_usec: t.subsec_micros() as i64 };
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of::<libc::timeval>() as u32);
        }
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_port = v4.port().to_be();
        a.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
        let t = Instant::now();
        let r = libc::connect(fd, (&a as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as u32);
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let took = t.elapsed();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::close(fd);
        (r, if r == 0 { 0 } else { e }, flags, took)
    }
}

/// A connect that waits parks its green thread: the other green thread of
/// the only worker keeps ticking (with 200 ms slices, a connect that
/// blocked the worker until its slice ended would stop it that long). As
/// the blocking call: `SO_SNDTIMEO` ends it with `EINPROGRESS`; a connect
/// that succeeds returns 0, a refused one `ECONNREFUSED`; and the socket is
/// left blocking either way.
#[test]
fn connect_parks_and_keeps_the_blocking_semantics() {
    let rt = runtime(1, Duration::from_millis(200));
    let (full, _held) = full_listener();
    let open = TcpListener::bind("127.0.0.1:0").unwrap();
    let open_addr = open.local_addr().unwrap();
    let closed_addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    for round in 0..4 {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let ticker = Builder::new()
            .spawn_on(rt.handle(), move || {
                let (mut last, mut gap, mut ticks) = (Instant::now(), Duration::ZERO, 0u64);
                while !s.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(2));
                    let now = Instant::now();
                    gap = gap.max(now - last);
                    last = now;
                    ticks += 1;
                }
                (ticks, gap)
            })
            .unwrap();
        let h = Builder::new()
            .spawn_on(rt.handle(), move || {
                // The kernel now and then completes a handshake with a full
                // listener (a SYN that found room in its SYN queue: the
                // connection then waits in the accept queue): that attempt
                // says nothing of the timeout, and its connection fills the
                // queue further, so the next attempt times out.
                let mut waited = connect_c(full, Some(Duration::from_millis(300)));
                for _ in 0..3 {
                    if waited.0 == 0 {
                        waited = connect_c(full, Some(Duration::from_millis(300)));
                    }
                }
                (waited, connect_c(open_addr, None), connect_c(closed_addr, None))
            })
            .unwrap();
        let (waited, ok, refused) = h.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        let (ticks, gap) = ticker.join().unwrap();
        let (r, e, flags, took) = waited;
        assert_eq!((r, e), (-1, libc::EINPROGRESS), "round {round}: the timed-out connect");
        assert!(took >= Duration::from_millis(280), "round {round}: it gave up after {took:?}, not at its 300 ms timeout");
        assert_eq!(flags & libc::O_NONBLOCK, 0, "round {round}: the socket was left non-blocking");
        assert_eq!((ok.0, ok.2 & libc::O_NONBLOCK), (0, 0), "round {round}: the connect that succeeds (errno {})", ok.1);
        assert_eq!((refused.0, refused.1), (-1, libc::ECONNREFUSED), "round {round}: the refused connect");
        eprintln!("round {round}: the other green thread ticked {ticks} times, the longest gap {gap:?}");
        assert!(ticks >= 10 && gap < Duration::from_millis(150), "round {round}: the worker stalled ({ticks} ticks, a gap of {gap:?})");
        drop(open.accept().unwrap());
    }
}

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

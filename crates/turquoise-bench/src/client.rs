//! The load generator: HTTP/1.1 keep-alive requests over loopback, short
//! and long ones mixed by a strict 1000-slot table (exactly `permille` long
//! slots, shuffled with a fixed seed, cycled), as the original's wrk script.
//!
//! - Open loop: request i is due at `start + i / rate`, whether or not
//!   earlier ones have finished (a free connection is taken, or a new one
//!   opened); its latency counts from when it was due, so a stalled server
//!   is not hidden by the client waiting for it (no coordinated omission).
//! - Closed loop: `conns` connections each send their next request when the
//!   previous one is answered (the original's set-up): throughput.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One run's measurements.
pub struct Outcome {
    /// Latency of short requests, microseconds.
    pub short: Histogram<u64>,
    /// Latency of long requests, microseconds.
    pub long: Histogram<u64>,
    /// Requests answered per second.
    pub throughput: f64,
    /// Requests that failed (connection errors).
    pub errors: u64,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds")
}

/// Sends `GET /iters` and reads the (empty-bodied) answer.
async fn request(s: &mut TcpStream, iters: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let req = format!("GET /{iters} HTTP/1.1\r\nhost: bench\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    buf.clear();
    let mut chunk = [0u8; 512];
    loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            if !buf.starts_with(b"HTTP/1.1 200") {
                return Err(std::io::Error::other("not a 200 answer"));
            }
            return Ok(());
        }
    }
}

/// Waits until `due` to within microseconds: tokio's timers tick in
/// milliseconds, which would send requests up to 1 ms late and add as much
/// to every measured latency. The last stretch yields in a loop (this CPU
/// is the client's; the other tasks still run between yields).
async fn wait_until(due: Instant) {
    const COARSE: Duration = Duration::from_micros(1500);
    if let Some(d) = due.checked_duration_since(Instant::now()) {
        if d > COARSE {
            tokio::time::sleep_until((due - COARSE).into()).await;
        }
    }
    while Instant::now() < due {
        tokio::task::yield_now().await;
    }
}

/// What every open-loop request shares.
struct Shared {
    idle: Mutex<Vec<TcpStream>>,
    short: Mutex<Histogram<u64>>,
    long: Mutex<Histogram<u64>>,
    done: Mutex<(u64, u64)>, // answered, errors
}

/// Open loop at `rate` requests per second for `duration`.
pub async fn open_loop(addr: std::net::SocketAddr, rate: f64, duration: Duration, permille: u32, short: u64, long: u64) -> Outcome {
    let t = bench_util::table(permille);
    let shared = Arc::new(Shared { idle: Mutex::new(Vec::new()), short: Mutex::new(hist()), long: Mutex::new(hist()), done: Mutex::new((0, 0)) });
    let start = Instant::now();
    let n = (rate * duration.as_secs_f64()) as u64;
    let mut tasks = Vec::with_capacity(n as usize);
    for i in 0..n {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        wait_until(due).await;
        let is_long = t[(i % 1000) as usize];
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move {
            let conn = shared.idle.lock().unwrap().pop();
            let mut conn = match conn {
                Some(c) => c,
                None => match TcpStream::connect(addr).await {
                    Ok(c) => {
                        let _ = c.set_nodelay(true);
                        c
                    }
                    Err(_) => {
                        shared.done.lock().unwrap().1 += 1;
                        return;
                    }
                },
            };
            let mut buf = Vec::new();
            match request(&mut conn, if is_long { long } else { short }, &mut buf).await {
                Ok(()) => {
                    let us = due.elapsed().as_micros() as u64;
                    let h = if is_long { &shared.long } else { &shared.short };
                    let _ = h.lock().unwrap().record(us.max(1));
                    shared.done.lock().unwrap().0 += 1;
                    shared.idle.lock().unwrap().push(conn);
                }
                Err(_) => shared.done.lock().unwrap().1 += 1,
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (answered, errors) = *shared.done.lock().unwrap();
    let short = shared.short.lock().unwrap().clone();
    let long = shared.long.lock().unwrap().clone();
    Outcome { short, long, throughput: answered as f64 / elapsed, errors }
}

/// Closed loop: `conns` connections, back to back, for `duration`.
pub async fn closed_loop(addr: std::net::SocketAddr, conns: usize, duration: Duration, permille: u32, short: u64, long: u64) -> Outcome {
    let t = Arc::new(bench_util::table(permille));
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = Vec::new();
    for c in 0..conns {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let (mut sh, mut lo, mut errors) = (hist(), hist(), 0u64);
            let Ok(mut s) = TcpStream::connect(addr).await else { return (sh, lo, 0u64, 1u64) };
            let _ = s.set_nodelay(true);
            let mut buf = Vec::new();
            let mut i = c * 1000 / conns.max(1);
            let mut answered = 0;
            while Instant::now() < end {
                let is_long = t[i % 1000];
                i += 1;
                let sent = Instant::now();
                match request(&mut s, if is_long { long } else { short }, &mut buf).await {
                    Ok(()) => {
                        let us = sent.elapsed().as_micros() as u64;
                        let _ = if is_long { &mut lo } else { &mut sh }.record(us.max(1));
                        answered += 1;
                    }
                    Err(_) => {
                        errors += 1;
                        break;
                    }
                }
            }
            (sh, lo, answered, errors)
        }));
    }
    let (mut short_h, mut long_h, mut answered, mut errors) = (hist(), hist(), 0, 0);
    for t in tasks {
        if let Ok((s, l, a, e)) = t.await {
            let _ = short_h.add(&s);
            let _ = long_h.add(&l);
            answered += a;
            errors += e;
        }
    }
    Outcome { short: short_h, long: long_h, throughput: answered as f64 / start.elapsed().as_secs_f64(), errors }
}

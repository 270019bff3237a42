//! The green-thread part of the tour (`make tour`): a blocking-style echo
//! server, one thread per connection, with thousands of clients, run on
//! green threads and on OS threads.
//!
//! The same code both times: `serve` reads and writes a `std::net`
//! connection with blocking calls, `client` connects, sends a message and
//! reads it back. With OS threads each connection costs a kernel thread;
//! with green threads (`turquoise::thread::spawn`) they are linger
//! functions on two workers, and each blocking call parks its green thread
//! on the worker's reactor. Printed: time, OS threads at the peak, resident
//! memory added, and that every byte came back.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 5000;

fn status(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn os_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
}

/// One connection, served with blocking calls until the client closes.
fn serve(mut c: TcpStream) {
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = c.read(&mut buf) {
        if c.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

/// One client: a message of a few KiB, sent and read back.
fn client(addr: SocketAddr, i: usize, peak: &AtomicUsize) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else { return false };
    let msg: Vec<u8> = (0..2000 + (i % 5) * 1000).map(|k| (k * 7 + i) as u8).collect();
    let mut back = vec![0u8; msg.len()];
    let ok = s.write_all(&msg).is_ok() && s.read_exact(&mut back).is_ok() && back == msg;
    peak.fetch_max(os_threads(), Ordering::Relaxed);
    ok
}

type Spawn = Arc<dyn Fn(Box<dyn FnOnce() + Send>) + Send + Sync>;

/// Runs the server and `CLIENTS` clients with `spawn` (a thread per
/// acceptor, connection and client); returns the time, the OS threads at
/// the peak, the resident memory added (KiB) and the clients echoed back.
fn run(spawn: Spawn) -> (Duration, usize, u64, usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let rss0 = status("VmRSS:");
    let peak = Arc::new(AtomicUsize::new(os_threads()));
    let done = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let for_conns = spawn.clone();
    spawn(Box::new(move || {
        for c in listener.incoming().take(CLIENTS) {
            let c = c.unwrap();
            for_conns(Box::new(move || serve(c)));
        }
    }));
    for i in 0..CLIENTS {
        let (peak, done) = (peak.clone(), done.clone());
        spawn(Box::new(move || {
            if client(addr, i, &peak) {
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut rss = 0;
    while done.load(Ordering::Relaxed) < CLIENTS && t.elapsed() < Duration::from_secs(60) {
        rss = rss.max(status("VmRSS:"));
        std::thread::sleep(Duration::from_millis(2));
    }
    (t.elapsed(), peak.load(Ordering::Relaxed), rss.saturating_sub(rss0), done.load(Ordering::Relaxed))
}

fn main() {
    println!("== green threads: a blocking echo server, a thread per connection, {CLIENTS} clients");
    let rt = turquoise::Builder::new().worker_threads(2).enable_all().build().expect("runtime");
    let h = rt.handle().clone();
    let green: Spawn = Arc::new(move |f| {
        turquoise::thread::Builder::new().spawn_on(&h, f).expect("green thread");
    });
    // 256 KiB stacks, as the green threads' (8 MiB by default).
    let os: Spawn = Arc::new(|f| {
        std::thread::Builder::new().stack_size(256 * 1024).spawn(f).expect("OS thread");
    });
    for (name, spawn) in [("green threads (2 workers)", green), ("OS threads", os)] {
        let (took, peak, rss, ok) = run(spawn);
        println!(
            "  {name:<26} {:>7.1} ms   {:>6} OS threads at the peak   {:>6.1} MiB more resident   {ok}/{CLIENTS} echoed back",
            took.as_secs_f64() * 1e3,
            peak,
            rss as f64 / 1024.0
        );
    }
    let g = rt.worker_metrics().iter().map(|m| m.green).fold((0, 0), |a, g| (a.0 + g.parks_io, a.1 + g.switches));
    println!("  (the green threads parked {} times on I/O, {} switches in all)", g.0, g.1);
    std::process::exit(0);
}

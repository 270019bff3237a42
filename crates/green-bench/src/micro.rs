//! Microbenchmarks of green threads, activities (green threads that are
//! never preempted: sync-bench's memory per idle activity) and pthreads (Go's are in
//! `go/main.go`, with the same names and output). Each runs in a child
//! process of its own, pinned to one CPU, and prints lines of
//! `name value...`:
//!
//! - `spawn N`: spawn+join of an empty thread, one at a time, from inside a
//!   green thread (a pthread): `spawn_join MEDIAN MIN MAX` ns over 7 batches;
//! - `chan N`: two threads passing a value back and forth through channels
//!   (green: tokio's mpsc awaited with `thread::block_on`; pthreads: std's
//!   mpsc): `switch_chan` ns per switch (half a round trip);
//! - `io N`: the same through a socketpair with blocking 1-byte reads and
//!   writes (a green thread parks on its worker's reactor):
//!   `switch_io` ns per switch;
//! - `idle N`: N threads asleep (an hour): `idle N RSS0 RSS1 PTE0 PTE1` in
//!   KiB from /proc/self/status before and after;
//! - `alive CAP SECS BUDGET_KIB`: threads asleep started until one fails,
//!   CAP is reached, SECS have passed or RSS grew by BUDGET_KIB:
//!   `alive COUNT SECONDS RSS_KIB` and `reason ...`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::status_field;
use crate::servers::PTHREAD_STACK;

/// How long a parked thread sleeps: longer than any run.
const FOREVER: Duration = Duration::from_secs(3600);

/// Runs `op(n)` (which returns the units it did) in 7 batches after a
/// warm-up: the median, min and max ns per unit.
pub fn time_batches(n: usize, mut op: impl FnMut(usize) -> usize) -> (f64, f64, f64) {
    op((n / 10).max(1));
    let mut ns: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            let units = op(n);
            t.elapsed().as_nanos() as f64 / units as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    (ns[3], ns[0], ns[6])
}

/// [`time_batches`], printed as `name median min max`.
fn batches(name: &str, n: usize, op: impl FnMut(usize) -> usize) {
    let (med, min, max) = time_batches(n, op);
    println!("{name} {med:.2} {min:.2} {max:.2}");
}

fn kib(field: &str) -> u64 {
    status_field("self", field).unwrap_or(0)
}

/// The two kinds of thread measured here.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Threads {
    Green,
    Activity,
    Pthread,
}

impl Threads {
    /// Starts `f` on a thread of this kind.
    fn spawn<F: FnOnce() + Send + 'static>(self, f: F) -> std::io::Result<Box<dyn FnOnce() + Send>> {
        Ok(match self {
            Threads::Green | Threads::Activity => {
                let h = turquoise::thread::Builder::new().preemptive(self == Threads::Green).spawn(f)?;
                Box::new(move || drop(h.join()))
            }
            Threads::Pthread => {
                let h = std::thread::Builder::new().stack_size(PTHREAD_STACK).spawn(f)?;
                Box::new(move || drop(h.join()))
            }
        })
    }
}

/// A pair of channels between two threads, for the ping-pong.
fn chan_pingpong(kind: Threads, n: usize) -> usize {
    match kind {
        Threads::Green | Threads::Activity => {
            use tokio::sync::mpsc::unbounded_channel;
            let (ping_tx, mut ping_rx) = unbounded_channel::<usize>();
            let (pong_tx, mut pong_rx) = unbounded_channel::<usize>();
            let echo = kind
                .spawn(move || {
                    while let Some(v) = turquoise::thread::block_on(ping_rx.recv()) {
                        let _ = pong_tx.send(v);
                    }
                })
                .expect("spawn");
            for i in 0..n {
                let _ = ping_tx.send(i);
                turquoise::thread::block_on(pong_rx.recv());
            }
            drop(ping_tx);
            echo();
        }
        Threads::Pthread => {
            let (ping_tx, ping_rx) = std::sync::mpsc::channel::<usize>();
            let (pong_tx, pong_rx) = std::sync::mpsc::channel::<usize>();
            let echo = kind
                .spawn(move || {
                    while let Ok(v) = ping_rx.recv() {
                        let _ = pong_tx.send(v);
                    }
                })
                .expect("spawn");
            for i in 0..n {
                let _ = ping_tx.send(i);
                let _ = pong_rx.recv();
            }
            drop(ping_tx);
            echo();
        }
    }
    2 * n
}

/// The ping-pong through a socketpair, blocking reads and writes.
fn io_pingpong(kind: Threads, n: usize) -> usize {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let echo = kind
        .spawn(move || {
            let mut x = [0u8; 1];
            while let Ok(1) = b.read(&mut x) {
                if b.write_all(&x).is_err() {
                    break;
                }
            }
        })
        .expect("spawn");
    let mut x = [0u8; 1];
    for _ in 0..n {
        a.write_all(&x).expect("write");
        a.read_exact(&mut x).expect("read");
    }
    drop(a);
    echo();
    2 * n
}

/// Starts up to `cap` threads that sleep; stops early when one cannot be
/// started, after `secs`, or when RSS grew by `budget_kib`. The count, the
/// reason, and when all had started.
fn sleepers(kind: Threads, cap: usize, secs: u64, budget_kib: u64) -> (usize, String, Duration) {
    let started = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let rss0 = kib("VmRSS");
    let mut reason = format!("reached the cap of {cap}");
    let mut count = 0;
    while count < cap {
        if count % 10_000 == 0 && count > 0 {
            if t.elapsed() > Duration::from_secs(secs) {
                reason = format!("time limit of {secs} s");
                break;
            }
            if kib("VmRSS").saturating_sub(rss0) > budget_kib {
                reason = format!("memory budget of {} MiB", budget_kib / 1024);
                break;
            }
        }
        let s = started.clone();
        let sleep = move || {
            s.fetch_add(1, Ordering::Relaxed);
            match kind {
                Threads::Green | Threads::Activity => turquoise::thread::sleep(FOREVER),
                Threads::Pthread => std::thread::sleep(FOREVER),
            }
        };
        match kind.spawn(sleep) {
            // Detached: the process ends with them asleep.
            Ok(join) => std::mem::forget(join),
            Err(e) => {
                reason = format!("spawn failed: {e}");
                break;
            }
        }
        count += 1;
    }
    while started.load(Ordering::Relaxed) < count {
        std::thread::sleep(Duration::from_millis(1));
    }
    (count, reason, t.elapsed())
}

/// `green-bench micro KIND WHAT ARGS...`; never returns.
pub fn main(kind: &str, what: &str, args: &[u64]) -> ! {
    let kind = match kind {
        "green" => Threads::Green,
        "activity" => Threads::Activity,
        "pthread" => Threads::Pthread,
        k => {
            eprintln!("green-bench micro: unknown kind {k:?} (green, activity, pthread)");
            std::process::exit(2);
        }
    };
    let what = what.to_owned();
    let args = args.to_vec();
    let body = move || {
        let arg = |i: usize| args.get(i).copied().unwrap_or(0);
        let n = arg(0) as usize;
        match what.as_str() {
            "spawn" => match kind {
                Threads::Green => batches("spawn_join", n, |n| {
                    for i in 0..n {
                        let h = turquoise::thread::spawn(move || i);
                        assert_eq!(h.join().ok(), Some(i));
                    }
                    n
                }),
                Threads::Activity => batches("spawn_join", n, |n| {
                    for i in 0..n {
                        let h = turquoise::thread::spawn_local(move || i);
                        assert_eq!(h.join().ok(), Some(i));
                    }
                    n
                }),
                Threads::Pthread => batches("spawn_join", n, |n| {
                    for i in 0..n {
                        assert_eq!(std::thread::spawn(move || i).join().ok(), Some(i));
                    }
                    n
                }),
            },
            "chan" => batches("switch_chan", n, |n| chan_pingpong(kind, n)),
            "io" => batches("switch_io", n, |n| io_pingpong(kind, n)),
            "idle" => {
                let (rss0, pte0) = (kib("VmRSS"), kib("VmPTE"));
                let (count, _, _) = sleepers(kind, n, u64::MAX, u64::MAX);
                std::thread::sleep(Duration::from_millis(200));
                println!("idle {count} {rss0} {} {pte0} {}", kib("VmRSS"), kib("VmPTE"));
            }
            "alive" => {
                let (count, reason, took) = sleepers(kind, n, arg(1), arg(2));
                println!("alive {count} {:.2} {}", took.as_secs_f64(), kib("VmRSS"));
                println!("reason {reason}");
            }
            w => {
                eprintln!("green-bench micro: unknown measurement {w:?}");
                std::process::exit(2);
            }
        }
        let _ = std::io::stdout().flush();
    };
    match kind {
        // Measured from inside a green thread (an activity) of a one-worker runtime.
        Threads::Green | Threads::Activity => {
            let rt = turquoise::Builder::new().worker_threads(1).enable_all().build().expect("runtime");
            let h = turquoise::thread::Builder::new().preemptive(kind == Threads::Green).spawn_on(rt.handle(), body).expect("spawn");
            let _ = h.join();
            // Sleepers are left asleep: no shutdown that would cancel them.
            std::process::exit(0);
        }
        Threads::Pthread => {
            body();
            std::process::exit(0);
        }
    }
}

//! Resident memory per paused function, how many can be alive at once, and a
//! baseline of parked threads.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use linger::{launch, pause, Linger};

use crate::progress::Progress;
use crate::sig::now_ns;
use crate::Scale;

/// Stop the capacity test before the process gets this big.
const RSS_LIMIT: u64 = 8 << 30;

pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps").map(|s| s.lines().count()).unwrap_or(0)
}

/// Touches about 1 KiB of its own stack, then pauses until cancelled.
#[inline(never)]
fn touch_and_pause() {
    let mut buf = [0u8; 1024];
    for (i, b) in buf.iter_mut().enumerate().step_by(64) {
        *b = i as u8;
    }
    black_box(&mut buf);
    loop {
        pause();
    }
}

pub struct Memory {
    pub n: usize,
    pub stack_size: usize,
    pub per_fn_bytes: f64,
    pub launch_ns_per_fn: f64,
    pub cancel_ns_per_fn: f64,
    pub threads: usize,
    pub per_thread_bytes: f64,
    pub thread_stack: usize,
    pub cap: usize,
    pub alive: usize,
    pub stop_reason: String,
    pub peak_rss: u64,
    pub peak_maps: usize,
    pub max_map_count: String,
    pub fill_secs: f64,
    pub drop_secs: f64,
}

pub fn run(sc: Scale, p: &mut Progress) -> Memory {
    let stack_size = linger::Config::from_env().map(|c| c.default_stack_size()).unwrap_or(linger::DEFAULT_STACK_SIZE);
    let slice = Duration::from_micros(100);

    p.step("memory: resident size of paused functions");
    let n = sc.n(10_000, 2_000);
    let mut v: Vec<Linger<()>> = Vec::with_capacity(n);
    let before = rss_bytes();
    let t0 = now_ns();
    for _ in 0..n {
        v.push(launch(touch_and_pause, slice).expect("launch"));
    }
    let t1 = now_ns();
    let after = rss_bytes();
    v.clear();
    let t2 = now_ns();
    let per_fn_bytes = after.saturating_sub(before) as f64 / n as f64;

    p.step("memory: resident size of parked threads (baseline)");
    let threads = sc.n(1000, 200);
    let thread_stack = 64 * 1024;
    let start = Arc::new(Barrier::new(threads + 1));
    let stop = Arc::new(Barrier::new(threads + 1));
    let before = rss_bytes();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (a, b) = (start.clone(), stop.clone());
            std::thread::Builder::new()
                .stack_size(thread_stack)
                .spawn(move || {
                    let mut buf = [0u8; 1024];
                    black_box(&mut buf);
                    a.wait();
                    b.wait();
                })
                .expect("spawn")
        })
        .collect();
    start.wait();
    let after = rss_bytes();
    stop.wait();
    for h in hs {
        h.join().expect("join");
    }
    let per_thread_bytes = after.saturating_sub(before) as f64 / threads as f64;

    p.step("memory: how many paused functions fit");
    let cap = sc.n(200_000, 20_000);
    let mut v: Vec<Linger<()>> = Vec::with_capacity(cap);
    let mut stop_reason = format!("reached the cap of {cap}");
    let mut peak_rss = 0;
    let f0 = now_ns();
    while v.len() < cap {
        match launch(touch_and_pause, slice) {
            Ok(l) => v.push(l),
            Err(e) => {
                stop_reason = format!("launch failed: {e}");
                break;
            }
        }
        if v.len().is_multiple_of(4096) {
            peak_rss = rss_bytes();
            if peak_rss > RSS_LIMIT {
                stop_reason =
                    format!("stopped at the benchmark's RSS limit of {}", crate::stats::fmt_bytes(RSS_LIMIT as f64));
                break;
            }
        }
    }
    let fill_secs = (now_ns() - f0) as f64 / 1e9;
    let alive = v.len();
    peak_rss = peak_rss.max(rss_bytes());
    let peak_maps = map_count();
    let d0 = now_ns();
    drop(v);
    let drop_secs = (now_ns() - d0) as f64 / 1e9;

    Memory {
        n,
        stack_size,
        per_fn_bytes,
        launch_ns_per_fn: (t1 - t0) as f64 / n as f64,
        cancel_ns_per_fn: (t2 - t1) as f64 / n as f64,
        threads,
        per_thread_bytes,
        thread_stack,
        cap,
        alive,
        stop_reason,
        peak_rss,
        peak_maps,
        max_map_count: std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap_or_default().trim().to_owned(),
        fill_secs,
        drop_secs,
    }
}

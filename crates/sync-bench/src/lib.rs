//! Issue 13's benchmarks of `turquoise::sync`: what they measure, in this
//! process (the Concurrency Kit and Go peers run as programs of their own,
//! built at run time: `peers.rs`). Each measurement returns [`Row`]s: a
//! table, a name and its samples (ns per operation per batch, or one
//! latency per event).

pub mod activities;
pub mod ec;
pub mod fences;
pub mod prims;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

/// One measured line: `what` (the table: "inc_ns", "wake_one"...), the
/// thing measured, its samples.
#[derive(Clone, Debug)]
pub struct Row {
    pub what: String,
    pub name: String,
    pub samples: Vec<f64>,
}

impl Row {
    pub fn new(what: &str, name: &str, samples: Vec<f64>) -> Row {
        Row { what: what.into(), name: name.into(), samples }
    }

    /// A line of a peer's output, "what name words... v1 v2...": the
    /// trailing numbers are the samples.
    pub fn parse(line: &str) -> Option<Row> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let first_num = words.iter().rposition(|w| w.parse::<f64>().is_err())? + 1;
        if first_num < 2 || first_num == words.len() {
            return None;
        }
        let samples = words[first_num..].iter().filter_map(|w| w.parse().ok()).collect();
        Some(Row::new(words[0], &words[1..first_num].join(" "), samples))
    }
}

/// How long and how often to measure.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Batches of the per-operation loops.
    pub batches: usize,
    /// Operations per batch of the cheapest loops (increments, fences).
    pub n: usize,
    /// Wake-ups per latency measurement.
    pub rounds: usize,
    /// Seconds at most per latency measurement of a heavy fence.
    pub budget: f64,
}

impl Sizes {
    pub const FULL: Sizes = Sizes { batches: 11, n: 2_000_000, rounds: 2000, budget: 0.5 };
    pub const QUICK: Sizes = Sizes { batches: 3, n: 200_000, rounds: 100, budget: 0.05 };
}

/// CLOCK_MONOTONIC in ns (the C peer's clock too, so that the wake-up
/// latencies are comparable).
pub fn now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The time stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64 (user-space access is
    // allowed on Linux unless a process asked for it not to be).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// `f(n)` run once with n/10 as a warm-up, then `batches` times: ns and
/// TSC cycles per operation of each batch.
pub fn per_op(batches: usize, n: usize, mut f: impl FnMut(usize)) -> (Vec<f64>, Vec<f64>) {
    f((n / 10).max(1));
    (0..batches)
        .map(|_| {
            let (t, c) = (now_ns(), rdtsc());
            f(n);
            let (c, t) = (rdtsc() - c, now_ns() - t);
            (t as f64 / n as f64, c as f64 / n as f64)
        })
        .unzip()
}

/// `f` run by a green thread of a new one-worker `turquoise` runtime (an
/// activity when not `preemptive`), the caller pinned to CPU 0 first (the
/// worker inherits it): its result.
pub fn on_one_worker<T: Send + 'static>(preemptive: bool, f: impl FnOnce() -> T + Send + 'static) -> T {
    bench_util::pin(0);
    let rt = turquoise::Builder::new().worker_threads(1).enable_all().build().expect("runtime");
    let h = turquoise::thread::Builder::new().preemptive(preemptive).spawn_on(rt.handle(), f).expect("spawn");
    h.join().expect("benchmark's green thread")
}

/// Futex wait on `w` while it holds `expected` (any wake-up returns).
pub fn futex_wait(w: &AtomicU32, expected: u32) {
    // SAFETY: the word is a live aligned u32 for the call; no timeout.
    unsafe {
        libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expected, std::ptr::null::<libc::timespec>());
    }
}

/// Wakes every waiter on `w`.
pub fn futex_wake(w: &AtomicU32) {
    // SAFETY: the word is a live aligned u32; a wake reads nothing else.
    unsafe {
        libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX);
    }
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Whether thread `tid` of this process is asleep ('S' in its stat).
pub fn asleep(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok().and_then(|s| s.rfind(')').map(|i| s[i + 1..].trim_start().starts_with('S'))).unwrap_or(false)
}

/// Another thread of the process, pinned to CPU 0, that is either blocked
/// (asleep on a futex) or spinning, until dropped.
pub struct Other {
    stop: Arc<(AtomicBool, AtomicU32)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Other {
    pub fn start(spinning: bool) -> Other {
        let stop = Arc::new((AtomicBool::new(false), AtomicU32::new(0)));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            bench_util::pin(0);
            while !s.0.load(Ordering::Acquire) {
                if spinning {
                    std::hint::spin_loop();
                } else {
                    futex_wait(&s.1, 0);
                }
            }
        });
        // Let it get there.
        std::thread::sleep(std::time::Duration::from_millis(20));
        Other { stop, thread: Some(thread) }
    }
}

impl Drop for Other {
    fn drop(&mut self) {
        self.stop.0.store(true, Ordering::Release);
        self.stop.1.store(1, Ordering::Release);
        futex_wake(&self.stop.1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `f(spinning)` on CPU 1 with the process's [`Other`] thread on CPU 0
/// blocked, then spinning; afterwards the heavy fence is back to expedited
/// membarrier and the caller on CPU 0.
pub fn beside_other(mut f: impl FnMut(bool)) {
    for spinning in [false, true] {
        let other = Other::start(spinning);
        bench_util::pin(1);
        f(spinning);
        drop(other);
    }
    turquoise::sync::fence::use_mechanism(turquoise::sync::fence::Mechanism::MembarrierExpedited);
    bench_util::pin(0);
}

/// Samples of `f` (ns each) until `count` or `budget` seconds, at least 5.
pub fn timed(count: usize, budget: f64, mut f: impl FnMut()) -> Vec<f64> {
    let start = now_ns();
    let mut v = Vec::with_capacity(count);
    while v.len() < count && (v.len() < 5 || (now_ns() - start) as f64 / 1e9 < budget) {
        let t = now_ns();
        f();
        v.push((now_ns() - t) as f64);
    }
    v
}

//! What preemption costs on this machine, the three measurements behind
//! `docs/benchmarks.md` 9.4 (run pinned to one CPU for steady numbers):
//!
//! ```text
//! taskset -c 0 cargo run --release -p green-bench --example preemption_costs
//! ```
//!
//! 1. A loop with a call per step (its return address goes through the
//!    stack) and the same loop without the call, alone and while another
//!    thread sends it an empty signal every 500 us.
//! 2. `timer_settime` of a one-shot timer some distance ahead, re-armed
//!    before it fires: what arming costs by distance.
//! 3. A green thread spinning 20 ms of calibrated work alone on a worker,
//!    at several slices: what the preemptions add.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[inline(never)]
fn step(x: u64) -> u64 {
    // A call the compiler cannot remove, whose value stays in a register.
    let mut x = x;
    // SAFETY: an empty instruction sequence on a register.
    unsafe { std::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags)) };
    x
}

fn with_calls(n: u64) -> u64 {
    let mut a = 0;
    for i in 0..n {
        a = step(a ^ i);
    }
    a
}

extern "C" fn ignore(_: libc::c_int) {}

/// Median milliseconds of `f` over 7 runs, with signals every `period_us`
/// from another thread (0: none).
fn timed(period_us: u64, f: impl Fn()) -> f64 {
    // SAFETY: an empty handler for SIGUSR1, installed once.
    unsafe { libc::signal(libc::SIGUSR1, ignore as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    // SAFETY: our own thread id.
    let tid = Arc::new(AtomicI32::new(unsafe { libc::gettid() }));
    let stop = Arc::new(AtomicBool::new(false));
    let killer = (period_us > 0).then(|| {
        let (tid, stop) = (tid.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(period_us));
                // SAFETY: a signal with an empty handler to a thread of ours.
                unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid.load(Ordering::Relaxed), libc::SIGUSR1) };
            }
        })
    });
    let mut v: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    stop.store(true, Ordering::Relaxed);
    if let Some(k) = killer {
        k.join().unwrap();
    }
    v.sort_by(f64::total_cmp);
    v[3]
}

fn arm_cost(ahead: Duration) -> f64 {
    let mut timer: libc::timer_t = std::ptr::null_mut();
    // SAFETY: an all-zero sigevent asks for nothing but the fields set.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_SIGNAL;
    sev.sigev_signo = libc::SIGUSR1;
    // SAFETY: valid out pointer and sigevent.
    assert_eq!(unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut timer) }, 0);
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid out pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let ns = now.tv_nsec as u64 + ahead.as_nanos() as u64;
        let at = libc::timespec { tv_sec: now.tv_sec + (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 };
        let its = libc::itimerspec { it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 }, it_value: at };
        // SAFETY: our timer, a valid itimerspec.
        unsafe { libc::timer_settime(timer, libc::TIMER_ABSTIME, &its, std::ptr::null_mut()) };
    }
    let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    // SAFETY: ours.
    unsafe { libc::timer_delete(timer) };
    per
}

fn main() {
    println!("machine: {}", bench_util::machine());
    println!("1. a loop of 200M steps, median of 7 (ms)");
    let n = 200_000_000;
    for (name, f) in [("a call per step", with_calls as fn(u64) -> u64), ("no call (bench_util::work)", bench_util::work)] {
        let quiet = timed(0, || {
            std::hint::black_box(f(n));
        });
        let noisy = timed(500, || {
            std::hint::black_box(f(n));
        });
        println!("   {name:28} alone {quiet:7.1}   a signal every 500 us {noisy:7.1}   ({:+.0}%)", (noisy / quiet - 1.0) * 100.0);
    }
    println!("2. timer_settime of a one-shot timer re-armed before it fires (us per call)");
    for us in [50u64, 150, 1000, 3000, 10_000] {
        println!("   {us:6} us ahead: {:.2}", arm_cost(Duration::from_micros(us)));
    }
    println!("3. a green thread spinning 20 ms of work alone, median of 15 (ms)");
    let iters = (bench_util::calibrate() * 20_000.0) as u64;
    for us in [100u64, 200, 500, 2000, 1_000_000] {
        let rt = turquoise::Builder::new().worker_threads(1).slice(Duration::from_micros(us)).enable_all().build().unwrap();
        let mut v: Vec<f64> = (0..15)
            .map(|_| {
                let t = Instant::now();
                let h = turquoise::thread::Builder::new().spawn_on(rt.handle(), move || std::hint::black_box(bench_util::work(iters))).unwrap();
                h.join().unwrap();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        v.sort_by(f64::total_cmp);
        println!("   {:>9} slices: {:.2}", if us >= 1_000_000 { "1 s".to_string() } else { format!("{us} us") }, v[7]);
    }
}

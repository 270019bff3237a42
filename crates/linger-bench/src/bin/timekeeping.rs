//! `linger-timekeeping`: per-thread timers against the monitor thread
//! (`LINGER_TIMEKEEPING=timer|monitor`), side by side in one run. The
//! configuration is per process, so each measurement runs in a child
//! process of this binary, the two modes alternating round after round.
//!
//! Each child measures:
//! - short functions: one thread (then two) launching functions of ~500 us
//!   of work under a 2 ms timeout for a few seconds: signals the thread
//!   received per second, involuntary context switches per second, the
//!   monitor's wake-ups and signals, and throughput next to the same work
//!   called directly;
//! - lateness: spinning functions under 100 us and 1 ms timeouts, how late
//!   `launch` returns after the deadline (p50, p99);
//! - launch + return of an empty function with a 100 us timeout.
//!
//! Prints a markdown table (median [min..max] over rounds) to stdout.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::process::Command;
use std::time::Duration;

use linger::{launch, Linger};

fn now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU-bound work in our own code (preemptible anywhere): `n` xorshift steps.
#[inline(never)]
fn work(n: u64, seed: u64) -> u64 {
    (0..n).fold(seed | 1, |x, _| {
        let x = x ^ (x << 13);
        let x = x ^ (x >> 7);
        x ^ (x << 17)
    })
}

fn spin_forever() {
    let mut x = 0u64;
    loop {
        x = black_box(x.wrapping_add(1));
    }
}

/// Iterations of `work` that take about `ns`.
fn calibrate(ns: u64) -> u64 {
    let mut n = 100_000u64;
    loop {
        let t0 = now_ns();
        black_box(work(n, 1));
        let dt = now_ns() - t0;
        if dt > 20_000_000 {
            return (n as f64 * ns as f64 / dt as f64) as u64;
        }
        n *= 2;
    }
}

fn thread_nivcsw() -> u64 {
    // SAFETY: an all-zero rusage is valid; the kernel fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_nivcsw as u64
}

struct Short {
    functions: u64,
    signals: u64,
    nivcsw: u64,
    preempted: u64,
    secs: f64,
}

/// One thread launching `work(n)` under a 2 ms timeout for `secs`.
fn short_functions(n: u64, secs: f64) -> Short {
    linger::reset_stats();
    let iv0 = thread_nivcsw();
    let t0 = now_ns();
    let end = t0 + (secs * 1e9) as u64;
    let mut functions = 0;
    let mut preempted = 0;
    let mut seed = 0;
    while now_ns() < end {
        seed += 1;
        let mut l = launch(move || work(n, seed), Duration::from_millis(2)).expect("launch");
        while let Linger::Continuation(_) = l {
            preempted += 1;
            linger::resume(&mut l, Duration::from_millis(2)).expect("resume");
        }
        black_box(l);
        functions += 1;
    }
    let secs = (now_ns() - t0) as f64 / 1e9;
    let s = linger::stats();
    Short {
        functions,
        signals: s.spurious_signals + s.preemptions - s.deferred_preemptions + s.deferrals,
        nivcsw: thread_nivcsw() - iv0,
        preempted,
        secs,
    }
}

fn direct(n: u64, secs: f64) -> f64 {
    let t0 = now_ns();
    let end = t0 + (secs * 1e9) as u64;
    let mut k = 0u64;
    while now_ns() < end {
        black_box(work(n, k));
        k += 1;
    }
    k as f64 / ((now_ns() - t0) as f64 / 1e9)
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn child() {
    let out = |k: &str, v: f64| println!("R {k} {v}");
    linger::init().expect("init");
    let n = calibrate(500_000);
    let secs = 2.0;

    // Launch + return.
    let mut v = Vec::new();
    for _ in 0..2000 {
        let t0 = now_ns();
        for _ in 0..64 {
            let l = launch(|| black_box(7u64), Duration::from_micros(100)).expect("launch");
            black_box(l);
        }
        v.push((now_ns() - t0) as f64 / 64.0);
    }
    out("launch_return_ns", percentile(&mut v, 0.5));

    // Short functions, one thread (a fresh one: per-thread counters).
    let base = direct(n, 1.0);
    let (m0, s0) = linger::monitor_counters();
    let r = std::thread::spawn(move || short_functions(n, secs)).join().unwrap();
    let (m1, s1) = linger::monitor_counters();
    out("short1_signals_per_s", r.signals as f64 / r.secs);
    out("short1_nivcsw_per_s", r.nivcsw as f64 / r.secs);
    out("short1_preempted", r.preempted as f64);
    out("short1_throughput", r.functions as f64 / r.secs / base);
    out("short1_monitor_wakeups_per_s", (m1 - m0) as f64 / r.secs);
    out("short1_monitor_sent_per_s", (s1 - s0) as f64 / r.secs);

    // Two threads (both CPUs busy: the monitor competes for one).
    let base2: f64 = {
        let h: Vec<_> = (0..2).map(|_| std::thread::spawn(move || direct(n, 1.0))).collect();
        h.into_iter().map(|h| h.join().unwrap()).sum()
    };
    let (m0, s0) = linger::monitor_counters();
    let h: Vec<_> = (0..2).map(|_| std::thread::spawn(move || short_functions(n, secs))).collect();
    let rs: Vec<Short> = h.into_iter().map(|h| h.join().unwrap()).collect();
    let (m1, s1) = linger::monitor_counters();
    let secs2 = rs.iter().map(|r| r.secs).fold(0.0, f64::max);
    out("short2_signals_per_s", rs.iter().map(|r| r.signals as f64 / r.secs).sum::<f64>() / 2.0);
    out("short2_throughput", rs.iter().map(|r| r.functions as f64 / r.secs).sum::<f64>() / base2);
    out("short2_monitor_wakeups_per_s", (m1 - m0) as f64 / secs2);
    out("short2_monitor_sent_per_s", (s1 - s0) as f64 / secs2);

    // Lateness of functions that do run long: with the other CPU idle,
    // then kept busy by a plain spinning thread (the monitor must then
    // take a CPU from someone).
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for (key, us, other) in [("late100", 100u64, false), ("late1000", 1000, false), ("late100busy", 100, true)] {
        let spinner = other.then(|| {
            busy.store(true, std::sync::atomic::Ordering::Relaxed);
            let busy = busy.clone();
            std::thread::spawn(move || {
                while busy.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        });
        let t = Duration::from_micros(us);
        let samples = if us == 100 { 2000 } else { 600 };
        let mut v = Vec::new();
        for _ in 0..samples {
            let t0 = now_ns();
            let l = launch(spin_forever, t).expect("launch");
            let t1 = now_ns();
            assert!(l.is_continuation());
            v.push(t1 as f64 - (t0 + us * 1000) as f64);
        }
        out(&format!("{key}_p50_us"), percentile(&mut v, 0.5) / 1e3);
        out(&format!("{key}_p99_us"), percentile(&mut v, 0.99) / 1e3);
        if let Some(h) = spinner {
            busy.store(false, std::sync::atomic::Ordering::Relaxed);
            h.join().unwrap();
        }
    }
}

const ROWS: [(&str, &str); 17] = [
    ("short1_signals_per_s", "1 thread, 500 us functions / 2 ms timeout: signals received per s"),
    ("short1_nivcsw_per_s", "same: involuntary context switches of the thread per s"),
    ("short1_preempted", "same: functions preempted (over 2 s)"),
    ("short1_throughput", "same: throughput, share of direct calls"),
    ("short1_monitor_wakeups_per_s", "same: monitor wake-ups per s"),
    ("short1_monitor_sent_per_s", "same: monitor signals sent per s"),
    ("short2_signals_per_s", "2 threads (both CPUs busy): signals per s per thread"),
    ("short2_throughput", "same: throughput, share of direct calls on 2 threads"),
    ("short2_monitor_wakeups_per_s", "same: monitor wake-ups per s"),
    ("short2_monitor_sent_per_s", "same: monitor signals sent per s"),
    ("late100_p50_us", "spinning fn, 100 us timeout: overrun p50 (us)"),
    ("late100_p99_us", "same: overrun p99 (us)"),
    ("late1000_p50_us", "spinning fn, 1 ms timeout: overrun p50 (us)"),
    ("late1000_p99_us", "same: overrun p99 (us)"),
    ("late100busy_p50_us", "spinning fn, 100 us timeout, other CPU busy: overrun p50 (us)"),
    ("late100busy_p99_us", "same: overrun p99 (us)"),
    ("launch_return_ns", "launch + return, empty fn, 100 us timeout (ns, median of 2000 batches of 64)"),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child();
        return;
    }
    let rounds: usize = match args.iter().position(|a| a == "--rounds") {
        Some(i) => args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            eprintln!("usage: linger-timekeeping [--rounds N]");
            std::process::exit(2)
        }),
        None => 5,
    };
    let exe = std::env::current_exe().expect("current_exe");
    let mut results: BTreeMap<(&str, String), Vec<f64>> = BTreeMap::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 { ["timer", "monitor"] } else { ["monitor", "timer"] };
        for mode in order {
            eprintln!("round {} of {rounds}: {mode}", round + 1);
            let o = Command::new(&exe).arg("--child").env("LINGER_TIMEKEEPING", mode).output().expect("run child");
            if !o.status.success() {
                eprintln!("child ({mode}) failed: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
                std::process::exit(1);
            }
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                let mut p = line.split_whitespace();
                if p.next() != Some("R") {
                    continue;
                }
                let (Some(k), Some(v)) = (p.next(), p.next().and_then(|v| v.parse::<f64>().ok())) else { continue };
                results.entry((mode, k.to_owned())).or_default().push(v);
            }
        }
    }
    let cell = |mode: &str, k: &str| -> String {
        let Some(v) = results.get(&(mode, k.to_owned())) else { return "-".into() };
        let mut v = v.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let f = |x: f64| if x.abs() >= 100.0 { format!("{x:.0}") } else if x.abs() >= 1.0 { format!("{x:.2}") } else { format!("{x:.3}") };
        format!("{} [{}..{}]", f(v[v.len() / 2]), f(v[0]), f(v[v.len() - 1]))
    };
    println!("| measurement ({rounds} rounds, median [min..max]) | timer | monitor |");
    println!("|---|---|---|");
    for (k, label) in ROWS.iter().filter(|(k, _)| !k.is_empty()) {
        println!("| {label} | {} | {} |", cell("timer", k), cell("monitor", k));
    }
}

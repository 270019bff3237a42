//! A worker's pace (`pace.rs`): a long run is cut soon after other work
//! comes to wait, not at the end of its slice; alone, it is looked at less
//! and less often; thread-locals stay exact when runs are looked at and go
//! on.

use std::cell::Cell;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use turquoise::thread::{self, Builder, ThreadStats};

mod common;
use common::within;

fn runtime(slice: Duration, granularity: Duration) -> turquoise::Runtime {
    turquoise::Builder::new().worker_threads(1).slice(slice).granularity(granularity).enable_all().build().unwrap()
}

/// Spins until `stop` is set (or 5 s passed), with no library call.
fn spin_until(stop: &AtomicBool) {
    let t = Instant::now();
    while !stop.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(5) {
        std::hint::spin_loop();
    }
}

/// On a one-worker runtime of `slice` and `granularity`: a green thread
/// parked reading a socket, then a spinner; another OS thread writes to the
/// socket 5 ms into the spin. Returns how long the reader waited for its
/// worker after the write, and the spinner's counters.
fn reader_behind_spinner(slice: Duration, granularity: Duration) -> (Duration, ThreadStats) {
    let rt = runtime(slice, granularity);
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let written: Arc<Mutex<Option<Instant>>> = Arc::default();
    rt.block_on(async {
        let (stop2, w2) = (stop.clone(), written.clone());
        let reader = Builder::new()
            .spawn(move || {
                let mut byte = [0u8];
                b.read_exact(&mut byte).unwrap();
                let waited = w2.lock().unwrap().expect("written before it was read").elapsed();
                stop2.store(true, Ordering::Relaxed);
                waited
            })
            .unwrap();
        // Parked on the socket before the spinner starts.
        while reader.thread_stats().parks_io == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (stop3, started2) = (stop.clone(), started.clone());
        let spinner = Builder::new()
            .spawn(move || {
                started2.store(true, Ordering::Relaxed);
                spin_until(&stop3);
            })
            .unwrap();
        let writer = std::thread::spawn(move || {
            while !started.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(200));
            }
            std::thread::sleep(Duration::from_millis(5));
            *written.lock().unwrap() = Some(Instant::now());
            a.write_all(b"x").unwrap();
        });
        let waited = reader.await.unwrap();
        let stats = spinner.thread_stats();
        spinner.await.unwrap();
        writer.join().unwrap();
        (waited, stats)
    })
}

#[test]
fn a_long_run_is_cut_soon_after_a_read_becomes_ready() {
    within(Duration::from_secs(60), "cut for a ready read", || {
        for round in 0..5 {
            // Without looks the reader would wait for the rest of the
            // 400 ms slice.
            let (waited, _) = reader_behind_spinner(Duration::from_millis(400), Duration::from_millis(1));
            assert!(waited < Duration::from_millis(150), "round {round}: the reader waited {waited:?} behind a spinner with 1 ms granularity");
        }
    });
}

#[test]
fn without_granularity_a_run_keeps_its_slice() {
    within(Duration::from_secs(60), "no granularity", || {
        let (waited, stats) = reader_behind_spinner(Duration::from_millis(400), Duration::ZERO);
        assert!(waited >= Duration::from_millis(100), "the reader waited only {waited:?}: the spinner's 400 ms slice was cut");
        assert_eq!(stats.looks, 0);
    });
}

/// Spins `d` alone on a one-worker runtime, or beside a parked thread;
/// returns its counters.
fn spin_for(d: Duration, slice: Duration, granularity: Duration, beside_a_parked_thread: bool) -> ThreadStats {
    let rt = runtime(slice, granularity);
    rt.block_on(async {
        let parked = beside_a_parked_thread.then(|| Builder::new().spawn(|| thread::sleep(Duration::from_secs(2))).unwrap());
        if let Some(p) = &parked {
            while p.thread_stats().parks_timer == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let h = Builder::new()
            .spawn(move || {
                let t = Instant::now();
                while t.elapsed() < d {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        let stats = loop {
            if h.is_finished() {
                break h.thread_stats();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        h.await.unwrap();
        if let Some(p) = parked {
            p.cancel();
            let _ = p.await;
        }
        stats
    })
}

#[test]
fn a_thread_alone_is_looked_at_less_and_less() {
    within(Duration::from_secs(60), "alone", || {
        // Intervals of 1, 2, 4, 8, 16 and 19 ms in each 50 ms slice: about
        // six looks a slice; at the granularity it would be about fifty.
        let s = spin_for(Duration::from_millis(150), Duration::from_millis(50), Duration::from_millis(1), false);
        assert!(s.looks >= 1, "no look in 150 ms: {s:?}");
        assert!(s.looks <= 40, "looked at {} times in 150 ms alone: the interval did not grow", s.looks);
        // Requeued at the end of each slice only (a stall makes fewer).
        assert!(s.preemptions <= 5, "{} stops in 150 ms of 50 ms slices", s.preemptions);
    });
}

#[test]
fn beside_a_parked_thread_the_looks_stay_at_the_granularity() {
    within(Duration::from_secs(60), "beside a parked thread", || {
        let s = spin_for(Duration::from_millis(300), Duration::from_millis(100), Duration::from_millis(1), true);
        // About 300 (one a millisecond; the stall emulator's stalls leave
        // 38-50); intervals that doubled as when alone would make about 7
        // a slice, 21 in all.
        assert!(s.looks >= 30, "looked at {} times in 300 ms beside a parked thread", s.looks);
        assert!(s.preemptions <= 6, "{} stops in 300 ms of 100 ms slices with nothing waiting", s.preemptions);
    });
}

std::thread_local! {
    static COUNTER: Cell<u64> = const { Cell::new(0) };
}

/// Counts to `n` in a thread-local (its value kept in a register across
/// the inner loop, as compiled code does), sleeping 200 us every 2^16, so
/// that its worker's runs are sometimes alone (looked at, and go on) and
/// sometimes beside others (cut).
fn count(n: u64) -> u64 {
    let mut i = 0;
    while i < n {
        COUNTER.with(|c| {
            let mut v = c.get();
            for _ in 0..1024.min(n - i) {
                v = std::hint::black_box(v) + 1;
                c.set(v);
            }
        });
        i += 1024.min(n - i);
        if i % (1 << 16) == 0 {
            thread::sleep(Duration::from_micros(200));
        }
    }
    COUNTER.with(|c| c.get())
}

/// Runs that are looked at and go on, or cut when others wait, many times
/// over: each thread's thread-local counter stays exact.
#[test]
fn thread_locals_stay_exact_when_runs_are_looked_at() {
    within(Duration::from_secs(240), "counters", || {
        const N: u64 = 1 << 21;
        let mut looks = 0;
        for round in 0..5 {
            let rt = turquoise::Builder::new()
                .worker_threads(2)
                .slice(Duration::from_micros(800))
                .granularity(Duration::from_micros(50))
                .enable_all()
                .build()
                .unwrap();
            let values = rt.block_on(async {
                let hs: Vec<_> = (0..16).map(|_| Builder::new().spawn(|| count(N)).unwrap()).collect();
                let mut values = Vec::new();
                for h in hs {
                    while !h.is_finished() {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    looks += h.thread_stats().looks;
                    values.push(h.await.unwrap());
                }
                values
            });
            assert!(values.iter().all(|&v| v == N), "round {round}: a counter is off: {values:?}");
        }
        assert!(looks > 0, "no run was looked at and went on: the test missed its path");
    });
}

//! Green threads that block in a `pthread_mutex_t` or `pthread_cond_t`
//! another green thread of the same worker holds or will signal (issue 12:
//! not a deadlock). Green threads run with linger's
//! `Builder::stop_in_futex_waits`: the waiter is stopped in its futex wait at
//! its slice, and the worker runs the holder.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::thread;

#[path = "../../linger/tests/support/pthread.rs"]
mod pthread;
use pthread::{Counted, Slot, Watchdog};

mod common;
use common::runtime;

/// The reproduction: `threads` green threads each take the mutex
/// `rounds` times and hold it for ~0.5 ms (five 100 us slices), updating a
/// counter non-atomically under it. Returns the run's time and the worker's
/// futex stops (read by the green threads, which run on the worker).
fn contend(workers: usize, threads: u64, rounds: u64) -> (Duration, u64) {
    let rt = runtime(workers, Duration::from_micros(100));
    let c = Counted::new();
    let stops = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    rt.block_on(async {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (c, stops) = (c.clone(), stops.clone());
                thread::spawn(move || {
                    let before = linger::stats().futex_stops;
                    for _ in 0..rounds {
                        c.bump(Duration::from_micros(500));
                    }
                    // The worker's counter (shared by its green threads):
                    // keep the largest span seen.
                    stops.fetch_max(linger::stats().futex_stops - before, Ordering::SeqCst);
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    let took = t.elapsed();
    assert_eq!(c.count(), threads * rounds, "lost updates");
    (took, stops.load(Ordering::SeqCst))
}

#[test]
fn pthread_mutex_held_across_slices_one_worker() {
    let _w = Watchdog::new("one worker", 300);
    let mut stops = 0;
    for _ in 0..10 {
        let (took, s) = contend(1, 4, 50);
        stops += s;
        // 200 critical sections of 0.5 ms, one at a time.
        eprintln!("1 worker, 4 threads x 50: {took:?}, {s} futex stops");
    }
    assert!(stops > 0, "no green thread was ever stopped in pthread_mutex_lock");
}

#[test]
fn pthread_mutex_held_across_slices_two_workers() {
    let _w = Watchdog::new("two workers", 300);
    for _ in 0..10 {
        let (took, s) = contend(2, 8, 25);
        eprintln!("2 workers, 8 threads x 25: {took:?}, {s} futex stops on the busier worker");
    }
}

/// Producer and consumer green threads on one worker, through a one-slot
/// queue with a mutex and two condition variables: each waits in
/// `pthread_cond_wait` for the other, which only that worker can run.
#[test]
fn condition_variable_between_green_threads_of_one_worker() {
    let _w = Watchdog::new("condvar", 300);
    const ITEMS: u64 = 2000;
    for _ in 0..5 {
        let rt = runtime(1, Duration::from_micros(100));
        let slot = Slot::new();
        let sum = rt.block_on(async {
            let producer = {
                let slot = slot.clone();
                thread::spawn(move || {
                    for i in 1..=ITEMS {
                        slot.put(i, false);
                    }
                })
            };
            let consumer = thread::spawn(move || {
                let mut sum = 0;
                for i in 1..=ITEMS {
                    let v = slot.take(false);
                    assert_eq!(v, i, "items out of order");
                    sum += v;
                }
                sum
            });
            producer.await.unwrap();
            consumer.await.unwrap()
        });
        assert_eq!(sum, ITEMS * (ITEMS + 1) / 2);
    }
}

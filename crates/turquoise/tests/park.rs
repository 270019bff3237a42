//! `thread::park` and `Thread::unpark` for green threads, as std's: one
//! token, taken by a park; an unpark before the park is kept; no unpark is
//! lost (looped, at short slices, waker and parker on one worker and on
//! two).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use turquoise::thread;

fn runtime(workers: usize, slice_us: u64) -> turquoise::Runtime {
    turquoise::Builder::new().worker_threads(workers).slice(Duration::from_micros(slice_us)).enable_all().build().unwrap()
}

/// Two green threads hand a counter back and forth with park/unpark only:
/// a lost unpark hangs (the test's watchdog then fails it).
fn ping_pong(workers: usize, rounds: u64) {
    let rt = runtime(workers, 50);
    let turn = Arc::new(AtomicU64::new(0));
    let a_thread: Arc<OnceLock<thread::Thread>> = Arc::new(OnceLock::new());
    let (t1, t2, a1, a2) = (turn.clone(), turn.clone(), a_thread.clone(), a_thread.clone());
    let started = Instant::now();
    rt.block_on(async move {
        // `b` waits for odd turns and makes them even; `a` the reverse.
        let b = thread::Builder::new()
            .spawn(move || {
                for _ in 0..rounds {
                    while t2.load(Ordering::Acquire) % 2 == 0 {
                        thread::park();
                    }
                    t2.fetch_add(1, Ordering::AcqRel);
                    // `a` set its handle before its first turn.
                    a2.get().expect("a's handle").unpark();
                }
            })
            .unwrap();
        let other = b.thread().clone();
        let a = thread::Builder::new()
            .spawn(move || {
                let _ = a1.set(thread::current().unwrap());
                for _ in 0..rounds {
                    t1.fetch_add(1, Ordering::AcqRel);
                    other.unpark();
                    while t1.load(Ordering::Acquire) % 2 == 1 {
                        thread::park();
                    }
                }
            })
            .unwrap();
        a.await.unwrap();
        b.await.unwrap();
    });
    assert_eq!(turn.load(Ordering::Acquire), 2 * rounds);
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
}

#[test]
fn park_and_unpark_lose_no_wake_up_on_one_worker() {
    for _ in 0..5 {
        ping_pong(1, 2_000);
    }
}

#[test]
fn park_and_unpark_lose_no_wake_up_across_workers() {
    for _ in 0..5 {
        ping_pong(2, 2_000);
    }
}

#[test]
fn an_unpark_before_the_park_is_kept_and_a_timeout_returns() {
    let rt = runtime(1, 2000);
    rt.block_on(async {
        let h = thread::spawn(|| {
            let me = thread::current().unwrap();
            me.unpark();
            let t = Instant::now();
            thread::park(); // the token is there: returns at once
            let first = t.elapsed();
            let t = Instant::now();
            thread::park_timeout(Duration::from_millis(20)); // none: waits
            (first, t.elapsed())
        });
        let (first, second) = h.await.unwrap();
        assert!(first < Duration::from_millis(500), "a kept token still parked {first:?}");
        assert!(second >= Duration::from_millis(20), "park_timeout returned early: {second:?}");
    });
}

#[test]
fn unparking_an_ended_thread_does_nothing() {
    let h = thread::spawn(|| ());
    let t = h.thread().clone();
    h.join().unwrap();
    t.unpark();
    t.unpark();
}

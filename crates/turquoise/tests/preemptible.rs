//! `turquoise::preemptible` on several executors: long polls are sliced so
//! that other tasks run, results and wake-ups are intact, panics reach the
//! awaiting side, and dropped tasks release what they hold.
//!
//! Liveness, not speed, is what these tests assert: a run that would hang
//! without preemption fails after a generous time limit instead.

mod common;
use common::{expected, hazard_round, spawned, spin, Flag, Spawned, Task};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::{preemptible, PreemptibleExt};

const SLICE: Duration = Duration::from_micros(500);
/// Far beyond anything a working run needs, even on a stalling VM.
const LIMIT: Duration = Duration::from_secs(60);


/// Spins without awaiting until `stop` is set; returns how long it ran.
async fn hog(stop: Arc<AtomicBool>) -> u64 {
    let mut rounds = 0;
    while !stop.load(Ordering::Relaxed) {
        spin(10_000);
        rounds += 1;
    }
    rounds
}

/// One worker, ten tasks that never await, and a ticker: the ticker runs
/// (its 20 ticks end the hogs). Without slicing, the first hog holds the
/// only worker forever.
#[test]
fn hogs_do_not_starve_a_ticker_on_a_current_thread_runtime() {
    for round in 0..5 {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let stop = Arc::new(AtomicBool::new(false));
            let hogs: Vec<_> = (0..10).map(|_| tokio::spawn(hog(stop.clone()).preemptible(SLICE))).collect();
            let ticker = tokio::spawn(async {
                let mut iv = tokio::time::interval(Duration::from_millis(2));
                for _ in 0..20 {
                    iv.tick().await;
                }
            });
            tokio::time::timeout(LIMIT, ticker).await.expect("ticker starved").unwrap();
            stop.store(true, Ordering::Relaxed);
            for h in hogs {
                let rounds = h.await.unwrap();
                assert!(rounds > 0, "round {round}: a hog never ran");
            }
        });
    }
}

/// A future that awaits values sent from another thread between bursts of
/// computation: every wake-up reaches the task (through the wrapper's own
/// waker), and the sum is right.
async fn bursts(mut rx: futures::channel::mpsc::Receiver<u64>) -> u64 {
    use futures::StreamExt;
    let mut sum = 0;
    while let Some(v) = rx.next().await {
        sum += v + (spin(20_000) & 0); // computation between waits
    }
    sum
}

fn feed(n: u64) -> (futures::channel::mpsc::Receiver<u64>, std::thread::JoinHandle<()>) {
    let (mut tx, rx) = futures::channel::mpsc::channel(4);
    let t = std::thread::spawn(move || {
        for v in 1..=n {
            futures::executor::block_on(futures::SinkExt::send(&mut tx, v)).unwrap();
            if v % 16 == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    });
    (rx, t)
}

#[test]
fn wake_ups_reach_the_task_on_futures_executor() {
    for _ in 0..20 {
        let (rx, t) = feed(500);
        let sum = futures::executor::block_on(preemptible(bursts(rx), Duration::from_micros(50)));
        t.join().unwrap();
        assert_eq!(sum, 500 * 501 / 2);
    }
}

#[test]
fn wake_ups_reach_the_task_on_smol() {
    for _ in 0..20 {
        let (rx, t) = feed(500);
        let sum = smol::block_on(preemptible(bursts(rx), Duration::from_micros(50)));
        t.join().unwrap();
        assert_eq!(sum, 500 * 501 / 2);
    }
}

/// Work stealing moves tasks between the workers: stopped polls resume on
/// their own thread, paused ones anywhere, and every result is right.
#[test]
fn many_tasks_on_a_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let misplaced = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let deadline = Instant::now() + LIMIT;
        for _ in 0..10 {
            let mut set = tokio::task::JoinSet::new();
            for i in 0..40u64 {
                let misplaced = misplaced.clone();
                set.spawn(async move {
                    let mut fut = async move {
                        let mut acc = 0u64;
                        for k in 0..5 {
                            acc = acc.wrapping_add(spin(200_000 + i * 1000));
                            if k % 2 == 0 {
                                tokio::task::yield_now().await;
                            } else {
                                tokio::time::sleep(Duration::from_micros(100)).await;
                            }
                        }
                        (i, acc)
                    }
                    .preemptible(Duration::from_micros(100));
                    let r = (&mut fut).await;
                    misplaced.fetch_add(fut.stats().misplaced, Ordering::Relaxed);
                    r
                });
            }
            let mut seen = 0u64;
            while let Some(r) = set.join_next().await {
                let (i, acc) = r.unwrap();
                let mut want = 0u64;
                for _ in 0..5 {
                    want = want.wrapping_add(spin(200_000 + i * 1000));
                }
                assert_eq!(acc, want, "task {i}");
                seen |= 1 << i;
            }
            assert_eq!(seen, (1u64 << 40) - 1);
            assert!(Instant::now() < deadline, "too slow: something spun");
        }
    });
    eprintln!("misplaced polls (resumed later on their own thread): {}", misplaced.load(Ordering::Relaxed));
}

/// A panic inside a sliced poll reaches the `JoinHandle`; the worker goes on.
#[test]
fn a_panic_reaches_the_join_handle() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        for _ in 0..20 {
            let h = tokio::spawn(
                async {
                    spin(2_000_000);
                    panic!("boom");
                }
                .preemptible(Duration::from_micros(100)),
            );
            let e = h.await.unwrap_err();
            assert!(e.is_panic());
            let msg = e.into_panic();
            assert_eq!(msg.downcast_ref::<&str>(), Some(&"boom"));
        }
        let ok = tokio::spawn(async { 7 }.preemptible(SLICE)).await.unwrap();
        assert_eq!(ok, 7);
    });
}


/// Aborting a task that waits drops (unwinds) its future: what it holds is
/// released. Aborting one stopped inside a poll ends it too (reclaimed, its
/// destructors do not run), and the worker goes on.
#[test]
fn aborted_tasks_end() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    rt.block_on(async {
        let dropped = Arc::new(AtomicUsize::new(0));
        for _ in 0..50 {
            let flag = Flag(dropped.clone());
            let waiting = tokio::spawn(
                async move {
                    let _flag = flag;
                    std::future::pending::<()>().await;
                }
                .preemptible(SLICE),
            );
            tokio::task::yield_now().await; // let it start and wait
            waiting.abort();
            assert!(waiting.await.unwrap_err().is_cancelled());
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 50, "a waiting task's future was not dropped");
        for _ in 0..50 {
            let stop = Arc::new(AtomicBool::new(false));
            let spinning = tokio::spawn(hog(stop).preemptible(Duration::from_micros(100)));
            tokio::task::yield_now().await; // it runs one slice and is stopped
            spinning.abort();
            assert!(spinning.await.unwrap_err().is_cancelled());
        }
        assert_eq!(tokio::spawn(async { 3 }.preemptible(SLICE)).await.unwrap(), 3);
    });
}

/// Within one poll, a task stays on one thread, however often it is
/// stopped: a poll stopped by its slice is resumed on the thread it ran on
/// (it may hold thread-local addresses), even when work stealing polls its
/// task elsewhere. Checked with the kernel's thread id, which no compiler
/// can cache.
#[test]
fn a_stopped_poll_resumes_on_its_own_thread() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..40 {
            set.spawn(
                async {
                    let mut moved = 0;
                    for _ in 0..20 {
                        // SAFETY: gettid has no preconditions.
                        let before = unsafe { libc::gettid() };
                        spin(300_000); // a few slices, no await
                        // SAFETY: as above.
                        let after = unsafe { libc::gettid() };
                        moved += (before != after) as u32;
                        tokio::task::yield_now().await; // may move from here
                    }
                    moved
                }
                .preemptible(Duration::from_micros(100)),
            );
        }
        while let Some(r) = set.join_next().await {
            assert_eq!(r.unwrap(), 0, "a poll changed threads in the middle");
        }
    });
}

/// Preemptible tasks on plain tokio that mix computation with timers,
/// channels, `Mutex`, `Notify` and TCP loopback I/O (`common::hazard_round`),
/// at 20 us slices, where a slice often runs out inside an inner poll that
/// has just registered its waker: no wake-up is lost. (Each runtime lost one
/// within 20 rounds when a wake-up that came while a stopped inner poll was
/// under way was taken by the outer poll that finished it.)
#[test]
fn no_wake_up_is_lost_at_20_us_slices_on_tokio() {
    for round in 0..20 {
        for multi in [false, true] {
            let rt = if multi {
                tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
            } else {
                tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
            };
            let r = rt.block_on(async { tokio::time::timeout(LIMIT, hazard_round(sliced_20_us, 300)).await });
            let total = r.unwrap_or_else(|_| panic!("round {round}, multi-thread {multi}: stuck"));
            assert_eq!(total, expected(300));
        }
    }
}

fn sliced_20_us(task: Task) -> Spawned {
    let h = tokio::spawn(task.preemptible(Duration::from_micros(20)));
    let a = h.abort_handle();
    spawned(h, |e| e.is_panic().then(|| e.into_panic()), move || a.abort())
}

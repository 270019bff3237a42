//! `turquoise::preemptible` on stock tokio keeps tokio's drivers turning
//! (issue 27): a task whose poll its slice stopped goes behind the next turn
//! of tokio's timers and I/O, not only behind the other tasks. tokio turns
//! its drivers every 61 polls while tasks are runnable; with N tasks spinning
//! in 2 ms slices a 10 ms ticker came 140-290 ms late. Counted in polls, not
//! in time: between two ticks of the ticker, how many spinner slices ran.

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use turquoise::preemptible;

mod common;

const SPINNERS: u64 = 8;
const TICKS: usize = 12;

/// The most spinner slices that ran between two ticks of a 10 ms ticker,
/// with `SPINNERS` tasks spinning in 2 ms slices beside it.
async fn slices_between_ticks() -> u64 {
    let polls = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut spinners = Vec::new();
    for _ in 0..SPINNERS {
        let s = stop.clone();
        let mut p = Box::pin(preemptible(
            async move {
                while !s.load(Ordering::Relaxed) {
                    std::hint::black_box(common::spin(10_000));
                }
            },
            Duration::from_millis(2),
        ));
        let polls = polls.clone();
        // Slices, not polls: a poll after a deferred wake-up only requeues.
        spinners.push(tokio::spawn(poll_fn(move |cx| {
            let before = p.stats().preemptions;
            let r = p.as_mut().poll(cx);
            polls.fetch_add(p.stats().preemptions - before, Ordering::Relaxed);
            r
        })));
    }
    let ticker = tokio::spawn({
        let polls = polls.clone();
        async move {
            let mut worst = 0;
            let mut last = polls.load(Ordering::Relaxed);
            for _ in 0..TICKS {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let now = polls.load(Ordering::Relaxed);
                worst = worst.max(now - last);
                last = now;
            }
            worst
        }
    });
    let worst = ticker.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        s.await.unwrap();
    }
    worst
}

/// The ticker's 10 ms take 5 slices; it is served at the driver's next turn,
/// after at most one round of the spinners: about 5 + 8, never the 61 polls
/// between driver turns tokio makes while tasks are runnable.
fn check(worst: u64, what: &str) {
    eprintln!("{what}: worst {worst}");
    assert!(worst <= 3 * SPINNERS, "{what}: {worst} spinner slices between two ticks (tokio's drivers starved)");
}

#[test]
fn current_thread_runtime_turns_its_drivers_between_stopped_polls() {
    for _ in 0..3 {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        check(rt.block_on(slices_between_ticks()), "current-thread");
    }
}

fn multi_thread(event_interval: u32) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).event_interval(event_interval).enable_all().build().unwrap()
}

#[test]
fn multi_thread_runtime_turns_its_drivers_between_stopped_polls() {
    for _ in 0..3 {
        let rt = multi_thread(61);
        check(rt.block_on(async { tokio::spawn(slices_between_ticks()).await.unwrap() }), "multi-thread");
    }
}

/// Drivers turned at every poll: the deferred wake-up of a stopped task
/// comes from outside any poll, which puts it in the worker's LIFO slot,
/// ahead of every queued task; without going to the back first, the same
/// spinner kept the worker forever and the others never ran.
#[test]
fn multi_thread_runtime_with_event_interval_1_shares_the_worker() {
    for _ in 0..3 {
        let rt = multi_thread(1);
        let worst = common::within(std::time::Duration::from_secs(60), "event_interval(1)", move || {
            rt.block_on(async { tokio::spawn(slices_between_ticks()).await.unwrap() })
        });
        check(worst, "multi-thread, event_interval(1)");
    }
}

/// Inside `block_in_place` (and `Handle::block_on` there) tokio turns no
/// driver of this worker until the closure returns: a stop's wake-up must
/// not wait for one.
#[test]
fn a_preemptible_future_in_block_in_place_ends() {
    let rt = multi_thread(61);
    let n = common::within(std::time::Duration::from_secs(60), "block_in_place", move || {
        rt.block_on(async {
            tokio::spawn(async {
                tokio::task::block_in_place(|| {
                    let mut p = Box::pin(preemptible(async { common::spin(20_000_000) }, Duration::from_micros(200)));
                    let v = tokio::runtime::Handle::current().block_on(poll_fn(|cx| p.as_mut().poll(cx)));
                    assert_eq!(v, common::spin(20_000_000));
                    p.stats().preemptions
                })
            })
            .await
            .unwrap()
        })
    });
    assert!(n >= 2, "{n} preemptions: the future was not stopped, so this proves nothing");
}

/// Outside tokio (a plain executor), a stopped poll still wakes its task at
/// once: the future completes under `futures`' `block_on`.
#[test]
fn other_executors_still_requeue_stopped_polls() {
    let v = futures_executor_block_on(preemptible(async { common::spin(20_000_000) }, Duration::from_micros(200)));
    assert_eq!(v, common::spin(20_000_000));
}

fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
    // A minimal executor: poll, and park the thread until woken.
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

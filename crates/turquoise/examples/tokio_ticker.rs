//! How late a 10 ms ticker task runs on stock tokio beside N tasks spinning
//! in `turquoise::preemptible(_, 2 ms)` (issue 27): on a current-thread and on
//! a one-worker multi-thread runtime, with turquoise's requeue (behind
//! tokio's next driver turn) and with a plain wake-up requeue (what it did
//! before: each stopped poll also wakes its task at once). Prints the
//! ticker's lateness, p50 / p99 / max over its ticks.
//!
//! Usage: tokio_ticker [SPINNERS] [TICKS]

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::preemptible;

async fn run(spinners: usize, ticks: usize, plain: bool) -> Vec<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for _ in 0..spinners {
        let s = stop.clone();
        let mut p = Box::pin(preemptible(
            async move {
                let mut x = 0u64;
                while !s.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            },
            Duration::from_millis(2),
        ));
        hs.push(tokio::spawn(poll_fn(move |cx| {
            let r = p.as_mut().poll(cx);
            if plain && r.is_pending() && p.is_stopped() {
                cx.waker().wake_by_ref(); // the old requeue
            }
            r
        })));
    }
    let mut late = Vec::with_capacity(ticks);
    for _ in 0..ticks {
        let t = Instant::now();
        tokio::time::sleep(Duration::from_millis(10)).await;
        late.push(t.elapsed().saturating_sub(Duration::from_millis(10)));
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.await.unwrap();
    }
    late
}

fn report(what: &str, mut late: Vec<Duration>) {
    late.sort();
    let q = |p: f64| late[((late.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
    println!("{what:<44} p50 {:7.2} ms  p99 {:7.2} ms  max {:7.2} ms", q(0.5), q(0.99), q(1.0));
}

/// Polls `f` on this thread until it is ready (enough for a future that
/// needs no waker: it never waits).
fn futures_lite_block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let ticks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    println!("{n} tasks spinning in 2 ms slices, a 10 ms ticker, {ticks} ticks");
    // linger's one-time start-up (reading the executable's symbols and
    // debug information for its tables) out of the measurement.
    let t = Instant::now();
    futures_lite_block_on(preemptible(async {}, Duration::from_millis(2)));
    println!("(start-up: {:.1} ms)", t.elapsed().as_secs_f64() * 1e3);
    for plain in [false, true] {
        let how = if plain { "plain wake-up" } else { "behind the driver" };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        report(&format!("current-thread, {how}"), rt.block_on(run(n, ticks, plain)));
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        report(&format!("multi-thread (1 worker), {how}"), rt.block_on(async move { tokio::spawn(run(n, ticks, plain)).await.unwrap() }));
    }
}

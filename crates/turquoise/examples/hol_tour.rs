//! The turquoise part of the tour (`make tour`): a server that stays
//! responsive while one request computes for a long time.
//!
//! One worker handles a stream of short requests (about 500 us of
//! computation each, one every 2 ms) and, in the middle, one long request
//! (200 ms). Under tokio's current-thread runtime every short request that
//! arrives during the long one waits for it; under `turquoise::Runtime`
//! (2 ms slices) the long request is preempted and the short ones go on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// CPU work, `iters` steps of a linear congruential generator (calibrated
/// below): no await, no library call.
fn work(iters: u64) -> u64 {
    (0..iters).fold(1u64, |x, i| std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i | 1)))
}

fn per_us() -> f64 {
    let n = 5_000_000;
    let t = Instant::now();
    work(n);
    n as f64 / t.elapsed().as_secs_f64() / 1e6
}

/// Latencies (from arrival to completion) of the short requests.
type Log = Arc<Mutex<Vec<Duration>>>;

/// Offers 150 short requests (one every 2 ms) and one long one at the
/// 50th, through `spawn`; returns the short requests' latencies.
async fn load<S>(spawn: S, per_us: f64) -> Vec<Duration>
where
    S: Fn(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>),
{
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let short = (500.0 * per_us) as u64;
    let long = (200_000.0 * per_us) as u64;
    let start = Instant::now();
    for i in 0..150u32 {
        let due = start + Duration::from_millis(2) * i;
        tokio::time::sleep_until(due.into()).await;
        if i == 50 {
            spawn(Box::pin(async move {
                work(long);
            }));
        }
        let log = log.clone();
        spawn(Box::pin(async move {
            work(short);
            log.lock().unwrap().push(due.elapsed());
        }));
    }
    // Let everything finish.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let v = log.lock().unwrap().clone();
    v
}

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let p = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    let late = v.iter().filter(|d| **d > Duration::from_millis(10)).count();
    println!("  {name:<34} p50 {:>6.2} ms   p99 {:>7.2} ms   max {:>7.2} ms   {late:>3} of {} over 10 ms", p(0.5), p(0.99), p(1.0), v.len());
}

fn main() {
    let per_us = per_us();
    println!("turquoise: 150 short requests (0.5 ms of work, one every 2 ms) and one long one (200 ms) on one worker");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let v = rt.block_on(load(
        |f| {
            tokio::spawn(f);
        },
        per_us,
    ));
    summary("tokio current-thread:", v);

    let rt = turquoise::Builder::new().worker_threads(1).enable_all().build().unwrap();
    let v = rt.block_on(load(
        |f| {
            turquoise::spawn(f);
        },
        per_us,
    ));
    summary("turquoise::Runtime, 2 ms slices:", v);
    let m = rt.worker_metrics()[0];
    println!(
        "  (turquoise's worker: {} polls, {} cut short by their slice, {} of those late for runtime code, worst {:.0} us after the deadline)",
        m.polls,
        m.preemptions,
        m.deferred_preemptions,
        m.worst_overrun.as_secs_f64() * 1e6
    );
}

//! How late green threads wake from `sleep` (issue 27): N green threads each
//! sleep a random 1-50 ms once; each records how long after its deadline
//! it ran again. Prints the lateness p50 / p99 / max, none early, per slice.
//!
//! Usage: sleep_lateness [THREADS] [SLICES_US...]   (default 100000, 2000 500 100 20)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let mut slices: Vec<u64> = args.filter_map(|a| a.parse().ok()).collect();
    if slices.is_empty() {
        slices = vec![2000, 500, 100, 20];
    }
    for slice in slices {
        let rt = turquoise::Builder::new().slice(Duration::from_micros(slice)).enable_all().build().expect("runtime");
        let early = Arc::new(AtomicU64::new(0));
        let late: Vec<Duration> = rt.block_on(async {
            let start = Instant::now();
            let mut hs = Vec::with_capacity(n as usize);
            for i in 0..n {
                let early = early.clone();
                // A fixed pseudo-random 1-50 ms per thread.
                let d = Duration::from_micros(1_000 + (i.wrapping_mul(2654435761) % 49_000));
                hs.push(turquoise::thread::spawn(move || {
                    let due = Instant::now() + d;
                    turquoise::thread::sleep(d);
                    let now = Instant::now();
                    if now < due {
                        early.fetch_add(1, Ordering::Relaxed);
                    }
                    now.saturating_duration_since(due)
                }));
            }
            let spawned = start.elapsed();
            let mut out = Vec::with_capacity(n as usize);
            for h in hs {
                out.push(h.await.unwrap());
            }
            eprintln!("  (spawned in {spawned:?}, all done in {:?})", start.elapsed());
            out
        });
        let mut late = late;
        late.sort();
        let q = |p: f64| late[((late.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
        println!(
            "slice {slice:>5} us: lateness p50 {:8.2} ms  p99 {:8.2} ms  max {:8.2} ms  early {}",
            q(0.5),
            q(0.99),
            q(1.0),
            early.load(Ordering::Relaxed)
        );
    }
}

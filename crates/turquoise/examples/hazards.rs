//! The hazard rounds of `tests/runtime.rs` as a program, for valgrind
//! (`make test-valgrind`): tasks that mix computation with timers,
//! channels, locks, TCP and spawn-and-abort on turquoise's runtime, on 1 and
//! 2 workers. Aborted tasks all wait here: one aborted in the middle of a
//! poll is reclaimed without its destructors (by design), which a leak
//! checker reports. Exits non-zero on a wrong sum or a stuck round.
//!
//! Usage: hazards [TASKS] [ROUNDS]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::{expected, hazard_round_with, spawned, Spawned, Task};

fn on_turquoise(task: Task) -> Spawned {
    let h = turquoise::spawn(task);
    let a = h.abort_handle();
    spawned(h, |e| e.is_panic().then(|| e.into_panic()), move || a.abort())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let tasks: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(120);
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    for round in 0..rounds {
        for workers in [1, 2] {
            for slice_us in [50, 2000] {
                let rt = turquoise::Builder::new()
                    .worker_threads(workers)
                    .slice(Duration::from_micros(slice_us))
                    .enable_all()
                    .build()
                    .expect("runtime");
                let r = rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(600), hazard_round_with(on_turquoise, tasks, false)).await
                });
                match r {
                    Ok(total) if total == expected(tasks) => {
                        let stops: u64 = rt.worker_metrics().iter().map(|m| m.preemptions).sum();
                        println!("round {round}: {tasks} tasks, {workers} workers, {slice_us} us slices: ok, {stops} polls preempted")
                    }
                    Ok(total) => {
                        eprintln!("round {round}, {workers} workers, {slice_us} us: sum {total}, expected {}", expected(tasks));
                        std::process::exit(1);
                    }
                    Err(_) => {
                        eprintln!("round {round}, {workers} workers, {slice_us} us: stuck");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
}

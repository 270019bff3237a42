//! What a green thread's switch is made of, layer by layer, in one process
//! pinned to one CPU (`docs/benchmarks.md` 9.4):
//!
//! ```text
//! taskset -c 0 cargo run --release -p green-bench --example switch_ladder
//! ```
//!
//! 1. Two linger functions that pause in turn, resumed by a plain loop on
//!    the calling thread: the switch in and out of a preemptible function
//!    that any green thread pays (the floor under the runtime).
//! 2. The same with `resume_contained` and a park hook, as the workers
//!    resume green threads.
//! 3. Two async tasks of a one-worker runtime yielding in turn (each wakes
//!    itself and returns `Pending`): the task and the queues alone.
//! 4. Two green threads of a one-worker runtime calling `yield_now` in
//!    turn: the runtime's whole switch (task, queues, thread-local image,
//!    statistics).
//!    Then the same without the thread-local images (a hidden test
//!    option): what swapping them costs.
//! 5. Two green threads passing a value through two
//!    `turquoise::sync::mpsc::channel(1)`: each switch a park and a wake-up.
//! 6. Spawn+join: a linger function launched and run to its end, and an
//!    async task spawned and awaited from a task, against a green thread
//!    spawned and joined from a green thread (the joiner's park and
//!    wake-up are two switches of 4.).
//!
//! ns per switch (one thread's turn) or per spawn, median [min-max] of 7
//! batches. An argument runs only the rows whose name contains it.

use std::time::Duration;

use linger::Linger;

fn batches(name: &str, n: usize, op: impl FnMut(usize) -> usize) {
    // An argument keeps only the rows whose name holds it (for profiles).
    if std::env::args().nth(1).is_some_and(|only| !name.contains(&only)) {
        return;
    }
    let (med, min, max) = green_bench::micro::time_batches(n, op);
    println!("{name:<58} {med:>8.1} ns [{min:.1}-{max:.1}]");
}

/// Wakes its own task and returns `Pending` once: a yield through the
/// runtime's queues alone (tokio's `yield_now` defers to its driver turn).
fn yield_once() -> impl std::future::Future<Output = ()> {
    let mut done = false;
    std::future::poll_fn(move |cx| {
        if done {
            return std::task::Poll::Ready(());
        }
        done = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
}

/// A function that pauses `k` times, then returns.
fn pauser(k: usize) -> impl FnOnce() + Send + 'static {
    move || (0..k).for_each(|_| linger::pause())
}

fn linger_pair(n: usize, contained: bool) -> usize {
    let b = linger::Builder::new();
    let slice = Duration::from_millis(2);
    let mut a: Linger<()> = b.launch(pauser(n), Duration::ZERO).expect("launch");
    let mut c: Linger<()> = b.launch(pauser(n), Duration::ZERO).expect("launch");
    for _ in 0..n {
        for l in [&mut a, &mut c] {
            if contained {
                linger::resume_contained(l, slice).expect("resume");
            } else {
                linger::resume(l, slice).expect("resume");
            }
        }
    }
    for l in [&mut a, &mut c] {
        while !l.is_completion() {
            linger::resume(l, slice).expect("resume");
        }
    }
    2 * n
}

fn main() {
    let rt = turquoise::Builder::new().worker_threads(1).build().expect("runtime");
    batches("linger: two functions paused and resumed in turn", 2_000_000, |n| linger_pair(n / 2, false));
    batches("linger: the same with resume_contained", 2_000_000, |n| linger_pair(n / 2, true));
    batches("linger: launch + run to the end, empty function", 1_000_000, |n| {
        let b = linger::Builder::new();
        for _ in 0..n {
            let l = b.launch(|| (), Duration::from_millis(2)).expect("launch");
            assert!(l.is_completion());
        }
        n
    });
    batches("async tasks (cooperative): yield in turn", 1_000_000, |n| {
        let k = n / 2;
        rt.block_on(async move {
            let other = turquoise::spawn_cooperative(async move {
                for _ in 0..k {
                    yield_once().await;
                }
            });
            let me = turquoise::spawn_cooperative(async move {
                for _ in 0..k {
                    yield_once().await;
                }
            });
            let _ = me.await;
            let _ = other.await;
        });
        2 * k
    });
    batches("async tasks (cooperative): spawn + await from a task", 1_000_000, |n| {
        rt.block_on(async move {
            turquoise::spawn_cooperative(async move {
                for _ in 0..n {
                    let _ = turquoise::spawn_cooperative(async {}).await;
                }
            })
            .await
            .expect("task");
        });
        n
    });
    rt.block_on(async {
        turquoise::thread::spawn(|| {
            batches("green threads: yield_now in turn", 1_000_000, |n| {
                let k = n / 2;
                let other = turquoise::thread::spawn(move || (0..k).for_each(|_| turquoise::thread::yield_now()));
                (0..k).for_each(|_| turquoise::thread::yield_now());
                other.join().expect("join");
                2 * k
            });
            batches("green threads: turquoise::sync::mpsc::channel(1) ping-pong", 500_000, |n| {
                let k = n / 2;
                let (tx, mut rx) = turquoise::sync::mpsc::channel::<usize>(1);
                let (tx2, mut rx2) = turquoise::sync::mpsc::channel::<usize>(1);
                let other = turquoise::thread::spawn(move || {
                    while let Some(v) = rx.recv() {
                        if tx2.send(v).is_err() {
                            break;
                        }
                    }
                });
                for i in 0..k {
                    tx.send(i).expect("send");
                    rx2.recv().expect("recv");
                }
                drop(tx);
                other.join().expect("join");
                2 * k
            });
            batches("green threads: spawn + join from a green thread", 200_000, |n| {
                for _ in 0..n {
                    turquoise::thread::spawn(|| ()).join().expect("join");
                }
                n
            });
        })
        .await
        .expect("green");
        // SAFETY: these two threads use none of the program's
        // thread-locals while they share them (only the runtime's own,
        // which are never swapped, and stdout's, which `println!` takes
        // under its lock before the next switch can come).
        let shared = || unsafe { turquoise::thread::Builder::new().share_thread_locals() };
        shared()
            .spawn(move || {
                batches("green threads without thread-local images: yield_now", 1_000_000, |n| {
                    let k = n / 2;
                    let other = shared().spawn(move || (0..k).for_each(|_| turquoise::thread::yield_now())).expect("spawn");
                    (0..k).for_each(|_| turquoise::thread::yield_now());
                    other.join().expect("join");
                    2 * k
                });
            })
            .expect("spawn")
            .await
            .expect("green");
    });
}

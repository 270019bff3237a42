//! `turquoise::Runtime`: preemptive tasks on turquoise's workers, tokio's
//! drivers beside them. Each test loops; liveness and results are asserted,
//! never speed (a run that would hang without preemption fails after a
//! generous limit instead).

mod common;
use common::{expected, hazard_round, runtime, spawned, spin, Flag, Spawned, Task};

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};


/// Far beyond anything a working run needs, even on a stalling VM.
const LIMIT: Duration = Duration::from_secs(60);


fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// One worker, 100 tasks spinning until told to stop, and a ticker: the
/// ticker's 20 ticks happen (without preemption the first hog holds the
/// only worker forever). Prints the worst gap between ticks.
#[test]
fn a_ticker_keeps_ticking_among_100_hogs_on_one_worker() {
    for round in 0..3 {
        let rt = runtime(1, Duration::from_millis(1));
        let stop = Arc::new(AtomicBool::new(false));
        let hogs: Vec<_> = (0..100)
            .map(|_| {
                let stop = stop.clone();
                rt.spawn(async move {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        spin(10_000);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let ticker = rt.spawn(async {
            let mut worst = Duration::ZERO;
            let mut last = Instant::now();
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(2)).await;
                worst = worst.max(last.elapsed());
                last = Instant::now();
            }
            worst
        });
        let worst = rt.block_on(async { tokio::time::timeout(LIMIT, ticker).await }).expect("ticker starved").unwrap();
        stop.store(true, Ordering::Relaxed);
        let ran = rt.block_on(async {
            let mut ran = 0;
            for h in hogs {
                ran += (h.await.unwrap() > 0) as u32;
            }
            ran
        });
        assert_eq!(ran, 100, "round {round}: some hogs never ran");
        let m = rt.worker_metrics();
        assert!(m[0].preemptions > 0);
        eprintln!("round {round}: worst tick gap {worst:?} (period 2 ms, slice 1 ms, 100 hogs); {:?}", m[0]);
    }
}

/// tokio#4730's shape: a background task computes for a long time while a
/// loop handles "requests" (short sleeps). Under turquoise the requests go
/// on during the computation. Plain tokio on one worker, for contrast, is
/// shown (not asserted) below.
#[test]
fn requests_go_on_during_a_long_computation() {
    for _ in 0..3 {
        let rt = runtime(1, Duration::from_millis(2));
        let busy = Arc::new(AtomicBool::new(false));
        let served_while_busy = Arc::new(AtomicU64::new(0));
        let b = busy.clone();
        let background = rt.spawn(async move {
            b.store(true, Ordering::SeqCst);
            let x = spin(300_000_000); // ~100-300 ms of computation
            b.store(false, Ordering::SeqCst);
            x
        });
        let (busy2, served) = (busy.clone(), served_while_busy.clone());
        let requests = rt.spawn(async move {
            let deadline = Instant::now() + LIMIT;
            while Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
                if busy2.load(Ordering::SeqCst) {
                    served.fetch_add(1, Ordering::SeqCst);
                } else if served.load(Ordering::SeqCst) > 0 {
                    break;
                }
            }
        });
        rt.block_on(async {
            background.await.unwrap();
            requests.await.unwrap();
        });
        assert!(served_while_busy.load(Ordering::SeqCst) > 0, "no request was served during the computation");
    }
    // Contrast: plain tokio, one worker. The requests task gets no turn
    // until the computation ends.
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let busy = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let b = busy.clone();
        let bg = tokio::spawn(async move {
            b.store(true, Ordering::SeqCst);
            let x = spin(300_000_000);
            b.store(false, Ordering::SeqCst);
            x
        });
        let (b2, s2) = (busy.clone(), served.clone());
        let rq = tokio::spawn(async move {
            for _ in 0..50 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                if b2.load(Ordering::SeqCst) {
                    s2.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        bg.await.unwrap();
        rq.await.unwrap();
    });
    eprintln!("plain tokio: {} requests served during the computation", served.load(Ordering::SeqCst));
}

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

/// A task's CPU loop that uses a thread-local keeps seeing its own thread's
/// variable across preemptions: a stopped poll resumes on its thread, and
/// never moves in the middle (checked with the kernel's thread id). Many
/// tasks on 2 workers, with work stealing.
#[test]
fn thread_locals_in_a_cpu_loop_stay_right_across_preemptions() {
    let rt = runtime(2, Duration::from_micros(100));
    for _ in 0..5 {
        let handles: Vec<_> = (0..40)
            .map(|_| {
                rt.spawn(async {
                    let mut moved = 0;
                    for _ in 0..10 {
                        let tid = gettid();
                        let before = COUNT.with(|c| c.get());
                        for _ in 0..200_000u64 {
                            COUNT.with(|c| c.set(std::hint::black_box(c.get() + 1)));
                        }
                        // Only this poll ran on this thread meanwhile...
                        // unless others ran in between: other tasks' polls
                        // run while this one is stopped, and add too. So
                        // compare with the thread, not the count.
                        let after = COUNT.with(|c| c.get());
                        assert!(after >= before + 200_000);
                        moved += (tid != gettid()) as u32;
                        tokio::task::yield_now().await;
                    }
                    moved
                })
            })
            .collect();
        rt.block_on(async {
            for h in handles {
                assert_eq!(h.await.unwrap(), 0, "a poll changed threads in the middle");
            }
        });
    }
    let m = rt.worker_metrics();
    eprintln!("{m:?}");
    assert!(m.iter().map(|w| w.preemptions).sum::<u64>() > 0);
}


/// Panics reach the JoinHandle; aborts end waiting tasks (their
/// destructors run) and spinning ones (stopped mid-poll: reclaimed), and
/// the workers go on.
#[test]
fn panics_and_aborts() {
    let rt = runtime(2, Duration::from_micros(200));
    rt.block_on(async {
        for _ in 0..20 {
            let h = turquoise::spawn(async {
                spin(3_000_000);
                panic!("boom");
            });
            let e = h.await.unwrap_err();
            assert!(e.is_panic());
            assert_eq!(e.into_panic().downcast_ref::<&str>(), Some(&"boom"));
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        for _ in 0..50 {
            let flag = Flag(dropped.clone());
            let h = turquoise::spawn(async move {
                let _flag = flag;
                std::future::pending::<()>().await;
            });
            tokio::time::sleep(Duration::from_micros(200)).await;
            h.abort();
            assert!(h.await.unwrap_err().is_cancelled());
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 50, "an aborted waiting task's future was not dropped");
        for _ in 0..50 {
            let h = turquoise::spawn(async {
                loop {
                    spin(100_000);
                }
            });
            tokio::time::sleep(Duration::from_micros(500)).await;
            h.abort();
            assert!(h.await.unwrap_err().is_cancelled());
        }
        let done = turquoise::spawn(async { 5 });
        // (Waited for, not timed: a stalled machine may take longer.)
        while !done.is_finished() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        done.abort(); // finished already: its value stays
        assert_eq!(done.await.unwrap(), 5);
        assert_eq!(turquoise::spawn_cooperative(async { 6 }).await.unwrap(), 6);
    });
}

/// Many tasks that mix computation with tokio's timers, channels, `Mutex`,
/// `Notify` and TCP loopback I/O (`common::hazard_round`), under slices
/// from 20 us to 2 ms on 1, 2 and 4 workers: no deadlock, no lost wake-up,
/// every result right.
#[test]
fn hazards_timers_channels_locks_and_sockets() {
    for round in 0..3 {
        for workers in [1, 2, 4] {
            for slice_us in [20, 200, 2000] {
                hazards(workers, slice_us, 300, round);
            }
        }
    }
}

/// The same with thousands of tasks at once (hundreds of connections).
#[test]
fn hazards_at_scale() {
    for workers in [1, 2, 4] {
        for slice_us in [20, 2000] {
            hazards(workers, slice_us, 3000, 0);
        }
    }
}

fn hazards(workers: usize, slice_us: u64, tasks: u64, round: u32) {
    let rt = runtime(workers, Duration::from_micros(slice_us));
    let r = rt.block_on(async { tokio::time::timeout(LIMIT, hazard_round(on_turquoise, tasks)).await });
    let total = r.unwrap_or_else(|_| panic!("round {round}, {tasks} tasks, {workers} workers, {slice_us} us slices: stuck"));
    assert_eq!(total, expected(tasks), "{tasks} tasks, {workers} workers, {slice_us} us");
}

fn on_turquoise(task: Task) -> Spawned {
    let h = turquoise::spawn(task);
    let a = h.abort_handle();
    spawned(h, |e| e.is_panic().then(|| e.into_panic()), move || a.abort())
}

/// tokio's APIs from inside preemptible tasks that are being preempted:
/// `tokio::spawn` (a cooperative task on the same worker), `JoinSet`,
/// `yield_now`, `Handle::current` (tokio's and turquoise's),
/// `spawn_blocking`, timers, channels and TCP.
#[test]
fn tokio_apis_inside_preempted_tasks() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = runtime(2, Duration::from_micros(100));
    for round in 0..20 {
        let tasks: Vec<_> = (0..8u64)
            .map(|k| {
                rt.spawn(async move {
                    let mut acc = 0u64;
                    // Preempted between and inside each of these.
                    spin(200_000);
                    acc += tokio::spawn(async move { k + 1 }).await.unwrap();
                    let mut set = tokio::task::JoinSet::new();
                    for j in 0..4u64 {
                        set.spawn(async move {
                            tokio::task::yield_now().await;
                            j
                        });
                    }
                    while let Some(r) = set.join_next().await {
                        acc += r.unwrap();
                    }
                    spin(200_000);
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                        spin(50_000);
                    }
                    acc += tokio::runtime::Handle::current().spawn(async { 10 }).await.unwrap();
                    acc += turquoise::Handle::current().spawn(async { 100 }).await.unwrap();
                    acc += tokio::task::spawn_blocking(|| 1000).await.unwrap();
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        tx.send(10_000u64).unwrap();
                    });
                    acc += rx.await.unwrap();
                    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                    let addr = l.local_addr().unwrap();
                    let server = tokio::spawn(async move {
                        let (mut s, _) = l.accept().await.unwrap();
                        let mut b = [0u8; 8];
                        s.read_exact(&mut b).await.unwrap();
                        s.write_all(&b).await.unwrap();
                    });
                    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
                    spin(100_000);
                    c.write_all(&100_000u64.to_le_bytes()).await.unwrap();
                    let mut b = [0u8; 8];
                    c.read_exact(&mut b).await.unwrap();
                    server.await.unwrap();
                    acc + u64::from_le_bytes(b)
                })
            })
            .collect();
        let sum = rt.block_on(async {
            tokio::time::timeout(LIMIT, async {
                let mut sum = 0;
                for t in tasks {
                    sum += t.await.unwrap();
                }
                sum
            })
            .await
            .unwrap_or_else(|_| panic!("round {round}: stuck"))
        });
        let each = |k: u64| k + 1 + 6 + 10 + 100 + 1000 + 10_000 + 100_000;
        assert_eq!(sum, (0..8).map(each).sum::<u64>(), "round {round}");
    }
    let m = rt.worker_metrics();
    assert!(m.iter().map(|w| w.preemptions).sum::<u64>() > 0, "never preempted: {m:?}");
}

//! Green threads: spawn and join in every combination, thread-locals that
//! stay each thread's own under preemption, parking, panics, bad input and
//! shutdown.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::thread::{self, Builder};

mod common;
use common::{runtime, spin, Flag};

fn gettid() -> i64 {
    // SAFETY: no arguments; returns the caller's thread id.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

#[test]
fn spawn_and_join_outside_any_runtime() {
    for i in 0..200u64 {
        let h = thread::spawn(move || i * 2);
        assert_eq!(h.join().unwrap(), i * 2);
    }
}

std::thread_local! {
    static COUNTER: Cell<u64> = const { Cell::new(0) };
}

/// Counts to `n` in a thread-local, the value kept in a register between
/// iterations as compiled code does; every 4,096 iterations checks that the
/// thread is on the OS thread and thread-local address it started with.
fn count_in_thread_local(n: u64) -> (u64, bool) {
    let tid = gettid();
    let at = COUNTER.with(|c| c as *const Cell<u64> as usize);
    let mut stayed = true;
    let mut i = 0;
    while i < n {
        COUNTER.with(|c| {
            let mut v = c.get();
            for _ in 0..4096.min(n - i) {
                v = std::hint::black_box(v) + 1;
                c.set(v);
            }
        });
        i += 4096.min(n - i);
        stayed &= gettid() == tid && COUNTER.with(|c| c as *const Cell<u64> as usize) == at;
    }
    (COUNTER.with(|c| c.get()), stayed)
}

/// The test: a thread-local counter incremented in a tight loop by
/// 1,000 preempted green threads stays exact, and no thread ever changes OS
/// thread (spawned from one worker, so the others steal what they can).
#[test]
fn thread_local_counters_stay_exact_under_preemption() {
    assert!(thread::image_bytes().is_some(), "test binaries have symbols: images are on");
    const THREADS: u64 = 1000;
    const N: u64 = 1 << 20;
    for (workers, slice_us) in [(2, 20), (2, 100), (4, 50)] {
        let rt = runtime(workers, Duration::from_micros(slice_us));
        let results = rt.block_on(async {
            let spawner = Builder::new()
                .spawn(|| {
                    let hs: Vec<_> = (0..THREADS).map(|_| thread::spawn(|| count_in_thread_local(N))).collect();
                    hs.into_iter().map(|h| {
                        let preempted = h.stats().preemptions;
                        (h.join().unwrap(), preempted)
                    }).collect::<Vec<_>>()
                })
                .unwrap();
            spawner.await.unwrap()
        });
        let total: u64 = results.iter().map(|((v, _), _)| v).sum();
        assert!(results.iter().all(|((v, _), _)| *v == N), "{workers} workers, {slice_us} us: a counter is off");
        assert_eq!(total, THREADS * N);
        assert!(results.iter().all(|((_, stayed), _)| *stayed), "a started green thread moved to another OS thread");
        let steals: u64 = rt.worker_metrics().iter().map(|m| m.steals).sum();
        assert!(steals > 0, "the other workers stole unstarted threads");
        let preemptions: u64 = rt.worker_metrics().iter().map(|m| m.preemptions).sum();
        eprintln!("{workers} {slice_us}: {preemptions} preemptions, {steals} steals, {:?}", rt.worker_metrics());
        assert!(preemptions >= THREADS, "{preemptions} preemptions: the loops were cut");
    }
}

/// A green thread's values stay installed between its runs (`green.rs`,
/// `install`): whatever else runs on the worker must still see its own.
/// On one worker, green threads count in COUNTER through preemptions,
/// yields and parks, while an async task keeps its value across its awaits
/// and a green thread that shares the worker's thread-locals sees the
/// task's value (the worker's), never a green thread's. 10 rounds.
#[test]
fn installed_thread_locals_never_leak_to_tasks_or_shared_threads() {
    fn count_parking(n: u64) -> u64 {
        for i in 0..n {
            COUNTER.with(|c| c.set(std::hint::black_box(c.get()) + 1));
            if i % 512 == 0 {
                thread::yield_now();
            }
            if i % 8192 == 0 {
                thread::sleep(Duration::from_micros(100));
            }
        }
        COUNTER.with(|c| c.get())
    }
    const WORKER_VALUE: u64 = 0x5eed;
    const N: u64 = 1 << 17;
    for round in 0..10 {
        let rt = runtime(1, Duration::from_micros(20));
        let set = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = set.clone();
        let task = rt.handle().spawn_cooperative(async move {
            COUNTER.with(|c| c.set(WORKER_VALUE));
            s.store(true, Ordering::SeqCst);
            let mut kept = true;
            for _ in 0..3000 {
                tokio::task::yield_now().await;
                kept &= COUNTER.with(|c| c.get()) == WORKER_VALUE;
            }
            kept
        });
        let counters: Vec<_> = (0..6).map(|_| Builder::new().spawn_on(rt.handle(), || count_parking(N)).unwrap()).collect();
        let s = set.clone();
        // SAFETY: it only reads COUNTER, an integer.
        let shared = unsafe { Builder::new().share_thread_locals() }
            .spawn_on(rt.handle(), move || {
                while !s.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_micros(200));
                }
                let mut seen = Vec::new();
                for i in 0..2000 {
                    let v = COUNTER.with(|c| c.get());
                    if v != WORKER_VALUE {
                        seen.push(v);
                    }
                    if i % 64 != 0 {
                        thread::yield_now();
                    } else {
                        thread::sleep(Duration::from_micros(50));
                    }
                }
                seen
            })
            .unwrap();
        for h in counters {
            assert_eq!(h.join().unwrap(), N, "round {round}: a green thread's count is off");
        }
        let seen = shared.join().unwrap();
        assert!(seen.is_empty(), "round {round}: the thread sharing the worker's thread-locals saw a green thread's: {:?}", &seen[..seen.len().min(5)]);
        assert!(rt.block_on(task).unwrap(), "round {round}: the async task saw another value across an await");
    }
}

/// The negative control: without images, the same loops on one worker
/// lose each other's updates (so the test above can see what it guards).
#[test]
fn without_images_the_counters_come_out_wrong() {
    let rt = runtime(1, Duration::from_micros(20));
    let hs: Vec<_> = (0..50)
        .map(|_| {
            // SAFETY: the point of the test: the threads race on COUNTER,
            // which holds plain integers (no memory is at stake).
            let b = unsafe { Builder::new().share_thread_locals() };
            b.spawn_on(rt.handle(), || count_in_thread_local(1 << 20)).unwrap()
        })
        .collect();
    let counts: Vec<u64> = hs.into_iter().map(|h| h.join().unwrap().0).collect();
    assert!(counts.iter().any(|&c| c != 1 << 20), "shared thread-locals went unnoticed: {counts:?}");
}

#[test]
fn join_from_a_green_thread_an_os_thread_and_async_code() {
    let rt = runtime(2, Duration::from_micros(100));
    for round in 0..50u64 {
        // Green joins green.
        let outer = Builder::new()
            .spawn_on(rt.handle(), move || {
                let inner = thread::spawn(move || {
                    thread::sleep(Duration::from_micros(200));
                    round + 1
                });
                inner.join().unwrap() + 1
            })
            .unwrap();
        // An OS thread joins a green thread.
        assert_eq!(std::thread::spawn(move || outer.join().unwrap()).join().unwrap(), round + 2);
        // Async code awaits one.
        let h = Builder::new().spawn_on(rt.handle(), move || spin(20_000) & 0 | round).unwrap();
        assert_eq!(rt.block_on(async { rt.spawn(async move { h.await.unwrap() }).await.unwrap() }), round);
    }
}

#[test]
fn a_panic_reaches_join_and_the_thread_locals_die_with_their_thread() {
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    std::thread_local! {
        static OWNED: std::cell::RefCell<Option<Dropped>> = const { std::cell::RefCell::new(None) };
    }
    let rt = runtime(1, Duration::from_micros(50));
    let dropped = Arc::new(AtomicUsize::new(0));
    for i in 0..100 {
        let d = dropped.clone();
        let h = Builder::new()
            .spawn_on(rt.handle(), move || {
                OWNED.with(|o| *o.borrow_mut() = Some(Dropped(d)));
                spin(10_000);
                if i % 2 == 0 {
                    panic!("green {i}");
                }
            })
            .unwrap();
        let r = h.join();
        assert_eq!(r.is_err(), i % 2 == 0);
        if let Err(e) = r {
            assert!(e.is_panic());
            assert_eq!(e.into_panic().downcast_ref::<String>().unwrap(), &format!("green {i}"));
        }
        // Each thread's value, dropped at its end (not the worker's).
        assert_eq!(dropped.load(Ordering::SeqCst), i + 1);
    }
}

#[test]
fn bad_input_gets_errors() {
    let rt = runtime(1, Duration::from_millis(2));
    // Absurd stack sizes.
    let e = Builder::new().stack_size(usize::MAX).spawn_on(rt.handle(), || ()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = Builder::new().stack_size(thread::MAX_STACK_SIZE + 1).spawn_on(rt.handle(), || ()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    // A tiny one is rounded up and works.
    assert_eq!(Builder::new().stack_size(1).spawn_on(rt.handle(), || 5).unwrap().join().unwrap(), 5);
    // Joining itself: the thread is handed its own handle.
    let (tx, rx) = std::sync::mpsc::channel::<thread::JoinHandle<()>>();
    let saw = Arc::new(AtomicUsize::new(0));
    let s = saw.clone();
    let me = Builder::new()
        .spawn_on(rt.handle(), move || {
            let own = thread::block_on(async {
                loop {
                    if let Ok(h) = rx.try_recv() {
                        break h;
                    }
                    tokio::time::sleep(Duration::from_micros(100)).await;
                }
            });
            let e = own.join().unwrap_err();
            s.store(if e.is_self_join() { 1 } else { 2 }, Ordering::SeqCst);
        })
        .unwrap();
    tx.send(me).unwrap();
    let t = Instant::now();
    while saw.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(saw.load(Ordering::SeqCst), 1, "self-join is an error");
    // Spawning after shutdown.
    let h = rt.handle().clone();
    drop(rt);
    let e = Builder::new().spawn_on(&h, || ()).unwrap_err();
    assert!(e.to_string().contains("shut down"), "{e}");
}

#[test]
fn sleeping_threads_park_instead_of_blocking_their_worker() {
    let rt = runtime(1, Duration::from_millis(2));
    for _ in 0..5 {
        let t = Instant::now();
        let hs: Vec<_> = (0..200)
            .map(|_| Builder::new().spawn_on(rt.handle(), || thread::sleep(Duration::from_millis(20))).unwrap())
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        // 200 x 20 ms slept one after the other would take 4 s on one worker.
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
}

/// Issue 27, part 5: a burst of sleepers at short slices (each slice a timer
/// signal on a busy worker, the stacks coming and going through the shared
/// pool) all wake, none before its time. How late they wake is measured by
/// the `sleep_lateness` example, not asserted here.
#[test]
fn a_burst_of_sleepers_at_short_slices_all_wake_none_early() {
    for slice_us in [20, 100] {
        let rt = runtime(2, Duration::from_micros(slice_us));
        for round in 0..3u64 {
            let hs: Vec<_> = (0..5_000u64)
                .map(|i| {
                    let d = Duration::from_micros(200 + (i.wrapping_mul(2654435761) + round) % 9_800);
                    Builder::new()
                        .spawn_on(rt.handle(), move || {
                            let due = Instant::now() + d;
                            thread::sleep(d);
                            Instant::now() >= due
                        })
                        .unwrap()
                })
                .collect();
            let on_time = hs.into_iter().map(|h| h.join().unwrap()).filter(|&ok| ok).count();
            assert_eq!(on_time, 5_000, "{slice_us} us slices, round {round}: some woke early");
        }
    }
}

#[test]
fn spinning_threads_do_not_hold_the_others_up() {
    let rt = runtime(1, Duration::from_micros(500));
    let stop = Arc::new(AtomicU64::new(0));
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            Builder::new()
                .spawn_on(rt.handle(), move || {
                    while stop.load(Ordering::Relaxed) == 0 {
                        spin(1000);
                    }
                })
                .unwrap()
        })
        .collect();
    for _ in 0..20 {
        let h = Builder::new().spawn_on(rt.handle(), || thread::sleep(Duration::from_millis(1))).unwrap();
        h.join().unwrap();
    }
    stop.store(1, Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
}

/// Shutdown while green threads keep spawning and waking others: every
/// thread ends, and its handle says how, joined from an OS thread after the
/// runtime is gone (spawns and wake-ups that race the shutdown are dropped
/// unrun). 30 rounds, two workers, 50 us slices.
#[test]
fn shutdown_amid_spawns_and_wakes_ends_every_thread() {
    for round in 0..30 {
        let rt = runtime(2, Duration::from_micros(50));
        // A std channel, not a locked `Vec`: a sender stopped and reclaimed
        // at shutdown would keep a lock held for good (what it owned stays
        // as it was), while a send is never stopped half-way (std's channels
        // are deferred code).
        let (tx, rx) = std::sync::mpsc::channel::<thread::JoinHandle<u64>>();
        let lock = Arc::new(turquoise::sync::Mutex::new(0u64));
        for _ in 0..2 {
            let (hs, lock) = (tx.clone(), lock.clone());
            let spawner = Builder::new()
                .spawn_on(rt.handle(), move || {
                    for i in 0..20_000 {
                        let lock = lock.clone();
                        // Children contend on a parking mutex (wake-ups
                        // between threads) and yield.
                        let Ok(h) = Builder::new().spawn(move || {
                            *lock.lock().unwrap() += 1;
                            thread::yield_now();
                            *lock.lock().unwrap() += 1;
                            i
                        }) else {
                            return;
                        };
                        let _ = hs.send(h);
                        if i % 16 == 0 {
                            thread::yield_now();
                        }
                    }
                })
                .unwrap();
            let _ = tx.send(
                Builder::new()
                    .spawn_on(rt.handle(), move || {
                        spawner.join().unwrap_or(());
                        0
                    })
                    .unwrap(),
            );
        }
        std::thread::sleep(Duration::from_millis(5 + round % 7));
        drop(rt);
        let hs: Vec<_> = rx.try_iter().collect();
        let n = hs.len();
        let (ended, cancelled) = common::within(Duration::from_secs(20), "joins after shutdown", move || {
            let mut ended = 0;
            let mut cancelled = 0;
            for h in hs {
                match h.join() {
                    Ok(_) => ended += 1,
                    Err(e) if e.is_cancelled() => cancelled += 1,
                    Err(e) => panic!("a thread ended with {e}"),
                }
            }
            (ended, cancelled)
        });
        // (How many ran before the shutdown depends on the machine's stalls.)
        assert_eq!(ended + cancelled, n, "round {round}");
    }
}

#[test]
fn cooperative_threads_take_turns_at_yields() {
    let rt = runtime(1, Duration::from_micros(50));
    let turn = Arc::new(AtomicU64::new(0));
    let hs: Vec<_> = (0..2u64)
        .map(|me| {
            let turn = turn.clone();
            Builder::new()
                .preemptive(false)
                .spawn_on(rt.handle(), move || {
                    let mut mine = 0;
                    while mine < 1000 {
                        if turn.load(Ordering::Relaxed) % 2 == me {
                            turn.fetch_add(1, Ordering::Relaxed);
                            mine += 1;
                        }
                        thread::yield_now();
                    }
                    spin(200_000); // longer than many slices: not stopped
                })
                .unwrap()
        })
        .collect();
    for h in hs {
        let stats = h.stats();
        h.join().unwrap();
        assert_eq!(stats.preemptions, 0);
    }
    assert_eq!(turn.load(Ordering::Relaxed), 2000);
}

#[test]
fn async_tasks_and_green_threads_exchange_through_channels() {
    let rt = runtime(2, Duration::from_micros(200));
    for _ in 0..20 {
        let (to_green, mut green_rx) = tokio::sync::mpsc::channel::<u64>(4);
        let (to_task, mut task_rx) = tokio::sync::mpsc::channel::<u64>(4);
        let green = Builder::new()
            .spawn_on(rt.handle(), move || {
                let mut sum = 0;
                while let Some(v) = thread::block_on(green_rx.recv()) {
                    sum += v;
                    thread::block_on(to_task.send(v * 2)).unwrap();
                }
                sum
            })
            .unwrap();
        let task = rt.spawn(async move {
            let mut got = 0;
            for v in 0..500u64 {
                to_green.send(v).await.unwrap();
                got += task_rx.recv().await.unwrap();
            }
            drop(to_green);
            // Awaits the green thread.
            (got, green.await.unwrap())
        });
        let (got, sum) = rt.block_on(task).unwrap();
        assert_eq!(sum, (0..500).sum::<u64>());
        assert_eq!(got, 2 * sum);
    }
}

#[test]
fn shutdown_ends_parked_and_spinning_threads_promptly() {
    for round in 0..10 {
        let rt = runtime(2, Duration::from_micros(100));
        let unwound = Arc::new(AtomicUsize::new(0));
        let mut hs = Vec::new();
        for i in 0..100 {
            let flag = Flag(unwound.clone());
            hs.push(
                Builder::new()
                    .spawn_on(rt.handle(), move || {
                        let _flag = flag;
                        if i % 10 == 0 {
                            loop {
                                spin(1000);
                            }
                        }
                        thread::sleep(Duration::from_secs(3600));
                    })
                    .unwrap(),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
        let t = Instant::now();
        drop(rt);
        assert!(t.elapsed() < Duration::from_secs(5), "round {round}: shutdown took {:?}", t.elapsed());
        // The 90 sleepers were unwound on their worker (their flags
        // dropped); the spinners that ran were stopped mid-code and
        // reclaimed, those that had not run yet (a loaded VM) were dropped
        // unstarted, with their flags.
        let spinners_ran = hs.iter().step_by(10).filter(|h| h.thread_stats().switches > 0).count();
        assert_eq!(unwound.load(Ordering::SeqCst), 100 - spinners_ran, "round {round}");
        for h in hs {
            assert!(h.join().unwrap_err().is_cancelled());
        }
    }
}

extern "C" {
    fn __cxa_thread_atexit_impl(dtor: unsafe extern "C" fn(*mut libc::c_void), obj: *mut libc::c_void, dso: *mut libc::c_void) -> libc::c_int;
}

static RAN: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_dtor(_: *mut libc::c_void) {
    RAN.fetch_add(1, Ordering::SeqCst);
}

/// Thread-local destructors registered inside a green thread run at its end
/// only for its own thread-locals; others (the runtime's, whose values are
/// the worker's: linger's stack pool lost its pool to this once) stay the
/// worker's and run when the worker ends.
#[test]
fn only_the_threads_own_thread_locals_die_with_it() {
    std::thread_local! {
        static MINE: u64 = const { 0 };
    }
    let rt = runtime(1, Duration::from_millis(2));
    let foreign = Box::into_raw(Box::new(0u64)) as usize;
    for _ in 0..10 {
        let before = RAN.load(Ordering::SeqCst);
        Builder::new()
            .spawn_on(rt.handle(), move || {
                let own = MINE.with(|m| m as *const u64 as *mut libc::c_void);
                // SAFETY: the destructor only counts; both objects outlive it.
                unsafe {
                    __cxa_thread_atexit_impl(count_dtor, own, std::ptr::null_mut());
                    __cxa_thread_atexit_impl(count_dtor, foreign as *mut libc::c_void, std::ptr::null_mut());
                }
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(RAN.load(Ordering::SeqCst), before + 1, "the thread's own ran at its end, the other did not");
    }
    let before = RAN.load(Ordering::SeqCst);
    drop(rt);
    assert_eq!(RAN.load(Ordering::SeqCst), before + 10, "the worker's ran when the worker ended");
}

/// Counters by cause, per thread and per worker, and the dump of live
/// threads with what each waits on.
#[test]
fn counters_and_the_dump_say_what_threads_did_and_wait_on() {
    let rt = runtime(1, Duration::from_micros(100));
    let h = Builder::new()
        .name("counted")
        .spawn_on(rt.handle(), || {
            thread::sleep(Duration::from_millis(1));
            let other = thread::spawn(|| spin(10_000));
            other.join().unwrap();
            thread::block_on(async { tokio::task::yield_now().await });
            thread::yield_now();
            spin(20_000_000); // several slices
        })
        .unwrap();
    while !h.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = h.thread_stats();
    assert!(s.parks_timer >= 1 && s.parks_join >= 1 && s.parks_future >= 1, "{s:?}");
    assert!(s.yields >= 1 && s.preemptions >= 2 && s.switches >= s.parks() + s.preemptions, "{s:?}");
    let w = rt.worker_metrics()[0].green;
    assert!(w.parks_timer >= 1 && w.preemptions >= s.preemptions && w.switches >= s.switches, "{w:?}");
    h.join().unwrap();

    // Parked threads, listed with their cause.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let sleeper = Builder::new().name("sleeper").spawn_on(rt.handle(), move || thread::sleep(Duration::from_secs(60))).unwrap();
    let id = sleeper.thread().id().as_u64().get();
    let joiner = Builder::new().name("joiner").spawn_on(rt.handle(), move || {
        let _ = rx;
        sleeper.join().unwrap_err().is_cancelled()
    }).unwrap();
    let t = Instant::now();
    let dump = loop {
        // Other tests' threads are listed too: wait for these two.
        let d = thread::dump();
        let parked = d
            .iter()
            .filter(|t| matches!(t.name.as_deref(), Some("sleeper" | "joiner")) && matches!(t.state, thread::State::Parked(_)))
            .count();
        if parked >= 2 || t.elapsed() > Duration::from_secs(20) {
            break d;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let sleeping = dump.iter().find(|t| t.name.as_deref() == Some("sleeper")).expect("sleeper listed");
    assert_eq!(sleeping.state, thread::State::Parked(thread::Cause::Timer));
    assert!(sleeping.waiting_on.as_deref().is_some_and(|w| w.starts_with("timer")), "{sleeping:?}");
    let joining = dump.iter().find(|t| t.name.as_deref() == Some("joiner")).expect("joiner listed");
    assert_eq!(joining.state, thread::State::Parked(thread::Cause::Join));
    assert_eq!(joining.waiting_on, Some(format!("thread {id}")));
    let text = thread::dump_text();
    assert!(text.contains("\"sleeper\" [parked: timer]") && text.contains("\"joiner\" [parked: join] on thread"), "{text}");
    drop(tx);
    drop(rt);
    assert!(joiner.join().is_err(), "cancelled with its runtime");
    assert!(thread::dump().iter().all(|t| t.name.as_deref() != Some("sleeper")), "gone from the list");
}

/// An explicit cancel says whether it could unwind: a thread parked in
/// Rust code (a `block_on`, `turquoise::thread::sleep`) is unwound and its
/// destructors run; one stopped by its slice in the middle of its code, or
/// parked inside a libc call (a blocking read), is reclaimed, and the error
/// says so.
#[test]
fn cancel_says_whether_it_unwound() {
    let rt = runtime(1, Duration::from_micros(200));
    for round in 0..20 {
        let dropped = Arc::new(AtomicUsize::new(0));
        let flag = Flag(dropped.clone());
        let sleeper = Builder::new()
            .spawn_on(rt.handle(), move || {
                let _flag = flag;
                thread::sleep(Duration::from_secs(3600));
            })
            .unwrap();
        let spinner = Builder::new()
            .spawn_on(rt.handle(), || loop {
                spin(1000);
            })
            .unwrap();
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let reader = Builder::new()
            .spawn_on(rt.handle(), move || {
                use std::io::Read;
                let _ = (&a).read(&mut [0u8; 1]);
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        sleeper.cancel();
        spinner.cancel();
        reader.cancel();
        let e = sleeper.join().unwrap_err();
        assert!(e.is_cancelled() && !e.is_reclaimed(), "round {round}: sleeper {e:?}");
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "round {round}: the sleeper's destructors ran");
        // A thread cancelled before it ever ran (a loaded VM) had nothing to
        // unwind: plainly cancelled.
        let ran = spinner.thread_stats().switches > 0;
        let e = spinner.join().unwrap_err();
        assert!(e.is_reclaimed() == ran && e.is_cancelled(), "round {round}: spinner (ran: {ran}) {e:?}");
        let ran = reader.thread_stats().switches > 0;
        let e = reader.join().unwrap_err();
        assert!(e.is_reclaimed() == ran && e.is_cancelled(), "round {round}: reader (ran: {ran}) {e:?}");
    }
}

/// A cancel that comes while the thread runs, before it parks, still ends
/// it: the park's fresh look clears the record of earlier wake-ups, and the
/// worker must look at the cancel beside it. Cancelled at once after their
/// spawn, sleepers and channel waiters race their first park on two workers
/// (all of them slept on for an hour, and hung their joiners, before).
#[test]
fn a_cancel_before_the_first_park_ends_the_thread() {
    common::within(Duration::from_secs(120), "cancel before park", || {
        let rt = runtime(2, Duration::from_micros(20));
        for round in 0..2000 {
            let (_tx, rx) = turquoise::sync::mpsc::channel::<u8>(1);
            let sleeper = Builder::new().spawn_on(rt.handle(), || thread::sleep(Duration::from_secs(3600))).unwrap();
            let waiter = Builder::new().spawn_on(rt.handle(), move || { let mut rx = rx; let _ = rx.recv(); }).unwrap();
            if round % 2 == 1 {
                spin(round % 50);
            }
            sleeper.cancel();
            waiter.cancel();
            assert!(sleeper.join().unwrap_err().is_cancelled(), "round {round}: sleeper");
            assert!(waiter.join().unwrap_err().is_cancelled(), "round {round}: waiter");
        }
    });
}

//! Green threads that wait in Rust's std (issue 27): each green thread has
//! its own `std::thread::current()`, so `park`/`unpark` tell green threads of
//! one worker apart, and a green thread waiting in std (a park, a channel
//! fed by an OS thread, the join of an OS thread, a `Condvar`, an `RwLock`,
//! a `Barrier`) is stopped at its slice: the other threads of its worker run
//! meanwhile. Each case loops; each would hang or starve its worker without
//! the mechanism (`Builder::stop_in_std_waits`, the images' std slots).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use turquoise::thread;

mod common;
use common::{runtime, within};

/// Each green thread sees a std `Thread` of its own, with an id that stays
/// the same across its switches and differs from its worker's and from
/// every other green thread's.
#[test]
fn each_green_thread_has_its_own_std_thread() {
    within(Duration::from_secs(120), "identities", || {
        for _ in 0..5 {
            let rt = runtime(1, Duration::from_micros(50));
            let worker = rt.block_on(async { std::thread::current().id() });
            let ids = rt.block_on(async {
                let hs: Vec<_> = (0..200)
                    .map(|_| {
                        thread::spawn(|| {
                            let id = std::thread::current().id();
                            for _ in 0..3 {
                                thread::yield_now();
                                common::spin(20_000);
                                assert_eq!(std::thread::current().id(), id, "a green thread's std id changed");
                            }
                            id
                        })
                    })
                    .collect();
                let mut ids = Vec::new();
                for h in hs {
                    ids.push(h.await.unwrap());
                }
                ids
            });
            let distinct: HashSet<_> = ids.iter().collect();
            assert_eq!(distinct.len(), ids.len(), "two green threads share a std id");
            assert!(!distinct.contains(&worker), "a green thread has its worker's std id");
            // The worker's own is untouched by theirs.
            assert_eq!(rt.block_on(async { std::thread::current().id() }), worker);
        }
    });
}

/// `std::thread::park` in one green thread and `Thread::unpark` from another
/// of the same worker: the parked one is stopped at its slice (the worker
/// runs the other), and the unpark reaches the right parker.
#[test]
fn park_and_unpark_between_green_threads_of_one_worker() {
    within(Duration::from_secs(120), "park/unpark", || {
        let rt = runtime(1, Duration::from_micros(100));
        for round in 0..50 {
            let go = Arc::new(AtomicBool::new(false));
            let parker = Arc::new(Mutex::new(None::<std::thread::Thread>));
            rt.block_on(async {
                let (g, p) = (go.clone(), parker.clone());
                let a = thread::spawn(move || {
                    *p.lock().unwrap() = Some(std::thread::current());
                    while !g.load(Ordering::Acquire) {
                        std::thread::park();
                    }
                });
                let (g, p) = (go.clone(), parker.clone());
                let b = thread::spawn(move || {
                    let t = loop {
                        if let Some(t) = p.lock().unwrap().clone() {
                            break t;
                        }
                        thread::yield_now();
                    };
                    // Let the other park first in most rounds.
                    if round % 2 == 0 {
                        common::spin(200_000);
                    }
                    g.store(true, Ordering::Release);
                    t.unpark();
                });
                b.await.unwrap();
                a.await.unwrap();
            });
        }
    });
}

/// `park_timeout` in a green thread returns after its timeout (or earlier,
/// spuriously), while a ticker of the same worker keeps running.
#[test]
fn park_timeout_leaves_the_worker_to_the_others() {
    within(Duration::from_secs(120), "park_timeout", || {
        for _ in 0..5 {
            let (ticks, waited) = ticks_during(|| {
                let end = Instant::now() + Duration::from_millis(100);
                while Instant::now() < end {
                    std::thread::park_timeout(end - Instant::now());
                }
            });
            assert!(waited >= Duration::from_millis(100));
            // About 100 ticks of 1 ms; the waiter blocking the worker would
            // leave one or two.
            assert!(ticks >= 10, "the ticker ran {ticks} times in {waited:?}: the park held the worker");
        }
    });
}

/// Runs `wait` in a green thread of a one-worker runtime next to a 1 ms
/// ticker green thread, and returns the ticker's count over the wait.
fn ticks_during(wait: impl FnOnce() + Send + 'static) -> (u64, Duration) {
    let rt = runtime(1, Duration::from_micros(500));
    rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let ticks = Arc::new(AtomicU64::new(0));
        let (s, t) = (stop.clone(), ticks.clone());
        let ticker = thread::spawn(move || {
            while !s.load(Ordering::Acquire) {
                thread::sleep(Duration::from_millis(1));
                t.fetch_add(1, Ordering::Relaxed);
            }
        });
        let waiter = thread::spawn(move || {
            let t = Instant::now();
            wait();
            t.elapsed()
        });
        let took = waiter.await.unwrap();
        stop.store(true, Ordering::Release);
        ticker.await.unwrap();
        (ticks.load(Ordering::Relaxed), took)
    })
}

/// A green thread receiving on a std channel that an OS thread feeds 200 ms
/// later: the worker runs the ticker meanwhile (issue 27: 1-2 ticks).
#[test]
fn std_channel_fed_by_an_os_thread_leaves_the_worker_to_the_others() {
    within(Duration::from_secs(120), "std mpsc", || {
        for flavour in 0..3 {
            let (ticks, took) = ticks_during(move || {
                let (tx, rx) = match flavour {
                    0 => {
                        let (tx, rx) = std::sync::mpsc::channel::<u64>();
                        (Box::new(move |v| tx.send(v).unwrap()) as Box<dyn FnOnce(u64) + Send>, rx)
                    }
                    1 => {
                        let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(1);
                        (Box::new(move |v| tx.send(v).unwrap()) as Box<dyn FnOnce(u64) + Send>, rx)
                    }
                    _ => {
                        let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(0);
                        (Box::new(move |v| tx.send(v).unwrap()) as Box<dyn FnOnce(u64) + Send>, rx)
                    }
                };
                let os = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(200));
                    tx(42);
                });
                assert_eq!(rx.recv().unwrap(), 42);
                os.join().unwrap();
            });
            assert!(took >= Duration::from_millis(200));
            assert!(ticks >= 20, "flavour {flavour}: the ticker ran {ticks} times in {took:?}: recv held the worker");
        }
    });
}

/// A green thread sending on a full std channel that an OS thread drains
/// later: the same.
#[test]
fn std_channel_send_waiting_for_an_os_thread_leaves_the_worker_to_the_others() {
    within(Duration::from_secs(120), "std mpsc send", || {
        let (ticks, took) = ticks_during(|| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(1);
            tx.send(1).unwrap();
            let os = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                (rx.recv().unwrap(), rx.recv().unwrap())
            });
            tx.send(2).unwrap(); // waits for the OS thread's first recv
            assert_eq!(os.join().unwrap(), (1, 2));
        });
        assert!(took >= Duration::from_millis(200));
        assert!(ticks >= 20, "the ticker ran {ticks} times in {took:?}: send held the worker");
    });
}

/// A green thread joining an OS thread with std's `JoinHandle::join`
/// (issue 27: 1-2 ticks in 300 ms).
#[test]
fn std_join_of_an_os_thread_leaves_the_worker_to_the_others() {
    within(Duration::from_secs(120), "std join", || {
        for _ in 0..3 {
            let (ticks, took) = ticks_during(|| {
                let os = std::thread::spawn(|| {
                    std::thread::sleep(Duration::from_millis(200));
                    7
                });
                assert_eq!(os.join().unwrap(), 7);
            });
            assert!(took >= Duration::from_millis(200));
            assert!(ticks >= 20, "the ticker ran {ticks} times in {took:?}: join held the worker");
        }
    });
}

/// std's `Condvar`, `RwLock` and `Barrier` between green threads of one
/// worker: each waiter is stopped at its slice, so the thread it waits for
/// runs; counts come out exact.
#[test]
fn condvar_rwlock_and_barrier_between_green_threads_of_one_worker() {
    within(Duration::from_secs(120), "condvar/rwlock/barrier", || {
        let rt = runtime(1, Duration::from_micros(100));
        for _ in 0..10 {
            rt.block_on(async {
                // Producer and consumer through a one-slot queue.
                let q = Arc::new((Mutex::new(None::<u64>), Condvar::new(), Condvar::new()));
                let qc = q.clone();
                let consumer = thread::spawn(move || {
                    let (m, full, empty) = &*qc;
                    let mut sum = 0;
                    for _ in 0..200 {
                        let mut g = full.wait_while(m.lock().unwrap(), |v| v.is_none()).unwrap();
                        sum += g.take().unwrap();
                        empty.notify_one();
                    }
                    sum
                });
                let producer = thread::spawn(move || {
                    let (m, full, empty) = &*q;
                    for i in 0..200 {
                        let mut g = empty.wait_while(m.lock().unwrap(), |v| v.is_some()).unwrap();
                        *g = Some(i);
                        full.notify_one();
                    }
                });
                producer.await.unwrap();
                assert_eq!(consumer.await.unwrap(), (0..200).sum::<u64>());

                // A writer waiting for readers that hold the lock across slices.
                let lock = Arc::new(RwLock::new(0u64));
                let readers: Vec<_> = (0..3)
                    .map(|_| {
                        let l = lock.clone();
                        thread::spawn(move || {
                            let g = l.read().unwrap();
                            common::spin(300_000);
                            *g
                        })
                    })
                    .collect();
                let l = lock.clone();
                let writer = thread::spawn(move || {
                    for _ in 0..100 {
                        *l.write().unwrap() += 1;
                    }
                });
                for r in readers {
                    let _ = r.await.unwrap();
                }
                writer.await.unwrap();
                assert_eq!(*lock.read().unwrap(), 100);

                // Four threads meeting at a barrier, five times.
                let barrier = Arc::new(Barrier::new(4));
                let hs: Vec<_> = (0..4)
                    .map(|_| {
                        let b = barrier.clone();
                        thread::spawn(move || (0..5).filter(|_| b.wait().is_leader()).count())
                    })
                    .collect();
                let mut leaders = 0;
                for h in hs {
                    leaders += h.await.unwrap();
                }
                assert_eq!(leaders, 5);
            });
        }
    });
}

/// A green thread's std `Thread` is given back at its end, and handles to
/// it taken by others stay valid (an over-release would free it under them:
/// `unpark` and the drop below would touch freed memory, which valgrind's
/// green leak check and the allocator catch; an under-release leaks, which
/// the leak check catches).
#[test]
fn std_thread_handles_outlive_their_green_threads() {
    within(Duration::from_secs(120), "release", || {
        let rt = runtime(1, Duration::from_micros(100));
        let handles = rt.block_on(async {
            let hs: Vec<_> = (0..100).map(|_| thread::spawn(std::thread::current)).collect();
            let mut out = Vec::new();
            for h in hs {
                out.push(h.await.unwrap());
            }
            out
        });
        let ids: HashSet<_> = handles.iter().map(|t| t.id()).collect();
        assert_eq!(ids.len(), 100);
        for t in &handles {
            t.unpark(); // its parker outlives its green thread
        }
        drop(handles);
    });
}

/// `thread::dump` tells what a green thread in a std wait is doing: one
/// stopped in a channel wait shows as runnable in a futex wait; one that
/// holds its worker (waiting for a `OnceLock` an OS thread initialises,
/// which std's `Once` does not let it be stopped in) shows so, from an OS
/// thread's dump while the worker is held.
#[test]
fn dump_shows_std_waits_and_threads_holding_their_worker() {
    use std::sync::OnceLock;
    within(Duration::from_secs(120), "dump", || {
        let rt = runtime(1, Duration::from_micros(200));
        let handle = rt.handle().clone();
        let of = |id: u64| thread::dump().into_iter().find(|t| t.id == id);
        let seen = |id: u64, what: &str| {
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until {
                if of(id).and_then(|t| t.waiting_on).is_some_and(|w| w.contains(what)) {
                    return true;
                }
                std::thread::sleep(Duration::from_micros(300));
            }
            false
        };
        for _ in 0..5 {
            // A receive an OS thread feeds once the dump has shown it.
            let (tx, rx) = std::sync::mpsc::channel::<u64>();
            let r = thread::Builder::new().spawn_on(&handle, move || rx.recv().unwrap()).unwrap();
            let id = r.thread().id().as_u64().get();
            assert!(seen(id, "futex wait"), "never shown in its futex wait: {:?}", of(id));
            tx.send(5).unwrap();
            assert_eq!(rt.block_on(r).unwrap(), 5);

            // A wait for another thread's initialiser holds the worker.
            let cell = Arc::new(OnceLock::<u64>::new());
            let started = Arc::new(AtomicBool::new(false));
            let (c, s) = (cell.clone(), started.clone());
            let init = std::thread::spawn(move || {
                *c.get_or_init(|| {
                    s.store(true, Ordering::Release);
                    std::thread::sleep(Duration::from_millis(150));
                    9
                })
            });
            while !started.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let c = cell.clone();
            let w = thread::Builder::new().spawn_on(&handle, move || *c.get_or_init(|| 0)).unwrap();
            let id = w.thread().id().as_u64().get();
            assert!(seen(id, "holding its worker"), "never shown holding its worker: {:?}", of(id));
            assert_eq!(rt.block_on(w).unwrap(), 9);
            assert_eq!(init.join().unwrap(), 9);
        }
    });
}

/// `OnceLock::wait` for an initialiser an OS thread runs: stopped at its
/// slice (it runs no initialiser itself), unlike `get_or_init`, which holds
/// its worker (`dump_shows_std_waits_and_threads_holding_their_worker`).
#[test]
fn once_lock_wait_leaves_the_worker_to_the_others() {
    use std::sync::OnceLock;
    within(Duration::from_secs(120), "OnceLock::wait", || {
        for _ in 0..3 {
            let cell = Arc::new(OnceLock::<u64>::new());
            let c = cell.clone();
            let (ticks, took) = ticks_during(move || {
                let init = {
                    let c = c.clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(200));
                        c.set(3).unwrap();
                    })
                };
                assert_eq!(*c.wait(), 3);
                init.join().unwrap();
            });
            assert_eq!(cell.get(), Some(&3));
            assert!(took >= Duration::from_millis(150));
            assert!(ticks >= 20, "the ticker ran {ticks} times in {took:?}: OnceLock::wait held the worker");
        }
    });
}

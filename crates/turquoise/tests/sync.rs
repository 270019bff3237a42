//! `turquoise::sync`: each primitive used at once from green threads
//! (preempted while they hold it), OS threads and async tasks; no lost
//! wake-up, no deadlock, exact results; poisoning; fairness.
//!
//! A hang fails the test through a watchdog instead of hanging the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use turquoise::sync::{Condvar, Mutex};
use turquoise::thread::{self, Builder};

mod common;
use common::spin;

fn runtime(workers: usize, slice: Duration) -> turquoise::Runtime {
    turquoise::Builder::new()
        .worker_threads(workers)
        .slice(slice)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `f` on a thread of its own; panics if it takes over `limit` (a
/// deadlock or a lost wake-up), instead of hanging the test run.
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: not done after {limit:?} (deadlock or lost wake-up)"),
    }
}

const LIMIT: Duration = Duration::from_secs(120);

/// One worker, many green threads that hold the lock across their slice's
/// end (a `std::sync::Mutex` here blocks the worker for good: the holder
/// can only be resumed by that worker), plus OS threads and async tasks on
/// the same mutex. The count is exact.
#[test]
fn a_mutex_shared_by_green_threads_os_threads_and_tasks() {
    for round in 0..5 {
        let total = within(LIMIT, "mutex round", move || {
            let rt = runtime(1, Duration::from_micros(50));
            let m = Arc::new(Mutex::new(0u64));
            const GREEN: u64 = 40;
            const OS: u64 = 3;
            const TASKS: u64 = 20;
            const EACH: u64 = 20;
            let green: Vec<_> = (0..GREEN)
                .map(|_| {
                    let m = m.clone();
                    Builder::new()
                        .spawn_on(rt.handle(), move || {
                            for _ in 0..EACH {
                                let mut g = m.lock().unwrap();
                                let v = *g;
                                spin(100_000); // longer than a slice: stopped here, holding the lock
                                *g = v + 1;
                            }
                        })
                        .unwrap()
                })
                .collect();
            let os: Vec<_> = (0..OS)
                .map(|_| {
                    let m = m.clone();
                    std::thread::spawn(move || {
                        for _ in 0..EACH {
                            let mut g = m.lock().unwrap();
                            let v = *g;
                            spin(500);
                            *g = v + 1;
                        }
                    })
                })
                .collect();
            let tasks: Vec<_> = (0..TASKS)
                .map(|_| {
                    let m = m.clone();
                    rt.spawn(async move {
                        for _ in 0..EACH {
                            let mut g = m.lock_async().await.unwrap();
                            let v = *g;
                            tokio::task::yield_now().await; // held across an await
                            *g = v + 1;
                        }
                    })
                })
                .collect();
            let (mut stopped, mut parked) = (0, 0);
            for g in green {
                let s = g.thread_stats();
                (stopped, parked) = (stopped + s.preemptions, parked + s.parks_sync);
                g.join().unwrap();
            }
            eprintln!("round {round}: green threads stopped {stopped} times, parked on the mutex {parked} times");
            assert!(
                stopped > 0 && parked > 0,
                "the hazard was not exercised ({stopped} stops, {parked} parks)"
            );
            for t in os {
                t.join().unwrap();
            }
            rt.block_on(async {
                for t in tasks {
                    t.await.unwrap();
                }
            });
            let total = *m.lock().unwrap();
            (total, (GREEN + OS + TASKS) * EACH)
        });
        assert_eq!(total.0, total.1, "round {round}: lost increments");
    }
}

/// A bounded queue on `Mutex` + two `Condvar`s, producers and consumers of
/// every kind: every item arrives once, nobody sleeps through a wake-up.
#[test]
fn condvars_lose_no_wake_up() {
    for round in 0..5 {
        within(LIMIT, "condvar round", move || {
            struct Queue {
                items: Mutex<std::collections::VecDeque<u64>>,
                not_empty: Condvar,
                not_full: Condvar,
            }
            impl Queue {
                fn push(&self, v: u64) {
                    let mut q = self
                        .not_full
                        .wait_while(self.items.lock().unwrap(), |q| q.len() >= 4)
                        .unwrap();
                    q.push_back(v);
                    drop(q);
                    self.not_empty.notify_one();
                }
                fn pop(&self) -> u64 {
                    let mut q = self
                        .not_empty
                        .wait_while(self.items.lock().unwrap(), |q| q.is_empty())
                        .unwrap();
                    let v = q.pop_front().unwrap();
                    drop(q);
                    self.not_full.notify_one();
                    v
                }
                async fn pop_async(&self) -> u64 {
                    let mut q = self.items.lock_async().await.unwrap();
                    while q.is_empty() {
                        q = self.not_empty.wait_async(q).await.unwrap();
                    }
                    let v = q.pop_front().unwrap();
                    drop(q);
                    self.not_full.notify_one();
                    v
                }
            }
            let rt = runtime(2, Duration::from_micros(100));
            let q = Arc::new(Queue {
                items: Mutex::new(Default::default()),
                not_empty: Condvar::new(),
                not_full: Condvar::new(),
            });
            const PER: u64 = 2_000;
            // Producers: 2 green, 1 OS thread; consumers: 1 green, 1 OS, 1 task.
            let sum = Arc::new(AtomicU64::new(0));
            let mut producers = Vec::new();
            for p in 0..2u64 {
                let q = q.clone();
                producers.push(
                    Builder::new()
                        .spawn_on(rt.handle(), move || {
                            (0..PER).for_each(|i| q.push(p * PER + i))
                        })
                        .unwrap(),
                );
            }
            let os_producer = {
                let q = q.clone();
                std::thread::spawn(move || (0..PER).for_each(|i| q.push(2 * PER + i)))
            };
            let total = 3 * PER;
            let take = [total / 3, total / 3, total - 2 * (total / 3)];
            let green_consumer = {
                let (q, sum) = (q.clone(), sum.clone());
                Builder::new()
                    .spawn_on(rt.handle(), move || {
                        (0..take[0]).for_each(|_| {
                            sum.fetch_add(q.pop(), Ordering::Relaxed);
                        })
                    })
                    .unwrap()
            };
            let os_consumer = {
                let (q, sum) = (q.clone(), sum.clone());
                std::thread::spawn(move || {
                    (0..take[1]).for_each(|_| {
                        sum.fetch_add(q.pop(), Ordering::Relaxed);
                    })
                })
            };
            let task = {
                let (q, sum) = (q.clone(), sum.clone());
                rt.spawn(async move {
                    for _ in 0..take[2] {
                        sum.fetch_add(q.pop_async().await, Ordering::Relaxed);
                    }
                })
            };
            producers.into_iter().for_each(|p| p.join().unwrap());
            os_producer.join().unwrap();
            green_consumer.join().unwrap();
            os_consumer.join().unwrap();
            rt.block_on(task).unwrap();
            assert_eq!(
                sum.load(Ordering::Relaxed),
                total * (total - 1) / 2,
                "round {round}"
            );
            assert!(q.items.lock().unwrap().is_empty());
        });
    }
}

/// Timed waits end by their time when nobody notifies, and by the
/// notification when one comes, from green and OS threads.
#[test]
fn condvar_timeouts() {
    within(LIMIT, "timeouts", || {
        let rt = runtime(1, Duration::from_millis(2));
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let p = pair.clone();
        let green = Builder::new()
            .spawn_on(rt.handle(), move || {
                let (m, cv) = &*p;
                let t0 = std::time::Instant::now();
                let (g, r) = cv
                    .wait_timeout(m.lock().unwrap(), Duration::from_millis(20))
                    .unwrap();
                assert!(r.timed_out() && !*g);
                assert!(t0.elapsed() >= Duration::from_millis(20));
                drop(g);
                let (g, r) = cv
                    .wait_timeout_while(m.lock().unwrap(), Duration::from_secs(60), |ready| !*ready)
                    .unwrap();
                assert!(*g && !r.timed_out());
            })
            .unwrap();
        let (m, cv) = &*pair;
        let (g, r) = cv
            .wait_timeout(m.lock().unwrap(), Duration::from_millis(10))
            .unwrap();
        assert!(r.timed_out());
        drop(g);
        std::thread::sleep(Duration::from_millis(50));
        *m.lock().unwrap() = true;
        cv.notify_all();
        green.join().unwrap();
        // A huge timeout is a wait without end, not an overflow.
        let (g, r) = cv
            .wait_timeout_while(m.lock().unwrap(), Duration::MAX, |ready| !*ready)
            .unwrap();
        assert!(*g && !r.timed_out());
    });
}

/// A green thread that panics holding the lock poisons it, as with std.
#[test]
fn a_panic_poisons_the_mutex() {
    let rt = runtime(1, Duration::from_millis(2));
    let m = Arc::new(Mutex::new(1));
    let m2 = m.clone();
    let h = Builder::new()
        .spawn_on(rt.handle(), move || {
            let _g = m2.lock().unwrap();
            panic!("boom");
        })
        .unwrap();
    assert!(h.join().is_err());
    assert!(m.is_poisoned());
    let g = m.lock().unwrap_err().into_inner();
    assert_eq!(*g, 1);
    drop(g);
    assert!(m.try_lock().is_err());
    m.clear_poison();
    assert_eq!(*m.try_lock().unwrap(), 1);
    // A lock taken by a destructor during unwinding is not poisoned by it.
    let m3 = m.clone();
    let h = Builder::new()
        .spawn_on(rt.handle(), move || {
            struct Late(Arc<Mutex<i32>>);
            impl Drop for Late {
                fn drop(&mut self) {
                    *self.0.lock().unwrap() += 1;
                }
            }
            let _late = Late(m3);
            panic!("unwinds through Late");
        })
        .unwrap();
    assert!(h.join().is_err());
    assert!(!m.is_poisoned());
    assert_eq!(Arc::try_unwrap(m).unwrap().into_inner().unwrap(), 2);
}

/// Fairness: green threads that release and at once ask again never get
/// ahead of a waiter more than once each. Cooperative threads on one
/// worker, so that the measure (acquisitions between asking and getting)
/// is not disturbed by preemption or VM stalls.
#[test]
fn a_waiter_gets_the_mutex_within_one_turn_of_each_other() {
    within(LIMIT, "fairness", || {
        let rt = runtime(1, Duration::from_millis(2));
        const N: u64 = 8;
        let m = Arc::new(Mutex::new(0u64));
        let taken = Arc::new(AtomicU64::new(0)); // acquisitions so far
        let worst = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..N)
            .map(|_| {
                let (m, taken, worst) = (m.clone(), taken.clone(), worst.clone());
                Builder::new()
                    .preemptive(false)
                    .spawn_on(rt.handle(), move || {
                        for _ in 0..300 {
                            let asked = taken.load(Ordering::Relaxed);
                            let mut g = m.lock().unwrap();
                            worst.fetch_max(
                                taken.load(Ordering::Relaxed) - asked,
                                Ordering::Relaxed,
                            );
                            taken.fetch_add(1, Ordering::Relaxed);
                            *g += 1;
                            thread::yield_now(); // the others queue meanwhile
                        }
                    })
                    .unwrap()
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*m.lock().unwrap(), N * 300);
        let worst = worst.load(Ordering::Relaxed);
        assert!(
            worst <= N,
            "a waiter saw {worst} acquisitions by others before its own ({N} threads)"
        );
        eprintln!("most acquisitions ahead of a waiter: {worst} ({N} threads)");
    });
}

//! Activities: cooperative green threads of one worker sharing `!Send`
//! state; they switch only at blocking calls, yields and yield checks.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use turquoise::thread::{self, Builder};

mod common;
use common::{runtime, spin, within};

/// Runs `f` as the root activity of a fresh runtime; fails after `limit`
/// instead of hanging.
fn in_root<T: Send + 'static>(workers: usize, slice: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    within(Duration::from_secs(120), "activities (a deadlock, or a starved activity)", move || {
        let rt = runtime(workers, slice);
        let h = Builder::new().preemptive(false).spawn_on(rt.handle(), f).unwrap();
        h.join().unwrap_or_else(|e| panic!("the root activity failed: {e:?}"))
    })
}

/// 1,000 activities share an `Rc<RefCell<..>>` and a `Cell` through
/// read-modify-writes that span many microseconds, across slice ends and
/// sleeps: never found borrowed, never a lost update.
#[test]
fn rc_and_refcell_shared_by_a_thousand_activities_stay_consistent() {
    for round in 0..3 {
        let (total, cells, switches) = in_root(2, Duration::from_micros(100), || {
            let state = Rc::new(RefCell::new(Vec::<u64>::new()));
            let count = Rc::new(Cell::new(0u64));
            // Checks after which another activity had run: switches there.
            let switched = Rc::new(Cell::new(0u64));
            let all: Vec<_> = (0..1000u64)
                .map(|i| {
                    let (state, count, switched) = (state.clone(), count.clone(), switched.clone());
                    thread::spawn_local(move || {
                        for k in 0..5u64 {
                            {
                                // Held across about a slice of work or more:
                                // a preempted holder would leave it borrowed.
                                let mut s = state.try_borrow_mut().expect("found borrowed: an activity was switched out inside");
                                let v = count.get();
                                spin(40_000 + (i % 7) * 10_000);
                                s.push(i * 10 + k);
                                count.set(v + 1);
                            }
                            let before = count.get();
                            thread::checkpoint();
                            switched.set(switched.get() + u64::from(count.get() != before));
                            if (i + k) % 97 == 0 {
                                thread::sleep(Duration::from_micros(200)); // parks: a switch
                            }
                        }
                    })
                })
                .collect();
            for a in all {
                a.join().unwrap();
            }
            let s = state.borrow();
            let mut sorted = s.clone();
            sorted.sort_unstable();
            sorted.dedup();
            (count.get(), sorted.len() as u64, switched.get())
        });
        assert_eq!((total, cells), (5000, 5000), "round {round}");
        assert!(switches > 100, "round {round}: only {switches} yield checks switched: the hazard was not exercised");
        eprintln!("round {round}: 1,000 activities, 5,000 updates, {switches} switches at yield checks");
    }
}

/// A spinning activity with yield checks lets the others run: a ticker
/// that sleeps 1 ms twenty times finishes while the spinner spins, on a
/// single worker.
#[test]
fn a_spinning_activity_with_checks_lets_the_others_run() {
    let (ticks, spun) = in_root(1, Duration::from_micros(500), || {
        let stop = Rc::new(Cell::new(false));
        let s = stop.clone();
        let spinner = thread::spawn_local(move || {
            let mut rounds = 0u64;
            while !s.get() {
                spin(10_000);
                rounds += 1;
                thread::checkpoint();
            }
            rounds
        });
        let t = stop.clone();
        let ticker = thread::spawn_local(move || {
            for _ in 0..20 {
                thread::sleep(Duration::from_millis(1));
            }
            t.set(true);
            20
        });
        (ticker.join().unwrap(), spinner.join().unwrap())
    });
    assert_eq!(ticks, 20);
    assert!(spun > 0);
}

/// Work spawned from outside (an OS thread) onto a worker whose activities
/// yield at their checks runs within a few slices: a worker looks at the
/// injector after any poll that used its slice, not only every 61 picks
/// (which at one slice a pick made it wait 61 slices).
#[test]
fn work_from_outside_runs_within_a_few_slices_of_busy_activities() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    within(Duration::from_secs(120), "work from outside (starved by activities)", || {
        let slice = Duration::from_millis(1);
        let rt = runtime(1, slice);
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let s = stop.clone();
                Builder::new()
                    .preemptive(false)
                    .spawn_on(rt.handle(), move || {
                        while !s.load(Ordering::Relaxed) {
                            spin(1_000);
                            thread::checkpoint();
                        }
                    })
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        let mut worst = Duration::ZERO;
        for round in 0..20 {
            let t = Instant::now();
            let h = Builder::new().spawn_on(rt.handle(), move || t.elapsed()).unwrap();
            let waited = h.join().unwrap();
            eprintln!("round {round}: ran after {waited:?}");
            worst = worst.max(waited);
        }
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        // 61 slices before; a few now (VM stalls allowed for).
        assert!(worst < slice * 30, "work from outside waited {worst:?} behind activities with {slice:?} slices");
    });
}

/// The calling OS thread's CPU time.
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// One that never checks is not stopped, but reported: its counters say
/// how many slices it ran past, and the others run once it is done.
#[test]
fn an_activity_without_checks_is_reported_not_stopped() {
    let (overruns, other_ran_after, preemptions) = in_root(1, Duration::from_micros(500), || {
        let done = Rc::new(Cell::new(false));
        let d = done.clone();
        let hog = thread::spawn_local(move || {
            // 30 ms of this OS thread's CPU time, not of the clock: a VM
            // stall (or the stall emulator) eats wall time without slices
            // counted in it (each stall's expiries are counted once).
            let t0 = thread_cpu_time();
            while thread_cpu_time() - t0 < Duration::from_millis(30) {
                spin(1_000);
            }
            d.set(true);
        });
        let d = done.clone();
        let other = thread::spawn_local(move || d.get());
        thread::yield_now(); // both run now, the hog first
        let other_ran_after = other.join().unwrap();
        let stats = hog.thread_stats();
        hog.join().unwrap();
        (stats.overruns, other_ran_after, stats.preemptions)
    });
    assert_eq!(preemptions, 0, "an activity was preempted");
    assert!(overruns >= 10, "{overruns} slices of 500 us counted in a 30 ms run without checks");
    assert!(other_ran_after, "the other activity ran in the middle of the hog");
}

/// Inside `no_yield`, neither yield checks, yields nor sleeps switch:
/// another activity never sees the state in between.
#[test]
fn no_yield_scopes_hold_every_switch() {
    let seen_inside = in_root(1, Duration::from_micros(100), || {
        let inside = Rc::new(Cell::new(false));
        let seen = Rc::new(Cell::new(0u32));
        let i = inside.clone();
        let worker = thread::spawn_local(move || {
            for _ in 0..20 {
                thread::no_yield(|| {
                    i.set(true);
                    for k in 0..20 {
                        spin(5_000);
                        thread::checkpoint();
                        thread::yield_now();
                        if k % 5 == 0 {
                            thread::sleep(Duration::from_micros(300)); // blocks: no park
                        }
                    }
                    i.set(false);
                });
                thread::yield_now();
            }
        });
        let (i, s) = (inside.clone(), seen.clone());
        let watcher = thread::spawn_local(move || {
            for _ in 0..200 {
                if i.get() {
                    s.set(s.get() + 1);
                }
                thread::yield_now();
            }
        });
        worker.join().unwrap();
        watcher.join().unwrap();
        seen.get()
    });
    assert_eq!(seen_inside, 0, "another activity ran inside a no-yield scope");
}

/// `spawn_local` from preemptive code, or off the workers, is an error.
#[test]
fn spawn_local_is_refused_where_it_would_be_unsound() {
    let outside = Builder::new().spawn_local(|| ()).unwrap_err();
    assert!(outside.to_string().contains("outside a worker"), "{outside}");
    let rt = runtime(1, Duration::from_millis(2));
    let h = Builder::new()
        .spawn_on(rt.handle(), || Builder::new().spawn_local(|| ()).err().map(|e| e.to_string()))
        .unwrap();
    let e = h.join().unwrap().expect("spawn_local from a preemptive green thread was accepted");
    assert!(e.contains("preemptible"), "{e}");
    // From a preemptible function an activity launched: refused too (it
    // could be stopped in the middle of what it shared).
    let h = Builder::new()
        .preemptive(false)
        .spawn_on(rt.handle(), || {
            let l = linger::launch(|| Builder::new().spawn_local(|| ()).err().map(|e| e.to_string()), Duration::from_secs(10)).unwrap();
            l.completion().expect("the nested function ended")
        })
        .unwrap();
    let e = h.join().unwrap().expect("spawn_local from a preemptible function inside an activity was accepted");
    assert!(e.contains("preemptible"), "{e}");
    // From an activity it works, and so does joining.
    let h = Builder::new().preemptive(false).spawn_on(rt.handle(), || thread::spawn_local(|| 5).join().unwrap()).unwrap();
    assert_eq!(h.join().unwrap(), 5);
}

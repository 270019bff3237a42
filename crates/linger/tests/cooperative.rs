//! `resume_contained_cooperative`: a deadline bumps the function's flag and
//! never stops it; the function yields where it checks the flag.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linger::Linger;

/// Spins for `d` of wall time (the deadline's signals interrupt it).
fn spin_for(d: Duration) {
    let t0 = Instant::now();
    let mut x = 0u64;
    while t0.elapsed() < d {
        x = black_box(x.wrapping_add(1));
    }
}

/// A function that checks the flag between steps yields only there: the
/// resume returns exactly once per yield, and linger stops it never.
#[test]
fn it_yields_at_its_checks_only() {
    std::thread::spawn(|| {
        let flag = Arc::new(AtomicU32::new(0));
        let steps = Arc::new(AtomicU64::new(0));
        let yields = Arc::new(AtomicU64::new(0));
        let (f, s, y) = (flag.clone(), steps.clone(), yields.clone());
        let mut l = linger::launch(
            move || {
                for _ in 0..400 {
                    spin_for(Duration::from_micros(30));
                    s.fetch_add(1, Ordering::Relaxed);
                    if f.swap(0, Ordering::Relaxed) != 0 {
                        y.fetch_add(1, Ordering::Relaxed);
                        linger::pause();
                    }
                }
            },
            Duration::ZERO,
        )
        .unwrap();
        let before = linger::stats().preemptions;
        let mut resumes = 0u64;
        while matches!(l, Linger::Continuation(_)) {
            let taken = steps.load(Ordering::Relaxed);
            assert!(linger::resume_contained_cooperative(&mut l, Duration::from_micros(200), &flag).unwrap().is_none());
            resumes += 1;
            // Each return is a yield (or the end), after at least one step.
            assert!(steps.load(Ordering::Relaxed) > taken || matches!(l, Linger::Completion(_)));
        }
        assert_eq!(linger::stats().preemptions, before, "a cooperative function was stopped");
        assert_eq!(resumes, yields.load(Ordering::Relaxed) + 1);
        assert!(yields.load(Ordering::Relaxed) >= 10, "only {} yields in 12 ms at 200 us", yields.load(Ordering::Relaxed));
        eprintln!("{} yields for 400 steps of 30 us at a 200 us period", yields.load(Ordering::Relaxed));
    })
    .join()
    .unwrap();
}

/// One that never checks runs to its end; the flag counts the periods it
/// overran (for a scheduler to report).
#[test]
fn one_that_never_checks_is_counted_not_stopped() {
    std::thread::spawn(|| {
        let flag = AtomicU32::new(0);
        let mut l = linger::launch(|| spin_for(Duration::from_millis(20)), Duration::ZERO).unwrap();
        assert!(linger::resume_contained_cooperative(&mut l, Duration::from_micros(500), &flag).unwrap().is_none());
        assert!(matches!(l, Linger::Completion(())));
        let n = flag.load(Ordering::Relaxed);
        assert!(n >= 10, "{n} periods counted in 20 ms at 500 us");
        eprintln!("{n} periods of 500 us counted in a 20 ms run without checks");
    })
    .join()
    .unwrap();
}

/// A preemptible function launched inside a cooperative one keeps its own
/// deadline; the cooperative parent is not stopped when the child returns
/// after the parent's period.
#[test]
fn a_nested_function_keeps_its_own_deadline() {
    std::thread::spawn(|| {
        let flag = AtomicU32::new(0);
        let mut l = linger::launch(
            || {
                let mut child = linger::launch(|| spin_for(Duration::from_millis(5)), Duration::from_micros(300)).unwrap();
                let mut stops = 0;
                while matches!(child, Linger::Continuation(_)) {
                    stops += 1;
                    linger::resume(&mut child, Duration::from_micros(300)).unwrap();
                }
                stops
            },
            Duration::ZERO,
        )
        .unwrap();
        let before = linger::stats().preemptions;
        assert!(linger::resume_contained_cooperative(&mut l, Duration::from_millis(1), &flag).unwrap().is_none());
        let Linger::Completion(stops) = l else { panic!("the cooperative parent was stopped") };
        assert!(stops >= 3, "the child was stopped {stops} times in 5 ms at 300 us");
        assert_eq!(linger::stats().preemptions - before, stops, "only the child is preempted");
        assert!(flag.load(Ordering::Relaxed) >= 1);
    })
    .join()
    .unwrap();
}

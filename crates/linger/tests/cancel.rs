//! Cancellation: unwinding where it is defined (destructors run, counted),
//! reclaiming without unwinding where it is not; nothing leaks from the runtime.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use linger::{critical, launch, pause, resume, Cancelled, Linger};

struct Counted(&'static AtomicUsize);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn spin_forever() -> ! {
    let mut x = 0u64;
    loop {
        x = x.wrapping_add(1);
        std::hint::black_box(x);
    }
}

#[test]
fn cancelling_a_paused_function_runs_its_destructors() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    let drops = &DROPS;
    let before = linger::stats();
    for i in 0..2000 {
        let mut l = launch(
            || {
                let _a = Counted(drops);
                let v = vec![Counted(drops), Counted(drops)];
                let _b = Box::new(Counted(drops));
                pause();
                drop(v);
                unreachable!("cancelled functions never continue");
            },
            Duration::MAX,
        )
        .unwrap();
        assert!(l.yielded());
        if i % 2 == 0 {
            assert_eq!(l.cancel(), Cancelled::Unwound);
            assert!(l.is_poison());
        } else {
            drop(l);
        }
        assert_eq!(drops.load(Ordering::SeqCst), (i + 1) * 4);
    }
    let after = linger::stats();
    assert_eq!(after.cancels_unwound - before.cancels_unwound, 2000);
}

#[test]
fn cancelling_after_a_deferred_preemption_unwinds() {
    // A deadline inside a critical scope is taken at the scope's end, a call
    // site: cancellation can unwind from there.
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    let (drops, started) = (&DROPS, &STARTED);
    let mut unwound = 0;
    for _ in 0..200 {
        let mut l = launch(
            || {
                let _a = Counted(drops);
                started.fetch_add(1, Ordering::SeqCst);
                critical(|| {
                    let t = std::time::Instant::now();
                    while t.elapsed() < Duration::from_micros(300) {}
                });
                spin_forever()
            },
            Duration::from_micros(50),
        )
        .unwrap();
        assert!(l.is_continuation());
        let before = drops.load(Ordering::SeqCst);
        let ran = started.swap(0, Ordering::SeqCst) == 1;
        match l.cancel() {
            // A deadline can also pass before the function's first
            // instruction (taken as it lands): then `_a` does not exist yet.
            Cancelled::Unwound => {
                unwound += 1;
                assert_eq!(drops.load(Ordering::SeqCst), before + ran as usize);
            }
            Cancelled::Reclaimed => assert_eq!(drops.load(Ordering::SeqCst), before),
            Cancelled::NotNeeded | Cancelled::Finished => unreachable!(),
        }
    }
    assert!(unwound > 150, "deadline inside critical should be taken at its end: {unwound}/200");
}

#[test]
fn cancelling_a_preempted_function_reclaims_without_unwinding() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    let drops = &DROPS;
    let stacks = linger::stack::live_stacks();
    let (abandoned, _) = linger::stack::abandoned_stacks();
    for _ in 0..300 {
        let mut l = launch(
            || {
                let _a = Counted(drops);
                spin_forever()
            },
            Duration::from_micros(100),
        )
        .unwrap();
        resume(&mut l, Duration::from_micros(100)).unwrap();
        assert!(l.is_continuation() && !l.yielded());
        assert_eq!(l.cancel(), Cancelled::Reclaimed);
    }
    // Destructors of a function stopped at an arbitrary instruction do not run...
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    // ...and the live part of its stack is kept, never reused (see the
    // soundness tests); the rest of the stack was released.
    assert!(linger::stack::live_stacks() <= stacks + 64, "stacks leaked");
    assert!(linger::stack::abandoned_stacks().0 >= abandoned + 300);
}

#[test]
fn cancelling_a_never_started_function_drops_its_captures() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    let drops = &DROPS;
    for _ in 0..500 {
        let c = Counted(drops);
        let l: Linger<()> = launch(
            move || {
                let _c = c;
                unreachable!()
            },
            Duration::ZERO,
        )
        .unwrap();
        drop(l);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 500);
}

#[test]
fn completed_functions_need_no_cancel() {
    let mut l = launch(|| 1, Duration::MAX).unwrap();
    assert_eq!(l.cancel(), Cancelled::NotNeeded);
    assert_eq!(l.completion(), Some(1));
}

#[test]
fn nested_functions_are_cancelled_with_their_parent() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    let drops = &DROPS;
    for _ in 0..200 {
        let mut outer = launch(
            || {
                let _o = Counted(drops);
                let inner = launch(
                    || {
                        let _i = Counted(drops);
                        pause();
                    },
                    Duration::MAX,
                )
                .unwrap();
                assert!(inner.yielded());
                pause();
                drop(inner);
            },
            Duration::MAX,
        )
        .unwrap();
        assert!(outer.yielded());
        assert_eq!(outer.cancel(), Cancelled::Unwound);
    }
    // Unwinding the outer function dropped the inner continuation, which
    // cancelled (and unwound) it in turn.
    assert_eq!(drops.load(Ordering::SeqCst), 400);
}

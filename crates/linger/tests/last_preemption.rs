//! `last_preemption()`: after a resume that came back preempted, how late
//! the stop was and whether it waited for code that must not be
//! interrupted (what a scheduler reports per task).

use std::time::{Duration, Instant};

use linger::{launch, last_preemption, resume, Linger};

/// Computation in our own code only (no clock reads: those are in libc or
/// the vDSO, where a deadline is deferred).
fn crunch(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    acc
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn a_stop_in_own_code_is_not_deferred_and_one_after_a_critical_scope_is() {
    std::thread::spawn(|| {
        assert_eq!(last_preemption(), None, "a fresh thread has seen no preemption");
        let (mut plain, mut late) = (0, 0);
        for round in 0..200 {
            // Spins in its own code well past the deadline: stopped there.
            let mut l = launch(|| crunch(u64::MAX), Duration::from_micros(100)).unwrap();
            assert!(l.is_continuation(), "round {round}: not preempted");
            let p = last_preemption().expect("a preemption is recorded");
            plain += (!p.deferred) as u32;
            l.cancel();
            // The deadline passes inside a critical scope: the stop waits
            // for its end.
            let mut l = launch(
                || {
                    linger::critical(|| spin(Duration::from_micros(600)));
                    spin(Duration::from_millis(5));
                },
                Duration::from_micros(100),
            )
            .unwrap();
            assert!(l.is_continuation(), "round {round}: not preempted");
            let p = last_preemption().expect("a preemption is recorded");
            // Stopped at the scope's end, 500 us past the deadline (unless
            // the VM stalled the launch past its deadline before the scope).
            late += (p.deferred && p.overrun_ns >= 400_000) as u32;
            while let Linger::Continuation(_) = resume(&mut l, Duration::from_millis(50)).unwrap() {}
        }
        // A stop in own code is deferred only if the signal happened to land
        // in deferred code (the launch's own tail: rare): most are not.
        assert!(late >= 190, "only {late} of 200 stops at a scope's end reported deferred and late");
        assert!(plain > 150, "only {plain} of 200 stops in own code reported not deferred");
    })
    .join()
    .unwrap();
}

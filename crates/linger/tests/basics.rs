//! Launch, timeout, resume, pause, zero and infinite timeouts, nesting,
//! panics, bad input. Each case loops many times.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use linger::{launch, pause, resume, Builder, Error, Linger};

fn spin_for(d: Duration) -> u64 {
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed() < d {
        n = n.wrapping_add(1);
        std::hint::black_box(n);
    }
    n
}

fn busy(iters: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    std::hint::black_box(x)
}

#[test]
fn completes_within_timeout() {
    for i in 0..2000u64 {
        let l = launch(move || i * 2, Duration::from_millis(100)).unwrap();
        assert_eq!(l.completion(), Some(i * 2));
    }
}

#[test]
fn borrows_non_static_data_in_a_scope() {
    let data = [1u64, 2, 3];
    let mut out = 0;
    linger::scope(|s| {
        let l = s.launch(|| out = data.iter().sum(), Duration::from_secs(1)).unwrap();
        assert!(l.is_completion());
    });
    assert_eq!(out, 6);
}

#[test]
fn times_out_and_resumes_to_completion() {
    let expected = busy(20_000_000);
    for _ in 0..20 {
        let t = Instant::now();
        let mut l = launch(|| busy(20_000_000), Duration::from_micros(500)).unwrap();
        let first = t.elapsed();
        assert!(l.is_continuation(), "20M iterations cannot finish in 500 us");
        assert!(!l.yielded());
        assert!(first < Duration::from_millis(100), "first slice took {first:?}");
        let mut slices = 1;
        while !l.is_completion() {
            resume(&mut l, Duration::from_micros(500)).unwrap();
            slices += 1;
        }
        assert!(slices > 2);
        assert_eq!(l.completion(), Some(expected));
    }
}

#[test]
fn zero_timeout_only_sets_up() {
    static RAN: AtomicUsize = AtomicUsize::new(0);
    for i in 0..1000 {
        let mut l = launch(|| RAN.fetch_add(1, Ordering::SeqCst), Duration::ZERO).unwrap();
        assert!(l.is_continuation());
        if let Linger::Continuation(c) = &l {
            assert!(!c.started());
        }
        assert_eq!(RAN.load(Ordering::SeqCst), i, "function must not have run");
        // resume with zero does nothing either
        resume(&mut l, Duration::ZERO).unwrap();
        assert_eq!(RAN.load(Ordering::SeqCst), i);
        resume(&mut l, Duration::MAX).unwrap();
        assert_eq!(l.completion(), Some(i));
    }
}

#[test]
fn infinite_timeout_runs_to_completion() {
    for _ in 0..5 {
        let l = launch(|| spin_for(Duration::from_millis(30)), Duration::MAX).unwrap();
        assert!(l.is_completion());
    }
    let before = linger::stats().preemptions;
    let l = launch(|| busy(50_000_000), Duration::MAX).unwrap();
    assert!(l.is_completion());
    assert_eq!(linger::stats().preemptions, before, "no deadline, no preemption");
}

#[test]
fn huge_timeout_does_not_overflow() {
    let l = launch(|| 5, Duration::from_secs(u64::MAX / 4)).unwrap();
    assert_eq!(l.completion(), Some(5));
    let l = launch(|| 6, Duration::new(u64::MAX, 999_999_999)).unwrap();
    assert_eq!(l.completion(), Some(6));
}

#[test]
fn pause_yields_and_resumes() {
    for _ in 0..500 {
        let mut l = launch(
            || {
                let mut v = Vec::new();
                for i in 0..5 {
                    v.push(i);
                    pause();
                }
                v
            },
            Duration::MAX,
        )
        .unwrap();
        let mut pauses = 0;
        while l.is_continuation() {
            assert!(l.yielded());
            pauses += 1;
            resume(&mut l, Duration::MAX).unwrap();
        }
        assert_eq!(pauses, 5);
        assert_eq!(l.completion(), Some(vec![0, 1, 2, 3, 4]));
    }
}

#[test]
fn pause_outside_is_a_no_op() {
    for _ in 0..1000 {
        assert!(!linger::is_preemptible());
        pause();
    }
}

#[test]
fn resuming_a_completed_function_does_nothing() {
    let mut l = launch(|| 3, Duration::from_secs(1)).unwrap();
    for _ in 0..10 {
        resume(&mut l, Duration::from_secs(1)).unwrap();
    }
    assert_eq!(l.completion(), Some(3));
}

#[test]
fn nested_launches_respect_the_outer_deadline() {
    for _ in 0..50 {
        let t = Instant::now();
        let mut outer = launch(
            || {
                // The inner function asks for 1 s, but the outer has only 2 ms.
                let mut inner = launch(|| spin_for(Duration::from_millis(200)), Duration::from_secs(1)).unwrap();
                let inner_done_first = inner.is_completion();
                while !inner.is_completion() {
                    resume(&mut inner, Duration::from_secs(1)).unwrap();
                }
                inner_done_first
            },
            Duration::from_millis(2),
        )
        .unwrap();
        let first = t.elapsed();
        assert!(outer.is_continuation());
        assert!(first < Duration::from_millis(100), "outer deadline ignored: {first:?}");
        while !outer.is_completion() {
            resume(&mut outer, Duration::from_millis(2)).unwrap();
        }
        assert_eq!(outer.completion(), Some(false), "inner must have been cut off by the outer deadline");
    }
}

#[test]
fn deeply_nested_pause_reaches_the_innermost_caller() {
    let mut l = launch(
        || {
            let mut inner = launch(
                || {
                    pause();
                    1
                },
                Duration::MAX,
            )
            .unwrap();
            assert!(inner.yielded());
            resume(&mut inner, Duration::MAX).unwrap();
            inner.completion().unwrap() + 1
        },
        Duration::MAX,
    )
    .unwrap();
    assert!(l.is_completion());
    assert_eq!(std::mem::replace(&mut l, Linger::Poison).completion(), Some(2));
}

#[test]
fn panic_propagates_and_poisons() {
    for _ in 0..100 {
        let r = std::panic::catch_unwind(|| launch(|| -> u32 { panic!("boom") }, Duration::MAX));
        let msg = r.unwrap_err();
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"boom"));
    }
    let mut l = launch(
        || {
            pause();
            panic!("later")
        },
        Duration::MAX,
    )
    .unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = resume(&mut l, Duration::MAX);
    }));
    assert!(r.is_err());
    assert!(l.is_poison());
    assert!(matches!(resume(&mut l, Duration::MAX), Err(Error::Poisoned)));
}

#[test]
fn tiny_stack_sizes_are_rounded_up() {
    let l = Builder::new().stack_size(1).launch(|| 1, Duration::MAX).unwrap();
    assert_eq!(l.completion(), Some(1));
    assert!(matches!(Builder::new().stack_size(usize::MAX).launch(|| 1, Duration::MAX), Err(Error::Config(_))));
}

#[test]
fn fp_control_state_survives_preemption() {
    // The caller runs with a non-default rounding mode; the function with
    // another. Both must keep theirs across thousands of preemptions.
    fn set_mxcsr(v: u32) {
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &v) };
    }
    fn get_mxcsr() -> u32 {
        let mut v = 0u32;
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v) };
        v
    }
    let round_down = (0x1F80 & !0x6000) | 0x2000;
    let round_zero = 0x1F80 | 0x6000;
    let saved = get_mxcsr();
    set_mxcsr(round_down);
    let mut l = launch(
        move || {
            set_mxcsr(round_zero);
            let mut bad = 0u32;
            let mut acc = 0.0f64;
            for i in 0..3_000_000u64 {
                acc += (i as f64).sqrt() / 3.0;
                if get_mxcsr() & 0x6000 != 0x6000 {
                    bad += 1;
                }
            }
            (bad, acc)
        },
        Duration::from_micros(50),
    )
    .unwrap();
    let mut n = 0;
    while !l.is_completion() {
        assert_eq!(get_mxcsr() & 0x6000, 0x2000, "caller lost its rounding mode");
        resume(&mut l, Duration::from_micros(50)).unwrap();
        n += 1;
    }
    assert_eq!(get_mxcsr() & 0x6000, 0x2000);
    set_mxcsr(saved);
    let (bad, acc) = l.completion().unwrap();
    assert!(n > 10, "expected preemptions, got {n}");
    assert_eq!(bad, 0, "function lost its rounding mode");
    // Recompute in the same mode without preemption: bit-identical.
    set_mxcsr(round_zero);
    let mut want = 0.0f64;
    for i in 0..3_000_000u64 {
        want += (i as f64).sqrt() / 3.0;
    }
    set_mxcsr(saved);
    assert_eq!(acc.to_bits(), want.to_bits());
}

/// The same across pauses (switches that are calls on both sides), with
/// the caller changing its mode between resumes and the function changing
/// its own between pauses: each side sees its own after every switch, and
/// a function that ends leaves the caller its own too.
#[test]
fn fp_control_state_survives_pauses() {
    fn set_mxcsr(v: u32) {
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &v) };
    }
    fn get_mxcsr() -> u32 {
        let mut v = 0u32;
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v) };
        v & 0x6000
    }
    const MODES: [u32; 4] = [0x0000, 0x2000, 0x4000, 0x6000];
    let saved = {
        let mut v = 0u32;
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v) };
        v
    };
    for round in 0..200usize {
        let mut l = launch(
            move || {
                let mut bad = 0u32;
                for i in 0..50usize {
                    let mine = MODES[(round + i) % 4];
                    set_mxcsr((0x1F80 & !0x6000) | mine);
                    pause();
                    if get_mxcsr() != mine {
                        bad += 1;
                    }
                }
                // Ends with a mode of its own: the caller must not get it.
                set_mxcsr(0x1F80 | 0x6000);
                bad
            },
            Duration::from_secs(10),
        )
        .unwrap();
        let mut i = 0usize;
        while !l.is_completion() {
            let caller = MODES[(round * 3 + i) % 4];
            set_mxcsr((0x1F80 & !0x6000) | caller);
            resume(&mut l, Duration::from_secs(10)).unwrap();
            assert_eq!(get_mxcsr(), caller, "round {round}, switch {i}: the caller lost its rounding mode");
            i += 1;
        }
        assert_eq!(l.completion().unwrap(), 0, "round {round}: the function lost its rounding mode");
    }
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &saved) };
}

#[test]
fn every_resume_makes_progress_even_with_tiny_slices() {
    // Slices shorter than the cost of arming the timer (several us in VMs)
    // must still let the function run: the deadline is postponed, not taken
    // before the function's first instruction.
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    let mut l = launch(
        || -> () {
            loop {
                N.fetch_add(1, Ordering::Relaxed);
            }
        },
        Duration::from_micros(1),
    )
    .unwrap();
    let mut stalled = 0;
    for _ in 0..2000 {
        let before = N.load(Ordering::Relaxed);
        resume(&mut l, Duration::from_micros(2)).unwrap();
        if N.load(Ordering::Relaxed) == before {
            stalled += 1;
        }
    }
    assert!(stalled < 20, "{stalled} of 2000 resumes made no progress");
}

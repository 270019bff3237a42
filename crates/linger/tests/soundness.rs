//! The Rust API's soundness guarantees (docs/safety.md, "Soundness of the
//! Rust API"), checked at run time; the patterns that must not compile are
//! `compile_fail` doctests on `launch` and `scope`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use linger::{launch, pause, resume, Cancelled};

fn strings() -> Vec<String> {
    (0..20_000).map(|i| format!("{:08}", (i * 7919) % 20_000)).collect()
}

/// No two `String`s share a buffer, and the values are the expected ones.
fn intact(v: &[String]) -> bool {
    let unique: HashSet<*const u8> = v.iter().map(|s| s.as_ptr()).collect();
    let mut got: Vec<&str> = v.iter().map(|s| s.as_str()).collect();
    got.sort_unstable();
    let want = strings();
    let mut want: Vec<&str> = want.iter().map(|s| s.as_str()).collect();
    want.sort_unstable();
    unique.len() == v.len() && got == want
}

/// The example, made to compile the only way it can: in a scope.
/// Dropping or cancelling the handle mid-sort never hands the caller a
/// half-merged vector (with `launch` and a reclaim, about 1 round in 10 left
/// aliased buffers).
#[test]
fn a_scope_never_ends_with_a_half_sorted_vector() {
    let mut finished = 0;
    for round in 0..400u64 {
        let mut v = strings();
        // Timeouts spread over the sort's length (a few ms on these VMs).
        let timeout = Duration::from_micros(20 + (round * 37) % 3000);
        linger::scope(|s| {
            let mut l = s.launch(|| v.sort(), timeout).unwrap();
            match round % 3 {
                0 => drop(l),
                1 => {
                    if l.cancel() == Cancelled::Finished {
                        finished += 1;
                    }
                }
                _ => std::mem::forget(l),
            }
        });
        assert!(intact(&v), "round {round}: aliased or lost strings");
        // Whatever happened, the sort either ran to its end or not at all.
        assert!(v.windows(2).all(|w| w[0] <= w[1]) || v == strings(), "round {round}: half-sorted");
    }
    assert!(finished > 0, "no cancel found the sort stopped mid-way");
}

/// A `'static` function that owns its data through a lock: abandoned at an
/// arbitrary instruction, it leaves the lock held (never the data half-updated
/// and reachable).
#[test]
fn a_reclaimed_function_leaves_its_lock_held() {
    let mut held = 0;
    for round in 0..100u64 {
        let data = Arc::new(Mutex::new(strings()));
        let d = data.clone();
        let mut l = launch(move || d.lock().unwrap().sort(), Duration::from_micros(50 + round * 20)).unwrap();
        if !l.is_continuation() {
            continue;
        }
        let reclaimed = l.cancel() == Cancelled::Reclaimed;
        match data.try_lock() {
            Ok(v) => assert!(intact(&v)),
            Err(TryLockError::WouldBlock) => {
                assert!(reclaimed);
                held += 1;
            }
            Err(TryLockError::Poisoned(_)) => panic!("nothing panicked"),
        };
    }
    assert!(held > 0, "no round stopped the sort inside the lock");
}

static PINNED_AT: AtomicUsize = AtomicUsize::new(0);
const PATTERN: [u64; 8] = [0x5A5A_0000_1111_2222, 1, 2, 3, 4, 5, 6, 0xA5A5_3333_4444_5555];

/// A value pinned on a reclaimed function's stack (as a future inside
/// `block_on`, or a waiter node linked into a queue, is) must stay valid:
/// its destructor never ran, so `Pin` forbids reusing its memory. The stack
/// is therefore never recycled, though later launches would reuse a
/// recycled one at once.
#[test]
fn a_reclaimed_stack_is_never_reused() {
    for _ in 0..200 {
        PINNED_AT.store(0, Ordering::SeqCst);
        let mut l = launch(
            || {
                let node = std::pin::pin!(PATTERN);
                PINNED_AT.store(&*node as *const [u64; 8] as usize, Ordering::SeqCst);
                let mut x = 0u64;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            },
            Duration::from_micros(100),
        )
        .unwrap();
        while PINNED_AT.load(Ordering::SeqCst) == 0 {
            resume(&mut l, Duration::from_micros(100)).unwrap();
        }
        assert_eq!(l.cancel(), Cancelled::Reclaimed);
        // Functions that scribble all over their stacks.
        for _ in 0..8 {
            let mut l = launch(
                || {
                    let buf = [0xFFu8; 32 * 1024];
                    std::hint::black_box(&buf);
                    pause();
                },
                Duration::MAX,
            )
            .unwrap();
            l.cancel();
        }
        let at = PINNED_AT.load(Ordering::SeqCst) as *const [u64; 8];
        // SAFETY: the pinned value's memory must still be valid: that is
        // what this test checks (it would read unmapped or reused memory if
        // the runtime had recycled the stack).
        assert_eq!(unsafe { std::ptr::read_volatile(at) }, PATTERN);
    }
}

#[test]
fn scoped_functions_are_finished_or_unwound_at_the_end() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Counted;
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    for _ in 0..200 {
        let mut total = 0u64;
        let mut steps = 0u32;
        let before = DROPS.load(Ordering::SeqCst);
        linger::scope(|s| {
            // Paused at a call: unwound at the end, destructor runs.
            let paused = s
                .launch(
                    || {
                        let _c = Counted;
                        steps += 1;
                        pause();
                        steps += 100;
                    },
                    Duration::MAX,
                )
                .unwrap();
            assert!(paused.yielded());
            // Stopped by its deadline: finished at the end.
            let _busy = s
                .launch(
                    || {
                        for i in 0..3_000_000u64 {
                            total = std::hint::black_box(total.wrapping_add(i));
                        }
                    },
                    Duration::from_micros(30),
                )
                .unwrap();
        });
        assert_eq!(steps, 1, "the paused function must be unwound, not continued");
        assert_eq!(DROPS.load(Ordering::SeqCst), before + 1);
        assert_eq!(total, (0..3_000_000u64).sum::<u64>());
    }
}

#[test]
fn join_and_completion() {
    let data: Vec<u64> = (0..200_000).collect();
    let sum = linger::scope(|s| {
        let l = s.launch(|| data.iter().sum::<u64>(), Duration::from_micros(30)).unwrap();
        l.join().unwrap()
    });
    assert_eq!(sum, data.iter().sum());
    let first = linger::scope(|s| s.launch(|| data[0], Duration::MAX).unwrap().completion());
    assert_eq!(first, Some(0));
}

#[test]
fn a_panic_while_the_scope_finishes_reaches_its_caller() {
    let mut reached = false;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        linger::scope(|s| {
            let l = s
                .launch(
                    || {
                        let t = std::time::Instant::now();
                        while t.elapsed() < Duration::from_millis(2) {}
                        reached = true;
                        panic!("late");
                    },
                    Duration::from_micros(30),
                )
                .unwrap();
            drop(l);
        })
    }));
    assert!(r.is_err());
    assert!(reached);
}

#[test]
fn functions_are_finished_even_when_the_scope_body_panics() {
    let mut done = false;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        linger::scope(|s| {
            let _l = s
                .launch(
                    || {
                        let t = std::time::Instant::now();
                        while t.elapsed() < Duration::from_millis(2) {}
                        done = true;
                    },
                    Duration::from_micros(30),
                )
                .unwrap();
            panic!("body");
        })
    }));
    assert!(r.is_err());
    assert!(done);
}

#[test]
fn long_scopes_do_not_keep_finished_functions() {
    let mut n = 0u64;
    linger::scope(|s| {
        for i in 0..100_000u64 {
            let l = s.launch(move || i, Duration::MAX).unwrap();
            n += l.completion().unwrap();
        }
    });
    assert_eq!(n, (0..100_000u64).sum());
}

#[test]
fn scoped_functions_cannot_be_migratable() {
    // SAFETY: never resumed anywhere (the launch is refused).
    let b = unsafe { linger::Builder::new().migratable(true) };
    linger::scope(|s| {
        assert!(matches!(s.launch_with(&b, || (), Duration::MAX), Err(linger::Error::Config(_))));
    });
}

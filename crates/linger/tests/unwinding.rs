//! Per-thread state that follows the flow of control: a function must not
//! hand its own to its caller by stopping in the middle of it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use linger::{launch, pause, resume, Error};

/// A `Drop` that runs during unwinding, pauses and computes for a while.
struct SlowDrop(u32);

impl Drop for SlowDrop {
    fn drop(&mut self) {
        for i in 0..self.0 {
            pause(); // must not stop here: the thread is unwinding
            std::hint::black_box((0..2_000u64).fold(i as u64, |a, x| a ^ x.wrapping_mul(x)));
        }
    }
}

/// A function stopped while unwinding would make `panicking()` true in its
/// caller, which then poisons its own mutexes (its guards see a panic).
#[test]
fn never_stopped_while_unwinding() {
    std::panic::set_hook(Box::new(|_| {})); // the panics below are expected
    let mine = Mutex::new(0u32);
    for round in 0..300 {
        let seen = Arc::new(Mutex::new(false));
        let s = seen.clone();
        let mut l = launch(
            move || {
                let r = std::panic::catch_unwind(|| {
                    let _d = SlowDrop(50);
                    panic!("expected");
                });
                assert!(r.is_err());
                // Its own panic is over: it can stop again.
                pause();
                *s.lock().unwrap() = !std::thread::panicking();
            },
            Duration::from_micros(5),
        )
        .unwrap();
        while !l.is_completion() {
            assert!(!std::thread::panicking(), "caller sees the function's panic (round {round})");
            {
                let _g = mine.lock().unwrap();
            }
            resume(&mut l, Duration::from_micros(5)).unwrap();
        }
        assert!(!mine.is_poisoned(), "caller's mutex poisoned (round {round})");
        assert!(*seen.lock().unwrap());
    }
}

/// Launching or resuming while the caller unwinds is refused: the function
/// would share its panic count and could not be stopped.
#[test]
fn refused_while_the_caller_unwinds() {
    std::panic::set_hook(Box::new(|_| {}));
    struct Launcher;
    impl Drop for Launcher {
        fn drop(&mut self) {
            assert!(std::thread::panicking());
            let r = launch(|| loop { std::hint::black_box(0); }, Duration::from_micros(50));
            assert!(matches!(r, Err(Error::NotHere(_))), "launch while unwinding: {r:?}");
            // Setting up (zero timeout) and cancelling stay allowed.
            let l = launch(|| 1, Duration::ZERO).unwrap();
            drop(l);
        }
    }
    for _ in 0..20 {
        let r = std::panic::catch_unwind(|| {
            let _l = Launcher;
            panic!("expected");
        });
        assert!(r.is_err());
    }
}

//! Functions that leave abnormally, and cancellations that panic: the
//! process keeps going and the runtime stays usable.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use linger::{launch, pause, Linger};

/// Panics when dropped.
struct Bomb;
impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("bomb");
    }
}

/// Cancels `l` by dropping it or by `cancel`, and checks that the panic
/// `msg` comes out of that as an ordinary panic.
fn cancel_expecting_panic<T>(mut l: Linger<T>, by_drop: bool, msg: &str) {
    let r = if by_drop {
        catch_unwind(AssertUnwindSafe(|| drop(l)))
    } else {
        let r = catch_unwind(AssertUnwindSafe(|| {
            l.cancel();
        }));
        assert!(l.is_poison());
        r
    };
    let p = r.expect_err("the panic reaches the canceller");
    assert_eq!(p.downcast_ref::<&str>(), Some(&msg));
}

fn quiet_panics() {
    std::panic::set_hook(Box::new(|_| {}));
}

#[test]
fn cancelling_an_unstarted_function_whose_capture_panics_in_drop() {
    quiet_panics();
    for i in 0..2000 {
        let b = Bomb;
        let l = launch(
            move || {
                let _b = &b;
                1
            },
            Duration::ZERO,
        )
        .unwrap();
        assert!(l.is_continuation());
        cancel_expecting_panic(l, i % 2 == 0, "bomb");
        // The runtime is intact: no scope left open, launches work.
        assert!(!linger::is_preemptible());
        let again = launch(|| 5, Duration::from_millis(100)).unwrap();
        assert_eq!(again.completion(), Some(5));
    }
}

#[test]
fn a_function_that_catches_its_cancellation_and_panics_anew() {
    quiet_panics();
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    let drops = &DROPS;
    struct Counted(&'static AtomicUsize);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    for i in 0..2000 {
        let l = launch(
            || {
                let _outer = Counted(drops);
                let r = catch_unwind(AssertUnwindSafe(|| {
                    let _inner = Counted(drops);
                    pause();
                }));
                if r.is_err() {
                    panic!("again");
                }
            },
            Duration::MAX,
        )
        .unwrap();
        assert!(l.yielded());
        cancel_expecting_panic(l, i % 2 == 0, "again");
        assert_eq!(drops.load(Ordering::SeqCst), 2 * (i + 1), "both destructors ran");
        assert!(!linger::is_preemptible());
        let mut again = launch(|| { pause(); 5 }, Duration::MAX).unwrap();
        linger::resume(&mut again, Duration::MAX).unwrap();
        assert_eq!(again.completion(), Some(5));
    }
}

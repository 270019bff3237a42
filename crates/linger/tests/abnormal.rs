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

fn quiet_panics() {
    std::panic::set_hook(Box::new(|_| {}));
}

#[test]
fn cancelling_an_unstarted_function_whose_capture_panics_in_drop() {
    quiet_panics();
    for i in 0..2000 {
        let b = Bomb;
        let mut l = launch(
            move || {
                let _b = &b;
                1
            },
            Duration::ZERO,
        )
        .unwrap();
        assert!(l.is_continuation());
        let r = if i % 2 == 0 {
            catch_unwind(AssertUnwindSafe(|| drop(l)))
        } else {
            let r = catch_unwind(AssertUnwindSafe(|| {
                l.cancel();
            }));
            assert!(l.is_poison());
            r
        };
        let p = r.expect_err("the drop's panic reaches the canceller");
        assert_eq!(p.downcast_ref::<&str>(), Some(&"bomb"));
        // The runtime is intact: no scope left open, launches work.
        assert!(!linger::is_preemptible());
        let again = launch(|| 5, Duration::from_millis(100)).unwrap();
        assert_eq!(again.completion(), Some(5));
    }
}

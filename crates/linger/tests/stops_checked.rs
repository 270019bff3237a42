//! Stops outside the timer handler (the end of a critical scope, `pause()`)
//! ask whether deferred code is on the function's call chain, as the handler
//! does: a scope ending inside a `dl_iterate_phdr` callback, or a `pause()`
//! from a `Display` impl under `write!` to stdout, must not stop the function
//! with the loader lock or the stdout lock held.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use linger::{launch, resume, Linger};

/// Runs `f` on another thread and fails if it does not finish in time (a
/// lock left held by the stopped function would make it hang).
fn within(what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| panic!("{what}: hung (a lock left held)"));
}

static AFTER_ITERATE: AtomicBool = AtomicBool::new(false);

unsafe extern "C" fn spin_in_scope(_: *mut libc::dl_phdr_info, _: libc::size_t, _: *mut libc::c_void) -> libc::c_int {
    // Past the deadline inside a critical scope: its end is where the
    // deadline would be taken, with the loader's lock held by our caller.
    linger::critical(|| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(400) {
            std::hint::spin_loop();
        }
    });
    1
}

fn count_objects() {
    unsafe extern "C" fn cb(_: *mut libc::dl_phdr_info, _: libc::size_t, _: *mut libc::c_void) -> libc::c_int {
        0
    }
    // SAFETY: a callback that touches nothing.
    unsafe { libc::dl_iterate_phdr(Some(cb), std::ptr::null_mut()) };
}

#[test]
fn scope_end_in_a_loader_callback_does_not_stop_under_the_loader_lock() {
    for round in 0..200 {
        AFTER_ITERATE.store(false, Ordering::SeqCst);
        let mut l = launch(
            || {
                // SAFETY: the callback follows dl_iterate_phdr's contract.
                unsafe { libc::dl_iterate_phdr(Some(spin_in_scope), std::ptr::null_mut()) };
                AFTER_ITERATE.store(true, Ordering::SeqCst);
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(2) {
                    std::hint::spin_loop();
                }
            },
            Duration::from_micros(100),
        )
        .unwrap();
        if l.is_continuation() {
            within(&format!("round {round}: dl_iterate_phdr while stopped"), count_objects);
        }
        while l.is_continuation() {
            resume(&mut l, Duration::from_millis(50)).unwrap();
        }
        assert!(matches!(l, Linger::Completion(())), "round {round}");
        assert!(AFTER_ITERATE.load(Ordering::SeqCst));
    }
}

struct Pauses;

impl std::fmt::Display for Pauses {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        linger::pause();
        Ok(())
    }
}

#[test]
fn pause_under_the_stdout_lock_waits_for_the_write_to_return() {
    use std::io::Write;
    for round in 0..200 {
        let mut l = launch(
            || {
                // Writes nothing; `Pauses::fmt` runs with stdout locked.
                write!(std::io::stdout(), "{}", Pauses).unwrap();
                linger::pause();
                7
            },
            Duration::from_secs(5),
        )
        .unwrap();
        let mut stops = 0;
        while l.is_continuation() {
            // Another thread can take the stdout lock whenever it is stopped.
            within(&format!("round {round}: stdout while stopped"), || drop(std::io::stdout().lock()));
            assert!(l.yielded(), "round {round}: a stop that is not the pause");
            stops += 1;
            resume(&mut l, Duration::from_secs(5)).unwrap();
        }
        assert!(matches!(l, Linger::Completion(7)), "round {round}");
        assert!(stops >= 1, "round {round}");
    }
}

//! With `LINGER_SIGNAL` moved to another signal, the default one
//! (`SIGRTMAX-3`) is the program's like any other: a handler installed on it
//! before or after the runtime starts runs, and nothing dies of it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static RUNS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    RUNS.fetch_add(1, Ordering::SeqCst);
}

fn install(sig: i32) {
    // SAFETY: a zeroed sigaction with a plain handler.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
    }
}

#[test]
fn the_default_signal_is_the_programs_when_linger_uses_another() {
    let default = libc::SIGRTMAX() - 3;
    let moved = libc::SIGRTMAX() - 5;
    // The only test in this binary: the runtime has not started.
    std::env::set_var("LINGER_SIGNAL", moved.to_string());
    install(default);
    for i in 0..500 {
        assert_eq!(unsafe { libc::raise(default) }, 0);
        assert_eq!(RUNS.load(Ordering::SeqCst), i + 1, "before the runtime starts");
    }
    let mut l = linger::launch(
        || {
            let mut x = 0u64;
            for i in 0..200_000_000u64 {
                x = std::hint::black_box(x ^ i);
            }
            x
        },
        Duration::from_micros(200),
    )
    .unwrap();
    assert!(l.is_continuation(), "preempted by the moved signal");
    for i in 0..500 {
        assert_eq!(unsafe { libc::raise(default) }, 0);
        assert_eq!(RUNS.load(Ordering::SeqCst), 500 + i + 1, "after the runtime started");
        install(default);
    }
    while l.is_continuation() {
        linger::resume(&mut l, Duration::from_micros(200)).unwrap();
    }
}

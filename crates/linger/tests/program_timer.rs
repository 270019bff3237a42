//! A program's own POSIX timer aimed at the preemption signal is the
//! program's: its expiries reach the handler the program installed on that
//! signal, and linger's own preemption keeps working meanwhile.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static RUNS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    RUNS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn a_program_timer_on_the_preemption_signal_reaches_the_program() {
    linger::init().unwrap();
    let sig = libc::SIGRTMAX() - 3;
    // SAFETY: plain libc calls with valid local structures.
    let timer = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_SIGNAL;
        sev.sigev_signo = sig;
        let mut id: libc::timer_t = std::ptr::null_mut();
        assert_eq!(libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id), 0);
        let every = libc::timespec { tv_sec: 0, tv_nsec: 200_000 };
        let its = libc::itimerspec { it_interval: every, it_value: every };
        assert_eq!(libc::timer_settime(id, 0, &its, std::ptr::null_mut()), 0);
        id
    };
    let mut preempted = 0;
    for _ in 0..200 {
        let mut l = linger::launch(
            || {
                let mut x = 0u64;
                for i in 0..2_000_000u64 {
                    x = std::hint::black_box(x ^ i);
                }
                x
            },
            Duration::from_micros(100),
        )
        .unwrap();
        while l.is_continuation() {
            preempted += 1;
            linger::resume(&mut l, Duration::from_micros(100)).unwrap();
        }
    }
    // SAFETY: our own timer.
    unsafe { libc::timer_delete(timer) };
    assert!(preempted > 0, "linger still preempts");
    assert!(RUNS.load(Ordering::SeqCst) > 0, "the program's timer never reached its handler");
}

//! `Builder::preempt_blocked(false)`: a deadline that passes while the
//! function waits in a system call leaves it waiting, with no more timer
//! signals, and the function is stopped shortly after the call returns.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use linger::{resume, stats, Builder};

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn a_wait_is_left_alone_and_the_function_stopped_after_it() {
    for round in 0..10u8 {
        let (r, w) = pipe();
        // Before the writer starts its 40 ms: a loaded machine may run it
        // before this thread goes on (seen: the 40 ms bound missed).
        let t = Instant::now();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(40));
            let at = Instant::now();
            assert_eq!(unsafe { libc::write(w, [round].as_ptr() as *const libc::c_void, 1) }, 1);
            unsafe { libc::close(w) };
            at
        });
        let before = stats();
        let mut l = Builder::new()
            .preempt_blocked(false)
            .launch(
                move || {
                    let mut b = [0u8; 1];
                    unsafe { *libc::__errno_location() = 0 };
                    let n = unsafe { libc::read(r, b.as_mut_ptr() as *mut libc::c_void, 1) };
                    let err = std::io::Error::last_os_error().raw_os_error();
                    // Runs on after the read: the deadline has long passed.
                    spin_for(Duration::from_secs(2));
                    (n, err, b[0])
                },
                Duration::from_millis(1),
            )
            .unwrap();
        // A stalled machine can take the deadline before the read: resume
        // until a deadline has found it waiting.
        while l.is_continuation() && stats().blocked_deadlines == before.blocked_deadlines {
            resume(&mut l, Duration::from_millis(1)).unwrap();
        }
        let returned = Instant::now();
        let written = writer.join().unwrap();
        let after = stats();
        assert!(l.is_continuation(), "stopped after the read, long before its 2 s of work");
        assert!(returned >= written, "launch returned {:?} before the data came", written - returned);
        assert!(returned - written < Duration::from_secs(1), "stopped only {:?} after the read returned", returned - written);
        assert!(t.elapsed() >= Duration::from_millis(40));
        assert_eq!(
            after.blocked_deadlines - before.blocked_deadlines,
            1,
            "one deadline found it waiting, and no timer signal followed while it waited"
        );
        l.cancel();
        unsafe {
            libc::close(r);
        }
    }
}

#[test]
fn a_left_wait_returns_its_data_and_errno_untouched() {
    let (r, w) = pipe();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(unsafe { libc::write(w, b"z".as_ptr() as *const libc::c_void, 1) }, 1);
    });
    let mut l = Builder::new()
        .preempt_blocked(false)
        .launch(
            move || {
                let mut b = [0u8; 1];
                unsafe { *libc::__errno_location() = 0 };
                let n = unsafe { libc::read(r, b.as_mut_ptr() as *mut libc::c_void, 1) };
                (n, std::io::Error::last_os_error().raw_os_error(), b[0])
            },
            Duration::from_millis(1),
        )
        .unwrap();
    while l.is_continuation() {
        resume(&mut l, Duration::from_millis(1)).unwrap();
    }
    writer.join().unwrap();
    assert_eq!(l.completion(), Some((1, Some(0), b'z')));
}

#[test]
fn a_left_sleep_sleeps_its_full_time_without_timer_signals() {
    for _ in 0..10 {
        let before = stats();
        let t = Instant::now();
        let mut l = Builder::new()
            .preempt_blocked(false)
            .launch(
                || {
                    let r = unsafe { libc::usleep(30_000) };
                    (r, Instant::now())
                },
                Duration::from_millis(1),
            )
            .unwrap();
        // The launch returns once the sleep is over (at most one more stop
        // right after it); a stalled machine can stop it before the sleep.
        while l.is_continuation() && stats().blocked_deadlines == before.blocked_deadlines {
            resume(&mut l, Duration::from_millis(1)).unwrap();
        }
        assert!(t.elapsed() >= Duration::from_millis(30), "stopped during the sleep");
        while l.is_continuation() {
            resume(&mut l, Duration::from_millis(1)).unwrap();
        }
        let after = stats();
        let (r, woke) = l.completion().unwrap();
        assert_eq!(r, 0);
        assert!(woke - t >= Duration::from_millis(30));
        assert_eq!(after.blocked_deadlines - before.blocked_deadlines, 1, "one deadline left the sleep alone");
    }
}

#[test]
fn a_program_signal_still_interrupts_a_left_wait() {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn on_sig(_: libc::c_int) {
        RUNS.fetch_add(1, Ordering::SeqCst);
    }
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sig as *const () as usize;
        sa.sa_flags = 0; // no SA_RESTART: a blocked read fails with EINTR
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGPWR, &sa, std::ptr::null_mut()), 0);
    }
    let (r, w) = pipe();
    let me = unsafe { libc::pthread_self() } as usize;
    // The signal goes once the function is about to wait (a stalled machine
    // can stop it before it gets there).
    static ENTERED: AtomicBool = AtomicBool::new(false);
    let sender = std::thread::spawn(move || {
        while !ENTERED.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGPWR) }, 0);
    });
    let mut l = Builder::new()
        .preempt_blocked(false)
        .hold_signals(true)
        .launch(
            move || {
                let mut b = [0u8; 1];
                ENTERED.store(true, Ordering::SeqCst);
                let n = unsafe { libc::read(r, b.as_mut_ptr() as *mut libc::c_void, 1) };
                (n, std::io::Error::last_os_error().raw_os_error())
            },
            Duration::from_millis(1),
        )
        .unwrap();
    while l.is_continuation() {
        resume(&mut l, Duration::from_millis(1)).unwrap();
    }
    sender.join().unwrap();
    assert_eq!(l.completion(), Some((-1, Some(libc::EINTR))));
    assert_eq!(RUNS.load(Ordering::SeqCst), 1);
    unsafe {
        libc::close(r);
        libc::close(w);
    }
}

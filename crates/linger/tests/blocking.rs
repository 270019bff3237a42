//! Blocking system calls inside a preemptible function are preempted at the
//! deadline and continue transparently on resume.

use std::time::{Duration, Instant};

use linger::{launch, resume};

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

#[test]
fn read_on_a_pipe_is_preempted_and_resumed_without_eintr() {
    for round in 0..50u8 {
        let (r, w) = pipe();
        let t = Instant::now();
        let mut l = launch(
            move || {
                let mut buf = [0u8; 16];
                unsafe { *libc::__errno_location() = 0 };
                let n = unsafe { libc::read(r, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
                let err = std::io::Error::last_os_error().raw_os_error();
                (n, err, buf[0])
            },
            Duration::from_millis(2),
        )
        .unwrap();
        let waited = t.elapsed();
        assert!(l.is_continuation(), "read returned without data");
        assert!(waited >= Duration::from_millis(2) && waited < Duration::from_millis(200), "preempted after {waited:?}");
        // Resume a few times with no data: still blocked, still no EINTR.
        for _ in 0..3 {
            resume(&mut l, Duration::from_millis(1)).unwrap();
            assert!(l.is_continuation());
        }
        assert_eq!(unsafe { libc::write(w, [round].as_ptr() as *const libc::c_void, 1) }, 1);
        resume(&mut l, Duration::from_secs(5)).unwrap();
        let (n, err, byte) = l.completion().expect("read completes once data is there");
        assert_eq!(n, 1, "read returned {n} (errno {err:?})");
        assert_eq!(err, Some(0), "a successful read changed errno (the retries' EINTR leaked)");
        assert_eq!(byte, round);
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
}

#[test]
fn nanosleep_sleeps_its_full_duration_across_preemptions() {
    for _ in 0..5 {
        let mut l = launch(
            || {
                let t = Instant::now();
                let req = libc::timespec { tv_sec: 0, tv_nsec: 50_000_000 };
                let mut rem = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                let r = unsafe { libc::nanosleep(&req, &mut rem) };
                (r, t.elapsed())
            },
            Duration::from_millis(1),
        )
        .unwrap();
        let mut slices = 1;
        while !l.is_completion() {
            resume(&mut l, Duration::from_millis(1)).unwrap();
            slices += 1;
        }
        let (r, slept) = l.completion().unwrap();
        assert_eq!(r, 0, "nanosleep failed");
        assert!(slept >= Duration::from_millis(50), "slept only {slept:?}");
        assert!(slices >= 10, "expected ~50 slices of 1 ms, got {slices}");
    }
}

#[test]
fn sleep_family_and_std_sleep_complete() {
    let mut l = launch(
        || {
            let t = Instant::now();
            assert_eq!(unsafe { libc::usleep(20_000) }, 0);
            let a = t.elapsed();
            let t = Instant::now();
            let req = libc::timespec { tv_sec: 0, tv_nsec: 20_000_000 };
            let e = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &req, std::ptr::null_mut()) };
            assert_eq!(e, 0);
            let b = t.elapsed();
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(20));
            (a, b, t.elapsed())
        },
        Duration::from_micros(500),
    )
    .unwrap();
    while !l.is_completion() {
        resume(&mut l, Duration::from_micros(500)).unwrap();
    }
    let (a, b, c) = l.completion().unwrap();
    for d in [a, b, c] {
        assert!(d >= Duration::from_millis(20), "slept {d:?}");
    }
}

#[test]
fn program_signals_still_interrupt_sleep() {
    // Our own timer signals are hidden, but a real signal from the program
    // still returns EINTR with the remaining time, as POSIX says.
    extern "C" fn on_usr1(_: libc::c_int) {}
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    let tid = unsafe { libc::gettid() };
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR1) };
    });
    let req = libc::timespec { tv_sec: 2, tv_nsec: 0 };
    let mut rem = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let t = Instant::now();
    let r = unsafe { libc::nanosleep(&req, &mut rem) };
    let err = std::io::Error::last_os_error().raw_os_error();
    killer.join().unwrap();
    assert_eq!((r, err), (-1, Some(libc::EINTR)));
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(rem.tv_sec >= 1, "remaining time reported: {}s", rem.tv_sec);
}

/// Thousands of very short slices over a blocked read: every deadline must
/// come back to the caller. (A timer that fired just as the handler closed
/// its scope was once lost, leaving the function blocked for good.)
#[test]
fn no_deadline_is_lost_over_many_short_slices_of_a_blocked_read() {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = done.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        if !watch.load(std::sync::atomic::Ordering::SeqCst) {
            eprintln!("a blocked read was never preempted again: deadline lost");
            std::process::abort();
        }
    });
    for round in 0..1500u32 {
        let (r, w) = pipe();
        let mut l = launch(
            move || {
                let mut buf = [0u8; 4];
                unsafe { libc::read(r, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) }
            },
            Duration::from_micros(50),
        )
        .unwrap();
        for _ in 0..50 {
            assert!(l.is_continuation(), "round {round}: read returned without data");
            resume(&mut l, Duration::from_micros(50)).unwrap();
        }
        assert_eq!(unsafe { libc::write(w, b"x".as_ptr() as *const libc::c_void, 1) }, 1);
        while l.is_continuation() {
            resume(&mut l, Duration::from_micros(50)).unwrap();
        }
        assert_eq!(l.completion(), Some(1));
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

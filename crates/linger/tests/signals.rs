//! A program that blocks every signal after its first launch (say, before
//! spawning helper threads) must not lose preemption: the mask wrappers keep
//! the preemption signal out of blocked sets.

use std::time::{Duration, Instant};

use linger::launch;

fn spin() -> u64 {
    let mut x = 0u64;
    loop {
        x = x.wrapping_add(1);
        std::hint::black_box(x);
    }
}

fn blocked_now() -> libc::sigset_t {
    let mut cur: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur) };
    cur
}

#[test]
fn blocking_all_signals_keeps_preemption() {
    let l = launch(|| 1, Duration::from_micros(100)).unwrap();
    assert!(l.is_completion());
    let signo = linger::Config::from_env().unwrap().signal_number();
    for how in [libc::SIG_BLOCK, libc::SIG_SETMASK] {
        for use_sigprocmask in [false, true] {
            let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
            let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
            unsafe {
                libc::sigfillset(&mut all);
                if use_sigprocmask {
                    assert_eq!(libc::sigprocmask(how, &all, &mut old), 0);
                } else {
                    assert_eq!(libc::pthread_sigmask(how, &all, &mut old), 0);
                }
            }
            let cur = blocked_now();
            assert_eq!(unsafe { libc::sigismember(&cur, libc::SIGUSR1) }, 1, "other signals are blocked as asked");
            assert_eq!(unsafe { libc::sigismember(&cur, signo) }, 1, "queries show what the program asked for");
            // The kernel's real mask, behind libc's back.
            let mut real: u64 = 0;
            let r = unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, std::ptr::null::<u64>(), &mut real, 8usize) };
            assert_eq!(r, 0);
            assert_eq!(real & (1u64 << (signo - 1)), 0, "the preemption signal stays unblocked");
            for _ in 0..20 {
                let t = Instant::now();
                let l = launch(spin, Duration::from_millis(1)).unwrap();
                assert!(l.is_continuation());
                assert!(t.elapsed() < Duration::from_secs(1));
            }
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        }
    }
}

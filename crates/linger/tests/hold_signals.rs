//! `linger::deferral::hold_program_signals`: with the mode on, a handler of
//! the program's never runs while its thread is inside library code; it runs
//! when that call returns, with its siginfo. (The C programs in
//! `tests/as-safe` test the mode through `liblinger_as_safe.so`.)

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

static RUNS: AtomicUsize = AtomicUsize::new(0);
static VALUE: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_usr1(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    RUNS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the kernel's (or the held) siginfo of a sigqueue.
    VALUE.store(unsafe { (*info).si_value().sival_ptr } as usize as i32, Ordering::SeqCst);
    // Library code in the handler: what the mode is for.
    drop(std::hint::black_box(vec![0u8; 100]));
}

extern "C" fn compare(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
    if RUNS.load(Ordering::SeqCst) == SENT.load(Ordering::SeqCst) {
        let n = SENT.fetch_add(1, Ordering::SeqCst) + 1;
        let v = libc::sigval { sival_ptr: n as *mut libc::c_void };
        // SAFETY: queues a signal to this very thread.
        assert_eq!(unsafe { libc::pthread_sigqueue(libc::pthread_self(), libc::SIGUSR1, v) }, 0);
        assert_eq!(RUNS.load(Ordering::SeqCst), n - 1, "the handler ran inside qsort");
    }
    // SAFETY: qsort passes pointers to the array's u32 elements.
    unsafe { (*(a as *const u32)).cmp(&*(b as *const u32)) as libc::c_int }
}

static SENT: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_signal_sent_inside_qsort_runs_when_qsort_returns() {
    linger::deferral::hold_program_signals().unwrap();
    let probe = 0u8;
    linger::deferral::enter_thread(std::hint::black_box(&probe) as *const u8 as usize).unwrap();
    // SAFETY: an all-zero sigaction is valid; an SA_SIGINFO handler.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut old);
        assert_eq!(old.sa_sigaction, on_usr1 as *const () as usize, "sigaction reports the program's handler");
    }
    for round in 1..=200 {
        let mut v: Vec<u32> = (0..16).rev().collect();
        // SAFETY: a valid array of 16 u32 and a comparator for them.
        unsafe { libc::qsort(v.as_mut_ptr() as *mut libc::c_void, 16, 4, Some(compare)) };
        assert_eq!(RUNS.load(Ordering::SeqCst), round, "the handler did not run when qsort returned");
        assert_eq!(VALUE.load(Ordering::SeqCst), round as i32, "si_value");
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
    }
}

//! `linger::deferral::interrupted_in_deferred`, asked from a signal handler:
//! the interrupted thread is in deferred code when any frame of its call
//! chain (up to its entry) is, not only the interrupted one.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

/// What the handler found: 0 none yet, 1 `Some(false)`, 2 `Some(true)`, 3 `None`.
static FOUND: AtomicI32 = AtomicI32::new(0);
static TARGET: AtomicUsize = AtomicUsize::new(0);
static RUNNING: AtomicBool = AtomicBool::new(false);
/// The tests share the handler's statics: one at a time.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

extern "C" fn on_usr1(_: libc::c_int, _: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid ucontext to an SA_SIGINFO handler.
    let verdict = linger::deferral::interrupted_in_deferred(unsafe { &*(uc as *const libc::ucontext_t) });
    FOUND.store(
        match verdict {
            Some(false) => 1,
            Some(true) => 2,
            None => 3,
        },
        Ordering::SeqCst,
    );
}

fn install() {
    // SAFETY: an all-zero sigaction is valid; the handler has the
    // SA_SIGINFO signature.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
}

/// This thread's chain ends here (the test harness above it is std's).
fn enter() {
    let probe = 0u8;
    linger::deferral::enter_thread(std::hint::black_box(&probe) as *const u8 as usize).unwrap();
}

/// The test thread is waiting in `read` (system call 0), as the kernel says.
static IN_READ: AtomicBool = AtomicBool::new(false);
static TID: AtomicI32 = AtomicI32::new(0);

fn in_read(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).is_ok_and(|s| s.starts_with("0 "))
}

/// Signals the test thread from another one once it is running `f`'s
/// waiting part, and returns what the handler found.
fn judge_while(f: impl FnOnce()) -> i32 {
    FOUND.store(0, Ordering::SeqCst);
    RUNNING.store(false, Ordering::SeqCst);
    // SAFETY: pthread_self and gettid have no preconditions.
    TARGET.store(unsafe { libc::pthread_self() } as usize, Ordering::SeqCst);
    // SAFETY: as above.
    TID.store(unsafe { libc::gettid() }, Ordering::SeqCst);
    let sender = std::thread::spawn(|| {
        while !RUNNING.load(Ordering::SeqCst) || (IN_READ.load(Ordering::SeqCst) && !in_read(TID.load(Ordering::SeqCst))) {
            std::hint::spin_loop();
        }
        // SAFETY: the target thread is alive until the handler has run.
        unsafe { libc::pthread_kill(TARGET.load(Ordering::SeqCst) as libc::pthread_t, libc::SIGUSR1) };
    });
    f();
    sender.join().unwrap();
    FOUND.load(Ordering::SeqCst)
}

/// Spins (in the program's own code) until the handler has run.
#[inline(never)]
fn wait_for_handler() {
    RUNNING.store(true, Ordering::SeqCst);
    while FOUND.load(Ordering::SeqCst) == 0 {
        std::hint::spin_loop();
    }
}

extern "C" fn compare(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
    wait_for_handler();
    // SAFETY: qsort passes pointers to the array's u32 elements.
    unsafe { (*(a as *const u32)).cmp(&*(b as *const u32)) as libc::c_int }
}

#[test]
fn own_code_is_not_deferred_and_a_library_call_below_it_is() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    install();
    enter();
    for _ in 0..20 {
        assert_eq!(judge_while(wait_for_handler), 1, "in its own code");
        // The comparator is the program's code, but qsort (libc) is below it.
        let mut v = [3u32, 1, 2];
        let found = judge_while(|| unsafe {
            libc::qsort(v.as_mut_ptr() as *mut libc::c_void, 3, 4, Some(compare));
        });
        assert_eq!(found, 2, "inside qsort's callback");
    }
}

#[test]
fn a_thread_waiting_at_a_plain_system_call_is_not_deferred() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    install();
    enter();
    let mut fds = [0; 2];
    // SAFETY: a valid array for pipe's two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    IN_READ.store(true, Ordering::SeqCst);
    for _ in 0..20 {
        let found = judge_while(|| {
            RUNNING.store(true, Ordering::SeqCst);
            let writer = std::thread::spawn(move || {
                while FOUND.load(Ordering::SeqCst) == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                // SAFETY: writing one byte from a valid buffer.
                unsafe { libc::write(fds[1], b"x".as_ptr() as *const libc::c_void, 1) };
            });
            let mut c = 0u8;
            // SAFETY: reading one byte into a valid buffer; the handler
            // runs while read waits, and read goes on (SA_RESTART).
            assert_eq!(unsafe { libc::read(fds[0], &mut c as *mut u8 as *mut libc::c_void, 1) }, 1);
            writer.join().unwrap();
        });
        assert_eq!(found, 1, "blocked in read, called from its own code");
    }
    IN_READ.store(false, Ordering::SeqCst);
}

#[test]
fn a_thread_not_entered_cannot_tell() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    install();
    let t = std::thread::spawn(|| judge_while(wait_for_handler));
    assert_eq!(t.join().unwrap(), 3);
}

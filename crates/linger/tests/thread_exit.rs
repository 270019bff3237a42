//! `pthread_exit` inside a function launched from Rust, on a thread made by
//! `pthread_create` (a `std::thread` ends any forced unwind in its
//! `catch_unwind`, which aborts, with or without linger): the function's
//! frames are unwound (its `Drop`s run), then the thread ends from the
//! caller's `resume` with the same value, running the caller's `Drop`s too.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

extern "C-unwind" {
    // Declared here as unwinding: the `libc` crate's declaration is
    // `extern "C"`, through which a forced unwind aborts.
    fn pthread_exit(value: *mut c_void) -> !;
}

static FN_DROPS: AtomicUsize = AtomicUsize::new(0);
static CALLER_DROPS: AtomicUsize = AtomicUsize::new(0);
static CONTINUED: AtomicUsize = AtomicUsize::new(0);

struct CountOnDrop(&'static AtomicUsize);
impl Drop for CountOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn spin(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    acc
}

extern "C-unwind" fn thread_main(arg: *mut c_void) -> *mut c_void {
    let value = arg as usize;
    let _guard = CountOnDrop(&CALLER_DROPS);
    let mut l = linger::launch(
        move || {
            let _guard = CountOnDrop(&FN_DROPS);
            spin(3_000_000); // preempted a few times on the way
            // SAFETY: ends the thread; every frame above is unwindable.
            unsafe { pthread_exit(value as *mut c_void) }
        },
        Duration::from_micros(100),
    )
    .unwrap();
    while l.is_continuation() {
        linger::resume(&mut l, Duration::from_micros(100)).unwrap();
    }
    CONTINUED.fetch_add(1, Ordering::SeqCst);
    std::ptr::null_mut()
}

#[test]
fn pthread_exit_in_a_function_ends_the_thread() {
    let rounds = 50;
    for i in 0..rounds {
        let value = 1000 + i;
        // SAFETY: a thread with a valid start function; joined below.
        let got = unsafe {
            let mut th: libc::pthread_t = std::mem::zeroed();
            let start: extern "C" fn(*mut c_void) -> *mut c_void =
                std::mem::transmute(thread_main as extern "C-unwind" fn(*mut c_void) -> *mut c_void);
            assert_eq!(libc::pthread_create(&mut th, std::ptr::null(), start, value as *mut c_void), 0);
            let mut got: *mut c_void = std::ptr::null_mut();
            assert_eq!(libc::pthread_join(th, &mut got), 0);
            got as usize
        };
        assert_eq!(got, value, "round {i}: the thread's value");
    }
    assert_eq!(CONTINUED.load(Ordering::SeqCst), 0, "code after the exit ran");
    assert_eq!(FN_DROPS.load(Ordering::SeqCst), rounds, "the function's drops");
    assert_eq!(CALLER_DROPS.load(Ordering::SeqCst), rounds, "the caller's drops");
}

//! Deferred deadlines taken when the deferred call returns (`return_trap`):
//! library-heavy functions are stopped by traps, not timer retries; return
//! values survive; panics and backtraces pass through a patched frame.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use linger::{launch, resume, Linger};

const SLICE: Duration = Duration::from_micros(20);

fn run_sliced<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> (T, linger::Stats) {
    let before = linger::stats();
    let mut l = launch(f, SLICE).unwrap();
    while l.is_continuation() {
        resume(&mut l, SLICE).unwrap();
    }
    let after = linger::stats();
    let mut d = after;
    d.preemptions -= before.preemptions;
    d.return_traps -= before.return_traps;
    d.deferrals -= before.deferrals;
    let Linger::Completion(v) = l else { panic!("poisoned") };
    (v, d)
}

#[test]
fn library_heavy_loops_are_stopped_by_traps_with_their_values_intact() {
    for round in 0..10 {
        let ((ok, n), s) = run_sliced(|| {
            let mut ok = true;
            let mut n = 0u64;
            let mut sink = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
            for i in 0..20_000u64 {
                let text = format!("{i}:{}", i as f64 * 0.5); // allocation, formatting
                // SAFETY: NUL-terminated C strings; the functions only read them.
                let (d, len) = unsafe {
                    (libc::strtod(c"2.718281828459045".as_ptr(), std::ptr::null_mut()), libc::strlen(c"abcdefg".as_ptr()))
                };
                let v: Vec<u8> = Vec::with_capacity(64 + (i % 7) as usize);
                ok &= d == 2.718281828459045 && len == 7 && v.capacity() >= 64 && text.starts_with(&i.to_string());
                sink.write_all(text.as_bytes()).unwrap();
                n += text.len() as u64;
            }
            (ok, n)
        });
        assert!(ok, "round {round}: a return value changed across a stop");
        assert!(n > 0);
        assert!(s.return_traps > 0, "round {round}: no trap in {} preemptions", s.preemptions);
    }
}

/// A comparator that panics from inside libc's `qsort`, where a trap may be
/// armed on `qsort`'s return: the unwinder must pass through the patched
/// frame (it reads the real return address from the trap's frame
/// description) to reach the function's `catch_unwind`.
type Cmp = extern "C-unwind" fn(*const libc::c_void, *const libc::c_void) -> libc::c_int;

// Declared here as "C-unwind" (glibc's qsort has unwind tables, so a panic
// may pass through it), and the only declaration in this test: LLVM merges
// declarations of one symbol, and the libc crate's "C" one would make every
// call `nounwind`, leaving no landing pad for the panic.
extern "C-unwind" {
    fn qsort(base: *mut libc::c_void, n: usize, size: usize, cmp: Cmp);
}

#[test]
fn panics_unwind_through_a_trapped_call() {
    extern "C-unwind" fn cmp(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
        // SAFETY: qsort passes pointers into the u32 array being sorted.
        let (x, y) = unsafe { (*(a as *const u32), *(b as *const u32)) };
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_nanos(200) {}
        if x == 7 && y == 7 {
            panic!("seven");
        }
        x.cmp(&y) as libc::c_int
    }
    let mut caught = 0;
    let mut through_traps = 0;
    for _ in 0..100 {
        let (c, s) = run_sliced(|| {
            let mut v: Vec<u32> = (0..4000).map(|i| (i * 7919) % 4000).collect();
            v.extend([7, 7]);
            let r = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: sorting our own array of u32 with a matching comparator.
                unsafe { qsort(v.as_mut_ptr() as *mut libc::c_void, v.len(), 4, cmp) };
            }));
            r.is_err()
        });
        caught += c as u32;
        // A deadline deferred inside qsort (the comparator runs below it)
        // sets a trap on qsort's frame, which the panic then crosses.
        through_traps += (s.deferrals > 0) as u32;
    }
    assert_eq!(caught, 100);
    assert!(through_traps > 0, "no round had a trap armed on qsort");
}

#[test]
fn backtraces_through_a_trapped_call() {
    extern "C-unwind" fn cmp(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
        // SAFETY: qsort passes pointers into the u32 array being sorted.
        let (x, y) = unsafe { (*(a as *const u32), *(b as *const u32)) };
        if x == 1999 {
            // Walks the stack through the trapped qsort (symbolizing it too).
            let bt = std::backtrace::Backtrace::force_capture();
            std::hint::black_box(bt.to_string().len());
        }
        x.cmp(&y) as libc::c_int
    }
    for _ in 0..20 {
        let (sorted, _) = run_sliced(|| {
            let mut v: Vec<u32> = (0..2000).map(|i| (i * 7919) % 2000).collect();
            // SAFETY: sorting our own array of u32.
            unsafe { qsort(v.as_mut_ptr() as *mut libc::c_void, v.len(), 4, cmp) };
            v.windows(2).all(|w| w[0] <= w[1])
        });
        assert!(sorted);
    }
}

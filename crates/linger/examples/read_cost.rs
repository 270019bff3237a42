//! The cost of linger's `read` wrapper on a pipe that always has data: ns per
//! 1-byte `read`, outside any preemptible function, inside one, and inside
//! one launched with a park hook (`linger::park`; the data is ready, so the
//! hook is never called: the cost is the wrapper's type check and
//! non-blocking attempt). Prints the best of several rounds (the machine is
//! shared: the minimum is the wrapper's cost, the rest is noise).
//!
//! `cargo run --release -p linger --example read_cost`

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linger::park::{Interest, Park};

const PER_FILL: usize = 60_000;

fn pipe() -> (i32, i32) {
    let mut p = [0; 2];
    // SAFETY: valid out array.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    // SAFETY: valid descriptor; a bigger pipe keeps refills rare.
    unsafe { libc::fcntl(p[1], libc::F_SETPIPE_SZ, 1 << 20) };
    (p[0], p[1])
}

/// ns per read over `PER_FILL` reads of one byte, best of `rounds`.
fn bench(r: i32, w: i32, rounds: usize) -> f64 {
    let fill = vec![7u8; PER_FILL];
    let mut best = f64::MAX;
    for _ in 0..rounds {
        // SAFETY: a valid buffer of PER_FILL bytes.
        assert_eq!(unsafe { libc::write(w, fill.as_ptr().cast(), PER_FILL) }, PER_FILL as isize);
        let mut b = 0u8;
        let t = Instant::now();
        for _ in 0..PER_FILL {
            // SAFETY: one writable byte.
            let n = unsafe { libc::read(r, (&mut b as *mut u8).cast(), 1) };
            debug_assert_eq!(n, 1);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / PER_FILL as f64);
    }
    best
}

/// A hook that never waits (never called here: the pipe has data).
struct NoWait;

impl Park for NoWait {
    fn wait_fd(&self, _: RawFd, _: Interest, _: Option<Duration>) -> bool {
        false
    }
    fn wait_fds(&self, _: &[(RawFd, Interest)], _: Option<Duration>) -> bool {
        false
    }
    fn sleep_until(&self, _: Duration) -> bool {
        false
    }
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(30);
    let (r, w) = pipe();
    let outside = bench(r, w, rounds);
    let inside = linger::launch(move || bench(r, w, rounds), Duration::MAX).unwrap().completion().unwrap();
    let hooked = linger::Builder::new().park_with(Arc::new(NoWait)).launch(move || bench(r, w, rounds), Duration::MAX);
    let hooked = hooked.unwrap().completion().unwrap();
    println!(
        "read of a ready pipe, 1 byte: outside a function {outside:.1} ns, inside one {inside:.1} ns, \
         inside one with a park hook {hooked:.1} ns"
    );
}

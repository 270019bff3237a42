//! What the tests share.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Computation with no await point and no library call.
pub fn spin(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    acc
}

/// Counts its drops: a dropped future's destructors ran.
pub struct Flag(pub Arc<AtomicUsize>);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

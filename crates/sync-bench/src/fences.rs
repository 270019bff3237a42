//! Asymmetric fences: the read (light) side in a store-fence-load loop
//! against a full fence and a locked add, and the latency of the heavy
//! side per mechanism with another thread blocked or spinning.

use std::hint::black_box;
use std::sync::atomic::{compiler_fence, fence, AtomicU64, Ordering};

use turquoise::sync::fence::{self as asym, Mechanism};

use crate::ec::MECHANISMS;
use crate::{per_op, timed, Row, Sizes};

static STORED: AtomicU64 = AtomicU64::new(0);
static LOADED: AtomicU64 = AtomicU64::new(0);

/// A store, `barrier`, a load, `n` times.
#[inline(always)]
fn store_load(n: usize, barrier: impl Fn()) {
    // Through opaque references: the compiler cannot see that nothing else
    // reads the statics and drop the loop.
    let (stored, loaded) = (black_box(&STORED), black_box(&LOADED));
    let mut acc = 0;
    for i in 0..n {
        stored.store(i as u64, Ordering::Relaxed);
        barrier();
        acc += loaded.load(Ordering::Relaxed);
    }
    black_box(acc);
}

/// `lock add dword ptr [word], 0` on a word of the caller's stack.
#[inline(always)]
fn locked_add(word: &std::cell::Cell<u32>) {
    // SAFETY: the pointer is a live, aligned u32 of the caller's frame that
    // nothing else refers to; adding 0 leaves it as it was. The asm is not
    // `nomem`, so the compiler keeps memory accesses on their side of it.
    unsafe { std::arch::asm!("lock add dword ptr [{w}], 0", w = in(reg) word.as_ptr(), options(nostack)) };
}

#[inline(never)]
fn none(n: usize) {
    store_load(n, || compiler_fence(Ordering::SeqCst));
}

#[inline(never)]
fn light(n: usize) {
    store_load(n, asym::light);
}

#[inline(never)]
fn seqcst(n: usize) {
    store_load(n, || fence(Ordering::SeqCst));
}

#[inline(never)]
fn mfence(n: usize) {
    // SAFETY: mfence only orders memory accesses; not `nomem`, so the
    // compiler keeps the loop's accesses on their side of it.
    store_load(n, || unsafe { std::arch::asm!("mfence", options(nostack, preserves_flags)) });
}

#[inline(never)]
fn lock_add(n: usize) {
    let word = std::cell::Cell::new(0u32);
    store_load(n, || locked_add(&word));
    black_box(word.get());
}

/// ns per iteration of a store, the barrier, a load.
pub fn light_side(s: Sizes) -> Vec<Row> {
    bench_util::pin(0);
    asym::use_mechanism(Mechanism::MembarrierExpedited);
    let loops: [(&str, fn(usize)); 5] = [
        ("compiler fence only", none),
        ("fence::light()", light),
        ("fence(SeqCst) (rustc emits lock or to the stack)", seqcst),
        ("mfence", mfence),
        ("lock add to a stack word", lock_add),
    ];
    loops.iter().map(|(name, f)| Row::new("light", name, per_op(s.batches, s.n, f).0)).collect()
}

/// Latency of `fence::heavy()` per mechanism (ns per call) on CPU 1, the
/// process's other thread on CPU 0 blocked or spinning.
pub fn heavy_side(s: Sizes) -> Vec<Row> {
    let mut rows = Vec::new();
    crate::beside_other(|spinning| {
        let what = if spinning { "heavy_spinning" } else { "heavy_blocked" };
        for (m, name) in MECHANISMS {
            if asym::use_mechanism(m) == m {
                rows.push(Row::new(what, name, timed(s.rounds, s.budget, asym::heavy)));
            }
        }
    });
    rows
}

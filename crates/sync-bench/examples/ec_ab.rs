//! A/B of event-count increments with no waiter, interleaved in one
//! process (the decision behind the sign-bit flag): ours against the bare
//! `fetch_add`, the previous single producer's `xadd` (low-bit flag) and
//! ck's shape (`inc` and `jle` on the sign-bit flag).
//!
//! `taskset -c 0 cargo run --release -p sync-bench --example ec_ab [N]`

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};

use sync_bench::rdtsc;
use sync_bench::ec::{mp as mp_ours, sp as sp_ours};
use turquoise::sync::EventCount;

/// Stands for the wake-up (never taken: nobody sets the flag).
#[cold]
#[inline(never)]
fn wake(w: &AtomicU32) {
    w.fetch_and(0x7fff_ffff, Ordering::AcqRel);
}

#[inline(never)]
fn fetch_add(w: &AtomicU32, n: usize) {
    for _ in 0..n {
        w.fetch_add(1, Ordering::AcqRel);
    }
}

/// The previous single producer: `xadd` of 2, test of the old low bit.
#[inline(never)]
fn xadd_low_bit(w: &AtomicU32, n: usize) {
    for _ in 0..n {
        let mut v = 2u32;
        // SAFETY: the word's pointer, valid and aligned; a single-threaded
        // loop, nobody else writes the word.
        unsafe {
            std::arch::asm!("xadd dword ptr [{w}], {v:e}", w = in(reg) w.as_ptr(), v = inout(reg) v, options(nostack));
        }
        if v & 1 != 0 {
            wake(w);
        }
    }
}

/// ck's shape: `inc` (`lock inc` if `locked`), `jle` to the wake.
#[inline(never)]
fn inc_jle(w: &AtomicU32, n: usize, locked: bool) {
    for _ in 0..n {
        // SAFETY: as in `xadd_low_bit`.
        unsafe {
            match locked {
                true => std::arch::asm!("lock inc dword ptr [{w}]", "jle {k}", w = in(reg) w.as_ptr(), k = label { wake(w); }, options(nostack)),
                false => std::arch::asm!("inc dword ptr [{w}]", "jle {k}", w = in(reg) w.as_ptr(), k = label { wake(w); }, options(nostack)),
            }
        }
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000_000);
    let w = AtomicU32::new(0);
    let ec = EventCount::new();
    let (mut p, _versions) = EventCount::single_producer();
    let names = ["MP ours", "MP fetch_add", "MP lock inc+jle (ck)", "SP ours", "SP xadd low bit (before)", "SP inc+jle (ck)"];
    let mut cycles: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..15 {
        for (i, c) in cycles.iter_mut().enumerate() {
            w.store(0, Ordering::Relaxed);
            let t = rdtsc();
            match i {
                0 => mp_ours(black_box(&ec), n),
                1 => fetch_add(black_box(&w), n),
                2 => inc_jle(black_box(&w), n, true),
                3 => sp_ours(&mut p, n),
                4 => xadd_low_bit(black_box(&w), n),
                _ => inc_jle(black_box(&w), n, false),
            }
            c.push((rdtsc() - t) as f64 / n as f64);
        }
    }
    println!("TSC cycles per increment, {n} a batch, 15 batches interleaved");
    for (name, c) in names.iter().zip(&mut cycles) {
        c.sort_by(f64::total_cmp);
        println!("{name:26} min {:6.3}  median {:6.3}", c[0], c[c.len() / 2]);
    }
}

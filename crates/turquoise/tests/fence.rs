//! Asymmetric fences: Dekker's store/load pattern with `light()` on one
//! side and `heavy()` on the other never lets both loads miss the other
//! side's store, whichever mechanism `heavy()` uses.

use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use turquoise::sync::fence::{self, Mechanism};

/// The mechanism is per process: one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `rounds` of: A stores X, fences lightly, loads Y; B stores Y, fences
/// with `heavy` (or not at all, for the control), loads X. Both start each
/// round together (spinning). Returns the rounds where both loads missed.
fn dekker(rounds: u64, heavy: fn()) -> u64 {
    static X: AtomicU64 = AtomicU64::new(0);
    static Y: AtomicU64 = AtomicU64::new(0);
    static GO: AtomicU64 = AtomicU64::new(0);
    static DONE: AtomicU64 = AtomicU64::new(0);
    static SEEN_BY_A: AtomicU64 = AtomicU64::new(0);
    let base = GO.load(SeqCst);
    let a = std::thread::spawn(move || {
        for r in base + 1..=base + rounds {
            while GO.load(Relaxed) != r {
                std::hint::spin_loop();
            }
            X.store(r, Relaxed);
            fence::light();
            SEEN_BY_A.store(Y.load(Relaxed), Relaxed);
            DONE.store(r, Release);
        }
    });
    let mut both_missed = 0;
    for r in base + 1..=base + rounds {
        GO.store(r, Relaxed);
        // A sees GO some 100 ns later: a varying delay makes the two
        // sides' store-then-load windows overlap in some rounds.
        for _ in 0..r % 48 {
            std::hint::spin_loop();
        }
        Y.store(r, Relaxed);
        heavy();
        let seen_by_b = X.load(Relaxed);
        while DONE.load(Acquire) != r {
            std::hint::spin_loop();
        }
        if seen_by_b < r && SEEN_BY_A.load(Relaxed) < r {
            both_missed += 1;
        }
    }
    a.join().unwrap();
    both_missed
}

/// Median cost of one `heavy()` (another thread spinning meanwhile, so
/// that there is someone to interrupt).
fn cost_of_heavy(n: usize) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let spinner = std::thread::spawn(move || {
        while !s.load(Relaxed) {
            std::hint::spin_loop();
        }
    });
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            fence::heavy();
            t.elapsed()
        })
        .collect();
    stop.store(true, Relaxed);
    spinner.join().unwrap();
    times.sort();
    times[n / 2]
}

fn check(asked: Mechanism, rounds: u64, timings: usize) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let got = fence::use_mechanism(asked);
    assert_eq!(fence::mechanism(), got);
    eprintln!("asked for {asked:?}, using {got:?}; heavy() median {:?}", cost_of_heavy(timings));
    let t = Instant::now();
    let missed = dekker(rounds, fence::heavy);
    eprintln!("{got:?}: {rounds} rounds in {:?}, both loads missed in {missed}", t.elapsed());
    assert_eq!(missed, 0, "{got:?} let both sides miss the other's store");
}

#[test]
fn expedited_membarrier_orders_dekker() {
    check(Mechanism::MembarrierExpedited, 50_000, 2000);
}

#[test]
fn mprotect_shootdown_orders_dekker() {
    if cfg!(target_arch = "x86_64") {
        check(Mechanism::Mprotect, 20_000, 2000);
    }
}

#[test]
fn global_membarrier_orders_dekker() {
    // Milliseconds a call: few rounds.
    check(Mechanism::MembarrierGlobal, 60, 9);
}

#[test]
fn the_default_is_the_best_the_kernel_offers() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let supported = unsafe_query();
    let best = fence::use_mechanism(Mechanism::MembarrierExpedited);
    eprintln!("membarrier QUERY: {supported:#x}; best: {best:?}");
    if supported & (1 << 3) != 0 {
        assert_eq!(best, Mechanism::MembarrierExpedited);
    }
}

fn unsafe_query() -> i64 {
    // SAFETY: MEMBARRIER_CMD_QUERY reads nothing of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, 0, 0) as i64 }
}

/// The negative control: no barrier on B's side (only the compiler's), so
/// the CPU may let B's load pass its store. Printed, not asserted.
#[test]
fn without_the_heavy_side_both_may_miss() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let missed = dekker(200_000, || compiler_fence(SeqCst));
    eprintln!("control, no heavy side: both loads missed in {missed} of 200000 rounds");
}

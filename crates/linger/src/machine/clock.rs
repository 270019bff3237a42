//! A cheaper monotonic clock for computing deadlines.
//!
//! `clock_gettime(CLOCK_MONOTONIC)` costs ~25 ns in these VMs and every launch
//! and resume reads the clock once; `rdtsc` costs ~10 ns. When the kernel
//! itself uses the TSC as its clock source, we convert TSC readings to
//! CLOCK_MONOTONIC nanoseconds with a rate measured against the real clock
//! (refined every time the timer is armed, which reads the real clock anyway,
//! from readings paired tightly with `rdtsc`: a preemption between them is refused)
//! and a per-thread anchor no older than ~20 ms, so the estimate stays within
//! microseconds of the real clock (under 1 us on one host, 5-9 us on another,
//! whose `CLOCK_MONOTONIC` runs slewed against the TSC or whose 12 ms
//! calibration is noisier): far below any slice. Until the rate is known, or
//! if the TSC is not trusted, the real clock is used.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::state::thread::{now_ns, ThreadState};

/// Process-wide calibration base, and ns per TSC tick scaled by 2^32 (0: unknown).
static BASE_TSC: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);
static MULT: AtomicU64 = AtomicU64::new(0);

/// Calibrate over at least this long before trusting the rate.
const MIN_BASELINE_NS: u64 = 10_000_000;
/// Re-anchor a thread whose anchor is older than this many ns.
const MAX_ANCHOR_AGE_NS: u64 = 20_000_000;

#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no side effects; user-space access is allowed on Linux
    // unless disabled, in which case the kernel would not use the TSC as its
    // clock source and `start` never enables this path.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Starts calibration if the kernel's own clock source is the TSC. Once
/// per process: a second start would move the base under a calibration
/// in progress (seen in the unit tests, which start it from several threads).
pub(crate) fn start() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let src = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
        if src.map(|s| s.trim() == "tsc").unwrap_or(false) {
            // A base skewed by a preemption between the two readings would
            // skew the rate for every thread: take a tight pair or none.
            if let Some((tsc, ns)) = (0..8).find_map(|_| paired()) {
                BASE_NS.store(ns, Ordering::Relaxed);
                BASE_TSC.store(tsc, Ordering::Relaxed);
            }
        }
    });
}

/// Widest `rdtsc`, `clock_gettime`, `rdtsc` bracket taken as one instant, in
/// ticks: the pair costs ~100-200 ticks; 10,000 is 3-5 us at 2-3 GHz. A wider
/// bracket means the thread was preempted or the VM stalled in between, and
/// pairing the two readings would put that delay into the anchor and the rate
/// (a 30 us delay over the 12 ms first baseline made estimates 50 us early).
const MAX_PAIR_TICKS: u64 = 10_000;

/// A TSC reading and a real clock reading taken at the same instant, give or
/// take `MAX_PAIR_TICKS`; `None` if something came between them.
fn paired() -> Option<(u64, u64)> {
    let before = rdtsc();
    let ns = now_ns();
    let after = rdtsc();
    let width = after.wrapping_sub(before);
    (width <= MAX_PAIR_TICKS).then(|| (before + width / 2, ns))
}

/// Reads the real clock on this thread and, when the reading pairs tightly
/// with the TSC, anchors the thread there and refines the rate. Where the
/// real clock is read anyway (arming the timer), this adds two `rdtsc`.
pub(crate) fn read_anchored(ts: &ThreadState) -> u64 {
    let base_tsc = BASE_TSC.load(Ordering::Relaxed);
    if base_tsc == 0 {
        return now_ns();
    }
    let Some((tsc, ns)) = paired() else {
        return now_ns(); // keep the old anchor rather than a skewed one
    };
    ts.tsc_anchor.set(tsc);
    ts.ns_anchor.set(ns);
    let dns = ns.saturating_sub(BASE_NS.load(Ordering::Relaxed));
    let dtsc = tsc.saturating_sub(base_tsc);
    if dns >= MIN_BASELINE_NS && dtsc > 0 {
        MULT.store((((dns as u128) << 32) / dtsc as u128) as u64, Ordering::Relaxed);
    }
    ns
}

/// CLOCK_MONOTONIC nanoseconds, estimated from the TSC when calibrated.
#[inline]
pub(crate) fn now(ts: &ThreadState) -> u64 {
    let mult = MULT.load(Ordering::Relaxed);
    let base = ts.tsc_anchor.get();
    if mult != 0 && base != 0 {
        let dt = rdtsc().wrapping_sub(base);
        let dns = ((dt as u128 * mult as u128) >> 32) as u64;
        if dns < MAX_ANCHOR_AGE_NS {
            return ts.ns_anchor.get() + dns;
        }
    }
    read_anchored(ts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::thread::ts;

    #[test]
    fn estimate_tracks_the_real_clock() {
        start();
        if BASE_TSC.load(Ordering::Relaxed) == 0 {
            return; // the kernel does not trust the TSC here: real clock only
        }
        let t = ts();
        std::thread::sleep(std::time::Duration::from_millis(12));
        // A pair can be refused (a preemption between its readings): try again.
        for _ in 0..8 {
            read_anchored(t);
            if MULT.load(Ordering::Relaxed) != 0 {
                break;
            }
        }
        assert_ne!(MULT.load(Ordering::Relaxed), 0, "rate not calibrated after 12 ms");
        let mut worst = 0i64;
        for i in 0..200 {
            std::thread::sleep(std::time::Duration::from_micros(50 + i * 13));
            let real_before = now_ns();
            let est = now(t);
            let real_after = now_ns();
            // The estimate must fall between two real readings, give or take.
            let err = if est < real_before {
                (real_before - est) as i64
            } else if est > real_after {
                (est - real_after) as i64
            } else {
                0
            };
            worst = worst.max(err);
        }
        // A wrong rate or a stale anchor is off by milliseconds; hosts differ
        // by microseconds (5-9 us seen on one, under 1 us on another).
        assert!(worst < 50_000, "TSC estimate off by {worst} ns");
    }
}

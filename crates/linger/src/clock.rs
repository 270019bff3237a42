//! A cheaper monotonic clock for computing deadlines.
//!
//! `clock_gettime(CLOCK_MONOTONIC)` costs ~25 ns in these VMs and every launch
//! and resume reads the clock once; `rdtsc` costs ~10 ns. When the kernel
//! itself uses the TSC as its clock source, we convert TSC readings to
//! CLOCK_MONOTONIC nanoseconds with a rate measured against the real clock
//! (refined every time the timer is armed, which reads the real clock anyway)
//! and a per-thread anchor no older than ~20 ms, so the estimate stays within
//! microseconds of the real clock (under 1 us on one host, 5-9 us on another,
//! whose `CLOCK_MONOTONIC` runs slewed against the TSC or whose 12 ms
//! calibration is noisier): far below any slice. Until the rate is known, or
//! if the TSC is not trusted, the real clock is used.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::thread::{now_ns, ThreadState};

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
            BASE_NS.store(now_ns(), Ordering::Relaxed);
            BASE_TSC.store(rdtsc(), Ordering::Relaxed);
        }
    });
}

/// Records a real clock reading `ns` taken just now on this thread: anchors
/// the thread and refines the rate. Cheap; called where the real clock was
/// read anyway.
pub(crate) fn anchor(ts: &ThreadState, ns: u64) {
    let base_tsc = BASE_TSC.load(Ordering::Relaxed);
    if base_tsc == 0 {
        return;
    }
    let tsc = rdtsc();
    ts.tsc_anchor.set(tsc);
    ts.ns_anchor.set(ns);
    let dns = ns.saturating_sub(BASE_NS.load(Ordering::Relaxed));
    let dtsc = tsc.saturating_sub(base_tsc);
    if dns >= MIN_BASELINE_NS && dtsc > 0 {
        MULT.store((((dns as u128) << 32) / dtsc as u128) as u64, Ordering::Relaxed);
    }
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
    let ns = now_ns();
    anchor(ts, ns);
    ns
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::ts;

    #[test]
    fn estimate_tracks_the_real_clock() {
        start();
        if BASE_TSC.load(Ordering::Relaxed) == 0 {
            return; // the kernel does not trust the TSC here: real clock only
        }
        let t = ts();
        std::thread::sleep(std::time::Duration::from_millis(12));
        anchor(t, now_ns());
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

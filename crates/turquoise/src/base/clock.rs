//! The time-stamp counter as the runtime's cheap clock: ~10 ns to read,
//! against ~25 ns for the vDSO's clock here. Waits and runs are measured
//! in ticks and converted when read.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[inline(always)]
pub(crate) fn ticks() -> u64 {
    // SAFETY: `rdtsc` only reads the counter (user-space access is allowed
    // on Linux unless the kernel disabled it, which it does not on x86-64
    // by default).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Ticks and time at the first use: the rate comes from them and now.
static EPOCH: OnceLock<(Instant, u64)> = OnceLock::new();

/// Starts the clock (the rate is known a millisecond later).
pub(crate) fn start() {
    epoch();
}

fn epoch() -> (Instant, u64) {
    *EPOCH.get_or_init(|| (Instant::now(), ticks()))
}

/// Nanoseconds and ticks since the epoch, or `None` in its first
/// millisecond (too early to know the rate).
fn rate() -> Option<(u128, u128)> {
    let (at, t0) = epoch();
    let ns = at.elapsed().as_nanos();
    let dt = ticks().saturating_sub(t0) as u128;
    (dt != 0 && ns >= 1_000_000).then_some((ns, dt))
}

pub(crate) fn ticks_to_duration(t: u64) -> Duration {
    match rate() {
        Some((ns, dt)) => Duration::from_nanos((t as u128 * ns / dt) as u64),
        // Assume 1 GHz (only reads in the first millisecond after the first
        // green thread are affected).
        None => Duration::from_nanos(t),
    }
}

pub(crate) fn duration_to_ticks(d: Duration) -> u64 {
    match rate() {
        Some((ns, dt)) => u64::try_from(d.as_nanos() * dt / ns).unwrap_or(u64::MAX),
        None => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
    }
}

//! The event count's word protocol, on its own: a version in the low 31
//! bits, "someone sleeps" in the top bit, the waiter's arming and the
//! multi-producer add. Generic over the atomic word (`Word`) so that a model
//! checker can run this very code with its own atomics
//! (`crates/sync-models`, loom); `event_count.rs` runs it on
//! `std::sync::atomic::AtomicU32`, its futex and its wakers around it.
//! Nothing here imports the rest of the crate, which is what lets the
//! model include the file as it is.

use std::sync::atomic::Ordering;

/// The "someone sleeps" flag, in the word's top (sign) bit.
pub(crate) const SLEEPERS: u32 = 1 << 31;
/// The version's bits, below the flag.
pub(crate) const VERSION: u32 = !SLEEPERS;

/// The operations the protocol makes on the word.
pub(crate) trait Word {
    fn load(&self, order: Ordering) -> u32;
    fn compare_exchange_weak(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32>;
    fn fetch_add(&self, n: u32, order: Ordering) -> u32;
    fn fetch_and(&self, bits: u32, order: Ordering) -> u32;
}

impl Word for std::sync::atomic::AtomicU32 {
    #[inline(always)]
    fn load(&self, order: Ordering) -> u32 {
        std::sync::atomic::AtomicU32::load(self, order)
    }
    #[inline(always)]
    fn compare_exchange_weak(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32> {
        std::sync::atomic::AtomicU32::compare_exchange_weak(self, current, new, success, failure)
    }
    #[inline(always)]
    fn fetch_add(&self, n: u32, order: Ordering) -> u32 {
        std::sync::atomic::AtomicU32::fetch_add(self, n, order)
    }
    #[inline(always)]
    fn fetch_and(&self, bits: u32, order: Ordering) -> u32 {
        std::sync::atomic::AtomicU32::fetch_and(self, bits, order)
    }
}

/// Gets ready to sleep on version `old`: `Some(new version)` if it has
/// changed, `None` when the word holds `old` with the flag set and any
/// later increment will see the flag (the caller may then sleep on the
/// word while it holds `old | SLEEPERS`). `heavy_fence`, for an event
/// count whose increments are plain (not atomic) adds: the asymmetric
/// fence that makes any such add that read the word before the flag
/// was set finish first.
#[inline]
pub(crate) fn arm<W: Word>(word: &W, old: u32, heavy_fence: Option<fn()>) -> Option<u32> {
    let flagged = old | SLEEPERS;
    let mut cur = word.load(Ordering::Acquire);
    loop {
        if cur & VERSION != old {
            return Some(cur & VERSION);
        }
        if cur & SLEEPERS == 0 {
            if let Err(now) = word.compare_exchange_weak(cur, flagged, Ordering::AcqRel, Ordering::Acquire) {
                cur = now;
                continue;
            }
        }
        let Some(fence) = heavy_fence else {
            // Every increment is an atomic read-modify-write of the word:
            // it comes after the flag in the word's order and sees it.
            return None;
        };
        // A plain increment may have read the word before the flag was set
        // and write over it. After this barrier such an increment has
        // written (and the load below sees a new version), and any later
        // one reads the flag.
        fence();
        cur = word.load(Ordering::Acquire);
        if cur == flagged {
            return None;
        }
    }
}

/// Whether an add of `n` (below 2^31) to the word `old` owes a wake-up:
/// the flag was set before it (whether the add carried out of the word,
/// clearing it, or not) or is set after it (the version wrapped around
/// into it; the wake clears it).
#[inline(always)]
pub(crate) fn owes_wake(old: u32, n: u32) -> bool {
    (old | old.wrapping_add(n)) & SLEEPERS != 0
}

/// The multi-producer add of `n` (below 2^31): returns the word it
/// replaced and whether the caller owes a wake-up ([`clear_flag`], then
/// wake every sleeper).
#[inline(always)]
pub(crate) fn add<W: Word>(word: &W, n: u32) -> (u32, bool) {
    let old = word.fetch_add(n, Ordering::AcqRel);
    (old, owes_wake(old, n))
}

/// Before a wake: clears the flag. A waiter whose sleep starts later finds
/// the word changed; one that set the flag since (on the new version)
/// finds it cleared and sets it again.
#[inline]
pub(crate) fn clear_flag<W: Word>(word: &W) {
    word.fetch_and(VERSION, Ordering::AcqRel);
}

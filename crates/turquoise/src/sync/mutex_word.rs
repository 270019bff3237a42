//! The mutex's state byte, on its own: taking and giving back the lock, the
//! head waiter's arming, its wake-up and its cancellation. Generic over the
//! atomic byte (`Byte`) so that a model checker can run this very code with
//! its own atomics (`crates/sync-models`, loom); `mutex.rs` runs it on
//! `std::sync::atomic::AtomicU8`, with tokio's semaphores as the queue and
//! the head's wake-ups. Nothing here imports the rest of the crate, which is
//! what lets the model include the file as it is.
//!
//! The protocol's promises, which the model checks: one holder at a time;
//! an unlock that finds `PARKED` owes the head one wake-up (and every
//! wake-up the head needs is owed by some unlock); a hand-off keeps the
//! lock locked from the unlock to the head; a head that gives up leaves a
//! state that the next locker can take.

use std::sync::atomic::Ordering::{self, *};

/// Someone holds the lock.
pub(crate) const LOCKED: u8 = 1;
/// The head sleeps (or is about to) on its wake-ups; only the head sets it.
pub(crate) const PARKED: u8 = 2;
/// With `PARKED`: the head asks for the lock directly. Without `PARKED`
/// (and with `LOCKED`): the lock was handed to the head.
pub(crate) const HANDOFF: u8 = 4;

/// The operations the protocol makes on the byte.
pub(crate) trait Byte {
    fn load(&self, order: Ordering) -> u8;
    fn store(&self, v: u8, order: Ordering);
    fn compare_exchange(&self, current: u8, new: u8, success: Ordering, failure: Ordering) -> Result<u8, u8>;
    fn compare_exchange_weak(&self, current: u8, new: u8, success: Ordering, failure: Ordering) -> Result<u8, u8>;
}

impl Byte for std::sync::atomic::AtomicU8 {
    #[inline(always)]
    fn load(&self, order: Ordering) -> u8 {
        std::sync::atomic::AtomicU8::load(self, order)
    }
    #[inline(always)]
    fn store(&self, v: u8, order: Ordering) {
        std::sync::atomic::AtomicU8::store(self, v, order)
    }
    #[inline(always)]
    fn compare_exchange(&self, current: u8, new: u8, success: Ordering, failure: Ordering) -> Result<u8, u8> {
        std::sync::atomic::AtomicU8::compare_exchange(self, current, new, success, failure)
    }
    #[inline(always)]
    fn compare_exchange_weak(&self, current: u8, new: u8, success: Ordering, failure: Ordering) -> Result<u8, u8> {
        std::sync::atomic::AtomicU8::compare_exchange_weak(self, current, new, success, failure)
    }
}

/// Takes the lock if it is free: whether it was.
#[inline(always)]
pub(crate) fn try_lock<B: Byte>(state: &B) -> bool {
    state.compare_exchange(0, LOCKED, Acquire, Relaxed).is_ok()
}

/// Gives the lock back: whether the head waits for it, so that the caller
/// owes it one wake-up. Frees the lock, or, if the head asked for it,
/// hands it over (`LOCKED` kept, `PARKED` cleared).
#[inline(always)]
pub(crate) fn unlock<B: Byte>(state: &B) -> bool {
    state.compare_exchange(LOCKED, 0, Release, Relaxed).is_err() && unlock_slow(state)
}

/// [`unlock`] when someone is parked (or the lock was handed over).
#[cold]
fn unlock_slow<B: Byte>(state: &B) -> bool {
    let mut s = state.load(Relaxed);
    loop {
        debug_assert!(s & LOCKED != 0 && (s & HANDOFF == 0 || s & PARKED != 0), "unlock of {s:#x}");
        let new = if s & HANDOFF != 0 { LOCKED | HANDOFF } else { 0 };
        match state.compare_exchange_weak(s, new, AcqRel, Relaxed) {
            Ok(_) => return s & PARKED != 0,
            Err(now) => s = now,
        }
    }
}

/// What the head does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// It took the lock.
    Taken,
    /// `PARKED` (and `HANDOFF` if asked) is set: it may sleep until a
    /// wake-up, which any unlock from now on owes it.
    Sleep,
}

/// The head's look at the byte: takes a free lock, or sets `PARKED`
/// (with `HANDOFF` when `handoff`, the head having waited long enough).
#[inline]
pub(crate) fn head_arm<B: Byte>(state: &B, handoff: bool) -> Step {
    loop {
        let s = state.load(Acquire);
        if s == 0 {
            // Free: an unlock clears `PARKED` and `HANDOFF` with `LOCKED`.
            if state.compare_exchange(0, LOCKED, Acquire, Relaxed).is_ok() {
                return Step::Taken;
            }
            continue;
        }
        let want = if handoff { PARKED | HANDOFF } else { PARKED };
        if s & want != want && state.compare_exchange(s, s | want, AcqRel, Relaxed).is_err() {
            continue;
        }
        return Step::Sleep;
    }
}

/// After a wake-up: whether the lock was handed to the head (then it is
/// the head's, and nobody else writes the byte now); if not, the head
/// looks again with [`head_arm`]. A wake-up left by a cancelled head only
/// wakes the next one for nothing.
#[inline]
pub(crate) fn head_woken<B: Byte>(state: &B) -> bool {
    if state.load(Acquire) & (PARKED | HANDOFF) == HANDOFF {
        state.store(LOCKED, Relaxed);
        return true;
    }
    false
}

/// The head gives up before it got the lock (its wait was cancelled):
/// takes back its `PARKED`/`HANDOFF`, or, if the lock was handed to it
/// meanwhile, gives the lock back. Never owes a wake-up: nobody else is
/// parked (the head is the only one that parks).
#[inline]
pub(crate) fn head_cancel<B: Byte>(state: &B) {
    let mut s = state.load(Acquire);
    loop {
        let new = if s & PARKED != 0 {
            s & !(PARKED | HANDOFF) // not woken yet: nobody will be
        } else if s & HANDOFF != 0 {
            0 // handed over: given back (nobody is parked now)
        } else {
            return; // woken by an unlock, which cleared the state
        };
        match state.compare_exchange_weak(s, new, AcqRel, Acquire) {
            Ok(_) => return,
            Err(now) => s = now,
        }
    }
}

/// Whether someone holds the lock now.
#[inline(always)]
pub(crate) fn is_locked<B: Byte>(state: &B) -> bool {
    state.load(Relaxed) & LOCKED != 0
}

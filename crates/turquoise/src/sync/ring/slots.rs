//! What both rings share: slots indexed by positions that count modulo
//! 2^31, the sender's tail, and each side's end. Names its primitives only
//! through `prims` (see `mod.rs`).

use std::sync::atomic::Ordering;

use super::prims::{AtomicBool, AtomicU32, Producer, Slot, Versions};

/// Positions count modulo 2^31, as event count versions do.
pub(super) const POSITIONS: u32 = (1 << 31) - 1;

/// A ring's slots, a power of two of them: the value of position `p` is
/// in slot `p & (len - 1)`.
pub(super) type Slots<T> = Box<[Slot<T>]>;

/// At least `capacity` empty slots (a power of two, at most 2^30, so that
/// it divides 2^31 and a ring's length of positions fits in them).
pub(super) fn slots<T>(capacity: usize) -> Slots<T> {
    let cap = capacity.max(1).next_power_of_two();
    assert!(cap <= 1 << 30, "turquoise::sync::ring: capacity above 2^30");
    (0..cap).map(|_| Slot::empty()).collect()
}

/// Drops the values of positions `from` up to (not including) `to`.
///
/// # Safety
///
/// Those slots hold values written and never read, and nobody else is
/// left to touch them (the `&mut`).
pub(super) unsafe fn drop_between<T>(slots: &mut Slots<T>, mut from: u32, to: u32) {
    let mask = slots.len() - 1;
    while from != to {
        // SAFETY: the caller's contract.
        unsafe { slots[from as usize & mask].drop_value() };
        from = (from + 1) & POSITIONS;
    }
}

/// One side's end: when it closed, at which position.
pub(super) struct End {
    closed: AtomicBool,
    at: AtomicU32,
}

impl End {
    pub(super) fn new() -> End {
        End { closed: AtomicBool::new(false), at: AtomicU32::new(0) }
    }

    /// Closes at `at` and bumps the side's count (`bump`), which wakes the
    /// other side if it waits: it reads the count, then sees the end.
    pub(super) fn close(&self, at: u32, bump: impl FnOnce() -> u32) {
        self.at.store(at, Ordering::Relaxed);
        self.closed.store(true, Ordering::Release);
        bump();
    }

    /// Where the side closed, if it has.
    pub(super) fn closed_at(&self) -> Option<u32> {
        self.closed.load(Ordering::Acquire).then(|| self.at.load(Ordering::Relaxed))
    }
}

/// A sender's write position, and the single-producer event count that
/// receivers wait on.
pub(super) struct Tail {
    count: Producer,
    pub(super) at: u32,
}

impl Tail {
    pub(super) fn new(count: Producer) -> Tail {
        Tail { count, at: 0 }
    }

    /// Moves `value` into the tail's slot and counts past it, once
    /// `free(tail, version)` says the slot is free at a `version` of
    /// `released` (the count that receivers bump as they finish with
    /// slots), waiting on it until then; `Err(value)` once `receivers`
    /// closed.
    ///
    /// # Safety
    ///
    /// When `free` says so, nobody reads or writes the slot until the count
    /// is past it, and any value it held was moved out.
    pub(super) unsafe fn send<T>(&mut self, slots: &Slots<T>, released: &Versions, receivers: &End, value: T, free: impl Fn(u32, u32) -> bool) -> Result<(), T> {
        loop {
            let version = released.value();
            if receivers.closed_at().is_some() {
                return Err(value);
            }
            if free(self.at, version) {
                // SAFETY: the caller's contract.
                unsafe { slots[self.at as usize & (slots.len() - 1)].write(value) };
                self.at = (self.at + 1) & POSITIONS;
                self.count.increment();
                return Ok(());
            }
            released.wait(version);
        }
    }

    /// Closes the sending end at the tail.
    pub(super) fn close(&mut self, end: &End) {
        end.close(self.at, || self.count.increment());
    }
}

/// Waits until the value of position `pos` is written (true), or the
/// sender closed at it (false). The caller read `pos` before this reads
/// the write count: the count is at or past it.
pub(super) fn readable(written: &Versions, sender: &End, pos: u32) -> bool {
    loop {
        let version = written.value();
        let end = sender.closed_at();
        if pos != end.unwrap_or(version) {
            return true;
        }
        if end.is_some() {
            return false;
        }
        written.wait(version);
    }
}


//! What the rings are built of, named in one place: std's atomics and
//! `Arc`, a slot, and turquoise's event counts. `crates/sync-models` gives
//! the same names loom's atomics, a loom cell and a modelled event count,
//! and includes the rings' files as they are.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;

pub(super) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
pub(super) use std::sync::Arc;

pub(super) use crate::sync::event_count::{EventCount, Producer, Versions};

/// One place of a ring: empty, or holding a value that was written and
/// not yet taken. Which it is, and who may touch it, the ring's positions
/// say; the slot itself does not know.
pub(super) struct Slot<T>(UnsafeCell<MaybeUninit<T>>);

impl<T> Slot<T> {
    pub(super) fn empty() -> Slot<T> {
        Slot(UnsafeCell::new(MaybeUninit::uninit()))
    }

    /// Puts `value` in the slot.
    ///
    /// # Safety
    ///
    /// The slot is empty (any value was taken), and nobody else touches it
    /// until the caller publishes it.
    #[inline(always)]
    pub(super) unsafe fn write(&self, value: T) {
        // SAFETY: the caller's contract: no other access to the slot now.
        unsafe { (*self.0.get()).write(value) };
    }

    /// Moves the value out, leaving the slot empty.
    ///
    /// # Safety
    ///
    /// The slot holds a value, published to the caller, and nobody else
    /// touches it until the caller says it is free.
    #[inline(always)]
    pub(super) unsafe fn take(&self) -> T {
        // SAFETY: the caller's contract: a value is there, and no other
        // access to the slot now.
        unsafe { (*self.0.get()).assume_init_read() }
    }

    /// Drops the value in the slot, leaving it empty.
    ///
    /// # Safety
    ///
    /// The slot holds a value (the `&mut` rules out anyone else).
    pub(super) unsafe fn drop_value(&mut self) {
        // SAFETY: the caller's contract: a value is there.
        unsafe { self.0.get_mut().assume_init_drop() };
    }
}

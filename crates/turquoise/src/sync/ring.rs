//! A bounded single-producer, single-consumer ring on two single-producer
//! event counts: the sender's count is the write position, the receiver's
//! the read position. No atomic read-modify-write on either side while the
//! other side does not sleep: a slot write (or read) and one plain `add`.
//!
//! ```
//! let (mut tx, mut rx) = turquoise::sync::ring::channel(4);
//! let t = std::thread::spawn(move || (0..100).map(|_| rx.recv().unwrap()).sum::<u32>());
//! for i in 0..100 {
//!     tx.send(i).unwrap();
//! }
//! assert_eq!(t.join().unwrap(), 4950);
//! ```
//!
//! A full ring makes the sender wait, an empty one the receiver: a green
//! thread parks, an OS thread sleeps ([`super::Versions::wait`]).
//!
//! [`spmc`] is the single-producer, multi-consumer flavour.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use super::event_count::{EventCount, Producer, Versions};

pub mod spmc;

/// Positions count modulo 2^31, as event count versions do.
const POSITIONS: u32 = (1 << 31) - 1;

/// A ring's slots, a power of two of them: the value of position `p` is
/// in slot `p & (len - 1)`.
type Slots<T> = Box<[UnsafeCell<MaybeUninit<T>>]>;

/// At least `capacity` empty slots (a power of two, at most 2^30, so that
/// it divides 2^31 and a ring's length of positions fits in them).
fn slots<T>(capacity: usize) -> Slots<T> {
    let cap = capacity.max(1).next_power_of_two();
    assert!(cap <= 1 << 30, "turquoise::sync::ring: capacity above 2^30");
    (0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect()
}

/// Drops the values of positions `from` up to (not including) `to`.
///
/// # Safety
///
/// Those slots hold values written and never read, and nobody else is
/// left to touch them (the `&mut`).
unsafe fn drop_between<T>(slots: &mut Slots<T>, mut from: u32, to: u32) {
    let mask = slots.len() - 1;
    while from != to {
        // SAFETY: the caller's contract.
        unsafe { slots[from as usize & mask].get_mut().assume_init_drop() };
        from = (from + 1) & POSITIONS;
    }
}

/// One side's end: when it closed, at which position.
struct End {
    closed: AtomicBool,
    at: AtomicU32,
}

impl End {
    fn new() -> End {
        End { closed: AtomicBool::new(false), at: AtomicU32::new(0) }
    }

    /// Closes at `at` and bumps the side's count (`bump`), which wakes the
    /// other side if it waits: it reads the count, then sees the end.
    fn close(&self, at: u32, bump: impl FnOnce() -> u32) {
        self.at.store(at, Ordering::Relaxed);
        self.closed.store(true, Ordering::Release);
        bump();
    }

    /// Where the side closed, if it has.
    fn closed_at(&self) -> Option<u32> {
        self.closed.load(Ordering::Acquire).then(|| self.at.load(Ordering::Relaxed))
    }
}

/// A sender's write position, and the single-producer event count that
/// receivers wait on.
struct Tail {
    count: Producer,
    at: u32,
}

impl Tail {
    fn new(count: Producer) -> Tail {
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
    unsafe fn send<T>(&mut self, slots: &Slots<T>, released: &Versions, receivers: &End, value: T, free: impl Fn(u32, u32) -> bool) -> Result<(), T> {
        loop {
            let version = released.value();
            if receivers.closed_at().is_some() {
                return Err(value);
            }
            if free(self.at, version) {
                let slot = &slots[self.at as usize & (slots.len() - 1)];
                // SAFETY: the caller's contract.
                unsafe { (*slot.get()).write(value) };
                self.at = (self.at + 1) & POSITIONS;
                self.count.increment();
                return Ok(());
            }
            released.wait(version);
        }
    }

    /// Closes the sending end at the tail.
    fn close(&mut self, end: &End) {
        end.close(self.at, || self.count.increment());
    }
}

/// Waits until the value of position `pos` is written (true), or the
/// sender closed at it (false). The caller read `pos` before this reads
/// the write count: the count is at or past it.
fn readable(written: &Versions, sender: &End, pos: u32) -> bool {
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

struct Shared<T> {
    slots: Slots<T>,
    written: Arc<Versions>,
    read: Arc<Versions>,
    sender: End,
    receiver: End,
}

// SAFETY: a slot is written only by the sender and only while the receiver
// is done with it (the read count is past it), read only by the receiver
// and only after the write count passed it: never both at once. Values
// move from the sender's thread to the receiver's: `T: Send` suffices.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Both ends are closed: what lies between them was never received.
        let (Some(pos), Some(end)) = (self.receiver.closed_at(), self.sender.closed_at()) else { return };
        // SAFETY: the slots from the read end to the write end hold values
        // written and not read; nobody else is left to touch them.
        unsafe { drop_between(&mut self.slots, pos, end) };
    }
}

/// Makes a ring of at least `capacity` slots (a power of two, at most
/// 2^30).
pub fn channel<T: Send>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let (written_by, written) = EventCount::single_producer();
    let (read_by, read) = EventCount::single_producer();
    let shared = Arc::new(Shared { slots: slots(capacity), written, read, sender: End::new(), receiver: End::new() });
    (Sender { shared: shared.clone(), tail: Tail::new(written_by) }, Receiver { shared, count: read_by, head: 0 })
}

/// The sending end (one thread at a time: `Send`, not `Sync`).
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    tail: Tail,
}

impl<T> Sender<T> {
    /// Puts `value` in the ring, waiting while it is full; `Err(value)` if
    /// the receiver is gone.
    pub fn send(&mut self, value: T) -> Result<(), T> {
        let s = &*self.shared;
        let len = s.slots.len() as u32;
        // SAFETY: with the receiver's count within a ring's length behind
        // the tail, it is done with the tail's slot (it read it before it
        // counted past it) and will not read it until the write count is
        // past it.
        unsafe { self.tail.send(&s.slots, &s.read, &s.receiver, value, |tail, read| (tail.wrapping_sub(read) & POSITIONS) < len) }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.tail.close(&self.shared.sender);
    }
}

/// The receiving end (one thread at a time: `Send`, not `Sync`).
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    count: Producer,
    head: u32,
}

impl<T> Receiver<T> {
    /// The next value, waiting while the ring is empty; `None` once it is
    /// empty and the sender gone.
    pub fn recv(&mut self) -> Option<T> {
        let s = &*self.shared;
        if !readable(&s.written, &s.sender, self.head) {
            return None;
        }
        let slot = &s.slots[self.head as usize & (s.slots.len() - 1)];
        // SAFETY: the write count (or the sender's end) is past the head:
        // the sender wrote this slot before counting past it and will not
        // write it again until the increment below.
        let value = unsafe { (*slot.get()).assume_init_read() };
        self.head = (self.head + 1) & POSITIONS;
        self.count.increment();
        Some(value)
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.receiver.close(self.head, || self.count.increment());
    }
}

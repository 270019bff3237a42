//! The single-producer, single-consumer ring, on two single-producer
//! event counts: the sender's count is the write position, the receiver's
//! the read position. No atomic read-modify-write on either side while the
//! other side does not sleep: a slot write (or read) and one plain `add`.
//! Names its primitives only through `prims` (see `mod.rs`).

use super::prims::{Arc, EventCount, Producer, Versions};
use super::slots::{drop_between, readable, slots, End, Slots, Tail, POSITIONS};

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
        // SAFETY: the write count (or the sender's end) is past the head:
        // the sender wrote this slot before counting past it and will not
        // write it again until the increment below.
        let value = unsafe { s.slots[self.head as usize & (s.slots.len() - 1)].take() };
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

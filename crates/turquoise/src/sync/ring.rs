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

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use super::event_count::{EventCount, Producer, Versions};

/// Positions count modulo 2^31, as event count versions do.
const POSITIONS: u32 = (1 << 31) - 1;

/// One side's end: when it closed, at which position.
struct End {
    closed: AtomicBool,
    at: AtomicU32,
}

impl End {
    fn new() -> End {
        End { closed: AtomicBool::new(false), at: AtomicU32::new(0) }
    }

    /// Closes at `at` and bumps the side's count, which wakes the other
    /// side if it waits: it reads the count, then sees the end.
    fn close(&self, at: u32, count: &mut Producer) {
        self.at.store(at, Ordering::Relaxed);
        self.closed.store(true, Ordering::Release);
        count.increment();
    }

    /// Where the side closed, if it has.
    fn closed_at(&self) -> Option<u32> {
        self.closed.load(Ordering::Acquire).then(|| self.at.load(Ordering::Relaxed))
    }
}

struct Shared<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
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
        let (Some(mut pos), Some(end)) = (self.receiver.closed_at(), self.sender.closed_at()) else { return };
        let mask = self.slots.len() - 1;
        while pos != end {
            // SAFETY: the slots from the read end to the write end hold
            // values written and not read; nobody else is left to touch them.
            unsafe { self.slots[pos as usize & mask].get_mut().assume_init_drop() };
            pos = (pos + 1) & POSITIONS;
        }
    }
}

/// Makes a ring of at least `capacity` slots (a power of two, at most
/// 2^30).
pub fn channel<T: Send>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let cap = capacity.max(1).next_power_of_two();
    assert!(cap <= 1 << 30, "turquoise::sync::ring: capacity above 2^30");
    let (written_by, written) = EventCount::single_producer();
    let (read_by, read) = EventCount::single_producer();
    let slots = (0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
    let shared = Arc::new(Shared { slots, written, read, sender: End::new(), receiver: End::new() });
    (Sender { shared: shared.clone(), count: written_by, tail: 0 }, Receiver { shared, count: read_by, head: 0 })
}

/// The sending end (one thread at a time: `Send`, not `Sync`).
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    count: Producer,
    tail: u32,
}

impl<T> Sender<T> {
    /// Puts `value` in the ring, waiting while it is full; `Err(value)` if
    /// the receiver is gone.
    pub fn send(&mut self, value: T) -> Result<(), T> {
        let s = &*self.shared;
        loop {
            let read = s.read.value();
            if s.receiver.closed_at().is_some() {
                return Err(value);
            }
            if (self.tail.wrapping_sub(read) & POSITIONS) < s.slots.len() as u32 {
                let slot = &s.slots[self.tail as usize & (s.slots.len() - 1)];
                // SAFETY: the receiver's count is within a ring's length
                // behind the tail, so it is done with this slot (it read it
                // before it counted past it) and will not read it until the
                // increment below.
                unsafe { (*slot.get()).write(value) };
                self.tail = (self.tail + 1) & POSITIONS;
                self.count.increment();
                return Ok(());
            }
            s.read.wait(read);
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.sender.close(self.tail, &mut self.count);
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
        loop {
            let written = s.written.value();
            let end = s.sender.closed_at();
            if self.head != end.unwrap_or(written) {
                let slot = &s.slots[self.head as usize & (s.slots.len() - 1)];
                // SAFETY: the write count (or the sender's end) is past the
                // head: the sender wrote this slot before counting past it
                // and will not write it again until the increment below.
                let value = unsafe { (*slot.get()).assume_init_read() };
                self.head = (self.head + 1) & POSITIONS;
                self.count.increment();
                return Some(value);
            }
            if end.is_some() {
                return None;
            }
            s.written.wait(written);
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.receiver.close(self.head, &mut self.count);
    }
}

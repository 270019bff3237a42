//! A bounded single-producer, multi-consumer ring: one [`Sender`], any
//! number of [`Receiver`]s (clones), each value received by exactly one of
//! them.
//!
//! ```
//! let (mut tx, rx) = turquoise::sync::ring::spmc::channel(4);
//! let sums: Vec<_> = (0..3)
//!     .map(|_| {
//!         let rx = rx.clone();
//!         std::thread::spawn(move || std::iter::from_fn(|| rx.recv()).sum::<u32>())
//!     })
//!     .collect();
//! drop(rx);
//! for i in 0..100 {
//!     tx.send(i).unwrap();
//! }
//! drop(tx); // the receivers take what is left, then get `None`
//! assert_eq!(sums.into_iter().map(|t| t.join().unwrap()).sum::<u32>(), 4950);
//! ```
//!
//! The write position is the sender's single-producer event count, which
//! receivers wait on while the ring is empty. A receiver claims the next
//! read position with a compare-and-swap on a shared read index, moves the
//! value out of its slot, then marks the slot free for the position one
//! ring's length on and bumps a multi-producer event count, which the
//! sender waits on while the slot it is to write is not free yet (claimed
//! is not enough: the claimant may still be reading it). `docs/safety.md`,
//! "Event counts and asymmetric fences", gives the argument. Names its
//! primitives only through `prims` (see `mod.rs`).

use std::sync::atomic::Ordering;

use super::prims::{Arc, AtomicU32, AtomicU64, AtomicUsize, EventCount, Versions};
use super::slots::{drop_between, readable, slots, End, Slots, Tail, POSITIONS};

struct Shared<T> {
    slots: Slots<T>,
    /// Per slot, the position it may be written at next: the read of the
    /// position one ring's length before it has finished.
    free_at: Box<[AtomicU32]>,
    /// The next position to claim, counted in 64 bits (a stale one never
    /// compares equal again); its low 31 bits are the position.
    head: AtomicU64,
    written: Arc<Versions>,
    /// Bumped after each finished read (and when the last receiver goes).
    released: EventCount,
    receivers: AtomicUsize,
    sender: End,
    receiver: End,
}

// SAFETY: the sender writes a slot only at the position in its `free_at`,
// stored after the read one ring's length before finished; a receiver reads
// one only at a position the write count is past and that its successful
// compare-and-swap on `head` claimed, which no other receiver's can (the
// index only grows). Values move from the sender's thread to one
// receiver's: `T: Send` suffices.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Every claimed value was moved out before its claimant returned
        // (and no handle is left to be mid-read): the unread ones lie from
        // the read index to the write end.
        let Some(end) = self.sender.closed_at() else { return };
        let head = self.head.load(Ordering::Relaxed) as u32 & POSITIONS;
        // SAFETY: those slots hold values written and not claimed; nobody
        // else is left to touch them.
        unsafe { drop_between(&mut self.slots, head, end) };
    }
}

/// Makes a ring of at least `capacity` slots (a power of two, at most
/// 2^30).
pub fn channel<T: Send>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let (written_by, written) = EventCount::single_producer();
    let slots = slots(capacity);
    let free_at = (0..slots.len() as u32).map(AtomicU32::new).collect();
    let shared = Arc::new(Shared {
        slots,
        free_at,
        head: AtomicU64::new(0),
        written,
        released: EventCount::new(),
        receivers: AtomicUsize::new(1),
        sender: End::new(),
        receiver: End::new(),
    });
    (Sender { shared: shared.clone(), tail: Tail::new(written_by) }, Receiver { shared })
}

/// The sending end (one thread at a time: `Send`, not `Sync` nor `Clone`).
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    tail: Tail,
}

impl<T> Sender<T> {
    /// Puts `value` in the ring, waiting while its slot is still in use;
    /// `Err(value)` if every receiver is gone.
    pub fn send(&mut self, value: T) -> Result<(), T> {
        let s = &*self.shared;
        let i = self.tail.at as usize & (s.slots.len() - 1);
        // SAFETY: the read of the tail slot's last value finished before
        // its `free_at` was stored (acquired here), and no receiver claims
        // the tail before the write count is past it.
        unsafe { self.tail.send(&s.slots, &s.released, &s.receiver, value, |tail, _| s.free_at[i].load(Ordering::Acquire) == tail) }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.tail.close(&self.shared.sender);
    }
}

/// A receiving end: clone it for more receivers (each value goes to one).
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// The next value, waiting while the ring is empty; `None` once it is
    /// empty and the sender gone.
    pub fn recv(&self) -> Option<T> {
        let s = &*self.shared;
        let mask = s.slots.len() - 1;
        loop {
            // The index first: the write count read after it is at or past
            // the position it names. A stale index (another receiver took
            // that position meanwhile) fails the swap, or is readable.
            let head = s.head.load(Ordering::Acquire);
            let pos = head as u32 & POSITIONS;
            if !readable(&s.written, &s.sender, pos) {
                return None;
            }
            if s.head.compare_exchange_weak(head, head.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue;
            }
            let i = pos as usize & mask;
            // SAFETY: the write count (or the sender's end) is past `pos`:
            // the sender wrote this slot before counting past it, and
            // writes it again only once `free_at` below says so. The swap
            // made this receiver the only one to read it. The read is a
            // plain move: nothing between the claim and the store below
            // can panic and leave the value half taken.
            let value = unsafe { s.slots[i].take() };
            s.free_at[i].store((pos + s.slots.len() as u32) & POSITIONS, Ordering::Release);
            s.released.increment();
            return Some(value);
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Receiver<T> {
        self.shared.receivers.fetch_add(1, Ordering::Relaxed);
        Receiver { shared: self.shared.clone() }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let s = &*self.shared;
        if s.receivers.fetch_sub(1, Ordering::AcqRel) == 1 {
            s.receiver.close(s.head.load(Ordering::Relaxed) as u32 & POSITIONS, || s.released.increment());
        }
    }
}

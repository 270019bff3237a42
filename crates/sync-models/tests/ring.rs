//! The rings (`turquoise/src/sync/ring/{slots,spsc,spmc}.rs`), model
//! checked: the three files run as they ship on loom's atomics and cells,
//! with `prims` below standing in for `ring/prims.rs`. Under every
//! interleaving and every ordering the C++ memory model allows (up to the
//! preemption bound), each value sent is received once, in order on the
//! single-consumer ring, and never read while it is written (the slots are
//! loom cells: a read and a write not ordered by the positions fail the
//! run); no side sleeps for good (loom reports a deadlock); a closed end is
//! seen; every value is dropped exactly once, received or not.
//!
//! The event counts are modelled, not included: a version word bumped by
//! an atomic add and a sleep checked under a loom mutex (a futex). Their
//! own protocol is checked in `event_count.rs`; the single producer's
//! plain add and its asymmetric fence are outside the C++ model (argued in
//! `docs/safety.md`, "Event counts and asymmetric fences").

#[path = "../../turquoise/src/sync/ring/slots.rs"]
mod slots;
#[path = "../../turquoise/src/sync/ring/spmc.rs"]
mod spmc;
#[path = "../../turquoise/src/sync/ring/spsc.rs"]
mod spsc;

/// `ring/prims.rs`, on loom.
mod prims {
    use std::mem::MaybeUninit;
    use std::ops::Deref;
    use std::sync::atomic::Ordering;

    pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
    pub use loom::sync::Arc;
    use loom::sync::{Condvar, Mutex};

    pub struct Slot<T>(loom::cell::UnsafeCell<MaybeUninit<T>>);

    impl<T> Slot<T> {
        pub fn empty() -> Slot<T> {
            Slot(loom::cell::UnsafeCell::new(MaybeUninit::uninit()))
        }
        pub unsafe fn write(&self, value: T) {
            // SAFETY: the ring's contract, which loom checks here.
            self.0.with_mut(|p| unsafe { (*p).write(value) });
        }
        pub unsafe fn take(&self) -> T {
            // SAFETY: as above.
            self.0.with_mut(|p| unsafe { (*p).assume_init_read() })
        }
        pub unsafe fn drop_value(&mut self) {
            // SAFETY: as above.
            self.0.with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }

    /// An event count's versions: a word, and sleepers on it.
    pub struct Versions {
        word: AtomicU32,
        futex: Mutex<()>,
        woken: Condvar,
    }

    impl Versions {
        fn new() -> Versions {
            Versions { word: AtomicU32::new(0), futex: Mutex::new(()), woken: Condvar::new() }
        }
        pub fn value(&self) -> u32 {
            self.word.load(Ordering::Acquire)
        }
        /// Sleeps while the version is `old` (checked under the futex's
        /// lock, as the kernel does); the version then.
        pub fn wait(&self, old: u32) -> u32 {
            let mut g = self.futex.lock().unwrap();
            while self.word.load(Ordering::Acquire) == old {
                g = self.woken.wait(g).unwrap();
            }
            drop(g);
            self.value()
        }
        fn bump(&self) -> u32 {
            let old = self.word.fetch_add(1, Ordering::Release);
            drop(self.futex.lock().unwrap());
            self.woken.notify_all();
            old
        }
    }

    pub struct EventCount(Versions);

    impl EventCount {
        pub fn new() -> EventCount {
            EventCount(Versions::new())
        }
        pub fn increment(&self) -> u32 {
            self.0.bump()
        }
        pub fn single_producer() -> (Producer, Arc<Versions>) {
            let v = Arc::new(Versions::new());
            (Producer(v.clone()), v)
        }
    }

    impl Deref for EventCount {
        type Target = Versions;
        fn deref(&self) -> &Versions {
            &self.0
        }
    }

    pub struct Producer(Arc<Versions>);

    impl Producer {
        pub fn increment(&mut self) -> u32 {
            self.0.bump()
        }
    }
}

use std::sync::atomic::Ordering;

use loom::sync::atomic::AtomicUsize;
use loom::sync::Arc;
use loom::thread;

/// A value that counts its drops.
struct Counted(u32, Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
}

fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    b.check(f);
}

#[test]
fn a_one_slot_ring_hands_over_each_value_in_order_and_then_its_end() {
    model(3, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, mut rx) = spsc::channel::<Counted>(1);
        let d = drops.clone();
        let sender = thread::spawn(move || {
            for i in 1..=2 {
                assert!(tx.send(Counted(i, d.clone())).is_ok());
            }
        });
        for i in 1..=2 {
            assert_eq!(rx.recv().map(|v| v.0), Some(i));
        }
        assert!(rx.recv().is_none(), "the sender's end was not seen");
        sender.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    });
}

#[test]
fn a_receiver_that_leaves_stops_the_sender_and_every_value_is_dropped_once() {
    model(3, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, mut rx) = spsc::channel::<Counted>(1);
        let d = drops.clone();
        let sender = thread::spawn(move || {
            let mut sent = 0;
            for i in 1..=3 {
                match tx.send(Counted(i, d.clone())) {
                    Ok(()) => sent += 1,
                    Err(v) => drop(v),
                }
            }
            sent
        });
        assert_eq!(rx.recv().map(|v| v.0), Some(1));
        drop(rx);
        let sent = sender.join().unwrap();
        assert!(sent >= 1 && sent <= 2, "sent {sent} into a one-slot ring whose receiver took one and left");
        // Received, sent and never read, or refused: each dropped once.
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    });
}

#[test]
fn two_receivers_of_a_one_slot_ring_get_each_value_once() {
    model(2, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, rx) = spmc::channel::<Counted>(1);
        let d = drops.clone();
        let sender = thread::spawn(move || {
            for i in 1..=2 {
                assert!(tx.send(Counted(i, d.clone())).is_ok());
            }
        });
        let other = rx.clone();
        let receiver = thread::spawn(move || std::iter::from_fn(|| other.recv()).map(|v| 1 << v.0).sum::<u32>());
        let mine = std::iter::from_fn(|| rx.recv()).map(|v| 1 << v.0).sum::<u32>();
        let theirs = receiver.join().unwrap();
        sender.join().unwrap();
        assert_eq!(mine + theirs, 0b110, "a value was lost or received twice");
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    });
}

#[test]
fn values_left_in_a_multi_consumer_ring_are_dropped_with_it() {
    model(3, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, rx) = spmc::channel::<Counted>(2);
        let d = drops.clone();
        let sender = thread::spawn(move || {
            for i in 1..=2 {
                // Refused (and dropped here) if the receiver left first.
                let _ = tx.send(Counted(i, d.clone()));
            }
        });
        let got = rx.recv().map(|v| v.0);
        assert_eq!(got, Some(1));
        drop(rx);
        sender.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 2, "the value left in the ring was not dropped once");
    });
}

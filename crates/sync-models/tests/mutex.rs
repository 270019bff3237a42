//! The mutex's state byte (`turquoise/src/sync/mutex_word.rs`), model
//! checked: under every interleaving and every ordering the C++ memory
//! model allows, one holder at a time (the data is a loom cell, which
//! reports two accesses that are not ordered), no lost wake-up of the head
//! (loom reports a deadlock when every thread sleeps), a hand-off that
//! nobody barges into, and a cancelled head that leaves a lock the others
//! can still take.
//!
//! The waits are modelled as `mutex.rs` makes them: the queue, tokio's
//! semaphore of one permit, is a loom mutex whose guard makes the head;
//! the head's wake-ups, tokio's semaphore of no permits that an unlock
//! adds to, is a counting semaphore on a loom mutex and condition
//! variable.

#[allow(dead_code)]
#[path = "../../turquoise/src/sync/mutex_word.rs"]
mod mutex_word;

use std::sync::atomic::Ordering;

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU8;
use loom::sync::{Arc, Condvar, Mutex as LoomMutex};
use loom::thread;
use mutex_word::{Byte, Step};

struct Byte8(AtomicU8);

impl Byte for Byte8 {
    fn load(&self, order: Ordering) -> u8 {
        self.0.load(order)
    }
    fn store(&self, v: u8, order: Ordering) {
        self.0.store(v, order)
    }
    fn compare_exchange(&self, current: u8, new: u8, success: Ordering, failure: Ordering) -> Result<u8, u8> {
        self.0.compare_exchange(current, new, success, failure)
    }
    fn compare_exchange_weak(&self, current: u8, new: u8, success: Ordering, failure: Ordering) -> Result<u8, u8> {
        self.0.compare_exchange_weak(current, new, success, failure)
    }
}

/// A counting semaphore: tokio's `Semaphore` as the mutex uses it for
/// wake-ups (`acquire` then `forget`, `add_permits(1)`).
struct Permits {
    count: LoomMutex<usize>,
    added: Condvar,
}

impl Permits {
    fn new() -> Permits {
        Permits { count: LoomMutex::new(0), added: Condvar::new() }
    }

    fn acquire(&self) {
        let mut n = self.count.lock().unwrap();
        while *n == 0 {
            n = self.added.wait(n).unwrap();
        }
        *n -= 1;
    }

    fn add(&self) {
        *self.count.lock().unwrap() += 1;
        self.added.notify_one();
    }
}

/// `turquoise::sync::Mutex<u32>`, its waits modelled.
struct Mutex {
    state: Byte8,
    queue: LoomMutex<()>,
    wake: Permits,
    data: UnsafeCell<u32>,
}

/// How the head behaves in a model.
#[derive(Clone, Copy)]
enum Head {
    /// Waits, asking for a hand-off at once (as after `HANDOFF_AFTER`) or not.
    Waits { handoff: bool },
    /// Arms, then gives up before it sleeps (a timeout, a dropped
    /// `lock_async`, a cancelled green thread): whether it got the lock.
    GivesUp { handoff: bool },
}

impl Mutex {
    fn new() -> Mutex {
        Mutex { state: Byte8(AtomicU8::new(0)), queue: LoomMutex::new(()), wake: Permits::new(), data: UnsafeCell::new(0) }
    }

    /// `Mutex::lock_raw` (but for the spinning, which is only more tries)
    /// and `lock_slow`: whether the lock was taken.
    fn lock(&self, how: Head) -> bool {
        if mutex_word::try_lock(&self.state) {
            return true;
        }
        let _queue = self.queue.lock().unwrap();
        loop {
            let handoff = match how {
                Head::Waits { handoff } | Head::GivesUp { handoff } => handoff,
            };
            if mutex_word::head_arm(&self.state, handoff) == Step::Taken {
                return true;
            }
            if let Head::GivesUp { .. } = how {
                mutex_word::head_cancel(&self.state);
                return false;
            }
            self.wake.acquire();
            if mutex_word::head_woken(&self.state) {
                return true;
            }
        }
    }

    fn unlock(&self) {
        if mutex_word::unlock(&self.state) {
            self.wake.add();
        }
    }

    /// Locks, adds one to the data (a read and a write that loom checks
    /// against every other access), unlocks: whether it locked.
    fn add_one(&self, how: Head) -> bool {
        if !self.lock(how) {
            return false;
        }
        self.data.with_mut(|d| {
            // SAFETY: the lock is held (which is what the model checks).
            unsafe { *d += 1 }
        });
        self.unlock();
        true
    }

    fn value(&self) -> u32 {
        // SAFETY: read after every other thread was joined.
        self.data.with(|d| unsafe { *d })
    }
}

/// loom's search bounded to three preemptions per execution, as the
/// event count's models bound theirs: each of these runs in seconds, and
/// the protocol breaks tried fail within it (see the tests).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Two lockers beside the main thread, all adding one under the lock.
fn three_lockers(how: Head) {
    model(move || {
        let m = Arc::new(Mutex::new());
        let others: Vec<_> = (0..2)
            .map(|_| {
                let m = m.clone();
                thread::spawn(move || assert!(m.add_one(how)))
            })
            .collect();
        assert!(m.add_one(how));
        for t in others {
            t.join().unwrap();
        }
        assert_eq!(m.value(), 3);
        assert_eq!(m.state.load(Ordering::SeqCst), 0, "the lock stayed taken or flagged");
    });
}

#[test]
fn one_holder_at_a_time_and_no_head_sleeps_for_good() {
    three_lockers(Head::Waits { handoff: false });
}

#[test]
fn a_handoff_is_not_lost_and_nobody_barges_in() {
    three_lockers(Head::Waits { handoff: true });
}

/// A head that gives up while a holder unlocks: the others still get the
/// lock, and the byte ends free. The holder locks twice, so that a
/// wake-up the quitter leaves behind can reach the next head while the
/// lock is held again (it must then sleep again, not take the lock).
fn a_head_gives_up(handoff: bool) {
    model(move || {
        let m = Arc::new(Mutex::new());
        let m1 = m.clone();
        let quitter = thread::spawn(move || m1.add_one(Head::GivesUp { handoff }));
        let m2 = m.clone();
        let waiter = thread::spawn(move || assert!(m2.add_one(Head::Waits { handoff })));
        assert!(m.add_one(Head::Waits { handoff: false }));
        assert!(m.add_one(Head::Waits { handoff: false }));
        let quit_locked = quitter.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(m.value(), 3 + quit_locked as u32);
        assert_eq!(m.state.load(Ordering::SeqCst), 0, "a cancelled head left the lock taken or flagged");
    });
}

#[test]
fn a_head_that_gives_up_leaves_the_lock_to_the_others() {
    a_head_gives_up(false);
}

#[test]
fn a_head_that_gives_up_after_asking_for_a_handoff_leaves_the_lock_to_the_others() {
    a_head_gives_up(true);
}

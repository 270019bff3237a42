//! The event count's word protocol (`turquoise/src/sync/ec_word.rs`), model
//! checked: under every interleaving and every ordering the C++ memory model
//! allows, a waiter that armed on a version is woken by any increment that
//! made a new one (no lost wake-up: loom reports a deadlock otherwise), and
//! the word's version counts every increment. The sleep is a futex on the
//! word, modelled as one: it sleeps only while the word holds the value it
//! was given, and a wake wakes every sleeper.

#[allow(dead_code)]
#[path = "../../turquoise/src/sync/ec_word.rs"]
mod ec_word;

use std::sync::atomic::Ordering;

use ec_word::{Word, SLEEPERS, VERSION};
use loom::sync::atomic::AtomicU32;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// The word, with a futex on it.
struct Ec {
    word: Word32,
    futex: Mutex<()>,
    woken: Condvar,
}

struct Word32(AtomicU32);

impl Word for Word32 {
    fn load(&self, order: Ordering) -> u32 {
        self.0.load(order)
    }
    fn compare_exchange_weak(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32> {
        self.0.compare_exchange_weak(current, new, success, failure)
    }
    fn fetch_add(&self, n: u32, order: Ordering) -> u32 {
        self.0.fetch_add(n, order)
    }
    fn fetch_and(&self, bits: u32, order: Ordering) -> u32 {
        self.0.fetch_and(bits, order)
    }
}

impl Ec {
    fn starting_at(version: u32) -> Ec {
        Ec { word: Word32(AtomicU32::new(version & VERSION)), futex: Mutex::new(()), woken: Condvar::new() }
    }

    /// `FUTEX_WAIT`: sleeps if the word holds `expected` (checked under the
    /// futex's lock, as the kernel checks under its bucket lock), until a
    /// wake; returns at once otherwise.
    fn futex_wait(&self, expected: u32) {
        let g = self.futex.lock().unwrap();
        if self.word.load(Ordering::SeqCst) == expected {
            drop(self.woken.wait(g).unwrap());
        }
    }

    /// `FUTEX_WAKE` of every sleeper.
    fn futex_wake(&self) {
        let _g = self.futex.lock().unwrap();
        self.woken.notify_all();
    }

    /// `Versions::sleep` without a deadline: what an OS thread's `wait` does.
    fn wait(&self, old: u32) -> u32 {
        loop {
            if let Some(v) = ec_word::arm(&self.word, old, None) {
                return v;
            }
            self.futex_wait(old | SLEEPERS);
        }
    }

    /// `EventCount::add`.
    fn add(&self, n: u32) -> u32 {
        let (old, owes) = ec_word::add(&self.word, n);
        if owes {
            ec_word::clear_flag(&self.word);
            self.futex_wake();
        }
        old & VERSION
    }

    fn value(&self) -> u32 {
        self.word.load(Ordering::Acquire) & VERSION
    }
}

/// loom's exhaustive search, bounded to interleavings with at most four
/// preemptions (forced switches) per execution, as tokio bounds its own:
/// the unbounded search of the three-thread tests takes minutes (270 s for
/// the two producers'), four takes 3 s for all, and both protocol breaks
/// tried (an add that does not see a wrap into the flag, a waiter that
/// sleeps without setting it) fail at two.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(4);
    b.check(f);
}

#[test]
fn a_waiter_is_woken_by_the_increment_it_waits_for() {
    model(|| {
        let ec = Arc::new(Ec::starting_at(0));
        let data = Arc::new(AtomicU32::new(0));
        let (e, d) = (ec.clone(), data.clone());
        let waiter = thread::spawn(move || {
            let seen = e.value();
            if d.load(Ordering::Acquire) == 0 {
                let v = e.wait(seen);
                assert_ne!(v, seen);
            }
            // The increment released the data with the version.
            assert_eq!(d.load(Ordering::Acquire), 7);
        });
        data.store(7, Ordering::Release);
        ec.add(1);
        waiter.join().unwrap();
        assert_eq!(ec.value(), 1);
    });
}

#[test]
fn a_waiter_for_two_increments_of_two_producers_loses_neither() {
    model(|| {
        let ec = Arc::new(Ec::starting_at(0));
        let e = ec.clone();
        let waiter = thread::spawn(move || {
            let mut v = e.value();
            while v < 2 {
                v = e.wait(v);
            }
        });
        let e = ec.clone();
        let producer = thread::spawn(move || {
            e.add(1);
        });
        ec.add(1);
        producer.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(ec.value(), 2);
    });
}

#[test]
fn two_waiters_are_both_woken_by_one_increment() {
    model(|| {
        let ec = Arc::new(Ec::starting_at(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let e = ec.clone();
                thread::spawn(move || e.wait(0))
            })
            .collect();
        ec.add(1);
        for w in waiters {
            assert_eq!(w.join().unwrap(), 1);
        }
    });
}

#[test]
fn an_increment_that_wraps_into_the_flag_wakes_and_clears_it() {
    model(|| {
        // The last version before the wrap: the next add carries into the
        // flag's bit, which must read as "owes a wake-up", and the wake
        // clears it.
        let ec = Arc::new(Ec::starting_at(VERSION));
        let e = ec.clone();
        let waiter = thread::spawn(move || e.wait(VERSION));
        ec.add(1);
        assert_eq!(waiter.join().unwrap(), 0);
        assert_eq!(ec.word.load(Ordering::SeqCst) & SLEEPERS, 0, "the flag stayed set after the wrap");
    });
}

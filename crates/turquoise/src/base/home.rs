//! Where a stopped poll goes back to: each thread's hand-off mailbox.
//!
//! A poll stopped in the middle resumes only on the thread it was stopped on
//! (see `future.rs`). A work-stealing executor may poll its task on another
//! thread first; requeueing it there (a self-wake) would let two busy
//! workers trade each other's stopped tasks forever, since neither steals
//! while its own queue is full. So a misplaced poll leaves its waker in the
//! mailbox of the task's home thread and its task goes to sleep: the home
//! thread wakes it at its next outer poll of any preemptible future (a wake
//! from that thread queues the task there, in tokio and most executors).
//!
//! A home thread that polls no more preemptible futures (idle, parked)
//! would never empty its mailbox: a courier thread wakes whatever has waited
//! there longer than [`PATIENCE`], from outside the executor. The task then
//! goes wherever the executor puts it, maybe its home, maybe not (and back
//! to the mailbox): an idle home thread is woken by the executor for that
//! work (tokio unparks an idle worker when work arrives), and polls it or
//! another preemptible future. Each courier round doubles the task's wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};

/// How long a misplaced task waits for its home thread before the courier
/// wakes it anyway (doubling at each miss, up to `PATIENCE_MAX`).
pub(crate) const PATIENCE: Duration = Duration::from_micros(500);
const PATIENCE_MAX: Duration = Duration::from_millis(16);

/// One thread's mailbox.
pub(crate) struct Home {
    /// Tasks polled elsewhere while their poll was stopped here, with when
    /// they may be woken by the courier.
    waiting: Mutex<Vec<(Waker, Instant)>>,
    /// `waiting` may be non-empty (checked at every outer poll: cheaper
    /// than the lock).
    any: AtomicBool,
}

thread_local! {
    static HERE: Arc<Home> = Arc::new(Home { waiting: Mutex::new(Vec::new()), any: AtomicBool::new(false) });
}

/// This thread's mailbox.
pub(crate) fn here() -> Arc<Home> {
    HERE.with(Arc::clone)
}

/// Wakes the tasks left in this thread's mailbox.
pub(crate) fn drain_here() {
    HERE.with(|h| h.drain());
}

/// Whether `home` is this thread's mailbox.
pub(crate) fn is_here(home: &Arc<Home>) -> bool {
    HERE.with(|h| Arc::ptr_eq(h, home))
}

impl Home {
    /// Leaves `waker` for this home thread (see the module's doc); `misses`
    /// is how many times in a row the task was misplaced.
    pub(crate) fn leave(self: &Arc<Self>, waker: &Waker, misses: u32) {
        let patience = PATIENCE.saturating_mul(1 << misses.min(5)).min(PATIENCE_MAX);
        let due = Instant::now() + patience;
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).push((waker.clone(), due));
        self.any.store(true, Ordering::Release);
        courier().expect(Arc::downgrade(self), due);
    }

    /// Wakes every task left here (called on the home thread).
    pub(crate) fn drain(&self) {
        // A task left just now, before its flag is up, is woken at the next
        // drain, or by the courier.
        if !self.any.swap(false, Ordering::Acquire) {
            return;
        }
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if w.is_empty() {
            return;
        }
        let tasks = std::mem::take(&mut *w);
        drop(w);
        for (waker, _) in tasks {
            waker.wake();
        }
    }

    /// When the next task left here may be woken by the courier.
    fn next_due(&self) -> Option<Instant> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(_, at)| *at).min()
    }

    /// Wakes the tasks whose wait is over.
    fn wake_due(&self, now: Instant) {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let mut due = Vec::new();
        w.retain(|(waker, at)| {
            if *at <= now {
                due.push(waker.clone());
                false
            } else {
                true
            }
        });
        drop(w);
        for waker in due {
            waker.wake();
        }
    }
}

/// The courier: one thread for the process, started at the first misplaced
/// poll, asleep while no mailbox has a task waiting.
struct Courier {
    homes: Mutex<Vec<(Weak<Home>, Instant)>>,
    bell: Condvar,
}

fn courier() -> &'static Courier {
    static C: OnceLock<&'static Courier> = OnceLock::new();
    C.get_or_init(|| {
        let c: &'static Courier = Box::leak(Box::new(Courier { homes: Mutex::new(Vec::new()), bell: Condvar::new() }));
        std::thread::Builder::new()
            .name("turquoise-courier".into())
            .spawn(move || c.run())
            .expect("turquoise: cannot start the courier thread");
        c
    })
}

impl Courier {
    fn expect(&self, home: Weak<Home>, due: Instant) {
        let mut h = self.homes.lock().unwrap_or_else(|e| e.into_inner());
        match h.iter_mut().find(|(w, _)| w.ptr_eq(&home)) {
            Some((_, at)) if *at <= due => return,
            Some((_, at)) => *at = due,
            None => h.push((home, due)),
        }
        drop(h);
        self.bell.notify_one();
    }

    fn run(&self) {
        let mut h = self.homes.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            let mut i = 0;
            while i < h.len() {
                if h[i].1 > now {
                    next = Some(next.map_or(h[i].1, |n| n.min(h[i].1)));
                    i += 1;
                    continue;
                }
                let Some(home) = h[i].0.upgrade() else {
                    h.swap_remove(i);
                    continue;
                };
                // Waking may run executor code: not under our lock.
                drop(h);
                home.wake_due(now);
                h = self.homes.lock().unwrap_or_else(|e| e.into_inner());
                // The list may have changed meanwhile: find the entry again.
                // The mailbox is read again under our lock: a task left
                // after this finds no entry and adds one.
                if let Some(j) = h.iter().position(|(w, _)| w.ptr_eq(&Arc::downgrade(&home))) {
                    match home.next_due() {
                        Some(at) => h[j].1 = at,
                        None => {
                            h.swap_remove(j);
                        }
                    }
                }
                i = 0;
                next = None;
            }
            h = match next {
                None => self.bell.wait(h).unwrap_or_else(|e| e.into_inner()),
                Some(at) => {
                    self.bell.wait_timeout(h, at.saturating_duration_since(Instant::now())).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }
}

//! A mutual exclusion lock that parks green threads, blocks OS threads and
//! is awaited by tasks, all on the same object.
//!
//! The lock is one byte (`state`): taking a free lock is one compare-and-
//! swap from 0, giving it back one compare-and-swap to 0 when nobody waits,
//! and neither touches a queue. A locker that finds it held spins a little
//! (OS threads only: a green thread spinning could be keeping the holder,
//! a green thread of its own worker, from running), then queues on `queue`,
//! tokio's semaphore with one permit, FIFO. The permit makes its holder the
//! *head*: the one waiter that sleeps on the byte itself. The head sets
//! `PARKED` and waits for a permit of `wake`, which the next unlock gives.
//!
//! Fairness is eventual, as `parking_lot`'s: a free lock is taken by
//! whoever comes (barging), so a lock that is released and retaken at once
//! does not pay a wake-up per turn. A head that has been waiting for
//! [`HANDOFF_AFTER`] sets `HANDOFF` as well: the next unlock then keeps the
//! lock locked and hands it to the head directly, and nobody can barge in
//! meanwhile. See `docs/safety.md`, "Synchronisation".

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::{LockResult, TryLockError, TryLockResult};
use std::time::{Duration, Instant};

use super::mutex_word::{self as word, Step};
use super::poison;

/// A mutex for green threads, OS threads and async tasks: [`lock`](Mutex::lock)
/// parks a green thread (its worker runs other work) and blocks an OS
/// thread; [`lock_async`](Mutex::lock_async) is its async form.
///
/// A green thread stopped by its slice while it holds the lock keeps it;
/// the others that want it park, and it is resumed and releases it: no
/// worker is blocked, unlike with `std::sync::Mutex`.
///
/// Poisoned like `std::sync::Mutex`: a guard dropped while its holder
/// panics (or is cancelled by unwinding) marks the mutex, and later
/// `lock`s return `Err` carrying the guard.
///
/// ```
/// use std::sync::Arc;
/// use turquoise::sync::Mutex;
///
/// let m = Arc::new(Mutex::new(0));
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let m = m.clone();
///         turquoise::thread::spawn(move || *m.lock().unwrap() += 1)
///     })
///     .collect();
/// for t in threads {
///     t.join().unwrap();
/// }
/// assert_eq!(*m.lock().unwrap(), 4);
/// ```
pub struct Mutex<T: ?Sized> {
    /// `LOCKED`, `PARKED` and `HANDOFF`: the protocol is `mutex_word.rs`.
    state: AtomicU8,
    /// The waiters' queue: its one permit makes the head.
    queue: tokio::sync::Semaphore,
    /// Wake-ups of the head: one per unlock that found `PARKED`.
    wake: tokio::sync::Semaphore,
    poisoned: poison::Flag,
    data: UnsafeCell<T>,
}

/// How long a waiter lets others barge ahead before it asks for a hand-off.
pub(crate) const HANDOFF_AFTER: Duration = Duration::from_micros(500);

/// Rounds of spinning of an OS thread that finds the lock held.
const SPINS: u32 = 10;

// SAFETY: the data is reached only through a guard, and one guard exists
// at a time (`LOCKED` is set by one locker at a time); a `T: Send` may so be used from any thread.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above: shared references to the mutex give `&mut T` to one
// holder at a time, which needs `T: Send` only (as std's).
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// Holds the lock; gives it back when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    poison: poison::Guard,
}

// SAFETY: a guard gives `&T` to whoever holds `&MutexGuard`, so it may be
// shared when `T: Sync` (as std's guard).
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            state: AtomicU8::new(0),
            queue: tokio::sync::Semaphore::const_new(1),
            wake: tokio::sync::Semaphore::const_new(0),
            poisoned: poison::Flag::new(), data: UnsafeCell::new(value),
        }
    }

    /// The value, consuming the mutex (`Err` if poisoned, with the value).
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poisoned;
        poisoned.result(self.data.into_inner())
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Acquires the lock: parks a green thread, blocks an OS thread, until
    /// it is free. `Err` if a holder panicked (the guard is inside).
    ///
    /// Like `std::sync::Mutex`, locking it again from its holder deadlocks.
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        self.lock_raw();
        self.guard()
    }

    /// Acquires the lock, for async code.
    pub async fn lock_async(&self) -> LockResult<MutexGuard<'_, T>> {
        if !self.try_lock_raw() {
            self.lock_slow().await;
        }
        self.guard()
    }

    /// Acquires the lock if it is free now.
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        if !self.try_lock_raw() {
            return Err(TryLockError::WouldBlock);
        }
        self.guard().map_err(TryLockError::Poisoned)
    }

    /// Acquires the lock, waiting for at most `timeout` (as
    /// `parking_lot`'s, and C's `turq_mutex_timedlock`): `WouldBlock` if it
    /// was still held then.
    ///
    /// ```
    /// use std::time::Duration;
    /// use turquoise::sync::Mutex;
    ///
    /// let m = Mutex::new(1);
    /// let held = m.lock().unwrap();
    /// assert!(m.try_lock_for(Duration::from_millis(5)).is_err());
    /// drop(held);
    /// assert_eq!(*m.try_lock_for(Duration::from_millis(5)).unwrap(), 1);
    /// ```
    pub fn try_lock_for(&self, timeout: Duration) -> TryLockResult<MutexGuard<'_, T>> {
        self.try_lock_until(super::deadline(timeout))
    }

    /// [`try_lock_for`](Mutex::try_lock_for) until `deadline`.
    pub fn try_lock_until(&self, deadline: Instant) -> TryLockResult<MutexGuard<'_, T>> {
        if !self.lock_raw_until(deadline) {
            return Err(TryLockError::WouldBlock);
        }
        self.guard().map_err(TryLockError::Poisoned)
    }

    /// Whether a holder panicked.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.get()
    }

    /// Marks the mutex as not poisoned (after its holder repaired the data).
    pub fn clear_poison(&self) {
        self.poisoned.clear();
    }

    /// The value, through `&mut` (no locking needed).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poisoned.result(self.data.get_mut())
    }

    /// Spins a little on an OS thread until the lock is free and taken:
    /// whether it was.
    fn spin(&self) -> bool {
        if crate::thread::current().is_some() {
            return false;
        }
        for round in 0..SPINS {
            if round < 6 {
                (0..1 << round).for_each(|_| std::hint::spin_loop());
            } else {
                std::thread::yield_now();
            }
            if self.state.load(Relaxed) == 0 && self.try_lock_raw() {
                return true;
            }
        }
        false
    }

    /// Queues, then waits as the head until the lock is taken or handed
    /// over. Dropped while it waits (a timeout, a dropped `lock_async`, a
    /// cancelled green thread), it leaves nothing behind: see `Head`.
    async fn lock_slow(&self) {
        let since = Instant::now();
        // Given back when this returns (after `head`'s drop): the next
        // waiter becomes the head.
        let _queue = self.queue.acquire().await.expect("the mutex's queue is never closed");
        let mut head = Head { state: &self.state, done: false };
        loop {
            if word::head_arm(&self.state, since.elapsed() >= HANDOFF_AFTER) == Step::Taken {
                head.done = true;
                return;
            }
            // An unlock after the arming gives a permit: none is lost.
            // A permit left by a cancelled head only wakes us for nothing.
            self.wake.acquire().await.expect("the mutex's wake-ups are never closed").forget();
            if word::head_woken(&self.state) {
                head.done = true;
                return;
            }
        }
    }

    /// The guard for the lock just taken.
    fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        self.poisoned.result(MutexGuard { mutex: self, poison: poison::Guard::new() })
    }

    /// Gives the lock back (the guard's drop, and `Condvar` waits).
    pub(super) fn unlock(&self, poison: &poison::Guard) {
        self.poisoned.mark_if_panicked(poison);
        self.unlock_raw();
    }

    /// Takes the lock without a guard (the C API, which records its holder
    /// itself): parks a green thread, blocks an OS thread. The caller gives
    /// it back with [`Mutex::unlock_raw`].
    pub(crate) fn lock_raw(&self) {
        if !self.try_lock_raw() && !self.spin() {
            super::wait(self.addr(), self.lock_slow());
        }
    }

    /// [`Mutex::lock_raw`] if the lock is free now: whether it was taken.
    pub(crate) fn try_lock_raw(&self) -> bool {
        word::try_lock(&self.state)
    }

    /// [`Mutex::lock_raw`] until `deadline`: whether it was taken.
    pub(crate) fn lock_raw_until(&self, deadline: std::time::Instant) -> bool {
        self.try_lock_raw() || self.spin() || super::wait_until(self.addr(), deadline, self.lock_slow()).is_some()
    }

    /// Gives back a lock taken by one of the `_raw` methods (or a
    /// forgotten guard), without poisoning.
    pub(crate) fn unlock_raw(&self) {
        if word::unlock(&self.state) {
            self.wake.add_permits(1);
        }
    }

    /// Whether someone holds the lock now.
    pub(crate) fn is_locked(&self) -> bool {
        word::is_locked(&self.state)
    }

    fn addr(&self) -> *const () {
        self as *const Self as *const ()
    }
}

/// The head of the queue while it waits. Dropped before it got the lock
/// (its wait cancelled), it takes back its `PARKED`/`HANDOFF`, or, if the
/// lock was handed to it meanwhile, gives the lock back. A wake-up given
/// for it stays behind as a permit, which wakes the next head once for
/// nothing.
struct Head<'a> {
    state: &'a AtomicU8,
    done: bool,
}

impl Drop for Head<'_> {
    fn drop(&mut self) {
        if !self.done {
            word::head_cancel(self.state);
        }
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The mutex this guard holds (for `Condvar`).
    pub(super) fn mutex(&self) -> &'a Mutex<T> {
        self.mutex
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock: no `&mut` exists elsewhere.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` the guard.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.unlock(&self.poison);
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(v: T) -> Mutex<T> {
        Mutex::new(v)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(g) => d.field("data", &&*g),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.is_poisoned())
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

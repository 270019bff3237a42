//! A mutual exclusion lock that parks green threads, blocks OS threads and
//! is awaited by tasks, all on the same object.
//!
//! Built on tokio's semaphore with one permit: its waiters queue in FIFO
//! order and a released permit is handed to the first of them, never taken
//! by a newcomer's `try_acquire` ahead of it (fairness: a waiter gets the
//! lock after at most as many hand-offs as there are waiters ahead of it).
//! The permit is not kept in the guard but forgotten and given back by
//! hand, so that the guard is ours (poisoning).

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{LockResult, TryLockError, TryLockResult};

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
    sem: tokio::sync::Semaphore,
    poisoned: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, and one guard exists
// at a time (the single permit); a `T: Send` may so be used from any thread.
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
        Mutex { sem: tokio::sync::Semaphore::const_new(1), poisoned: poison::Flag::new(), data: UnsafeCell::new(value) }
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
        self.acquire().await;
        self.guard()
    }

    /// Acquires the lock if it is free now.
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        if !self.try_lock_raw() {
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

    async fn acquire(&self) {
        // The semaphore is never closed.
        self.sem
            .acquire()
            .await
            .expect("the mutex's semaphore is never closed")
            .forget();
    }

    /// The guard for the permit just taken.
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
        if !self.try_lock_raw() {
            super::wait(self.addr(), self.acquire());
        }
    }

    /// [`Mutex::lock_raw`] if the lock is free now: whether it was taken.
    pub(crate) fn try_lock_raw(&self) -> bool {
        self.sem.try_acquire().map(|p| p.forget()).is_ok()
    }

    /// [`Mutex::lock_raw`] until `deadline`: whether it was taken.
    pub(crate) fn lock_raw_until(&self, deadline: std::time::Instant) -> bool {
        self.try_lock_raw() || super::wait_until(self.addr(), deadline, self.acquire()).is_some()
    }

    /// Gives back a lock taken by one of the `_raw` methods (or a
    /// forgotten guard), without poisoning.
    pub(crate) fn unlock_raw(&self) {
        self.sem.add_permits(1);
    }

    /// Whether someone holds the lock now.
    pub(crate) fn is_locked(&self) -> bool {
        self.sem.available_permits() == 0
    }

    fn addr(&self) -> *const () {
        self as *const Self as *const ()
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
        // SAFETY: the guard holds the only permit: no `&mut` exists elsewhere.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the only permit, and `&mut self` the guard.
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

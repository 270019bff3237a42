//! A reader-writer lock that parks green threads, blocks OS threads and is
//! awaited by tasks.
//!
//! tokio's `RwLock` underneath: fair (FIFO), so a steady stream of readers
//! cannot starve a writer, and a queued writer holds back later readers.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{LockResult, TryLockError, TryLockResult};

use super::poison;

/// Many readers or one writer, for green threads (which park), OS threads
/// (which block) and tasks (the `_async` forms). Poisoned like std's by a
/// writer that panics.
pub struct RwLock<T: ?Sized> {
    poisoned: poison::Flag,
    inner: tokio::sync::RwLock<T>,
}

/// Shared access; released when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    inner: tokio::sync::RwLockReadGuard<'a, T>,
}

/// Exclusive access; released when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    inner: tokio::sync::RwLockWriteGuard<'a, T>,
    poisoned: &'a poison::Flag,
    poison: poison::Guard,
}

impl<T> RwLock<T> {
    /// An unlocked lock holding `value`.
    pub fn new(value: T) -> RwLock<T> {
        RwLock { poisoned: poison::Flag::new(), inner: tokio::sync::RwLock::new(value) }
    }

    /// The value, consuming the lock (`Err` if poisoned, with the value).
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poisoned;
        poisoned.result(self.inner.into_inner())
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Shared access: parks a green thread, blocks an OS thread, while a
    /// writer holds or waits for the lock.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        let inner = match self.inner.try_read() {
            Ok(g) => g,
            Err(_) => super::wait(self.addr(), self.inner.read()),
        };
        self.checked(RwLockReadGuard { inner })
    }

    /// [`read`](RwLock::read), for async code.
    pub async fn read_async(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        let inner = self.inner.read().await;
        self.checked(RwLockReadGuard { inner })
    }

    /// Shared access if no writer holds or waits for the lock now
    /// (`WouldBlock` otherwise; `Poisoned` if a writer panicked).
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        let inner = self.inner.try_read().map_err(|_| TryLockError::WouldBlock)?;
        self.checked(RwLockReadGuard { inner }).map_err(TryLockError::Poisoned)
    }

    /// Exclusive access: parks a green thread, blocks an OS thread.
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        let inner = match self.inner.try_write() {
            Ok(g) => g,
            Err(_) => super::wait(self.addr(), self.inner.write()),
        };
        self.checked(self.write_guard(inner))
    }

    /// [`write`](RwLock::write), for async code.
    pub async fn write_async(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        let inner = self.inner.write().await;
        self.checked(self.write_guard(inner))
    }

    /// Exclusive access if nobody holds the lock now (`WouldBlock`
    /// otherwise; `Poisoned` if a writer panicked).
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        let inner = self.inner.try_write().map_err(|_| TryLockError::WouldBlock)?;
        self.checked(self.write_guard(inner)).map_err(TryLockError::Poisoned)
    }

    /// Whether a writer panicked.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.get()
    }

    /// Marks the lock as not poisoned (after the data was repaired).
    pub fn clear_poison(&self) {
        self.poisoned.clear();
    }

    /// The value, through `&mut` (no locking needed).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poisoned.result(self.inner.get_mut())
    }

    fn write_guard<'a>(&'a self, inner: tokio::sync::RwLockWriteGuard<'a, T>) -> RwLockWriteGuard<'a, T> {
        RwLockWriteGuard { inner, poisoned: &self.poisoned, poison: poison::Guard::new() }
    }

    fn checked<G>(&self, g: G) -> LockResult<G> {
        self.poisoned.result(g)
    }

    fn addr(&self) -> *const () {
        self as *const Self as *const ()
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.poisoned.mark_if_panicked(&self.poison);
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> RwLock<T> {
        RwLock::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.inner.try_read() {
            Ok(g) => d.field("data", &&*g),
            Err(_) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.is_poisoned()).finish_non_exhaustive()
    }
}

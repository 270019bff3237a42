//! A condition variable for [`Mutex`]: waiting parks a green thread,
//! blocks an OS thread, or is awaited.

use std::fmt;
use std::pin::pin;
use std::sync::LockResult;
use std::time::{Duration, Instant};

use super::{Mutex, MutexGuard};

/// Waits for a condition on data behind a [`Mutex`], as
/// `std::sync::Condvar` does, from green threads (which park), OS threads
/// (which block) and async tasks ([`wait_async`](Condvar::wait_async)).
///
/// A waiter is registered before the mutex is released, so a notification
/// made by whoever takes the mutex next is never lost. Spurious wake-ups
/// may happen (as with std's): wait in a loop, or with
/// [`wait_while`](Condvar::wait_while).
///
/// ```
/// use std::sync::Arc;
/// use turquoise::sync::{Condvar, Mutex};
///
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let p = pair.clone();
/// let t = turquoise::thread::spawn(move || {
///     *p.0.lock().unwrap() = true;
///     p.1.notify_one();
/// });
/// let (lock, cv) = &*pair;
/// let ready = cv.wait_while(lock.lock().unwrap(), |r| !*r).unwrap();
/// assert!(*ready);
/// # drop(ready);
/// t.join().unwrap();
/// ```
pub struct Condvar {
    notify: tokio::sync::Notify,
}

/// Whether a timed wait returned because its time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// The wait ended by its timeout (the condition may hold anyway).
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

impl Condvar {
    /// A condition variable nobody waits on.
    pub const fn new() -> Condvar {
        Condvar {
            notify: tokio::sync::Notify::const_new(),
        }
    }

    /// Releases `guard`'s mutex, waits for a notification, and locks the
    /// mutex again. `Err` if the mutex is poisoned when taken again.
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        let mutex = guard.mutex();
        self.release_and_wait(|| drop(guard), None);
        mutex.lock()
    }

    /// [`wait`](Condvar::wait), for async code.
    pub async fn wait_async<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
    ) -> LockResult<MutexGuard<'a, T>> {
        let mutex = guard.mutex();
        let mut notified = pin!(self.notify.notified());
        notified.as_mut().enable();
        drop(guard);
        notified.await;
        mutex.lock_async().await
    }

    /// Waits while `condition` holds (checked with the mutex held).
    pub fn wait_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> LockResult<MutexGuard<'a, T>> {
        while condition(&mut *guard) {
            guard = self.wait(guard)?;
        }
        Ok(guard)
    }

    /// [`wait`](Condvar::wait) for at most `timeout`.
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let mutex = guard.mutex();
        let timed_out = self.release_and_wait(|| drop(guard), Some(super::deadline(timeout)));
        relock(mutex, WaitTimeoutResult(timed_out))
    }

    /// Releases `mutex` (held by the caller through one of its `_raw`
    /// methods: the C API), waits for a notification until `deadline` if
    /// any, and takes it again. Whether the deadline passed first.
    pub(crate) fn wait_raw<T: ?Sized>(&self, mutex: &Mutex<T>, deadline: Option<Instant>) -> bool {
        let timed_out = self.release_and_wait(|| mutex.unlock_raw(), deadline);
        mutex.lock_raw();
        timed_out
    }

    /// Registers as a waiter, runs `release` (which gives the mutex back),
    /// then waits for a notification until `deadline` if any: whether the
    /// deadline passed first.
    fn release_and_wait(&self, release: impl FnOnce(), deadline: Option<Instant>) -> bool {
        let mut notified = pin!(self.notify.notified());
        notified.as_mut().enable();
        release();
        match deadline {
            Some(d) => super::wait_until(self.addr(), d, notified).is_none(),
            None => {
                super::wait(self.addr(), notified);
                false
            }
        }
    }

    /// Waits while `condition` holds, for at most `timeout` in all.
    pub fn wait_timeout_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        timeout: Duration,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let deadline = super::deadline(timeout);
        while condition(&mut *guard) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok((guard, WaitTimeoutResult(true)));
            }
            guard = match self.wait_timeout(guard, left) {
                Ok((g, _)) => g,
                Err(e) => {
                    let (g, r) = e.into_inner();
                    return Err(std::sync::PoisonError::new((g, r)));
                }
            };
        }
        Ok((guard, WaitTimeoutResult(false)))
    }

    /// Wakes one waiter, if any waits (else, at most one later wait may
    /// return spuriously).
    pub fn notify_one(&self) {
        self.notify.notify_one();
    }

    /// Wakes every waiter registered now.
    pub fn notify_all(&self) {
        self.notify.notify_waiters();
    }

    fn addr(&self) -> *const () {
        self as *const Condvar as *const ()
    }
}

fn relock<T: ?Sized>(
    mutex: &Mutex<T>,
    r: WaitTimeoutResult,
) -> LockResult<(MutexGuard<'_, T>, WaitTimeoutResult)> {
    match mutex.lock() {
        Ok(g) => Ok((g, r)),
        Err(e) => Err(std::sync::PoisonError::new((e.into_inner(), r))),
    }
}

impl Default for Condvar {
    fn default() -> Condvar {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}

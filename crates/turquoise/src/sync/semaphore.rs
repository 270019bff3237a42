//! A counting semaphore and a barrier that park green threads, block OS
//! threads and are awaited by tasks (tokio's, FIFO, underneath).

use std::fmt;

/// Permits for green threads, OS threads and tasks. Fair: a request for
/// more permits than are free waits in FIFO order, and later smaller
/// requests do not pass it.
pub struct Semaphore {
    inner: tokio::sync::Semaphore,
}

/// Permits taken from a [`Semaphore`]; given back when dropped.
#[must_use = "the permits are given back as soon as this is dropped"]
pub struct SemaphorePermit<'a> {
    inner: tokio::sync::SemaphorePermit<'a>,
}

/// A request for more permits than a semaphore can ever hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyPermits;

impl fmt::Display for TooManyPermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "more permits than a semaphore holds ({})", Semaphore::MAX_PERMITS)
    }
}

impl std::error::Error for TooManyPermits {}

impl Semaphore {
    /// Most permits a semaphore holds.
    pub const MAX_PERMITS: usize = tokio::sync::Semaphore::MAX_PERMITS;

    /// A semaphore with `permits` free permits (at most [`Semaphore::MAX_PERMITS`]).
    pub fn new(permits: usize) -> Result<Semaphore, TooManyPermits> {
        if permits > Self::MAX_PERMITS {
            return Err(TooManyPermits);
        }
        Ok(Semaphore { inner: tokio::sync::Semaphore::new(permits) })
    }

    /// Takes `n` permits: parks a green thread, blocks an OS thread, until
    /// they are free. `n` beyond `u32::MAX` is refused.
    pub fn acquire(&self, n: u32) -> SemaphorePermit<'_> {
        let inner = match self.inner.try_acquire_many(n) {
            Ok(p) => p,
            Err(_) => super::wait(self as *const Self as *const (), self.inner.acquire_many(n)).expect("never closed"),
        };
        SemaphorePermit { inner }
    }

    /// [`acquire`](Semaphore::acquire) until `deadline`: `None` if the
    /// permits were not free by then.
    pub(crate) fn acquire_until(&self, n: u32, deadline: std::time::Instant) -> Option<SemaphorePermit<'_>> {
        if let Some(p) = self.try_acquire(n) {
            return Some(p);
        }
        let inner = super::wait_until(self as *const Self as *const (), deadline, self.inner.acquire_many(n))?.expect("never closed");
        Some(SemaphorePermit { inner })
    }

    /// [`acquire`](Semaphore::acquire), for async code.
    pub async fn acquire_async(&self, n: u32) -> SemaphorePermit<'_> {
        SemaphorePermit { inner: self.inner.acquire_many(n).await.expect("never closed") }
    }

    /// Takes `n` permits if they are free now.
    pub fn try_acquire(&self, n: u32) -> Option<SemaphorePermit<'_>> {
        self.inner.try_acquire_many(n).ok().map(|inner| SemaphorePermit { inner })
    }

    /// Adds `n` permits (`Err` if that would pass [`Semaphore::MAX_PERMITS`]).
    pub fn add_permits(&self, n: usize) -> Result<(), TooManyPermits> {
        if n > Self::MAX_PERMITS - self.inner.available_permits() {
            return Err(TooManyPermits);
        }
        self.inner.add_permits(n);
        Ok(())
    }

    /// The permits free now (a snapshot: others may take them at once).
    pub fn available_permits(&self) -> usize {
        self.inner.available_permits()
    }
}

impl SemaphorePermit<'_> {
    /// Keeps the permits taken for good (they are not given back).
    pub fn forget(self) {
        self.inner.forget();
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore").field("available_permits", &self.available_permits()).finish()
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").field("permits", &self.inner.num_permits()).finish()
    }
}

/// `n` parties wait until all have arrived, then all go on; one of them is
/// told it is the leader. Reusable: the next `n` arrivals form the next
/// round.
pub struct Barrier {
    inner: tokio::sync::Barrier,
}

/// What [`Barrier::wait`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// Exactly one party of each round is the leader.
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl Barrier {
    /// A barrier for `n` parties (0 behaves as 1, as std's).
    pub fn new(n: usize) -> Barrier {
        Barrier { inner: tokio::sync::Barrier::new(n) }
    }

    /// Waits until `n` parties have called `wait` in this round.
    pub fn wait(&self) -> BarrierWaitResult {
        BarrierWaitResult(super::wait(self as *const Self as *const (), self.inner.wait()).is_leader())
    }

    /// [`wait`](Barrier::wait), for async code.
    pub async fn wait_async(&self) -> BarrierWaitResult {
        BarrierWaitResult(self.inner.wait().await.is_leader())
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").finish_non_exhaustive()
    }
}

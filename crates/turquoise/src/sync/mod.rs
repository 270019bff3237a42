//! Synchronisation for green threads, OS threads and async tasks at once.
//!
//! Each primitive here is one object that a green thread waits on by
//! parking (its worker runs other work), an OS thread by blocking, and an
//! async task by awaiting. A `std::sync::Mutex` held by a green thread that
//! its slice then stops would block every other green thread of that
//! worker that wants it, and with them the worker, which is the only
//! thread that can resume the holder; these park instead.
//!
//! ```
//! use std::sync::Arc;
//! use turquoise::sync::{mpsc, Mutex};
//!
//! let total = Arc::new(Mutex::new(0u64));
//! let (tx, mut rx) = mpsc::channel(16);
//! let t = total.clone();
//! let consumer = turquoise::thread::spawn(move || {
//!     while let Some(v) = rx.recv() {
//!         *t.lock().unwrap() += v; // recv parks this green thread while empty
//!     }
//! });
//! // An OS thread: `send` blocks it while the channel is full.
//! std::thread::spawn(move || (1..=100).for_each(|v| tx.send(v).unwrap()));
//! consumer.join().unwrap();
//! assert_eq!(*total.lock().unwrap(), 5050);
//! ```
//!
//! All waits go through `wait`: the primitive's own future, polled by the
//! green thread's parker or by the OS thread's. Nothing here holds an
//! internal lock across a point where its caller could be stopped by
//! preemption and another green thread of the same worker then spin or
//! block on that lock: see `docs/safety.md`, "Synchronisation".

mod condvar;
pub mod event_count;
pub mod fence;
pub mod hazard;
pub mod mpsc;
mod mutex;
mod once;
pub mod oneshot;
mod poison;
pub mod ring;
mod rwlock;
mod semaphore;

pub use condvar::{Condvar, WaitTimeoutResult};
pub use event_count::{EventCount, Producer, Versions};
pub use hazard::{HazAtomic, HazardPointer};
pub use mutex::{Mutex, MutexGuard};
pub use once::OnceLock;
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Barrier, BarrierWaitResult, Semaphore, SemaphorePermit, TooManyPermits};

use std::future::Future;
use std::time::{Duration, Instant};

use crate::thread::Cause;

/// Runs a primitive's wait to completion: inside a green thread it parks
/// the thread (cause [`Cause::Sync`], `on` the primitive's address, for
/// dumps); elsewhere it blocks the calling OS thread.
pub(crate) fn wait<F: Future>(on: *const (), fut: F) -> F::Output {
    crate::thread::block_on_as(Cause::Sync, on as usize as u64, fut)
}

/// [`wait`] until `deadline`: `None` if the wait was still pending then.
pub(crate) fn wait_until<F: Future>(on: *const (), deadline: Instant, fut: F) -> Option<F::Output> {
    crate::thread::block_on_until_as(Cause::Sync, on as usize as u64, deadline, fut)
}

/// `now + timeout`, or far in the future for a huge timeout.
pub(crate) fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

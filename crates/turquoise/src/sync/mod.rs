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
mod ec_word;
pub mod event_count;
pub mod fence;
pub mod hazard;
pub mod mpsc;
mod mutex;
mod mutex_word;
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

// The wait path every primitive takes (kept apart: this file only hands
// names on).
mod waiting;
pub(crate) use waiting::{deadline, wait, wait_until};

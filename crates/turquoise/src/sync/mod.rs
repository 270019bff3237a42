//! Synchronisation for green threads, OS threads and async tasks at once.
//!
//! Each primitive here is one object that a green thread waits on by
//! parking (its worker runs other work), an OS thread by blocking, and an
//! async task by awaiting. A `std::sync::Mutex` held by a green thread that
//! its slice then stops would block every other green thread of that
//! worker that wants it, and with them the worker, which is the only
//! thread that can resume the holder; these park instead.
//!
//! All waits go through [`wait`]: the primitive's own future, polled by the
//! green thread's parker or by the OS thread's. Nothing here holds an
//! internal lock across a point where its caller could be stopped by
//! preemption and another green thread of the same worker then spin or
//! block on that lock: see `docs/safety.md`, "Synchronisation".

use std::future::Future;

use crate::thread::Cause;

/// Runs a primitive's wait to completion: inside a green thread it parks
/// the thread (cause [`Cause::Sync`], `on` the primitive's address, for
/// dumps); elsewhere it blocks the calling OS thread.
#[allow(dead_code)] // until the first primitive lands (next commits)
pub(crate) fn wait<F: Future>(on: *const (), fut: F) -> F::Output {
    crate::thread::block_on_as(Cause::Sync, on as usize as u64, fut)
}

pub mod event_count;
pub mod fence;
pub mod ring;

pub use event_count::{EventCount, Producer, Versions};

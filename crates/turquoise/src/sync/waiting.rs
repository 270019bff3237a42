//! The one wait path of the primitives: a green thread parks, an OS thread
//! blocks (see the module doc of `sync`).

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

//! `JoinSet`: tasks and green threads spawned together and joined in the
//! order they finish (tokio's `JoinSet`, for both kinds of work).

use std::future::Future;

use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::preemptible::task::JoinError;
use crate::sched::join::{AbortHandle, JoinHandle};

/// A set of async tasks and green threads whose values are joined in the
/// order they finish. Dropping the set cancels what is still running, as
/// tokio's does (`abort` for a task, `cancel` for a green thread).
///
/// ```
/// let rt = turquoise::Runtime::new()?;
/// let total = rt.block_on(async {
///     let mut set = turquoise::JoinSet::new();
///     for i in 0..4u64 {
///         set.spawn(async move { i });                    // an async task
///         set.spawn_thread(move || i * 10);               // a green thread
///     }
///     let mut total = 0;
///     while let Some(v) = set.join_next().await {
///         total += v.unwrap();
///     }
///     total
/// });
/// assert_eq!(total, 66);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinSet<T> {
    set: FuturesUnordered<JoinHandle<T>>,
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet { set: FuturesUnordered::new() }
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns a preemptible task on the current runtime (as
    /// [`crate::spawn`]: panics outside a turquoise runtime).
    pub fn spawn<F>(&mut self, fut: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.insert(crate::spawn(fut))
    }

    /// Spawns a green thread (as [`crate::thread::spawn`]: on the current
    /// runtime, else the default one; panics if it cannot).
    pub fn spawn_thread<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
    {
        self.insert(super::spawn(f).task)
    }

    fn insert(&mut self, h: JoinHandle<T>) -> AbortHandle {
        let a = h.abort_handle();
        self.set.push(h);
        a
    }

    /// The next value to be ready, or `None` once the set is empty.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        self.set.next().await
    }

    /// [`join_next`](JoinSet::join_next) from blocking code: parks a green
    /// thread, blocks an ordinary one.
    pub fn join_next_blocking(&mut self) -> Option<Result<T, JoinError>> {
        super::block_on(self.set.next())
    }

    /// Cancels every task and green thread of the set; joining them then
    /// gives `JoinError::Cancelled` (or their value if they had finished).
    pub fn abort_all(&mut self) {
        self.set.iter().for_each(JoinHandle::abort);
    }
}

impl<T> JoinSet<T> {
    /// How many are in the set (not joined yet).
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.set.iter().for_each(JoinHandle::abort);
    }
}

impl<T> std::fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}

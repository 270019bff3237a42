//! A cell written once, whose initialiser runs once however many green
//! threads, OS threads and tasks ask at the same time.

use std::fmt;

/// Like `std::sync::OnceLock`, but the callers that find another one
/// initialising park (green threads), block (OS threads) or await (tasks)
/// instead of blocking their worker. If the initialiser panics, the cell
/// stays empty and the next caller initialises it.
pub struct OnceLock<T> {
    inner: tokio::sync::OnceCell<T>,
}

impl<T> OnceLock<T> {
    /// An empty cell.
    pub const fn new() -> OnceLock<T> {
        OnceLock { inner: tokio::sync::OnceCell::const_new() }
    }

    /// The value, if set.
    pub fn get(&self) -> Option<&T> {
        self.inner.get()
    }

    /// Sets the value if the cell is empty and nobody initialises it;
    /// gives `value` back otherwise.
    pub fn set(&self, value: T) -> Result<(), T> {
        self.inner.set(value).map_err(|e| match e {
            tokio::sync::SetError::AlreadyInitializedError(v) | tokio::sync::SetError::InitializingError(v) => v,
        })
    }

    /// The value, running `init` first if the cell is empty (once, among
    /// all callers; the others wait for it).
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.inner.get() {
            return v;
        }
        super::wait(self as *const Self as *const (), self.inner.get_or_init(|| async { init() }))
    }

    /// [`get_or_init`](OnceLock::get_or_init) with an async initialiser,
    /// for async code.
    pub async fn get_or_init_async<F: std::future::Future<Output = T>>(&self, init: impl FnOnce() -> F) -> &T {
        self.inner.get_or_init(init).await
    }

    /// The value, if it was set, consuming the cell.
    pub fn into_inner(self) -> Option<T> {
        self.inner.into_inner()
    }

    /// The value, through `&mut`, if it was set.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.inner.get_mut()
    }
}

impl<T> Default for OnceLock<T> {
    fn default() -> OnceLock<T> {
        OnceLock::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OnceLock").field(&self.get()).finish()
    }
}

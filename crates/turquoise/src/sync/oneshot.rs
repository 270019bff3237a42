//! A channel for one message, between green threads, OS threads and tasks.

use std::fmt;

pub use tokio::sync::oneshot::error::{RecvError, TryRecvError};

/// A sender and a receiver of one message.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    (Sender { inner: tx }, Receiver { inner: rx })
}

/// Sends the one message (never waits).
pub struct Sender<T> {
    inner: tokio::sync::oneshot::Sender<T>,
}

/// Receives the one message: parks a green thread, blocks an OS thread,
/// or, as a `Future`, is awaited.
pub struct Receiver<T> {
    inner: tokio::sync::oneshot::Receiver<T>,
}

impl<T> Sender<T> {
    /// Sends `value`; gives it back if the receiver is gone.
    pub fn send(self, value: T) -> Result<(), T> {
        self.inner.send(value)
    }

    /// Whether the receiver is gone (a send would fail).
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

impl<T> Receiver<T> {
    /// The message, waiting for it; `Err` if the sender was dropped unsent.
    pub fn recv(mut self) -> Result<T, RecvError> {
        let at = &self as *const Self as *const ();
        super::wait(at, &mut self.inner)
    }

    /// The message if it is there now.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.inner.try_recv()
    }
}

impl<T> std::future::Future for Receiver<T> {
    type Output = Result<T, RecvError>;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.inner).poll(cx)
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("closed", &self.is_closed()).finish()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

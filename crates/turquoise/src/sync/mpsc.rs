//! Channels between green threads, OS threads and tasks: sending to a full
//! bounded channel and receiving from an empty one park a green thread,
//! block an OS thread, or are awaited (tokio's channels underneath: FIFO
//! for messages and for waiting senders).

use std::fmt;
use std::time::Duration;

pub use std::sync::mpsc::RecvTimeoutError;
pub use tokio::sync::mpsc::error::{SendError, TryRecvError, TrySendError};

/// A channel holding at most `capacity` messages (at least 1: 0 is taken
/// as 1). Many senders (`Clone`), one receiver.
///
/// ```
/// use turquoise::sync::mpsc;
///
/// let (tx, mut rx) = mpsc::channel(4);
/// let producers: Vec<_> = (0..3)
///     .map(|p| {
///         let tx = tx.clone();
///         turquoise::thread::spawn(move || (0..10).for_each(|i| tx.send(p * 100 + i).unwrap()))
///     })
///     .collect();
/// drop(tx);
/// // An OS thread receives: `recv` blocks it (a green thread would park).
/// let mut got: Vec<u32> = std::iter::from_fn(|| rx.recv()).collect();
/// producers.into_iter().for_each(|p| p.join().unwrap());
/// got.sort();
/// assert_eq!(got.len(), 30);
/// ```
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
    (Sender { inner: tx }, Receiver { inner: Inner::Bounded(rx) })
}

/// A channel without a bound: sending never waits.
pub fn unbounded_channel<T>() -> (UnboundedSender<T>, Receiver<T>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (UnboundedSender { inner: tx }, Receiver { inner: Inner::Unbounded(rx) })
}

/// Sends into a bounded channel.
pub struct Sender<T> {
    inner: tokio::sync::mpsc::Sender<T>,
}

/// Sends into an unbounded channel.
pub struct UnboundedSender<T> {
    inner: tokio::sync::mpsc::UnboundedSender<T>,
}

/// Receives from either kind of channel.
pub struct Receiver<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    Bounded(tokio::sync::mpsc::Receiver<T>),
    Unbounded(tokio::sync::mpsc::UnboundedReceiver<T>),
}

impl<T> Sender<T> {
    /// Sends `value`, waiting for room: parks a green thread, blocks an OS
    /// thread. `Err` (with the value) if the receiver is gone.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        match self.inner.try_send(value) {
            Ok(()) => Ok(()),
            Err(TrySendError::Closed(v)) => Err(SendError(v)),
            Err(TrySendError::Full(v)) => super::wait(self.addr(), self.inner.send(v)),
        }
    }

    /// [`send`](Sender::send), for async code.
    pub async fn send_async(&self, value: T) -> Result<(), SendError<T>> {
        self.inner.send(value).await
    }

    /// Sends `value` if there is room now.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.inner.try_send(value)
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn addr(&self) -> *const () {
        std::ptr::from_ref(&self.inner) as *const ()
    }
}

impl<T> UnboundedSender<T> {
    /// Sends `value` (never waits). `Err` if the receiver is gone.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.inner.send(value)
    }

    /// Whether the receiver is gone (a send would fail).
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

impl<T> Receiver<T> {
    /// The next message, waiting for one: parks a green thread, blocks an
    /// OS thread. `None` once every sender is gone and the channel empty.
    pub fn recv(&mut self) -> Option<T> {
        match self.try_recv() {
            Ok(v) => Some(v),
            Err(TryRecvError::Disconnected) => None,
            Err(TryRecvError::Empty) => {
                let at = self as *const Self as *const ();
                super::wait(at, self.recv_async())
            }
        }
    }

    /// [`recv`](Receiver::recv), for async code.
    pub async fn recv_async(&mut self) -> Option<T> {
        match &mut self.inner {
            Inner::Bounded(r) => r.recv().await,
            Inner::Unbounded(r) => r.recv().await,
        }
    }

    /// [`recv`](Receiver::recv) for at most `timeout`, as std's:
    /// `Err(Timeout)` if nothing came meanwhile, `Err(Disconnected)` once
    /// every sender is gone and the channel empty.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let at = self as *const Self as *const ();
        match super::wait_until(at, super::deadline(timeout), self.recv_async()) {
            Some(Some(v)) => Ok(v),
            Some(None) => Err(RecvTimeoutError::Disconnected),
            None => Err(RecvTimeoutError::Timeout),
        }
    }

    /// A message if one is there now.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        match &mut self.inner {
            Inner::Bounded(r) => r.try_recv(),
            Inner::Unbounded(r) => r.try_recv(),
        }
    }

    /// Closes the channel for the senders; what was sent can still be received.
    pub fn close(&mut self) {
        match &mut self.inner {
            Inner::Bounded(r) => r.close(),
            Inner::Unbounded(r) => r.close(),
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Sender<T> {
        Sender { inner: self.inner.clone() }
    }
}

impl<T> Clone for UnboundedSender<T> {
    fn clone(&self) -> UnboundedSender<T> {
        UnboundedSender { inner: self.inner.clone() }
    }
}

impl<T> Iterator for Receiver<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.recv()
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("closed", &self.is_closed()).finish()
    }
}

impl<T> fmt::Debug for UnboundedSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnboundedSender").field("closed", &self.is_closed()).finish()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

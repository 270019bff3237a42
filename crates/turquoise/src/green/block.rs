//! Blocking on a future: a green thread parks (not its worker), an OS
//! thread blocks. The one wait path of the park seam (`park.rs`), of
//! `turquoise::sync` and of the public `block_on`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::records;
use crate::base::thread_stats::Cause;

/// Runs `fut` to completion: inside a green thread, parking the thread
/// (not its worker) while `fut` is pending; elsewhere, blocking the calling
/// thread. Inside a green thread, `fut` may use the runtime's I/O and
/// timers (tokio's, of the worker it runs on).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    block_on_as(Cause::Future, 0, fut)
}

/// [`block_on`], parking for `cause` (for counters, tracing and dumps).
///
/// Inside a `critical` scope (an activity's [`no_yield`]) a green thread
/// does not park, which would switch: it blocks its worker as an OS thread
/// would (a wait that only its own worker could end never does).
pub(crate) fn block_on_as<F: Future>(cause: Cause, detail: u64, fut: F) -> F::Output {
    block_on_parking(cause, detail, fut, false)
}

/// [`block_on_as`] for the park hook's own waits (`park.rs`): the park
/// skips walking the hook's frames again (see `records::park`). `fut` must
/// be the hook's own future, which runs no code of the program's.
pub(crate) fn block_on_in_hook<F: Future>(cause: Cause, detail: u64, fut: F) -> F::Output {
    block_on_parking(cause, detail, fut, true)
}

fn block_on_parking<F: Future>(cause: Cause, detail: u64, fut: F, in_hook: bool) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    if records::current().is_some() && !linger::in_critical() {
        loop {
            let waker = records::begin_look().expect("inside a green thread");
            if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
                return v;
            }
            records::park(cause, detail, in_hook);
        }
    }
    block_os(fut, None).expect("no deadline")
}

/// [`block_on_as`] until `deadline`: `None` if `fut` was still pending then
/// (it is dropped). A green thread parks on its worker's timer (without
/// one, it yields between looks); an OS thread parks with a timeout.
pub(crate) fn block_on_until_as<F: Future>(cause: Cause, detail: u64, deadline: std::time::Instant, fut: F) -> Option<F::Output> {
    if records::current().is_some() && !linger::in_critical() {
        if crate::base::context::drivers().is_some_and(|d| d.time) {
            return block_on_as(cause, detail, tokio::time::timeout_at(deadline.into(), fut)).ok();
        }
        let mut fut = std::pin::pin!(fut);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                return Some(v);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            records::yield_now();
        }
    }
    block_os(std::pin::pin!(fut), Some(deadline))
}

/// Polls `fut` on the calling OS thread, parking the thread between looks,
/// until it is ready or `deadline` passes (`None`).
fn block_os<F: Future>(mut fut: Pin<&mut F>, deadline: Option<std::time::Instant>) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(OsThread(std::thread::current())));
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            return Some(v);
        }
        match deadline {
            None => std::thread::park(),
            Some(d) => {
                let now = std::time::Instant::now();
                if now >= d {
                    return None;
                }
                std::thread::park_timeout(d - now);
            }
        }
    }
}

struct OsThread(std::thread::Thread);

impl Wake for OsThread {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// `thread::park` in the green thread `g`: until its token is available
/// (taken), or `deadline`; false if the deadline came first.
pub(crate) fn park_token(g: &records::GreenShared, deadline: Option<std::time::Instant>) -> bool {
    let take = std::future::poll_fn(|_| g.poll_park_token());
    match deadline {
        None => {
            block_on_as(Cause::Sync, 0, take);
            true
        }
        Some(d) => block_on_until_as(Cause::Sync, 0, d, take).is_some(),
    }
}

//! What a green thread is called by and ends with: its id and handle, the
//! payloads of its abnormal ends, the spawn errors. Below the records
//! (`green.rs`) and everything above them.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// A green thread's identity: never reused within the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(pub(crate) u64);

impl ThreadId {
    pub(crate) fn next() -> ThreadId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ThreadId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// As a number (non-zero).
    pub fn as_u64(&self) -> NonZeroU64 {
        NonZeroU64::new(self.0).expect("ids start at 1")
    }
}

/// What [`Thread::unpark`] reaches: the thread's record, which stands
/// above this file and so is reached through this trait.
pub(crate) trait Unpark: Send + Sync {
    /// Makes the thread's park token available and wakes it if it parks.
    fn unpark(self: Arc<Self>);
}

/// No thread (a handle made before its record, or for none).
struct Nobody;

impl Unpark for Nobody {
    fn unpark(self: Arc<Self>) {}
}

/// A handle to a green thread: its id and name, and its park token
/// ([`unpark`](Thread::unpark), as `std::thread::Thread`'s).
#[derive(Clone)]
pub struct Thread {
    pub(crate) id: ThreadId,
    pub(crate) name: Option<Arc<str>>,
    /// The record, weakly: a handle does not keep an ended thread alive.
    pub(crate) unparker: Weak<dyn Unpark>,
}

impl std::fmt::Debug for Thread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Thread").field("id", &self.id).field("name", &self.name).finish()
    }
}

impl Thread {
    /// A handle for a thread about to be made (its record fills in the
    /// park token's side).
    pub(crate) fn new(name: Option<Arc<str>>) -> Thread {
        Thread { id: ThreadId::next(), name, unparker: Weak::<Nobody>::new() }
    }

    /// Makes the thread's park token available: its next (or current)
    /// [`park`](crate::thread::park) returns. As `std::thread::Thread::unpark`:
    /// one token, not a count; nothing if the thread has ended.
    pub fn unpark(&self) {
        if let Some(u) = self.unparker.upgrade() {
            u.unpark();
        }
    }

    /// The thread's id.
    pub fn id(&self) -> ThreadId {
        self.id
    }

    /// The name given with [`Builder::name`](crate::thread::Builder::name).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// The payload of a green thread's `JoinError::Panic` when it ended by
/// `pthread_exit` (C code in it, or `turq_exit`), with the value given.
#[derive(Debug, Clone, Copy)]
pub struct Exited {
    /// The value passed to `pthread_exit` (`PTHREAD_CANCELED`, all ones, if
    /// it was cancelled with `pthread_cancel`).
    pub value: usize,
}

/// The payload of a green thread's `JoinError::Panic` when it overflowed
/// its stack (it was abandoned: its destructors did not run).
#[derive(Debug, Clone, Copy)]
pub struct StackOverflow {
    /// The usable stack it had, in bytes.
    pub stack_size: usize,
}

//! What a green thread is called by and ends with: its id and handle, the
//! payloads of its abnormal ends, the spawn errors. Below the records
//! (`green.rs`) and everything above them.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// A handle to a green thread: its id and name.
#[derive(Clone, Debug)]
pub struct Thread {
    pub(crate) id: ThreadId,
    pub(crate) name: Option<Arc<str>>,
}

impl Thread {
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

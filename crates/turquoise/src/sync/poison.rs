//! Poisoning as std does it: a lock whose holder panicked is marked, so
//! that the next holder knows the data may be half updated.
//!
//! A green thread cancelled while it waits is unwound; that unwinding
//! counts as a panic here too (its guards' drops see `panicking()`), and
//! rightly: the cancelled code stopped wherever it was.

/// Whether the holder was already panicking when it took the lock (a lock
/// taken by a destructor during unwinding is not poisoned by that unwinding).
pub(crate) struct Guard {
    panicking: bool,
}

impl Guard {
    pub(crate) fn new() -> Guard {
        Guard {
            panicking: std::thread::panicking(),
        }
    }

    /// Whether a panic started since the lock was taken.
    pub(crate) fn now_panicking(&self) -> bool {
        !self.panicking && std::thread::panicking()
    }
}

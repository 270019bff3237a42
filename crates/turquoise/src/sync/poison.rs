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

/// A lock's poison mark.
pub(crate) struct Flag(std::sync::atomic::AtomicBool);

impl Flag {
    pub(crate) const fn new() -> Flag {
        Flag(std::sync::atomic::AtomicBool::new(false))
    }

    pub(crate) fn get(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn clear(&self) {
        self.0.store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Marks the lock if its holder (`guard`) started panicking.
    pub(crate) fn mark_if_panicked(&self, guard: &Guard) {
        if guard.now_panicking() {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// `v`, as `Err` if the lock is poisoned.
    pub(crate) fn result<V>(&self, v: V) -> std::sync::LockResult<V> {
        if self.get() {
            Err(std::sync::PoisonError::new(v))
        } else {
            Ok(v)
        }
    }
}

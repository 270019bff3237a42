//! No-preemption scopes: `ThreadState::defer` counts the open ones, and a
//! deadline that passes inside one is left pending (`ThreadState::pending`)
//! for the scope's end. The runtime's entry points, the code table's
//! readers, the loader's and `exec`'s wrappers and `critical` open them.
//!
//! Taking a pending preemption is the handler layer's work
//! (`preempt::take_pending_at_exit`), above every user of this guard: it
//! registers itself here when it installs the handler, before anything can
//! be left pending, and the end of a scope calls it only then.

use std::sync::atomic::{compiler_fence, Ordering};

use crate::base::hook::Hook;
use crate::state::thread::{ts, ThreadState};

/// What takes a pending preemption at the end of the outermost scope
/// (none until the handler is installed, when nothing can be pending).
static TAKE_PENDING: Hook<fn(&ThreadState, bool)> = Hook::new();

/// Registers what takes a pending preemption (the handler layer, once).
pub(crate) fn on_pending(take: fn(&ThreadState, bool)) {
    TAKE_PENDING.set(take);
}

#[cold]
#[inline(never)]
fn take_pending(ts: &ThreadState, unwindable: bool) {
    if let Some(take) = TAKE_PENDING.get() {
        take(ts, unwindable);
    }
}

/// Opens a no-preemption scope for the runtime's own bookkeeping.
pub(crate) struct Scope {
    /// This thread's state, read once: nothing inside a runtime scope
    /// switches the caller to another thread (it is never preempted, and the
    /// runtime's own code does not pause), so it stays valid until the end.
    t: &'static ThreadState,
    /// Entered from Rust (a preemption taken at its end may be unwound) or
    /// from the C ABI (unwinding through `extern "C"` frames would abort).
    unwindable: bool,
}

impl Scope {
    #[inline]
    pub(crate) fn enter() -> Scope {
        Self::open(true)
    }

    /// A scope opened by a C ABI entry point.
    #[inline]
    pub(crate) fn enter_from_c() -> Scope {
        Self::open(false)
    }

    #[inline]
    fn open(unwindable: bool) -> Scope {
        let t = ts();
        t.defer.set(t.defer.get() + 1);
        compiler_fence(Ordering::SeqCst);
        Scope { t, unwindable }
    }

    /// The calling thread's state, valid while the scope is open.
    #[inline]
    pub(crate) fn thread(&self) -> &'static ThreadState {
        self.t
    }
}

impl Drop for Scope {
    #[inline]
    fn drop(&mut self) {
        exit_on(self.t, self.unwindable);
    }
}

/// Ends a no-preemption scope opened with `defer += 1`.
#[inline]
pub(crate) fn exit(unwindable: bool) {
    exit_on(ts(), unwindable);
}

/// `exit` given this thread's state, read when the scope opened (no
/// switch to another thread can happen inside a scope: it is never
/// preempted, and runtime scopes do not pause).
#[inline]
pub(crate) fn exit_on(ts: &ThreadState, unwindable: bool) {
    debug_assert!(ts.defer.get() > 0, "unbalanced no-preemption scope");
    let d = ts.defer.get() - 1;
    compiler_fence(Ordering::SeqCst);
    ts.defer.set(d);
    if d == 0 && ts.pending.get() {
        take_pending(ts, unwindable);
    }
}

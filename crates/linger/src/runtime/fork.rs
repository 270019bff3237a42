//! Forking while other threads use linger.
//!
//! A forked child has one thread, a copy of the forking one; a lock that
//! another thread held at the moment of the fork stays locked in the child
//! for good, since its owner does not exist there. linger's process-wide
//! locks (the C handle table's free list, the code table's build lock) are
//! therefore taken before the fork, in a `pthread_atfork` prepare handler,
//! and released after it on both sides, as glibc does with its own locks
//! (malloc's arenas, stdio's list). The one-time initialisations (`OnceLock`s
//! of the configuration and the runtime) are waited for the same way: a
//! child would otherwise wait for an initialiser that never finishes.
//!
//! The lock held while the monitor thread starts (`monitor.rs`) is taken
//! too: a child forked meanwhile starts a monitor of its own.
//!
//! Marks of other threads are cleared in the child the same way: a reading
//! section of the code table or a `dlclose` under way that belonged to one
//! of them never ends there (see `ranges::after_fork`).
//!
//! The prepare handler runs in the forking thread, which is never inside
//! linger's own critical sections when it calls `fork` (they call no
//! program code), so it cannot wait for itself.

use std::cell::RefCell;
use std::sync::MutexGuard;

use crate::runtime::handles::Indices;

type Held = (MutexGuard<'static, ()>, MutexGuard<'static, Indices>, MutexGuard<'static, ()>);

thread_local! {
    /// The locks taken by `prepare`, until `release` in the same thread.
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Registers the handlers (once per process, with the runtime), and the
/// runtime's wait for its own initialisation (the runtime is above this
/// file and hands it in).
pub(crate) fn install(wait_initialised: fn()) {
    WAIT_INITIALISED.set(wait_initialised);
    // SAFETY: registering plain `extern "C"` handlers with no arguments.
    unsafe { libc::pthread_atfork(Some(prepare), Some(release), Some(in_child)) };
}

static WAIT_INITIALISED: crate::base::hook::Hook<fn()> = crate::base::hook::Hook::new();

extern "C" fn prepare() {
    if let Some(wait) = WAIT_INITIALISED.get() {
        wait();
    }
    // Always in this order (the build lock is never taken under the other;
    // the monitor's start takes neither).
    let held = (crate::judgement::ranges::lock_build(), crate::runtime::handles::lock(), crate::machine::monitor::lock_spawn());
    let _ = HELD.try_with(|h| *h.borrow_mut() = Some(held));
}

extern "C" fn release() {
    let _ = HELD.try_with(|h| drop(h.borrow_mut().take()));
}

extern "C" fn in_child() {
    release();
    crate::judgement::ranges::after_fork();
    crate::machine::signal::after_fork_in_child();
    crate::machine::timer::after_fork_in_child();
}

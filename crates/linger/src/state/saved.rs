//! One side's copy of a flow of control's per-thread library state (its
//! behaviour is `flow`'s): a type of the per-thread state, defined below it.

use std::cell::Cell;

/// The words of `struct __cxa_eh_globals` swapped: `caughtExceptions` and
/// `uncaughtExceptions` (padded to a word) in both libstdc++ and libc++abi
/// on x86-64.
pub(crate) const CXA_WORDS: usize = 2;

/// One side's copy of the state.
pub(crate) struct Saved {
    pub(crate) cxa: [Cell<usize>; CXA_WORDS],
    pub(crate) errno: Cell<i32>,
    /// `locale_t`, or 0 for "whatever the thread has" (a function that has
    /// not run yet starts with its caller's locale, as a call would).
    pub(crate) locale: Cell<usize>,
    /// Head of glibc's chain of cancellation buffers (0: none; a function
    /// registers its own at its base as it starts).
    pub(crate) chain: Cell<usize>,
    /// Head of glibc's chain of its own cleanup buffers (0: none), swapped
    /// only for functions that may stop inside libc's waits (the only
    /// stops that can leave one pushed): `cleanup_too`.
    pub(crate) cleanup: Cell<usize>,
    pub(crate) cleanup_too: bool,
}

impl Saved {
    /// A function that has not run: no exception caught, errno 0; it (and
    /// its caller's side) also carries glibc's chain of its own cleanup
    /// buffers if `yes`.
    pub(crate) const fn with_cleanup(yes: bool) -> Saved {
        Saved {
            cxa: [Cell::new(0), Cell::new(0)],
            errno: Cell::new(0),
            locale: Cell::new(0),
            chain: Cell::new(0),
            cleanup: Cell::new(0),
            cleanup_too: yes,
        }
    }
}

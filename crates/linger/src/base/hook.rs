//! Hooks: a function a lower layer calls and a higher one registers, so
//! that the lower one need not import the higher (the shape of Concurrency
//! Kit's `ck_ec_ops`). Each hook is set once, before anything can call it
//! (the handler registers its own as it is installed), and read with one
//! load: cheap enough for a signal handler and async-signal-safe.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A `fn` pointer of type `F`, or none yet.
pub(crate) struct Hook<F: Copy> {
    f: AtomicUsize,
    _f: PhantomData<F>,
}

impl<F: Copy> Hook<F> {
    /// A hook with nothing registered. `F` must be a `fn` pointer type
    /// (checked at compile time where `set` is instantiated: only a type of
    /// a word's size fits).
    pub(crate) const fn new() -> Self {
        Hook { f: AtomicUsize::new(0), _f: PhantomData }
    }

    /// Registers `f` (a later call replaces it).
    pub(crate) fn set(&self, f: F) {
        const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>()) };
        // SAFETY: `F` is a `fn` pointer of a word's size (asserted above),
        // so its bits are an address.
        let p = unsafe { std::mem::transmute_copy::<F, usize>(&f) };
        self.f.store(p, Ordering::Release);
    }

    /// What is registered, if anything.
    #[inline]
    pub(crate) fn get(&self) -> Option<F> {
        let p = self.f.load(Ordering::Acquire);
        // SAFETY: only `set` stores a non-zero value, and it stores the bits
        // of an `F`.
        (p != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&p) })
    }
}

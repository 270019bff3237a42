//! Preemptible functions that borrow their caller's data, in the manner of
//! `std::thread::scope`.
//!
//! A function stopped by its deadline sits at an arbitrary instruction,
//! perhaps half-way through updating what it borrowed (a `Vec` mid-sort holds
//! some elements twice). Abandoning it there and letting the borrow end would
//! hand the caller that broken value, so a scope never ends while one of its
//! functions is stopped like that: at the end of the scope every function is
//! either finished (run to its end, with no deadline) or, if it stopped where
//! unwinding is defined (never started, or a Rust `pause()` or deferred stop),
//! unwound. The scope, not the handle, owns the functions, so a handle that
//! is dropped or forgotten changes nothing.

use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use crate::{drive, Builder, Cancelled, Continuation, Error, Linger};

/// A scope for preemptible functions that borrow data living outside it
/// (see [`scope`]). Bound to the thread that opened it.
pub struct Scope<'scope, 'env: 'scope> {
    /// Emptied by [`scope`] before the scope goes away; `ManuallyDrop` so
    /// that the borrow checker does not ask the borrows to outlive the
    /// `Scope` value itself (nothing is left to drop by then).
    entries: ManuallyDrop<RefCell<Entries<'scope>>>,
    /// Invariant in both lifetimes, as `std::thread::Scope` is: the borrows
    /// the functions hold must be exactly the scope's.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

struct Entries<'scope> {
    all: Vec<Rc<dyn Entry + 'scope>>,
    /// Length at which finished entries are next swept out.
    sweep_at: usize,
}

/// A function launched in a [`Scope`]. Dropping the handle does not cancel a
/// function stopped at an arbitrary instruction: the scope finishes it when
/// it ends. Not `Send`: the scope that must finish it lives on this thread.
pub struct ScopedLinger<'scope, T> {
    slot: Rc<Slot<T>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
}

struct Slot<T> {
    state: RefCell<Linger<T>>,
}

/// What the scope needs of each of its functions, whatever its result type.
trait Entry {
    /// Runs the function to its end, or unwinds it where that is defined.
    /// Returns the panic it ended with, if any.
    fn finish(&self) -> Option<Box<dyn Any + Send>>;
    fn done(&self) -> bool;
}

/// Opens a scope in which preemptible functions may borrow from the
/// enclosing stack frame, and waits at its end until each of them is
/// finished or unwound (see the module documentation).
///
/// ```
/// use std::time::Duration;
/// let mut v: Vec<u64> = (0..100_000).rev().collect();
/// linger::scope(|s| {
///     let mut job = s.launch(|| v.sort(), Duration::from_micros(100)).unwrap();
///     while job.is_continuation() {
///         // serve something else, then give it another slice
///         job.resume(Duration::from_micros(100)).unwrap();
///     }
/// });
/// assert!(v.windows(2).all(|w| w[0] <= w[1]));
/// ```
///
/// Cost of the guarantee: a function left stopped at the end of the scope
/// runs to its end there, however long that takes, as `std::thread::scope`
/// joins its threads. Cancel early only functions that can be unwound
/// ([`ScopedLinger::cancel`] says which happened).
///
/// If a function panics while the scope finishes it, the scope panics once
/// all are done. If the closure itself panics, its functions are still
/// finished first. A stack overflow in a scoped function aborts the process,
/// as it does in a Rust thread: its borrows cannot end half-way, and the
/// function can never continue (launch a `'static` function to get
/// [`Error::StackOverflow`] back instead).
///
/// Handles are neither `Send` nor usable after the scope; a scoped function
/// cannot outlive it:
///
/// ```compile_fail
/// # use std::time::Duration;
/// let mut v = vec![3, 1, 2];
/// let escaped = linger::scope(|s| s.launch(|| v.sort(), Duration::ZERO).unwrap());
/// ```
///
/// ```compile_fail
/// # use std::time::Duration;
/// let mut v = vec![3, 1, 2];
/// linger::scope(|s| {
///     let _l = s.launch(|| v.sort(), Duration::ZERO).unwrap();
///     v.push(4); // still borrowed by the function
/// });
/// ```
///
/// ```compile_fail
/// # use std::time::Duration;
/// let mut v = vec![3, 1, 2];
/// linger::scope(|s| {
///     let l = s.launch(|| v.sort(), Duration::ZERO).unwrap();
///     std::thread::scope(|t| { t.spawn(move || drop(l)); }); // not Send
/// });
/// ```
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let s = Scope {
        entries: ManuallyDrop::new(RefCell::new(Entries { all: Vec::new(), sweep_at: 64 })),
        _scope: PhantomData,
        _env: PhantomData,
    };
    let r = catch_unwind(AssertUnwindSafe(|| f(&s)));
    let mut first_panic = None;
    // The closure has returned, so no handle is in use: every entry is free.
    let all = std::mem::take(&mut s.entries.borrow_mut().all);
    for e in &all {
        if let Some(p) = e.finish() {
            first_panic.get_or_insert(p);
        }
    }
    drop(all);
    match (r, first_panic) {
        (Err(p), _) => resume_unwind(p),
        (Ok(_), Some(p)) => resume_unwind(p),
        (Ok(v), None) => v,
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Runs `f`, which may borrow anything that outlives the scope, on its
    /// own stack for at most `timeout` (see [`crate::launch`]).
    pub fn launch<T, F>(&'scope self, f: F, timeout: Duration) -> Result<ScopedLinger<'scope, T>, Error>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        self.launch_with(&Builder::new(), f, timeout)
    }

    /// [`Scope::launch`] with the builder's options. A scoped function is
    /// never migratable (its scope is bound to this thread): such a builder
    /// gets [`Error::Config`].
    pub fn launch_with<T, F>(&'scope self, b: &Builder, f: F, timeout: Duration) -> Result<ScopedLinger<'scope, T>, Error>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        if b.migratable {
            return Err(Error::Config("a scoped function cannot be migratable".into()));
        }
        if crate::runtime::launch::inside_migratable() {
            // The enclosing function may move to another thread, where this
            // scope could not finish what it launched here.
            return Err(Error::Config("a scope cannot launch inside a migratable function".into()));
        }
        let inner = b.create(f)?;
        let slot = Rc::new(Slot { state: RefCell::new(Linger::Continuation(Continuation { inner })) });
        {
            let mut es = self.entries.borrow_mut();
            if es.all.len() >= es.sweep_at {
                es.all.retain(|e| !e.done());
                es.sweep_at = (es.all.len() * 2).max(64);
            }
            es.all.push(slot.clone() as Rc<dyn Entry + 'scope>);
        }
        let mut h = ScopedLinger { slot, _scope: PhantomData };
        if !timeout.is_zero() {
            h.resume(timeout)?;
        }
        Ok(h)
    }
}

impl<T> Slot<T> {
    /// Runs the function for `timeout`, as [`crate::resume`] does. A panic
    /// propagates; a stack overflow aborts (see [`scope`]).
    fn run(&self, timeout: Duration) -> Result<(), Error> {
        let mut st = self.state.try_borrow_mut().map_err(|_| Error::Busy)?;
        match &*st {
            Linger::Completion(_) => return Ok(()),
            Linger::Poison => return Err(Error::Poisoned),
            Linger::Continuation(_) => {}
        }
        crate::runtime::launch::init_thread()?;
        match drive(&mut st, timeout, crate::Ending::Here) {
            Err(Error::StackOverflow { stack_size }) => overflow_abort(stack_size),
            r => r.map(|_| ()),
        }
    }

    /// Unwinds the function if that is defined where it stopped; true if done.
    fn try_unwind(&self) -> bool {
        let mut st = self.state.borrow_mut();
        let Linger::Continuation(c) = &mut *st else { return true };
        if !c.inner.can_unwind() {
            return false;
        }
        // Unwinding cannot fail to end the function (a destructor's panic
        // aborts, as in any unwinding).
        let _ = c.inner.cancel();
        *st = Linger::Poison;
        true
    }

    /// Unwinds or finishes the function (see [`Entry::finish`]).
    fn end(&self) -> Result<Cancelled, Box<dyn Any + Send>> {
        if matches!(&*self.state.borrow(), Linger::Completion(_) | Linger::Poison) {
            return Ok(Cancelled::NotNeeded);
        }
        loop {
            if self.try_unwind() {
                return Ok(Cancelled::Unwound);
            }
            match catch_unwind(AssertUnwindSafe(|| self.run(Duration::MAX))) {
                Err(p) => return Err(p),
                Ok(Err(e)) => {
                    // Only a timer or signal failure can get here (the slot is
                    // free, on its own thread, and not poisoned), and then the
                    // function cannot be run on: its borrows must not end.
                    eprintln!("linger: cannot finish a scoped function ({e}); aborting");
                    std::process::abort();
                }
                Ok(Ok(())) => {}
            }
            let mut st = self.state.borrow_mut();
            if matches!(&*st, Linger::Completion(_)) {
                *st = Linger::Poison; // the result nobody asked for is dropped here
                return Ok(Cancelled::Finished);
            }
            // It paused: unwind it there if that is defined, else run on.
        }
    }
}

#[cold]
fn overflow_abort(stack_size: usize) -> ! {
    eprintln!(
        "linger: a scoped preemptible function overflowed its {} KiB stack; its borrows cannot be released \
         half-way, so the process aborts (as for a Rust thread). Raise the stack size, or launch a 'static \
         function to get Error::StackOverflow instead.",
        stack_size / 1024
    );
    std::process::abort();
}

impl<T> Entry for Slot<T> {
    fn finish(&self) -> Option<Box<dyn Any + Send>> {
        self.end().err()
    }

    fn done(&self) -> bool {
        self.state.try_borrow().is_ok_and(|s| !s.is_continuation())
    }
}

impl<T> ScopedLinger<'_, T> {
    /// Continues the function for at most `timeout`. A completed function is
    /// left as it is; a poisoned one gives [`Error::Poisoned`]. A panic inside
    /// the function propagates to the caller and leaves it poisoned.
    pub fn resume(&mut self, timeout: Duration) -> Result<&mut Self, Error> {
        self.slot.run(timeout)?;
        Ok(self)
    }

    /// Did the function return?
    pub fn is_completion(&self) -> bool {
        self.slot.state.borrow().is_completion()
    }

    /// Is it stopped, waiting to be resumed?
    pub fn is_continuation(&self) -> bool {
        self.slot.state.borrow().is_continuation()
    }

    /// Did it panic (or was it cancelled)?
    pub fn is_poison(&self) -> bool {
        self.slot.state.borrow().is_poison()
    }

    /// Did it stop by calling [`crate::pause`]?
    pub fn yielded(&self) -> bool {
        self.slot.state.borrow().yielded()
    }

    /// Ends the function now without waiting for the scope. If it never
    /// started, or stopped where unwinding is defined, it is unwound
    /// ([`Cancelled::Unwound`]); if it stopped at an arbitrary instruction,
    /// it is run to its end ([`Cancelled::Finished`]; a panic it ends with
    /// propagates). Either way it is poisoned afterwards.
    pub fn cancel(&mut self) -> Cancelled {
        match self.slot.end() {
            Ok(c) => c,
            Err(p) => resume_unwind(p),
        }
    }

    /// Runs the function to its end (no deadline) and returns its value.
    /// [`Error::Poisoned`] if it had panicked or been cancelled; a panic
    /// while it runs propagates.
    pub fn join(self) -> Result<T, Error> {
        while self.is_continuation() {
            self.slot.run(Duration::MAX)?;
        }
        self.completion().ok_or(Error::Poisoned)
    }

    /// The return value, if it completed.
    pub fn completion(self) -> Option<T> {
        let mut st = self.slot.state.borrow_mut();
        if !st.is_completion() {
            return None;
        }
        std::mem::replace(&mut *st, Linger::Poison).completion()
    }
}

impl<T> Drop for ScopedLinger<'_, T> {
    fn drop(&mut self) {
        // Free what can be freed now; the scope finishes the rest.
        if !std::thread::panicking() {
            let _ = self.slot.try_unwind();
        }
    }
}

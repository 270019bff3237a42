//! Hazard pointers whose read side is a plain store, a compiler fence and
//! a load: the store-load barrier it needs is paid by the reclaimer's
//! [`fence::heavy`], once per scan.
//!
//! ```
//! use turquoise::sync::hazard::{HazAtomic, HazardPointer};
//!
//! let config = HazAtomic::new(String::from("v1"));
//! let mut hp = HazardPointer::new(); // a slot of the global domain
//! {
//!     let v = config.load(&mut hp).unwrap(); // protected while `v` lives
//!     config.store(String::from("v2")); // "v1" is retired, not freed
//!     assert_eq!(*v, "v1");
//! } // unprotected: a later scan frees "v1"
//! assert_eq!(*config.load(&mut hp).unwrap(), "v2");
//! ```
//!
//! A reader protects a pointer by storing it into its slot, [`fence::light`]
//! (a compiler fence), and loading the source again: the same value, the
//! pointer is protected; another, it tries again with that one. No locked
//! instruction, no `fence(SeqCst)`. A writer unlinks a node and retires it
//! into its [`Domain`]; once enough are retired, a scan takes them all,
//! calls [`fence::heavy`] once and frees every one that no slot holds.
//! `docs/safety.md`, "Hazard pointers on asymmetric fences", gives the
//! argument.
//!
//! **Slots.** A [`HazardPointer`] owns one slot of a domain from its
//! creation to its drop, and protects one pointer at a time; a dropped one
//! gives its slot back for the next to reuse, so a domain has as many slots
//! as hazard pointers ever lived at once. A slot belongs to whoever holds
//! the `HazardPointer` value, not to an OS thread: a green thread keeps its
//! own (green threads never move between workers after they start, and a
//! slot would not care if one did), and no thread-local is involved (a
//! thread-local of this crate is its worker's, shared by the worker's green
//! threads). Acquiring a slot is a compare-and-swap; protecting with it
//! afterwards is not, so keep one per thread of use rather than one per
//! read.
//!
//! **Stopped readers.** A green thread that linger stops while it holds a
//! protection keeps its hazard published until it runs again and drops the
//! guard: the node stays allocated meanwhile. At most one node per slot is
//! held back that way.

use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr;
use std::sync::atomic::{fence as atomic_fence, AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use super::fence;

/// A scan runs once this many nodes wait, plus two per slot (so that a scan
/// frees at least about half of what it looks at, however many hazards).
const SCAN_AT: usize = 256;

/// One hazard slot, on a cache line of its own (its reader writes it at
/// every protect). Never freed before its domain.
#[repr(align(64))]
struct Slot {
    hazard: AtomicPtr<()>,
    taken: AtomicBool,
    /// The next slot of the domain's list: set before the slot is linked,
    /// never changed.
    next: *mut Slot,
}

// SAFETY: `next` is written only before the slot is linked; the rest are
// atomics.
unsafe impl Sync for Slot {}
// SAFETY: as for `Sync`.
unsafe impl Send for Slot {}

fn reset(slot: &Slot) {
    // Release: the uses of the node come before a scan that sees null.
    slot.hazard.store(ptr::null_mut(), Ordering::Release);
}

/// A node of one of the domain's lists (slots, retired records).
trait Linked {
    fn next(&mut self) -> &mut *mut Self;
}

impl Linked for Slot {
    fn next(&mut self) -> &mut *mut Self {
        &mut self.next
    }
}

impl Linked for Header {
    fn next(&mut self) -> &mut *mut Self {
        &mut self.next
    }
}

/// Links the chain `first..=last` in front of `head` (a Treiber push; no
/// list here loses nodes one by one, the retired list is taken whole by a
/// swap, so there is no ABA).
///
/// # Safety
/// The chain is valid and reachable by nobody else.
unsafe fn push<N: Linked>(head: &AtomicPtr<N>, first: *mut N, last: *mut N) {
    let mut now = head.load(Ordering::Relaxed);
    loop {
        // SAFETY: `last` is ours until the exchange links it.
        unsafe { *(*last).next() = now };
        match head.compare_exchange_weak(now, first, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(h) => now = h,
        }
    }
}

/// What every retired node's record starts with: the retire list's link
/// and how to free the node and the record.
#[repr(C)]
struct Header {
    next: *mut Header,
    node: *mut (),
    /// Frees the node and this record (a `Retired<T>`).
    reclaim: unsafe fn(*mut Header),
}

/// A retired node with its deleter.
#[repr(C)]
struct Retired<T> {
    header: Header,
    deleter: unsafe fn(*mut T),
}

/// Calls the record's deleter on its node and frees the record.
///
/// # Safety
/// `h` came from `Box::into_raw` of a `Retired<T>`, and its node may be
/// freed (no hazard holds it); called once.
unsafe fn reclaim<T>(h: *mut Header) {
    // SAFETY: by the contract, `h` is the header at offset 0 (repr(C)) of
    // a boxed `Retired<T>` that is ours now.
    let r = unsafe { Box::from_raw(h as *mut Retired<T>) };
    // SAFETY: the retire's caller promised that the deleter may free the
    // node once no hazard holds it, which the scan found.
    unsafe { (r.deleter)(r.header.node as *mut T) }
}

/// A set of hazard slots and the nodes retired against them. Readers and
/// writers of one structure use the same domain; [`Domain::global`] is the
/// default.
pub struct Domain {
    slots: AtomicPtr<Slot>,
    nslots: AtomicUsize,
    retired: AtomicPtr<Header>,
    /// Retired and not yet freed, including those a scan holds.
    pending: AtomicUsize,
    /// The scan's barrier on the readers: [`fence::heavy`] (tests replace it).
    heavy: fn(),
}

// SAFETY: the raw pointers are the domain's own slots and retire records,
// reached only through atomics; the retired nodes are `Send` by the
// contract of `retire` (and `HazAtomic` requires `T: Send`), so freeing them
// on whichever thread scans is allowed.
unsafe impl Send for Domain {}
// SAFETY: every shared field is an atomic; see `Send`.
unsafe impl Sync for Domain {}

static GLOBAL: Domain = Domain::new();

impl Default for Domain {
    fn default() -> Self {
        Domain::new()
    }
}

impl Domain {
    /// An empty domain (no slot yet).
    pub const fn new() -> Domain {
        Domain::with_scan_fence(fence::heavy)
    }

    /// For tests: a domain whose scans call `heavy` instead of
    /// [`fence::heavy`] (a no-op makes the negative control).
    #[doc(hidden)]
    pub const fn with_scan_fence(heavy: fn()) -> Domain {
        Domain { slots: AtomicPtr::new(ptr::null_mut()), nslots: AtomicUsize::new(0), retired: AtomicPtr::new(ptr::null_mut()), pending: AtomicUsize::new(0), heavy }
    }

    /// The process's default domain (that of [`HazardPointer::new`] and
    /// [`HazAtomic::new`]).
    pub fn global() -> &'static Domain {
        &GLOBAL
    }

    /// A hazard pointer of this domain: a free slot, or a new one.
    pub fn hazard_pointer(&self) -> HazardPointer<'_> {
        let mut s = self.slots.load(Ordering::Acquire);
        while !s.is_null() {
            // SAFETY: slots are linked fully built and freed only with the
            // domain, which `self` borrows.
            let slot = unsafe { &*s };
            if !slot.taken.load(Ordering::Relaxed) && slot.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return HazardPointer { slot, domain: self };
            }
            s = slot.next;
        }
        let new = Box::into_raw(Box::new(Slot { hazard: AtomicPtr::new(ptr::null_mut()), taken: AtomicBool::new(true), next: ptr::null_mut() }));
        // SAFETY: `new` is not linked yet: ours alone.
        unsafe { push(&self.slots, new, new) };
        self.nslots.fetch_add(1, Ordering::Relaxed);
        // SAFETY: linked now, so it lives as long as the domain.
        HazardPointer { slot: unsafe { &*new }, domain: self }
    }

    /// How many slots the domain has (the most hazard pointers that lived
    /// at once).
    pub fn slots(&self) -> usize {
        self.nslots.load(Ordering::Relaxed)
    }

    /// How many retired nodes are not freed yet.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Hands `node` to the domain, which calls `deleter(node)` once no
    /// hazard pointer of the domain protects it (on whichever thread then
    /// scans; perhaps at once, in this call).
    ///
    /// # Safety
    /// - `node` is no longer reachable from any place readers of this
    ///   domain protect from: a reader that loads the place now gets
    ///   another pointer;
    /// - it is retired once;
    /// - `deleter(node)` is sound on any thread once no reader uses the
    ///   node (the node is `Send`, in effect), and the node stays valid
    ///   until then.
    pub unsafe fn retire<T>(&self, node: *mut T, deleter: unsafe fn(*mut T)) {
        let r = Box::new(Retired { header: Header { next: ptr::null_mut(), node: node as *mut (), reclaim: reclaim::<T> }, deleter });
        let h = Box::into_raw(r) as *mut Header;
        // SAFETY: `h` is not linked yet: ours alone.
        unsafe { push(&self.retired, h, h) };
        if self.pending.fetch_add(1, Ordering::Relaxed) + 1 >= SCAN_AT + 2 * self.slots() {
            self.reclaim();
        }
    }

    /// Scans now: takes every retired node, forces a barrier on every
    /// reader ([`fence::heavy`]), reads every slot and frees each node that
    /// none holds; puts the others back. Returns how many it freed.
    pub fn reclaim(&self) -> usize {
        let mut list = self.retired.swap(ptr::null_mut(), Ordering::Acquire);
        if list.is_null() {
            return 0;
        }
        (self.heavy)();
        // Acquire: a reader's uses of a node come before its hazard's reset.
        let mut hazards = Vec::with_capacity(self.slots());
        let mut s = self.slots.load(Ordering::Acquire);
        while !s.is_null() {
            // SAFETY: slots live as long as the domain.
            let slot = unsafe { &*s };
            let h = slot.hazard.load(Ordering::Acquire);
            if !h.is_null() {
                hazards.push(h);
            }
            s = slot.next;
        }
        hazards.sort_unstable();
        let (mut freed, mut kept, mut kept_tail) = (0, ptr::null_mut::<Header>(), ptr::null_mut::<Header>());
        while !list.is_null() {
            // SAFETY: the records taken by the swap are ours alone.
            let (next, node) = unsafe { ((*list).next, (*list).node) };
            if hazards.binary_search(&node).is_ok() {
                // SAFETY: as above.
                unsafe { (*list).next = kept };
                if kept.is_null() {
                    kept_tail = list;
                }
                kept = list;
            } else {
                // SAFETY: no slot held `node` after the barrier, so no
                // reader uses it or can protect it again (it is unlinked,
                // see docs/safety.md); the record is ours.
                unsafe { ((*list).reclaim)(list) };
                freed += 1;
            }
            list = next;
        }
        if !kept.is_null() {
            // SAFETY: `kept..=kept_tail` is our private list.
            unsafe { push(&self.retired, kept, kept_tail) };
        }
        self.pending.fetch_sub(freed, Ordering::Relaxed);
        freed
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // No hazard pointer borrows the domain any more: every node may go.
        let mut list = *self.retired.get_mut();
        while !list.is_null() {
            // SAFETY: ours alone (`&mut self`); nothing protects the node.
            unsafe {
                let next = (*list).next;
                ((*list).reclaim)(list);
                list = next;
            }
        }
        let mut s = *self.slots.get_mut();
        while !s.is_null() {
            // SAFETY: slots came from `Box::into_raw` and nothing borrows
            // them any more.
            let slot = unsafe { Box::from_raw(s) };
            s = slot.next;
        }
    }
}

/// One slot of a [`Domain`], protecting at most one pointer at a time.
/// Reuse it: creating one may be a compare-and-swap and an allocation.
pub struct HazardPointer<'d> {
    slot: &'d Slot,
    domain: &'d Domain,
}

impl HazardPointer<'static> {
    /// A hazard pointer of the global domain.
    pub fn new() -> HazardPointer<'static> {
        GLOBAL.hazard_pointer()
    }
}

impl Default for HazardPointer<'static> {
    fn default() -> Self {
        HazardPointer::new()
    }
}

impl<'d> HazardPointer<'d> {
    /// The domain of this slot.
    pub fn domain(&self) -> &'d Domain {
        self.domain
    }

    /// Loads `src` and protects the pointer: until the next `protect_raw`,
    /// [`reset`](Self::reset) or drop of this hazard pointer, a node
    /// retired into this domain is not freed while this slot holds it. The
    /// read side: a store into the slot, [`fence::light`], a load of
    /// `src`, repeated while `src` changed. A null result protects nothing.
    ///
    /// Dereferencing the result is the caller's business: it is valid if
    /// every node ever stored in `src` is retired into this domain (and
    /// only) after it is unlinked.
    pub fn protect_raw<T>(&mut self, src: &AtomicPtr<T>) -> *mut T {
        self.protect_with(src, fence::light)
    }

    /// [`protect_raw`](Self::protect_raw) with `fence(SeqCst)` instead of
    /// [`fence::light`], for comparing costs.
    #[doc(hidden)]
    pub fn protect_raw_seqcst<T>(&mut self, src: &AtomicPtr<T>) -> *mut T {
        self.protect_with(src, || atomic_fence(Ordering::SeqCst))
    }

    #[inline(always)]
    fn protect_with<T>(&mut self, src: &AtomicPtr<T>, store_load: impl Fn()) -> *mut T {
        let mut p = src.load(Ordering::Relaxed);
        loop {
            self.slot.hazard.store(p as *mut (), Ordering::Relaxed);
            store_load();
            // Acquire: the node's contents as its writer published them.
            let now = src.load(Ordering::Acquire);
            if now == p {
                return p;
            }
            p = now;
        }
    }

    /// Protects nothing any more.
    pub fn reset(&mut self) {
        reset(self.slot);
    }
}

impl Drop for HazardPointer<'_> {
    fn drop(&mut self) {
        self.reset();
        self.slot.taken.store(false, Ordering::Release);
    }
}

/// An atomic, owning pointer to a `T` (or nothing) that readers load under
/// a hazard pointer and writers replace; a replaced value is retired into
/// the domain and dropped once no reader holds it.
pub struct HazAtomic<T: Send + Sync> {
    ptr: AtomicPtr<T>,
    domain: &'static Domain,
    _owns: PhantomData<Box<T>>,
}

/// # Safety
/// `p` came from `Box::into_raw` and nobody uses it any more.
unsafe fn drop_box<T>(p: *mut T) {
    // SAFETY: the caller's promise.
    drop(unsafe { Box::from_raw(p) })
}

/// Retires what `HazAtomic` unlinked.
///
/// # Safety
/// `p` came from `Box::into_raw`, readers of the domain can no longer load
/// it, and it is retired once.
unsafe fn retire_box<T: Send + Sync>(domain: &Domain, p: *mut T) {
    if !p.is_null() {
        // SAFETY: the caller's promises; `T: Send`, so the box may be
        // dropped on any thread.
        unsafe { domain.retire(p, drop_box::<T>) }
    }
}

impl<T: Send + Sync> HazAtomic<T> {
    /// Holding `value`, in the global domain.
    pub fn new(value: T) -> Self {
        HazAtomic::in_domain(Some(value), Domain::global())
    }

    /// Holding `value` (or nothing), in `domain`.
    pub fn in_domain(value: Option<T>, domain: &'static Domain) -> Self {
        HazAtomic { ptr: AtomicPtr::new(value.map_or(ptr::null_mut(), |v| Box::into_raw(Box::new(v)))), domain, _owns: PhantomData }
    }

    /// The current value, protected by `hp` while the guard lives (`None`
    /// when empty). Panics if `hp` is of another domain.
    pub fn load<'a>(&'a self, hp: &'a mut HazardPointer<'_>) -> Option<Guard<'a, T>> {
        assert!(ptr::eq(hp.domain, self.domain), "HazAtomic::load with a hazard pointer of another domain");
        let p = hp.protect_raw(&self.ptr);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` was in `self.ptr` after the slot held it (protect),
        // and a node taken out of `self.ptr` is retired into this domain,
        // which does not free it while the slot holds it; the slot is
        // reset only when the guard (which borrows `hp`) is gone, and
        // `self` cannot be dropped while borrowed.
        Some(Guard { value: unsafe { &*p }, slot: hp.slot })
    }

    /// Replaces the value; the old one is dropped once no reader holds it.
    pub fn store(&self, value: T) {
        self.replace(Box::into_raw(Box::new(value)));
    }

    /// Empties it; the old value is dropped once no reader holds it.
    pub fn clear(&self) {
        self.replace(ptr::null_mut());
    }

    fn replace(&self, new: *mut T) {
        let old = self.ptr.swap(new, Ordering::AcqRel);
        // SAFETY: `old` came from `Box::into_raw` (new, in_domain, store),
        // the swap unlinked it for good and only this call got it.
        unsafe { retire_box(self.domain, old) }
    }
}

impl<T: Send + Sync> Drop for HazAtomic<T> {
    fn drop(&mut self) {
        let p = *self.ptr.get_mut();
        if !p.is_null() {
            // SAFETY: from `Box::into_raw`; no guard borrows `self`, so
            // nobody reads the current value.
            unsafe { drop_box(p) };
        }
    }
}

/// A value loaded from a [`HazAtomic`], protected until the guard drops.
/// It keeps its hazard pointer borrowed (one protection per slot).
pub struct Guard<'a, T> {
    value: &'a T,
    slot: &'a Slot,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        reset(self.slot);
    }
}

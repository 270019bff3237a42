//! The C API's table of paused functions: `linger_t.continuation` is an
//! index and a generation into it, never a pointer, so a stale, copied or
//! made-up handle is refused instead of dereferenced.
//!
//! A resume leases its function's slot and gives it back with one atomic
//! compare-and-swap and one plain store on the slot itself, and runs the
//! function in place: under a lock, taking it out and putting it back cost
//! two lock/unlock pairs, about 20 ns, a third of a C resume.
//! Slots therefore live in segments that never move (segment `k` holds
//! `FIRST << k` slots, allocated when first needed), and each carries its
//! generation and state in one atomic word, including whether a paused
//! function paused itself (so `linger_yielded` is one atomic load, never
//! waits and never makes a resume wait). The lock only guards the list of
//! free indices: taking a new slot and giving one back.
//!
//! Hand-rolled: the concurrent slabs on crates.io hand out values by
//! reference or remove them for good (changing the key), while a C handle
//! must stay the same across resumes and a second resume of a running
//! function must be told `EBUSY`.

use std::cell::UnsafeCell;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::{Continuation, Linger};

/// What a slot holds: the function, resumed in place (moving it out and back
/// cost two copies of a continuation per resume).
type Held = Linger<()>;

/// Slots in the first segment; segment `k` has `FIRST << k`.
const FIRST: usize = 64;
/// Enough segments for every `u32` index.
const SEGMENTS: usize = 27;

/// Slot states, in the low two bits of `Slot::word`; then the yielded flag;
/// the generation above them.
const FREE: u64 = 0;
const PAUSED: u64 = 1;
/// Leased by a resume or cancel.
const RUNNING: u64 = 2;
const STATE: u64 = 3;
/// With PAUSED: it paused itself (`Linger::yielded`).
const YIELDED: u64 = 4;
const SHIFT: u32 = 3;

fn paused(generation: u64, held: &Held) -> u64 {
    generation << SHIFT | PAUSED | if held.yielded() { YIELDED } else { 0 }
}

/// Generations run from 1 to this, then wrap (0 is never handed out).
const MAX_GENERATION: u32 = 0x7FFF_FFFF;

struct Slot {
    /// `generation << SHIFT | YIELDED? | state`. All zero (generation 0,
    /// free) is a valid fresh slot, so segments are allocated zeroed.
    word: AtomicU64,
    /// Initialised exactly while the state is not FREE; a continuation
    /// while PAUSED.
    held: UnsafeCell<MaybeUninit<Held>>,
}

// SAFETY: `held` is only touched by the thread that moved `word` into a
// state that gives it exclusive use (insert on a FREE slot under the free
// list's lock, RUNNING), and handed on with Release/Acquire on
// `word`; the continuation itself is `Send`.
unsafe impl Sync for Slot {}

static SEGS: [AtomicPtr<Slot>; SEGMENTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SEGMENTS];

pub(crate) struct Indices {
    /// Indices of free slots. Keeps room for every slot, so that giving one
    /// back never allocates (a cancel under exhausted memory must work).
    free: Vec<u32>,
    /// Slots ever handed out: indices `len..` have never been used.
    len: u32,
}

static INDICES: Mutex<Indices> = Mutex::new(Indices { free: Vec::new(), len: 0 });

fn indices() -> std::sync::MutexGuard<'static, Indices> {
    lock()
}

/// The free list's lock (also taken around `fork`, see `crate::runtime::fork`).
pub(crate) fn lock() -> std::sync::MutexGuard<'static, Indices> {
    INDICES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Segment and offset of slot `i`.
fn locate(i: u32) -> (usize, usize) {
    let n = i as usize / FIRST + 1;
    let k = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (k, i as usize - FIRST * ((1 << k) - 1))
}

/// Slot `i`, if its segment exists.
fn slot(i: u32) -> Option<&'static Slot> {
    let (k, off) = locate(i);
    let seg = SEGS.get(k)?.load(Ordering::Acquire);
    // SAFETY: a published segment holds `FIRST << k` zero-initialised slots
    // and is never freed; `off` is below that by construction of `locate`.
    (!seg.is_null()).then(|| unsafe { &*seg.add(off) })
}

/// Slot `i`, allocating its segment if needed (free list lock held, which
/// serialises allocation). None when memory has run out.
fn slot_or_grow(_held: &Indices, i: u32) -> Option<&'static Slot> {
    if let Some(s) = slot(i) {
        return Some(s);
    }
    let (k, off) = locate(i);
    let layout = std::alloc::Layout::array::<Slot>(FIRST << k).ok()?;
    // SAFETY: a non-zero-sized layout; zeroed memory is a valid array of
    // free slots (see `Slot::word`).
    let seg = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Slot;
    if seg.is_null() {
        return None;
    }
    SEGS[k].store(seg, Ordering::Release);
    // SAFETY: just allocated with `FIRST << k` slots, kept for good.
    Some(unsafe { &*seg.add(off) })
}

fn encode(index: u32, generation: u32) -> *mut std::ffi::c_void {
    (((generation as usize) << 32) | (index as usize + 1)) as *mut std::ffi::c_void
}

fn decode(h: *mut std::ffi::c_void) -> Option<(u32, u64)> {
    let v = h as usize;
    let index = u32::try_from((v & 0xFFFF_FFFF).checked_sub(1)?).ok()?;
    Some((index, (v >> 32) as u64))
}

/// Records a paused function and returns its handle; gives the function
/// back when memory for the table runs out.
pub(crate) fn insert(c: Continuation<()>) -> Result<*mut std::ffi::c_void, Continuation<()>> {
    let mut ix = indices();
    let (i, s) = match ix.free.pop() {
        Some(i) => (i, slot(i).expect("a free index has a slot")),
        None => {
            let i = ix.len;
            let Some(s) = (i < u32::MAX).then(|| slot_or_grow(&ix, i)).flatten() else { return Err(c) };
            let extra = (i as usize + 1).saturating_sub(ix.free.len());
            if ix.free.try_reserve(extra).is_err() {
                return Err(c);
            }
            ix.len = i + 1;
            (i, s)
        }
    };
    // A free slot is ours alone while we hold the free list.
    let g = ((s.word.load(Ordering::Relaxed) >> SHIFT) as u32 % MAX_GENERATION) + 1;
    // SAFETY: the slot is FREE, so `held` is uninitialised and unshared.
    let held = unsafe { (*s.held.get()).write(Linger::Continuation(c)) };
    s.word.store(paused(g as u64, held), Ordering::Release);
    Ok(encode(i, g))
}

/// Exclusive use of a paused function's slot (the slot says RUNNING
/// meanwhile). Dropped without `end` or `remove` (a panic), the function is
/// dropped and the slot freed.
pub(crate) struct Lease {
    slot: &'static Slot,
    index: u32,
    generation: u64,
}

/// Why a handle cannot be leased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not a live handle (NULL, made up, stale, freed).
    Invalid,
    /// Running (being resumed or cancelled) right now.
    Busy,
}

/// Leases the slot of the paused function behind `h`.
pub(crate) fn lease(h: *mut std::ffi::c_void) -> Result<Lease, Refused> {
    let (index, g) = decode(h).ok_or(Refused::Invalid)?;
    let s = slot(index).ok_or(Refused::Invalid)?;
    let w = s.word.load(Ordering::Relaxed);
    if w >> SHIFT != g {
        return Err(Refused::Invalid);
    }
    match w & STATE {
        // Only a lease changes a PAUSED word: a failed swap means another
        // lease won it.
        PAUSED => match s.word.compare_exchange(w, g << SHIFT | RUNNING, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Ok(Lease { slot: s, index, generation: g }),
            Err(_) => Err(Refused::Busy),
        },
        RUNNING => Err(Refused::Busy),
        _ => Err(Refused::Invalid),
    }
}

impl Lease {
    /// The function, to resume in place.
    pub(crate) fn linger(&mut self) -> &mut Held {
        // SAFETY: RUNNING makes the slot ours alone, and it is initialised
        // (see `Slot::held`).
        unsafe { (*self.slot.held.get()).assume_init_mut() }
    }

    /// Gives the slot back: paused again under the same handle (None), or,
    /// if the function has ended, taken out (the handle is stale from now on).
    pub(crate) fn end(self) -> Option<Held> {
        let mut me = ManuallyDrop::new(self);
        let g = me.generation;
        let held = me.linger();
        if held.is_continuation() {
            let w = paused(g, held);
            me.slot.word.store(w, Ordering::Release);
            return None;
        }
        Some(me.take_out())
    }

    /// Takes the function out for good (to cancel it) and frees the slot.
    pub(crate) fn remove(self) -> Held {
        ManuallyDrop::new(self).take_out()
    }

    fn take_out(&mut self) -> Held {
        // SAFETY: initialised (RUNNING), and the slot is marked FREE right
        // after, so it is read exactly once.
        let held = unsafe { (*self.slot.held.get()).assume_init_read() };
        self.free();
        held
    }

    fn free(&mut self) {
        self.slot.word.store(self.generation << SHIFT | FREE, Ordering::Release);
        // Never allocates: `free` has room for every slot.
        indices().free.push(self.index);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // SAFETY: initialised (RUNNING) and ours; dropped once, then FREE.
        unsafe { (*self.slot.held.get()).assume_init_drop() };
        self.free();
    }
}

/// Did the paused function behind `h` pause itself? (False for anything but
/// a live, paused handle.)
pub(crate) fn yielded(h: *mut std::ffi::c_void) -> bool {
    let Some((index, g)) = decode(h) else { return false };
    slot(index).is_some_and(|s| {
        let w = s.word.load(Ordering::Relaxed);
        w >> SHIFT == g && w & STATE == PAUSED && w & YIELDED != 0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_tile_the_indices() {
        let mut want = (0usize, 0usize);
        for i in 0..100_000u32 {
            let (k, off) = locate(i);
            if off == 0 && i > 0 {
                assert_eq!(want.1, FIRST << want.0, "segment {} ended early at {i}", want.0);
                want = (want.0 + 1, 0);
            }
            assert_eq!((k, off), want, "index {i}");
            want.1 += 1;
        }
        let (k, off) = locate(u32::MAX - 1);
        assert!(k < SEGMENTS && off < FIRST << k);
    }
}

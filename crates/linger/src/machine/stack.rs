//! Stacks for preemptible functions: mmap'd, committed lazily, guarded
//! below, and pooled per thread so a launch normally costs no system call.
//!
//! Below the usable stack lies a guarded *emergency reserve*, and below that
//! one hard guard page. A function that overflows inside library code (a
//! `printf` holding its `FILE` lock, `malloc` holding an arena lock) gets the
//! reserve opened so that the library call can finish and release its locks;
//! the overflow is reported when the call returns to the function's own code
//! (see `overflow.rs`). Everywhere else an overflow is reported at once.
//!
//! Hand-written rather than corosensei's `DefaultStack` because we need a pool,
//! guard pages that cost no extra VMA (`MADV_GUARD_INSTALL`, falling back to
//! `mprotect`), the reserve, and the guard range for the stack-overflow handler.

use std::cell::RefCell;
use std::io;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use corosensei::stack::valgrind::ValgrindStackRegistration;
use corosensei::stack::{Stack, StackPointer};

/// `MADV_GUARD_INSTALL` and `MADV_GUARD_REMOVE` (Linux 6.13); not in glibc
/// 2.36 headers.
const MADV_GUARD_INSTALL: libc::c_int = 102;
const MADV_GUARD_REMOVE: libc::c_int = 103;
/// The emergency reserve below each stack: room for a library call that
/// overflowed to finish. glibc's functions keep their `alloca`s under 64 KiB
/// (`__MAX_ALLOCA_CUTOFF`) and most frames are far smaller; address space
/// only, never committed unless an overflow opens it.
pub(crate) const RESERVE: usize = 64 * 1024;
/// Stacks kept per thread for reuse.
const POOL_PER_THREAD: usize = 64;
/// Stacks given back by threads that did not run them, or whose own pool
/// was full, for any thread: at least this many, or as many as were in use
/// at once lately (see [`shared_room`]).
const SHARED_POOL: usize = 256;
static SHARED: std::sync::Mutex<Vec<PooledStack>> = std::sync::Mutex::new(Vec::new());

/// The most stacks in use at once lately (mapped and not in the shared
/// pool), halved each second in which stacks are given back or taken.
static PEAK_IN_USE: AtomicUsize = AtomicUsize::new(0);
/// When `PEAK_IN_USE` was last halved (CLOCK_MONOTONIC ns).
static PEAK_HALVED_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many stacks the shared pool keeps now, given that it holds `pooled`:
/// the recent peak of stacks in use. A burst of launches on one thread (a
/// runtime's spawner) ending on others gives thousands of stacks back at
/// a time, and a pool of 256 unmapped nearly all of them while the spawner
/// mapped new ones: each `munmap` takes the mmap lock and a TLB shootdown
/// (an IPI to every other CPU running the process), and 15,000 of them
/// for 100,000 sleeping green threads were most of the run (issue 27, part
/// 5: all done in 1.4-1.7 s instead of 0.45-0.62 s). Kept, they hold what
/// their functions touched (a page or two each) until the peak decays,
/// about a second after the burst, and the pool then shrinks by a stack at
/// later give-backs and takes, at most one a millisecond ([`trim_shared`]).
fn shared_room(pooled: usize, now: u64) -> usize {
    let in_use = LIVE_STACKS.load(Ordering::Relaxed).saturating_sub(pooled);
    let mut peak = PEAK_IN_USE.load(Ordering::Relaxed).max(in_use);
    if now.saturating_sub(PEAK_HALVED_AT.load(Ordering::Relaxed)) >= 1_000_000_000 {
        PEAK_HALVED_AT.store(now, Ordering::Relaxed);
        peak = (peak / 2).max(in_use);
    }
    PEAK_IN_USE.store(peak, Ordering::Relaxed);
    peak.max(SHARED_POOL)
}

/// When the shared pool last gave a stack up (CLOCK_MONOTONIC ns).
static TRIMMED_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One stack of the shared pool's surplus, to unmap after its lock is
/// released: the pool shrinks a stack at a time as the peak decays, at
/// most one a millisecond (a new burst that finds a large pool would
/// otherwise unmap a stack at each launch, the storm the pool is there to
/// avoid). Called with the pool's lock held, with its room and the time.
fn trim_shared(p: &mut Vec<PooledStack>, room: usize, now: u64) -> Option<PooledStack> {
    if p.len() <= room {
        return None;
    }
    if now.saturating_sub(TRIMMED_AT.load(Ordering::Relaxed)) < 1_000_000 {
        return None;
    }
    TRIMMED_AT.store(now, Ordering::Relaxed);
    // The oldest: the most likely to have left the caches.
    Some(p.swap_remove(0))
}
/// Bytes reserved at the top of each stack for the runtime's per-function
/// record (`Frame`), so a launch needs no heap allocation.
pub(crate) const HEADER: usize = 1152;
/// Where in the header the stack's `pause()` memo lives, after the `Frame`
/// (`unwind::Memo`): written once when the stack is mapped, and kept across
/// the functions that use the stack (a memo is keyed by everything its walk
/// read, so it stays right), so that a launch does not write it.
/// (At the header's end, 16-byte aligned; the `Frame` fits below it.)
pub(crate) const MEMO_AT: usize = (HEADER - std::mem::size_of::<std::cell::RefCell<crate::state::memo::Memo>>()) & !15;

static GUARD_MADVISE_WORKS: AtomicBool = AtomicBool::new(true);
static LIVE_STACKS: AtomicUsize = AtomicUsize::new(0);
static ABANDONED_STACKS: AtomicUsize = AtomicUsize::new(0);
static ABANDONED_BYTES: AtomicUsize = AtomicUsize::new(0);

use crate::base::config::page_size;

/// Number of mapped stacks (in use or pooled), for tests and stats.
pub fn live_stacks() -> usize {
    LIVE_STACKS.load(Ordering::Relaxed)
}

/// Stacks of functions abandoned without unwinding (reclaimed by a cancel,
/// or overflowed), and the bytes of them kept mapped: their live frames are
/// never reused, so these only grow.
pub fn abandoned_stacks() -> (usize, usize) {
    (ABANDONED_STACKS.load(Ordering::Relaxed), ABANDONED_BYTES.load(Ordering::Relaxed))
}

/// One mapping: `[low, low + page)` is the hard guard, then the reserve
/// (`RESERVE` bytes, guarded until an overflow opens it), then the stack up
/// to `high`.
pub(crate) struct PooledStack {
    low: usize,
    high: usize,
    /// Tells valgrind (if present) that this memory is a stack.
    _valgrind: ValgrindStackRegistration,
}

impl PooledStack {
    /// Takes a stack of `size` usable bytes (a multiple of the page size) from
    /// this thread's pool, or maps a new one.
    pub(crate) fn get(size: usize) -> io::Result<PooledStack> {
        let reused = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            let i = p.iter().rposition(|s| s.usable() == size)?;
            Some(p.swap_remove(i))
        });
        match reused {
            Ok(Some(s)) => Ok(s.unpoisoned()),
            _ => match Self::from_shared(size) {
                Some(s) => Ok(s.unpoisoned()),
                None => Self::map(size).map(PooledStack::unpoisoned),
            },
        }
    }

    /// A stack cleared of AddressSanitizer's marks when the program runs
    /// under it: the frames that last ran here (on this stack, or on one
    /// unmapped from the same addresses: `munmap` leaves the marks) left
    /// their redzones poisoned (they never returned normally: a function
    /// stopped and reclaimed, or a coroutine whose stack was switched
    /// away), and the next function's first write (corosensei's set-up of
    /// its closure) was reported as a stack overflow. Looked up at run time, so that
    /// ordinary builds need no sanitizer and pay one branch.
    fn unpoisoned(self) -> PooledStack {
        type Unpoison = unsafe extern "C" fn(*const libc::c_void, usize);
        static UNPOISON: std::sync::OnceLock<Option<Unpoison>> = std::sync::OnceLock::new();
        let f = UNPOISON.get_or_init(|| {
            // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches
            // the loaded objects (the sanitizer's runtime is one if present).
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__asan_unpoison_memory_region".as_ptr()) };
            // SAFETY: the sanitizer's function has this signature.
            (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, Unpoison>(p) })
        });
        if let Some(f) = f {
            let (lo, _) = self.bounds();
            // SAFETY: the range is this stack's own mapped memory, not in use
            // (it was in the pool); unpoisoning only changes the sanitizer's marks.
            unsafe { f(lo as *const libc::c_void, self.high - lo) };
        }
        self
    }

    /// A stack another thread gave back (see [`PooledStack::recycle`]).
    fn from_shared(size: usize) -> Option<PooledStack> {
        let now = crate::state::thread::now_ns();
        let mut p = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        let room = shared_room(p.len(), now);
        let surplus = trim_shared(&mut p, room, now);
        let s = p.iter().rposition(|s| s.usable() == size).map(|i| p.swap_remove(i));
        drop(p);
        drop(surplus);
        s
    }

    fn map(size: usize) -> io::Result<PooledStack> {
        let guard = page_size() + RESERVE;
        let len = size + guard;
        // SAFETY: anonymous private mapping at a kernel-chosen address; no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = PooledStack {
            low: p as usize,
            high: p as usize + len,
            _valgrind: ValgrindStackRegistration::new(p as *mut u8, len),
        };
        LIVE_STACKS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the memo's place lies in the header of the mapping we just
        // created (writable, 16-byte aligned: `high` is page-aligned), and
        // nothing references it yet.
        unsafe { (stack.memo() as *mut std::cell::RefCell<crate::state::memo::Memo>).write(std::cell::RefCell::new(crate::state::memo::Memo::EMPTY)) };
        // SAFETY: the guard page lies inside the mapping we just created and
        // nothing references it yet.
        unsafe {
            if !(GUARD_MADVISE_WORKS.load(Ordering::Relaxed) && libc::madvise(p, guard, MADV_GUARD_INSTALL) == 0) {
                GUARD_MADVISE_WORKS.store(false, Ordering::Relaxed);
                if libc::mprotect(p, guard, libc::PROT_NONE) != 0 {
                    return Err(io::Error::last_os_error()); // `stack` drops and unmaps
                }
            }
        }
        Ok(stack)
    }

    pub(crate) fn usable(&self) -> usize {
        self.high - self.low - page_size() - RESERVE
    }

    /// Address range guarded while the function runs: the hard guard page
    /// and the reserve above it.
    pub(crate) fn guard(&self) -> (usize, usize) {
        (self.low, self.low + page_size() + RESERVE)
    }

    /// Address range of the emergency reserve.
    pub(crate) fn reserve(&self) -> (usize, usize) {
        (self.low + page_size(), self.low + page_size() + RESERVE)
    }

    pub(crate) fn bounds(&self) -> (usize, usize) {
        (self.low + page_size() + RESERVE, self.high - HEADER)
    }

    /// Guards the reserve again after [`open_reserve`] opened it (a function
    /// that overflowed in a library call and then finished normally: its
    /// stack goes back to the pool). False if that failed; the stack must
    /// not be reused then.
    pub(crate) fn close_reserve(&self) -> bool {
        let (lo, hi) = self.reserve();
        // SAFETY: the reserve lies inside our mapping and nothing runs on it
        // any more (its function finished); its contents are dead.
        unsafe {
            if GUARD_MADVISE_WORKS.load(Ordering::Relaxed) {
                libc::madvise(lo as *mut libc::c_void, hi - lo, MADV_GUARD_INSTALL) == 0
            } else {
                libc::mprotect(lo as *mut libc::c_void, hi - lo, libc::PROT_NONE) == 0
            }
        }
    }

    /// The stack's `pause()` memo (see [`MEMO_AT`]), initialised when the
    /// stack was mapped.
    pub(crate) fn memo(&self) -> *const std::cell::RefCell<crate::state::memo::Memo> {
        (self.high - HEADER + MEMO_AT) as *const _
    }

    /// The reserved header above the usable stack (16-byte aligned).
    pub(crate) fn header(&self) -> *mut u8 {
        (self.high - HEADER) as *mut u8
    }

    /// Keeps the live part of an abandoned function's stack, from
    /// `live_from` (its last stack pointer; 0 for all of it) up, mapped for
    /// good and never reused, and unmaps the rest (see
    /// `runtime::Inner::abandon_stack` for why).
    pub(crate) fn abandon(self, live_from: usize) {
        let page = page_size();
        // The red zone below a stopped stack pointer may still be live.
        let cut = live_from.saturating_sub(128) & !(page - 1);
        let cut = cut.clamp(self.low, self.high - page);
        if cut > self.low {
            // SAFETY: [low, cut) is the guard and the dead lower part of a
            // mapping we own; nothing runs on it or points into it.
            unsafe { libc::munmap(self.low as *mut libc::c_void, cut - self.low) };
        }
        ABANDONED_STACKS.fetch_add(1, Ordering::Relaxed);
        ABANDONED_BYTES.fetch_add(self.high - cut, Ordering::Relaxed);
        LIVE_STACKS.fetch_sub(1, Ordering::Relaxed);
        // The rest stays mapped for the life of the process.
        std::mem::forget(self);
    }

    /// Gives the stack back to this thread's pool, or, from a thread that
    /// did not run the function (a reaper cancelling what others launched),
    /// to the process's shared pool, where launches on every thread find
    /// it: kept in the reaper's own pool it would never be used again,
    /// and every launch would map a fresh stack (tens of microseconds).
    /// Unmapped when the pool has no room.
    pub(crate) fn recycle(self, foreign: bool) {
        if foreign {
            self.share();
            return;
        }
        // Moved straight into the pool: a detour through an `Option` cost a
        // store-forwarding stall on every launch. When the pool is full (or
        // gone, then the closure is dropped unrun), the stack drops here and
        // is unmapped.
        let full = POOL.try_with(move |p| {
            let mut p = p.borrow_mut();
            // Never aborts for want of memory: a stack the pool has no room
            // for goes to the shared pool or is unmapped (cancelling under
            // exhausted memory comes here).
            if p.len() < POOL_PER_THREAD && p.try_reserve(1).is_ok() {
                p.push(self);
                None
            } else {
                Some(self)
            }
        });
        // A full pool hands the stack on to the shared one: where functions
        // are launched on one thread and end on others (a runtime's spawner
        // and its workers), the launching thread's pool stays empty and the
        // others' full, and every launch mapped a stack that another thread
        // then unmapped: 100,000 green threads spawned from `block_on` made
        // 100,000 `mmap`s and `munmap`s, whose TLB shootdowns (an IPI to the
        // other CPU each) took most of the workers' time.
        if let Ok(Some(s)) = full {
            s.share();
        }
    }

    fn share(self) {
        let now = crate::state::thread::now_ns();
        let mut p = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        let room = shared_room(p.len(), now);
        let surplus = trim_shared(&mut p, room, now);
        let unkept = if p.len() < room && p.try_reserve(1).is_ok() {
            p.push(self);
            None
        } else {
            Some(self)
        };
        // Unmapped (dropped) with the lock released: `munmap` waits for the
        // other CPUs' TLBs, and other threads take and give back meanwhile.
        drop(p);
        drop(surplus);
        drop(unkept);
    }
}

/// Opens the reserve `[lo, hi)` of a running function's stack (see
/// `PooledStack::reserve`) so that its pages can be touched. Async-signal-
/// safe (one system call). False if the kernel refused.
pub(crate) fn open_reserve(lo: usize, hi: usize) -> bool {
    // SAFETY: `[lo, hi)` is the reserve of a mapping this module made; it is
    // guarded, so nothing lives there, and making it ordinary memory affects
    // only that range.
    // Both ways: a stack mapped before `MADV_GUARD_INSTALL` was found not
    // to work has guard markers, later ones are protected.
    unsafe {
        let removed = libc::madvise(lo as *mut libc::c_void, hi - lo, MADV_GUARD_REMOVE) == 0;
        if GUARD_MADVISE_WORKS.load(Ordering::Relaxed) {
            removed
        } else {
            libc::mprotect(lo as *mut libc::c_void, hi - lo, libc::PROT_READ | libc::PROT_WRITE) == 0
        }
    }
}

impl Drop for PooledStack {
    fn drop(&mut self) {
        // SAFETY: we own this mapping and nothing runs on it any more.
        unsafe { libc::munmap(self.low as *mut libc::c_void, self.high - self.low) };
        LIVE_STACKS.fetch_sub(1, Ordering::Relaxed);
    }
}

// SAFETY: base/limit describe a mapping we own with a guard page at the bottom
// and at least MIN_STACK_SIZE usable bytes (enforced by config).
unsafe impl Stack for PooledStack {
    #[inline]
    fn base(&self) -> StackPointer {
        NonZeroUsize::new(self.high - HEADER).expect("mapping is not at address 0")
    }
    #[inline]
    fn limit(&self) -> StackPointer {
        NonZeroUsize::new(self.low).expect("mapping is not at address 0")
    }
}

thread_local! {
    static POOL: RefCell<Vec<PooledStack>> = const { RefCell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_of(size: usize) -> usize {
        SHARED.lock().unwrap().iter().filter(|s| s.usable() == size).count()
    }

    /// Ends `stacks` on a thread of their own, as a runtime's workers end
    /// what its spawner launched.
    fn give_back_on_another_thread(stacks: Vec<PooledStack>) {
        std::thread::spawn(move || {
            for s in stacks {
                s.recycle(false);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_burst_of_stacks_ended_on_another_thread_is_kept() {
        // 1,000 in use at once, given back by another thread: kept for the
        // next burst, not unmapped past 256 (the peak may be halved once
        // meanwhile, if the test straddles a second).
        let size = 3 * 1024 * 1024 + 7 * page_size();
        let stacks: Vec<PooledStack> = (0..1000).map(|_| PooledStack::get(size).unwrap()).collect();
        let before = shared_of(size);
        give_back_on_another_thread(stacks);
        let kept = shared_of(size) - before;
        assert!(kept >= (1000 - POOL_PER_THREAD) / 2, "{kept} of 1000 stacks kept in the shared pool");
        // Taken again by a burst here.
        let again: Vec<PooledStack> = (0..kept).map(|_| PooledStack::get(size).unwrap()).collect();
        assert_eq!(shared_of(size), before, "a burst here did not take the kept stacks");
        drop(again);
    }

    /// Stacks taken on one thread and given back on another (a spawner and
    /// the workers that run what it spawns) come back to the first through
    /// the shared pool once the second's own pool is full, instead of being
    /// unmapped there and mapped anew here at every launch.
    #[test]
    fn stacks_ended_on_another_thread_come_back_through_the_shared_pool() {
        // A size of its own: no other test's stacks are counted.
        let size = 3 * 1024 * 1024 + 5 * page_size();
        for round in 0..5 {
            let stacks: Vec<PooledStack> = (0..200).map(|_| PooledStack::get(size).unwrap()).collect();
            let before = shared_of(size);
            give_back_on_another_thread(stacks);
            // The other thread keeps `POOL_PER_THREAD` (then exits, and
            // unmaps them); the rest are shared, up to the shared pool's room.
            let shared = shared_of(size);
            assert!(
                shared >= (before + 200 - POOL_PER_THREAD).min(SHARED_POOL),
                "round {round}: {shared} shared stacks ({before} before) after 200 given back on another thread"
            );
        }
        // And launches here take them.
        let had = shared_of(size);
        let s = PooledStack::get(size).unwrap();
        assert_eq!(shared_of(size), had - 1, "a launch here did not take a shared stack");
        drop(s);
    }
}

//! What isolated libraries allocate, so that cancelling a call frees it.
//!
//! A libset's copies allocate from the program's ordinary heap (their calls
//! to the malloc family are relinked to the wrappers below), so memory they
//! hand back to the caller is ordinary memory that `free` accepts. While a
//! libset is leased, every block its copies allocate and have not freed is
//! recorded in that libset's ledger. A function that completes hands its
//! blocks over (the ledger is forgotten: the caller may own some of them);
//! a cancelled one cannot, so the reset frees every block still recorded
//! (libpng's `png_struct` and row buffers, zlib's window, ...). The original
//! libgotcha leaked them.
//!
//! The wrappers must never be stopped half-way (a cancel would then reset a
//! ledger under its own lock). [`deferred_functions`] lists them for
//! linger, which never preempts code inside them (it finds their extent in
//! the unwind tables); the calls they make stay on the stack above their
//! frame and are deferred with it.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use libc::{c_char, c_int, c_void, size_t};

use crate::routing::dispatch::{self, MAX_LIBSETS};

/// Block addresses are already well spread; a multiplicative hash is enough
/// (the default SipHash costs more than the allocation it records).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 ^ (n as u64 >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// What a leased libset's copies did with the heap.
#[derive(Default)]
struct Ledger {
    /// Blocks they allocated and have not freed.
    blocks: HashSet<usize, BuildHasherDefault<AddrHasher>>,
    /// Blocks they freed that they had not allocated during this lease
    /// (made before it, by an earlier lease, or by the program). Freed when
    /// the lease ends normally; kept when it is reset, because the restored
    /// snapshot may point at them again: a copy of libc made in a locale
    /// other than "C" keeps the locale's names in blocks from before its
    /// snapshot, and a `setlocale` in a cancelled function frees them.
    held: Vec<usize>,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Mutex<Option<Ledger>> = Mutex::new(None);
/// Per libset: None while it is not leased (nothing is recorded then).
static LEDGERS: [Mutex<Option<Ledger>>; MAX_LIBSETS] = [EMPTY; MAX_LIBSETS];

/// The program's own allocator (whatever the base namespace binds `malloc`
/// to: libc's, or an interposer's).
struct Real {
    malloc: AtomicUsize,
    calloc: AtomicUsize,
    realloc: AtomicUsize,
    free: AtomicUsize,
    posix_memalign: AtomicUsize,
    aligned_alloc: AtomicUsize,
    memalign: AtomicUsize,
}

static REAL: Real = Real {
    malloc: AtomicUsize::new(0),
    calloc: AtomicUsize::new(0),
    realloc: AtomicUsize::new(0),
    free: AtomicUsize::new(0),
    posix_memalign: AtomicUsize::new(0),
    aligned_alloc: AtomicUsize::new(0),
    memalign: AtomicUsize::new(0),
};

/// Looks the program's allocator up once.
pub(crate) fn init(lookup: impl Fn(&str) -> usize) {
    REAL.malloc.store(lookup("malloc"), Ordering::Relaxed);
    REAL.calloc.store(lookup("calloc"), Ordering::Relaxed);
    REAL.realloc.store(lookup("realloc"), Ordering::Relaxed);
    REAL.free.store(lookup("free"), Ordering::Relaxed);
    REAL.posix_memalign.store(lookup("posix_memalign"), Ordering::Relaxed);
    REAL.aligned_alloc.store(lookup("aligned_alloc"), Ordering::Relaxed);
    REAL.memalign.store(lookup("memalign"), Ordering::Relaxed);
}

/// The wrapper to relink a copy's reference to `name` to, if it allocates
/// or frees.
pub(crate) fn wrapper(name: &str) -> Option<usize> {
    Some(match name {
        "malloc" => gotcha_malloc as *const () as usize,
        "calloc" => gotcha_calloc as *const () as usize,
        "realloc" => gotcha_realloc as *const () as usize,
        "reallocarray" => gotcha_reallocarray as *const () as usize,
        "free" => gotcha_free as *const () as usize,
        "posix_memalign" => gotcha_posix_memalign as *const () as usize,
        "aligned_alloc" => gotcha_aligned_alloc as *const () as usize,
        "memalign" => gotcha_memalign as *const () as usize,
        "valloc" => gotcha_valloc as *const () as usize,
        "pvalloc" => gotcha_pvalloc as *const () as usize,
        "strdup" | "__strdup" => gotcha_strdup as *const () as usize,
        "strndup" | "__strndup" => gotcha_strndup as *const () as usize,
        _ => return None,
    })
}

/// Starts recording for a newly leased libset.
pub(crate) fn open(libset: usize) {
    *LEDGERS[libset].lock().unwrap_or_else(|e| e.into_inner()) = Some(Ledger::default());
}

/// Stops recording: the blocks are the caller's now, and the frees the
/// copies asked for during the lease of blocks they had not allocated in
/// it are done.
pub(crate) fn hand_over(libset: usize) -> usize {
    let ledger = LEDGERS[libset].lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(l) = ledger else { return 0 };
    let free = REAL.free.load(Ordering::Relaxed);
    if free != 0 {
        // SAFETY: `free` is the program's free (looked up at init).
        let free: unsafe extern "C" fn(*mut c_void) = unsafe { std::mem::transmute(free) };
        for &p in &l.held {
            // SAFETY: a live block a copy freed (the free was held back).
            unsafe { free(p as *mut c_void) };
        }
    }
    l.blocks.len()
}

/// Frees every block still recorded; returns how many.
pub(crate) fn reclaim(libset: usize) -> usize {
    let blocks = LEDGERS[libset].lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(Ledger { blocks, held }) = blocks else { return 0 };
    // Frees held back stay undone: the restored snapshot may point there.
    // (A block the caller handed to the library to free is kept too.)
    drop(held);
    let free = REAL.free.load(Ordering::Relaxed);
    if free != 0 {
        // SAFETY: `free` is the program's free (looked up at init).
        let free: unsafe extern "C" fn(*mut c_void) = unsafe { std::mem::transmute(free) };
        for &p in &blocks {
            // SAFETY: recorded when the program's allocator returned it to
            // the libset, and removed when the libset freed it: still live.
            unsafe { free(p as *mut c_void) };
        }
    }
    blocks.len()
}

/// How many blocks `libset` holds now (tests, statistics).
pub(crate) fn outstanding(libset: usize) -> usize {
    LEDGERS[libset].lock().unwrap_or_else(|e| e.into_inner()).as_ref().map_or(0, |l| l.blocks.len())
}

#[inline(never)]
fn record(p: *mut c_void) {
    let k = dispatch::current();
    if p.is_null() || k == 0 {
        return;
    }
    if let Some(l) = LEDGERS[k].lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        l.blocks.insert(p as usize);
    }
}

/// What a copy's free of `p` finds in its libset's ledger.
#[derive(PartialEq, Eq)]
enum Freed {
    /// Allocated during this lease: forgotten, free it now.
    Ours,
    /// Not allocated during this lease: held until the lease ends.
    Held,
    /// No lease (or null, or libset 0): an ordinary free.
    Plain,
}

/// Forgets `p` if this lease allocated it, else holds its free back.
#[inline(never)]
fn forget(p: *mut c_void) -> Freed {
    let k = dispatch::current();
    if p.is_null() || k == 0 {
        return Freed::Plain;
    }
    let mut g = LEDGERS[k].lock().unwrap_or_else(|e| e.into_inner());
    let Some(l) = g.as_mut() else { return Freed::Plain };
    if l.blocks.remove(&(p as usize)) {
        Freed::Ours
    } else {
        l.held.push(p as usize);
        Freed::Held
    }
}

macro_rules! real {
    ($f:ident : $t:ty) => {{
        // (Used inside the callers' unsafe blocks: the address was looked
        // up by name at init with this C signature, and is never 0 once a
        // libset exists, since relinking needs init first.)
        std::mem::transmute::<usize, $t>(REAL.$f.load(Ordering::Relaxed))
    }};
}

// The wrappers keep a frame of their own (`#[inline(never)]` helpers called
// before they return), so that a preemption inside a helper finds this
// section on the call chain.

#[inline(never)]
unsafe extern "C" fn gotcha_malloc(n: size_t) -> *mut c_void {
    // SAFETY: forwarded to the program's allocator (see `real!`).
    let p = unsafe { real!(malloc: unsafe extern "C" fn(size_t) -> *mut c_void)(n) };
    record(p);
    std::hint::black_box(p)
}

#[inline(never)]
unsafe extern "C" fn gotcha_calloc(n: size_t, m: size_t) -> *mut c_void {
    // SAFETY: forwarded to the program's allocator (see `real!`).
    let p = unsafe { real!(calloc: unsafe extern "C" fn(size_t, size_t) -> *mut c_void)(n, m) };
    record(p);
    std::hint::black_box(p)
}

#[inline(never)]
unsafe extern "C" fn gotcha_realloc(p: *mut c_void, n: size_t) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as malloc.
        return unsafe { gotcha_malloc(n) };
    }
    match forget(p) {
        Freed::Ours => {
            // SAFETY: forwarded to the program's allocator (see `real!`).
            let q = unsafe { real!(realloc: unsafe extern "C" fn(*mut c_void, size_t) -> *mut c_void)(p, n) };
            if !q.is_null() {
                record(q);
            } else if n != 0 {
                record(p); // failed: `p` is unchanged, still live, still ours
            }
            std::hint::black_box(q)
        }
        // A block from before the lease: its free is held back (see
        // `Ledger::held`), so the new block is a fresh one.
        Freed::Held => {
            if n == 0 {
                return std::ptr::null_mut(); // realloc(p, 0) frees p
            }
            // SAFETY: the program's allocator (see `real!`); `p` is live
            // (held), `q` fresh, and `usable` bytes of `p` are readable.
            unsafe {
                let q = gotcha_malloc(n);
                if q.is_null() {
                    unhold(p); // failed: `p` stays the caller's, unchanged
                    return q;
                }
                let usable = libc::malloc_usable_size(p);
                std::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, usable.min(n));
                std::hint::black_box(q)
            }
        }
        Freed::Plain => {
            // SAFETY: forwarded to the program's allocator (see `real!`).
            unsafe { real!(realloc: unsafe extern "C" fn(*mut c_void, size_t) -> *mut c_void)(p, n) }
        }
    }
}

/// Takes back a held free (a failed realloc leaves its block as it was).
#[inline(never)]
fn unhold(p: *mut c_void) {
    let k = dispatch::current();
    if let Some(l) = LEDGERS[k].lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        if let Some(i) = l.held.iter().rposition(|&h| h == p as usize) {
            l.held.swap_remove(i);
        }
    }
}

#[inline(never)]
unsafe extern "C" fn gotcha_reallocarray(p: *mut c_void, n: size_t, m: size_t) -> *mut c_void {
    let Some(total) = n.checked_mul(m) else {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::ENOMEM };
        return std::ptr::null_mut();
    };
    // SAFETY: same contract as realloc.
    unsafe { gotcha_realloc(p, total) }
}

#[inline(never)]
unsafe extern "C" fn gotcha_free(p: *mut c_void) {
    if forget(p) != Freed::Held {
        // SAFETY: forwarded to the program's allocator (see `real!`).
        unsafe { real!(free: unsafe extern "C" fn(*mut c_void))(p) };
    }
    std::hint::black_box(());
}

#[inline(never)]
unsafe extern "C" fn gotcha_posix_memalign(out: *mut *mut c_void, align: size_t, n: size_t) -> c_int {
    // SAFETY: forwarded to the program's allocator (see `real!`).
    let r = unsafe { real!(posix_memalign: unsafe extern "C" fn(*mut *mut c_void, size_t, size_t) -> c_int)(out, align, n) };
    if r == 0 {
        // SAFETY: success stored the block in `*out`.
        record(unsafe { *out });
    }
    std::hint::black_box(r)
}

#[inline(never)]
unsafe extern "C" fn gotcha_aligned_alloc(align: size_t, n: size_t) -> *mut c_void {
    // SAFETY: forwarded to the program's allocator (see `real!`).
    let p = unsafe { real!(aligned_alloc: unsafe extern "C" fn(size_t, size_t) -> *mut c_void)(align, n) };
    record(p);
    std::hint::black_box(p)
}

#[inline(never)]
unsafe extern "C" fn gotcha_memalign(align: size_t, n: size_t) -> *mut c_void {
    // SAFETY: forwarded to the program's allocator (see `real!`).
    let p = unsafe { real!(memalign: unsafe extern "C" fn(size_t, size_t) -> *mut c_void)(align, n) };
    record(p);
    std::hint::black_box(p)
}

#[inline(never)]
unsafe extern "C" fn gotcha_valloc(n: size_t) -> *mut c_void {
    // SAFETY: page-aligned allocation, as valloc.
    unsafe { gotcha_memalign(4096, n) }
}

#[inline(never)]
unsafe extern "C" fn gotcha_pvalloc(n: size_t) -> *mut c_void {
    // SAFETY: as pvalloc: whole pages.
    unsafe { gotcha_memalign(4096, n.div_ceil(4096).max(1) * 4096) }
}

#[inline(never)]
unsafe extern "C" fn gotcha_strdup(s: *const c_char) -> *mut c_char {
    // SAFETY: `s` is a C string by strdup's contract.
    let n = unsafe { libc::strlen(s) } + 1;
    // SAFETY: as malloc.
    let p = unsafe { gotcha_malloc(n) } as *mut c_char;
    if !p.is_null() {
        // SAFETY: `p` holds n bytes, `s` n bytes with its NUL.
        unsafe { std::ptr::copy_nonoverlapping(s, p, n) };
    }
    std::hint::black_box(p)
}

#[inline(never)]
unsafe extern "C" fn gotcha_strndup(s: *const c_char, max: size_t) -> *mut c_char {
    // SAFETY: `s` holds a NUL or at least `max` bytes, by strndup's contract.
    let n = unsafe { libc::strnlen(s, max) };
    // SAFETY: as malloc.
    let p = unsafe { gotcha_malloc(n + 1) } as *mut c_char;
    if !p.is_null() {
        // SAFETY: `p` holds n + 1 bytes; `s` has n readable bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(s, p, n);
            *p.add(n) = 0;
        }
    }
    std::hint::black_box(p)
}

/// The wrappers' entry points: functions never to be preempted.
pub(crate) fn deferred_functions() -> Vec<usize> {
    [
        "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc", "memalign", "valloc",
        "pvalloc", "strdup", "strndup",
    ]
    .iter()
    .filter_map(|n| wrapper(n))
    .collect()
}

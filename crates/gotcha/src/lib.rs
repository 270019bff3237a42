//! gotcha: library isolation for preemptible functions, on stock glibc.
//!
//! A preemptible function stopped inside a shared library may leave that
//! library's state half-updated; the caller could then trip over it. So
//! linger defers every deadline that lands in library code. gotcha lets
//! chosen libraries be preempted anyway: a function launched *isolated*
//! gets its own copy of them (a **libset**, loaded into a `dlmopen`
//! namespace), so stopping it mid-library can only corrupt its own copy.
//! A cancelled function's copy is reset from a snapshot and reused.
//!
//! The layers inside, bottom up (private modules; `docs/layout.md`):
//! - `base/objects.rs`: the loaded objects of a namespace, and which can
//!   be copied; `base/elf.rs`: their relocations and writable segments,
//!   read from disk;
//! - `routing/dispatch.rs`: the stubs that route a call to the current
//!   libset; `routing/trap`: trap-and-redirect for variables (fake
//!   addresses in an inaccessible area, redirected from the SIGSEGV
//!   handler);
//! - `libsets/relink.rs`: rewriting GOT slots (the program's, to the stubs;
//!   the copies', back to the shared libraries and the heap's wrappers);
//!   `libsets/heap.rs`: what the copies allocate, freed when a call is
//!   cancelled; `libsets/libset.rs`: making, leasing, resetting libsets.
//!
//! Everything that is not a chosen library (libc, the loader, the language
//! runtimes) stays shared: copies call the program's own definitions, where
//! linger defers as before. `docs/safety.md` ("gotcha") says exactly which
//! code becomes preemptible.

#![deny(unsafe_op_in_unsafe_fn)]

// The one architecture: a clear error elsewhere, not a build that fails
// deep inside an `asm!` block.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("gotcha runs on x86-64 Linux only: its call stubs, relocation handling and trap-and-redirect are x86-64 code");


// The layers, bottom to top; each imports only from those below it
// (`crates/layout-check/layers.txt`). The API is this file.
mod base;
mod routing;
mod libsets;

pub use routing::dispatch::current as current_libset;
pub use base::arch::{fs_word, swap_fs_word};
pub use base::error::Error;

/// Makes `libset` this thread's current one; returns the previous one.
/// Calls into isolated libraries go to that libset's copies from now on.
/// The first time a thread enters a libset whose copies include libc, its
/// copy's per-thread state is set up (glibc does so only for threads that
/// existed when the copy was loaded and for those its own copy starts).
#[inline]
pub fn set_current_libset(libset: usize) -> usize {
    libsets::libset::thread_ready(libset);
    routing::dispatch::set_current(libset)
}
pub use libsets::libset::{Exhausted, Lease, ResetReport};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Which libraries isolated functions get their own copies of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Every loaded library that can be copied (all but libc, the loader
    /// and the language runtimes).
    All,
    /// These libraries, by name stem (`libpng`, `z`) or path.
    Libraries(Vec<String>),
}

impl Selection {
    /// Parses `LINGER_ISOLATE`'s syntax: `all`, or names separated by commas.
    pub fn parse(s: &str) -> Result<Selection, Error> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("all") {
            return Ok(Selection::All);
        }
        let libs: Vec<String> = s.split(',').map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
        if libs.is_empty() {
            return Err(Error::Unsupported(format!("empty library selection {s:?} (expected `all` or `lib1,lib2`)")));
        }
        Ok(Selection::Libraries(libs))
    }

    /// `LINGER_ISOLATE` from the environment, if set.
    pub fn from_env() -> Option<Result<Selection, Error>> {
        std::env::var("LINGER_ISOLATE").ok().map(|s| Selection::parse(&s))
    }
}

/// What [`isolate`] set up.
#[derive(Clone, Debug)]
pub struct Report {
    /// The isolated libraries (their paths).
    pub libraries: Vec<String>,
    /// Functions of theirs that the rest of the program calls (one stub each).
    pub functions: usize,
    /// GOT slots and function pointers redirected to the stubs.
    pub slots: usize,
    /// Libraries `all` left shared, with why: the program uses their
    /// variables directly (see `docs/safety.md`, "gotcha").
    pub excluded: Vec<(String, String)>,
    /// Variables moved into the executable by `COPY` relocations (built
    /// without `-fpic`) from libraries being isolated: libraries `all`
    /// would have copied stay shared (listed in `excluded`); libc's stay
    /// the program's (`libc_variables`). Listed here, never printed (the
    /// original libgotcha warned on stderr): `linger-run --stats` shows them.
    pub copy_relocated: Vec<String>,
    /// With libc isolated: libc's variables the program uses directly
    /// (`stdout` in a C program, ...). They stay the program's: the
    /// program's code reads and writes its own, the libset's libc its own.
    pub libc_variables: Vec<String>,
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static SETUP: Mutex<Option<(Selection, Report)>> = Mutex::new(None);

/// Isolates the selected libraries: from now on, calls into them go
/// through the dispatcher, so that functions launched isolated use their
/// own copies. Once per process; calling it again with the same selection
/// returns the first report.
pub fn isolate(sel: &Selection) -> Result<Report, Error> {
    let mut g = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((s, r)) = &*g {
        if s == sel {
            return Ok(r.clone());
        }
        return Err(Error::AlreadyIsolating(format!("{s:?}")));
    }
    // A COPY-relocated variable of a named library fails `install` with
    // the variable named; with `all` its library is left shared, and
    // libc's stay the program's: both listed in the report
    // (`Report::copy_relocated`), never printed (the program's stderr is
    // its own; `linger-run --stats` shows them).
    libsets::relink::set_resolver(libsets::libset::resolve);
    let r = libsets::relink::install(sel)?;
    *g = Some((sel.clone(), r.clone()));
    ACTIVE.store(true, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::Release);
    Ok(r)
}


/// Relinks objects the program loaded (`dlopen`) since isolation was set
/// up or last refreshed, so that their calls into isolated libraries go to
/// the current libset too. Cheap when nothing was loaded (one look at the
/// loader's counter). linger calls it at every isolated launch. Returns
/// the slots rewritten.
pub fn refresh() -> Result<usize, Error> {
    libsets::relink::refresh()
}

/// Has [`isolate`] succeeded?
pub fn is_isolating() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// Bumped whenever code appears that a preemption handler must classify
/// (isolation set up, a libset made).
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

pub(crate) fn bump_generation() {
    GENERATION.fetch_add(1, Ordering::Release);
}

/// Code ranges, for the preemption handler's table.
#[derive(Clone, Debug, Default)]
pub struct Code {
    /// Code of the copies: preemptible while their libset's function runs.
    pub preemptible: Vec<(usize, usize)>,
    /// Entry points of gotcha's own functions that must never be stopped
    /// (the heap's wrappers); their extent is in the unwind tables.
    pub deferred_functions: Vec<usize>,
    /// The dispatch stubs: preemptible (they hold no state).
    pub stubs: (usize, usize),
    /// The copies as loaded objects: `dl_iterate_phdr` lists only its
    /// caller's namespace, so a handler that unwinds through a copy learns
    /// of its program headers (and so its unwind tables) here.
    pub objects: Vec<CopyObject>,
}

/// A copy loaded into a libset's namespace.
#[derive(Clone, Debug)]
pub struct CopyObject {
    /// Its file name as the loader has it.
    pub name: String,
    /// Load bias (`dlpi_addr`).
    pub bias: usize,
    /// Its mapped program headers (`dlpi_phdr`, `dlpi_phnum`).
    pub phdr: *const libc::Elf64_Phdr,
    /// How many program headers `phdr` points at.
    pub phnum: usize,
}

// SAFETY: the program headers are mapped read-only for the life of the
// process (libsets are never unloaded).
unsafe impl Send for CopyObject {}
// SAFETY: as above; only read.
unsafe impl Sync for CopyObject {}

/// The code ranges as they are now.
pub fn code() -> Code {
    Code {
        preemptible: libsets::libset::copy_code(),
        objects: libsets::libset::copy_objects(),
        deferred_functions: routing::heap::deferred_functions(),
        stubs: routing::dispatch::stub_range(),
    }
}

/// Counters since start-up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Libsets made (each a `dlmopen` namespace).
    pub libsets: usize,
    /// Of them, leased now.
    pub leased: usize,
    /// Resets after cancellations.
    pub resets: u64,
    /// Heap blocks freed by resets.
    pub blocks_reclaimed: u64,
    /// The latest reset's duration, in nanoseconds.
    pub last_reset_ns: u64,
    /// The bytes the latest reset restored.
    pub last_reset_bytes: usize,
}

/// The counters.
pub fn stats() -> Stats {
    libsets::libset::stats()
}

/// Trap-and-redirect counters since start-up.
#[derive(Clone, Copy, Debug, Default)]
pub struct TrapStats {
    /// Accesses to trapped variables redirected to a libset's copy.
    pub redirects: u64,
    /// Faults on the trap area that could not be redirected (passed on to
    /// the next handler).
    pub rejected: u64,
    /// Variables trapped.
    pub variables: usize,
}

/// The trap-and-redirect counters.
pub fn trap_stats() -> TrapStats {
    let (redirects, rejected, variables) = routing::trap::stats();
    TrapStats { redirects, rejected, variables }
}

/// linger's SIGSEGV handler calls this first: if the fault is an access
/// through a trapped variable's fake address, it points the register at
/// the current libset's copy and returns true (return from the handler:
/// the instruction runs again). False for every other fault, after two
/// loads and a compare. Async-signal-safe. See `docs/safety.md`
/// ("gotcha").
///
/// # Safety
/// `info` and `uc` are what the kernel passed to an `SA_SIGINFO` handler
/// of SIGSEGV on the calling thread (or null).
#[inline]
pub unsafe fn trap_redirect(info: *const libc::siginfo_t, uc: *mut libc::c_void) -> bool {
    // SAFETY: the caller's promise, passed on.
    unsafe { routing::trap::redirect(info, uc) }
}

/// The trap area, `[start, end)`: every fake address of a trapped
/// variable is inside it. None until a variable is trapped.
pub fn trap_area() -> Option<(usize, usize)> {
    routing::trap::area()
}

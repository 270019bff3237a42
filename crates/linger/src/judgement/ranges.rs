//! Where the code that must not be preempted lives.
//!
//! Preempting a thread inside non-reentrant code (malloc holding an arena
//! lock, stdio holding a FILE lock, Rust's stdout `RefCell`, the dynamic
//! loader, the unwinder) and then letting the caller run the same code corrupts
//! or deadlocks it. We cannot interpose every such function, so we describe the
//! code by address: every executable segment of every shared object (libc,
//! ld.so, libgcc_s, libstdc++, ...), plus the functions of the executable whose
//! symbols belong to Rust's `std` or the language runtimes' support code. The table is
//! built once outside any signal handler and then only read (lock-free) by the
//! handler. Objects loaded later are unknown to the table: a PC there counts as
//! "defer" and flags the table for a rebuild at the next launch or resume.
//!
//! Objects unloaded by `dlclose` must leave the table before their code and
//! unwind tables are unmapped: the handler reads both. So every read happens
//! in a *reading section* ([`read`]), marked in a per-thread [`Reader`], and
//! a table is only ever replaced by [`replace`], which unpublishes it, waits
//! until no thread is still in a section that may have found it, and frees
//! it. `dlclose` ([`unloading`]) retires the table before the real call and
//! builds a new one after it; meanwhile handlers find none and defer.

use std::cell::Cell;
use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use object::{Object, ObjectSymbol, SymbolKind};

use crate::base::arch::{SYSCALL, SYSCALL_LEN};
use crate::state::reader::Reader;
use crate::base::config::Config;

type Range = (usize, usize);

pub(crate) struct Table {
    /// This build's number, never reused (a freed table's address may be):
    /// what the handler's caches of decoded steps and walks are keyed on.
    generation: u64,
    /// Sorted, merged ranges of code that must not be interrupted.
    deferred: Vec<Range>,
    /// Sorted executable ranges of every object known when the table was built.
    known: Vec<Range>,
    /// Sorted executable ranges with the unwind tables of their object.
    unwind: Vec<(Range, crate::judgement::eh_frame::Object)>,
    /// Executable ranges of the dynamic loader (no return traps there).
    loader: Vec<Range>,
    /// Sorted, merged code of deferred functions inlined into others
    /// (`inlined.rs`): deferred, but with no frame of their own to trap.
    inlined: Vec<Range>,
    /// Sorted, merged code of std's deferred functions that hold nothing
    /// while they wait ([`STD_WAITS`]): a subset of `deferred`.
    std_waits: Vec<Range>,
    /// Like `inlined`, for the deferred functions that are not among
    /// [`STD_WAITS`]: where `inlined` holds only std's waits, a frame is
    /// inside one of them.
    inlined_not_waits: Vec<Range>,
}

static TABLE: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());
/// The published table's generation, 0 while there is none: what a
/// memoised walk is checked against without entering a reading section.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);
static STALE: AtomicBool = AtomicBool::new(false);
/// `gotcha::generation()` when the published table was built.
static GOTCHA_GENERATION: AtomicU64 = AtomicU64::new(0);
static BUILD: Mutex<()> = Mutex::new(());
/// `dlclose` calls in progress, on any thread: no table is published until
/// the last one is over (it would describe code about to be unmapped).
static CLOSING: AtomicUsize = AtomicUsize::new(0);
/// Every thread's [`Reader`] (a list; nodes are never freed).
static READERS: AtomicPtr<Reader> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// `dlclose` calls in progress on this thread (a library's destructor
    /// may unload another one), for a forked child (see [`after_fork`]).
    static CLOSING_HERE: Cell<usize> = const { Cell::new(0) };
    /// Gives this thread's [`Reader`] back when the thread exits.
    static OWNER: ReaderOwner = const { ReaderOwner(Cell::new(None)) };
}

struct ReaderOwner(Cell<Option<&'static Reader>>);

impl Drop for ReaderOwner {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            crate::state::thread::ts().reader.set(None); // from here on its handler defers
            r.taken.store(false, Ordering::Release);
        }
    }
}

/// Gives this thread a [`Reader`] (outside any handler). Fails only when
/// memory runs out.
pub(crate) fn prepare_thread() -> Result<(), crate::Error> {
    let t = crate::state::thread::ts();
    if t.reader.get().is_some() {
        return Ok(());
    }
    let r = claim().ok_or(crate::Error::OutOfMemory)?;
    if OWNER.try_with(|o| o.0.set(Some(r))).is_err() {
        r.taken.store(false, Ordering::Release); // the thread is exiting
        return Ok(());
    }
    t.reader.set(Some(r));
    Ok(())
}

/// A free node of the list, or a new one.
fn claim() -> Option<&'static Reader> {
    let mut p = READERS.load(Ordering::Acquire);
    // SAFETY: nodes are leaked once published, never freed.
    while let Some(r) = unsafe { p.as_ref() } {
        if r.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return Some(r);
        }
        p = r.next.load(Ordering::Acquire);
    }
    let mut v = Vec::new();
    v.try_reserve_exact(1).ok()?;
    v.push(Reader { seq: AtomicU64::new(0), taken: AtomicBool::new(true), next: AtomicPtr::new(std::ptr::null_mut()) });
    let r: &'static Reader = &Vec::leak(v)[0];
    let mut head = READERS.load(Ordering::Relaxed);
    loop {
        r.next.store(head, Ordering::Relaxed);
        match READERS.compare_exchange_weak(head, r as *const Reader as *mut Reader, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Some(r),
            Err(h) => head = h,
        }
    }
}

/// Every [`Reader`] ever made.
fn readers() -> impl Iterator<Item = &'static Reader> {
    // SAFETY: nodes are leaked once published, never freed.
    let first = unsafe { READERS.load(Ordering::Acquire).as_ref() };
    // SAFETY: as above.
    std::iter::successors(first, |r| unsafe { r.next.load(Ordering::Acquire).as_ref() })
}

/// A reading section: the table it found, valid until the section ends.
/// Async-signal-safe; never held across a switch out of the function.
pub(crate) struct Reading {
    table: NonNull<Table>,
    /// This thread's reader and the number that ends the section, unless it
    /// is nested in another section of this thread.
    end: Option<(&'static Reader, u64)>,
}

impl std::ops::Deref for Reading {
    type Target = Table;
    fn deref(&self) -> &Table {
        // SAFETY: a table is freed only by `retire`, after every section
        // that may have found it has ended (this one has not).
        unsafe { self.table.as_ref() }
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        end_section(self.end);
    }
}

fn end_section(end: Option<(&'static Reader, u64)>) {
    if let Some((r, end)) = end {
        r.seq.store(end, Ordering::Release);
    }
}

/// Opens a reading section on this thread and returns the current table,
/// or None if there is none (not built yet, or retired by a `dlclose`
/// under way: the caller defers without reading anything), or the thread
/// has no reader (it never launched, or is exiting). Async-signal-safe.
#[inline]
pub(crate) fn read() -> Option<Reading> {
    let r = crate::state::thread::ts().reader.get()?;
    let s = r.seq.load(Ordering::Relaxed);
    let end = if s & 1 == 0 {
        // The swap orders the mark before the load of the table (against
        // `retire`'s unpublishing before its look at the marks).
        r.seq.swap(s + 1, Ordering::SeqCst);
        Some((r, s + 2))
    } else {
        None // inside a section this one interrupted: that one covers it
    };
    match NonNull::new(TABLE.load(Ordering::SeqCst)) {
        Some(table) => Some(Reading { table, end }),
        None => {
            end_section(end);
            None
        }
    }
}

/// Is this thread in a reading section? (For a handler that may be
/// abandoned half-way, see [`abandon_reading`].)
pub(crate) fn reading() -> bool {
    crate::state::thread::ts().reader.get().is_some_and(|r| r.seq.load(Ordering::Relaxed) & 1 == 1)
}

/// Ends this thread's reading section without the guard, for a handler
/// abandoned on a stack overflow (its frames are never returned to).
pub(crate) fn abandon_reading() {
    if let Some(r) = crate::state::thread::ts().reader.get() {
        let s = r.seq.load(Ordering::Relaxed);
        if s & 1 == 1 {
            r.seq.store(s + 1, Ordering::Release);
        }
    }
}

/// Waits until no other thread is in a reading section that began before
/// this call. Sections last microseconds (a handler's walk), unless their
/// thread is descheduled: yield meanwhile. This thread's own is skipped:
/// it can only be open here if `dlclose` was called from a signal handler
/// that interrupted it, which `dlclose` does not allow.
fn wait_for_readers() {
    let me = crate::state::thread::ts().reader.get().map_or(std::ptr::null(), |r| r as *const Reader);
    for r in readers().filter(|&r| !std::ptr::eq(r, me)) {
        let s = r.seq.load(Ordering::SeqCst);
        if s & 1 == 1 {
            while r.seq.load(Ordering::Acquire) == s {
                std::thread::yield_now();
            }
        }
    }
}

/// Publishes `new` (or nothing) in place of the current table, waits until
/// no handler can still be reading the old one, and frees it. True if
/// there was one. Called with the build lock held, outside any section.
fn replace(new: Option<Box<Table>>) -> bool {
    GENERATION.store(0, Ordering::SeqCst);
    let gen = new.as_ref().map_or(0, |t| t.generation);
    let old = TABLE.swap(new.map_or(std::ptr::null_mut(), Box::into_raw), Ordering::SeqCst);
    GENERATION.store(gen, Ordering::SeqCst);
    if old.is_null() {
        return false;
    }
    wait_for_readers();
    // SAFETY: published by `Box::into_raw` above (an earlier call), and
    // unpublished now: no section can find it any more, and every one that
    // could have has ended.
    drop(unsafe { Box::from_raw(old) });
    true
}

/// Retires the current table (there is none until the next build). True
/// if there was one.
fn retire() -> bool {
    replace(None)
}

/// `dlclose`'s part: runs `close` (the real call) with no table published,
/// so that no handler reads the code or unwind tables it unmaps, or finds
/// another object mapped there later in their place; then builds the table
/// again (outside any handler), so that functions running on other threads
/// do not stay deferred until someone's next launch or resume. (Only if the
/// runtime had a table: before it starts, the configuration must stay open
/// to `Config::install`.)
pub(crate) fn unloading<R>(close: impl FnOnce() -> R) -> R {
    CLOSING.fetch_add(1, Ordering::SeqCst);
    let _ = CLOSING_HERE.try_with(|c| c.set(c.get() + 1));
    let had = {
        let _g = lock_build();
        retire()
    };
    let r = close();
    let _ = CLOSING_HERE.try_with(|c| c.set(c.get() - 1));
    CLOSING.fetch_sub(1, Ordering::SeqCst);
    if had || stale() {
        if let Ok(cfg) = crate::base::config::current() {
            ensure(cfg);
        }
    }
    r
}

/// In a forked child, which has only the forking thread: no other thread is
/// reading or unloading there, whatever their marks said at the fork.
pub(crate) fn after_fork() {
    let me = crate::state::thread::ts().reader.get().map_or(std::ptr::null(), |r| r as *const Reader);
    for r in readers().filter(|&r| !std::ptr::eq(r, me)) {
        let s = r.seq.load(Ordering::Relaxed);
        r.seq.store(s + (s & 1), Ordering::Relaxed);
        r.taken.store(false, Ordering::Relaxed);
    }
    let here = CLOSING_HERE.try_with(Cell::get).unwrap_or(0);
    CLOSING.store(here, Ordering::SeqCst);
    if TABLE.load(Ordering::Acquire).is_null() {
        STALE.store(true, Ordering::Relaxed); // retired by a `dlclose` of another thread
    }
}

fn contains(ranges: &[Range], a: usize) -> bool {
    let i = ranges.partition_point(|r| r.1 <= a);
    i < ranges.len() && ranges[i].0 <= a
}

fn merge(mut v: Vec<Range>) -> Vec<Range> {
    v.sort_unstable();
    let mut out: Vec<Range> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(last) if r.0 <= last.1 => last.1 = last.1.max(r.1),
            _ => out.push(r),
        }
    }
    out
}

impl Table {
    /// True if `pc` lies in code that must not be interrupted. Async-signal-safe.
    pub(crate) fn must_defer(&self, pc: usize) -> bool {
        if contains(&self.deferred, pc) {
            return true;
        }
        if !contains(&self.known, pc) {
            // The return trap's stubs: runtime code that a rebuild would
            // not learn about either (two instructions; never stopped in).
            if crate::judgement::return_trap::is_stub(pc) {
                return true;
            }
            // Code loaded after the table was built (or JIT code): be careful.
            STALE.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// True if `pc` is in code that must not be interrupted or in code the
    /// table does not know (for frames found by unwinding). Async-signal-safe.
    pub(crate) fn is_deferred(&self, pc: usize) -> bool {
        self.must_defer(pc)
    }

    /// Its build's number, never reused: the key of what is derived from it.
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The unwind tables covering `pc`, if its object has them.
    pub(crate) fn unwind_object(&self, pc: usize) -> Option<&crate::judgement::eh_frame::Object> {
        let i = self.unwind.partition_point(|r| r.0 .1 <= pc);
        self.unwind.get(i).filter(|r| r.0 .0 <= pc).map(|r| &r.1)
    }

    /// True if `pc` lies in the dynamic loader's code.
    pub(crate) fn in_loader(&self, pc: usize) -> bool {
        contains(&self.loader, pc)
    }

    /// True if `pc` lies in an executable segment known when the table was built.
    pub(crate) fn is_known(&self, pc: usize) -> bool {
        contains(&self.known, pc)
    }

    /// True if `addr` is in deferred code (a function's own or inlined) and
    /// could be a return address there.
    #[inline]
    pub(crate) fn deferred_return_address(&self, addr: usize) -> bool {
        return_address_in(&self.deferred, addr, true) || return_address_in(&self.inlined, addr, false)
    }

    /// True if `at` lies in the code of a deferred function inlined into
    /// another (`inlined.rs`). Async-signal-safe.
    #[inline]
    pub(crate) fn in_inlined(&self, at: usize) -> bool {
        contains(&self.inlined, at)
    }

    /// True if `at` lies in one of std's deferred functions that hold
    /// nothing while they wait ([`STD_WAITS`]), or in code of the program's
    /// where only such functions are inlined (`rx.recv()` inlined into the
    /// program's function). Async-signal-safe.
    #[inline]
    pub(crate) fn in_std_wait(&self, at: usize) -> bool {
        contains(&self.std_waits, at) || (!contains(&self.deferred, at) && contains(&self.inlined, at) && !contains(&self.inlined_not_waits, at))
    }

}

/// Is `addr` in `ranges` (sorted, merged code ranges of known objects), just
/// after a call instruction? `segments`: a range may start a mapped segment
/// (whole objects' code); otherwise each lies inside a function's code.
#[inline]
fn return_address_in(ranges: &[Range], addr: usize, segments: bool) -> bool {
    let (Some(first), Some(last)) = (ranges.first(), ranges.last()) else {
        return false;
    };
    if addr <= first.0 || addr > last.1 {
        return false;
    }
    let i = ranges.partition_point(|r| r.1 < addr);
    if i >= ranges.len() || ranges[i].0 >= addr {
        return false;
    }
    let start = ranges[i].0;
    if segments && addr - start < 8 {
        // Too close to the segment start to decode safely: assume a call.
        return true;
    }
    // SAFETY: [addr-7, addr) lies inside a mapped executable segment: a
    // segment range is 8 bytes in at least, and an inlined instance lies
    // inside its caller's code, which `.text` (never a segment's first
    // bytes: the PLT and `.init` come before it) precedes with more code.
    let b = unsafe { std::slice::from_raw_parts((addr - 7) as *const u8, 7) };
    follows_call(b)
}

/// Do the 7 bytes before a return address end with a call instruction?
fn follows_call(b: &[u8]) -> bool {
    // call rel32
    b[2] == 0xE8
        // call [rip+disp32] / call [reg+disp32]
        || (b[1] == 0xFF && (b[2] & 0x38) == 0x10)
        || (b[0] == 0xFF && (b[1] & 0x38) == 0x10)
        // call reg / call [reg] / call [reg+disp8] (with or without REX prefix)
        || (b[5] == 0xFF && (b[6] & 0x38) == 0x10)
        || (b[4] == 0xFF && (b[5] & 0x38) == 0x10)
        || (b[3] == 0xFF && (b[4] & 0x38) == 0x10)
}

/// Is `pc` at (or just after) a `syscall` instruction? Used for blocking calls
/// interrupted by the timer: SA_RESTART leaves the PC on the instruction, calls
/// that fail with EINTR leave it just after.
pub(crate) fn at_syscall(pc: usize) -> bool {
    // SAFETY: pc is an interrupted instruction address inside a known
    // executable segment (checked by the caller), and a syscall instruction
    // never starts a segment.
    unsafe {
        let here = std::slice::from_raw_parts(pc as *const u8, SYSCALL_LEN);
        let before = std::slice::from_raw_parts((pc - SYSCALL_LEN) as *const u8, SYSCALL_LEN);
        here == SYSCALL || before == SYSCALL
    }
}

/// Is `pc` exactly at a `syscall` instruction (a call about to start, or one
/// the kernel rewound to restart it)?
pub(crate) fn at_syscall_instruction(pc: usize) -> bool {
    // SAFETY: as in `at_syscall`.
    unsafe { std::slice::from_raw_parts(pc as *const u8, SYSCALL_LEN) == SYSCALL }
}

/// The published table's generation, or 0 if there is none. Only compared:
/// a walk memoised with this generation still holds. Async-signal-safe.
#[inline]
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Has the handler seen code the table does not know (a `dlopen` since it
/// was built)? One relaxed load, for the resume path.
#[inline]
pub(crate) fn stale() -> bool {
    STALE.load(Ordering::Relaxed)
}

/// The build lock (also taken around `fork`, see `crate::runtime::fork`).
pub(crate) fn lock_build() -> std::sync::MutexGuard<'static, ()> {
    BUILD.lock().unwrap_or_else(|e| e.into_inner())
}

/// New code exists (libset copies, dispatch stubs): rebuild the table at
/// the next launch or resume.
pub(crate) fn note_new_code() {
    STALE.store(true, Ordering::Relaxed);
}

/// The gotcha generation the table was built for.
pub(crate) fn built_for_gotcha() -> u64 {
    GOTCHA_GENERATION.load(Ordering::Acquire)
}

/// Builds the table on first use, and again after new code was seen. Not
/// while a `dlclose` is under way: the last one to finish builds it.
pub(crate) fn ensure(cfg: &Config) {
    if !TABLE.load(Ordering::Acquire).is_null() && !STALE.load(Ordering::Relaxed) {
        return;
    }
    // Not stopped while it holds the lock (a `dlclose` by the function's
    // caller would wait for it forever), nor with the old table retired.
    let _scope = crate::state::guard::Scope::enter_from_c();
    let _g = lock_build();
    if !TABLE.load(Ordering::Acquire).is_null() && !STALE.load(Ordering::Relaxed) {
        return;
    }
    if CLOSING.load(Ordering::SeqCst) > 0 {
        STALE.store(true, Ordering::Relaxed);
        return;
    }
    STALE.store(false, Ordering::Relaxed);
    let gen = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
    replace(Some(Box::new(build(cfg, gen))));
    crate::machine::flow::look_up(); // a C++ runtime may have come with the new code
}

struct Object_ {
    name: String,
    bias: usize,
    exec: Vec<Range>,
    is_main: bool,
    unwind: Option<crate::judgement::eh_frame::Object>,
}

fn loaded_objects(isolation: &gotcha::Code) -> Vec<Object_> {
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the loader passes a valid info for the duration of the
        // callback, and `data` is the Vec we passed in.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<Object_>)) };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: non-null dlpi_name is a NUL-terminated string.
            unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
        };
        let mut exec = Vec::new();
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
                exec.push((start, start + ph.p_memsz as usize));
            }
        }
        let is_main = out.is_empty();
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let text = exec.first().copied().unwrap_or((0, 0));
        let unwind = crate::judgement::eh_frame::object_from_phdrs(info.dlpi_addr as usize, phdrs, text);
        out.push(Object_ { name, bias: info.dlpi_addr as usize, exec, is_main, unwind });
        0
    }
    let mut v: Vec<Object_> = Vec::new();
    // SAFETY: callback matches the expected signature and only touches `v`.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut v as *mut Vec<Object_> as *mut libc::c_void) };
    // `dl_iterate_phdr` lists only the program's own namespace: the copies
    // in libsets come from gotcha.
    for c in isolation.objects.iter() {
        // SAFETY: gotcha's copies stay loaded, their headers mapped.
        let phdrs = unsafe { std::slice::from_raw_parts(c.phdr, c.phnum) };
        let exec: Vec<Range> = phdrs
            .iter()
            .filter(|ph| ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0)
            .map(|ph| (c.bias + ph.p_vaddr as usize, c.bias + (ph.p_vaddr + ph.p_memsz) as usize))
            .collect();
        let text = exec.first().copied().unwrap_or((0, 0));
        let unwind = crate::judgement::eh_frame::object_from_phdrs(c.bias, phdrs, text);
        v.push(Object_ { name: c.name.clone(), bias: c.bias, exec, is_main: false, unwind });
    }
    v
}

#[cfg(test)]
fn symbol_must_defer(name: &str, cfg: &Config) -> bool {
    symbol_must_defer_with(name, cfg, &[])
}

/// Names (demangled) of executable functions that must not be preempted,
/// with the path rules of libraries built on linger.
fn symbol_must_defer_with(name: &str, cfg: &Config, rules: &[(String, Verdict)]) -> bool {
    if cfg.defer_symbols.iter().any(|p| name.contains(p.as_str())) {
        return true;
    }
    // `__rust_try`: the shim rustc makes for `catch_unwind` when it is not
    // inlined (debug builds) only calls the closure, which is the program's.
    if RUNTIME.iter().any(|p| name.starts_with(p)) && !name.starts_with("__rust_try") {
        return true;
    }
    let (lead, at) = self_path(name);
    // Rules of the libraries built on linger (see `defer_paths`).
    if let Some(v) = longest_prefix(rules.iter().map(|(p, v)| (p.as_str(), *v)), &lead) {
        return v == Defer;
    }
    if !LIBRARY.iter().any(|c| lead.starts_with(c)) {
        return false; // the program's own code (or another crate's)
    }
    if lead.starts_with("std::") && std_verdict(&lead) == Defer {
        return true;
    }
    // Library code instantiated for a deferred part of `std`: the stdout
    // `BufWriter<StdoutRaw>`, `drop_in_place<StdoutLock>`, `Arc<mpmc::..>`.
    // (Symbols of std's own crate name their type arguments; the program's
    // instances of std generics name none, and hold its own data.)
    std_paths(name).any(|(i, p)| i != at && std_verdict(p) == Defer)
}

/// Path rules added by libraries built on linger ([`crate::defer_paths`]),
/// and how many times they changed.
static PATH_RULES: Mutex<(u64, Vec<(String, Verdict)>)> = Mutex::new((0, Vec::new()));

/// Adds path rules; the table is rebuilt at the next launch or resume.
pub(crate) fn add_path_rules(rules: &[(&str, bool)]) {
    let mut r = PATH_RULES.lock().unwrap_or_else(|e| e.into_inner());
    let mut changed = false;
    for &(p, defer) in rules {
        let v = if defer { Defer } else { Preempt };
        match r.1.iter_mut().find(|(q, _)| q == p) {
            Some((_, w)) if *w == v => {}
            Some((_, w)) => {
                *w = v;
                changed = true;
            }
            None => {
                r.1.push((p.to_owned(), v));
                changed = true;
            }
        }
    }
    if changed {
        r.0 += 1;
        drop(r);
        STALE.store(true, Ordering::Relaxed);
    }
}

/// Symbols of the language runtimes' support code, by name prefix: Rust's
/// allocator and panic shims (`__rustc::__rust_alloc`, `__rdl_*`, `__rg_*`
/// of a `#[global_allocator]`, `rust_begin_unwind`, `__rust_start_panic`),
/// the unwinders and personality routines, C++'s exception runtime, and a
/// static libc's internals.
const RUNTIME: &[&str] = &[
    "__rustc::", "__rust_", "__rdl_", "__rg_", "rust_begin_unwind", "rust_panic", "rust_eh_personality",
    "panic_unwind::", "panic_abort::", "_Unwind_", "__gcc_personality", "__cxa_", "__gxx_personality", "__libc_",
    "__pthread_",
];

/// Crates whose code is judged by [`STD`]: `core` and `alloc` hold no state
/// of their own, but their generics instantiated for std's internals do.
const LIBRARY: &[&str] = &["std::", "core::", "alloc::"];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Verdict {
    Defer,
    Preempt,
}
use Verdict::{Defer, Preempt};

/// What may be preempted in Rust's `std`, by path prefix; the longest
/// matching prefix decides. A frame of a deferred part anywhere on the call
/// chain defers the deadline, so an entry names the functions that are on the
/// stack while the state is held, and everything they call (user code
/// included: a `Display` impl under `println!`) is covered. The question for
/// each part: while a function is stopped there, could its caller, running
/// on the same thread, reach the same state? Locks of the program's own (a
/// `Mutex` it shares with the caller) stay the program's business, as in C.
/// The reasoning, module by module, is in `docs/safety.md` ("Rust's std").
const STD: &[(&str, Verdict)] = &[
    // Anything not reviewed below (a newer std's modules): defer.
    ("std::", Defer),
    // Pure code, or code touching only what the caller passed in.
    ("std::ascii::", Preempt),
    ("std::bstr::", Preempt),
    ("std::collections::", Preempt),
    ("std::error::", Preempt),
    ("std::f16::", Preempt),
    ("std::f32::", Preempt),
    ("std::f64::", Preempt),
    ("std::f128::", Preempt),
    ("std::ffi::", Preempt),
    ("std::hash::", Preempt),
    ("std::num::", Preempt),
    ("std::path::", Preempt),
    ("std::pat::", Preempt),
    ("std::time::", Preempt),
    ("std::arch::", Preempt),
    ("std::simd::", Preempt),
    ("std::task::", Preempt),
    // I/O on the program's own descriptors: their state is the kernel's.
    ("std::fs::", Preempt),
    ("std::io::", Preempt),
    ("std::net::", Preempt),
    ("std::os::", Preempt),
    ("std::process::", Preempt),
    ("std::panic::", Preempt),
    // stdin/stdout/stderr: a process-wide ReentrantLock<RefCell<..>> whose
    // owner is this thread, so the caller would re-enter it mid-line or find
    // the RefCell borrowed; their OnceLock initialisation; output capture.
    ("std::io::stdio::", Defer),
    ("std::sys::stdio::", Defer),
    ("std::sync::reentrant_lock::", Defer),
    // The environment: ENV_LOCK, held across getenv and Command::spawn.
    ("std::env::", Defer),
    ("std::sys::env::", Defer),
    ("std::sys::args::", Defer),
    // The allocator: the error hook, and a custom allocator's state below
    // `__rust_alloc` (libc's malloc is deferred as a shared object).
    ("std::alloc::", Defer),
    ("std::sys::alloc::", Defer),
    // Panics: the hook RwLock, the global and per-thread panic counts,
    // payload boxing; and backtraces: a global Mutex and symbol caches.
    ("std::panicking::", Defer),
    ("std::panicking::catch_unwind", Preempt), // catch_unwind runs the closure
    ("std::panicking::catch_unwind::cleanup", Defer), // decrements the panic count
    ("std::backtrace::", Defer),
    ("std::backtrace_rs::", Defer),
    ("std::sys::backtrace::", Defer),
    ("std::sys::backtrace::__rust_begin_short_backtrace", Preempt), // marks a thread's main
    ("std::sys::personality::", Defer),
    // Start-up and exit: `init` sets up per-thread state, `cleanup` flushes
    // stdout under a Once; main itself runs under lang_start (linger-run).
    ("std::rt::", Defer),
    ("std::rt::lang_start", Preempt),
    ("std::sys::exit::", Defer),
    // Threads: the current-thread handle (lazily set per thread), spawn
    // hooks (a thread-local taken and put back), the parker (a per-thread
    // state word the caller's park/unpark would clobber), ids, main thread.
    ("std::thread::", Defer),
    ("std::thread::local::", Preempt), // LocalKey::with: runs the closure
    ("std::thread::scoped::", Preempt), // thread::scope: runs the closure, then parks (deferred)
    ("std::thread::functions::", Preempt), // sleep, yield_now, panicking, available_parallelism
    ("std::thread::functions::park", Defer),
    ("std::thread::join_handle::", Preempt), // join: pthread_join, in libc
    ("std::sys::thread::", Defer),
    ("std::sys::thread::unix::sleep", Preempt), // nanosleep loops (interposed)
    ("std::sys::thread::unix::yield_now", Preempt),
    ("std::sys::thread_local::", Defer), // lazy init, destructor lists, guards
    // Synchronisation: the program's own Mutex/RwLock/Condvar/Barrier stay
    // preemptible (waiting for a lock holds nothing); a Once initialiser
    // does not (a caller touching the same Once, LazyLock or OnceLock, std's
    // own stdout included, would wait for itself forever on this thread).
    ("std::sync::", Preempt),
    ("std::sys::sync::", Preempt),
    ("std::sys::sync::once::", Defer),
    ("std::sys::sync::thread_parking::", Defer),
    // Channels: slots half written and wakers behind an inner Mutex, which
    // the caller reaches through the other end of the same channel.
    ("std::sync::mpmc::", Defer),
    ("std::sync::mpsc::", Defer),
    ("std::sync::oneshot::", Defer),
    // The system layer under the above.
    ("std::sys::", Defer),
    ("std::sys::cmath::", Preempt),
    ("std::sys::env_consts::", Preempt),
    ("std::sys::fd::", Preempt),
    ("std::sys::fs::", Preempt),
    ("std::sys::helpers::", Preempt),
    ("std::sys::io::", Preempt),
    ("std::sys::net::", Preempt),
    ("std::sys::os_str::", Preempt),
    ("std::sys::path::", Preempt),
    ("std::sys::pipe::", Preempt),
    ("std::sys::time::", Preempt),
    ("std::sys::pal::", Preempt), // cvt_r, futex calls, time, weak symbols, pidfd waits
    ("std::sys::pal::unix::stack_overflow::", Defer), // guard-page table under a lock
    ("std::sys::pal::unix::thread_parking", Defer),
    ("std::sys::random::", Defer), // the fallback device's OnceLock
    ("std::sys::process::", Defer), // spawn holds ENV_LOCK around fork/exec
    ("std::sys::process::output", Preempt), // spawn (deferred), then reads and waits
    ("std::sys::process::unix::common::read_output", Preempt),
    ("std::sys::process::unix::unix::Process::wait", Preempt),
    ("std::sys::process::unix::unix::Process::try_wait", Preempt),
];

/// Deferred parts of `std` that hold nothing while they wait: a deadline
/// may stop a function blocked in a futex wait under them, when the
/// function has its own `std::thread::current()` (`Builder::stop_in_std_waits`;
/// turquoise's green threads). Read in the std of the toolchain this is built
/// with (1.95); `docs/safety.md` ("Waits in Rust's std") gives the argument
/// for each.
/// - the parker (`thread::park`, `Thread::park`, `park_timeout`): one state
///   word of the *current* `Thread`; with a `Thread` of its own, no other
///   function of the OS thread parks or unparks through it by accident;
/// - channels (`mpmc`, `mpsc`): a blocked operation registers its `Context`
///   (the function's own, from its own thread-local) under the channel's
///   waker lock, releases the lock, then parks; the waker lock is only held
///   for short sections that never park;
/// - `Once::wait` (`OnceLock::wait`): waits for another thread's
///   initialiser to complete, and runs none (`Once::call`, which may run
///   the program's initialiser under it, is not here);
/// - `JoinHandle::join`'s layers above `pthread_join` (for the futex rule of
///   `futex.rs`, whose entry points include `pthread_join`): they call it and
///   then read the joined thread's result.
const STD_WAITS: &[&str] = &[
    "std::thread::functions::park",
    "std::thread::thread::Thread::park",
    "std::sys::sync::thread_parking::",
    "std::sys::pal::unix::thread_parking",
    "std::sync::mpmc::",
    "std::sync::mpsc::",
    "std::sys::sync::once::futex::Once::wait",
    "std::thread::lifecycle::JoinInner",
    "std::sys::thread::unix::Thread::join",
];

/// Is the (demangled) symbol `name` one of [`STD_WAITS`]? Only asked of
/// symbols that are deferred: true when every part of std that makes it
/// deferred (its own path, or a type argument's, as in
/// `LocalKey<Cell<Option<mpmc::context::Context>>>::try_with`) is one.
fn symbol_is_std_wait(name: &str) -> bool {
    let is_wait = |p: &str| STD_WAITS.iter().any(|w| p.starts_with(w));
    let (lead, at) = self_path(name);
    let mut reasons = std_paths(name)
        .filter(|&(i, p)| i != at && std_verdict(p) == Defer)
        .map(|(_, p)| p)
        .chain((lead.starts_with("std::") && std_verdict(&lead) == Defer).then_some(&*lead))
        .peekable();
    reasons.peek().is_some() && reasons.all(is_wait)
}

/// The verdict of the longest [`STD`] prefix of `path`.
fn std_verdict(path: &str) -> Verdict {
    longest_prefix(STD.iter().copied(), path).unwrap_or(Preempt)
}

/// The verdict of the longest of `rules`' prefixes that `path` starts with.
fn longest_prefix<'a>(rules: impl Iterator<Item = (&'a str, Verdict)>, path: &str) -> Option<Verdict> {
    rules.filter(|(p, _)| path.starts_with(p)).max_by_key(|(p, _)| p.len()).map(|e| e.1)
}

/// The path a symbol belongs to, and where its self type starts in `name`:
/// `<std::fs::File as std::io::Read>::read` is `std::fs::File::read`,
/// `<&Stdout as Write>::write` is `Stdout::write`.
fn self_path(name: &str) -> (std::borrow::Cow<'_, str>, usize) {
    let Some(inner) = name.strip_prefix('<') else { return (name.into(), 0) };
    // The matching '>' of the qualified self type.
    let mut depth = 1usize;
    let close = inner.char_indices().find_map(|(i, c)| {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ => {}
        }
        (depth == 0).then_some(i)
    });
    let Some(close) = close else { return (name.into(), 0) };
    let head = &inner[..close];
    let mut ty = head.split(" as ").next().unwrap_or(head);
    for sigil in ["&mut ", "&", "*const ", "*mut ", "dyn "] {
        ty = ty.strip_prefix(sigil).unwrap_or(ty);
    }
    let at = ty.as_ptr() as usize - name.as_ptr() as usize; // `ty` is a slice of `name`
    (format!("{ty}{}", &inner[close + 1..]).into(), at)
}

/// Every `std::` path mentioned in a symbol name (type and trait arguments).
fn std_paths(name: &str) -> impl Iterator<Item = (usize, &str)> {
    name.match_indices("std::").filter_map(move |(i, _)| {
        let before = name[..i].chars().next_back();
        (!before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')).then(|| (i, &name[i..]))
    })
}

/// The executable's deferred functions, by symbol, and the code of
/// deferred functions inlined into others (from the DWARF inline records).
/// Also for the shared object linger itself is linked into (liblinger.so,
/// libturquoise.so), whose Rust code (std, and what libraries built on
/// linger name with `defer_paths`) is judged by symbol as the executable's.
fn symbol_ranges(path: &str, bias: usize, cfg: &Config, rules: &[(String, Verdict)]) -> SymbolRangeSets {
    let Some(data) = MappedFile::open(path) else { return SymbolRangeSets::default() };
    let Ok(file) = object::File::parse(data.bytes()) else { return SymbolRangeSets::default() };
    let mut out = Vec::new();
    let mut waits = Vec::new();
    let mut scan = |syms: &mut dyn Iterator<Item = object::Symbol<'_, '_>>, out: &mut Vec<Range>| {
        for s in syms {
            if s.kind() != SymbolKind::Text || s.size() == 0 || !s.is_definition() {
                continue;
            }
            let Ok(raw) = s.name() else { continue };
            let name = match rustc_demangle::try_demangle(raw) {
                Ok(d) => format!("{d:#}"),
                Err(_) => raw.to_owned(),
            };
            if symbol_must_defer_with(&name, cfg, rules) {
                let a = bias + s.address() as usize;
                out.push((a, a + s.size() as usize));
                if symbol_is_std_wait(&name) {
                    waits.push((a, a + s.size() as usize));
                }
            }
        }
    };
    scan(&mut file.symbols(), &mut out);
    if out.is_empty() {
        scan(&mut file.dynamic_symbols(), &mut out);
    }
    // Only for the rules of libraries built on linger: reading the debug
    // info costs tens of milliseconds in a large binary, and std's deferred
    // parts hold their state in functions that stay out of line (see
    // docs/safety.md, "Rust's std").
    let (inlined, inlined_not_waits) = if rules.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        use crate::judgement::inlined::Class;
        crate::judgement::inlined::deferred_ranges(&file, bias, &mut |name| match symbol_must_defer_with(name, cfg, rules) {
            false => Class::Free,
            true if symbol_is_std_wait(name) => Class::Wait,
            true => Class::Deferred,
        })
    };
    SymbolRangeSets { deferred: out, inlined, std_waits: waits, inlined_not_waits }
}

/// What [`symbol_ranges`] finds in one object's symbols.
#[derive(Default)]
struct SymbolRangeSets {
    deferred: Vec<Range>,
    inlined: Vec<Range>,
    std_waits: Vec<Range>,
    inlined_not_waits: Vec<Range>,
}

/// A file mapped read-only, for [`symbol_ranges`]: not read into a
/// buffer. Under valgrind's memcheck a `read` into a large buffer
/// never completes while the program has a fast interval timer of its own:
/// each attempt costs memcheck time in proportion to the buffer, a signal
/// that came meanwhile is delivered first, and the call starts over. With a
/// SIGALRM every 100 us, 128 KB reads went through and 192 KB ones never
/// did (`--tool=none` read 10 MB at once); linger's own shared object
/// (9.8 MB) read so in test_signal_handler_calls was tried 1,855 times in
/// 10 s. `mmap` has no buffer to check.
struct MappedFile {
    addr: *mut libc::c_void,
    len: usize,
}

impl MappedFile {
    fn open(path: &str) -> Option<MappedFile> {
        let file = std::fs::File::open(path).ok()?;
        let len = usize::try_from(file.metadata().ok()?.len()).ok().filter(|&l| l > 0)?;
        // SAFETY: a fresh private read-only mapping of an open descriptor;
        // nothing else is placed at the address the kernel picks. (A file
        // truncated while mapped would fault on access, as the loaded code
        // of the same object would: the executable and the object linger is
        // linked into are both in use by this process.)
        let addr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, std::os::fd::AsRawFd::as_raw_fd(&file), 0)
        };
        (addr != libc::MAP_FAILED).then_some(MappedFile { addr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `len` readable bytes are mapped at `addr` until `drop`.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer borrowed (`bytes` borrows self).
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

type SymbolRanges = std::sync::Arc<SymbolRangeSets>;

/// [`symbol_ranges`] of the executable (`main`) or of linger's own shared
/// object, read once: the files never change, and reading and demangling
/// their symbols takes milliseconds at every rebuild. Again only when a
/// library built on linger added path rules.
fn cached_symbol_ranges(path: &str, main: bool, bias: usize, cfg: &Config) -> SymbolRanges {
    static CACHE: Mutex<[Option<(u64, SymbolRanges)>; 2]> = Mutex::new([None, None]);
    let (version, rules) = {
        let r = PATH_RULES.lock().unwrap_or_else(|e| e.into_inner());
        (r.0, r.1.clone())
    };
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let slot = &mut cache[usize::from(!main)];
    match slot {
        Some((v, ranges)) if *v == version => ranges.clone(),
        _ => {
            let ranges = std::sync::Arc::new(symbol_ranges(path, bias, cfg, &rules));
            *slot = Some((version, ranges.clone()));
            ranges
        }
    }
}

fn build(cfg: &Config, generation: u64) -> Table {
    let me = build as *const () as usize;
    // Read before the objects: a libset made meanwhile bumps the
    // generation again, and the next launch rebuilds.
    let gotcha_generation = gotcha::generation();
    let isolation = gotcha::code();
    let mut deferred = Vec::new();
    let mut known = Vec::new();
    let mut unwind = Vec::new();
    let mut loader = Vec::new();
    let mut inlined = Vec::new();
    let mut std_waits = Vec::new();
    let mut inlined_not_waits = Vec::new();
    for o in loaded_objects(&isolation) {
        if o.name.contains("/ld-linux") || o.name.contains("/ld64.so") {
            loader.extend(o.exec.iter().copied());
        }
        known.extend(o.exec.iter().copied());
        if let Some(u) = o.unwind {
            unwind.extend(o.exec.iter().map(|r| (*r, u)));
        }
        let ours = o.exec.iter().any(|r| r.0 <= me && me < r.1);
        if o.is_main || ours {
            // The executable, and the shared object linger is linked into
            // (the C libraries): their Rust code is judged by symbol. For
            // the latter, without this a green thread of libturquoise.so was
            // stopped inside tokio with a driver lock held, and its worker
            // hung on it.
            let ranges = cached_symbol_ranges(if o.is_main { "/proc/self/exe" } else { &o.name }, o.is_main, o.bias, cfg);
            deferred.extend(ranges.deferred.iter().copied());
            inlined.extend(ranges.inlined.iter().copied());
            std_waits.extend(ranges.std_waits.iter().copied());
            inlined_not_waits.extend(ranges.inlined_not_waits.iter().copied());
            continue;
        }
        // A libset's copy of an isolated library: its state is the
        // function's own (see `isolation.rs`).
        let copy = o.exec.iter().any(|e| isolation.preemptible.iter().any(|r| r.0 <= e.0 && e.0 < r.1));
        // The vDSO (clock reads) and libm (pure math) hold no locks.
        let allowed = o.name.contains("linux-vdso")
            || o.name.contains("/libm.so")
            || cfg.preemptible_libs.iter().any(|p| o.name.contains(p.as_str()));
        if !allowed && !copy {
            deferred.extend(o.exec.iter().copied());
        }
    }
    // The dispatch stubs hold no state; gotcha's heap wrappers must finish.
    if isolation.stubs.0 < isolation.stubs.1 {
        known.push(isolation.stubs);
    }
    unwind.sort_unstable_by_key(|e: &(Range, crate::judgement::eh_frame::Object)| e.0);
    for &f in &isolation.deferred_functions {
        let i = unwind.partition_point(|r| r.0 .1 <= f);
        let extent = unwind.get(i).filter(|r| r.0 .0 <= f).and_then(|r| crate::judgement::eh_frame::function_extent(&r.1, f));
        // Without unwind tables (cannot happen for Rust code): at least
        // its first instructions.
        deferred.push(extent.unwrap_or((f, f + 64)));
    }
    GOTCHA_GENERATION.store(gotcha_generation, Ordering::Release);
    Table {
        generation,
        deferred: merge(deferred),
        known: merge(known),
        unwind,
        loader: merge(loader),
        inlined: merge(inlined),
        std_waits: merge(std_waits),
        inlined_not_waits: merge(inlined_not_waits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defers(name: &str) -> bool {
        symbol_must_defer(name, &Config::default())
    }

    /// Path rules of an upper crate: the longest prefix decides, on the
    /// symbol's own path (not its type arguments).
    #[test]
    fn path_rules_decide_by_longest_prefix() {
        let rules = vec![
            ("tokio::runtime::".to_owned(), Defer),
            ("tokio::sync::".to_owned(), Defer),
            ("tokio::sync::once_cell::OnceCell<T>::get_or_init".to_owned(), Preempt),
        ];
        let d = |n: &str| symbol_must_defer_with(n, &Config::default(), &rules);
        assert!(d("tokio::runtime::context::defer"));
        assert!(d("<tokio::runtime::scheduler::defer::Defer>::defer"));
        assert!(d("<tokio::sync::batch_semaphore::Semaphore as core::fmt::Debug>::fmt"));
        assert!(!d("tokio::sync::once_cell::OnceCell<T>::get_or_init::{{closure}}"));
        assert!(!d("<tokio::time::timeout::Timeout<T> as core::future::future::Future>::poll"));
        assert!(!d("myapp::serve::<tokio::runtime::handle::Handle>"));
        assert!(!d("core::ptr::drop_in_place<tokio::runtime::task::join::JoinHandle<u8>>"));
    }

    /// std's waits that hold nothing (`STD_WAITS`), as their symbols appear
    /// in a test binary built with this toolchain; and deferred std code
    /// that is not one of them, which a wait under it keeps deferred.
    #[test]
    fn std_waits_are_the_parker_channels_and_join() {
        let waits = [
            "<std::thread::thread::Thread>::park",
            "<std::thread::thread::Thread>::park_timeout",
            "std::thread::functions::park_timeout",
            "<std::sys::sync::thread_parking::futex::Parker>::park",
            "<std::sync::mpmc::list::Channel<u8>>::recv",
            "<std::sync::mpmc::context::Context>::with::<<std::sync::mpmc::list::Channel<u8>>::recv::{closure#1}, ()>::{closure#2}",
            "<std::sync::mpmc::waker::SyncWaker>::register",
            "<std::sync::mpmc::zero::Channel<T>>::send",
            "<std::thread::local::LocalKey<core::cell::Cell<core::option::Option<std::sync::mpmc::context::Context>>>>::with",
            "<std::sys::thread::unix::Thread>::join",
            "<std::sys::sync::once::futex::Once>::wait",
        ];
        for n in waits {
            assert!(symbol_must_defer(n, &Config::default()), "{n} is not deferred");
            assert!(symbol_is_std_wait(n), "{n} is not a std wait");
        }
        let not_waits = [
            "<std::sys::sync::once::futex::Once>::call",
            "std::thread::current::init_current",
            "std::io::stdio::_print",
            "<std::sync::reentrant_lock::ReentrantLock<T>>::lock",
            "<std::sys::thread_local::native::lazy::Storage<T,D>>::initialize",
            // A std wait's type beside a part that is not one.
            "<std::io::stdio::StdoutLock as core::convert::From<std::sync::mpmc::Sender<u8>>>::from",
        ];
        for n in not_waits {
            assert!(!symbol_is_std_wait(n), "{n} taken for a std wait");
        }
    }

    /// Demangled names as they appear in a test binary: std's own symbols
    /// (v0, with type arguments) and the program's instances (legacy).
    #[test]
    fn std_is_deferred_only_where_it_holds_state() {
        let deferred = [
            "std::io::stdio::_print",
            "<&std::io::stdio::Stdout as std::io::Write>::write_fmt",
            "<std::io::stdio::StdoutLock as std::io::Write>::write_all",
            "<std::io::buffered::bufwriter::BufWriter<std::io::stdio::StdoutRaw>>::flush_buf",
            "<std::io::default_write_fmt::Adapter<std::io::stdio::StdoutLock> as core::fmt::Write>::write_str",
            "core::ptr::drop_in_place<std::io::stdio::StdoutLock>",
            "std::sys::env::unix::getenv::{closure#0}",
            "std::env::_var_os",
            "__rustc::__rust_alloc",
            "__rustc::__rdl_alloc",
            "__rustc::rust_begin_unwind",
            "__rust_alloc",
            "<std::alloc::System as core::alloc::global::GlobalAlloc>::alloc",
            "std::panicking::panic_with_hook",
            "std::panicking::panic_count::increase",
            "std::panicking::catch_unwind::cleanup",
            "<std::backtrace_rs::symbolize::gimli::Cache>::with_global::<std::backtrace_rs::symbolize::gimli::resolve::{closure#1}>",
            "std::sys::backtrace::lock",
            "std::sys::thread_local::destructors::linux_like::register",
            "<std::sys::thread_local::native::lazy::Storage<T,D>>::initialize",
            "std::thread::current::init_current",
            "<std::thread::thread::Thread>::park",
            "std::thread::functions::park_timeout",
            "std::thread::spawnhook::run_spawn_hooks",
            "<std::sys::sync::once::futex::Once>::call",
            "<std::sys::sync::thread_parking::futex::Parker>::park",
            "<std::sync::mpmc::list::Channel<u8>>::recv",
            "<std::thread::local::LocalKey<core::cell::Cell<core::option::Option<std::sync::mpmc::context::Context>>>>::with",
            "<std::sys::process::unix::common::Command>::spawn",
            "std::rt::cleanup",
            "std::sys::pal::unix::stack_overflow::thread_info::set_current_info",
            "std::some_future_module::f",
            "std::sys::some_future_module::f",
            "_Unwind_RaiseException",
            "__cxa_begin_catch",
        ];
        let preemptible = [
            "std::panicking::catch_unwind",
            "std::panicking::catch_unwind::do_call",
            "__rust_try",
            "std::panicking::catch_unwind::<(), mycrate::f::{closure#0}>",
            "std::panic::catch_unwind",
            "std::thread::scoped::scope",
            "std::thread::local::LocalKey<T>::with",
            "<std::thread::local::LocalKey<core::cell::Cell<(u64, u64)>>>::with::<<std::hash::random::RandomState>::new::{closure#0}, std::hash::random::RandomState>",
            "std::collections::hash::map::HashMap<K,V,S>::insert",
            "<std::collections::hash::map::Iter<K,V> as core::iter::traits::iterator::Iterator>::next",
            "<std::fs::File as std::io::Read>::read",
            "<&std::fs::File as std::io::Read>::read_to_string",
            "<std::net::tcp::TcpStream as std::io::Read>::read",
            "std::io::default_read_exact",
            "<std::sys::net::connection::socket::unix::Socket>::recv_with_flags",
            "<std::sys::fd::unix::FileDesc>::read",
            "<std::os::unix::net::stream::UnixStream as std::io::Read>::read",
            "<std::sys::process::unix::unix::Process>::wait",
            "std::sys::process::unix::common::read_output",
            "<std::process::Child>::wait",
            "<std::process::Command>::output",
            "std::sys::pal::unix::cvt_r",
            "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
            "std::sync::poison::mutex::Mutex<T>::lock",
            "std::thread::functions::sleep",
            "std::sys::thread::unix::sleep",
            "<std::time::Instant>::now",
            "std::sys::backtrace::__rust_begin_short_backtrace",
            "std::rt::lang_start_internal",
            "core::ptr::drop_in_place<alloc::vec::Vec<u8>>",
            "core::slice::sort::stable::drift::sort",
            "hashbrown::raw::RawTable<T,A>::reserve_rehash",
            "mycrate::worker::<std::io::stdio::Stdout>",
            "<mycrate::Reader as std::io::Read>::read",
            "std_detect::detect::cache::detect_and_initialize",
        ];
        for n in deferred {
            assert!(defers(n), "{n} should be deferred");
        }
        for n in preemptible {
            assert!(!defers(n), "{n} should be preemptible");
        }
    }

    /// The executable's file, mapped rather than read (see [`MappedFile`]),
    /// gives std's deferred functions at their loaded addresses, and not the
    /// program's own.
    #[test]
    fn symbol_ranges_of_the_mapped_executable() {
        let exe = MappedFile::open("/proc/self/exe").expect("mapped");
        assert_eq!(exe.bytes(), &std::fs::read("/proc/self/exe").unwrap()[..]);
        assert!(MappedFile::open("/nonexistent/file").is_none());
        let main = loaded_objects(&gotcha::code()).into_iter().find(|o| o.is_main).unwrap();
        let deferred = symbol_ranges("/proc/self/exe", main.bias, &Config::default(), &[]).deferred;
        let deferred = merge(deferred);
        let std_env = std::env::current_dir as fn() -> std::io::Result<std::path::PathBuf> as usize;
        let own = symbol_ranges_of_the_mapped_executable as fn() as usize;
        assert!(contains(&deferred, std_env), "std::env::current_dir not deferred");
        assert!(!contains(&deferred, own), "the test's own function deferred");
    }

    #[test]
    fn self_path_strips_the_qualified_self() {
        assert_eq!(self_path("<&std::fs::File as std::io::Read>::read").0, "std::fs::File::read");
        assert_eq!(self_path("<std::sys::process::unix::unix::Process>::wait").0, "std::sys::process::unix::unix::Process::wait");
        assert_eq!(self_path("std::env::args").0, "std::env::args");
    }
}

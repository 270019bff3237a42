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

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;

use object::{Object, ObjectSymbol, SymbolKind};

use crate::config::Config;

type Range = (usize, usize);

pub(crate) struct Table {
    /// Sorted, merged ranges of code that must not be interrupted.
    deferred: Vec<Range>,
    /// Sorted executable ranges of every object known when the table was built.
    known: Vec<Range>,
    /// Sorted executable ranges with the unwind tables of their object.
    unwind: Vec<(Range, crate::unwind::Object)>,
    /// Executable ranges of the dynamic loader (no return traps there).
    loader: Vec<Range>,
}

static TABLE: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());
static STALE: AtomicBool = AtomicBool::new(false);
static BUILD: Mutex<()> = Mutex::new(());

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

    /// The unwind tables covering `pc`, if its object has them.
    pub(crate) fn unwind_object(&self, pc: usize) -> Option<&crate::unwind::Object> {
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

    /// True if `addr` is in deferred code and could be a return address there.
    #[inline]
    pub(crate) fn deferred_return_address(&self, addr: usize) -> bool {
        let (Some(first), Some(last)) = (self.deferred.first(), self.deferred.last()) else {
            return false;
        };
        if addr <= first.0 || addr > last.1 {
            return false;
        }
        let i = self.deferred.partition_point(|r| r.1 < addr);
        if i >= self.deferred.len() || self.deferred[i].0 >= addr {
            return false;
        }
        let start = self.deferred[i].0;
        if addr - start < 8 {
            return true; // too close to the segment start to decode safely: assume a call
        }
        // SAFETY: [addr-7, addr) lies inside a mapped executable segment.
        let b = unsafe { std::slice::from_raw_parts((addr - 7) as *const u8, 7) };
        follows_call(b)
    }

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
        let here = std::slice::from_raw_parts(pc as *const u8, 2);
        let before = std::slice::from_raw_parts((pc - 2) as *const u8, 2);
        here == [0x0F, 0x05] || before == [0x0F, 0x05]
    }
}

/// Is `pc` exactly at a `syscall` instruction (a call about to start, or one
/// the kernel rewound to restart it)?
pub(crate) fn at_syscall_instruction(pc: usize) -> bool {
    // SAFETY: as in `at_syscall`.
    unsafe { std::slice::from_raw_parts(pc as *const u8, 2) == [0x0F, 0x05] }
}

/// The current table, if built. Async-signal-safe.
pub(crate) fn table() -> Option<&'static Table> {
    let p = TABLE.load(Ordering::Acquire);
    // SAFETY: tables are leaked, never freed, once published.
    unsafe { p.as_ref() }
}

/// Builds the table on first use, and again after new code was seen.
pub(crate) fn ensure(cfg: &Config) {
    if !TABLE.load(Ordering::Acquire).is_null() && !STALE.load(Ordering::Relaxed) {
        return;
    }
    let _g = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    if !TABLE.load(Ordering::Acquire).is_null() && !STALE.load(Ordering::Relaxed) {
        return;
    }
    STALE.store(false, Ordering::Relaxed);
    let t = Box::into_raw(Box::new(build(cfg)));
    // Old tables are leaked on purpose: a handler may still be reading one.
    TABLE.store(t, Ordering::Release);
}

struct Object_ {
    name: String,
    bias: usize,
    exec: Vec<Range>,
    is_main: bool,
    unwind: Option<crate::unwind::Object>,
}

fn loaded_objects() -> Vec<Object_> {
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
        let unwind = crate::unwind::object_from_phdrs(info.dlpi_addr as usize, phdrs, text);
        out.push(Object_ { name, bias: info.dlpi_addr as usize, exec, is_main, unwind });
        0
    }
    let mut v: Vec<Object_> = Vec::new();
    // SAFETY: callback matches the expected signature and only touches `v`.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut v as *mut Vec<Object_> as *mut libc::c_void) };
    v
}

/// Names (demangled) of executable functions that must not be preempted.
pub(crate) fn symbol_must_defer(name: &str, cfg: &Config) -> bool {
    if cfg.defer_symbols.iter().any(|p| name.contains(p.as_str())) {
        return true;
    }
    // Parts of std that touch no shared state (clock reads, leaf wrappers
    // around a blocking system call) stay preemptible: loops that poll the
    // clock would otherwise be hard to stop.
    const PURE: &[&str] = &["std::time::", "<std::time::", "::time::Timespec", "thread::sleep", "Thread::sleep"];
    if PURE.iter().any(|p| name.contains(p)) {
        return false;
    }
    // Rust `std` owns the process-global state (stdout/stderr locks, the
    // allocator entry points, thread-local destructor lists, panic and env
    // locks); `core` and `alloc` have none (allocation itself is in libc and
    // `__rdl_*`), so they stay preemptible. C++ runtime support likewise.
    const PREFIXES: &[&str] = &[
        "std::", "<std::", "std_detect::", "__rust_", "__rdl_", "__rg_", "rust_begin_unwind", "rust_panic",
        "rust_eh_personality", "_Unwind_", "__gcc_personality", "__cxa_", "__gxx_personality", "__libc_",
        "__pthread_",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

fn executable_symbol_ranges(bias: usize, cfg: &Config) -> Vec<Range> {
    let Ok(data) = std::fs::read("/proc/self/exe") else { return Vec::new() };
    let Ok(file) = object::File::parse(&*data) else { return Vec::new() };
    let mut out = Vec::new();
    let scan = |syms: &mut dyn Iterator<Item = object::Symbol<'_, '_>>, out: &mut Vec<Range>| {
        for s in syms {
            if s.kind() != SymbolKind::Text || s.size() == 0 || !s.is_definition() {
                continue;
            }
            let Ok(raw) = s.name() else { continue };
            let name = match rustc_demangle::try_demangle(raw) {
                Ok(d) => format!("{d:#}"),
                Err(_) => raw.to_owned(),
            };
            if symbol_must_defer(&name, cfg) {
                let a = bias + s.address() as usize;
                out.push((a, a + s.size() as usize));
            }
        }
    };
    scan(&mut file.symbols(), &mut out);
    if out.is_empty() {
        scan(&mut file.dynamic_symbols(), &mut out);
    }
    out
}

fn build(cfg: &Config) -> Table {
    let me = build as *const () as usize;
    let mut deferred = Vec::new();
    let mut known = Vec::new();
    let mut unwind = Vec::new();
    let mut loader = Vec::new();
    for o in loaded_objects() {
        if o.name.contains("/ld-linux") || o.name.contains("/ld64.so") {
            loader.extend(o.exec.iter().copied());
        }
        known.extend(o.exec.iter().copied());
        if let Some(u) = o.unwind {
            unwind.extend(o.exec.iter().map(|r| (*r, u)));
        }
        if o.is_main {
            deferred.extend(executable_symbol_ranges(o.bias, cfg));
            continue;
        }
        let ours = o.exec.iter().any(|r| r.0 <= me && me < r.1);
        // The vDSO (clock reads) and libm (pure math) hold no locks.
        let allowed = o.name.contains("linux-vdso")
            || o.name.contains("/libm.so")
            || cfg.preemptible_libs.iter().any(|p| o.name.contains(p.as_str()));
        if !ours && !allowed {
            deferred.extend(o.exec.iter().copied());
        }
    }
    unwind.sort_unstable_by_key(|e: &(Range, crate::unwind::Object)| e.0);
    Table { deferred: merge(deferred), known: merge(known), unwind, loader: merge(loader) }
}

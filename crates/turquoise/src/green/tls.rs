//! Per-green-thread images of the executable's own thread-locals.
//!
//! Green threads of one worker share its OS thread, hence its thread-local
//! storage. Compiled code keeps thread-local *values* in registers across
//! whole loops (`rustc -O` hoists a `thread_local!` `Cell` out of a loop),
//! so two green threads preempted inside such a loop would overwrite each
//! other's updates, and a `RefCell` borrowed by one would be seen borrowed
//! by the other: to the compiler, another thread wrote its thread's memory.
//! A green thread must see its thread-locals as a pthread sees its own.
//!
//! So each green thread owns an *image*: the bytes of the executable's
//! `PT_TLS` block (module 1, where every Rust `thread_local!` of the program
//! and its crates lives, and C `__thread` variables of the executable) that
//! belong to the *swap set*. Around every resume of the green thread the
//! worker swaps the image with its own bytes at the same addresses: in
//! before, out after. Addresses never change (a started green thread never
//! leaves its worker, `scheduler.rs`), values are the thread's own.
//!
//! The swap set is every `STT_TLS` symbol of the executable except the
//! runtime's own per-OS-thread state, which must stay the worker's: linger,
//! gotcha, turquoise, tokio and what they are built on, and std's
//! per-OS-thread machinery (its destructor list and stack guard, the
//! current `Thread`, the test harness's output capture). Those are only
//! touched by runtime code, which runs with the worker's values installed.
//! Symbols are read from `/proc/self/exe` once. A stripped executable has no
//! symbols to tell them apart: images are then off, and green threads share
//! their worker's thread-locals (`enabled()` says so).
//!
//! Written by hand: no crate builds per-thread images of static TLS.

use std::cell::RefCell;
use std::sync::OnceLock;

use object::{Object, ObjectSymbol, SymbolKind};

/// Demangled path prefixes of thread-locals that stay the worker's.
const WORKER_OWN: &[&str] = &[
    // The runtime: per-OS-thread scheduling, timers, signal state, stacks.
    "linger::",
    "gotcha::",
    "gotcha_",
    "turquoise::",
    "tokio::",
    "mio::",
    "crossbeam_",
    "async_task::",
    "parking_lot_core::",
    "parking_lot::",
    "futures_util::",
    "futures_channel::",
    // std's per-OS-thread machinery: the destructor list and its guard,
    // the stack-overflow guard, and the test harness's output capture.
    // (std's current `Thread` and its id, `std::thread::current::CURRENT`
    // and `ID`, are the green thread's own: `thread::current()`, `park` and
    // std's channels then tell green threads apart, see
    // [`SwapSet::release_std_thread`].)
    "std::sys::",
    "std::io::stdio::OUTPUT_CAPTURE",
];

/// The executable's thread-locals that green threads keep their own.
pub(crate) struct SwapSet {
    /// (offset in the TLS block, length), sorted, disjoint.
    ranges: Vec<(usize, usize)>,
    /// Their initial bytes (the `PT_TLS` template), packed.
    template: Box<[u8]>,
    /// Where std's current-thread slot (`std::thread::current::CURRENT`, a
    /// pointer-sized cell) lies in the TLS block, if found.
    std_current: Option<usize>,
}

/// One green thread's values of the swap set, packed (or, while it runs,
/// the worker's own).
pub(crate) struct Image(Box<[u8]>);

/// Images of ended threads kept for the next spawns on this OS thread: a
/// spawn then copies the template into one instead of allocating (issue 28,
/// spawn without allocation once warm). Bounded: a worker that ends many
/// threads others spawned keeps at most this many.
const SPARE_MAX: usize = 256;

std::thread_local! {
    static SPARE: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

impl Drop for Image {
    fn drop(&mut self) {
        let b = std::mem::take(&mut self.0);
        if b.is_empty() {
            return;
        }
        // In `critical`: an image dropped inside a green thread (an
        // unstarted one ended by its spawner at shutdown) must not be
        // stopped holding the list, which its worker's next spawn borrows.
        linger::critical(|| {
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARE_MAX {
                    s.push(b);
                }
            });
        });
    }
}

static SET: OnceLock<Option<SwapSet>> = OnceLock::new();

/// The swap set, or `None` when images are off (no symbol table).
pub(crate) fn swap_set() -> Option<&'static SwapSet> {
    SET.get_or_init(build).as_ref()
}

/// How many bytes of thread-locals each green thread keeps its own (and
/// the worker swaps at each switch), or `None` when the executable has no
/// symbol table to tell the program's from the runtime's: green threads of
/// a worker then share its thread-locals.
pub fn image_bytes() -> Option<usize> {
    swap_set().map(|s| s.template.len())
}

/// Demangled, with crate disambiguators (`std[abc123]`) and a leading `<`
/// removed, for prefix rules.
fn path_of(raw: &str) -> String {
    let d = match rustc_demangle::try_demangle(raw) {
        Ok(d) => format!("{d:#}"),
        Err(_) => raw.to_string(),
    };
    let mut out = String::with_capacity(d.len());
    let mut depth = 0;
    for c in d.trim_start_matches('<').chars() {
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn worker_own(raw: &str) -> bool {
    let p = path_of(raw);
    WORKER_OWN.iter().any(|w| p.starts_with(w))
}

fn build() -> Option<SwapSet> {
    let data = std::fs::read("/proc/self/exe").ok()?;
    let file = object::File::parse(&*data).ok()?;
    let symbols: Vec<_> = file.symbols().filter(|s| s.kind() == SymbolKind::Tls && s.size() > 0).collect();
    if symbols.is_empty() {
        // Stripped, or no thread-locals at all: nothing we can tell apart.
        return None;
    }
    let (memsz, init) = module_template()?;
    let std_current = symbols
        .iter()
        .find(|s| s.name().is_ok_and(|n| path_of(n) == "std::thread::current::CURRENT") && s.size() == 8)
        .map(|s| s.address() as usize)
        .filter(|&o| o + 8 <= memsz);
    let mut ranges: Vec<(usize, usize)> = symbols
        .iter()
        .filter(|s| !s.name().map_or(true, worker_own))
        .map(|s| (s.address() as usize, s.size() as usize))
        .filter(|&(o, n)| o.checked_add(n).is_some_and(|e| e <= memsz))
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (o, n) in ranges {
        match merged.last_mut() {
            Some((lo, ln)) if o <= *lo + *ln => *ln = (*ln).max(o + n - *lo),
            _ => merged.push((o, n)),
        }
    }
    let mut template = Vec::with_capacity(merged.iter().map(|r| r.1).sum());
    for &(o, n) in &merged {
        template.extend((o..o + n).map(|i| init.get(i).copied().unwrap_or(0)));
    }
    drop(file);
    Some(SwapSet { ranges: merged, template: template.into_boxed_slice(), std_current })
}

/// The executable's TLS block size and its initialised part (`.tdata`).
fn module_template() -> Option<(usize, Vec<u8>)> {
    let mut out: Option<(usize, Vec<u8>)> = None;
    visit_executable(|info| {
        for ph in phdrs(info) {
            if ph.p_type == libc::PT_TLS {
                let at = info.dlpi_addr as usize + ph.p_vaddr as usize;
                // SAFETY: the loader mapped the executable's TLS template
                // (`p_filesz` bytes at its load address); it is read-only
                // and lives as long as the process.
                let init = unsafe { std::slice::from_raw_parts(at as *const u8, ph.p_filesz as usize) };
                out = Some((ph.p_memsz as usize, init.to_vec()));
            }
        }
    });
    out
}

fn phdrs(info: &libc::dl_phdr_info) -> &[libc::Elf64_Phdr] {
    // SAFETY: `dl_iterate_phdr` hands out the object's program headers,
    // `dlpi_phnum` of them, valid during the callback.
    unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
}

/// Calls `f` with the executable's entry of `dl_iterate_phdr` (the first).
fn visit_executable(mut f: impl FnMut(&libc::dl_phdr_info)) {
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `data` is the `&mut dyn FnMut` passed below, alive for the
        // call; `info` is valid during the callback.
        let f = unsafe { &mut *(data as *mut &mut dyn FnMut(&libc::dl_phdr_info)) };
        f(unsafe { &*info });
        1 // the executable comes first: stop there
    }
    let mut f: &mut dyn FnMut(&libc::dl_phdr_info) = &mut f;
    // SAFETY: the callback only uses `data` as the closure above.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut f as *mut _ as *mut libc::c_void) };
}

/// The calling thread's block of the executable's thread-locals.
fn block() -> *mut u8 {
    std::thread_local! {
        static BLOCK: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    BLOCK.with(|b| {
        if b.get() == 0 {
            let mut at = 0usize;
            visit_executable(|info| at = info.dlpi_tls_data as usize);
            b.set(at);
        }
        b.get() as *mut u8
    })
}

impl SwapSet {
    /// A new green thread's image: the initial values.
    pub(crate) fn image(&self) -> Image {
        // (In `critical`, as in `Image::drop`.)
        let spare = linger::critical(|| SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten());
        match spare {
            Some(mut b) if b.len() == self.template.len() => {
                b.copy_from_slice(&self.template);
                Image(b)
            }
            _ => Image(self.template.clone()),
        }
    }

    /// Gives back the std `Thread` a green thread made for itself (a first
    /// `std::thread::current()`, `park`, a blocked std channel operation):
    /// std drops a thread's own only when its OS thread exits, through a
    /// destructor of the OS thread's, which a green thread's end is not.
    /// Called at the thread's end with its image installed, after its
    /// thread-local destructors.
    pub(crate) fn release_std_thread(&self) {
        const NONE: usize = 0;
        const DESTROYED: usize = 2; // std's markers: NONE 0, BUSY 1, DESTROYED 2
        let (Some(off), base) = (self.std_current, block()) else { return };
        if base.is_null() {
            return;
        }
        // SAFETY: `base + off` is the pointer-sized slot inside this
        // thread's TLS block (checked against `p_memsz` when found), which
        // holds the green thread's value now (its image is installed).
        let slot = unsafe { base.add(off) as *mut usize };
        // SAFETY: as above; only this thread touches its block.
        if unsafe { slot.read() } <= DESTROYED {
            return; // never made, or being made: nothing is owned
        }
        // A second handle on the same `Thread` (std clones the slot's).
        let t = std::thread::current();
        // SAFETY: as above. From here the slot owns nothing: `current()`
        // would make a new `Thread`, which nothing calls any more.
        unsafe { slot.write(NONE) };
        // SAFETY: the slot owned one counted reference of this `Thread`
        // (std's invariant for `CURRENT`: set from `Thread::into_raw`,
        // dropped with `Thread::from_raw` in `drop_current`), and it no
        // longer does: the bitwise copy takes over that reference, and
        // dropping both gives back the slot's and our clone's.
        drop(unsafe { std::ptr::read(&t) });
        drop(t);
    }

    /// Is `addr` one of the calling thread's swapped thread-locals (a green
    /// thread's own, while it runs)?
    pub(crate) fn holds(&self, addr: usize) -> bool {
        let Some(off) = addr.checked_sub(block() as usize) else { return false };
        // Ranges are sorted and disjoint: the last one starting at or
        // before `off` is the only candidate.
        let i = self.ranges.partition_point(|&(o, _)| o <= off);
        i > 0 && off < self.ranges[i - 1].0 + self.ranges[i - 1].1
    }

    /// Copies the calling thread's values of the swap set into `image`
    /// (keeps the values of the flow that leaves the thread's block).
    pub(crate) fn save(&self, image: &mut Image) {
        self.each(image, |tls, img, n| {
            // SAFETY: see `each`.
            unsafe { std::ptr::copy_nonoverlapping(tls, img, n) }
        });
    }

    /// Copies `image`'s values into the calling thread's swap set (installs
    /// the flow whose image it is; the values there are overwritten, so
    /// [`SwapSet::save`] them first).
    pub(crate) fn load(&self, image: &mut Image) {
        self.each(image, |tls, img, n| {
            // SAFETY: see `each`.
            unsafe { std::ptr::copy_nonoverlapping(img, tls, n) }
        });
    }

    /// Exchanges `image` with the calling thread's values of the swap set:
    /// called once puts the image's values in place (and keeps the
    /// thread's), called again puts everything back.
    ///
    /// Run only by runtime code, which touches none of these variables
    /// between the two calls of a pair.
    pub(crate) fn swap(&self, image: &mut Image) {
        self.each(image, |tls, img, n| {
            // SAFETY: see `each`.
            unsafe { std::ptr::swap_nonoverlapping(tls, img, n) }
        });
    }

    /// Calls `f` with each range's place in the calling thread's TLS block,
    /// its place in `image`, and its length. Both hold `n` valid bytes:
    /// `base + o .. + n` lies inside this thread's TLS block for the
    /// executable (ranges were checked against `p_memsz`), and the image
    /// holds `n` bytes at `at` (built from the same ranges); the two never
    /// overlap (heap and TLS). No other thread touches this thread's block,
    /// and the runtime code running here uses none of these variables (they
    /// are the program's).
    #[inline(always)]
    fn each(&self, image: &mut Image, mut f: impl FnMut(*mut u8, *mut u8, usize)) {
        let base = block();
        if base.is_null() {
            return;
        }
        let img = image.0.as_mut_ptr();
        let mut at = 0;
        for &(o, n) in &self.ranges {
            // SAFETY: in bounds of the block and of the image (see above).
            let (tls, mine) = unsafe { (base.add(o), img.add(at)) };
            f(tls, mine, n);
            at += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_lose_disambiguators_and_brackets() {
        assert_eq!(path_of("std[e28293b1aa0f68bd]::sys::thread_local::destructors::list::DTORS"), "std::sys::thread_local::destructors::list::DTORS");
        assert!(worker_own("_ZN9turquoise9scheduler6WORKER29_$u7b$$u7b$constant$u7d$$u7d$28_$u7b$$u7b$closure$u7d$$u7d$23__RUST_STD_INTERNAL_VAL17h9296ff63a8bb7d2fE"));
        assert!(!worker_own("_ZN7runtime5COUNT29_$u7b$$u7b$constant$u7d$$u7d$28_$u7b$$u7b$closure$u7d$$u7d$23__RUST_STD_INTERNAL_VAL17hd5229dc0a827dfc4E"));
    }
}

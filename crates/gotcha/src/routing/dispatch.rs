//! The dispatcher: where a call into an isolated library picks its libset.
//!
//! Every function of an isolated library that the rest of the program calls
//! gets one stub, and the program's GOT slots for it point at the stub. The
//! stub reads the thread's current libset and jumps through that libset's
//! table:
//!
//! ```text
//! mov r11, fs:[OFF]          ; this thread's libset * STRIDE (0: the program's own)
//! lea r10, [rip + table0_i]  ; slot i of libset 0's table
//! jmp [r10 + r11]            ; slot i of the current libset's table
//! ```
//!
//! Only r10 and r11 are touched: neither carries arguments in the SysV ABI,
//! and the PLT is free to clobber both, so every caller already expects it.
//! The stubs and tables share one reservation, so a 32-bit displacement
//! reaches every table. Stubs are written once into fresh pages and never
//! changed; table slots are single aligned words, stored atomically.
//!
//! The thread's libset lives in an initial-exec TLS word defined in
//! assembly (stable Rust has no `#[thread_local]`): its offset from the
//! thread pointer is the same on every thread, so it is baked into the stubs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::base::arch::{fs_word, swap_fs_word};
use crate::Error;

/// Stubs (and table slots) available to the whole process.
pub(crate) const MAX_SYMBOLS: usize = 1 << 15;
/// Tables: the program's own (0) and up to 15 libsets (glibc's 16
/// namespaces less the base one).
pub(crate) const MAX_LIBSETS: usize = 16;
const STUB: usize = 32;
const STUBS_BYTES: usize = MAX_SYMBOLS * STUB;
pub(crate) const STRIDE: usize = MAX_SYMBOLS * 8;
const PAGE: usize = 4096;
/// Stream thunks (see [`stream_thunks`]): up to 256 per libset.
const THUNK: usize = 80;
const THUNKS_BYTES: usize = MAX_LIBSETS * 256 * THUNK;
const THUNKS_AT: usize = STUBS_BYTES + MAX_LIBSETS * STRIDE;

core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".balign 8",
    ".globl gotcha_libset_word",
    ".hidden gotcha_libset_word",
    ".type gotcha_libset_word, @object",
    ".size gotcha_libset_word, 8",
    "gotcha_libset_word:",
    ".zero 8",
    ".popsection",
    ".pushsection .text.gotcha_tls_offset,\"ax\",@progbits",
    ".globl gotcha_tls_offset",
    ".hidden gotcha_tls_offset",
    ".type gotcha_tls_offset, @function",
    "gotcha_tls_offset:",
    "mov rax, qword ptr [rip + gotcha_libset_word@gottpoff]",
    "ret",
    ".size gotcha_tls_offset, .-gotcha_tls_offset",
    ".popsection",
);

extern "C" {
    /// The TLS word's offset from the thread pointer (initial-exec: fixed).
    fn gotcha_tls_offset() -> isize;
}

#[inline]
fn tls_offset() -> isize {
    static OFF: AtomicUsize = AtomicUsize::new(0);
    let o = OFF.load(Ordering::Relaxed);
    if o != 0 {
        return o as isize;
    }
    // SAFETY: a leaf function that returns a constant.
    let o = unsafe { gotcha_tls_offset() };
    OFF.store(o as usize, Ordering::Relaxed);
    o
}

/// This thread's libset (0: the program's own libraries).
#[inline]
pub fn current() -> usize {
    // SAFETY: this thread's own TLS word at its fixed offset from the
    // thread pointer.
    unsafe { fs_word(tls_offset()) / STRIDE }
}

/// Makes `libset` this thread's current one; returns the previous one.
/// Calls into isolated libraries go to that libset's copies from now on.
#[inline]
pub fn set_current(libset: usize) -> usize {
    debug_assert!(libset < MAX_LIBSETS);
    // SAFETY: this thread's own TLS word, which only it writes (a handler
    // that switches restores it before it returns); a libset's index times
    // the stride is what it holds.
    unsafe { swap_fs_word(tls_offset(), libset * STRIDE) / STRIDE }
}

struct Region {
    base: usize,
    /// Stub ids handed out (rounded up to whole pages per batch).
    next: usize,
    /// Bytes of the thunk area handed out (whole pages per batch).
    thunks: usize,
}

static REGION: Mutex<Option<Region>> = Mutex::new(None);
static BASE: AtomicUsize = AtomicUsize::new(0);

fn region(g: &mut Option<Region>) -> Result<&mut Region, Error> {
    if g.is_none() {
        let size = THUNKS_AT + THUNKS_BYTES;
        // SAFETY: a fresh anonymous reservation; nothing else uses it.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), size, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Os("mmap of the dispatch region", std::io::Error::last_os_error()));
        }
        let base = p as usize;
        // SAFETY: the tables part of our own reservation.
        if unsafe { libc::mprotect((base + STUBS_BYTES) as *mut _, MAX_LIBSETS * STRIDE, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            return Err(Error::Os("mprotect of the dispatch tables", std::io::Error::last_os_error()));
        }
        BASE.store(base, Ordering::Release);
        *g = Some(Region { base, next: 0, thunks: 0 });
    }
    Ok(g.as_mut().expect("set above"))
}

/// The table slot `id` of `libset`.
fn slot(base: usize, libset: usize, id: usize) -> &'static AtomicUsize {
    // SAFETY: inside the RW tables part of the reservation, word-aligned;
    // the reservation is never unmapped.
    unsafe { &*((base + STUBS_BYTES + libset * STRIDE + id * 8) as *const AtomicUsize) }
}

/// Sets where stub `id` goes in `libset`.
pub(crate) fn set_target(libset: usize, id: usize, target: usize) {
    let base = BASE.load(Ordering::Acquire);
    assert!(base != 0 && id < MAX_SYMBOLS && libset < MAX_LIBSETS);
    slot(base, libset, id).store(target, Ordering::Release);
}


/// The address of stub `id`.
pub(crate) fn stub_address(id: usize) -> usize {
    BASE.load(Ordering::Acquire) + id * STUB
}

/// The code range of the stubs and thunks written so far (empty before
/// any; the tables between them hold no code).
pub(crate) fn stub_range() -> (usize, usize) {
    let g = REGION.lock().unwrap_or_else(|e| e.into_inner());
    match &*g {
        Some(r) if r.thunks > 0 => (r.base, r.base + THUNKS_AT + r.thunks),
        Some(r) => (r.base, r.base + r.next * STUB),
        None => (0, 0),
    }
}

/// A call that goes to a libset's copy of libc only if its stream is that
/// copy's own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamCall {
    /// The stream's argument, 1..=5 (rdi, rsi, rdx, rcx, r8).
    pub arg: u8,
    /// The copy of libc's image: a stream whose jump table lies inside is
    /// the copy's (glibc keeps it right after the 216-byte `FILE`).
    pub copy_image: (usize, usize),
    pub copy: usize,
    /// The program's definition, for every other stream.
    pub program: usize,
    /// Where a null stream (`fflush(NULL)`: every stream) goes.
    pub null_to_copy: bool,
}

/// Writes one thunk per call into fresh pages; returns their addresses.
///
/// ```text
/// test ARG, ARG ; jz copy or program (fflush(NULL): whose streams)
/// mov r11, [ARG + 0xd8]              (the stream's jump table)
/// mov r10, LO ; cmp r11, r10 ; jb program
/// mov r10, HI ; cmp r11, r10 ; jae program
/// copy:    mov r11, COPY ; jmp r11
/// program: mov r11, PROGRAM ; jmp r11
/// ```
/// Only r10 and r11 change, as in the stubs: every argument register,
/// `al` (vector registers of a variadic call) and the stack are intact.
pub(crate) fn stream_thunks(calls: &[StreamCall]) -> Result<Vec<usize>, Error> {
    if calls.is_empty() {
        return Ok(Vec::new());
    }
    let mut g = REGION.lock().unwrap_or_else(|e| e.into_inner());
    let r = region(&mut g)?;
    let len = (calls.len() * THUNK).div_ceil(PAGE) * PAGE;
    if r.thunks + len > THUNKS_BYTES {
        return Err(Error::Exhausted("stream thunks (256 per libset)".into()));
    }
    let start = r.base + THUNKS_AT + r.thunks;
    // SAFETY: fresh pages of our reservation that no thunk uses yet.
    if unsafe { libc::mprotect(start as *mut _, len, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
        return Err(Error::Os("mprotect of new thunks", std::io::Error::last_os_error()));
    }
    let mut out = Vec::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        let code = stream_thunk(c)?;
        let at = start + i * THUNK;
        // SAFETY: `at` lies in the pages made writable above.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u8, THUNK) };
        out.push(at);
    }
    // SAFETY: as above; from now on the pages are only executed.
    if unsafe { libc::mprotect(start as *mut _, len, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
        return Err(Error::Os("mprotect of new thunks", std::io::Error::last_os_error()));
    }
    r.thunks += len;
    Ok(out)
}

fn stream_thunk(c: &StreamCall) -> Result<[u8; THUNK], Error> {
    // (test ARG, ARG) and (mov r11, [ARG + disp32]) for each argument.
    let (test, load): ([u8; 3], [u8; 3]) = match c.arg {
        1 => ([0x48, 0x85, 0xff], [0x4c, 0x8b, 0x9f]),
        2 => ([0x48, 0x85, 0xf6], [0x4c, 0x8b, 0x9e]),
        3 => ([0x48, 0x85, 0xd2], [0x4c, 0x8b, 0x9a]),
        4 => ([0x48, 0x85, 0xc9], [0x4c, 0x8b, 0x99]),
        5 => ([0x4d, 0x85, 0xc0], [0x4d, 0x8b, 0x98]),
        a => return Err(Error::Unsupported(format!("stream argument {a} is not in a register"))),
    };
    let mut k = [0xccu8; THUNK];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        k[n..n + b.len()].copy_from_slice(b);
        n += b.len();
    };
    put(&test);
    put(&[0x74, if c.null_to_copy { 37 } else { 50 }]); // jz copy (at 42) or program (at 55)
    put(&load);
    put(&0xd8u32.to_le_bytes());
    put(&[0x49, 0xba]); // mov r10, imm64
    put(&(c.copy_image.0 as u64).to_le_bytes());
    put(&[0x4d, 0x39, 0xd3]); // cmp r11, r10
    put(&[0x72, 28]); // jb program (at 55)
    put(&[0x49, 0xba]);
    put(&(c.copy_image.1 as u64).to_le_bytes());
    put(&[0x4d, 0x39, 0xd3]);
    put(&[0x73, 13]); // jae program
    put(&[0x49, 0xbb]); // copy: mov r11, imm64
    put(&(c.copy as u64).to_le_bytes());
    put(&[0x41, 0xff, 0xe3]); // jmp r11
    put(&[0x49, 0xbb]); // program: mov r11, imm64
    put(&(c.program as u64).to_le_bytes());
    put(&[0x41, 0xff, 0xe3]);
    debug_assert_eq!(n, 68);
    Ok(k)
}

/// Writes stubs for `targets` (their program's own definitions, which
/// every libset's table starts with). Returns their ids, in order.
pub(crate) fn add(targets: &[usize]) -> Result<Vec<usize>, Error> {
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let mut g = REGION.lock().unwrap_or_else(|e| e.into_inner());
    let r = region(&mut g)?;
    let per_page = PAGE / STUB;
    let first = r.next.div_ceil(per_page) * per_page; // fresh pages only
    let n = targets.len();
    if first + n > MAX_SYMBOLS {
        return Err(Error::Exhausted(format!("more than {MAX_SYMBOLS} isolated functions")));
    }
    let off = tls_offset();
    let off32 = i32::try_from(off).map_err(|_| Error::Unsupported("TLS offset beyond 2 GiB".into()))?;
    for (i, &t) in targets.iter().enumerate() {
        for k in 0..MAX_LIBSETS {
            slot(r.base, k, first + i).store(t, Ordering::Release);
        }
    }
    let start = r.base + first * STUB;
    let len = (n * STUB).div_ceil(PAGE) * PAGE;
    // SAFETY: fresh pages of our reservation that no stub uses yet.
    if unsafe { libc::mprotect(start as *mut _, len, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
        return Err(Error::Os("mprotect of new stubs", std::io::Error::last_os_error()));
    }
    for i in 0..n {
        let id = first + i;
        let at = r.base + id * STUB;
        let mut code = [0xccu8; STUB]; // int3 padding
        code[..5].copy_from_slice(&[0x64, 0x4c, 0x8b, 0x1c, 0x25]); // mov r11, fs:[disp32]
        code[5..9].copy_from_slice(&off32.to_le_bytes());
        code[9..12].copy_from_slice(&[0x4c, 0x8d, 0x15]); // lea r10, [rip + rel32]
        let table0 = r.base + STUBS_BYTES + id * 8;
        let rel = table0 as i64 - (at + 16) as i64;
        code[12..16].copy_from_slice(&(rel as i32).to_le_bytes());
        code[16..20].copy_from_slice(&[0x43, 0xff, 0x24, 0x1a]); // jmp [r10 + r11]
        // SAFETY: `at` lies in the pages made writable above.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u8, STUB) };
    }
    // SAFETY: as above; from now on the pages are only executed.
    if unsafe { libc::mprotect(start as *mut _, len, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
        return Err(Error::Os("mprotect of new stubs", std::io::Error::last_os_error()));
    }
    r.next = first + n;
    Ok((first..first + n).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn seven(a: u64, b: u64) -> u64 {
        a * 10 + b + 7
    }
    extern "C" fn other(a: u64, b: u64) -> u64 {
        a * 100 + b
    }

    #[repr(C)]
    struct FakeStream {
        head: [u8; 0xd8],
        table: usize,
    }

    extern "C" fn copy_fn(a: u64, f: *const FakeStream, c: u64, d: u64, e: u64) -> u64 {
        1000 + a + c + d + e + (f as u64 & 1)
    }
    extern "C" fn program_fn(a: u64, f: *const FakeStream, c: u64, d: u64, e: u64) -> u64 {
        2000 + a + c + d + e + (f as u64 & 1)
    }

    #[test]
    fn a_stream_thunk_picks_the_copy_only_for_the_copys_streams() {
        let image = [0u8; 64];
        let lo = image.as_ptr() as usize;
        type F = extern "C" fn(u64, *const FakeStream, u64, u64, u64) -> u64;
        let thunk = |null_to_copy| -> F {
            let call = StreamCall {
                arg: 2,
                copy_image: (lo, lo + 64),
                copy: copy_fn as *const () as usize,
                program: program_fn as *const () as usize,
                null_to_copy,
            };
            // SAFETY: the thunk forwards to functions of this exact type.
            unsafe { std::mem::transmute::<usize, F>(stream_thunks(&[call]).unwrap()[0]) }
        };
        let (f, g) = (thunk(true), thunk(false));
        let mine = FakeStream { head: [0; 0xd8], table: lo + 8 };
        let theirs = FakeStream { head: [0; 0xd8], table: lo + 64 };
        let below = FakeStream { head: [0; 0xd8], table: lo - 1 };
        assert_eq!(f(1, &mine, 2, 3, 4), 1010);
        assert_eq!(f(1, &theirs, 2, 3, 4), 2010);
        assert_eq!(f(1, &below, 2, 3, 4), 2010);
        assert_eq!(f(1, std::ptr::null(), 2, 3, 4), 1010);
        assert_eq!(g(1, std::ptr::null(), 2, 3, 4), 2010);
        assert_eq!(g(1, &mine, 2, 3, 4), 1010);
        let (a, b) = stub_range();
        assert!(a <= f as usize && (g as usize) < b);
    }

    #[test]
    fn a_stub_jumps_through_the_current_libsets_table_with_arguments_intact() {
        let ids = add(&[seven as *const () as usize]).unwrap();
        set_target(3, ids[0], other as *const () as usize);
        // SAFETY: the stub forwards to functions of this exact type.
        let f: extern "C" fn(u64, u64) -> u64 = unsafe { std::mem::transmute(stub_address(ids[0])) };
        assert_eq!(f(4, 5), 52);
        let prev = set_current(3);
        assert_eq!(prev, 0);
        assert_eq!(current(), 3);
        assert_eq!(f(4, 5), 405);
        set_current(0);
        assert_eq!(f(4, 5), 52);
        // Another thread starts in libset 0.
        let t = std::thread::spawn(move || f(1, 2)).join().unwrap();
        assert_eq!(t, 19);
    }
}

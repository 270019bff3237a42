//! Taking a deferred preemption the moment the deferred call returns.
//!
//! A deadline that finds the function inside code that must not be
//! interrupted (libc, the loader, parts of `std`) used to be retried by the
//! timer every 10 us, backing off, until a retry happened to land in the
//! function's own code: library-heavy loops overran by milliseconds. Now the
//! handler's call-chain walk finds the *outermost* deferred frame (the libc
//! call the function's own code made) and replaces that frame's return
//! address with the address of a **trap stub**. When the call returns into
//! the stub, it pushes the real return address back (the stack is then as if
//! the call were just about to return) and jumps to a trampoline that saves
//! the return-value registers (the whole XSAVE state: rax, rdx, xmm0/1,
//! ymm0/zmm0, the x87 stack), takes the pending stop as the end of a
//! no-preemption scope does, restores them and returns to the real address.
//! No signal is involved. Timer retries stay as a backstop (for a call that
//! never returns, or is left by `longjmp`).
//!
//! Stubs are 16 bytes apart in one mapping, one per patched function at a
//! time, each reading the real return address from its own data slot. So
//! that unwinders (Rust panics, C++ exceptions, `pthread_exit`, backtraces)
//! can pass through a patched frame, an `.eh_frame` image built here at
//! start-up gives each stub a frame description whose return address is read
//! from that slot, registered with libgcc's `__register_frame`; our own walk
//! ([`original`]) does the same.
//!
//! Not patched (retried as before): functions that read their own return
//! address (`dlopen`, `dlsym`: caller lookup; `setjmp`, `getcontext`: the
//! saved resume point; `vfork` and `clone`, whose child would return through
//! the parent's frame into the trap), frames of the dynamic loader (its lazy
//! binding resolver jumps on into the resolved function, which may be one of
//! those), machines without XSAVE, and when all stubs are in use.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::base::hook::Hook;
use crate::state::thread::Frame;

/// Stubs available at once (functions with a pending deferred stop).
const TRAPS: usize = 4096;
/// Bytes between stubs; a frame description covers each span.
const SPAN: usize = 16;
/// Stack the trampoline reserves for the XSAVE area (checked at start-up).
const XSAVE_ROOM: usize = 4096;

/// Start of the stubs, or 0 if the trap is off.
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Start of the stubs' data: the real return address for each (0: free),
/// then the trampoline's address.
static DATA: AtomicUsize = AtomicUsize::new(0);
/// Allocation bitmap (bit set: taken).
static TAKEN: [AtomicU64; TRAPS / 64] = [const { AtomicU64::new(0) }; TRAPS / 64];
/// Entry addresses of functions that read their own return address.
static READERS: OnceLock<Vec<usize>> = OnceLock::new();
/// The XSAVE components the trampoline saves (x87, SSE, AVX, AVX-512:
/// everything a return value can live in), as enabled in XCR0.
static XSAVE_MASK: AtomicU32 = AtomicU32::new(0);

/// Sets the trap up (once per process, outside any handler). Leaves it off
/// when anything is missing: deferred stops then wait for a timer retry.
pub(crate) fn init(cfg: &crate::base::config::Config) {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if !cfg.return_traps {
            return;
        }
        let Some(mask) = xsave_mask() else { return };
        XSAVE_MASK.store(mask, Ordering::Relaxed);
        READERS.get_or_init(readers);
        if let Some((base, data)) = map_and_register() {
            DATA.store(data, Ordering::Release);
            BASE.store(base, Ordering::Release);
        }
    });
}

/// The XSAVE components to save, if XSAVE is usable and their standard
/// layout fits the trampoline's room.
fn xsave_mask() -> Option<u32> {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    let osxsave = __cpuid(1).ecx & (1 << 27) != 0;
    if !osxsave {
        return None;
    }
    // SAFETY: OSXSAVE says the OS enabled XGETBV.
    let xcr0 = unsafe { std::arch::x86_64::_xgetbv(0) } as u32;
    let mask = xcr0 & 0xE7; // x87, SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
    let mut end = 576; // legacy area and header
    for c in 2..8 {
        if mask & (1 << c) != 0 {
            let l = __cpuid_count(0xD, c);
            end = end.max(l.ebx as usize + l.eax as usize);
        }
    }
    (end <= XSAVE_ROOM).then_some(mask)
}

fn readers() -> Vec<usize> {
    const NAMES: &[&[u8]] = &[
        b"dlopen\0", b"dlmopen\0", b"dlsym\0", b"dlvsym\0", b"setjmp\0", b"_setjmp\0", b"__sigsetjmp\0",
        b"sigsetjmp\0", b"getcontext\0", b"swapcontext\0", b"vfork\0", b"__vfork\0", b"mcount\0", b"_mcount\0",
        b"clone\0",
    ];
    // Both the first definition and libc's behind it: linger wraps some
    // (`swapcontext`), and the wrapper's call to libc's must not be patched.
    NAMES
        .iter()
        .flat_map(|n| [libc::RTLD_DEFAULT, libc::RTLD_NEXT].map(|h| (h, n)))
        // SAFETY: NUL-terminated names; dlsym has no other precondition.
        .map(|(h, n)| unsafe { libc::dlsym(h, n.as_ptr() as *const libc::c_char) } as usize)
        .filter(|&a| a != 0)
        .collect()
}

/// Maps and writes the stubs and their data, and registers their frame
/// descriptions. Returns the stubs' and the data's addresses.
fn map_and_register() -> Option<(usize, usize)> {
    // SAFETY: looking up a symbol; the function has the C signature of
    // libgcc's `void __register_frame(void *)`.
    let register: extern "C" fn(*const u8) = unsafe {
        let mut p = libc::dlsym(libc::RTLD_DEFAULT, c"__register_frame".as_ptr());
        if p.is_null() {
            // Not loaded yet (a C program that never unwound): load the
            // instance glibc's own unwinding (pthread_exit) would load, and
            // keep it.
            let h = libc::dlopen(c"libgcc_s.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NODELETE);
            if !h.is_null() {
                p = libc::dlsym(h, c"__register_frame".as_ptr());
            }
        }
        if p.is_null() {
            return None;
        }
        std::mem::transmute::<*mut libc::c_void, extern "C" fn(*const u8)>(p)
    };
    let code_len = TRAPS * SPAN;
    let len = code_len + (TRAPS + 1) * 8;
    // SAFETY: a fresh anonymous mapping nobody else uses; never unmapped.
    let base = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let base = base as usize;
    let data = base + code_len;
    // SAFETY: the mapping is ours, writable, and `len` bytes long.
    let mem = unsafe { std::slice::from_raw_parts_mut(base as *mut u8, len) };
    write_stubs(mem, base, data);
    // SAFETY: the code part of our own mapping, fully written.
    if unsafe { libc::mprotect(base as *mut libc::c_void, code_len, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
        return None;
    }
    // Leaked on purpose: libgcc keeps reading the registered image.
    let image: &'static [u8] = Vec::leak(eh_frame(base, data));
    register(image.as_ptr());
    Some((base, data))
}

/// Writes each stub: `nop` (so that a return address minus one still lies
/// in its span), then at the trap address `push qword [rip+ORIGINAL_i]` and
/// `jmp qword [rip+TRAMPOLINE]`, then `int3` padding; and the trampoline's
/// address after the data slots. Hand-assembled: 13 bytes of two fixed
/// instructions, with displacements known only at run time.
fn write_stubs(mem: &mut [u8], base: usize, data: usize) {
    let tramp = data + TRAPS * 8;
    for i in 0..TRAPS {
        let at = i * SPAN;
        let code = &mut mem[at..at + SPAN];
        code.fill(0xCC);
        code[0] = 0x90;
        let push_end = base + at + 1 + 6;
        code[1..3].copy_from_slice(&[0xFF, 0x35]);
        code[3..7].copy_from_slice(&((data + i * 8) as i64 - push_end as i64).to_le_bytes()[..4]);
        let jmp_end = push_end + 6;
        code[7..9].copy_from_slice(&[0xFF, 0x25]);
        code[9..13].copy_from_slice(&(tramp as i64 - jmp_end as i64).to_le_bytes()[..4]);
    }
    let t = tramp - base;
    mem[t..t + 8].copy_from_slice(&(trampoline as *const () as usize as u64).to_le_bytes());
}

/// An `.eh_frame` image: one CIE (CFA = rsp), then for each trap address a
/// FDE over its span whose return address is stored in its data slot. The
/// span starts one byte below the trap address, since unwinders look up a
/// return address minus one. Hand-built: only these two record shapes are
/// needed, and no crate writes `.eh_frame` for addresses known at run time
/// (gimli's writer needs its whole `write` feature for these ~40 bytes each).
fn eh_frame(base: usize, data: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(32 + TRAPS * 48 + 4);
    // CIE: id 0, version 1, "zR", code align 1, data align -8, RA column 16,
    // augmentation data: pointer encoding absptr; DW_CFA_def_cfa rsp+0.
    let cie_body: &[u8] = &[0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x00, 0x0c, 7, 0];
    push_record(&mut v, cie_body);
    for i in 0..TRAPS {
        let mut b = Vec::with_capacity(48);
        // CIE pointer: distance from this field back to the CIE (offset 0).
        let here = v.len() + 4;
        b.extend_from_slice(&(here as u32).to_le_bytes());
        b.extend_from_slice(&((base + i * SPAN) as u64).to_le_bytes());
        b.extend_from_slice(&(SPAN as u64).to_le_bytes());
        b.push(0); // no augmentation data
        // CFA = rsp + 8, and the caller's rsp = CFA - 8 (DW_CFA_def_cfa_offset
        // 8; DW_CFA_val_offset rsp, 1 x -8): the stub's frame then has a CFA
        // of its own. With CFA = rsp it would share its identity with the
        // deferred call's frame, and libgcc, which tells frames apart by
        // CFA, aborts when an exception's handler is in the caller.
        b.extend_from_slice(&[0x0e, 8, 0x14, 7, 1]);
        // DW_CFA_expression r16 (RA), 9-byte block: DW_OP_addr <data slot i>.
        b.extend_from_slice(&[0x10, 16, 9, 0x03]);
        b.extend_from_slice(&((data + i * 8) as u64).to_le_bytes());
        push_record(&mut v, &b);
    }
    v.extend_from_slice(&0u32.to_le_bytes()); // terminator
    v
}

/// Appends a length-prefixed record, padded with DW_CFA_nop to 8 bytes.
fn push_record(v: &mut Vec<u8>, body: &[u8]) {
    let padded = (4 + body.len()).next_multiple_of(8) - 4;
    v.extend_from_slice(&(padded as u32).to_le_bytes());
    v.extend_from_slice(body);
    v.resize(v.len() + padded - body.len(), 0);
}

/// The trap address of slot `i`.
fn address(base: usize, i: usize) -> usize {
    base + i * SPAN + 1
}

/// The data slot of stub `i`: its real return address, 0 when free.
fn original_slot(i: usize) -> &'static AtomicUsize {
    let data = DATA.load(Ordering::Acquire);
    debug_assert!(data != 0 && i < TRAPS);
    // SAFETY: the data part of the mapping holds TRAPS aligned words, mapped
    // for good once BASE is set (callers got `i` from a live BASE).
    unsafe { &*((data + i * 8) as *const AtomicUsize) }
}

/// The slot of trap address `a`, if it is one.
fn slot_of(a: usize) -> Option<usize> {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 || a < base || a >= base + TRAPS * SPAN || (a - base) % SPAN != 1 {
        return None;
    }
    Some((a - base) / SPAN)
}

/// Does `pc` lie in the stubs? Async-signal-safe.
pub(crate) fn is_stub(pc: usize) -> bool {
    let base = BASE.load(Ordering::Acquire);
    base != 0 && pc >= base && pc < base + TRAPS * SPAN
}

/// The real return address behind trap address `a` (for the handler's walk),
/// or None if `a` is not a live trap address. Async-signal-safe.
pub(crate) fn original(a: usize) -> Option<usize> {
    let i = slot_of(a)?;
    let o = original_slot(i).load(Ordering::Acquire);
    (o != 0).then_some(o)
}

/// Is the function starting at `entry` one that must not be patched?
pub(crate) fn reads_return_address(entry: usize) -> bool {
    READERS.get().is_some_and(|r| r.contains(&entry))
}

/// Points the return address stored at `slot` (on `f`'s stack, in the frame
/// of the outermost deferred call) at a trap address. False if the trap is
/// off or full. Async-signal-safe.
///
/// # Safety
/// `slot` is a live return-address slot of the interrupted function `f`,
/// found by walking its call chain, and `f` is stopped in this thread's
/// signal handler, or is the running function asking from a frame below the
/// slot's with a no-preemption scope open (either way nothing reads or
/// writes the slot meanwhile: it belongs to a call that has not returned).
pub(crate) unsafe fn arm(f: &Frame, slot: usize) -> bool {
    // A trap the function holds from an earlier patch is dead (the walk
    // found no trap on the chain): reuse it.
    let held = f.trap_slot.get();
    // SAFETY: per the contract; the function is not running, so nothing races.
    match unsafe { patch(slot, || held.checked_sub(1).map(|n| n as usize).or_else(take)) } {
        Some(i) => {
            f.trap_slot.set(i as u32 + 1);
            true
        }
        None => false,
    }
}

/// [`arm`] for a trap no function holds (`deferral`: a thread that holds a
/// signal of the program's until a library call returns). Returns the
/// stub's number, for [`release_detached`] once it fired or is dead.
/// Async-signal-safe.
///
/// # Safety
/// `slot` is a live return-address slot of the interrupted thread's call
/// chain, found by walking it from this thread's signal handler.
pub(crate) unsafe fn arm_detached(slot: usize) -> Option<usize> {
    // SAFETY: per the contract; the code that owns the slot is interrupted.
    unsafe { patch(slot, take) }
}

/// Points `slot` at the trap address of the stub `stub` picks, keeping the
/// real return address in that stub's data. None if the trap is off, the
/// slot is patched already or no stub is free.
///
/// # Safety
/// As [`arm`]: `slot` is a live return-address slot nothing else touches
/// meanwhile.
unsafe fn patch(slot: usize, stub: impl FnOnce() -> Option<usize>) -> Option<usize> {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return None;
    }
    // SAFETY: per the contract, a readable slot of the interrupted chain.
    let ra = unsafe { std::ptr::read_volatile(slot as *const usize) };
    if ra == 0 || slot_of(ra).is_some() {
        return None;
    }
    let i = stub()?;
    original_slot(i).store(ra, Ordering::Release);
    // SAFETY: as above.
    unsafe { std::ptr::write_volatile(slot as *mut usize, address(base, i)) };
    Some(i)
}

/// Gives back a stub armed by [`arm_detached`]: it fired, or no frame can
/// return into it any more.
pub(crate) fn release_detached(i: usize) {
    free(i);
}

/// Is `pc` in stub `i`'s code? The call it patched has returned into it,
/// and at its first instruction it has not yet read its data slot: the
/// stub must stay taken until its trampoline runs. Async-signal-safe.
pub(crate) fn in_stub(i: usize, pc: usize) -> bool {
    let a = trap_address(i);
    pc >= a && pc < a - 1 + SPAN
}

/// The address stub `i` puts in the slot it patches.
pub(crate) fn trap_address(i: usize) -> usize {
    address(BASE.load(Ordering::Acquire), i)
}

fn take() -> Option<usize> {
    for (w, word) in TAKEN.iter().enumerate() {
        let mut cur = word.load(Ordering::Relaxed);
        while cur != u64::MAX {
            let bit = (!cur).trailing_zeros() as usize;
            match word.compare_exchange_weak(cur, cur | (1 << bit), Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Some(w * 64 + bit),
                Err(now) => cur = now,
            }
        }
    }
    None
}

fn free(i: usize) {
    original_slot(i).store(0, Ordering::Release);
    TAKEN[i / 64].fetch_and(!(1 << (i % 64)), Ordering::AcqRel);
}

/// Gives back the trap `f` holds, once no frame of it can return there: it
/// finished, was cancelled, or a walk found no trap on its chain.
pub(crate) fn release(f: &Frame) {
    let n = f.trap_slot.replace(0);
    if n != 0 {
        free(n as usize - 1);
    }
}

/// Called by the trampoline, on the patched call's stack, when it
/// has returned (its return values saved). `slot` is where the stub put the
/// real return address back: the patched slot. Signals of the program's
/// held for this call (`deferral`) run first, then the stop, if due (not at
/// a trap of `deferral`'s off the function's stack).
extern "C" fn return_trap_stop(slot: usize) {
    if HELD_AT_RETURN.get().is_none_or(|held| held(slot)) {
        if let Some(stop) = STOP_AT_RETURN.get() {
            stop();
        }
    }
}

/// libas-safe's hold mode at a trap (`hold::at_return`): runs the
/// signals held for the call that returned; false if the trap was its own,
/// off the function's stack, where no stop is due. Registered as a thread
/// first enters the mode.
static HELD_AT_RETURN: Hook<fn(usize) -> bool> = Hook::new();
/// The stop at a trap (`preempt::at_return`), registered as the handler is
/// installed (before any trap is armed).
static STOP_AT_RETURN: Hook<fn()> = Hook::new();

/// Registers what a trap does for held signals.
pub(crate) fn on_return_hold(f: fn(usize) -> bool) {
    HELD_AT_RETURN.set(f);
}

/// Registers what a trap does to stop the function.
pub(crate) fn on_return_stop(f: fn()) {
    STOP_AT_RETURN.set(f);
}

extern "C" {
    /// The trampoline every stub jumps to (below).
    #[link_name = "linger_return_trampoline"]
    fn trampoline();
}

// Entered by `jmp` from a stub, with the real return address pushed: the
// stack is as at the deferred call's `ret`, so this is laid out like a
// function (CFA = rsp + 8 at entry) and unwinders pass through it. Saves
// rax, rdx and the XSAVE components that can hold return values, empties
// the x87 stack for the Rust call (the ABI wants it empty at calls), takes
// the stop, restores everything and returns to the real address.
std::arch::global_asm!(
    ".pushsection .text.linger_return_trampoline,\"ax\",@progbits",
    ".p2align 4",
    ".globl linger_return_trampoline",
    ".hidden linger_return_trampoline",
    ".type linger_return_trampoline,@function",
    "linger_return_trampoline:",
    ".cfi_startproc",
    "push rbp",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset rbp, 0",
    "mov rbp, rsp",
    ".cfi_def_cfa_register rbp",
    "push rax",
    "push rdx",
    "sub rsp, {room}",
    "and rsp, -64",
    // XRSTOR wants the header's reserved bytes zero; XSAVE leaves them.
    "xor eax, eax",
    "mov qword ptr [rsp + 512], rax",
    "mov qword ptr [rsp + 520], rax",
    "mov qword ptr [rsp + 528], rax",
    "mov qword ptr [rsp + 536], rax",
    "mov qword ptr [rsp + 544], rax",
    "mov qword ptr [rsp + 552], rax",
    "mov qword ptr [rsp + 560], rax",
    "mov qword ptr [rsp + 568], rax",
    "mov eax, dword ptr [rip + {mask}]",
    "xor edx, edx",
    "xsave64 [rsp]",
    "fninit",
    // The patched slot, where the stub pushed the real return address.
    "lea rdi, [rbp + 8]",
    "call {stop}",
    "mov eax, dword ptr [rip + {mask}]",
    "xor edx, edx",
    "xrstor64 [rsp]",
    "lea rsp, [rbp - 16]",
    "pop rdx",
    "pop rax",
    "pop rbp",
    ".cfi_def_cfa rsp, 8",
    "ret",
    ".cfi_endproc",
    ".size linger_return_trampoline, . - linger_return_trampoline",
    ".popsection",
    room = const XSAVE_ROOM + 64,
    mask = sym XSAVE_MASK,
    stop = sym return_trap_stop,
);

#[cfg(test)]
mod tests {
    use gimli::{BaseAddresses, EhFrame, NativeEndian, RegisterRule, UnwindSection};

    /// The hand-built image parses, and every stub's row reads its return
    /// address from its own data slot, with the CFA at the stack pointer.
    #[test]
    fn eh_frame_image_describes_every_stub() {
        let (base, data) = (0x10_0000usize, 0x20_0000usize);
        let image = super::eh_frame(base, data);
        let eh = EhFrame::new(&image, NativeEndian);
        let bases = BaseAddresses::default().set_eh_frame(image.as_ptr() as u64);
        let mut ctx = Box::new(crate::judgement::unwind::test_context());
        for i in [0, 1, 77, super::TRAPS - 1] {
            let at = (super::address(base, i) - 1) as u64;
            let row = eh.unwind_info_for_address(&bases, &mut ctx, at, EhFrame::cie_from_offset).expect("row");
            assert!(matches!(row.cfa(), gimli::CfaRule::RegisterAndOffset { register, offset: 8 } if register.0 == 7));
            assert!(matches!(row.register(gimli::Register(7)), RegisterRule::ValOffset(-8)));
            let RegisterRule::Expression(e) = row.register(gimli::Register(16)) else { panic!("RA rule") };
            let bytes = e.get(&eh).expect("expression").0.slice();
            let mut want = vec![0x03u8];
            want.extend_from_slice(&((data + i * 8) as u64).to_le_bytes());
            assert_eq!(bytes, &want[..]);
        }
    }
}

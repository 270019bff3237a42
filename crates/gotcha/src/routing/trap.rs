//! Trap-and-redirect: accesses to an isolated library's *variables* reach
//! the current libset's copy.
//!
//! A function can be routed through a stub; a variable cannot, because the
//! program reads and writes it with ordinary loads and stores. So a trapped
//! variable is given a *fake* address inside one inaccessible reservation
//! (the trap area), and that fake address is what the program's GOT slot
//! holds. The first access through it faults; [`redirect`] (called first
//! thing by the SIGSEGV handler) decodes the faulting instruction, finds the
//! register that holds the fake address, replaces it with the matching
//! address inside the current libset's copy of the variable, and lets the
//! instruction run again. The register keeps the real address, so further
//! accesses through it do not fault.
//!
//! Layout of the area: variables get consecutive *regions*, each of whole
//! pages, that tile the area in the order they were added:
//!
//! ```text
//! region start (page-aligned)
//! | one page of slack | page offset of the real address | variable (size rounded up to 16) | rest of its page | one page of slack |
//!                                                        ^ fake address
//! ```
//!
//! Every address of a region belongs to that variable: at least 4 KiB
//! before its first byte (negative offsets) and at least 4 KiB after its
//! last (pointers one past the end, and a little beyond), and regions never
//! overlap, so a fake address maps back to exactly one variable. The fake
//! address keeps the real one's offset within its page, so alignment tests
//! on the pointer (up to 4 KiB) give the same answer as on the real one.
//!
//! The table of variables has a fixed capacity and only grows: entries are
//! written before the count that publishes them (Release), the handler
//! reads the count (Acquire) and never sees a half-written entry; nothing
//! moves or is freed. The handler allocates nothing, takes no lock and
//! cannot panic.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use iced_x86::{Decoder, DecoderError, DecoderOptions, Instruction, OpKind, Register};

use crate::base::arch::{greg, slot_of, Gregs};
use crate::routing::dispatch::{self, MAX_LIBSETS};
use crate::Error;

/// Variables the area can hold.
pub(crate) const CAPACITY: usize = 1 << 16;
/// The reservation: PROT_NONE and MAP_NORESERVE, so it costs address
/// space only (32 GiB of the 128 TiB a process has).
const AREA: usize = 1 << 35;
const PAGE: usize = 4096;
/// Slack on each side of a variable.
const SLACK: usize = PAGE;
/// The longest x86 instruction.
const MAX_INSN: usize = 15;
/// `si_code` of a fault on a mapped page the access is not allowed on
/// (the libc crate does not name it for Linux).
const SEGV_ACCERR: i32 = 2;

struct Var {
    /// Its region `[region, end)`; `region` ascends with the index.
    region: AtomicUsize,
    end: AtomicUsize,
    /// The fake address of its first byte.
    fake: AtomicUsize,
    /// Its address in each libset (0: not known, use libset 0's).
    real: [AtomicUsize; MAX_LIBSETS],
}

impl Var {
    const fn new() -> Var {
        Var {
            region: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            fake: AtomicUsize::new(0),
            real: [const { AtomicUsize::new(0) }; MAX_LIBSETS],
        }
    }

    fn contains(&self, a: usize) -> bool {
        self.region.load(Ordering::Relaxed) <= a && a < self.end.load(Ordering::Relaxed)
    }

    /// Where the variable is in `libset` (libset 0's address if that
    /// libset's is not known).
    fn real_in(&self, libset: usize) -> usize {
        match self.real.get(libset).map(|r| r.load(Ordering::Acquire)) {
            Some(a) if a != 0 => a,
            _ => self.real[0].load(Ordering::Acquire),
        }
    }
}

/// In .bss: untouched pages cost nothing.
static VARS: [Var; CAPACITY] = [const { Var::new() }; CAPACITY];
/// Entries of `VARS` published.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// The area's start (0 until the first variable is added).
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Offset in the area of the next region; held while adding.
static NEXT: Mutex<usize> = Mutex::new(0);
static REDIRECTS: AtomicU64 = AtomicU64::new(0);
static REJECTED: AtomicU64 = AtomicU64::new(0);

fn in_area(a: usize) -> bool {
    let base = BASE.load(Ordering::Acquire);
    base != 0 && a.wrapping_sub(base) < AREA
}

/// The trap area, `[start, end)`, once reserved.
pub(crate) fn area() -> Option<(usize, usize)> {
    let base = BASE.load(Ordering::Acquire);
    (base != 0).then_some((base, base + AREA))
}

/// Reserves the area (once; the caller holds `NEXT`).
fn reserve() -> Result<usize, Error> {
    let base = BASE.load(Ordering::Acquire);
    if base != 0 {
        return Ok(base);
    }
    // The decoder builds its tables on first use (allocating): do it here,
    // never in the signal handler.
    if let Ok(mut d) = Decoder::try_new(64, &[0x48, 0x8b, 0x03], DecoderOptions::NONE) {
        let _ = d.decode();
    }
    // SAFETY: a fresh anonymous reservation that nothing else uses; never
    // unmapped (fake addresses may be anywhere in the program).
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), AREA, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(Error::Os("mmap of the trap area", std::io::Error::last_os_error()));
    }
    BASE.store(p as usize, Ordering::Release);
    Ok(p as usize)
}

/// The published variable whose region holds `a`.
fn find(a: usize) -> Option<&'static Var> {
    let n = COUNT.load(Ordering::Acquire);
    let vars = VARS.get(..n)?;
    let i = vars.partition_point(|v| v.region.load(Ordering::Relaxed) <= a);
    let v = vars.get(i.checked_sub(1)?)?;
    v.contains(a).then_some(v)
}

/// Traps a variable of `size` bytes: returns its fake address. `real[k]`
/// is its address in libset `k` (`real[0]`, the program's own definition,
/// is required; 0 elsewhere means "use libset 0's"). The SIGSEGV handler
/// that calls [`redirect`] must be installed before the fake address is
/// used.
pub(crate) fn add(size: usize, real: &[usize]) -> Result<usize, Error> {
    let real0 = real.first().copied().unwrap_or(0);
    if real0 == 0 {
        return Err(Error::Unsupported("a trapped variable needs the program's own address (libset 0)".into()));
    }
    if real.len() > MAX_LIBSETS {
        return Err(Error::Unsupported(format!("{} addresses for a trapped variable (at most {MAX_LIBSETS} libsets)", real.len())));
    }
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    let base = reserve()?;
    if let Some(a) = real.iter().find(|&&a| in_area(a)) {
        return Err(Error::Unsupported(format!("real address {a:#x} of a trapped variable is itself a fake one")));
    }
    let n = COUNT.load(Ordering::Relaxed);
    let full = || Error::Exhausted(format!("the trap area is full ({n} variables)"));
    let v = VARS.get(n).ok_or_else(full)?;
    let region = base + *next;
    let fake = region + SLACK + real0 % PAGE;
    let extent = size.max(1).div_ceil(16).checked_mul(16).ok_or_else(full)?;
    let end = fake.checked_add(extent).ok_or_else(full)?.div_ceil(PAGE) * PAGE + SLACK;
    if end - base > AREA {
        return Err(full());
    }
    v.region.store(region, Ordering::Relaxed);
    v.end.store(end, Ordering::Relaxed);
    v.fake.store(fake, Ordering::Relaxed);
    for (slot, &a) in v.real.iter().zip(real) {
        slot.store(a, Ordering::Relaxed);
    }
    COUNT.store(n + 1, Ordering::Release);
    *next = end - base;
    Ok(fake)
}

/// Tells where the variable with fake address `var_fake` is in `libset`
/// (a libset made after the variable was trapped); 0 forgets it (libset
/// 0's address is used again).
pub(crate) fn set_real(var_fake: usize, libset: usize, addr: usize) -> Result<(), Error> {
    let v = find(var_fake)
        .filter(|v| v.fake.load(Ordering::Relaxed) == var_fake)
        .ok_or_else(|| Error::Unsupported(format!("{var_fake:#x} is not a trapped variable")))?;
    if in_area(addr) || (libset == 0 && addr == 0) {
        return Err(Error::Unsupported(format!("{addr:#x} cannot be libset {libset}'s address of a trapped variable")));
    }
    let slot = v.real.get(libset).ok_or_else(|| Error::Unsupported(format!("libset {libset} (at most {MAX_LIBSETS})")))?;
    slot.store(addr, Ordering::Release);
    Ok(())
}

/// (Redirected accesses, faults in the area that could not be redirected,
/// variables trapped.)
pub(crate) fn stats() -> (u64, u64, usize) {
    (REDIRECTS.load(Ordering::Relaxed), REJECTED.load(Ordering::Relaxed), COUNT.load(Ordering::Relaxed))
}

/// Redirects a fault on a fake address to the current libset's copy of
/// the variable. True if it did: return from the handler, and the
/// instruction runs again. False for every fault that is not ours (at the
/// cost of two loads and a compare), and for ours that cannot be handled
/// safely (the handler should then treat it as any other fault).
///
/// Async-signal-safe: no allocation, no lock, no panic.
///
/// # Safety
/// `info` and `uc` are what the kernel passed to an `SA_SIGINFO` handler
/// of SIGSEGV, for a fault of the calling thread (or null).
#[inline]
pub unsafe fn redirect(info: *const libc::siginfo_t, uc: *mut libc::c_void) -> bool {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 || info.is_null() || uc.is_null() {
        return false;
    }
    // SAFETY: a valid siginfo (the caller's promise); for a signal that is
    // not a fault this reads another member of the union, and the code is
    // checked before the address is used.
    let addr = unsafe { (*info).si_addr() } as usize;
    if addr.wrapping_sub(base) >= AREA {
        return false;
    }
    // SAFETY: the caller's promise, passed on.
    unsafe { redirect_ours(info, uc, addr) }
}

/// # Safety
/// As [`redirect`], with `addr` the fault address, inside the area.
#[cold]
#[inline(never)]
unsafe fn redirect_ours(info: *const libc::siginfo_t, uc: *mut libc::c_void, addr: usize) -> bool {
    // SAFETY: a valid siginfo.
    let (signo, code) = unsafe { ((*info).si_signo, (*info).si_code) };
    if signo != libc::SIGSEGV || code != SEGV_ACCERR {
        return false; // sent, not caused: no instruction to look at
    }
    // SAFETY: the kernel's context of the interrupted code on this thread;
    // nothing else reads or writes it while the handler runs.
    let uc = unsafe { &mut *(uc as *mut libc::ucontext_t) };
    let g = &mut uc.uc_mcontext.gregs;
    let done = match greg(g, libc::REG_RIP) {
        // A jump or call to a fake address: not a variable access.
        Some(rip) if !in_area(rip) => {
            // SAFETY: `rip` is where the interrupted code was executing.
            match unsafe { decode_at(rip) } {
                Some(insn) => apply(g, plan(&insn, g, addr, dispatch::current())),
                None => false,
            }
        }
        _ => false,
    };
    let counter = if done { &REDIRECTS } else { &REJECTED };
    counter.fetch_add(1, Ordering::Relaxed);
    done
}

/// Decodes the instruction at `rip`.
///
/// # Safety
/// `rip` is the address of an instruction the CPU just tried to execute.
unsafe fn decode_at(rip: usize) -> Option<Instruction> {
    let mut buf = [0u8; MAX_INSN];
    // First no further than the end of the instruction's first page, which
    // is mapped: the CPU fetched from it.
    let mut n = (PAGE - rip % PAGE).min(MAX_INSN);
    loop {
        let bytes = buf.get_mut(..n)?;
        // SAFETY: [rip, rip + n) is code the CPU fetched (see above; on a
        // second round the instruction itself runs into the next page, so
        // that page is mapped too). Executable pages are readable unless a
        // program maps code execute-only with protection keys (documented).
        unsafe { std::ptr::copy_nonoverlapping(rip as *const u8, bytes.as_mut_ptr(), n) };
        let mut d = Decoder::try_with_ip(64, bytes, rip as u64, DecoderOptions::NONE).ok()?;
        let insn = d.decode();
        if !insn.is_invalid() {
            return Some(insn);
        }
        if d.last_error() != DecoderError::NoMoreBytes || n == MAX_INSN {
            return None;
        }
        n = MAX_INSN;
    }
}

/// Up to two registers to rewrite (`movs`, `cmps`: both RSI and RDI).
type Rewrites = [Option<(libc::c_int, usize)>; 2];

/// A register holds the fake address `v`, and the operand computes `ea`
/// from it: the variable, and what the register must hold instead for
/// `libset`. None unless `v` and `ea` are in the same variable's region.
fn redirected(v: usize, ea: usize, libset: usize) -> Option<(&'static Var, usize)> {
    let var = find(v)?;
    if !var.contains(ea) {
        return None; // the computation leaves the variable
    }
    let offset = v.wrapping_sub(var.fake.load(Ordering::Relaxed));
    Some((var, var.real_in(libset).wrapping_add(offset)))
}

/// Which registers of `g` to rewrite, and to what, so that `insn` (which
/// faulted at `fault`) reaches libset `libset`'s copy. None if the
/// instruction is not an access we can redirect safely.
fn plan(insn: &Instruction, g: &Gregs, fault: usize, libset: usize) -> Option<Rewrites> {
    let seg = insn.segment_prefix();
    if seg == Register::FS || seg == Register::GS {
        return None; // thread-relative: the register is not the address
    }
    let mut out: Rewrites = [None, None];
    let mut used = 0;
    let mut covers_fault = false;
    let mut push = |r: libc::c_int, var: &Var, value: usize| -> Option<()> {
        *out.get_mut(used)? = Some((r, value));
        used += 1;
        covers_fault |= var.contains(fault);
        Some(())
    };
    for i in 0..insn.op_count() {
        match insn.op_kind(i) {
            OpKind::Memory => {
                if insn.is_ip_rel_memory_operand() || insn.is_vsib() {
                    return None;
                }
                let reg = |r: Register| -> Option<Option<(libc::c_int, usize)>> {
                    if r == Register::None {
                        return Some(None);
                    }
                    let s = slot_of(r)?; // 32-bit addressing, xlat's AL: not ours
                    Some(Some((s, greg(g, s)?)))
                };
                let (base, index) = (reg(insn.memory_base())?, reg(insn.memory_index())?);
                let scale = insn.memory_index_scale() as usize;
                let ea = base
                    .map_or(0, |b| b.1)
                    .wrapping_add(index.map_or(0, |x| x.1).wrapping_mul(scale))
                    .wrapping_add(insn.memory_displacement64() as usize);
                let (r, v) = match (base, index) {
                    (Some(b), _) if in_area(b.1) => b,
                    (_, Some(x)) if scale == 1 && in_area(x.1) => x,
                    _ => return None, // absolute, or no register holds a fake address
                };
                if r == libc::REG_RSP {
                    return None;
                }
                let (var, value) = redirected(v, ea, libset)?;
                push(r, var, value)?;
            }
            // String instructions: DS:RSI (source), ES:RDI (destination);
            // either, both or (for a real-to-fake copy) one may be fake.
            k @ (OpKind::MemorySegRSI | OpKind::MemorySegRDI | OpKind::MemoryESRDI) => {
                let r = if k == OpKind::MemorySegRSI { libc::REG_RSI } else { libc::REG_RDI };
                let v = greg(g, r)?;
                if in_area(v) {
                    let (var, value) = redirected(v, v, libset)?;
                    push(r, var, value)?;
                }
            }
            OpKind::MemorySegSI
            | OpKind::MemorySegESI
            | OpKind::MemorySegDI
            | OpKind::MemorySegEDI
            | OpKind::MemoryESDI
            | OpKind::MemoryESEDI => return None,
            _ => {}
        }
    }
    // A rewrite that does not move the faulting access out of the area
    // would fault again, forever.
    covers_fault.then_some(out)
}

fn apply(g: &mut Gregs, rw: Option<Rewrites>) -> bool {
    let Some(rw) = rw else { return false };
    let len = g.len();
    let valid = |r: libc::c_int| usize::try_from(r).ok().filter(|&r| r < len);
    if rw.iter().flatten().any(|&(r, _)| valid(r).is_none()) {
        return false;
    }
    for (r, value) in rw.into_iter().flatten() {
        if let Some(slot) = valid(r).and_then(|r| g.get_mut(r)) {
            *slot = value as libc::greg_t;
        }
    }
    true
}

#[cfg(test)]
mod tests;

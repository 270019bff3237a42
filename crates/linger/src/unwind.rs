//! Walking the interrupted function's call chain, precisely.
//!
//! The handler must not stop a function whose call chain passes through code
//! that must not be interrupted (user code called back from `qsort`, a
//! `Display` impl called from `println!` with the stdout lock held). A
//! conservative scan of every stack word for return addresses into such code
//! is simple, but large interpreter frames (CPython's eval loop, SQLite's VDBE)
//! keep stale return addresses into `free` in dead slots, and the scan then
//! defers nearly every deadline: such programs were preempted a few hundred
//! times per second instead of thousands.
//!
//! So the handler unwinds instead, with the DWARF call-frame information that
//! x86-64 objects carry for every instruction (`.eh_frame`, found through
//! `.eh_frame_hdr`'s sorted table). gimli does the parsing; here we only apply
//! the rules, reading nothing outside the function's own stack. No allocation,
//! no locks (the per-thread unwind context is allocated at thread start-up),
//! so this is async-signal-safe. When the information is missing or uses a
//! DWARF expression, [`frames_clear`] says "don't know" and the caller falls
//! back to the conservative scan.

use std::cell::Cell;

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, UnwindSection, Register, RegisterRule, UnwindContext,
    UnwindContextStorage, UnwindTableRow,
};

use crate::ranges::Table;
use crate::thread::ts;

/// Fixed-size unwind context storage (gimli's documented pattern for use
/// without an allocator).
pub(crate) struct Fixed;

impl<T: gimli::ReaderOffset> UnwindContextStorage<T> for Fixed {
    type Rules = [(Register, RegisterRule<T>); 32];
    type Stack = [UnwindTableRow<T, Self>; 4];
}

type Ctx = UnwindContext<usize, Fixed>;

/// How one register of the caller is found, in the cache's compact form.
#[derive(Clone, Copy)]
enum Rule {
    Same,
    Offset(i64),
    ValOffset(i64),
    Register(u16),
    Constant(u64),
}

/// What the walk needs to know about one return address, decoded once.
#[derive(Clone, Copy)]
enum Step {
    /// The frame's code must not be interrupted.
    Deferred,
    /// No usable unwind information (or a DWARF expression): don't know.
    Unknown,
    /// The outermost frame: the return address has no rule.
    Outermost,
    /// The caller's CFA is `register + offset`; registers by `rules`.
    Rules { cfa_reg: u16, cfa_off: i64, rules: [Rule; NREGS] },
}

/// A direct-mapped cache of decoded steps, by table and address. A deep
/// recursion repeats the same few return addresses thousands of times:
/// decoding each from `.eh_frame` costs about 50-100 ns, a cache hit a few,
/// and a walk of 260,000 frames (gnulib's stack overflow tests under
/// linger-run) went from about 20 ms to a few.
const CACHE: usize = 128;

#[derive(Clone, Copy)]
struct Entry {
    table: usize,
    pc: usize,
    step: Step,
}

/// The per-thread unwinder: gimli's context and the step cache.
pub(crate) struct Unwinder {
    ctx: Ctx,
    cache: [Entry; CACHE],
}

impl Unwinder {
    /// Built in place on the heap: about 40 KiB, too much to pass through
    /// the stack of a thread that may have little. None when memory runs
    /// out (fallible, so that a launch reports it instead of aborting).
    fn boxed() -> Option<Box<Self>> {
        let layout = std::alloc::Layout::new::<Self>();
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) } as *mut Self;
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is a fresh allocation with the layout of `Self`; every
        // field is written through raw field pointers before it is owned by
        // a Box (which frees it with that same layout).
        unsafe {
            std::ptr::addr_of_mut!((*p).ctx).write(Ctx::new_in());
            let cache = std::ptr::addr_of_mut!((*p).cache) as *mut Entry;
            for i in 0..CACHE {
                cache.add(i).write(Entry { table: 0, pc: 0, step: Step::Unknown });
            }
            Some(Box::from_raw(p))
        }
    }

    /// The step for the return address (or interrupted PC) `at`.
    fn step(&mut self, table: &Table, at: usize) -> Step {
        let key = table as *const Table as usize;
        let slot = (at ^ (at >> 7) ^ (at >> 14)) % CACHE;
        let e = &self.cache[slot];
        if e.table == key && e.pc == at {
            return e.step;
        }
        let step = decode(table, &mut self.ctx, at);
        self.cache[slot] = Entry { table: key, pc: at, step };
        step
    }
}

/// Decodes the step for `at` from the unwind tables.
fn decode(table: &Table, ctx: &mut Ctx, at: usize) -> Step {
    if table.is_deferred(at) {
        return Step::Deferred;
    }
    decode_row(table, ctx, at)
}

/// The rules of `at`'s frame, deferred code or not.
fn decode_row(table: &Table, ctx: &mut Ctx, at: usize) -> Step {
    let Some(obj) = table.unwind_object(at) else { return Step::Unknown };
    let Some(row) = row_for(obj, ctx, at as u64) else { return Step::Unknown };
    let (cfa_reg, cfa_off) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if (register.0 as usize) < NREGS => (register.0, *offset),
        _ => return Step::Unknown,
    };
    let mut rules = [Rule::Same; NREGS];
    let mut ra_set = false;
    for (reg, rule) in row.registers() {
        let i = reg.0 as usize;
        if i >= NREGS {
            continue; // vector registers: not needed to find frames
        }
        rules[i] = match rule {
            RegisterRule::Undefined if i == RA => return Step::Outermost,
            RegisterRule::Undefined | RegisterRule::SameValue => Rule::Same,
            RegisterRule::Offset(o) => Rule::Offset(*o),
            RegisterRule::ValOffset(o) => Rule::ValOffset(*o),
            RegisterRule::Register(r) if (r.0 as usize) < NREGS => Rule::Register(r.0),
            RegisterRule::Constant(c) => Rule::Constant(*c as u64),
            _ => return Step::Unknown,
        };
        ra_set |= i == RA;
    }
    if !ra_set {
        // gimli drops rules set to "undefined" (the default): a return
        // address without a rule marks the outermost frame.
        return Step::Outermost;
    }
    Step::Rules { cfa_reg, cfa_off, rules }
}

/// Where one loaded object's unwind tables are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Object {
    /// Executable range of the object.
    pub text: (usize, usize),
    /// `.eh_frame_hdr` (from PT_GNU_EH_FRAME) and the readable extent after it.
    pub hdr: usize,
    pub hdr_len: usize,
    /// The readable extent of the segment holding `.eh_frame`: [start, end).
    pub segs: [(usize, usize); 4],
}

struct CtxOwner(Cell<*mut Unwinder>);

impl Drop for CtxOwner {
    fn drop(&mut self) {
        let p = self.0.replace(std::ptr::null_mut());
        ts().unwind_ctx.set(std::ptr::null_mut());
        if !p.is_null() {
            // SAFETY: allocated by `prepare_thread` with Box::into_raw, and
            // no longer published to the handler.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

thread_local! {
    static CTX: CtxOwner = const { CtxOwner(Cell::new(std::ptr::null_mut())) };
}

/// Gives this thread its unwind context (outside any handler). Fails only
/// when memory runs out.
pub(crate) fn prepare_thread() -> Result<(), crate::Error> {
    let t = ts();
    if !t.unwind_ctx.get().is_null() {
        return Ok(());
    }
    let p = Box::into_raw(Unwinder::boxed().ok_or(crate::Error::OutOfMemory)?);
    if CTX.try_with(|c| c.0.set(p)).is_err() {
        // SAFETY: just allocated, never published.
        drop(unsafe { Box::from_raw(p) });
        return Ok(());
    }
    t.unwind_ctx.set(p as *mut ());
    Ok(())
}

/// DWARF register numbers of x86-64 in `ucontext_t` order.
const NREGS: usize = 17;
const RSP: usize = 7;
const RA: usize = 16;

fn regs_from(uc: &libc::ucontext_t) -> [u64; NREGS] {
    let g = &uc.uc_mcontext.gregs;
    let r = |i: libc::c_int| g[i as usize] as u64;
    [
        r(libc::REG_RAX),
        r(libc::REG_RDX),
        r(libc::REG_RCX),
        r(libc::REG_RBX),
        r(libc::REG_RSI),
        r(libc::REG_RDI),
        r(libc::REG_RBP),
        r(libc::REG_RSP),
        r(libc::REG_R8),
        r(libc::REG_R9),
        r(libc::REG_R10),
        r(libc::REG_R11),
        r(libc::REG_R12),
        r(libc::REG_R13),
        r(libc::REG_R14),
        r(libc::REG_R15),
        r(libc::REG_RIP),
    ]
}

/// Reads a word of the function's stack, or `None` outside it.
fn read(lo: usize, hi: usize, addr: u64) -> Option<u64> {
    let a = addr as usize;
    if a < lo || a.checked_add(8)? > hi || !a.is_multiple_of(8) {
        return None;
    }
    // SAFETY: 8-byte aligned and inside the function's mapped stack.
    Some(unsafe { *(a as *const u64) })
}

/// Is every frame of the interrupted function, from the interrupted point up
/// to its entry at `entry`, outside deferred code? `Some(true)`: safe to
/// stop; `Some(false)`: a frame is in deferred code; `None`: the unwind
/// information does not say (fall back to scanning).
///
/// The first frame's own PC has been checked by the caller.
pub(crate) fn frames_clear(table: &Table, uc: &libc::ucontext_t, lo: usize, hi: usize, entry: usize) -> Option<bool> {
    let u = ts().unwind_ctx.get() as *mut Unwinder;
    if u.is_null() {
        return None;
    }
    // SAFETY: this thread's unwinder, used only by this thread's handler,
    // which is not re-entered while deciding (it is a no-preemption scope).
    let u = unsafe { &mut *u };
    let mut regs = regs_from(uc);
    let mut first = true;
    // Deep enough for any real recursion within the default 8 MiB stack of
    // main (a frame is at least 16 bytes); the cost is bounded by the
    // handler's retry rule (it never retries sooner than twice its cost).
    for _ in 0..(1 << 19) {
        let sp = regs[RSP] as usize;
        if sp >= entry {
            return Some(true);
        }
        let pc = regs[RA] as usize;
        // A return address points after its call: look up the call itself.
        let at = if first { pc } else { pc.checked_sub(1)? };
        let step = match u.step(table, at) {
            Step::Deferred if !first => return Some(false),
            // The first frame's own PC has been judged by the caller (the
            // system call of a blocking wrapper): only its rules count.
            Step::Deferred => decode_row(table, &mut u.ctx, at),
            s => s,
        };
        let (cfa_reg, cfa_off, rules) = match step {
            Step::Rules { cfa_reg, cfa_off, rules } => (cfa_reg, cfa_off, rules),
            Step::Outermost => return Some(true),
            Step::Unknown | Step::Deferred => return None,
        };
        let cfa = regs[cfa_reg as usize].checked_add_signed(cfa_off)?;
        let mut next = regs;
        for (i, rule) in rules.iter().enumerate() {
            next[i] = match *rule {
                Rule::Same => regs[i],
                Rule::Offset(o) => read(lo, hi, cfa.checked_add_signed(o)?)?,
                Rule::ValOffset(o) => cfa.checked_add_signed(o)?,
                Rule::Register(r) => regs[r as usize],
                Rule::Constant(c) => c,
            };
        }
        next[RSP] = cfa;
        if cfa as usize <= sp {
            return None; // not moving up the stack: corrupt or unusual
        }
        regs = next;
        first = false;
    }
    None
}

/// The CFI row of `pc` in `obj`.
fn row_for<'c>(obj: &Object, ctx: &'c mut Ctx, pc: u64) -> Option<&'c UnwindTableRow<usize, Fixed>> {
    // SAFETY: the header lies in a mapped, read-only segment of a loaded
    // object (recorded when the table was built).
    let hdr_bytes = unsafe { std::slice::from_raw_parts(obj.hdr as *const u8, obj.hdr_len) };
    let bases = BaseAddresses::default().set_eh_frame_hdr(obj.hdr as u64).set_text(obj.text.0 as u64);
    let hdr = EhFrameHdr::new(hdr_bytes, NativeEndian).parse(&bases, 8).ok()?;
    let gimli::Pointer::Direct(eh) = hdr.eh_frame_ptr() else { return None };
    let eh = eh as usize;
    let seg = obj.segs.iter().find(|s| s.0 <= eh && eh < s.1)?;
    // SAFETY: from `.eh_frame` to the end of the mapped segment holding it.
    let eh_bytes = unsafe { std::slice::from_raw_parts(eh as *const u8, seg.1 - eh) };
    let eh_frame = EhFrame::new(eh_bytes, NativeEndian);
    let bases = bases.set_eh_frame(eh as u64);
    let table = hdr.table()?;
    table.unwind_info_for_address(&eh_frame, &bases, ctx, pc, EhFrame::cie_from_offset).ok()
}

/// Reads the unwind table location of one object from its program headers.
pub(crate) fn object_from_phdrs(bias: usize, phdrs: &[libc::Elf64_Phdr], text: (usize, usize)) -> Option<Object> {
    const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
    let eh = phdrs.iter().find(|p| p.p_type == PT_GNU_EH_FRAME)?;
    let hdr = bias + eh.p_vaddr as usize;
    let mut segs = [(0usize, 0usize); 4];
    let mut n = 0;
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_R != 0) {
        if n < segs.len() {
            let s = bias + p.p_vaddr as usize;
            segs[n] = (s, s + p.p_memsz as usize);
            n += 1;
        }
    }
    let seg = segs.iter().find(|s| s.0 <= hdr && hdr < s.1)?;
    Some(Object { text, hdr, hdr_len: seg.1 - hdr, segs })
}

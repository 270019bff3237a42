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
//! DWARF expression, [`walk`] says "don't know" and the caller falls
//! back to the conservative scan.

use std::cell::Cell;

use gimli::{CfaRule, EhFrame, Register, RegisterRule, UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow};

use crate::state::memo::{Memo, MEMO_READS, NREGS};
use crate::judgement::eh_frame::{sections, Object};
use crate::judgement::ranges::Table;
use crate::state::thread::ts;

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
    /// No usable unwind information (or a DWARF expression): don't know.
    Unknown { deferred: bool },
    /// The outermost frame: the return address has no rule.
    Outermost,
    /// The caller's CFA is `register + offset`; registers by `rules`.
    /// `deferred`: the frame's code must not be interrupted.
    Rules { deferred: bool, cfa_reg: u16, cfa_off: i64, rules: [Rule; NREGS] },
}

/// A direct-mapped cache of decoded steps, by table generation and address
/// (a new table, built after code was loaded or unloaded, misses them all). A deep
/// recursion repeats the same few return addresses thousands of times:
/// decoding each from `.eh_frame` costs about 50-100 ns, a cache hit a few,
/// and a walk of 260,000 frames (gnulib's stack overflow tests under
/// linger-run) went from about 20 ms to a few.
const CACHE: usize = 128;

#[derive(Clone, Copy)]
struct Entry {
    /// The table's generation; 0: empty.
    generation: u64,
    pc: usize,
    /// `at` lies in deferred code inlined into its frame's function
    /// (`Table::in_inlined`: a binary search of a large table, the walk's
    /// costliest lookup when not cached).
    inlined: bool,
    step: Step,
}

/// The per-thread unwinder: gimli's context and the step cache.
pub(crate) struct Unwinder {
    ctx: Ctx,
    cache: [Entry; CACHE],
    /// A walk is under way: the SIGSEGV handler, which may interrupt one,
    /// must not start another ([`walk_at_fault`]).
    busy: bool,
}



/// Records what a walk's outcome depends on: the return addresses it
/// followed and the registers its CFAs were computed from, each traced back
/// to a starting register (`init`) or a stack word (`words`; `n >
/// MEMO_READS`: too many). Saved registers that never locate a frame (a
/// loop counter in rbx) do not count, or a loop's pauses would never match.
struct Reads {
    /// Where each register's current value came from: 0 computed from a
    /// CFA, 1 the starting value, else the stack address it was loaded from.
    src: [u64; NREGS],
    init: u32,
    n: usize,
    words: [(u64, u64); MEMO_READS],
}

impl Reads {
    fn new() -> Reads {
        Reads { src: [1; NREGS], init: 0, n: 0, words: [(0, 0); MEMO_READS] }
    }

    /// The walk used register `i`, whose value is `v`.
    fn depend(&mut self, i: usize, v: u64) {
        match self.src[i] {
            0 => {}
            1 => self.init |= 1 << i,
            a => {
                if self.n < MEMO_READS {
                    self.words[self.n] = (a, v);
                }
                self.n += 1;
            }
        }
    }

    /// The caller's registers come from `rules` at `cfa`.
    fn step(&mut self, rules: &[Rule; NREGS], cfa: u64) {
        let prev = self.src;
        for (i, rule) in rules.iter().enumerate() {
            self.src[i] = match *rule {
                Rule::Same => prev[i],
                Rule::Offset(o) => cfa.wrapping_add_signed(o).max(2),
                Rule::ValOffset(_) | Rule::Constant(_) => 0,
                Rule::Register(r) => prev[r as usize],
            };
        }
        self.src[RSP] = 0;
    }
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
            std::ptr::addr_of_mut!((*p).busy).write(false);
            let cache = std::ptr::addr_of_mut!((*p).cache) as *mut Entry;
            for i in 0..CACHE {
                cache.add(i).write(Entry { generation: 0, pc: 0, inlined: true, step: Step::Unknown { deferred: true } });
            }
            Some(Box::from_raw(p))
        }
    }

    /// Marks a walk as under way, for a signal handler of this thread to see
    /// (the stores must stay where they are, around the walk).
    #[inline]
    fn set_busy(&mut self, busy: bool) {
        use std::sync::atomic::{compiler_fence, Ordering};
        compiler_fence(Ordering::SeqCst);
        // SAFETY: a field of ours; volatile so it is neither elided nor merged.
        unsafe { std::ptr::write_volatile(&mut self.busy, busy) };
        compiler_fence(Ordering::SeqCst);
    }

    /// The step for the return address (or interrupted PC) `at`, and
    /// whether `at` is in deferred code inlined into its function.
    fn step(&mut self, table: &Table, at: usize) -> (bool, Step) {
        let generation = table.generation();
        let slot = (at ^ (at >> 7) ^ (at >> 14)) % CACHE;
        let e = &self.cache[slot];
        if e.generation == generation && e.pc == at {
            return (e.inlined, e.step);
        }
        let inlined = table.in_inlined(at);
        let step = decode(table, &mut self.ctx, at);
        self.cache[slot] = Entry { generation, pc: at, inlined, step };
        (inlined, step)
    }
}

/// Decodes the step for `at` from the unwind tables.
fn decode(table: &Table, ctx: &mut Ctx, at: usize) -> Step {
    let deferred = table.is_deferred(at);
    let Some(obj) = table.unwind_object(at) else { return Step::Unknown { deferred } };
    let Some(row) = row_for(obj, ctx, at as u64) else { return Step::Unknown { deferred } };
    let (cfa_reg, cfa_off) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if (register.0 as usize) < NREGS => (register.0, *offset),
        _ => return Step::Unknown { deferred },
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
            _ => return Step::Unknown { deferred },
        };
        ra_set |= i == RA;
    }
    if !ra_set {
        // gimli drops rules set to "undefined" (the default): a return
        // address without a rule marks the outermost frame.
        return Step::Outermost;
    }
    Step::Rules { deferred, cfa_reg, cfa_off, rules }
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

use crate::base::arch::{dwarf_regs as regs_from, DWARF_RA as RA, DWARF_SP as RSP};

/// Reads a word of the function's stack, or `None` outside it.
fn read(lo: usize, hi: usize, addr: u64) -> Option<u64> {
    let a = addr as usize;
    if a < lo || a.checked_add(8)? > hi || !a.is_multiple_of(8) {
        return None;
    }
    // SAFETY: 8-byte aligned and inside the function's mapped stack.
    Some(unsafe { *(a as *const u64) })
}

/// What a walk of the interrupted function's call chain found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chain {
    /// No frame, from the interrupted point up to the function's entry, is
    /// in deferred code: safe to stop. `trapped`: a return trap is armed on
    /// the chain all the same (in the frame of a blocking call whose system
    /// call the caller judged stoppable), so it must be kept.
    Clear { trapped: bool },
    /// A frame is in deferred code. `patch`: the stack slot holding the
    /// return address of the outermost deferred frame (into the function's
    /// own code) and that frame's code address, when the whole chain was
    /// read and no trap is armed on it yet; `trapped`: one is (see
    /// `return_trap`).
    Deferred { patch: Option<(usize, usize)>, trapped: bool },
    /// The unwind information does not say (fall back to scanning).
    Unknown,
}

/// libc's `rt_sigreturn` stub, where signal handlers return (0: unknown).
static SIGRETURN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Records libc's `rt_sigreturn` stub (see [`walk`]).
pub(crate) fn note_sigreturn(addr: usize) {
    SIGRETURN.store(addr, std::sync::atomic::Ordering::Relaxed);
}

/// libc's `rt_sigreturn` stub, or 0 if not known yet.
pub(crate) fn sigreturn() -> usize {
    SIGRETURN.load(std::sync::atomic::Ordering::Relaxed)
}

/// Walks the interrupted function's call chain, from the interrupted point
/// (registers in `uc`) up to its entry at `entry`, within its stack
/// `[lo, hi)`. `first_deferred` says whether the interrupted frame itself
/// counts as deferred (the caller judged its PC: the system call of a
/// blocking wrapper does not count). Return addresses that are trap
/// addresses are read through to the real ones.
pub(crate) fn walk(table: &Table, uc: &libc::ucontext_t, lo: usize, hi: usize, entry: usize, first_deferred: bool) -> Chain {
    let u = ts().unwind_ctx.get() as *mut Unwinder;
    if u.is_null() {
        return if first_deferred { Chain::Deferred { patch: None, trapped: false } } else { Chain::Unknown };
    }
    // SAFETY: this thread's unwinder, used only by this thread's handler and
    // by `walk_here`, each inside a no-preemption scope (so neither runs
    // while the other uses it), and by `walk_at_fault`, which leaves it
    // alone while `busy`.
    let u = unsafe { &mut *u };
    u.set_busy(true);
    let chain = walk_regs(table, u, regs_from(uc), lo, hi, entry, first_deferred, false, None, &mut ());
    u.set_busy(false);
    chain
}

/// What a walk reports frame by frame to a caller that needs more than its
/// verdict ([`deferred_call`]). The walks that need nothing pass `()`, for
/// which these calls compile to nothing.
trait Observe {
    /// A frame, from the interrupted one up: `at` is its code address (the
    /// interrupted instruction, then each call's), `deferred` whether it
    /// counts as deferred code.
    #[inline(always)]
    fn frame(&mut self, _at: usize, _deferred: bool) {}
    /// The walk went up to the function's entry (or to the outermost frame
    /// the tables describe) without losing its way.
    #[inline(always)]
    fn complete(&mut self) {}
    /// May the walk go on through a frame at `at` that has deferred code
    /// inlined into it (which it otherwise reports as deferred with no
    /// trap to set)? The frame then counts as deferred.
    #[inline(always)]
    fn through_inlined(&self, _at: usize) -> bool {
        false
    }
}

impl Observe for () {}

/// The shape [`std_wait`] looks for: every deferred frame is one of std's
/// waits ([`Table::in_std_wait`]).
struct StdWaits<'a> {
    table: &'a Table,
    /// A deferred frame that is not one of std's waits.
    foreign: bool,
    complete: bool,
}

impl Observe for StdWaits<'_> {
    #[inline]
    fn frame(&mut self, at: usize, deferred: bool) {
        self.foreign |= deferred && !self.table.in_std_wait(at);
    }
    #[inline]
    fn complete(&mut self) {
        self.complete = true;
    }
    /// std's waits are reviewed with what the compiler inlines into them
    /// (`Thread::park` holds the parker's and `futex_wait`'s code).
    #[inline]
    fn through_inlined(&self, at: usize) -> bool {
        self.table.in_std_wait(at)
    }
}

/// The function, blocked in the system call of an interposed wrapper (the
/// interrupted frame, which the caller judged), waits under std's waits and
/// nothing else deferred: every deferred frame of the chain lies in one of
/// std's functions that hold nothing while they wait (`ranges::STD_WAITS`),
/// and the walk read the whole chain. Returns whether a return trap is
/// armed on it. For `Builder::stop_in_std_waits`, called from the
/// preemption handler like [`walk`]. Async-signal-safe.
pub(crate) fn std_wait(table: &Table, uc: &libc::ucontext_t, lo: usize, hi: usize, entry: usize) -> Option<bool> {
    let u = ts().unwind_ctx.get() as *mut Unwinder;
    if u.is_null() {
        return None;
    }
    // SAFETY: as in `walk`: this thread's unwinder, from its handler.
    let u = unsafe { &mut *u };
    let mut shape = StdWaits { table, foreign: false, complete: false };
    u.set_busy(true);
    let chain = walk_regs(table, u, regs_from(uc), lo, hi, entry, false, false, None, &mut shape);
    u.set_busy(false);
    match chain {
        Chain::Deferred { trapped, .. } if shape.complete && !shape.foreign => Some(trapped),
        _ => None,
    }
}

/// The shape [`deferred_call`] looks for: one run of deferred frames from
/// the interrupted one up, then only the function's own.
struct OneCall<'a> {
    /// Code the run must not pass through.
    avoid: &'a [(usize, usize)],
    /// Frames of std's waits count as the function's own
    /// (`Builder::stop_in_std_waits`): `JoinHandle::join` over `pthread_join`.
    through_std: Option<&'a Table>,
    /// A frame of the run is in `avoid`.
    avoided: bool,
    /// Code address in the outermost frame of the first run.
    outer: usize,
    /// A frame of the function's own was seen above the run.
    closed: bool,
    /// A deferred frame came after that (code called back from a library
    /// that called into a library again).
    broken: bool,
    complete: bool,
}

impl Observe for OneCall<'_> {
    #[inline]
    fn frame(&mut self, at: usize, deferred: bool) {
        let deferred = deferred && !self.through_std.is_some_and(|t| t.in_std_wait(at));
        if !deferred {
            self.closed = true;
        } else if self.closed {
            self.broken = true;
        } else {
            self.outer = at;
            self.avoided |= self.avoid.iter().any(|&(s, e)| s <= at && at < e);
        }
    }
    #[inline]
    fn complete(&mut self) {
        self.complete = true;
    }
}

/// The interrupted point is inside one library call made by the function's
/// own code, and nothing else: every frame from the interrupted one up to
/// the outermost deferred one is deferred, every frame above it up to the
/// entry is the function's own, and the walk read the whole chain (no
/// signal frame, no inlined deferred code, no frame the tables do not
/// describe), and no frame of the call lies in one of the code ranges
/// `avoid`. Returns a code address inside that outermost deferred frame
/// (where it made its call, or the interrupted instruction if it is the
/// only one) and whether a return trap is armed on the chain. For the
/// futex rule (`futex.rs`), called from the preemption handler like
/// [`walk`]. Async-signal-safe.
pub(crate) fn deferred_call(
    table: &Table,
    uc: &libc::ucontext_t,
    lo: usize,
    hi: usize,
    entry: usize,
    avoid: &[(usize, usize)],
    through_std: bool,
) -> Option<(usize, bool)> {
    let u = ts().unwind_ctx.get() as *mut Unwinder;
    if u.is_null() {
        return None;
    }
    // SAFETY: as in `walk`: this thread's unwinder, from its handler.
    let u = unsafe { &mut *u };
    let through_std = through_std.then_some(table);
    let mut shape = OneCall { avoid, through_std, avoided: false, outer: 0, closed: false, broken: false, complete: false };
    u.set_busy(true);
    let chain = walk_regs(table, u, regs_from(uc), lo, hi, entry, true, false, None, &mut shape);
    u.set_busy(false);
    match chain {
        Chain::Deferred { trapped, .. } if shape.complete && !shape.broken && !shape.avoided && shape.outer != 0 => {
            Some((shape.outer, trapped))
        }
        _ => None,
    }
}

/// [`walk`] for `deferral`, from a signal handler that may interrupt a walk
/// of this thread's (`walk_here`, another handler's): None while one is
/// under way. A signal frame ends the chain as `entry` does: the frames
/// beyond it belong to the code a signal handler interrupted. Async-signal-safe.
pub(crate) fn walk_to_signal_frame(
    table: &Table,
    uc: &libc::ucontext_t,
    lo: usize,
    hi: usize,
    entry: usize,
    first_deferred: bool,
) -> Option<Chain> {
    let u = ts().unwind_ctx.get() as *mut Unwinder;
    // SAFETY: this thread's unwinder; `busy` says whether a walk below this
    // handler is using it (then it is left alone).
    if u.is_null() || unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*u).busy)) } {
        return None;
    }
    // SAFETY: as above: no walk of this thread's is under way.
    let u = unsafe { &mut *u };
    u.set_busy(true);
    let chain = walk_regs(table, u, regs_from(uc), lo, hi, entry, first_deferred, true, None, &mut ());
    u.set_busy(false);
    Some(chain)
}

/// [`walk`] from the SIGSEGV handler, for a fault of the running function
/// (see `overflow::finish_on_reserve`); None if a walk was interrupted by
/// the fault (the unwinder is in use). Async-signal-safe.
pub(crate) fn walk_at_fault(table: &Table, uc: &libc::ucontext_t, lo: usize, hi: usize, entry: usize, first_deferred: bool) -> Option<Chain> {
    let u = ts().unwind_ctx.get() as *mut Unwinder;
    // SAFETY: this thread's unwinder; `busy` says no walk of this thread is
    // under way below this handler (the preemption signal, blocked while
    // this handler runs, starts no new one).
    if u.is_null() || unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*u).busy)) } {
        return None;
    }
    Some(walk(table, uc, lo, hi, entry, first_deferred))
}

/// `regs` of [`walk_here`] by DWARF number.
fn full_regs(regs: [u64; 8]) -> [u64; NREGS] {
    let mut full = [0u64; NREGS];
    for (i, r) in START.into_iter().zip(regs) {
        full[i] = r;
    }
    full
}

/// The DWARF numbers of the eight starting registers, in `judge_here`'s
/// order (rip, rsp, rbp, rbx, r12-r15); the others start as 0.
const START: [usize; 8] = [RA, RSP, 6, 3, 12, 13, 14, 15];

/// Each DWARF number's place in [`START`] (8: not a starting register).
const START_AT: [u8; NREGS] = {
    let mut at = [8u8; NREGS];
    let mut j = 0;
    while j < START.len() {
        at[START[j]] = j as u8;
        j += 1;
    }
    at
};

/// Would [`walk_here`] find the chain clear because its last clear walk,
/// with the table still published, started from the same registers and
/// read the same words? Reads only the stack (no reading section needed).
#[inline]
pub(crate) fn memo_clear(m: &Memo, regs: &[u64; 8], lo: usize, hi: usize, entry: usize) -> bool {
    m.generation != 0
        && m.generation == crate::judgement::ranges::generation()
        && m.stack == (lo, hi, entry)
        && same_start(m.init, &m.regs, regs)
        && m.reads[..m.n].iter().all(|&(a, v)| read(lo, hi, a) == Some(v))
}

/// Does the memo's `a` agree, on the registers in `mask`, with the eight
/// starting registers as `judge_here` captured them (as [`full_regs`]
/// would place them), without building that array: the asm's outputs
/// are spilled word by word, and the array's copy read them back as 16-byte
/// moves, which store forwarding cannot serve (a stall that took a fifth of
/// each `pause()` here).
#[inline]
fn same_start(mut mask: u32, a: &[u64; NREGS], regs: &[u64; 8]) -> bool {
    while mask != 0 {
        let i = mask.trailing_zeros() as usize;
        let v = match START_AT[i] {
            8 => 0,
            j => regs[j as usize],
        };
        if a[i] != v {
            return false;
        }
        mask &= mask - 1;
    }
    true
}

/// [`walk`] from ordinary code: `regs` are rip, rsp, rbp, rbx, r12-r15 of
/// a point in the running function (`preempt::judge_here`), which must be
/// inside a no-preemption scope. The frames below `entry` are walked. A
/// clear chain is memoised in `memo` if given (see [`Memo`]).
pub(crate) fn walk_here(table: &Table, memo: Option<&mut Memo>, regs: [u64; 8], lo: usize, hi: usize, entry: usize) -> Chain {
    let u = ts().unwind_ctx.get() as *mut Unwinder;
    if u.is_null() {
        return Chain::Unknown;
    }
    // SAFETY: as in `walk`.
    let u = unsafe { &mut *u };
    let full = full_regs(regs);
    let mut reads = Reads::new();
    u.set_busy(true);
    let chain = walk_regs(table, u, full, lo, hi, entry, false, false, Some(&mut reads), &mut ());
    u.set_busy(false);
    let Some(memo) = memo else { return chain };
    memo.generation = 0;
    if chain == (Chain::Clear { trapped: false }) && reads.n <= MEMO_READS {
        let generation = table.generation();
        *memo = Memo { generation, stack: (lo, hi, entry), init: reads.init, regs: full, n: reads.n, reads: reads.words };
    }
    chain
}

#[allow(clippy::too_many_arguments)]
fn walk_regs<O: Observe>(
    table: &Table,
    u: &mut Unwinder,
    mut regs: [u64; NREGS],
    lo: usize,
    hi: usize,
    entry: usize,
    mut first_deferred: bool,
    signal_frame_ends: bool,
    mut reads: Option<&mut Reads>,
    obs: &mut O,
) -> Chain {
    let mut first = true;
    let mut any_deferred = false;
    // The outermost deferred frame's return-address slot and code address.
    let mut patch: Option<(usize, usize)> = None;
    let mut trapped = false;
    // What to answer when the chain cannot be followed further.
    let lost = |any: bool| if any { Chain::Deferred { patch: None, trapped: false } } else { Chain::Unknown };
    // Deep enough for any real recursion within the default 8 MiB stack of
    // main (a frame is at least 16 bytes); the cost is bounded by the
    // handler's retry rule (it never retries sooner than twice its cost).
    let sigreturn = SIGRETURN.load(std::sync::atomic::Ordering::Relaxed);
    for _ in 0..(1 << 19) {
        let sp = regs[RSP] as usize;
        if sp >= entry {
            break;
        }
        let pc = regs[RA] as usize;
        if !first && pc == sigreturn && pc != 0 && signal_frame_ends {
            // Beyond a program handler's frame is the code it interrupted;
            // linger's preemption handler is seen through: the thread is
            // where it interrupted it.
            match preemption_frame(table, lo, hi, sp) {
                Some((r, deferred)) => {
                    regs = r;
                    first = true;
                    first_deferred = deferred;
                    continue;
                }
                None => break,
            }
        }
        if !first && pc == sigreturn && pc != 0 {
            // The frame above is a signal handler's (the program's, run on
            // the function's stack): never stopped inside it, where the
            // thread's mask is the handler's (the caller would get it), nor
            // trapped; the timer tries again once `rt_sigreturn` is done.
            return Chain::Deferred { patch: None, trapped };
        }
        // A return address points after its call: look up the call itself.
        let Some(at) = (if first { Some(pc) } else { pc.checked_sub(1) }) else { return lost(any_deferred) };
        let (inlined, step) = u.step(table, at);
        let through = inlined && obs.through_inlined(at);
        if inlined && !through {
            // Inside a deferred function that was inlined into this frame's
            // (`inlined.rs`): no frame of its own to trap at its return, and
            // a trap at this frame's return may come much later or never.
            // The timer tries again; inlined code is short.
            return Chain::Deferred { patch: None, trapped };
        }
        if let Some(r) = reads.as_deref_mut() {
            r.depend(RA, regs[RA]);
        }
        let (deferred, cfa_reg, cfa_off, rules) = match step {
            Step::Rules { deferred, cfa_reg, cfa_off, rules } => (deferred, cfa_reg, cfa_off, rules),
            Step::Outermost => break,
            Step::Unknown { deferred } => return lost(any_deferred || if first { first_deferred } else { deferred }),
        };
        let deferred = through || if first { first_deferred } else { deferred };
        obs.frame(at, deferred);
        let Some(cfa) = regs[cfa_reg as usize].checked_add_signed(cfa_off) else { return lost(any_deferred || deferred) };
        if let Some(r) = reads.as_deref_mut() {
            r.depend(cfa_reg as usize, regs[cfa_reg as usize]);
            r.step(&rules, cfa);
        }
        let mut next = regs;
        let mut ra_slot = None;
        for (i, rule) in rules.iter().enumerate() {
            next[i] = match *rule {
                Rule::Same => regs[i],
                Rule::Offset(o) => {
                    let Some(a) = cfa.checked_add_signed(o) else { return lost(any_deferred || deferred) };
                    if i == RA {
                        ra_slot = Some(a as usize);
                    }
                    match read(lo, hi, a) {
                        Some(w) => w,
                        None => return lost(any_deferred || deferred),
                    }
                }
                Rule::ValOffset(o) => match cfa.checked_add_signed(o) {
                    Some(v) => v,
                    None => return lost(any_deferred || deferred),
                },
                Rule::Register(r) => regs[r as usize],
                Rule::Constant(c) => c,
            };
        }
        next[RSP] = cfa;
        if let Some(real) = crate::judgement::return_trap::original(next[RA] as usize) {
            next[RA] = real as u64;
            trapped = true;
        }
        if deferred {
            any_deferred = true;
            patch = ra_slot.map(|s| (s, at));
        }
        if cfa as usize <= sp {
            return lost(any_deferred); // not moving up the stack: corrupt or unusual
        }
        regs = next;
        first = false;
    }
    obs.complete();
    if !any_deferred {
        return Chain::Clear { trapped };
    }
    Chain::Deferred { patch: if trapped { None } else { patch }, trapped }
}

/// Size of the kernel's `struct ucontext` on x86-64, which the `siginfo` of
/// a signal frame follows.
const KERNEL_UCONTEXT: usize = 304;

/// At a signal frame (`sp`: where its handler returned to the `rt_sigreturn`
/// stub, the kernel's ucontext), if the signal is the preemption signal:
/// the registers it interrupted, and whether that code is deferred.
fn preemption_frame(table: &Table, lo: usize, hi: usize, sp: usize) -> Option<([u64; NREGS], bool)> {
    let signo = crate::machine::signal::number();
    let end = sp.checked_add(std::mem::size_of::<libc::ucontext_t>().max(KERNEL_UCONTEXT + 8))?;
    if signo == 0 || sp < lo || end > hi || read(lo, hi, (sp + KERNEL_UCONTEXT) as u64)? as u32 as i32 != signo {
        return None;
    }
    // SAFETY: [sp, end) lies on the stack being walked, mapped; the kernel's
    // ucontext starts there and its registers are laid out as glibc's.
    let regs = regs_from(unsafe { &*(sp as *const libc::ucontext_t) });
    Some((regs, table.is_deferred(regs[RA] as usize)))
}

/// The entry address of the function whose code contains `pc`, from its
/// frame description.
pub(crate) fn function_start(table: &Table, pc: usize) -> Option<usize> {
    let s = sections(table.unwind_object(pc)?)?;
    let fde = s.hdr.table()?.fde_for_address(&s.eh_frame, &s.bases, pc as u64, EhFrame::cie_from_offset).ok()?;
    Some(fde.initial_address() as usize)
}

/// The CFI row of `pc` in `obj`.
fn row_for<'c>(obj: &Object, ctx: &'c mut Ctx, pc: u64) -> Option<&'c UnwindTableRow<usize, Fixed>> {
    let s = sections(obj)?;
    let table = s.hdr.table()?;
    table.unwind_info_for_address(&s.eh_frame, &s.bases, ctx, pc, EhFrame::cie_from_offset).ok()
}

/// An unwind context for tests elsewhere in the crate.
#[cfg(test)]
pub(crate) fn test_context() -> Ctx {
    Ctx::new_in()
}

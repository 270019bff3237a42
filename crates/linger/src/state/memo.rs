//! The memo of a function's last clear walk (its behaviour is `unwind`'s):
//! a type of the per-thread state, defined below it.

/// Registers a walk starts from (DWARF numbering).
pub(crate) const NREGS: usize = crate::base::arch::DWARF_REGS;
/// Stack words a memoised walk may have read.
pub(crate) const MEMO_READS: usize = 24;

/// The last walk by `unwind::walk_here` that found a function's chain clear: its
/// starting registers and every stack word it read. A walk is a function of
/// those (and of the table), so a walk from the same registers over the same
/// words would find the same: a `pause()` in a loop compares a few words
/// instead of walking (a walk costs it about 130 ns, the whole pause about
/// 25). The comparison reads only the stack, so it needs no reading section
/// of the table: it holds while the table it used is still the published
/// one. Kept per function (in its `Frame`), not per thread: a thread that
/// takes turns among many functions (an async runtime's worker, each task a
/// function) would otherwise miss every time.
#[derive(Clone, Copy)]
pub(crate) struct Memo {
    /// The generation of the table it used; 0: no memo.
    pub(crate) generation: u64,
    pub(crate) stack: (usize, usize, usize),
    /// The starting registers the outcome depended on (by DWARF number).
    pub(crate) init: u32,
    pub(crate) regs: [u64; NREGS],
    pub(crate) n: usize,
    pub(crate) reads: [(u64, u64); MEMO_READS],
}

impl Memo {
    /// No memo.
    pub(crate) const EMPTY: Memo = Memo { generation: 0, stack: (0, 0, 0), init: 0, regs: [0; NREGS], n: 0, reads: [(0, 0); MEMO_READS] };
}

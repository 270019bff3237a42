//! x86-64 specifics: the thread pointer's words (`fs`-relative loads and
//! stores), and the signal frame's general-purpose register slots by the
//! decoder's register names (what trap-and-redirect rewrites). `lib.rs`
//! refuses to build on any other architecture. The dispatch stubs
//! (`dispatch.rs`) and the instruction emulation of trap-and-redirect
//! (`trap.rs`, on iced-x86's decoder) are x86-64 code too and stay with the
//! symbols and tables they use.

use iced_x86::Register;

/// The word at `off` bytes from the thread pointer (the `fs` base; static
/// TLS lies below it, the thread descriptor above).
///
/// # Safety
/// `off` is the offset of a word of this thread's static TLS or thread
/// descriptor.
#[inline(always)]
pub unsafe fn fs_word(off: isize) -> usize {
    let v: usize;
    // SAFETY: per the contract.
    unsafe { core::arch::asm!("mov {v}, qword ptr fs:[{o}]", o = in(reg) off, v = out(reg) v, options(nostack, readonly, preserves_flags)) };
    v
}

/// Stores `new` in the word at `off` bytes from the thread pointer and
/// returns what it held. Not atomic with respect to signals: for words only
/// this thread writes, which a handler that changes them puts back before it
/// returns.
///
/// # Safety
/// As [`fs_word`], and `new` is a value the word may hold.
#[inline(always)]
pub unsafe fn swap_fs_word(off: isize, new: usize) -> usize {
    let old: usize;
    // SAFETY: per the contract.
    unsafe {
        core::arch::asm!(
            "mov {old}, qword ptr fs:[{o}]",
            "mov qword ptr fs:[{o}], {new}",
            o = in(reg) off, new = in(reg) new, old = out(reg) old,
            options(nostack, preserves_flags),
        )
    };
    old
}

pub(crate) type Gregs = [libc::greg_t; 23];
pub(crate) fn greg(g: &Gregs, r: libc::c_int) -> Option<usize> {
    g.get(usize::try_from(r).ok()?).map(|&v| v as usize)
}

/// The `gregs` index of a 64-bit general-purpose register.
pub(crate) fn slot_of(r: Register) -> Option<libc::c_int> {
    Some(match r {
        Register::RAX => libc::REG_RAX,
        Register::RCX => libc::REG_RCX,
        Register::RDX => libc::REG_RDX,
        Register::RBX => libc::REG_RBX,
        Register::RBP => libc::REG_RBP,
        Register::RSI => libc::REG_RSI,
        Register::RDI => libc::REG_RDI,
        Register::R8 => libc::REG_R8,
        Register::R9 => libc::REG_R9,
        Register::R10 => libc::REG_R10,
        Register::R11 => libc::REG_R11,
        Register::R12 => libc::REG_R12,
        Register::R13 => libc::REG_R13,
        Register::R14 => libc::REG_R14,
        Register::R15 => libc::REG_R15,
        Register::RSP => libc::REG_RSP,
        _ => return None,
    })
}

//! x86-64 specifics of libas-safe, in one place: the stack pointer, which
//! Rust has no word for. `lib.rs` refuses to build on any other
//! architecture; a port gives this function its own body.

/// The stack pointer where it is inlined.
#[inline(always)]
pub(crate) fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads rsp into a register, no side effects.
    unsafe { std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

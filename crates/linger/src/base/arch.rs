//! x86-64 specifics, in one place: the signal frame's register slots, the
//! DWARF register numbering the walker uses, the instructions Rust has no
//! word for (the stack pointer, a stack load the sanitizers must not see,
//! the FP control registers, a raw `rt_sigprocmask`), and the length of
//! `syscall`. `lib.rs` refuses to build on any other architecture.
//!
//! Three pieces of assembly stay with the code whose symbols they name, as
//! one block each: the return trap's stubs and trampoline
//! (`judgement/return_trap.rs`), a function's base frame that `pthread_exit`
//! unwinds to (`machine/exit.rs`), and the `execl` family's entry
//! trampolines (`interpose/exec.rs`). A port adds its own beside each.

use libc::ucontext_t;

/// The signal frame's slots (indices into `uc_mcontext.gregs`).
pub(crate) const REG_PC: usize = libc::REG_RIP as usize;
pub(crate) const REG_SP: usize = libc::REG_RSP as usize;
pub(crate) const REG_FP: usize = libc::REG_RBP as usize;
/// A system call's number in, its result out.
pub(crate) const REG_RET: usize = libc::REG_RAX as usize;
/// A call's and a system call's first and second arguments.
pub(crate) const REG_ARG1: usize = libc::REG_RDI as usize;
pub(crate) const REG_ARG2: usize = libc::REG_RSI as usize;

/// The `syscall` instruction, and its length (a stop at a system call
/// resumes after it).
pub(crate) const SYSCALL: [u8; 2] = [0x0F, 0x05];
pub(crate) const SYSCALL_LEN: usize = SYSCALL.len();

/// Registers in the DWARF numbering of the x86-64 psABI (rax, rdx, rcx,
/// rbx, rsi, rdi, rbp, rsp, r8-r15, and the return address column).
pub(crate) const DWARF_REGS: usize = 17;
/// DWARF numbers of the stack pointer and the return address column.
pub(crate) const DWARF_SP: usize = 7;
pub(crate) const DWARF_RA: usize = 16;

/// The interrupted registers in DWARF order, the return address column
/// holding the program counter.
pub(crate) fn dwarf_regs(uc: &ucontext_t) -> [u64; DWARF_REGS] {
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

/// Current stack pointer.
#[inline(always)]
pub(crate) fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads rsp into a register, no side effects.
    unsafe { std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// Loads the word at `a` with an instruction of our own: any word of a live
/// stack, padding and a sanitizer's redzones between locals included,
/// which AddressSanitizer would report if the load were the compiler's.
///
/// # Safety
/// `a` is an 8-byte aligned address of mapped, readable memory.
#[inline(always)]
pub(crate) unsafe fn load_word(a: usize) -> usize {
    let w: usize;
    // SAFETY: by the caller: a readable, aligned word; the asm only loads it.
    unsafe { std::arch::asm!("mov {w}, qword ptr [{a}]", a = in(reg) a, w = out(reg) w, options(nostack, preserves_flags, readonly)) };
    w
}

/// MXCSR and the x87 control word, read.
#[inline(always)]
pub(crate) fn fp_control() -> (u32, u16) {
    let (mut mxcsr, mut fcw) = (0u32, 0u16);
    // SAFETY: stmxcsr/fnstcw only store the control registers to our locals.
    unsafe {
        std::arch::asm!(
            "stmxcsr [{m}]",
            "fnstcw [{f}]",
            m = in(reg) &mut mxcsr,
            f = in(reg) &mut fcw,
            options(nostack, preserves_flags)
        );
    }
    (mxcsr, fcw)
}

/// Loads MXCSR.
///
/// # Safety
/// `m` is a valid MXCSR value (no reserved bit set), as `fp_control` reads.
#[inline(always)]
pub(crate) unsafe fn load_mxcsr(m: u32) {
    // SAFETY: by the caller.
    unsafe { std::arch::asm!("ldmxcsr [{m}]", m = in(reg) &m, options(nostack, preserves_flags, readonly)) };
}

/// Loads the x87 control word.
#[inline(always)]
pub(crate) fn load_fcw(f: u16) {
    // SAFETY: any 16-bit value is a control word (reserved bits are
    // ignored); an exception it unmasks is raised only by a later x87
    // instruction with its flag set.
    unsafe { std::arch::asm!("fldcw [{f}]", f = in(reg) &f, options(nostack, preserves_flags, readonly)) };
}

/// `rt_sigprocmask(how, set, old, 8)` as the system call itself, not
/// libc's wrapper: a signal the change unblocks is delivered here, in
/// linger's code, not inside libc (where the hold mode would hold it).
///
/// # Safety
/// `set` is null or points at a readable 8-byte mask, `old` at a
/// writable one.
#[inline(always)]
pub(crate) unsafe fn rt_sigprocmask(how: libc::c_int, set: *const u64, old: *mut u64) -> i64 {
    let r: i64;
    // SAFETY: by the caller; the kernel clobbers only rax, rcx and r11.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_rt_sigprocmask => r,
            in("rdi") how,
            in("rsi") set,
            in("rdx") old,
            in("r10") 8usize,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        )
    };
    r
}

/// The caller's program counter, stack pointer and callee-saved registers
/// (rbp, rbx, r12-r15), for a walk of its own call chain. Always inlined,
/// so they are its function's: the program counter and the stack pointer
/// are read together, with no stack adjustment between them, so the frame
/// description at the one applies to the other.
#[inline(always)]
pub(crate) fn registers_here() -> [u64; 8] {
    let (rip, rsp, rbp, rbx, r12, r13, r14, r15): (u64, u64, u64, u64, u64, u64, u64, u64);
    // SAFETY: only reads registers.
    unsafe {
        std::arch::asm!(
            "lea {rip}, [rip]",
            "mov {rsp}, rsp",
            "mov {rbp}, rbp",
            "mov {rbx}, rbx",
            "mov {r12}, r12",
            "mov {r13}, r13",
            "mov {r14}, r14",
            "mov {r15}, r15",
            rip = out(reg) rip, rsp = out(reg) rsp, rbp = out(reg) rbp, rbx = out(reg) rbx,
            r12 = out(reg) r12, r13 = out(reg) r13, r14 = out(reg) r14, r15 = out(reg) r15,
            options(nomem, nostack, preserves_flags),
        );
    }
    [rip, rsp, rbp, rbx, r12, r13, r14, r15]
}

//! Jumps that restore a signal mask saved earlier: `setcontext`,
//! `swapcontext` (the target's `uc_sigmask`), and `siglongjmp`, `longjmp`,
//! `_longjmp`, `__longjmp_chk` (the mask `sigsetjmp(env, 1)` saved).
//!
//! libc sets these masks with its own system call, past our mask wrappers
//! (`signals::mask_call`): a context made under a full mask, or a `sigsetjmp`
//! taken under one (after such a context), would block the preemption signal
//! for good, and a function sliced at 100 us would then run to its end. So
//! the saved mask loses the preemption signal before the jump, and the
//! thread's shadow bit records whether the program asked for it blocked:
//! mask queries keep reporting what it asked for.
//!
//! The saved mask is edited in place (the jump buffer or context is the
//! program's, and `setcontext` takes it as `const`): a copy on our stack
//! could be overwritten by the jump itself when the target stack overlaps
//! it. A program that reads the mask back out of its own buffer sees the
//! preemption signal missing. `swapcontext` saves the thread's real mask,
//! which never holds the signal: a later switch back reports it unblocked
//! even if the program had blocked it (the shadow bit is per thread, not
//! per context). `sigsetjmp` and `getcontext` return twice and cannot be
//! wrapped; they only save.

use libc::{c_int, sigset_t, ucontext_t};

use crate::base::sys::real;
use crate::machine::signal::preemption_signal;
use crate::state::thread::ts;

/// glibc's `struct __jmp_buf_tag` (x86-64): the saved registers, whether
/// `sigsetjmp` saved the mask, and the mask.
#[repr(C)]
pub struct JmpBufTag {
    regs: [i64; 8],
    mask_was_saved: c_int,
    saved_mask: sigset_t,
}

type JumpFn = unsafe extern "C" fn(*mut JmpBufTag, c_int) -> !;
type SetFn = unsafe extern "C" fn(*const ucontext_t) -> c_int;
type SwapFn = unsafe extern "C" fn(*mut ucontext_t, *const ucontext_t) -> c_int;

fn real_siglongjmp() -> Option<JumpFn> {
    real!("siglongjmp", JumpFn)
}
fn real_longjmp() -> Option<JumpFn> {
    real!("longjmp", JumpFn)
}
fn real_underscore_longjmp() -> Option<JumpFn> {
    real!("_longjmp", JumpFn)
}
fn real_longjmp_chk() -> Option<JumpFn> {
    real!("__longjmp_chk", JumpFn)
}
fn real_setcontext() -> Option<SetFn> {
    real!("setcontext", SetFn)
}
fn real_swapcontext() -> Option<SwapFn> {
    real!("swapcontext", SwapFn)
}

pub(crate) fn prepare() {
    let _ = (real_siglongjmp(), real_longjmp(), real_underscore_longjmp(), real_longjmp_chk());
    let _ = (real_setcontext(), real_swapcontext());
}

/// A mask about to be installed by a jump: record in the shadow bit whether
/// it blocks the preemption signal, and take the signal out of it.
///
/// # Safety
/// `set` points to a valid, writable `sigset_t`.
unsafe fn strip_in_place(set: *mut sigset_t) {
    let signo = preemption_signal();
    if signo == 0 {
        return;
    }
    // SAFETY: per the contract.
    let member = unsafe { libc::sigismember(set, signo) } == 1;
    ts().shadow_blocked.set(member);
    if member {
        // SAFETY: per the contract.
        unsafe { libc::sigdelset(set, signo) };
    }
}

/// # Safety
/// `env` was filled by `setjmp`/`sigsetjmp` in a frame still live.
unsafe fn jump(real: Option<JumpFn>, env: *mut JmpBufTag, val: c_int) -> ! {
    // SAFETY: per the contract, a valid jump buffer.
    unsafe {
        if !env.is_null() && (*env).mask_was_saved != 0 {
            strip_in_place(std::ptr::addr_of_mut!((*env).saved_mask));
        }
    }
    match real {
        // SAFETY: the caller's arguments, unchanged but for the mask.
        Some(f) => unsafe { f(env, val) },
        None => std::process::abort(),
    }
}

/// The `longjmp` family: each strips the saved mask, then jumps with libc's.
macro_rules! jumps {
    ($($(#[$doc:meta])* $name:ident => $real:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// Same contract as C `longjmp`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(env: *mut JmpBufTag, val: c_int) -> ! {
            // SAFETY: per the contract.
            unsafe { jump($real(), env, val) }
        }
    )*};
}

jumps! {
    /// POSIX `siglongjmp`.
    siglongjmp => real_siglongjmp;
    /// C `longjmp`.
    longjmp => real_longjmp;
    /// POSIX `_longjmp`.
    _longjmp => real_underscore_longjmp;
    /// The fortified `longjmp` (`_FORTIFY_SOURCE`).
    __longjmp_chk => real_longjmp_chk;
}

/// # Safety
/// Same contract as `setcontext`.
#[no_mangle]
pub unsafe extern "C" fn setcontext(ucp: *const ucontext_t) -> c_int {
    let Some(real) = real_setcontext() else {
        crate::base::sys::set_errno(libc::ENOSYS);
        return -1;
    };
    if !ucp.is_null() {
        // SAFETY: a valid context, in the program's writable memory.
        unsafe { strip_in_place(std::ptr::addr_of!((*ucp).uc_sigmask) as *mut sigset_t) };
    }
    // SAFETY: the caller's context, unchanged but for the mask.
    unsafe { real(ucp) }
}

/// # Safety
/// Same contract as `swapcontext`.
#[no_mangle]
pub unsafe extern "C" fn swapcontext(oucp: *mut ucontext_t, ucp: *const ucontext_t) -> c_int {
    let Some(real) = real_swapcontext() else {
        crate::base::sys::set_errno(libc::ENOSYS);
        return -1;
    };
    if !ucp.is_null() {
        // SAFETY: as in `setcontext`.
        unsafe { strip_in_place(std::ptr::addr_of!((*ucp).uc_sigmask) as *mut sigset_t) };
    }
    // SAFETY: the caller's contexts, unchanged but for the mask. Returns
    // when something switches back to `oucp` (into this frame, which the
    // saved context keeps live).
    unsafe { real(oucp, ucp) }
}

//! Context switching. The switch itself is corosensei's (per-architecture
//! assembly, unwinding metadata, forced unwind); this file adds what a switch
//! *out of a signal handler* needs on top: the floating-point control state.
//!
//! The kernel enters a signal handler with a default MXCSR and x87 control
//! word. When the handler switches to the caller instead of returning, the
//! caller would continue with those defaults (losing its rounding mode, for
//! example). Both registers are callee-saved in the SysV ABI, so every switch
//! point saves them before and restores them after.

use corosensei::{Coroutine, Yielder};

use crate::stack::PooledStack;
use crate::thread::Suspend;

/// What a coroutine returns to the runtime. The value itself is stored in the
/// continuation (so this type, and the coroutine type, do not depend on it).
pub(crate) enum Outcome {
    Value,
    Panicked(Box<dyn std::any::Any + Send + 'static>),
    Overflowed,
}

pub(crate) type Co = Coroutine<(), Suspend, Outcome, PooledStack>;
pub(crate) type Yield = Yielder<(), Suspend>;

/// MXCSR and x87 control word.
#[derive(Clone, Copy)]
pub(crate) struct FpControl {
    mxcsr: u32,
    fcw: u16,
}

impl FpControl {
    #[inline(always)]
    pub(crate) fn save() -> FpControl {
        let mut c = FpControl { mxcsr: 0, fcw: 0 };
        // SAFETY: stmxcsr/fnstcw only store the control registers to our locals.
        unsafe {
            std::arch::asm!(
                "stmxcsr [{m}]",
                "fnstcw [{f}]",
                m = in(reg) &mut c.mxcsr,
                f = in(reg) &mut c.fcw,
                options(nostack, preserves_flags)
            );
        }
        c
    }

    /// Restores the saved state unless it is already in place (loading the
    /// x87 control word is slow; storing it is cheap).
    #[inline(always)]
    pub(crate) fn restore_if_changed(self) {
        let now = FpControl::save();
        if now.mxcsr != self.mxcsr || now.fcw != self.fcw {
            self.restore();
        }
    }

    #[inline(always)]
    pub(crate) fn restore(self) {
        // SAFETY: the values were produced by `save`, so they are valid control words.
        unsafe {
            std::arch::asm!(
                "ldmxcsr [{m}]",
                "fldcw [{f}]",
                m = in(reg) &self.mxcsr,
                f = in(reg) &self.fcw,
                options(nostack, preserves_flags, readonly)
            );
        }
    }
}

/// Current stack pointer.
#[inline(always)]
pub(crate) fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads rsp into a register, no side effects.
    unsafe { std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// Suspends the running coroutine through its yielder.
///
/// # Safety
/// `y` must be the yielder of the coroutine currently running on this stack.
#[inline]
pub(crate) unsafe fn suspend(y: *const (), why: Suspend) {
    // SAFETY: per the contract, `y` is the live yielder of this coroutine.
    let y = unsafe { &*(y as *const Yield) };
    y.suspend(why);
}

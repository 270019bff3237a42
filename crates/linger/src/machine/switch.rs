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

pub(crate) use crate::state::outcome::Outcome;
use crate::machine::stack::PooledStack;
use crate::state::thread::{Suspend, ThreadState};

/// A resume hands the function the state of the thread that resumed it, so
/// that it need not look it up again (a function may be resumed on another
/// thread than the one it stopped on).
pub(crate) type Co = Coroutine<&'static ThreadState, Suspend, Outcome, PooledStack>;
pub(crate) type Yield = Yielder<&'static ThreadState, Suspend>;

/// MXCSR and x87 control word.
///
/// The ABI makes their control bits callee-saved: `resume` must give the
/// caller its own back, and `pause` the function its own, whatever the
/// other side set meanwhile; and the kernel enters the preemption handler
/// with the default state. Reading them is slow (`stmxcsr` is microcoded:
/// storing both took a quarter of a resume here), so each switch reads the
/// state once, on the side it leaves, and compares it with the other side's
/// recorded state (`ThreadState::fp_caller`, `Frame::fp_own`), loading only what
/// differs: a read per switch, where a save before and a check after each
/// switch took two.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct FpControl {
    mxcsr: u32,
    fcw: u16,
}

/// MXCSR's exception status flags (bits 0-5). The ABI makes them
/// caller-saved, unlike the control bits, and any inexact floating-point
/// operation sets one: they travel with the flow of control and are neither
/// compared nor restored here (otherwise nearly every switch would reload
/// both registers, which costs more than the rest of the switch).
const MXCSR_FLAGS: u32 = 0x3f;

impl FpControl {
    /// No state recorded (see `Frame::fp_own`); `bits` never gives it.
    pub(crate) const NONE: u64 = crate::state::thread::FP_NONE;

    /// As one word, for the per-function and per-thread records.
    #[inline(always)]
    pub(crate) fn bits(self) -> u64 {
        u64::from(self.mxcsr) | u64::from(self.fcw) << 32
    }

    /// The state `bits` made, or None for `NONE`.
    #[inline(always)]
    pub(crate) fn from_bits(b: u64) -> Option<FpControl> {
        (b != Self::NONE).then_some(FpControl { mxcsr: b as u32, fcw: (b >> 32) as u16 })
    }

    #[inline(always)]
    pub(crate) fn save() -> FpControl {
        let (mxcsr, fcw) = crate::base::arch::fp_control();
        FpControl { mxcsr, fcw }
    }

    /// Restores the saved control state where it is not already in place.
    #[inline(always)]
    pub(crate) fn restore_if_changed(self) {
        self.load_over(FpControl::save());
    }

    /// Makes this the control state where `now` (the state in place, read
    /// just before) differs, keeping the exception flags in place.
    #[inline(always)]
    pub(crate) fn load_over(self, now: FpControl) {
        if (now.mxcsr ^ self.mxcsr) & !MXCSR_FLAGS != 0 {
            let m = (self.mxcsr & !MXCSR_FLAGS) | (now.mxcsr & MXCSR_FLAGS);
            // SAFETY: control bits produced by `stmxcsr` with the current
            // flags: a valid MXCSR value.
            unsafe { crate::base::arch::load_mxcsr(m) };
        }
        if now.fcw != self.fcw {
            crate::base::arch::load_fcw(self.fcw);
        }
    }
}


/// Runs `f` on the stack of the thread that last resumed the running
/// coroutine, below the point where that thread waits for it to switch
/// back. For stack-hungry work done on behalf of the coroutine (walking its
/// call chain takes several KiB): on the coroutine's own stack it would
/// touch pages that then stay resident for as long as the coroutine lives,
/// which for a parked green thread is most of the memory it costs.
///
/// # Safety
/// `y` must be the yielder of the coroutine currently running on this stack.
#[inline]
pub(crate) unsafe fn on_resumer_stack<R>(y: *const (), f: impl FnOnce() -> R) -> R {
    /// corosensei asks for `Send` so that the yielder cannot be smuggled to
    /// the parent stack; `f` runs on this same thread and does not use it.
    struct OnThisThread<F>(F);
    // SAFETY: see the type: nothing moves to another thread.
    unsafe impl<F> Send for OnThisThread<F> {}
    impl<F> OnThisThread<F> {
        fn call<R>(self) -> R
        where
            F: FnOnce() -> R,
        {
            (self.0)()
        }
    }
    let f = OnThisThread(f);
    // SAFETY: per the contract, `y` is the live yielder of this coroutine.
    let y = unsafe { &*(y as *const Yield) };
    y.on_parent_stack(move || f.call())
}

/// Suspends the running coroutine through its yielder. Returns when it is
/// resumed, with the state of the thread that resumed it.
///
/// # Safety
/// `y` must be the yielder of the coroutine currently running on this stack.
#[inline]
pub(crate) unsafe fn suspend(y: *const (), why: Suspend) -> &'static ThreadState {
    // SAFETY: per the contract, `y` is the live yielder of this coroutine.
    let y = unsafe { &*(y as *const Yield) };
    y.suspend(why)
}
